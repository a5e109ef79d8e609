/* SPDX-License-Identifier: MIT */
/*
 * Barriers, collectives, reductions and teams.
 *
 * Every synchronisation is a dissemination barrier over counting
 * semaphores: in round k, PE i adds 1 to word k of PE i+2^k's sync array
 * (an AMO: a CPU atomic through the window, or a request to a ring
 * non-neighbour), then waits for its own word k to be non-zero and takes 1
 * off it.  Each round has one sender per PE, so counts from a later
 * barrier never confuse an earlier one, and the words return to 0
 * (SHMEM_SYNC_VALUE) when everyone is through: the deprecated routines use
 * the caller's pSync this way, teams an internal symmetric slot.
 *
 * Data collectives read what they need from the peers' symmetric buffers
 * (gets) between two synchronisations; reductions on a switch push into
 * inboxes or reduce-scatter ("reductions").  On a ring, sets of neighbours
 * use the ring algorithms below instead ("ring algorithms").
 */
#include <stdio.h>
#include <stdlib.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

#include "shmem_int.h"
#include "util/util.h"

static void die_team(const char *what)
{
	ntbx_sh_die("%s: invalid team", what);
}

/*
 * Team barriers are centralised: each PE adds 1 to an arrival counter on
 * the team's first PE (one AMO, no waiting), the PE that completes the
 * count stores the new epoch into every member's release word, and each
 * PE waits on its own release word (read local).  Every PE has to run only
 * twice per barrier, which matters as soon as PEs outnumber CPUs; the
 * dissemination barrier above needs log2(n) scheduling rounds in a chain.
 * (Measured with bench/shmem.sh's coll programs, 4 PEs on 2 CPUs: 3.5-7 us
 * centralised against 4.6-13 us dissemination, the gap growing with other
 * load on the machine; with a CPU per PE dissemination is faster.)
 * Counter and epochs only grow, so successive barriers cannot mix.
 */
/* Wait until *w >= e: the wait policy (ntbx_sh_spin: spin for its
 * budget, at most a sleep and wake-up there and back while PEs or threads
 * outnumber the CPUs, then sleep until the releasing PE's store kicks us),
 * so PEs that outnumber the CPUs hand their CPU to the ones still on
 * their way. */
static void wait_release(long *w, long e)
{
	uint64_t s = 0;
	while (__atomic_load_n(w, __ATOMIC_ACQUIRE) < e)
		ntbx_sh_spin_on(&s, w);
	ntbx_sh_spin_done(&s);
}

/*
 * The cost model that picks between algorithms, measured at start-up
 * (ntbx_sh_coll_init) by PE 0 and read by every PE, so that all members of
 * a collective pick the same algorithm (a choice per PE could differ and
 * deadlock): the time of one synchronisation round (a world barrier) and
 * of moving one byte (memcpy of 1 MiB into a shared mapping, from the copy
 * calibration of src/util/copy.c; in sanitized builds, a copy of an
 * inbox).  0 until measured (one PE alone).
 */
static double m_round_ns, m_byte_ns;

/* Reductions without a barrier (push on a switch, small ones on a ring)
 * done with each PE in each region (team slot, or SH_SLOTS for the active
 * sets): both PEs of a pair count alike ("reductions"). */
static long red_pc[SH_SLOTS + 1][NTBX_MAX_NODES];

/* ------------------------------------------------- ring algorithms
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
 * stores growing epochs into the first two instead: ring_barrier_arc.)  Each word has one
 * writer per direction and all members call collectives in the same
 * order, so signals are consumed in the order they are sent.  Data is
 * pushed into the neighbour's dest and relayed from there.  Broadcast
 * pushes at once, as on a switch (the spec has dest ready on every member
 * before any member calls); collect, fcollect and reductions push only
 * once the neighbour has said it is in the call (RDY), because programs
 * commonly reuse dest right after the previous collective, before the
 * others have returned, and the switch's versions (which read between two
 * synchronisations) allow it.
 */
enum { RW_ARR_L, RW_ARR_R, RW_RDY_L, RW_CH_L, RW_CH_R, RW_RDY_R,
       RW_RCH_L, RW_RCH_R };   /* the last two: small reductions' data */

