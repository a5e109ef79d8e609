/* shmem-test: 1.5
 * wait_until_all/any/some and their _vector forms, test_all/any/some. */
#include "check.h"

int main(void)
{
	shmem_init();
	int me = shmem_my_pe(), n = shmem_n_pes();
	long *flags = shmem_calloc((size_t)n, sizeof(long));
	shmem_barrier_all();
	for (int pe = 0; pe < n; pe++)
		shmem_long_atomic_set(&flags[me], me + 1, pe);
	shmem_long_wait_until_all(flags, (size_t)n, NULL, SHMEM_CMP_NE, 0);
	for (int i = 0; i < n; i++)
		CHECK(flags[i] == i + 1, "all [%d]", i);
	CHECK(shmem_long_test_all(flags, (size_t)n, NULL, SHMEM_CMP_GT, 0), "test_all");
	size_t ix = shmem_long_wait_until_any(flags, (size_t)n, NULL, SHMEM_CMP_EQ, n);
	CHECK(ix == (size_t)n - 1, "any %zu", ix);
	int *status = calloc((size_t)n, sizeof(int));
	status[n - 1] = 1;   /* excluded */
	CHECK(shmem_long_test_any(flags, (size_t)n, status, SHMEM_CMP_EQ, n) == SIZE_MAX,
	      "test_any skips excluded");
	size_t idx[64];
	size_t c = shmem_long_wait_until_some(flags, (size_t)n, idx, NULL, SHMEM_CMP_LE, 2);
	CHECK(c == (size_t)(n < 2 ? n : 2) && idx[0] == 0, "some %zu", c);
	c = shmem_long_test_some(flags, (size_t)n, idx, NULL, SHMEM_CMP_GE, 1);
	CHECK(c == (size_t)n, "test_some %zu", c);
	long want[64];
	for (int i = 0; i < n; i++)
		want[i] = i + 1;
	shmem_long_wait_until_all_vector(flags, (size_t)n, NULL, SHMEM_CMP_EQ, want);
	CHECK(shmem_long_test_all_vector(flags, (size_t)n, NULL, SHMEM_CMP_EQ, want), "all_vector");
	want[0] = 99;
	ix = shmem_long_wait_until_any_vector(flags, (size_t)n, NULL, SHMEM_CMP_EQ, want);
	CHECK(ix != 0 || n == 1, "any_vector %zu", ix);
	c = shmem_long_test_some_vector(flags, (size_t)n, idx, NULL, SHMEM_CMP_NE, want);
	CHECK(c == 1 && idx[0] == 0, "some_vector");
	c = shmem_long_wait_until_some_vector(flags, (size_t)n, idx, NULL, SHMEM_CMP_NE, want);
	CHECK(c == 1, "wait some_vector");
	/* another type */
	uint32_t *u = shmem_calloc(1, sizeof(uint32_t));
	shmem_barrier_all();
	shmem_uint32_atomic_add(u, 1, 0);
	if (me == 0)
		shmem_uint32_wait_until(u, SHMEM_CMP_EQ, (uint32_t)n);
	free(status);
	return test_done("wait15");
}
