/* SPDX-License-Identifier: MIT */
/*
 * Queue pairs: endpoints, credits, waiting, push, close.
 *
 * The layout of an endpoint and who writes which field is in qp_int.h.
 * This file moves records: the writer stores into the peer's ring through
 * the outbound window (or, more than one hop away, hands frames to the ring
 * forwarder, fwd.c); the reader runs the receive core (ring.c) on its own
 * ring and returns credits in batches.  Doorbells are rung only when the
 * other side said it is going to sleep.
 */
#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

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
	uint32_t bit;             /* doorbell bit of our endpoint */
	uint32_t size;            /* our receive ring's size */
	uint32_t flags;           /* NTBX_QP_* */
	uint64_t cookie;
	/* peer (after connect/attach) */
	uint64_t peer_off, peer_cookie;
	uint32_t peer_epoch, pbit;
	int mapped;
	struct qp_half *ph;       /* peer endpoint, through the window (hops <= 1) */
	struct qp_dout *dout;     /* or, on a backend that maps no peer window,
	                           * written by DMA (qp_dma.c); pring is then
	                           * its private mirror of the peer's ring */
	uint8_t *pstage;          /* DMA only: a push reservation's bytes */
	size_t pstage_size;
	uint8_t *pring;
	uint32_t psize, pmax;     /* peer ring size, largest record payload */
	uint8_t *win;             /* outbound window 0 (own memory on loopback) */
	uint64_t win_size;
	struct ntbx_spin spin;   /* wait policy, learned per queue pair */
	struct ntbx_db_wake *sleeper;   /* its waiter's own slot, or NULL */
	uint32_t cpu_told;        /* 1 + our CPU as last written to the peer */
	uint32_t cpu_told_cr;     /* the same, with credits (pr.cpu) */
	int peer_dead;            /* cached: the peer node died */
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

static uint32_t qp_bit_of(uint64_t off)
{
	uint64_t x = (off >> 6) * 0x9e3779b97f4a7c15ull;
	return NTBX_DB_QP_FIRST + (uint32_t)((x >> 32) % NTBX_DB_QP_COUNT);
}

static int log2u(uint32_t v)
{
	int l = 0;
	while ((1u << l) < v)
		l++;
	return l;
}

static int qp_error(struct ntbx_qp *qp)
{
	uint32_t st = __atomic_load_n(&qp->h->conn.state, __ATOMIC_ACQUIRE);
	if (st & QP_ST_FAILED) {
		int e = __atomic_load_n(&qp->h->conn.error, __ATOMIC_RELAXED);
		return e ? e : -EPROTO;
	}
	return 0;
}

static int qp_fail(struct ntbx_qp *qp, int err)
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
static int path_alive(struct ntbx_qp *qp, int from, int to)
{
	for (int x = ntbx_fabric_next_hop(qp->f, from, to); x >= 0 && x != to;
	     x = ntbx_fabric_next_hop(qp->f, x, to))
		if (ntbx_node_alive(qp->dev, x) <= 0)
			return 0;
	return 1;
}

/* The peer is alive (same epoch as when we connected), and so are the
 * nodes between us on both ways: routes need not be symmetric. */
static int qp_peer_alive(struct ntbx_qp *qp)
{
	if (qp->peer_dead)
		return 0;
	if (qp->hops == 0)
		return 1;
	int alive = ntbx_node_alive(qp->dev, qp->peer_node) > 0 &&
	            ntbx_node_epoch(qp->dev, qp->peer_node) == qp->peer_epoch;
	if (alive && qp->hops > 1)
		alive = path_alive(qp, qp->node, qp->peer_node) &&
		        path_alive(qp, qp->peer_node, qp->node);
	if (!alive)
		qp->peer_dead = 1;
	return alive;
}

/*
 * Snapshot of the reader state (see struct ntbx_qp).  The posted-buffer
 * list is most of its bytes and only means something while buffers are
 * posted, so it is copied only then (a stream of a socket never posts):
 * an empty list's slots are never read.
 */
#define RX_HOT offsetof(struct qp_rxs, posted)
static void rx_load(struct ntbx_qp *qp)
{
	memcpy(&qp->rx, (const void *)&qp->h->rx, RX_HOT);
	if (qp->rx.post_head != qp->rx.post_tail)
		memcpy(qp->rx.posted, (const void *)qp->h->rx.posted,
		       sizeof qp->rx.posted);
}

static void rx_store(struct ntbx_qp *qp)
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
static int qp_fail(struct ntbx_qp *qp, int err);
static int tx_load(struct ntbx_qp *qp)
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

static void tx_store(struct ntbx_qp *qp)
{
	memcpy((void *)&qp->h->tx, &qp->tx, sizeof qp->tx);
}

/* A receive-core context on the reader's working copy (rx_load first). */
static void qp_rx_ctx(struct ntbx_qp *qp, struct qp_rx *r)
{
	r->ring = qp->ring;
	r->size = qp->size;
	r->s = &qp->rx;
	r->mem = qp->mem;
	r->mem_size = qp->mem_size;
	/* before any seq load: records before the close are then visible */
	r->peer_closed = __atomic_load_n(&qp->h->peer_closed, __ATOMIC_ACQUIRE);
}

/* Ring the peer's sleepers. */
static void qp_ring_peer(struct ntbx_qp *qp, struct qp_half *statp)
{
	uint32_t bits = 1u << qp->pbit;
	if (qp->hops == 0)
		ntbx_db_local_set(qp->dev, 0, bits);
	else if (qp->hops == 1)
		ntbx_peer_db_set(qp->dev, qp->port, bits);
	(void)statp;
}

/* Store @len bytes into field @off of the peer's half by DMA (qp->dout).
 * A failed DMA fails the queue pair: what the peer sees is unknown. */
static int ph_put(struct ntbx_qp *qp, size_t off, const void *v, size_t len)
{
	int rc = qp_dout_field(qp->dout, off, v, len);
	return rc < 0 ? qp_fail(qp, -ECONNRESET) : 0;
}
#define PH_PUT(qp, field, val) do {                                       \
	__typeof__(((struct qp_half *)0)->field) v_ = (val);              \
	ph_put(qp, offsetof(struct qp_half, field), &v_, sizeof v_);      \
} while (0)

/*
 * On a DMA-only backend a store to the peer's half lands some time after
 * the call, so the Dekker pairs (a record or credits, then the other
 * side's sleep flag) need their first store to have landed before the
 * flag is loaded.  Taken before the fence that precedes that load: 1 if
 * it has (or the store was a CPU store); else the caller rings anyway
 * (the doorbell lands after the data: the device contract).
 */
static int qp_stores_landed(struct ntbx_qp *qp)
{
	return !qp->dout || qp_dout_idle(qp->dout);
}

/* ------------------------------------------------------------ mapping */

static int ring_size_ok(uint32_t s);

/* The peer's endpoint, from the connection line of our half, loaded once
 * and checked (set-up only: connect, attach). */
static int qp_load_peer(struct ntbx_qp *qp)
{
	const volatile struct qp_half *h = qp->h;
	qp->peer_off = h->conn.peer_off;
	qp->peer_cookie = h->conn.peer_cookie;
	qp->peer_epoch = h->conn.peer_epoch;
	qp->psize = 1u << (qp->peer_cookie & 0x1f);
	qp->pbit = qp_bit_of(qp->peer_off);
	if (!ring_size_ok(qp->psize) || (qp->peer_off & (QP_LINE - 1)))
		return ntbx_err(EPROTO, "queue pair: corrupt endpoint state");
	return 0;
}

static int qp_map_peer(struct ntbx_qp *qp)
{
	qp->pmax = qp_max_payload(qp->psize);
	if (qp->hops > 1) {
		if (qp->pmax > QP_FWD_MAX_PAYLOAD)
			qp->pmax = QP_FWD_MAX_PAYLOAD;
		qp->mapped = 1;
		return 0;
	}
	if (qp->hops == 0) {
		qp->win = qp->mem;
		qp->win_size = qp->mem_size;
	} else {
		/* a DMA-only backend gives the size and no address */
		void *a = NULL;
		uint64_t sz;
		int rc = ntbx_dev_maps_peer_windows(qp->dev)
		         ? ntbx_peer_mw_get_addr(qp->dev, qp->port, 0, &a, &sz)
		         : ntbx_peer_mw_size(qp->dev, qp->port, 0, &sz);
		if (rc == -ENOTCONN)
			return ntbx_err(ENOLINK, "queue pair: node %d has not "
			                "exposed its memory (link down?)",
			                qp->peer_node);
		if (rc < 0)
			return rc;
		qp->win = a;
		qp->win_size = sz;
	}
	uint64_t poff = qp->peer_off;
	if ((poff & (QP_LINE - 1)) || poff > qp->win_size ||
	    qp->win_size - poff < (uint64_t)QP_HALF_HDR + qp->psize)
		return ntbx_err(EPROTO, "queue pair: the peer endpoint is "
		                "outside node %d's window", qp->peer_node);
	if (!qp->win) {
		/* The reader and the writer thread may both map a handle
		 * made before connect: one writer (and one mirror) wins,
		 * or records built in one mirror would go out of another. */
		struct qp_dout *d = __atomic_load_n(&qp->dout, __ATOMIC_ACQUIRE);
		if (!d) {
			int rc = qp_dout_open(&d, qp->dev, qp->port, poff,
			                      QP_HALF_HDR, qp->psize);
			if (rc < 0)
				return rc;
			struct qp_dout *none = NULL;
			if (!__atomic_compare_exchange_n(&qp->dout, &none, d, 0,
			                                 __ATOMIC_ACQ_REL,
			                                 __ATOMIC_ACQUIRE)) {
				qp_dout_close(d);
				d = none;
			}
		}
		qp->pring = qp_dout_ring(d);
		qp->mapped = 1;
		return 0;
	}
	qp->ph = (struct qp_half *)(qp->win + poff);
	qp->pring = qp->win + poff + QP_HALF_HDR;
	qp->mapped = 1;
	return 0;
}

static int ring_size_ok(uint32_t s)
{
	return s >= NTBX_QP_MIN_RING && s <= NTBX_QP_MAX_RING && !(s & (s - 1));
}

