/* SPDX-License-Identifier: MIT */
/*
 * sendrecv.c — the data path's entry points: read, write, the recv and
 * send family (with glibc's _chk forms), readv and writev, recvmsg and
 * sendmsg (which also carry descriptors between processes: inherit.c),
 * recvmmsg and sendmmsg, splice and sendfile.  Each maps its call onto
 * sk_read or sk_write (stream.c); a descriptor that is not a fabric socket
 * goes to libc untouched.  Separate from stream.c so that the hot path
 * reads as one piece and the calls' argument conventions as another.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "ntbx/fabric.h"
#include "sock/sock.h"
#include "util/util.h"

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
