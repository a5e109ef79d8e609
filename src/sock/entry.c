/* SPDX-License-Identifier: MIT */
/*
 * entry.c — how a program enters the preload: its constructor, the table
 * of the real libc functions (made from interposed.def), and the wrappers
 * of the calls that make, connect, shut down, duplicate and configure
 * descriptors (socket, listen, connect, accept, shutdown, dup, fcntl,
 * ioctl) and syscall(), which routes the raw forms of all of them.  Each
 * wrapper only dispatches: a descriptor that is not a fabric socket goes
 * straight to libc, the rest to the file of its concern.  The other
 * entry points live with their concern: the data path's in sendrecv.c,
 * readiness' in ready.c and epoll.c, closing's in close.c, vfork in
 * inherit.c, the credential calls in priv.c, the signal calls in
 * signal.c.
 */
#include <errno.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <linux/sockios.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ntbx/fabric.h"
#include "sock/sock.h"
#include "util/util.h"

struct sk_real sk_real;

/* ------------------------------------------------------------ set-up */

static void *sym(const char *name)
{
	void *p = dlsym(RTLD_NEXT, name);
	return p;
}

void sk_resolve(void)
{
	if (sk_real.close)
		return;
#define SK_CALL(ret, name, params) \
	(*(void **)&sk_real.name = sym(#name));
#define SK_REAL SK_CALL
#include "sock/interposed.def"   /* close last: the check above */
#undef SK_CALL
#undef SK_REAL
}

__attribute__((constructor)) static void sk_init(void)
{
	sk_pid = getpid();
	sk_resolve();
	sk_conf_read();
	if (sk_fds_init() < 0) {
		sk_cfg.on = 0;
		return;
	}
	sk_self_init();
	sk_inherit_start();
}

/* ------------------------------------------------------------ descriptors */

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
		if (a[0] == SECCOMP_SET_MODE_FILTER)
			sk_confine();
		break;
#endif
#ifdef SYS_setrlimit
	case SYS_setrlimit:
		return setrlimit((__rlimit_resource_t)a[0],
		                 (const struct rlimit *)a[1]);
#endif
	case SYS_prlimit64:
		return prlimit64((pid_t)a[0], (__rlimit_resource_t)a[1],
		                 (const struct rlimit64 *)a[2],
		                 (struct rlimit64 *)a[3]);
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
	case SYS_setsockopt:
		return setsockopt((int)a[0], (int)a[1], (int)a[2],
		                  (const void *)a[3], (socklen_t)a[4]);
	case SYS_getsockopt:
		return getsockopt((int)a[0], (int)a[1], (int)a[2], (void *)a[3],
		                  (socklen_t *)a[4]);
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
