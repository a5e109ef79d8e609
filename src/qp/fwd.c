/* SPDX-License-Identifier: MIT */
/*
 * Ring forwarding: queue pairs between nodes that are not neighbours.
 *
 * Link block layout (ntbx_fabric_link_block; this layer owns it).  Node X's
 * block for port p lives in X's memory; the neighbour Y across p writes
 * into it, X reads it:
 *
 *   [0, 16 KiB)            control (struct fwd_block)
 *   [16 KiB, 64 KiB)       the sockets layer's part (NTBX_LINK_SOCK_OFF,
 *                          ntbx/fabric.h)
 *   [64 KiB + r * 1 MiB)   bypass ring r (r < QP_FWD_RINGS = 8, each
 *                          QP_FWD_RING_SIZE): frames Y sends to X, same
 *                          record format as a queue-pair ring, each
 *                          record a QP_T_FRAME: struct qp_frame + payload.
 *
 * Bypass ring r is single-consumer (X's transfer thread r % K) and
 * multi-producer (any process of Y, and Y's transfer threads): producers
 * serialise on a robust, process-shared mutex kept in Y's own block
 * (fwd_block.pl[r]), so a producer that dies holding it cannot block the
 * others (EOWNERDEAD: its half-written frame was never published, the next
 * producer writes over it).
 *
 * A frame carries the destination's record position, so delivery can
 * happen in any order and from any thread: the destination reader only
 * ever looks at its next position.  Credits are end to end: the
 * destination's reader sends ACK frames back to the source.  Push is not
 * used over more than one hop: the bypass ring is the intermediate copy
 * forwarding needs anyway.
 *
 * Deadlock: transit frames need only their own room in the next ring;
 * frames injected by a source need room plus a bubble of two largest frames
 * (bubble flow control of ring networks), and a transfer thread never
 * blocks on a full next hop: it leaves the frame and serves its other rings.
 *
 * One process per node forwards: it holds an OFD write lock on
 * <fabric dir>/qp-fwd-<node>.lock, released by the kernel when the process
 * dies (forked children close their copy, see fwd_atfork_child).
 *
 * On a backend that maps no peer window the neighbour's block is written
 * by DMA (qp_dma.c, one writer per bypass ring and process): frames are
 * built in a private mirror of the ring and sent with their sequence word
 * last, control words go as small writes.  Each producer orders its own
 * writes (the device contract) and they are serialised by the ring's
 * lock, so the consumer, which reads only its next position, sees each
 * frame whole.  The sleep-flag pairs work as in qp/wait.c: the side that arms
 * waits for its flag to land, the side that publishes rings whenever what
 * it published may still be in flight.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ntbx/qp.h"
#include "qp/qp_int.h"
#include "util/util.h"

#define FWD_MAGIC 0x51465744u   /* "DWFQ" */
#define FWD_BUBBLE (2 * (QP_REC_HDR + 48 + QP_FWD_MAX_PAYLOAD + QP_LINE))
#define A64 __attribute__((aligned(64)))

struct fwd_block {
	/* written by the neighbour: its transfer thread count (0: none) */
	struct { uint32_t magic, nb_threads; } hdr A64;
	/* written by the neighbour as consumer of OUR frames in ITS ring r:
	 * its tail and sleep flag, and ack_epoch: OUR epoch as it last saw
	 * it, written after it reset its side of ring r for that epoch; we
	 * produce into ring r only while ack_epoch is our current epoch */
	struct { uint64_t tail; uint32_t armed, ack_epoch; } prem[QP_FWD_RINGS] A64;
	/* written by the neighbour as producer into OUR ring r; cpu: 1 + the
	 * CPU it last produced from (a wait-policy hint, any value harmless) */
	struct { uint32_t wants, cpu; } crem[QP_FWD_RINGS] A64;
	/* local only: one-time initialisation of the mutexes */
	struct { uint32_t state; int32_t pid; } init A64;
	/* local only: producer state of our frames into the neighbour's ring r;
	 * epoch: the neighbour's epoch this state is for (0: not yet used) */
	struct {
		pthread_mutex_t mu;
		uint64_t wpos, tail_seen;
		uint32_t armed_ack, wants_seq, epoch, cpu_told;
	} pl[QP_FWD_RINGS] A64;
	/* local only: consumer state of our ring r (transfer thread);
	 * epoch: the neighbour's epoch it is for (0: not yet used) */
	struct {
		uint64_t rpos, published;
		uint32_t wants_ack, armed_seq, epoch;
	} cl[QP_FWD_RINGS] A64;
};
_Static_assert(sizeof(struct fwd_block) <= QP_FWD_CTL, "fwd block");
_Static_assert(sizeof(struct fwd_block) <= NTBX_LINK_SOCK_OFF,
               "fwd block reaches the sockets layer's part of the link block");
_Static_assert(QP_FWD_CTL + QP_FWD_RINGS * QP_FWD_RING_SIZE <=
               NTBX_LINK_BLOCK_RING, "link block too small");

struct fwd_port {
	int ok;
	struct fwd_block *loc, *rem;   /* rem: NULL if not mapped (DMA) */
	uint8_t *locb, *remb;
	uint64_t roff;                 /* the neighbour's block in window 0 */
	struct qp_dout *dout[QP_FWD_RINGS];   /* DMA only, made on first use */
};

