/* shmem-test: 1.5
 * shmem-test-pes-switch: 3 5
 *
 * Reductions across the sizes where the library changes algorithm (on a
 * switch: one round of pushes into inboxes up to a size measured at
 * start-up and at most 8 KiB, then reduce-scatter + allgather; on a ring:
 * an allgather, on a cycle the reduce-scatter (integers) or the gather of
 * raw slices (floating point, cycles of 3 to 5), else the chain), for
 * teams with stride 1, 2 and -1, a team
 * of n-1 members (odd when n is even), active sets, in place, back to back
 * without barriers, and the same bits on every PE for floating point. */
#include <string.h>
#include "check.h"

static const size_t counts[] = { 1, 2, 3, 7, 8, 9, 63, 64, 65, 127, 128, 255,
                                 256, 257, 511, 512, 513, 1023, 1024, 1025,
                                 2047, 2048, 2049, 4095, 4097, 8191, 8193,
                                 20000, 70001 };
#define NC (sizeof counts / sizeof counts[0])
#define MAXN 70001

/* one pair per active set, alternating between calls on that set */
static long pSync[3][2][SHMEM_REDUCE_SYNC_SIZE];
static long pWrk[MAXN / 2 + 1 + SHMEM_REDUCE_MIN_WRKDATA_SIZE];

/* member value of team member m (0-based) at element i */
static long lv(int m, size_t i) { return (long)(m * 7 + (int)(i % 13) + 1); }

static void check_team(shmem_team_t t, const char *tname, long *lsrc,
                       long *ldst, int *isrc, int *idst, double *dsrc,
                       double *ddst, double *peer)
{
	if (t == SHMEM_TEAM_INVALID)
		return;
	int m = shmem_team_my_pe(t), tn = shmem_team_n_pes(t);
	for (size_t c = 0; c < NC; c++) {
		size_t n = counts[c];
		for (size_t i = 0; i < n; i++) {
			lsrc[i] = lv(m, i);
			isrc[i] = (int)((m * 31 + (int)i) % 101) - 50;
			dsrc[i] = 0.1 * (m + 1) + 1e-3 * (double)(i % 97);
		}
		/* long sum, int max and min, double sum */
		CHECK(shmem_long_sum_reduce(t, ldst, lsrc, n) == 0, "%s sum", tname);
		for (size_t i = 0; i < n; i++) {
			long e = 0;
			for (int k = 0; k < tn; k++)
				e += lv(k, i);
			if (ldst[i] != e) {
				CHECK(0, "%s long sum n=%zu [%zu]=%ld want %ld", tname, n,
				      i, ldst[i], e);
				break;
			}
		}
		shmem_int_max_reduce(t, idst, isrc, n);
		for (size_t i = 0; i < n; i++) {
			int e = -1000;
			for (int k = 0; k < tn; k++) {
				int v = (int)((k * 31 + (int)i) % 101) - 50;
				e = v > e ? v : e;
			}
			if (idst[i] != e) {
				CHECK(0, "%s int max n=%zu [%zu]=%d want %d", tname, n, i,
				      idst[i], e);
				break;
			}
		}
		shmem_int_min_reduce(t, idst, isrc, n);
		for (size_t i = 0; i < n; i++) {
			int e = 1000;
			for (int k = 0; k < tn; k++) {
				int v = (int)((k * 31 + (int)i) % 101) - 50;
				e = v < e ? v : e;
			}
			if (idst[i] != e) {
				CHECK(0, "%s int min n=%zu [%zu]=%d want %d", tname, n, i,
				      idst[i], e);
				break;
			}
		}
		/* in member order: exactly the sum 0, 1, ... in turn, on every PE */
		shmem_double_sum_reduce(t, ddst, dsrc, n);
		for (size_t i = 0; i < n; i++) {
			double e = 0.1 + 1e-3 * (double)(i % 97);
			for (int k = 1; k < tn; k++)
				e += 0.1 * (k + 1) + 1e-3 * (double)(i % 97);
			if (memcmp(&ddst[i], &e, sizeof e)) {
				CHECK(0, "%s double sum n=%zu [%zu]=%.17g want %.17g",
				      tname, n, i, ddst[i], e);
				break;
			}
		}
		shmem_team_sync(t);
		int first = shmem_team_translate_pe(t, 0, SHMEM_TEAM_WORLD);
		shmem_getmem(peer, ddst, n * sizeof(double), first);
		CHECK(!memcmp(peer, ddst, n * sizeof(double)),
		      "%s double sum n=%zu differs from member 0's", tname, n);
		shmem_team_sync(t);
		/* in place: dest == source */
		for (size_t i = 0; i < n; i++)
			ldst[i] = lv(m, i);
		shmem_long_sum_reduce(t, ldst, ldst, n);
		for (size_t i = 0; i < n; i++) {
			long e = 0;
			for (int k = 0; k < tn; k++)
				e += lv(k, i);
			if (ldst[i] != e) {
				CHECK(0, "%s in place n=%zu [%zu]=%ld want %ld", tname, n,
				      i, ldst[i], e);
				break;
			}
		}
		shmem_team_sync(t);
	}
	/* back to back, no barrier between: each round's values differ */
	for (int r = 0; r < 40; r++) {
		size_t n = counts[(size_t)r % NC] % 3000 + 1;
		for (size_t i = 0; i < n; i++)
			lsrc[i] = lv(m, i) * (r + 1);
		shmem_long_sum_reduce(t, ldst, lsrc, n);
		for (size_t i = 0; i < n; i++) {
			long e = 0;
			for (int k = 0; k < tn; k++)
				e += lv(k, i) * (r + 1);
			if (ldst[i] != e) {
				CHECK(0, "%s back to back r=%d n=%zu [%zu]=%ld want %ld",
				      tname, r, n, i, ldst[i], e);
				break;
			}
		}
	}
	shmem_team_sync(t);
}

