/* SPDX-License-Identifier: MIT */
/*
 * OSU-method OpenSHMEM micro-benchmarks, OpenSHMEM 1.4 API only, so the
 * same source builds with ntbx's oshcc and with Open MPI's.
 *
 *   osu [p2p|coll|red|ring] [TARGET_PE]
 *
 * p2p  (2+ PEs): put latency (putmem + quiet), get latency, put bandwidth
 *      and message rate (windows of 64 puts, then quiet), fetch-add and
 *      compare-swap latency, and memcpy of the same sizes in PE 0 (the
 *      ceiling for a put through a window).
 * coll (any PEs): barrier_all, broadcast64 of 8 B and 64 KiB, collect64,
 *      fcollect64 and long_sum_to_all of 8 B and 64 KiB per PE (each call
 *      followed by barrier_all, as OSU's collective loops), fetch-add and
 *      compare-swap latency from every PE to PE 0 at once.
 * red  (any PEs): long_sum_to_all and float_sum_to_all (the type of OSU's
 *      osu_oshm_reduce) from 8 B to 1 MiB, the OSU sizes, each call
 *      followed by barrier_all: "redl_SIZE,PES" and "redf_SIZE,PES".
 * redall (any PEs): every *_to_all reduction (each op and type of the
 *      1.4 table) of 64 B and 64 KiB per PE, each call followed by
 *      barrier_all: "rall_OP_TYPE_SIZE,PES".
 * scan (ntbx only: OpenSHMEM 1.6): shmem_long_sum_inscan / exscan on the
 *      world team, 8 B to 1 MiB, each followed by barrier_all:
 *      "inscan_SIZE,PES" and "exscan_SIZE,PES".
 * ring: put throughput and latency from PE 0 to TARGET_PE.
 * Output: CSV lines "test,size,value,unit" on stdout from PE 0.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <shmem.h>

#define MAXSZ (1 << 20)
#define WINDOW 64

static long pSync[SHMEM_BCAST_SYNC_SIZE];
static long pSyncC[SHMEM_COLLECT_SYNC_SIZE];
static long pSyncR[SHMEM_REDUCE_SYNC_SIZE];
static long pWrk[SHMEM_REDUCE_MIN_WRKDATA_SIZE > 65536 / 8 / 2 + 1 ?
                 SHMEM_REDUCE_MIN_WRKDATA_SIZE : 65536 / 8 / 2 + 1];

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int iters_for(size_t sz, int small)
{
	if (sz <= 8192)
		return small;
	if (sz <= 65536)
		return small / 4 > 50 ? small / 4 : 50;
	return 50;
}

static void p2p(int target, int skip_memcpy)
{
	int me = shmem_my_pe();
	char *sbuf = shmem_malloc(MAXSZ * WINDOW > 4 * MAXSZ ? 4 * MAXSZ : MAXSZ * WINDOW);
	char *rbuf = shmem_malloc(MAXSZ);
	long *ctr = shmem_malloc(sizeof(long));
	char *priv_a = malloc(MAXSZ), *priv_b = malloc(MAXSZ);
	memset(sbuf, 1, MAXSZ);
	memset(rbuf, 2, MAXSZ);
	memset(priv_a, 3, MAXSZ);
	memset(priv_b, 4, MAXSZ);
	*ctr = 0;
	shmem_barrier_all();
	for (size_t sz = 8; sz <= MAXSZ; sz *= 2) {
		int it = iters_for(sz, 2000), warm = it / 10;
		if (me == 0) {
			double t0 = 0;
			for (int i = 0; i < it + warm; i++) {
				if (i == warm)
					t0 = now_us();
				shmem_putmem(rbuf, sbuf, sz, target);
				shmem_quiet();
			}
			printf("put_lat,%zu,%.3f,us\n", sz, (now_us() - t0) / it);
			for (int i = 0; i < it + warm; i++) {
				if (i == warm)
					t0 = now_us();
				shmem_getmem(rbuf, sbuf, sz, target);
			}
			printf("get_lat,%zu,%.3f,us\n", sz, (now_us() - t0) / it);
			int bit = iters_for(sz, 200);
			for (int i = 0; i < bit + 2; i++) {
				if (i == 2)
					t0 = now_us();
				for (int w = 0; w < WINDOW; w++)
					shmem_putmem(rbuf, sbuf, sz, target);
				shmem_quiet();
			}
			double t = now_us() - t0;
			printf("put_bw,%zu,%.1f,MB/s\n", sz, (double)sz * WINDOW * bit / t);
			printf("put_mr,%zu,%.0f,msg/s\n", sz, WINDOW * bit / t * 1e6);
			if (!skip_memcpy) {
				for (int i = 0; i < bit + 2; i++) {
					if (i == 2)
						t0 = now_us();
					for (int w = 0; w < WINDOW; w++) {
						memcpy(priv_b, priv_a, sz);
						__asm__ __volatile__("" ::: "memory");
					}
				}
				t = now_us() - t0;
				printf("memcpy_bw,%zu,%.1f,MB/s\n", sz, (double)sz * WINDOW * bit / t);
			}
			fflush(stdout);
		}
		shmem_barrier_all();
	}
	if (me == 0) {
		int it = 20000;
		double t0 = now_us();
		for (int i = 0; i < it; i++)
			shmem_long_atomic_fetch_add(ctr, 1, target);
		printf("fadd_lat,8,%.3f,us\n", (now_us() - t0) / it);
		t0 = now_us();
		for (int i = 0; i < it; i++)
			shmem_long_atomic_compare_swap(ctr, i, i + 1, target);
		printf("cswap_lat,8,%.3f,us\n", (now_us() - t0) / it);
	}
	shmem_barrier_all();
	free(priv_a);
	free(priv_b);
}

static void coll(void)
{
	int me = shmem_my_pe(), n = shmem_n_pes();
	long *ctr = shmem_malloc(sizeof(long));
	long *src = shmem_malloc(65536), *dst = shmem_malloc(65536);
	*ctr = 0;
	memset(src, 1, 65536);
	shmem_barrier_all();
	int it = 2000;
	for (int i = 0; i < 100; i++)
		shmem_barrier_all();
	double t0 = now_us();
	for (int i = 0; i < it; i++)
		shmem_barrier_all();
	double t = (now_us() - t0) / it;
	if (me == 0)
		printf("barrier,%d,%.3f,us\n", n, t);
	size_t sizes[2] = { 8, 65536 };
	for (int s = 0; s < 2; s++) {
		int bit = s ? 200 : 1000;
		shmem_barrier_all();
		t0 = now_us();
		for (int i = 0; i < bit; i++) {
			shmem_broadcast64(dst, src, sizes[s] / 8, 0, 0, 0, n, pSync);
			shmem_barrier_all();
		}
		t = (now_us() - t0) / bit;
		if (me == 0)
			printf("bcast_%zu,%d,%.3f,us\n", sizes[s], n, t);
	}
	long *cdst = shmem_malloc((size_t)n * 65536);
	for (int s = 0; s < 2; s++) {
		int bit = s ? 100 : 1000;
		size_t ne = sizes[s] / 8;
		const char *names[3] = { "collect", "fcollect", "reduce" };
		for (int k = 0; k < 3; k++) {
			shmem_barrier_all();
			t0 = now_us();
			for (int i = 0; i < bit; i++) {
				if (k == 0)
					shmem_collect64(cdst, src, ne, 0, 0, n, pSyncC);
				else if (k == 1)
					shmem_fcollect64(cdst, src, ne, 0, 0, n, pSyncC);
				else
					shmem_long_sum_to_all(dst, src, (int)ne, 0, 0, n,
					                      pWrk, pSyncR);
				shmem_barrier_all();
			}
			t = (now_us() - t0) / bit;
			if (me == 0)
				printf("%s_%zu,%d,%.3f,us\n", names[k], sizes[s], n, t);
		}
	}
	shmem_barrier_all();
	shmem_free(cdst);
	it = 5000;
	t0 = now_us();
	for (int i = 0; i < it; i++)
		shmem_long_atomic_fetch_add(ctr, 1, 0);
	t = (now_us() - t0) / it;
	shmem_barrier_all();
	if (me == 0)
		printf("fadd_all,%d,%.3f,us\n", n, t);
	t0 = now_us();
	for (int i = 0; i < it; i++)
		shmem_long_atomic_compare_swap(ctr, -1, 0, 0);
	t = (now_us() - t0) / it;
	shmem_barrier_all();
	if (me == 0)
		printf("cswap_all,%d,%.3f,us\n", n, t);
	fflush(stdout);
}

static void red(void)
{
	int me = shmem_my_pe(), n = shmem_n_pes();
	char *src = shmem_malloc(MAXSZ), *dst = shmem_malloc(MAXSZ);
	long *ls = (long *)src;
	float *fs = (float *)src;
	long *lpwrk = shmem_malloc(MAXSZ / 2 + 64);
	float *fpwrk = (float *)lpwrk;
	for (size_t i = 0; i < MAXSZ / sizeof(long); i++)
		ls[i] = (long)(i + me);
	shmem_barrier_all();
	for (int k = 0; k < 2; k++) {
		if (k)
			for (size_t i = 0; i < MAXSZ / sizeof(float); i++)
				fs[i] = (float)(i % 1000 + me);
		for (size_t sz = 8; sz <= MAXSZ; sz *= 2) {
			int it = sz <= 4096 ? 1000 : sz <= 65536 ? 200 : 50;
			for (int i = 0; i < it / 10 + 1; i++) {   /* warm-up */
				if (k)
					shmem_float_sum_to_all((float *)dst, fs, (int)(sz / 4), 0, 0, n, fpwrk, pSyncR);
				else
					shmem_long_sum_to_all((long *)dst, ls, (int)(sz / 8), 0, 0, n, lpwrk, pSyncR);
				shmem_barrier_all();
			}
			double t0 = now_us();
			for (int i = 0; i < it; i++) {
				if (k)
					shmem_float_sum_to_all((float *)dst, fs, (int)(sz / 4), 0, 0, n, fpwrk, pSyncR);
				else
					shmem_long_sum_to_all((long *)dst, ls, (int)(sz / 8), 0, 0, n, lpwrk, pSyncR);
				shmem_barrier_all();
			}
			double t = (now_us() - t0) / it;
			if (me == 0)
				printf("red%c_%zu,%d,%.3f,us\n", k ? 'f' : 'l', sz, n, t);
		}
	}
	fflush(stdout);
	shmem_barrier_all();
	shmem_free(lpwrk);
	shmem_free(dst);
	shmem_free(src);
}

