/* SPDX-License-Identifier: MIT */
/*
 * Queue pairs, private to the handle's files: the handle (struct ntbx_qp),
 * the helpers they share, inline, and what each exports to the others.
 * qp.c owns set-up, mapping, reaping and close; writer.c the writer
 * (records, pushes, credits seen); reader.c the reader (the receive core
 * on our ring, credits returned); wait.c waiting, readiness and sleeping in
 * event loops.  The shared-memory layout is in qp_int.h.
 */
#ifndef NTBX_QP_HANDLE_H
#define NTBX_QP_HANDLE_H

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "ntbx/fabric.h"
#include "ntbx/qp.h"
#include "qp/qp_int.h"
#include "util/util.h"

struct ntbx_qp {
	struct ntbx_fabric *f;
	struct ntbx_dev *dev;
	struct qp_half *h;        /* our endpoint, in our node memory */
	uint8_t *ring;            /* our receive ring */
	uint64_t off;             /* our endpoint's offset */
	uint8_t *mem;             /* our node memory */
	uint64_t mem_size;
	/*
	 * Geometry and identity, fixed when the handle is made (create,
	 * attach) or connected, and never read from shared memory again: the
	 * peer can write into our half, so a size or offset it changed later
	 * must not steer our loads and stores (DESIGN.md, trust boundaries).
	 */
	int node, peer_node, hops, port, wake_port;
	int wz;                   /* the writer of each ring zeroes the lines
	                           * of large records (qp_int.h, the record
	                           * header): on one host, one hop or less */
	uint32_t bit;             /* doorbell bit of our endpoint */
	uint32_t size;            /* our receive ring's size */
	uint32_t flags;           /* NTBX_QP_* */
	uint64_t cookie;
	/* peer (after connect/attach) */
	uint64_t peer_off, peer_cookie;
	uint32_t peer_epoch, pbit;
	int pkey;                 /* wake key of the peer's endpoint, which
	                           * our one-host rings name (qp_ring_peer) */
	int mapped;               /* stored (release) once qp_map_peer has
	                           * filled the peer's fields: a thread that
	                           * loads it set (acquire, qp_ready) may use
	                           * them without a lock (a poll beside the
	                           * reader and the writer) */
	struct qp_half *ph;       /* peer endpoint, through the window (hops <= 1) */
	struct qp_dout *dout;     /* or, on a backend that maps no peer window,
	                           * written by DMA (qp_dma.c); pring is then
	                           * its private mirror of the peer's ring */
	uint8_t *pstage;          /* DMA only: a push reservation's bytes */
	size_t pstage_size;
	uint8_t *pring;
	uint32_t psize, pmax;     /* peer ring size, largest record payload */
	struct qp_zmap *zm;       /* wz: which lines of the peer's ring our
	                           * writer zeroes (qp_int.h), made at map */
	uint8_t *win;             /* outbound window 0 (own memory on loopback) */
	uint64_t win_size;
	struct ntbx_spin spin;   /* wait policy, learned per queue pair */
	struct ntbx_db_wake *sleeper;   /* its waiter's own slot, or NULL */
	uint32_t cpu_told;        /* 1 + our CPU as last written to the peer */
	uint32_t cpu_told_cr;     /* the same, with credits (pr.cpu) */
	int peer_dead;            /* cached: the peer node died (atomic:
	                           * polls read it from any thread) */
	/* zero-copy receive: a ring record handed out, not yet consumed */
	int zc_held;
	uint64_t zc_rpos;
	struct qp_rec_hdr zc_h;   /* as validated when it was handed out */
	/* zero-copy send: room reserved in the peer's memory */
	int resv;                 /* 0 none, RESV_RING, RESV_PUSH */
	int resv_pad;             /* ring: a PAD goes first, the record at 0 */
	int resv_adv_skip;        /* ring: the advert for this message is unused */
	uint64_t resv_rec;        /* ring: the record's position */
	size_t resv_max;
	struct qp_adv resv_adv;   /* push: the peer's buffer */
	uint64_t resv_wpos;       /* ring: the write index it was made at */
	/*
	 * Working copies of the reader and writer state.  The authoritative
	 * copy lives in our half (h->rx, h->tx), so another process of the
	 * node that attaches continues where we stopped; but the peer can
	 * write there too.  Each call loads it once into these (rx_load,
	 * tx_load), works only on the copy, whose every field the code checks
	 * before use, and stores it back (rx_store, tx_store).  A peer that
	 * scribbles on h->rx or h->tx fails the queue pair; it cannot make a
	 * check and the use after it see two different values.
	 */
	struct qp_rxs rx;         /* reader thread only */
	struct qp_txs tx;         /* writer thread only */
};
enum { RESV_RING = 1, RESV_PUSH = 2 };

#define SLICE_MS 100

static inline int qp_error(struct ntbx_qp *qp)
{
	uint32_t st = __atomic_load_n(&qp->h->conn.state, __ATOMIC_ACQUIRE);
	if (st & QP_ST_FAILED) {
		int e = __atomic_load_n(&qp->h->conn.error, __ATOMIC_RELAXED);
		return e ? e : -EPROTO;
	}
	return 0;
}

