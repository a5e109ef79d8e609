/* SPDX-License-Identifier: MIT */
/*
 * Ring topology: PEs that are not neighbours are reached through queue
 * pairs.  Each PE keeps two queue pairs per channel: on `cli` it sends
 * requests and reads replies, on `srv` a progress thread reads the peer's
 * requests, applies them (heap or static data, while the PE keeps
 * computing) and replies.  A quiet sends a SYNC down every queue pair that
 * carried puts and waits for its reply: the queue pair is ordered, so every
 * earlier put has been applied when it comes back, and fence needs nothing
 * more than that order.  Every request names the PE it is for (rq.dst).
 *
 * Two hops away (the relay): requests go over a one-hop queue pair to a
 * PE of the node in between, whose progress thread applies them to the
 * destination through its own window to that neighbour (its puts, gets
 * and atomics are the ones it makes for itself) and answers the SYNC.
 * Each node still reaches only its neighbours' windows; what goes away
 * is the forwarding: a two-hop put and its quiet through transfer
 * threads and the destination's progress thread were six sleeps and
 * wake-ups there and back (perf sched, 5-PE ring: 66-130 us per 8 B put
 * and quiet), through the relay they are two, and a one-hop queue pair
 * has zero-copy send and receive, so 1 MiB is copied twice (into the
 * relay's ring, from there into the destination), not six times.  The
 * relay is on when every node of the ring hosts a PE and every PE maps
 * its neighbours' windows; NTBX_SHMEM_RELAY=0 turns it off (every PE
 * must see the same value).  Further than two hops, and with it off,
 * requests travel on queue pairs that the ring forwards hop by hop (seed
 * 002: the transfer threads of ntbx_qp_forwarder_start, each on its own
 * doorbell bit) to the destination's own progress thread.
 *
 * The same requests reach every other PE when the backend maps no peer
 * window (ntbx_sh.via_qp: NTBX_DEV_DMA_ONLY=1, the ofi backend), except
 * puts and gets to a PE on a node a port reaches, which the DMA engine
 * carries (shmem_dma.c): atomics become messages, and the target's progress thread
 * executes atomics on its own memory with CPU atomics, so they are atomic
 * against its own PE's loads and stores and against every other PE's
 * requests, which the same kind of thread applies.  That is the
 * "progress thread executes them" design of DESIGN.md, chosen over
 * network atomics because one PE's local atomics and a remote one must
 * agree, and the simplest way is that all of them are CPU atomics on
 * the owner's node (a relay's atomics are CPU atomics on the same
 * memory, as a neighbour's are).
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "ntbx/qp.h"
#include "shmem_int.h"
#include "util/settings.h"
#include "util/util.h"

/* RQ_KICK: bytes landed by DMA (shmem_dma.c): wake the PE's sleepers
 * for them, as after an RQ_PUT; no reply.  RQ_AMO_NR: an atomic whose
 * result nobody uses (NTBX_AMO_NOFETCH, NTBX_AMO_SIGNAL); no reply. */
enum { RQ_PUT = 1, RQ_GET, RQ_AMO, RQ_SYNC, RQ_KICK, RQ_AMO_NR };

struct rq {
	uint8_t op, kind, size, amo;
	uint32_t dst;   /* the PE it is for: the server's, or a relay's neighbour */
	uint64_t off, len, v, c;
};

/* Bytes per put or get request: forwarded frames carry at most 128 KiB;
 * a relay request is one record of the relay's ring (at most ring / 4 -
 * 64), a get's reply one of ours (default ring).  The relay's ring holds
 * a 1 MiB put whole, so that a putting PE and its relay that share a CPU
 * hand it over once, not at every credit: 1 MiB two hops away took a
 * median of 60 us per put with 2 MiB and 128 KiB, 64 us with 2 MiB and
 * 64 KiB, 105 us with 512 KiB and 64 KiB (design notes). */
#define CHUNK ((32u << 10) - 2 * sizeof(struct rq))
#define RELAY_CHUNK ((128u << 10) - 2 * sizeof(struct rq))
#define RELAY_RING (2u << 20)
#define MAX_CHUNK (CHUNK > RELAY_CHUNK ? CHUNK : RELAY_CHUNK)
_Static_assert(RELAY_CHUNK + sizeof(struct rq) <= RELAY_RING / 4 - 64 &&
               RELAY_CHUNK <= NTBX_QP_DEFAULT_RING / 4 - 64,
               "a relay request or reply must fit one ring record");

