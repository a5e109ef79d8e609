/* SPDX-License-Identifier: MIT */
/*
 * Whether another PE of this machine needs a CPU, read from its sleepers
 * line (shmem_int.h: the sleepers count, its wake sequence, and the
 * sequence its last sleeper went to sleep on).  The waits of
 * shmem_signal.c count such PEs to choose between spinning, yielding to
 * them and sleeping (docs/design-notes.md, *Waiting*).  Its own header so
 * that the rule is tested on its own (tests/unit/test_shmem_awake.c).
 */
#ifndef NTBX_SHMEM_AWAKE_H
#define NTBX_SHMEM_AWAKE_H

#include <stdint.h>

/* Awake: no thread asleep in a wait (computing or spinning), or one that
 * was kicked since it went to sleep (its wake sequence moved): runnable
 * until it runs and leaves the count, and no more foreign than an awake
 * PE.  Counted asleep, such PEs looked like foreign runnable threads to
 * the yield decision, and every sleep made the next wait's sample say
 * "foreign" (sleeps begot sleeps).  Read from another PE's memory: a
 * count only, a wrong value costs a spin or a sleep, never correctness. */
static inline int ntbx_sh_line_awake(long sleepers, uint32_t seq,
                                     uint32_t slept_on)
{
	return sleepers <= 0 || seq != slept_on;
}

#endif
