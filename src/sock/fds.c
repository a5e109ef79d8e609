/* SPDX-License-Identifier: MIT */
/*
 * fds.c — the descriptor table: which of the program's descriptors are
 * fabric sockets (an entry, struct sk, shared by the descriptors dup'ed
 * from one), making, sharing and dropping entries, and the checks that
 * keep a number the kernel reused behind the preload's back from being
 * taken for its old socket.  Separate because every entry point asks it
 * first, on the data path without a system call.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ntbx/fabric.h"
#include "sock/sock.h"
#include "util/util.h"

struct sk **sk_fds;
int sk_nfds;
int sk_fd_hi;
SK_FORK_STATE pthread_mutex_t sk_lock = PTHREAD_MUTEX_INITIALIZER;

/* At start-up: as many entries as the file limit allows descriptors (at
 * least 65536, at most 2^20), and as many listener marks (listen.c).
 * 0, or -1 without memory (every socket then stays on TCP). */
int sk_fds_init(void)
{
	struct rlimit rl;
	long n = 65536;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    (long)rl.rlim_cur > n)
		n = (long)rl.rlim_cur;
	if (n > (1 << 20))
		n = 1 << 20;
	sk_fds = calloc((size_t)n, sizeof *sk_fds);
	if (!sk_fds || sk_listen_init((size_t)n) < 0)
		return -1;
	sk_nfds = (int)n;
	return 0;
}

struct sk *sk_get(int fd)
{
	if (fd < 0 || fd >= sk_nfds || !sk_fds)
		return NULL;
	return __atomic_load_n(&sk_fds[fd], __ATOMIC_ACQUIRE);
}

/*
 * A descriptor can be closed without the preload seeing it (a raw system
 * call, a close_range we do not wrap), and the kernel then gives its
 * number to the next descriptor.  The data path trusts the table (a
 * system call per read would cost the fabric its point); the calls that
 * create descriptors drop what they find under the new number
 * (sk_fd_new), and the calls off the data path (close, shutdown, dup,
 * connect, listen, epoll_ctl ADD, descriptor passing) check the shadow's
 * identity first.
 */
struct sk *sk_get_checked(int fd)
{
	struct sk *s = sk_get(fd);
	if (!s)
		return NULL;
	struct stat st;
	if (ntbx_sandboxed)
		return s;   /* cannot ask (util.h): the table is trusted */
	if (fstat(fd, &st) == 0 && (uint64_t)st.st_ino == s->ino &&
	    (uint64_t)st.st_dev == s->dev)
		return s;
	ntbx_log(NTBX_LOG_DEBUG, "fd %d: entry of a descriptor closed behind "
	         "the preload's back dropped", fd);
	sk_drop_fd(fd);
	return NULL;
}

void sk_fd_new(int fd)
{
	if (fd < 0 || fd >= sk_nfds || !sk_fds)
		return;
	if (sk_get(fd)) {
		ntbx_log(NTBX_LOG_DEBUG, "fd %d: entry of a descriptor closed "
		         "behind the preload's back dropped", fd);
		sk_drop_fd(fd);
	}
	if (sk_is_listener(fd))
		sk_on_close_listener(fd);
}

struct sk *sk_new(char role, int slot, int fd)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return NULL;
	struct sk *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->dev = (uint64_t)st.st_dev;
	s->ino = (uint64_t)st.st_ino;
	s->refs = 1;
	s->role = role;
	s->slot = slot;
	struct sk_conn *c = sk_conn(s);
	s->gen = c ? c->gen : 0;
	s->fd0 = fd;
	s->pid = sk_pid;
	s->kcork = -1;
	pthread_mutex_init(&s->rlock, NULL);
	pthread_mutex_init(&s->wlock, NULL);
	pthread_mutex_init(&s->qlock, NULL);
	pthread_mutex_init(&s->folock, NULL);
	return s;
}

/* An entry made by sk_new that never got a descriptor. */
void sk_free_new(struct sk *s)
{
	pthread_mutex_destroy(&s->rlock);
	pthread_mutex_destroy(&s->wlock);
	pthread_mutex_destroy(&s->qlock);
	pthread_mutex_destroy(&s->folock);
	free(s);
}

void sk_set(int fd, struct sk *s)
{
	if (s)
		sk_note_fd(fd);
	__atomic_store_n(&sk_fds[fd], s, __ATOMIC_RELEASE);
}

/* The queue-pair handle for this process (attach after fork or exec). */
struct ntbx_qp *sk_qp(struct sk *s)
{
	if (s->qp && s->pid == sk_pid)
		return s->qp;
	/* A forked child, an exec'd program or a receiver of the descriptor
	 * uses the connection: it holds the side from now on (already, but
	 * for a child whose parent could not give it a lock description of
	 * its own: then it locks now and looks again, as sk_adopt does). */
	struct sk_conn *c = sk_conn(s);
	if (c && sk_side_hold(s) == 0 && !sk_slot_still(c, s->gen)) {
		ntbx_log(NTBX_LOG_WARN, "fd %d: its connection was reclaimed "
		         "while no process held it", s->fd0);
		return NULL;
	}
	struct ntbx_fabric *f = sk_fab();
	if (!f)
		return NULL;
	struct ntbx_qp *qp = NULL;
	if (ntbx_qp_attach(f, &s->me, &qp) < 0) {
		ntbx_log(NTBX_LOG_WARN, "cannot attach to a connection's "
		         "endpoint: %s", ntbx_errmsg());
		return NULL;
	}
	s->qp = qp;
	s->pid = sk_pid;
	return qp;
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
