/* SPDX-License-Identifier: MIT */
/*
 * wait.c — libntbx-preload.so: poll, ppoll, select, pselect and epoll
 * over fabric and kernel descriptors together.
 *
 * Waiting: check every descriptor; spin re-checking for as long as the
 * wait policy says (util.h, ntbx_spin_begin); then
 * prepare to sleep — drain the sleeper's own wake object (the thread's for
 * poll and select, the set's for epoll; see "Wake objects" below) and
 * register the queue pairs' doorbell bits on it, arm each accelerated
 * queue pair (ntbx_qp_arm: the peer rings only after that), check once
 * more — and sleep in the kernel on the user's descriptors, the shadows
 * (FIN, reset) and the wake object's FIFO together.  An idle program
 * sleeps.
 *
 * epoll: the epoll descriptor stays a kernel epoll.  An accelerated
 * descriptor is kept on a list here; its shadow is registered in the
 * kernel set edge-triggered under a private tag (so a FIN wakes us) and
 * the set's wake FIFO under another; epoll_wait merges the list's ready entries with
 * the kernel's and drops the private tags.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <unistd.h>

#include "ntbx/fabric.h"
#include "sock/sock.h"
#include "util/util.h"

#define TAG_SH 0xc0de5a0000000000ull   /* | fd: a shadow */
#define TAG_EV 0xc0de5b0000000000ull   /* the doorbell FIFO */
#define TAG_MASK 0xffffff0000000000ull

/* ------------------------------------------------------------ readiness */

static uint64_t bytes_in(struct sk *s)
{
	struct sk_conn *c = sk_conn(s);
	if (!c)
		return 0;
	return __atomic_load_n(s->role == 'C' ? &c->bytes_ac : &c->bytes_ca,
	                       __ATOMIC_RELAXED);
}

static int prefix_pending(struct sk *s)
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
 * peer whose rings cannot reach us (bit 1: sk_peer_confined).
 */
static int sleep_slice(uint64_t end, uint64_t now, int slice,
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
	if (sk_peer_confined(s))
		*slice = 2;   /* its rings cannot reach our FIFO: 1 ms slices */
	int pre = prefix_pending(s);
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
	if (prefix_pending(s))
		return kre & (POLLIN | POLLERR | POLLHUP) & (events | POLLERR | POLLHUP);
	s->sh_fin = 1;
	/* end of stream (the fabric's data stays readable first); a reset or
	 * both directions closed also as the kernel says it */
	return ((POLLIN | POLLRDHUP) & events) | (kre & (POLLERR | POLLHUP));
}

/*
 * Wake objects.  A process may run many event loops at once (a thread
 * each, as memcached -t 4 does).  Each sleeper that sleeps in the kernel
 * (a thread in poll or select, an epoll set) has a wake object of its own
 * (ntbx_db_wake_open: a waiter slot of the node, with its own FIFO and
 * pending flag), registered with exactly the ports and doorbell bits of
 * the queue pairs it waits on.  A ringer, from any thread or process of
 * any node, makes readable the FIFO of every registered object whose mask
 * matches.  Why no wake-up is lost, however many sleepers wait on a node:
 *
 *  1. A sleeper prepares its object (drains it, registers its mask), then
 *     arms each queue pair, then checks each, then sleeps on the FIFO.
 *  2. The peer rings only after it sees an arm (and after making its data
 *     or room visible), so a ring that matters comes after step 1's
 *     registration; it finds the mask, and the object's flag clear or set
 *     by a ringer that is writing a byte after our drain.  Either way the
 *     FIFO is readable when the sleeper looks, until its own next prepare.
 *     If instead the peer acted before seeing the arm, step 1's check sees
 *     the data or room (the qp layer's Dekker pair).
 *  3. Only the object's own sleepers drain it: a thread's object is that
 *     thread's; an epoll set's object is drained only by threads waiting
 *     on that set, which check the whole set after draining.  So a drain
 *     never consumes a wake-up meant for a condition the drainer does not
 *     check.  (With one FIFO per process, a thread's drain ate another
 *     thread's wake-up, which then slept to the 1 s cap.)
 *
 * A thread's object goes back to a per-process pool when the thread
 * exits; an epoll set's when the set is closed.  If the node has no free
 * waiter slot, sleepers share the handle's FIFO as before and sleep at
 * most FALLBACK_MS at a time, so a lost wake-up costs that, not 1 s.
 */
