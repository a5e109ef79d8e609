/* SPDX-License-Identifier: MIT */
/*
 * bench/c2c — the floor under a one-way message between two processes:
 * how long one cache line takes to go from one CPU to another here.
 *
 *   c2c [ROUNDS]
 *       two threads, held to the first two CPUs this process may use,
 *       hand one cache line back and forth ROUNDS times (default 200000)
 *       by plain stores and loads, five times; prints the best trial's
 *       one-way time:  c2c_ns=N cpus=A,B
 *
 * A message through a ring is at least one such transfer (the line its
 * header lands on), and a 64-byte message with its 16-byte header spans
 * two lines, read one after the other: about two.  The figure moves with
 * the machine, not with ntbx: on a VM whose two vCPUs the host places on
 * sibling hyperthreads or on different cores from one minute to the next
 * it was 36 or 200 ns (bench/sock.sh prints it beside the ping-pong's
 * p50, measured in the same run).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile uint64_t line[8] __attribute__((aligned(64)));
static long rounds = 200000;
static int cpu[2] = { -1, -1 };

static void pin(int c)
{
	cpu_set_t s;
	if (c < 0)
		return;
	CPU_ZERO(&s);
	CPU_SET(c, &s);
	pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

static inline void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Answers 2i-1 with 2i. */
static void *pong(void *arg)
{
	uint64_t base = *(uint64_t *)arg;
	pin(cpu[1]);
	for (long i = 1; i <= rounds; i++) {
		while (line[0] != base + 2 * (uint64_t)i - 1)
			relax();
		line[0] = base + 2 * (uint64_t)i;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		rounds = atol(argv[1]);
	if (rounds <= 0) {
		fprintf(stderr, "usage: c2c [ROUNDS > 0]\n");
		return 2;
	}
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof set, &set) == 0)
		for (int c = 0, n = 0; c < CPU_SETSIZE && n < 2; c++)
			if (CPU_ISSET(c, &set))
				cpu[n++] = c;
	if (cpu[1] < 0) {
		fprintf(stderr, "c2c: this process may use one CPU only\n");
		return 1;
	}
	pin(cpu[0]);
	double best = 0;
	uint64_t base = 0;
	for (int t = 0; t < 5; t++) {
		pthread_t th;
		if (pthread_create(&th, NULL, pong, &base) != 0) {
			perror("c2c: pthread_create");
			return 1;
		}
		uint64_t t0 = now_ns();
		for (long i = 1; i <= rounds; i++) {
			line[0] = base + 2 * (uint64_t)i - 1;
			while (line[0] != base + 2 * (uint64_t)i)
				relax();
		}
		double ns = (double)(now_ns() - t0) / (double)rounds / 2;
		pthread_join(th, NULL);
		base += 2 * (uint64_t)rounds;
		if (t == 0 || ns < best)
			best = ns;
	}
	printf("c2c_ns=%.1f cpus=%d,%d\n", best, cpu[0], cpu[1]);
	return 0;
}
