/* shmem-test: 1.5
 * Collectives back to back, as programs write them: a reduction's or a
 * collect's dest read and reused by the next call with no barrier between
 * (also across two teams), in-place reductions, broadcasts from every
 * root, sizes that take several chunks, and the deprecated active-set
 * forms on the same pSync many times over.  On a ring these run
 * neighbour to neighbour; signals that crossed calls would show here. */
#include <stdlib.h>
#include <string.h>
#include "check.h"

#define BIG 40000   /* longs: several pipeline chunks */

static long pSync[SHMEM_REDUCE_SYNC_SIZE];
static long pWrk[BIG / 2 + 1 > SHMEM_REDUCE_MIN_WRKDATA_SIZE ?
                 BIG / 2 + 1 : SHMEM_REDUCE_MIN_WRKDATA_SIZE];

/* argv[1]: iterations (300 by default; tests/shmem_yield.sh runs more
 * where the wait policy must see a lasting load) */
int main(int argc, char **argv)
{
	int iters = argc > 1 ? atoi(argv[1]) : 300;
	for (int i = 0; i < SHMEM_REDUCE_SYNC_SIZE; i++)
		pSync[i] = SHMEM_SYNC_VALUE;
	shmem_init();
	int me = shmem_my_pe(), n = shmem_n_pes();
	long *src = shmem_malloc(BIG * sizeof(long));
	long *dst = shmem_malloc(BIG * sizeof(long));
	long *fc = shmem_malloc((size_t)n * 3 * sizeof(long));
	long *bc = shmem_malloc(BIG * sizeof(long));
	long *x = shmem_malloc(sizeof(long));
	long *mine = shmem_malloc(3 * sizeof(long));   /* sources are symmetric */
	shmem_team_t low;   /* PEs 0 .. n-2: a chain inside the world */
	shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 1, n > 1 ? n - 1 : 1,
	                         NULL, 0, &low);
	for (int it = 0; it < iters; it++) {
		size_t ne = it % 50 == 7 ? BIG : (size_t)(it % 5) + 1;
		for (size_t k = 0; k < ne; k++)
			src[k] = me * 1000 + it + (long)k;
		shmem_long_sum_reduce(SHMEM_TEAM_WORLD, dst, src, ne);
		for (size_t k = 0; k < ne; k++) {
			long want = (long)n * (it + (long)k) + 1000L * n * (n - 1) / 2;
			CHECK(dst[k] == want, "it %d sum[%zu] %ld want %ld", it, k,
			      dst[k], want);
		}
		if (low != SHMEM_TEAM_INVALID) {   /* same dest, another team */
			shmem_long_max_reduce(low, dst, src, ne);
			CHECK(dst[0] == (n - 2 > 0 ? n - 2 : 0) * 1000 + it,
			      "it %d low max %ld", it, dst[0]);
		}
		*x = me + it;
		shmem_long_sum_reduce(SHMEM_TEAM_WORLD, x, x, 1);
		CHECK(*x == (long)n * it + (long)n * (n - 1) / 2,
		      "it %d in-place %ld", it, *x);

		mine[0] = me;
		mine[1] = it;
		mine[2] = -me;
		shmem_long_fcollect(SHMEM_TEAM_WORLD, fc, mine, 3);
		for (int j = 0; j < n; j++)
			CHECK(fc[3 * j] == j && fc[3 * j + 1] == it &&
			      fc[3 * j + 2] == -j, "it %d fcollect from %d", it, j);
		size_t cnt = (size_t)((me + it) % 3) + 1, off = 0;
		shmem_long_collect(SHMEM_TEAM_WORLD, fc, mine, cnt);
		for (int j = 0; j < n; j++) {
			size_t cj = (size_t)((j + it) % 3) + 1;
			for (size_t k = 0; k < cj; k++)
				CHECK(fc[off + k] == mine[k] + (k == 0 ? j - me :
				      k == 2 ? me - j : 0),
				      "it %d collect from %d [%zu]", it, j, k);
			off += cj;
		}

		int root = it % n;
		for (size_t k = 0; k < ne; k++)
			src[k] = root * 7 + it + (long)k;
		shmem_long_broadcast(SHMEM_TEAM_WORLD, bc, src, ne, root);
		for (size_t k = 0; k < ne; k++)
			CHECK(bc[k] == root * 7 + it + (long)k,
			      "it %d broadcast from %d [%zu] %ld", it, root, k, bc[k]);
		shmem_barrier_all();   /* bc is reused: ready again */

		if (it % 10 == 0) {    /* deprecated forms, one pSync */
			for (size_t k = 0; k < ne; k++)
				src[k] = me + (long)k;
			shmem_long_sum_to_all(dst, src, (int)ne, 0, 0, n, pWrk, pSync);
			CHECK(dst[ne - 1] == (long)n * (n - 1) / 2 + (long)n * (long)(ne - 1),
			      "it %d sum_to_all %ld", it, dst[ne - 1]);
			shmem_barrier(0, 0, n, pSync);
			shmem_fcollect64(fc, mine, 3, 0, 0, n, pSync);
			CHECK(fc[3 * (n - 1)] == n - 1, "it %d fcollect64", it);
			shmem_barrier(0, 0, n, pSync);
		}
	}
	shmem_free(mine);
	shmem_free(x);
	shmem_free(bc);
	shmem_free(fc);
	shmem_free(dst);
	shmem_free(src);
	return test_done("coll_loop");
}
