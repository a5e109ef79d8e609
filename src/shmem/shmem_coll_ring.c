/* SPDX-License-Identifier: MIT */
/*
 * The ring algorithms of the collectives: barriers, broadcast, collect,
 * fcollect, reductions and scans neighbour to neighbour, for the sets
 * whose consecutive members are fabric neighbours on a ring (callers in
 * shmem_barrier.c and shmem_coll.c ask ntbx_sh_ring_view first).
 *
 * OpenSHMEM 1.6: Collective Routines (the ring's algorithms of
 * shmem_barrier_all, shmem_sync, shmem_team_sync, shmem_broadcast,
 * shmem_collect, shmem_fcollect, the reductions and the scans).
 *
 * On a ring fabric only neighbours are mapped; everything else is a
 * request forwarded hop by hop and served by a progress thread (a wake-up
 * per message).  A set whose consecutive members are fabric neighbours
 * (the world team, any team or active set of stride 1) therefore runs its
 * synchronisation and collectives neighbour to neighbour: every store is a
 * CPU store through a mapped window, every wait is on this PE's own
 * memory.  The members form a chain, or a cycle when the last member is a
 * neighbour of the first too.  Six words of the set (a team's slot, or
 * the caller's pSync) carry the signals, as counting semaphores: an
 * upstream adds 1 to the downstream's word with a CPU atomic after its
 * data, the downstream waits for it and takes 1 off, so the words are 0
 * (SHMEM_SYNC_VALUE) again when everyone is through.  (A team's barrier
 * stores growing epochs into the first two instead:
 * ntbx_sh_ring_barrier_arc.)  Each word has one writer per direction and
 * all members call collectives in the same order, so signals are consumed
 * in the order they are sent.  Data is pushed into the neighbour's dest
 * and relayed from there.  Broadcast
 * pushes at once, as on a switch (the spec has dest ready on every member
 * before any member calls); collect, fcollect and reductions push only
 * once the neighbour has said it is in the call (RDY), because programs
 * commonly reuse dest right after the previous collective, before the
 * others have returned, and the switch's versions (which read between two
 * synchronisations) allow it.
 */
#include <stdlib.h>
#include <string.h>

#include "shmem_int.h"
#include "util/util.h"

enum { RW_ARR_L, RW_ARR_R, RW_RDY_L, RW_CH_L, RW_CH_R, RW_RDY_R,
       RW_RCH_L, RW_RCH_R,     /* small reductions' data */
       RW_AG_L, RW_AG_R };     /* a cycle's reduction: the allgather */

static int ring_adjacent(int a, int b)
{
	int N = ntbx_fabric_nodes(ntbx_sh.f);
	int d = ((b - a) % N + N) % N;
	return d == 1 || d == N - 1;
}

int ntbx_sh_ring_view(int start, int stride, int size, int idx, long *w,
                      struct rv *v)
{
	if (ntbx_sh.topo != 1 || size < 2 || !ring_adjacent(start, start + stride))
		return 0;
	v->n = size;
	v->i = idx;
	v->w = w;
	v->cycle = size >= 3 && ring_adjacent(start + (size - 1) * stride, start);
	v->R = v->cycle ? size / 2 : 0;
	v->L = v->cycle ? size - 1 - v->R : 0;
	int li = idx > 0 ? idx - 1 : v->cycle ? size - 1 : -1;
	int ri = idx < size - 1 ? idx + 1 : v->cycle ? 0 : -1;
	v->left = li < 0 ? -1 : start + li * stride;
	v->right = ri < 0 ? -1 : start + ri * stride;
	return 1;
}

static void r_signal(const struct rv *v, int word, int wpe)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);   /* data before the signal */
	ntbx_sh_amo(SHMEM_CTX_DEFAULT, NTBX_AMO_ADD_WAKE, &v->w[word], 8, 1, 0,
	            wpe);
}

static void r_take(const struct rv *v, int word)
{
	uint64_t s = 0;
	while (__atomic_load_n(&v->w[word], __ATOMIC_ACQUIRE) < 1)
		ntbx_sh_spin_on(&s, &v->w[word]);
	ntbx_sh_spin_done(&s);
	__atomic_fetch_sub(&v->w[word], 1, __ATOMIC_ACQ_REL);
}

static int r_try(const struct rv *v, int word)
{
	if (__atomic_load_n(&v->w[word], __ATOMIC_ACQUIRE) < 1)
		return 0;
	__atomic_fetch_sub(&v->w[word], 1, __ATOMIC_ACQ_REL);
	return 1;
}

/* A tree along the ring rooted at member @root: each side of the root is a
 * path (a cycle splits into two halves).  up: the parent (-1 for the root);
 * up_right: the parent is our right neighbour; down[0]/down[1]: the child
 * on our right / left, or -1. */
struct rtree { int up, up_right, down[2]; };

static struct rtree ring_tree(const struct rv *v, int root)
{
	struct rtree t = { -1, 0, { -1, -1 } };
	int n = v->n, i = v->i;
	int rmax = v->cycle ? v->R : n - 1 - root;   /* members right of root */
	int lmax = v->cycle ? v->L : root;
	if (i == root) {
		t.down[0] = rmax > 0 ? v->right : -1;
		t.down[1] = lmax > 0 ? v->left : -1;
		return t;
	}
	int k = (i - root + n) % n;
	int right = v->cycle ? k <= v->R : i > root;
	int p = right ? k : n - k;
	if (right) {
		t.up = v->left;
		t.down[0] = p < rmax ? v->right : -1;
	} else {
		t.up = v->right;
		t.up_right = 1;
		t.down[1] = p < lmax ? v->left : -1;
	}
	return t;
}