struct fwd_ctx {
	struct ntbx_fabric *f;
	struct ntbx_dev *dev;
	int node, nodes, nports;
	pthread_mutex_t mu;
	struct fwd_port port[2];
	/* forwarder */
	int lockfd;
	int nthreads;
	volatile int stop;
	pthread_t th[NTBX_QP_MAX_THREADS];
	int registered;
};

#define MAX_CTX 16
static struct fwd_ctx *ctxs[MAX_CTX];
static pthread_mutex_t ctxs_mu = PTHREAD_MUTEX_INITIALIZER;
static int lockfds[MAX_CTX];
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void fwd_atfork_child(void)
{
	/* the child must not keep the forwarder lock alive */
	for (int i = 0; i < MAX_CTX; i++)
		if (lockfds[i] > 0) {
			close(lockfds[i]);
			lockfds[i] = 0;
		}
	for (int i = 0; i < MAX_CTX; i++)
		if (ctxs[i]) {
			ctxs[i]->lockfd = -1;
			ctxs[i]->nthreads = 0;
		}
}

static void fwd_atfork_init(void)
{
	pthread_atfork(NULL, NULL, fwd_atfork_child);
}

static uint8_t *ring_of(uint8_t *blk, unsigned r)
{
	return blk + QP_FWD_CTL + (size_t)r * QP_FWD_RING_SIZE;
}

/* DMA only: the writer of ring r of the neighbour's block (and of its
 * control words), or NULL (out of memory). */
static struct qp_dout *rdout(struct fwd_ctx *c, int p, unsigned r)
{
	struct fwd_port *pp = &c->port[p];
	struct qp_dout *d = __atomic_load_n(&pp->dout[r], __ATOMIC_ACQUIRE);
	if (d)
		return d;
	pthread_mutex_lock(&c->mu);
	if (!pp->dout[r] &&
	    qp_dout_open(&d, c->dev, p, pp->roff,
	                 QP_FWD_CTL + (uint64_t)r * QP_FWD_RING_SIZE,
	                 QP_FWD_RING_SIZE) == 0)
		__atomic_store_n(&pp->dout[r], d, __ATOMIC_RELEASE);
	d = pp->dout[r];
	pthread_mutex_unlock(&c->mu);
	return d;
}

/*
 * Store a control word of the neighbour's block: through the window, or
 * by DMA (via ring r's writer; @sync: wait until it landed, for a sleep
 * flag that a re-check follows).
 */
#define REM_OFF(field) offsetof(struct fwd_block, field)
static void rem_put32(struct fwd_ctx *c, int p, unsigned r, size_t off,
                      uint32_t v, int sync)
{
	struct fwd_port *pp = &c->port[p];
	if (pp->rem) {
		__atomic_store_n((uint32_t *)((uint8_t *)pp->rem + off), v,
		                 __ATOMIC_RELEASE);
		return;
	}
	struct qp_dout *d = rdout(c, p, r);
	if (d && qp_dout_field(d, off, &v, sizeof v) == 0 && sync)
		qp_dout_flush(d);
}

static void rem_put64(struct fwd_ctx *c, int p, unsigned r, size_t off,
                      uint64_t v)
{
	struct fwd_port *pp = &c->port[p];
	if (pp->rem) {
		__atomic_store_n((uint64_t *)((uint8_t *)pp->rem + off), v,
		                 __ATOMIC_RELEASE);
		return;
	}
	struct qp_dout *d = rdout(c, p, r);
	if (d)
		qp_dout_field(d, off, &v, sizeof v);
}

/* What this process stored into the neighbour's block has landed (always,
 * through a window).  Taken before the fence that precedes the load of
 * the other side's sleep flag. */
static int rem_landed(struct fwd_ctx *c, int p, unsigned r)
{
	struct qp_dout *d = c->port[p].rem ? NULL : c->port[p].dout[r];
	return !d || qp_dout_idle(d);
}

static void block_init(struct fwd_block *b)
{
	uint64_t t0 = ntbx_now_ns();
	for (;;) {
		uint32_t st = __atomic_load_n(&b->init.state, __ATOMIC_ACQUIRE);
		if (st == 2)
			return;
		if (st == 0 || ntbx_now_ns() - t0 > 2000000000ull) {
			if (!__atomic_compare_exchange_n(&b->init.state, &st, 1, 0,
			                                 __ATOMIC_ACQ_REL,
			                                 __ATOMIC_RELAXED))
				continue;
			b->init.pid = getpid();
			pthread_mutexattr_t a;
			pthread_mutexattr_init(&a);
			pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
			pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
			for (unsigned r = 0; r < QP_FWD_RINGS; r++)
				pthread_mutex_init(&b->pl[r].mu, &a);
			pthread_mutexattr_destroy(&a);
			__atomic_store_n(&b->init.state, 2, __ATOMIC_RELEASE);
			return;
		}
		sched_yield();
	}
}

