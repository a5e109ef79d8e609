/* Puts, gets, atomics and put-then-flag to PEs 1, 2 and 3 away at once
 * (on a ring: a neighbour, one relayed through the node in between, one
 * forwarded hop by hop), every PE at the same time, every byte checked.
 * A put of 1 MiB + 37 bytes at an odd offset crosses every request and
 * ring-record boundary.  Starvation check, not a timing one: under
 * NTBX_SPIN_US=0 every wait sleeps and must still be woken.
 * (tests/shmem_relay.sh runs it with the relay off and on 7 PEs too.) */
#include <string.h>
#include "check.h"

#define DISTS 3
#define LEN ((1 << 20) + 37)
#define OFF 3

static unsigned char pattern(int src, int d, size_t i)
{
	return (unsigned char)(i * 131 + (size_t)src * 17 + (size_t)d * 5 + 1);
}

int main(void)
{
	shmem_init();
	int me = shmem_my_pe(), n = shmem_n_pes();
	unsigned char *slot = shmem_malloc((size_t)DISTS * (LEN + OFF));
	long *flag = shmem_calloc(DISTS, sizeof(long));
	long *count = shmem_calloc(1, sizeof(long));
	unsigned char *src = malloc(LEN), *back = malloc(LEN);
	CHECK(slot && flag && count && src && back, "out of memory");
	memset(slot, 0, (size_t)DISTS * (LEN + OFF));
	shmem_barrier_all();

	/* Put to each distance, then a flag after a fence: the target
	 * waits for the flag and must then see every byte. */
	for (int d = 1; d <= DISTS; d++) {
		int to = (me + d) % n;
		for (size_t i = 0; i < LEN; i++)
			src[i] = pattern(me, d, i);
		shmem_putmem(slot + (size_t)(d - 1) * (LEN + OFF) + OFF, src,
		             LEN, to);
		shmem_fence();
		shmem_long_p(&flag[d - 1], 1, to);
	}
	for (int d = 1; d <= DISTS; d++) {
		int from = ((me - d) % n + n) % n;
		shmem_long_wait_until(&flag[d - 1], SHMEM_CMP_EQ, 1);
		const unsigned char *s = slot + (size_t)(d - 1) * (LEN + OFF) + OFF;
		size_t bad = 0;
		for (size_t i = 0; i < LEN; i++)
			bad += s[i] != pattern(from, d, i);
		CHECK(bad == 0, "distance %d: %zu of %d bytes from PE %d wrong",
		      d, bad, LEN, from);
	}
	shmem_barrier_all();

	/* Get back what we put, from each distance. */
	for (int d = 1; d <= DISTS; d++) {
		int to = (me + d) % n;
		memset(back, 0, LEN);
		shmem_getmem(back, slot + (size_t)(d - 1) * (LEN + OFF) + OFF,
		             LEN, to);
		size_t bad = 0;
		for (size_t i = 0; i < LEN; i++)
			bad += back[i] != pattern(me, d, i);
		CHECK(bad == 0, "get from distance %d: %zu bytes wrong", d, bad);
	}

	/* Atomics: every PE adds to every PE's counter 100 times, with
	 * fetch; the sum must be exact. */
	for (int k = 0; k < 100; k++)
		for (int d = 0; d < n; d++)
			(void)shmem_long_atomic_fetch_add(count, 1, (me + d) % n);
	shmem_barrier_all();
	CHECK(*count == 100L * n, "counter %ld, not %ld", *count, 100L * n);

	/* Put and quiet back to back, small: the quiet's reply must come
	 * every time (no lost wake-up of the relay or the putting PE). */
	for (int k = 0; k < 2000; k++) {
		shmem_long_p(&flag[0], k, (me + 2) % n);
		shmem_quiet();
	}
	shmem_barrier_all();
	CHECK(flag[0] == 1999, "last small put: %ld", flag[0]);

	free(src);
	free(back);
	return test_done("relay");
}
