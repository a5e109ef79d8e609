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
 * (gets) between two synchronisations.
 */
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

void ntbx_sh_set_sync(int start, int stride, int size, int idx, long *psync)
{
	if (size <= 1)
		return;
	for (int k = 0, d = 1; d < size; k++, d <<= 1) {
		int to = start + ((idx + d) % size) * stride;
		ntbx_sh_amo(SHMEM_CTX_DEFAULT, NTBX_AMO_FADD, &psync[k], 8, 1, 0, to);
		uint64_t s = 0;
		while (__atomic_load_n(&psync[k], __ATOMIC_ACQUIRE) < 1)
			ntbx_sh_spin(&s);
		__atomic_fetch_sub(&psync[k], 1, __ATOMIC_ACQ_REL);
	}
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
/* Wait until *w >= e: spin briefly, then sleep on the futex that the
 * releasing PE wakes (NTBX_AMO_SET_WAKE), so PEs that outnumber the CPUs
 * hand their CPU to the ones still on their way. */
static void wait_release(long *w, long e)
{
	static long limit;
	if (!limit)   /* spin long only while every PE can have a CPU */
		limit = ntbx_sh.npes > sysconf(_SC_NPROCESSORS_ONLN) ? 30000 : 50000;
	uint64_t t0 = ntbx_now_ns(), spun;
	while (__atomic_load_n(w, __ATOMIC_ACQUIRE) < e) {
		spun = ntbx_now_ns() - t0;
		if (spun < (uint64_t)limit) {
			if (limit == 50000)
				ntbx_spin_step(spun);
			else   /* more PEs than CPUs: let the others run */
				sched_yield();
			continue;
		}
		/* Announce the sleep, then re-check (the waker stores, then
		 * reads the count: one of us sees the other). */
		__atomic_fetch_add(sh_sleepers(), 1, __ATOMIC_SEQ_CST);
		uint32_t lo = (uint32_t)__atomic_load_n(w, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(w, __ATOMIC_SEQ_CST) < e)
			ntbx_futex_wait((uint32_t *)w, lo, 10);
		__atomic_fetch_sub(sh_sleepers(), 1, __ATOMIC_SEQ_CST);
	}
}

static void team_sync(shmem_team_t t)
{
	if (t->size <= 1)
		return;
	static long ncpu;
	if (!ncpu)
		ncpu = sysconf(_SC_NPROCESSORS_ONLN);
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
				ntbx_sh_spin(&s);
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
	set_sync(s);
	for (int j = 0; j < s->size; j++)
		wget((char *)dest + (size_t)j * n, src, n, spe(s, j));
	set_sync(s);
}

static void do_collect(const struct set *s, void *dest, const void *src,
                       size_t n)
{
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

static void do_reduce(const struct set *s, void *dest, const void *src,
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

int ntbx_sh_reduce(shmem_team_t team, void *dest, const void *src, size_t n,
                   size_t es, ntbx_comb_fn fn)
{
	if (!team || team->my_pe < 0)
		return -1;
	struct set s = team_set(team, "reduce");
	do_reduce(&s, dest, src, n, es, fn);
	return 0;
}

/* Prefix sums: team PE k combines the sources of PEs 0..k (0..k-1 when
 * exclusive) in PE order, between two team barriers, as do_reduce does. */
int ntbx_sh_scan(shmem_team_t team, void *dest, const void *src, size_t n,
                 size_t es, ntbx_comb_fn fn, int exclusive)
{
	if (!team || team->my_pe < 0)
		return -1;
	struct set s = team_set(team, "scan");
	size_t bytes = n * es;
	char *acc = calloc(1, bytes ? bytes : 1);
	char *in = malloc(RED_CHUNK);
	if (!acc || !in)
		ntbx_sh_die("scan: out of memory (%zu bytes)", bytes);
	int upto = s.idx + !exclusive;   /* PEs 0..upto-1 contribute */
	set_sync(&s);
	if (upto > 0)
		wget(acc, src, bytes, spe(&s, 0));
	size_t per = RED_CHUNK / es;
	for (int j = 1; j < upto; j++)
		for (size_t i = 0; i < n; i += per) {
			size_t m = n - i < per ? n - i : per;
			wget(in, (const char *)src + i * es, m * es, spe(&s, j));
			fn(acc + i * es, in, m);
		}
	set_sync(&s);
	memcpy(dest, acc, bytes);
	free(acc);
	free(in);
	return 0;
}

void ntbx_sh_reduce_aset(void *dest, const void *src, int n, size_t es,
                         ntbx_comb_fn fn, int start, int logstride, int size,
                         long *psync)
{
	struct set s = aset(start, logstride, size, psync, "to_all reduction");
	do_reduce(&s, dest, src, n > 0 ? (size_t)n : 0, es, fn);
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
