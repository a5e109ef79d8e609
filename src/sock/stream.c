/* SPDX-License-Identifier: MIT */
/*
 * stream.c — the data path of a fabric socket: reading (the acceptor's
 * TCP prefix first, then the queue pair; MSG_PEEK's read-ahead), writing
 * (by TCP until the switch, then on the queue pair), waiting on the queue
 * pair (spin, then sleep on its doorbell), and the shadow TCP socket
 * answering as kernel TCP would once the peer closed, reset or died.
 * Separate because it is the hot path: every read and write of a fabric
 * socket runs here (its wrappers, sendrecv.c, only dispatch).
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ntbx/fabric.h"
#include "sock/sock.h"
#include "util/util.h"

/* The shadow's news: 0 nothing, 1 end of stream, -errno reset. */
static int shadow_state(int fd)
{
	struct pollfd p = { fd, POLLIN | POLLRDHUP, 0 };
	if (sk_real.poll(&p, 1, 0) <= 0)
		return 0;
	char c;
	ssize_t r = sk_real.recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	if (r == 0)
		return 1;
	if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
		return -errno;
	return 0;
}

/*
 * A connection to another host, looked at while it waits: if the link to
 * the other node is down (its agent said so), or the shadow has bytes
 * while on the fabric (the peer saw the failure first and resynchronises
 * there, failover.c: a side whose own view of the link is still up, e.g.
 * one whose agent hangs, learns it so), go on over the shadow.  A waiting
 * side posts nothing, so no queue-pair call would fail to tell it.  1 if
 * it went on over TCP, -1 if it could not (the connection is reset: a
 * waiter that went on waiting on the fabric hung for good, silent).
 */
static int peer_failed_over(struct sk *s, int fd)
{
	struct sk_conn *c = sk_conn(s);
	if (!c || !c->xk || s->mode != M_FAB)
		return 0;
	if (skx_peer_alive(s, c)) {
		struct pollfd p = { fd, POLLIN, 0 };
		char b;
		if (sk_real.poll(&p, 1, 0) <= 0 ||
		    sk_real.recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) != 1)
			return 0;
	}
	return sk_failover(s, fd) == 0 ? 1 : -1;
}

/*
 * SO_RCVTIMEO / SO_SNDTIMEO (@opt) of @fd's shadow as a deadline from @t0,
 * or UINT64_MAX for none.  Asked only when a call is about to sleep, so a
 * call that finds its bytes never pays for it.
 */
static uint64_t sk_deadline(int fd, int opt, uint64_t t0)
{
	struct timeval tv = { 0, 0 };
	socklen_t l = sizeof tv;
	if (ntbx_sandboxed ||   /* cannot ask (util.h) */
	    getsockopt(fd, SOL_SOCKET, opt, &tv, &l) < 0 ||
	    (tv.tv_sec <= 0 && tv.tv_usec <= 0))
		return UINT64_MAX;
	return t0 + (uint64_t)tv.tv_sec * 1000000000ull +
	       (uint64_t)tv.tv_usec * 1000ull;
}

/* Has the call's timeout passed?  *dl: 0 until asked. */
static int expired(int fd, int opt, uint64_t *dl)
{
	uint64_t now = ntbx_now_ns();
	if (!*dl)
		*dl = sk_deadline(fd, opt, now);
	return now >= *dl;
}

/* Sleep until the shadow has news or (@s given) the other side took its
 * step of the hand-over (sk_wait_pend), at most the back-off, doubling
 * from 1 to 50 ms. */
static void wait_shadow(struct sk *s, int fd, unsigned *backoff, uint64_t dl)
{
	struct pollfd p = { fd, POLLIN, 0 };
	int ms = (int)*backoff;
	uint64_t now = ntbx_now_ns();
	if (dl != UINT64_MAX && dl > now && (dl - now) / 1000000 + 1 < (uint64_t)ms)
		ms = (int)((dl - now) / 1000000 + 1);
	if (s)
		sk_wait_pend(s, fd, ms);
	else
		sk_real.poll(&p, 1, ms);
	if (*backoff < 50)
		*backoff *= 2;
}

static uint64_t *bytes_out(struct sk *s)
{
	struct sk_conn *c = sk_conn(s);
	if (!c)
		return NULL;
	return s->role == 'C' ? &c->bytes_ca : &c->bytes_ac;
}

