/* Active-set collectives of OpenSHMEM 1.4 (deprecated in 1.5, still used):
 * shmem_barrier, broadcast32/64, collect/fcollect, alltoall, *_to_all. */
#include <string.h>
#include "check.h"

static long pSync[SHMEM_REDUCE_SYNC_SIZE];
static long pSync2[SHMEM_BCAST_SYNC_SIZE];
static long pWrkL[SHMEM_REDUCE_MIN_WRKDATA_SIZE + 64];
static double pWrkD[SHMEM_REDUCE_MIN_WRKDATA_SIZE + 64];
static int pWrkI[SHMEM_REDUCE_MIN_WRKDATA_SIZE + 64];

int main(void)
{
	for (int i = 0; i < SHMEM_REDUCE_SYNC_SIZE; i++)
		pSync[i] = SHMEM_SYNC_VALUE;
	for (int i = 0; i < SHMEM_BCAST_SYNC_SIZE; i++)
		pSync2[i] = SHMEM_SYNC_VALUE;
	shmem_init();
	int me = shmem_my_pe(), n = shmem_n_pes();

	/* barrier over all, then over the even PEs */
	shmem_barrier(0, 0, n, pSync);
	int *mark = shmem_calloc((size_t)n, sizeof(int));
	shmem_barrier_all();
	if (me % 2 == 0) {
		int ne = (n + 1) / 2;
		for (int r = 1; r <= 5; r++) {
			for (int pe = 0; pe < n; pe += 2)
				shmem_int_p(&mark[me], r, pe);
			shmem_barrier(0, 1, ne, pSync);
			for (int pe = 0; pe < n; pe += 2)
				CHECK(mark[pe] == r, "even barrier round %d PE %d", r, pe);
			shmem_barrier(0, 1, ne, pSync);
		}
	}
	shmem_barrier_all();

	/* broadcast64 from root 1 (not the root's dest) */
	long *src = shmem_malloc(100 * sizeof(long));
	long *dst = shmem_malloc(100 * sizeof(long));
	for (int i = 0; i < 100; i++) {
		src[i] = (me == 1 % n) ? 5000 + i : -7;
		dst[i] = -1;
	}
	shmem_barrier_all();
	shmem_broadcast64(dst, src, 100, 1 % n, 0, 0, n, pSync2);
	for (int i = 0; i < 100; i++)
		if (me != 1 % n)
			CHECK(dst[i] == 5000 + i, "broadcast64 [%d]=%ld", i, dst[i]);
	int *isrc = shmem_malloc(10 * sizeof(int)), *idst = shmem_malloc(10 * sizeof(int));
	for (int i = 0; i < 10; i++)
		isrc[i] = me == 0 ? i * 3 : 0;
	shmem_barrier_all();
	shmem_broadcast32(idst, isrc, 10, 0, 0, 0, n, pSync2);
	if (me)
		CHECK(idst[9] == 27, "broadcast32");
	shmem_barrier_all();

	/* fcollect64 and collect32 (variable sizes: PE i gives i+1 elements) */
	long *fc = shmem_malloc((size_t)n * 2 * sizeof(long));
	long mine[2] = { me * 10, me * 10 + 1 };
	long *mysym = shmem_malloc(2 * sizeof(long));
	memcpy(mysym, mine, sizeof mine);
	shmem_barrier_all();
	shmem_fcollect64(fc, mysym, 2, 0, 0, n, pSync);
	for (int i = 0; i < n; i++)
		CHECK(fc[2 * i] == i * 10 && fc[2 * i + 1] == i * 10 + 1, "fcollect [%d]", i);
	int *csrc = shmem_malloc((size_t)n * sizeof(int));
	int *cdst = shmem_malloc((size_t)n * (size_t)n * sizeof(int));
	for (int i = 0; i <= me; i++)
		csrc[i] = me * 100 + i;
	shmem_barrier_all();
	shmem_collect32(cdst, csrc, (size_t)me + 1, 0, 0, n, pSync2);
	int k = 0;
	for (int pe = 0; pe < n; pe++)
		for (int i = 0; i <= pe; i++, k++)
			CHECK(cdst[k] == pe * 100 + i, "collect [%d]=%d", k, cdst[k]);
	shmem_barrier_all();

	/* alltoall64: block j of PE i's source goes to block i of PE j */
	long *a2s = shmem_malloc((size_t)n * 3 * sizeof(long));
	long *a2d = shmem_malloc((size_t)n * 3 * sizeof(long));
	for (int j = 0; j < n; j++)
		for (int e = 0; e < 3; e++)
			a2s[j * 3 + e] = me * 1000 + j * 10 + e;
	static long pSyncA[SHMEM_ALLTOALL_SYNC_SIZE];
	for (int i = 0; i < SHMEM_ALLTOALL_SYNC_SIZE; i++)
		pSyncA[i] = SHMEM_SYNC_VALUE;
	shmem_barrier_all();
	shmem_alltoall64(a2d, a2s, 3, 0, 0, n, pSyncA);
	for (int i = 0; i < n; i++)
		for (int e = 0; e < 3; e++)
			CHECK(a2d[i * 3 + e] == i * 1000 + me * 10 + e, "alltoall [%d,%d]", i, e);
	shmem_barrier_all();

	/* reductions */
	long *rs = shmem_malloc(64 * sizeof(long)), *rd = shmem_malloc(64 * sizeof(long));
	double *ds = shmem_malloc(8 * sizeof(double)), *dd = shmem_malloc(8 * sizeof(double));
	int *is = shmem_malloc(8 * sizeof(int)), *id = shmem_malloc(8 * sizeof(int));
	for (int i = 0; i < 64; i++)
		rs[i] = me + i;
	for (int i = 0; i < 8; i++) {
		ds[i] = me * 0.5 + i;
		is[i] = 1 << me;
	}
	shmem_barrier_all();
	shmem_long_sum_to_all(rd, rs, 64, 0, 0, n, pWrkL, pSync);
	for (int i = 0; i < 64; i++)
		CHECK(rd[i] == (long)n * (n - 1) / 2 + (long)n * i, "sum [%d]=%ld", i, rd[i]);
	shmem_barrier_all();
	shmem_long_max_to_all(rd, rs, 64, 0, 0, n, pWrkL, pSync2);
	CHECK(rd[3] == n - 1 + 3, "max");
	shmem_barrier_all();
	shmem_long_min_to_all(rd, rs, 64, 0, 0, n, pWrkL, pSync);
	CHECK(rd[3] == 3, "min");
	shmem_barrier_all();
	shmem_double_sum_to_all(dd, ds, 8, 0, 0, n, pWrkD, pSync2);
	CHECK(dd[1] == n * (n - 1) * 0.25 + n, "double sum %g", dd[1]);
	shmem_barrier_all();
	shmem_int_or_to_all(id, is, 8, 0, 0, n, pWrkI, pSync);
	CHECK(id[0] == (1 << n) - 1, "or %x", id[0]);
	shmem_barrier_all();
	shmem_int_xor_to_all(id, is, 8, 0, 0, n, pWrkI, pSync2);
	CHECK(id[7] == (1 << n) - 1, "xor %x", id[7]);
	shmem_barrier_all();
	shmem_int_and_to_all(id, is, 8, 0, 0, n, pWrkI, pSync);
	CHECK(id[7] == (n == 1 ? 1 : 0), "and %x", id[7]);
	shmem_barrier_all();
	for (int i = 0; i < 8; i++)
		ds[i] = 1.0 + me;
	shmem_barrier_all();
	shmem_double_prod_to_all(dd, ds, 8, 0, 0, n, pWrkD, pSync2);
	double f = 1;
	for (int i = 1; i <= n; i++)
		f *= i;
	CHECK(dd[0] == f, "prod %g", dd[0]);
	shmem_barrier_all();
	/* in place, over the odd PEs */
	if (n >= 2 && me % 2 == 1) {
		int no = n / 2;
		rs[0] = me;
		shmem_long_sum_to_all(rs, rs, 1, 1, 1, no, pWrkL, pSync);
		long want = 0;
		for (int pe = 1; pe < n; pe += 2)
			want += pe;
		CHECK(rs[0] == want, "odd in-place sum %ld want %ld", rs[0], want);
	}
	return test_done("coll");
}
