/* SPDX-License-Identifier: MIT */
/*
 * Distributed locks: one word on PE 0, taken with compare-and-swap.
 *
 * OpenSHMEM 1.6: Distributed Locking Routines (shmem_set_lock,
 * shmem_test_lock, shmem_clear_lock).
 */
#include "shmem_int.h"

/* ------------------------------------------------------------- locks */

/* The lock word lives on PE 0: 0 free, otherwise holder + 1. */
void shmem_set_lock(long *lock)
{
	ntbx_sh_need_init("shmem_set_lock");
	uint64_t s = 0, me = (uint64_t)ntbx_sh.me + 1;
	while (ntbx_sh_amo(SHMEM_CTX_DEFAULT, NTBX_AMO_CSWAP, lock, 8, me, 0, 0))
		ntbx_sh_spin(&s);
	ntbx_sh_spin_done(&s);
}

int shmem_test_lock(long *lock)
{
	ntbx_sh_need_init("shmem_test_lock");
	uint64_t me = (uint64_t)ntbx_sh.me + 1;
	return ntbx_sh_amo(SHMEM_CTX_DEFAULT, NTBX_AMO_CSWAP, lock, 8, me, 0,
	                   0) != 0;
}

void shmem_clear_lock(long *lock)
{
	ntbx_sh_need_init("shmem_clear_lock");
	shmem_quiet();
	ntbx_sh_amo(SHMEM_CTX_DEFAULT, NTBX_AMO_SET, lock, 8, 0, 0, 0);
	/* Its waiters poll PE 0's word and sleep on their own PE's wake
	 * sequence: kick every PE we reach (one load each when none sleeps;
	 * PEs behind the ring wake from their bounded sleep). */
	for (int pe = 0; pe < ntbx_sh.npes; pe++)
		ntbx_sh_kick(pe);
}
