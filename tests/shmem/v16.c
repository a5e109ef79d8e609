/* shmem-test: 1.6
 * OpenSHMEM 1.6 routines, each against its specification text:
 * version, shmem_query_initialized, shmem_team_ptr, shmem_ibput/ibget
 * (typed, sized, ctx, generic), shmem_signal_add/set, the sum scans,
 * shmem_pe_quiet, context sessions; and the shmemx_ spellings. */
#include <stdint.h>
#include <string.h>
#include <shmemx.h>
#include "check.h"

int main(void)
{
	int ini = -1;
	shmem_query_initialized(&ini);
	if (ini != 0) {
		fprintf(stderr, "FAIL query_initialized before init: %d\n", ini);
		return 1;
	}
	shmem_init();
	shmem_init();   /* nested: one more finalize needed */
	int me = shmem_my_pe(), n = shmem_n_pes();
	int right = (me + 1) % n, left = (me + n - 1) % n;
	shmem_query_initialized(&ini);
	CHECK(ini == 1, "query_initialized after init: %d", ini);
	CHECK(SHMEM_MAJOR_VERSION == 1 && SHMEM_MINOR_VERSION == 6, "version macros");
	int major, minor;
	shmem_info_get_version(&major, &minor);
	CHECK(major == 1 && minor == 6, "info_get_version %d.%d", major, minor);

	/* shmem_team_ptr: team numbering; own PE is always reachable */
	long *w = shmem_calloc(8, sizeof(long));
	shmem_team_t rev;
	shmem_team_split_strided(SHMEM_TEAM_WORLD, n - 1, -1, n, NULL, 0, &rev);
	CHECK(shmem_team_ptr(rev, w, n - 1 - me) == (void *)w, "team_ptr self");
	long *rp = shmem_team_ptr(rev, w, n - 1 - right);
	CHECK(rp == shmem_ptr(w, right), "team_ptr = shmem_ptr of the world PE");
	CHECK(shmem_team_ptr(rev, w, n) == NULL, "team_ptr out of range");
	CHECK(shmem_team_ptr(SHMEM_TEAM_INVALID, w, 0) == NULL, "team_ptr invalid team");

	/* ibput: 3 blocks of 2 ints, source stride 5, dest stride 3 */
	int *ib = shmem_calloc(32, sizeof(int));
	int src[32];
	for (int i = 0; i < 32; i++)
		src[i] = me * 100 + i;
	shmem_int_ibput(ib, src, 3, 5, 2, 3, right);
	shmem_barrier_all();
	for (int b = 0; b < 3; b++)
		for (int e = 0; e < 2; e++)
			CHECK(ib[b * 3 + e] == left * 100 + b * 5 + e,
			      "ibput block %d elem %d = %d", b, e, ib[b * 3 + e]);
	CHECK(ib[2] == 0 && ib[5] == 0 && ib[8] == 0, "ibput wrote between blocks");
	/* ibget of those blocks back into a contiguous buffer (dst = bsize) */
	int got[8] = { 0 };
	shmem_int_ibget(got, ib, 2, 3, 2, 3, right);
	for (int b = 0; b < 3; b++)
		for (int e = 0; e < 2; e++)
			CHECK(got[b * 2 + e] == me * 100 + b * 5 + e, "ibget %d.%d", b, e);
	/* sized and ctx forms, and the generic one */
	shmem_barrier_all();
	uint64_t *q = shmem_calloc(16, sizeof(uint64_t));
	uint64_t qs[16];
	for (int i = 0; i < 16; i++)
		qs[i] = (uint64_t)me << 32 | (uint64_t)i;
	shmem_ctx_ibput64(SHMEM_CTX_DEFAULT, q, qs, 4, 4, 1, 4, right);
	shmem_barrier_all();
	for (int b = 0; b < 4; b++)
		CHECK(q[b * 4] == ((uint64_t)left << 32 | (uint64_t)(b * 4)), "ibput64 %d", b);
	long lg[4];
	long *lsrc = shmem_calloc(4, sizeof(long));
	for (int i = 0; i < 4; i++)
		lsrc[i] = me + i;
	shmem_barrier_all();
	shmem_ibget(lg, lsrc, 2, 2, 2, 2, right);   /* generic */
	CHECK(lg[0] == right && lg[1] == right + 1 && lg[2] == right + 2 &&
	      lg[3] == right + 3, "generic ibget");

	/* signal_add / signal_set */
	uint64_t *sig = shmem_calloc(2, sizeof(uint64_t));
	shmem_barrier_all();
	shmem_signal_add(&sig[0], 2, 0);
	shmem_ctx_signal_add(SHMEM_CTX_DEFAULT, &sig[0], 1, 0);
	shmem_signal_set(&sig[1], (uint64_t)me + 1, right);
	if (me == 0)
		CHECK(shmem_signal_wait_until(&sig[0], SHMEM_CMP_EQ, 3 * (uint64_t)n) ==
		      3 * (uint64_t)n, "signal_add");
	uint64_t sv1 = shmem_signal_wait_until(&sig[1], SHMEM_CMP_NE, 0);
	CHECK(sv1 == (uint64_t)left + 1, "signal_set: %llu", (unsigned long long)sv1);
	shmem_barrier_all();
	shmemx_signal_set(&sig[1], 0, right);   /* the SOS spelling */
	shmem_barrier_all();
	CHECK(shmem_signal_fetch(&sig[1]) == 0, "shmemx_signal_set");

	/* scans: dest on PE k is the sum over PEs 0..k (in) / 0..k-1 (ex) */
	long *sv = shmem_malloc(2 * sizeof(long)), *sd = shmem_malloc(2 * sizeof(long));
	sv[0] = me + 1;
	sv[1] = 10L * me;
	CHECK(shmem_long_sum_inscan(SHMEM_TEAM_WORLD, sd, sv, 2) == 0, "inscan ret");
	CHECK(sd[0] == (long)(me + 1) * (me + 2) / 2 && sd[1] == 10L * me * (me + 1) / 2,
	      "inscan %ld %ld", sd[0], sd[1]);
	CHECK(shmem_long_sum_exscan(SHMEM_TEAM_WORLD, sd, sv, 2) == 0, "exscan ret");
	CHECK(sd[0] == (long)me * (me + 1) / 2 && sd[1] == 10L * me * (me - 1) / 2,
	      "exscan %ld %ld", sd[0], sd[1]);
	double *dv = shmem_malloc(sizeof(double)), *dd = shmem_malloc(sizeof(double));
	*dv = 0.5;
	CHECK(shmem_sum_inscan(rev, dd, dv, 1) == 0, "generic inscan");
	CHECK(*dd == 0.5 * (n - me), "inscan on the reversed team: %g", *dd);
	CHECK(shmemx_double_sum_exscan(rev, dd, dv, 1) == 0 && *dd == 0.5 * (n - 1 - me),
	      "shmemx exscan on the reversed team: %g", *dd);

	/* pe_quiet: the puts to the listed PEs are complete, so a flag set
	 * after it cannot overtake them */
	int *data = shmem_calloc(64, sizeof(int));
	int *flag = shmem_calloc(1, sizeof(int));
	int ones[64];
	for (int i = 0; i < 64; i++)
		ones[i] = me + 1;
	shmem_int_put_nbi(data, ones, 64, right);
	int tp[1] = { right };
	shmem_pe_quiet(tp, 1);
	shmem_ctx_pe_quiet(SHMEM_CTX_DEFAULT, tp, 0);
	shmem_int_atomic_set(flag, 1, right);
	shmem_int_wait_until(flag, SHMEM_CMP_EQ, 1);
	int bad = 0;
	for (int i = 0; i < 64; i++)
		bad += data[i] != left + 1;
	CHECK(!bad, "pe_quiet: data after the flag");

	/* sessions are hints: everything in one still happens */
	shmem_ctx_t ctx;
	CHECK(shmem_ctx_create(0, &ctx) == 0, "ctx_create");
	shmem_session_config_t sc = { .total_ops = 8 };
	shmem_barrier_all();
	shmem_ctx_session_start(ctx, SHMEM_SESSION_BATCH, &sc, SHMEM_SESSION_TOTAL_OPS);
	for (int i = 0; i < 8; i++)
		shmem_ctx_long_atomic_inc(ctx, &w[1], right);
	shmem_ctx_session_stop(ctx);
	shmem_ctx_quiet(ctx);
	shmem_ctx_destroy(ctx);
	shmem_barrier_all();
	CHECK(w[1] == 8, "session incs %ld", w[1]);

	/* shmemx extensions */
	CHECK(shmem_team_n_pes(SHMEMX_TEAM_NODE) >= 1, "SHMEMX_TEAM_NODE");
	double t0 = shmemx_wtime();
	CHECK(t0 > 0 && shmemx_wtime() >= t0, "shmemx_wtime");
	long *nb = shmem_malloc_with_hints(64, SHMEMX_MALLOC_NO_BARRIER);
	CHECK(nb != NULL, "MALLOC_NO_BARRIER");
	shmem_barrier_all();   /* the caller's own synchronisation */
	shmem_long_p(nb, me, right);
	shmem_barrier_all();
	CHECK(*nb == left, "no-barrier object is symmetric");

	shmem_barrier_all();
	shmem_free(nb);
	shmem_team_destroy(rev);
	shmem_finalize();   /* the nested init */
	shmem_query_initialized(&ini);
	CHECK(ini == 1, "still initialized after the inner finalize");
	return test_done("v16");
}
