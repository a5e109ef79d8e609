/* SPDX-License-Identifier: MIT */
/*
 * io.c — libntbx-preload.so: the data path and the descriptor calls.
 * A descriptor that is not accelerated goes straight to libc.
 */
#include <errno.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "ntbx/fabric.h"
#include "sock/sock.h"
#include "util/util.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/*
 * O_NONBLOCK of a socket, without a system call on the data path: it is
 * kept in the connection's shared record (nb_flags: bits 0-1 for the
 * connector, 2-3 for the acceptor; KNOWN, then ON).  The flag belongs to
 * the open file description, and every process holding a socket shares
 * its description and its record (fork, dup, SCM_RIGHTS, exec), so one
 * copy serves them all; fcntl(F_SETFL) and ioctl(FIONBIO) through the
 * preload overwrite it (sk_nonblock_set).  A lookup records only an
 * unknown flag, so it cannot undo a concurrent F_SETFL.
 */
#define NB_KNOWN 1u
#define NB_ON    2u

static unsigned nb_shift(const struct sk *s)
{
	return s->role == 'A' ? 2 : 0;
}

int sk_nonblock(int fd)
{
	struct sk *s = sk_get(fd);
	struct sk_conn *c = s ? sk_conn(s) : NULL;
	uint32_t f = c ? __atomic_load_n(&c->nb_flags, __ATOMIC_ACQUIRE) : 0;
	if (c && (f >> nb_shift(s)) & NB_KNOWN)
		return !!((f >> nb_shift(s)) & NB_ON);
	int fl = sk_real.fcntl(fd, F_GETFL);
	int nb = fl >= 0 && (fl & O_NONBLOCK);
	if (c && fl >= 0) {
		uint32_t mine = (NB_KNOWN | (nb ? NB_ON : 0)) << nb_shift(s);
		while (!((f >> nb_shift(s)) & NB_KNOWN) &&
		       !__atomic_compare_exchange_n(&c->nb_flags, &f, f | mine, 0,
		                                    __ATOMIC_ACQ_REL,
		                                    __ATOMIC_ACQUIRE))
			;
	}
	return nb;
}

/* After a successful change of O_NONBLOCK on @fd. */
static void sk_nonblock_set(int fd, int on)
{
	struct sk *s = sk_get(fd);
	struct sk_conn *c = s ? sk_conn(s) : NULL;
	if (!c)
		return;
	unsigned sh = nb_shift(s);
	uint32_t f = __atomic_load_n(&c->nb_flags, __ATOMIC_ACQUIRE), nf;
	do
		nf = (f & ~(3u << sh)) | ((NB_KNOWN | (on ? NB_ON : 0)) << sh);
	while (!__atomic_compare_exchange_n(&c->nb_flags, &f, nf, 0,
	                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
}

/*
 * A side confined by a seccomp filter (util.h, ntbx_sandboxed) can no
 * longer open the wake FIFOs of its peer's sleepers, so a peer that sleeps
 * in poll or epoll is not woken by it: nb_flags bit 4 (connector) or 5
 * (acceptor) says so, and such a peer sleeps in slices of 1 ms
 * (sk_peer_confined).  Set for every connection of the process just
 * before its filter is installed.
 */
#define NB_CONFINED(role) (1u << ((role) == 'A' ? 5 : 4))

void sk_confine_all(void)
{
	for (int fd = 0; fd < sk_fd_hi; fd++) {
		struct sk *s = sk_get(fd);
		struct sk_conn *c = s ? sk_conn(s) : NULL;
		if (c)
			__atomic_fetch_or(&c->nb_flags, NB_CONFINED(s->role),
			                  __ATOMIC_ACQ_REL);
	}
}

int sk_peer_confined(struct sk *s)
{
	struct sk_conn *c = sk_conn(s);
	return c && (__atomic_load_n(&c->nb_flags, __ATOMIC_ACQUIRE) &
	             NB_CONFINED(s->role == 'A' ? 'C' : 'A'));
}

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
 * it went on over TCP.
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
	return sk_failover(s, fd) == 0;
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
	}
	ssize_t r = sk_real.send(fd, buf, len, flags);
	if (r < 0 && errno == ECONNRESET)
		s->rst_seen = 1;   /* reported: a later read sees end of stream */
	return r;
}

/* ------------------------------------------------------------ the qp */

ssize_t q_read(struct sk *s, void *buf, size_t len)
{
	struct ntbx_qp *qp = sk_qp(s);
	if (!qp)
		return -ECONNRESET;
	pthread_mutex_lock(&s->qlock);
	ssize_t r = ntbx_qp_read(qp, buf, len, NTBX_QP_NONBLOCK);
	pthread_mutex_unlock(&s->qlock);
	return r;
}

ssize_t q_write(struct sk *s, const void *buf, size_t len)
{
	struct ntbx_qp *qp = sk_qp(s);
	if (!qp)
		return -ECONNRESET;
	pthread_mutex_lock(&s->qlock);
	ssize_t r = ntbx_qp_write(qp, buf, len, NTBX_QP_NONBLOCK);
	pthread_mutex_unlock(&s->qlock);
	return r;
}

