/* SPDX-License-Identifier: MIT */
/*
 * shmemx.h — ntbx extensions to OpenSHMEM 1.5.
 *
 * shmemx_wtime(): seconds on a monotonic clock (benchmarks).
 * shmemx_heap_info(): base and size of this PE's symmetric heap.
 * shmemx_topology(): 0 on a switch fabric, 1 on a ring, -1 when the PE
 * runs alone (no oshrun).
 */
#ifndef NTBX_SHMEMX_H
#define NTBX_SHMEMX_H

#include <shmem.h>

#ifdef __cplusplus
extern "C" {
#endif

double shmemx_wtime(void);
void shmemx_heap_info(void **base, size_t *size);
int shmemx_topology(void);

#ifdef __cplusplus
}
#endif
#endif
