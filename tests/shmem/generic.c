/* shmem-test: 1.5
 * The C11 _Generic interfaces, with and without a context. */
#include "check.h"

int main(void)
{
	shmem_init();
	int me = shmem_my_pe(), n = shmem_n_pes();
	int right = (me + 1) % n, left = (me + n - 1) % n;
	double *d = shmem_calloc(4, sizeof(double));
	int *i = shmem_calloc(4, sizeof(int));
	long *l = shmem_calloc(4, sizeof(long));
	shmem_barrier_all();
	double dv[4] = { me, me + 0.5, 2, 3 };
	shmem_put(d, dv, 4, right);
	shmem_p(&i[1], me * 3, right);
	shmem_atomic_add(&l[0], 5L, 0);
	shmem_atomic_inc(SHMEM_CTX_DEFAULT, &l[1], 0);
	shmem_barrier_all();
	CHECK(d[1] == left + 0.5, "generic put double");
	CHECK(i[1] == left * 3, "generic p int");
	double g[4];
	shmem_get(g, d, 4, right);
	CHECK(g[0] == me, "generic get");
	CHECK(shmem_g(&i[1], right) == me * 3, "generic g");
	long f = shmem_atomic_fetch(&l[0], 0);
	CHECK(f == 5L * n, "generic fetch %ld", f);
	if (me == 0)
		CHECK(l[1] == n, "generic ctx inc");
	shmem_barrier_all();
	if (me == 0) {
		shmem_wait_until(&l[0], SHMEM_CMP_GE, 5L * n);
		CHECK(shmem_test(&l[0], SHMEM_CMP_EQ, 5L * n), "generic test");
	}
	long s = 1, *sym = shmem_calloc(1, sizeof(long));
	*sym = s;
	shmem_barrier_all();
	shmem_sum_reduce(SHMEM_TEAM_WORLD, &l[2], sym, 1);
	CHECK(l[2] == n, "generic sum_reduce");
	/* the deprecated generic AMO names */
	shmem_barrier_all();
	int *di = shmem_calloc(1, sizeof(int));
	shmem_barrier_all();
	shmem_fadd(di, 2, 0);
	shmem_finc(di, 0);
	shmem_add(di, 3, 0);
	shmem_inc(di, 0);
	shmem_barrier_all();
	if (me == 0) {
		CHECK(shmem_fetch(di, 0) == 7 * n, "shmem_fetch %d", *di);
		CHECK(shmem_cswap(di, 7 * n, 1, 0) == 7 * n, "shmem_cswap");
		CHECK(shmem_swap(di, 2, 0) == 1, "shmem_swap");
		shmem_set(di, 5, 0);
		CHECK(*di == 5, "shmem_set");
	}
	return test_done("generic");
}
