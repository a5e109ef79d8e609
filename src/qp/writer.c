/* SPDX-License-Identifier: MIT */
/*
 * Queue pairs: the writer.  Credits (room in the peer's ring), records
 * emitted into it (or frames handed to the forwarder beyond one hop),
 * pushes into buffers the peer posted, zero-copy send reservations, and
 * shutdown.  Works on the writer's snapshot (tx_load, tx_store).
 */
#include <stdlib.h>

#include "qp/qp_handle.h"

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
int64_t qp_tx_free_peek(struct ntbx_qp *qp)
{
	uint64_t tail = __atomic_load_n(&qp->h->pr.tx_tail, __ATOMIC_ACQUIRE);
	uint64_t wpos = __atomic_load_n(&qp->h->tx.wpos, __ATOMIC_ACQUIRE);
	uint64_t used = wpos - tail;
	return used > qp->psize ? (int64_t)qp->psize : (int64_t)(qp->psize - used);
}

/* Tell the peer's reader there is data, if it asked to be woken; and,
 * when it changed, which CPU we send from (the wait policy's hint: a
 * reader whose writer runs on its own CPU does not spin, ntbx_qp_peer_cpu). */
void qp_tx_kick(struct ntbx_qp *qp)
{
	struct qp_half *h = qp->h;
	if (qp->hops > 1)
		return;   /* the destination's forwarder wakes it */
	PH_TELL_CPU(qp, qp->cpu_told, pw.cpu);
	if (qp_dout_rings(qp)) {
		qp_ring_peer(qp, h);
		__atomic_fetch_add(&h->txstat.doorbells, 1, __ATOMIC_RELAXED);
		return;
	}
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	uint32_t a = __atomic_load_n(&h->pr.rx_armed, __ATOMIC_ACQUIRE);
	if (a != qp->tx.armed_ack) {
		qp->tx.armed_ack = a;
		qp_ring_peer(qp, h);
		__atomic_fetch_add(&h->txstat.doorbells, 1, __ATOMIC_RELAXED);
	}
}

int qp_closed_err(struct ntbx_qp *qp)
{
	int e = qp_error(qp);
	if (e)
		return e;
	uint32_t st = __atomic_load_n(&qp->h->conn.state, __ATOMIC_ACQUIRE);
	if (st & (QP_ST_SHUT_WR | QP_ST_CLOSED))
		return -EPIPE;
	if (__atomic_load_n(&qp->h->peer_closed, __ATOMIC_ACQUIRE))
		return -EPIPE;
	if (__atomic_load_n(&qp->peer_dead, __ATOMIC_RELAXED))
		return -ECONNRESET;
	return 0;
}

struct tx_room { uint64_t need; };

static int tx_ready(struct ntbx_qp *qp, void *arg)
{
	struct tx_room *n = arg;
	if (qp_closed_err(qp))
		return 1;
	int64_t fr = qp_tx_free(qp);
	return fr < 0 || (uint64_t)fr >= n->need;
}