/* Bytes of ours the peer took off the fabric. */
static uint64_t *peer_read(struct sk *s)
{
	struct sk_conn *c = sk_conn(s);
	if (!c)
		return NULL;
	return s->role == 'C' ? &c->read_ca : &c->read_ac;
}

static uint64_t *bytes_read(struct sk *s)
{
	struct sk_conn *c = sk_conn(s);
	if (!c)
		return NULL;
	return s->role == 'C' ? &c->read_ac : &c->read_ca;
}

/* Bytes written on the fabric that the peer has not read yet. */
uint64_t sk_unread(struct sk *s)
{
	uint64_t *o = bytes_out(s), *r = peer_read(s);
	if (!o || !r)
		return 0;
	/* a reader on another host counts in its own host's table */
	if (__atomic_load_n(&sk_conn(s)->xk, __ATOMIC_RELAXED))
		return 0;
	uint64_t out = __atomic_load_n(o, __ATOMIC_ACQUIRE);
	uint64_t in = __atomic_load_n(r, __ATOMIC_ACQUIRE);
	return out > in ? out - in : 0;
}

/* Bytes the peer wrote on the fabric that we have not read (the ring's
 * and our read-ahead). */
uint64_t sk_unread_in(struct sk *s)
{
	struct sk_conn *c = sk_conn(s);
	uint64_t *r = bytes_read(s);
	if (!c || !r)
		return 0;
	uint64_t out = __atomic_load_n(s->role == 'C' ? &c->bytes_ac
	                                              : &c->bytes_ca,
	                               __ATOMIC_ACQUIRE);
	uint64_t in = __atomic_load_n(r, __ATOMIC_ACQUIRE);
	return (out > in ? out - in : 0) + (s->pklen - s->pkoff);
}

/*
 * The peer's close or reset is known on the fabric; its shadow's FIN or
 * RST follows within the same close() call.  Wait for it (bounded: a peer
 * whose shadow stays open elsewhere costs this once), so that the shadow,
 * a kernel socket in the state kernel TCP would be in, can answer.
 */
static void shadow_settle(int fd)
{
	struct pollfd p = { fd, POLLRDHUP, 0 };
	sk_real.poll(&p, 1, 100);
}

/* The peer closed with SO_LINGER 0 (or with bytes of ours unread): the
 * first read after its last byte fails with ECONNRESET, as the kernel's
 * reset does.  The kernel reports a reset once: the shadow's pending
 * error is taken too, so a later send fails with EPIPE, not again with
 * ECONNRESET. */
static int peer_reset(struct sk *s, int fd)
{
	struct sk_conn *c = sk_conn(s);
	if (!c || s->rst_seen)
		return 0;
	uint32_t f = __atomic_load_n(&c->reset, __ATOMIC_ACQUIRE);
	if (!(f & (s->role == 'C' ? SK_RESET_A : SK_RESET_C)))
		return 0;
	s->rst_seen = 1;
	shadow_settle(fd);
	int err = 0;
	socklen_t l = sizeof err;
	if (!ntbx_sandboxed)
		getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l);
	return 1;
}

/*
 * A write after the peer closed its fabric end (not after our own
 * shutdown).  Kernel TCP accepts the first send after the peer's close
 * (the peer answers it with RST) and fails the next with EPIPE; after a
 * reset the first fails with ECONNRESET, then EPIPE; after the peer's
 * shutdown(SHUT_WR) its end is still open and nothing fails.  The shadow
 * is that kernel socket, in that state, so from here on our writes go to
 * it (sticky: a peer whose shadow is still held elsewhere then gets the
 * bytes by TCP), and the kernel answers, SIGPIPE and MSG_NOSIGNAL
 * included.  Write lock held.
 */
static ssize_t shadow_send(struct sk *s, int fd, const void *buf, size_t len,
                           int flags)
{
	if (!s->wr_shadow) {
		shadow_settle(fd);
		s->wr_shadow = 1;
		sk_cork_flush(s, fd);
	}
	ssize_t r = sk_real.send(fd, buf, len, flags);
	if (r < 0 && errno == ECONNRESET)
		s->rst_seen = 1;   /* reported: a later read sees end of stream */
	return r;
}

