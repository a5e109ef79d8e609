/* SPDX-License-Identifier: MIT */
/*
 * The data collectives and reductions: collect, fcollect, alltoall(s),
 * reductions and scans, and the start-up measurement of the cost model
 * that picks their algorithms.
 *
 * OpenSHMEM 1.6: Collective Routines (shmem_collectmem, shmem_fcollectmem,
 * shmem_alltoallmem, shmem_alltoallsmem, the deprecated shmem_collect32/64,
 * _fcollect32/64, _alltoall32/64 and _alltoalls32/64 on active sets, and
 * the generic core of the typed team collectives, reductions
 * (shmem_TYPE_OP_reduce), the deprecated shmem_TYPE_OP_to_all and the
 * scans (shmem_TYPE_sum_inscan, _exscan), which gen_shmem.py generates
 * into shmem_typed_coll.c).  Barriers and broadcast: shmem_barrier.c; the
 * ring's algorithms: shmem_coll_ring.c.
 *
 * Data collectives read what they need from the peers' symmetric buffers
 * (gets) between two synchronisations; reductions on a switch push into
 * inboxes or reduce-scatter ("reductions").  On a ring, sets of neighbours
 * use the ring algorithms instead (shmem_coll_ring.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shmem_int.h"
#include "util/settings.h"
#include "util/util.h"

/*
 * The cost model that picks between algorithms, measured at start-up
 * (ntbx_sh_coll_init) by PE 0 and read by every PE, so that all members of
 * a collective pick the same algorithm (a choice per PE could differ and
 * deadlock): the time of one synchronisation round (a world barrier) and
 * of moving one byte (memcpy of 1 MiB into a shared mapping, from the copy
 * calibration of src/util/copy.c; in sanitized builds, a copy of an
 * inbox).  0 until measured (one PE alone).
 */
double ntbx_sh_round_ns, ntbx_sh_byte_ns;

/* Reductions without a barrier (push on a switch, small ones on a ring)
 * done with each PE in each region (team slot, or SH_SLOTS for the active
 * sets): both PEs of a pair count alike ("reductions"). */
long ntbx_sh_red_pc[SH_SLOTS + 1][NTBX_MAX_NODES];
long ntbx_sh_red_lc[SH_SLOTS + 1][NTBX_MAX_NODES];

static void do_fcollect(const struct set *s, void *dest, const void *src,
                        size_t n)
{
	struct rv v;
	if (ntbx_sh_ring_view(s->start, s->stride, s->size, s->idx, s->bar, &v)) {
		ntbx_sh_ring_fcollect(&v, dest, src, n);
		return;
	}
	set_sync(s);
	for (int j = 0; j < s->size; j++)
		wget((char *)dest + (size_t)j * n, src, n, spe(s, j));
	set_sync(s);
}

static void do_collect(const struct set *s, void *dest, const void *src,
                       size_t n)
{
	struct rv v;
	if (ntbx_sh_ring_view(s->start, s->stride, s->size, s->idx, s->bar, &v)) {
		ntbx_sh_ring_collect(&v, sh_rscratch(s->team ? s->team->slot : -1), dest,
		             src, n);
		return;
	}
	__atomic_store_n(s->aux, (long)n + 1, __ATOMIC_RELEASE);
	set_sync(s);
	size_t off = 0;
	for (int j = 0; j < s->size; j++) {
		long nj;
		wget(&nj, s->aux, sizeof nj, spe(s, j));
		if (nj < 1)
			ntbx_sh_die("collect: PE %d did not publish its size", spe(s, j));
		wget((char *)dest + off, src, (size_t)nj - 1, spe(s, j));
		off += (size_t)nj - 1;
	}
	set_sync(s);
	__atomic_store_n(s->aux, 0, __ATOMIC_RELEASE);
}

static void do_alltoall(const struct set *s, void *dest, const void *src,
                        size_t n)
{
	set_sync(s);
	for (int k = 0; k < s->size; k++) {
		int j = (s->idx + k) % s->size;
		wget((char *)dest + (size_t)j * n,
		     (const char *)src + (size_t)s->idx * n, n, spe(s, j));
	}
	set_sync(s);
}

