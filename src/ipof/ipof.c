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
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "dev/dev.h"
#include "ipof/ipof_int.h"
#include "ntbx/fabric.h"
#include "util/util.h"

static const char *drop_names[NTBX_IPOF_NDROPS] = {
	"no_route", "broadcast", "multicast", "peer_down", "peer_full",
	"bad_packet", "tun_write", "self",
};

const char *ntbx_ipof_drop_name(int r)
{
	return r >= 0 && r < NTBX_IPOF_NDROPS ? drop_names[r] : "?";
}

struct ipof;

struct peer {
	struct ipof *d;
	int node;
	pthread_t th;
	int started;
	pthread_rwlock_t lk;       /* data thread: read; peer thread: write
	                            * to swap txq/rxq */
	/* Two queue pairs per peer, one per direction, so each handle has
	 * exactly one user thread (qp.h allows a reader and a writer per
	 * handle, but ntbx_qp_wait's readiness check touches both sides'
	 * state): txq is used by the transmit thread only (its receive side
	 * stays empty), rxq by this peer's thread only. */
	struct ntbx_qp *txq;       /* connected, or NULL (under lk) */
	struct ntbx_qp *rxq;       /* connected, or NULL (under lk) */
	struct ntbx_qp *ptx, *prx; /* made, published, not yet connected */
	uint32_t pend_epoch;       /* peer epoch they were made for */
	uint64_t my_cookie;        /* our rx endpoint's cookie: the pair's name */
	uint64_t remote_cookie;    /* the peer rx endpoint we send to */
	int64_t bufs;              /* IPOF_NPOST * IPOF_BUF of node memory */
	struct ntbx_dev *obs;      /* observer of the peer's node */
	/* ofi fabric: the peer's interface address (key as route() makes
	 * it: 4 or 6, then the address), set before the pair is up */
	uint8_t addr_key[17];
	int was_up;                /* for one log line per transition */
	int create_err;            /* last create error logged */
	uint64_t pushed_base;      /* pushed bytes of earlier queue pairs */
	/* The data thread reports a failed queue pair here (under mu) and
	 * stops using it; the peer thread tears the pair down and clears it. */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	const char *why;
};

#define RC_SIZE 256
struct rcache {
	uint8_t key[17];
	int node;
	uint64_t until;
};

struct ipof {
	struct ntbx_fabric *f;
	struct ntbx_dev *dev;
	int node, nodes;
	uint32_t epoch;
	int tun;
	char ifname[IFNAMSIZ];
	char dir[PATH_MAX];
	int kick;                  /* eventfd: a peer came up (data thread) */
	struct ipof_block *blk;
	int64_t blk_off;
	uint8_t *mem;
	uint64_t mem_size;
	uint32_t bcast4;
	volatile int stop_threads;
	FILE *log;
	pthread_mutex_t logmu;
	struct rcache rc[RC_SIZE];
	struct ipof_net *net;      /* ofi fabric: entries over TCP */
	struct peer peer[NTBX_MAX_NODES];
};

__attribute__((format(printf, 2, 3)))
static void logf_(struct ipof *d, const char *fmt, ...)
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

static void ctr_add(uint64_t *c, uint64_t v)
{
	__atomic_fetch_add(c, v, __ATOMIC_RELAXED);
}

