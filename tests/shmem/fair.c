/* shmem-test: 1.5
 * shmem_test_any / shmem_wait_until_any (and the _vector forms) may return
 * any satisfying index (spec 1.5 9.10.5, 9.10.7); a program that handles
 * the index it gets and finds it satisfied again at once (re-armed) must
 * still reach the others, as in Sandia OpenSHMEM, which does not always
 * start its scan at 0.  Every index here stays satisfied; in a bounded
 * number of calls each must be returned at least once. */
#include <stdint.h>
#include <string.h>
#include "check.h"

enum { N = 7, ROUNDS = 64 * N };

static int all_seen(const int *seen)
{
	for (int i = 0; i < N; i++)
		if (!seen[i])
			return 0;
	return 1;
}

int main(void)
{
	shmem_init();
	int me = shmem_my_pe(), n = shmem_n_pes();
	int *flags = shmem_calloc(N, sizeof(int));
	shmem_barrier_all();
	/* every PE sets every flag of its right neighbour */
	for (int i = 0; i < N; i++)
		shmem_int_atomic_set(&flags[i], i + 1, (me + 1) % n);
	shmem_int_wait_until_all(flags, N, NULL, SHMEM_CMP_NE, 0);
	int cmpv[N];
	for (int i = 0; i < N; i++)
		cmpv[i] = i + 1;
	int status[N] = { 0 };
	status[3] = 1;   /* an excluded index is never returned */

	for (int form = 0; form < 4; form++) {
		int seen[N] = { 0 };
		seen[3] = 1;
		for (int r = 0; r < ROUNDS && !all_seen(seen); r++) {
			size_t ix;
			switch (form) {
			case 0: ix = shmem_int_test_any(flags, N, status, SHMEM_CMP_GT, 0); break;
			case 1: ix = shmem_int_wait_until_any(flags, N, status, SHMEM_CMP_GT, 0); break;
			case 2: ix = shmem_int_test_any_vector(flags, N, status, SHMEM_CMP_EQ, cmpv); break;
			default: ix = shmem_int_wait_until_any_vector(flags, N, status, SHMEM_CMP_EQ, cmpv); break;
			}
			CHECK(ix < N && ix != 3, "form %d: index %zu", form, ix);
			if (ix < N)
				seen[ix] = 1;
		}
		for (int i = 0; i < N; i++)
			CHECK(seen[i], "form %d: index %d never returned in %d calls "
			      "while always satisfied", form, i, ROUNDS);
	}
	shmem_barrier_all();
	shmem_free(flags);
	return test_done("fair");
}