/* ------------------------------------------------------------ the qp */

static ssize_t q_read(struct sk *s, void *buf, size_t len)
{
	struct ntbx_qp *qp = sk_qp(s);
	if (!qp)
		return -ECONNRESET;
	pthread_mutex_lock(&s->qlock);
	ssize_t r = ntbx_qp_read(qp, buf, len, NTBX_QP_NONBLOCK);
	pthread_mutex_unlock(&s->qlock);
	return r;
}

static ssize_t q_write(struct sk *s, const void *buf, size_t len)
{
	struct ntbx_qp *qp = sk_qp(s);
	if (!qp)
		return -ECONNRESET;
	pthread_mutex_lock(&s->qlock);
	ssize_t r = ntbx_qp_write(qp, buf, len, NTBX_QP_NONBLOCK);
	if (r > 0 && s->answer_due) {
		/* An acceptor's first bytes: ring a connector that still sleeps
		 * for the answer (proto.c, sk_on_accept), now that the bytes it
		 * waits for are there; one that switched is rung by the write */
		s->answer_due = 0;
		struct sk_conn *c = sk_conn(s);
		if (c && __atomic_load_n(&c->state, __ATOMIC_ACQUIRE) == SK_ACC)
			ntbx_qp_notify(qp);
	}
	pthread_mutex_unlock(&s->qlock);
	return r;
}

/* q_poll for @events only (ntbx_qp_poll_for): a wait's looks.  No qlock:
 * a poll changes nothing and may run beside the reader and the writer
 * (qp/wait.c, readiness).  An event loop polls every fabric socket it
 * spins on at each look: the lock and unlock were 18% of a spinning
 * wrk's samples against nginx, though in its idle spin, so its
 * throughput did not move (design notes, Sockets). */
static int q_poll_for(struct sk *s, int events)
{
	struct ntbx_qp *qp = sk_qp(s);
	if (!qp)
		return NTBX_QP_ERROR;
	return ntbx_qp_poll_for(qp, events);
}

int q_poll(struct sk *s)
{
	return q_poll_for(s, NTBX_QP_READABLE | NTBX_QP_WRITABLE);
}

int q_arm(struct sk *s, int events)
{
	struct ntbx_qp *qp = sk_qp(s);
	if (!qp)
		return NTBX_QP_ERROR;
	pthread_mutex_lock(&s->qlock);
	int m = ntbx_qp_arm(qp, events);
	pthread_mutex_unlock(&s->qlock);
	return m;
}

/*
 * Wait until @events (NTBX_QP_*) of @s may be ready: spin for the wait
 * policy's budget (util.h, ntbx_spin_begin), then sleep on the node's
 * queue-pair doorbells (any of them: spurious wake-ups are re-checked by
 * the caller) for at most @ms.  Several threads may wait at once without losing a wake-up (prepare before arming).
 * The call's socket timeout (@opt of @fd, deadline *dl, 0 until asked)
 * ends the wait with -EAGAIN.  Returns 0, -ETIMEDOUT, -EINTR or -EAGAIN.
 */
/* wait policy, per thread; initial-exec: no __tls_get_addr() call per
 * wait (the preload is loaded at start-up, never by dlopen) */
static __thread struct ntbx_spin sk_spin
	__attribute__((tls_model("initial-exec")));

static int sk_wait_sleep(struct sk *s, int events, int ms, int fd, int opt,
                         uint64_t *dl, uint64_t t0);

/* Pauses between full looks while a reader spins on its ring's next
 * record (sk_wait): a peer that dies is seen within about a microsecond. */
#define SK_SPIN_LOOKS 32

/* @hint_ok: a reader's wait may end on the ring's hint alone
 * (ntbx_qp_rx_hint: the line its next record lands on changed), and the
 * caller's read, which locks and looks anyway, decides; without it, or
 * when that read found nothing, a full look (a lock and the queue
 * pair's state) confirms first.  A hint can stay set on a record that
 * is not complete, so a caller that found nothing passes 0 after. */
