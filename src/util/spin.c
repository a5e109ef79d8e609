/* SPDX-License-Identifier: MIT */
/*
 * The wait policy every blocking path shares: how long a waiter spins
 * before it sleeps on its doorbell.
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
 *  - does not spin at all when the peer it waits for last ran on this
 *    very CPU (ntbx_spin_begin_for; the queue pair says where the peer's
 *    writer last sent from): that peer cannot answer before we give the
 *    CPU up;
 *  - when the machine is crowded (more runnable threads than CPUs this
 *    process may use: its affinity mask, capped by the cgroup's cpu.max
 *    quota), spins at most one exchange with a sleeping peer: a sleep and
 *    wake-up there and back, measured once per process
 *    (ntbx_spin_wake_ns).  A wait that the peer answers while both run,
 *    or right after a wake-up, is still caught spinning (giving up sooner
 *    puts the waiter to sleep just before the answer, and the next wait
 *    of its peer then pays a wake-up too: sleeps beget sleeps); a wait
 *    whose peer is queued behind others gives its CPU up after a few
 *    microseconds instead of holding it for a time slice;
 *  - at the sockets' sites (ntbx_spin_begin_halving), learns from the
 *    spins that failed when crowded: a crowded spin that ended in a sleep
 *    anyway was pure loss (the CPU it held was taken from the threads
 *    queued behind it, the peer perhaps among them, which made the wait
 *    longer), so it halves the budget instead of raising it to the wait's
 *    length;
 *  - spins with a pause instruction only, never sched_yield(): a yield
 *    hands the CPU to whatever else is runnable, a nice 19 loop included,
 *    for up to its whole slice, and the yielder waits at the back of the
 *    queue;
 *  - then sleeps on its doorbell (the caller's business): the ring wakes
 *    it as the kernel wakes a TCP sleeper, with the scheduler's wake-up
 *    preemption.
 *
 * A thread whose waits are all caught never gives its CPU up, and on a
 * crowded machine the threads queued behind it wait for the scheduler's
 * tick: a socket thread takes turns (ntbx_spin_turn, below).
 *
 * Crowded or not is decided with hysteresis, because our own spinners are
 * runnable and our own sleepers are not: entered above as many runnable
 * threads as CPUs, left below, and at exactly as many (one ping-pong pair
 * spinning on two CPUs; or a pair that sleeps beside one other busy
 * thread) left only after NTBX_SPIN_CALM samples in a row.  The counts
 * are sampled at most every NTBX_SPIN_SAMPLE_NS and cached (one thread
 * samples, the others read the cache): never a system call per spin step.
 *
 * A group of processes that share this machine's CPUs and say which of
 * them sleep (OpenSHMEM's PEs: ntbx_spin_group) knows its own load
 * exactly and at once, where the sampled run queue is up to 4 ms old and
 * kept with hysteresis: a waiter of the group spins only while its awake
 * members (not asleep in a wait, the waiter included) fit on the CPUs the
 * waiting thread may use (its own affinity: a PE's threads may differ,
 * thread_cpus); one more, and it is crowded: at most one exchange with a
 * sleeping peer, as above (sleeping at once instead cost 4 PEs on 2 CPUs
 * a quarter more per broadcast and reduction: more wake-ups).  And while
 * the foreign runnable threads leave the group a CPU, the group's
 * waiters yield to each other instead of sleeping: the one
 * exception to "never sched_yield()" (ntbx_spin_group_yield, below).
 *
 * NTBX_SPIN_US, when set, is an explicit fixed budget: spin that long
 * whatever the load and the peer's CPU, learn nothing.
 *
 * In a process confined by a seccomp filter (util.h, ntbx_sandboxed) the
 * policy makes no system call: the load is no longer sampled (the last
 * counts stand) and the cost of a sleep is not measured (what was measured
 * before, or the floor).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/settings.h"
#include "util/util.h"

#define NTBX_SPIN_SAMPLE_NS   4000000ull      /* run queue: every 4 ms */
#define NTBX_SPIN_CPUS_NS     1000000000ull   /* CPUs: every second */