int q_poll(struct sk *s)
{
	struct ntbx_qp *qp = sk_qp(s);
	if (!qp)
		return NTBX_QP_ERROR;
	pthread_mutex_lock(&s->qlock);
	int m = ntbx_qp_poll(qp);
	pthread_mutex_unlock(&s->qlock);
	return m;
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

static int sk_wait(struct sk *s, int events, int ms, int fd, int opt,
                   uint64_t *dl)
{
	/* Ready by now (the caller looked just before): not a wait, and
	 * no time spent asking the policy. */
	if (q_poll(s) & (events | NTBX_QP_HUP | NTBX_QP_ERROR))
		return 0;
	uint64_t t0 = ntbx_now_ns();
	struct ntbx_qp *qp = sk_qp(s);
	uint64_t budget = ntbx_spin_begin_for(&sk_spin,
	        qp && (events & NTBX_QP_READABLE) ? ntbx_qp_peer_cpu(qp) : -1, t0);
	for (;;) {
		int m = q_poll(s);
		uint64_t now = ntbx_now_ns();
		if (m & (events | NTBX_QP_HUP | NTBX_QP_ERROR)) {
			ntbx_spin_end(&sk_spin, now - t0, 0);
			return 0;
		}
		if (now - t0 >= budget)
			break;
		ntbx_cpu_relax();
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

static ssize_t fab_read(struct sk *s, int fd, void *buf, size_t len,
                        int nb, uint64_t *dl)
{
	int waited = 0;
	uint64_t t0 = 0;   /* when this call first slept */
	for (;;) {
		ssize_t r = q_read(s, buf, len);
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
		if ((waited || nb) && peer_failed_over(s, fd)) {
			size_t k = sk_fo_take(s, buf, len, 0);
			if (k)
				return (ssize_t)k;
			return sk_real.recv(fd, buf, len, nb ? MSG_DONTWAIT : 0);
		}
		if (s->sh_fin || waited || nb) {
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
			t0 = ntbx_now_ns();
		int m = sk_wait(s, NTBX_QP_READABLE, 100, fd, SO_RCVTIMEO, dl);
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
		waited = m == -ETIMEDOUT || ntbx_now_ns() - t0 >= 100000000ull;
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
	if (!sk_unread(s))
		return 0;
	uint64_t now = ntbx_now_ns();
	if (now - s->live_ns < 1000000)
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
			if (waited && peer_failed_over(s, fd)) {
				ssize_t k = sk_real.send(fd, (const char *)buf + done,
				                         len - done, flags);
				if (k > 0 || !done)
					return k > 0 ? (ssize_t)done + k : k;
				return (ssize_t)done;
			}
			if (waited && peer_gone(s, fd)) {
				r = -EPIPE;
				gone = 1;
				goto err;
			}
			int m = sk_wait(s, NTBX_QP_WRITABLE, 100, fd, SO_SNDTIMEO,
			                &dl);
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

/* ------------------------------------------------------------ wrappers */

EXPORT ssize_t read(int fd, void *buf, size_t len)
{
	struct sk *s = sk_get(fd);
	if (!s) {
		sk_resolve();
		return sk_real.read(fd, buf, len);
	}
	return sk_read(s, fd, buf, len, 0);
}

EXPORT ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen)
{
	if (len > buflen)
		abort();
	return read(fd, buf, len);
}

EXPORT ssize_t write(int fd, const void *buf, size_t len)
{
	struct sk *s = sk_get(fd);
	if (!s) {
		sk_resolve();
		return sk_real.write(fd, buf, len);
	}
	return sk_write(s, fd, buf, len, 0);
}

EXPORT ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	struct sk *s = sk_get(fd);
	if (!s) {
		sk_resolve();
		return sk_real.recv(fd, buf, len, flags);
	}
	return sk_read(s, fd, buf, len, flags);
}

EXPORT ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen,
                          int flags)
{
	if (len > buflen)
		abort();
	return recv(fd, buf, len, flags);
}

EXPORT ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	struct sk *s = sk_get(fd);
	if (!s) {
		sk_resolve();
		return sk_real.send(fd, buf, len, flags);
	}
	return sk_write(s, fd, buf, len, flags);
}

EXPORT ssize_t recvfrom(int fd, void *__restrict buf, size_t len, int flags,
                        __SOCKADDR_ARG addr, socklen_t *__restrict alen)
{
	struct sk *s = sk_get(fd);
	if (!s) {
		sk_resolve();
		return sk_real.recvfrom(fd, buf, len, flags, addr.__sockaddr__,
		                        alen);
	}
	ssize_t r = sk_read(s, fd, buf, len, flags);
	if (r >= 0 && addr.__sockaddr__ && alen)
		*alen = 0;
	return r;
}

EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen,
                              int flags, struct sockaddr *addr,
                              socklen_t *alen)
{
	if (len > buflen)
		abort();
	return recvfrom(fd, buf, len, flags, addr, alen);
}

EXPORT ssize_t sendto(int fd, const void *buf, size_t len, int flags,
                      __CONST_SOCKADDR_ARG addr, socklen_t alen)
{
	struct sk *s = sk_get(fd);
	if (!s) {
		sk_resolve();
		return sk_real.sendto(fd, buf, len, flags, addr.__sockaddr__,
		                      alen);
	}
	return sk_write(s, fd, buf, len, flags);
}

static __thread char *tl_buf;
static __thread size_t tl_cap;

static char *tl_get(size_t n)
{
	if (tl_cap < n) {
		char *p = realloc(tl_buf, n);
		if (!p)
			return NULL;
		tl_buf = p;
		tl_cap = n;
	}
	return tl_buf;
}

static ssize_t vec_write(struct sk *s, int fd, const struct iovec *iov,
                         int n, int flags)
{
	size_t total = 0;
	for (int i = 0; i < n; i++)
		total += iov[i].iov_len;
	if (total <= (256u << 10)) {
		char *b = tl_get(total ? total : 1);
		if (b) {
			size_t o = 0;
			for (int i = 0; i < n; i++) {
				memcpy(b + o, iov[i].iov_base, iov[i].iov_len);
				o += iov[i].iov_len;
			}
			return sk_write(s, fd, b, total, flags);
		}
	}
	ssize_t done = 0;
	for (int i = 0; i < n; i++) {
		if (!iov[i].iov_len)
			continue;
		ssize_t r = sk_write(s, fd, iov[i].iov_base, iov[i].iov_len,
		                     flags);
		if (r < 0)
			return done ? done : r;
		done += r;
		if ((size_t)r < iov[i].iov_len)
			break;
	}
	return done;
}

static ssize_t vec_read(struct sk *s, int fd, const struct iovec *iov,
                        int n, int flags)
{
	size_t total = 0;
	for (int i = 0; i < n; i++)
		total += iov[i].iov_len;
	if (total == 0)
		return 0;
	char *b = tl_get(total < (1u << 20) ? total : (1u << 20));
	if (!b) {
		errno = ENOMEM;
		return -1;
	}
	ssize_t r = sk_read(s, fd, b, total < (1u << 20) ? total : (1u << 20),
	                    flags);
	if (r <= 0)
		return r;
	size_t o = 0;
	for (int i = 0; i < n && o < (size_t)r; i++) {
		size_t k = iov[i].iov_len;
		if (k > (size_t)r - o)
			k = (size_t)r - o;
		memcpy(iov[i].iov_base, b + o, k);
		o += k;
	}
	return r;
}

EXPORT ssize_t readv(int fd, const struct iovec *iov, int n)
{
	struct sk *s = sk_get(fd);
	if (!s) {
		sk_resolve();
		return sk_real.readv(fd, iov, n);
	}
	return vec_read(s, fd, iov, n, 0);
}

EXPORT ssize_t writev(int fd, const struct iovec *iov, int n)
{
	struct sk *s = sk_get(fd);
	if (!s) {
		sk_resolve();
		return sk_real.writev(fd, iov, n);
	}
	return vec_write(s, fd, iov, n, 0);
}

static ssize_t msg_read(struct sk *s, int fd, struct msghdr *m, int flags)
{
	ssize_t r = vec_read(s, fd, m->msg_iov, (int)m->msg_iovlen, flags);
	if (r >= 0) {
		m->msg_namelen = 0;
		m->msg_controllen = 0;
		m->msg_flags = 0;
	}
	return r;
}

static ssize_t msg_write(struct sk *s, int fd, const struct msghdr *m,
                         int flags)
{
	if (m->msg_controllen) {
		errno = EOPNOTSUPP;
		return -1;
	}
	return vec_write(s, fd, m->msg_iov, (int)m->msg_iovlen, flags);
}

EXPORT ssize_t recvmsg(int fd, struct msghdr *m, int flags)
{
	struct sk *s = sk_get(fd);
	if (!s) {
		sk_resolve();
		ssize_t r = sk_real.recvmsg(fd, m, flags);
		if (r >= 0 && m && m->msg_controllen && sk_cfg.on)
			sk_fds_received(m);
		return r;
	}
	return msg_read(s, fd, m, flags);
}

EXPORT ssize_t sendmsg(int fd, const struct msghdr *m, int flags)
{
	struct sk *s = sk_get(fd);
	if (!s) {
		sk_resolve();
		if (!m || !m->msg_controllen || !sk_cfg.on)
			return sk_real.sendmsg(fd, m, flags);
		sk_fds_sent(m, 1);
		ssize_t r = sk_real.sendmsg(fd, m, flags);
		if (r < 0) {
			int e = errno;
			sk_fds_sent(m, -1);
			errno = e;
		}
		return r;
	}
	return msg_write(s, fd, m, flags);
}

/*
 * sendmmsg and recvmmsg as the kernel runs them on a stream socket: one
 * sendmsg/recvmsg per entry, msg_len set for each; stop at the first error
 * (reported only if no entry was done) and, sending, after a partial
 * message; at most UIO_MAXIOV entries.
 */
#define MMSG_MAX 1024

static size_t msg_size(const struct msghdr *m)
{
	size_t n = 0;
	for (size_t i = 0; i < m->msg_iovlen; i++)
		n += m->msg_iov[i].iov_len;
	return n;
}

EXPORT int sendmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags)
{
	struct sk *s = sk_get(fd);
	if (!s) {
		sk_resolve();
		return sk_real.sendmmsg(fd, vec, vlen, flags);
	}
	if (vlen > MMSG_MAX)
		vlen = MMSG_MAX;
	int e = errno;
	unsigned n = 0;
	while (n < vlen) {
		ssize_t r = msg_write(s, fd, &vec[n].msg_hdr, flags);
		if (r < 0)
			break;
		vec[n].msg_len = (unsigned)r;
		n++;
		if ((size_t)r < msg_size(&vec[n - 1].msg_hdr))
			break;
	}
	if (n == 0 && vlen)
		return -1;
	errno = e;
	return (int)n;
}