static int sk_wait(struct sk *s, int events, int ms, int fd, int opt,
                   uint64_t *dl, int hint_ok)
{
	/* Ready by now (the caller looked just before): not a wait, and
	 * no time spent asking the policy. */
	if (q_poll_for(s, events) & (events | NTBX_QP_HUP | NTBX_QP_ERROR))
		return 0;
	uint64_t t0 = ntbx_now_ns();
	if (ms != 0 && ntbx_spin_turn(t0))
		t0 = ntbx_now_ns();
	struct ntbx_qp *qp = sk_qp(s);
	uint64_t budget = ntbx_spin_begin_halving(&sk_spin,
	        qp && (events & NTBX_QP_READABLE) ? ntbx_qp_peer_cpu(qp) : -1, t0);
	/* A reader spins on the line its next record lands on (no lock, no
	 * clock read, nothing the peer writes besides that line) and asks
	 * the queue pair properly, and the clock, when it changed or every
	 * SK_SPIN_LOOKS pauses: what a peer that dies or fails changes. */
	int hint = qp && events == NTBX_QP_READABLE;
	for (;;) {
		/* a hit's length teaches nothing (ntbx_spin_end): no clock
		 * read between the data and the caller */
		if (q_poll_for(s, events) & (events | NTBX_QP_HUP | NTBX_QP_ERROR)) {
			ntbx_spin_end(&sk_spin, 0, 0);
			return 0;
		}
		uint64_t now = ntbx_now_ns();
		if (now - t0 >= budget)
			break;
		ntbx_cpu_relax();
		for (int i = 0; hint && i < SK_SPIN_LOOKS; i++) {
			if (ntbx_qp_rx_hint(qp)) {
				if (!hint_ok)
					break;
				ntbx_spin_end(&sk_spin, 0, 0);
				return 0;
			}
			ntbx_cpu_relax();
		}
	}
	int rc = sk_wait_sleep(s, events, ms, fd, opt, dl, t0);
	ntbx_spin_end(&sk_spin, ntbx_now_ns() - t0, 1);
	return rc;
}

static int sk_wait_sleep(struct sk *s, int events, int ms, int fd, int opt,
                         uint64_t *dl, uint64_t t0)
{
	if (!*dl)
		*dl = sk_deadline(fd, opt, t0);
	if (*dl != UINT64_MAX) {
		uint64_t now = ntbx_now_ns();
		if (now >= *dl)
			return -EAGAIN;
		if ((*dl - now) / 1000000 + 1 < (uint64_t)ms)
			ms = (int)((*dl - now) / 1000000 + 1);
	}
	struct ntbx_fabric *f = sk_fab();
	if (!f)
		return -ETIMEDOUT;
	struct ntbx_dev *dev = ntbx_fabric_dev(f);
	struct ntbx_qp *qp = sk_qp(s);
	int port = -1;
	uint32_t bit = 0;
	if (qp)
		ntbx_qp_wake_bit(qp, &port, &bit);
	/* Only our queue pair's doorbell bit wakes us: with every bit of
	 * every port, each ring on the node woke every blocked reader. */
	struct ntbx_db_waiter w;
	int prc = port >= 0 && port < 64 ?
	          ntbx_db_wait_prepare(dev, &w, 1ull << port, bit) : -1;
	if (prc == 0)
		ntbx_db_clear(dev, port, bit);
	int m = q_arm(s, events);
	int rc = 0;
	if (!(m & (events | NTBX_QP_HUP | NTBX_QP_ERROR))) {
		if (prc == 0)
			rc = ntbx_db_wait_commit(dev, &w, ms);
		else {
			struct timespec ts = { 0, 1000000 };
			nanosleep(&ts, NULL);
		}
	}
	if (prc == 0)
		ntbx_db_wait_finish(dev, &w);
	/* A signal: EINTR as the kernel gives it (signal.c), else re-check
	 * and sleep again. */
	if (rc == -EINTR && (*dl != UINT64_MAX || sk_sig_interrupts()))
		return -EINTR;
	return rc == -ETIMEDOUT ? -ETIMEDOUT : 0;
}

/* ------------------------------------------------------------ reading */

