/* The wait policy (src/util/spin.c): its decisions, with the machine's CPU
 * and runnable counts and the cost of a sleep injected (ntbx_spin_test_load,
 * ntbx_spin_test_wake) rather than made by loading the machine, and waits
 * described by their lengths rather than timed.  Then real waits on a
 * loopback queue pair: a crowded wait spins at most the short budget and
 * then sleeps on the doorbell, and nothing calls sched_yield().  Also: the
 * real counts and the measured cost of a sleep are sane, and NTBX_SPIN_US
 * fixes the budget. */
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "harness.h"
#include "ntbx/fabric.h"
#include "ntbx/qp.h"
#include "util/util.h"

#define US 1000u
#define WAKE (20 * US)   /* the cost of a sleep the tests inject */

/* Every sched_yield() of the library comes here (the executable's
 * definition wins over libc's): the policy must never call it. */
static int yields;
int sched_yield(void)
{
	__atomic_fetch_add(&yields, 1, __ATOMIC_RELAXED);
	return 0;
}

static uint64_t cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A hit (the wait ended while spinning) never shrinks the budget, grows
 * it while below the cap, and never passes the cap. */
static void grows(void)
{
	ntbx_spin_test_load(2, 1);   /* one runnable (us), two CPUs */
	struct ntbx_spin s = { 0 };
	uint64_t b = ntbx_spin_begin(&s);
	CHECK_EQ(b, NTBX_SPIN_INIT_NS);
	CHECK_EQ(s.mode, NTBX_SPIN_FREE);
	uint64_t prev = b;
	int grew = 0;
	for (int i = 0; i < 200; i++) {
		ntbx_spin_end(&s, 200, 0);
		b = ntbx_spin_begin(&s);
		CHECK(b >= prev);
		CHECK(b <= NTBX_SPIN_CAP_NS);
		if (b > prev)
			grew++;
		prev = b;
	}
	CHECK(grew > 5);
	CHECK(b >= NTBX_SPIN_CAP_NS - 1 * US);   /* close to the cap */
}

/* A spin wasted on a wait longer than the cap halves the budget, down to
 * the floor and no further. */
static void shrinks(void)
{
	ntbx_spin_test_load(2, 1);
	struct ntbx_spin s = { NTBX_SPIN_CAP_NS, 0, 0 };
	uint64_t prev = ntbx_spin_begin(&s);
	CHECK_EQ(prev, NTBX_SPIN_CAP_NS);
	ntbx_spin_end(&s, 10ull * 1000 * US, 1);   /* slept, 10 ms */
	uint64_t b = ntbx_spin_begin(&s);
	CHECK_EQ(b, prev / 2);
	for (int i = 0; i < 40; i++) {
		ntbx_spin_end(&s, 10ull * 1000 * US, 1);
		b = ntbx_spin_begin(&s);
		CHECK(b >= NTBX_SPIN_FLOOR_NS);
	}
	CHECK_EQ(b, NTBX_SPIN_FLOOR_NS);
	/* A wait that slept but was short enough for a spin to have caught
	 * it: the budget rises to cover it (capped). */
	ntbx_spin_end(&s, 30 * US, 1);
	CHECK_EQ(ntbx_spin_begin(&s), 30 * US);
	ntbx_spin_end(&s, 10 * US, 1);        /* covered already: kept */
	CHECK_EQ(ntbx_spin_begin(&s), 30 * US);
	ntbx_spin_end(&s, NTBX_SPIN_CAP_NS, 1);
	CHECK_EQ(ntbx_spin_begin(&s), NTBX_SPIN_CAP_NS);
	/* A budget that learned alternately: hits and long sleeps settle
	 * between floor and cap. */
	for (int i = 0; i < 100; i++) {
		ntbx_spin_end(&s, 500, 0);
		ntbx_spin_end(&s, 1000ull * 1000 * US, 1);
	}
	b = ntbx_spin_begin(&s);
	CHECK(b > NTBX_SPIN_FLOOR_NS && b < NTBX_SPIN_CAP_NS);
}

/* More runnable threads than CPUs: a waiter spins at most what a sleep
 * costs (less if its learned budget is smaller), whatever it learned;
 * not crowded, its learned budget. */
