/* SPDX-License-Identifier: MIT */
/*
 * Ring topology: PEs that are not neighbours are reached through queue
 * pairs that the ring forwards hop by hop (seed 002: the transfer threads
 * of ntbx_qp_forwarder_start, each on its own doorbell bit).  Each PE keeps
 * two queue pairs per non-neighbour: on `cli` it sends requests and reads
 * replies, on `srv` a progress thread reads the peer's requests, applies
 * them to this PE's own memory (heap or static data, while the PE keeps
 * computing) and replies.  A quiet sends a SYNC down every queue pair that
 * carried puts and waits for its reply: the queue pair is ordered, so every
 * earlier put has been applied at the destination when it comes back, and
 * fence needs nothing more than that order.
 *
 * The same requests reach every other PE when the backend maps no peer
 * window (ntbx_sh.via_qp: NTBX_DEV_DMA_ONLY=1, the ofi backend): puts,
 * gets and atomics become messages, and the target's progress thread
 * executes atomics on its own memory with CPU atomics, so they are atomic
 * against its own PE's loads and stores and against every other PE's
 * requests, which the same kind of thread applies.  That is the
 * "progress thread executes them" design of DESIGN.md, chosen over
 * network atomics because one PE's local atomics and a remote one must
 * agree, and the simplest way is that all of them are CPU atomics on
 * the owner's node.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ntbx/qp.h"
#include "shmem_int.h"
#include "util/util.h"

enum { RQ_PUT = 1, RQ_GET, RQ_AMO, RQ_SYNC };

struct rq {
	uint8_t op, kind, size, amo;
	uint32_t pad;
	uint64_t off, len, v, c;
};

#define CHUNK ((32u << 10) - 2 * sizeof(struct rq))

/* Reached through queue pairs: a PE that is not a neighbour on a ring,
 * or any other PE when the backend maps no peer window. */
static int is_ring_remote(int j)
{
	return j != ntbx_sh.me && ntbx_sh.topo >= 0 && sh_other_node(j) &&
	       (ntbx_sh.via_qp || (ntbx_sh.topo == 1 &&
	        ntbx_port_of_node(ntbx_fabric_dev(ntbx_sh.f),
	                          ntbx_sh.node_of[j]) < 0));
}

/* Some PE is reached through queue pairs. */
static int uses_qps(void)
{
	return ntbx_sh.topo == 1 || (ntbx_sh.topo >= 0 && ntbx_sh.via_qp);
}

int ntbx_sh_ring_setup_create(struct ntbx_qp_addr *cli,
                              struct ntbx_qp_addr *srv)
{
	if (!uses_qps())
		return 0;
	int r = ntbx_sh.topo != 1 ? 0 :
	        ntbx_qp_forwarder_start(ntbx_sh.f, ntbx_sh.threads < 1 ? 1 :
	                                ntbx_sh.threads > NTBX_QP_MAX_THREADS ?
	                                NTBX_QP_MAX_THREADS : ntbx_sh.threads);
	if (r < 0)
		return r;
	for (int j = 0; j < ntbx_sh.npes; j++) {
		if (!is_ring_remote(j))
			continue;
		struct sh_peer *p = &ntbx_sh.peer[j];
		int node = ntbx_sh.node_of[j];
		if ((r = ntbx_qp_create(ntbx_sh.f, node, NULL, &p->cli,
		                        &cli[j])) < 0 ||
		    (r = ntbx_qp_create(ntbx_sh.f, node, NULL, &p->srv,
		                        &srv[j])) < 0)
			return r;
	}
	return 0;
}

static int in_range(int kind, uint64_t off, uint64_t len)
{
	size_t sz = kind ? ntbx_sh.data_size : ntbx_sh.heap_size;
	return (kind == 0 || kind == 1) && off <= sz && len <= sz - off;
}

static void *server(void *arg)
{
	struct sh_peer *p = arg;
	char *buf = malloc(CHUNK + 2 * sizeof(struct rq));
	char *out = malloc(CHUNK + 8);
	if (!buf || !out)
		goto done;
	for (;;) {
		int eof = 0;
		ssize_t n = ntbx_qp_recv(p->srv, buf, CHUNK + 2 * sizeof(struct rq),
		                         0, &eof);
		if (n < 0 || eof)
			break;
		struct rq q;
		if ((size_t)n < sizeof q)
			break;
		memcpy(&q, buf, sizeof q);
		if (q.op != RQ_SYNC && (!in_range(q.kind, q.off, q.len) ||
		                        q.len > CHUNK))
			break;   /* corrupt peer: stop serving it */
		char *base = q.kind ? ntbx_sh.data : ntbx_sh.heap;
		switch (q.op) {
		case RQ_PUT:
			if ((size_t)n != sizeof q + q.len)
				goto done;
			ntbx_copy(base + q.off, buf + sizeof q, q.len);
			ntbx_sh_kick_local_at(q.kind, q.off, q.len);
			break;
		case RQ_GET:
			if (ntbx_qp_send(p->srv, base + q.off, q.len, 0) < 0)
				goto done;
			break;
		case RQ_AMO: {
			if ((q.size != 4 && q.size != 8) || q.len != q.size ||
			    (q.off & (q.size - 1)))
				goto done;
			uint64_t r = ntbx_sh_amo_local(q.amo, base + q.off, q.size,
			                               q.v, q.c);
			ntbx_sh_wake_check(q.amo, base + q.off);
			if (ntbx_qp_send(p->srv, &r, sizeof r, 0) < 0)
				goto done;
			break;
		}
		case RQ_SYNC: {
			uint64_t r = 0;
			__atomic_thread_fence(__ATOMIC_SEQ_CST);
			if (ntbx_qp_send(p->srv, &r, sizeof r, 0) < 0)
				goto done;
			break;
		}
		default:
			goto done;
		}
	}
done:
	free(buf);
	free(out);
	return NULL;
}

