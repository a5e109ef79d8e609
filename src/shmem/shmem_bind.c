/* SPDX-License-Identifier: MIT */
/*
 * Where a PE runs: the CPU oshrun binds it to, and letting go of that CPU
 * while foreign load lasts.
 *
 * oshrun gives each PE a CPU of its own set, round robin
 * (NTBX_SHMEM_BIND_CPU).  With --bind-to core (a switch's default) it
 * pins the whole PE there before the program starts and passes its set
 * (NTBX_SHMEM_BIND_SET); on a ring by default only the main thread is
 * pinned, here at the end of shmem_init (the transfer and relay threads,
 * started before, stay free: oshrun.c says why), and the set is the
 * CPUs it had before.
 * Pinned PEs that outnumber the CPUs share them in a fixed way and hand
 * them to each other at every wait, which is what a quiet machine
 * rewards (4 PEs on 2 CPUs: ring reductions of 64 B 6 us pinned, 6 or
 * 12-18 us floating, by where the scheduler put them).
 *
 * Beside foreign load the pin is a trap: a busy loop lands on one CPU,
 * and the PEs pinned there can neither move to the other nor get their
 * CPU back from the loop before its slice ends: every hand-over through
 * them costs one (4 PEs on 2 CPUs beside one busy loop: barrier 0.2-1 ms
 * pinned, 8-11 us floating and yielding; Open MPI's OSHMEM, which does
 * not bind more PEs than CPUs, 7 us).  So a PE lets go of its pin (the
 * main thread's affinity widened back to oshrun's set, which it had
 * before) at the first look (one per millisecond) whose samples show
 * foreign runnable threads, fewer than the CPUs of the set (spin.c,
 * ntbx_spin_group_foreign: the least of the last 2 ms), and pins itself
 * again after as many calm looks as looks with such load, at least 20
 * and at most 100 (a score).  Waiting longer before letting go was
 * worse: a PE that slept pinned beside the loop went on sleeping once it
 * floated ("sleeps beget sleeps": with 4 looks, ring barrier 31-124 us
 * and 8 B reductions 51-1110 us; with 50 looks, 377 and 1776; at once,
 * 11-15 and 23).  The price is on a quiet machine, where a thread that
 * runs for a moment beside the PEs makes some let go for 20 ms: in half
 * of the ring launches of `osu red`, a few sizes then take 10-37 us
 * instead of 6-17.  With a foreign thread per CPU
 * the group sleeps in its waits, and there the pin was the better of the
 * two (4 PEs beside two busy loops: ring barrier 52-230 us pinned, 100-
 * 1000 floating).  Its waits look (ntbx_sh_bind_adapt) at most every
 * NTBX_SH_BIND_LOOK_NS; one system call per change.  Floating, its
 * threads may use every CPU of the set, and the wait policy then yields
 * to the other PEs while the foreign threads leave the group a CPU
 * (spin.c, "yielding in a group").  The threads a whole PE's pin covers
 * besides the main one (a ring's transfer threads under --bind-to core)
 * keep it: they are not the ones that wait in collectives.
 */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shmem_int.h"
#include "util/settings.h"
#include "util/util.h"

#define NTBX_SH_BIND_LOOK_NS  1000000ull     /* a look every millisecond */
#define NTBX_SH_BIND_SCORE_HOLD 20   /* let go: floating for 20 looks at least */
#define NTBX_SH_BIND_SCORE_MAX 100   /* pinned again after 100 calm looks */

static struct {
	cpu_set_t wide;        /* the CPUs before the pin (oshrun's set) */
	pid_t tid;             /* the pinned thread: the main one */
	int cpu;               /* its CPU; -1: no pin asked or it failed */
	int pinned;            /* pinned now (else let go) */
	uint64_t next;         /* the next look */
	int score;             /* looks that saw such load, less those that
	                        * did not (0..NTBX_SH_BIND_SCORE_MAX) */
	unsigned long let_go;  /* times let go (NTBX_LOG=debug at the end) */
} bd = { .cpu = -1 };

