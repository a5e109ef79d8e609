/* shmem-test: 1.5
 * shmem-test-pes-switch: 3
 *
 * Small reductions back to back with no barrier between them (on a switch
 * the library sends contributions of at most 56 bytes in one cache line
 * per pair, two lines used in turn, with no ack): thousands of calls on the
 * same team and on the same pSync, in place every other call, sizes on
 * both sides of 56 bytes (the line and the inbox push mixed), a PE that
 * lags behind now and then so that the others run ahead, and a team
 * destroyed and split again into the same slot (its lines start afresh). */
#include <string.h>
#include "check.h"

static long pSync[SHMEM_REDUCE_SYNC_SIZE];
static long pWrk[64 + SHMEM_REDUCE_MIN_WRKDATA_SIZE];

/* what member m contributes at element i in round r */
static long lv(int m, size_t i, int r) { return (long)(m * 1000 + (int)i * 7 + r); }

/* keeps this PE busy for a while (no sleep: the point is a PE behind) */
static void lag(void)
{
	volatile unsigned long x = 0;
	for (unsigned long k = 0; k < 200000; k++)
		x += k;
}

static void rounds(shmem_team_t t, const char *tname, long *src, long *dst,
                   signed char *csrc, signed char *cdst, int nr)
{
	int m = shmem_team_my_pe(t), tn = shmem_team_n_pes(t);
	for (int r = 0; r < nr; r++) {
		size_t n = (size_t)r % 9 + 1;   /* 8..72 bytes of long */
		int inplace = r & 1;
		if (m == (r / 97) % tn && r % 13 == 0)
			lag();
		for (size_t i = 0; i < n; i++)
			src[i] = lv(m, i, r);
		long *d = inplace ? src : dst;
		CHECK(shmem_long_sum_reduce(t, d, src, n) == 0, "%s sum", tname);
		for (size_t i = 0; i < n; i++) {
			long e = 0;
			for (int k = 0; k < tn; k++)
				e += lv(k, i, r);
			if (d[i] != e) {
				CHECK(0, "%s r=%d n=%zu%s [%zu]=%ld want %ld", tname, r, n,
				      inplace ? " in place" : "", i, d[i], e);
				return;
			}
		}
		/* bytes: 56 fit a line, 57 do not */
		size_t nc = 55 + (size_t)r % 3;
		for (size_t i = 0; i < nc; i++)
			csrc[i] = (signed char)((m + (int)i + r) % 50);
		shmem_schar_max_reduce(t, cdst, csrc, nc);
		for (size_t i = 0; i < nc; i++) {
			signed char e = 0;
			for (int k = 0; k < tn; k++)
				if ((k + (int)i + r) % 50 > e)
					e = (signed char)((k + (int)i + r) % 50);
			if (cdst[i] != e) {
				CHECK(0, "%s r=%d char max n=%zu [%zu]=%d want %d", tname,
				      r, nc, i, cdst[i], e);
				return;
			}
		}
	}
}

int main(void)
{
	for (int i = 0; i < SHMEM_REDUCE_SYNC_SIZE; i++)
		pSync[i] = SHMEM_SYNC_VALUE;
	shmem_init();
	int me = shmem_my_pe(), n = shmem_n_pes();
	long *src = shmem_malloc(16 * sizeof(long));
	long *dst = shmem_malloc(16 * sizeof(long));
	signed char *csrc = shmem_malloc(64), *cdst = shmem_malloc(64);

	rounds(SHMEM_TEAM_WORLD, "world", src, dst, csrc, cdst, 3000);

	/* A team, destroyed and split again: the same slot, new numbers. */
	for (int k = 0; k < 3; k++) {
		shmem_team_t t;
		shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 1, n, NULL, 0, &t);
		CHECK(t != SHMEM_TEAM_INVALID, "split %d", k);
		if (t == SHMEM_TEAM_INVALID)
			break;
		rounds(t, "team", src, dst, csrc, cdst, 1 + k * 50);
		shmem_team_destroy(t);
	}
	shmem_barrier_all();

	/* The deprecated active-set form: one pSync for every call. */
	for (int r = 0; r < 2000; r++) {
		int cnt = r % 7 + 1;
		if (me == (r / 97) % n && r % 13 == 0)
			lag();
		for (int i = 0; i < cnt; i++)
			src[i] = lv(me, (size_t)i, r);
		shmem_long_sum_to_all(r & 1 ? src : dst, src, cnt, 0, 0, n, pWrk,
		                      pSync);
		long *d = r & 1 ? src : dst;
		for (int i = 0; i < cnt; i++) {
			long e = 0;
			for (int k = 0; k < n; k++)
				e += lv(k, (size_t)i, r);
			if (d[i] != e) {
				CHECK(0, "active set r=%d [%d]=%ld want %ld", r, i, d[i], e);
				break;
			}
		}
	}
	return test_done("reduce_line");
}
