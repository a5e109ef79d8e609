/* SPDX-License-Identifier: MIT */
/*
 * Internal interface of libntbx-shmem: the generic core that the generated
 * typed routines (shmem_typed_*.c, from gen_shmem.py) call, and what the
 * files of the API areas share (the state, the internal area's layout,
 * waiting and kicks, address translation, the collectives' sets and ring
 * algorithms).  Which file implements what: CMakeLists.txt's header.
 */
#ifndef NTBX_SHMEM_INT_H
#define NTBX_SHMEM_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include "shmem.h"
#include "ntbx/dev.h"
#include "util/util.h"

enum {
	NTBX_AMO_FETCH, NTBX_AMO_SET, NTBX_AMO_SWAP, NTBX_AMO_CSWAP,
	NTBX_AMO_FADD, NTBX_AMO_AND, NTBX_AMO_OR, NTBX_AMO_XOR,
	NTBX_AMO_SET_WAKE,   /* 8-byte store, then wake futex sleepers on it */
	NTBX_AMO_ADD_WAKE,   /* 8-byte add, then wake futex sleepers on it */
};
/* Or'ed into an AMO's op by a caller that does not use its result: to a
 * PE reached by requests (shmem_ring.c) the request then gets no reply,
 * a one-way message instead of a round trip through the target's
 * progress thread.  NTBX_AMO_NOFETCH: a program's non-fetching atomic
 * (set, add, inc, and, or, xor; a signal), which quiet completes (its
 * channel becomes dirty, as after a put request).  NTBX_AMO_SIGNAL: the
 * library's own synchronisation (barriers, collectives' flags), which its
 * receiver waits for, so quiet need not. */
#define NTBX_AMO_NOFETCH 0x100
#define NTBX_AMO_SIGNAL  0x200
#define NTBX_AMO_OP(op) ((op) & 0xff)

struct ntbx_shmem_team {
	int start, stride, size;  /* members: world PEs start + i*stride */
	int my_pe;                /* index of this PE, -1 if not a member */
	int slot;                 /* internal symmetric sync slot */
	shmem_team_config_t cfg;
	long epoch;               /* barriers this PE has done in the team */
};

struct ntbx_shmem_ctx {
	shmem_team_t team;
	long options;
};

typedef void (*ntbx_comb_fn)(void *acc, const void *in, size_t n);
/* A reduction operator on one type: f(a, b) is a = a OP b; f3(o, a, b) is
 * o = a OP b in one pass (o, a, b distinct).  Generated per type and op
 * (gen_shmem.py). */
struct ntbx_red_op {
	void (*f)(void *restrict a, const void *restrict b, size_t n);
	void (*f3)(void *restrict o, const void *restrict a,
	           const void *restrict b, size_t n);
	int exact;   /* any order of combination gives the same bits (integer
	              * types); else the members' order is kept */
};

void ntbx_sh_put(shmem_ctx_t ctx, void *dest, const void *src, size_t n,
                 int pe);
void ntbx_sh_get(shmem_ctx_t ctx, void *dest, const void *src, size_t n,
                 int pe);
void ntbx_sh_iput(shmem_ctx_t ctx, void *dest, const void *src,
                  ptrdiff_t dst, ptrdiff_t sst, size_t nelems, size_t es,
                  int pe);
void ntbx_sh_iget(shmem_ctx_t ctx, void *dest, const void *src,
                  ptrdiff_t dst, ptrdiff_t sst, size_t nelems, size_t es,
                  int pe);
void ntbx_sh_ib(shmem_ctx_t ctx, int put, void *dest, const void *src,
                ptrdiff_t dst, ptrdiff_t sst, size_t bsize, size_t nblocks,
                size_t es, int pe);
uint64_t ntbx_sh_amo(shmem_ctx_t ctx, int op, void *dest, size_t size,
                     uint64_t val, uint64_t cond, int pe);