static void drop(struct ipof *d, int reason)
{
	ctr_add(&d->blk->drops[reason], 1);
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* ----------------------------------------------------- published entry */

static void ep_publish(struct ipof *d, int node, const struct ntbx_qp_addr *tx,
                       const struct ntbx_qp_addr *rx, uint32_t for_epoch,
                       uint64_t connected_to)
{
	struct ipof_ep *e = &d->blk->ep[node];
	uint32_t s = __atomic_load_n(&e->seq, __ATOMIC_RELAXED);
	__atomic_store_n(&e->seq, s | 1u, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (tx && rx) {
		e->tx = *tx;
		e->rx = *rx;
	} else {
		memset(&e->tx, 0, sizeof e->tx);
		memset(&e->rx, 0, sizeof e->rx);
	}
	e->for_epoch = for_epoch;
	e->connected_to = connected_to;
	__atomic_store_n(&e->seq, (s | 1u) + 1u, __ATOMIC_RELEASE);
}

/* The live block of a daemon on the node of observer @obs, or NULL. */
static struct ipof_block *find_block(struct ntbx_dev *obs, int node)
{
	int max = 2048;
	struct ntbx_mem_block *bl = calloc((size_t)max, sizeof *bl);
	if (!bl)
		return NULL;
	int n = ntbx_mem_list(obs, bl, max);
	if (n > max)
		n = max;
	uint8_t *base = ntbx_mem_base(obs);
	uint64_t msz = ntbx_mem_size(obs);
	uint32_t epoch = ntbx_node_epoch(obs, node);
	struct ipof_block *found = NULL;
	for (int i = 0; i < n; i++) {
		if (strncmp(bl[i].tag, IPOF_TAG, sizeof bl[i].tag) != 0)
			continue;
		if (bl[i].off > msz || bl[i].size < sizeof(struct ipof_block) ||
		    msz - bl[i].off < sizeof(struct ipof_block))
			continue;
		struct ipof_block *b = (struct ipof_block *)(base + bl[i].off);
		if (__atomic_load_n(&b->hdr.magic, __ATOMIC_ACQUIRE) != IPOF_MAGIC ||
		    b->hdr.version != IPOF_VERSION ||
		    (int)b->hdr.node != node || b->hdr.epoch != epoch ||
		    !__atomic_load_n(&b->hdr.running, __ATOMIC_ACQUIRE))
			continue;
		/* Its daemon lives: the lock the kernel drops, not a pid
		 * (each field loaded once; any value is safe to ask about). */
		int32_t slot = __atomic_load_n(&b->hdr.slot, __ATOMIC_ACQUIRE);
		uint32_t gen = __atomic_load_n(&b->hdr.slot_gen, __ATOMIC_ACQUIRE);
		if (ntbx_dev_holder_alive(obs, node, slot, gen) <= 0)
			continue;
		found = b;
	}
	free(bl);
	return found;
}

/* Read the peer's entry for us (seqlock).  1 with *e filled, 0 if none. */
int ipof_ep_read(const struct ipof_block *b, int me, struct ipof_ep *out)
{
	const struct ipof_ep *e = &b->ep[me];
	for (int tries = 0; tries < 100; tries++) {
		uint32_t s1 = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
		if (s1 == 0)
			return 0;
		if (s1 & 1u) {
			sched_yield();
			continue;
		}
		struct ipof_ep x;
		memcpy(&x, e, sizeof x);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&e->seq, __ATOMIC_RELAXED) != s1)
			continue;
		if (x.tx.cookie == 0 || x.rx.cookie == 0)
			return 0;
		*out = x;
		return 1;
	}
	return 0;
}

/* --------------------------------------------------------- peer thread */

static void peer_set_state(struct peer *p, uint32_t st)
{
	__atomic_store_n(&p->d->blk->peer[p->node].state, st, __ATOMIC_RELAXED);
}

static void peer_teardown(struct peer *p, const char *why)
{
	struct ipof *d = p->d;
	pthread_rwlock_wrlock(&p->lk);
	struct ntbx_qp *tq = p->txq, *rq = p->rxq;
	p->txq = p->rxq = NULL;
	pthread_rwlock_unlock(&p->lk);
	pthread_mutex_lock(&p->mu);
	p->why = NULL;          /* the data thread no longer sees the pair */
	pthread_mutex_unlock(&p->mu);
	p->pushed_base = __atomic_load_n(&d->blk->peer[p->node].pushed_bytes,
	                                 __ATOMIC_RELAXED);
	ep_publish(d, p->node, NULL, NULL, 0, 0);
	if (tq)
		ntbx_qp_close(tq, 1);
	if (rq)
		ntbx_qp_close(rq, 1);
	if (p->ptx)
		ntbx_qp_close(p->ptx, 1);
	if (p->prx)
		ntbx_qp_close(p->prx, 1);
	p->ptx = p->prx = NULL;
	p->remote_cookie = 0;
	peer_set_state(p, 0);
	if (p->was_up && why)
		logf_(d, "peer node %d down (%s): its packets are dropped "
		      "until it is back", p->node, why);
	p->was_up = 0;
}

/* The peer's daemon's entry for us: 1 with *e filled, 0 if none.  From
 * its block through the observer, or on an ofi fabric from the daemon
 * itself (ipof_net.c), for the peer's current epoch only. */