/* every *_to_all reduction: ops x types of the 1.4 table */
#define RALL(T, TN, OP, sz)                                                 \
	do {                                                                \
		int it_ = (sz) <= 4096 ? 300 : 60, ne_ = (int)((sz) / sizeof(T)); \
		for (int i = 0; i < it_ / 10 + 1; i++) {                    \
			shmem_##TN##_##OP##_to_all((T *)dst, (T *)src, ne_, 0, 0, n, \
			                           (T *)wrk, pSyncR);       \
			shmem_barrier_all();                                \
		}                                                           \
		double t0_ = now_us();                                      \
		for (int i = 0; i < it_; i++) {                             \
			shmem_##TN##_##OP##_to_all((T *)dst, (T *)src, ne_, 0, 0, n, \
			                           (T *)wrk, pSyncR);       \
			shmem_barrier_all();                                \
		}                                                           \
		double t_ = (now_us() - t0_) / it_;                         \
		if (me == 0)                                                \
			printf("rall_%s_%s_%zu,%d,%.3f,us\n", #OP, #TN, (size_t)(sz), n, t_); \
	} while (0)
#define RALL_BIT(OP, sz) do { RALL(short, short, OP, sz); RALL(int, int, OP, sz); \
	RALL(long, long, OP, sz); RALL(long long, longlong, OP, sz); } while (0)