static void crowded(void)
{
	ntbx_spin_test_wake(WAKE);
	CHECK_EQ(ntbx_spin_wake_ns(), WAKE);
	struct ntbx_spin s = { NTBX_SPIN_CAP_NS, 0, 0 };
	ntbx_spin_test_load(2, 8);   /* four ping-pong pairs on two CPUs */
	CHECK(ntbx_spin_crowded());
	CHECK_EQ(ntbx_spin_begin(&s), WAKE);
	CHECK_EQ(s.mode, NTBX_SPIN_CROWDED);
	for (int i = 0; i < 100; i++) {   /* hits do not lift it */
		ntbx_spin_end(&s, 200, 0);
		CHECK(ntbx_spin_begin(&s) <= WAKE);
	}
	struct ntbx_spin small = { 3 * US, 0, 0 };
	CHECK_EQ(ntbx_spin_begin(&small), 3 * US);
	ntbx_spin_test_load(1, 2);   /* one CPU (affinity or quota) */
	CHECK(ntbx_spin_crowded());
	CHECK(ntbx_spin_begin(&s) <= WAKE);
	ntbx_spin_test_load(64, 2);
	CHECK(!ntbx_spin_crowded());
	CHECK_EQ(ntbx_spin_begin(&s), NTBX_SPIN_CAP_NS);
	CHECK_EQ(s.mode, NTBX_SPIN_FREE);

	int ncpu, running;
	ntbx_spin_test_load(3, 5);
	ntbx_spin_load(&ncpu, &running);
	CHECK_EQ(ncpu, 3);
	CHECK_EQ(running, 5);
}

/* Crowded, a socket site's spin that ended in a sleep anyway was pure
 * loss: the budget halves (down to the floor), where uncrowded the same
 * wait, short enough for a spin to have caught it, raises it to the
 * wait's length.  Hits still grow it, so a waiter whose peer answers while
 * both run keeps spinning.  The other sites (queue pairs, forwarders,
 * OpenSHMEM: ntbx_spin_begin*) keep the old rule when crowded too. */
static void crowded_failed(void)
{
	ntbx_spin_test_wake(WAKE);
	ntbx_spin_test_load(2, 8);
	struct ntbx_spin s = { 16 * US, 0, 0 };
	CHECK_EQ(ntbx_spin_begin_halving(&s, -1, ntbx_now_ns()), 16 * US);
	CHECK_EQ(s.mode, NTBX_SPIN_CROWDED);
	ntbx_spin_end(&s, 18 * US, 1);   /* spun 16 us, then slept */
	CHECK_EQ(ntbx_spin_begin_halving(&s, -1, ntbx_now_ns()), 8 * US);
	for (int i = 0; i < 20; i++) {
		ntbx_spin_end(&s, 12 * US, 1);
		ntbx_spin_begin_halving(&s, -1, ntbx_now_ns());
	}
	CHECK_EQ(ntbx_spin_begin_halving(&s, -1, ntbx_now_ns()),
	         NTBX_SPIN_FLOOR_NS);
	ntbx_spin_end(&s, 200, 0);       /* a hit: grows again */
	CHECK(ntbx_spin_begin_halving(&s, -1, ntbx_now_ns()) >
	      NTBX_SPIN_FLOOR_NS);
	struct ntbx_spin q = { 8 * US, 0, 0 };   /* a queue pair's site */
	CHECK_EQ(ntbx_spin_begin(&q), 8 * US);
	ntbx_spin_end(&q, 18 * US, 1);
	CHECK_EQ(ntbx_spin_begin(&q), 18 * US);
	/* not crowded: the old rule, a spin would have caught it */
	ntbx_spin_test_load(2, 1);
	struct ntbx_spin f = { 8 * US, 0, 0 };
	CHECK_EQ(ntbx_spin_begin_halving(&f, -1, ntbx_now_ns()), 8 * US);
	ntbx_spin_end(&f, 18 * US, 1);
	CHECK_EQ(ntbx_spin_begin_halving(&f, -1, ntbx_now_ns()), 18 * US);
	/* NTBX_SPIN_US: fixed, nothing learned */
	ntbx_spin_test_load(2, 8);
	ntbx_spin_test_fixed(7);
	CHECK_EQ(ntbx_spin_begin_halving(&f, -1, ntbx_now_ns()), 7 * US);
	ntbx_spin_end(&f, 18 * US, 1);
	ntbx_spin_test_fixed(-1);
	CHECK_EQ(f.budget_ns, 18 * US);
	ntbx_spin_test_load(2, 1);
}

