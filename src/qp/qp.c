/* SPDX-License-Identifier: MIT */
/*
 * Queue pairs: endpoints made, connected, attached, mapped, reaped and
 * closed (the handle's life; struct ntbx_qp is in qp_handle.h).
 *
 * The layout of an endpoint and who writes which field is in qp_int.h.
 * The writer (writer.c) stores records into the peer's ring through the
 * outbound window (or, more than one hop away, hands frames to the ring
 * forwarder, fwd.c); the reader (reader.c) runs the receive core (ring.c)
 * on its own ring and returns credits in batches; wait.c sleeps.
 * Doorbells are rung only when the other side said it is going to sleep.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "qp/qp_handle.h"

/* An endpoint's doorbell bit and wake key, from where its half lives:
 * both sides compute them, neither is stored for the other to trust.
 * The key takes the hash's top bits and the bit its middle ones, so two
 * endpoints that share a bit seldom share a key too. */
static uint64_t qp_hash_of(uint64_t off)
{
	return (off >> 6) * 0x9e3779b97f4a7c15ull;
}

static uint32_t qp_bit_of(uint64_t off)
{
	uint64_t x = qp_hash_of(off) >> 32;
	return NTBX_DB_QP_FIRST + (uint32_t)(x % NTBX_DB_QP_COUNT);
}

static int qp_key_of(uint64_t off)
{
	_Static_assert(NTBX_DB_KEYS == 64, "six bits of key");
	return (int)(qp_hash_of(off) >> 58);
}

int ntbx_qp_wake_key(const struct ntbx_qp *qp)
{
	return qp_key_of(qp->off);
}

/* The peer's endpoint is at @off: what our rings of it name. */
static void qp_set_peer_off(struct ntbx_qp *qp, uint64_t off)
{
	qp->peer_off = off;
	qp->pbit = qp_bit_of(off);
	qp->pkey = qp_key_of(off);
}

static int log2u(uint32_t v)
{
	int l = 0;
	while ((1u << l) < v)
		l++;
	return l;
}

/* ------------------------------------------------------------ mapping */

/* The peer's endpoint, from the connection line of our half, loaded once
 * and checked (set-up only: connect, attach). */
static int qp_load_peer(struct ntbx_qp *qp)
{
	const volatile struct qp_half *h = qp->h;
	qp_set_peer_off(qp, h->conn.peer_off);
	qp->peer_cookie = h->conn.peer_cookie;
	qp->peer_epoch = h->conn.peer_epoch;
	qp->psize = 1u << (qp->peer_cookie & 0x1f);
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
		__atomic_store_n(&qp->mapped, 1, __ATOMIC_RELEASE);
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
	if (qp->wz && !__atomic_load_n(&qp->zm, __ATOMIC_ACQUIRE)) {
		/* Made once, whichever of the reader and writer threads maps
		 * first; only the writer uses it. */
		struct qp_zmap *z = qp_zmap_new(qp->psize), *none = NULL;
		if (!z)
			return ntbx_err(ENOMEM, "queue pair: out of memory");
		if (!__atomic_compare_exchange_n(&qp->zm, &none, z, 0,
		                                 __ATOMIC_ACQ_REL,
		                                 __ATOMIC_ACQUIRE))
			free(z);
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
		__atomic_store_n(&qp->mapped, 1, __ATOMIC_RELEASE);
		return 0;
	}
	qp->ph = (struct qp_half *)(qp->win + poff);
	qp->pring = qp->win + poff + QP_HALF_HDR;
	__atomic_store_n(&qp->mapped, 1, __ATOMIC_RELEASE);
	return 0;
}

/* ------------------------------------------------------------ reaping */