#define FALLBACK_MS 10

struct wobj {
	struct ntbx_db_wake *wk;
	int fd;
	pid_t pid;
	struct wobj *next;   /* in the pool */
};

static pthread_mutex_t wpool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct wobj *wpool;
static pid_t wpool_pid;
static pthread_key_t wkey;
static pthread_once_t wkey_once = PTHREAD_ONCE_INIT;
static __thread struct wobj *t_wobj;
static int wobj_warned;

static void wobj_put(struct wobj *o)
{
	if (!o)
		return;
	if (o->pid != getpid())
		return;   /* the parent's, inherited by fork: it keeps it */
	pthread_mutex_lock(&wpool_lock);
	if (wpool_pid != o->pid) {
		wpool = NULL;
		wpool_pid = o->pid;
	}
	o->next = wpool;
	wpool = o;
	pthread_mutex_unlock(&wpool_lock);
}

static void wkey_free(void *v)
{
	wobj_put(v);
}

static void wkey_make(void)
{
	if (pthread_key_create(&wkey, wkey_free) != 0)
		wkey = (pthread_key_t)-1;
}

/* A wake object of this process, from the pool or new; NULL if the node
 * has none to give. */
static struct wobj *wobj_get(struct ntbx_dev *dev)
{
	pid_t me = getpid();
	pthread_mutex_lock(&wpool_lock);
	struct wobj *o = wpool_pid == me ? wpool : NULL;
	if (o)
		wpool = o->next;
	pthread_mutex_unlock(&wpool_lock);
	if (o)
		return o;
	o = calloc(1, sizeof *o);
	if (!o)
		return NULL;
	int fd = ntbx_db_wake_open(dev, &o->wk);
	if (fd < 0) {
		if (!__atomic_exchange_n(&wobj_warned, 1, __ATOMIC_RELAXED))
			ntbx_log(NTBX_LOG_WARN, "no wake object for an event loop "
			         "(%s): sleeping in slices of %d ms", strerror(-fd),
			         FALLBACK_MS);
		free(o);
		return NULL;
	}
	o->fd = fd;
	o->pid = me;
	return o;
}

/* This thread's wake object (poll, select). */
static struct wobj *thread_wobj(struct ntbx_dev *dev)
{
	if (t_wobj && t_wobj->pid == getpid())
		return t_wobj;
	t_wobj = NULL;   /* none yet, or the parent's (fork) */
	pthread_once(&wkey_once, wkey_make);
	struct wobj *o = wobj_get(dev);
	if (o && wkey != (pthread_key_t)-1)
		pthread_setspecific(wkey, o);
	t_wobj = o;
	return o;
}

/* What a sleeper on @s waits for, added to *@ports, *@bits. */
static void wake_mask(struct sk *s, uint64_t *ports, uint32_t *bits)
{
	/* M_PEND: the acceptor's answer rings our endpoint (ntbx_qp_notify) */
	if (s->mode != M_FAB && s->mode != M_PEND)
		return;
	struct ntbx_qp *qp = sk_qp(s);
	if (!qp)
		return;
	int port;
	uint32_t b;
	ntbx_qp_wake_bit(qp, &port, &b);
	if (port >= 0 && port < 64) {
		*ports |= 1ull << port;
		*bits |= b;
	}
}

/*
 * Prepare to sleep on @o (NULL: the handle's shared FIFO) for @ports and
 * @bits; before arming.  Returns the descriptor to sleep on, or -1, and
 * lowers *@cap (ms) when wake-ups may be lost.
 */
