/* The wait policy (src/util/spin.c): its decisions, with the machine's CPU
 * and runnable counts injected through ntbx_spin_test_load rather than by
 * loading the machine, and waits described by their lengths rather than
 * timed.  Also: the real counts are sane, and NTBX_SPIN_US fixes the
 * budget. */
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>

#include "harness.h"
#include "util/util.h"

#define US 1000u

/* A hit (the wait ended while spinning) never shrinks the budget, grows
 * it while below the cap, and never passes the cap. */
static void grows(void)
{
	ntbx_spin_test_load(2, 1);   /* one runnable (us), two CPUs */
	struct ntbx_spin s = { 0, 0 };
	uint64_t b = ntbx_spin_begin(&s);
	CHECK_EQ(b, NTBX_SPIN_INIT_NS);
	CHECK_EQ(s.mode, NTBX_SPIN_IDLE);
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
	struct ntbx_spin s = { NTBX_SPIN_CAP_NS, 0 };
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

/* How a waiter spins, by load: a CPU idle beside ours: pause only; every
 * CPU busy: pause 2 us, then yield; more runnable threads than CPUs: no
 * pause at all, a yield between any two polls. */
static void by_load(void)
{
	struct ntbx_spin s = { 0, 0 };
	ntbx_spin_test_load(4, 2);
	ntbx_spin_begin(&s);
	CHECK_EQ(s.mode, NTBX_SPIN_IDLE);
	CHECK(!ntbx_spin_yields(&s, 0));
	CHECK(!ntbx_spin_yields(&s, 40 * US));

	ntbx_spin_test_load(2, 2);
	ntbx_spin_begin(&s);
	CHECK_EQ(s.mode, NTBX_SPIN_FULL);
	CHECK(!ntbx_spin_yields(&s, 0));
	CHECK(ntbx_spin_yields(&s, 2 * US));

	ntbx_spin_test_load(2, 8);   /* four ping-pong pairs on two CPUs */
	ntbx_spin_begin(&s);
	CHECK_EQ(s.mode, NTBX_SPIN_CROWDED);
	CHECK(ntbx_spin_yields(&s, 0));
	CHECK(ntbx_spin_yields(&s, 1));
	CHECK(ntbx_spin_crowded());
	ntbx_spin_test_load(1, 2);   /* one CPU (affinity or quota) */
	CHECK(ntbx_spin_crowded());
	ntbx_spin_begin(&s);
	CHECK(ntbx_spin_yields(&s, 0));
	ntbx_spin_test_load(64, 2);
	CHECK(!ntbx_spin_crowded());

	int ncpu, running;
	ntbx_spin_test_load(3, 5);
	ntbx_spin_load(&ncpu, &running);
	CHECK_EQ(ncpu, 3);
	CHECK_EQ(running, 5);
}

/* The machine's own counts: at least one CPU and no more than the
 * affinity mask allows; at least one runnable thread (this one). */
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
	struct ntbx_spin s = { 0, 0 };
	uint64_t b = ntbx_spin_begin(&s);
	CHECK(b >= NTBX_SPIN_FLOOR_NS && b <= NTBX_SPIN_CAP_NS);
}

/* NTBX_SPIN_US set: exactly that budget, whatever the load and the
 * history, and no learning; 0 sleeps at once. */
static void override(void)
{
	setenv("NTBX_SPIN_US", "7", 1);
	ntbx_spin_test_fixed(-2);    /* read the environment again */
	struct ntbx_spin s = { 0, 0 };
	ntbx_spin_test_load(2, 8);
	CHECK_EQ(ntbx_spin_begin(&s), 7 * US);
	CHECK_EQ(s.mode, NTBX_SPIN_FIXED);
	CHECK(!ntbx_spin_yields(&s, 1 * US));   /* pause 2 us, then yield */
	CHECK(ntbx_spin_yields(&s, 3 * US));
	for (int i = 0; i < 10; i++)
		ntbx_spin_end(&s, 10ull * 1000 * US, 1);
	ntbx_spin_test_load(2, 1);
	CHECK_EQ(ntbx_spin_begin(&s), 7 * US);
	for (int i = 0; i < 10; i++)
		ntbx_spin_end(&s, 100, 0);
	CHECK_EQ(ntbx_spin_begin(&s), 7 * US);
	ntbx_spin_test_fixed(0);
	CHECK_EQ(ntbx_spin_begin(&s), 0);
	/* unset: adaptive again */
	unsetenv("NTBX_SPIN_US");
	ntbx_spin_test_fixed(-2);
	struct ntbx_spin a = { 0, 0 };
	CHECK_EQ(ntbx_spin_begin(&a), NTBX_SPIN_INIT_NS);
	CHECK(a.mode != NTBX_SPIN_FIXED);
}

int main(void)
{
	unsetenv("NTBX_SPIN_US");
	ntbx_spin_test_fixed(-2);
	grows();
	shrinks();
	by_load();
	real_counts();
	override();
	return th_done("test_spin");
}
