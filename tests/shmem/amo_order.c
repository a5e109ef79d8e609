/* shmem-test: 1.5
 *
 * Non-fetching atomics are completed by quiet and ordered by fence
 * before the puts that follow (to a PE reached by requests they travel
 * without a reply and its progress thread applies them, while a put may
 * go by DMA with no thread at all: it must not overtake them).  Each
 * round, PE 0 adds to a counter on every other PE, fences or quiets, and
 * puts the round number; the other PE, seeing the round, must see the
 * counter at it.  Then the same with shmem_atomic_set and a signal. */
#include <string.h>
#include "check.h"

#define ROUNDS 300

int main(void)
{
	shmem_init();
	int me = shmem_my_pe(), n = shmem_n_pes();
	long *ctr = shmem_calloc(1, sizeof(long));
	long *val = shmem_calloc(1, sizeof(long));
	long *flag = shmem_calloc(1, sizeof(long));
	long *ack = shmem_calloc((size_t)n, sizeof(long));
	uint64_t *sig = shmem_calloc(1, sizeof(uint64_t));
	char *big = shmem_malloc(65536);
	CHECK(ctr && val && flag && ack && sig && big, "malloc");
	shmem_barrier_all();
	for (long r = 1; r <= ROUNDS; r++) {
		if (me == 0) {
			for (int pe = 1; pe < n; pe++) {
				shmem_long_atomic_add(ctr, 1, pe);
				shmem_long_atomic_set(val, r, pe);
				if (r & 1)
					shmem_fence();
				else
					shmem_quiet();
				/* a put (by DMA where the backend has it),
				 * then the round */
				shmem_putmem(big, &r, sizeof r, pe);
				shmem_long_p(flag, r, pe);
			}
			for (int pe = 1; pe < n; pe++)
				shmem_long_wait_until(&ack[pe], SHMEM_CMP_GE, r);
		} else {
			shmem_long_wait_until(flag, SHMEM_CMP_GE, r);
			long c = shmem_long_atomic_fetch(ctr, me);
			long v = shmem_long_atomic_fetch(val, me);
			long b;
			memcpy(&b, big, sizeof b);
			CHECK(c == r && v == r && b == r,
			      "round %ld: counter %ld, set %ld, put %ld", r, c, v, b);
			shmem_long_p(&ack[me], r, 0);
		}
	}
	/* put with signal: the data before the signal, every round */
	shmem_barrier_all();
	for (uint64_t r = 1; r <= ROUNDS; r++) {
		if (me == 0) {
			for (int pe = 1; pe < n; pe++) {
				memset(big, (int)(r & 0xff), 4096);
				shmem_putmem_signal(big + 8192, big, 4096, sig, r,
				                    SHMEM_SIGNAL_SET, pe);
			}
			for (int pe = 1; pe < n; pe++)
				shmem_long_wait_until(&ack[pe], SHMEM_CMP_GE,
				                      ROUNDS + (long)r);
		} else {
			shmem_signal_wait_until(sig, SHMEM_CMP_GE, r);
			unsigned char *d = (unsigned char *)big + 8192;
			CHECK(d[0] == (r & 0xff) && d[4095] == (r & 0xff),
			      "signal round %llu: data %u", (unsigned long long)r,
			      d[0]);
			shmem_long_p(&ack[me], ROUNDS + (long)r, 0);
		}
	}
	return test_done("amo_order");
}
