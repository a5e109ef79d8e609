/* SPDX-License-Identifier: MIT */
/*
 * ntbx_copy: the one copy routine of the data paths (CPU window writes, the
 * DMA engine's worker, queue-pair rings, OpenSHMEM put and get).
 *
 * Below NTBX_COPY_REP_MIN every copy is memcpy.  For large copies the best
 * way depends on the CPU and on the machine around it: glibc 2.36 leaves
 * `rep movsb` above the L2 size on AMD and its vector loop was 10-20%
 * slower than `rep movsb` on a Zen 4, while on an EPYC with a 2 MiB L2
 * back-to-back 1 MiB puts ran at 0.8x Open MPI's and memcpy was slower
 * still.  No single choice, and no choice from CPUID, holds everywhere.
 * So the first large copy of a process (or ntbx_copy_info) times the three
 * ways of moving 1 MiB into a shared mapping, as a put moves it into a
 * peer's window: glibc's memcpy, `rep movsb`, and non-temporal stores
 * (which write whole lines to memory without reading them first, and
 * leave the caches to the program).  Each is run once to warm up and then
 * in alternating rounds; the fastest round of each counts (the least
 * disturbed by other processes), and a way other than memcpy is taken only
 * if it is at least 3% faster.  It takes about 1 ms and is cached for the
 * process.  Copies into private memory that the caller reads next
 * (ntbx_copy_in: a get, a queue-pair receive) choose between memcpy and
 * `rep movsb` only.
 *
 * NTBX_COPY=auto (default) calibrates; memcpy, rep or nt force a way.
 * Sanitized builds always use memcpy (the sanitizer cannot see into the
 * assembly or the streaming stores), so every copy stays checked.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "util/settings.h"
#include "util/util.h"

#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define HAVE_X86_WAYS 1
#include <emmintrin.h>
#else
#define HAVE_X86_WAYS 0
#endif

enum { W_MEMCPY, W_REP, W_NT, W_COUNT };
static const char *const way_name[W_COUNT] = { "memcpy", "rep", "nt" };

static int way_out = W_MEMCPY, way_in = W_MEMCPY;
static double memcpy_ns_per_byte;   /* measured by the calibration, or 0 */
static int decided;   /* atomic: 1 once way_out/way_in are set */
static pthread_once_t once = PTHREAD_ONCE_INIT;
static char info[192];

static void copy_rep(void *dst, const void *src, size_t n)
{
#if HAVE_X86_WAYS
	__asm__ __volatile__("rep movsb"
	                     : "+D"(dst), "+S"(src), "+c"(n)
	                     :
	                     : "memory");
#else
	memcpy(dst, src, n);
#endif
}

/* Streaming stores of 64 bytes at a time to a 16-byte aligned dst, then a
 * store fence, so the copy is ordered before later stores (a flag) like
 * any other copy. */
static void copy_nt(void *dst, const void *src, size_t n)
{
#if HAVE_X86_WAYS
	char *d = dst;
	const char *s = src;
	size_t head = (16 - ((uintptr_t)d & 15)) & 15;
	if (head > n)
		head = n;
	memcpy(d, s, head);
	d += head;
	s += head;
	n -= head;
	for (; n >= 64; n -= 64, d += 64, s += 64) {
		__m128i a = _mm_loadu_si128((const __m128i *)s);
		__m128i b = _mm_loadu_si128((const __m128i *)(s + 16));
		__m128i c = _mm_loadu_si128((const __m128i *)(s + 32));
		__m128i e = _mm_loadu_si128((const __m128i *)(s + 48));
		_mm_stream_si128((__m128i *)d, a);
		_mm_stream_si128((__m128i *)(d + 16), b);
		_mm_stream_si128((__m128i *)(d + 32), c);
		_mm_stream_si128((__m128i *)(d + 48), e);
	}
	memcpy(d, s, n);
	_mm_sfence();
#else
	memcpy(dst, src, n);
#endif
}

static void copy_way(int w, void *dst, const void *src, size_t n)
{
	if (w == W_REP)
		copy_rep(dst, src, n);
	else if (w == W_NT)
		copy_nt(dst, src, n);
	else
		memcpy(dst, src, n);
}

#define CAL_BYTES (1u << 20)
#define CAL_BUDGET_NS 1000000ull
#define CAL_ROUNDS 8