/* ------------------------------------------------------------ reaping */

/*
 * Spare halves.  A new endpoint's ring must be all zero (a record is there
 * when its line's first word holds the expected sequence number), and
 * zeroing 512 KiB per endpoint, two per connection, was the largest cost
 * of short connections.  But a reader zeroes every line it consumes, so
 * when both sides have closed, the ring is all zero again once the lines
 * between our read position and the writer's final position (peer_closed,
 * which the writer stores last) are zeroed.  Such a half is kept as a
 * spare (magic QP_SPARE, block still allocated) and the next endpoint with
 * the same ring size on this node takes it, zeroing only its 4 KiB header.
 * At most QP_SPARES_MAX are kept per node; on a full node they are freed
 * first.  Only direct (hops <= 1) halves whose writer closed qualify: over
 * forwarding, or after a writer died, the final position is not known;
 * nor does a half whose connection failed (its ring may hold anything),
 * nor one whose peer wrote outside the range it declared (qp_ring_clean
 * checks every line's sequence word before the half is kept).
 */
#define QP_SPARES_MAX 8

/* Make the closed half's ring (@rs bytes, checked by the caller against
 * the block) all zero if its final contents are known.  Returns 1 if it is
 * now clean.  Every shared value is loaded once. */
static int half_ring_clean(struct qp_half *h, uint32_t st, uint32_t rs)
{
	int32_t hops = __atomic_load_n(&h->id.hops, __ATOMIC_RELAXED);
	if (hops > 1 || !(st & QP_ST_CONNECTED))
		return 0;
	uint64_t pc = __atomic_load_n(&h->peer_closed, __ATOMIC_ACQUIRE);
	uint64_t rpos = __atomic_load_n(&h->rx.rpos, __ATOMIC_RELAXED);
	if (!pc || (int64_t)(pc - 1 - rpos) < 0 || pc - 1 - rpos > rs)
		return 0;
	uint8_t *ring = (uint8_t *)h + QP_HALF_HDR;
	qp_ring_zero(ring, rs, rpos, pc - 1 - rpos);
	/* A peer that wrote outside the range it declared and then closed
	 * cleanly left a sequence word elsewhere: the next connection's
	 * reader would take it for a record.  One read of every line's first
	 * word (the reader zeroes exactly those) proves the ring clean. */
	return qp_ring_clean(ring, rs);
}

/* Free (or keep as a spare) our half, whose ring is @rs bytes (checked
 * by the caller), once both sides closed (or the peer is gone).  Only the
 * process that takes the magic away does it. */