static inline int qp_fail(struct ntbx_qp *qp, int err)
{
	int32_t zero = 0;
	int first = __atomic_compare_exchange_n(&qp->h->conn.error, &zero, err, 0,
	                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED);
	__atomic_fetch_or(&qp->h->conn.state, QP_ST_FAILED, __ATOMIC_RELEASE);
	if (err == -EPROTO) {
		/* logged once, by whoever failed the queue pair */
		ntbx_err(EPROTO, "queue pair with node %d failed: the peer broke "
		         "the protocol (corrupt data in shared memory, or a "
		         "message stopped halfway)", qp->peer_node);
		if (first)
			ntbx_log(NTBX_LOG_WARN, "%s", ntbx_errmsg());
	}
	return qp_error(qp);
}

/* Every node strictly between @from and @to on the route is alive. */
static inline int path_alive(struct ntbx_qp *qp, int from, int to)
{
	for (int x = ntbx_fabric_next_hop(qp->f, from, to); x >= 0 && x != to;
	     x = ntbx_fabric_next_hop(qp->f, x, to))
		if (ntbx_node_alive(qp->dev, x) <= 0)
			return 0;
	return 1;
}

/* The peer is alive (same epoch as when we connected), and so are the
 * nodes between us on both ways: routes need not be symmetric. */
static inline int qp_peer_alive(struct ntbx_qp *qp)
{
	if (__atomic_load_n(&qp->peer_dead, __ATOMIC_RELAXED))
		return 0;
	if (qp->hops == 0)
		return 1;
	int alive = ntbx_node_alive(qp->dev, qp->peer_node) > 0 &&
	            ntbx_node_epoch(qp->dev, qp->peer_node) == qp->peer_epoch;
	if (alive && qp->hops > 1)
		alive = path_alive(qp, qp->node, qp->peer_node) &&
		        path_alive(qp, qp->peer_node, qp->node);
	if (!alive)
		__atomic_store_n(&qp->peer_dead, 1, __ATOMIC_RELAXED);
	return alive;
}

/*
 * Snapshot of the reader state (see struct ntbx_qp).  The posted-buffer
 * list is most of its bytes and only means something while buffers are
 * posted, so it is copied only then (a stream of a socket never posts):
 * an empty list's slots are never read.
 */
#define RX_HOT offsetof(struct qp_rxs, posted)
static inline void rx_load(struct ntbx_qp *qp)
{
	memcpy(&qp->rx, (const void *)&qp->h->rx, RX_HOT);
	if (qp->rx.post_head != qp->rx.post_tail)
		memcpy(qp->rx.posted, (const void *)qp->h->rx.posted,
		       sizeof qp->rx.posted);
}

static inline void rx_store(struct ntbx_qp *qp)
{
	memcpy((void *)&qp->h->rx, &qp->rx, RX_HOT);
	if (qp->rx.post_head != qp->rx.post_tail)
		memcpy((void *)qp->h->rx.posted, qp->rx.posted,
		       sizeof qp->rx.posted);
}

/*
 * Snapshot of the writer state, checked: the write index and the credits
 * seen are record boundaries and the peer's ring holds what lies between
 * them.  0, or the queue pair fails with -EPROTO.
 */
static inline int tx_load(struct ntbx_qp *qp)
{
	memcpy(&qp->tx, (const void *)&qp->h->tx, sizeof qp->tx);
	const struct qp_txs *t = &qp->tx;
	if (!qp->mapped)
		return 0;   /* not connected: nothing is used yet */
	if ((t->wpos | t->tail_seen) & (QP_LINE - 1) ||
	    (int64_t)(t->wpos - t->tail_seen) < 0 ||
	    t->wpos - t->tail_seen > qp->psize || !t->adv_next)
		return qp_fail(qp, -EPROTO);
	return 0;
}

static inline void tx_store(struct ntbx_qp *qp)
{
	memcpy((void *)&qp->h->tx, &qp->tx, sizeof qp->tx);
}

/* Room our writer needs at @wpos for a record of @len payload bytes
 * (writer thread only: it reads the zero map). */
static inline uint64_t tx_need(const struct ntbx_qp *qp, uint64_t wpos,
                               uint32_t len)
{
	return qp_zmap_need(qp->zm, qp->psize, wpos, len);
}

/* A receive-core context on the reader's working copy (rx_load first). */
static inline void qp_rx_ctx(struct ntbx_qp *qp, struct qp_rx *r)
{
	r->ring = qp->ring;
	r->size = qp->size;
	r->s = &qp->rx;
	r->mem = qp->mem;
	r->mem_size = qp->mem_size;
	r->wz = qp->wz;
	/* before any seq load: records before the close are then visible */
	r->peer_closed = __atomic_load_n(&qp->h->peer_closed, __ATOMIC_ACQUIRE);
}

