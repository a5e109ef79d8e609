/* The group's yield decision (src/util/spin.c, ntbx_spin_group_yield):
 * a waiter of a group whose awake members outnumber the CPUs yields
 * while the foreign runnable threads leave the group a CPU (fewer
 * foreign threads than CPUs), sleeps (no yield) against a foreign thread
 * per CPU, spins (no yield) while the members fit on the CPUs of a
 * machine that is not crowded (unless its peer last ran on its own CPU:
 * then a yield, hop16), yields beside foreign load even while they fit
 * (a member that sleeps there costs the next hand-over a wake-up behind
 * a foreign slice), and never yields under NTBX_SPIN_US, nor for
 * 20 ms after a yield that ran long (unless a start-up's end forgets it,
 * with the samples: restart).  The
 * counts are injected (ntbx_spin_test_load) and the clock passed in, so
 * that the half-millisecond samples and their window are stepped through
 * rather than waited for.  Then the real counts: beside busy threads of
 * this process that the group does not count, no yield; with every
 * runnable thread counted as the group's, a yield. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "util/util.h"

#define MS 1000000ull

/* A waiter whose mode the adaptive policy set (the machine looks calm). */
static struct ntbx_spin adaptive(void)
{
	struct ntbx_spin s = { 0 };
	ntbx_spin_begin(&s);
	CHECK(s.mode == NTBX_SPIN_FREE || s.mode == NTBX_SPIN_CROWDED);
	return s;
}

/* 4 PEs on 2 CPUs, the 4 the only runnable threads: yield; a fifth
 * runnable thread (a foreign busy loop, fewer than the CPUs): yield; a
 * foreign busy loop per CPU: no yield. */
static void ours_or_foreign(void)
{
	ntbx_spin_test_load(2, 4);
	struct ntbx_spin s = adaptive();
	uint64_t t = 10 * MS;
	CHECK_EQ(ntbx_spin_group_yield(&s, 4, t), 1);
	CHECK_EQ(ntbx_spin_group_yield(&s, 4, t + 1000), 1);   /* cached */
	ntbx_spin_test_load(2, 5);
	CHECK_EQ(ntbx_spin_group_yield(&s, 4, t), 1);
	ntbx_spin_test_load(2, 6);
	CHECK_EQ(ntbx_spin_group_yield(&s, 4, t), 0);
	/* fewer of ours awake, the same two foreign threads: still foreign */
	ntbx_spin_test_load(2, 5);
	CHECK_EQ(ntbx_spin_group_yield(&s, 3, t), 0);
	/* one foreign thread while 2 of ours fit on the 2 CPUs: the machine
	 * is crowded, and a member that slept would be woken behind it:
	 * yield */
	ntbx_spin_test_load(2, 3);
	CHECK_EQ(ntbx_spin_group_yield(&s, 2, t), 1);
	CHECK_EQ(ntbx_spin_group_yield(&s, 1, t), 1);
	/* 8 PEs, 8 runnable: ours */
	ntbx_spin_test_load(2, 8);
	CHECK_EQ(ntbx_spin_group_yield(&s, 8, t), 1);
	/* the counts: running less the awake members; unknown is foreign */
	CHECK_EQ(ntbx_spin_foreign_runnable(5, 4), 1);
	CHECK_EQ(ntbx_spin_foreign_runnable(3, 4), -1);
	CHECK(ntbx_spin_foreign_runnable(-1, 4) > 0);
}

/* While the awake members fit on the CPUs of a machine that is not
 * crowded (no more runnable threads than CPUs), the waiter spins: no
 * yield. */
static void fits(void)
{
	ntbx_spin_test_load(2, 1);   /* below the CPUs: not crowded */
	ntbx_spin_test_load(2, 2);
	struct ntbx_spin s = adaptive();
	CHECK_EQ(ntbx_spin_group_yield(&s, 1, 10 * MS), 0);
	CHECK_EQ(ntbx_spin_group_yield(&s, 2, 10 * MS), 0);
	ntbx_spin_test_load(4, 4);   /* more CPUs: 4 fit */
	s = adaptive();
	CHECK_EQ(ntbx_spin_group_yield(&s, 4, 10 * MS), 0);
	ntbx_spin_test_load(4, 6);   /* 5 of ours and a stranger: 3 CPUs left */
	CHECK_EQ(ntbx_spin_group_yield(&s, 5, 10 * MS), 1);
	ntbx_spin_test_load(4, 9);   /* 5 of ours and a stranger per CPU */
	CHECK_EQ(ntbx_spin_group_yield(&s, 5, 10 * MS), 0);
	ntbx_spin_test_load(4, 5);
	CHECK_EQ(ntbx_spin_group_yield(&s, 5, 10 * MS), 1);
}

/* The least foreign count of the last 4 samples (2 ms) decides: a member
 * on its way out of a sleep (runnable, still counted asleep) in one sample
 * does not stop the yields; foreign load in every sample of the window
 * does, within the window. */