static int peer_entry(struct peer *p, struct ipof_ep *e)
{
	struct ipof *d = p->d;
	if (d->net) {
		uint32_t epoch;
		char addr[64];
		if (!ipof_net_entry(d->net, p->node, &epoch, e, addr) ||
		    epoch != ntbx_node_epoch(d->dev, p->node))
			return 0;
		int fam, pfx;
		uint8_t a[16];
		uint8_t key[17] = { 0 };
		if (ipof_parse_cidr(addr, &fam, a, &pfx) == 0) {
			key[0] = fam == AF_INET ? 4 : 6;
			memcpy(key + 1, a, fam == AF_INET ? 4 : 16);
		}
		pthread_rwlock_wrlock(&p->lk);
		memcpy(p->addr_key, key, sizeof key);
		pthread_rwlock_unlock(&p->lk);
		return 1;
	}
	struct ipof_block *b = find_block(p->obs, p->node);
	return b && ipof_ep_read(b, d->node, e);
}

/* 1 if the peer's published entry still names the endpoints we use. */
static int peer_entry_current(struct peer *p)
{
	struct ipof_ep e;
	if (!peer_entry(p, &e))
		return 0;
	return e.rx.cookie == p->remote_cookie &&
	       (e.connected_to == 0 || e.connected_to == p->my_cookie);
}

/* Our tx endpoint connects to the peer's rx endpoint and the reverse.
 * 1 connected, 0 not yet, -1 failed. */
static int peer_try_connect(struct peer *p)
{
	struct ipof *d = p->d;
	struct ipof_ep e;
	if (!peer_entry(p, &e))
		return 0;
	uint32_t pe = ntbx_node_epoch(d->dev, p->node);
	if (e.for_epoch != d->epoch || (int)e.tx.node != p->node ||
	    (int)e.rx.node != p->node || e.tx.epoch != pe || e.rx.epoch != pe ||
	    (e.connected_to != 0 && e.connected_to != p->my_cookie))
		return 0;
	if (ntbx_qp_connect(p->ptx, &e.rx) < 0 ||
	    ntbx_qp_connect(p->prx, &e.tx) < 0)
		return -1;
	struct ntbx_qp_addr ltx, lrx;
	ntbx_qp_local_addr(p->ptx, &ltx);
	ntbx_qp_local_addr(p->prx, &lrx);
	ep_publish(d, p->node, &ltx, &lrx, p->pend_epoch, e.rx.cookie);
	for (int i = 0; i < IPOF_NPOST; i++) {
		int rc = ntbx_qp_post_recv(p->prx, (uint64_t)p->bufs +
		                           (uint64_t)i * IPOF_BUF, IPOF_BUF);
		if (rc < 0) {
			logf_(d, "peer node %d: posting receive buffers: %s",
			      p->node, ntbx_errmsg());
			return -1;
		}
	}
	p->remote_cookie = e.rx.cookie;
	pthread_rwlock_wrlock(&p->lk);
	p->rxq = p->prx;
	p->txq = p->ptx;
	pthread_rwlock_unlock(&p->lk);
	p->prx = p->ptx = NULL;
	/* the data thread arms the new receive queue pair before it sleeps
	 * again: wake it */
	uint64_t one = 1;
	if (write(d->kick, &one, sizeof one) < 0) {
		/* the counter is full: it is readable anyway */
	}
	struct ipof_peer_ctr *c = &d->blk->peer[p->node];
	ctr_add(&c->connects, 1);
	c->hops = ntbx_qp_hops(p->rxq);
	peer_set_state(p, 2);
	logf_(d, "peer node %d up (%d hop%s, queue pairs #%" PRIu64 ")",
	      p->node, c->hops, c->hops == 1 ? "" : "s",
	      __atomic_load_n(&c->connects, __ATOMIC_RELAXED));
	p->was_up = 1;
	return 1;
}

/*
 * Data thread: receive up to @max messages of @p and write them into the
 * TUN device.  Returns how many were taken; *why becomes a reason to tear
 * the pair down when it failed or ended.  Called under p->lk (read).
 * Zero-copy: a message is written to the TUN device from where it lies,
 * the posted buffer it was pushed into or our own ring (the peer wrote
 * it: the kernel checks the virtio-net header and the packet), and only
 * then consumed; the posted buffer it used up is posted again.
 */
