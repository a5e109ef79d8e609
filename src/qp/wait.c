/* SPDX-License-Identifier: MIT */
/*
 * Queue pairs: waiting.  Arming (the flags the other side checks before it
 * rings), the spin-then-sleep wait every blocking call uses, readiness
 * (poll, wait, stats) and sleeping in event loops (wake bits, notify,
 * arm).
 */
#include <sched.h>

#include "qp/qp_handle.h"

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
	}
	/* DMA only (qp->dout): no reader's flag.  A flag stored by DMA would
	 * have to land before our re-check, a round trip through both ends'
	 * engines (a network's agents) before every sleep; instead the other
	 * side rings after every record and every credit it publishes
	 * (qp_dout_rings), and its doorbell lands after what it announces
	 * (the device contract).  Our bit, cleared above before the
	 * re-check, is then set by any of them the re-check misses.  A
	 * writer that waits for room asks for credits (the reader gives them
	 * lazily otherwise: qp_rx_credits) with its ask and a doorbell,
	 * which need not land before our re-check: the reader answers with
	 * credits and a doorbell, which find our bit cleared. */
	else if (qp->dout && tx) {
		PH_PUT(qp, pw.tx_wants,
		       __atomic_add_fetch(&h->seq.tx_wants, 1, __ATOMIC_RELAXED));
		qp_ring_peer(qp, h);
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
int ntbx_qp_keep_peer_wakes(struct ntbx_qp *qp)
{
	if (qp_ready(qp) < 0)
		return -ENOTCONN;
	if (qp->hops > 1)
		return -EOPNOTSUPP;
	/* the doorbell qp_ring_peer rings */
	return qp->hops == 0 ? ntbx_db_keep_wakes(qp->dev, 0, 0)
	                     : ntbx_db_keep_wakes(qp->dev, qp->port, 1);
}

static int qp_cpu_hint(const uint32_t *w);

int qp_wait_for(struct ntbx_qp *qp, ready_fn ready, void *arg, int dir,
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
		if ((dir & W_RX) && qp_dout_rings(qp))
			qp_rx_credits(qp, 1);   /* an ask that came before our
			                         * bit was cleared: answered now */
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

/* ------------------------------------------------------------ readiness */

/*
 * Readiness, read-only: a reader thread and a writer thread may each be
 * inside a call while a third asks, so this neither consumes nor updates
 * either side's state.  Errors found here are left for the reader or
 * writer to report.
 */
static int qp_poll_want(struct ntbx_qp *qp, int want)
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
	if (!(want & NTBX_QP_WRITABLE))
		goto done;
	int64_t fr = qp_tx_free_peek(qp);
	/* the writer's zero map is its thread's: the line a writer that
	 * zeroes may need after the record is counted as needed */
	if ((uint64_t)fr >= qp_tx_need(qp->psize,
	                               __atomic_load_n(&qp->h->tx.wpos,
	                                               __ATOMIC_RELAXED), 1) +
	                    (qp->wz ? QP_LINE : 0) ||
	    qp_closed_err(qp))
		m |= NTBX_QP_WRITABLE;
done:
	if (__atomic_load_n(&qp->peer_dead, __ATOMIC_RELAXED))
		m |= NTBX_QP_HUP | NTBX_QP_ERROR | NTBX_QP_READABLE;
	return m;
}

static int qp_poll_mask(struct ntbx_qp *qp)
{
	return qp_poll_want(qp, NTBX_QP_READABLE | NTBX_QP_WRITABLE);
}

int ntbx_qp_poll(struct ntbx_qp *qp)
{
	return qp_poll_mask(qp);
}

/* Without NTBX_QP_WRITABLE the credits line (the peer's reader writes it
 * at every read) is not loaded: on a reader's way out of a wait, that was
 * one more transfer between CPUs before it could read. */
int ntbx_qp_poll_for(struct ntbx_qp *qp, int events)
{
	return qp_poll_want(qp, events);
}

/*
 * For spin loops: the head record's sequence word, the one line the writer
 * stores into when the reader's next record (data, end of stream) lands.
 * Loaded without a lock and without touching the writer's credits line or
 * any other (qp_poll_mask reads both directions, and the credits line is
 * the one the peer's reader writes at every read: polling it steals that
 * line from the peer at each look).  The line where the next header goes
 * is zero until a record lands there (qp_int.h, the record header), so 0
 * means "nothing new" and anything else "look properly"; a peer that
 * died or failed changes nothing here, so a spinner still asks
 * ntbx_qp_poll now and then.
 */
int ntbx_qp_rx_hint(const struct ntbx_qp *qp)
{
	if (!__atomic_load_n(&qp->mapped, __ATOMIC_ACQUIRE) || !qp->ring)
		return 1;
	uint64_t rpos = __atomic_load_n(&qp->h->rx.rpos, __ATOMIC_RELAXED);
	const uint32_t *seq = (const uint32_t *)(qp->ring +
	        (rpos & (qp->size - 1) & ~(uint64_t)(QP_LINE - 1)));
	return __atomic_load_n(seq, __ATOMIC_RELAXED) != 0;
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
	int rx = events & NTBX_QP_READABLE;
	if (rx && !qp_dout_rings(qp)) {
		rx_load(qp);
		qp_rx_credits(qp, 1);
		rx_store(qp);
	}
	qp_arm_dirs(qp, rx, events & NTBX_QP_WRITABLE);
	if (rx && qp_dout_rings(qp)) {
		/* after our bit is cleared: an ask before it is seen here,
		 * one after it rings us (qp_arm_dirs) */
		rx_load(qp);
		qp_rx_credits(qp, 1);
		rx_store(qp);
	}
	return qp_poll_mask(qp);
}