int ntbx_sh_ring_setup_connect(const struct sh_rec *all, size_t recsize)
{
	(void)recsize;
	if (!uses_qps())
		return 0;
	int me = ntbx_sh.me;
	for (int j = 0; j < ntbx_sh.npes; j++) {
		struct sh_peer *p = &ntbx_sh.peer[j];
		if (!p->cli)
			continue;
		int r;
		if ((r = ntbx_qp_connect(p->cli, &all[j].srv[me])) < 0 ||
		    (r = ntbx_qp_connect(p->srv, &all[j].cli[me])) < 0)
			return r;
		if (pthread_create(&p->thr, NULL, server, p) != 0)
			return -EAGAIN;
		p->thr_started = 1;
	}
	return 0;
}

void ntbx_sh_ring_stop(void)
{
	if (!uses_qps())
		return;
	for (int j = 0; j < ntbx_sh.npes; j++) {
		struct sh_peer *p = &ntbx_sh.peer[j];
		if (!p->cli)
			continue;
		pthread_mutex_lock(&p->lk);
		ntbx_qp_close(p->cli, 1);
		p->cli = NULL;
		pthread_mutex_unlock(&p->lk);
	}
	/* Keep serving until every peer has closed its requests to us: a
	 * peer may still wait for the reply to its last barrier AMO. */
	for (int j = 0; j < ntbx_sh.npes; j++) {
		struct sh_peer *p = &ntbx_sh.peer[j];
		if (p->thr_started) {
			pthread_join(p->thr, NULL);
			p->thr_started = 0;
		}
		if (p->srv) {
			ntbx_qp_close(p->srv, 1);
			p->srv = NULL;
		}
	}
}

static void lost(int pe, ssize_t r)
{
	ntbx_sh_die("the connection to PE %d failed: %s", pe,
	            strerror((int)-r));
}

static void send_rq(int pe, struct sh_peer *p, const struct rq *q,
                    const void *payload, size_t n)
{
	char buf[sizeof *q + CHUNK];
	memcpy(buf, q, sizeof *q);
	if (n)
		ntbx_copy(buf + sizeof *q, payload, n);
	ssize_t r = ntbx_qp_send(p->cli, buf, sizeof *q + n, 0);
	if (r < 0)
		lost(pe, r);
}

static void recv_reply(int pe, struct sh_peer *p, void *dst, size_t n)
{
	int eof = 0;
	ssize_t r = ntbx_qp_recv(p->cli, dst, n, 0, &eof);
	if (r < 0)
		lost(pe, r);
	if (eof || (size_t)r != n)
		lost(pe, -EPROTO);
}

static struct sh_peer *peer_of(int pe)
{
	struct sh_peer *p = &ntbx_sh.peer[pe];
	if (!p->cli)
		ntbx_sh_die("PE %d cannot be reached (no route)", pe);
	return p;
}

void ntbx_sh_remote_put(int pe, const struct sh_loc *l, const void *src,
                        size_t n)
{
	struct sh_peer *p = peer_of(pe);
	pthread_mutex_lock(&p->lk);
	for (size_t done = 0; done < n;) {
		size_t m = n - done < CHUNK ? n - done : CHUNK;
		struct rq q = { .op = RQ_PUT, .kind = (uint8_t)l->kind,
		                .off = l->off + done, .len = m };
		send_rq(pe, p, &q, (const char *)src + done, m);
		done += m;
	}
	p->dirty = 1;
	pthread_mutex_unlock(&p->lk);
}

void ntbx_sh_remote_get(int pe, const struct sh_loc *l, void *dst, size_t n)
{
	struct sh_peer *p = peer_of(pe);
	pthread_mutex_lock(&p->lk);
	for (size_t done = 0; done < n;) {
		size_t m = n - done < CHUNK ? n - done : CHUNK;
		struct rq q = { .op = RQ_GET, .kind = (uint8_t)l->kind,
		                .off = l->off + done, .len = m };
		send_rq(pe, p, &q, NULL, 0);
		recv_reply(pe, p, (char *)dst + done, m);
		done += m;
	}
	pthread_mutex_unlock(&p->lk);
}

uint64_t ntbx_sh_remote_amo(int pe, const struct sh_loc *l, int op,
                            size_t size, uint64_t v, uint64_t c)
{
	struct sh_peer *p = peer_of(pe);
	struct rq q = { .op = RQ_AMO, .kind = (uint8_t)l->kind,
	                .size = (uint8_t)size, .amo = (uint8_t)op,
	                .off = l->off, .len = size, .v = v, .c = c };
	uint64_t r;
	pthread_mutex_lock(&p->lk);
	send_rq(pe, p, &q, NULL, 0);
	recv_reply(pe, p, &r, sizeof r);
	pthread_mutex_unlock(&p->lk);
	return r;
}

void ntbx_sh_remote_quiet(void)
{
	if (!uses_qps())
		return;
	for (int j = 0; j < ntbx_sh.npes; j++) {
		struct sh_peer *p = &ntbx_sh.peer[j];
		if (!p->cli || !__atomic_load_n(&p->dirty, __ATOMIC_ACQUIRE))
			continue;
		pthread_mutex_lock(&p->lk);
		if (p->dirty && p->cli) {
			struct rq q = { .op = RQ_SYNC };
			uint64_t r;
			send_rq(j, p, &q, NULL, 0);
			recv_reply(j, p, &r, sizeof r);
			p->dirty = 0;
		}
		pthread_mutex_unlock(&p->lk);
	}
}