/* Barrier of an active set: rounds of neighbour exchanges on the pSync's
 * counting semaphores.  In each round a member tells both neighbours it
 * is there and waits for both; after round r it knows that every member up
 * to r hops away has arrived, so the diameter (n/2 on a cycle, n-1 on a
 * chain) is enough. */
void ntbx_sh_ring_barrier_rounds(const struct rv *v)
{
	int rounds = v->cycle ? v->n / 2 : v->n - 1;
	for (int r = 0; r < rounds; r++) {
		if (v->right >= 0)
			r_signal(v, RW_ARR_L, v->right);
		if (v->left >= 0)
			r_signal(v, RW_ARR_R, v->left);
		if (v->left >= 0)
			r_take(v, RW_ARR_L);
		if (v->right >= 0)
			r_take(v, RW_ARR_R);
	}
}

/* Team barrier: each member knows an arc of members that have arrived,
 * a hops to its left and b to its right, and publishes a to its right
 * neighbour and b to its left one whenever they grow (one store, no
 * read-modify-write, as epoch * 128 + reach: values only grow).  Whoever
 * runs extends its arc from what its neighbours published and passes it
 * on, so news travels as fast as the members get a CPU, without rounds
 * that wait for both neighbours.  Done when the arc covers the set.  A
 * neighbour that published for the next barrier has seen everyone
 * arrive at this one.  Whoever is through publishes the full reach. */
void ntbx_sh_ring_barrier_arc(const struct rv *v, long *cnt)
{
	long e = ++*cnt, base = e * 128, next = base + 128;
	int n = v->n, i = v->i;
	int need_a = v->cycle ? n - 1 : i, need_b = v->cycle ? n - 1 : n - 1 - i;
	int a = 0, b = 0, pa = -1, pb = -1;
	uint64_t s = 0;
	for (;;) {
		long wl = __atomic_load_n(&v->w[RW_ARR_L], __ATOMIC_ACQUIRE);
		long wr = __atomic_load_n(&v->w[RW_ARR_R], __ATOMIC_ACQUIRE);
		if (wl >= next || wr >= next)
			break;   /* that neighbour is through */
		if (v->left >= 0 && wl >= base && 1 + (wl - base) > a)
			a = 1 + (int)(wl - base) < n - 1 ? 1 + (int)(wl - base) : n - 1;
		if (v->right >= 0 && wr >= base && 1 + (wr - base) > b)
			b = 1 + (int)(wr - base) < n - 1 ? 1 + (int)(wr - base) : n - 1;
		if (a != pa && v->right >= 0)
			ntbx_sh_amo(SHMEM_CTX_DEFAULT, NTBX_AMO_SET, &v->w[RW_ARR_L],
			            8, (uint64_t)(base + a), 0, v->right);
		if (b != pb && v->left >= 0)
			ntbx_sh_amo(SHMEM_CTX_DEFAULT, NTBX_AMO_SET, &v->w[RW_ARR_R],
			            8, (uint64_t)(base + b), 0, v->left);
		if (a != pa || b != pb)
			s = 0;
		pa = a;
		pb = b;
		if (v->cycle ? a + b >= n - 1 : a >= need_a && b >= need_b)
			break;
		ntbx_sh_spin_range(&s, &v->w[RW_ARR_L], 2 * sizeof(long));
	}
	ntbx_sh_spin_done(&s);
	/* Everyone is here: say so to both sides (the full reach), which
	 * also ends the wait of a neighbour whose news we did not pass on
	 * because the other one was through already. */
	if (v->right >= 0 && pa != n - 1)
		ntbx_sh_amo(SHMEM_CTX_DEFAULT, NTBX_AMO_SET, &v->w[RW_ARR_L], 8,
		            (uint64_t)(base + n - 1), 0, v->right);
	if (v->left >= 0 && pb != n - 1)
		ntbx_sh_amo(SHMEM_CTX_DEFAULT, NTBX_AMO_SET, &v->w[RW_ARR_R], 8,
		            (uint64_t)(base + n - 1), 0, v->left);
}

#define RING_CHUNK (16u << 10)

static double sqrt_newton(double x)   /* x >= 0; no libm in the library */
{
	double r = x > 1 ? x : 1;
	for (int i = 0; i < 64; i++)
		r = 0.5 * (r + x / r);
	return r;
}

/* Chunk of a pipeline of @hops hops carrying @n bytes: with a hand-over
 * per chunk and hop costing a round (ntbx_sh_round_ns) and each byte
 * ntbx_sh_byte_ns, n bytes in chunks of c take about
 * (n/c + hops - 1) * (round + c * byte),
 * least at c = sqrt(n * round / ((hops - 1) * byte)), at least a page.
 * One hop, or no model yet: RING_CHUNK.  The same on every member (same
 * model, same n, same tree depth), as it must be: each chunk is one
 * signal. */