/* Hysteresis: our own spinners are runnable and our sleepers are not, so
 * exactly as many runnable threads as CPUs keeps the decision for a while;
 * fewer leaves it at once, more enters it at once. */
static void hysteresis(void)
{
	ntbx_spin_test_load(2, 1);
	CHECK(!ntbx_spin_crowded());
	ntbx_spin_test_load(2, 2);   /* one pair spinning: not crowded */
	CHECK(!ntbx_spin_crowded());
	ntbx_spin_test_load(2, 3);   /* and something else: crowded */
	CHECK(ntbx_spin_crowded());
	for (int i = 1; i < NTBX_SPIN_CALM; i++) {
		ntbx_spin_test_load(2, 2);   /* a pair asleep and one other */
		CHECK(ntbx_spin_crowded());
	}
	ntbx_spin_test_load(2, 2);
	CHECK(!ntbx_spin_crowded());     /* calm long enough */
	ntbx_spin_test_load(2, 3);
	ntbx_spin_test_load(2, 2);
	ntbx_spin_test_load(2, 3);       /* crowded again: calm starts over */
	for (int i = 1; i < NTBX_SPIN_CALM; i++)
		ntbx_spin_test_load(2, 2);
	CHECK(ntbx_spin_crowded());
	ntbx_spin_test_load(2, 1);       /* a CPU idle: at once */
	CHECK(!ntbx_spin_crowded());
}

/* The peer we wait for last ran on our CPU: it cannot run while we spin,
 * so no spin at all (and nothing learned); elsewhere or not known: the
 * budget as usual. */
static void near(void)
{
	int cpu = sched_getcpu();
	REQUIRE(cpu >= 0);
	cpu_set_t one, old;
	REQUIRE(sched_getaffinity(0, sizeof old, &old) == 0);
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0);
	ntbx_spin_test_load(2, 1);
	struct ntbx_spin s = { 30 * US, 0, 0 };
	CHECK_EQ(ntbx_spin_begin_for(&s, cpu, ntbx_now_ns()), 0);
	CHECK_EQ(s.mode, NTBX_SPIN_NEAR);
	ntbx_spin_end(&s, 10ull * 1000 * US, 1);
	CHECK_EQ(ntbx_spin_begin_for(&s, cpu + 1, ntbx_now_ns()), 30 * US);
	CHECK_EQ(ntbx_spin_begin_for(&s, -1, ntbx_now_ns()), 30 * US);
	ntbx_spin_test_load(2, 8);
	CHECK_EQ(ntbx_spin_begin_for(&s, cpu, ntbx_now_ns()), 0);
	CHECK_EQ(ntbx_spin_begin_for(&s, cpu + 1, ntbx_now_ns()), WAKE);
	sched_setaffinity(0, sizeof old, &old);
}

/* The machine's own counts: at least one CPU and no more than the
 * affinity mask allows; at least one runnable thread (this one).  The
 * cost of a sleep, measured in the background, within floor and cap. */
static void real_counts(void)
{
	ntbx_spin_test_load(0, 0);
	int ncpu = 0, running = 0;
	ntbx_spin_load(&ncpu, &running);
	cpu_set_t set;
	REQUIRE(sched_getaffinity(0, sizeof set, &set) == 0);
	CHECK(ncpu >= 1);
	CHECK(ncpu <= CPU_COUNT(&set));
	CHECK(running >= 1);
	struct ntbx_spin s = { 0 };
	uint64_t b = ntbx_spin_begin(&s);
	CHECK(b <= NTBX_SPIN_CAP_NS);
	ntbx_spin_test_wake(0);   /* measure again */
	uint32_t w = ntbx_spin_wake_ns();
	uint64_t t0 = ntbx_now_ns();
	while (w == NTBX_SPIN_FLOOR_NS && ntbx_now_ns() - t0 < 10000000000ull) {
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
		w = ntbx_spin_wake_ns();
	}
	CHECK(w >= NTBX_SPIN_FLOOR_NS && w <= NTBX_SPIN_CAP_NS);
	fprintf(stderr, "test_spin: a sleep and wake-up costs %u ns here\n", w);
}

