/* shmem-test: 1.5
 * put_signal (SET and ADD, blocking and nbi), signal_fetch,
 * signal_wait_until. */
#include "check.h"

int main(void)
{
	shmem_init();
	int me = shmem_my_pe(), n = shmem_n_pes();
	int right = (me + 1) % n, left = (me + n - 1) % n;
	long *data = shmem_calloc(4096, sizeof(long));
	uint64_t *sig = shmem_calloc(2, sizeof(uint64_t));
	shmem_barrier_all();
	for (int r = 1; r <= 20; r++) {
		long v[4096];
		for (int i = 0; i < 4096; i++)
			v[i] = r * 100000 + me * 10000 + i;
		if (r % 2)
			shmem_long_put_signal(data, v, 4096, &sig[0], (uint64_t)r,
			                      SHMEM_SIGNAL_SET, right);
		else
			shmem_long_put_signal_nbi(data, v, 4096, &sig[0], (uint64_t)r,
			                          SHMEM_SIGNAL_SET, right);
		uint64_t s = shmem_signal_wait_until(&sig[0], SHMEM_CMP_GE, (uint64_t)r);
		CHECK(s >= (uint64_t)r, "signal %llu", (unsigned long long)s);
		CHECK(data[0] == r * 100000 + left * 10000 && data[4095] == r * 100000 + left * 10000 + 4095,
		      "data before signal, round %d", r);
		shmem_barrier_all();
	}
	/* everyone adds to PE 0's second signal */
	shmem_putmem_signal(&data[me], &me, 0, &sig[1], 3, SHMEM_SIGNAL_ADD, 0);
	if (me == 0) {
		shmem_signal_wait_until(&sig[1], SHMEM_CMP_EQ, 3u * (unsigned)n);
		CHECK(shmem_signal_fetch(&sig[1]) == 3u * (unsigned)n, "signal add");
	}
	return test_done("signal");
}