static int half_try_free(struct ntbx_dev *dev, struct qp_half *h, int64_t off,
                         uint32_t rs)
{
	uint32_t st = __atomic_load_n(&h->conn.state, __ATOMIC_ACQUIRE);
	if (!(st & QP_ST_CLOSED))
		return 0;
	uint32_t peer = __atomic_load_n(&h->id.peer_node, __ATOMIC_RELAXED);
	uint32_t pep = __atomic_load_n(&h->conn.peer_epoch, __ATOMIC_RELAXED);
	int gone = !(st & QP_ST_CONNECTED) ||
	           __atomic_load_n(&h->peer_closed, __ATOMIC_ACQUIRE) ||
	           (peer != (uint32_t)ntbx_dev_node(dev) &&
	            (peer >= (uint32_t)ntbx_dev_node_count(dev) ||
	             ntbx_node_alive(dev, (int)peer) <= 0 ||
	             ntbx_node_epoch(dev, (int)peer) != pep));
	if (!gone)
		return 0;
	uint64_t m = QP_MAGIC;
	if (!__atomic_compare_exchange_n(&h->id.magic, &m, 0, 0,
	                                 __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return 0;
	/* A half whose connection failed (a peer that broke the protocol
	 * wrote who knows where in its ring) is never a spare: its garbage
	 * would be the next connection's first records. */
	if (!(st & QP_ST_FAILED) && half_ring_clean(h, st, rs))
		__atomic_store_n(&h->id.magic, QP_SPARE, __ATOMIC_RELEASE);
	else
		ntbx_mem_free(dev, off);
	return 1;
}

/*
 * Scan this node's memory: free closed endpoints whose peer closed too,
 * keep at most @keep spares (freeing the others), and if @want is a ring
 * size, claim a spare of that size: its offset, or -1.
 */
static int64_t qp_reap(struct ntbx_dev *dev, int keep, uint32_t want)
{
	int n = ntbx_mem_list(dev, NULL, 0);
	if (n <= 0)
		return -1;
	struct ntbx_mem_block *b = calloc((size_t)n, sizeof *b);
	if (!b)
		return -1;
	/* the count may have grown since (another thread allocated): only
	 * the first n entries were filled */
	int m = ntbx_mem_list(dev, b, n);
	if (m < n)
		n = m;
	uint8_t *mem = ntbx_mem_base(dev);
	uint64_t msz = ntbx_mem_size(dev);
	int64_t got = -1;
	int spares = 0;
	for (int i = 0; i < n; i++) {
		if (strncmp(b[i].tag, QP_TAG, sizeof b[i].tag) ||
		    b[i].off > msz || msz - b[i].off < QP_HALF_HDR)
			continue;
		struct qp_half *h = (struct qp_half *)(mem + b[i].off);
		uint64_t magic = __atomic_load_n(&h->id.magic, __ATOMIC_ACQUIRE);
		/* the ring size, once, against the block the allocator has */
		uint32_t rs = __atomic_load_n(&h->id.ring_size, __ATOMIC_RELAXED);
		int fits = ring_size_ok(rs) &&
		           b[i].size >= (uint64_t)QP_HALF_HDR + rs &&
		           msz - b[i].off >= b[i].size;
		if (magic == QP_MAGIC) {
			if (fits)
				half_try_free(dev, h, (int64_t)b[i].off, rs);
			continue;
		}
		if (magic != QP_SPARE)
			continue;
		int mine = got < 0 && want && fits && rs == want;
		if (!mine && spares < keep) {
			spares++;
			continue;
		}
		if (!__atomic_compare_exchange_n(&h->id.magic, &magic, 0, 0,
		                                 __ATOMIC_ACQ_REL,
		                                 __ATOMIC_RELAXED))
			continue;   /* another process took it */
		if (mine)
			got = (int64_t)b[i].off;
		else
			ntbx_mem_free(dev, (int64_t)b[i].off);
	}
	free(b);
	return got;
}

/* ------------------------------------------------------------ set-up */

static struct ntbx_qp *qp_handle(struct ntbx_fabric *f, uint64_t off)
{
	struct ntbx_qp *qp = calloc(1, sizeof *qp);
	if (!qp)
		return NULL;
	qp->f = f;
	qp->dev = ntbx_fabric_dev(f);
	qp->mem = ntbx_mem_base(qp->dev);
	qp->mem_size = ntbx_mem_size(qp->dev);
	qp->off = off;
	qp->h = (struct qp_half *)(qp->mem + off);
	qp->ring = qp->mem + off + QP_HALF_HDR;
	qp->node = ntbx_fabric_node(f);
	return qp;
}

/* Free the handle; DMA still in flight from it lands first. */
static void qp_handle_free(struct ntbx_qp *qp)
{
	qp_dout_close(qp->dout);
	free(qp->pstage);
	free(qp);
}

/*
 * The handle's geometry from the identity line of a half, loaded once and
 * checked: on attach it comes from shared memory that the peer can write.
 * 0 or -EINVAL.
 */
static int qp_handle_from_half(struct ntbx_qp *qp)
{
	struct ntbx_dev *dev = qp->dev;
	typeof(qp->h->id) id;
	memcpy(&id, (const void *)&qp->h->id, sizeof id);
	int nn = ntbx_dev_node_count(dev);
	int route_port = -1;
	qp->peer_node = (int)id.peer_node;
	qp->hops = id.hops;
	qp->port = id.first_port;
	qp->wake_port = id.wake_port;
	qp->bit = id.db_bit;
	qp->size = id.ring_size;
	qp->flags = id.flags;
	qp->cookie = id.cookie;
	if (id.magic != QP_MAGIC || !ring_size_ok(id.ring_size) ||
	    id.size != (uint64_t)QP_HALF_HDR + id.ring_size ||
	    qp->mem_size - qp->off < id.size ||
	    (id.cookie & 0xff) != (uint64_t)log2u(id.ring_size) ||
	    id.node != (uint32_t)qp->node || id.peer_node >= (uint32_t)nn ||
	    id.db_bit != qp_bit_of(qp->off) ||
	    (id.flags & ~(NTBX_QP_DMA | NTBX_QP_NO_PUSH)) ||
	    id.hops != ntbx_fabric_route(qp->f, qp->peer_node, &route_port) ||
	    (id.hops ? id.first_port != route_port || id.wake_port != route_port
	             : id.first_port != -1 || id.wake_port != 0))
		return -EINVAL;
	return 0;
}

int ntbx_qp_create(struct ntbx_fabric *f, int peer_node,
                   const struct ntbx_qp_opts *opts, struct ntbx_qp **out,
                   struct ntbx_qp_addr *local)
{
	struct ntbx_dev *dev = ntbx_fabric_dev(f);
	if (peer_node < 0 || peer_node >= ntbx_fabric_nodes(f))
		return ntbx_err(ERANGE, "queue pair: no node %d on fabric '%s'",
		                peer_node, ntbx_fabric_name(f));
	uint32_t rs = opts && opts->ring_size ? opts->ring_size
	                                      : NTBX_QP_DEFAULT_RING;
	uint32_t fl = opts ? opts->flags : 0;
	if (!ring_size_ok(rs) || (fl & ~(NTBX_QP_DMA | NTBX_QP_NO_PUSH)))
		return ntbx_err(EINVAL, "queue pair: ring size must be a power "
		                "of two in [%u, %u], flags NTBX_QP_*",
		                NTBX_QP_MIN_RING, NTBX_QP_MAX_RING);
	int port = -1;
	int hops = ntbx_fabric_route(f, peer_node, &port);
	if (hops < 0 || (hops > 0 && port < 0))
		return ntbx_err(EHOSTUNREACH, "queue pair: no route to node %d",
		                peer_node);
	uint64_t size = (uint64_t)QP_HALF_HDR + rs;
	/* owned = 0: the endpoint outlives the process that made it; it is
	 * freed by the close protocol (ntbx_qp_close / qp_reap) once both
	 * sides closed or the peer's node died. */
	int64_t off = qp_reap(dev, QP_SPARES_MAX, rs);
	int spare = off >= 0;
	if (!spare)
		off = ntbx_mem_alloc(dev, size, 4096, QP_TAG, 0);
	if (off == -ENOSPC) {   /* the node is full: spares go first */
		qp_reap(dev, 0, 0);
		off = ntbx_mem_alloc(dev, size, 4096, QP_TAG, 0);
	}
	if (off < 0)
		return off == -ENOSPC ? ntbx_err(ENOSPC, "queue pair: node "
		                        "memory full (%llu bytes wanted)",
		                        (unsigned long long)size)
		                      : (int)off;
	struct ntbx_qp *qp = qp_handle(f, (uint64_t)off);
	if (!qp) {
		ntbx_mem_free(dev, off);
		return -ENOMEM;
	}
	struct qp_half *h = qp->h;
	memset(h, 0, spare ? QP_HALF_HDR : size);   /* a spare's ring is zero */
	uint64_t rnd = 0;
	if (getrandom(&rnd, sizeof rnd, 0) != sizeof rnd)
		rnd = ntbx_now_ns() * 0x9e3779b97f4a7c15ull ^ (uint64_t)off;
	h->id.version = QP_VERSION;
	h->id.ring_size = rs;
	h->id.cookie = (rnd & ~0xffull) | (uint64_t)log2u(rs);
	h->id.node = (uint32_t)qp->node;
	h->id.epoch = ntbx_node_epoch(dev, qp->node);
	h->id.peer_node = (uint32_t)peer_node;
	h->id.flags = fl;
	h->id.size = size;
	h->id.db_bit = qp_bit_of((uint64_t)off);
	h->id.hops = hops;
	h->id.first_port = hops ? port : -1;
	h->id.wake_port = hops ? port : 0;
	h->conn.refs = 1;
	h->tx.adv_next = 1;
	__atomic_store_n(&h->id.magic, QP_MAGIC, __ATOMIC_RELEASE);
	qp->peer_node = peer_node;
	qp->hops = hops;
	qp->port = hops ? port : -1;
	qp->wake_port = hops ? port : 0;
	qp->bit = qp_bit_of((uint64_t)off);
	qp->size = rs;
	qp->flags = fl;
	qp->cookie = h->id.cookie;
	ntbx_db_clear_mask(dev, qp->wake_port, 1u << qp->bit);
	*out = qp;
	ntbx_qp_local_addr(qp, local);
	return 0;
}

void ntbx_qp_local_addr(const struct ntbx_qp *qp, struct ntbx_qp_addr *a)
{
	a->node = (uint32_t)qp->node;
	a->epoch = __atomic_load_n(&qp->h->id.epoch, __ATOMIC_RELAXED);
	a->off = qp->off;
	a->cookie = qp->cookie;
}

/* A copy of the identity line of the peer's half (set-up time only). */
static int qp_peer_id(struct ntbx_qp *qp, __typeof__(qp->h->id) *id)
{
	if (qp->ph) {
		memcpy(id, (const void *)&qp->ph->id, sizeof *id);
		return 0;
	}
	/* on the heap: a read that does not complete in time is left to
	 * the engine, with its buffer (leaked), never a dead stack frame */
	struct { struct ntbx_dma_op op; __typeof__(*id) id; } *r =
		malloc(sizeof *r);
	if (!r)
		return -ENOMEM;
	int rc = ntbx_dma_read(qp->dev, qp->port, 0, qp->peer_off, &r->id,
	                       sizeof r->id, &r->op);
	if (rc == 0)
		rc = ntbx_dma_wait(qp->dev, &r->op, 10000);
	if (rc == 0)
		memcpy(id, &r->id, sizeof *id);
	if (rc != -ETIMEDOUT)
		free(r);
	if (rc < 0)
		return ntbx_err(-rc, "queue pair: cannot read node %d's "
		                "endpoint: %s", qp->peer_node, strerror(-rc));
	return 0;
}

int ntbx_qp_connect(struct ntbx_qp *qp, const struct ntbx_qp_addr *remote)
{
	struct qp_half *h = qp->h;
	if (__atomic_load_n(&h->conn.state, __ATOMIC_ACQUIRE) & QP_ST_CONNECTED)
		return ntbx_err(EISCONN, "queue pair: already connected");
	if ((int)remote->node != qp->peer_node)
		return ntbx_err(EINVAL, "queue pair: endpoint is on node %u, "
		                "expected node %d", remote->node, qp->peer_node);
	uint32_t prs = 1u << (remote->cookie & 0x1f);
	if (!ring_size_ok(prs) || (remote->off & (QP_LINE - 1)))
		return ntbx_err(EINVAL, "queue pair: not an endpoint address");
	if (qp->hops > 0 &&
	    ntbx_node_epoch(qp->dev, qp->peer_node) != remote->epoch)
		return ntbx_err(EINVAL, "queue pair: node %d restarted since "
		                "the endpoint was made", qp->peer_node);
	h->conn.peer_off = remote->off;
	h->conn.peer_cookie = remote->cookie;
	h->conn.peer_ring = prs;
	h->conn.peer_epoch = remote->epoch;
	h->conn.peer_bit = qp_bit_of(remote->off);
	qp->peer_off = remote->off;
	qp->peer_cookie = remote->cookie;
	qp->peer_epoch = remote->epoch;
	qp->psize = prs;
	qp->pbit = qp_bit_of(remote->off);
	int rc = qp_map_peer(qp);
	if (rc < 0)
		return rc;
	if (qp->ph || qp->dout) {
		/* Set-up time only: check that the window holds the endpoint we
		 * were told about (the only load from a peer's memory; by DMA
		 * when the window is not mapped). */
		struct { __typeof__(qp->h->id) id; } pid, *p = &pid;
		rc = qp_peer_id(qp, &pid.id);
		if (rc < 0) {
			qp->mapped = 0;
			return rc;
		}
		if (p->id.magic != QP_MAGIC || p->id.version != QP_VERSION ||
		    p->id.ring_size != prs) {
			qp->mapped = 0;
			return ntbx_err(EPROTO, "queue pair: node %d's memory at "
			                "%llu holds no endpoint", qp->peer_node,
			                (unsigned long long)remote->off);
		}
		if (p->id.cookie != remote->cookie || p->id.node != remote->node ||
		    (int)p->id.peer_node != qp->node) {
			qp->mapped = 0;
			return ntbx_err(EINVAL, "queue pair: the endpoint at node "
			                "%d offset %llu is not ours", qp->peer_node,
			                (unsigned long long)remote->off);
		}
	}
	__atomic_fetch_or(&h->conn.state, QP_ST_CONNECTED, __ATOMIC_RELEASE);
	return 0;
}

int ntbx_qp_attach(struct ntbx_fabric *f, const struct ntbx_qp_addr *local,
                   struct ntbx_qp **out)
{
	struct ntbx_dev *dev = ntbx_fabric_dev(f);
	uint64_t msz = ntbx_mem_size(dev);
	if ((int)local->node != ntbx_fabric_node(f) ||
	    (local->off & (QP_LINE - 1)) || local->off > msz ||
	    msz - local->off < QP_HALF_HDR)
		return ntbx_err(EINVAL, "queue pair: no endpoint at that address");
	struct ntbx_qp *qp = qp_handle(f, local->off);
	if (!qp)
		return -ENOMEM;
	struct qp_half *h = qp->h;
	uint32_t st = __atomic_load_n(&h->conn.state, __ATOMIC_ACQUIRE);
	if (qp_handle_from_half(qp) < 0 || qp->cookie != local->cookie ||
	    (st & QP_ST_CLOSED)) {
		free(qp);
		return ntbx_err(EINVAL, "queue pair: no live endpoint at that "
		                "address");
	}
	__atomic_fetch_add(&h->conn.refs, 1, __ATOMIC_RELAXED);
	if (st & QP_ST_CONNECTED) {
		int rc = qp_load_peer(qp);
		if (rc == 0)
			rc = qp_map_peer(qp);
		if (rc < 0) {
			__atomic_fetch_sub(&h->conn.refs, 1, __ATOMIC_RELAXED);
			qp_handle_free(qp);
			return rc;
		}
	}
	*out = qp;
	return 0;
}

/* Make sure a handle made before connect (in another process) maps. */
static int qp_ready(struct ntbx_qp *qp)
{
	if (qp->mapped)
		return 0;
	if (!(__atomic_load_n(&qp->h->conn.state, __ATOMIC_ACQUIRE) &
	      QP_ST_CONNECTED))
		return ntbx_err(ENOTCONN, "queue pair: not connected");
	int rc = qp_load_peer(qp);
	return rc < 0 ? rc : qp_map_peer(qp);
}

int ntbx_qp_hops(const struct ntbx_qp *qp)
{
	return qp->hops;
}

/* ------------------------------------------------------------ waiting */

enum { W_RX = 1, W_TX = 2 };
typedef int (*ready_fn)(struct ntbx_qp *, void *);

static void qp_rx_credits(struct ntbx_qp *qp, int force);

/*
 * Say we are about to sleep, for reading (@rx) and/or room to write (@tx):
 * clear our doorbell bit, then store the flags the other side checks after
 * its next record or credit (over forwarding, our own flags, which the
 * delivering transfer thread checks), then a full fence.  The caller
 * re-checks its condition after this and sleeps only if it still holds: the
 * other side stores, fences and reads the flag, so one of the two sees the
 * other (no lost wake-up).
 */
static void qp_arm_dirs(struct ntbx_qp *qp, int rx, int tx)
{
	struct qp_half *h = qp->h;
	ntbx_db_clear(qp->dev, qp->wake_port, 1u << qp->bit);
	if (qp->hops > 1) {
		if (rx)
			__atomic_store_n(&h->self.rx_armed, 1, __ATOMIC_RELAXED);
		if (tx)
			__atomic_store_n(&h->self.tx_armed, 1, __ATOMIC_RELAXED);
	} else if (qp->ph) {
		if (rx)
			__atomic_store_n(&qp->ph->pr.rx_armed,
			                 __atomic_add_fetch(&h->seq.rx_armed, 1,
			                                    __ATOMIC_RELAXED),
			                 __ATOMIC_RELAXED);
		if (tx)
			__atomic_store_n(&qp->ph->pw.tx_wants,
			                 __atomic_add_fetch(&h->seq.tx_wants, 1,
			                                    __ATOMIC_RELAXED),
			                 __ATOMIC_RELAXED);
	} else if (qp->dout) {
		if (rx)
			PH_PUT(qp, pr.rx_armed,
			       __atomic_add_fetch(&h->seq.rx_armed, 1,
			                          __ATOMIC_RELAXED));
		if (tx)
			PH_PUT(qp, pw.tx_wants,
			       __atomic_add_fetch(&h->seq.tx_wants, 1,
			                          __ATOMIC_RELAXED));
		/* the flag must have landed before our re-check (the other
		 * half of the Dekker pair: qp_stores_landed) */
		if (qp_dout_flush(qp->dout) < 0)
			qp_fail(qp, -ECONNRESET);
	}
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

/*
 * Wait until ready() holds: spin for the wait policy's budget (util.h,
 * ntbx_spin_begin), then sleep in slices of
 * at most SLICE_MS, each one prepared, armed (the peer rings only when it
 * sees our flag) and re-checked, then checking the peer's liveness.
 * Returns 0, -ETIMEDOUT, -EINTR (only with @intr), -ECONNRESET.
 */
static int qp_wait_sleep(struct ntbx_qp *qp, ready_fn ready, void *arg,
                         int dir, uint64_t end, int intr);
static int qp_cpu_hint(const uint32_t *w);

static int qp_wait_for(struct ntbx_qp *qp, ready_fn ready, void *arg, int dir,
                       int timeout_ms, int intr)
{
	for (int i = 0; i < 64; i++) {
		if (ready(qp, arg))
			return 0;
		ntbx_cpu_relax();
	}
	uint64_t t0 = ntbx_now_ns();
	uint64_t end = timeout_ms < 0 ? UINT64_MAX
	                              : t0 + (uint64_t)timeout_ms * 1000000ull;
	/* The thread we wait for: the one that writes our ring (reads), or
	 * the one that gives us credits (room to write). */
	uint64_t budget = ntbx_spin_begin_for(&qp->spin, dir & W_RX ?
	                                      qp_cpu_hint(&qp->h->pw.cpu) :
	                                      qp_cpu_hint(&qp->h->pr.cpu), t0);
	for (;;) {
		uint64_t now = ntbx_now_ns();
		if (now - t0 >= budget || now >= end)
			break;
		for (int i = 0; i < 64; i++) {
			if (ready(qp, arg)) {
				/* a hit: its length does not matter, and
				 * a clock read would delay the caller */
				ntbx_spin_end(&qp->spin, now - t0, 0);
				return 0;
			}
			ntbx_cpu_relax();
		}
	}
	int rc = qp_wait_sleep(qp, ready, arg, dir, end, intr);
	ntbx_spin_end(&qp->spin, ntbx_now_ns() - t0, 1);
	return rc;
}

static int qp_wait_sleep(struct ntbx_qp *qp, ready_fn ready, void *arg,
                         int dir, uint64_t end, int intr)
{
	struct qp_half *h = qp->h;
	for (;;) {
		if (dir & W_RX)
			qp_rx_credits(qp, 1);   /* all we consumed, before sleeping */
		struct ntbx_db_waiter w;
		int prc = ntbx_db_wait_prepare_own(qp->dev, qp->sleeper, &w,
		                                   1ull << qp->wake_port,
		                                   1u << qp->bit);
		qp_arm_dirs(qp, dir & W_RX, dir & W_TX);
		int rc = 0;
		if (ready(qp, arg))
			rc = 1;
		else if (!qp_peer_alive(qp))
			rc = ready(qp, arg) ? 1 : -ECONNRESET;
		else if (ntbx_now_ns() >= end)
			rc = -ETIMEDOUT;
		if (rc) {
			if (prc == 0)
				ntbx_db_wait_finish(qp->dev, &w);
			return rc > 0 ? 0 : rc;
		}
		uint64_t left = (end - ntbx_now_ns()) / 1000000ull;
		int slice = left < SLICE_MS ? (int)left + 1 : SLICE_MS;
		if (dir & W_RX)
			__atomic_fetch_add(&h->rxstat.sleeps, 1, __ATOMIC_RELAXED);
		else
			__atomic_fetch_add(&h->txstat.sleeps, 1, __ATOMIC_RELAXED);
		if (prc == 0) {
			rc = ntbx_db_wait_commit(qp->dev, &w, slice);
			ntbx_db_wait_finish(qp->dev, &w);
		} else {
			/* no waiter slot: poll slowly, still bounded */
			struct timespec ts = { 0, 1000000 };
			nanosleep(&ts, NULL);
		}
		if (rc == -EINTR && intr)
			return -EINTR;
	}
}

/* ------------------------------------------------------------ writer */

/* Credits: bytes free in the peer's ring.  -EPROTO for bad credits. */
static int64_t qp_tx_free(struct ntbx_qp *qp)
{
	struct qp_txs *t = &qp->tx;
	uint64_t tail = __atomic_load_n(&qp->h->pr.tx_tail, __ATOMIC_ACQUIRE);
	if (tail != t->tail_seen) {
		if ((int64_t)(tail - t->tail_seen) < 0 ||
		    (int64_t)(t->wpos - tail) < 0 || (tail & (QP_LINE - 1)))
			return qp_fail(qp, -EPROTO);
		t->tail_seen = tail;
	}
	uint64_t used = t->wpos - t->tail_seen;
	if (used > qp->psize)
		return qp_fail(qp, -EPROTO);
	return (int64_t)(qp->psize - used);
}

/*
 * Free space as seen from any thread, without the writer's bookkeeping:
 * the tail is loaded before the write position, so the answer can only
 * err on the small side.  Bad credits read as "writable": the writer's own
 * call then reports them.
 */
static int64_t qp_tx_free_peek(struct ntbx_qp *qp)
{
	uint64_t tail = __atomic_load_n(&qp->h->pr.tx_tail, __ATOMIC_ACQUIRE);
	uint64_t wpos = __atomic_load_n(&qp->h->tx.wpos, __ATOMIC_ACQUIRE);
	uint64_t used = wpos - tail;
	return used > qp->psize ? (int64_t)qp->psize : (int64_t)(qp->psize - used);
}

/* Tell the peer's reader there is data, if it asked to be woken; and,
 * when it changed, which CPU we send from (the wait policy's hint: a
 * reader whose writer runs on its own CPU does not spin, ntbx_qp_peer_cpu).
 * sched_getcpu() reads the rseq area: no system call. */
static void qp_tx_kick(struct ntbx_qp *qp)
{
	struct qp_half *h = qp->h;
	if (qp->hops > 1)
		return;   /* the destination's forwarder wakes it */
	int cpu = qp->ph || qp->dout ? sched_getcpu() : -1;
	if (cpu >= 0 && (uint32_t)cpu + 1 != qp->cpu_told) {
		qp->cpu_told = (uint32_t)cpu + 1;
		if (qp->ph)
			__atomic_store_n(&qp->ph->pw.cpu, qp->cpu_told,
			                 __ATOMIC_RELAXED);
		else
			PH_PUT(qp, pw.cpu, qp->cpu_told);
	}
	int landed = qp_stores_landed(qp);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	uint32_t a = __atomic_load_n(&h->pr.rx_armed, __ATOMIC_ACQUIRE);
	if (a != qp->tx.armed_ack || !landed) {
		qp->tx.armed_ack = a;
		qp_ring_peer(qp, h);
		__atomic_fetch_add(&h->txstat.doorbells, 1, __ATOMIC_RELAXED);
	}
}

static int qp_closed_err(struct ntbx_qp *qp)
{
	int e = qp_error(qp);
	if (e)
		return e;
	uint32_t st = __atomic_load_n(&qp->h->conn.state, __ATOMIC_ACQUIRE);
	if (st & (QP_ST_SHUT_WR | QP_ST_CLOSED))
		return -EPIPE;
	if (__atomic_load_n(&qp->h->peer_closed, __ATOMIC_ACQUIRE))
		return -EPIPE;
	if (qp->peer_dead)
		return -ECONNRESET;
	return 0;
}

struct tx_need { uint64_t need; };

static int tx_ready(struct ntbx_qp *qp, void *arg)
{
	struct tx_need *n = arg;
	if (qp_closed_err(qp))
		return 1;
	int64_t fr = qp_tx_free(qp);
	return fr < 0 || (uint64_t)fr >= n->need;
}

/* Wait until @need bytes are free in the peer's ring.  0 or -errno. */
static int qp_tx_wait_space(struct ntbx_qp *qp, uint64_t need, int nonblock)
{
	for (;;) {
		int e = qp_closed_err(qp);
		if (e)
			return e;
		int64_t fr = qp_tx_free(qp);
		if (fr < 0)
			return (int)fr;
		if ((uint64_t)fr >= need)
			return 0;
		if (nonblock)
			return -EAGAIN;
		qp_tx_kick(qp);   /* never wait while the peer waits for us */
		struct tx_need n = { need };
		int rc = qp_wait_for(qp, tx_ready, &n, W_TX, -1, 0);
		if (rc < 0)
			return rc;
	}
}

/*
 * Which bypass ring (so which transfer thread at each node) carries this
 * queue pair's frames: the same for both ends, from both cookies, so data
 * and the acknowledgements for it meet the same threads on their way (the
 * route is symmetric too, see ring_way).  Frames of one direction must
 * share a ring: CLOSE must not overtake the data before it.
 */
static int qp_fwd_hint(const struct ntbx_qp *qp)
{
	uint64_t x = qp->cookie ^ qp->peer_cookie;
	return (int)((x >> 8) & 0x7fffffff);
}

/* Emit one record at wpos (room already checked). */
static int qp_tx_emit(struct ntbx_qp *qp, uint16_t type, uint16_t flags,
                      uint32_t aux, const void *p, uint32_t len)
{
	struct qp_txs *t = &qp->tx;
	if (qp->dout) {
		/* built in the mirror, then sent: a PAD first if needed */
		uint64_t pos = t->wpos & (qp->psize - 1);
		uint64_t body = QP_REC_HDR + (p ? len : 0);
		int rc = 0;
		t->wpos = qp_tx_put(qp->pring, qp->psize, t->wpos, type, flags,
		                    aux, p, len);
		if (pos + qp_rec_bytes(p ? len : 0) > qp->psize) {
			rc = qp_dout_rec(qp->dout, pos, QP_REC_HDR);
			pos = 0;
		}
		if (rc == 0)
			rc = qp_dout_rec(qp->dout, pos, body);
		return rc < 0 ? qp_fail(qp, -ECONNRESET) : 0;
	}
	if (qp->hops <= 1) {
		t->wpos = qp_tx_put(qp->pring, qp->psize, t->wpos, type, flags,
		                    aux, p, len);
		return 0;
	}
	struct qp_frame fr = {
		.dst_node = (uint32_t)qp->peer_node,
		.src_node = (uint32_t)qp->node,
		.dst_off = qp->peer_off,
		.dst_cookie = qp->peer_cookie,
	};
	uint64_t rb = qp_rec_bytes(len);
	uint64_t pos = t->wpos & (qp->psize - 1);
	int hint = qp_fwd_hint(qp);
	if (pos + rb > qp->psize) {
		fr.pos = t->wpos;
		fr.rtype = QP_T_PAD;
		int rc = qp_fwd_inject(qp->f, qp->port, &fr, NULL, 0, hint);
		if (rc < 0)
			return rc;
		t->wpos += qp->psize - pos;
	}
	fr.pos = t->wpos;
	fr.rtype = type;
	fr.rflags = flags;
	fr.rlen = len;
	fr.raux = aux;
	int rc = qp_fwd_inject(qp->f, qp->port, &fr, p, 0, hint);
	if (rc < 0)
		return rc;
	t->wpos += rb;
	return 0;
}

/* Largest payload (<= want) that fits in @fr free bytes at wpos, or -1. */
static int64_t qp_tx_fit(uint32_t size, uint64_t wpos, uint64_t fr,
                         uint32_t want)
{
	if (qp_tx_need(size, wpos, want) <= fr)
		return want;
	uint64_t contig = size - (wpos & (size - 1));
	uint64_t room = contig < fr ? contig : fr;
	uint64_t best = 0;
	int ok = 0;
	if (room >= QP_LINE) {
		best = room - QP_REC_HDR;
		ok = 1;
	}
	if (fr > contig && fr - contig >= QP_LINE && fr - contig - QP_REC_HDR > best) {
		best = fr - contig - QP_REC_HDR;
		ok = 1;
	}
	if (!ok)
		return -1;
	return best < want ? (int64_t)best : want;
}

/* Before any send: connected, not shut down, not failed; the writer state
 * loaded (tx_load).  0 or -errno. */
static int qp_tx_begin(struct ntbx_qp *qp)
{
	int rc = qp_ready(qp);
	if (rc == 0)
		rc = qp_closed_err(qp);
	return rc ? rc : tx_load(qp);
}

static ssize_t qp_write(struct ntbx_qp *qp, const void *buf, size_t len,
                        int flags);

ssize_t ntbx_qp_write(struct ntbx_qp *qp, const void *buf, size_t len,
                      int flags)
{
	int rc = qp_tx_begin(qp);
	if (rc)
		return rc;
	ssize_t n = qp_write(qp, buf, len, flags);
	tx_store(qp);
	return n;
}

static ssize_t qp_write(struct ntbx_qp *qp, const void *buf, size_t len,
                        int flags)
{
	int rc = 0;
	struct qp_half *h = qp->h;
	struct qp_txs *t = &qp->tx;
	size_t n = 0;
	uint64_t recs = 0;
	while (n < len) {
		uint32_t want = len - n > qp->pmax ? qp->pmax : (uint32_t)(len - n);
		int64_t fr = qp_tx_free(qp);
		if (fr < 0) {
			rc = (int)fr;
			break;
		}
		int64_t c = qp_tx_fit(qp->psize, t->wpos, (uint64_t)fr, want);
		if (c < 0 || (n && c < want)) {
			/* nothing fits, or only a piece after we wrote some:
			 * return what we wrote, or wait for room */
			if (n)
				break;
			rc = qp_tx_wait_space(qp, qp_tx_need(qp->psize, t->wpos, want),
			                      flags & NTBX_QP_NONBLOCK);
			if (rc < 0)
				break;
			continue;
		}
		rc = qp_tx_emit(qp, QP_T_DATA, 0, (uint32_t)c,
		                (const uint8_t *)buf + n, (uint32_t)c);
		if (rc < 0)
			break;
		t->msgs++;
		recs++;
		n += (size_t)c;
	}
	if (n) {
		qp_tx_kick(qp);
		__atomic_fetch_add(&h->txstat.bytes, n, __ATOMIC_RELAXED);
		__atomic_fetch_add(&h->txstat.records, recs, __ATOMIC_RELAXED);
		return (ssize_t)n;
	}
	return rc < 0 ? rc : 0;
}

/* The peer's advert for our message @msg, if we have one (seqlock read). */
static int qp_tx_advert(struct ntbx_qp *qp, uint64_t msg, struct qp_adv *a)
{
	struct qp_txs *t = &qp->tx;
	for (int i = 0; i <= QP_NPOST; i++) {
		struct qp_adv *slot = &qp->h->adv[(t->adv_next - 1) % QP_NPOST];
		uint32_t s1 = __atomic_load_n(&slot->seq, __ATOMIC_ACQUIRE);
		if (!s1)
			return 0;
		const volatile struct qp_adv *vs = slot;
		a->off = vs->off;
		a->len = vs->len;
		a->msg = vs->msg;
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&slot->seq, __ATOMIC_RELAXED) != s1)
			return 0;
		a->seq = s1;
		if (s1 != t->adv_next) {
			/* the peer reused the slot: the adverts in between were
			 * for messages we already sent through the ring */
			if ((int32_t)(s1 - t->adv_next) > 0 &&
			    (s1 - t->adv_next) % QP_NPOST == 0)
				t->adv_next = s1;
			else
				return 0;
		}
		if (a->msg < msg) {
			t->adv_next++;
			continue;
		}
		return a->msg == msg;
	}
	return 0;
}

/* Copy @len bytes into the peer's memory at @off (window 0). */
static int qp_push_copy(struct ntbx_qp *qp, uint64_t off, const void *buf,
                        size_t len)
{
	if (qp->dout) {
		/* lands before the PUSH record that follows; @buf must stay
		 * until qp_dout_flush */
		int rc = qp_dout_bulk(qp->dout, off, buf, len);
		return rc < 0 ? qp_fail(qp, -ECONNRESET) : 0;
	}
	if (qp->hops == 1 && (qp->flags & NTBX_QP_DMA)) {
		struct ntbx_dma_op op;
		int rc = ntbx_dma_write(qp->dev, qp->port, 0, off, buf, len, &op);
		if (rc == 0) {
			for (;;) {
				rc = ntbx_dma_wait(qp->dev, &op, SLICE_MS);
				if (rc != -ETIMEDOUT)
					break;
				if (!qp_peer_alive(qp))
					return -ECONNRESET;
			}
			if (rc == 0)
				return 0;
		}
		/* fall back to the CPU */
	}
	ntbx_copy(qp->win + off, buf, len);
	return 0;
}

static ssize_t qp_send(struct ntbx_qp *qp, const void *buf, size_t len,
                       int flags);

ssize_t ntbx_qp_send(struct ntbx_qp *qp, const void *buf, size_t len,
                     int flags)
{
	if (len > UINT32_MAX)
		return ntbx_err(EMSGSIZE, "queue pair: message over 4 GiB");
	int rc = qp_tx_begin(qp);
	if (rc)
		return rc;
	ssize_t n = qp_send(qp, buf, len, flags);
	tx_store(qp);
	return n;
}

static ssize_t qp_send(struct ntbx_qp *qp, const void *buf, size_t len,
                       int flags)
{
	int rc;
	struct qp_half *h = qp->h;
	struct qp_txs *t = &qp->tx;
	int nb = flags & NTBX_QP_NONBLOCK;
	struct qp_adv a;
	if (qp->hops <= 1 && qp_tx_advert(qp, t->msgs, &a)) {
		if (len >= NTBX_QP_PUSH_MIN && len <= a.len &&
		    !(qp->flags & NTBX_QP_NO_PUSH) &&
		    a.off <= qp->win_size && a.len <= qp->win_size - a.off) {
			rc = qp_tx_wait_space(qp, qp_tx_need(qp->psize, t->wpos, 0), nb);
			if (rc < 0)
				return rc;
			rc = qp_push_copy(qp, a.off, buf, len);
			if (rc < 0)
				return rc;
			/* no payload in the ring; the record's len is the
			 * message length */
			qp_tx_emit(qp, QP_T_PUSH, 0, a.seq, NULL, (uint32_t)len);
			t->adv_next++;
			t->msgs++;
			qp_tx_kick(qp);
			/* the caller's buffer is the DMA's source */
			if (qp->dout && qp_dout_flush(qp->dout) < 0)
				return qp_fail(qp, -ECONNRESET);
			__atomic_fetch_add(&h->txstat.bytes, len, __ATOMIC_RELAXED);
			__atomic_fetch_add(&h->txstat.pushed, len, __ATOMIC_RELAXED);
			__atomic_fetch_add(&h->txstat.records, 1, __ATOMIC_RELAXED);
			return (ssize_t)len;
		}
		/* the advert is for this message but it goes through the ring:
		 * the peer copies it into that buffer */
		t->adv_next++;
	}
	/* Nonblocking: all or nothing when the message fits in the ring at all
	 * (a message larger than the ring is sent waiting as needed). */
	uint64_t total = 0, w = t->wpos;
	size_t left = len;
	do {
		uint32_t c = left > qp->pmax ? qp->pmax : (uint32_t)left;
		uint64_t need = qp_tx_need(qp->psize, w, c);
		total += need;
		w += need;
		left -= c;
	} while (left);
	if (nb && total <= qp->psize) {
		rc = qp_tx_wait_space(qp, total, 1);
		if (rc < 0)
			return rc;
	}
	size_t done = 0;
	uint64_t recs = 0;
	do {
		uint32_t c = len - done > qp->pmax ? qp->pmax : (uint32_t)(len - done);
		rc = qp_tx_wait_space(qp, qp_tx_need(qp->psize, t->wpos, c), 0);
		if (rc == 0)
			rc = qp_tx_emit(qp, QP_T_DATA,
			                done + c < len ? QP_F_MORE : 0,
			                done ? (uint32_t)done : (uint32_t)len,
			                (const uint8_t *)buf + done, c);
		if (rc < 0) {
			if (done)
				qp_fail(qp, rc == -EPROTO ? rc : -ECONNRESET);
			return rc;
		}
		done += c;
		recs++;
	} while (done < len);
	t->msgs++;
	qp_tx_kick(qp);
	__atomic_fetch_add(&h->txstat.bytes, len, __ATOMIC_RELAXED);
	__atomic_fetch_add(&h->txstat.records, recs, __ATOMIC_RELAXED);
	return (ssize_t)len;
}

static ssize_t qp_send_reserve(struct ntbx_qp *qp, void **buf, size_t max,
                               int flags);

ssize_t ntbx_qp_send_reserve(struct ntbx_qp *qp, void **buf, size_t max,
                             int flags)
{
	int rc = qp_tx_begin(qp);
	if (rc)
		return rc;
	if (qp->resv)
		return ntbx_err(EBUSY, "queue pair: a reservation is pending");
	if (qp->hops > 1)
		return -EOPNOTSUPP;
	ssize_t n = qp_send_reserve(qp, buf, max, flags);
	tx_store(qp);
	return n;
}

static ssize_t qp_send_reserve(struct ntbx_qp *qp, void **buf, size_t max,
                               int flags)
{
	int rc;
	struct qp_txs *t = &qp->tx;
	int nb = flags & NTBX_QP_NONBLOCK;
	struct qp_adv a;
	int adv = qp_tx_advert(qp, t->msgs, &a);
	if (adv && max <= a.len && !(qp->flags & NTBX_QP_NO_PUSH) &&
	    a.off <= qp->win_size && a.len <= qp->win_size - a.off) {
		/* the peer's buffer, and room for the PUSH record */
		rc = qp_tx_wait_space(qp, qp_tx_need(qp->psize, t->wpos, 0), nb);
		if (rc < 0)
			return rc;
		if (qp->dout && qp->pstage_size < max) {
			/* the bytes are staged here and sent at commit */
			uint8_t *ns = realloc(qp->pstage, max);
			if (!ns)
				return -ENOMEM;
			qp->pstage = ns;
			qp->pstage_size = max;
		}
		qp->resv = RESV_PUSH;
		qp->resv_adv = a;
		qp->resv_max = max;
		*buf = qp->dout ? qp->pstage : qp->win + a.off;
		return (ssize_t)max;
	}
	if (max > qp->pmax)
		return -EMSGSIZE;
	rc = qp_tx_wait_space(qp, qp_tx_need(qp->psize, t->wpos, (uint32_t)max),
	                      nb);
	if (rc < 0)
		return rc;
	uint64_t pos = t->wpos & (qp->psize - 1);
	qp->resv = RESV_RING;
	qp->resv_wpos = t->wpos;
	qp->resv_pad = pos + qp_rec_bytes(max) > qp->psize;
	qp->resv_rec = qp->resv_pad ? 0 : pos;
	qp->resv_adv_skip = adv;
	qp->resv_max = max;
	*buf = qp->pring + qp->resv_rec + QP_REC_HDR;
	return (ssize_t)max;
}

void ntbx_qp_send_abort(struct ntbx_qp *qp, size_t written)
{
	if (qp->resv == RESV_RING && written) {
		/* Lines beyond the write position must stay zero where a
		 * header may go: the reader would take a stale word for one. */
		if (written > qp->resv_max)
			written = qp->resv_max;
		for (uint64_t i = 0; i < QP_REC_HDR + written; i += QP_LINE)
			__atomic_store_n((uint32_t *)(qp->pring + qp->resv_rec + i),
			                 0, __ATOMIC_RELAXED);
	}
	qp->resv = 0;
}

ssize_t ntbx_qp_send_commit(struct ntbx_qp *qp, size_t len)
{
	int kind = qp->resv;
	if (!kind)
		return ntbx_err(EINVAL, "queue pair: nothing reserved");
	if (len > qp->resv_max) {
		ntbx_qp_send_abort(qp, qp->resv_max);
		return ntbx_err(EINVAL, "queue pair: commit beyond the reservation");
	}
	int rc = qp_closed_err(qp);
	if (rc == 0)
		rc = tx_load(qp);
	if (rc) {
		ntbx_qp_send_abort(qp, len);
		return rc;
	}
	qp->resv = 0;
	struct qp_half *h = qp->h;
	struct qp_txs *t = &qp->tx;
	/* Only this handle writes while a reservation is pending: the write
	 * index is the one the reservation was made at, whatever the shared
	 * copy says now. */
	if (kind == RESV_RING)
		t->wpos = qp->resv_wpos;
	if (kind == RESV_PUSH) {
		if (len && qp->dout &&
		    qp_push_copy(qp, qp->resv_adv.off, qp->pstage, len) < 0) {
			tx_store(qp);
			return qp_error(qp);
		}
		if (len)   /* the record's len is the message length */
			qp_tx_emit(qp, QP_T_PUSH, 0, qp->resv_adv.seq, NULL,
			           (uint32_t)len);
		else       /* a PUSH is never empty: an empty record instead */
			qp_tx_emit(qp, QP_T_DATA, 0, 0, NULL, 0);
		t->adv_next++;
		if (len)
			__atomic_fetch_add(&h->txstat.pushed, len, __ATOMIC_RELAXED);
	} else {
		uint64_t pos = t->wpos & (qp->psize - 1);
		int drc = 0;
		if (qp->resv_pad) {
			qp_rec_write(qp->pring, pos, t->wpos, QP_T_PAD, 0, 0, NULL, 0);
			t->wpos += qp->psize - pos;
			if (qp->dout)
				drc = qp_dout_rec(qp->dout, pos, QP_REC_HDR);
		}
		/* the payload is in place: header, seq last */
		qp_rec_write(qp->pring, qp->resv_rec, t->wpos, QP_T_DATA, 0,
		             (uint32_t)len, NULL, (uint32_t)len);
		if (qp->dout && drc == 0)   /* from the mirror, where it was put */
			drc = qp_dout_rec(qp->dout, qp->resv_rec, QP_REC_HDR + len);
		if (drc < 0)
			qp_fail(qp, -ECONNRESET);
		t->wpos += qp_rec_bytes(len);
		if (qp->resv_adv_skip)
			t->adv_next++;
	}
	t->msgs++;
	qp_tx_kick(qp);
	tx_store(qp);
	/* the staged push bytes are the DMA's source until it lands */
	if (kind == RESV_PUSH && qp->dout && qp_dout_flush(qp->dout) < 0)
		return qp_fail(qp, -ECONNRESET);
	__atomic_fetch_add(&h->txstat.bytes, len, __ATOMIC_RELAXED);
	__atomic_fetch_add(&h->txstat.records, 1, __ATOMIC_RELAXED);
	return (ssize_t)len;
}

int ntbx_qp_shutdown(struct ntbx_qp *qp)
{
	int rc = qp_ready(qp);
	if (rc < 0)
		return rc;
	struct qp_half *h = qp->h;
	if (__atomic_load_n(&h->conn.state, __ATOMIC_ACQUIRE) & QP_ST_SHUT_WR)
		return 0;
	rc = tx_load(qp);
	if (rc == 0)
		rc = qp_tx_wait_space(qp, qp_tx_need(qp->psize, qp->tx.wpos, 0), 0);
	if (rc == 0)
		rc = qp_tx_emit(qp, QP_T_EOF, 0, 0, NULL, 0);
	__atomic_fetch_or(&h->conn.state, QP_ST_SHUT_WR, __ATOMIC_RELEASE);
	if (rc == 0) {
		qp_tx_kick(qp);
		tx_store(qp);
		/* DMA only: the end of stream has landed when shutdown returns,
		 * before the caller tells anyone by other means (the sockets
		 * layer's FIN on the shadow connection); a failure means the
		 * peer is gone, with nothing to tell */
		if (qp->dout)
			qp_dout_flush(qp->dout);
		return 0;
	}
	/* the peer closed or died: nothing to tell it */
	return rc == -EPIPE || rc == -ECONNRESET ? 0 : rc;
}

/* ------------------------------------------------------------ reader */

/* Store the credits into the peer's half. */
static void qp_put_tail(struct ntbx_qp *qp, uint64_t rpos)
{
	if (qp->ph)
		__atomic_store_n(&qp->ph->pr.tx_tail, rpos, __ATOMIC_RELEASE);
	else
		PH_PUT(qp, pr.tx_tail, rpos);
}

/* Publish credits: in batches of ring/8, at once if the peer writer waits
 * for room or @force. */
static void qp_rx_credits(struct ntbx_qp *qp, int force)
{
	struct qp_half *h = qp->h;
	struct qp_rxs *s = &qp->rx;
	if (!qp->mapped)
		return;
	uint64_t consumed = s->rpos - s->published;
	/* The shared read position never lags the credits we give: the ring
	 * forwarder checks a frame's position against it, and another thread
	 * or process looks at it (poll, spare-half cleaning). */
	if (force || consumed >= qp->size / 8)
		rx_store(qp);
	if (qp->hops > 1) {
		if (consumed && (force || consumed >= qp->size / 8)) {
			struct qp_frame fr = {
				.dst_node = (uint32_t)qp->peer_node,
				.src_node = (uint32_t)qp->node,
				.dst_off = qp->peer_off,
				.dst_cookie = qp->peer_cookie,
				.pos = s->rpos,
				.rtype = QP_T_ACK,
			};
			if (qp_fwd_inject(qp->f, qp->port, &fr, NULL, 1,
			                  qp_fwd_hint(qp)) == 0)
				s->published = s->rpos;
		}
		return;
	}
	int published = 0;
	if (consumed && (force || consumed >= qp->size / 8)) {
		/* which CPU the credits come from (a hint for the writer's
		 * wait, as qp_tx_kick's for the reader's) */
		int cpu = sched_getcpu();
		if (cpu >= 0 && (uint32_t)cpu + 1 != qp->cpu_told_cr) {
			qp->cpu_told_cr = (uint32_t)cpu + 1;
			if (qp->ph)
				__atomic_store_n(&qp->ph->pr.cpu, qp->cpu_told_cr,
				                 __ATOMIC_RELAXED);
			else
				PH_PUT(qp, pr.cpu, qp->cpu_told_cr);
		}
		qp_put_tail(qp, s->rpos);
		s->published = s->rpos;
		published = 1;
	}
	/* DMA only: credits still on their way ring the writer anyway, as
	 * records do (qp_tx_kick) */
	int ring = published && !qp_stores_landed(qp);
	if (published)
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
	uint32_t wants = __atomic_load_n(&h->pw.tx_wants, __ATOMIC_ACQUIRE);
	if (wants != s->wants_ack || ring) {
		s->wants_ack = wants;
		if (s->rpos != s->published) {
			qp_put_tail(qp, s->rpos);
			s->published = s->rpos;
		}
		qp_ring_peer(qp, h);
		__atomic_fetch_add(&h->rxstat.doorbells, 1, __ATOMIC_RELAXED);
	}
}

static int rx_ready(struct ntbx_qp *qp, void *arg)
{
	(void)arg;
	if (qp_error(qp))
		return 1;
	struct qp_rx r;
	qp_rx_ctx(qp, &r);
	return qp_rx_status(&r) != -EAGAIN;
}

/* After a core call: failed -> sticky error. */
static int qp_rx_rc(struct ntbx_qp *qp, int rc)
{
	if (rc == -EPROTO)
		return qp_fail(qp, -EPROTO);
	return rc;
}

/* Nothing to read yet: credits back, then -EAGAIN if @nonblock, else wait
 * until there is (0) or the queue pair fails (-errno). */
static int qp_rx_wait(struct ntbx_qp *qp, int nonblock)
{
	qp_rx_credits(qp, 0);
	if (nonblock)
		return -EAGAIN;
	return qp_wait_for(qp, rx_ready, NULL, W_RX, -1, 0);
}

/*
 * A nonblocking receive that found part of a message waits for the rest,
 * which an honest sender is writing (it waits only for the credits we
 * give).  A live peer that stops in the middle, or that wrote a message
 * start into our reader state, would hold a nonblocking caller for ever:
 * after QP_STALL_MS without the message completing, the queue pair fails.
 */
#define QP_STALL_MS 2000
static int qp_rx_wait_rest(struct ntbx_qp *qp)
{
	qp_rx_credits(qp, 0);
	int rc = qp_wait_for(qp, rx_ready, NULL, W_RX, QP_STALL_MS, 0);
	if (rc == -ETIMEDOUT)
		return qp_fail(qp, -EPROTO);
	return rc;
}

static ssize_t qp_read(struct ntbx_qp *qp, void *buf, size_t len,
                       int flags);

/*
 * Every reader call works on a snapshot of the reader state (struct
 * ntbx_qp): load, the call, store.  RX_CALL wraps the body @call so that
 * no return path forgets the store.
 */
#define RX_CALL(qp, call) ({ rx_load(qp); __typeof__(call) r_ = (call); \
                             rx_store(qp); r_; })