#define RALL_CMP(OP, sz) do { RALL_BIT(OP, sz); RALL(float, float, OP, sz); \
	RALL(double, double, OP, sz); RALL(long double, longdouble, OP, sz); } while (0)
#define RALL_ARITH(OP, sz) do { RALL_CMP(OP, sz); \
	RALL(float _Complex, complexf, OP, sz); RALL(double _Complex, complexd, OP, sz); } while (0)

static void redall(void)
{
	int me = shmem_my_pe(), n = shmem_n_pes();
	size_t big = 65536;
	char *src = shmem_malloc(big), *dst = shmem_malloc(big);
	char *wrk = shmem_malloc(big / 2 + SHMEM_REDUCE_MIN_WRKDATA_SIZE * 16 + 64);
	/* small integers in every type: no overflow, exact in floats */
	for (size_t i = 0; i < big; i++)
		src[i] = (char)((i + (size_t)me) % 3);
	shmem_barrier_all();
	size_t sizes[2] = { 64, 65536 };
	for (int k = 0; k < 2; k++) {
		size_t sz = sizes[k];
		RALL_BIT(and, sz);
		RALL_BIT(or, sz);
		RALL_BIT(xor, sz);
		RALL_CMP(max, sz);
		RALL_CMP(min, sz);
		RALL_ARITH(sum, sz);
		RALL_ARITH(prod, sz);
	}
	fflush(stdout);
	shmem_barrier_all();
	shmem_free(wrk);
	shmem_free(dst);
	shmem_free(src);
}

