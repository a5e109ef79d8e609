/* The smallest program: every PE says hello. */
#include <stdio.h>
#include <shmem.h>

int main(void)
{
	shmem_init();
	printf("Hello from PE %d of %d\n", shmem_my_pe(), shmem_n_pes());
	shmem_finalize();
	return 0;
}