ssize_t ntbx_qp_read(struct ntbx_qp *qp, void *buf, size_t len, int flags)
{
	int rc = qp_ready(qp);
	if (rc < 0)
		return rc;
	if (len == 0)
		return 0;
	return RX_CALL(qp, qp_read(qp, buf, len, flags));
}

static ssize_t qp_read(struct ntbx_qp *qp, void *buf, size_t len, int flags)
{
	int rc;
	for (;;) {
		rc = qp_error(qp);
		if (rc)
			return rc;
		struct qp_rx r;
		qp_rx_ctx(qp, &r);
		ssize_t n = qp_rx_read(&r, buf, len);
		if (n >= 0) {
			if (n > 0) {
				qp_rx_credits(qp, 0);
				__atomic_fetch_add(&qp->h->rxstat.bytes, (uint64_t)n,
				                   __ATOMIC_RELAXED);
			} else {
				qp->rx.eof = 1;
			}
			return n;
		}
		if (n != -EAGAIN)
			return qp_rx_rc(qp, (int)n);
		rc = qp_rx_wait(qp, flags & NTBX_QP_NONBLOCK);
		if (rc < 0)
			return rc;
	}
}

static ssize_t qp_read_landed(struct ntbx_qp *qp, void *buf, size_t len)
{
	struct qp_rx r;
	qp_rx_ctx(qp, &r);
	return qp_rx_read(&r, buf, len);
}