struct rv {
	int n, i, cycle;
	int left, right;   /* world PEs of the neighbours, or -1 */
	int R, L;          /* cycle: hops a block travels right / left */
	long *w;           /* the signal words */
};

static int ring_adjacent(int a, int b)
{
	int N = ntbx_fabric_nodes(ntbx_sh.f);
	int d = ((b - a) % N + N) % N;
	return d == 1 || d == N - 1;
}

static int ring_view(int start, int stride, int size, int idx, long *w,
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
static void ring_barrier_rounds(const struct rv *v)
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
static void ring_barrier_arc(const struct rv *v, long *cnt)
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
 * per chunk and hop costing a round (m_round_ns) and each byte m_byte_ns,
 * n bytes in chunks of c take about (n/c + hops - 1) * (round + c * byte),
 * least at c = sqrt(n * round / ((hops - 1) * byte)), at least a page.
 * One hop, or no model yet: RING_CHUNK.  The same on every member (same
 * model, same n, same tree depth), as it must be: each chunk is one
 * signal. */
static size_t ring_chunk(size_t n, int hops)
{
	if (hops < 2 || m_round_ns <= 0 || m_byte_ns <= 0)
		return RING_CHUNK;
	double c = sqrt_newton((double)n * m_round_ns /
	                       ((double)(hops - 1) * m_byte_ns));
	if (c < 4096)
		c = 4096;
	/* as many chunks as that makes, of equal size (whole lines) */
	size_t k = (size_t)((double)n / c + 0.5);
	k = k ? k : 1;
	size_t m = (n + k - 1) / k;
	return (m + 63) & ~(size_t)63;
}

/* Broadcast: chunks down the tree rooted at @root, each member relaying
 * from its own dest as soon as a chunk is in. */
static void ring_broadcast(const struct rv *v, void *dest, const void *src,
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

static void ring_fcollect(const struct rv *v, void *dest, const void *src,
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
static void ring_collect(const struct rv *v, long *scratch, void *dest,
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

static void *peer_ptr(const void *addr, size_t len, int wpe);

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
static void ring_reduce(const struct rv *v, int start, int stride,
                        void *dest, const void *src, size_t n, size_t es,
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
	const char *src0 = i == 1 && bytes ? peer_ptr(src, bytes, left) : NULL;
	char *dnext = i >= 1 && right >= 0 && bytes ? peer_ptr(dest, bytes, right)
	                                           : NULL;
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

/* Small reductions on a ring: every member's source goes both ways round
 * (ring_allgather, as fcollect) into the members' inboxes of the region,
 * and each member combines all of them in member order (the same bits
 * everywhere).  Their own two signal words keep their blocks apart from
 * other collectives' still being counted, and instead of the RDY exchange
 * at entry (a hand-over before any data moves) each member acknowledges
 * to its neighbours when it is done with its inboxes: a neighbour writes
 * them only after our acknowledgement of the previous such reduction
 * (counts per pair and region, alike on both sides, as for push), so one
 * inbox per region serves every active set. */
static void ring_reduce_ag(const struct rv *v, int start, int stride,
                           int region, void *dest, const void *src, size_t n,
                           size_t es, ntbx_comb_fn fn)
{
	size_t off[NTBX_MAX_NODES], len[NTBX_MAX_NODES], bytes = n * es;
	char *base = sh_red_box(region, 0);
	for (int j = 0; j < v->n; j++) {
		off[j] = (size_t)(start + j * stride) * SH_RSLOT;
		len[j] = bytes;
	}
	long *pc = red_pc[region], *ackw = sh_red_ack(region);
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
	for (int j = 0; j < v->n; j++) {
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

/* The allgather takes the cycle's longer half (or the chain) in hops and
 * moves about 2n blocks through each member; the chain takes 2(n-1) hops
 * with its data pipelined.  Pick what the model says is faster. */
static int ring_reduce_small(const struct rv *v, size_t bytes)
{
	if (bytes > SH_RSLOT || m_round_ns <= 0)
		return 0;
	int n = v->n;
	double hag = v->cycle ? (v->R > v->L ? v->R : v->L) : n - 1;
	double ag = hag * m_round_ns + 2.0 * n * (double)bytes * m_byte_ns;
	double ch = 2.0 * (n - 1) * m_round_ns + 3.0 * (double)bytes * m_byte_ns;
	return ag < ch;
}

void ntbx_sh_set_sync(int start, int stride, int size, int idx, long *psync)
{
	if (size <= 1)
		return;
	struct rv v;
	if (ring_view(start, stride, size, idx, psync, &v)) {
		ring_barrier_rounds(&v);
		return;
	}
	for (int k = 0, d = 1; d < size; k++, d <<= 1) {
		int to = start + ((idx + d) % size) * stride;
		ntbx_sh_amo(SHMEM_CTX_DEFAULT, NTBX_AMO_FADD, &psync[k], 8, 1, 0, to);
		uint64_t s = 0;
		while (__atomic_load_n(&psync[k], __ATOMIC_ACQUIRE) < 1)
			ntbx_sh_spin_on(&s, &psync[k]);
		ntbx_sh_spin_done(&s);
		__atomic_fetch_sub(&psync[k], 1, __ATOMIC_ACQ_REL);
	}
}

static void team_sync(shmem_team_t t)
{
	if (t->size <= 1)
		return;
	static long ncpu;
	if (!ncpu)
		ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	struct rv v;
	if (ring_view(t->start, t->stride, t->size, t->my_pe,
	              sh_slot_bar(t->slot), &v)) {
		ring_barrier_arc(&v, &t->epoch);
		return;
	}
	long e = ++t->epoch;
	if (t->size <= ncpu) {
		/* Dissemination with epochs: in round k the one PE that
		 * signals us stores the epoch into our word k; words only
		 * grow, so no reset (one store per round, no RMW). */
		long *w = sh_slot_bar(t->slot);
		for (int k = 0, d = 1; d < t->size; k++, d <<= 1) {
			int to = t->start + ((t->my_pe + d) % t->size) * t->stride;
			ntbx_sh_amo(SHMEM_CTX_DEFAULT, NTBX_AMO_SET, &w[k], 8,
			            (uint64_t)e, 0, to);
			uint64_t s = 0;
			while (__atomic_load_n(&w[k], __ATOMIC_ACQUIRE) < e)
				ntbx_sh_spin_on(&s, &w[k]);
			ntbx_sh_spin_done(&s);
		}
		return;
	}
	long *bar = sh_slot_aux(t->slot) + 8;   /* [0] arrivals, [1] release */
	long old = (long)ntbx_sh_amo(SHMEM_CTX_DEFAULT, NTBX_AMO_FADD, &bar[0], 8,
	                             1, 0, t->start);
	if (old == e * t->size - 1) {
		for (int i = 0; i < t->size; i++)
			ntbx_sh_amo(SHMEM_CTX_DEFAULT, NTBX_AMO_SET_WAKE, &bar[1], 8,
			            (uint64_t)e, 0, t->start + i * t->stride);
	}
	wait_release(&bar[1], e);
}

static int world_of(shmem_team_t t, int i) { return t->start + i * t->stride; }

/* i such that d == i * stride and 0 <= i < size, or -1.  The stride may be
 * negative (1.6), or 0 for a team of one. */
static int index_in(int d, int stride, int size)
{
	if (!stride)
		return d == 0 ? 0 : -1;
	if (d % stride)
		return -1;
	int i = d / stride;
	return i >= 0 && i < size ? i : -1;
}

void shmem_sync_all(void) { team_sync(SHMEM_TEAM_WORLD); }

void shmem_barrier_all(void)
{
	shmem_quiet();
	team_sync(SHMEM_TEAM_WORLD);
}

int shmem_team_sync(shmem_team_t team)
{
	if (!team || team->my_pe < 0)
		return -1;
	team_sync(team);
	return 0;
}

static int aset_idx(int start, int logstride, int size, const char *what)
{
	int stride = 1 << logstride;
	int me = ntbx_sh.me;
	if (size < 1 || start < 0 || logstride < 0 || logstride > 30 ||
	    start + (size - 1) * stride >= ntbx_sh.npes)
		ntbx_sh_die("%s: bad active set (PE_start %d, logPE_stride %d, "
		            "PE_size %d) for %d PEs", what, start, logstride, size,
		            ntbx_sh.npes);
	if (me < start || (me - start) % stride || (me - start) / stride >= size)
		ntbx_sh_die("%s: this PE is not in the active set", what);
	return (me - start) / stride;
}

void shmem_sync(int PE_start, int logPE_stride, int PE_size, long *pSync)
{
	int idx = aset_idx(PE_start, logPE_stride, PE_size, "shmem_sync");
	ntbx_sh_set_sync(PE_start, 1 << logPE_stride, PE_size, idx, pSync);
}

void shmem_barrier(int PE_start, int logPE_stride, int PE_size, long *pSync)
{
	shmem_quiet();
	shmem_sync(PE_start, logPE_stride, PE_size, pSync);
}

/* ------------------------------------------- generic set collectives */

struct set {
	int start, stride, size, idx;
	long *bar, *aux;
	shmem_team_t team;   /* NULL for an active set (pSync) */
};

static struct set team_set(shmem_team_t t, const char *what)
{
	if (!t || t->my_pe < 0)
		die_team(what);
	return (struct set){ t->start, t->stride, t->size, t->my_pe,
	                     sh_slot_bar(t->slot), sh_slot_aux(t->slot), t };
}

static struct set aset(int start, int logstride, int size, long *psync,
                       const char *what)
{
	int idx = aset_idx(start, logstride, size, what);
	return (struct set){ start, 1 << logstride, size, idx, psync,
	                     psync + SHMEM_SYNC_SIZE - 1, NULL };
}

static void set_sync(const struct set *s)
{
	if (s->team) {
		team_sync(s->team);
		return;
	}
	ntbx_sh_set_sync(s->start, s->stride, s->size, s->idx, s->bar);
}

static int spe(const struct set *s, int i) { return s->start + i * s->stride; }

static void wget(void *dst, const void *src, size_t n, int wpe)
{
	ntbx_sh_get(SHMEM_CTX_DEFAULT, dst, src, n, wpe);
}

/*
 * Broadcast pushes: the root stores the data into every other member's
 * dest, quiets, and adds 1 to each member's flag (a counting semaphore, so
 * a later broadcast cannot be confused with this one); members wait for
 * their flag and take 1 off.  One pass, no barrier, as in SOS's linear
 * broadcast; the root's source is free again when it returns.
 */
static void do_broadcast(const struct set *s, void *dest, const void *src,
                         size_t n, int root, int to_root)
{
	if (root < 0 || root >= s->size)
		ntbx_sh_die("broadcast: root %d is not in the team or set", root);
	struct rv v;
	if (ring_view(s->start, s->stride, s->size, s->idx, s->bar, &v)) {
		ring_broadcast(&v, dest, src, n, root, to_root);
		return;
	}
	long *flag = s->aux - 1;   /* team: bar[15]; active set: pSync[14] */
	if (s->idx == root) {
		for (int k = 1; k < s->size; k++)
			ntbx_sh_put(SHMEM_CTX_DEFAULT, dest, src, n,
			            spe(s, (root + k) % s->size));
		shmem_quiet();
		for (int k = 1; k < s->size; k++)
			ntbx_sh_amo(SHMEM_CTX_DEFAULT, NTBX_AMO_ADD_WAKE, flag, 8, 1, 0,
			            spe(s, (root + k) % s->size));
		if (to_root && dest != src)
			memmove(dest, src, n);
	} else {
		wait_release(flag, 1);
		__atomic_fetch_sub(flag, 1, __ATOMIC_ACQ_REL);
	}
}

static void do_fcollect(const struct set *s, void *dest, const void *src,
                        size_t n)
{
	struct rv v;
	if (ring_view(s->start, s->stride, s->size, s->idx, s->bar, &v)) {
		ring_fcollect(&v, dest, src, n);
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
	if (ring_view(s->start, s->stride, s->size, s->idx, s->bar, &v)) {
		ring_collect(&v, sh_rscratch(s->team ? s->team->slot : -1), dest,
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
 * Push is taken while the model (m_round_ns, m_byte_ns) says its extra
 * data, (2n-1) against 3 passes over the bytes, costs less than the
 * round it saves, and the contribution fits an inbox.
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
	if (bytes > SH_RSLOT || m_round_ns <= 0)
		return 0;
	if (size <= 2)   /* push moves 1 block out and 2 in: never more */
		return 1;
	if (red_xover >= 0 && ntbx_sh.npes > 2)
		/* the round saved is worth (2n-4) passes over the bytes */
		return (double)bytes * (2.0 * size - 4.0) <=
		       (double)red_xover * (2.0 * ntbx_sh.npes - 4.0);
	return (double)bytes * (2.0 * size - 4.0) * m_byte_ns < m_round_ns;
}

static void *peer_ptr(const void *addr, size_t len, int wpe)
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
	long *pc = red_pc[r], *flag = sh_red_flag(r), *ack = sh_red_ack(r);
	for (int k = 1; k < size; k++) {
		int w = spe(s, (s->idx + k) % size);
		long seq = pc[w] + 1;
		uint64_t st = 0;
		while (__atomic_load_n(&ack[w], __ATOMIC_ACQUIRE) < seq - 1)
			ntbx_sh_spin(&st);
		ntbx_sh_spin_done(&st);
		memcpy(peer_ptr(sh_red_box(r, me), bytes, w), src, bytes);
		__atomic_store_n((long *)peer_ptr(&flag[me], 8, w), seq,
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
		__atomic_store_n((long *)peer_ptr(&ack[me], 8, w), ++pc[w],
		                 __ATOMIC_RELEASE);
		ntbx_sh_kick(w);
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
			const char *p = peer_ptr(sp, b, spe(s, j));
			if (j == 0)
				memcpy(tmp, p, b);
			else
				fn(tmp, p, m);
		}
		char *dp = (char *)dest + e0 * es;
		for (int k = 0; k < s->size; k++)
			ntbx_copy(peer_ptr(dp, b, spe(s, (s->idx + k) % s->size)),
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
	/* The ring's and the switch's reductions read members' memory
	 * through mapped windows; a DMA-only backend (via_qp) gets instead. */
	if (!ntbx_sh.via_qp &&
	    ring_view(s->start, s->stride, s->size, s->idx, s->bar, &v)) {
		if (bytes && ring_reduce_small(&v, bytes))
			ring_reduce_ag(&v, s->start, s->stride, red_region(s), dest,
			               src, n, es, op->f);
		else
			ring_reduce(&v, s->start, s->stride, dest, src, n, es, op);
		return;
	}
	if (ntbx_sh.topo == 0 && !ntbx_sh.via_qp && bytes) {
		if (red_push_ok(s->size, bytes))
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
 * On a ring (consecutive members are neighbours): a chain, chunk by chunk.
 * Member i receives the prefix of 0..i-1 in its dest from the left;
 * inclusive, it combines its source in and puts the result into the right
 * neighbour's dest; exclusive, the prefix received is its result and it
 * combines it with its source straight into the right neighbour's dest
 * (one pass).  RDY before a neighbour writes our dest, as for ring_reduce;
 * in place, a member that receives keeps its source aside first. */
static void ring_scan(const struct rv *v, int start, int stride, void *dest,
                      const void *src, size_t n, size_t es,
                      const struct ntbx_red_op *op, int exclusive)
{
	int i = v->i, last = v->n - 1;
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
	char *dnext = right >= 0 && bytes ? peer_ptr(dest, bytes, right) : NULL;
	size_t chunk = ring_chunk(bytes, v->n - 1);
	size_t per = chunk / es ? chunk / es : 1;
	for (size_t e0 = 0; e0 < n; e0 += per) {
		size_t m = n - e0 < per ? n - e0 : per, o = e0 * es;
		if (i > 0)
			r_take(v, RW_CH_L);
		if (!exclusive) {
			if (i == 0)
				memmove(d + o, in + o, m * es);
			else
				op->f(d + o, in + o, m);
			if (right >= 0)
				ntbx_sh_put(SHMEM_CTX_DEFAULT, d + o, d + o, m * es, right);
		} else if (right >= 0) {
			if (i == 0)
				ntbx_sh_put(SHMEM_CTX_DEFAULT, d + o, in + o, m * es, right);
			else
				op->f3(dnext + o, d + o, in + o, m);
		}
		if (right >= 0)
			r_signal(v, RW_CH_L, right);
	}
	if (exclusive && i == 0)
		memset(dest, 0, bytes);   /* after our source went right */
	free(own);
}

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
			const char *sk = peer_ptr(sp, b, spe(s, k));
			char *dk = peer_ptr(dp, b, spe(s, k));
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
					memcpy(dk, peer_ptr(sp, b, spe(s, 0)), b);
				else
					op->f3(dk, prev, peer_ptr(sp, b, spe(s, k - 1)), m);
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
	} else if (ring_view(s.start, s.stride, s.size, s.idx, s.bar, &v)) {
		ring_scan(&v, s.start, s.stride, dest, src, n, es, op, exclusive);
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

int ntbx_sh_broadcast(shmem_team_t team, void *dest, const void *src,
                      size_t nbytes, int root)
{
	if (!team || team->my_pe < 0)
		return -1;
	struct set s = team_set(team, "broadcast");
	do_broadcast(&s, dest, src, nbytes, root, 1);
	return 0;
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

int shmem_broadcastmem(shmem_team_t team, void *dest, const void *source,
                       size_t nelems, int PE_root)
{
	return ntbx_sh_broadcast(team, dest, source, nelems, PE_root);
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

/* Deprecated active-set collectives. */
#define ASET_COLL(bits)                                                     \
void shmem_broadcast##bits(void *dest, const void *source, size_t nelems,   \
                           int PE_root, int PE_start, int logPE_stride,     \
                           int PE_size, long *pSync)                        \
{                                                                           \
	struct set s = aset(PE_start, logPE_stride, PE_size, pSync,         \
	                    "shmem_broadcast" #bits);                       \
	do_broadcast(&s, dest, source, nelems * (bits / 8), PE_root, 0);    \
}                                                                           \
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

/* -------------------------------------------------------------- teams */

int shmem_team_my_pe(shmem_team_t team)
{
	return team ? team->my_pe : -1;
}

int shmem_team_n_pes(shmem_team_t team)
{
	return team ? team->size : -1;
}

int shmem_team_get_config(shmem_team_t team, long config_mask,
                          shmem_team_config_t *config)
{
	if (!team || !config)
		return -1;
	if (config_mask & SHMEM_TEAM_NUM_CONTEXTS)
		config->num_contexts = team->cfg.num_contexts;
	return 0;
}

int shmem_team_translate_pe(shmem_team_t src_team, int src_pe,
                            shmem_team_t dest_team)
{
	if (!src_team || !dest_team || src_pe < 0 || src_pe >= src_team->size)
		return -1;
	return index_in(world_of(src_team, src_pe) - dest_team->start,
	                dest_team->stride, dest_team->size);
}

static uint64_t *my_bitmap(void)
{
	return (uint64_t *)(ntbx_sh.internal + SH_BITMAP_OFF);
}

/* Slots used by any member of @parent (collective over @parent). */
static uint64_t used_slots(shmem_team_t parent)
{
	struct set s = team_set(parent, "team split");
	set_sync(&s);
	uint64_t u = 0;
	for (int j = 0; j < s.size; j++) {
		uint64_t b;
		wget(&b, my_bitmap(), sizeof b, spe(&s, j));
		u |= b;
	}
	set_sync(&s);
	return u;
}

static int free_slot(uint64_t used)
{
	for (int i = 2; i < SH_SLOTS; i++)
		if (!(used & (1ull << i)))
			return i;
	return -1;
}

/* Make the team {parent[start + i*stride], i < size} if we are in it. */
static int make_team(shmem_team_t parent, int start, int stride, int size,
                     int slot, const shmem_team_config_t *config, long mask,
                     shmem_team_t *out)
{
	*out = SHMEM_TEAM_INVALID;
	int i = index_in(parent->my_pe - start, stride, size);
	if (i < 0)
		return 0;
	struct ntbx_shmem_team *t = calloc(1, sizeof *t);
	if (!t)
		return -1;
	t->start = world_of(parent, start);
	t->stride = parent->stride * stride;
	t->size = size;
	t->my_pe = i;
	t->slot = slot;
	if (config && (mask & SHMEM_TEAM_NUM_CONTEXTS))
		t->cfg.num_contexts = config->num_contexts;
	memset(sh_slot_bar(slot), 0, SH_SLOT_BYTES);
	memset(sh_red_flag(slot), 0, SH_RED_BYTES);
	memset(red_pc[slot], 0, sizeof red_pc[slot]);
	__atomic_fetch_or(my_bitmap(), 1ull << slot, __ATOMIC_ACQ_REL);
	*out = t;
	return 0;
}

int shmem_team_split_strided(shmem_team_t parent_team, int start, int stride,
                             int size, const shmem_team_config_t *config,
                             long config_mask, shmem_team_t *new_team)
{
	if (!new_team)
		return -1;
	*new_team = SHMEM_TEAM_INVALID;
	if (!parent_team || parent_team->my_pe < 0)
		return -1;
	/* 1.6: the stride may be negative (members in descending order), and
	 * 0 when the team has one member.  First and last must be members of
	 * the parent (in 64 bits: start + (size-1)*stride may overflow). */
	int64_t last = (int64_t)start + (int64_t)(size - 1) * stride;
	if (size < 1 || (stride == 0 && size != 1) || start < 0 ||
	    start >= parent_team->size || last < 0 ||
	    last >= parent_team->size) {
		ntbx_sh_debug("team_split_strided: start %d stride %d size %d do "
		              "not fit a parent of %d PEs", start, stride, size,
		              parent_team->size);
		return -1;
	}
	int slot = free_slot(used_slots(parent_team));
	if (slot < 0) {
		ntbx_sh_debug("team_split_strided: no free team slot (at most %d "
		              "teams)", SH_SLOTS - 2);
		return -1;
	}
	int r = make_team(parent_team, start, stride, size, slot, config,
	                  config_mask, new_team);
	team_sync(parent_team);
	return r;
}

int shmem_team_split_2d(shmem_team_t parent_team, int xrange,
                        const shmem_team_config_t *xaxis_config,
                        long xaxis_mask, shmem_team_t *xaxis_team,
                        const shmem_team_config_t *yaxis_config,
                        long yaxis_mask, shmem_team_t *yaxis_team)
{
	if (!xaxis_team || !yaxis_team)
		return -1;
	*xaxis_team = *yaxis_team = SHMEM_TEAM_INVALID;
	if (!parent_team || parent_team->my_pe < 0 || xrange < 1)
		return -1;
	int n = parent_team->size;
	if (xrange > n)
		xrange = n;
	uint64_t used = used_slots(parent_team);
	int sx = free_slot(used);
	int sy = sx < 0 ? -1 : free_slot(used | (1ull << sx));
	if (sy < 0)
		return -1;
	int me = parent_team->my_pe;
	int y = me / xrange, x = me % xrange;
	int xs = n - y * xrange < xrange ? n - y * xrange : xrange;
	int ys = (n - x + xrange - 1) / xrange;
	if (make_team(parent_team, y * xrange, 1, xs, sx, xaxis_config,
	              xaxis_mask, xaxis_team) < 0 ||
	    make_team(parent_team, x, xrange, ys, sy, yaxis_config, yaxis_mask,
	              yaxis_team) < 0)
		return -1;
	team_sync(parent_team);
	return 0;
}

void shmem_team_destroy(shmem_team_t team)
{
	if (!team || team == SHMEM_TEAM_WORLD || team == SHMEM_TEAM_SHARED)
		return;
	team_sync(team);
	__atomic_fetch_and(my_bitmap(), ~(1ull << team->slot), __ATOMIC_ACQ_REL);
	free(team);
}

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
					team_sync(SHMEM_TEAM_WORLD);
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
	team_sync(SHMEM_TEAM_WORLD);
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
			team_sync(SHMEM_TEAM_WORLD);
		uint64_t t = (ntbx_now_ns() - t0) / 4;
		if (g && t < bestr)
			bestr = t;
	}
	if (ntbx_sh.me == 0)
		pub[0] = bestr ? (long)bestr : 1;
	team_sync(SHMEM_TEAM_WORLD);
	long m[2];
	wget(m, pub, sizeof m, 0);
	m_round_ns = (double)m[0];
	m_byte_ns = (double)m[1] / SH_RSLOT;
	if (ntbx_sh.topo == 0 && !ntbx_sh.via_qp && ntbx_sh.npes > 2)
		red_calibrate(pub);
	if (ntbx_sh.me == 0 && getenv("SHMEM_INFO")) {
		printf("  collectives          round %.2f us, copy %.1f GB/s (PE 0, "
		       "measured at start-up)\n", m_round_ns / 1000, 1 / m_byte_ns);
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
}