/*
 * Waiting on symmetric memory (wait_until and friends, collectives,
 * locks): the wait policy (util.h), as every blocking path.
 *
 *	uint64_t s = 0;
 *	while (!condition())
 *		ntbx_sh_spin(&s);
 *	ntbx_sh_spin_done(&s);
 *
 * spins (pause instructions) for the policy's budget (crowded when the
 * PEs awake on this machine outnumber its CPUs: shmem_signal.c; then, if
 * the machine's runnable threads are all those PEs, it sched_yield()s
 * instead, for at most SH_YIELD_MAX_NS), then
 * announces the sleep (sh_sleepers) and returns once more so the caller
 * re-checks, then
 * sleeps on this PE's wake sequence (sh_wake_seq), in bounded slices
 * (SH_SLEEP_MIN_NS doubling to SH_SLEEP_MAX_NS).  Every store into
 * another PE's memory (puts, atomics, the progress threads' applied
 * requests, the collectives' signals) is followed by ntbx_sh_kick, which
 * wakes that PE's sleepers if it has any: one load when it has none.
 * No sched_yield() against foreign load.  done ends the wait (takes the announcement back,
 * teaches the policy); waits do not nest within a thread.
 */
void ntbx_sh_spin(uint64_t *state);
/* The same for a wait on the word at @addr (symmetric, this PE's): a
 * store elsewhere in this PE's memory does not wake it (sh_watch). */
void ntbx_sh_spin_on(uint64_t *state, const void *addr);
/* ... on the @len bytes at @addr. */
void ntbx_sh_spin_range(uint64_t *state, const void *addr, size_t len);
void ntbx_sh_spin_done(uint64_t *state);
/* Log (NTBX_LOG=debug) how many waits yielded and slept. */
void ntbx_sh_wait_stats(void);
/* Before the first ntbx_sh_spin* of a wait: the CPU the thread it waits
 * for last ran on (no spin if it is ours: it cannot answer before we
 * give the CPU up; a yield instead while the runnable load is the job's,
 * as a crowded wait's), or -1. */
void ntbx_sh_spin_peer_cpu(int cpu);
/*
 * A progress thread with nothing to do (shmem_ring.c), before it waits
 * for its next request in a blocking queue-pair receive (the policy:
 * spin for a writer elsewhere, sleep at once for one on its CPU): while
 * the PE that writes to it (@peer_cpu, ntbx_qp_peer_cpu) last ran on its
 * CPU and the job's threads are the machine's runnable load, it
 * sched_yield()s instead (one per call: 1; the caller then looks for a
 * request again), for at most SH_YIELD_MAX_NS from the first: a put
 * handed to a relay that shares the putter's CPU then costs two yields,
 * not a futex wake-up on each side.  0: block now.  ntbx_sh_idle_done
 * when a request came (or the thread stops).
 */
struct sh_idle {
	uint64_t t0, check, yield_at;
	int yielding, counted;
	struct ntbx_spin site;
};
int ntbx_sh_idle_yield(struct sh_idle *w, int peer_cpu);
void ntbx_sh_idle_done(struct sh_idle *w);
/* PEs have progress threads (shmem_ring.c: some PE is reached through
 * queue pairs), whose yields a wait counts as the job's load. */
int ntbx_sh_ring_helpers(void);
void ntbx_sh_kick(int pe);
void ntbx_sh_kick_local(void);
/* ... after a store of @len bytes at @off of region @kind (0 heap). */
void ntbx_sh_kick_local_at(int kind, uint64_t off, size_t len);
void ntbx_sh_progress(void);
void ntbx_sh_bad_cmp(int cmp);

int ntbx_sh_reduce(shmem_team_t team, void *dest, const void *src,
                   size_t n, size_t es, const struct ntbx_red_op *op);
int ntbx_sh_scan(shmem_team_t team, void *dest, const void *src, size_t n,
                 size_t es, const struct ntbx_red_op *op, int exclusive);
void ntbx_sh_reduce_aset(void *dest, const void *src, int n, size_t es,
                         const struct ntbx_red_op *op, int start,
                         int logstride, int size,
                         long *psync);
int ntbx_sh_broadcast(shmem_team_t team, void *dest, const void *src,
                      size_t nbytes, int root);
int ntbx_sh_collect(shmem_team_t team, void *dest, const void *src,
                    size_t nbytes);
int ntbx_sh_fcollect(shmem_team_t team, void *dest, const void *src,
                     size_t nbytes);
int ntbx_sh_alltoall(shmem_team_t team, void *dest, const void *src,
                     size_t nbytes);
int ntbx_sh_alltoalls(shmem_team_t team, void *dest, const void *src,
                      ptrdiff_t dst, ptrdiff_t sst, size_t nelems, size_t es);

/* ---- shared between the core files ---- */
struct sh_loc {            /* where a symmetric address is */
	int kind;          /* 0 heap, 1 static data */
	uint64_t off;
};