ssize_t ntbx_qp_read_landed(struct ntbx_qp *qp, void *buf, size_t len)
{
	if (!qp->mapped)
		return -ENOTCONN;
	if (len == 0)
		return 0;
	/* our ring is local memory: what landed is there whatever became
	 * of the link; no credits go back (the peer is not reachable) */
	return RX_CALL(qp, qp_read_landed(qp, buf, len));
}

/* A message of @n bytes was taken: credits back, counters. */
static ssize_t rx_took(struct ntbx_qp *qp, uint64_t n)
{
	qp_rx_credits(qp, 0);
	__atomic_fetch_add(&qp->h->rxstat.bytes, n, __ATOMIC_RELAXED);
	__atomic_fetch_add(&qp->h->rxstat.records, 1, __ATOMIC_RELAXED);
	return (ssize_t)n;
}

/* End of stream reached. */
static ssize_t rx_ended(struct ntbx_qp *qp, int *eof)
{
	qp->rx.eof = 1;
	if (eof)
		*eof = 1;
	return 0;
}

static ssize_t qp_recv_common(struct ntbx_qp *qp, void *buf, size_t cap,
                              int flags, int *eof, int posted, uint64_t *off)
{
	int rc;
	if (eof)
		*eof = 0;
	size_t got = 0;
	for (;;) {
		rc = qp_error(qp);
		if (rc)
			return rc;
		struct qp_rx r;
		qp_rx_ctx(qp, &r);
		rc = qp_rx_recv(&r, buf, cap, &got, posted, off);
		if (rc == 1)
			return rx_took(qp, got);
		if (rc == 0)
			return rx_ended(qp, eof);
		if (rc != -EAGAIN)
			return qp_rx_rc(qp, rc);
		/* A message started is finished waiting, even if NONBLOCK. */
		if (!(flags & NTBX_QP_NONBLOCK))
			rc = qp_rx_wait(qp, 0);
		else if (!got && !qp->rx.in_msg)
			rc = qp_rx_wait(qp, 1);
		else
			rc = qp_rx_wait_rest(qp);
		if (rc < 0) {
			if (got)   /* part of a message is lost with the peer */
				qp_fail(qp, rc);
			return rc;
		}
	}
}

