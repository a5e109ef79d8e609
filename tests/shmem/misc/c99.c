/* A C99 program (no _Generic): the deprecated shmem_wait and
 * shmem_wait_until are functions it can call and link. */
#include <stdio.h>
#include <shmem.h>

int main(void)
{
	shmem_init();
	int me = shmem_my_pe(), n = shmem_n_pes();
	long *x = shmem_calloc(2, sizeof(long));
	shmem_long_p(&x[0], 7, (me + 1) % n);
	shmem_long_p(&x[1], 3, (me + 1) % n);
	shmem_wait(&x[0], 0);
	shmem_wait_until(&x[1], SHMEM_CMP_EQ, 3);
	int ok = x[0] == 7 && x[1] == 3;
	shmem_barrier_all();
	if (me == 0 && ok)
		printf("PASS c99\n");
	shmem_free(x);
	shmem_finalize();
	return ok ? 0 : 1;
}