static size_t ring_chunk(size_t n, int hops)
{
	if (hops < 2 || ntbx_sh_round_ns <= 0 || ntbx_sh_byte_ns <= 0)
		return RING_CHUNK;
	double c = sqrt_newton((double)n * ntbx_sh_round_ns /
	                       ((double)(hops - 1) * ntbx_sh_byte_ns));
	if (c < 4096)
		c = 4096;
	/* as many chunks as that makes, of equal size (whole lines) */
	size_t k = (size_t)((double)n / c + 0.5);
	k = k ? k : 1;
	size_t m = (n + k - 1) / k;
	return NTBX_ALIGN_UP(m, 64);
}

/* Broadcast: chunks down the tree rooted at @root, each member relaying
 * from its own dest as soon as a chunk is in. */
void ntbx_sh_ring_broadcast(const struct rv *v, void *dest, const void *src,
                            size_t n, int root, int to_root)
{
	struct rtree t = ring_tree(v, root);
	int from = t.up_right ? RW_CH_R : RW_CH_L;
	const char *from_buf = v->i == root ? src : dest;
	int rmax = v->cycle ? v->R : v->n - 1 - root;
	int lmax = v->cycle ? v->L : root;
	size_t chunk = ring_chunk(n, rmax > lmax ? rmax : lmax);
	for (size_t off = 0; off < n || off == 0; off += chunk) {
		size_t m = n - off < chunk ? n - off : chunk;
		if (t.up >= 0)
			r_take(v, from);
		for (int d = 0; d < 2; d++)
			if (t.down[d] >= 0) {
				ntbx_sh_put(SHMEM_CTX_DEFAULT, (char *)dest + off,
				            from_buf + off, m, t.down[d]);
				r_signal(v, d ? RW_CH_R : RW_CH_L, t.down[d]);
			}
		if (n == 0)
			break;
	}
	if (v->i == root && to_root && dest != src)
		memmove(dest, src, n);
}

/* Allgather of member j's len[j] bytes at off[j] of dest: each member
 * sends its own block both ways and relays what arrives, blocks from the
 * left in the order i-1, i-2, ..., from the right i+1, i+2, ... */
static void ack_wait(const long *ackw, const long *pc, int w)
{
	uint64_t s = 0;
	while (__atomic_load_n(&ackw[w], __ATOMIC_ACQUIRE) < pc[w])
		ntbx_sh_spin_on(&s, &ackw[w]);
	ntbx_sh_spin_done(&s);
}

/* Extra offset of a block that @writer stores at @reader: @xr when the
 * writer is the reader's fabric neighbour on the right (PE + 1), so that
 * each fabric neighbour has its own boxes. */
static ptrdiff_t side_off(int writer, int reader, ptrdiff_t xr)
{
	int N = ntbx_fabric_nodes(ntbx_sh.f);
	return xr && N > 2 && writer == (reader + 1) % N ? xr : 0;
}

/* @chl/@chr: the words that say a block came from the left / right.  With
 * @ackw (small reductions), a neighbour's blocks may be written once it
 * has acknowledged the previous call (ackw[pe] >= pc[pe], the words it
 * stores into our memory when done) instead of the RDY exchange, and a
 * block that the right fabric neighbour stores lands @xr further. */
static void ring_allgather(const struct rv *v, char *dest, const void *src,
                           const size_t *off, const size_t *len, int ready,
                           int chl, int chr, const long *ackw, const long *pc,
                           ptrdiff_t xr)
{
	int n = v->n, i = v->i, me = ntbx_sh.me;
	ptrdiff_t in_l = v->left >= 0 ? side_off(v->left, me, xr) : 0;
	ptrdiff_t in_r = v->right >= 0 ? side_off(v->right, me, xr) : 0;
	ptrdiff_t out_r = v->right >= 0 ? side_off(me, v->right, xr) : 0;
	ptrdiff_t out_l = v->left >= 0 ? side_off(me, v->left, xr) : 0;
	int inl = v->cycle ? v->R : i, inr = v->cycle ? v->L : n - 1 - i;
	int to_r = v->cycle ? v->R > 0 : v->right >= 0;
	int to_l = v->cycle ? v->L > 0 : v->left >= 0;
	if (ready) {   /* we are in: the neighbours that send to us may */
		if (inl)
			r_signal(v, RW_RDY_R, v->left);
		if (inr)
			r_signal(v, RW_RDY_L, v->right);
	}
	if (dest + off[i] != (const char *)src)
		memmove(dest + off[i], src, len[i]);
	if (ready && to_r)
		r_take(v, RW_RDY_R);
	if (ready && to_l)
		r_take(v, RW_RDY_L);
	if (ackw && to_r)
		ack_wait(ackw, pc, v->right);
	if (ackw && to_l)
		ack_wait(ackw, pc, v->left);
	if (to_r) {
		ntbx_sh_put(SHMEM_CTX_DEFAULT, dest + off[i] + out_r, dest + off[i],
		            len[i], v->right);
		r_signal(v, chl, v->right);
	}
	if (to_l) {
		ntbx_sh_put(SHMEM_CTX_DEFAULT, dest + off[i] + out_l, dest + off[i],
		            len[i], v->left);
		r_signal(v, chr, v->left);
	}
	uint64_t s = 0;
	for (int kl = 1, kr = 1; kl <= inl || kr <= inr;) {
		int got = 0;
		if (kl <= inl && r_try(v, chl)) {
			int j = (i - kl + n) % n;
			if (v->cycle ? kl < v->R : v->right >= 0) {
				ntbx_sh_put(SHMEM_CTX_DEFAULT, dest + off[j] + out_r,
				            dest + off[j] + in_l, len[j], v->right);
				r_signal(v, chl, v->right);
			}
			kl++;
			got = 1;
		}
		if (kr <= inr && r_try(v, chr)) {
			int j = (i + kr) % n;
			if (v->cycle ? kr < v->L : v->left >= 0) {
				ntbx_sh_put(SHMEM_CTX_DEFAULT, dest + off[j] + out_l,
				            dest + off[j] + in_r, len[j], v->left);
				r_signal(v, chr, v->left);
			}
			kr++;
			got = 1;
		}
		if (got)
			ntbx_sh_spin_done(&s);
		else
			ntbx_sh_spin(&s);
	}
	ntbx_sh_spin_done(&s);
}

