/* Symmetric memory: malloc/calloc/realloc/align/free give the same
 * object on every PE, usable remotely; shmem_ptr, accessibility queries. */
#include <stdint.h>
#include <string.h>
#include "check.h"

static int sglobal;

int main(void)
{
	shmem_init();
	int me = shmem_my_pe(), n = shmem_n_pes();
	int right = (me + 1) % n;
	char *blocks[10];
	for (int i = 0; i < 10; i++) {
		blocks[i] = shmem_malloc((size_t)(i + 1) * 1000);
		CHECK(blocks[i] != NULL, "malloc %d", i);
		memset(blocks[i], me, (size_t)(i + 1) * 1000);
	}
	shmem_barrier_all();
	for (int i = 0; i < 10; i++) {
		char c = 0;
		shmem_getmem(&c, blocks[i] + i * 999, 1, right);
		CHECK(c == right, "block %d from PE %d: %d", i, right, c);
	}
	shmem_barrier_all();
	for (int i = 0; i < 10; i += 2)
		shmem_free(blocks[i]);
	double *a = shmem_align(4096, 3 * sizeof(double));
	CHECK(a && ((uintptr_t)a & 4095) == 0, "align 4096: %p", (void *)a);
	int *z = shmem_calloc(100, sizeof(int));
	shmem_barrier_all(); /* some implementations zero after their barrier */
	int nz = 0;
	for (int i = 0; i < 100; i++)
		nz += z[i] != 0;
	CHECK(!nz, "calloc not zero");
	z[99] = me + 1;
	z = shmem_realloc(z, 10000 * sizeof(int));
	CHECK(z && z[99] == me + 1, "realloc keeps contents");
	shmem_int_p(&z[9999], me, right);
	shmem_barrier_all();
	CHECK(z[9999] == (me + n - 1) % n, "realloc'd block reachable");
#if SHMEM_MAJOR_VERSION > 1 || SHMEM_MINOR_VERSION >= 5
	CHECK(shmem_malloc(0) == NULL, "malloc(0) is NULL");
	void *hinted = shmem_malloc_with_hints(128, SHMEM_MALLOC_ATOMICS_REMOTE);
	CHECK(hinted != NULL, "malloc_with_hints");
	shmem_free(hinted);
#endif

	CHECK(shmem_pe_accessible(right) && !shmem_pe_accessible(n), "pe_accessible");
	CHECK(shmem_addr_accessible(z, right), "addr_accessible heap");
	CHECK(shmem_addr_accessible(&sglobal, right), "addr_accessible static");
	int local;
	CHECK(!shmem_addr_accessible(&local, right), "stack is not symmetric");
	int *p = shmem_ptr(z, me);
	CHECK(p == z, "shmem_ptr to self");
	int *q = shmem_ptr(z, right);
	if (q)
		CHECK(*(volatile int *)&q[9999] == me, "shmem_ptr load");
	int major, minor;
	char name[SHMEM_MAX_NAME_LEN];
	shmem_info_get_version(&major, &minor);
	shmem_info_get_name(name);
	CHECK(major == 1 && minor >= 4 && name[0], "version %d.%d", major, minor);
	shmem_barrier_all();
	shmem_free(z);
	shmem_free(a);
	for (int i = 1; i < 10; i += 2)
		shmem_free(blocks[i]);
	return test_done("mem");
}
