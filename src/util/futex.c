/* SPDX-License-Identifier: MIT */
/* Shared futexes for sleeping on words in shared memory. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/settings.h"
#include "util/util.h"

int ntbx_futex_wait(uint32_t *addr, uint32_t val, int timeout_ms)
{
	struct timespec ts, *tp = NULL;
	if (timeout_ms >= 0) {
		ts.tv_sec = timeout_ms / 1000;
		ts.tv_nsec = (long)(timeout_ms % 1000) * 1000000L;
		tp = &ts;
	}
	long r = syscall(SYS_futex, addr, FUTEX_WAIT, val, tp, NULL, 0);
	if (r == 0 || errno == EAGAIN)
		return 0;
	return -errno;
}

int ntbx_futex_wait_ns(uint32_t *addr, uint32_t val, uint64_t timeout_ns)
{
	struct timespec ts = { (time_t)(timeout_ns / 1000000000ull),
	                       (long)(timeout_ns % 1000000000ull) };
	long r = syscall(SYS_futex, addr, FUTEX_WAIT, val, &ts, NULL, 0);
	if (r == 0 || errno == EAGAIN)
		return 0;
	return -errno;
}

void ntbx_futex_wake(uint32_t *addr, int n)
{
	syscall(SYS_futex, addr, FUTEX_WAKE, n <= 0 ? INT_MAX : n, NULL, NULL, 0);
}

int ntbx_sandboxed;

void ntbx_sandbox_entered(void)
{
	ntbx_settings_load();   /* the config files: no opening after */
	if (!__atomic_exchange_n(&ntbx_sandboxed, 1, __ATOMIC_ACQ_REL))
		ntbx_log(NTBX_LOG_DEBUG, "seccomp filter installed: system calls "
		         "limited to what kernel TCP needs");
}

int ntbx_shared_lock(pthread_mutex_t *m, int *owner_died)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += NTBX_SHARED_LOCK_MS / 1000;
	ts.tv_nsec += (long)(NTBX_SHARED_LOCK_MS % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	int r;
	while ((r = pthread_mutex_clocklock(m, CLOCK_MONOTONIC, &ts)) == EINTR)
		;
	if (owner_died)
		*owner_died = r == EOWNERDEAD;
	if (r == EOWNERDEAD) {
		pthread_mutex_consistent(m);
		return 0;
	}
	if (r == 0)
		return 0;
	/* ETIMEDOUT: held for longer than any holder ever needs (a live but
	 * stuck or hostile process); EINVAL, ENOTRECOVERABLE, EDEADLK: the
	 * lock's bytes are garbage. */
	return r == ETIMEDOUT ? -ETIMEDOUT : -EIO;
}