/*
 * Whether a non-blocking read that found its ring empty looks at the
 * shadow (a poll(), shadow_state).  The shadow has news while the ring is
 * empty only when the peer ended without closing its fabric end (killed:
 * its kernel sends the FIN or RST; a close, shutdown or reset is on the
 * fabric first).  A program that reads until EAGAIN and then waits in
 * poll, select or epoll has the shadow looked at by that wait (kernel
 * set: sh_fin, sticky), so a look here at every EAGAIN (pgbench -S: one
 * per transaction on both ends, a system call kernel TCP's EAGAIN does
 * not add) is only for a program that retries reads without waiting: it
 * gets the peer's death at most SH_LOOK_NS later, as if the FIN were
 * still on its way.
 */
#define SH_LOOK_NS 1000000ull

static int shadow_look_due(struct sk *s)
{
	return ntbx_due(&s->sh_look_ns, ntbx_now_ns(), SH_LOOK_NS);
}

static ssize_t fab_read(struct sk *s, int fd, void *buf, size_t len,
                        int nb, uint64_t *dl)
{
	int waited = 0;
	/* when this call first slept: the coarse clock (a few ms of
	 * resolution against a 100 ms bound), as a precise read here is
	 * on a ping-pong's every message, after its bytes arrived */
	uint64_t t0 = 0;
	int hint_ok = 1;   /* until a wait that ended on it found nothing */
	for (int woke = 0;; woke = 1) {
		ssize_t r = q_read(s, buf, len);
		if (r == -EAGAIN && woke)
			hint_ok = 0;
		if (r > 0) {
			uint64_t *ctr = bytes_read(s);
			if (ctr)
				__atomic_fetch_add(ctr, (uint64_t)r, __ATOMIC_RELEASE);
			return r;
		}
		if (r == 0) {
			if (peer_reset(s, fd)) {
				errno = ECONNRESET;
				return -1;
			}
			return 0;
		}
		if (r != -EAGAIN) {
			/* a link to another host failed: on over the shadow */
			if ((r == -ECONNRESET || r == -EPROTO || r == -ENOLINK) &&
			    sk_failover(s, fd) == 0) {
				size_t k = sk_fo_take(s, buf, len, 0);
				if (k)
					return (ssize_t)k;
				return sk_real.recv(fd, buf, len, nb ? MSG_DONTWAIT : 0);
			}
			errno = r == -EPROTO ? ECONNRESET : (int)-r;
			return -1;
		}
		int fo = waited || nb ? peer_failed_over(s, fd) : 0;
		if (fo > 0) {
			size_t k = sk_fo_take(s, buf, len, 0);
			if (k)
				return (ssize_t)k;
			return sk_real.recv(fd, buf, len, nb ? MSG_DONTWAIT : 0);
		}
		if (fo < 0) {
			errno = ECONNRESET;
			return -1;
		}
		if (s->sh_fin || waited || (nb && shadow_look_due(s))) {
			int st = shadow_state(fd);
			if (st) {
				r = q_read(s, buf, len);
				if (r > 0) {
					uint64_t *ctr = bytes_read(s);
					if (ctr)
						__atomic_fetch_add(ctr, (uint64_t)r,
						                   __ATOMIC_RELEASE);
					return r;
				}
				if (peer_reset(s, fd)) {
					errno = ECONNRESET;
					return -1;
				}
				if (st > 0)
					return 0;
				errno = -st;
				return -1;
			}
		}
		if (nb) {
			__atomic_fetch_add(&s->again, 1, __ATOMIC_RELAXED);
			errno = EAGAIN;
			return -1;
		}
		if (!t0)
			t0 = ntbx_coarse_ns();
		int m = sk_wait(s, NTBX_QP_READABLE, 100, fd, SO_RCVTIMEO, dl,
		                hint_ok);
		if (m == -EINTR || m == -EAGAIN) {
			if (m == -EAGAIN)
				__atomic_fetch_add(&s->again, 1, __ATOMIC_RELAXED);
			errno = -m;
			return -1;
		}
		/* Look at the shadow after a slice with no ring, and after
		 * 100 ms of waiting whatever woke us: rings of other
		 * connections of the node wake every sleeper of it, and
		 * would otherwise put off a dead peer's end of stream. */
		waited = m == -ETIMEDOUT ||
		         ntbx_coarse_ns() - t0 >= 100000000ull;
	}
}