struct sh_peer {
	char *heap, *data;     /* mapped through the outbound window, or NULL */
	int direct;
	struct ntbx_qp *cli;   /* requests we send, replies we read */
	struct ntbx_qp *srv;   /* requests the peer sends us */
	pthread_mutex_t lk;
	int dirty;             /* puts sent since the last quiet */
	pthread_t thr;
	int thr_started;
};

struct sh_state {
	int inited, me, npes, topo;  /* topo: -1 alone, 0 switch, 1 ring */
	int via_qp;   /* the backend maps no peer window (DMA only): every
	               * other PE is reached through queue pairs, as
	               * non-neighbours on a ring are (shmem_ring.c) */
	int debug, threads;
	struct ntbx_fabric *f;
	char *heap; size_t heap_size;   /* this PE's heap (symmetric) */
	char *data; size_t data_size;   /* this PE's static data region */
	char *internal;                 /* start of the internal area */
	struct sh_peer *peer;
	int pmi_fd;   /* oshrun's socket, or -1 */
	int pmix;     /* started by a PMIx launcher (shmem_pmix.c) */
	int node;     /* this PE's fabric node */
	int *node_of; /* each PE's node: PEs of one node share its memory */
};
extern struct sh_state ntbx_sh;

#define SH_SLOTS 64
#define SH_SLOT_BYTES 256
/* internal area: [slot 0..63: long bar[16]; long aux[16]] [bitmap word] */
static inline long *sh_slot_bar(int slot)
{
	return (long *)(ntbx_sh.internal + (size_t)slot * SH_SLOT_BYTES);
}
static inline long *sh_slot_aux(int slot)
{
	return sh_slot_bar(slot) + 16;
}
#define SH_BITMAP_OFF (SH_SLOTS * SH_SLOT_BYTES)
#define SH_SLEEPERS_OFF (SH_BITMAP_OFF + 64)  /* threads asleep in a wait */
/* Ring collectives: one long per member (collect's sizes), per team slot
 * from 32 KiB on, and one array for the active sets of pSync routines. */
#define SH_RSCRATCH_BYTES (NTBX_MAX_NODES * 8)
#define SH_RSCRATCH_OFF (32u << 10)
#define SH_RSCRATCH_ASET_OFF (20u << 10)
_Static_assert(SH_RSCRATCH_OFF + SH_SLOTS * SH_RSCRATCH_BYTES <= (64u << 10),
               "ring scratch must fit the internal area");
_Static_assert(SH_SLEEPERS_OFF + 64 <= SH_RSCRATCH_ASET_OFF &&
               SH_RSCRATCH_ASET_OFF + SH_RSCRATCH_BYTES <= SH_RSCRATCH_OFF,
               "active-set ring scratch must fit between");
static inline long *sh_rscratch(int slot)   /* slot -1: active sets */
{
	return (long *)(ntbx_sh.internal + (slot < 0 ? SH_RSCRATCH_ASET_OFF :
	                SH_RSCRATCH_OFF + (size_t)slot * SH_RSCRATCH_BYTES));
}
static inline long *sh_sleepers(void)
{
	return (long *)(ntbx_sh.internal + SH_SLEEPERS_OFF);
}
/* The futex word ntbx_sh_spin's sleepers sleep on, in the same line: at
 * sleepers + 8 in whichever PE's mapping. */
#define SH_WAKE_SEQ_DELTA 8
static inline uint32_t *sh_wake_seq(void)
{
	return (uint32_t *)(ntbx_sh.internal + SH_SLEEPERS_OFF +
	                    SH_WAKE_SEQ_DELTA);
}
/* What the sleepers wait for, in the same line: 0 anything, else
 * 1 + the offset of the bytes they watch (bits 0-47), their length (bits
 * 48-61) and bit 62 for static data (else the heap).  A kick for a store
 * that does not meet them is skipped. */
#define SH_WATCH_DELTA 16
#define SH_WATCH_DATA (1ull << 62)
#define SH_WATCH_LEN_SHIFT 48
#define SH_WATCH_LEN_MAX 0x3fffull
#define SH_WATCH_OFF_MASK ((1ull << SH_WATCH_LEN_SHIFT) - 1)
/* The wake sequence this PE's last sleeper went to sleep on (32 bits), in
 * the same line: a sleeper whose sequence has moved since was kicked and
 * is runnable, and counts as awake (shmem_signal.c, sh_awake_of). */