static void do_alltoalls(const struct set *s, void *dest, const void *src,
                         ptrdiff_t dst, ptrdiff_t sst, size_t nelems,
                         size_t es)
{
	set_sync(s);
	for (int j = 0; j < s->size; j++)
		ntbx_sh_iget(SHMEM_CTX_DEFAULT,
		             (char *)dest + (ptrdiff_t)((size_t)j * nelems) * dst * (ptrdiff_t)es,
		             (const char *)src + (ptrdiff_t)((size_t)s->idx * nelems) * sst * (ptrdiff_t)es,
		             dst, sst, nelems, es, spe(s, j));
	set_sync(s);
}

#define RED_CHUNK (64u << 10)

/*
 * Reductions on a switch, where every member is mapped and a CPU store or
 * load reaches any of them.  Two algorithms, both combining in member
 * order (each element is computed from the members' values 0, 1, ... in
 * turn, so every PE gets the same bits):
 *
 * - push, one round: each member copies its source into every other
 *   member's inbox for this region and stores the reduction's number in
 *   that member's flag word for it; each then waits on its own flags (all
 *   local) and combines the n contributions into dest.  No barrier: a
 *   member that finishes first may start the next reduction, so a sender
 *   waits until the receiver has consumed its previous contribution (the
 *   ack word the receiver stores back, in the sender's memory).  Numbers
 *   count the reductions a pair did in the region, which both sides of a
 *   pair count alike (members call collectives in the same order, and the
 *   choice of algorithm is the same on all), so one counter per pair and
 *   region serves every active set.  Each member moves (n-1) contributions
 *   out and n in.
 * - reduce-scatter + allgather, two rounds: after a synchronisation,
 *   member i combines slice i (whole cache lines) of every member's source
 *   and stores the result into slice i of every member's dest, then a
 *   second synchronisation.  A slice of a source is read, and the same
 *   slice of a dest written, only by its owner, so in place is safe.  Each
 *   member moves about 2 * bytes however many members there are.
 *
 * Push is taken while the model (ntbx_sh_round_ns, ntbx_sh_byte_ns) says
 * its extra data, (2n-1) against 3 passes over the bytes, costs less than
 * the round it saves, and the contribution fits an inbox.
 */
static void comb_long_sum(void *restrict a_, const void *restrict b_, size_t n)
{
	long *restrict a = a_;
	const long *restrict b = b_;
	for (size_t i = 0; i < n; i++)
		a[i] += b[i];
}

static int red_region(const struct set *s)
{
	return s->team ? s->team->slot : SH_SLOTS;
}

/* Largest contribution that goes by push in a set of all PEs, measured at
 * start-up by timing both algorithms (ntbx_sh_coll_init); -1 until then. */
static long red_xover = -1;

static int red_push_ok(int size, size_t bytes)
{
	if (bytes > SH_RSLOT || ntbx_sh_round_ns <= 0)
		return 0;
	if (size <= 2)   /* push moves 1 block out and 2 in: never more */
		return 1;
	if (red_xover >= 0 && ntbx_sh.npes > 2)
		/* the round saved is worth (2n-4) passes over the bytes */
		return (double)bytes * (2.0 * size - 4.0) <=
		       (double)red_xover * (2.0 * ntbx_sh.npes - 4.0);
	return (double)bytes * (2.0 * size - 4.0) * ntbx_sh_byte_ns < ntbx_sh_round_ns;
}

void *ntbx_sh_peer_ptr(const void *addr, size_t len, int wpe)
{
	struct sh_loc l;
	void *p = ntbx_sh_xlate(addr, len, wpe, "reduction", &l);
	if (!p)
		ntbx_sh_die("reduction: PE %d is not mapped", wpe);
	return p;
}

