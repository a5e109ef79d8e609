/* SPDX-License-Identifier: MIT */
/*
 * shmemx.h — ntbx extensions to OpenSHMEM, and the shmemx_ names that
 * programs written for Sandia OpenSHMEM use.
 *
 * shmemx_wtime(): seconds on a monotonic clock (benchmarks).
 * shmemx_heap_info(): base and size of this PE's symmetric heap.
 * shmemx_topology(): 0 on a switch fabric, 1 on a ring, -1 when the PE
 * runs alone (no oshrun).
 *
 * From SOS (see docs/design-notes.md for those left out):
 * shmemx_TYPENAME_ibput/ibget, shmemx_TYPENAME_sum_inscan/exscan (and
 * every other form, shmemx_gen.h) and shmemx_signal_add/set are the 1.6
 * routines under their pre-1.6 names.  SHMEMX_TEAM_NODE is the team of
 * PEs that can load and store each other's memory (SHMEM_TEAM_SHARED).
 * SHMEMX_MALLOC_NO_BARRIER, a shmem_malloc_with_hints hint: no barrier
 * at the end of the allocation (every PE must still allocate in the same
 * order).  shmemx_register_gettid(fn): accepted (0 unless fn is NULL);
 * ntbx needs no thread ids.
 */
#ifndef NTBX_SHMEMX_H
#define NTBX_SHMEMX_H

#include <shmem.h>
#include <shmemx_gen.h>

#ifdef __cplusplus
extern "C" {
#endif

double shmemx_wtime(void);
void shmemx_heap_info(void **base, size_t *size);
int shmemx_topology(void);
int shmemx_register_gettid(uint64_t (*gettid_fn)(void));

#define SHMEMX_TEAM_NODE SHMEM_TEAM_SHARED
#define SHMEMX_MALLOC_NO_BARRIER (1L << 20)
#define shmemx_signal_add shmem_signal_add
#define shmemx_signal_set shmem_signal_set
#define shmemx_ctx_signal_add shmem_ctx_signal_add
#define shmemx_ctx_signal_set shmem_ctx_signal_set

#ifdef __cplusplus
}
#endif
#endif