static void window(void)
{
	ntbx_spin_test_load(2, 8);   /* forget; 8 runnable from here on */
	struct ntbx_spin s = adaptive();
	uint64_t t = 100 * MS;
	CHECK_EQ(ntbx_spin_group_yield(&s, 8, t), 1);   /* all ours */
	/* the next samples see 6 awake of the 8 runnable (two woken, not yet
	 * running: as many "strangers" as CPUs): the clean sample still in
	 * the window decides */
	int yes = 0;
	for (int k = 1; k <= 3; k++)
		yes += ntbx_spin_group_yield(&s, 6, t + k * MS / 2);
	CHECK_EQ(yes, 3);
	/* a fourth such sample pushes the clean one out */
	CHECK_EQ(ntbx_spin_group_yield(&s, 6, t + 4 * MS / 2), 0);
	/* not sampled again before half a millisecond: still no */
	CHECK_EQ(ntbx_spin_group_yield(&s, 8, t + 4 * MS / 2 + 1000), 0);
	/* one clean sample: yes again */
	CHECK_EQ(ntbx_spin_group_yield(&s, 8, t + 5 * MS / 2), 1);
	/* new counts (the window forgotten): the first sample decides */
	ntbx_spin_test_load(2, 100);
	CHECK_EQ(ntbx_spin_group_yield(&s, 6, t), 0);
}

/* NTBX_SPIN_US fixes the wait: no yields. */
static void overrides(void)
{
	ntbx_spin_test_load(2, 4);
	ntbx_spin_test_fixed(70);
	struct ntbx_spin f = { 0 };
	ntbx_spin_begin(&f);
	CHECK_EQ(f.mode, NTBX_SPIN_FIXED);
	CHECK_EQ(ntbx_spin_group_yield(&f, 4, 10 * MS), 0);
	ntbx_spin_test_fixed(0);
	ntbx_spin_begin(&f);
	CHECK_EQ(ntbx_spin_group_yield(&f, 4, 10 * MS), 0);
	ntbx_spin_test_fixed(-2);   /* adaptive again */
	struct ntbx_spin a = adaptive();
	CHECK_EQ(ntbx_spin_group_yield(&a, 4, 10 * MS), 1);
}

/* A peer on the waiter's CPU (NTBX_SPIN_NEAR: a relay's progress thread
 * and the PE that puts through it, hop16): no spin, and a yield while
 * the runnable load is the group's, even while the members fit on the
 * CPUs (no spin could catch that peer); against foreign load no yield
 * (it sleeps at once, as before), nor under NTBX_SPIN_US. */
static void near_peer(void)
{
	ntbx_spin_test_load(2, 2);   /* 2 CPUs, 2 runnable: ours */
	struct ntbx_spin n = { 0 };
	CHECK_EQ(ntbx_spin_begin_for(&n, sched_getcpu(), ntbx_now_ns()), 0);
	CHECK_EQ(n.mode, NTBX_SPIN_NEAR);
	CHECK_EQ(ntbx_spin_group_yield(&n, 2, 10 * MS), 1);
	struct ntbx_spin a = adaptive();   /* the same counts, peer elsewhere */
	CHECK_EQ(ntbx_spin_group_yield(&a, 2, 10 * MS), 0);   /* spins */
	ntbx_spin_test_load(2, 3);   /* a stranger beside our 2 */
	CHECK_EQ(ntbx_spin_group_yield(&n, 2, 10 * MS), 1);
	ntbx_spin_test_load(2, 4);   /* a stranger per CPU beside our 2 */
	CHECK_EQ(ntbx_spin_group_yield(&n, 2, 10 * MS), 0);
	ntbx_spin_test_load(2, 6);   /* 4 of ours and 2 strangers */
	CHECK_EQ(ntbx_spin_group_yield(&n, 4, 10 * MS), 0);
	ntbx_spin_test_load(2, 4);   /* 4 of ours */
	CHECK_EQ(ntbx_spin_group_yield(&n, 4, 10 * MS), 1);
	/* a long yield with a stranger per CPU runnable after it stops
	 * these too */
	ntbx_spin_group_yield_long(2, 10 * MS);
	CHECK_EQ(ntbx_spin_group_yield(&n, 4, 11 * MS), 0);
	ntbx_spin_test_fixed(5);
	struct ntbx_spin f = { 0 };
	CHECK_EQ(ntbx_spin_begin_for(&f, sched_getcpu(), ntbx_now_ns()), 5000);
	CHECK_EQ(f.mode, NTBX_SPIN_FIXED);
	ntbx_spin_test_load(2, 2);
	CHECK_EQ(ntbx_spin_group_yield(&f, 2, 10 * MS), 0);
	ntbx_spin_test_fixed(-2);
}

/* A yield that ran long with a stranger per CPU runnable right after (4
 * runnable, 2 members awake): no yields for 20 ms, whatever the samples
 * say, then yields again.  One that ran long with fewer strangers than
 * CPUs runnable (a member computing, or a loop the group yields beside)
 * stops nothing, but a second within 20 ms of it does (a stranger the
 * counts keep missing). */