EXPORT int recvmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags,
                    struct timespec *tmo)
{
	struct sk *s = sk_get(fd);
	if (!s) {
		sk_resolve();
		return sk_real.recvmmsg(fd, vec, vlen, flags, tmo);
	}
	uint64_t end = 0;
	if (tmo) {
		if (tmo->tv_sec < 0 || tmo->tv_nsec < 0 ||
		    tmo->tv_nsec >= 1000000000L) {
			errno = EINVAL;
			return -1;
		}
		end = ntbx_now_ns() + (uint64_t)tmo->tv_sec * 1000000000ull +
		      (uint64_t)tmo->tv_nsec;
	}
	if (vlen > MMSG_MAX)
		vlen = MMSG_MAX;
	int e = errno;
	unsigned n = 0;
	ssize_t r = 0;
	int fl = flags & ~MSG_WAITFORONE;
	while (n < vlen) {
		r = msg_read(s, fd, &vec[n].msg_hdr, fl);
		if (r < 0)
			break;
		vec[n].msg_len = (unsigned)r;
		n++;
		if (flags & MSG_WAITFORONE)
			fl |= MSG_DONTWAIT;
		if (tmo) {
			uint64_t now = ntbx_now_ns();
			uint64_t left = now < end ? end - now : 0;
			tmo->tv_sec = (time_t)(left / 1000000000ull);
			tmo->tv_nsec = (long)(left % 1000000000ull);
			if (!left)
				break;
		}
	}
	if (r < 0 && n == 0)
		return -1;
	errno = e;
	return (int)n;
}