ssize_t ntbx_qp_recv(struct ntbx_qp *qp, void *buf, size_t cap, int flags,
                     int *eof)
{
	int rc = qp_ready(qp);
	if (rc < 0)
		return rc;
	return RX_CALL(qp, qp_recv_common(qp, buf, cap, flags, eof, 0, NULL));
}

ssize_t ntbx_qp_recv_posted(struct ntbx_qp *qp, uint64_t *off, int flags)
{
	int rc = qp_ready(qp);
	if (rc < 0)
		return rc;
	return RX_CALL(qp, qp_recv_common(qp, NULL, 0, flags, NULL, 1, off));
}

static ssize_t qp_recv_zc(struct ntbx_qp *qp, const void **msg, uint64_t *off,
                          int flags, int *eof);

ssize_t ntbx_qp_recv_zc(struct ntbx_qp *qp, const void **msg, uint64_t *off,
                        int flags, int *eof)
{
	int rc = qp_ready(qp);
	if (rc < 0)
		return rc;
	return RX_CALL(qp, qp_recv_zc(qp, msg, off, flags, eof));
}

static ssize_t qp_recv_zc(struct ntbx_qp *qp, const void **msg, uint64_t *off,
                          int flags, int *eof)
{
	int rc;
	if (eof)
		*eof = 0;
	*msg = NULL;
	*off = NTBX_QP_NO_BUF;
	if (qp->zc_held)
		return ntbx_err(EBUSY, "queue pair: zero-copy message not "
		                "released");
	for (;;) {
		rc = qp_error(qp);
		if (rc)
			return rc;
		struct qp_rx r;
		const uint8_t *p;
		uint32_t len;
		uint64_t o;
		qp_rx_ctx(qp, &r);
		rc = qp_rx_zc(&r, &p, &len, &o, &qp->zc_h);
		if (rc == QP_RX_ZC_COPY) {
			/* several records: copied into the message's posted
			 * buffer (-ENOBUFS if it has none) */
			ssize_t n = qp_recv_common(qp, NULL, 0, flags, eof, 1, &o);
			if (n >= 0) {
				*off = o;
				*msg = qp->mem + o;
			}
			return n;
		}
		if (rc == QP_RX_ZC_PUSHED || rc == QP_RX_ZC_HELD) {
			*off = o;
			*msg = p;
			if (rc == QP_RX_ZC_HELD) {
				/* counted when consumed */
				qp->zc_held = 1;
				qp->zc_rpos = qp->rx.rpos;
				return (ssize_t)len;
			}
			return rx_took(qp, len);
		}
		if (rc == 0)
			return rx_ended(qp, eof);
		if (rc == -EINVAL)
			return ntbx_err(EINVAL, "queue pair: zero-copy receive of a "
			                "message partly read otherwise");
		if (rc != -EAGAIN)
			return qp_rx_rc(qp, rc);
		rc = qp_rx_wait(qp, flags & NTBX_QP_NONBLOCK);
		if (rc < 0)
			return rc;
	}
}