/* Real waits on a loopback queue pair, crowded: the wait sleeps on the
 * doorbell (the queue pair counts it) instead of spinning or yielding
 * through its 30 ms, and a write from another thread wakes it. */
struct writer { struct ntbx_qp *q; };

static void *late_write(void *arg)
{
	struct writer *w = arg;
	struct timespec ts = { 0, 20000000 };
	nanosleep(&ts, NULL);
	char c = 'x';
	ntbx_qp_write(w->q, &c, 1, NTBX_QP_NONBLOCK);
	return NULL;
}

static void real_wait(void)
{
	th_fabric("spin", 2, NTBX_TOPO_SWITCH, 4 << 20, 0);
	struct ntbx_fabric *f = th_join("spin", 0, 0);
	struct ntbx_qp *q[2];
	struct ntbx_qp_opts o = { 64u << 10, 0 };
	th_qp_loopback(f, &o, &q[0], NULL, &q[1], NULL);

	ntbx_spin_test_load(2, 8);
	ntbx_spin_test_wake(WAKE);
	int y0 = __atomic_load_n(&yields, __ATOMIC_RELAXED);
	struct ntbx_qp_stats st0, st1;
	ntbx_qp_get_stats(q[0], &st0);
	uint64_t c0 = cpu_ns(), t0 = ntbx_now_ns();
	int m = ntbx_qp_wait(q[0], NTBX_QP_READABLE, 30);
	uint64_t took = ntbx_now_ns() - t0, used = cpu_ns() - c0;
	ntbx_qp_get_stats(q[0], &st1);
	CHECK_EQ(m, -ETIMEDOUT);
	CHECK(took >= 30ull * 1000 * US);
	CHECK(st1.sleeps > st0.sleeps);
	/* it slept rather than spun or yielded through the 30 ms */
	CHECK(used < 10ull * 1000 * US);

	/* woken by the peer's write */
	pthread_t t;
	struct writer w = { q[1] };
	ntbx_qp_get_stats(q[0], &st0);
	REQUIRE(pthread_create(&t, NULL, late_write, &w) == 0);
	m = ntbx_qp_wait(q[0], NTBX_QP_READABLE, 5000);
	pthread_join(t, NULL);
	ntbx_qp_get_stats(q[0], &st1);
	CHECK(m > 0 && (m & NTBX_QP_READABLE));
	CHECK(st1.sleeps > st0.sleeps);
	char c;
	CHECK_EQ(ntbx_qp_read(q[0], &c, 1, NTBX_QP_NONBLOCK), 1);
	CHECK_EQ(__atomic_load_n(&yields, __ATOMIC_RELAXED), y0);

	ntbx_spin_test_load(0, 0);
	ntbx_qp_close(q[0], 1);
	ntbx_qp_close(q[1], 1);
	ntbx_fabric_leave(f);
	ntbx_fabric_destroy("spin");
}

/* NTBX_SPIN_US set: exactly that budget, whatever the load, the peer's
 * CPU and the history, and no learning; 0 sleeps at once. */
static void override(void)
{
	setenv("NTBX_SPIN_US", "70", 1);
	ntbx_spin_test_fixed(-2);    /* read the environment again */
	struct ntbx_spin s = { 0 };
	ntbx_spin_test_load(2, 8);   /* crowded: 70 us all the same */
	CHECK_EQ(ntbx_spin_begin(&s), 70 * US);
	CHECK_EQ(s.mode, NTBX_SPIN_FIXED);
	CHECK_EQ(ntbx_spin_begin_for(&s, sched_getcpu(), ntbx_now_ns()),
	         70 * US);
	for (int i = 0; i < 10; i++)
		ntbx_spin_end(&s, 10ull * 1000 * US, 1);
	ntbx_spin_test_load(2, 1);
	CHECK_EQ(ntbx_spin_begin(&s), 70 * US);
	for (int i = 0; i < 10; i++)
		ntbx_spin_end(&s, 100, 0);
	CHECK_EQ(ntbx_spin_begin(&s), 70 * US);
	ntbx_spin_test_fixed(0);
	CHECK_EQ(ntbx_spin_begin(&s), 0);
	/* unset: adaptive again */
	unsetenv("NTBX_SPIN_US");
	ntbx_spin_test_fixed(-2);
	struct ntbx_spin a = { 0 };
	CHECK_EQ(ntbx_spin_begin(&a), NTBX_SPIN_INIT_NS);
	CHECK(a.mode != NTBX_SPIN_FIXED);
}