static void scan(void)
{
#if defined(SHMEM_MAJOR_VERSION) && defined(SHMEM_MINOR_VERSION) && \
    (SHMEM_MAJOR_VERSION > 1 || SHMEM_MINOR_VERSION >= 6)
	int me = shmem_my_pe(), n = shmem_n_pes();
	long *src = shmem_malloc(MAXSZ), *dst = shmem_malloc(MAXSZ);
	for (size_t i = 0; i < MAXSZ / sizeof(long); i++)
		src[i] = (long)(i + me);
	shmem_barrier_all();
	for (int ex = 0; ex < 2; ex++)
		for (size_t sz = 8; sz <= MAXSZ; sz *= 8) {
			int it = sz <= 4096 ? 1000 : sz <= 65536 ? 200 : 50;
			double t0 = 0;
			for (int i = 0; i < it + it / 10 + 1; i++) {
				if (i == it / 10 + 1)
					t0 = now_us();
				if (ex)
					shmem_long_sum_exscan(SHMEM_TEAM_WORLD, dst, src, sz / 8);
				else
					shmem_long_sum_inscan(SHMEM_TEAM_WORLD, dst, src, sz / 8);
				shmem_barrier_all();
			}
			double t = (now_us() - t0) / it;
			if (me == 0)
				printf("%s_%zu,%d,%.3f,us\n", ex ? "exscan" : "inscan", sz, n, t);
		}
	fflush(stdout);
	shmem_barrier_all();
	shmem_free(dst);
	shmem_free(src);
#endif
}

static void ring(int target)
{
	int me = shmem_my_pe();
	char *buf = shmem_malloc(MAXSZ), *src = malloc(MAXSZ);
	memset(src, 5, MAXSZ);
	shmem_barrier_all();
	if (me == 0) {
		size_t sizes[3] = { 8, 4096, MAXSZ };
		for (int s = 0; s < 3; s++) {
			size_t sz = sizes[s];
			/* warm-up rounds first, as p2p (first touches of
			 * the rings and pages are not the steady state) */
			int it = sz >= MAXSZ ? 100 : 500, warm = it / 10;
			double t0 = 0;
			for (int i = 0; i < it + warm; i++) {
				if (i == warm)
					t0 = now_us();
				shmem_putmem(buf, src, sz, target);
				shmem_quiet();
			}
			double t = now_us() - t0;
			printf("ring_put_lat,%zu,%.3f,us\n", sz, t / it);
			printf("ring_put_bw,%zu,%.1f,MB/s\n", sz, (double)sz * it / t);
			for (int i = 0; i < it + warm; i++) {
				if (i == warm)
					t0 = now_us();
				shmem_getmem(src, buf, sz, target);
			}
			printf("ring_get_lat,%zu,%.3f,us\n", sz, (now_us() - t0) / it);
		}
		fflush(stdout);
	}
	shmem_barrier_all();
	free(src);
}

int main(int argc, char **argv)
{
	for (int i = 0; i < SHMEM_BCAST_SYNC_SIZE; i++)
		pSync[i] = SHMEM_SYNC_VALUE;
	for (int i = 0; i < SHMEM_COLLECT_SYNC_SIZE; i++)
		pSyncC[i] = SHMEM_SYNC_VALUE;
	for (int i = 0; i < SHMEM_REDUCE_SYNC_SIZE; i++)
		pSyncR[i] = SHMEM_SYNC_VALUE;
	shmem_init();
	const char *mode = argc > 1 ? argv[1] : "p2p";
	int target = argc > 2 ? atoi(argv[2]) : 1;
	if (target >= shmem_n_pes())
		target = shmem_n_pes() - 1;
	if (!strcmp(mode, "p2p"))
		p2p(target, argc > 3);
	else if (!strcmp(mode, "coll"))
		coll();
	else if (!strcmp(mode, "red"))
		red();
	else if (!strcmp(mode, "redall"))
		redall();
	else if (!strcmp(mode, "scan"))
		scan();
	else if (!strcmp(mode, "ring"))
		ring(target);
	shmem_finalize();
	return 0;
}