void ntbx_sh_ring_fcollect(const struct rv *v, void *dest, const void *src,
                           size_t nb)
{
	size_t off[NTBX_MAX_NODES], len[NTBX_MAX_NODES];
	for (int j = 0; j < v->n; j++) {
		off[j] = (size_t)j * nb;
		len[j] = nb;
	}
	ring_allgather(v, dest, src, off, len, 1, RW_CH_L, RW_CH_R, NULL, NULL,
	               0);
}

/* Sizes first (an allgather of one long each into the set's scratch),
 * then the blocks at their offsets. */
void ntbx_sh_ring_collect(const struct rv *v, long *scratch, void *dest,
                          const void *src, size_t nb)
{
	size_t off[NTBX_MAX_NODES], len[NTBX_MAX_NODES];
	long mine = (long)nb;
	for (int j = 0; j < v->n; j++) {
		off[j] = (size_t)j * sizeof mine;
		len[j] = sizeof mine;
	}
	ring_allgather(v, (char *)scratch, &mine, off, len, 1, RW_CH_L, RW_CH_R,
	               NULL, NULL, 0);
	size_t o = 0;
	for (int j = 0; j < v->n; j++) {
		long l = __atomic_load_n(&scratch[j], __ATOMIC_ACQUIRE);
		if (l < 0)
			ntbx_sh_die("collect: member %d published a bad size", j);
		off[j] = o;
		len[j] = (size_t)l;
		o += (size_t)l;
	}
	ring_allgather(v, dest, src, off, len, 0, RW_CH_L, RW_CH_R, NULL,
	               NULL, 0);   /* all are in */
}


/* Reduction along the chain in member order (the same bits everywhere),
 * chunk by chunk.  Member 1 combines member 0's source, read through its
 * window, with its own straight into member 2's dest (one pass: f3);
 * member i (1 < i < last) combines the partial result of 0..i-1, which
 * arrived in its dest, with its source straight into member i+1's dest;
 * the last combines its source into its dest and has the result.  The
 * result goes back one hop per member: left from the last, and on a
 * cycle also right from the last to member 0 (and on to member 1), so
 * that half the members get it from each side.  Every byte is touched
 * (n-1) times on the way there, where a put and a combine per member took
 * 2(n-1) passes.  A member says it is in (RDY) before its left neighbour
 * writes its dest, and member 0 before member 1 reads its source; a
 * member in place (dest is src) whose dest a neighbour writes before it
 * is done with its source keeps its source aside first. */
