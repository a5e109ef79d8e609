/* SPDX-License-Identifier: MIT */
/*
 * IP over the fabric: the peer threads.  The entry each daemon publishes
 * in its block for each peer (and reads of the peers' entries, through an
 * observer or, across hosts, ipof_net.c), and one thread per peer node
 * that makes, connects, checks and tears down that pair's queue pairs
 * (the pairing rule is in ipof.c's header).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ipof/daemon.h"
#include "util/util.h"

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
struct ipof_block *ipof_find_block(struct ntbx_dev *obs, int node)
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
		ipof_logf(d, "peer node %d down (%s): its packets are dropped "
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
	struct ipof_block *b = ipof_find_block(p->obs, p->node);
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
			ipof_logf(d, "peer node %d: posting receive buffers: %s",
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
	ipof_logf(d, "peer node %d up (%d hop%s, queue pairs #%" PRIu64 ")",
	      p->node, c->hops, c->hops == 1 ? "" : "s",
	      __atomic_load_n(&c->connects, __ATOMIC_RELAXED));
	p->was_up = 1;
	return 1;
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
			ipof_logf(d, "peer node %d: %s", p->node, ntbx_errmsg());
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

void *ipof_peer_main(void *arg)
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