int main(void)
{
	for (int k = 0; k < 3; k++)
		for (int i = 0; i < SHMEM_REDUCE_SYNC_SIZE; i++)
			pSync[k][0][i] = pSync[k][1][i] = SHMEM_SYNC_VALUE;
	shmem_init();
	int me = shmem_my_pe(), n = shmem_n_pes();
	long *lsrc = shmem_malloc(MAXN * sizeof(long));
	long *ldst = shmem_malloc(MAXN * sizeof(long));
	int *isrc = shmem_malloc(MAXN * sizeof(int));
	int *idst = shmem_malloc(MAXN * sizeof(int));
	double *dsrc = shmem_malloc(MAXN * sizeof(double));
	double *ddst = shmem_malloc(MAXN * sizeof(double));
	double *peer = malloc(MAXN * sizeof(double));

	check_team(SHMEM_TEAM_WORLD, "world", lsrc, ldst, isrc, idst, dsrc,
	           ddst, peer);
	shmem_team_t even, rev, most;
	shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, (n + 1) / 2, NULL, 0,
	                         &even);
	check_team(even, "stride 2", lsrc, ldst, isrc, idst, dsrc, ddst, peer);
	shmem_team_split_strided(SHMEM_TEAM_WORLD, n - 1, -1, n, NULL, 0, &rev);
	check_team(rev, "stride -1", lsrc, ldst, isrc, idst, dsrc, ddst, peer);
	if (n > 2) {
		shmem_team_split_strided(SHMEM_TEAM_WORLD, 1, 1, n - 1, NULL, 0,
		                         &most);
		check_team(most, "PEs 1..n-1", lsrc, ldst, isrc, idst, dsrc, ddst,
		           peer);
		shmem_team_destroy(most);
	}
	shmem_team_destroy(even);
	shmem_team_destroy(rev);
	shmem_barrier_all();

	/* Active sets, no barrier between calls: the world, the even PEs,
	 * PEs 1..n-1, each alternating between two pSync arrays. */
	for (size_t c = 0; c < NC; c++) {
		size_t cnt = counts[c];
		struct { int start, log, size; } sets[3] = {
			{ 0, 0, n }, { 0, 1, (n + 1) / 2 }, { 1, 0, n - 1 } };
		for (int k = 0; k < 3; k++) {
			int st = sets[k].start, ls = sets[k].log, sz = sets[k].size;
			if (sz < 1 || me < st || (me - st) % (1 << ls) ||
			    (me - st) >> ls >= sz)
				continue;
			int m = (me - st) >> ls;
			for (size_t i = 0; i < cnt; i++)
				lsrc[i] = lv(m, i) + k;
			shmem_long_sum_to_all(ldst, lsrc, (int)cnt, st, ls, sz, pWrk,
			                      pSync[k][c % 2]);
			for (size_t i = 0; i < cnt; i++) {
				long e = 0;
				for (int j = 0; j < sz; j++)
					e += lv(j, i) + k;
				if (ldst[i] != e) {
					CHECK(0, "active set %d n=%zu [%zu]=%ld want %ld", k,
					      cnt, i, ldst[i], e);
					break;
				}
			}
		}
	}
	free(peer);
	return test_done("reduce_algos");
}