static int rx_drain(struct peer *p, int max, const char **why)
{
	struct ipof *d = p->d;
	struct ipof_peer_ctr *c = &d->blk->peer[p->node];
	uint64_t lo = (uint64_t)p->bufs, hi = lo + IPOF_NPOST * IPOF_BUF;
	int k;
	for (k = 0; k < max; k++) {
		uint64_t off = NTBX_QP_NO_BUF;
		const void *m = NULL;
		int eof = 0;
		ssize_t n = ntbx_qp_recv_zc(p->rxq, &m, &off, NTBX_QP_NONBLOCK,
		                            &eof);
		if (n == -EAGAIN)
			return k;
		if (n == -ECONNRESET) {
			*why = "node died";
			return k;
		}
		if (n == -EPIPE || eof) {
			*why = "closed by its daemon";
			return k;
		}
		if (n < 0) {
			*why = "queue pair failed";
			return k;
		}
		if (off != NTBX_QP_NO_BUF &&
		    (off < lo || off >= hi || (off - lo) % IPOF_BUF)) {
			ntbx_qp_recv_zc_done(p->rxq);
			drop(d, NTBX_IPOF_DROP_BAD);
			*why = "queue pair returned a foreign buffer";
			return k;
		}
		/* the virtio-net header is checked by the kernel on write; the
		 * receiving TCP stack runs in this write() */
		const uint8_t *msg = m;
		const uint8_t *pkt = msg + IPOF_VHDR;
		ssize_t plen = n - (ssize_t)IPOF_VHDR;
		int v = n > (ssize_t)IPOF_VHDR ? pkt[0] >> 4 : 0;
		if ((v == 4 && plen >= 20) || (v == 6 && plen >= 40)) {
			if (write(d->tun, msg, (size_t)n) != n)
				drop(d, NTBX_IPOF_DROP_TUN);
			ctr_add(&c->rx_pkts, 1);
			ctr_add(&c->rx_bytes, (uint64_t)plen);
		} else {
			drop(d, NTBX_IPOF_DROP_BAD);
		}
		if (ntbx_qp_recv_zc_done(p->rxq) < 0) {
			*why = "queue pair failed";
			return k + 1;
		}
		if (off != NTBX_QP_NO_BUF &&
		    ntbx_qp_post_recv(p->rxq, off, IPOF_BUF) < 0) {
			*why = "re-posting a buffer failed";
			return k + 1;
		}
	}
	return k;
}

/* Data thread: hand a failed pair to its peer thread (once). */
static void peer_report(struct peer *p, const char *why)
{
	pthread_mutex_lock(&p->mu);
	if (!p->why) {
		p->why = why;
		pthread_cond_signal(&p->cv);
	}
	pthread_mutex_unlock(&p->mu);
}

static int peer_create(struct peer *p)
{
	struct ipof *d = p->d;
	/* the ring of an endpoint is what the peer sends to it: our tx
	 * endpoint receives nothing (a small ring), our rx endpoint all */
	struct ntbx_qp_opts o = { .ring_size = NTBX_QP_MIN_RING };
	struct ntbx_qp_addr ltx, lrx;
	uint32_t e = ntbx_node_epoch(d->dev, p->node);
	int rc = ntbx_qp_create(d->f, p->node, &o, &p->ptx, &ltx);
	if (rc == 0) {
		o.ring_size = IPOF_RING;
		rc = ntbx_qp_create(d->f, p->node, &o, &p->prx, &lrx);
		if (rc < 0) {
			ntbx_qp_close(p->ptx, 1);
			p->ptx = NULL;
		}
	} else {
		p->ptx = NULL;
	}
	if (rc < 0) {
		if (rc != p->create_err)
			logf_(d, "peer node %d: %s", p->node, ntbx_errmsg());
		p->create_err = rc;
		p->prx = NULL;
		return rc;
	}
	p->create_err = 0;
	p->pend_epoch = e;
	p->my_cookie = lrx.cookie;
	ep_publish(d, p->node, &ltx, &lrx, e, 0);
	peer_set_state(p, 1);
	return 0;
}

