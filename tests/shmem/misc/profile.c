/* The profiling interface: a tool defines shmem_putmem, counts the call
 * and forwards it to pshmem_putmem. */
#include <stdio.h>
#include <pshmem.h>

static int calls;

void shmem_putmem(void *dest, const void *source, size_t nelems, int pe)
{
	calls++;
	pshmem_putmem(dest, source, nelems, pe);
}

int main(void)
{
	shmem_init();
	int me = shmem_my_pe(), n = shmem_n_pes();
	long *x = shmem_malloc(sizeof(long));
	long v = me + 100;
	*x = 0;
	shmem_barrier_all();
	shmem_putmem(x, &v, sizeof v, (me + 1) % n);
	shmem_barrier_all();
	int ok = calls == 1 && *x == (me + n - 1) % n + 100;
	if (me == 0 && ok)
		printf("PASS profile\n");
	shmem_finalize();
	return ok ? 0 : 1;
}