void ntbx_sh_ring_reduce(const struct rv *v, int start, int stride, void *dest,
                         const void *src, size_t n, size_t es,
                         const struct ntbx_red_op *op)
{
	int i = v->i, N = v->n, last = N - 1;
	int left = i > 0 ? start + (i - 1) * stride : -1;
	int right = i < last ? start + (i + 1) * stride : -1;
	/* members 0..wrap-1 get the result round the cycle's far side */
	int wrap = v->cycle ? ((N - 1) / 2 < 2 ? (N - 1) / 2 : 2) : 0;
	size_t bytes = n * es;
	const char *in = src;
	char *own = NULL, *d = dest;
	int inplace = (const char *)src < d + bytes && d < (const char *)src + bytes;
	if (inplace && bytes && (i >= 2 || (i == 1 && i == last))) {
		own = malloc(bytes);
		if (!own)
			ntbx_sh_die("reduction: out of memory (%zu bytes)", bytes);
		memcpy(own, src, bytes);
		in = own;
	}
	if (i == 0 && right >= 0)
		r_signal(v, RW_RDY_L, right);   /* our source may be read */
	if (i >= 2)
		r_signal(v, RW_RDY_R, left);    /* our dest may be written */
	if (i == 1)
		r_take(v, RW_RDY_L);
	if (i >= 1 && right >= 0)
		r_take(v, RW_RDY_R);
	const char *src0 = i == 1 && bytes ?
	                   ntbx_sh_peer_ptr(src, bytes, left) : NULL;
	char *dnext = i >= 1 && right >= 0 && bytes ?
	              ntbx_sh_peer_ptr(dest, bytes, right) : NULL;
	int first = start;   /* the last's right neighbour on a cycle */
	int depth = wrap > last - wrap ? wrap : last - wrap;
	size_t chunk = ring_chunk(bytes, N - 1 + depth);
	size_t per = chunk / es ? chunk / es : 1;
	size_t nch = (n + per - 1) / per;
	/* the result arrives from the left (wrap side) or the right */
	int back_word = i < wrap ? RW_CH_L : RW_CH_R;
	uint64_t s = 0;
	for (size_t fw = i == 0 ? nch : 0, bw = i == last ? nch : 0;
	     fw < nch || bw < nch;) {
		int got = 0;
		if (fw < nch && (i == 1 || r_try(v, RW_CH_L))) {
			size_t e0 = fw * per, m = n - e0 < per ? n - e0 : per;
			size_t o = e0 * es, b = m * es;
			if (i == last) {
				if (i == 1)
					op->f3(d + o, src0 + o, in + o, m);
				else
					op->f(d + o, in + o, m);
				if (left >= 0 && i - 1 >= wrap) {
					ntbx_sh_put(SHMEM_CTX_DEFAULT, d + o, d + o, b, left);
					r_signal(v, RW_CH_R, left);
				}
				if (wrap > 0) {
					ntbx_sh_put(SHMEM_CTX_DEFAULT, d + o, d + o, b, first);
					r_signal(v, RW_CH_L, first);
				}
			} else {
				op->f3(dnext + o, i == 1 ? src0 + o : d + o, in + o, m);
				r_signal(v, RW_CH_L, right);
			}
			fw++;
			got = 1;
		}
		if (bw < nch && r_try(v, back_word)) {
			size_t e0 = bw * per, m = n - e0 < per ? n - e0 : per;
			size_t o = e0 * es, b = m * es;
			if (i < wrap) {   /* from the left: pass it right */
				if (i + 1 < wrap) {
					ntbx_sh_put(SHMEM_CTX_DEFAULT, d + o, d + o, b, right);
					r_signal(v, RW_CH_L, right);
				}
			} else if (left >= 0 && i - 1 >= wrap) {
				ntbx_sh_put(SHMEM_CTX_DEFAULT, d + o, d + o, b, left);
				r_signal(v, RW_CH_R, left);
			}
			bw++;
			got = 1;
		}
		if (got)
			ntbx_sh_spin_done(&s);
		else
			ntbx_sh_spin(&s);
	}
	ntbx_sh_spin_done(&s);
	free(own);
}

/* Large reductions on a cycle: a reduce-scatter along both arcs, then
 * the allgather.  Member x owns slice x of the elements (whole lines).
 * The members that get x's block going right in an allgather (x+1 ..
 * x+R) form its right arc, those going left (x-1 .. x-L) its left arc;
 * along each arc partial results flow towards x: the far end's source is
 * read through its neighbour's window, every other member combines its
 * own source with what came from further out into its own dest (the
 * slice's place there, free until the result comes), and x combines both
 * arcs' partials with its source into its dest.  Each member then sends
 * its slice both ways round (ring_allgather), relaying what arrives.
 * Every member works on every step at once, where the chain of
 * ntbx_sh_ring_reduce hands each chunk through the members one after the
 * other, and when neighbours sit on different CPUs every chain hop
 * crosses them (4 PEs on 2 CPUs, pinned round robin: the chain was
 * 1.1-1.3x a switch while a line crossed the CPUs in 30-55 ns, and
 * 2.0-2.9x when the host placed the vCPUs so that it took 210 ns).
 * Partials go out chunk by chunk (one signal each), in the order every
 * member walks its tasks: by distance from the far end, so that what a
 * neighbour sends and what we expect line up.  The same bits everywhere
 * (one member combines each slice), but not in member order: so only for
 * operators that give the same bits in any order (integer types,
 * op->exact); floating point keeps the chain, whose results are those of
 * a switch.  In place a member combines into its
 * source's own bytes: its source is read by another member only where it
 * is an arc's far end, and it writes that slice only when the result
 * arrives. */
struct rs_task { size_t x; int in; };   /* in: 0 none, 1 signal, 2 read */

/* Slice @x of @n elements: [*lo, *hi). */
static void rs_slice(size_t n, size_t per, size_t x, size_t *lo, size_t *hi)
{
	*lo = per * x < n ? per * x : n;
	*hi = n - *lo < per ? n : *lo + per;
}

/* What a cycle's slice algorithms share (the reduce-scatter above, the
 * gather below): member x owns slice x of the elements (whole lines),
 * walked in K chunks of cper elements; once set up, both neighbours are
 * in (their sources may be read, our dest written), and their sources
 * and dests are reached through their windows. */
struct cyc {
	size_t n, es, per, cper, K;
	const char *rs, *rd, *ls, *ld;   /* right / left neighbour's src, dest */
};

/* @hops: the pipeline's length, for the chunk size (ring_chunk). */
static void cyc_start(const struct rv *v, const void *dest, const void *src,
                      size_t n, size_t es, int hops, struct cyc *c)
{
	size_t bytes = n * es, line = es >= 64 ? 1 : 64 / es;
	c->n = n;
	c->es = es;
	c->per = (n + (size_t)v->n - 1) / (size_t)v->n;
	c->per = (c->per + line - 1) / line * line;
	c->cper = ring_chunk(c->per * es, hops) / es;
	c->cper = c->cper ? c->cper : 1;
	c->K = (c->per + c->cper - 1) / c->cper;
	c->K = c->K ? c->K : 1;
	r_signal(v, RW_RDY_R, v->left);
	r_signal(v, RW_RDY_L, v->right);
	r_take(v, RW_RDY_L);
	r_take(v, RW_RDY_R);
	c->rs = bytes ? ntbx_sh_peer_ptr(src, bytes, v->right) : NULL;
	c->rd = bytes ? ntbx_sh_peer_ptr(dest, bytes, v->right) : NULL;
	c->ls = bytes ? ntbx_sh_peer_ptr(src, bytes, v->left) : NULL;
	c->ld = bytes ? ntbx_sh_peer_ptr(dest, bytes, v->left) : NULL;
}