/* Map the link blocks of ports not yet mapped.  Returns ports ready. */
static int fwd_map(struct fwd_ctx *c)
{
	int ready = 0;
	for (int p = 0; p < c->nports; p++) {
		struct fwd_port *pp = &c->port[p];
		if (__atomic_load_n(&pp->ok, __ATOMIC_ACQUIRE)) {
			ready++;
			continue;
		}
		pthread_mutex_lock(&c->mu);
		if (!pp->ok) {
			uint64_t loff, size, roff;
			void *rem;
			int maps = ntbx_dev_maps_peer_windows(c->dev);
			if (ntbx_fabric_link_block_at(c->f, p, &loff, &rem, &roff,
			                              &size) == 0 &&
			    (rem || !maps) && size >= NTBX_LINK_BLOCK_RING &&
			    loff <= ntbx_mem_size(c->dev) &&
			    ntbx_mem_size(c->dev) - loff >= size) {
				pp->locb = (uint8_t *)ntbx_mem_base(c->dev) + loff;
				pp->loc = (struct fwd_block *)pp->locb;
				pp->remb = rem;
				pp->rem = rem;
				pp->roff = roff;
				block_init(pp->loc);
				__atomic_store_n(&pp->ok, 1, __ATOMIC_RELEASE);
			}
		}
		ready += pp->ok;
		pthread_mutex_unlock(&c->mu);
	}
	return ready;
}

static struct fwd_ctx *fwd_ctx(struct ntbx_fabric *f)
{
	for (int i = 0; i < MAX_CTX; i++) {
		struct fwd_ctx *c = __atomic_load_n(&ctxs[i], __ATOMIC_ACQUIRE);
		if (c && c->f == f)
			return c;
	}
	pthread_once(&atfork_once, fwd_atfork_init);
	pthread_mutex_lock(&ctxs_mu);
	struct fwd_ctx *c = NULL;
	for (int i = 0; i < MAX_CTX && !c; i++)
		if (ctxs[i] && ctxs[i]->f == f)
			c = ctxs[i];
	for (int i = 0; i < MAX_CTX && !c; i++)
		if (!ctxs[i]) {
			c = calloc(1, sizeof *c);
			if (!c)
				break;
			c->f = f;
			c->dev = ntbx_fabric_dev(f);
			c->node = ntbx_fabric_node(f);
			c->nodes = ntbx_fabric_nodes(f);
			c->nports = ntbx_port_count(c->dev);
			if (c->nports > 2)
				c->nports = 2;
			c->lockfd = -1;
			pthread_mutex_init(&c->mu, NULL);
			__atomic_store_n(&ctxs[i], c, __ATOMIC_RELEASE);
		}
	pthread_mutex_unlock(&ctxs_mu);
	return c;
}

/* ------------------------------------------------------------ produce */

/* Write one frame record: PAD if needed, frame header, payload, seq last. */
static uint64_t frame_put(uint8_t *ring, uint64_t wpos,
                          const struct qp_frame *fr, const void *payload,
                          uint32_t plen)
{
	uint32_t len = (uint32_t)sizeof *fr + plen;
	uint64_t rb = qp_rec_bytes(len);
	uint64_t pos = wpos & (QP_FWD_RING_SIZE - 1);
	if (pos + rb > QP_FWD_RING_SIZE) {
		qp_rec_write(ring, pos, wpos, QP_T_PAD, 0, 0, NULL, 0, -1);
		wpos += QP_FWD_RING_SIZE - pos;
		pos = 0;
	}
	memcpy(ring + pos + QP_REC_HDR, fr, sizeof *fr);
	if (plen)
		ntbx_copy(ring + pos + QP_REC_HDR + sizeof *fr, payload, plen);
	qp_rec_write(ring, pos, wpos, QP_T_FRAME, 0, 0, NULL, len, -1);
	return wpos + rb;
}

/* DMA only: send the frame that frame_put wrote at @wpos into the mirror
 * (a PAD first if it took one), sequence words last. */
static int frame_send(struct qp_dout *d, uint64_t wpos, uint32_t len)
{
	uint64_t pos = wpos & (QP_FWD_RING_SIZE - 1);
	int rc = 0;
	if (pos + qp_rec_bytes(len) > QP_FWD_RING_SIZE) {
		rc = qp_dout_rec(d, pos, QP_REC_HDR, -1);
		pos = 0;
	}
	return rc < 0 ? rc : qp_dout_rec(d, pos, QP_REC_HDR + len, -1);
}

/* The doorbell plan (ntbx/doorbell.h) covers the device's bits exactly
 * and has one transfer-thread bit per forwarding ring and thread. */
_Static_assert((NTBX_DB_CONTROL_MASK | NTBX_DB_XFER_MASK | NTBX_DB_QP_MASK)
               == NTBX_DB_VALID_MASK &&
               !(NTBX_DB_CONTROL_MASK & NTBX_DB_XFER_MASK) &&
               !(NTBX_DB_XFER_MASK & NTBX_DB_QP_MASK) &&
               QP_FWD_RINGS <= NTBX_DB_XFER_COUNT &&
               NTBX_QP_MAX_THREADS <= NTBX_DB_XFER_COUNT, "doorbell plan");

static uint32_t ring_bit(unsigned r)
{
	return 1u << (NTBX_DB_XFER_FIRST + r);
}

/*
 * Put a frame into ring r of the neighbour across port p.  transit: only
 * room for the frame is needed (else room plus the bubble).  Returns 0,
 * -EAGAIN (nonblock and full), -ECONNRESET (neighbour died), -EPROTO.
 */