/* Two hops away: the PE whose progress thread relays our requests to
 * PE j, or -1 (set up once, read-only after). */
static int relay_on;
static int *relay_of;
/* Requests sent to relay PE r (under its channel's lock), and those
 * relay PE r applied (in our internal area, SH_RELAY_OFF: written by r) */
static uint64_t *relay_sent;

static uint64_t *relay_applied(int r)
{
	return (uint64_t *)(ntbx_sh.internal + SH_RELAY_OFF +
	                    (size_t)r * SH_RELAY_BYTES);
}

/* Reached through queue pairs: a PE that is not a neighbour on a ring,
 * or any other PE when the backend maps no peer window. */
static int is_ring_remote(int j)
{
	return j != ntbx_sh.me && ntbx_sh.topo >= 0 && sh_other_node(j) &&
	       (ntbx_sh.via_qp || (ntbx_sh.topo == 1 &&
	        ntbx_port_of_node(ntbx_fabric_dev(ntbx_sh.f),
	                          ntbx_sh.node_of[j]) < 0));
}

/* On the other node of one of our links (its window is mapped). */
static int is_neighbour(int j)
{
	return j != ntbx_sh.me && ntbx_sh.topo == 1 && !ntbx_sh.via_qp &&
	       sh_other_node(j) &&
	       ntbx_port_of_node(ntbx_fabric_dev(ntbx_sh.f),
	                         ntbx_sh.node_of[j]) >= 0;
}

/* Whether to relay, and through whom: every PE decides the same from
 * what all know (the nodes of every PE, the ring), so that both ends of
 * each channel make it. */
static int relay_plan(void)
{
	int nodes = ntbx_fabric_nodes(ntbx_sh.f);
	relay_on = ntbx_sh.topo == 1 && !ntbx_sh.via_qp && ntbx_sh.node_of &&
	           ntbx_setting_bool(NTBX_SET_SHMEM_RELAY) && nodes > 0;
	for (int n = 0; relay_on && n < nodes; n++) {
		int hosted = 0;
		for (int j = 0; j < ntbx_sh.npes && !hosted; j++)
			hosted = ntbx_sh.node_of[j] == n;
		relay_on = hosted;
	}
	relay_of = malloc((size_t)ntbx_sh.npes * sizeof *relay_of);
	relay_sent = calloc((size_t)ntbx_sh.npes, sizeof *relay_sent);
	if (!relay_of || !relay_sent)
		return -ENOMEM;
	struct ntbx_dev *dev = ntbx_fabric_dev(ntbx_sh.f);
	for (int j = 0; j < ntbx_sh.npes; j++) {
		relay_of[j] = -1;
		int port = -1;
		if (!relay_on || !is_ring_remote(j) ||
		    ntbx_fabric_route(ntbx_sh.f, ntbx_sh.node_of[j], &port) != 2)
			continue;
		int via = ntbx_port_peer_node(dev, port);
		for (int r = 0; r < ntbx_sh.npes && relay_of[j] < 0; r++)
			if (ntbx_sh.node_of[r] == via)
				relay_of[j] = r;
	}
	return 0;
}

/* We keep a channel (cli and srv queue pairs, a progress thread) with
 * PE j: a PE further than a relay reaches, or, relaying, a neighbour. */
static int has_channel(int j)
{
	return is_ring_remote(j) ? relay_of[j] < 0
	                         : relay_on && is_neighbour(j);
}

/* Some PE is reached through queue pairs. */
static int uses_qps(void)
{
	return ntbx_sh.topo == 1 || (ntbx_sh.topo >= 0 && ntbx_sh.via_qp);
}