#define SH_SLEEP_SEQ_DELTA 24
/* How many of this PE's progress threads are yielding between requests
 * (runnable: the group's, not foreign), in the same line: a waiter that
 * reads a PE's sleepers word for its awake count gets this for free. */
#define SH_HELPERS_DELTA 32
/* Reductions (shmem_coll.c, "reductions"): region r is a team's slot, or
 * SH_SLOTS for the active sets.  Its words (zeroed at start, and by a new
 * team in that slot): flag[s], the number of the reduction whose data PE s
 * put in our inbox; ack[d], how many of our contributions PE d has
 * consumed.  Its inbox: SH_RSLOT bytes per source PE (one more region
 * after the last: on a ring, the active sets' boxes that the right
 * neighbour writes), after the zeroed
 * part (never read before written: node memory there stays untouched
 * until a reduction uses it).  The model words: what PE 0 measured at
 * start-up (ntbx_sh_coll_init). */
#define SH_MODEL_OFF (SH_SLEEPERS_OFF + 64)
#define SH_RED_OFF (64u << 10)
#define SH_RED_BYTES (2 * NTBX_MAX_NODES * 8)
/* Small reductions (at most SH_RLINE_DATA bytes; shmem_coll.c,
 * "reductions"): per region and source PE two cache lines, taken in turn
 * (the pair's line reduction j in line j % 2), each the number j then the
 * source's contribution, so that one line carries both.  Zeroed with the
 * header, and by a new team in that slot. */
#define SH_RLINE_OFF (SH_RED_OFF + (SH_SLOTS + 1) * SH_RED_BYTES)
#define SH_RLINE_BYTES (NTBX_MAX_NODES * 2 * 64)
#define SH_RLINE_DATA 56
#define SH_HDR_SIZE (SH_RLINE_OFF + (SH_SLOTS + 1) * SH_RLINE_BYTES)
#define SH_RSLOT (8u << 10)
#define SH_RDATA_OFF NTBX_ALIGN_UP(SH_HDR_SIZE, 64u << 10)
#define SH_INTERNAL_SIZE \
	(SH_RDATA_OFF + (SH_SLOTS + 2) * NTBX_MAX_NODES * SH_RSLOT)
_Static_assert(SH_MODEL_OFF + 24 <= SH_RSCRATCH_ASET_OFF,
               "the model words must fit before the active-set scratch");
/* Relays on a ring (shmem_ring.c): at SH_RELAY_OFF + 16 r, the count of
 * this PE's requests that PE r has applied as their relay, then 1 + the
 * CPU its progress thread last ran on; PE r writes both through its
 * window, and a quiet waits for the count instead of a SYNC. */
#define SH_RELAY_OFF (SH_MODEL_OFF + 64)
#define SH_RELAY_BYTES 16
_Static_assert(SH_RELAY_OFF + NTBX_MAX_NODES * SH_RELAY_BYTES <=
               SH_RSCRATCH_ASET_OFF,
               "the relay counters must fit before the active-set scratch");
static inline long *sh_red_flag(int region)
{
	return (long *)(ntbx_sh.internal + SH_RED_OFF +
	                (size_t)region * SH_RED_BYTES);
}
static inline long *sh_red_ack(int region)
{
	return sh_red_flag(region) + NTBX_MAX_NODES;
}
static inline long *sh_red_line(int region, int src_pe, long j)
{
	return (long *)(ntbx_sh.internal + SH_RLINE_OFF +
	                (size_t)region * SH_RLINE_BYTES +
	                ((size_t)src_pe * 2 + (size_t)(j & 1)) * 64);
}
static inline char *sh_red_box(int region, int src_pe)
{
	return ntbx_sh.internal + SH_RDATA_OFF +
	       ((size_t)region * NTBX_MAX_NODES + (size_t)src_pe) * SH_RSLOT;
}
void ntbx_sh_coll_init(void);
/* Where the PE runs (shmem_bind.c): oshrun's pin (a whole PE's, taken
 * by oshrun; a ring's main thread's, taken by ntbx_sh_bind at the end of
 * shmem_init), let go while foreign load lasts; its waits call
 * ntbx_sh_bind_adapt (rate-limited inside).  ntbx_sh_bind_let_go: how
 * often it let go. */
void ntbx_sh_bind(void);
void ntbx_sh_bind_adapt(uint64_t now);
unsigned long ntbx_sh_bind_let_go(void);