/* ------------------------------------------------------------ splice */

static int fd_mode(int fd, int *acc)
{
	struct stat st;
	int fl = sk_real.fcntl(fd, F_GETFL);
	if (fl < 0 || fstat(fd, &st) < 0) {
		errno = EBADF;
		return -1;
	}
	*acc = fl;
	return S_ISFIFO(st.st_mode);
}

/* Bytes surely writable into pipe @p without blocking: its free slots
 * (each of our writes fills whole pages), at least one page when poll
 * says it is writable; -1 + EPIPE if it has no reader. */
static ssize_t pipe_room(int p)
{
	struct pollfd pf = { p, POLLOUT, 0 };
	if (sk_real.poll(&pf, 1, 0) < 0)
		return -1;
	if (pf.revents & POLLERR) {
		errno = EPIPE;
		return -1;
	}
	long page = sysconf(_SC_PAGESIZE);
	int size = sk_real.fcntl(p, F_GETPIPE_SZ), used = 0;
	if (size < 0 || sk_real.ioctl(p, FIONREAD, &used) < 0)
		return -1;
	long slots = size / page, busy = used < slots ? used : slots;
	long room = (slots - busy) * page;
	if (room < page && (pf.revents & POLLOUT))
		room = page;
	return room;
}

static int pipe_wait(int p, short ev)
{
	struct pollfd pf = { p, ev, 0 };
	int r = sk_real.poll(&pf, 1, -1);
	return r < 0 ? -1 : 0;
}

/* fabric socket -> pipe: room in the pipe first, then read the socket
 * (its own blocking mode and SO_RCVTIMEO; SPLICE_F_NONBLOCK is for the
 * pipe), so every byte read goes into the pipe. */
static ssize_t splice_from_sk(struct sk *s, int in, int out, size_t len,
                              unsigned flags)
{
	int pnb = (flags & SPLICE_F_NONBLOCK) || sk_nonblock(in);
	ssize_t room;
	for (;;) {
		room = pipe_room(out);
		if (room < 0) {
			if (errno == EPIPE)
				raise(SIGPIPE);
			return -1;
		}
		if (room > 0)
			break;
		if (pnb) {
			errno = EAGAIN;
			return -1;
		}
		if (pipe_wait(out, POLLOUT) < 0)
			return -1;
	}
	size_t n = len < (size_t)room ? len : (size_t)room;
	char *b = tl_get(n);
	if (!b) {
		errno = ENOMEM;
		return -1;
	}
	ssize_t r = sk_read(s, in, b, n, 0);
	for (ssize_t o = 0; r > 0 && o < r;) {
		ssize_t w = sk_real.write(out, b + o, (size_t)(r - o));
		if (w < 0 && errno != EINTR)
			return o ? o : -1;   /* the pipe's reader left */
		if (w > 0)
			o += w;
	}
	return r;
}

/* pipe -> fabric socket: copy the pipe's bytes without taking them (tee
 * into a private pipe), write them, then take from the pipe exactly what
 * the socket took, so a nonblocking or timed-out write leaves the rest in
 * the pipe as the kernel does. */
