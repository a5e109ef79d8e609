/* SPDX-License-Identifier: MIT */
/*
 * IP over the fabric: the daemon (see include/ntbx/ipof.h).
 *
 * Threads of a daemon:
 *   - the caller's thread moves the data, both directions, in one loop
 *     (data_loop): it receives what every peer's queue pair holds and
 *     writes it into the TUN device, then reads packets from the TUN
 *     device, classifies each, finds the destination node (route cache
 *     over the fabric's recorded addresses) and sends it as one message on
 *     that peer's queue pair (with two nodes read straight into room
 *     reserved in the peer's memory, tx_direct; nonblocking; a packet
 *     whose ring is full is
 *     kept and retried while receiving goes on, and dropped after 100 ms:
 *     a NIC's full transmit queue).  Idle, it polls for as long as the
 *     wait policy says (util.h, ntbx_spin_begin), then
 *     sleeps in ppoll() on the TUN device and the doorbell event FIFO;
 *   - one thread per peer node owns that pair's set-up: it makes the
 *     endpoints, publishes them, connects to the peer's, posts IPOF_NPOST
 *     receive buffers and hands the queue pairs to the data thread; every
 *     200 ms it checks the peer, and when the peer dies, closes or
 *     restarts (or the data thread reports the pair failed) it tears the
 *     pair down (one log line) and makes a new one;
 *   - on a ring, the queue-pair forwarder's transfer thread.
 *
 * Pairing rule (robust to restarts): our entry for peer P is
 * {our endpoint, P's epoch it was made for, the cookie of P's endpoint we
 * connected to (0 before)}.  We connect to P's entry only if it was made
 * for our current epoch, P's endpoint is of P's current epoch, and it is
 * either unconnected or connected to our current endpoint.  A connected
 * pair is torn down when the queue pair fails or ends, when P's epoch
 * changes, or when P's entry no longer names the endpoint we connected to.
 *
 * Files: this one starts and stops the daemon and reads its status;
 * peer.c owns the published entries and the peer threads, data.c routing
 * and the data thread; daemon.h the state they share.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dev/dev.h"
#include "ipof/daemon.h"
#include "util/util.h"

static const char *drop_names[NTBX_IPOF_NDROPS] = {
	"no_route", "broadcast", "multicast", "peer_down", "peer_full",
	"bad_packet", "tun_write", "self",
};

const char *ntbx_ipof_drop_name(int r)
{
	return r >= 0 && r < NTBX_IPOF_NDROPS ? drop_names[r] : "?";
}

__attribute__((format(printf, 2, 3)))
void ipof_logf(struct ipof *d, const char *fmt, ...)
{
	if (!d->log)
		return;
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm);
	pthread_mutex_lock(&d->logmu);
	fprintf(d->log, "%02d:%02d:%02d.%03ld ipof node %d: %s\n", tm.tm_hour,
	        tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, d->node, msg);
	fflush(d->log);
	pthread_mutex_unlock(&d->logmu);
}

/* ---------------------------------------------------------------- run */