static int fwd_produce(struct fwd_ctx *c, int p, unsigned r,
                       const struct qp_frame *fr, const void *payload,
                       int transit, int nonblock)
{
	struct fwd_port *pp = &c->port[p];
	uint32_t plen = fr->rtype == QP_T_DATA ? fr->rlen : 0;
	struct qp_dout *d = pp->rem ? NULL : rdout(c, p, r);
	if (!pp->rem && !d)
		return -ENOMEM;
	uint8_t *ring = d ? qp_dout_ring(d) : ring_of(pp->remb, r);
	__typeof__(pp->loc->pl[0]) *pl = &pp->loc->pl[r];
	for (;;) {
		int lrc = ntbx_shared_lock(&pl->mu, NULL);
		if (lrc < 0)
			return ntbx_err(EIO, "queue pair forwarder: the lock of "
			                "bypass ring %u on port %d could not be "
			                "taken (%s)", r, p, lrc == -ETIMEDOUT
			                ? "held for over 2 s" : "corrupt");
		/* A neighbour that restarted has a new epoch and empty rings:
		 * start over at position 0 once its bring-up is done, and
		 * write only after its consumer acknowledged our epoch. */
		int peer = ntbx_port_peer_node(c->dev, p);
		uint32_t pe = ntbx_node_epoch(c->dev, peer);
		if (pl->epoch != pe) {
			if (ntbx_fabric_link_ready(c->f, p) <= 0) {
				pthread_mutex_unlock(&pl->mu);
				if (nonblock || (c->stop && transit))
					return -EAGAIN;
				if (ntbx_link_is_up(c->dev, p) <= 0)
					return -ECONNRESET;
				ntbx_db_wait(c->dev, 1ull << p, NTBX_DB_CONTROL_MASK, 10);
				continue;
			}
			if (pl->epoch) {
				pl->wpos = pl->tail_seen = 0;
				pl->armed_ack = pl->wants_seq = 0;
				__atomic_store_n(&pp->loc->prem[r].tail, 0,
				                 __ATOMIC_RELEASE);
			}
			pl->epoch = pe;
		}
		int acked = __atomic_load_n(&pp->loc->prem[r].ack_epoch,
		                            __ATOMIC_ACQUIRE) ==
		            ntbx_node_epoch(c->dev, c->node);
		uint64_t tail = __atomic_load_n(&pp->loc->prem[r].tail,
		                                __ATOMIC_ACQUIRE);
		if ((int64_t)(tail - pl->tail_seen) < 0 ||
		    (int64_t)(pl->wpos - tail) < 0 ||
		    pl->wpos - tail > QP_FWD_RING_SIZE || (tail & (QP_LINE - 1))) {
			pthread_mutex_unlock(&pl->mu);
			ntbx_log(NTBX_LOG_WARN, "qp forwarder: bad credits from "
			         "port %d ring %u", p, r);
			return -EPROTO;
		}
		pl->tail_seen = tail;
		uint64_t fr_room = QP_FWD_RING_SIZE - (pl->wpos - tail);
		uint64_t need = qp_tx_need(QP_FWD_RING_SIZE, pl->wpos,
		                           (uint32_t)sizeof *fr + plen) +
		                (transit ? 0 : FWD_BUBBLE);
		if (acked && fr_room >= need) {
			uint64_t w0 = pl->wpos;
			pl->wpos = frame_put(ring, pl->wpos, fr, payload, plen);
			/* where we produce from: the consumer does not spin
			 * for a producer on its own CPU (the wait policy); a
			 * hint, not sent on a DMA-only backend */
			int cpu = sched_getcpu();
			if (pp->rem && cpu >= 0 &&
			    (uint32_t)cpu + 1 != pl->cpu_told) {
				pl->cpu_told = (uint32_t)cpu + 1;
				__atomic_store_n(&pp->rem->crem[r].cpu, pl->cpu_told,
				                 __ATOMIC_RELAXED);
			}
			if (d && frame_send(d, w0, (uint32_t)sizeof *fr + plen) < 0) {
				pthread_mutex_unlock(&pl->mu);
				return -ECONNRESET;
			}
			int landed = !d || qp_dout_idle(d);
			__atomic_thread_fence(__ATOMIC_SEQ_CST);
			uint32_t a = __atomic_load_n(&pp->loc->prem[r].armed,
			                             __ATOMIC_ACQUIRE);
			/* DMA only: a frame maybe still in flight rings anyway
			 * (the doorbell lands after it) */
			int ring_it = a != pl->armed_ack || !landed;
			pl->armed_ack = a;
			pthread_mutex_unlock(&pl->mu);
			if (ring_it)
				ntbx_peer_db_set(c->dev, p, ring_bit(r));
			return 0;
		}
		uint32_t ws = ++pl->wants_seq;
		pthread_mutex_unlock(&pl->mu);
		if (nonblock)
			return -EAGAIN;
		/* wait for the consumer to free room: it rings bit 1+r */
		struct ntbx_db_waiter w;
		int prc = ntbx_db_wait_prepare(c->dev, &w, 1ull << p, ring_bit(r));
		rem_put32(c, p, r, REM_OFF(crem[r].wants), ws, 1);
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		tail = __atomic_load_n(&pp->loc->prem[r].tail, __ATOMIC_ACQUIRE);
		int again = QP_FWD_RING_SIZE - (pl->wpos - tail) >= need;
		if (!again && prc == 0)
			ntbx_db_wait_commit(c->dev, &w, 100);
		if (prc == 0)
			ntbx_db_wait_finish(c->dev, &w);
		if (ntbx_link_is_up(c->dev, p) <= 0)
			return -ECONNRESET;
		if (c->stop && transit)
			return -EAGAIN;
	}
}

