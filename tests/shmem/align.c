/* shmem_align (spec 1.5 9.3.3): "the value of alignment shall be a multiple
 * of the byte alignment ... and a power of two"; the returned block is
 * aligned to it and, like every symmetric allocation, is the same object
 * on every PE: a put to it on another PE lands in that PE's block. */
#include <stdint.h>
#include <string.h>
#include "check.h"

int main(void)
{
	shmem_init();
	int me = shmem_my_pe(), n = shmem_n_pes();
	int right = (me + 1) % n, left = (me + n - 1) % n;
	enum { MAXSHIFT = 22 };   /* up to 4 MiB: the tests' heap is 32 MiB */
	char *blk[MAXSHIFT + 1];
	for (int k = 0; k <= MAXSHIFT; k++) {
		/* an odd-sized object in between moves the free space on */
		char *odd = shmem_malloc(100 + (size_t)k * 8);
		size_t align = (size_t)1 << k;
		blk[k] = shmem_align(align, 24);
		CHECK(blk[k] != NULL, "shmem_align(%zu) is NULL", align);
		if (blk[k])
			CHECK(((uintptr_t)blk[k] & (align - 1)) == 0,
			      "shmem_align(%zu) = %p is not aligned", align,
			      (void *)blk[k]);
		shmem_free(odd);
	}
	for (int k = 0; k <= MAXSHIFT; k++) {
		if (!blk[k])
			continue;
		char v[24];
		memset(v, (me * 31 + k) & 0x7f, sizeof v);
		shmem_putmem(blk[k], v, sizeof v, right);
	}
	shmem_barrier_all();
	for (int k = 0; k <= MAXSHIFT; k++) {
		if (!blk[k])
			continue;
		int bad = 0;
		for (int i = 0; i < 24; i++)
			bad += blk[k][i] != (char)((left * 31 + k) & 0x7f);
		CHECK(!bad, "align %zu: the block is not the left PE's target",
		      (size_t)1 << k);
	}
	shmem_barrier_all();
	for (int k = MAXSHIFT; k >= 0; k--)
		shmem_free(blk[k]);
	return test_done("align");
}