int ntbx_qp_recv_zc_done(struct ntbx_qp *qp)
{
	if (!qp->zc_held)
		return 0;
	qp->zc_held = 0;
	struct qp_rx r;
	rx_load(qp);
	qp_rx_ctx(qp, &r);
	if (qp_rx_zc_done(&r, qp->zc_rpos, &qp->zc_h) < 0)
		return ntbx_err(EINVAL, "queue pair: zero-copy message consumed "
		                "by another call");
	rx_took(qp, qp->zc_h.len);
	rx_store(qp);
	return 0;
}

ssize_t ntbx_qp_peek_len(struct ntbx_qp *qp)
{
	int rc = qp_ready(qp);
	if (rc < 0)
		return rc;
	rc = qp_error(qp);
	if (rc)
		return rc;
	struct qp_rx r;
	int eof;
	rx_load(qp);
	qp_rx_ctx(qp, &r);
	ssize_t n = qp_rx_msg_len(&r, &eof);
	rx_store(qp);
	return n < 0 ? qp_rx_rc(qp, (int)n) : n;
}

int ntbx_qp_post_recv(struct ntbx_qp *qp, uint64_t off, size_t len)
{
	int rc = qp_ready(qp);
	if (rc < 0)
		return rc;
	struct qp_rx r;
	struct qp_adv a;
	rx_load(qp);
	qp_rx_ctx(qp, &r);
	rc = qp_rx_post(&r, off, len, &a);
	rx_store(qp);
	if (rc == -EINVAL)
		return ntbx_err(EINVAL, "queue pair: posted buffer outside node "
		                "memory");
	if (rc < 0)
		return rc;
	if (qp->ph) {
		/* seqlock write into the peer's advert slot */
		struct qp_adv *slot = &qp->ph->adv[(a.seq - 1) % QP_NPOST];
		__atomic_store_n(&slot->seq, 0, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_RELEASE);
		slot->off = a.off;
		slot->len = a.len;
		slot->msg = a.msg;
		__atomic_store_n(&slot->seq, a.seq, __ATOMIC_RELEASE);
	} else if (qp->dout) {
		/* the same seqlock, as three writes that land in order */
		size_t so = offsetof(struct qp_half, adv) +
		            (size_t)((a.seq - 1) % QP_NPOST) * sizeof(struct qp_adv);
		uint32_t zero = 0;
		if (ph_put(qp, so, &zero, sizeof zero) < 0 ||
		    ph_put(qp, so + offsetof(struct qp_adv, off), &a.off,
		           sizeof(struct qp_adv) - offsetof(struct qp_adv, off)) < 0 ||
		    ph_put(qp, so, &a.seq, sizeof a.seq) < 0)
			return qp_error(qp);
	}
	return 0;
}

