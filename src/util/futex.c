/* SPDX-License-Identifier: MIT */
/* Shared futexes for sleeping on words in shared memory. */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

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

void ntbx_futex_wake(uint32_t *addr, int n)
{
	syscall(SYS_futex, addr, FUTEX_WAKE, n <= 0 ? INT_MAX : n, NULL, NULL, 0);
}

void ntbx_spin_step(uint64_t spun_ns)
{
	if (spun_ns < 2000)
		ntbx_cpu_relax();
	else
		sched_yield();
}