static void reduce_push(const struct set *s, void *dest, const void *src,
                        size_t n, size_t es, ntbx_comb_fn fn)
{
	int r = red_region(s), me = ntbx_sh.me, size = s->size;
	size_t bytes = n * es;
	long *pc = ntbx_sh_red_pc[r], *flag = sh_red_flag(r), *ack = sh_red_ack(r);
	for (int k = 1; k < size; k++) {
		int w = spe(s, (s->idx + k) % size);
		long seq = pc[w] + 1;
		uint64_t st = 0;
		while (__atomic_load_n(&ack[w], __ATOMIC_ACQUIRE) < seq - 1)
			ntbx_sh_spin(&st);
		ntbx_sh_spin_done(&st);
		memcpy(ntbx_sh_peer_ptr(sh_red_box(r, me), bytes, w), src, bytes);
		__atomic_store_n((long *)ntbx_sh_peer_ptr(&flag[me], 8, w), seq,
		                 __ATOMIC_RELEASE);
		ntbx_sh_kick(w);
	}
	const char *mine = src;
	if ((const char *)src < (char *)dest + bytes &&
	    (char *)dest < (const char *)src + bytes && s->idx > 0) {
		/* in place: dest is written before our turn comes */
		memcpy(sh_red_box(r, me), src, bytes);
		mine = sh_red_box(r, me);
	}
	for (int j = 0; j < size; j++) {
		int w = spe(s, j);
		const char *part = mine;
		if (j != s->idx) {
			uint64_t st = 0;
			while (__atomic_load_n(&flag[w], __ATOMIC_ACQUIRE) < pc[w] + 1)
				ntbx_sh_spin(&st);
			ntbx_sh_spin_done(&st);
			part = sh_red_box(r, w);
		}
		if (j == 0) {
			if (part != dest)
				memcpy(dest, part, bytes);
		} else {
			fn(dest, part, n);
		}
	}
	for (int k = 1; k < size; k++) {
		int w = spe(s, (s->idx + k) % size);
		__atomic_store_n((long *)ntbx_sh_peer_ptr(&ack[me], 8, w), ++pc[w],
		                 __ATOMIC_RELEASE);
		ntbx_sh_kick(w);
	}
}

/*
 * Push in one cache line, for contributions of at most SH_RLINE_DATA
 * bytes: each member stores its source, then the pair's number of the
 * reduction, into its line in every other member's memory (one line moves
 * per pair and direction, where push moves a box, a flag and an ack), and
 * combines the lines it receives in member order.  No ack and no barrier:
 * a pair's lines are used in turn, and a member can be at most one line
 * reduction ahead of another (it finishes reduction j only with every
 * member's contribution j, which each sends after finishing j-1), so the
 * line it writes for j+1 is not the one the other may still be reading for
 * j.  Numbers only grow and a line holds j or j-2, so the reader waits for
 * exactly j; x86 stores are seen in order, the number last.
 */
static void reduce_line(const struct set *s, void *dest, const void *src,
                        size_t n, size_t es, ntbx_comb_fn fn)
{
	int r = red_region(s), me = ntbx_sh.me, size = s->size;
	size_t bytes = n * es;
	long *lc = ntbx_sh_red_lc[r];
	char mine[SH_RLINE_DATA];
	memcpy(mine, src, bytes);   /* dest may be src (in place) */
	for (int k = 1; k < size; k++) {
		int w = spe(s, (s->idx + k) % size);
		long j = lc[w] + 1;
		struct sh_loc l;
		long *line = ntbx_sh_xlate(sh_red_line(r, me, j), 64, w,
		                           "reduction", &l);
		if (!line)
			ntbx_sh_die("reduction: PE %d is not mapped", w);
		memcpy(line + 1, mine, bytes);
		__atomic_store_n(line, j, __ATOMIC_RELEASE);
		ntbx_sh_kick_store(w, &l, 8);
	}
	for (int i = 0; i < size; i++) {
		int w = spe(s, i);
		const void *part = mine;
		if (i != s->idx) {
			long j = ++lc[w], *line = sh_red_line(r, w, j);
			uint64_t st = 0;
			while (__atomic_load_n(line, __ATOMIC_ACQUIRE) != j)
				ntbx_sh_spin_on(&st, line);
			ntbx_sh_spin_done(&st);
			part = line + 1;
		}
		if (i == 0)
			memcpy(dest, part, bytes);
		else
			fn(dest, part, n);
	}
}

