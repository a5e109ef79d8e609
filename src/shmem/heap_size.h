/* SPDX-License-Identifier: MIT */
/*
 * The symmetric heap's default size, shared by libntbx-shmem (which
 * allocates the heap) and oshrun (which sizes each node's memory to hold
 * it).  Node memory is a sparse file and the heap is never touched before
 * the program writes to it, so a large default costs address space only:
 * 512 MiB fits the OSU benchmarks and programs written for SOS or OSHMEM
 * without setting SHMEM_SYMMETRIC_SIZE.
 */
#ifndef NTBX_SHMEM_HEAP_SIZE_H
#define NTBX_SHMEM_HEAP_SIZE_H
#define NTBX_SH_DEFAULT_HEAP (512ull << 20)
#endif