static ssize_t splice_to_sk(struct sk *s, int in, int out, size_t len,
                            unsigned flags)
{
	int pnb = (flags & SPLICE_F_NONBLOCK) || sk_nonblock(out);
	int avail = 0;
	for (;;) {
		if (sk_real.ioctl(in, FIONREAD, &avail) < 0)
			return -1;
		if (avail > 0)
			break;
		struct pollfd pf = { in, POLLIN, 0 };
		if (sk_real.poll(&pf, 1, 0) < 0)
			return -1;
		if (pf.revents & POLLHUP)
			return 0;   /* empty, no writer */
		if (pnb) {
			errno = EAGAIN;
			return -1;
		}
		if (pipe_wait(in, POLLIN) < 0)
			return -1;
	}
	size_t n = len < (size_t)avail ? len : (size_t)avail;
	if (n > (1u << 20))
		n = 1u << 20;
	char *b = tl_get(n);
	if (!b) {
		errno = ENOMEM;
		return -1;
	}
	int tp[2];
	if (pipe2(tp, O_CLOEXEC) < 0)
		return -1;
	if ((size_t)sk_real.fcntl(tp[1], F_GETPIPE_SZ) < n)
		sk_real.fcntl(tp[1], F_SETPIPE_SZ, (int)n);
	ssize_t k = tee(in, tp[1], n, SPLICE_F_NONBLOCK);
	ssize_t got = k > 0 ? sk_real.read(tp[0], b, (size_t)k) : k;
	int e = errno;
	sk_real.close(tp[0]);
	sk_real.close(tp[1]);
	if (got <= 0) {
		errno = got < 0 ? e : EAGAIN;
		return -1;
	}
	ssize_t w = sk_write(s, out, b, (size_t)got, 0);
	if (w <= 0)
		return w;
	e = errno;
	for (ssize_t o = 0; o < w;) {   /* take what went out */
		ssize_t r = sk_real.read(in, b, (size_t)(w - o));
		if (r <= 0 && !(r < 0 && errno == EINTR))
			break;
		if (r > 0)
			o += r;
	}
	errno = e;
	return w;
}

EXPORT ssize_t splice(int in, off64_t *off_in, int out, off64_t *off_out,
                      size_t len, unsigned int flags)
{
	struct sk *si = sk_get(in), *so = sk_get(out);
	sk_resolve();
	if (!si && !so)
		return sk_real.splice(in, off_in, out, off_out, len, flags);
	/* the kernel's checks, in its order */
	int fi, fo;
	int pi = fd_mode(in, &fi), po = fd_mode(out, &fo);
	if (pi < 0 || po < 0)
		return -1;
	if ((fi & O_ACCMODE) == O_WRONLY || (fo & O_ACCMODE) == O_RDONLY) {
		errno = EBADF;
		return -1;
	}
	if (pi && so) {
		if (off_in) {
			errno = ESPIPE;
			return -1;
		}
		if (off_out) {
			errno = EINVAL;
			return -1;
		}
		if (!len)
			return 0;
		return splice_to_sk(so, in, out, len, flags);
	}
	if (po && si) {
		if (off_out) {
			errno = ESPIPE;
			return -1;
		}
		if (off_in) {
			errno = EINVAL;
			return -1;
		}
		if (!len)
			return 0;
		return splice_from_sk(si, in, out, len, flags);
	}
	errno = EINVAL;
	return -1;
}

static ssize_t sendfile_common(int out, int in, off_t *off, size_t count)
{
	struct sk *s = sk_get(out);
	char *b = malloc(65536);
	if (!b) {
		errno = ENOMEM;
		return -1;
	}
	size_t done = 0;
	while (done < count) {
		size_t want = count - done < 65536 ? count - done : 65536;
		ssize_t r = off ? pread(in, b, want, *off) : read(in, b, want);
		if (r <= 0) {
			if (r < 0 && !done) {
				free(b);
				return -1;
			}
			break;
		}
		ssize_t w = sk_write(s, out, b, (size_t)r, 0);
		if (w < 0) {
			int e = errno;
			free(b);
			if (done)
				return (ssize_t)done;
			errno = e;
			return -1;
		}
		if (off)
			*off += w;
		else if (w < r)
			lseek(in, w - r, SEEK_CUR);
		done += (size_t)w;
		if (w < r)
			break;
	}
	free(b);
	return (ssize_t)done;
}

EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t count)
{
	if (!sk_get(out)) {
		sk_resolve();
		return sk_real.sendfile(out, in, off, count);
	}
	return sendfile_common(out, in, off, count);
}

EXPORT ssize_t sendfile64(int out, int in, off64_t *off, size_t count)
{
	if (!sk_get(out)) {
		sk_resolve();
		return sk_real.sendfile64(out, in, off, count);
	}
	return sendfile_common(out, in, (off_t *)off, count);
}

/* ------------------------------------------------------------ control */

/*
 * vfork is fork here.  A vfork child runs in the parent's memory until it
 * execs, and the calls it makes before (dup2 of a socket onto 0-2, close:
 * Python's subprocess does both) would change the parent's descriptor
 * table and counts; a wrapper cannot call the real vfork either (its
 * frame would be reused by the child).  A fork child has its own copy,
 * and the atfork handlers count it as a holder, as for fork.  What is
 * lost: a child's writes to the parent's memory (undefined in POSIX).
 */
EXPORT pid_t vfork(void)
{
	return fork();
}

/*
 * A bound socket is registered before the kernel listens: otherwise a
 * client retrying against a starting server gets in by TCP in the window
 * between the two (joining the fabric takes a while).  A connector that
 * sees the registration before the kernel listens is refused and gives
 * its request up.  A socket that listen() binds itself is registered
 * after.
 */