static void reduce_rsag(const struct set *s, void *dest, const void *src,
                        size_t n, size_t es, ntbx_comb_fn fn)
{
	size_t line = es >= 64 ? 1 : 64 / es;
	size_t per = (n + (size_t)s->size - 1) / (size_t)s->size;
	per = (per + line - 1) / line * line;
	size_t lo = per * (size_t)s->idx < n ? per * (size_t)s->idx : n;
	size_t hi = n - lo < per ? n : lo + per;
	size_t cb = RED_CHUNK / es ? RED_CHUNK / es : 1;
	char *tmp = malloc((hi - lo < cb ? hi - lo : cb) * es + 1);
	if (!tmp)
		ntbx_sh_die("reduction: out of memory (%zu bytes)", cb * es);
	set_sync(s);
	for (size_t e0 = lo; e0 < hi; e0 += cb) {
		size_t m = hi - e0 < cb ? hi - e0 : cb, b = m * es;
		const char *sp = (const char *)src + e0 * es;
		for (int j = 0; j < s->size; j++) {
			const char *p = ntbx_sh_peer_ptr(sp, b, spe(s, j));
			if (j == 0)
				memcpy(tmp, p, b);
			else
				fn(tmp, p, m);
		}
		char *dp = (char *)dest + e0 * es;
		for (int k = 0; k < s->size; k++)
			ntbx_copy(ntbx_sh_peer_ptr(dp, b, spe(s, (s->idx + k) % s->size)),
			          tmp, b);
	}
	set_sync(s);
	free(tmp);
}

/* Elsewhere (a ring's set whose members are not neighbours): gets of the
 * sources between two synchronisations, combined in member order. */
static void reduce_get(const struct set *s, void *dest, const void *src,
                       size_t n, size_t es, ntbx_comb_fn fn)
{
	size_t bytes = n * es;
	char *acc = malloc(bytes ? bytes : 1);
	char *in = malloc(RED_CHUNK);
	if (!acc || !in)
		ntbx_sh_die("reduction: out of memory (%zu bytes)", bytes);
	set_sync(s);
	/* Same order on every PE: the same result, bit for bit. */
	wget(acc, src, bytes, spe(s, 0));
	size_t per = RED_CHUNK / es;
	for (int j = 1; j < s->size; j++)
		for (size_t i = 0; i < n; i += per) {
			size_t m = n - i < per ? n - i : per;
			wget(in, (const char *)src + i * es, m * es, spe(s, j));
			fn(acc + i * es, in, m);
		}
	set_sync(s);
	memcpy(dest, acc, bytes);
	free(acc);
	free(in);
}

static void do_reduce(const struct set *s, void *dest, const void *src,
                      size_t n, size_t es, const struct ntbx_red_op *op)
{
	size_t bytes = n * es;
	if (s->size == 1) {
		memmove(dest, src, bytes);
		return;
	}
	struct rv v;
	int apart = (const char *)src + bytes <= (char *)dest ||
	            (char *)dest + bytes <= (const char *)src;
	/* The ring's and the switch's reductions read members' memory
	 * through mapped windows; a DMA-only backend (via_qp) gets instead. */
	if (!ntbx_sh.via_qp &&
	    ntbx_sh_ring_view(s->start, s->stride, s->size, s->idx, s->bar, &v)) {
		if (bytes && ntbx_sh_ring_reduce_small(&v, bytes))
			ntbx_sh_ring_reduce_ag(&v, s->start, s->stride, red_region(s), dest,
			               src, n, es, op->f, v.n);
		else if (v.cycle && op->exact && (dest == src || apart))
			ntbx_sh_ring_reduce_rsag(&v, dest, src, n, es, op);
		else if (v.cycle && apart && v.R <= 2 && v.L <= 2)
			ntbx_sh_ring_reduce_gather(&v, dest, src, n, es, op);
		else
			ntbx_sh_ring_reduce(&v, s->start, s->stride, dest, src, n, es, op);
		return;
	}
	if (ntbx_sh.topo == 0 && !ntbx_sh.via_qp && bytes) {
		if (bytes <= SH_RLINE_DATA && red_push_ok(s->size, bytes))
			reduce_line(s, dest, src, n, es, op->f);
		else if (red_push_ok(s->size, bytes))
			reduce_push(s, dest, src, n, es, op->f);
		else
			reduce_rsag(s, dest, src, n, es, op->f);
		return;
	}
	reduce_get(s, dest, src, n, es, op->f);
}

int ntbx_sh_reduce(shmem_team_t team, void *dest, const void *src, size_t n,
                   size_t es, const struct ntbx_red_op *op)
{
	if (!team || team->my_pe < 0)
		return -1;
	struct set s = team_set(team, "reduce");
	do_reduce(&s, dest, src, n, es, op);
	return 0;
}