/* Chunk @k of slice @x: its elements (0 past the slice's end), and in
 * *@o the byte offset of the first. */
static size_t cyc_chunk(const struct cyc *c, size_t x, size_t k, size_t *o)
{
	size_t lo, hi;
	rs_slice(c->n, c->per, x, &lo, &hi);
	size_t e0 = lo + k * c->cper < hi ? lo + k * c->cper : hi;
	*o = e0 * c->es;
	return hi - e0 < c->cper ? hi - e0 : c->cper;
}

/* Every member's slice of @d to every member: both ways round. */
static void cyc_allgather(const struct rv *v, const struct cyc *c, char *d)
{
	size_t off[NTBX_MAX_NODES], len[NTBX_MAX_NODES];
	for (int j = 0; j < v->n; j++) {
		size_t lo, hi;
		rs_slice(c->n, c->per, (size_t)j, &lo, &hi);
		off[j] = lo * c->es;
		len[j] = (hi - lo) * c->es;
	}
	ring_allgather(v, d, d + off[v->i], off, len, 0, RW_AG_L, RW_AG_R,
	               NULL, NULL, 0);
}

void ntbx_sh_ring_reduce_rsag(const struct rv *v, void *dest, const void *src,
                              size_t n, size_t es, const struct ntbx_red_op *op)
{
	int N = v->n, i = v->i, R = v->R, L = v->L;
	struct cyc c;
	cyc_start(v, dest, src, n, es, (R > L ? R : L) + 1, &c);
	int inplace = dest == src;
	char *d = dest;
	const char *s = src;
	/* Our partials, farthest step first: on the right arc of slice
	 * i-k (k = R-1 .. 1), its input from the right neighbour's dest
	 * (signalled), or its source when that is the far end; the same
	 * leftwards for slice i+k. */
	struct rs_task rt[NTBX_MAX_NODES], lt[NTBX_MAX_NODES];
	int nr = 0, nl = 0;
	for (int k = R - 1; k >= 1; k--)
		rt[nr++] = (struct rs_task){ (size_t)((i - k + N) % N),
		                             k == R - 1 ? 2 : 1 };
	for (int k = L - 1; k >= 1; k--)
		lt[nl++] = (struct rs_task){ (size_t)((i + k) % N),
		                             k == L - 1 ? 2 : 1 };
	int rin = R >= 2 ? 1 : R == 1 ? 2 : 0;   /* the owner's inputs */
	int lin = L >= 2 ? 1 : L == 1 ? 2 : 0;
	int ri = 0, li = 0, got_r = 0, got_l = 0;
	size_t rc = 0, lc = 0, oc = 0, o;
	uint64_t st = 0;
	while (ri < nr || li < nl || oc < c.K) {
		int moved = 0;
		for (int side = 0; side < 2; side++) {
			struct rs_task *t = side ? lt : rt;
			int *ti = side ? &li : &ri, nt = side ? nl : nr;
			size_t *tc = side ? &lc : &rc;
			if (*ti >= nt)
				continue;
			if (t[*ti].in == 1 && !r_try(v, side ? RW_CH_L : RW_CH_R))
				continue;
			size_t m = cyc_chunk(&c, t[*ti].x, *tc, &o);
			const char *in = t[*ti].in == 2 ? (side ? c.ls : c.rs) + o :
			                 (side ? c.ld : c.rd) + o;
			if (m && inplace)
				op->f(d + o, in, m);
			else if (m)
				op->f3(d + o, in, s + o, m);
			/* towards the slice's owner */
			r_signal(v, side ? RW_CH_L : RW_CH_R,
			         side ? v->right : v->left);
			if (++*tc == c.K) {
				*tc = 0;
				++*ti;
			}
			moved = 1;
		}
		if (ri == nr && li == nl && oc < c.K) {
			if (rin == 1 && !got_r)
				got_r = r_try(v, RW_CH_R);
			if (lin == 1 && !got_l)
				got_l = r_try(v, RW_CH_L);
			if ((rin != 1 || got_r) && (lin != 1 || got_l)) {
				size_t m = cyc_chunk(&c, (size_t)i, oc, &o);
				const char *a = lin ? (lin == 2 ? c.ls : c.ld) + o : NULL;
				const char *b = rin ? (rin == 2 ? c.rs : c.rd) + o : NULL;
				if (m && !inplace && a) {
					op->f3(d + o, a, s + o, m);
					a = NULL;
				} else if (m && !inplace) {
					memcpy(d + o, s + o, m * es);
				}
				if (m && a)
					op->f(d + o, a, m);
				if (m && b)
					op->f(d + o, b, m);
				got_r = got_l = 0;
				oc++;
				moved = 1;
			}
		}
		if (moved)
			ntbx_sh_spin_done(&st);
		else
			ntbx_sh_spin(&st);
	}
	ntbx_sh_spin_done(&st);
	cyc_allgather(v, &c, d);
}