EXPORT int listen(int fd, int backlog)
{
	sk_resolve();
	int had = sk_is_listener_checked(fd);
	int reg = had ? 1 : sk_on_listen(fd);
	int rc = sk_real.listen(fd, backlog);
	if (rc < 0) {
		int e = errno;
		if (!had)
			sk_on_close_listener(fd);
		errno = e;
		return rc;
	}
	if (reg < 0)
		sk_on_listen(fd);
	return rc;
}

EXPORT int socket(int dom, int type, int proto)
{
	sk_resolve();
	int fd = sk_real.socket(dom, type, proto);
	sk_fd_new(fd);
	return fd;
}

EXPORT int socketpair(int dom, int type, int proto, int sv[2])
{
	sk_resolve();
	int rc = sk_real.socketpair(dom, type, proto, sv);
	if (rc == 0) {
		sk_fd_new(sv[0]);
		sk_fd_new(sv[1]);
	}
	return rc;
}

EXPORT int connect(int fd, __CONST_SOCKADDR_ARG addr, socklen_t len)
{
	sk_resolve();
	return sk_connect(fd, addr.__sockaddr__, len);
}

static int accept_common(int lfd, struct sockaddr *addr, socklen_t *alen,
                         int flags)
{
	sk_resolve();
	if (!sk_is_listener(lfd)) {
		int fd = sk_real.accept4(lfd, addr, alen, flags);
		sk_fd_new(fd);
		return fd;
	}
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	int fd = sk_real.accept4(lfd, (struct sockaddr *)&ss, &sl, flags);
	if (fd < 0)
		return fd;
	if (addr && alen) {
		memcpy(addr, &ss, *alen < sl ? *alen : sl);
		*alen = sl;
	}
	int e = errno;
	sk_fd_new(fd);
	sk_on_accept(lfd, fd, (struct sockaddr *)&ss, sl);
	errno = e;
	return fd;
}

EXPORT int accept(int fd, __SOCKADDR_ARG addr, socklen_t *__restrict alen)
{
	return accept_common(fd, addr.__sockaddr__, alen, 0);
}

EXPORT int accept4(int fd, __SOCKADDR_ARG addr, socklen_t *__restrict alen,
                   int flags)
{
	return accept_common(fd, addr.__sockaddr__, alen, flags);
}

/* Drop descriptor @fd's reference (close, or dup2 over it). */
void sk_drop_fd(int fd)
{
	struct sk *s = sk_get(fd);
	if (!s)
		return;
	sk_epoll_forget(fd);
	pthread_mutex_lock(&sk_lock);
	sk_set(fd, NULL);
	int last = --s->refs == 0;
	if (!last && s->fd0 == fd)
		for (int i = 0; i < sk_fd_hi; i++)
			if (sk_fds[i] == s) {
				s->fd0 = i;
				break;
			}
	pthread_mutex_unlock(&sk_lock);
	if (last)
		sk_release(s);
}

/* Bytes the peer wrote on the fabric that we have not read (the ring's
 * and our read-ahead). */
static uint64_t unread_in(struct sk *s)
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
 * SO_LINGER on the last descriptor of a fabric connection.  Linger on:
 * wait until the peer has read everything written on the fabric, the
 * peer is gone, or the linger time is over (close then returns 0 and the
 * bytes stay readable, as the kernel does).  Linger 0, or bytes from the
 * peer left unread (the kernel then resets too, whatever the linger): the
 * peer's reads end with ECONNRESET after what was written, and its first
 * send fails with ECONNRESET (the shadow sends the RST).
 */
static void linger_close(struct sk *s, int fd)
{
	struct sk_conn *c = sk_conn(s);
	if (!c || s->mode != M_FAB || s->refs != 1 ||
	    __atomic_load_n(s->role == 'C' ? &c->refs_c : &c->refs_a,
	                    __ATOMIC_ACQUIRE) != 1)
		return;
	struct linger lg = { 0, 0 };
	socklen_t l = sizeof lg;
	if (ntbx_sandboxed)
		return;   /* no socket options (util.h): a plain close */
	if (unread_in(s)) {
		lg = (struct linger){ 1, 0 };
		if (setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg) < 0)
			return;
	} else if (getsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, &l) < 0 ||
	           !lg.l_onoff) {
		return;
	}
	if (lg.l_linger <= 0) {
		__atomic_fetch_or(&c->reset, s->role == 'C' ? SK_RESET_C
		                                             : SK_RESET_A,
		                  __ATOMIC_ACQ_REL);
		return;
	}
	uint64_t end = ntbx_now_ns() + (uint64_t)lg.l_linger * 1000000000ull;
	unsigned backoff = 1;
	while (sk_unread(s) && sk_side_alive(s->slot, s->role == 'C' ? 'A' : 'C')) {
		uint64_t now = ntbx_now_ns();
		if (now >= end)
			break;
		uint64_t ms = (end - now) / 1000000 + 1;
		if (ms > backoff)
			ms = backoff;
		struct timespec ts = { (time_t)(ms / 1000),
		                       (long)(ms % 1000) * 1000000L };
		nanosleep(&ts, NULL);
		if (backoff < 20)
			backoff *= 2;
	}
}

void sk_fd_closing(int fd)
{
	int e = errno;
	struct sk *s = sk_get_checked(fd);
	if (s) {
		linger_close(s, fd);
		sk_drop_fd(fd);
	}
	if (sk_is_listener(fd))
		sk_on_close_listener(fd);
	errno = e;
}