/* ------------------------------------------------------------- scans
 *
 * Team PE k gets the sources of PEs 0..k (inclusive) or 0..k-1 (exclusive;
 * PE 0 gets zeros, the sum's identity) combined in PE order, as the
 * reductions combine.
 *
 * On a ring whose consecutive members are neighbours: a chain
 * (ntbx_sh_ring_scan, shmem_coll_ring.c). */
/* On a switch (every member mapped): member j owns slice j of the elements
 * (whole cache lines) and walks it through the members in order, between
 * two synchronisations: dest_k = dest_(k-1) OP src_k (inclusive) or
 * dest_k = dest_(k-1) OP src_(k-1) (exclusive), read and written through
 * the windows, one pass per member; each member touches about 1/n of
 * everything, as reduce-scatter does.  In place, the running prefix is
 * kept in a buffer of ours, as a source would be overwritten before it is
 * read. */
static void switch_scan(const struct set *s, void *dest, const void *src,
                        size_t n, size_t es, const struct ntbx_red_op *op,
                        int exclusive)
{
	size_t bytes = n * es;
	size_t line = es >= 64 ? 1 : 64 / es;
	size_t per = (n + (size_t)s->size - 1) / (size_t)s->size;
	per = (per + line - 1) / line * line;
	size_t lo = per * (size_t)s->idx < n ? per * (size_t)s->idx : n;
	size_t hi = n - lo < per ? n : lo + per;
	int inplace = (const char *)src < (char *)dest + bytes &&
	              (char *)dest < (const char *)src + bytes;
	size_t cb = RED_CHUNK / es ? RED_CHUNK / es : 1;
	size_t tb = inplace ? (hi - lo < cb ? hi - lo : cb) * es + 1 : 1;
	char *acc = malloc(tb), *acc2 = malloc(tb);
	if (!acc || !acc2)
		ntbx_sh_die("scan: out of memory (%zu bytes)", 2 * tb);
	set_sync(s);
	for (size_t e0 = lo; e0 < hi; e0 += cb) {
		size_t m = hi - e0 < cb ? hi - e0 : cb, b = m * es, o = e0 * es;
		const char *sp = (const char *)src + o;
		char *dp = (char *)dest + o, *prev = NULL;
		for (int k = 0; k < s->size; k++) {
			const char *sk = ntbx_sh_peer_ptr(sp, b, spe(s, k));
			char *dk = ntbx_sh_peer_ptr(dp, b, spe(s, k));
			if (inplace) {
				/* acc: the prefix of 0..k (inclusive) or of
				 * 0..k-1 (exclusive); dk is written last */
				if (!exclusive) {
					if (k == 0)
						memcpy(acc, sk, b);
					else
						op->f(acc, sk, m);
					memcpy(dk, acc, b);
				} else if (k == 0) {
					memcpy(acc, sk, b);
					memset(dk, 0, b);
				} else if (k < s->size - 1) {
					op->f3(acc2, acc, sk, m);
					memcpy(dk, acc, b);
					char *t = acc;
					acc = acc2;
					acc2 = t;
				} else {
					memcpy(dk, acc, b);
				}
			} else if (exclusive) {
				if (k == 0)
					memset(dk, 0, b);
				else if (k == 1)
					memcpy(dk, ntbx_sh_peer_ptr(sp, b, spe(s, 0)), b);
				else
					op->f3(dk, prev, ntbx_sh_peer_ptr(sp, b, spe(s, k - 1)), m);
			} else if (k == 0) {
				memcpy(dk, sk, b);
			} else {
				op->f3(dk, prev, sk, m);
			}
			prev = dk;
		}
	}
	set_sync(s);
	free(acc);
	free(acc2);
}

/* Elsewhere (a ring's team whose members are not neighbours): gets of the
 * sources between two synchronisations, combined in PE order. */