/* Large reductions on a cycle of 3 to 5 members in member order (floating
 * point, where the order of combination changes the bits, and the
 * result must be the switch's: ntbx_sh_ring_reduce's chain, whose every
 * chunk crosses the members one after the other, took 2.6-2.9x a switch
 * from 128 KiB on at 4 PEs).  Member x owns slice x, as in the
 * reduce-scatter above, but instead of partial results along its arcs
 * it gathers the members' raw slices and combines them itself, 0 to n-1
 * in order: its neighbours' sources it reads through their windows; a
 * member two hops away (the cycle has at most two on each side of x)
 * is read from the dest of the neighbour in between, which copied it
 * there from its own neighbour's source (the relay: slice x's place in
 * that neighbour's dest, free until the result comes).  Then the
 * allgather.  One more pass over a slice per arc of two than the
 * reduce-scatter, and every member works at once.  Not in place (a
 * relay would overwrite a source that is read); @dest and @src apart. */
void ntbx_sh_ring_reduce_gather(const struct rv *v, void *dest,
                                const void *src, size_t n, size_t es,
                                const struct ntbx_red_op *op)
{
	int N = v->n, i = v->i, R = v->R, L = v->L;
	struct cyc c;
	cyc_start(v, dest, src, n, es, 2, &c);
	char *d = dest;
	size_t o;
	/* the relays: for the left neighbour (whose right arc is 2 long)
	 * its slice of our right neighbour's source, and the mirror */
	for (size_t k = 0; k < c.K; k++)
		for (int side = 0; side < 2; side++) {
			if ((side ? L : R) != 2)
				continue;
			size_t m = cyc_chunk(&c, (size_t)((side ? i + 1 : i - 1 + N) % N),
			                     k, &o);
			if (m)
				memcpy(d + o, (side ? c.ls : c.rs) + o, m * es);
			r_signal(v, side ? RW_CH_L : RW_CH_R,
			         side ? v->right : v->left);
		}
	/* member j's slice i: by its distance to the right of us */
	const char *from[5];
	for (int j = 0; j < N; j++) {
		int k = (j - i + N) % N;
		from[j] = k == 0 ? src : k == 1 ? c.rs : k == N - 1 ? c.ls :
		          k == 2 && R == 2 ? c.rd : c.ld;
	}
	for (size_t k = 0; k < c.K; k++) {
		if (R == 2)
			r_take(v, RW_CH_R);
		if (L == 2)
			r_take(v, RW_CH_L);
		size_t m = cyc_chunk(&c, (size_t)i, k, &o);
		if (!m)
			continue;
		op->f3(d + o, from[0] + o, from[1] + o, m);
		for (int j = 2; j < N; j++)
			op->f(d + o, from[j] + o, m);
	}
	cyc_allgather(v, &c, d);
}

/* Small reductions on a ring: every member's source goes both ways round
 * (ring_allgather, as fcollect) into the members' inboxes of the region,
 * and each member combines all of them in member order (the same bits
 * everywhere; a small scan combines those of members 0..upto-1).
 * Their own two signal words keep their blocks apart from other
 * collectives' still being counted, and instead of the RDY exchange
 * at entry (a hand-over before any data moves) each member acknowledges
 * to its neighbours when it is done with its inboxes: a neighbour writes
 * them only after our acknowledgement of the previous such reduction
 * (counts per pair and region, alike on both sides, as for push), so one
 * inbox per region serves every active set. */
void ntbx_sh_ring_reduce_ag(const struct rv *v, int start, int stride,
                            int region, void *dest, const void *src, size_t n,
                            size_t es, ntbx_comb_fn fn, int upto)
{
	size_t off[NTBX_MAX_NODES], len[NTBX_MAX_NODES], bytes = n * es;
	char *base = sh_red_box(region, 0);
	for (int j = 0; j < v->n; j++) {
		off[j] = (size_t)(start + j * stride) * SH_RSLOT;
		len[j] = bytes;
	}
	long *pc = ntbx_sh_red_pc[region], *ackw = sh_red_ack(region);
	/* Active sets share the region's boxes, and a member may still read
	 * a box of one set while a neighbour that is not in that set fills
	 * it for the next: so there each fabric neighbour writes boxes of its
	 * own (the extra region after the last).  A team's blocks always come
	 * the same way. */
	ptrdiff_t xr = region == SH_SLOTS ?
	               sh_red_box(SH_SLOTS + 1, 0) - sh_red_box(SH_SLOTS, 0) : 0;
	ring_allgather(v, base, src, off, len, 0, RW_RCH_L, RW_RCH_R, ackw, pc,
	               xr);
	int i = v->i, me = ntbx_sh.me;
	if (upto <= 0)
		memset(dest, 0, bytes);   /* after our source went out */
	for (int j = 0; j < upto; j++) {
		const char *p = base + off[j];
		if (j != i) {   /* from the left or from the right */
			int froml = v->cycle ? (i - j + v->n) % v->n <= v->R : j < i;
			p += side_off(froml ? v->left : v->right, me, xr);
		}
		if (j == 0)
			memcpy(dest, p, bytes);
		else
			fn(dest, p, n);
	}
	/* done with our inboxes: the neighbours may write the next call's */
	int nb[2] = { v->left, v->right };
	for (int k = 0; k < 2; k++)
		if (nb[k] >= 0 && (k == 0 || nb[1] != nb[0])) {
			pc[nb[k]]++;
			ntbx_sh_amo(SHMEM_CTX_DEFAULT, NTBX_AMO_SET,
			            &ackw[ntbx_sh.me], 8, (uint64_t)pc[nb[k]], 0,
			            nb[k]);
		}
}