/* Acceptor: the connector's bytes sent by TCP before it switched. */
static ssize_t prefix_read(struct sk *s, struct sk_conn *c, int fd,
                           void *buf, size_t len, int flags, int nb,
                           int *done, uint64_t *dl)
{
	unsigned backoff = 1;
	for (;;) {
		skx_sync(s, c);   /* a connector on another host */
		uint32_t st = __atomic_load_n(&c->state, __ATOMIC_ACQUIRE);
		if (st == SK_FAB) {
			uint64_t rem = c->tcp_sent - c->tcp_rcvd;
			if (rem == 0 || rem > (1ull << 62)) {
				*done = 1;
				return 0;
			}
			ssize_t r = sk_real.recv(fd, buf, len < rem ? len : rem,
			                         flags & ~MSG_WAITALL);
			if (r > 0 && !(flags & MSG_PEEK))
				c->tcp_rcvd += (uint64_t)r;
			return r;
		}
		if (st != SK_ACC) {
			s->mode = M_TCP;
			return sk_real.recv(fd, buf, len, flags);
		}
		ssize_t r = sk_real.recv(fd, buf, len,
		                         (flags & ~MSG_WAITALL) | MSG_DONTWAIT);
		if (r > 0 && !(flags & MSG_PEEK))
			c->tcp_rcvd += (uint64_t)r;
		if (r >= 0)
			return r;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -1;
		if (nb || expired(fd, SO_RCVTIMEO, dl)) {
			__atomic_fetch_add(&s->again, 1, __ATOMIC_RELAXED);
			errno = EAGAIN;
			return -1;
		}
		wait_shadow(s, fd, &backoff, *dl);
	}
}

/* One read, whatever the path: > 0, 0 at end of stream, -1 + errno. */
static ssize_t read_once(struct sk *s, int fd, void *buf, size_t len,
                         int flags, uint64_t *dl)
{
	int nb = (flags & MSG_DONTWAIT) ? 1 : -1;
#define NB() (nb < 0 ? (nb = sk_nonblock(fd)) : nb)
	unsigned backoff = 1;
	for (;;) {
		if (s->mode == M_PEND && !s->rd_fab) {
			sk_progress(s);
			if (s->mode != M_PEND || s->rd_fab)
				continue;
			ssize_t r = sk_real.recv(fd, buf, len,
			                         (flags & ~MSG_WAITALL) | MSG_DONTWAIT);
			if (r > 0) {
				sk_fallback(s, "the server sent TCP data: it is not "
				            "interposed");
				return r;
			}
			if (r == 0)
				return 0;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return -1;
			if (NB() || expired(fd, SO_RCVTIMEO, dl)) {
				errno = EAGAIN;
				return -1;
			}
			wait_shadow(s, fd, &backoff, *dl);
			continue;
		}
		if (s->mode == M_TCP)
			return sk_real.recv(fd, buf, len, flags & ~MSG_WAITALL);
		if (s->role == 'A') {
			struct sk_conn *c = sk_conn(s);
			if (c && !s->prefix_done) {
				int done = 0;
				ssize_t r = prefix_read(s, c, fd, buf, len, flags,
				                        NB(), &done, dl);
				if (!done)
					return r;
				s->prefix_done = 1;
				continue;
			}
		}
		if (flags & MSG_PEEK)
			return -2;   /* the caller fills the peek buffer */
		return fab_read(s, fd, buf, len, NB(), dl);
	}
#undef NB
}

ssize_t sk_read(struct sk *s, int fd, void *buf, size_t len, int flags)
{
	if (len == 0)
		return 0;
	pthread_mutex_lock(&s->rlock);
	ssize_t got = 0;
	uint64_t dl = 0;   /* SO_RCVTIMEO: one deadline for the whole call */
	for (;;) {
		ssize_t r;
		char *p = (char *)buf + got;
		size_t want = len - (size_t)got;
		if (s->pkoff < s->pklen) {
			size_t n = s->pklen - s->pkoff;
			if (n > want)
				n = want;
			memcpy(p, s->pk + s->pkoff, n);
			if (!(flags & MSG_PEEK))
				s->pkoff += n;
			r = (ssize_t)n;
		} else if (sk_fo_pending(s)) {
			/* after a fail-over: what was in our ring */
			r = (ssize_t)sk_fo_take(s, p, want, flags & MSG_PEEK);
		} else {
			r = read_once(s, fd, p, want, flags, &dl);
			if (r == -2) {
				/* MSG_PEEK on the fabric: read ahead */
				size_t cap = want > 65536 ? want : 65536;
				char *nbuf = realloc(s->pk, cap);
				if (!nbuf) {
					errno = ENOMEM;
					r = -1;
				} else {
					s->pk = nbuf;
					s->pkoff = s->pklen = 0;
					int nb = (flags & MSG_DONTWAIT) || sk_nonblock(fd);
					r = fab_read(s, fd, s->pk, cap, nb, &dl);
					if (r > 0) {
						s->pklen = (size_t)r;
						continue;
					}
				}
			}
		}
		if (r < 0) {
			if (got)
				break;
			pthread_mutex_unlock(&s->rlock);
			return -1;
		}
		got += r;
		if (r == 0 || !(flags & MSG_WAITALL) || (flags & MSG_PEEK) ||
		    (size_t)got == len)
			break;
	}
	pthread_mutex_unlock(&s->rlock);
	return got;
}