static int set_cpus(const cpu_set_t *set)
{
	if (sched_setaffinity(bd.tid, sizeof *set, set) != 0) {
		ntbx_sh_debug("binding the main thread: %s", strerror(errno));
		return -1;
	}
	ntbx_spin_cpus_changed();
	return 0;
}

/* The main thread on CPU @cpu alone. */
static int pin_to(int cpu)
{
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	return set_cpus(&one);
}

/* oshrun's set as it passes it ("0,1,5"); 0 if malformed or empty. */
static int parse_set(const char *str, cpu_set_t *set)
{
	CPU_ZERO(set);
	for (const char *p = str; *p;) {
		char *end;
		long c = strtol(p, &end, 10);
		if (end == p || c < 0 || c >= CPU_SETSIZE ||
		    (*end && *end != ','))
			return 0;
		CPU_SET((int)c, set);
		p = *end ? end + 1 : end;
	}
	return CPU_COUNT(set) > 0;
}

void ntbx_sh_bind(void)
{
	if (!ntbx_setting_is_set(NTBX_SET_SHMEM_BIND_CPU))
		return;
	long cpu = ntbx_setting_long(NTBX_SET_SHMEM_BIND_CPU);
	if (cpu < 0 || cpu >= CPU_SETSIZE)
		return;
	bd.tid = (pid_t)syscall(SYS_gettid);
	const char *whole = ntbx_setting_str(NTBX_SET_SHMEM_BIND_SET);
	if (whole) {   /* oshrun pinned us already */
		if (!parse_set(whole, &bd.wide) || !CPU_ISSET((int)cpu, &bd.wide))
			return;
	} else if (sched_getaffinity(0, sizeof bd.wide, &bd.wide) != 0 ||
	           !CPU_ISSET((int)cpu, &bd.wide) || pin_to((int)cpu) != 0) {
		return;   /* a failure costs the binding only */
	}
	bd.pinned = 1;
	/* last: other threads' waits look from here on (ntbx_sh_bind_adapt) */
	__atomic_store_n(&bd.cpu, (int)cpu, __ATOMIC_RELEASE);
}

void ntbx_sh_bind_adapt(uint64_t now)
{
	if (__atomic_load_n(&bd.cpu, __ATOMIC_ACQUIRE) < 0)
		return;
	uint64_t next = __atomic_load_n(&bd.next, __ATOMIC_RELAXED);
	if (now < next ||
	    !__atomic_compare_exchange_n(&bd.next, &next,
	                                 now + NTBX_SH_BIND_LOOK_NS, 0,
	                                 __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		return;   /* one thread looks at a time: it alone changes bd */
	int f = ntbx_spin_group_foreign();
	if (f == INT_MAX)
		return;   /* no sample yet */
	/* Floating pays while the group yields beside foreign load: some,
	 * but fewer foreign threads than CPUs */
	int float_pays = f > 0 && f < CPU_COUNT(&bd.wide);
	/* The evidence, a look per millisecond: one point up for such load,
	 * one down without it; let go at the first point, and float for
	 * NTBX_SH_BIND_SCORE_HOLD looks at least. */
	int sc = bd.score + (float_pays ? 1 : -1);
	bd.score = sc < 0 ? 0 : sc > NTBX_SH_BIND_SCORE_MAX ?
	           NTBX_SH_BIND_SCORE_MAX : sc;
	if (bd.pinned && bd.score > 0 && set_cpus(&bd.wide) == 0) {
		bd.pinned = 0;
		bd.let_go++;
		if (bd.score < NTBX_SH_BIND_SCORE_HOLD)
			bd.score = NTBX_SH_BIND_SCORE_HOLD;
	} else if (!bd.pinned && bd.score == 0 && pin_to(bd.cpu) == 0) {
		bd.pinned = 1;
	}
}

unsigned long ntbx_sh_bind_let_go(void)
{
	return bd.let_go;
}
