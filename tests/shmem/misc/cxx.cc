// shmem.h from C++: the typed routines (the _Generic macros are C11 only).
#include <cstdio>
#include <shmem.h>

int main()
{
	shmem_init();
	int me = shmem_my_pe(), n = shmem_n_pes();
	long *x = static_cast<long *>(shmem_malloc(sizeof(long)));
	*x = -1;
	shmem_barrier_all();
	shmem_long_p(x, me, (me + 1) % n);
	shmem_barrier_all();
	shmem_wait_until(x, SHMEM_CMP_GE, 0);   // a function, also for C++
	int ok = *x == (me + n - 1) % n;
	long s = shmem_long_atomic_fetch_add(x, 0, 0);
	(void)s;
	shmem_free(x);
	if (me == 0 && ok)
		std::printf("PASS cxx\n");
	shmem_finalize();
	return ok ? 0 : 1;
}
