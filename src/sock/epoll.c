/* SPDX-License-Identifier: MIT */
/*
 * epoll.c — epoll over fabric and kernel descriptors together.  Separate
 * from ready.c because an epoll set outlives the call: its list of fabric
 * sockets, its wake object and its private registrations in the kernel set
 * are kept here between calls, and forgotten when the set or a member is
 * closed.
 *
 * The epoll descriptor stays a kernel epoll.  An accelerated
 * descriptor is kept on a list here; its shadow is registered in the
 * kernel set edge-triggered under a private tag (so a FIN wakes us) and
 * the set's wake FIFO under another; epoll_wait merges the list's ready entries with
 * the kernel's and drops the private tags.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ntbx/fabric.h"
#include "sock/sock.h"
#include "util/util.h"

#define TAG_SH 0xc0de5a0000000000ull   /* | fd: a shadow */
#define TAG_EV 0xc0de5b0000000000ull   /* the doorbell FIFO */
#define TAG_MASK 0xffffff0000000000ull

static uint64_t bytes_in(struct sk *s)
{
	struct sk_conn *c = sk_conn(s);
	if (!c)
		return 0;
	return __atomic_load_n(s->role == 'C' ? &c->bytes_ac : &c->bytes_ca,
	                       __ATOMIC_RELAXED);
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
	uint64_t kseen;   /* when a wait last asked the kernel set (atomic) */
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
}