static int sleep_prepare(struct wobj *o, uint64_t ports, uint32_t bits,
                         int *cap)
{
	struct ntbx_fabric *f = sk_fab();
	if (!f)
		return -1;
	struct ntbx_dev *dev = ntbx_fabric_dev(f);
	if (o) {
		if (ntbx_db_wake_prepare(dev, o->wk, ports, bits) < 0) {
			*cap = FALLBACK_MS;
			return -1;
		}
		return o->fd;
	}
	*cap = FALLBACK_MS;
	int np = ntbx_port_count(dev);
	uint64_t mask = np >= 64 ? ~0ull : (1ull << np) - 1;
	/* Clear the bits first: registering the FIFO makes it readable at
	 * once for bits still set; a ring after the clear still wakes us. */
	for (int p = 0; p < np; p++)
		ntbx_db_clear(dev, p, NTBX_DB_QP_MASK);
	ntbx_db_event_drain(dev);
	return ntbx_db_event_fd(dev, mask ? mask : 1, NTBX_DB_QP_MASK);
}

/* Does @s still wait for the other side's step of the hand-over?  The
 * connector for the answer (SK_REQ, or SK_ANS while the acceptor writes
 * it), the acceptor for the connector's switch (SK_ACC). */
static int handover_pending(struct sk *s)
{
	struct sk_conn *c = sk_conn(s);
	if (!c)
		return 0;
	skx_sync(s, c);   /* the other side on another host */
	uint32_t st = __atomic_load_n(&c->state, __ATOMIC_ACQUIRE);
	return s->role == 'C' ? st == SK_REQ || st == SK_ANS : st == SK_ACC;
}

static int arm(struct sk *s, int events)
{
	if (s->mode == M_PEND && !s->rd_fab) {
		/* Waiting for the acceptor's answer, which it publishes and
		 * then rings (ntbx_qp_notify): registered for that ring
		 * already, look once more; if it came, do not sleep. */
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		return !handover_pending(s);
	}
	if (s->mode != M_FAB && !s->rd_fab)
		return 0;
	if (s->mode != M_FAB)
		events &= ~POLLOUT;
	if (!sk_qp(s))
		return 1;
	int want = (events & POLLIN ? NTBX_QP_READABLE : 0) |
	           (events & POLLOUT ? NTBX_QP_WRITABLE : 0);
	int m = q_arm(s, want);
	if (m < 0)
		return 0;
	return (m & (want | NTBX_QP_HUP | NTBX_QP_ERROR)) != 0;
}

/* After the shared FIFO (no wake object) polled readable. */
static void drain(void)
{
	struct ntbx_fabric *f = sk_fab();
	if (f)
		ntbx_db_event_drain(ntbx_fabric_dev(f));
}

/*
 * A read waiting for the other side's half of the hand-over
 * (handover_pending): the connector for the acceptor's answer, the
 * acceptor, in its TCP prefix read, for the connector's switch.  Each side
 * publishes its step and then rings the other's endpoint
 * (ntbx_qp_notify); we register for that ring before the last look, so
 * the step is seen either by the look or by the ring.  Sleeps until
 * then, news on the shadow, or @ms (the caller's back-off: the safety
 * net for a peer beyond one hop, which no ring reaches).
 */
