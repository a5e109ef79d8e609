/* Atomics: standard, extended and bitwise sets, heap and static data,
 * and the deprecated names. */
#include "check.h"

static long scount;
static unsigned int sbits;

int main(void)
{
	shmem_init();
	int me = shmem_my_pe(), n = shmem_n_pes();
	long *cnt = shmem_calloc(4, sizeof(long));
	shmem_barrier_all(); /* some implementations zero after their barrier */
	int *icnt = shmem_calloc(1, sizeof(int));
	unsigned long long *bits = shmem_calloc(1, sizeof *bits);
	double *dv = shmem_calloc(1, sizeof(double));
	shmem_barrier_all(); /* some implementations zero after their barrier */
	const int iters = 200;
	for (int i = 0; i < iters; i++) {
		shmem_long_atomic_fetch_add(&cnt[0], 2, 0);
		shmem_long_atomic_inc(&cnt[1], 0);
		shmem_int_atomic_add(icnt, 3, 0);
#ifndef OMPI_KNOWN_BUGS  /* OSHMEM 4.1.4 loses AMOs on static data */
		shmem_long_atomic_add(&scount, 1, n - 1);
#endif
	}
	shmem_ulonglong_atomic_or(bits, 1ull << me, 0);
#ifndef OMPI_KNOWN_BUGS
	shmem_uint_atomic_fetch_or(&sbits, 1u << (me + 3), 0);
#endif
	shmem_barrier_all();
	if (me == 0) {
		CHECK(cnt[0] == 2L * iters * n, "fetch_add total %ld", cnt[0]);
		CHECK(cnt[1] == (long)iters * n, "inc total %ld", cnt[1]);
		CHECK(*icnt == 3 * iters * n, "int add total %d", *icnt);
		CHECK(*bits == (1ull << n) - 1, "or bits %llx", *bits);
#ifndef OMPI_KNOWN_BUGS
		CHECK(sbits == ((1u << n) - 1) << 3, "static or %x", sbits);
#endif
	}
#ifndef OMPI_KNOWN_BUGS
	if (me == n - 1)
		CHECK(scount == (long)iters * n, "static add %ld", scount);
#endif
	shmem_barrier_all();

	/* fetch-inc gives every PE a distinct ticket */
	long *tickets = shmem_calloc((size_t)n, sizeof(long));
	shmem_barrier_all(); /* some implementations zero after their barrier */
	long t = shmem_long_atomic_fetch_inc(&cnt[2], 0);
	CHECK(t >= 0 && t < n, "ticket %ld", t);
	for (int pe = 0; pe < n; pe++)
		shmem_long_p(&tickets[t], 1, pe);
	shmem_barrier_all();
	for (int i = 0; i < n; i++)
		CHECK(tickets[i] == 1, "ticket %d not taken", i);

	/* compare-swap: exactly one PE wins */
	shmem_barrier_all();
	long old = shmem_long_atomic_compare_swap(&cnt[3], 0, me + 1, 0);
	long *wins = shmem_calloc(1, sizeof(long));
	shmem_barrier_all(); /* some implementations zero after their barrier */
	if (old == 0)
		shmem_long_atomic_inc(wins, 0);
	shmem_barrier_all();
	if (me == 0)
		CHECK(*wins == 1 && cnt[3] >= 1 && cnt[3] <= n, "cswap winners %ld", *wins);

	/* swap, set, fetch (extended, incl. double) */
	shmem_barrier_all();
	if (me == 1 % n) {
		shmem_double_atomic_set(dv, 2.5, 0);
		double prev = shmem_double_atomic_swap(dv, 7.25, 0);
		CHECK(prev == 2.5, "double swap prev %g", prev);
		CHECK(shmem_double_atomic_fetch(dv, 0) == 7.25, "double fetch");
		int prevset = shmem_int_atomic_swap(icnt, -4, 0);
		CHECK(prevset == 3 * iters * n, "int swap prev %d", prevset);
	}
	shmem_barrier_all();
	CHECK(shmem_int_atomic_fetch(icnt, 0) == -4, "fetch after swap");
	shmem_barrier_all();

	/* bitwise and/xor */
	if (me == 0)
		*bits = ~0ull;
	shmem_barrier_all();
	shmem_ulonglong_atomic_and(bits, ~(1ull << me), 0);
	shmem_barrier_all();
	if (me == 0)
		CHECK(*bits == ~((1ull << n) - 1), "and %llx", *bits);
	shmem_barrier_all();
#ifndef OMPI_KNOWN_BUGS  /* OSHMEM 4.1.4: fetch_xor leaves 0; 32-bit xor smashes the stack */
	uint64_t *x = shmem_calloc(1, sizeof *x);
	shmem_barrier_all(); /* some implementations zero after their barrier */
	uint64_t f = shmem_uint64_atomic_fetch_xor(x, 1ull << me, 0);
	(void)f;
	shmem_uint32_atomic_xor((uint32_t *)&sbits, 1u, 0);
	shmem_barrier_all();
	if (me == 0) {
		CHECK(*x == (1ull << n) - 1, "xor %llx", (unsigned long long)*x);
		CHECK((sbits & 1) == (unsigned)(n & 1), "static xor");
	}

#endif
	/* deprecated names */
	shmem_barrier_all();
	int *dep = shmem_calloc(2, sizeof(int));
	shmem_barrier_all(); /* some implementations zero after their barrier */
	shmem_barrier_all();
	shmem_int_fadd(&dep[0], 5, 0);
	shmem_int_finc(&dep[0], 0);
	shmem_int_inc(&dep[1], 0);
	shmem_int_add(&dep[1], 2, 0);
	shmem_barrier_all();
	if (me == 0)
		CHECK(dep[0] == 6 * n && dep[1] == 3 * n, "deprecated amo %d %d",
		      dep[0], dep[1]);
	shmem_barrier_all();
	if (me == 0) {
#ifndef OMPI_KNOWN_BUGS  /* OSHMEM 4.1.4: shmem_int_cswap smashes the caller's stack */
		CHECK(shmem_int_cswap(&dep[0], 6 * n, 1, 0) == 6 * n, "cswap");
#else
		shmem_int_set(&dep[0], 1, 0);
#endif
		CHECK(shmem_int_swap(&dep[0], 9, 0) == 1, "swap");
		CHECK(shmem_int_fetch(&dep[0], 0) == 9, "fetch");
		shmem_int_set(&dep[0], 11, 0);
		CHECK(dep[0] == 11, "set");
		CHECK(shmem_long_swap(&cnt[0], 0, 0) == 2L * iters * n, "long swap");
	}
	return test_done("amo");
}