void ntbx_sh_die(const char *fmt, ...) __attribute__((format(printf, 1, 2),
                                                       noreturn));
void ntbx_sh_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Dies naming @what if shmem_init has not been called. */
void ntbx_sh_need_init(const char *what);
int ntbx_sh_ctx_pe(shmem_ctx_t ctx, int pe, const char *what);
void *ntbx_sh_xlate(const void *addr, size_t len, int pe, const char *what,
                    struct sh_loc *loc);
/* Wake PE @pe's sleepers after a store of @len bytes at @l into its
 * memory (a put, an atomic, a relay's put; shmem_signal.c). */
void ntbx_sh_kick_store(int pe, const struct sh_loc *l, size_t len);
void ntbx_sh_set_sync(int start, int stride, int size, int idx, long *psync);
void ntbx_sh_heap_init(char *base, size_t size, size_t align);

/* ---- shared between the collectives' files (shmem_barrier.c,
 * shmem_coll.c, shmem_coll_ring.c) and the teams (shmem_team.c) ---- */

/* The cost model that picks between algorithms (shmem_coll.c, measured
 * by ntbx_sh_coll_init): one synchronisation round and one byte moved, in
 * ns; 0 until measured. */
extern double ntbx_sh_round_ns, ntbx_sh_byte_ns;
/* Reductions without a barrier done with each PE in each region (team
 * slot, or SH_SLOTS for the active sets): both PEs of a pair count alike
 * (shmem_coll.c, "reductions"). */
extern long ntbx_sh_red_pc[SH_SLOTS + 1][NTBX_MAX_NODES];
/* The same for the small reductions that go in one line (sh_red_line). */
extern long ntbx_sh_red_lc[SH_SLOTS + 1][NTBX_MAX_NODES];
/* @addr of PE @wpe through its mapped window (dies if it is not mapped). */
void *ntbx_sh_peer_ptr(const void *addr, size_t len, int wpe);
void ntbx_sh_team_sync(shmem_team_t t);
/* This PE's index in an active set (dies naming @what if bad). */
int ntbx_sh_aset_idx(int start, int logstride, int size, const char *what);

/* The members of a collective: a team, or an active set with its pSync. */
struct set {
	int start, stride, size, idx;
	long *bar, *aux;
	shmem_team_t team;   /* NULL for an active set (pSync) */
};

static inline struct set team_set(shmem_team_t t, const char *what)
{
	if (!t || t->my_pe < 0)
		ntbx_sh_die("%s: invalid team", what);
	return (struct set){ t->start, t->stride, t->size, t->my_pe,
	                     sh_slot_bar(t->slot), sh_slot_aux(t->slot), t };
}

static inline struct set aset(int start, int logstride, int size,
                              long *psync, const char *what)
{
	int idx = ntbx_sh_aset_idx(start, logstride, size, what);
	return (struct set){ start, 1 << logstride, size, idx, psync,
	                     psync + SHMEM_SYNC_SIZE - 1, NULL };
}

static inline void set_sync(const struct set *s)
{
	if (s->team) {
		ntbx_sh_team_sync(s->team);
		return;
	}
	ntbx_sh_set_sync(s->start, s->stride, s->size, s->idx, s->bar);
}

static inline int spe(const struct set *s, int i)
{
	return s->start + i * s->stride;
}

static inline void wget(void *dst, const void *src, size_t n, int wpe)
{
	ntbx_sh_get(SHMEM_CTX_DEFAULT, dst, src, n, wpe);
}

/* Ring algorithms (shmem_coll_ring.c): a set whose consecutive members
 * are fabric neighbours, seen from member i. */
struct rv {
	int n, i, cycle;
	int left, right;   /* world PEs of the neighbours, or -1 */
	int R, L;          /* cycle: hops a block travels right / left */
	long *w;           /* the signal words */
};
/* 1 and @v filled in if the set runs the ring algorithms, else 0. */
int ntbx_sh_ring_view(int start, int stride, int size, int idx, long *w,
                      struct rv *v);
void ntbx_sh_ring_barrier_rounds(const struct rv *v);
void ntbx_sh_ring_barrier_arc(const struct rv *v, long *cnt);
void ntbx_sh_ring_broadcast(const struct rv *v, void *dest, const void *src,
                            size_t n, int root, int to_root);
void ntbx_sh_ring_fcollect(const struct rv *v, void *dest, const void *src,
                           size_t nb);