static void scan_get(const struct set *s, void *dest, const void *src,
                     size_t n, size_t es, ntbx_comb_fn fn, int exclusive)
{
	size_t bytes = n * es;
	char *acc = calloc(1, bytes ? bytes : 1);
	char *in = malloc(RED_CHUNK);
	if (!acc || !in)
		ntbx_sh_die("scan: out of memory (%zu bytes)", bytes);
	int upto = s->idx + !exclusive;   /* PEs 0..upto-1 contribute */
	set_sync(s);
	if (upto > 0)
		wget(acc, src, bytes, spe(s, 0));
	size_t per = RED_CHUNK / es;
	for (int j = 1; j < upto; j++)
		for (size_t i = 0; i < n; i += per) {
			size_t m = n - i < per ? n - i : per;
			wget(in, (const char *)src + i * es, m * es, spe(s, j));
			fn(acc + i * es, in, m);
		}
	set_sync(s);
	memcpy(dest, acc, bytes);
	free(acc);
	free(in);
}

int ntbx_sh_scan(shmem_team_t team, void *dest, const void *src, size_t n,
                 size_t es, const struct ntbx_red_op *op, int exclusive)
{
	if (!team || team->my_pe < 0)
		return -1;
	struct set s = team_set(team, "scan");
	size_t bytes = n * es;
	struct rv v;
	if (s.size == 1) {
		if (exclusive)
			memset(dest, 0, bytes);
		else
			memmove(dest, src, bytes);
	} else if (ntbx_sh.via_qp) {   /* no mapped window: by gets */
		scan_get(&s, dest, src, n, es, op->f, exclusive);
	} else if (ntbx_sh_ring_view(s.start, s.stride, s.size, s.idx, s.bar, &v)) {
		ntbx_sh_ring_scan(&v, s.start, s.stride, red_region(&s), dest, src, n,
		                  es, op, exclusive);
	} else if (ntbx_sh.topo == 0) {
		if (bytes)
			switch_scan(&s, dest, src, n, es, op, exclusive);
	} else {
		scan_get(&s, dest, src, n, es, op->f, exclusive);
	}
	return 0;
}

void ntbx_sh_reduce_aset(void *dest, const void *src, int n, size_t es,
                         const struct ntbx_red_op *op, int start,
                         int logstride, int size, long *psync)
{
	struct set s = aset(start, logstride, size, psync, "to_all reduction");
	do_reduce(&s, dest, src, n > 0 ? (size_t)n : 0, es, op);
}

int ntbx_sh_collect(shmem_team_t team, void *dest, const void *src,
                    size_t nbytes)
{
	if (!team || team->my_pe < 0)
		return -1;
	struct set s = team_set(team, "collect");
	do_collect(&s, dest, src, nbytes);
	return 0;
}

int ntbx_sh_fcollect(shmem_team_t team, void *dest, const void *src,
                     size_t nbytes)
{
	if (!team || team->my_pe < 0)
		return -1;
	struct set s = team_set(team, "fcollect");
	do_fcollect(&s, dest, src, nbytes);
	return 0;
}

int ntbx_sh_alltoall(shmem_team_t team, void *dest, const void *src,
                     size_t nbytes)
{
	if (!team || team->my_pe < 0)
		return -1;
	struct set s = team_set(team, "alltoall");
	do_alltoall(&s, dest, src, nbytes);
	return 0;
}

int ntbx_sh_alltoalls(shmem_team_t team, void *dest, const void *src,
                      ptrdiff_t dst, ptrdiff_t sst, size_t nelems, size_t es)
{
	if (!team || team->my_pe < 0)
		return -1;
	struct set s = team_set(team, "alltoalls");
	do_alltoalls(&s, dest, src, dst, sst, nelems, es);
	return 0;
}

int shmem_collectmem(shmem_team_t team, void *dest, const void *source,
                     size_t nelems)
{
	return ntbx_sh_collect(team, dest, source, nelems);
}
int shmem_fcollectmem(shmem_team_t team, void *dest, const void *source,
                      size_t nelems)
{
	return ntbx_sh_fcollect(team, dest, source, nelems);
}
int shmem_alltoallmem(shmem_team_t team, void *dest, const void *source,
                      size_t nelems)
{
	return ntbx_sh_alltoall(team, dest, source, nelems);
}
int shmem_alltoallsmem(shmem_team_t team, void *dest, const void *source,
                       ptrdiff_t dst, ptrdiff_t sst, size_t nelems)
{
	return ntbx_sh_alltoalls(team, dest, source, dst, sst, nelems, 1);
}

