/* SPDX-License-Identifier: MIT */
/*
 * The wait policy every blocking path shares: how long a waiter spins
 * before it sleeps on a doorbell, and how it spins.
 *
 * Spinning is a bet that the thing waited for happens before a sleep and
 * wake-up would have cost, and that the CPU the spinner holds is not the
 * one the process it waits for needs.  So a waiter
 *
 *  - spins for a budget learned at each waiter site from its recent waits
 *    (adaptive polling, as Onload and libvma do): a wait that ended while
 *    spinning grows it (by an eighth of what is left to the cap), a wait
 *    that slept although a spin of its whole length would have caught it
 *    raises it to that length, and a spin wasted on a wait longer than the
 *    cap halves it.  It stays between NTBX_SPIN_FLOOR_NS (a poll or two is
 *    cheaper than preparing a sleep) and NTBX_SPIN_CAP_NS;
 *  - spins by the machine's load: with a CPU idle beside ours it pauses;
 *    with every CPU busy it pauses 2 us, then yields between polls; with
 *    more runnable threads than CPUs this process may use (its affinity
 *    mask, capped by the cgroup's cpu.max quota) it yields between any two
 *    polls, so a waiter never holds a CPU that the process it waits for,
 *    or another waiter's peer, needs.  Yielding rather than sleeping at
 *    once: a yield hands the CPU over without the cost of a sleep and a
 *    wake-up on both sides (docs/design-notes.md, "Waiting", measured).
 *    The counts are sampled at most every NTBX_SPIN_SAMPLE_NS and cached
 *    (one thread samples, the others read the cache); never a system call
 *    per spin step;
 *  - then sleeps on its doorbell (the caller's business).
 *
 * NTBX_SPIN_US, when set, is an explicit fixed budget: spin that long,
 * pause for 2 us then yield, whatever the load (the behaviour before the
 * policy existed).
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/util.h"

#define NTBX_SPIN_SAMPLE_NS   4000000ull      /* run queue: every 4 ms */
#define NTBX_SPIN_CPUS_NS     1000000000ull   /* CPUs: every second */
#define NTBX_SPIN_PAUSE_NS    2000u           /* pause, then yield */

static struct {
	uint64_t next_load;   /* when the run queue is sampled next */
	uint64_t next_cpus;
	int running;          /* runnable threads on the machine */
	int ncpu;             /* CPUs this process may use */
	int test;             /* counts injected by a test */
	long fixed_ns;        /* -2 unknown, -1 adaptive, else NTBX_SPIN_US */
} ld = { 0, 0, 1, 1, 0, -2 };

/* ------------------------------------------------------------ sampling */

static ssize_t read_small(const char *path, char *buf, size_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t r = read(fd, buf, n - 1);
	close(fd);
	if (r < 0)
		return -1;
	buf[r] = 0;
	return r;
}

/* CPUs allowed by a cgroup's quota at @dir, or 0 for none. */
static int quota_cpus(const char *dir)
{
	char path[512], buf[64];
	long long q, per;
	snprintf(path, sizeof path, "/sys/fs/cgroup%s/cpu.max", dir);
	if (read_small(path, buf, sizeof buf) > 0) {
		if (sscanf(buf, "%lld %lld", &q, &per) == 2 && q > 0 && per > 0)
			return (int)((q + per - 1) / per);
		return 0;
	}
	/* cgroup v1, mounted at /sys/fs/cgroup/cpu (its root only) */
	if (dir[0] == '/' && dir[1] == 0 &&
	    read_small("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", buf,
	               sizeof buf) > 0 && sscanf(buf, "%lld", &q) == 1 &&
	    q > 0 &&
	    read_small("/sys/fs/cgroup/cpu/cpu.cfs_period_us", buf,
	               sizeof buf) > 0 && sscanf(buf, "%lld", &per) == 1 &&
	    per > 0)
		return (int)((q + per - 1) / per);
	return 0;
}

static int sample_cpus(void)
{
	cpu_set_t set;
	int n = 0;
	if (sched_getaffinity(0, sizeof set, &set) == 0)
		n = CPU_COUNT(&set);
	if (n <= 0)
		n = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (n <= 0)
		n = 1;
	/* The cgroup v2 path of this process, and each of its parents. */
	char buf[512];
	if (read_small("/proc/self/cgroup", buf, sizeof buf) > 0) {
		char *p = strstr(buf, "0::");
		if (p) {
			p += 3;
			p[strcspn(p, "\n")] = 0;
			for (;;) {
				int q = quota_cpus(*p ? p : "/");
				if (q > 0 && q < n)
					n = q;
				char *sl = strrchr(p, '/');
				if (!sl || !*p || (sl == p && !p[1]))
					break;
				if (sl == p)
					p[1] = 0;
				else
					*sl = 0;
			}
		}
	}
	return n;
}

/* Runnable threads now: /proc/loadavg's "running/total" (procs_running). */
static int sample_running(void)
{
	char buf[128];
	if (read_small("/proc/loadavg", buf, sizeof buf) <= 0)
		return -1;
	double a, b, c;
	int run, tot;
	if (sscanf(buf, "%lf %lf %lf %d/%d", &a, &b, &c, &run, &tot) != 5 ||
	    run < 0)
		return -1;
	return run;
}

