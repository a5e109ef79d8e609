/* SPDX-License-Identifier: MIT */
/*
 * Queue pairs: the reader.  The receive core (ring.c) on our own ring:
 * reads, messages, zero-copy receive, posted buffers; credits returned to
 * the peer in batches.  Works on the reader's snapshot (RX_CALL).
 */

#include "qp/qp_handle.h"

/* ------------------------------------------------------------ reader */

/* Store the credits into the peer's half. */
static void qp_put_tail(struct ntbx_qp *qp, uint64_t rpos)
{
	PH_STORE(qp, pr.tx_tail, rpos, __ATOMIC_RELEASE);
}

/* Give the writer the credits for all we consumed, and which CPU they
 * come from (a hint for the writer's wait, as qp_tx_kick's for the
 * reader's). */
static void credits_publish(struct ntbx_qp *qp)
{
	struct qp_rxs *s = &qp->rx;
	PH_TELL_CPU(qp, qp->cpu_told_cr, pr.cpu);
	qp_put_tail(qp, s->rpos);
	s->published = s->rpos;
}

/* Publish credits: in batches of ring/8, at once if the peer writer waits
 * for room or @force. */
void qp_rx_credits(struct ntbx_qp *qp, int force)
{
	struct qp_half *h = qp->h;
	struct qp_rxs *s = &qp->rx;
	if (!qp->mapped)
		return;
	uint64_t consumed = s->rpos - s->published;
	if (qp_dout_rings(qp)) {
		/* DMA only: credits are a write and a doorbell that cross the
		 * network and wake the writer; given in batches of ring/8,
		 * at once when the writer asked (qp_arm_dirs), and before a
		 * sleep (@force) only from ring/32 on: small messages, a
		 * ping-pong's, never make the writer wait (a record is at most
		 * ring/4), so their credits wait for the batch.  An ask with
		 * nothing consumed yet stays open (wants_ack unchanged): the
		 * next bytes read answer it. */
		uint32_t wants = __atomic_load_n(&h->pw.tx_wants, __ATOMIC_ACQUIRE);
		uint64_t batch = force ? qp->size / 32 : qp->size / 8;
		if (!consumed || (wants == s->wants_ack && consumed < batch))
			return;
		s->wants_ack = wants;
		rx_store(qp);
		credits_publish(qp);
		qp_ring_peer(qp, h);
		__atomic_fetch_add(&h->rxstat.doorbells, 1, __ATOMIC_RELAXED);
		return;
	}
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
		credits_publish(qp);
		published = 1;
	}
	if (published)
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
	uint32_t wants = __atomic_load_n(&h->pw.tx_wants, __ATOMIC_ACQUIRE);
	if (wants != s->wants_ack) {
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