/* Fastest round of each way, in ns for CAL_BYTES; 0 when not measured. */
static int calibrate(uint64_t best[W_COUNT], uint64_t *took)
{
	memset(best, 0, sizeof(uint64_t) * W_COUNT);
	*took = 0;
	if (!HAVE_X86_WAYS)
		return -1;
	char *src = mmap(NULL, CAL_BYTES, PROT_READ | PROT_WRITE,
	                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	char *dst = mmap(NULL, CAL_BYTES, PROT_READ | PROT_WRITE,
	                 MAP_SHARED | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (src == MAP_FAILED || dst == MAP_FAILED) {
		if (src != MAP_FAILED)
			munmap(src, CAL_BYTES);
		if (dst != MAP_FAILED)
			munmap(dst, CAL_BYTES);
		return -1;
	}
	memset(src, 0x5a, CAL_BYTES);
	uint64_t t0 = ntbx_now_ns();
	for (int r = 0; r < CAL_ROUNDS; r++) {
		for (int w = 0; w < W_COUNT; w++) {
			uint64_t a = ntbx_now_ns();
			copy_way(w, dst, src, CAL_BYTES);
			uint64_t t = ntbx_now_ns() - a;
			if (r > 0 && (!best[w] || t < best[w]))   /* round 0 warms */
				best[w] = t ? t : 1;
		}
		if (r >= 2 && ntbx_now_ns() - t0 > CAL_BUDGET_NS)
			break;
	}
	*took = ntbx_now_ns() - t0;
	munmap(src, CAL_BYTES);
	munmap(dst, CAL_BYTES);
	return 0;
}

static double gbs(uint64_t ns)
{
	return ns ? (double)CAL_BYTES / (double)ns : 0;
}

static void decide(void)
{
	/* NTBX_COPY's choices are "auto|" and way_name[] in order */
	int forced = (int)ntbx_setting_long(NTBX_SET_COPY) - 1;
	if (!HAVE_X86_WAYS) {
		snprintf(info, sizeof info, "memcpy (%s)",
#if defined(__x86_64__)
		         "sanitized build"
#else
		         "no other way on this CPU"
#endif
		         );
	} else if (forced >= 0) {
		way_out = forced;
		way_in = forced == W_NT ? W_MEMCPY : forced;
		snprintf(info, sizeof info, "%s (NTBX_COPY)", way_name[forced]);
	} else {
		uint64_t best[W_COUNT], took;
		if (calibrate(best, &took) < 0) {
			snprintf(info, sizeof info, "memcpy (calibration failed)");
		} else {
			int o = W_MEMCPY, i = W_MEMCPY;
			for (int w = 1; w < W_COUNT; w++)
				if (best[w] && best[w] * 100 < best[o] * 97)
					o = w;
			if (best[W_REP] && best[W_REP] * 100 < best[W_MEMCPY] * 97)
				i = W_REP;
			way_out = o;
			way_in = i;
			memcpy_ns_per_byte = (double)best[W_MEMCPY] / CAL_BYTES;
			snprintf(info, sizeof info, "%s, into private memory %s "
			         "(1 MiB: memcpy %.1f, rep %.1f, nt %.1f GB/s; "
			         "calibrated in %.2f ms)", way_name[o], way_name[i],
			         gbs(best[W_MEMCPY]), gbs(best[W_REP]), gbs(best[W_NT]),
			         (double)took / 1e6);
		}
	}
	ntbx_log(NTBX_LOG_INFO, "copies of %u KiB and more: %s",
	         NTBX_COPY_REP_MIN >> 10, info);
	__atomic_store_n(&decided, 1, __ATOMIC_RELEASE);
}

static void ensure(void)
{
	if (!__atomic_load_n(&decided, __ATOMIC_ACQUIRE))
		pthread_once(&once, decide);
}

const char *ntbx_copy_info(void)
{
	ensure();
	return info;
}

double ntbx_copy_ns_per_byte(void)
{
	ensure();
	return memcpy_ns_per_byte;
}

void ntbx_copy_large(void *dst, const void *src, size_t n)
{
	ensure();
	copy_way(way_out, dst, src, n);
}

void ntbx_copy_in_large(void *dst, const void *src, size_t n)
{
	ensure();
	copy_way(way_in, dst, src, n);
}
