/* SPDX-License-Identifier: MIT */
/*
 * ready.c — readiness: what poll would say of a fabric socket (its queue
 * pair, its hand-over, its shadow's news), the wait policy and sleep
 * slices that every wait shares, and poll, ppoll, select and pselect over
 * fabric and kernel descriptors together.  Separate from the data path
 * because a readiness call never moves a byte, and from epoll.c, whose
 * set outlives the call.
 *
 * Waiting: check every descriptor; spin re-checking for as long as the
 * wait policy says (util.h, ntbx_spin_begin); then
 * prepare to sleep — drain the sleeper's own wake object (the thread's for
 * poll and select, the set's for epoll; see "Wake objects" in wake.c) and
 * register the queue pairs' doorbell bits on it, arm each accelerated
 * queue pair (ntbx_qp_arm: the peer rings only after that), check once
 * more — and sleep in the kernel on the user's descriptors, the shadows
 * (FIN, reset) and the wake object's FIFO together.  An idle program
 * sleeps.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <unistd.h>

#include "ntbx/fabric.h"
#include "sock/sock.h"
#include "util/util.h"

/* ------------------------------------------------------------ readiness */

int sk_prefix_pending(struct sk *s)
{
	if (s->role != 'A' || s->prefix_done)
		return 0;
	struct sk_conn *c = sk_conn(s);
	if (!c)
		return 0;
	skx_sync(s, c);
	uint32_t st = __atomic_load_n(&c->state, __ATOMIC_ACQUIRE);
	if (st == SK_FAB && c->tcp_sent == c->tcp_rcvd) {
		s->prefix_done = 1;
		return 0;
	}
	return 1;
}

/*
 * How long a poll or epoll wait may sleep in the kernel (ms): until @end
 * (UINT64_MAX: no deadline), at most 1 s at a time, and, when a descriptor
 * must be looked at again by hand (@slice bit 0: a connection still
 * switching), a back-off from 1 ms doubling to 50 ms; 1 ms each time for a
 * peer whose rings cannot reach us (bit 1: sk_sleep_sliced).
 */
int sk_sleep_slice(uint64_t end, uint64_t now, int slice,
                       unsigned *backoff)
{
	uint64_t left = end == UINT64_MAX ? 1000 : (end - now) / 1000000ull + 1;
	if (slice & 2)
		*backoff = 1;   /* a confined peer: no back-off */
	if (slice && left > *backoff)
		left = *backoff;
	if (left > 1000)
		left = 1000;
	if (slice && *backoff < 50)
		*backoff *= 2;
	return (int)left;
}

int sk_revents(struct sk *s, int fd, int events, int *kev, int *slice)
{
	*kev = 0;
	*slice = 0;
	if (s->mode == M_PEND)
		sk_progress(s);
	if (s->mode == M_PEND && !s->rd_fab) {
		*kev = events;
		*slice = 1;
		return 0;
	}
	if (s->mode == M_PEND) {   /* reads on the fabric, writes by TCP */
		int m = q_poll(s);
		int r = m & (NTBX_QP_READABLE | NTBX_QP_HUP | NTBX_QP_ERROR)
		                ? POLLIN : 0;
		*kev = events & ~POLLIN;
		*slice = 1;
		return r & events;
	}
	if (s->mode == M_TCP) {
		*kev = events;
		/* after a fail-over, what was in our ring is read first */
		return sk_fo_pending(s) ? POLLIN & events : 0;
	}
	int r = 0;
	int pre = sk_prefix_pending(s);
	if (s->pkoff < s->pklen)
		r |= POLLIN;
	if (!sk_qp(s))
		return (POLLERR | POLLHUP) & (events | POLLERR | POLLHUP);
	int m = q_poll(s);
	/* a link to another host failed: on over the shadow */
	if ((m & NTBX_QP_ERROR) && sk_failover(s, fd) == 0)
		return sk_revents(s, fd, events, kev, slice);
	if (!pre && (m & NTBX_QP_READABLE))
		r |= POLLIN;
	if (m & NTBX_QP_WRITABLE)
		r |= POLLOUT;
	if (!pre && (m & NTBX_QP_HUP))
		r |= POLLIN | POLLRDHUP;
	if (m & NTBX_QP_ERROR)
		r |= POLLERR | POLLIN;
	if (s->sh_fin && !pre)
		r |= POLLIN | POLLRDHUP;
	*kev = POLLIN | POLLRDHUP;
	return r & (events | POLLERR | POLLHUP);
}

