/* SPDX-License-Identifier: MIT */
/*
 * Node-memory allocator of the shm backend.
 *
 * The table is an unsorted array of entries under the node's robust mutex.
 * Each change is one store of an entry's @state (the other fields are
 * written before it, on allocation), so a process killed at any point,
 * lock held or not, leaves a consistent table: the next locker gets
 * EOWNERDEAD, marks the mutex consistent and goes on.  An allocation
 * sorts the used entries to find the first gap: O(n log n) for n used
 * entries, a few microseconds for hundreds.  Every scan stops at block_hi,
 * one past the highest entry ever used: allocation takes the lowest free
 * entry, so that is the most blocks ever live at once, not SHM_BLOCKS (a
 * connection's set-up and tear-down scan the table several times, and a
 * 2048-entry scan is 128 KiB of reads).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dev/shm/shm.h"
#include "util/util.h"

struct span { uint64_t off, size; };

static int span_cmp(const void *a, const void *b)
{
	const struct span *x = a, *y = b;
	return x->off < y->off ? -1 : x->off > y->off;
}

/* Entries worth scanning (lock held): a bad block_hi from a corrupt
 * register file is clamped, not trusted. */
static int scan_end(const struct shm_dev *sd)
{
	uint32_t hi = sd->regs->block_hi;
	return hi < SHM_BLOCKS ? (int)hi : SHM_BLOCKS;
}

/* One load of a table entry into private memory: the register file is
 * shared, so every check and use below is of this copy. */
static void load_block(const struct shm_block *b, struct shm_block *e)
{
	memcpy(e, (const void *)b, sizeof *e);
}

/* Is the owner of @b alive?  Our own slot is (our lock does not show up
 * in our own GETLK); another slot is if its generation is unchanged and
 * its lock is held. */
static int owner_alive(struct shm_dev *sd, const struct shm_block *b)
{
	int s = b->owner_slot;
	if (s < 0)
		return 1;
	if (s >= SHM_SLOTS)
		return 0;
	if (s == sd->slot)
		return b->owner_gen == sd->slot_gen;
	if (__atomic_load_n(&sd->regs->waiter[s].gen, __ATOMIC_ACQUIRE) !=
	    b->owner_gen)
		return 0;
	return shm_locked_by_other(sd->live_fd, SHM_LIVE_SLOT0 + s, 1) > 0;
}

/* Free dead owners' blocks; lock held.  Returns how many. */
static int reap_locked(struct shm_dev *sd)
{
	int n = 0, end = scan_end(sd);
	for (int i = 0; i < end; i++) {
		struct shm_block *b = &sd->regs->block[i], e;
		load_block(b, &e);
		if (e.state == SHM_BLOCK_USED && !owner_alive(sd, &e)) {
			__atomic_store_n(&b->state, SHM_BLOCK_FREE, __ATOMIC_RELEASE);
			n++;
		}
	}
	return n;
}

static int64_t find_gap(struct shm_dev *sd, uint64_t size, uint64_t align,
                        int *free_idx)
{
	/* Safe as a static: only the holder of the node lock uses it. */
	static struct span used[SHM_BLOCKS];
	uint64_t memsz = sd->dev.mem_size;
	int n = 0, end = scan_end(sd);
	*free_idx = -1;
	for (int i = 0; i < end; i++) {
		struct shm_block e;
		load_block(&sd->regs->block[i], &e);
		if (e.state != SHM_BLOCK_USED) {
			if (*free_idx < 0)
				*free_idx = i;
			continue;
		}
		/* Entries are written by this node's processes only, but a
		 * bad one must not wreck the search: skip it. */
		if (e.off > memsz || e.size > memsz - e.off)
			continue;
		used[n].off = e.off;
		used[n++].size = e.size;
	}
	if (*free_idx < 0 && end < SHM_BLOCKS)
		*free_idx = end;   /* the first never-used entry */
	if (*free_idx < 0)
		return -EMFILE;
	qsort(used, (size_t)n, sizeof *used, span_cmp);
	uint64_t at = 0;
	for (int i = 0; i <= n; i++) {
		uint64_t start = NTBX_ALIGN_UP(at, align);
		uint64_t end = i < n ? used[i].off : memsz;
		if (start <= end && end - start >= size)
			return (int64_t)start;
		if (i < n && used[i].off + used[i].size > at)
			at = used[i].off + used[i].size;
	}
	return -ENOSPC;
}

