/* SPDX-License-Identifier: MIT */
/*
 * inherit.c — a connection goes on in another process: fork (the child is
 * counted as a holder before it exists; vfork is fork here), exec (the new
 * program adopts its sockets by their 4-tuple in the table) and descriptor
 * passing (SCM_RIGHTS: the receiver adopts likewise).  Separate because
 * these are the ways a side changes hands, and each must count and lock
 * it before the old holder may let go.  The fabric handle's own way
 * across fork and a privilege drop is priv.c's.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ntbx/fabric.h"
#include "sock/sock.h"
#include "util/util.h"

/* Before fork, in the parent: the child will hold every connection we
 * hold, so count it now (a parent that closes its copy right after fork,
 * as accept-and-fork servers do, must not end the stream), and give the
 * parent a fresh lock description (side locks, table.c). */
static void atfork_prepare(void)
{
	static unsigned gen;
	gen++;
	for (int fd = 0; fd < sk_fd_hi; fd++) {
		struct sk *s = sk_fds[fd];
		if (!s || s->fork_mark == gen)
			continue;
		s->fork_mark = gen;
		sk_cork_flush(s, fd);   /* the child shares the kernel socket */
		struct sk_conn *c = sk_conn(s);
		if (c)
			__atomic_add_fetch(s->role == 'C' ? &c->refs_c : &c->refs_a,
			                   1, __ATOMIC_ACQ_REL);
	}
	sk_sides_fork_prepare();
}

static void atfork_parent(void)
{
	sk_sides_fork_parent();
}

static void atfork_child(void)
{
	/* Every write here is a copy-on-write fault per fork: write only
	 * what differs (each file resets what it owns). */
	sk_pid = getpid();
	sk_sides_fork_child();
	sk_slots_fork_child();
	ntbx_mutex_reset(&sk_lock);
	sk_listen_fork_child();
	for (int fd = 0; fd < sk_fd_hi; fd++) {
		struct sk *s = sk_fds[fd];
		if (!s)
			continue;
		/* the parent's handles belong to the parent */
		if (s->qp)
			s->qp = NULL;
		ntbx_mutex_reset(&s->rlock);
		ntbx_mutex_reset(&s->wlock);
		ntbx_mutex_reset(&s->qlock);
	}
	sk_epoll_atfork();
	sk_wake_atfork();
}

/* Under sk_lock: if an entry of ours holds side @role of slot @i of
 * generation @gen already, give @fd one more reference to it. */
static int adopt_more(int fd, int i, char role, uint32_t gen)
{
	for (int k = 0; k < sk_fd_hi; k++) {
		struct sk *s = sk_fds[k];
		if (s && s->slot == i && s->role == role && s->gen == gen) {
			s->refs++;
			sk_set(fd, s);
			return 1;
		}
	}
	return 0;
}

/* After exec: find the sockets we inherited by their inode. */
/*
 * Find the connection whose shadow @fd is (its 4-tuple in the table) and
 * give @fd a descriptor entry for it.  In-process copies share the struct,
 * as dup does.  @inflight: the sender of an SCM_RIGHTS message counted
 * this process in already (sk_fds_sent); a process that holds the side
 * already gives that count back.  Returns 1 if @fd is a fabric socket.
 */
static int sk_adopt(struct sk_tab *t, int fd, int inflight)
{
	struct stat st;
	if (fd < 0 || fd >= sk_nfds || sk_get_checked(fd) || fstat(fd, &st) < 0 ||
	    !S_ISSOCK(st.st_mode))
		return 0;
	struct sockaddr_storage a, b;
	socklen_t al = sizeof a, bl = sizeof b;
	struct sk_addr la, pa;
	if (getsockname(fd, (struct sockaddr *)&a, &al) < 0 ||
	    getpeername(fd, (struct sockaddr *)&b, &bl) < 0 ||
	    sk_addr_of((struct sockaddr *)&a, al, &la) < 0 ||
	    sk_addr_of((struct sockaddr *)&b, bl, &pa) < 0)
		return 0;
	for (int i = 0; i < SK_CONNS; i++) {
		struct sk_conn *c = &t->c[i];
		uint64_t sg = __atomic_load_n(&c->sg, __ATOMIC_ACQUIRE);
		union { struct { uint32_t s, g; } p; uint64_t w; } u = { .w = sg };
		uint32_t cs = u.p.s;
		if (cs != SK_ACC && cs != SK_FAB && cs != SK_REQ && cs != SK_ANS)
			continue;
		char role;
		if (c->cl.port == la.port && c->dst.port == pa.port &&
		    sk_addr_match(&c->dst, &pa))
			role = 'C';
		else if (c->cl.port == pa.port && c->dst.port == la.port &&
		         sk_addr_match(&c->dst, &la) && cs != SK_REQ && cs != SK_ANS)
			role = 'A';
		else
			continue;
		pthread_mutex_lock(&sk_lock);
		if (adopt_more(fd, i, role, u.p.g)) {
			pthread_mutex_unlock(&sk_lock);
			if (inflight)
				__atomic_sub_fetch(role == 'C' ? &c->refs_c
				                               : &c->refs_a, 1,
				                   __ATOMIC_ACQ_REL);
			return 1;
		}
		pthread_mutex_unlock(&sk_lock);
		struct sk *s = sk_new(role, i, fd);
		if (!s)
			return 0;
		s->me = role == 'C' ? c->qc : c->qa;
		s->gen = u.p.g;
		s->pid = 0;   /* attach on first use */
		s->mode = role == 'A' ? M_FAB : cs == SK_FAB ? M_FAB : M_PEND;
		/* a connector not switched yet may sleep until our first
		 * bytes ring it (proto.c, sk_on_accept) */
		s->answer_due = role == 'A' && cs == SK_ACC;
		/* Lock the side, then look again (slot_reap's other half): if
		 * every holder let go between our look and our lock, the slot
		 * may have been reaped, and claimed again, and it is not this
		 * descriptor's connection any more. */
		if (sk_side_hold(s) < 0)
			ntbx_log(NTBX_LOG_WARN, "fd %d: cannot lock its connection's "
			         "side: %s", fd, strerror(errno));
		else if (!sk_slot_still(c, s->gen)) {
			sk_side_drop(s);
			sk_free_new(s);
			return 0;
		}
		pthread_mutex_lock(&sk_lock);
		if (adopt_more(fd, i, role, s->gen)) {   /* another thread did */
			pthread_mutex_unlock(&sk_lock);
			sk_side_drop(s);
			sk_free_new(s);
			if (inflight)
				__atomic_sub_fetch(role == 'C' ? &c->refs_c
				                               : &c->refs_a, 1,
				                   __ATOMIC_ACQ_REL);
			return 1;
		}
		sk_set(fd, s);
		pthread_mutex_unlock(&sk_lock);
		return 1;
	}
	return 0;
}