/* Wait until @need bytes are free in the peer's ring.  0 or -errno. */
int qp_tx_wait_space(struct ntbx_qp *qp, uint64_t need, int nonblock)
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
		struct tx_room n = { need };
		int rc = qp_wait_for(qp, tx_ready, &n, W_TX, -1, 0);
		if (rc < 0)
			return rc;
	}
}
/* Emit one record at wpos (room already checked). */
int qp_tx_emit(struct ntbx_qp *qp, uint16_t type, uint16_t flags,
                      uint32_t aux, const void *p, uint32_t len)
{
	struct qp_txs *t = &qp->tx;
	if (qp->dout) {
		/* built in the mirror, then sent: a PAD first if needed, each
		 * with the zero qp_tx_put put in the mirror, sent on its own */
		uint64_t pos = t->wpos & (qp->psize - 1);
		uint64_t body = QP_REC_HDR + (p ? len : 0);
		int rc = 0;
		t->wpos = qp_tx_put(qp->pring, qp->psize, t->wpos, type, flags,
		                    aux, p, len, qp->zm);
		if (pos + qp_rec_bytes(p ? len : 0) > qp->psize) {
			rc = qp_dout_rec(qp->dout, pos, QP_REC_HDR,
			                 qp->zm ? qp->zm->zpad : -1);
			pos = 0;
		}
		if (rc == 0)
			rc = qp_dout_rec(qp->dout, pos, body,
			                 qp->zm ? qp->zm->zrec : -1);
		return rc < 0 ? qp_fail(qp, -ECONNRESET) : 0;
	}
	if (qp->hops <= 1) {
		t->wpos = qp_tx_put(qp->pring, qp->psize, t->wpos, type, flags,
		                    aux, p, len, qp->zm);
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
static int64_t qp_tx_fit(const struct ntbx_qp *qp, uint64_t wpos, uint64_t fr,
                         uint32_t want)
{
	uint32_t size = qp->psize;
	if (tx_need(qp, wpos, want) <= fr)
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
	int64_t c = best < want ? (int64_t)best : want;
	/* a writer that zeroes may need the line after the piece too: a line
	 * less is enough (the piece then needs no more than it did) */
	while (c > 0 && tx_need(qp, wpos, (uint32_t)c) > fr)
		c -= QP_LINE;
	return c > 0 ? c : -1;
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
		int64_t c = qp_tx_fit(qp, t->wpos, (uint64_t)fr, want);
		if (c < 0 || (n && c < want)) {
			/* nothing fits, or only a piece after we wrote some:
			 * return what we wrote, or wait for room */
			if (n)
				break;
			rc = qp_tx_wait_space(qp, tx_need(qp, t->wpos, want),
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
			rc = qp_tx_wait_space(qp, tx_need(qp, t->wpos, 0), nb);
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
		total += need + (qp->zm ? QP_LINE : 0);   /* at most */
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
		rc = qp_tx_wait_space(qp, tx_need(qp, t->wpos, c), 0);
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
		rc = qp_tx_wait_space(qp, tx_need(qp, t->wpos, 0), nb);
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
	rc = qp_tx_wait_space(qp, tx_need(qp, t->wpos, (uint32_t)max),
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
		uint64_t rb = qp_rec_bytes(len);
		int drc = 0;
		struct qp_zmap *z = qp->zm;
		qp_zmap_sync(z, t->wpos);
		/* the room reserved beyond the record may have been written:
		 * its lines may hold anything where a header can go */
		qp_zmap_dirty(z, qp->resv_rec + rb,
		              qp_rec_bytes(qp->resv_max) - rb);
		if (qp->resv_pad) {
			int64_t zp = qp_zmap_rec(z, pos, QP_LINE, qp->psize - pos);
			qp_rec_write(qp->pring, pos, t->wpos, QP_T_PAD, 0, 0, NULL, 0,
			             zp);
			t->wpos += qp->psize - pos;
			if (qp->dout)
				drc = qp_dout_rec(qp->dout, pos, QP_REC_HDR, zp);
		}
		/* the payload is in place: header, seq last */
		int64_t zr = qp_zmap_rec(z, qp->resv_rec, rb, rb);
		qp_rec_write(qp->pring, qp->resv_rec, t->wpos, QP_T_DATA, 0,
		             (uint32_t)len, NULL, (uint32_t)len, zr);
		if (qp->dout && drc == 0)   /* from the mirror, where it was put */
			drc = qp_dout_rec(qp->dout, qp->resv_rec, QP_REC_HDR + len,
			                  zr);
		if (drc < 0)
			qp_fail(qp, -ECONNRESET);
		t->wpos += rb;
		if (z)
			z->wpos = t->wpos;
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
		rc = qp_tx_wait_space(qp, tx_need(qp, qp->tx.wpos, 0), 0);
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

