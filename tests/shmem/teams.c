/* shmem-test: 1.5
 * Teams: WORLD/SHARED, split_strided, split_2d, translate_pe, get_config,
 * team contexts, destroy; team collectives and reductions. */
#include <string.h>
#include "check.h"

int main(void)
{
	shmem_init();
	int me = shmem_my_pe(), n = shmem_n_pes();
	CHECK(shmem_team_my_pe(SHMEM_TEAM_WORLD) == me, "world my_pe");
	CHECK(shmem_team_n_pes(SHMEM_TEAM_WORLD) == n, "world n_pes");
	CHECK(shmem_team_n_pes(SHMEM_TEAM_SHARED) >= 1, "shared n_pes");
	CHECK(shmem_team_translate_pe(SHMEM_TEAM_SHARED,
	      shmem_team_my_pe(SHMEM_TEAM_SHARED), SHMEM_TEAM_WORLD) == me,
	      "shared -> world");

	/* even PEs */
	shmem_team_t even;
	shmem_team_config_t cfg = { .num_contexts = 2 };
	int r = shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, (n + 1) / 2, &cfg,
	                                 SHMEM_TEAM_NUM_CONTEXTS, &even);
	CHECK(r == 0, "split_strided %d", r);
	if (me % 2 == 0) {
		CHECK(even != SHMEM_TEAM_INVALID, "even team");
		CHECK(shmem_team_my_pe(even) == me / 2, "even my_pe");
		CHECK(shmem_team_n_pes(even) == (n + 1) / 2, "even n_pes");
		CHECK(shmem_team_translate_pe(even, 1 % shmem_team_n_pes(even),
		      SHMEM_TEAM_WORLD) == (2 % (2 * shmem_team_n_pes(even))) % n ||
		      shmem_team_n_pes(even) == 1, "translate even->world");
		shmem_team_config_t got;
		shmem_team_get_config(even, SHMEM_TEAM_NUM_CONTEXTS, &got);
		CHECK(got.num_contexts == 2, "config %d", got.num_contexts);
		/* team context: PE numbers are team-relative */
		shmem_ctx_t ctx;
		CHECK(shmem_team_create_ctx(even, 0, &ctx) == 0, "team ctx");
		shmem_team_t back;
		shmem_ctx_get_team(ctx, &back);
		CHECK(back == even, "ctx_get_team");
		long *x = shmem_malloc(sizeof(long));  /* not collective here: */
		(void)x;                                 /* see below */
		shmem_ctx_destroy(ctx);
	} else {
		CHECK(even == SHMEM_TEAM_INVALID, "odd PE got the even team");
		shmem_malloc(sizeof(long));
	}
	CHECK(shmem_team_translate_pe(SHMEM_TEAM_WORLD, 1, even) == -1 || n < 2 ||
	      me % 2, "odd PE 1 not in even team");

	/* team collectives on WORLD */
	int *src = shmem_malloc((size_t)n * 4 * sizeof(int));
	int *dst = shmem_malloc((size_t)n * n * 4 * sizeof(int));
	for (int i = 0; i < 4; i++)
		src[i] = me * 10 + i;
	shmem_barrier_all();
	CHECK(shmem_int_fcollect(SHMEM_TEAM_WORLD, dst, src, 4) == 0, "fcollect rc");
	for (int pe = 0; pe < n; pe++)
		CHECK(dst[pe * 4 + 3] == pe * 10 + 3, "fcollect [%d]", pe);
	shmem_barrier_all();   /* dest must be ready before a broadcast */
	CHECK(shmem_int_broadcast(SHMEM_TEAM_WORLD, dst, src, 4, n - 1) == 0, "bcast rc");
	CHECK(dst[2] == (n - 1) * 10 + 2, "broadcast incl. root: %d", dst[2]);
	shmem_barrier_all();
	CHECK(shmem_int_collect(SHMEM_TEAM_WORLD, dst, src, (size_t)(me % 3)) == 0, "collect");
	int k = 0;
	for (int pe = 0; pe < n; pe++)
		for (int i = 0; i < pe % 3; i++, k++)
			CHECK(dst[k] == pe * 10 + i, "collect [%d]", k);
	for (int j = 0; j < n; j++)
		src[j] = me * 100 + j;
	shmem_barrier_all();
	shmem_int_alltoall(SHMEM_TEAM_WORLD, dst, src, 1);
	for (int j = 0; j < n; j++)
		CHECK(dst[j] == j * 100 + me, "alltoall [%d]=%d", j, dst[j]);
	shmem_barrier_all();
	shmem_int_alltoalls(SHMEM_TEAM_WORLD, dst, src, 2, 1, 1);
	for (int j = 0; j < n; j++)
		CHECK(dst[2 * j] == j * 100 + me, "alltoalls [%d]", j);
	long *ls = shmem_malloc(4 * sizeof(long)), *ld = shmem_malloc(4 * sizeof(long));
	for (int i = 0; i < 4; i++)
		ls[i] = me + i;
	shmem_barrier_all();
	shmem_long_sum_reduce(SHMEM_TEAM_WORLD, ld, ls, 4);
	CHECK(ld[1] == (long)n * (n - 1) / 2 + n, "sum_reduce %ld", ld[1]);
	shmem_long_max_reduce(SHMEM_TEAM_WORLD, ld, ls, 4);
	CHECK(ld[0] == n - 1, "max_reduce");
	shmem_long_min_reduce(SHMEM_TEAM_WORLD, ld, ls, 4);
	CHECK(ld[0] == 0, "min_reduce");
	shmem_long_prod_reduce(SHMEM_TEAM_WORLD, ld, ls, 4);
	CHECK(ld[0] == (n == 1 ? 0 : 0), "prod_reduce");
	unsigned *us = shmem_malloc(sizeof(unsigned)), *ud = shmem_malloc(sizeof(unsigned));
	*us = 1u << me;
	shmem_barrier_all();
	shmem_uint_or_reduce(SHMEM_TEAM_WORLD, ud, us, 1);
	CHECK(*ud == (1u << n) - 1, "or_reduce");
	shmem_uint_xor_reduce(SHMEM_TEAM_WORLD, ud, us, 1);
	CHECK(*ud == (1u << n) - 1, "xor_reduce");
	shmem_uint_and_reduce(SHMEM_TEAM_WORLD, ud, us, 1);
	CHECK(*ud == (n == 1), "and_reduce");
	double _Complex *zs = shmem_malloc(sizeof *zs), *zd = shmem_malloc(sizeof *zd);
	*zs = me + 1.0 * I;
	shmem_barrier_all();
	shmem_complexd_sum_reduce(SHMEM_TEAM_WORLD, zd, zs, 1);
	CHECK(creal(*zd) == n * (n - 1) / 2.0 && cimag(*zd) == n, "complex sum");

	/* reductions inside the even team */
	if (even != SHMEM_TEAM_INVALID) {
		ls[0] = me;
		shmem_long_sum_reduce(even, ld, ls, 1);
		long want = 0;
		for (int pe = 0; pe < n; pe += 2)
			want += pe;
		CHECK(ld[0] == want, "even sum %ld want %ld", ld[0], want);
		shmem_team_sync(even);
	}

	/* split_2d: a grid with rows of 2 */
	shmem_team_t xt, yt;
	r = shmem_team_split_2d(SHMEM_TEAM_WORLD, 2, NULL, 0, &xt, NULL, 0, &yt);
	CHECK(r == 0 && xt != SHMEM_TEAM_INVALID && yt != SHMEM_TEAM_INVALID, "split_2d");
	CHECK(shmem_team_my_pe(xt) == me % 2, "x my_pe %d", shmem_team_my_pe(xt));
	CHECK(shmem_team_my_pe(yt) == me / 2, "y my_pe %d", shmem_team_my_pe(yt));
	CHECK(shmem_team_n_pes(yt) == (n - me % 2 + 1) / 2, "y n_pes");
	ls[0] = me;
	shmem_long_sum_reduce(yt, ld, ls, 1);
	long want = 0;
	for (int pe = me % 2; pe < n; pe += 2)
		want += pe;
	CHECK(ld[0] == want, "y-team sum %ld want %ld", ld[0], want);
	shmem_long_sum_reduce(xt, ld, ls, 1);
	want = 0;
	for (int pe = me - me % 2; pe < n && pe < me - me % 2 + 2; pe++)
		want += pe;
	CHECK(ld[0] == want, "x-team sum %ld want %ld", ld[0], want);

	/* split of a split: every other PE of the y team */
	shmem_team_t yy;
	if (shmem_team_n_pes(yt) >= 2) {
		shmem_team_split_strided(yt, 1, 1, shmem_team_n_pes(yt) - 1, NULL, 0, &yy);
		if (shmem_team_my_pe(yt) >= 1) {
			CHECK(yy != SHMEM_TEAM_INVALID, "yy");
			CHECK(shmem_team_translate_pe(yy, 0, SHMEM_TEAM_WORLD) == me % 2 + 2,
			      "yy translate");
			shmem_team_sync(yy);
			shmem_team_destroy(yy);
		}
	}
	CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 1, n + 1, NULL, 0, &yy) != 0 &&
	      yy == SHMEM_TEAM_INVALID, "oversized split fails");
	shmem_team_destroy(xt);
	shmem_team_destroy(yt);
	if (even != SHMEM_TEAM_INVALID)
		shmem_team_destroy(even);
	/* many create/destroy cycles do not run out of team slots */
	for (int i = 0; i < 100; i++) {
		shmem_team_t t;
		CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 1, n, NULL, 0, &t) == 0,
		      "cycle %d", i);
		shmem_team_destroy(t);
	}
	return test_done("teams");
}
