/* SPDX-License-Identifier: MIT */
/*
 * The library's own descriptors, kept out of the program's way.
 *
 * A fabric handle holds descriptors for as long as the process lives: the
 * checked fabric directory, the lock file whose kernel-dropped OFD locks
 * are the process's liveness, wake-up FIFOs, the keeper's socket.  A
 * program does not know them, and servers routinely close every
 * descriptor they did not open themselves: sshd's close_range(3, ~0U)
 * right after it started (with the preload already joined), daemons'
 * closefrom(3), libuv's and Python's closes of /proc/self/fd.  Had those
 * closes reached ours, the process's liveness would have ended (its peers
 * see it dead), and the numbers, reused by the program's next open, would
 * have been taken for ours.
 *
 * So each long-lived descriptor is moved above the range programs use
 * (ntbx_fd_own: at or above half the soft RLIMIT_NOFILE, at most 4096,
 * where fixed numbers such as sshd's re-exec descriptors 3..6 never
 * land) and marked in a bitmap.  The preload's close family consults it
 * (ntbx_fd_owned, ntbx_fd_next_owned): a close() of one of ours fails
 * with EBADF, as for a number the program does not have open, and
 * close_range / closefrom close around them.  The library closes its own
 * through ntbx_fd_close, which unmarks first.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "util/util.h"

#define OWN_MAX 65536
static uint64_t own_bits[OWN_MAX / 64];

static int own_base(void)
{
	static int base;
	int b = __atomic_load_n(&base, __ATOMIC_RELAXED);
	if (b)
		return b;
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		b = rl.rlim_cur / 2 > 4096 ? 4096 : (int)(rl.rlim_cur / 2);
	else
		b = 4096;
	if (b < 16)
		b = 16;
	__atomic_store_n(&base, b, __ATOMIC_RELAXED);
	return b;
}

static void mark(int fd, int on)
{
	if (fd < 0 || fd >= OWN_MAX)
		return;
	uint64_t bit = 1ull << (fd % 64);
	if (on)
		__atomic_fetch_or(&own_bits[fd / 64], bit, __ATOMIC_RELEASE);
	else
		__atomic_fetch_and(&own_bits[fd / 64], ~bit, __ATOMIC_RELEASE);
}

/* Move @fd (below the base) to the base or above with F_DUPFD or
 * F_DUPFD_CLOEXEC (@cloexec) and close the old number; mark the result. */
static int own_move(int fd, int cloexec)
{
	int base = own_base();
	if (fd < base) {
		int n = fcntl(fd, cloexec ? F_DUPFD_CLOEXEC : F_DUPFD, base);
		if (n >= 0) {
			close(fd);   /* not marked: a wrapper lets it go */
			fd = n;
		}
	}
	mark(fd, 1);
	return fd;
}

int ntbx_fd_own(int fd)
{
	if (fd < 0)
		return fd;
	if (fd >= own_base())
		return own_move(fd, 1);   /* marked only */
	int fl = fcntl(fd, F_GETFD);
	return fl < 0 ? (mark(fd, 1), fd) : own_move(fd, fl & FD_CLOEXEC);
}

/* A descriptor the library has just opened close-on-exec (every open of
 * a fabric file is): its flag is known, so the move is one F_DUPFD_CLOEXEC
 * and a close (shm_file_own opens straight to here, not by way of the
 * low numbers). */
int ntbx_fd_own_cloexec(int fd)
{
	return fd < 0 ? fd : own_move(fd, 1);
}

int ntbx_fd_owned(int fd)
{
	if (fd < 0 || fd >= OWN_MAX)
		return 0;
	return (__atomic_load_n(&own_bits[fd / 64], __ATOMIC_ACQUIRE) >>
	        (fd % 64)) & 1;
}

int ntbx_fd_next_owned(unsigned first, unsigned last)
{
	if (last >= OWN_MAX)
		last = OWN_MAX - 1;
	for (unsigned w = first / 64; w <= last / 64; w++) {
		uint64_t v = __atomic_load_n(&own_bits[w], __ATOMIC_ACQUIRE);
		if (w == first / 64)
			v &= ~0ull << (first % 64);
		if (v) {
			unsigned fd = w * 64 + (unsigned)__builtin_ctzll(v);
			return fd > last ? -1 : (int)fd;
		}
	}
	return -1;
}

int ntbx_fd_close(int fd)
{
	if (fd < 0)
		return 0;
	mark(fd, 0);
	return close(fd);
}