/* What the kernel said about an accelerated descriptor's shadow. */
static int shadow_news(struct sk *s, int events, int kre)
{
	if (!kre)
		return 0;
	if (s->mode != M_FAB)
		return kre;
	if (sk_prefix_pending(s))
		return kre & (POLLIN | POLLERR | POLLHUP) & (events | POLLERR | POLLHUP);
	s->sh_fin = 1;
	/* end of stream (the fabric's data stays readable first); a reset or
	 * both directions closed also as the kernel says it */
	return ((POLLIN | POLLRDHUP) & events) | (kre & (POLLERR | POLLHUP));
}

/* ------------------------------------------------------------ poll */

static int any_sk(struct pollfd *fds, nfds_t n)
{
	if (!sk_fds)
		return 0;
	for (nfds_t i = 0; i < n; i++)
		if (sk_get(fds[i].fd))
			return 1;
	return 0;
}

/* The wait policy (util.h): one site per thread for poll, select and
 * epoll; a call that returns without waiting (ready at once or at the
 * first look again, timeout 0) neither asks it nor teaches it. */
static __thread struct ntbx_spin w_spin
	__attribute__((tls_model("initial-exec")));

/* Nothing was ready at a wait's second look: ask the policy how long to
 * spin, for peers on @cpu (sk_peer_cpu_add's; below 0: not one CPU). */
void sk_spin_wait_begin(struct sk_spin_wait *sp, int cpu, uint64_t now)
{
	sp->budget = ntbx_spin_begin_halving(&w_spin, cpu < 0 ? -1 : cpu, now);
	sp->begun = 1;
}

/* The wait that began at @t0 ends: teach the policy, if it was asked. */
void sk_spin_wait_end(const struct sk_spin_wait *sp, uint64_t t0)
{
	if (sp->begun)
		ntbx_spin_end(&w_spin, sp->slept ? ntbx_now_ns() - t0 : 0,
		              sp->slept);   /* a hit's length does not matter */
}

/* What the wait policy is told about the peers of a wait (util.h,
 * ntbx_spin_begin_for): *@cpu is the CPU that the peer writers of the
 * accelerated descriptors waited on for reading last sent from, while it
 * is one and the same for all of them; -1 once it is not known for one of
 * them, or one waits to write (for its peer's reader).  Start at -2. */
void sk_peer_cpu_add(int *cpu, struct sk *s, int events)
{
	if (*cpu == -1 || (s->mode != M_FAB && !s->rd_fab))
		return;
	struct ntbx_qp *qp = sk_qp(s);
	int c = qp && (events & POLLIN) && !(events & POLLOUT) ?
	        ntbx_qp_peer_cpu(qp) : -1;
	*cpu = *cpu == -2 || *cpu == c ? c : -1;
}

/*
 * A look at the kernel's side of a poll that would not sleep (ready at
 * once, spinning, or timeout 0), when every descriptor is an accelerated
 * socket: the kernel would only report the shadows' news (the FIN or RST
 * of a peer that ended without closing its fabric end, stream.c).  Such a
 * look costs a system call per call and per spin round (pgbench's client:
 * about one per transaction), so it is made once a millisecond per
 * thread; a poll that sleeps always has the shadows in its kernel set.  A
 * killed peer is then reported at most that much later, as if its FIN
 * were still on its way.
 */
#define SHADOW_LOOK_NS 1000000ull
static __thread uint64_t t_shadow_look
	__attribute__((tls_model("initial-exec")));

static int shadows_due(void)
{
	return ntbx_due(&t_shadow_look, ntbx_now_ns(), SHADOW_LOOK_NS);
}