int qp_fwd_inject(struct ntbx_fabric *f, int port, const struct qp_frame *fr,
                  const void *payload, int nonblock, int src_hint)
{
	struct fwd_ctx *c = fwd_ctx(f);
	if (!c || port < 0 || port >= c->nports)
		return -EINVAL;
	if (fr->rtype == QP_T_DATA && fr->rlen > QP_FWD_MAX_PAYLOAD)
		return -EMSGSIZE;
	fwd_map(c);
	if (!c->port[port].ok)
		return ntbx_err(ENOLINK, "queue pair: link on port %d not ready",
		                port);
	uint32_t k = __atomic_load_n(&c->port[port].loc->hdr.nb_threads,
	                             __ATOMIC_ACQUIRE);
	if (k > QP_FWD_RINGS)
		k = QP_FWD_RINGS;
	unsigned r = k ? (unsigned)src_hint % k : 0;
	return fwd_produce(c, port, r, fr, payload, 0, nonblock);
}

/* ------------------------------------------------------------ deliver */

/* A wait-policy hint (util.h, ntbx_spin_begin_for): store 1 + this
 * thread's CPU into @w, the word a waiter reads to tell whether the thread
 * that serves it last ran on its own CPU (then it sleeps at once instead
 * of spinning: that thread cannot run before it gives the CPU up).
 * sched_getcpu() reads the rseq area; the line is written only when the
 * value changes. */
static void cpu_tell(uint32_t *w)
{
	int cpu = sched_getcpu();
	if (cpu >= 0 && __atomic_load_n(w, __ATOMIC_RELAXED) != (uint32_t)cpu + 1)
		__atomic_store_n(w, (uint32_t)cpu + 1, __ATOMIC_RELAXED);
}