static void *peer_main(void *arg)
{
	struct peer *p = arg;
	struct ipof *d = p->d;
	while (!d->stop_threads) {
		if (!p->rxq && !p->ptx) {
			if (!ntbx_node_alive(d->dev, p->node)) {
				peer_set_state(p, 0);
				sleep_ms(50);
				continue;
			}
			if (peer_create(p) < 0)
				sleep_ms(200);
			continue;
		}
		if (!p->rxq) {
			if (ntbx_node_epoch(d->dev, p->node) != p->pend_epoch ||
			    !ntbx_node_alive(d->dev, p->node)) {
				peer_teardown(p, NULL);
				continue;
			}
			int rc = peer_try_connect(p);
			if (rc < 0) {
				peer_teardown(p, "set-up failed");
				sleep_ms(200);
			} else if (rc == 0) {
				sleep_ms(20);
			}
			continue;
		}
		/* Up: the data thread moves the packets.  Wake every 200 ms
		 * (or when it reports a failure) to check the peer. */
		const char *why = NULL;
		pthread_mutex_lock(&p->mu);
		if (!p->why) {
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts.tv_nsec += 200000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&p->cv, &p->mu, &ts);
		}
		why = p->why;
		pthread_mutex_unlock(&p->mu);
		if (d->stop_threads)
			break;
		if (!why) {
			if (!ntbx_node_alive(d->dev, p->node))
				why = "node died";
			else if (ntbx_node_epoch(d->dev, p->node) != p->pend_epoch)
				why = "restarted";
			else if (!peer_entry_current(p))
				why = "its daemon is gone";
		}
		if (!why) {
			pthread_rwlock_rdlock(&p->lk);
			if (p->txq) {
				struct ntbx_qp_stats qs;
				ntbx_qp_get_stats(p->txq, &qs);
				__atomic_store_n(&d->blk->peer[p->node].pushed_bytes,
				                 p->pushed_base + qs.pushed_bytes,
				                 __ATOMIC_RELAXED);
			}
			pthread_rwlock_unlock(&p->lk);
		}
		if (why)
			peer_teardown(p, why);
	}
	peer_teardown(p, NULL);
	return NULL;
}

/* ------------------------------------------------------------ routing */

