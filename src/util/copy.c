/* SPDX-License-Identifier: MIT */
/*
 * ntbx_copy: the one copy routine of the data paths (CPU window writes, the
 * DMA engine's worker, queue-pair rings, OpenSHMEM put and get).
 *
 * Why not plain memcpy: glibc 2.36 stops using `rep movsb` on AMD CPUs
 * above the per-core L2 size and falls back to a vector loop, which on this
 * Zen 4 (FSRM, 1 MiB L2) copies a cache-hot 1 MiB at 48-53 GB/s where
 * `rep movsb` reaches 59-60 GB/s; at 2-8 MiB the gap is 44/39 vs 55/52
 * GB/s.  Below 512 KiB glibc's choice is as good or better (at 128 KiB the
 * vector loop wins), so small copies stay with memcpy.  The choice is made
 * once, from CPUID (ERMS and FSRM both present), so CPUs where `rep movsb`
 * is slow never take it; NTBX_COPY=memcpy (default auto) forces memcpy everywhere (for
 * comparisons and for CPUs where the measurement above does not hold).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

/* 1: use rep movsb at and above NTBX_COPY_REP_MIN; 0: memcpy; -1: unknown */
static int use_rep = -1;

static int decide(void)
{
	int yes = 0;
#if defined(__x86_64__)
	unsigned a, b, c, d;
	if (__get_cpuid_count(7, 0, &a, &b, &c, &d))
		yes = (b & (1u << 9)) && (d & (1u << 4)); /* ERMS, FSRM */
#endif
	const char *e = getenv("NTBX_COPY");
	if (e && strcmp(e, "memcpy") == 0)
		yes = 0;
	else if (e && *e && strcmp(e, "auto") != 0)
		fprintf(stderr, "ntbx: NTBX_COPY='%s' is not 'auto' or 'memcpy'; "
		        "using auto\n", e);
	__atomic_store_n(&use_rep, yes, __ATOMIC_RELAXED);
	return yes;
}

void ntbx_copy_large(void *dst, const void *src, size_t n)
{
	int r = __atomic_load_n(&use_rep, __ATOMIC_RELAXED);
	if (r < 0)
		r = decide();
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
	/* (AddressSanitizer cannot see inside the asm: sanitized builds keep
	 * memcpy, so every copy stays checked.) */
	if (r) {
		__asm__ __volatile__("rep movsb"
		                     : "+D"(dst), "+S"(src), "+c"(n)
		                     :
		                     : "memory");
		return;
	}
#endif
	memcpy(dst, src, n);
}