static struct {
	uint64_t next_load;   /* when the run queue is sampled next */
	uint64_t next_cpus;
	int running;          /* runnable threads on the machine */
	int ncpu;             /* CPUs this process may use (the affinity of
	                       * the thread that sampled, capped by quota) */
	int quota;            /* CPUs the cgroup quotas allow (INT_MAX) */
	unsigned cpus_gen;    /* bumped at every sample of the CPUs */
	int crowded;          /* the decision, with hysteresis */
	int calm;             /* samples at exactly ncpu, crowded */
	int test;             /* counts injected by a test */
	long fixed_ns;        /* -2 unknown, -1 adaptive, else NTBX_SPIN_US */
	uint32_t wake_ns;     /* one sleep and wake-up; 0: not measured */
	int wake_pid;         /* process measuring it, or 0 */
	uint64_t wake_next;   /* no measurement before this time */
} ld = { .running = 1, .ncpu = 1, .quota = INT_MAX, .fixed_ns = -2 };

/* A group's yield decision (ntbx_spin_group_yield, below). */
#define NTBX_SPIN_GROUP_SAMPLE_NS 500000ull   /* every half millisecond */
#define NTBX_SPIN_GROUP_SAMPLES   4           /* the window: 2 ms */
#define NTBX_SPIN_GROUP_OFF_NS    20000000ull /* after a long yield: 20 ms */
static struct {
	uint64_t next;   /* when the running count is sampled next */
	unsigned i;      /* samples taken */
	int foreign[NTBX_SPIN_GROUP_SAMPLES];   /* not the group's, per sample */
	uint64_t off_until;   /* no yields before this (a yield ran long) */
	uint64_t last_long;   /* when a yield last ran long, or 0 */
} gy;

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

/* CPUs the calling thread may run on. */
static int affinity_cpus(void)
{
	cpu_set_t set;
	int n = 0;
	if (sched_getaffinity(0, sizeof set, &set) == 0)
		n = CPU_COUNT(&set);
	if (n <= 0)
		n = (int)sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? n : 1;
}

/* The CPUs the cgroup quotas of this process allow (INT_MAX: no quota),
 * and the calling thread's affinity capped by them. */
