/* SPDX-License-Identifier: MIT */
/*
 * close.c — the end of a descriptor: close(), close_range() and
 * closefrom() (closed around the library's own descriptors and the
 * side-lock description), SO_LINGER on the last descriptor of a fabric
 * connection, and the release of a connection when its last local
 * descriptor goes (end of stream for the peer, the slot reclaimed).
 * Separate because a program closes in many ways (libc, ranges, raw
 * system calls: entry.c's syscall) and each must end the same way.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ntbx/fabric.h"
#include "sock/sock.h"
#include "util/util.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

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
	if (sk_unread_in(s)) {
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

/* close(), close_range(), closefrom() (and syscall(SYS_close) through
 * close()): @fd (or each in [first, last]) is about to be closed. */
static void sk_fd_closing(int fd)
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

static void sk_fd_closing_range(unsigned first, unsigned last)
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
 * close_range, leaving out the side-lock description (table.c,
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

/* The last local descriptor of @s is gone. */
void sk_release(struct sk *s)
{
	struct sk_conn *c = sk_conn(s);
	int last = 1;
	if (c) {
		int32_t *mine = s->role == 'C' ? &c->refs_c : &c->refs_a;
		int32_t left = __atomic_sub_fetch(mine, 1, __ATOMIC_ACQ_REL);
		last = left <= 0;
		if (last && s->mode != M_TCP) {
			uint32_t st = __atomic_load_n(&c->state, __ATOMIC_ACQUIRE);
			/* The acceptor may be writing into our endpoint: connect
			 * it, so closing tells the acceptor. */
			struct ntbx_qp *qp = s->role == 'C' && st == SK_ACC
			                     ? sk_connect_qp(s, c) : sk_qp(s);
			/* M_PEND with rd_fab: a connector whose whole request
			 * went by TCP before the acceptor answered, and whose
			 * reply came by the fabric (a short connection on a
			 * busy machine): on the fabric too */
			int fab = s->mode == M_FAB ||
			          __atomic_load_n(&s->rd_fab, __ATOMIC_ACQUIRE);
			if (ntbx_log_enabled(NTBX_LOG_INFO) && fab) {
				/* the connector's first bytes may have gone by TCP,
				 * before the acceptor answered: counted, and said */
				/* "in" is what this side's readers took (read_*),
				 * not what the other side counts as sent: that
				 * counter may lag the bytes we already read */
				uint64_t pre = c->tcp_sent;
				uint64_t out = s->role == 'C' ? c->bytes_ca + pre
				                              : c->bytes_ac;
				uint64_t in = s->role == 'C' ? c->read_ac
				                             : c->read_ca + pre;
				ntbx_log(NTBX_LOG_INFO, "fd %d closed: path fabric, "
				         "%llu bytes out, %llu bytes in (%llu sent by "
				         "TCP before the switch)", s->fd0,
				         (unsigned long long)out,
				         (unsigned long long)in,
				         (unsigned long long)pre);
			}
			if (qp)
				ntbx_qp_close(qp, 1);
			s->qp = NULL;
		}
	}
	if (s->qp && s->pid == sk_pid)
		ntbx_qp_close(s->qp, last);
	s->qp = NULL;
	if (c) {
		/* Our handle is closed: only now may a reaper free the memory
		 * under it.  Then, both ends gone however the other one ended
		 * (forked children that never used the side included: they
		 * held it by their own locks): reclaim the slot and the
		 * other end's memory now, or look again later. */
		sk_side_drop(s);
		sk_slot_done(s);
	}
	pthread_mutex_destroy(&s->rlock);
	pthread_mutex_destroy(&s->wlock);
	pthread_mutex_destroy(&s->qlock);
	pthread_mutex_destroy(&s->folock);
	free(s->pk);
	free(s->rt);
	free(s->fob);
	free(s);
}