/*
 * Spare halves.  A new endpoint's ring must be all zero (a record is there
 * when its line's first word holds the expected sequence number), and
 * zeroing 512 KiB per endpoint, two per connection, was the largest cost
 * of short connections.  But only the first word of each line matters
 * (qp_int.h, the record header), and what the writer wrote is known from
 * its final position (peer_closed, which the writer stores last), so when
 * both sides have closed, the ring is all zero again once the first word
 * of each line written is (half_ring_clean): a short connection's few
 * lines, at most the whole ring's.  Such a half is kept as a
 * spare (magic QP_SPARE, block still allocated) and the next endpoint with
 * the same ring size on this node takes it, zeroing only its 4 KiB header.
 * At most QP_SPARES_MAX are kept per node; on a full node they are freed
 * first.  Only direct (hops <= 1) halves whose writer closed qualify: over
 * forwarding, or after a writer died, the final position is not known;
 * nor does a half whose connection failed (its ring may hold anything).
 *
 * The ring is not read to prove it clean: a peer that wrote outside the
 * range it declared and then closed cleanly fails (or feeds) the next
 * connection to take the spare, but a peer with a window on this node can
 * write any line of any ring here at any time, that connection's included,
 * so a read at close guards nothing that peer could not break anyway (and
 * cost 28.7 us per half, most of a short connection's fabric set-up).
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
	/* A writer that zeroes (qp_writer_zeroes) leaves the lines of the
	 * large records it wrote as they are until a header goes there, and
	 * only it knew which those are, so everything written goes: all it
	 * wrote if that was less than a lap (a short connection: a few
	 * lines), else the whole ring.  That also covers a reader that
	 * zeroed. */
	uint64_t written = pc - 1;
	qp_ring_zero((uint8_t *)h + QP_HALF_HDR, rs, 0,
	             written < rs ? written : rs);
	return 1;
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

/* Who zeroes the lines of a ring's large records (qp_int.h, the record
 * header): its writer when that is a store through a window or this
 * host's DMA engine (one store, or one more local write, per record at
 * most), its reader across hosts (one more network write per record) and
 * on queue pairs the ring forwards (fwd.c writes their records).  Both
 * ends decide the same from the fabric and the distance, which they
 * share. */
static int qp_writer_zeroes(const struct ntbx_qp *qp)
{
	return qp->hops <= 1 && !ntbx_fabric_spans_hosts(qp->f);
}

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
	free(qp->zm);
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
	qp->wz = qp_writer_zeroes(qp);
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

/*
 * Random bits for a new endpoint's cookie (which tells one endpoint at an
 * offset from the next one made there).  One getrandom per process, not
 * one per endpoint (a system call per connection the kernel path does not
 * make): the seed, mixed with the time, the offset and a count, through
 * splitmix64; a forked child starts from its parent's seed but not at its
 * time and count.
 */
static uint64_t qp_cookie_bits(uint64_t off)
{
	static uint64_t seed, count;
	uint64_t sd = __atomic_load_n(&seed, __ATOMIC_RELAXED);
	if (!sd) {
		if (getrandom(&sd, sizeof sd, 0) != sizeof sd)
			sd = ntbx_now_ns() * 0x9e3779b97f4a7c15ull;
		sd |= 1;
		__atomic_store_n(&seed, sd, __ATOMIC_RELAXED);
	}
	uint64_t z = sd ^ ntbx_now_ns() ^ (off << 17) ^
	             (__atomic_fetch_add(&count, 1, __ATOMIC_RELAXED) *
	              0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
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
	uint64_t rnd = qp_cookie_bits((uint64_t)off);
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
	qp->wz = qp_writer_zeroes(qp);
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
	qp_set_peer_off(qp, remote->off);
	qp->peer_cookie = remote->cookie;
	qp->peer_epoch = remote->epoch;
	qp->psize = prs;
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
int qp_ready(struct ntbx_qp *qp)
{
	if (__atomic_load_n(&qp->mapped, __ATOMIC_ACQUIRE))
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

/* ------------------------------------------------------------ close */

/*
 * The peer's half, when it is in our node's memory (same node): if the
 * peer closed before us, our close just made it free (we wrote its
 * peer_closed), so free or keep it now rather than scan the node for it
 * (qp_reap, at the next create, still finds whatever this misses).  It is
 * the endpoint we connected to only while it still has the cookie we were
 * given (a block freed and allocated again has a new one), and its ring
 * size is ours to trust only then.  No scan of the node at close: in a
 * forked child each block header scanned was a page fault.
 */
static void peer_half_try_free(struct ntbx_qp *qp)
{
	if (qp->hops != 0 || !qp->ph)
		return;
	struct qp_half *ph = qp->ph;
	if (__atomic_load_n(&ph->id.magic, __ATOMIC_ACQUIRE) != QP_MAGIC ||
	    __atomic_load_n(&ph->id.cookie, __ATOMIC_RELAXED) != qp->peer_cookie ||
	    __atomic_load_n(&ph->id.ring_size, __ATOMIC_RELAXED) != qp->psize)
		return;
	half_try_free(qp->dev, ph, (int64_t)qp->peer_off, qp->psize);
}


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
		    qp_tx_wait_space(qp, tx_need(qp, qp->tx.wpos, 0), 1) == 0 &&
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
	peer_half_try_free(qp);
	qp_handle_free(qp);
}