static int do_poll(struct pollfd *fds, nfds_t n, int timeout,
                   const sigset_t *mask)
{
	struct pollfd stackbuf[64];
	struct pollfd *kf = n + 1 <= 64 ? stackbuf : malloc((n + 1) * sizeof *kf);
	if (!kf) {
		errno = ENOMEM;
		return -1;
	}
	uint64_t t0 = ntbx_now_ns();
	if (timeout != 0 && ntbx_spin_turn(t0))
		t0 = ntbx_now_ns();
	uint64_t end = timeout < 0 ? UINT64_MAX
	                           : t0 + (uint64_t)timeout * 1000000ull;
	unsigned backoff = 1;
	struct wobj *wo = NULL;
	struct sk_spin_wait sp = { 0, 0, 0, 0 };
	int ret;
	for (;;) {
		int ready = 0, slice = 0, only_shadows = !mask;
		for (nfds_t i = 0; i < n; i++) {
			kf[i] = fds[i];
			kf[i].revents = 0;
			fds[i].revents = 0;
			struct sk *s = sk_get(fds[i].fd);
			if (!s) {
				only_shadows = 0;
				continue;
			}
			int kev, sl;
			int r = sk_revents(s, fds[i].fd, fds[i].events, &kev, &sl);
			fds[i].revents = (short)r;
			kf[i].events = (short)kev;
			slice |= sl;
			if (r)
				ready++;
			if (s->mode != M_FAB || kev != (POLLIN | POLLRDHUP) ||
			    sk_prefix_pending(s))   /* TCP bytes to read */
				only_shadows = 0;
		}
		uint64_t now = ntbx_now_ns();
		int kt = 0;
		nfds_t kn = n;
		/* as in epoll.c: the next round asks the kernel right after */
		int first_look = !ready && now < end && !sp.begun && !sp.looked;
		if (!ready && now < end && !sp.begun && sp.looked++) {
			int cpu = -2;
			for (nfds_t i = 0; i < n; i++) {
				struct sk *s = sk_get(fds[i].fd);
				if (s)
					sk_peer_cpu_add(&cpu, s, fds[i].events);
			}
			sk_spin_wait_begin(&sp, cpu, now);
		}
		if (!ready && now < end && sp.begun && now - t0 >= sp.budget) {
			sp.slept = 1;
			struct ntbx_fabric *f = sk_fab();
			if (f && !wo)
				wo = sk_thread_wobj(ntbx_fabric_dev(f));
			struct sk_want want = SK_WANT_NONE;
			for (nfds_t i = 0; i < n; i++) {
				struct sk *s = sk_get(fds[i].fd);
				if (s)
					sk_wake_mask(s, &want);
			}
			int cap = 1000;
			int efd = sk_sleep_prepare(wo, &want, &cap);
			int armed = 0;
			for (nfds_t i = 0; i < n; i++) {
				struct sk *s = sk_get(fds[i].fd);
				if (s && sk_arm(s, fds[i].events))
					armed = 1;
				if (s && sk_sleep_sliced(wo, s))
					slice |= 2;
			}
			if (!armed) {
				if (efd >= 0) {
					kf[n].fd = efd;
					kf[n].events = POLLIN;
					kf[n].revents = 0;
					kn = n + 1;
				}
				kt = sk_sleep_slice(end, now, slice, &backoff);
				if (kt > cap)
					kt = cap;
			}
		} else if (!ready && now < end) {
			ntbx_cpu_relax();
		}
		int k;
		if (first_look ||
		    (kt == 0 && kn == n && only_shadows && !shadows_due())) {
			k = 0;   /* nothing the kernel could add now (above) */
		} else {
			struct wobj *zo = kn > n ? wo : NULL;   /* its FIFO too */
			sk_sleep_mark(zo, kt, 1);
			if (mask) {
				struct timespec ts = { kt / 1000,
				                       (kt % 1000) * 1000000L };
				k = sk_real.ppoll(kf, kn, &ts, mask);
			} else {
				k = sk_real.poll(kf, kn, kt);
			}
			sk_sleep_mark(zo, kt, 0);
		}
		if (k < 0 && errno == EINTR) {
			ret = -1;
			break;
		}
		if (kn > n && kf[n].revents && !wo)
			sk_drain();   /* a wake object is drained by its next prepare */
		int count = 0;
		for (nfds_t i = 0; i < n; i++) {
			struct sk *s = sk_get(fds[i].fd);
			if (s)
				fds[i].revents |= (short)shadow_news(s, fds[i].events,
				                                     kf[i].revents);
			else
				fds[i].revents = kf[i].revents;
			if (fds[i].revents)
				count++;
		}
		if (count || ntbx_now_ns() >= end) {
			ret = count;
			break;
		}
	}
	sk_spin_wait_end(&sp, t0);
	if (kf != stackbuf)
		free(kf);
	return ret;
}

