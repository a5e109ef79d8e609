/* SPDX-License-Identifier: MIT */
/*
 * The symmetric heap allocator.  Every PE runs the same first-fit over the
 * same sequence of collective calls, so every object gets the same offset
 * on every PE without any communication; the list lives in private memory.
 *
 * OpenSHMEM 1.6: Memory Management Routines (shmem_malloc,
 * shmem_malloc_with_hints, shmem_calloc, shmem_align, shmem_realloc,
 * shmem_free, and the deprecated shmalloc, shfree, shrealloc, shmemalign).
 */
#include <stdlib.h>
#include <string.h>

#include "shmem_int.h"
#include "shmemx.h"

struct seg { size_t off, size; int used; };
static struct seg *segs;
static size_t nsegs, capsegs;
static char *hbase;
static size_t hsize;
static size_t halign;   /* hbase is a multiple of it on every PE */

void ntbx_sh_heap_init(char *base, size_t size, size_t align)
{
	hbase = base;
	hsize = size;
	halign = align;
	free(segs);
	capsegs = 64;
	segs = malloc(capsegs * sizeof *segs);
	if (!segs)
		ntbx_sh_die("out of memory");
	segs[0] = (struct seg){ 0, size, 0 };
	nsegs = 1;
}

static void insert(size_t at, struct seg s)
{
	if (nsegs == capsegs) {
		struct seg *n = realloc(segs, 2 * capsegs * sizeof *segs);
		if (!n)
			ntbx_sh_die("out of memory");
		segs = n;
		capsegs *= 2;
	}
	memmove(&segs[at + 1], &segs[at], (nsegs - at) * sizeof *segs);
	segs[at] = s;
	nsegs++;
}

static void erase(size_t at)
{
	memmove(&segs[at], &segs[at + 1], (nsegs - at - 1) * sizeof *segs);
	nsegs--;
}

static void *heap_alloc(size_t size, size_t align)
{
	if (!size)
		return NULL;
	if (align > halign) {
		/* Only hbase itself could be that aligned, and not on every
		 * PE at the same offset. */
		ntbx_sh_debug("shmem_align: alignment %zu is larger than the "
		              "symmetric heap (SHMEM_SYMMETRIC_SIZE, %zu bytes)",
		              align, hsize);
		return NULL;
	}
	size = NTBX_ALIGN_UP(size, 64);
	for (size_t i = 0; i < nsegs; i++) {
		struct seg *s = &segs[i];
		if (s->used)
			continue;
		size_t a = NTBX_ALIGN_UP(s->off, align);
		if (a < s->off || a - s->off + size > s->size ||
		    a - s->off + size < size)
			continue;
		size_t end = s->off + s->size;
		if (a > s->off) {   /* leading free gap */
			s->size = a - s->off;
			insert(++i, (struct seg){ a, end - a, 0 });
			s = &segs[i];
		}
		if (s->size > size)
			insert(i + 1, (struct seg){ a + size, s->size - size, 0 });
		segs[i].size = size;
		segs[i].used = 1;
		return hbase + a;
	}
	ntbx_sh_debug("symmetric heap exhausted: no free block of %zu bytes "
	              "(raise SHMEM_SYMMETRIC_SIZE, now %zu bytes)", size, hsize);
	return NULL;
}

static ssize_t find(void *p)
{
	size_t off = (size_t)((char *)p - hbase);
	for (size_t i = 0; i < nsegs; i++)
		if (segs[i].off == off && segs[i].used)
			return (ssize_t)i;
	return -1;
}

static void heap_free(void *p)
{
	ssize_t i = find(p);
	if (i < 0)
		ntbx_sh_die("shmem_free: %p is not a symmetric heap object", p);
	segs[i].used = 0;
	if ((size_t)i + 1 < nsegs && !segs[i + 1].used) {
		segs[i].size += segs[i + 1].size;
		erase((size_t)i + 1);
	}
	if (i > 0 && !segs[i - 1].used) {
		segs[i - 1].size += segs[i].size;
		erase((size_t)i);
	}
}

void *shmem_malloc(size_t size)
{
	void *p = heap_alloc(size, 64);
	shmem_barrier_all();
	return p;
}

void *shmem_malloc_with_hints(size_t size, long hints)
{
	/* SOS's SHMEMX_MALLOC_NO_BARRIER: the caller synchronises itself
	 * (every PE still makes the same calls in the same order). */
	if (hints & SHMEMX_MALLOC_NO_BARRIER)
		return heap_alloc(size, 64);
	return shmem_malloc(size);
}

void *shmem_calloc(size_t count, size_t size)
{
	void *p = NULL;
	if (!size || count <= SIZE_MAX / size) {
		p = heap_alloc(count * size, 64);
		if (p)
			memset(p, 0, count * size);
	}
	shmem_barrier_all();
	return p;
}

void *shmem_align(size_t alignment, size_t size)
{
	void *p = NULL;
	if (alignment && !(alignment & (alignment - 1)))
		p = heap_alloc(size, alignment < 64 ? 64 : alignment);
	else
		ntbx_sh_debug("shmem_align: alignment %zu is not a power of two",
		              alignment);
	shmem_barrier_all();
	return p;
}

void shmem_free(void *ptr)
{
	shmem_barrier_all();
	if (ptr)
		heap_free(ptr);
}

void *shmem_realloc(void *ptr, size_t size)
{
	shmem_barrier_all();
	void *n = NULL;
	if (!ptr) {
		n = heap_alloc(size, 64);
	} else if (!size) {
		heap_free(ptr);
	} else {
		ssize_t i = find(ptr);
		if (i < 0)
			ntbx_sh_die("shmem_realloc: %p is not a symmetric heap "
			            "object", ptr);
		size_t old = segs[i].size;
		n = heap_alloc(size, 64);
		if (n) {
			memcpy(n, ptr, old < size ? old : size);
			heap_free(ptr);
		}
	}
	shmem_barrier_all();
	return n;
}

void *shmalloc(size_t size) { return shmem_malloc(size); }
void shfree(void *ptr) { shmem_free(ptr); }
void *shrealloc(void *ptr, size_t size) { return shmem_realloc(ptr, size); }
void *shmemalign(size_t alignment, size_t size)
{
	return shmem_align(alignment, size);
}