/* A group that counts its sleepers (OpenSHMEM's PEs): its waiter spins
 * the policy's budget while the awake members fit on the CPUs, at most a
 * sleep's round trip with one more (none if its budget is none), and the
 * budget grows and shrinks as before; NTBX_SPIN_US overrides the count. */
static void group(void)
{
	ntbx_spin_test_wake(WAKE);
	ntbx_spin_test_load(2, 1);   /* the machine looks calm */
	struct ntbx_spin s = { NTBX_SPIN_CAP_NS, 0, 0 };
	uint64_t b = ntbx_spin_begin(&s);
	CHECK_EQ(b, NTBX_SPIN_CAP_NS);
	CHECK_EQ(ntbx_spin_group(&s, b, 1), b);      /* alone awake */
	CHECK_EQ(ntbx_spin_group(&s, b, 2), b);      /* one per CPU */
	CHECK_EQ(ntbx_spin_group(&s, b, 3), WAKE);   /* 4 PEs, one asleep */
	CHECK_EQ(ntbx_spin_group(&s, b, 8), WAKE);
	/* the budget under it still learns: long waits that slept shrink
	 * it, below a sleep's cost too; hits grow it */
	ntbx_spin_end(&s, 10ull * 1000 * US, 1);
	b = ntbx_spin_begin(&s);
	CHECK_EQ(b, NTBX_SPIN_CAP_NS / 2);
	CHECK_EQ(ntbx_spin_group(&s, b, 2), b);
	CHECK_EQ(ntbx_spin_group(&s, b, 3), WAKE);
	for (int i = 0; i < 10; i++)
		ntbx_spin_end(&s, 10ull * 1000 * US, 1);
	b = ntbx_spin_begin(&s);
	CHECK_EQ(b, NTBX_SPIN_FLOOR_NS);
	CHECK_EQ(ntbx_spin_group(&s, b, 3), NTBX_SPIN_FLOOR_NS);
	for (int i = 0; i < 50; i++)
		ntbx_spin_end(&s, 200, 0);
	uint64_t grown = ntbx_spin_begin(&s);
	CHECK(grown > WAKE);
	CHECK_EQ(ntbx_spin_group(&s, grown, 2), grown);
	CHECK_EQ(ntbx_spin_group(&s, grown, 3), WAKE);
	/* crowded by the run queue: the group does not lift the cap */
	ntbx_spin_test_load(2, 8);
	uint64_t c = ntbx_spin_begin(&s);
	CHECK(c <= WAKE);
	CHECK_EQ(ntbx_spin_group(&s, c, 1), c);
	CHECK_EQ(ntbx_spin_group(&s, c, 3), c);
	/* more CPUs (affinity, quota): more awake members fit */
	ntbx_spin_test_load(4, 1);
	b = ntbx_spin_begin(&s);
	CHECK(b > WAKE);
	CHECK_EQ(ntbx_spin_group(&s, b, 4), b);
	CHECK_EQ(ntbx_spin_group(&s, b, 5), WAKE);
	/* no budget (the peer on our CPU: near()) stays none */
	CHECK_EQ(ntbx_spin_group(&s, 0, 1), 0);
	CHECK_EQ(ntbx_spin_group(&s, 0, 5), 0);
	/* NTBX_SPIN_US (as override() sets it; the variable itself is read
	 * once a process): its budget whatever the count */
	ntbx_spin_test_fixed(70);
	struct ntbx_spin f = { 0 };
	b = ntbx_spin_begin(&f);
	CHECK_EQ(b, 70 * US);
	CHECK_EQ(ntbx_spin_group(&f, b, 1), 70 * US);
	CHECK_EQ(ntbx_spin_group(&f, b, 5), 70 * US);
	ntbx_spin_test_fixed(0);
	CHECK_EQ(ntbx_spin_group(&f, ntbx_spin_begin(&f), 1), 0);
	ntbx_spin_test_fixed(-2);
	b = ntbx_spin_begin(&f);   /* adaptive again */
	CHECK(f.mode != NTBX_SPIN_FIXED);
	CHECK(ntbx_spin_group(&f, b, 5) <= WAKE);
	ntbx_spin_test_load(0, 0);   /* real counts again */
}

