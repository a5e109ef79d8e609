/* shmem-test: 1.5
 * shmem_team_split_strided with a negative stride (spec 1.6 9.4.7: the
 * new team is parent PEs start, start + stride, ... start + (size-1) *
 * stride, and the stride may be negative): membership, numbering,
 * translation, a team context, a team barrier and team collectives. */
#include <string.h>
#include "check.h"

/* Checks a team that should hold world PEs first, first+wstride, ... */
static int *src, *dst;   /* symmetric: allocated by every PE of the world */

static void check_team(shmem_team_t t, int first, int wstride, int size,
                       const char *what)
{
	int me = shmem_my_pe();
	int idx = -1;
	for (int i = 0; i < size; i++)
		if (first + i * wstride == me)
			idx = i;
	if (idx < 0) {
		CHECK(t == SHMEM_TEAM_INVALID, "%s: not a member, got a team", what);
		return;
	}
	CHECK(t != SHMEM_TEAM_INVALID, "%s: member %d got no team", what, idx);
	if (t == SHMEM_TEAM_INVALID)
		return;
	CHECK(shmem_team_my_pe(t) == idx, "%s: my_pe %d, want %d", what,
	      shmem_team_my_pe(t), idx);
	CHECK(shmem_team_n_pes(t) == size, "%s: n_pes %d", what, shmem_team_n_pes(t));
	for (int i = 0; i < size; i++) {
		CHECK(shmem_team_translate_pe(t, i, SHMEM_TEAM_WORLD) == first + i * wstride,
		      "%s: team PE %d -> world %d", what, i,
		      shmem_team_translate_pe(t, i, SHMEM_TEAM_WORLD));
		CHECK(shmem_team_translate_pe(SHMEM_TEAM_WORLD, first + i * wstride, t) == i,
		      "%s: world %d -> team", what, first + i * wstride);
	}
	CHECK(shmem_team_sync(t) == 0, "%s: team_sync", what);
	/* fcollect: element i comes from team PE i */
	*src = me * 10 + 1;
	CHECK(shmem_int_fcollect(t, dst, src, 1) == 0, "%s: fcollect", what);
	for (int i = 0; i < size; i++)
		CHECK(dst[i] == (first + i * wstride) * 10 + 1,
		      "%s: fcollect[%d] = %d", what, i, dst[i]);
	/* broadcast from team PE 0, which is world PE first (its dest
	 * must be free on every member first: a team barrier) */
	shmem_team_sync(t);
	*src = me;
	CHECK(shmem_int_broadcast(t, dst, src, 1, 0) == 0, "%s: broadcast", what);
	if (idx != 0)
		CHECK(dst[0] == first, "%s: broadcast got %d", what, dst[0]);
	shmem_team_sync(t);
}

int main(void)
{
	shmem_init();
	int me = shmem_my_pe(), n = shmem_n_pes();
	src = shmem_malloc(sizeof(int));
	dst = shmem_malloc((size_t)n * sizeof(int));

	/* the world reversed */
	shmem_team_t rev;
	int r = shmem_team_split_strided(SHMEM_TEAM_WORLD, n - 1, -1, n, NULL, 0, &rev);
	CHECK(r == 0, "split_strided(n-1, -1, n) = %d", r);
	check_team(rev, n - 1, -1, n, "reversed");

	/* a team context numbers PEs in the team: team PE 0 is world PE n-1 */
	long *x = shmem_calloc(1, sizeof(long));
	shmem_ctx_t ctx;
	CHECK(shmem_team_create_ctx(rev, 0, &ctx) == 0, "team ctx");
	shmem_ctx_long_atomic_add(ctx, x, 1, 0);
	shmem_ctx_quiet(ctx);
	shmem_ctx_destroy(ctx);
	shmem_barrier_all();
	CHECK(*x == (me == n - 1 ? n : 0), "ctx add to team PE 0: %ld", *x);

	/* every other PE from the top: n-1, n-3, ... */
	shmem_team_t odd;
	int sz = (n + 1) / 2;
	r = shmem_team_split_strided(SHMEM_TEAM_WORLD, n - 1, -2, sz, NULL, 0, &odd);
	CHECK(r == 0, "split_strided(n-1, -2, %d) = %d", sz, r);
	check_team(odd, n - 1, -2, sz, "stride -2");

	/* a negative split of the reversed team is the world in order */
	if (rev != SHMEM_TEAM_INVALID) {
		shmem_team_t fwd;
		r = shmem_team_split_strided(rev, n - 1, -1, n, NULL, 0, &fwd);
		CHECK(r == 0, "split of reversed = %d", r);
		check_team(fwd, 0, 1, n, "reversed twice");
		shmem_team_destroy(fwd);
	}

	/* out of the parent at the far end: every PE gets an error */
	shmem_team_t bad;
	r = shmem_team_split_strided(SHMEM_TEAM_WORLD, n - 1, -1, n + 1, NULL, 0, &bad);
	CHECK(r != 0 && bad == SHMEM_TEAM_INVALID, "split past PE 0 accepted");

	shmem_team_destroy(odd);
	shmem_team_destroy(rev);
	shmem_free(x);
	shmem_free(dst);
	shmem_free(src);
	return test_done("teams_neg");
}