static void ep_forget(struct ep *p)
{
	pthread_mutex_lock(&p->lock);
	p->n = 0;
	p->ev_fd = -1;
	struct wobj *o = p->wo;
	p->wo = NULL;
	pthread_mutex_unlock(&p->lock);
	sk_wobj_put(o);
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
	if (kick && kick->pid == sk_pid) {
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
		if (s->mode != M_FAB || sk_prefix_pending(s)) {
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
				sk_drain();   /* a wake object: its next prepare drains */
			continue;
		}
		if ((u & TAG_MASK) == TAG_SH) {
			int fd = (int)(u & 0xffffffffu);
			struct sk *s = sk_get(fd);
			if (s && s->mode == M_FAB && !sk_prefix_pending(s) &&
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

/*
 * How often a wait asks the kernel about the set's kernel descriptors
 * (PostgreSQL's latch and postmaster-death pipe, a listener) while the
 * fabric keeps it busy: at most once per SPIN_KERNEL_NS of the set (any
 * thread's ask counts), both while it spins (first SPIN_KERNEL_NS into
 * the spin) and while the fabric alone has events to return.  Asking at
 * every spin round made a spin mostly epoll_wait(0) calls (pgbench -S
 * backends: 2-5 per transaction); asking at every call that had the
 * fabric's events, and at each spin's start, made a keep-alive nginx
 * worker and wrk ask about 3.4 times per request (a quarter of their
 * system calls) and a pgbench backend 0.9 times per transaction.  A
 * kernel event waits at most SPIN_KERNEL_NS in the kernel's set, which
 * keeps it: none is lost, and a wait that goes to sleep asks with its
 * timeout as before.  tests/sock/api.py epollmix checks that a pipe is
 * still reported beside a fabric socket that stays ready.
 */
#define SPIN_KERNEL_NS 10000ull

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
	if (timeout != 0 && ntbx_spin_turn(t0))
		t0 = ntbx_now_ns();
	uint64_t end = timeout < 0 ? UINT64_MAX
	                           : t0 + (uint64_t)timeout * 1000000ull;
	unsigned backoff = 1;
	struct sk_spin_wait sp = { 0, 0, 0, 0 };
	int counted = 0, ret;
	uint64_t kfrom = 0;   /* the spin's start: asks the kernel after it */
	for (;;) {
		int slice = 0;
		int n = ep_collect(p, evs, max, &slice);
		uint64_t now = ntbx_now_ns();
		int kt = 0;
		/* The first look with nothing on the fabric and time to wait:
		 * the next round asks the kernel (spinning or sleeping) right
		 * after it, so asking here too is a system call for nothing. */
		int skip_kernel = !n && now < end && !sp.begun && !sp.looked;
		if (!n && now < end && !sp.begun && sp.looked++) {
			int cpu = -2;
			pthread_mutex_lock(&p->lock);
			for (int i = 0; i < p->n; i++)
				if (!p->e[i].off)
					sk_peer_cpu_add(&cpu, p->e[i].s,
					             (int)p->e[i].events);
			pthread_mutex_unlock(&p->lock);
			sk_spin_wait_begin(&sp, cpu, now);
			kfrom = now;
		}
		if (!n && now < end && sp.begun && now - t0 >= sp.budget) {
			sp.slept = 1;
			if (!counted) {
				__atomic_add_fetch(&p->sleeping, 1, __ATOMIC_SEQ_CST);
				counted = 1;
			}
			struct ntbx_fabric *f = sk_fab();
			struct sk_want want = SK_WANT_NONE;
			pthread_mutex_lock(&p->lock);
			if (f && (!p->wo || p->wo->pid != sk_pid))
				p->wo = sk_wobj_get(ntbx_fabric_dev(f));
			struct wobj *wo = p->wo;
			for (int i = 0; i < p->n; i++)
				if (!p->e[i].off)
					sk_wake_mask(p->e[i].s, &want);
			pthread_mutex_unlock(&p->lock);
			int cap = 1000;
			int efd = sk_sleep_prepare(wo, &want, &cap);
			if (efd >= 0 && (p->ev_fd != efd || p->ev_pid != sk_pid)) {
				struct epoll_event kev = { .events = EPOLLIN,
				                           .data.u64 = TAG_EV };
				if (sk_real.epoll_ctl(epfd, EPOLL_CTL_ADD, efd, &kev) == 0 ||
				    errno == EEXIST) {
					p->ev_fd = efd;
					p->ev_pid = sk_pid;
				}
			}
			int armed = 0;
			pthread_mutex_lock(&p->lock);
			for (int i = 0; i < p->n; i++) {
				if (p->e[i].off)
					continue;
				if (sk_arm(p->e[i].s, (int)p->e[i].events))
					armed = 1;
				if (sk_sleep_sliced(wo, p->e[i].s))
					slice |= 2;
			}
			pthread_mutex_unlock(&p->lock);
			if (armed)
				continue;
			n = ep_collect(p, evs, max, &slice);
			if (!n) {
				kt = sk_sleep_slice(end, now, slice, &backoff);
				if (kt > cap)
					kt = cap;
			}
		} else if (!n && now < end) {
			ntbx_cpu_relax();
			/* spinning: the kernel's descriptors every
			 * SPIN_KERNEL_NS, the fabric at every round */
			uint64_t k0 = __atomic_load_n(&p->kseen, __ATOMIC_RELAXED);
			if (sp.begun && now - (k0 > kfrom ? k0 : kfrom) <
			    SPIN_KERNEL_NS)
				skip_kernel = 1;
		} else if (n && now - __atomic_load_n(&p->kseen,
		           __ATOMIC_RELAXED) < SPIN_KERNEL_NS) {
			skip_kernel = 1;   /* the fabric's events now */
		}
		int k = 0;
		if (!skip_kernel)
			__atomic_store_n(&p->kseen, now, __ATOMIC_RELAXED);
		if (n < max && !skip_kernel) {
			struct wobj *zo = p->ev_pid == sk_pid ? p->wo : NULL;
			sk_sleep_mark(zo, kt, 1);
			k = mask ? sk_real.epoll_pwait(epfd, evs + n, max - n, kt, mask)
			         : sk_real.epoll_wait(epfd, evs + n, max - n, kt);
			sk_sleep_mark(zo, kt, 0);
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
	sk_spin_wait_end(&sp, t0);
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
	return do_epoll_wait(epfd, evs, max, sk_ts_ms(ts), mask);
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
