/* SPDX-License-Identifier: MIT */
/*
 * Contexts and teams: a context names a team and its options (every
 * context shares the one ordered path to each PE); a team is a strided
 * set of world PEs with an internal symmetric slot for its
 * synchronisation, chosen the same on every member.
 *
 * OpenSHMEM 1.6: Communication Management Routines (shmem_ctx_create,
 * shmem_team_create_ctx, shmem_ctx_destroy, shmem_ctx_get_team, and the
 * context sessions shmem_ctx_session_start and _stop); Team Management
 * Routines (shmem_team_my_pe, _n_pes, _get_config, _translate_pe,
 * _split_strided, _split_2d, _destroy; shmem_team_sync is with the
 * barriers, shmem_barrier.c).
 */
#include <stdlib.h>
#include <string.h>

#include "shmem_int.h"

/* ---------------------------------------------------------- contexts */

int shmem_team_create_ctx(shmem_team_t team, long options, shmem_ctx_t *ctx)
{
	if (!team || team->my_pe < 0 || !ctx) {
		if (ctx)
			*ctx = SHMEM_CTX_INVALID;
		return -1;
	}
	struct ntbx_shmem_ctx *c = malloc(sizeof *c);
	if (!c) {
		*ctx = SHMEM_CTX_INVALID;
		return -1;
	}
	c->team = team;
	c->options = options;
	*ctx = c;
	return 0;
}

int shmem_ctx_create(long options, shmem_ctx_t *ctx)
{
	return shmem_team_create_ctx(SHMEM_TEAM_WORLD, options, ctx);
}

void shmem_ctx_destroy(shmem_ctx_t ctx)
{
	if (!ctx || ctx == SHMEM_CTX_DEFAULT)
		return;
	shmem_ctx_quiet(ctx);
	free(ctx);
}

int shmem_ctx_get_team(shmem_ctx_t ctx, shmem_team_t *team)
{
	if (!team)
		return -1;
	if (!ctx) {
		*team = SHMEM_TEAM_INVALID;
		return -1;
	}
	*team = ctx->team;
	return 0;
}

void shmem_ctx_session_start(shmem_ctx_t ctx, long options,
                             const shmem_session_config_t *config,
                             long config_mask)
{
	if (!ctx)
		ntbx_sh_die("shmem_ctx_session_start: invalid context");
	if (options & ~SHMEM_SESSION_BATCH)
		ntbx_sh_debug("shmem_ctx_session_start: unknown options %#lx "
		              "ignored", options & ~SHMEM_SESSION_BATCH);
	if ((config_mask & SHMEM_SESSION_TOTAL_OPS) && !config)
		ntbx_sh_die("shmem_ctx_session_start: config_mask names a field "
		            "but config is NULL");
}

void shmem_ctx_session_stop(shmem_ctx_t ctx)
{
	if (!ctx)
		ntbx_sh_die("shmem_ctx_session_stop: invalid context");
}

/* -------------------------------------------------------------- teams */

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
	memset(ntbx_sh_red_pc[slot], 0, sizeof ntbx_sh_red_pc[slot]);
	memset(sh_red_line(slot, 0, 0), 0, SH_RLINE_BYTES);
	memset(ntbx_sh_red_lc[slot], 0, sizeof ntbx_sh_red_lc[slot]);
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
	ntbx_sh_team_sync(parent_team);
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
	ntbx_sh_team_sync(parent_team);
	return 0;
}

void shmem_team_destroy(shmem_team_t team)
{
	if (!team || team == SHMEM_TEAM_WORLD || team == SHMEM_TEAM_SHARED)
		return;
	ntbx_sh_team_sync(team);
	__atomic_fetch_and(my_bitmap(), ~(1ull << team->slot), __ATOMIC_ACQ_REL);
	free(team);
}