void sk_fd_closing_range(unsigned first, unsigned last)
{
	if (!sk_nfds)
		return;
	for (unsigned fd = first; fd <= last && fd < (unsigned)sk_fd_hi; fd++)
		if (sk_get((int)fd) || sk_is_listener((int)fd))
			sk_fd_closing((int)fd);
	sk_epoll_closed_range(first, last);
}

EXPORT int close(int fd)
{
	sk_resolve();
	if (ntbx_fd_owned(fd)) {
		/* the library's, which the program never had open */
		errno = EBADF;
		return -1;
	}
	if (fd >= 0)
		sk_lockfd_keep((unsigned)fd, (unsigned)fd);
	sk_fd_closing(fd);
	sk_epoll_closed(fd);
	return sk_real.close(fd);
}

/*
 * The other ways to close: sshd and others close with close_range() or
 * closefrom() (glibc's closefrom calls the system call directly, so both
 * are wrapped), libuv (Node.js) with syscall(SYS_close, fd).  Each lets
 * the preload forget the descriptors first, as close() does.
 * CLOSE_RANGE_CLOEXEC closes nothing now (exec does, and the new image
 * starts with a new table).
 */
static int real_close_range(unsigned first, unsigned last, int flags)
{
	if (!sk_real.close_range)
		return (int)sk_real.syscall(SYS_close_range, first, last, flags);
	return sk_real.close_range(first, last, flags);
}

/*
 * close_range, leaving out the side-lock description (core.c,
 * sk_lockfd_keep) when it could not be moved out of the range, and the
 * library's own descriptors (ntbx_fd_own: the fabric handle's directory,
 * lock file, FIFOs, the keeper's socket), which sit high: the range is
 * closed in pieces around them.
 */
static int close_range_keep(unsigned first, unsigned last, int flags)
{
	if (first > last)
		return real_close_range(first, last, flags);
	int k = sk_lockfd_keep(first, last);
	unsigned from = first;
	for (;;) {
		int o = ntbx_fd_next_owned(from, last);
		if (k >= 0 && (unsigned)k >= from && (o < 0 || k < o))
			o = k;
		if (o < 0)
			return real_close_range(from, last, flags);
		if ((unsigned)o > from) {
			int r = real_close_range(from, (unsigned)o - 1, flags);
			if (r < 0)
				return r;
		}
		if ((unsigned)o >= last)
			return 0;
		from = (unsigned)o + 1;
	}
}

EXPORT int close_range(unsigned int first, unsigned int last, int flags)
{
	sk_resolve();
	if (!(flags & CLOSE_RANGE_CLOEXEC) && first <= last)
		sk_fd_closing_range(first, last);
	return close_range_keep(first, last, flags);
}

EXPORT void closefrom(int lowfd)
{
	sk_resolve();
	if (lowfd < 0)
		lowfd = 0;
	sk_fd_closing_range((unsigned)lowfd, ~0u);
	if (close_range_keep((unsigned)lowfd, ~0u, 0) < 0 && errno == ENOSYS &&
	    sk_real.closefrom)
		sk_real.closefrom(lowfd);   /* a kernel without close_range */
}

/*
 * syscall(): the calls wrapped here that a program may also make through
 * syscall(SYS_...) go to their wrappers (same arguments, same -1 + errno
 * convention); every other number goes to libc's syscall unchanged.  Six
 * arguments are always taken, as the kernel's calling convention does.
 */