void sk_wait_pend(struct sk *s, int fd, int ms)
{
	struct ntbx_fabric *f = sk_fab();
	struct pollfd p[2] = { { fd, POLLIN, 0 }, { -1, POLLIN, 0 } };
	uint64_t ports = 0;
	uint32_t bits = 0;
	int cap = ms;
	struct wobj *o = f ? thread_wobj(ntbx_fabric_dev(f)) : NULL;
	wake_mask(s, &ports, &bits);
	if (ports)
		p[1].fd = sleep_prepare(o, ports, bits, &cap);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (!handover_pending(s))
		return;
	sk_real.poll(p, 2, cap < ms ? cap : ms);
	if (!o && p[1].fd >= 0 && (p[1].revents & POLLIN))
		drain();
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
struct spin_wait {
	uint64_t budget;
	int looked, begun, slept;
};

/* What the wait policy is told about the peers of a wait (util.h,
 * ntbx_spin_begin_for): *@cpu is the CPU that the peer writers of the
 * accelerated descriptors waited on for reading last sent from, while it
 * is one and the same for all of them; -1 once it is not known for one of
 * them, or one waits to write (for its peer's reader).  Start at -2. */
static void peer_cpu_add(int *cpu, struct sk *s, int events)
{
	if (*cpu == -1 || (s->mode != M_FAB && !s->rd_fab))
		return;
	struct ntbx_qp *qp = sk_qp(s);
	int c = qp && (events & POLLIN) && !(events & POLLOUT) ?
	        ntbx_qp_peer_cpu(qp) : -1;
	*cpu = *cpu == -2 || *cpu == c ? c : -1;
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
	uint64_t end = timeout < 0 ? UINT64_MAX
	                           : t0 + (uint64_t)timeout * 1000000ull;
	unsigned backoff = 1;
	struct wobj *wo = NULL;
	struct spin_wait sp = { 0, 0, 0, 0 };
	int ret;
	for (;;) {
		int ready = 0, slice = 0;
		for (nfds_t i = 0; i < n; i++) {
			kf[i] = fds[i];
			kf[i].revents = 0;
			fds[i].revents = 0;
			struct sk *s = sk_get(fds[i].fd);
			if (!s)
				continue;
			int kev, sl;
			int r = sk_revents(s, fds[i].fd, fds[i].events, &kev, &sl);
			fds[i].revents = (short)r;
			kf[i].events = (short)kev;
			slice |= sl;
			if (r)
				ready++;
		}
		uint64_t now = ntbx_now_ns();
		int kt = 0;
		nfds_t kn = n;
		if (!ready && now < end && !sp.begun && sp.looked++) {
			int cpu = -2;
			for (nfds_t i = 0; i < n; i++) {
				struct sk *s = sk_get(fds[i].fd);
				if (s)
					peer_cpu_add(&cpu, s, fds[i].events);
			}
			sp.budget = ntbx_spin_begin_for(&w_spin, cpu < 0 ? -1 : cpu,
			                                 now);
			sp.begun = 1;
		}
		if (!ready && now < end && sp.begun && now - t0 >= sp.budget) {
			sp.slept = 1;
			struct ntbx_fabric *f = sk_fab();
			if (f && !wo)
				wo = thread_wobj(ntbx_fabric_dev(f));
			uint64_t ports = 0;
			uint32_t bits = 0;
			for (nfds_t i = 0; i < n; i++) {
				struct sk *s = sk_get(fds[i].fd);
				if (s)
					wake_mask(s, &ports, &bits);
			}
			int cap = 1000;
			int efd = sleep_prepare(wo, ports, bits, &cap);
			int armed = 0;
			for (nfds_t i = 0; i < n; i++) {
				struct sk *s = sk_get(fds[i].fd);
				if (s && arm(s, fds[i].events))
					armed = 1;
			}
			if (!armed) {
				if (efd >= 0) {
					kf[n].fd = efd;
					kf[n].events = POLLIN;
					kf[n].revents = 0;
					kn = n + 1;
				}
				kt = sleep_slice(end, now, slice, &backoff);
				if (kt > cap)
					kt = cap;
			}
		} else if (!ready && now < end) {
			ntbx_cpu_relax();
		}
		int k;
		if (mask) {
			struct timespec ts = { kt / 1000, (kt % 1000) * 1000000L };
			k = sk_real.ppoll(kf, kn, &ts, mask);
		} else {
			k = sk_real.poll(kf, kn, kt);
		}
		if (k < 0 && errno == EINTR) {
			ret = -1;
			break;
		}
		if (kn > n && kf[n].revents && !wo)
			drain();   /* a wake object is drained by its next prepare */
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
	if (sp.begun)
		ntbx_spin_end(&w_spin, sp.slept ? ntbx_now_ns() - t0 : 0,
		              sp.slept);   /* a hit's length does not matter */
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

static int ts_ms(const struct timespec *ts)
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
	return do_poll(fds, n, ts_ms(ts), mask);
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
	return select_poll(nfds, r, w, e, ts_ms(ts), mask);
}

/* ------------------------------------------------------------ epoll */

struct ep_ent {
	int fd;
	struct sk *s;
	uint32_t events;
	epoll_data_t data;
	int last;
	uint64_t seen;
	unsigned again;
	int off;          /* EPOLLONESHOT fired */
};

struct ep {
	int epfd;
	pthread_mutex_t lock;
	int n, cap;
	struct ep_ent *e;
	int ev_fd;        /* the wake descriptor registered in the kernel set */
	pid_t ev_pid;     /* ... by this process */
	struct wobj *wo;  /* the set's wake object (its owner: wo->pid) */
	int sleeping;     /* threads between mask and wake-up (atomic) */
	struct ep *next;
};

static struct ep *g_eps;

static struct ep *ep_find(int epfd)
{
	for (struct ep *p = __atomic_load_n(&g_eps, __ATOMIC_ACQUIRE); p;
	     p = p->next)
		if (p->epfd == epfd)
			return p;
	return NULL;
}

static struct ep *ep_get(int epfd)
{
	struct ep *p = ep_find(epfd);
	if (p)
		return p;
	pthread_mutex_lock(&sk_lock);
	p = ep_find(epfd);
	if (!p) {
		p = calloc(1, sizeof *p);
		if (p) {
			p->epfd = epfd;
			p->ev_fd = -1;
			pthread_mutex_init(&p->lock, NULL);
			p->next = g_eps;
			__atomic_store_n(&g_eps, p, __ATOMIC_RELEASE);
		}
	}
	pthread_mutex_unlock(&sk_lock);
	return p;
}

static int ent_find(struct ep *p, int fd)
{
	for (int i = 0; i < p->n; i++)
		if (p->e[i].fd == fd)
			return i;
	return -1;
}

static void ent_del(struct ep *p, int i)
{
	p->e[i] = p->e[--p->n];
}

/* @fd is closed: forget it everywhere; the kernel forgets its shadow
 * when the last descriptor of it goes. */
void sk_epoll_forget(int fd)
{
	for (struct ep *p = __atomic_load_n(&g_eps, __ATOMIC_ACQUIRE); p;
	     p = p->next) {
		pthread_mutex_lock(&p->lock);
		int i = ent_find(p, fd);
		if (i >= 0)
			ent_del(p, i);
		pthread_mutex_unlock(&p->lock);
	}
}

void sk_epoll_atfork(void)
{
	/* Only what differs is written: a write is a copy-on-write fault
	 * per fork (an accept-and-fork server pays it per connection). */
	for (struct ep *p = g_eps; p; p = p->next) {
		ntbx_mutex_reset(&p->lock);
		if (p->ev_pid || p->wo || p->sleeping) {
			p->ev_pid = 0;
			p->wo = NULL;       /* the parent's */
			p->sleeping = 0;
		}
	}
	ntbx_mutex_reset(&wpool_lock);
	if (wpool)
		wpool = NULL;           /* the parent's objects */
	if (t_wobj)
		t_wobj = NULL;
}

static void ep_forget(struct ep *p)
{
	pthread_mutex_lock(&p->lock);
	p->n = 0;
	p->ev_fd = -1;
	struct wobj *o = p->wo;
	p->wo = NULL;
	pthread_mutex_unlock(&p->lock);
	wobj_put(o);
	p->epfd = -1;   /* kept: others may be walking the list */
}

static void ep_closed(int epfd)
{
	struct ep *p = ep_find(epfd);
	if (p)
		ep_forget(p);
}

EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	sk_resolve();
	struct sk *s = op == EPOLL_CTL_ADD ? sk_get_checked(fd) : sk_get(fd);
	struct ep *p = s ? ep_get(epfd) : ep_find(epfd);
	if (!p)
		return sk_real.epoll_ctl(epfd, op, fd, ev);
	pthread_mutex_lock(&p->lock);
	int i = ent_find(p, fd);
	int rc;
	if (i < 0 && (!s || s->mode == M_TCP)) {
		pthread_mutex_unlock(&p->lock);
		return sk_real.epoll_ctl(epfd, op, fd, ev);
	}
	/* EPOLLEXCLUSIVE as the kernel checks it: ADD only, with these bits */
	const uint32_t excl_ok = EPOLLIN | EPOLLOUT | EPOLLERR | EPOLLHUP |
	                         EPOLLWAKEUP | EPOLLET | EPOLLEXCLUSIVE;
	if ((op == EPOLL_CTL_ADD || op == EPOLL_CTL_MOD) && ev &&
	    (ev->events & EPOLLEXCLUSIVE) &&
	    (op == EPOLL_CTL_MOD || (ev->events & ~excl_ok))) {
		pthread_mutex_unlock(&p->lock);
		errno = EINVAL;
		return -1;
	}
	if (op == EPOLL_CTL_ADD) {
		if (i >= 0) {
			pthread_mutex_unlock(&p->lock);
			errno = EEXIST;
			return -1;
		}
		struct epoll_event kev = {
			.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
			.data.u64 = TAG_SH | (uint32_t)fd,
		};
		rc = sk_real.epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &kev);
		if (rc == 0) {
			if (p->n == p->cap) {
				int nc = p->cap ? p->cap * 2 : 16;
				struct ep_ent *ne = realloc(p->e, (size_t)nc * sizeof *ne);
				if (!ne) {
					sk_real.epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
					pthread_mutex_unlock(&p->lock);
					errno = ENOMEM;
					return -1;
				}
				p->e = ne;
				p->cap = nc;
			}
			p->e[p->n++] = (struct ep_ent){ .fd = fd, .s = s,
			                                .events = ev->events,
			                                .data = ev->data, .last = -1 };
		}
	} else if (op == EPOLL_CTL_MOD) {
		if (i < 0 || (p->e[i].events & EPOLLEXCLUSIVE)) {
			pthread_mutex_unlock(&p->lock);
			errno = i < 0 ? ENOENT : EINVAL;
			return -1;
		}
		p->e[i].events = ev->events;
		p->e[i].data = ev->data;
		p->e[i].last = -1;
		p->e[i].off = 0;
		struct epoll_event kev = {
			.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
			.data.u64 = TAG_SH | (uint32_t)fd,
		};
		rc = sk_real.epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &kev);
		if (rc < 0 && errno == ENOENT)
			rc = sk_real.epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &kev);
	} else if (op == EPOLL_CTL_DEL) {
		if (i < 0) {
			pthread_mutex_unlock(&p->lock);
			return sk_real.epoll_ctl(epfd, op, fd, ev);
		}
		ent_del(p, i);
		rc = sk_real.epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
		if (rc < 0 && (errno == ENOENT || errno == EBADF))
			rc = 0;
	} else {
		errno = EINVAL;
		rc = -1;
	}
	/* A thread sleeping on this set computed its mask and armed without
	 * this entry (or its new events): wake it to look again.  The entry
	 * changed under p->lock, which the sleeper takes after counting
	 * itself, so either it saw the change or we see it. */
	struct wobj *kick = rc == 0 && op != EPOLL_CTL_DEL &&
	                    __atomic_load_n(&p->sleeping, __ATOMIC_SEQ_CST)
	                    ? p->wo : NULL;
	pthread_mutex_unlock(&p->lock);
	if (kick && kick->pid == getpid()) {
		struct ntbx_fabric *f = sk_fab();
		if (f)
			ntbx_db_wake_kick(ntbx_fabric_dev(f), kick->wk);
	}
	return rc;
}