int qp_fwd_deliver_mem(uint8_t *mem, uint64_t msz, const struct qp_frame *fr,
                       const uint8_t *payload, int *wake_port, uint32_t *wake_bit)
{
	*wake_port = -1;
	uint64_t off = fr->dst_off;
	if ((off & (QP_LINE - 1)) || off > msz || msz - off < QP_HALF_HDR)
		return -EPROTO;
	struct qp_half *h = (struct qp_half *)(mem + off);
	if (__atomic_load_n(&h->id.magic, __ATOMIC_ACQUIRE) != QP_MAGIC ||
	    h->id.cookie != fr->dst_cookie || h->id.peer_node != fr->src_node ||
	    h->id.hops < 2)
		return -EPROTO;
	uint32_t size = h->id.ring_size;
	if (size < NTBX_QP_MIN_RING || size > NTBX_QP_MAX_RING ||
	    (size & (size - 1)) || msz - off - QP_HALF_HDR < size)
		return -EPROTO;
	uint8_t *ring = (uint8_t *)h + QP_HALF_HDR;
	uint32_t bit = 1u << (h->id.db_bit & 15);
	int wport = h->id.wake_port;
	int wake = 0;
	switch (fr->rtype) {
	case QP_T_DATA:
	case QP_T_PAD:
	case QP_T_EOF: {
		uint64_t pos = fr->pos, p = pos & (size - 1);
		uint64_t rpos = __atomic_load_n(&h->rx.rpos, __ATOMIC_ACQUIRE);
		uint32_t len = fr->rtype == QP_T_DATA ? fr->rlen : 0;
		uint64_t rb = fr->rtype == QP_T_PAD ? size - p : qp_rec_bytes(len);
		if ((pos & (QP_LINE - 1)) || len > QP_FWD_MAX_PAYLOAD ||
		    len > qp_max_payload(size) || p + rb > size ||
		    (int64_t)(pos - rpos) < 0 || pos + rb - rpos > size ||
		    (fr->rtype != QP_T_DATA && (fr->rlen || fr->rflags || fr->raux)) ||
		    (fr->rtype == QP_T_PAD && p == 0) || (fr->rflags & ~QP_F_MORE))
			return -EPROTO;
		/* a queue pair more than a hop long: its reader zeroes */
		qp_rec_write(ring, p, pos, fr->rtype, fr->rflags, fr->raux,
		             payload, len, -1);
		cpu_tell(&h->pw.cpu);
		wake = __atomic_exchange_n(&h->self.rx_armed, 0, __ATOMIC_SEQ_CST);
		break;
	}
	case QP_T_ACK: {
		uint64_t cur = __atomic_load_n(&h->pr.tx_tail, __ATOMIC_RELAXED);
		while ((int64_t)(fr->pos - cur) > 0 &&
		       !__atomic_compare_exchange_n(&h->pr.tx_tail, &cur, fr->pos,
		                                    0, __ATOMIC_RELEASE,
		                                    __ATOMIC_RELAXED))
			;
		cpu_tell(&h->pr.cpu);
		wake = __atomic_exchange_n(&h->self.tx_armed, 0, __ATOMIC_SEQ_CST);
		break;
	}
	case QP_T_CLOSE:
		__atomic_store_n(&h->peer_closed, fr->pos + 1, __ATOMIC_RELEASE);
		__atomic_store_n(&h->self.rx_armed, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&h->self.tx_armed, 0, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		wake = 1;
		break;
	default:
		return -EPROTO;
	}
	if (wake) {
		*wake_port = wport;
		*wake_bit = bit;
	}
	return 0;
}

int qp_fwd_deliver(struct ntbx_fabric *f, const struct qp_frame *fr,
                   const uint8_t *payload)
{
	struct ntbx_dev *dev = ntbx_fabric_dev(f);
	int port;
	uint32_t bit = 0;
	int rc = qp_fwd_deliver_mem(ntbx_mem_base(dev), ntbx_mem_size(dev), fr,
	                            payload, &port, &bit);
	if (rc == 0 && port >= 0)
		ntbx_db_local_set(dev, port, bit);
	return rc;
}

/* ------------------------------------------------------------ threads */

struct fwd_thread {
	struct fwd_ctx *c;
	unsigned t;
};

/* Rings served by thread t of k. */
static int serves(unsigned r, unsigned t, unsigned k)
{
	return r % k == t;
}

/*
 * Drain ring r of port p: deliver or pass on each frame.  Returns frames
 * handled; *blocked set if a frame waits for room in the next hop.
 */
static int fwd_drain(struct fwd_ctx *c, int p, unsigned r, int *blocked)
{
	struct fwd_port *pp = &c->port[p];
	uint8_t *ring = ring_of(pp->locb, r);
	__typeof__(pp->loc->cl[0]) *cl = &pp->loc->cl[r];
	uint32_t pe = ntbx_node_epoch(c->dev, ntbx_port_peer_node(c->dev, p));
	if (cl->epoch != pe) {
		/* The neighbour restarted (or this is our first look): what its
		 * old incarnation left in ring r is void.  On a first look the
		 * ring is fresh from our bring-up and may already hold frames
		 * of the current incarnation, so it stays.
		 * The acknowledgement goes into the neighbour's link block, which
		 * its bring-up zeroes after its epoch is already visible: written
		 * before that, it would be wiped and the neighbour would never
		 * produce.  So acknowledge only once the link is ready for this
		 * epoch (its scratchpads are written after the zeroing); until
		 * then the ring is not served (the sleep slice retries). */
		if (ntbx_fabric_link_ready(c->f, p) <= 0)
			return 0;
		if (cl->epoch) {
			memset(ring, 0, QP_FWD_RING_SIZE);
			cl->rpos = cl->published = 0;
			cl->wants_ack = cl->armed_seq = 0;
			__atomic_store_n(&pp->loc->crem[r].wants, 0, __ATOMIC_RELAXED);
		}
		cl->epoch = pe;
		rem_put64(c, p, r, REM_OFF(prem[r].tail), cl->rpos);
		rem_put32(c, p, r, REM_OFF(prem[r].ack_epoch), pe, 0);
		ntbx_peer_db_set(c->dev, p, ring_bit(r));
	}
	int n = 0;
	while (n < 64) {
		struct qp_rec_hdr h;
		int rc = qp_ring_head(ring, QP_FWD_RING_SIZE, cl->rpos,
		                      QP_FWD_RING_SIZE / 4, &h);
		if (rc == 0)
			break;
		if (rc < 0 || (h.type != QP_T_FRAME && h.type != QP_T_PAD) ||
		    (h.type == QP_T_FRAME && h.len < sizeof(struct qp_frame))) {
			ntbx_log(NTBX_LOG_WARN, "qp forwarder: corrupt bypass ring "
			         "%u from port %d; ignoring that neighbour", r, p);
			__atomic_store_n(&pp->ok, 0, __ATOMIC_RELEASE);
			return n;
		}
		uint64_t pos = cl->rpos & (QP_FWD_RING_SIZE - 1);
		uint64_t rb = h.type == QP_T_PAD ? QP_FWD_RING_SIZE - pos
		                                 : qp_rec_bytes(h.len);
		if (h.type == QP_T_FRAME) {
			struct qp_frame fr;
			memcpy(&fr, ring + pos + QP_REC_HDR, sizeof fr);
			const uint8_t *pl = ring + pos + QP_REC_HDR + sizeof fr;
			uint32_t plen = h.len - (uint32_t)sizeof fr;
			if ((fr.rtype == QP_T_DATA ? fr.rlen : 0) != plen) {
				ntbx_log(NTBX_LOG_DEBUG, "qp forwarder: bad frame");
			} else if ((int)fr.dst_node == c->node) {
				if (qp_fwd_deliver(c->f, &fr, pl) < 0)
					ntbx_log(NTBX_LOG_DEBUG, "qp forwarder: frame "
					         "for no endpoint dropped");
			} else {
				int q = -1;
				int hops = (int)fr.dst_node < c->nodes
				           ? ntbx_fabric_route(c->f, (int)fr.dst_node, &q)
				           : -1;
				if (hops >= 1 && q >= 0 && q < c->nports &&
				    c->port[q].ok) {
					uint32_t k = __atomic_load_n(
						&c->port[q].loc->hdr.nb_threads,
						__ATOMIC_ACQUIRE);
					unsigned r2 = k && k <= QP_FWD_RINGS ? r % k : 0;
					rc = fwd_produce(c, q, r2, &fr, pl, 1, 1);
					if (rc == -EAGAIN) {
						*blocked = 1;
						break;
					}
				}
				/* no way on: dropped; the endpoints see the
				 * node die or time out on liveness */
			}
		}
		qp_ring_zero(ring, QP_FWD_RING_SIZE, cl->rpos, h.type == QP_T_PAD
		             ? QP_LINE : rb);
		cl->rpos += rb;
		n++;
	}
	int landed = 1;
	if (cl->rpos != cl->published) {
		rem_put64(c, p, r, REM_OFF(prem[r].tail), cl->rpos);
		cl->published = cl->rpos;
		landed = rem_landed(c, p, r);
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
	}
	uint32_t wants = __atomic_load_n(&pp->loc->crem[r].wants, __ATOMIC_ACQUIRE);
	/* DMA only: credits maybe still in flight ring anyway */
	if (wants != cl->wants_ack || !landed) {
		cl->wants_ack = wants;
		ntbx_peer_db_set(c->dev, p, ring_bit(r));
	}
	return n;
}

static int fwd_pending(struct fwd_ctx *c, unsigned t, unsigned k)
{
	for (int p = 0; p < c->nports; p++) {
		struct fwd_port *pp = &c->port[p];
		if (!pp->ok)
			continue;
		for (unsigned r = 0; r < QP_FWD_RINGS; r++) {
			if (!serves(r, t, k))
				continue;
			uint64_t pos = pp->loc->cl[r].rpos & (QP_FWD_RING_SIZE - 1);
			if (__atomic_load_n((uint32_t *)(ring_of(pp->locb, r) + pos),
			                    __ATOMIC_ACQUIRE))
				return 1;
		}
	}
	return 0;
}

/* This thread's CPU if a producer into one of the rings it serves last
 * produced from it (the wait policy does not spin for a producer that
 * cannot run before we give the CPU up), else -1. */
static int near_cpu(struct fwd_ctx *c, unsigned t, unsigned k)
{
	int cpu = sched_getcpu();
	if (cpu < 0)
		return -1;
	for (int p = 0; p < c->nports; p++) {
		struct fwd_port *pp = &c->port[p];
		if (!pp->ok)
			continue;
		for (unsigned r = t; r < QP_FWD_RINGS; r += k)
			if (__atomic_load_n(&pp->loc->crem[r].cpu,
			                    __ATOMIC_RELAXED) == (uint32_t)cpu + 1)
				return cpu;
	}
	return -1;
}

static void *fwd_thread(void *arg)
{
	struct fwd_thread *ft = arg;
	struct fwd_ctx *c = ft->c;
	unsigned t = ft->t, k = (unsigned)c->nthreads;
	free(ft);
	char name[16];   /* for perf sched, top -H and gdb */
	snprintf(name, sizeof name, "ntbx-fwd%u", t);
	pthread_setname_np(pthread_self(), name);
	uint32_t bits = 0;
	for (unsigned r = 0; r < QP_FWD_RINGS; r++)
		if (serves(r, t, k))
			bits |= ring_bit(r);
	/* Our own waiter slot: the handle's is shared by every thread of the
	 * process that sleeps, and a ring of any bit wakes them all (a frame
	 * for the other transfer threads, a queue pair's doorbell).  Without
	 * one (no free slot), the handle's. */
	struct ntbx_db_wake *own = NULL;
	if (ntbx_db_sleeper_open(c->dev, &own) < 0)
		own = NULL;
	struct ntbx_spin spin = { 0 };   /* wait policy (util.h) */
	uint64_t spin_ns = 0;
	int idle = 0;
	uint64_t idle_since = ntbx_now_ns();
	int announce = 1;
	while (!c->stop) {
		if (announce && t == 0) {
			/* tell the neighbours how many rings we serve (again
			 * each idle slice, for neighbours that restarted) */
			fwd_map(c);
			for (int p = 0; p < c->nports; p++)
				if (c->port[p].ok) {
					rem_put32(c, p, 0, REM_OFF(hdr.nb_threads),
					          k, 0);
					rem_put32(c, p, 0, REM_OFF(hdr.magic),
					          FWD_MAGIC, 0);
				}
		}
		announce = 0;
		int work = 0, blocked = 0;
		for (int p = 0; p < c->nports; p++) {
			struct fwd_port *pp = &c->port[p];
			if (!pp->ok)
				continue;
			for (unsigned r = 0; r < QP_FWD_RINGS; r++)
				if (serves(r, t, k))
					work += fwd_drain(c, p, r, &blocked);
		}
		uint64_t now = ntbx_now_ns();
		if (work) {
			if (idle)
				ntbx_spin_end(&spin, now - idle_since, 0);
			idle = 0;
			idle_since = now;
			continue;
		}
		if (!idle) {
			idle = 1;
			idle_since = now;
			spin_ns = ntbx_spin_begin_for(&spin, near_cpu(c, t, k),
			                              now);
		}
		if (now - idle_since < spin_ns) {
			ntbx_cpu_relax();
			continue;
		}
		/* sleep: arm on every ring we serve, re-check, commit */
		struct ntbx_db_waiter w;
		uint64_t pmask = (1ull << c->nports) - 1;
		int prc = ntbx_db_wait_prepare_own(c->dev, own, &w, pmask, bits);
		for (int p = 0; p < c->nports; p++) {
			struct fwd_port *pp = &c->port[p];
			ntbx_db_clear(c->dev, p, bits);
			if (!pp->ok)
				continue;
			for (unsigned r = 0; r < QP_FWD_RINGS; r++)
				if (serves(r, t, k))
					rem_put32(c, p, r, REM_OFF(prem[r].armed),
					          ++pp->loc->cl[r].armed_seq, 1);
		}
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		if (!fwd_pending(c, t, k) && !c->stop && prc == 0)
			ntbx_db_wait_commit(c->dev, &w, blocked ? 10 : 100);
		if (prc == 0)
			ntbx_db_wait_finish(c->dev, &w);
		now = ntbx_now_ns();
		ntbx_spin_end(&spin, now - idle_since, 1);
		idle = 0;
		idle_since = now;
		announce = 1;
	}
	ntbx_db_wake_close(c->dev, own);
	return NULL;
}

static void fwd_stop_ctx(struct fwd_ctx *c)
{
	if (c->nthreads <= 0)
		return;
	c->stop = 1;
	for (int p = 0; p < c->nports; p++)
		ntbx_db_local_set(c->dev, p, NTBX_DB_XFER_MASK);
	for (int i = 0; i < c->nthreads; i++)
		pthread_join(c->th[i], NULL);
	for (int p = 0; p < c->nports; p++)
		if (c->port[p].ok)
			rem_put32(c, p, 0, REM_OFF(hdr.nb_threads), 0, 1);
	c->nthreads = 0;
	if (c->lockfd >= 0) {
		for (int i = 0; i < MAX_CTX; i++)
			if (lockfds[i] == c->lockfd)
				lockfds[i] = 0;
		close(c->lockfd);
		c->lockfd = -1;
	}
	c->stop = 0;
}

static void fwd_on_leave(void *arg)
{
	struct fwd_ctx *c = arg;
	fwd_stop_ctx(c);
	pthread_mutex_lock(&ctxs_mu);
	for (int i = 0; i < MAX_CTX; i++)
		if (ctxs[i] == c)
			ctxs[i] = NULL;
	pthread_mutex_unlock(&ctxs_mu);
	for (int p = 0; p < 2; p++)
		for (unsigned r = 0; r < QP_FWD_RINGS; r++)
			qp_dout_close(c->port[p].dout[r]);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

static int fwd_register(struct fwd_ctx *c)
{
	if (c->registered)
		return 0;
	int rc = ntbx_fabric_on_leave(c->f, fwd_on_leave, c);
	if (rc == 0)
		c->registered = 1;
	return rc;
}

int ntbx_qp_forwarder_start(struct ntbx_fabric *f, int nthreads)
{
	if (ntbx_fabric_topology(f) != NTBX_TOPO_RING)
		return 0;
	if (nthreads < 1 || nthreads > NTBX_QP_MAX_THREADS)
		return ntbx_err(EINVAL, "queue pair forwarder: 1..%d threads",
		                NTBX_QP_MAX_THREADS);
	struct fwd_ctx *c = fwd_ctx(f);
	if (!c)
		return -ENOMEM;
	int rc = fwd_register(c);
	if (rc < 0)
		return rc;
	if (c->nthreads)
		return 1;
	char file[64];
	snprintf(file, sizeof file, "qp-fwd-%d.lock", c->node);
	int fd = ntbx_fabric_open_file(ntbx_fabric_name(f), file,
	                               O_RDWR | O_CREAT, 0);
	if (fd < 0)
		return fd;
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	if (fcntl(fd, F_OFD_SETLK, &fl) < 0) {
		close(fd);
		return 0;   /* another process of this node forwards */
	}
	pthread_mutex_lock(&ctxs_mu);
	for (int i = 0; i < MAX_CTX; i++)
		if (!lockfds[i]) {
			lockfds[i] = fd;
			break;
		}
	pthread_mutex_unlock(&ctxs_mu);
	c->lockfd = fd;
	c->stop = 0;
	c->nthreads = nthreads;
	fwd_map(c);
	for (int i = 0; i < nthreads; i++) {
		struct fwd_thread *ft = malloc(sizeof *ft);
		if (ft) {
			ft->c = c;
			ft->t = (unsigned)i;
		}
		if (!ft || pthread_create(&c->th[i], NULL, fwd_thread, ft)) {
			free(ft);
			c->nthreads = i;
			fwd_stop_ctx(c);
			return -ENOMEM;
		}
	}
	return 1;
}

void ntbx_qp_forwarder_stop(struct ntbx_fabric *f)
{
	for (int i = 0; i < MAX_CTX; i++) {
		struct fwd_ctx *c = __atomic_load_n(&ctxs[i], __ATOMIC_ACQUIRE);
		if (c && c->f == f)
			fwd_stop_ctx(c);
	}
}