EXPORT long syscall(long nr, ...)
{
	va_list ap;
	va_start(ap, nr);
	long a[6];
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	sk_resolve();
	switch (nr) {
#ifdef SYS_seccomp
	case SYS_seccomp:   /* libseccomp, systemd: see priv.c's prctl */
		if (a[0] == SECCOMP_SET_MODE_FILTER) {
			sk_confine_all();
			ntbx_sandbox_entered();
		}
		break;
#endif
	case SYS_close:
		return close((int)a[0]);
	case SYS_close_range:
		return close_range((unsigned)a[0], (unsigned)a[1], (int)a[2]);
	case SYS_dup:
		return dup((int)a[0]);
#ifdef SYS_dup2
	case SYS_dup2:
		return dup2((int)a[0], (int)a[1]);
#endif
	case SYS_dup3:
		return dup3((int)a[0], (int)a[1], (int)a[2]);
	case SYS_fcntl:
		return fcntl((int)a[0], (int)a[1], (void *)a[2]);
	case SYS_socket:
		return socket((int)a[0], (int)a[1], (int)a[2]);
	case SYS_socketpair:
		return socketpair((int)a[0], (int)a[1], (int)a[2], (int *)a[3]);
	case SYS_connect:
		return connect((int)a[0], (const struct sockaddr *)a[1],
		               (socklen_t)a[2]);
	case SYS_listen:
		return listen((int)a[0], (int)a[1]);
#ifdef SYS_accept
	case SYS_accept:
		return accept((int)a[0], (struct sockaddr *)a[1],
		              (socklen_t *)a[2]);
#endif
	case SYS_accept4:
		return accept4((int)a[0], (struct sockaddr *)a[1],
		               (socklen_t *)a[2], (int)a[3]);
	case SYS_shutdown:
		return shutdown((int)a[0], (int)a[1]);
	case SYS_read:
		return read((int)a[0], (void *)a[1], (size_t)a[2]);
	case SYS_write:
		return write((int)a[0], (const void *)a[1], (size_t)a[2]);
	case SYS_readv:
		return readv((int)a[0], (const struct iovec *)a[1], (int)a[2]);
	case SYS_writev:
		return writev((int)a[0], (const struct iovec *)a[1], (int)a[2]);
	case SYS_recvfrom:
		return recvfrom((int)a[0], (void *)a[1], (size_t)a[2], (int)a[3],
		                (struct sockaddr *)a[4], (socklen_t *)a[5]);
	case SYS_sendto:
		return sendto((int)a[0], (const void *)a[1], (size_t)a[2],
		              (int)a[3], (const struct sockaddr *)a[4],
		              (socklen_t)a[5]);
	case SYS_recvmsg:
		return recvmsg((int)a[0], (struct msghdr *)a[1], (int)a[2]);
	case SYS_sendmsg:
		return sendmsg((int)a[0], (const struct msghdr *)a[1], (int)a[2]);
	}
	return sk_real.syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

EXPORT int shutdown(int fd, int how)
{
	sk_resolve();
	struct sk *s = sk_get_checked(fd);
	if (s && (how == SHUT_WR || how == SHUT_RDWR)) {
		pthread_mutex_lock(&s->wlock);
		s->shut_wr = 1;
		if (s->mode == M_FAB) {
			struct ntbx_qp *qp = sk_qp(s);
			if (qp) {
				pthread_mutex_lock(&s->qlock);
				ntbx_qp_shutdown(qp);
				pthread_mutex_unlock(&s->qlock);
			}
		}
		pthread_mutex_unlock(&s->wlock);
	}
	return sk_real.shutdown(fd, how);
}

/* @to is a new descriptor of @from's file (dup, F_DUPFD, dup2). */
static void share(int from, int to)
{
	sk_fd_new(to);
	struct sk *s = sk_get_checked(from);
	if (!s || to < 0 || to >= sk_nfds)
		return;
	pthread_mutex_lock(&sk_lock);
	s->refs++;
	sk_set(to, s);
	pthread_mutex_unlock(&sk_lock);
}

EXPORT int dup(int fd)
{
	sk_resolve();
	int n = sk_real.dup(fd);
	if (n >= 0)
		share(fd, n);
	return n;
}

EXPORT int dup2(int fd, int to)
{
	sk_resolve();
	if (fd == to)
		return sk_real.dup2(fd, to);
	if (to >= 0)
		sk_lockfd_keep((unsigned)to, (unsigned)to);
	int n = sk_real.dup2(fd, to);
	if (n >= 0) {
		sk_drop_fd(to);
		share(fd, n);
	}
	return n;
}

EXPORT int dup3(int fd, int to, int flags)
{
	sk_resolve();
	if (to >= 0 && fd != to)
		sk_lockfd_keep((unsigned)to, (unsigned)to);
	int n = sk_real.dup3(fd, to, flags);
	if (n >= 0) {
		sk_drop_fd(to);
		share(fd, n);
	}
	return n;
}

EXPORT int fcntl(int fd, int cmd, ...)
{
	sk_resolve();
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	int r = sk_real.fcntl(fd, cmd, arg);
	if (r >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC))
		share(fd, r);
	if (r >= 0 && cmd == F_SETFL)
		sk_nonblock_set(fd, !!((long)arg & O_NONBLOCK));
	return r;
}

EXPORT int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	return fcntl(fd, cmd, arg);
}

EXPORT int ioctl(int fd, unsigned long req, ...)
{
	sk_resolve();
	va_list ap;
	va_start(ap, req);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	struct sk *s = sk_get(fd);
	if (s && req == SIOCOUTQ && s->mode == M_FAB && arg) {
		/* bytes the peer has not read yet: the fabric's, and the
		 * shadow's (what went by TCP before the switch) */
		int k = 0;
		if (sk_real.ioctl(fd, req, &k) < 0)
			return -1;
		uint64_t n = sk_unread(s) + (uint64_t)(k > 0 ? k : 0);
		int v = n > INT32_MAX ? INT32_MAX : (int)n;
		memcpy(arg, &v, sizeof v);  /* the program's int may be unaligned */
		return 0;
	}
	if (s && req == FIONREAD && s->mode == M_FAB && arg) {
		pthread_mutex_lock(&s->rlock);
		if (s->pkoff >= s->pklen) {
			char *nb = s->pk ? s->pk : malloc(65536);
			if (nb) {
				s->pk = nb;
				s->pkoff = s->pklen = 0;
				pthread_mutex_unlock(&s->rlock);
				char tmp[1];
				ssize_t r = sk_read(s, fd, tmp, 1,
				                    MSG_PEEK | MSG_DONTWAIT);
				pthread_mutex_lock(&s->rlock);
				(void)r;
			}
		}
		int v = (int)(s->pklen - s->pkoff);
		pthread_mutex_unlock(&s->rlock);
		memcpy(arg, &v, sizeof v);
		return 0;
	}
	int r = sk_real.ioctl(fd, req, arg);
	if (r == 0 && s && req == FIONBIO && arg) {
		int v;
		memcpy(&v, arg, sizeof v);
		sk_nonblock_set(fd, v != 0);
	}
	return r;
}