/* Ready entries of the list into @out; *slice if some may change
 * without a wake-up.  Entries that fell back to TCP go to the kernel. */
static int ep_collect(struct ep *p, struct epoll_event *out, int max,
                      int *slice)
{
	int n = 0;
	pthread_mutex_lock(&p->lock);
	for (int i = 0; i < p->n && n < max; i++) {
		struct ep_ent *e = &p->e[i];
		if (e->off)
			continue;
		struct sk *s = e->s;
		if (s->mode == M_TCP) {
			struct epoll_event kev = { .events = e->events, .data = e->data };
			sk_real.epoll_ctl(p->epfd, EPOLL_CTL_MOD, e->fd, &kev);
			ent_del(p, i--);
			continue;
		}
		int kev, sl;
		int ev = (int)(e->events & (EPOLLIN | EPOLLOUT | EPOLLRDHUP |
		                            EPOLLPRI));
		int r = sk_revents(s, e->fd, ev, &kev, &sl);
		*slice |= sl;
		if (s->mode != M_FAB || prefix_pending(s)) {
			struct pollfd pf = { e->fd, (short)kev, 0 };
			if (sk_real.poll(&pf, 1, 0) > 0)
				r |= pf.revents & (ev | POLLERR | POLLHUP);
		}
		if (!r) {
			e->last = 0;
			continue;
		}
		if (e->events & EPOLLET) {
			uint64_t b = bytes_in(s);
			unsigned a = __atomic_load_n(&s->again, __ATOMIC_RELAXED);
			if (r == e->last && b == e->seen && a == e->again)
				continue;
			e->seen = b;
			e->again = a;
		}
		e->last = r;
		if (e->events & EPOLLONESHOT)
			e->off = 1;
		out[n].events = (uint32_t)r;
		out[n].data = e->data;
		n++;
	}
	pthread_mutex_unlock(&p->lock);
	return n;
}

