/* set_lock/test_lock/clear_lock: a counter updated with get+put (not an
 * atomic) under the lock never loses an update. */
#include "check.h"

static long lock;

int main(void)
{
	shmem_init();
	int me = shmem_my_pe(), n = shmem_n_pes();
	long *counter = shmem_calloc(1, sizeof(long));
	long *lock2 = shmem_calloc(1, sizeof(long));
	shmem_barrier_all();
	const int iters = 100;
	for (int i = 0; i < iters; i++) {
		shmem_set_lock(&lock);
		long v = shmem_long_g(counter, 0);
		shmem_long_p(counter, v + 1, 0);
		shmem_quiet();
		shmem_clear_lock(&lock);
	}
	shmem_barrier_all();   /* the second lock guards the same counter */
	int got = 0;
	for (int i = 0; i < iters; i++) {
		if (!shmem_test_lock(lock2)) {
			long v = shmem_long_g(counter, 0);
			shmem_long_p(counter, v + 1, 0);
			shmem_quiet();
			shmem_clear_lock(lock2);
			got++;
		}
	}
	long *gots = shmem_calloc(1, sizeof(long));
	shmem_barrier_all();
	shmem_long_atomic_add(gots, got, 0);
	shmem_barrier_all();
	if (me == 0)
		CHECK(*counter == (long)iters * n + *gots, "counter %ld want %ld",
		      *counter, (long)iters * n + *gots);
	CHECK(got >= 1 || n > 1, "test_lock never succeeded");
	return test_done("lock");
}
