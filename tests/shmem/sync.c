/* barrier_all ordering, wait_until/test, fence and quiet, shmem_wait. */
#include "check.h"

static int flag;

int main(void)
{
	shmem_init();
	int me = shmem_my_pe(), n = shmem_n_pes();
	int right = (me + 1) % n, left = (me + n - 1) % n;
	long *data = shmem_calloc(1024, sizeof(long));
	shmem_barrier_all(); /* some implementations zero after their barrier */
	long *ready = shmem_calloc(1, sizeof(long));

	/* barrier rounds: every PE sees everyone's round */
	int *round = shmem_calloc((size_t)n, sizeof(int));
	shmem_barrier_all(); /* some implementations zero after their barrier */
	for (int r = 1; r <= 20; r++) {
		for (int pe = 0; pe < n; pe++)
			shmem_int_p(&round[me], r, pe);
		shmem_barrier_all();
		for (int pe = 0; pe < n; pe++)
			CHECK(round[pe] == r, "round %d from %d: %d", r, pe, round[pe]);
		shmem_barrier_all();
	}

	/* put; fence; flag -- the receiver waits on the flag, then the data
	 * must be there */
	for (int r = 1; r <= 50; r++) {
		long buf[1024];
		for (int i = 0; i < 1024; i++)
			buf[i] = r * 10000 + me + i;
		shmem_long_put(data, buf, 1024, right);
		shmem_fence();
		shmem_long_atomic_set(ready, r, right);
		shmem_long_wait_until(ready, SHMEM_CMP_GE, r);
		CHECK(data[0] == r * 10000 + left && data[1023] == r * 10000 + left + 1023,
		      "fence ordering round %d: %ld", r, data[0]);
		shmem_barrier_all();
	}

	/* quiet then flag, static flag, test() polling */
	shmem_long_p(&data[7], 4242, right);
	shmem_quiet();
	shmem_int_p(&flag, 1, right);
#ifndef OMPI_KNOWN_BUGS  /* OSHMEM 4.1.4: test() on static data never sees the put */
	while (!shmem_int_test(&flag, SHMEM_CMP_EQ, 1))
		;
#else
	shmem_int_wait_until(&flag, SHMEM_CMP_EQ, 1);
#endif
	CHECK(data[7] == 4242, "quiet ordering");
	shmem_barrier_all();

	/* all comparison operators */
	int *v = shmem_calloc(1, sizeof(int));
	shmem_barrier_all(); /* some implementations zero after their barrier */
	*v = 5;
	CHECK(shmem_int_test(v, SHMEM_CMP_EQ, 5) && shmem_int_test(v, SHMEM_CMP_NE, 4) &&
	      shmem_int_test(v, SHMEM_CMP_GT, 4) && shmem_int_test(v, SHMEM_CMP_GE, 5) &&
	      shmem_int_test(v, SHMEM_CMP_LT, 6) && shmem_int_test(v, SHMEM_CMP_LE, 5) &&
	      !shmem_int_test(v, SHMEM_CMP_LT, 5), "comparisons");
	shmem_barrier_all();

	/* deprecated shmem_wait: waits while *ivar == value */
	long *w = shmem_calloc(1, sizeof(long));
	shmem_barrier_all(); /* some implementations zero after their barrier */
	shmem_long_p(w, 3, right);
	shmem_long_wait(w, 0);
	CHECK(*w == 3, "shmem_long_wait");
	/* sync_all is a barrier without completion of puts (we quiet first) */
	shmem_quiet();
	shmem_sync_all();
	return test_done("sync");
}