EXPORT int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	sk_resolve();
	if (!any_sk(fds, n))
		return sk_real.poll(fds, n, timeout);
	return do_poll(fds, n, timeout, NULL);
}

EXPORT int __poll_chk(struct pollfd *fds, nfds_t n, int timeout,
                      size_t fdslen)
{
	if (fdslen / sizeof *fds < n)
		abort();
	return poll(fds, n, timeout);
}

int sk_ts_ms(const struct timespec *ts)
{
	if (!ts)
		return -1;
	long long ms = (long long)ts->tv_sec * 1000 + (ts->tv_nsec + 999999) / 1000000;
	return ms > 0x7fffffff ? 0x7fffffff : (int)ms;
}

EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts,
                 const sigset_t *mask)
{
	sk_resolve();
	if (!any_sk(fds, n))
		return sk_real.ppoll(fds, n, ts, mask);
	return do_poll(fds, n, sk_ts_ms(ts), mask);
}

/* ------------------------------------------------------------ select */

static int any_sk_set(int nfds, fd_set *r, fd_set *w, fd_set *e)
{
	if (!sk_fds)
		return 0;
	for (int fd = 0; fd < nfds && fd < FD_SETSIZE; fd++)
		if (sk_get(fd) && ((r && FD_ISSET(fd, r)) || (w && FD_ISSET(fd, w)) ||
		                   (e && FD_ISSET(fd, e))))
			return 1;
	return 0;
}

static int select_poll(int nfds, fd_set *r, fd_set *w, fd_set *e, int ms,
                       const sigset_t *mask)
{
	if (nfds > FD_SETSIZE)
		nfds = FD_SETSIZE;
	struct pollfd *p = calloc((size_t)nfds + 1, sizeof *p);
	if (!p) {
		errno = ENOMEM;
		return -1;
	}
	nfds_t n = 0;
	for (int fd = 0; fd < nfds; fd++) {
		short ev = 0;
		if (r && FD_ISSET(fd, r))
			ev |= POLLIN;
		if (w && FD_ISSET(fd, w))
			ev |= POLLOUT;
		if (e && FD_ISSET(fd, e))
			ev |= POLLPRI;
		if (ev) {
			p[n].fd = fd;
			p[n].events = ev;
			n++;
		}
	}
	int k = do_poll(p, n, ms, mask);
	if (k < 0) {
		free(p);
		return -1;
	}
	for (nfds_t i = 0; i < n; i++)
		if (p[i].revents & POLLNVAL) {
			free(p);
			errno = EBADF;
			return -1;
		}
	if (r)
		FD_ZERO(r);
	if (w)
		FD_ZERO(w);
	if (e)
		FD_ZERO(e);
	int cnt = 0;
	for (nfds_t i = 0; i < n; i++) {
		short re = p[i].revents;
		if (r && (p[i].events & POLLIN) && (re & (POLLIN | POLLHUP | POLLERR))) {
			FD_SET(p[i].fd, r);
			cnt++;
		}
		if (w && (p[i].events & POLLOUT) && (re & (POLLOUT | POLLERR))) {
			FD_SET(p[i].fd, w);
			cnt++;
		}
		if (e && (p[i].events & POLLPRI) && (re & POLLPRI)) {
			FD_SET(p[i].fd, e);
			cnt++;
		}
	}
	free(p);
	return cnt;
}

EXPORT int select(int nfds, fd_set *r, fd_set *w, fd_set *e,
                  struct timeval *tv)
{
	sk_resolve();
	if (!any_sk_set(nfds, r, w, e))
		return sk_real.select(nfds, r, w, e, tv);
	int ms = tv ? (int)(tv->tv_sec * 1000 + (tv->tv_usec + 999) / 1000) : -1;
	return select_poll(nfds, r, w, e, ms, NULL);
}

EXPORT int pselect(int nfds, fd_set *r, fd_set *w, fd_set *e,
                   const struct timespec *ts, const sigset_t *mask)
{
	sk_resolve();
	if (!any_sk_set(nfds, r, w, e))
		return sk_real.pselect(nfds, r, w, e, ts, mask);
	return select_poll(nfds, r, w, e, sk_ts_ms(ts), mask);
}