int ntbx_sh_ring_helpers(void)
{
	return uses_qps();
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
	if (r < 0 || (r = relay_plan()) < 0)
		return r;
	for (int j = 0; j < ntbx_sh.npes; j++) {
		if (!has_channel(j))
			continue;
		struct sh_peer *p = &ntbx_sh.peer[j];
		int node = ntbx_sh.node_of[j];
		/* requests from a neighbour we relay for: a bigger ring */
		struct ntbx_qp_opts o = {
			.ring_size = is_ring_remote(j) ? 0 : RELAY_RING };
		if ((r = ntbx_qp_create(ntbx_sh.f, node, NULL, &p->cli,
		                        &cli[j])) < 0 ||
		    (r = ntbx_qp_create(ntbx_sh.f, node, &o, &p->srv,
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

/* Where request @q applies: this PE's memory, or (relaying) a
 * neighbour's through our window; NULL if it may not. */
static char *target_base(const struct rq *q)
{
	if (q->dst == (uint32_t)ntbx_sh.me)
		return q->kind ? ntbx_sh.data : ntbx_sh.heap;
	if (!relay_on || q->dst >= (uint32_t)ntbx_sh.npes ||
	    !is_neighbour((int)q->dst))
		return NULL;
	struct sh_peer *d = &ntbx_sh.peer[q->dst];
	return !d->direct ? NULL : q->kind ? d->data : d->heap;
}

/* After a store into the request's target: wake its sleepers (if they
 * wait for these bytes). */
static void kick_target(const struct rq *q, uint64_t len)
{
	if (q->dst == (uint32_t)ntbx_sh.me) {
		ntbx_sh_kick_local_at(q->kind, q->off, len);
		return;
	}
	/* before our own internal area is set up (start-up), nobody can
	 * have sent us a request yet; the check keeps xlate off NULL */
	if (!__atomic_load_n(&ntbx_sh.internal, __ATOMIC_ACQUIRE))
		return;
	struct sh_loc l = { .kind = q->kind, .off = q->off };
	ntbx_sh_kick_store((int)q->dst, &l, len);
}

/* Apply one request (@msg, @n bytes: its header, then a put's payload);
 * 0, or -1 to stop serving a peer that sent something wrong.  *@relayed:
 * it was for another PE (we are its relay). */
static int serve_one(struct sh_peer *p, const char *msg, size_t n,
                     int *relayed)
{
	struct rq q;
	if (n < sizeof q)
		return -1;
	memcpy(&q, msg, sizeof q);   /* read once: the peer can write there */
	*relayed = q.dst != (uint32_t)ntbx_sh.me;
	if (q.op == RQ_SYNC) {
		uint64_t r = 0;
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		return ntbx_qp_send(p->srv, &r, sizeof r, 0) < 0 ? -1 : 0;
	}
	char *base = target_base(&q);
	if (!base || !in_range(q.kind, q.off, q.len) ||
	    (q.len > MAX_CHUNK && q.op != RQ_KICK))
		return -1;   /* corrupt peer: stop serving it */
	switch (q.op) {
	case RQ_KICK:
		if (n != sizeof q || q.dst != (uint32_t)ntbx_sh.me)
			return -1;
		kick_target(&q, q.len);
		return 0;
	case RQ_PUT:
		if (n != sizeof q + q.len)
			return -1;
		ntbx_copy(base + q.off, msg + sizeof q, q.len);
		kick_target(&q, q.len);
		return 0;
	case RQ_GET:
		return ntbx_qp_send(p->srv, base + q.off, q.len, 0) < 0 ? -1 : 0;
	case RQ_AMO:
	case RQ_AMO_NR: {
		if ((q.size != 4 && q.size != 8) || q.len != q.size ||
		    (q.off & (q.size - 1)))
			return -1;
		uint64_t r = ntbx_sh_amo_local(q.amo, base + q.off, q.size,
		                               q.v, q.c);
		if (q.dst == (uint32_t)ntbx_sh.me)
			ntbx_sh_wake_check(q.amo, base + q.off);
		else if (q.amo != NTBX_AMO_FETCH)
			kick_target(&q, q.size);
		if (q.op == RQ_AMO_NR)
			return 0;
		return ntbx_qp_send(p->srv, &r, sizeof r, 0) < 0 ? -1 : 0;
	}
	default:
		return -1;
	}
}

/*
 * A relay keeps off the CPU of the PE it relays for (hop16).  A put two
 * hops away is two copies, the putter's into our ring and ours from there
 * into the destination; they overlap only on two CPUs.  Left free, the
 * relay lands on the putter's CPU (the putter's futex wake pulls it there,
 * and from then on they hand that CPU to each other while the other stays
 * idle): 1 MiB put + quiet two hops away took 45-48 us per put there
 * against 26-28 us on two CPUs (a neighbour's 15-16 us, 5-PE ring of
 * 2 CPUs).  So where oshrun binds the ring's main threads
 * (NTBX_SHMEM_BIND_CPU: the putter stays on its CPU), the relay takes
 * every CPU it may use but the one its writer last sent from (the queue
 * pair says: ntbx_qp_peer_cpu), set again only when that changes; nothing
 * when that would leave none.  @avoid: the CPU kept off, -1 none yet.
 */
static void relay_keep_off(int writer_cpu, int *avoid,
                           const cpu_set_t *allowed)
{
	if (writer_cpu < 0 || writer_cpu >= CPU_SETSIZE ||
	    writer_cpu == *avoid || !CPU_ISSET(writer_cpu, allowed))
		return;
	cpu_set_t set = *allowed;
	CPU_CLR(writer_cpu, &set);
	if (CPU_COUNT(&set) == 0)
		return;
	*avoid = writer_cpu;
	if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0)
		*avoid = CPU_SETSIZE;   /* not allowed: do not ask again */
}

static void *server(void *arg)
{
	struct sh_peer *p = arg;
	pthread_setname_np(pthread_self(), "ntbx-shprog");   /* perf, top -H */
	size_t cap = MAX_CHUNK + 2 * sizeof(struct rq);
	char *buf = malloc(cap);
	/* Our own waiter slot: on the handle's shared one, every frame the
	 * transfer thread delivers to this PE (a reply to its main thread, a
	 * request to another progress thread) woke every progress thread. */
	struct ntbx_dev *dev = ntbx_fabric_dev(ntbx_sh.f);
	struct ntbx_db_wake *own = NULL;
	if (ntbx_db_sleeper_open(dev, &own) < 0)
		own = NULL;
	ntbx_qp_set_sleeper(p->srv, own);
	/* A neighbour's requests (we are its relay): after each, how many
	 * we applied goes into its memory, where its quiet looks. */
	int src = (int)(p - ntbx_sh.peer);
	uint64_t *told = relay_on && is_neighbour(src) && ntbx_sh.peer[src].direct
	                 ? (uint64_t *)(ntbx_sh.peer[src].heap + SH_RELAY_OFF +
	                                (size_t)ntbx_sh.me * SH_RELAY_BYTES)
	                 : NULL;
	uint64_t applied = 0, cpu_told = 0;
	struct sh_idle idle = { 0 };
	cpu_set_t allowed;   /* relaying for bound main threads: ours */
	int avoid = -1;
	if (!told || ntbx_setting_long(NTBX_SET_SHMEM_BIND_CPU) < 0 ||
	    pthread_getaffinity_np(pthread_self(), sizeof allowed, &allowed))
		avoid = CPU_SETSIZE;   /* never */
	while (buf) {
		/* In place where it lies (one ring record): the payload is
		 * copied once, from the ring to its destination. */
		const void *msg;
		uint64_t off;
		int eof = 0, rc, relayed = 0;
		ssize_t n = ntbx_qp_recv_zc(p->srv, &msg, &off, NTBX_QP_NONBLOCK,
		                            &eof);
		/* Nothing yet: the wait policy's yields to the job's own
		 * threads (a putter on our CPU, above all), then block */
		if (n == -EAGAIN &&
		    ntbx_sh_idle_yield(&idle, ntbx_qp_peer_cpu(p->srv)))
			continue;
		if (n == -EAGAIN)
			n = ntbx_qp_recv_zc(p->srv, &msg, &off, 0, &eof);
		ntbx_sh_idle_done(&idle);
		if (n >= 0 && !eof) {
			rc = serve_one(p, msg, (size_t)n, &relayed);
			if (ntbx_qp_recv_zc_done(p->srv) < 0)
				rc = -1;
		} else if (n == -ENOBUFS) {
			n = ntbx_qp_recv(p->srv, buf, cap, 0, &eof);
			rc = n < 0 || eof ? -1 : serve_one(p, buf, (size_t)n,
			                                   &relayed);
		} else {
			rc = -1;
		}
		if (rc < 0)
			break;
		if (told) {
			if (relayed && avoid != CPU_SETSIZE)
				relay_keep_off(ntbx_qp_peer_cpu(p->srv), &avoid,
				               &allowed);
			/* after the request's stores (x86: stores are seen
			 * in order, through any window) */
			/* where we run: its quiet does not spin for us when
			 * it is on our CPU (stored when it changed) */
			int cpu = sched_getcpu();
			if (cpu >= 0 && (uint64_t)cpu + 1 != cpu_told) {
				cpu_told = (uint64_t)cpu + 1;
				__atomic_store_n(told + 1, cpu_told,
				                 __ATOMIC_RELAXED);
			}
			__atomic_store_n(told, ++applied, __ATOMIC_RELEASE);
			/* a sleeper is kicked once its last request is
			 * applied, not after each of the 16 chunks of a
			 * 1 MiB put (a futex wake each, on our path) */
			if (!(ntbx_qp_poll(p->srv) & NTBX_QP_READABLE) &&
			    __atomic_load_n(&ntbx_sh.internal, __ATOMIC_ACQUIRE)) {
				struct sh_loc l = { .kind = 0, .off = SH_RELAY_OFF +
				                    (uint64_t)ntbx_sh.me *
				                    SH_RELAY_BYTES };
				ntbx_sh_kick_store(src, &l, 8);
			}
		}
	}
	ntbx_sh_idle_done(&idle);
	ntbx_qp_set_sleeper(p->srv, NULL);
	ntbx_db_wake_close(dev, own);
	free(buf);
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
	/* One hop (a relay): written in place into the relay's ring. */
	void *dst;
	ssize_t r = ntbx_qp_send_reserve(p->cli, &dst, sizeof *q + n, 0);
	if (r >= 0) {
		memcpy(dst, q, sizeof *q);
		if (n)
			ntbx_copy((char *)dst + sizeof *q, payload, n);
		r = ntbx_qp_send_commit(p->cli, sizeof *q + n);
	} else if ((r == -EOPNOTSUPP || r == -EMSGSIZE) && n <= CHUNK) {
		char buf[sizeof *q + CHUNK];
		memcpy(buf, q, sizeof *q);
		if (n)
			ntbx_copy(buf + sizeof *q, payload, n);
		r = ntbx_qp_send(p->cli, buf, sizeof *q + n, 0);
	}
	if (r < 0)
		lost(pe, r);
	if (relay_sent)
		relay_sent[p - ntbx_sh.peer]++;
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

/* The channel requests for @pe go on (its own, or its relay's), and
 * the most bytes one request may carry on it. */
static struct sh_peer *peer_of(int pe, size_t *chunk)
{
	int via = relay_of && relay_of[pe] >= 0 ? relay_of[pe] : pe;
	struct sh_peer *p = &ntbx_sh.peer[via];
	if (!p->cli)
		ntbx_sh_die("PE %d cannot be reached (no route)", pe);
	*chunk = via != pe ? RELAY_CHUNK : CHUNK;
	return p;
}

/* Every request sent to @p so far is applied: its put requests and its
 * atomics sent without a reply (under p->lk). */
static void sync_peer(int pe, struct sh_peer *p)
{
	struct rq q = { .op = RQ_SYNC };
	uint64_t r;
	send_rq(pe, p, &q, NULL, 0);
	recv_reply(pe, p, &r, sizeof r);
	p->dirty = 0;
}

void ntbx_sh_remote_put(int pe, const struct sh_loc *l, const void *src,
                        size_t n)
{
	size_t chunk;
	struct sh_peer *p = peer_of(pe, &chunk);
	pthread_mutex_lock(&p->lk);
	if (ntbx_sh_dma_ok(pe)) {
		/* by DMA, then a kick for its sleepers (shmem_dma.c); an
		 * atomic sent without a reply is applied when the target's
		 * progress thread runs, which a DMA put would overtake */
		if (p->dirty)
			sync_peer(pe, p);
		ntbx_sh_dma_put(pe, l, src, n);
		struct rq q = { .op = RQ_KICK, .kind = (uint8_t)l->kind,
		                .dst = (uint32_t)pe, .off = l->off, .len = n };
		send_rq(pe, p, &q, NULL, 0);
		pthread_mutex_unlock(&p->lk);
		return;
	}
	for (size_t done = 0; done < n;) {
		size_t m = n - done < chunk ? n - done : chunk;
		struct rq q = { .op = RQ_PUT, .kind = (uint8_t)l->kind,
		                .dst = (uint32_t)pe, .off = l->off + done,
		                .len = m };
		send_rq(pe, p, &q, (const char *)src + done, m);
		done += m;
	}
	p->dirty = 1;
	pthread_mutex_unlock(&p->lk);
}

void ntbx_sh_remote_get(int pe, const struct sh_loc *l, void *dst, size_t n)
{
	size_t chunk;
	struct sh_peer *p = peer_of(pe, &chunk);
	pthread_mutex_lock(&p->lk);
	if (ntbx_sh_dma_ok(pe)) {
		if (p->dirty)   /* as for a put */
			sync_peer(pe, p);
		ntbx_sh_dma_get(pe, l, dst, n);
		pthread_mutex_unlock(&p->lk);
		return;
	}
	for (size_t done = 0; done < n;) {
		size_t m = n - done < chunk ? n - done : chunk;
		struct rq q = { .op = RQ_GET, .kind = (uint8_t)l->kind,
		                .dst = (uint32_t)pe, .off = l->off + done,
		                .len = m };
		send_rq(pe, p, &q, NULL, 0);
		recv_reply(pe, p, (char *)dst + done, m);
		done += m;
	}
	pthread_mutex_unlock(&p->lk);
}

uint64_t ntbx_sh_remote_amo(int pe, const struct sh_loc *l, int op,
                            size_t size, uint64_t v, uint64_t c)
{
	size_t chunk;
	struct sh_peer *p = peer_of(pe, &chunk);
	int nr = op & (NTBX_AMO_NOFETCH | NTBX_AMO_SIGNAL);
	struct rq q = { .op = nr ? RQ_AMO_NR : RQ_AMO, .kind = (uint8_t)l->kind,
	                .size = (uint8_t)size, .amo = (uint8_t)NTBX_AMO_OP(op),
	                .dst = (uint32_t)pe, .off = l->off, .len = size, .v = v, .c = c };
	uint64_t r = 0;
	pthread_mutex_lock(&p->lk);
	send_rq(pe, p, &q, NULL, 0);
	if (!nr)
		recv_reply(pe, p, &r, sizeof r);
	else if (op & NTBX_AMO_NOFETCH)
		p->dirty = 1;   /* quiet completes it */
	pthread_mutex_unlock(&p->lk);
	return r;
}

/* Quiet through relay PE @r: wait until it has applied every request we
 * sent it.  It says so in our memory (relay_applied), so the quiet is
 * one hand-over (the relay's, which it makes anyway) instead of a SYNC
 * and its reply: the relay is woken once per put and quiet, not twice,
 * and we sleep (if at all) on our own wake sequence, kicked by it. */
static void relay_wait(int r, struct sh_peer *p)
{
	const uint64_t *w = relay_applied(r);
	uint64_t want = relay_sent[r], s = 0;
	for (unsigned i = 1;
	     (int64_t)(__atomic_load_n(w, __ATOMIC_ACQUIRE) - want) < 0; i++) {
		if (!(i & 63) &&
		    (ntbx_qp_poll(p->cli) & (NTBX_QP_ERROR | NTBX_QP_HUP)))
			lost(r, -ECONNRESET);
		if (!s)   /* the hint is for this wait's first round only */
			ntbx_sh_spin_peer_cpu((int)__atomic_load_n(
				w + 1, __ATOMIC_RELAXED) - 1);
		ntbx_sh_spin_on(&s, w);
	}
	ntbx_sh_spin_done(&s);
}

void ntbx_sh_remote_quiet(void)
{
	if (!uses_qps())
		return;
	ntbx_sh_dma_quiet();
	for (int j = 0; j < ntbx_sh.npes; j++) {
		struct sh_peer *p = &ntbx_sh.peer[j];
		if (!p->cli || !__atomic_load_n(&p->dirty, __ATOMIC_ACQUIRE))
			continue;
		pthread_mutex_lock(&p->lk);
		if (p->dirty && p->cli && relay_on && is_neighbour(j)) {
			relay_wait(j, p);
			p->dirty = 0;
		} else if (p->dirty && p->cli) {
			sync_peer(j, p);
		}
		pthread_mutex_unlock(&p->lk);
	}
}