static int sample_cpus(int *quota)
{
	int n = affinity_cpus(), lim = INT_MAX;
	/* The cgroup v2 path of this process, and each of its parents. */
	char buf[512];
	if (read_small("/proc/self/cgroup", buf, sizeof buf) > 0) {
		char *p = strstr(buf, "0::");
		if (p) {
			p += 3;
			p[strcspn(p, "\n")] = 0;
			for (;;) {
				int q = quota_cpus(*p ? p : "/");
				if (q > 0 && q < lim)
					lim = q;
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
	*quota = lim;
	return n < lim ? n : lim;
}

/* Runnable threads now: /proc/loadavg's "running/total" (procs_running),
 * its fourth field.  Parsed by hand: every process of a fabric samples it
 * every NTBX_SPIN_SAMPLE_NS, and sscanf's floating-point fields cost more
 * than the read (pgbench -S under ntbx run: vfscanf and its strlen were
 * 0.9% of the machine's samples). */
static int sample_running(void)
{
	char buf[128];
	if (read_small("/proc/loadavg", buf, sizeof buf) <= 0)
		return -1;
	const char *c = buf;
	for (int field = 0; field < 3; field++) {
		while (*c && *c != ' ')
			c++;
		while (*c == ' ')
			c++;
	}
	int run = 0, digits = 0;
	for (; *c >= '0' && *c <= '9' && digits < 9; c++, digits++)
		run = run * 10 + (*c - '0');
	return digits && *c == '/' ? run : -1;
}

/* The crowded decision after a sample (only the sampling thread makes
 * it): entered above @ncpu runnable threads, left below it, and at
 * exactly @ncpu left only after NTBX_SPIN_CALM samples in a row. */
static void decide(int ncpu, int running)
{
	if (running > ncpu) {
		__atomic_store_n(&ld.crowded, 1, __ATOMIC_RELAXED);
		ld.calm = 0;
	} else if (running < ncpu || ++ld.calm >= NTBX_SPIN_CALM) {
		__atomic_store_n(&ld.crowded, 0, __ATOMIC_RELAXED);
		ld.calm = 0;
	}
}

/* Refresh the cache if it is stale; only the thread that claims the
 * sample reads the files. */
static void load_refresh(uint64_t now)
{
	/* Confined by a seccomp filter: no opening files any more (util.h);
	 * the last counts stand. */
	if (__atomic_load_n(&ld.test, __ATOMIC_RELAXED) || ntbx_sandboxed)
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
		int quota;
		__atomic_store_n(&ld.ncpu, sample_cpus(&quota), __ATOMIC_RELAXED);
		__atomic_store_n(&ld.quota, quota, __ATOMIC_RELAXED);
		__atomic_fetch_add(&ld.cpus_gen, 1, __ATOMIC_RELEASE);
	}
	int r = sample_running();
	if (r >= 0) {
		__atomic_store_n(&ld.running, r, __ATOMIC_RELAXED);
		decide(__atomic_load_n(&ld.ncpu, __ATOMIC_RELAXED), r);
	}
}

/* CPUs the calling thread may use: its own affinity, capped by the
 * quota.  A group's decisions are about the waiting thread, and threads
 * of one process differ (OpenSHMEM pins a ring PE's main thread only,
 * and lets go of it at times: shmem_bind.c); read again when the CPUs
 * were sampled or changed, else cached per thread. */
static __thread struct { unsigned gen; int n; } tcpu;

static int thread_cpus(void)
{
	if (__atomic_load_n(&ld.test, __ATOMIC_RELAXED) || ntbx_sandboxed)
		return __atomic_load_n(&ld.ncpu, __ATOMIC_RELAXED);
	unsigned g = __atomic_load_n(&ld.cpus_gen, __ATOMIC_ACQUIRE);
	if (!g || tcpu.gen != g) {
		int q = __atomic_load_n(&ld.quota, __ATOMIC_RELAXED);
		int n = affinity_cpus();
		tcpu.n = q > 0 && q < n ? q : n;
		tcpu.gen = g;
	}
	return tcpu.n;
}

void ntbx_spin_load(int *ncpu, int *running)
{
	load_refresh(ntbx_now_ns());
	*ncpu = thread_cpus();
	*running = __atomic_load_n(&ld.running, __ATOMIC_RELAXED);
}

static int crowded_at(uint64_t now)
{
	load_refresh(now);
	return __atomic_load_n(&ld.crowded, __ATOMIC_RELAXED);
}

int ntbx_spin_crowded(void)
{
	return crowded_at(ntbx_now_ns());
}

void ntbx_spin_test_load(int ncpu, int running)
{
	__atomic_store_n(&gy.next, 0, __ATOMIC_RELAXED);   /* group: forget */
	__atomic_store_n(&gy.i, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&gy.off_until, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&gy.last_long, 0, __ATOMIC_RELAXED);
	if (ncpu <= 0) {
		__atomic_store_n(&ld.test, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&ld.next_load, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&ld.next_cpus, 0, __ATOMIC_RELAXED);
		return;
	}
	__atomic_store_n(&ld.test, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&ld.ncpu, ncpu, __ATOMIC_RELAXED);
	__atomic_store_n(&ld.running, running, __ATOMIC_RELAXED);
	decide(ncpu, running);
}

/* ------------------------------------------------- the cost of a sleep */

/*
 * What one exchange with a sleeping peer costs here, the way a waiter pays
 * it when its peer runs on another CPU: two helper threads, each held to
 * a different CPU this process may use (the same one if it may use only
 * one), hand a word back and forth by futex, each sleeping until the other
 * wakes it, WAKE_ROUNDS times.  A round trip is two sleeps and two
 * wake-ups; the cheapest one counts (queueing behind other threads is the
 * machine's load, not the price of sleeping).  It runs in the background
 * (the helpers block every signal) from the process's first wait, about a
 * millisecond; until it is known, a crowded wait spins NTBX_SPIN_FLOOR_NS.
 * A measurement that could not finish half its rounds within WAKE_LIMIT_NS
 * (a machine too busy to tell) is tried again at a wait WAKE_RETRY_NS
 * later.  A child forked meanwhile measures for itself.
 */
#define WAKE_ROUNDS    32
#define WAKE_LIMIT_NS  20000000ull       /* one attempt: at most 20 ms */
#define WAKE_RETRY_NS  1000000000ull     /* the next one: a second later */

struct wk {
	uint32_t word;
	int cpu[2];           /* -1: no pinning */
	uint64_t start;
	uint64_t best;        /* cheapest round trip, ns */
	uint32_t rounds;      /* completed */
};

static int wk_wait(struct wk *k, uint32_t v)
{
	struct timespec ts = { 0, 5000000 };   /* re-check the time limit */
	syscall(SYS_futex, &k->word, FUTEX_WAIT_PRIVATE, v, &ts, NULL, 0);
	return ntbx_now_ns() - k->start < WAKE_LIMIT_NS;
}

static void wk_wake(struct wk *k)
{
	syscall(SYS_futex, &k->word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void wk_pin(int cpu)
{
	if (cpu < 0)
		return;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

/* The partner: answers 2i+1 with 2i+2, until UINT32_MAX or time's up. */
static void *wk_partner(void *arg)
{
	struct wk *k = arg;
	pthread_setname_np(pthread_self(), "ntbx-wakecal");
	wk_pin(k->cpu[1]);
	for (uint32_t i = 0; i < WAKE_ROUNDS; i++) {
		uint32_t v;
		while ((v = __atomic_load_n(&k->word, __ATOMIC_ACQUIRE)) !=
		       2 * i + 1)
			if (v == UINT32_MAX || !wk_wait(k, v))
				return NULL;
		__atomic_store_n(&k->word, 2 * i + 2, __ATOMIC_RELEASE);
		wk_wake(k);
	}
	return NULL;
}

/* One measurement: 0, or the cheapest round trip in ns (clamped to the
 * budget's floor and cap). */
static uint32_t wake_measure(void)
{
	struct wk k = { 0, { -1, -1 }, ntbx_now_ns(), UINT64_MAX, 0 };
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 1)
		for (int c = 0, n = 0; c < CPU_SETSIZE && n < 2; c++)
			if (CPU_ISSET(c, &set))
				k.cpu[n++] = c;
	wk_pin(k.cpu[0]);
	pthread_t t;
	if (pthread_create(&t, NULL, wk_partner, &k) != 0)
		return 0;
	for (uint32_t i = 0; i < WAKE_ROUNDS; i++) {
		uint64_t t0 = ntbx_now_ns();
		__atomic_store_n(&k.word, 2 * i + 1, __ATOMIC_RELEASE);
		wk_wake(&k);
		uint32_t v;
		int ok = 1;
		while (ok && (v = __atomic_load_n(&k.word, __ATOMIC_ACQUIRE)) !=
		             2 * i + 2)
			ok = wk_wait(&k, v);
		if (!ok)
			break;
		uint64_t rt = ntbx_now_ns() - t0;
		if (rt < k.best)
			k.best = rt;
		k.rounds++;
	}
	__atomic_store_n(&k.word, UINT32_MAX, __ATOMIC_RELEASE);
	wk_wake(&k);
	pthread_join(t, NULL);
	if (k.rounds < WAKE_ROUNDS / 2)
		return 0;
	uint64_t w = k.best;
	if (w < NTBX_SPIN_FLOOR_NS)
		w = NTBX_SPIN_FLOOR_NS;
	if (w > NTBX_SPIN_CAP_NS)
		w = NTBX_SPIN_CAP_NS;
	return (uint32_t)w;
}

static void *wake_thread(void *arg)
{
	(void)arg;
	/* named: pinned on purpose, short-lived (perf, top -H, tests) */
	pthread_setname_np(pthread_self(), "ntbx-wakecal");
	uint32_t w = wake_measure();
	if (w) {
		uint32_t zero = 0;
		__atomic_compare_exchange_n(&ld.wake_ns, &zero, w, 0,
		                            __ATOMIC_RELEASE, __ATOMIC_RELAXED);
		ntbx_log(NTBX_LOG_INFO, "wait policy: a sleep and wake-up there "
		         "and back costs %u ns here (crowded waits spin at most "
		         "that long)", w);
	} else {
		__atomic_store_n(&ld.wake_next, ntbx_now_ns() + WAKE_RETRY_NS,
		                 __ATOMIC_RELAXED);
		__atomic_store_n(&ld.wake_pid, 0, __ATOMIC_RELEASE);
	}
	return NULL;
}

/* Start a measurement unless one is known, running in this process, or
 * not due yet. */
static void wake_start(void)
{
	/* Confined by a seccomp filter: no threads (util.h); the floor, or
	 * what was measured before, stands. */
	if (__atomic_load_n(&ld.wake_ns, __ATOMIC_ACQUIRE) || ntbx_sandboxed ||
	    ntbx_now_ns() < __atomic_load_n(&ld.wake_next, __ATOMIC_RELAXED))
		return;
	int me = (int)getpid();
	int who = __atomic_load_n(&ld.wake_pid, __ATOMIC_RELAXED);
	if (who == me ||
	    !__atomic_compare_exchange_n(&ld.wake_pid, &who, me, 0,
	                                 __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return;
	pthread_attr_t a;
	pthread_t t;
	sigset_t all, old;
	sigfillset(&all);
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(&t, &a, wake_thread, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&a);
	if (rc != 0) {
		__atomic_store_n(&ld.wake_next, ntbx_now_ns() + WAKE_RETRY_NS,
		                 __ATOMIC_RELAXED);
		__atomic_store_n(&ld.wake_pid, 0, __ATOMIC_RELEASE);
	}
}

uint32_t ntbx_spin_wake_ns(void)
{
	uint32_t w = __atomic_load_n(&ld.wake_ns, __ATOMIC_ACQUIRE);
	if (w)
		return w;
	wake_start();
	return NTBX_SPIN_FLOOR_NS;
}

void ntbx_spin_test_wake(uint32_t ns)
{
	__atomic_store_n(&ld.wake_next, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&ld.wake_ns, ns, __ATOMIC_RELEASE);
	if (!ns)
		__atomic_store_n(&ld.wake_pid, 0, __ATOMIC_RELEASE);
}

/* -------------------------------------------------------------- policy */

static long fixed_ns(void)
{
	long f = __atomic_load_n(&ld.fixed_ns, __ATOMIC_RELAXED);
	if (f == -2) {
		f = ntbx_setting_is_set(NTBX_SET_SPIN_US) ? ntbx_spin_us() * 1000
		                                          : -1;
		__atomic_store_n(&ld.fixed_ns, f, __ATOMIC_RELAXED);
	}
	return f;
}

long ntbx_spin_us(void)
{
	/* unset: 50, the most the adaptive policy spins (NTBX_SPIN_CAP_NS) */
	return ntbx_setting_is_set(NTBX_SET_SPIN_US) ?
	       ntbx_setting_long(NTBX_SET_SPIN_US) : NTBX_SPIN_CAP_NS / 1000;
}

void ntbx_spin_test_fixed(long us)
{
	if (us < -1)
		ntbx_setting_test_forget(NTBX_SET_SPIN_US);
	__atomic_store_n(&ld.fixed_ns, us < -1 ? -2 : us < 0 ? -1 : us * 1000,
	                 __ATOMIC_RELAXED);
}

uint64_t ntbx_spin_begin(struct ntbx_spin *s)
{
	return ntbx_spin_begin_for(s, -1, ntbx_now_ns());
}

uint64_t ntbx_spin_begin_for(struct ntbx_spin *s, int peer_cpu, uint64_t now)
{
	long f = fixed_ns();
	if (f >= 0) {
		s->mode = NTBX_SPIN_FIXED;
		return (uint64_t)f;
	}
	if (peer_cpu >= 0 && peer_cpu == sched_getcpu()) {
		s->mode = NTBX_SPIN_NEAR;
		return 0;
	}
	uint32_t b = __atomic_load_n(&s->budget_ns, __ATOMIC_RELAXED);
	if (!b) {
		b = NTBX_SPIN_INIT_NS;
		__atomic_store_n(&s->budget_ns, b, __ATOMIC_RELAXED);
	}
	uint32_t w = ntbx_spin_wake_ns();   /* measured once, at the first */
	if (!crowded_at(now)) {
		s->mode = NTBX_SPIN_FREE;
		return b;
	}
	s->mode = NTBX_SPIN_CROWDED;
	return b < w ? b : w;
}

uint64_t ntbx_spin_begin_halving(struct ntbx_spin *s, int peer_cpu,
                                 uint64_t now)
{
	s->halving = 1;
	return ntbx_spin_begin_for(s, peer_cpu, now);
}

uint64_t ntbx_spin_group(const struct ntbx_spin *s, uint64_t budget,
                         int awake)
{
	if (s->mode == NTBX_SPIN_FIXED ||
	    awake <= thread_cpus())
		return budget;
	uint32_t w = ntbx_spin_wake_ns();   /* crowded by the group */
	return budget < w ? budget : w;
}

/* ------------------------------------------------ yielding in a group */

/*
 * A waiter of a group (ntbx_spin_group) whose awake members outnumber the
 * CPUs cannot spin usefully: its pause loop holds a CPU that a member it
 * waits for may be queued behind.  Sleeping costs a wake-up on the other
 * side (a futex wake, a context switch, across CPUs an inter-processor
 * interrupt through the hypervisor).  When every runnable thread of the
 * machine is one of the group's awake members, a sched_yield() hands the
 * CPU to one of them (the one waited for, or one on its way to it) with
 * neither: cooperative.  Against foreign runnable load a yield hands a
 * stranger up to its whole slice and leaves the yielder runnable at the
 * back of the queue (the lesson above, issue 16): it sleeps when the
 * foreign runnable threads are as many as the CPUs this thread may use.
 * Fewer, and the group still has a CPU of its own, where members that
 * yield to each other run at once; a sleeper instead must be woken onto
 * a CPU the foreign thread may hold, and wake-up preemption does not
 * take it back before the thread's slice ends.  So then every waiter of
 * the group yields, even while the awake members fit on the CPUs: a
 * member that sleeps costs the next hand-over to it a wake-up, sleeps
 * beget sleeps, and the group never gets back to all awake.  Measured (4 PEs on 2 CPUs beside one busy loop,
 * a barrier and a 8 B reduction, PEs not pinned): sleeping 30-100 and
 * 70-1400 us per call, yielding 8-11 and 16-23 us (Open MPI's OSHMEM,
 * which yields, 7 and 15-19); beside one loop per CPU a yield waits for
 * a loop's slice (barrier 1.3-1.7 ms, Open MPI 2.3 ms) and sleeping
 * costs 59-74 us.  A thread pinned to one CPU (ncpu 1) thus yields only
 * with no foreign load: the loop may sit on its CPU, and a yield there
 * hands the loop the CPU (pinned, 1.9 ms per barrier); OpenSHMEM
 * unpins its PEs while foreign load lasts (shmem_bind.c).
 *
 * The machine's running count (/proc/loadavg) and the group's awake count
 * are taken together, at most every NTBX_SPIN_GROUP_SAMPLE_NS by whichever
 * waiter finds the sample stale: their difference is the foreign runnable
 * threads, which do not change as the members fall asleep and wake (the
 * running count does, within microseconds).  The difference errs upwards
 * only, or nearly: a member woken but not yet running still counts as
 * asleep while runnable, and so do the members' other threads and the
 * kernel's.  So the least difference of the last NTBX_SPIN_GROUP_SAMPLES
 * decides: a foreign busy loop is in every sample, a member on its way
 * out of a sleep in few (with the last sample alone, 8 PEs on 2 CPUs
 * slept in a quarter of their waits, a sleep begetting the next).  It
 * errs downwards for a member awake but blocked outside a wait (in a
 * system call), which hides one foreign thread.  The waiter measures
 * what it asked for: a yield that came back only after a long while
 * (ntbx_spin_group_yield_long; its caller says how long is long) handed
 * the CPU to something that ran on, a foreign thread the samples missed
 * or a member computing.  Unless a sample then shows the foreign threads
 * fewer than the CPUs (a member computing, or the loop it may yield to
 * anyway), and no other yield ran long in the last
 * NTBX_SPIN_GROUP_OFF_NS, for NTBX_SPIN_GROUP_OFF_NS no waiter of the
 * process yields (each such mistake costs at most a slice per 20 ms).
 * Until a sample exists,
 * and in a process confined by a seccomp filter (no files), the load
 * counts as foreign.  A waiter whose peer last ran on its own CPU
 * (NTBX_SPIN_NEAR) asks even while the members fit on the CPUs: no spin
 * can catch that peer, and a yield hands it the CPU where a sleep costs
 * a wake-up on each side (a put through a relay that shares the
 * putter's CPU, hop16).
 */
int ntbx_spin_foreign_runnable(int running, int awake)
{
	return running < 0 ? INT_MAX : running - awake;
}

static int group_foreign(void)
{
	unsigned n = __atomic_load_n(&gy.i, __ATOMIC_ACQUIRE);
	int least = INT_MAX;
	for (unsigned k = 0; k < n && k < NTBX_SPIN_GROUP_SAMPLES; k++) {
		int f = __atomic_load_n(&gy.foreign[k], __ATOMIC_RELAXED);
		if (f < least)
			least = f;
	}
	return least;
}

/* NTBX_SPIN_TEST_FOREIGN (tests): -1 unset, else the foreign count. */
static int group_test_foreign(void)
{
	static int f = -2;
	int v = __atomic_load_n(&f, __ATOMIC_RELAXED);
	if (v == -2) {
		v = ntbx_setting_is_set(NTBX_SET_SPIN_TEST_FOREIGN) ?
		    (int)ntbx_setting_long(NTBX_SET_SPIN_TEST_FOREIGN) : -1;
		__atomic_store_n(&f, v, __ATOMIC_RELAXED);
	}
	return v;
}

/* The foreign runnable threads now, beside @awake members. */
static int group_sample(int awake)
{
	int running = __atomic_load_n(&ld.test, __ATOMIC_RELAXED) ?
	              __atomic_load_n(&ld.running, __ATOMIC_RELAXED) :
	              ntbx_sandboxed ? -1 : sample_running();
	int f = ntbx_spin_foreign_runnable(running, awake);
	return group_test_foreign() >= 0 ? group_test_foreign() : f;
}

int ntbx_spin_group_yield(const struct ntbx_spin *s, int awake, uint64_t now)
{
	if (s->mode == NTBX_SPIN_FIXED)
		return 0;   /* an override */
	int ncpu = thread_cpus();
	/* Room to spin on a machine that is not crowded, unless the peer
	 * waited for last ran on our CPU: a spin cannot catch it, a yield
	 * hands it the CPU (hop16) */
	int fits = awake <= ncpu;
	if (fits && s->mode != NTBX_SPIN_NEAR && !crowded_at(now))
		return 0;
	if (now < __atomic_load_n(&gy.off_until, __ATOMIC_RELAXED))
		return 0;   /* a yield ran long not long ago */
	uint64_t next = __atomic_load_n(&gy.next, __ATOMIC_RELAXED);
	if (now >= next &&
	    __atomic_compare_exchange_n(&gy.next, &next,
	                                now + NTBX_SPIN_GROUP_SAMPLE_NS, 0,
	                                __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
		int f = group_sample(awake);
		unsigned i = __atomic_load_n(&gy.i, __ATOMIC_RELAXED);
		__atomic_store_n(&gy.foreign[i % NTBX_SPIN_GROUP_SAMPLES], f,
		                 __ATOMIC_RELAXED);
		__atomic_store_n(&gy.i, i + 1, __ATOMIC_RELEASE);
	}
	int f = group_foreign();
	if (f >= ncpu)
		return 0;   /* strangers on every CPU: sleep */
	if (f > 0)
		return 1;   /* a CPU of our own: every member stays runnable */
	return !fits || s->mode == NTBX_SPIN_NEAR;   /* only ours */
}

int ntbx_spin_group_foreign(void)
{
	return group_foreign();
}

void ntbx_spin_cpus_changed(void)
{
	__atomic_store_n(&ld.next_cpus, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&ld.next_load, 0, __ATOMIC_RELAXED);
	__atomic_fetch_add(&ld.cpus_gen, 1, __ATOMIC_RELEASE);
}

/* A long yield with fewer foreign runnable threads than CPUs right after
 * it (none: a member that computes, PEs filling their buffers at start, a
 * compute phase; or a foreign thread the group yields beside anyway, which
 * took one slice): that wait sleeps (its caller), the others go on
 * yielding.  As many strangers as CPUs in that sample, or a second long
 * yield within the
 * pause's length (a stranger the counts keep missing: hidden by a member
 * blocked in a system call, or by a member we cannot read), stops the
 * yields of the process for NTBX_SPIN_GROUP_OFF_NS. */
void ntbx_spin_group_yield_long(int awake, uint64_t now)
{
	uint64_t last = __atomic_exchange_n(&gy.last_long, now, __ATOMIC_RELAXED);
	if (group_sample(awake) < thread_cpus() &&
	    (!last || now - last >= NTBX_SPIN_GROUP_OFF_NS))
		return;
	__atomic_store_n(&gy.off_until, now + NTBX_SPIN_GROUP_OFF_NS,
	                 __ATOMIC_RELAXED);
}

/* The group's start-up (OpenSHMEM's shmem_init) has members computing
 * alone while the others wait: copy calibrations, PE 0's measurements.  A
 * yield to such a member runs long and stops the process's yields for
 * 20 ms, and the samples of those waits are taken among sleepers being
 * woken (counted asleep, runnable: "foreign").  Both describe the start,
 * not the load the group runs in next: forget them, so that the next
 * sample decides (as at the first wait). */
void ntbx_spin_group_restart(void)
{
	__atomic_store_n(&gy.off_until, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&gy.last_long, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&gy.i, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&gy.next, 0, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------ taking turns */

/*
 * A thread whose waits are all caught (its peers have always answered by
 * the time it looks, as on a saturated server) never gives its CPU up.
 * On a crowded machine it then runs until the scheduler's tick preempts
 * it (every 4 ms at HZ=250; a thread that never sleeps is never the
 * object of wake-up preemption either), and a thread queued behind k
 * such threads waits k ticks, in the middle of whatever request it was
 * serving: memcached -t 4 under 4 load threads on 2 CPUs, slowest request
 * 20-25 ms against kernel TCP's 3.5-11 ms, whose threads sleep far more
 * often.  So a socket thread that has run NTBX_TURN_NS without being
 * switched out, on a crowded machine, yields at its next call into a
 * wait (poll, select, epoll, a blocking call that would wait): what the
 * tick would do, sooner, so that a thread behind k others waits about k
 * turns.  "Without being switched out" is the kernel's count of the
 * thread's context switches (getrusage RUSAGE_THREAD, read at most every
 * NTBX_TURN_LOOK_NS, and only while crowded): a thread preempted
 * meanwhile has waited behind the others already and must not yield
 * again as soon as it runs (with the wall clock alone, it would).  The
 * turn is the scheduler's own base slice (EEVDF's normalised
 * sysctl_sched_base_slice, 0.75 ms), which the tick rounds up to 4 ms; its
 * length is the trade between the slowest request and the p99 (a turn
 * taken in the middle of a request delays it by the turns of the threads
 * ahead).  Measured with the memcached row of bench/sock.sh
 * (docs/design-notes.md, "memcached's slowest request: turns"): 0.5 ms
 * gave a slowest request of 5-6 ms and a p99 of about 580 us, 0.75 ms 7-9
 * ms and 80-280 us, 1 ms 7-12 ms, none 18-24 ms and 40-470 us (kernel
 * TCP: 1-11 ms and 110 us-2.2 ms), throughput the same within the runs'
 * spread.  Not with NTBX_SPIN_US set (the override spins as told), nor in
 * a process confined by a seccomp filter (no system call the program
 * would not make).
 */
#define NTBX_TURN_NS      750000ull
#define NTBX_TURN_LOOK_NS 100000ull
static __thread struct {
	uint64_t look;    /* when this thread last looked */
	uint64_t since;   /* running since (not switched out); 0: unknown */
	long csw;         /* its context switches then */
} turn;

int ntbx_spin_turn(uint64_t now)
{
	if (now - turn.look < NTBX_TURN_LOOK_NS || ntbx_sandboxed)
		return 0;
	turn.look = now;
	if (fixed_ns() >= 0 || !crowded_at(now)) {
		turn.since = 0;
		return 0;
	}
	struct rusage ru;
	if (getrusage(RUSAGE_THREAD, &ru) != 0)
		return 0;
	long csw = ru.ru_nvcsw + ru.ru_nivcsw;
	if (!turn.since || csw != turn.csw) {
		turn.csw = csw;
		turn.since = now;
		return 0;
	}
	if (now - turn.since < NTBX_TURN_NS)
		return 0;
	sched_yield();
	turn.since = 0;   /* the next look starts the next turn */
	return 1;
}

void ntbx_spin_end(struct ntbx_spin *s, uint64_t waited_ns, int slept)
{
	if (s->mode == NTBX_SPIN_FIXED || s->mode == NTBX_SPIN_NEAR)
		return;   /* no spin was asked: nothing to learn */
	uint32_t b = __atomic_load_n(&s->budget_ns, __ATOMIC_RELAXED), nb;
	if (!b)
		b = NTBX_SPIN_INIT_NS;
	if (!slept)
		nb = b + (NTBX_SPIN_CAP_NS - b) / 8;
	else if (s->mode == NTBX_SPIN_CROWDED && s->halving)
		nb = b / 2;   /* pure loss, and the wait it measured was
		               * lengthened by the CPU it held */
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