/* Deprecated active-set collectives (broadcast32/64: shmem_barrier.c). */
#define ASET_COLL(bits)                                                     \
void shmem_collect##bits(void *dest, const void *source, size_t nelems,     \
                         int PE_start, int logPE_stride, int PE_size,       \
                         long *pSync)                                       \
{                                                                           \
	struct set s = aset(PE_start, logPE_stride, PE_size, pSync,         \
	                    "shmem_collect" #bits);                         \
	do_collect(&s, dest, source, nelems * (bits / 8));                  \
}                                                                           \
void shmem_fcollect##bits(void *dest, const void *source, size_t nelems,    \
                          int PE_start, int logPE_stride, int PE_size,      \
                          long *pSync)                                      \
{                                                                           \
	struct set s = aset(PE_start, logPE_stride, PE_size, pSync,         \
	                    "shmem_fcollect" #bits);                        \
	do_fcollect(&s, dest, source, nelems * (bits / 8));                 \
}                                                                           \
void shmem_alltoall##bits(void *dest, const void *source, size_t nelems,    \
                          int PE_start, int logPE_stride, int PE_size,      \
                          long *pSync)                                      \
{                                                                           \
	struct set s = aset(PE_start, logPE_stride, PE_size, pSync,         \
	                    "shmem_alltoall" #bits);                        \
	do_alltoall(&s, dest, source, nelems * (bits / 8));                 \
}                                                                           \
void shmem_alltoalls##bits(void *dest, const void *source, ptrdiff_t dst,   \
                           ptrdiff_t sst, size_t nelems, int PE_start,      \
                           int logPE_stride, int PE_size, long *pSync)      \
{                                                                           \
	struct set s = aset(PE_start, logPE_stride, PE_size, pSync,         \
	                    "shmem_alltoalls" #bits);                       \
	do_alltoalls(&s, dest, source, dst, sst, nelems, bits / 8);         \
}
ASET_COLL(32)
ASET_COLL(64)

/* The push/reduce-scatter crossover of the world, by timing: for blocks of
 * 64 B to SH_RSLOT (powers of two), PE 0 times each algorithm (the best
 * of 3 runs of 4 calls, each after a barrier as in OSU's loops) and takes the largest size at
 * which push was not slower than reduce-scatter (as a line fitted over the
 * sizes: single timings swing when PEs share CPUs); every PE then reads
 * PE 0's answer.  The
 * buffers are the inboxes of the last team slot, unused before any team
 * exists.  About 200 reductions and barriers at start-up. */
static void red_calibrate(long *pub)
{
	struct set w = team_set(SHMEM_TEAM_WORLD, "start-up");
	long *src = (long *)sh_red_box(SH_SLOTS - 1, 0);
	long *dst = (long *)sh_red_box(SH_SLOTS - 1, 1);
	memset(src, 0, SH_RSLOT);
	double sx = 0, sxx = 0, sy[2] = { 0, 0 }, sxy[2] = { 0, 0 }, tp[16];
	int k = 0;
	for (size_t b = 64; b <= SH_RSLOT; b *= 2, k++) {
		uint64_t best[2] = { UINT64_MAX, UINT64_MAX };
		for (int rep = 0; rep < 3; rep++)
			for (int a = 0; a < 2; a++) {
				uint64_t t = 0;
				for (int c = 0; c < 4; c++) {
					ntbx_sh_team_sync(SHMEM_TEAM_WORLD);
					uint64_t t0 = ntbx_now_ns();
					(a ? reduce_rsag : reduce_push)(&w, dst, src,
					     b / sizeof(long), sizeof(long), comb_long_sum);
					t += ntbx_now_ns() - t0;
				}
				best[a] = t < best[a] ? t : best[a];
			}
		tp[k] = (double)best[0] / 4;
		sx += (double)b;
		sxx += (double)b * (double)b;
		for (int a = 0; a < 2; a++) {
			sy[a] += (double)best[a] / 4;
			sxy[a] += (double)b * (double)best[a] / 4;
		}
	}
	/* Reduce-scatter costs two rounds and grows slowly: a line fitted
	 * to it (least squares) is steady.  Push is one round and grows
	 * faster, and not linearly once the inboxes leave the cache: take
	 * the largest size at which push measured at most the line. */
	double den = k * sxx - sx * sx;
	double c1 = (k * sxy[1] - sx * sy[1]) / den, c0 = (sy[1] - c1 * sx) / k;
	long x = 0;
	for (int i = 0; i < k; i++)
		if (tp[i] <= c0 + c1 * (double)(64u << i))
			x = (long)(64u << i);
	if (ntbx_sh.me == 0)
		pub[2] = x;
	ntbx_sh_team_sync(SHMEM_TEAM_WORLD);
	wget(&x, &pub[2], sizeof x, 0);
	red_xover = x;
}

/* Start-up: PE 0 measures the model (a world barrier, and the copy
 * calibration's ns per byte: about 1 ms, which PE 0 would spend at its
 * first large put anyway), publishes it in its internal area, and every
 * PE reads it there after a barrier, so that every PE picks the same
 * algorithms.  About 20 barriers, then the reductions' calibration. */
void ntbx_sh_coll_init(void)
{
	if (ntbx_sh.topo < 0 || ntbx_sh.npes < 2)
		return;
	long *pub = (long *)(ntbx_sh.internal + SH_MODEL_OFF);
	double cal = ntbx_sh.me == 0 ? ntbx_copy_ns_per_byte() : 0;
	if (ntbx_sh.me == 0 && cal > 0) {
		/* a byte as the copy calibration measured it: 1 MiB copied
		 * into a shared mapping, out of the cache as the data of a
		 * pipeline is when it arrives from another CPU */
		pub[1] = (long)(cal * SH_RSLOT + 0.5);
	} else if (ntbx_sh.me == 0) {
		char *a = sh_red_box(SH_SLOTS, 0), *b = sh_red_box(SH_SLOTS, 1);
		memset(a, 1, SH_RSLOT);
		uint64_t best = UINT64_MAX;
		for (int k = 0; k < 9; k++) {
			uint64_t t0 = ntbx_now_ns();
			memcpy(b, a, SH_RSLOT);
			__asm__ __volatile__("" ::: "memory");
			uint64_t t = ntbx_now_ns() - t0;
			if (k && t < best)   /* the first one warms */
				best = t;
		}
		pub[1] = best ? (long)best : 1;
	}
	uint64_t bestr = UINT64_MAX;
	for (int g = 0; g < 5; g++) {
		uint64_t t0 = ntbx_now_ns();
		for (int k = 0; k < 4; k++)
			ntbx_sh_team_sync(SHMEM_TEAM_WORLD);
		uint64_t t = (ntbx_now_ns() - t0) / 4;
		if (g && t < bestr)
			bestr = t;
		if (!g)   /* past PE 0's calibration: measure as the job runs */
			ntbx_spin_group_restart();
	}
	if (ntbx_sh.me == 0)
		pub[0] = bestr ? (long)bestr : 1;
	ntbx_sh_team_sync(SHMEM_TEAM_WORLD);
	long m[2];
	wget(m, pub, sizeof m, 0);
	ntbx_sh_round_ns = (double)m[0];
	ntbx_sh_byte_ns = (double)m[1] / SH_RSLOT;
	if (ntbx_sh.topo == 0 && !ntbx_sh.via_qp && ntbx_sh.npes > 2)
		red_calibrate(pub);
	if (ntbx_sh.me == 0 && ntbx_setting_bool(NTBX_SET_SHMEM_INFO)) {
		printf("  collectives          round %.2f us, copy %.1f GB/s (PE 0, "
		       "measured at start-up)\n", ntbx_sh_round_ns / 1000,
		       1 / ntbx_sh_byte_ns);
		if (ntbx_sh.topo == 0 && !ntbx_sh.via_qp) {
			size_t x = 0;
			for (size_t b = 8; b <= SH_RSLOT && red_push_ok(ntbx_sh.npes, b); b += 8)
				x = b;
			printf("  reductions           %d PEs: one round (push) up to %zu "
			       "bytes (measured), then reduce-scatter + allgather\n",
			       ntbx_sh.npes, x);
		}
		fflush(stdout);
	}
	/* The job starts: its waits decide afresh whether its PEs may
	 * yield to each other (spin.c, ntbx_spin_group_restart). */
	ntbx_spin_group_restart();
}