static int route(struct ipof *d, const struct sockaddr_storage *ss,
                 socklen_t len)
{
	uint8_t key[17] = { 0 };
	if (ss->ss_family == AF_INET) {
		key[0] = 4;
		memcpy(key + 1, &((const struct sockaddr_in *)ss)->sin_addr, 4);
	} else {
		key[0] = 6;
		memcpy(key + 1, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
	}
	uint32_t h = 2166136261u;
	for (int i = 0; i < 17; i++)
		h = (h ^ key[i]) * 16777619u;
	struct rcache *e = &d->rc[h % RC_SIZE];
	uint64_t now = ntbx_now_ns();
	if (e->until > now && !memcmp(e->key, key, sizeof key))
		return e->node;
	int node = ntbx_fabric_node_of_addr(d->f, (const struct sockaddr *)ss,
	                                    len);
	/* ofi: the peers' interface addresses, which their agents could not
	 * announce (read once per peer set-up, under the peer's lock) */
	for (int n = 0; d->net && node < 0 && n < d->nodes; n++) {
		struct peer *p = &d->peer[n];
		if (n == d->node)
			continue;
		pthread_rwlock_rdlock(&p->lk);
		if (p->rxq && !memcmp(p->addr_key, key, sizeof key))
			node = n;
		pthread_rwlock_unlock(&p->lk);
	}
	memcpy(e->key, key, sizeof key);
	e->node = node < 0 ? -1 : node;
	/* positive answers are kept a second, negative ones 100 ms: a node
	 * that records a new address is found soon */
	e->until = now + (node < 0 ? 100000000ull : 1000000000ull);
	return e->node;
}

/* Count a packet sent to @node, or its drop (@rc: the send's result). */
static void tx_done(struct ipof *d, int node, ssize_t rc, size_t n)
{
	if (rc == (ssize_t)n) {
		struct ipof_peer_ctr *c = &d->blk->peer[node];
		ctr_add(&c->tx_pkts, 1);
		ctr_add(&c->tx_bytes, n - IPOF_VHDR);
	} else if (rc == -EAGAIN) {
		drop(d, NTBX_IPOF_DROP_PEER_FULL);
	} else {
		drop(d, NTBX_IPOF_DROP_PEER_DOWN);
	}
}

/* One nonblocking send of @pkt to @node: the send's result, or -ENOTCONN
 * when there is no queue pair. */
static ssize_t tx_try(struct ipof *d, int node, const uint8_t *pkt, size_t n)
{
	struct peer *p = &d->peer[node];
	pthread_rwlock_rdlock(&p->lk);
	ssize_t rc = p->txq ? ntbx_qp_send(p->txq, pkt, n, NTBX_QP_NONBLOCK)
	                    : -ENOTCONN;
	pthread_rwlock_unlock(&p->lk);
	return rc;
}

/*
 * Classify and route the packet read from the TUN device (@pkt: the
 * virtio-net header and the packet, or at least its first IPOF_HEAD
 * bytes): its destination node, or -1 (dropped and counted).
 */
static int tx_route(struct ipof *d, const uint8_t *pkt, size_t n)
{
	struct sockaddr_storage ss;
	socklen_t sl = 0;
	int cls = ipof_classify(pkt + IPOF_VHDR, n - IPOF_VHDR, d->bcast4, &ss,
	                        &sl);
	if (cls == IPOF_PKT_BAD) {
		drop(d, NTBX_IPOF_DROP_BAD);
		return -1;
	}
	if (cls == IPOF_PKT_BCAST) {
		drop(d, NTBX_IPOF_DROP_BCAST);
		return -1;
	}
	if (cls == IPOF_PKT_MCAST) {
		drop(d, NTBX_IPOF_DROP_MCAST);
		return -1;
	}
	int node = route(d, &ss, sl);
	if (node < 0 || node >= d->nodes) {
		drop(d, NTBX_IPOF_DROP_NO_ROUTE);
		return -1;
	}
	if (node == d->node) {
		drop(d, NTBX_IPOF_DROP_SELF);
		return -1;
	}
	return node;
}

/*
 * Route and send the packet read from the TUN device (@pkt: the
 * virtio-net header and the packet, both go).  Returns the destination
 * node when its ring is full (the caller keeps the packet and retries),
 * else -1 (sent, or dropped and counted).
 */
static int tx_packet(struct ipof *d, const uint8_t *pkt, size_t n)
{
	int node = tx_route(d, pkt, n);
	if (node < 0)
		return -1;
	ssize_t rc = tx_try(d, node, pkt, n);
	if (rc == -EAGAIN)
		return node;
	tx_done(d, node, rc, n);
	return -1;
}

/*
 * Two nodes: every packet goes to the one peer or is dropped, so the next
 * packet is read from the TUN device straight into the peer's memory,
 * into room reserved on its queue pair (a posted buffer, or its ring):
 * the sender's copy is gone.  The headers are read into a local buffer
 * too (readv), to classify and route without reading the peer's memory.
 * Returns 1 when it read (*res: the read's result; the packet is sent or
 * dropped and counted), 0 when the caller reads and sends by copy (no
 * queue pair, no room: the copy path keeps the packet and waits).
 */
#define IPOF_HEAD (IPOF_VHDR + 128u)
static int tx_direct(struct ipof *d, ssize_t *res)
{
	int node = 1 - d->node;
	struct peer *p = &d->peer[node];
	pthread_rwlock_rdlock(&p->lk);
	void *dst;
	if (!p->txq || ntbx_qp_send_reserve(p->txq, &dst, IPOF_BUF,
	                                    NTBX_QP_NONBLOCK) < 0) {
		pthread_rwlock_unlock(&p->lk);
		return 0;
	}
	uint8_t head[IPOF_HEAD];
	struct iovec iov[2] = {
		{ head, IPOF_HEAD },
		{ (uint8_t *)dst + IPOF_HEAD, IPOF_BUF - IPOF_HEAD },
	};
	ssize_t n = readv(d->tun, iov, 2);
	*res = n;
	if (n < 0) {
		int e = errno;
		ntbx_qp_send_abort(p->txq, 0);
		pthread_rwlock_unlock(&p->lk);
		errno = e;
		return 1;
	}
	size_t h = (size_t)n < IPOF_HEAD ? (size_t)n : IPOF_HEAD;
	memcpy(dst, head, h);   /* write remote */
	int to = n > (ssize_t)IPOF_VHDR ? tx_route(d, head, h) : -1;
	if (n <= (ssize_t)IPOF_VHDR)
		drop(d, NTBX_IPOF_DROP_BAD);
	if (to == node) {
		ssize_t rc = ntbx_qp_send_commit(p->txq, (size_t)n);
		tx_done(d, node, rc, (size_t)n);
	} else {
		if (to >= 0)   /* cannot happen with two nodes */
			drop(d, NTBX_IPOF_DROP_NO_ROUTE);
		ntbx_qp_send_abort(p->txq, (size_t)n);
	}
	pthread_rwlock_unlock(&p->lk);
	return 1;
}

/* ------------------------------------------------------- data thread */

#define IPOF_BATCH   16        /* packets per direction per turn */

/* Sleep preparation: arm every receive queue pair and, for a packet
 * waiting for room, its transmit queue pair.  Returns 1 if something is
 * ready already (do not sleep); *writable is set when the waiting packet's
 * queue pair reports room (for a small record: the packet may need more). */
static int data_arm(struct ipof *d, int pend, int *writable)
{
	int ready = 0;
	*writable = 0;
	for (int n = 0; n < d->nodes; n++) {
		if (n == d->node)
			continue;
		struct peer *p = &d->peer[n];
		pthread_rwlock_rdlock(&p->lk);
		if (p->rxq && !__atomic_load_n(&p->why, __ATOMIC_ACQUIRE)) {
			int m = ntbx_qp_arm(p->rxq, NTBX_QP_READABLE);
			if (m < 0 || (m & NTBX_QP_READABLE)) {
				ready = 1;
			} else if (m & NTBX_QP_ERROR) {
				peer_report(p, ntbx_node_alive(d->dev, n) ?
				               "queue pair failed" : "node died");
				ready = 1;
			} else if (m & NTBX_QP_HUP) {
				peer_report(p, "closed by its daemon");
				ready = 1;
			}
		}
		pthread_rwlock_unlock(&p->lk);
	}
	if (pend >= 0) {
		struct peer *p = &d->peer[pend];
		pthread_rwlock_rdlock(&p->lk);
		int m = p->txq ? ntbx_qp_arm(p->txq, NTBX_QP_WRITABLE) : -1;
		pthread_rwlock_unlock(&p->lk);
		if (m < 0 || (m & (NTBX_QP_HUP | NTBX_QP_ERROR)))
			ready = 1;     /* the retry drops it */
		else if (m & NTBX_QP_WRITABLE)
			*writable = 1;
	}
	return ready;
}

/*
 * The data thread (the caller's): one loop moves both directions, so a
 * packet that the kernel answers at once (a TCP ACK generated while we
 * write a segment into the TUN device, the next segment sent while we
 * write an ACK) is picked up by the same thread without a wake-up.  Each
 * turn receives up to IPOF_BATCH messages per peer, then reads up to
 * IPOF_BATCH packets from the (nonblocking) TUN device.  With nothing to
 * do it keeps polling for the wait policy's budget, then sleeps in ppoll()
 * on the TUN
 * device, the doorbell event FIFO (after arming every receive queue pair)
 * and the peer threads' kick.  A packet whose ring is full is kept and
 * retried while the other direction keeps moving; it is dropped
 * (peer_full) after 100 ms: a NIC's full transmit queue.
 */
static int data_loop(struct ipof *d, volatile sig_atomic_t *stop)
{
	uint8_t *buf = malloc(IPOF_BUF + 64);
	if (!buf)
		return -ENOMEM;
	int np = ntbx_port_count(d->dev);
	uint64_t pmask = np >= 64 ? ~0ull : (1ull << np) - 1;
	if (!pmask)
		pmask = 1;
	int rc = ntbx_db_event_fd(d->dev, pmask, NTBX_DB_QP_MASK);
	if (rc < 0) {
		free(buf);
		return rc;
	}
	int evfd = rc;
	struct ntbx_spin spin = { 0 };   /* wait policy (util.h) */
	uint64_t spin_ns = 0;
	int pend = -1;             /* node of the packet in buf waiting */
	size_t pend_n = 0;
	uint64_t pend_until = 0;
	long back_us = 20;         /* back-off: room reported, not enough */
	uint64_t idle_since = 0;
	rc = 0;
	while (!*stop) {
		int work = 0;
		for (int n = 0; n < d->nodes; n++) {
			if (n == d->node)
				continue;
			struct peer *p = &d->peer[n];
			pthread_rwlock_rdlock(&p->lk);
			if (p->rxq && !__atomic_load_n(&p->why, __ATOMIC_ACQUIRE)) {
				const char *why = NULL;
				work += rx_drain(p, IPOF_BATCH, &why);
				if (why)
					peer_report(p, why);
			}
			pthread_rwlock_unlock(&p->lk);
		}
		if (pend >= 0) {
			ssize_t r = tx_try(d, pend, buf, pend_n);
			if (r != -EAGAIN || ntbx_now_ns() >= pend_until) {
				tx_done(d, pend, r, pend_n);
				pend = -1;
				back_us = 20;
				work++;
			}
		}
		for (int k = 0; pend < 0 && k < IPOF_BATCH; k++) {
			ssize_t n;
			int direct = d->nodes == 2 && tx_direct(d, &n);
			if (!direct)
				n = read(d->tun, buf, IPOF_BUF);
			if (n < 0) {
				if (errno == EAGAIN || errno == EINTR)
					break;
				rc = ntbx_err(errno, "ipof: reading %s: %s",
				              d->ifname, strerror(errno));
				goto out;
			}
			work++;
			if (direct)
				continue;
			if (n <= (ssize_t)IPOF_VHDR) {
				drop(d, NTBX_IPOF_DROP_BAD);
				continue;
			}
			int node = tx_packet(d, buf, (size_t)n);
			if (node >= 0) {
				pend = node;
				pend_n = (size_t)n;
				pend_until = ntbx_now_ns() + 100000000ull;
			}
		}
		if (work) {
			if (idle_since)
				ntbx_spin_end(&spin, ntbx_now_ns() - idle_since, 0);
			idle_since = 0;
			continue;
		}
		uint64_t now = ntbx_now_ns();
		if (!idle_since) {
			idle_since = now;
			spin_ns = ntbx_spin_begin(&spin);
		}
		if (now - idle_since < spin_ns) {
			ntbx_cpu_relax();
			continue;
		}
		/* Sleep.  Clear the bits, then re-register the FIFO (it is made
		 * readable at once for bits still set), then arm: a ring after
		 * the arm reaches the FIFO. */
		for (int p = 0; p < np; p++)
			ntbx_db_clear(d->dev, p, NTBX_DB_QP_MASK);
		ntbx_db_event_drain(d->dev);
		rc = ntbx_db_event_fd(d->dev, pmask, NTBX_DB_QP_MASK);
		if (rc < 0)
			goto out;
		rc = 0;
		int writable;
		if (data_arm(d, pend, &writable))
			continue;
		struct timespec ts = { 0, 500000000L };
		if (pend >= 0) {
			uint64_t left = pend_until > now ? pend_until - now : 0;
			if (writable) {
				if ((uint64_t)back_us * 1000u < left)
					left = (uint64_t)back_us * 1000u;
				if (back_us < 1000)
					back_us *= 2;
			}
			ts.tv_sec = (time_t)(left / 1000000000u);
			ts.tv_nsec = (long)(left % 1000000000u);
		}
		struct pollfd pf[3] = {
			{ .fd = evfd, .events = POLLIN },
			{ .fd = d->kick, .events = POLLIN },
			{ .fd = d->tun, .events = pend < 0 ? POLLIN : 0 },
		};
		int pr = ppoll(pf, 3, &ts, NULL);
		if (pr > 0 && (pf[1].revents & POLLIN)) {
			uint64_t v;
			if (read(d->kick, &v, sizeof v) < 0) {
				/* another wake-up raced us to it */
			}
		}
		ntbx_spin_end(&spin, ntbx_now_ns() - idle_since, 1);
		idle_since = 0;
	}
out:
	free(buf);
	return rc;
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
			logf_(d, "another process of this node forwards for the "
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
		rc = start_blocked(&p->th, peer_main, p);
		if (rc < 0) {
			rc = ntbx_err(-rc, "ipof: cannot start a thread");
			goto out_threads;
		}
		p->started = 1;
	}
	pthread_condattr_destroy(&ca);
	logf_(d, "%s up: mtu %d, address %s, fabric '%s' (%s, %d nodes), "
	      "epoch %u", d->ifname, mtu, o->addr ? o->addr : "none",
	      o->fabric, ntbx_topology_name(ntbx_fabric_topology(d->f)),
	      d->nodes, d->epoch);
	if (o->ready)
		o->ready(o->ready_arg, d->ifname, d->node);

	rc = data_loop(d, o->stop);
	logf_(d, "%s going down", d->ifname);

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
	                       find_block(obs, node) : NULL;
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
