/* Shared by the OpenSHMEM test programs: only <shmem.h>, so each program
 * builds with ntbx's oshcc and with Open MPI's. */
#ifndef SHMEM_TEST_CHECK_H
#define SHMEM_TEST_CHECK_H
#include <stdio.h>
#include <stdlib.h>
#include <shmem.h>

static int test_failures;
#define CHECK(cond, ...)                                                    \
	do {                                                                \
		if (!(cond)) {                                              \
			fprintf(stderr, "FAIL %s:%d PE %d: ", __FILE__, __LINE__, \
			        shmem_my_pe());                             \
			fprintf(stderr, __VA_ARGS__);                       \
			fprintf(stderr, "\n");                              \
			if (++test_failures > 20)                           \
				shmem_global_exit(1);                       \
		}                                                           \
	} while (0)

/* Call at the end instead of shmem_finalize(). */
static int test_done(const char *name)
{
	shmem_barrier_all();
	if (shmem_my_pe() == 0 && !test_failures)
		printf("PASS %s (%d PEs)\n", name, shmem_n_pes());
	fflush(stdout);
	shmem_finalize();
	return test_failures ? 1 : 0;
}
#endif