void ntbx_sh_ring_collect(const struct rv *v, long *scratch, void *dest,
                          const void *src, size_t nb);
/* A cycle's large reductions of an exact operator (op->exact: not in
 * member order): reduce-scatter along both arcs, then the allgather
 * (shmem_coll_ring.c); @dest is @src or apart from it. */
void ntbx_sh_ring_reduce_rsag(const struct rv *v, void *dest, const void *src,
                              size_t n, size_t es, const struct ntbx_red_op *op);
/* A cycle of 3 to 5 members' large reductions in member order (floating
 * point): each member gathers its slice's raw sources and combines them
 * in order, then the allgather; @dest apart from @src. */
void ntbx_sh_ring_reduce_gather(const struct rv *v, void *dest,
                                const void *src, size_t n, size_t es,
                                const struct ntbx_red_op *op);
void ntbx_sh_ring_reduce(const struct rv *v, int start, int stride,
                         void *dest, const void *src, size_t n, size_t es,
                         const struct ntbx_red_op *op);
/* Members 0..upto-1 combined in member order (@upto = v->n: the
 * reduction; fewer: a scan's prefix; 0: zeros). */
void ntbx_sh_ring_reduce_ag(const struct rv *v, int start, int stride,
                            int region, void *dest, const void *src,
                            size_t n, size_t es, ntbx_comb_fn fn, int upto);
int ntbx_sh_ring_reduce_small(const struct rv *v, size_t bytes);
int ntbx_sh_ring_scan_small(const struct rv *v, size_t bytes);
void ntbx_sh_ring_scan(const struct rv *v, int start, int stride, int region,
                       void *dest, const void *src, size_t n, size_t es,
                       const struct ntbx_red_op *op, int exclusive);

/* What each PE tells the others at start-up (through oshrun). */
#include "ntbx/qp.h"
struct sh_rec {
	uint64_t heap_off, heap_size, data_off, data_size;
	int64_t node;
	struct ntbx_qp_addr cli[NTBX_MAX_NODES], srv[NTBX_MAX_NODES];
};

/* A PE of another node (through queue pairs on a DMA-only backend). */
static inline int sh_other_node(int pe)
{
	return ntbx_sh.node_of && ntbx_sh.node_of[pe] != ntbx_sh.node;
}

/* Under a PMIx launcher (shmem_pmix.c); each dies with a clear message on
 * failure. */
int ntbx_sh_pmix_launched(void);
void ntbx_sh_pmix_init(int *rank, int *size);
/* @all gets every PE's @len bytes, in rank order. */
void ntbx_sh_pmix_allgather(const char *key, const void *mine, size_t len,
                            void *all);
void ntbx_sh_pmix_abort(int status, const char *msg);
void ntbx_sh_pmix_finalize(void);

/* ring: requests to PEs that are not neighbours (shmem_ring.c) */
int ntbx_sh_ring_setup_create(struct ntbx_qp_addr *cli,
                              struct ntbx_qp_addr *srv);
int ntbx_sh_ring_setup_connect(const struct sh_rec *all, size_t recsize);
void ntbx_sh_ring_stop(void);
void ntbx_sh_remote_put(int pe, const struct sh_loc *l, const void *src,
                        size_t n);
void ntbx_sh_remote_get(int pe, const struct sh_loc *l, void *dst, size_t n);
uint64_t ntbx_sh_remote_amo(int pe, const struct sh_loc *l, int op,
                            size_t size, uint64_t v, uint64_t c);
void ntbx_sh_remote_quiet(void);
/* DMA straight into and out of another node's PEs on a DMA-only backend
 * (shmem_dma.c; shmem_ring.c decides when) */
void ntbx_sh_dma_setup(const struct sh_rec *all);
int ntbx_sh_dma_ok(int pe);
int ntbx_sh_dma_pes(void);   /* how many PEs ntbx_sh_dma_ok */
void ntbx_sh_dma_put(int pe, const struct sh_loc *l, const void *src,
                     size_t n);
void ntbx_sh_dma_get(int pe, const struct sh_loc *l, void *dst, size_t n);
void ntbx_sh_dma_wait_pe(int pe);
void ntbx_sh_dma_quiet(void);
void ntbx_sh_dma_stop(void);   /* quiet, give the bounce ring back */
uint64_t ntbx_sh_amo_local(int op, void *p, size_t size, uint64_t v,
                           uint64_t c);
void ntbx_sh_wake_check(int op, void *p);

#endif