/* This thread's context switches so far (what ntbx_spin_turn reads). */
static long switches(void)
{
	struct rusage ru;
	getrusage(RUSAGE_THREAD, &ru);
	return ru.ru_nvcsw + ru.ru_nivcsw;
}

/* A run of @ns, then a call into a wait: 1 if the policy yielded, 0 if
 * not, -1 if the kernel switched this thread out meanwhile (a turn taken
 * already: nothing to assert).  The first call looks (and starts the
 * turn); the busy loop makes no system call. */
static uint64_t skew;   /* added to the clock: each run past the last look */

static int run_a_turn(uint64_t ns)
{
	/* a sleep: a switch, so that the first look starts the turn afresh
	 * (whatever an earlier run left); counted from before that look, so
	 * that a switch right after it shows too */
	struct timespec us = { 0, 1000 };
	nanosleep(&us, NULL);
	long c0 = switches();
	skew += 1000000000ull;
	ntbx_spin_turn(ntbx_now_ns() + skew);
	int y0 = __atomic_load_n(&yields, __ATOMIC_RELAXED);
	uint64_t t = ntbx_now_ns();
	while (ntbx_now_ns() - t < ns)
		ntbx_cpu_relax();
	int r = ntbx_spin_turn(ntbx_now_ns() + skew);
	if (switches() != c0)
		return -1;
	CHECK_EQ(__atomic_load_n(&yields, __ATOMIC_RELAXED) - y0, r);
	return r;
}

/* Taking turns (spin.c): a thread that ran a turn (0.75 ms) without
 * being switched out yields at its next wait while the machine is
 * crowded; not when it is not crowded, not after a shorter run, not with
 * NTBX_SPIN_US set; and a look within 100 us of the last one makes no
 * decision.  Tries until a run is not preempted (a loaded machine). */
static void takes_turns(void)
{
	int y0 = __atomic_load_n(&yields, __ATOMIC_RELAXED);
	ntbx_spin_test_fixed(-1);
	struct { int load, fixed; uint64_t ns; int want; } c[] = {
		{ 8, -1, 1500000, 1 },   /* crowded, ran two turns */
		{ 8, -1, 100000, 0 },    /* crowded, ran a seventh of one */
		{ 1, -1, 1500000, 0 },   /* not crowded */
		{ 8, 5, 1500000, 0 },    /* NTBX_SPIN_US=5 */
	};
	for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
		ntbx_spin_test_load(2, c[k].load);
		ntbx_spin_test_fixed(c[k].fixed);
		int r = -1;
		for (int i = 0; i < 200 && r < 0; i++)
			r = run_a_turn(c[k].ns);
		CHECK_EQ(r, c[k].want);
	}
	ntbx_spin_test_fixed(-1);
	ntbx_spin_test_load(2, 8);
	/* right after a look: no decision, whatever ran before */
	skew += 1000000000ull;
	uint64_t now = ntbx_now_ns() + skew;
	ntbx_spin_turn(now);
	CHECK_EQ(ntbx_spin_turn(now + 50000), 0);
	/* a sleep (a voluntary switch) starts a new turn */
	CHECK_EQ(ntbx_spin_turn(now + 200000), 0);
	struct timespec ms = { 0, 1000000 };
	nanosleep(&ms, NULL);
	CHECK_EQ(ntbx_spin_turn(now + 1200000), 0);   /* switched: restarts */
	ntbx_spin_test_fixed(-2);
	__atomic_store_n(&yields, y0, __ATOMIC_RELAXED);
}

int main(void)
{
	th_init("spin");
	/* the counter works (the library is linked into this executable:
	 * its calls resolve to the definition above as this one does) */
	sched_yield();
	REQUIRE(__atomic_load_n(&yields, __ATOMIC_RELAXED) == 1);
	yields = 0;
	unsetenv("NTBX_SPIN_US");
	ntbx_spin_test_fixed(-2);
	ntbx_spin_test_wake(WAKE);
	grows();
	shrinks();
	crowded();
	crowded_failed();
	hysteresis();
	near();
	real_wait();
	override();
	group();
	real_counts();
	CHECK_EQ(__atomic_load_n(&yields, __ATOMIC_RELAXED), 0);
	takes_turns();
	return th_done("test_spin");
}