/* Ring the peer's sleepers. */
static inline void qp_ring_peer(struct ntbx_qp *qp, struct qp_half *statp)
{
	uint32_t bits = 1u << qp->pbit;
	if (qp->hops == 0)
		ntbx_db_local_ring(qp->dev, 0, bits, qp->pkey);
	else if (qp->hops == 1)
		ntbx_peer_db_set(qp->dev, qp->port, bits);
	(void)statp;
}

/* Store @len bytes into field @off of the peer's half by DMA (qp->dout).
 * A failed DMA fails the queue pair: what the peer sees is unknown. */
static inline int ph_put(struct ntbx_qp *qp, size_t off, const void *v,
                         size_t len)
{
	int rc = qp_dout_field(qp->dout, off, v, len);
	return rc < 0 ? qp_fail(qp, -ECONNRESET) : 0;
}
#define PH_PUT(qp, field, val) do {                                       \
	__typeof__(((struct qp_half *)0)->field) v_ = (val);              \
	ph_put(qp, offsetof(struct qp_half, field), &v_, sizeof v_);      \
} while (0)

/* Store @val into @field of the peer's half: a store where the half is
 * mapped (qp->ph), a DMA where the backend maps no peer window. */
#define PH_STORE(qp, field, val, order) do {                             \
	if ((qp)->ph)                                                     \
		__atomic_store_n(&(qp)->ph->field, (val), order);         \
	else                                                              \
		PH_PUT(qp, field, val);                                   \
} while (0)

/* Tell the peer which CPU we run on (@field of its half), when it changed
 * since the last time (@told, 1 + the CPU): the hint of its wait policy,
 * which does not spin for a side that runs on its own CPU
 * (ntbx_qp_peer_cpu).  sched_getcpu() reads the rseq area: no system
 * call. */
#define PH_TELL_CPU(qp, told, field) do {                                 \
	int cpu_ = (qp)->ph || (qp)->dout ? sched_getcpu() : -1;          \
	if (cpu_ >= 0 && (uint32_t)cpu_ + 1 != (told)) {                  \
		(told) = (uint32_t)cpu_ + 1;                              \
		PH_STORE(qp, field, (told), __ATOMIC_RELAXED);            \
	}                                                                 \
} while (0)

/*
 * On a DMA-only backend the sides keep no sleep flags for each other
 * (qp_arm_dirs): a writer rings after every record it emits, a reader
 * after every credit it publishes, and the doorbell, which lands after
 * the stores it announces (the device contract), wakes the other side
 * only if it sleeps on that bit: the receiving end decides locally (on
 * the ofi backend, the receiving agent, which sees the doorbell as the
 * CQ data of the last write, qp_dout_rec).  A doorbell rung right after
 * a write rides on it there, so ringing always costs no extra operation.
 */
static inline int qp_dout_rings(const struct ntbx_qp *qp)
{
	return qp->dout != NULL;
}

static inline int ring_size_ok(uint32_t s)
{
	return s >= NTBX_QP_MIN_RING && s <= NTBX_QP_MAX_RING && !(s & (s - 1));
}

/*
 * Which bypass ring (so which transfer thread at each node) carries this
 * queue pair's frames: the same for both ends, from both cookies, so data
 * and the acknowledgements for it meet the same threads on their way (the
 * route is symmetric too, see ring_way).  Frames of one direction must
 * share a ring: CLOSE must not overtake the data before it.
 */
static inline int qp_fwd_hint(const struct ntbx_qp *qp)
{
	uint64_t x = qp->cookie ^ qp->peer_cookie;
	return (int)((x >> 8) & 0x7fffffff);
}

/* ------------------------------------------------ between the files */

enum { W_RX = 1, W_TX = 2 };
typedef int (*ready_fn)(struct ntbx_qp *, void *);

/* qp.c: a handle made before connect (in another process) maps. */
int qp_ready(struct ntbx_qp *qp);

/* wait.c: wait until @ready(@qp, @arg) holds, for @dir (W_RX, W_TX);
 * 0, -ETIMEDOUT, -EINTR (only with @intr), -ECONNRESET. */
int qp_wait_for(struct ntbx_qp *qp, ready_fn ready, void *arg, int dir,
                int timeout_ms, int intr);

/* writer.c */
int64_t qp_tx_free_peek(struct ntbx_qp *qp);
void qp_tx_kick(struct ntbx_qp *qp);
int qp_closed_err(struct ntbx_qp *qp);
int qp_tx_wait_space(struct ntbx_qp *qp, uint64_t need, int nonblock);
int qp_tx_emit(struct ntbx_qp *qp, uint16_t type, uint16_t flags,
               uint32_t aux, const void *payload, uint32_t len);

/* reader.c: publish credits (in batches, at once if @force or the peer's
 * writer waits). */
void qp_rx_credits(struct ntbx_qp *qp, int force);

/*
 * Every reader call works on a snapshot of the reader state (struct
 * ntbx_qp): load, the call, store.  RX_CALL wraps the body @call so that
 * no return path forgets the store.
 */
#define RX_CALL(qp, call) ({ rx_load(qp); __typeof__(call) r_ = (call); \
                             rx_store(qp); r_; })

#endif