int64_t shm_mem_alloc(struct ntbx_dev *dev, size_t size, size_t align,
                      const char *tag, int owned)
{
	struct shm_dev *sd = SHM(dev);
	uint64_t sz = NTBX_ALIGN_UP((uint64_t)size, 64);
	int e = shm_mutex_lock(&sd->regs->lock);
	if (e < 0)
		return e;
	int idx;
	int64_t off = find_gap(sd, sz, align, &idx);
	if ((off == -ENOSPC || off == -EMFILE) && reap_locked(sd) > 0)
		off = find_gap(sd, sz, align, &idx);
	if (off >= 0) {
		struct shm_block *b = &sd->regs->block[idx];
		b->off = (uint64_t)off;
		b->size = sz;
		b->owner_slot = owned ? sd->slot : -1;
		b->owner_gen = sd->slot_gen;
		b->owner_pid = owned ? (int32_t)getpid() : 0;
		strncpy(b->tag, tag, sizeof b->tag - 1);
		b->tag[sizeof b->tag - 1] = 0;
		if ((uint32_t)idx >= sd->regs->block_hi)
			__atomic_store_n(&sd->regs->block_hi, (uint32_t)idx + 1,
			                 __ATOMIC_RELEASE);
		__atomic_store_n(&b->state, SHM_BLOCK_USED, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&sd->regs->lock);
	if (off == -ENOSPC)
		ntbx_err(ENOSPC, "fabric '%s': node %d's memory is full (%zu bytes "
		         "asked, %llu in all); create the fabric with a larger "
		         "--window", sd->desc.name, dev->node, size,
		         (unsigned long long)dev->mem_size);
	return off;
}

int shm_mem_free(struct ntbx_dev *dev, int64_t off)
{
	struct shm_dev *sd = SHM(dev);
	int e = shm_mutex_lock(&sd->regs->lock);
	if (e < 0)
		return e;
	int r = -ENOENT, end = scan_end(sd);
	for (int i = 0; i < end; i++) {
		struct shm_block *b = &sd->regs->block[i];
		if (b->state == SHM_BLOCK_USED && b->off == (uint64_t)off) {
			__atomic_store_n(&b->state, SHM_BLOCK_FREE, __ATOMIC_RELEASE);
			r = 0;
			break;
		}
	}
	pthread_mutex_unlock(&sd->regs->lock);
	return r;
}

int shm_mem_reap(struct ntbx_dev *dev)
{
	struct shm_dev *sd = SHM(dev);
	int e = shm_mutex_lock(&sd->regs->lock);
	if (e < 0)
		return e;
	int n = reap_locked(sd);
	pthread_mutex_unlock(&sd->regs->lock);
	return n;
}

int shm_mem_list(struct ntbx_dev *dev, struct ntbx_mem_block *out, int max)
{
	struct shm_dev *sd = SHM(dev);
	int e = shm_mutex_lock(&sd->regs->lock);
	if (e < 0)
		return e;
	int n = 0, end = scan_end(sd);
	for (int i = 0; i < end; i++) {
		struct shm_block e;
		load_block(&sd->regs->block[i], &e);
		if (e.state != SHM_BLOCK_USED)
			continue;
		if (n < max) {
			out[n].off = e.off;
			out[n].size = e.size;
			out[n].owner_pid = e.owner_pid;
			memcpy(out[n].tag, e.tag, sizeof out[n].tag);
			out[n].tag[sizeof out[n].tag - 1] = 0;
		}
		n++;
	}
	pthread_mutex_unlock(&sd->regs->lock);
	return n;
}