static uint64_t netns_ino(void)
{
	struct stat st;
	return stat("/proc/self/ns/net", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* Start a thread with the termination signals blocked, so they reach
 * the caller's (TUN-reading) thread. */
static int start_blocked(pthread_t *th, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int rc = pthread_create(th, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return -rc;
}

struct fwd_arg { struct ntbx_fabric *f; int rc; };
static void *fwd_start(void *arg)
{
	struct fwd_arg *a = arg;
	a->rc = ntbx_qp_forwarder_start(a->f, 1);
	return NULL;
}

int ntbx_ipof_run(const struct ntbx_ipof_opts *o)
{
	if (!o || !o->fabric || !o->stop)
		return ntbx_err(EINVAL, "ipof: no fabric or stop flag given");
	int mtu = o->mtu ? o->mtu : NTBX_IPOF_DEFAULT_MTU;
	if (mtu < NTBX_IPOF_MIN_MTU || mtu > NTBX_IPOF_MAX_MTU)
		return ntbx_err(EINVAL, "ipof: MTU %d out of range %d..%d", mtu,
		                NTBX_IPOF_MIN_MTU, NTBX_IPOF_MAX_MTU);
	int fam = 0, pfx = 0;
	uint8_t addr[16] = { 0 };
	if (o->addr && ipof_parse_cidr(o->addr, &fam, addr, &pfx) < 0)
		return ntbx_err(EINVAL, "ipof: bad address '%s' (want A.B.C.D/P "
		                "or an IPv6 address/P)", o->addr);
	struct ipof *d = calloc(1, sizeof *d);
	if (!d)
		return -ENOMEM;
	d->log = o->log;
	d->tun = -1;
	d->kick = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (d->kick < 0) {
		int e = errno;
		free(d);
		return ntbx_err(e, "ipof: eventfd: %s", strerror(e));
	}
	pthread_mutex_init(&d->logmu, NULL);
	int rc = ipof_tun_open(o->ifname ? o->ifname : NTBX_IPOF_DEFAULT_IF,
	                       d->ifname);
	if (rc < 0)
		goto out_free;
	d->tun = rc;
	/* the data thread reads it in turns with the queue pairs */
	if (fcntl(d->tun, F_SETFL, fcntl(d->tun, F_GETFL) | O_NONBLOCK) < 0) {
		rc = ntbx_err(errno, "ipof: %s: %s", d->ifname, strerror(errno));
		goto out_tun;
	}
	rc = ipof_tun_config(d->ifname, mtu, fam, addr, pfx);
	if (rc < 0)
		goto out_tun;
	if (fam == AF_INET && pfx < 31) {
		uint32_t a4;
		memcpy(&a4, addr, 4);
		d->bcast4 = a4 | htonl(0xffffffffu >> pfx);
	}
	rc = ntbx_fabric_join(o->fabric, o->node, &d->f);
	if (rc < 0)
		goto out_tun;
	d->dev = ntbx_fabric_dev(d->f);
	d->node = ntbx_fabric_node(d->f);
	d->nodes = ntbx_fabric_nodes(d->f);
	d->epoch = ntbx_node_epoch(d->dev, d->node);
	d->mem = ntbx_mem_base(d->dev);
	d->mem_size = ntbx_mem_size(d->dev);
	ntbx_fabric_dir(o->fabric, d->dir, sizeof d->dir);
	rc = ntbx_fabric_record_addrs(d->f);
	if (rc < 0)
		goto out_leave;
	ntbx_mem_reap(d->dev);
	int64_t off = ntbx_mem_alloc(d->dev, sizeof(struct ipof_block), 4096,
	                             IPOF_TAG, 1);
	if (off < 0) {
		rc = ntbx_err(ENOSPC, "ipof: node memory full on fabric '%s'",
		              o->fabric);
		goto out_leave;
	}
	d->blk_off = off;
	d->blk = (struct ipof_block *)(d->mem + off);
	memset(d->blk, 0, sizeof *d->blk);
	d->blk->hdr.version = IPOF_VERSION;
	d->blk->hdr.node = (uint32_t)d->node;
	d->blk->hdr.epoch = d->epoch;
	d->blk->hdr.pid = getpid();
	int myslot = -1;
	uint32_t mygen = 0;
	ntbx_dev_self_id(d->dev, &myslot, &mygen);
	d->blk->hdr.slot = myslot;
	d->blk->hdr.slot_gen = mygen;
	d->blk->hdr.mtu = mtu;
	d->blk->hdr.running = 1;
	d->blk->hdr.netns = netns_ino();
	snprintf(d->blk->hdr.ifname, sizeof d->blk->hdr.ifname, "%s", d->ifname);
	if (o->addr)
		snprintf(d->blk->hdr.addr, sizeof d->blk->hdr.addr, "%s", o->addr);
	__atomic_store_n(&d->blk->hdr.magic, IPOF_MAGIC, __ATOMIC_RELEASE);

	if (ntbx_fabric_topology(d->f) == NTBX_TOPO_RING) {
		/* the forwarder's threads must not take our signals */
		pthread_t th;
		struct fwd_arg fa = { d->f, 0 };
		if (start_blocked(&th, fwd_start, &fa) == 0)
			pthread_join(th, NULL);
		else
			fa.rc = -EAGAIN;
		if (fa.rc < 0) {
			rc = fa.rc;
			goto out_blk;
		}
		if (fa.rc == 0)
			ipof_logf(d, "another process of this node forwards for the "
			      "ring");
	}
	rc = ipof_net_start(d->dir, d->node, d->blk, &d->net);
	if (rc < 0)
		goto out_threads;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	for (int n = 0; n < d->nodes; n++) {
		struct peer *p = &d->peer[n];
		p->d = d;
		p->node = n;
		pthread_rwlock_init(&p->lk, NULL);
		pthread_mutex_init(&p->mu, NULL);
		pthread_cond_init(&p->cv, &ca);
		if (n == d->node)
			continue;
		p->bufs = ntbx_mem_alloc(d->dev, IPOF_NPOST * IPOF_BUF, 4096,
		                         "ntbx-ipof-rx", 1);
		if (p->bufs < 0) {
			rc = ntbx_err(ENOSPC, "ipof: node memory full on fabric "
			              "'%s' (receive buffers)", o->fabric);
			goto out_threads;
		}
		rc = d->net ? 0 : ntbx_dev_observe(d->dir, n, &p->obs);
		if (rc < 0)
			goto out_threads;
		rc = start_blocked(&p->th, ipof_peer_main, p);
		if (rc < 0) {
			rc = ntbx_err(-rc, "ipof: cannot start a thread");
			goto out_threads;
		}
		p->started = 1;
	}
	pthread_condattr_destroy(&ca);
	ipof_logf(d, "%s up: mtu %d, address %s, fabric '%s' (%s, %d nodes), "
	      "epoch %u", d->ifname, mtu, o->addr ? o->addr : "none",
	      o->fabric, ntbx_topology_name(ntbx_fabric_topology(d->f)),
	      d->nodes, d->epoch);
	if (o->ready)
		o->ready(o->ready_arg, d->ifname, d->node);

	rc = ipof_data_loop(d, o->stop);
	ipof_logf(d, "%s going down", d->ifname);

out_threads:
	d->stop_threads = 1;
	__atomic_store_n(&d->blk->hdr.running, 0, __ATOMIC_RELEASE);
	for (int n = 0; n < d->nodes; n++) {
		struct peer *p = &d->peer[n];
		if (p->started) {
			pthread_mutex_lock(&p->mu);
			pthread_cond_signal(&p->cv);
			pthread_mutex_unlock(&p->mu);
			pthread_join(p->th, NULL);
		}
		if (p->obs)
			ntbx_dev_close(p->obs);
		if (p->bufs > 0)
			ntbx_mem_free(d->dev, p->bufs);
		if (p->d) {
			pthread_rwlock_destroy(&p->lk);
			pthread_mutex_destroy(&p->mu);
			pthread_cond_destroy(&p->cv);
		}
	}
	ipof_net_stop(d->net);
	ntbx_qp_forwarder_stop(d->f);
out_blk:
	__atomic_store_n(&d->blk->hdr.magic, 0, __ATOMIC_RELEASE);
	ntbx_mem_free(d->dev, d->blk_off);
out_leave:
	ntbx_fabric_leave(d->f);
out_tun:
	close(d->tun);
out_free:
	close(d->kick);
	pthread_mutex_destroy(&d->logmu);
	free(d);
	return rc;
}

/* ------------------------------------------------------------- status */

int ntbx_ipof_status(const char *fabric, int node, struct ntbx_ipof_status *st)
{
	char dir[PATH_MAX];
	int rc = ntbx_fabric_dir(fabric, dir, sizeof dir);
	if (rc < 0)
		return rc;
	struct ntbx_dev *obs;
	rc = ntbx_dev_observe(dir, node, &obs);
	if (rc < 0)
		return rc;
	memset(st, 0, sizeof *st);
	struct ipof_block *b = ntbx_node_alive(obs, node) ?
	                       ipof_find_block(obs, node) : NULL;
	if (!b) {
		ntbx_dev_close(obs);
		return -ESRCH;
	}
	st->node = node;
	st->pid = b->hdr.pid;
	memcpy(st->ifname, b->hdr.ifname, sizeof st->ifname);
	st->ifname[sizeof st->ifname - 1] = 0;
	memcpy(st->addr, b->hdr.addr, sizeof st->addr);
	st->addr[sizeof st->addr - 1] = 0;
	st->mtu = b->hdr.mtu;
	st->netns = b->hdr.netns;
	for (int i = 0; i < NTBX_IPOF_NDROPS; i++)
		st->drops[i] = __atomic_load_n(&b->drops[i], __ATOMIC_RELAXED);
	int nodes = ntbx_dev_node_count(obs);
	for (int n = 0; n < nodes && n < NTBX_MAX_NODES; n++) {
		if (n == node)
			continue;
		const struct ipof_peer_ctr *c = &b->peer[n];
		struct ntbx_ipof_peer_status *ps = &st->peers[st->npeers++];
		ps->node = n;
		ps->state = (int)(__atomic_load_n(&c->state, __ATOMIC_RELAXED) % 3);
		ps->hops = c->hops;
		ps->tx_pkts = __atomic_load_n(&c->tx_pkts, __ATOMIC_RELAXED);
		ps->tx_bytes = __atomic_load_n(&c->tx_bytes, __ATOMIC_RELAXED);
		ps->rx_pkts = __atomic_load_n(&c->rx_pkts, __ATOMIC_RELAXED);
		ps->rx_bytes = __atomic_load_n(&c->rx_bytes, __ATOMIC_RELAXED);
		ps->pushed_bytes = __atomic_load_n(&c->pushed_bytes,
		                                   __ATOMIC_RELAXED);
		ps->connects = __atomic_load_n(&c->connects, __ATOMIC_RELAXED);
		st->tx_pkts += ps->tx_pkts;
		st->tx_bytes += ps->tx_bytes;
		st->rx_pkts += ps->rx_pkts;
		st->rx_bytes += ps->rx_bytes;
	}
	ntbx_dev_close(obs);
	return 0;
}