static void long_yield(void)
{
	ntbx_spin_test_load(2, 4);
	struct ntbx_spin s = adaptive();
	uint64_t t = 50 * MS;
	CHECK_EQ(ntbx_spin_group_yield(&s, 4, t), 1);
	ntbx_spin_group_yield_long(2, t);
	CHECK_EQ(ntbx_spin_group_yield(&s, 4, t + 1 * MS), 0);
	CHECK_EQ(ntbx_spin_group_yield(&s, 4, t + 19 * MS), 0);
	CHECK_EQ(ntbx_spin_group_yield(&s, 4, t + 21 * MS), 1);
	/* a member computing (or one stranger), 30 ms after the last long
	 * yield */
	ntbx_spin_group_yield_long(3, t + 30 * MS);
	CHECK_EQ(ntbx_spin_group_yield(&s, 4, t + 30 * MS + 1000), 1);
	/* another 5 ms later: a pause, though the sample is clean */
	ntbx_spin_group_yield_long(4, t + 35 * MS);
	CHECK_EQ(ntbx_spin_group_yield(&s, 4, t + 36 * MS), 0);
	CHECK_EQ(ntbx_spin_group_yield(&s, 4, t + 54 * MS), 0);
	CHECK_EQ(ntbx_spin_group_yield(&s, 4, t + 56 * MS), 1);
}

/* The end of a start-up (ntbx_spin_group_restart): a long yield's pause
 * and a window of samples that said "foreign" are forgotten, and the next
 * sample decides; if that one sees foreign load, still no yield. */
static void restart(void)
{
	ntbx_spin_test_load(2, 5);
	struct ntbx_spin s = adaptive();
	uint64_t t = 300 * MS;
	CHECK_EQ(ntbx_spin_group_yield(&s, 5, t), 1);
	ntbx_spin_group_yield_long(3, t);   /* strangers, or so it looked */
	CHECK_EQ(ntbx_spin_group_yield(&s, 5, t + MS), 0);
	ntbx_spin_group_restart();
	CHECK_EQ(ntbx_spin_group_yield(&s, 5, t + MS), 1);
	/* start-up samples among sleepers being woken: 3 of 5 counted awake
	 * with 5 runnable, in every sample of the window (the clean one is
	 * pushed out by the fourth) */
	for (int k = 0; k < 4; k++)
		CHECK_EQ(ntbx_spin_group_yield(&s, 3, t + 2 * MS + k * MS / 2),
		         k < 3);
	/* without a restart they decide until the next sample is due, even
	 * though the PEs are all awake now */
	CHECK_EQ(ntbx_spin_group_yield(&s, 5, t + 3 * MS + MS / 2 + 1000), 0);
	ntbx_spin_group_restart();
	CHECK_EQ(ntbx_spin_group_yield(&s, 5, t + 3 * MS + MS / 2 + 2000), 1);
	/* a foreign thread per CPU in the first sample after a restart: no
	 * yield */
	ntbx_spin_group_restart();
	ntbx_spin_test_load(2, 6);
	CHECK_EQ(ntbx_spin_group_yield(&s, 4, t + 5 * MS), 0);
}

static int stop;
static void *busy(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED))
		;
	return NULL;
}

/* The real run queue (/proc/loadavg): busy threads the group does not
 * count are foreign; counted as the group's (more awake members than
 * anything could run), they are not. */
static void real_counts(void)
{
	ntbx_spin_test_load(0, 0);   /* the machine's counts again */
	int ncpu = 0, running = 0;
	ntbx_spin_load(&ncpu, &running);
	REQUIRE(ncpu >= 1);
	/* a foreign busy thread per CPU and more: ncpu + 1 strangers */
	enum { MAXB = 64 };
	int nb = 2 * ncpu + 1;
	if (nb > MAXB) {
		fprintf(stderr, "skip real counts: %d CPUs\n", ncpu);
		return;
	}
	pthread_t t[MAXB];
	for (int i = 0; i < nb; i++)
		REQUIRE(pthread_create(&t[i], NULL, busy, NULL) == 0);
	struct ntbx_spin s = adaptive();
	uint64_t now = ntbx_now_ns();
	/* the group is the waiter and ncpu others: nb + 1 runnable at
	 * least, ncpu + 1 counted, so at least ncpu strangers */
	int yes = 0;
	for (int k = 0; k < 8; k++)
		yes += ntbx_spin_group_yield(&s, ncpu + 1, now + k * MS);
	CHECK_EQ(yes, 0);
	/* everything runnable counted as ours (and then some) */
	ntbx_spin_test_load(0, 0);   /* forget the window */
	s = adaptive();
	CHECK_EQ(ntbx_spin_group_yield(&s, 100000, ntbx_now_ns()), 1);
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < nb; i++)
		pthread_join(t[i], NULL);
}

int main(void)
{
	th_init("spin_yield");
	unsetenv("NTBX_SPIN_US");
	ntbx_spin_test_fixed(-2);
	ntbx_spin_test_wake(20000);
	ours_or_foreign();
	fits();
	window();
	overrides();
	near_peer();
	long_yield();
	restart();
	real_counts();
	return th_done("test_spin_yield");
}