/* ------------------------------------------------------------ writing */

/* A writer waiting for room: has the reader gone for good?  (Its shadow
 * was reset, or its end of stream came and no process holding its side
 * lives: the lock the kernel drops, so a zombie, a reused pid or a killed
 * child of a forking server counts as gone.) */
static int peer_gone(struct sk *s, int fd)
{
	struct pollfd p = { fd, POLLIN | POLLRDHUP, 0 };
	if (sk_real.poll(&p, 1, 0) <= 0)
		return 0;
	if (p.revents & (POLLHUP | POLLERR))
		return 1;
	if (!(p.revents & POLLRDHUP))
		return 0;
	struct sk_conn *c = sk_conn(s);
	if (!c)
		return 1;
	if (c->xk)   /* the other side is on another host */
		return !skx_peer_alive(s, c);
	return !sk_side_alive(s->slot, s->role == 'C' ? 'A' : 'C');
}

/*
 * Before a write: did the peer die with bytes of ours unread?  A killed
 * process never closes its fabric end, so its ring would take our bytes
 * until full, where kernel TCP fails the second send after the peer is
 * gone (the first draws its RST).  Looked at only while bytes we wrote
 * are unread, at most once a millisecond (one poll() of the shadow; no
 * system call otherwise).
 */
static int peer_died(struct sk *s, int fd)
{
	/* The clock first: both conditions must hold, and the unread count
	 * loads the peer reader's counter, a line it writes at every read
	 * (a transfer between CPUs per send: a streaming sender's every
	 * message paid it when it came first).  The coarse clock: a
	 * precise one costs a ping-pong's every message about 25 ns. */
	uint64_t now = ntbx_coarse_ns();
	if (now - s->live_ns < 1000000)
		return 0;
	if (!sk_unread(s))
		return 0;
	s->live_ns = now;
	return peer_gone(s, fd);
}