/* Refresh the cache if it is stale; only the thread that claims the
 * sample reads the files. */
static void load_refresh(uint64_t now)
{
	if (__atomic_load_n(&ld.test, __ATOMIC_RELAXED))
		return;
	uint64_t next = __atomic_load_n(&ld.next_load, __ATOMIC_RELAXED);
	if (now < next)
		return;
	if (!__atomic_compare_exchange_n(&ld.next_load, &next,
	                                 now + NTBX_SPIN_SAMPLE_NS, 0,
	                                 __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		return;
	if (now >= __atomic_load_n(&ld.next_cpus, __ATOMIC_RELAXED)) {
		__atomic_store_n(&ld.next_cpus, now + NTBX_SPIN_CPUS_NS,
		                 __ATOMIC_RELAXED);
		__atomic_store_n(&ld.ncpu, sample_cpus(), __ATOMIC_RELAXED);
	}
	int r = sample_running();
	if (r >= 0)
		__atomic_store_n(&ld.running, r, __ATOMIC_RELAXED);
}

void ntbx_spin_load(int *ncpu, int *running)
{
	load_refresh(ntbx_now_ns());
	*ncpu = __atomic_load_n(&ld.ncpu, __ATOMIC_RELAXED);
	*running = __atomic_load_n(&ld.running, __ATOMIC_RELAXED);
}

int ntbx_spin_crowded(void)
{
	int ncpu, running;
	ntbx_spin_load(&ncpu, &running);
	return running > ncpu;
}

void ntbx_spin_test_load(int ncpu, int running)
{
	if (ncpu <= 0) {
		__atomic_store_n(&ld.test, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&ld.next_load, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&ld.next_cpus, 0, __ATOMIC_RELAXED);
		return;
	}
	__atomic_store_n(&ld.test, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&ld.ncpu, ncpu, __ATOMIC_RELAXED);
	__atomic_store_n(&ld.running, running, __ATOMIC_RELAXED);
}

/* -------------------------------------------------------------- policy */

static long fixed_ns(void)
{
	long f = __atomic_load_n(&ld.fixed_ns, __ATOMIC_RELAXED);
	if (f == -2) {
		const char *e = getenv("NTBX_SPIN_US");
		f = e && *e ? ntbx_spin_us() * 1000 : -1;
		__atomic_store_n(&ld.fixed_ns, f, __ATOMIC_RELAXED);
	}
	return f;
}

void ntbx_spin_test_fixed(long us)
{
	__atomic_store_n(&ld.fixed_ns, us < -1 ? -2 : us < 0 ? -1 : us * 1000,
	                 __ATOMIC_RELAXED);
}

uint64_t ntbx_spin_begin(struct ntbx_spin *s)
{
	long f = fixed_ns();
	if (f >= 0) {
		s->mode = NTBX_SPIN_FIXED;
		return (uint64_t)f;
	}
	int ncpu, running;
	ntbx_spin_load(&ncpu, &running);
	/* A CPU idle (besides the one we hold): pause; none: pause briefly,
	 * then yield; more runnable threads than CPUs: yield at every poll. */
	s->mode = running < ncpu ? NTBX_SPIN_IDLE :
	          running == ncpu ? NTBX_SPIN_FULL : NTBX_SPIN_CROWDED;
	uint32_t b = __atomic_load_n(&s->budget_ns, __ATOMIC_RELAXED);
	if (!b) {
		b = NTBX_SPIN_INIT_NS;
		__atomic_store_n(&s->budget_ns, b, __ATOMIC_RELAXED);
	}
	return b;
}

int ntbx_spin_yields(const struct ntbx_spin *s, uint64_t spun_ns)
{
	switch (s->mode) {
	case NTBX_SPIN_IDLE:
		return 0;
	case NTBX_SPIN_CROWDED:
		return 1;
	default:   /* FULL, FIXED: as before the policy */
		return spun_ns >= NTBX_SPIN_PAUSE_NS;
	}
}

void ntbx_spin_pause(struct ntbx_spin *s, uint64_t spun_ns)
{
	if (ntbx_spin_yields(s, spun_ns))
		sched_yield();
	else
		ntbx_cpu_relax();
}

void ntbx_spin_end(struct ntbx_spin *s, uint64_t waited_ns, int slept)
{
	if (s->mode == NTBX_SPIN_FIXED)   /* fixed budgets do not learn */
		return;
	uint32_t b = __atomic_load_n(&s->budget_ns, __ATOMIC_RELAXED), nb;
	if (!b)
		b = NTBX_SPIN_INIT_NS;
	if (!slept)
		nb = b + (NTBX_SPIN_CAP_NS - b) / 8;
	else if (waited_ns <= NTBX_SPIN_CAP_NS)
		nb = waited_ns > b ? (uint32_t)waited_ns : b;
	else
		nb = b / 2;
	if (nb < NTBX_SPIN_FLOOR_NS)
		nb = NTBX_SPIN_FLOOR_NS;
	if (nb > NTBX_SPIN_CAP_NS)
		nb = NTBX_SPIN_CAP_NS;
	__atomic_store_n(&s->budget_ns, nb, __ATOMIC_RELAXED);
}