/* The cost model's time for the small reductions' allgather of @bytes
 * per member (ring_reduce_ag): the cycle's longer half (or the chain) in
 * hops, and about 2n blocks moved through each member. */
static double ring_ag_ns(const struct rv *v, size_t bytes)
{
	double hops = v->cycle ? (v->R > v->L ? v->R : v->L) : v->n - 1;
	return hops * ntbx_sh_round_ns +
	       2.0 * v->n * (double)bytes * ntbx_sh_byte_ns;
}

/* The allgather against the chain, which takes 2(n-1) hops with its data
 * pipelined.  Pick what the model says is faster. */
int ntbx_sh_ring_reduce_small(const struct rv *v, size_t bytes)
{
	if (bytes > SH_RSLOT || ntbx_sh_round_ns <= 0)
		return 0;
	double ch = 2.0 * (v->n - 1) * ntbx_sh_round_ns +
	            3.0 * (double)bytes * ntbx_sh_byte_ns;
	return ring_ag_ns(v, bytes) < ch;
}

/* A scan's chain takes (n-1) hops after the RDY exchange, one way, with
 * two passes over the bytes on its path; the allgather of the small
 * reductions (ring_reduce_ag, members 0..i combined) the cycle's longer
 * half or the chain, moving about 2n blocks through each member, and no
 * RDY.  Pick what the model says is faster. */
int ntbx_sh_ring_scan_small(const struct rv *v, size_t bytes)
{
	if (bytes > SH_RSLOT || ntbx_sh_round_ns <= 0)
		return 0;
	double ch = (double)v->n * ntbx_sh_round_ns +
	            2.0 * (double)bytes * ntbx_sh_byte_ns;
	return ring_ag_ns(v, bytes) < ch;
}

/* Scans (shmem_coll.c, "scans") on a ring whose consecutive members are
 * neighbours: small ones as the small reductions (every source both ways
 * round, members 0..i combined: ntbx_sh_ring_scan_small), else a chain,
 * chunk by chunk.
 * Member i receives the prefix of 0..i-1 in its dest from the left and
 * combines it with its source straight into the right neighbour's dest
 * (one pass), then signals; inclusive, it combines its source into its
 * own dest after the signal, off the chain's path (the chain's hop is one
 * pass either way).  RDY before a neighbour writes our dest, as for
 * ntbx_sh_ring_reduce; in place, a member that receives keeps its source
 * aside first. */
void ntbx_sh_ring_scan(const struct rv *v, int start, int stride, int region,
                       void *dest, const void *src, size_t n, size_t es,
                       const struct ntbx_red_op *op, int exclusive)
{
	int i = v->i, last = v->n - 1;
	if (n && ntbx_sh_ring_scan_small(v, n * es)) {
		ntbx_sh_ring_reduce_ag(v, start, stride, region, dest, src, n, es,
		                       op->f, i + !exclusive);
		return;
	}
	int left = i > 0 ? start + (i - 1) * stride : -1;
	int right = i < last ? start + (i + 1) * stride : -1;
	size_t bytes = n * es;
	const char *in = src;
	char *own = NULL, *d = dest;
	int inplace = (const char *)src < d + bytes && d < (const char *)src + bytes;
	if (inplace && bytes && i > 0 && !(exclusive && right < 0)) {
		own = malloc(bytes);
		if (!own)
			ntbx_sh_die("scan: out of memory (%zu bytes)", bytes);
		memcpy(own, src, bytes);
		in = own;
	}
	if (left >= 0)
		r_signal(v, RW_RDY_R, left);
	if (right >= 0)
		r_take(v, RW_RDY_R);
	char *dnext = right >= 0 && bytes ?
	              ntbx_sh_peer_ptr(dest, bytes, right) : NULL;
	size_t chunk = ring_chunk(bytes, v->n - 1);
	size_t per = chunk / es ? chunk / es : 1;
	for (size_t e0 = 0; e0 < n; e0 += per) {
		size_t m = n - e0 < per ? n - e0 : per, o = e0 * es;
		if (i > 0)
			r_take(v, RW_CH_L);
		if (right >= 0) {   /* the prefix of 0..i, to the right */
			if (i == 0)
				ntbx_sh_put(SHMEM_CTX_DEFAULT, d + o, in + o, m * es, right);
			else
				op->f3(dnext + o, d + o, in + o, m);
			r_signal(v, RW_CH_L, right);
		}
		if (!exclusive) {   /* ours: the same prefix */
			if (i == 0)
				memmove(d + o, in + o, m * es);
			else
				op->f(d + o, in + o, m);
		}
	}
	if (exclusive && i == 0)
		memset(dest, 0, bytes);   /* after our source went right */
	free(own);
}