static ssize_t fab_write(struct sk *s, int fd, const void *buf, size_t len,
                         int flags)
{
	uint64_t *ctr = bytes_out(s);
	size_t done = 0;
	int nb = (flags & MSG_DONTWAIT) ? 1 : -1;
	int waited = 0, gone = 0;
	uint64_t dl = 0;   /* SO_SNDTIMEO */
	if (peer_died(s, fd)) {
		/* Our unread bytes were the send that drew the RST: the shadow,
		 * shut for writing, fails this one and every later one with
		 * EPIPE (SIGPIPE unless MSG_NOSIGNAL), as the kernel would. */
		sk_real.shutdown(fd, SHUT_WR);
		s->wr_shadow = 1;
		return shadow_send(s, fd, buf, len, flags);
	}
	for (;;) {
		ssize_t r = q_write(s, (const char *)buf + done, len - done);
		if (r > 0) {
			uint64_t end = ctr ? __atomic_add_fetch(ctr, (uint64_t)r,
			                                        __ATOMIC_RELAXED) : 0;
			/* to another host: kept for a fail-over */
			if (ctr && sk_conn(s)->xk)
				sk_fo_keep(s, (const char *)buf + done, (size_t)r, end);
			done += (size_t)r;
			if (done == len)
				return (ssize_t)done;
			continue;
		}
		if (r == -EAGAIN) {
			if (nb < 0)
				nb = sk_nonblock(fd);
			if (nb) {
				__atomic_fetch_add(&s->again, 1, __ATOMIC_RELAXED);
				if (done)
					return (ssize_t)done;
				errno = EAGAIN;
				return -1;
			}
			int fo = waited ? peer_failed_over(s, fd) : 0;
			if (fo > 0) {
				ssize_t k = sk_real.send(fd, (const char *)buf + done,
				                         len - done, flags);
				if (k > 0 || !done)
					return k > 0 ? (ssize_t)done + k : k;
				return (ssize_t)done;
			}
			if (fo < 0) {
				r = -ECONNRESET;
				goto err;
			}
			if (waited && peer_gone(s, fd)) {
				r = -EPIPE;
				gone = 1;
				goto err;
			}
			int m = sk_wait(s, NTBX_QP_WRITABLE, 100, fd, SO_SNDTIMEO,
			                &dl, 0);
			if (m == -EINTR || m == -EAGAIN) {
				if (m == -EAGAIN)
					__atomic_fetch_add(&s->again, 1, __ATOMIC_RELAXED);
				if (done)
					return (ssize_t)done;
				errno = -m;
				return -1;
			}
			waited = m == -ETIMEDOUT;
			continue;
		}
err:
		/* a link to another host failed: on over the shadow */
		if ((r == -ECONNRESET || r == -EPROTO || r == -ENOLINK) &&
		    sk_failover(s, fd) == 0) {
			ssize_t k = sk_real.send(fd, (const char *)buf + done,
			                         len - done, flags);
			if (k > 0 || !done)
				return k > 0 ? (ssize_t)done + k : k;
			return (ssize_t)done;
		}
		if (done)
			return (ssize_t)done;
		if (r == -EPIPE && !s->shut_wr && !gone)
			return shadow_send(s, fd, buf, len, flags);
		if (r == -EPIPE && !(flags & MSG_NOSIGNAL))
			raise(SIGPIPE);
		errno = r == -EPROTO ? ECONNRESET : (int)-r;
		return -1;
	}
}

/*
 * A connector's write before the acceptor answered goes by TCP, in pieces
 * of at most 64 KiB, checking for the answer after each, so the connection
 * switches to the fabric as soon as it can, mid-write for a large one (the
 * rest then goes on the fabric, or by TCP if the connection fell back).
 * Write lock held.
 */
#define PEND_CHUNK (64u << 10)
static ssize_t pend_write(struct sk *s, int fd, const void *buf, size_t len,
                          int flags)
{
	struct sk_conn *c = sk_conn(s);
	const char *p = buf;
	size_t done = 0;
	while (s->mode == M_PEND && done < len) {
		size_t n = len - done > PEND_CHUNK ? PEND_CHUNK : len - done;
		ssize_t k = sk_real.send(fd, p + done, n, flags & ~MSG_MORE);
		if (k <= 0)
			return done ? (ssize_t)done : k;
		if (c)
			c->tcp_sent += (uint64_t)k;
		done += (size_t)k;
		if ((size_t)k < n)
			return (ssize_t)done;   /* nonblocking, or a signal */
		sk_progress_locked(s);
	}
	if (done == len)
		return (ssize_t)done;
	ssize_t r = s->mode == M_TCP ? sk_real.send(fd, p + done, len - done, flags)
	            : s->mode == M_FAB ? fab_write(s, fd, p + done, len - done, flags)
	            : 0;
	if (r < 0)
		return done ? (ssize_t)done : r;
	return (ssize_t)(done + (size_t)r);
}

ssize_t sk_write(struct sk *s, int fd, const void *buf, size_t len,
                 int flags)
{
	pthread_mutex_lock(&s->wlock);
	ssize_t r;
	if (s->mode == M_PEND)
		sk_progress_locked(s);
	if (s->mode == M_PEND) {
		r = pend_write(s, fd, buf, len, flags);
	} else if (s->mode == M_TCP) {
		r = sk_real.send(fd, buf, len, flags);
	} else if (s->wr_shadow) {
		r = shadow_send(s, fd, buf, len, flags);
	} else if (len == 0) {
		r = 0;
	} else {
		r = fab_write(s, fd, buf, len, flags);
	}
	pthread_mutex_unlock(&s->wlock);
	return r;
}