/* ------------------------------------------------------------ readiness */

/*
 * Readiness, read-only: a reader thread and a writer thread may each be
 * inside a call while a third asks, so this neither consumes nor updates
 * either side's state.  Errors found here are left for the reader or
 * writer to report.
 */
static int qp_poll_mask(struct ntbx_qp *qp)
{
	if (qp_ready(qp) < 0)
		return 0;
	int m = 0;
	if (qp_error(qp))
		return NTBX_QP_ERROR | NTBX_QP_READABLE | NTBX_QP_WRITABLE;
	struct qp_rx r;
	qp_rx_ctx(qp, &r);
	/* read-only, from any thread: the shared read position, loaded once
	 * by the peek itself */
	r.s = (struct qp_rxs *)&qp->h->rx;
	int st = qp_rx_peek(&r);
	if (st != -EAGAIN)
		m |= NTBX_QP_READABLE;
	if (st == 0 || r.peer_closed)
		m |= NTBX_QP_HUP;
	int64_t fr = qp_tx_free_peek(qp);
	if ((uint64_t)fr >= qp_tx_need(qp->psize,
	                               __atomic_load_n(&qp->h->tx.wpos,
	                                               __ATOMIC_RELAXED), 1) ||
	    qp_closed_err(qp))
		m |= NTBX_QP_WRITABLE;
	if (qp->peer_dead)
		m |= NTBX_QP_HUP | NTBX_QP_ERROR | NTBX_QP_READABLE;
	return m;
}

int ntbx_qp_poll(struct ntbx_qp *qp)
{
	return qp_poll_mask(qp);
}

struct poll_arg { int events; };

static int poll_ready(struct ntbx_qp *qp, void *arg)
{
	struct poll_arg *a = arg;
	return qp_poll_mask(qp) & (a->events | NTBX_QP_ERROR | NTBX_QP_HUP);
}

int ntbx_qp_wait(struct ntbx_qp *qp, int events, int timeout_ms)
{
	struct poll_arg a = { events };
	int m = qp_poll_mask(qp);
	if (m & (events | NTBX_QP_ERROR | NTBX_QP_HUP))
		return m;
	if (!qp->mapped)
		return -ENOTCONN;
	int dir = (events & NTBX_QP_READABLE ? W_RX : 0) |
	          (events & NTBX_QP_WRITABLE ? W_TX : 0);
	/* W_RX returns credits before sleeping: reader state, which only a
	 * wait for reading may touch (a writer thread may wait meanwhile) */
	if (!dir)
		dir = W_RX;
	int rc = dir & W_RX
	         ? RX_CALL(qp, qp_wait_for(qp, poll_ready, &a, dir, timeout_ms, 1))
	         : qp_wait_for(qp, poll_ready, &a, dir, timeout_ms, 1);
	if (rc == -ECONNRESET)
		return qp_poll_mask(qp) | NTBX_QP_HUP | NTBX_QP_ERROR;
	if (rc < 0)
		return rc;
	return qp_poll_mask(qp);
}

void ntbx_qp_get_stats(struct ntbx_qp *qp, struct ntbx_qp_stats *s)
{
	struct qp_half *h = qp->h;
	s->tx_bytes = h->txstat.bytes;
	s->rx_bytes = h->rxstat.bytes;
	s->tx_records = h->txstat.records;
	s->rx_records = h->rxstat.records;
	s->pushed_bytes = h->txstat.pushed;
	s->doorbells = h->txstat.doorbells + h->rxstat.doorbells;
	s->sleeps = h->txstat.sleeps + h->rxstat.sleeps;
}

/* ------------------------------------------------------------ close */

void ntbx_qp_close(struct ntbx_qp *qp, int last)
{
	if (!qp)
		return;
	struct qp_half *h = qp->h;
	__atomic_fetch_sub(&h->conn.refs, 1, __ATOMIC_RELAXED);
	if (!last) {
		qp_handle_free(qp);
		return;
	}
	uint32_t st = __atomic_load_n(&h->conn.state, __ATOMIC_ACQUIRE);
	if ((st & QP_ST_CONNECTED) && qp_ready(qp) == 0 && qp_peer_alive(qp) &&
	    !(st & QP_ST_CLOSED) && tx_load(qp) == 0) {
		if (!(st & QP_ST_SHUT_WR) && !(st & QP_ST_FAILED) &&
		    qp_tx_wait_space(qp, qp_tx_need(qp->psize, qp->tx.wpos, 0), 1) == 0 &&
		    qp_tx_emit(qp, QP_T_EOF, 0, 0, NULL, 0) == 0)
			__atomic_fetch_or(&h->conn.state, QP_ST_SHUT_WR,
			                  __ATOMIC_RELEASE);
		/* end of stream where our writing ended, even without room
		 * for the EOF record */
		uint64_t endpos = qp->tx.wpos + 1;
		if (qp->dout) {
			PH_PUT(qp, peer_closed, endpos);
			qp_ring_peer(qp, h);
		} else if (qp->hops <= 1) {
			__atomic_store_n(&qp->ph->peer_closed, endpos,
			                 __ATOMIC_RELEASE);
			qp_ring_peer(qp, h);
		} else {
			struct qp_frame fr = {
				.dst_node = (uint32_t)qp->peer_node,
				.src_node = (uint32_t)qp->node,
				.dst_off = qp->peer_off,
				.dst_cookie = qp->peer_cookie,
				.pos = qp->tx.wpos,
				.rtype = QP_T_CLOSE,
			};
			qp_fwd_inject(qp->f, qp->port, &fr, NULL, 0,
			              qp_fwd_hint(qp));
		}
		tx_store(qp);
	}
	__atomic_fetch_or(&h->conn.state, QP_ST_CLOSED, __ATOMIC_RELEASE);
	half_try_free(qp->dev, h, (int64_t)qp->off, qp->size);
	qp_reap(qp->dev, QP_SPARES_MAX, 0);
	qp_handle_free(qp);
}

/* --------------------------------------------- sleeping in event loops */

void ntbx_qp_wake_bit(const struct ntbx_qp *qp, int *port, uint32_t *bits)
{
	*port = qp->wake_port;
	*bits = 1u << qp->bit;
}

void ntbx_qp_set_sleeper(struct ntbx_qp *qp, struct ntbx_db_wake *wk)
{
	qp->sleeper = wk;
}

int ntbx_qp_notify(struct ntbx_qp *qp)
{
	if (qp_ready(qp) < 0)
		return -ENOTCONN;
	if (qp->hops > 1)
		return -EOPNOTSUPP;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	qp_ring_peer(qp, NULL);
	return 0;
}

static int qp_cpu_hint(const uint32_t *w)
{
	uint32_t c = __atomic_load_n(w, __ATOMIC_RELAXED);
	return c && c <= CPU_SETSIZE ? (int)c - 1 : -1;
}

int ntbx_qp_peer_cpu(const struct ntbx_qp *qp)
{
	return qp_cpu_hint(&qp->h->pw.cpu);
}

int ntbx_qp_arm(struct ntbx_qp *qp, int events)
{
	if (qp_ready(qp) < 0)
		return -ENOTCONN;
	if (events & NTBX_QP_READABLE) {
		rx_load(qp);
		qp_rx_credits(qp, 1);
		rx_store(qp);
	}
	qp_arm_dirs(qp, events & NTBX_QP_READABLE, events & NTBX_QP_WRITABLE);
	return qp_poll_mask(qp);
}