/* Drop our tags from kernel results; note the shadows' news. */
static int ep_filter(struct ep *p, struct epoll_event *ev, int k)
{
	int j = 0;
	for (int i = 0; i < k; i++) {
		uint64_t u = ev[i].data.u64;
		if ((u & TAG_MASK) == TAG_EV) {
			if (!p->wo)
				drain();   /* a wake object: its next prepare drains */
			continue;
		}
		if ((u & TAG_MASK) == TAG_SH) {
			int fd = (int)(u & 0xffffffffu);
			struct sk *s = sk_get(fd);
			if (s && s->mode == M_FAB && !prefix_pending(s) &&
			    (ev[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
				s->sh_fin = 1;
			pthread_mutex_lock(&p->lock);
			int x = ent_find(p, fd);
			if (x >= 0)
				p->e[x].last = -1;
			pthread_mutex_unlock(&p->lock);
			continue;
		}
		ev[j++] = ev[i];
	}
	return j;
}

static int do_epoll_wait(int epfd, struct epoll_event *evs, int max,
                         int timeout, const sigset_t *mask)
{
	struct ep *p = ep_find(epfd);
	if (!p || max <= 0) {
		if (mask)
			return sk_real.epoll_pwait(epfd, evs, max, timeout, mask);
		return sk_real.epoll_wait(epfd, evs, max, timeout);
	}
	uint64_t t0 = ntbx_now_ns();
	uint64_t end = timeout < 0 ? UINT64_MAX
	                           : t0 + (uint64_t)timeout * 1000000ull;
	unsigned backoff = 1;
	struct spin_wait sp = { 0, 0, 0, 0 };
	int counted = 0, ret;
	for (;;) {
		int slice = 0;
		int n = ep_collect(p, evs, max, &slice);
		uint64_t now = ntbx_now_ns();
		int kt = 0;
		if (!n && now < end && !sp.begun && sp.looked++) {
			int cpu = -2;
			pthread_mutex_lock(&p->lock);
			for (int i = 0; i < p->n; i++)
				if (!p->e[i].off)
					peer_cpu_add(&cpu, p->e[i].s,
					             (int)p->e[i].events);
			pthread_mutex_unlock(&p->lock);
			sp.budget = ntbx_spin_begin_for(&w_spin, cpu < 0 ? -1 : cpu,
			                                 now);
			sp.begun = 1;
		}
		if (!n && now < end && sp.begun && now - t0 >= sp.budget) {
			sp.slept = 1;
			if (!counted) {
				__atomic_add_fetch(&p->sleeping, 1, __ATOMIC_SEQ_CST);
				counted = 1;
			}
			struct ntbx_fabric *f = sk_fab();
			uint64_t ports = 0;
			uint32_t bits = 0;
			pthread_mutex_lock(&p->lock);
			if (f && (!p->wo || p->wo->pid != getpid()))
				p->wo = wobj_get(ntbx_fabric_dev(f));
			struct wobj *wo = p->wo;
			for (int i = 0; i < p->n; i++)
				if (!p->e[i].off)
					wake_mask(p->e[i].s, &ports, &bits);
			pthread_mutex_unlock(&p->lock);
			int cap = 1000;
			int efd = sleep_prepare(wo, ports, bits, &cap);
			if (efd >= 0 && (p->ev_fd != efd || p->ev_pid != getpid())) {
				struct epoll_event kev = { .events = EPOLLIN,
				                           .data.u64 = TAG_EV };
				if (sk_real.epoll_ctl(epfd, EPOLL_CTL_ADD, efd, &kev) == 0 ||
				    errno == EEXIST) {
					p->ev_fd = efd;
					p->ev_pid = getpid();
				}
			}
			int armed = 0;
			pthread_mutex_lock(&p->lock);
			for (int i = 0; i < p->n; i++)
				if (!p->e[i].off && arm(p->e[i].s, (int)p->e[i].events))
					armed = 1;
			pthread_mutex_unlock(&p->lock);
			if (armed)
				continue;
			n = ep_collect(p, evs, max, &slice);
			if (!n) {
				kt = sleep_slice(end, now, slice, &backoff);
				if (kt > cap)
					kt = cap;
			}
		} else if (!n && now < end) {
			ntbx_cpu_relax();
		}
		int k = 0;
		if (n < max) {
			k = mask ? sk_real.epoll_pwait(epfd, evs + n, max - n, kt, mask)
			         : sk_real.epoll_wait(epfd, evs + n, max - n, kt);
			if (k < 0) {
				ret = n ? n : -1;
				break;
			}
			k = ep_filter(p, evs + n, k);
		}
		n += k;
		if (n || ntbx_now_ns() >= end) {
			ret = n;
			break;
		}
	}
	if (counted)
		__atomic_sub_fetch(&p->sleeping, 1, __ATOMIC_SEQ_CST);
	if (sp.begun)
		ntbx_spin_end(&w_spin, sp.slept ? ntbx_now_ns() - t0 : 0,
		              sp.slept);   /* a hit's length does not matter */
	return ret;
}

EXPORT int epoll_wait(int epfd, struct epoll_event *evs, int max, int timeout)
{
	sk_resolve();
	return do_epoll_wait(epfd, evs, max, timeout, NULL);
}

EXPORT int epoll_pwait(int epfd, struct epoll_event *evs, int max,
                       int timeout, const sigset_t *mask)
{
	sk_resolve();
	return do_epoll_wait(epfd, evs, max, timeout, mask);
}

EXPORT int epoll_pwait2(int epfd, struct epoll_event *evs, int max,
                        const struct timespec *ts, const sigset_t *mask)
{
	sk_resolve();
	return do_epoll_wait(epfd, evs, max, ts_ms(ts), mask);
}

/* close() of an epoll descriptor: forget its list. */
void sk_epoll_closed(int fd)
{
	ep_closed(fd);
}

/* close_range, closefrom: every epoll descriptor in [first, last]. */
void sk_epoll_closed_range(unsigned first, unsigned last)
{
	for (struct ep *p = __atomic_load_n(&g_eps, __ATOMIC_ACQUIRE); p;
	     p = p->next)
		if (p->epfd >= 0 && (unsigned)p->epfd >= first &&
		    (unsigned)p->epfd <= last)
			ep_forget(p);
}