static void sk_inherit(void)
{
	struct sk_tab *t = sk_tab(0);
	if (!t)
		return;
	int any = 0;
	for (int i = 0; i < SK_CONNS && !any; i++) {
		uint32_t st = __atomic_load_n(&t->c[i].state, __ATOMIC_ACQUIRE);
		any = st == SK_ACC || st == SK_FAB || st == SK_REQ ||
		      st == SK_ANS;
	}
	if (!any)
		return;
	/* Only descriptors 0..1023: enough for what exec'd children get. */
	int stray[16], ns = 0;
	for (int fd = 0; fd < 1024 && fd < sk_nfds; fd++) {
		struct stat st;
		if (fd != sk_lockfd() && ns < 16 && fstat(fd, &st) == 0 &&
		    S_ISREG(st.st_mode) && sk_tab_file_is(&st))
			stray[ns++] = fd;
		else
			sk_adopt(t, fd, 0);
	}
	/* The lock description the program before exec held its sides on:
	 * ours hold what we adopted now (side locks, table.c). */
	for (int k = 0; k < ns; k++)
		sk_real.close(stray[k]);
}

/*
 * Descriptor passing (SCM_RIGHTS), as DESIGN.md asks: the receiver finds
 * the connection by its shadow, like an exec'd child.  The sender counts
 * the receiving process in before the message leaves (sk_fds_sent), so a
 * sender that closes its copy right after sendmsg does not end the
 * connection while the descriptor is in flight; the receiver takes that
 * count over (sk_fds_received), or gives it back if it held the socket
 * already.  A descriptor never received (the receiver dies first, or is
 * not interposed) leaves the count high: the peer's end of stream then
 * comes from the shadow's FIN, as when a holder exits without closing.
 */
static void fds_each(const struct msghdr *m, void (*fn)(int fd, void *arg),
                     void *arg)
{
	if (!m || !m->msg_control)
		return;
	for (struct cmsghdr *h = CMSG_FIRSTHDR((struct msghdr *)m); h;
	     h = CMSG_NXTHDR((struct msghdr *)m, h)) {
		if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS ||
		    h->cmsg_len < CMSG_LEN(0))
			continue;
		size_t n = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(h) + i * sizeof(int), sizeof fd);
			fn(fd, arg);
		}
	}
}

static void count_sent(int fd, void *arg)
{
	int d = *(int *)arg;
	struct sk *s = sk_get(fd);
	struct sk_conn *c = s ? sk_conn(s) : NULL;
	if (c)
		__atomic_add_fetch(s->role == 'C' ? &c->refs_c : &c->refs_a, d,
		                   __ATOMIC_ACQ_REL);
}

void sk_fds_sent(const struct msghdr *m, int delta)
{
	fds_each(m, count_sent, &delta);
}

static void adopt_received(int fd, void *arg)
{
	sk_adopt(arg, fd, 1);
}

static void fresh_received(int fd, void *arg)
{
	(void)arg;
	sk_fd_new(fd);   /* a received descriptor is a new number */
}

void sk_fds_received(const struct msghdr *m)
{
	fds_each(m, fresh_received, NULL);
	/* (sk_tab(1): the table may have appeared since start-up) */
	struct sk_tab *t = m && m->msg_controllen ? sk_tab(1) : NULL;
	if (t)
		fds_each(m, adopt_received, t);
}

/* At start-up (entry.c): count children at every fork from now on, and
 * adopt the sockets the program before exec left us. */
void sk_inherit_start(void)
{
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
	if (sk_cfg.on)
		sk_inherit();
}

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
