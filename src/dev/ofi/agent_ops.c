/* SPDX-License-Identifier: MIT */
/*
 * The agent's work: the node's DMA queue (one ring per local handle)
 * executed as fi_write / fi_read / fi_inject_write(data) in order per ring,
 * completions back into the rings, remote CQ data turned into doorbell bits
 * and wake-ups, scratchpads and translations pushed at link-up, hellos
 * applied, heartbeats, link-down.
 */
#include "dev/ofi/agent_int.h"

/* ----------------------------------------------------------- operations */

static struct opctx *ctx_get(void)
{
	struct opctx *c = ag.free_ctx;
	if (c)
		ag.free_ctx = c->next;
	return c;
}

void agent_ctx_put(struct opctx *c)
{
	c->next = ag.free_ctx;
	ag.free_ctx = c;
}

static void peer_down(int n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void peer_down(int n, const char *fmt, ...)
{
	struct peer *p = &ag.peer[n];
	char buf[112];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (p->up)
		agent_say("link down to node %d %s: %s", n, p->name, buf);
	p->up = 0;
	__atomic_store_n(&p->met, 0, __ATOMIC_RELEASE);   /* meet it again */
	memcpy(ag.ctl->node[n].why, buf, sizeof buf);
	__atomic_store_n(&ag.ctl->node[n].up, 0, __ATOMIC_RELEASE);
}

static uint64_t expo_addr(int n, size_t field_off)
{
	struct peer *p = &ag.peer[n];
	return ((ag.mr_mode & FI_MR_VIRT_ADDR) ? p->expo_base : 0) + field_off;
}

/* Run @call until it is not -FI_EAGAIN, progressing meanwhile (bounded):
 * with manual progress the provider frees room only when called. */
static void progress(void);
#define RETRY(expr) ({ ssize_t _r; int _k = 0; \
	while ((_r = (expr)) == -FI_EAGAIN && _k++ < 100000) { progress(); } \
	_r; })

/* One operation of ring entry @idx completed: the entry is done when its
 * last piece is, with the first error of any. */
static void slot_complete(int s, uint32_t gen, uint32_t idx, int32_t res)
{
	struct slot_state *st = &ag.slots[s];
	if (st->gen != gen || (uint32_t)(idx - st->done) >= OFI_RING)
		return;   /* a handle that is gone */
	uint32_t i = idx % OFI_RING;
	if (res < 0 && st->res[i] == 0)
		st->res[i] = res;
	if (st->pieces[i])
		st->pieces[i]--;
	if (!st->pieces[i] && st->state[i] == 1)
		st->state[i] = 2;
}

/* Execute one descriptor.  1: done (result in *res), 0: in flight,
 * -1: not now (try again later, the descriptor stays). */
static int exec_desc(int s, uint32_t idx, const struct ofi_dma_desc *d,
                     int32_t *res)
{
	struct ntbx_dev *dev = ag.dev;
	if (d->port >= (uint32_t)dev->nports) {
		*res = -EINVAL;
		return 1;
	}
	int port = (int)d->port;
	int n = dev->port_peer[port];
	struct peer *p = &ag.peer[n];
	if (d->op == OFI_OP_WRITE && s >= 0) {
		/* take the doorbell bits riding on this write, once, before
		 * anything of it goes (OFI_DB_TAKEN, ofi.h); a write that fails
		 * takes them with it, as the link or the caller's error does */
		struct slot_state *st = &ag.slots[s];
		uint32_t i = idx % OFI_RING;
		if (!(st->dbits[i] & OFI_DB_TAKEN))
			st->dbits[i] = OFI_DB_TAKEN |
			        __atomic_exchange_n(&ag.ctl->ring[s].d[i].val,
			                            OFI_DB_TAKEN, __ATOMIC_SEQ_CST);
	}
	if (!p->up) {
		/* a scratchpad write is kept for the link-up (push_spads) */
		if (d->op == OFI_OP_SPAD_WRITE && d->widx < NTBX_SPAD_COUNT) {
			p->spad_out[d->widx] = d->val;
			p->spad_set |= 1u << d->widx;
			*res = 0;
			return 1;
		}
		*res = -ENOLINK;
		return 1;
	}
	int q = ofi_dev_peer_port(dev, port);
	size_t pbase = offsetof(struct ofi_expo, port) + (size_t)q * sizeof(struct ofi_expo_port);
	ssize_t r;
	if (d->op == OFI_OP_SPAD_WRITE && d->widx < NTBX_SPAD_COUNT) {
		p->spad_out[d->widx] = d->val;
		p->spad_set |= 1u << d->widx;
	}
	switch (d->op) {
	case OFI_OP_WRITE:
	case OFI_OP_READ: {
		if (s < 0 || d->widx >= NTBX_MW_COUNT || d->len > ag.mem_size ||
		    d->loff > ag.mem_size - d->len) {
			*res = -EINVAL;
			return 1;
		}
		struct ofi_expo_port *ep = &ag.expo->port[port];
		uint64_t sz = __atomic_load_n(&ep->xlat[d->widx].size, __ATOMIC_ACQUIRE);
		uint64_t off = __atomic_load_n(&ep->xlat[d->widx].off, __ATOMIC_ACQUIRE);
		if (__atomic_load_n(&ep->xlat[d->widx].size, __ATOMIC_ACQUIRE) != sz ||
		    !sz) {
			*res = -ENOTCONN;
			return 1;
		}
		if (off > ag.mem_size || sz > ag.mem_size - off || d->roff > sz ||
		    d->len > sz - d->roff) {
			*res = -ERANGE;
			return 1;
		}
		if (!d->len) {
			*res = 0;
			return 1;
		}
		struct slot_state *st = &ag.slots[s];
		uint32_t i = idx % OFI_RING;
		uint64_t pos = st->posted[i];
		if (!pos && !ag.ordered && d->op == OFI_OP_READ && p->outstanding)
			return -1;   /* a read after our writes sees them */
		uint64_t raddr = ((ag.mr_mode & FI_MR_VIRT_ADDR) ? p->mem_base : 0) +
		                 off + d->roff;
		char *buf = ag.mem + d->loff;
		/* Larger than the provider takes in one operation: in pieces of
		 * max_msg_size, each with its own completion; a piece that does
		 * not fit now is posted on a later pass (the entry stays, and
		 * what was posted is remembered).  Pieces of one entry go in
		 * order, so on an ordered provider a doorbell after the entry
		 * still lands after all of them. */
		uint32_t bits = d->op == OFI_OP_WRITE
		                ? st->dbits[i] & NTBX_DB_VALID_MASK : 0;
		while (pos < d->len) {
			size_t len = d->len - pos < ag.max_msg ? (size_t)(d->len - pos)
			                                      : ag.max_msg;
			int ring = bits && pos + len == d->len;
			if (ring && !ag.ordered && p->outstanding)
				break;   /* bits after the writes they announce */
			struct opctx *c = ctx_get();
			if (!c)
				break;
			*c = (struct opctx){ .slot = s, .gen = st->gen, .idx = idx,
			                     .peer = n };
			if (ring)
				r = fi_writedata(ag.ep, buf + pos, len, ag.desc_mem,
				                 OFI_IMM(OFI_IMM_DB, dev->node, bits),
				                 p->fa, raddr + pos, p->mem_key, c);
			else if (d->op == OFI_OP_WRITE)
				r = fi_write(ag.ep, buf + pos, len, ag.desc_mem, p->fa,
				             raddr + pos, p->mem_key, c);
			else
				r = fi_read(ag.ep, buf + pos, len, ag.desc_mem, p->fa,
				            raddr + pos, p->mem_key, c);
			if (r) {
				agent_ctx_put(c);
				if (r == -FI_EAGAIN)
					break;
				peer_down(n, "RMA %s to %s failed: %s", d->op == OFI_OP_WRITE
				          ? "write" : "read", p->name, fi_strerror((int)-r));
				if (!st->res[i])
					st->res[i] = -EIO;
				pos = d->len;   /* nothing more of it */
				break;
			}
			st->pieces[i]++;
			p->outstanding++;
			pos += len;
			ag.n.db_rode += ring;
		}
		st->posted[i] = pos;
		if (pos < d->len)
			return -1;
		if (!st->pieces[i]) {   /* every piece done already, or failed */
			*res = st->res[i];
			return 1;
		}
		return 0;
	}
	case OFI_OP_DB: {
		if (!ag.ordered && p->outstanding)
			return -1;   /* bits after the writes they announce */
		uint32_t bits = d->val & NTBX_DB_VALID_MASK;
		ag.n.db_alone++;
		r = fi_inject_writedata(ag.ep, &bits, sizeof bits,
		                        OFI_IMM(OFI_IMM_DB, dev->node, bits), p->fa,
		                        expo_addr(n, pbase + offsetof(struct ofi_expo_port, db_last)),
		                        p->expo_key);
		break;
	}
	case OFI_OP_SPAD_WRITE: {
		if (d->widx >= NTBX_SPAD_COUNT) {
			*res = -EINVAL;
			return 1;
		}
		if (!ag.ordered && p->outstanding)
			return -1;
		uint32_t v = d->val;
		r = fi_inject_write(ag.ep, &v, sizeof v, p->fa,
		                    expo_addr(n, pbase + offsetof(struct ofi_expo_port, spad) +
		                              4 * d->widx), p->expo_key);
		break;
	}
	case OFI_OP_SPAD_READ: {
		if (d->widx >= NTBX_SPAD_COUNT || d->loff > ag.mem_size - 4) {
			*res = -EINVAL;
			return 1;
		}
		if (!ag.ordered && p->outstanding)
			return -1;
		if (s < 0) {
			*res = -EINVAL;
			return 1;
		}
		struct opctx *c = ctx_get();
		if (!c)
			return -1;
		*c = (struct opctx){ .slot = s, .gen = ag.slots[s].gen, .idx = idx,
		                     .peer = n };
		r = fi_read(ag.ep, ag.mem + d->loff, 4, ag.desc_mem, p->fa,
		            expo_addr(n, pbase + offsetof(struct ofi_expo_port, spad) +
		                      4 * d->widx), p->expo_key, c);
		if (r == -FI_EAGAIN) {
			agent_ctx_put(c);
			return -1;
		}
		if (r) {
			agent_ctx_put(c);
			break;
		}
		ag.slots[s].pieces[idx % OFI_RING]++;
		p->outstanding++;
		return 0;
	}
	case OFI_OP_XLAT: {
		if (d->widx >= NTBX_MW_COUNT) {
			*res = -EINVAL;
			return 1;
		}
		if (!ag.ordered && p->outstanding)
			return -1;
		uint64_t off = 0, size = 0, zero = 0;
		ntbx_mw_get_trans(dev, port, (int)d->widx, &off, &size);
		size_t x = pbase + offsetof(struct ofi_expo_port, xlat) + 16 * d->widx;
		/* size 0, offset, size: a reader never pairs the new offset
		 * with the old size (ordered writes; see design-notes) */
		r = RETRY(fi_inject_write(ag.ep, &zero, 8, p->fa, expo_addr(n, x + 8),
		                          p->expo_key));
		if (!r)
			r = RETRY(fi_inject_write(ag.ep, &off, 8, p->fa, expo_addr(n, x),
			                          p->expo_key));
		if (!r)
			r = RETRY(fi_inject_write(ag.ep, &size, 8, p->fa,
			                          expo_addr(n, x + 8), p->expo_key));
		break;
	}
	default:
		*res = -EINVAL;
		return 1;
	}
	if (r == -FI_EAGAIN)
		return -1;
	if (r) {
		peer_down(n, "RMA to %s failed: %s", p->name, fi_strerror((int)-r));
		*res = -ENOLINK;
		return 1;
	}
	*res = 0;
	return 1;
}

/* Push every inbound window translation of the port facing @n. */
static void push_xlats(int n)
{
	int port = ag.dev->node_port[n];
	if (port < 0)
		return;
	for (int w = 0; w < NTBX_MW_COUNT; w++) {
		struct ofi_dma_desc d = { .op = OFI_OP_XLAT, .port = (uint32_t)port,
		                          .widx = (uint32_t)w };
		int32_t res;
		exec_desc(-1, 0, &d, &res);
	}
}

/* Write again what local processes wrote into @n's scratchpads, in index
 * order (the fabric's check word is the last index). */
static void push_spads(int n)
{
	int port = ag.dev->node_port[n];
	struct peer *p = &ag.peer[n];
	if (port < 0)
		return;
	for (uint32_t i = 0; i < NTBX_SPAD_COUNT; i++) {
		if (!(p->spad_set & 1u << i))
			continue;
		struct ofi_dma_desc d = { .op = OFI_OP_SPAD_WRITE,
		                          .port = (uint32_t)port, .widx = i,
		                          .val = p->spad_out[i] };
		int32_t res;
		/* not now (a full queue, or an unordered provider's writes
		 * before it): progress, bounded as RETRY is */
		for (int k = 0; k < 100000 && p->up && exec_desc(-1, 0, &d, &res) < 0;
		     k++)
			progress();
	}
}

/* Take new descriptors of every active ring; 1 if anything happened. */
int agent_scan_rings(void)
{
	int work = 0;
	for (int w = 0; w < SHM_SLOTS / 64; w++) {
		uint64_t m = __atomic_load_n(&ag.ctl->active[w], __ATOMIC_ACQUIRE);
		while (m) {
			int s = w * 64 + __builtin_ctzll(m);
			m &= m - 1;
			struct ofi_ring *ring = &ag.ctl->ring[s];
			struct slot_state *st = &ag.slots[s];
			uint32_t gen = __atomic_load_n(&ring->gen, __ATOMIC_ACQUIRE);
			if (gen != st->gen) {
				memset(st, 0, sizeof *st);
				st->gen = gen;
			}
			uint32_t tail = __atomic_load_n(&ring->tail, __ATOMIC_ACQUIRE);
			if (__atomic_load_n(&ring->gen, __ATOMIC_ACQUIRE) != gen ||
			    tail - st->done > OFI_RING)
				continue;   /* being reset, or garbage */
			while (st->head != tail) {
				struct ofi_dma_desc d;
				memcpy(&d, &ring->d[st->head % OFI_RING], sizeof d);
				int32_t res = 0;
				uint32_t i = st->head % OFI_RING;
				int r = exec_desc(s, st->head, &d, &res);
				if (r < 0)
					break;
				work = 1;
				ag.n.descs++;
				ag.n.writes += d.op == OFI_OP_WRITE;
				if (r) {
					st->res[i] = res;
					st->state[i] = 2;
				} else {   /* its pieces may have completed meanwhile */
					st->state[i] = (uint8_t)(st->pieces[i] ? 1 : 2);
				}
				st->head++;
			}
			uint32_t done = st->done;
			while (done != st->head && st->state[done % OFI_RING] == 2) {
				uint32_t i = done % OFI_RING;
				__atomic_store_n(&ring->d[i].result, st->res[i],
				                 __ATOMIC_RELAXED);
				st->state[i] = 0;
				st->res[i] = 0;
				st->posted[i] = 0;
				st->dbits[i] = 0;
				done++;
			}
			if (done != st->done) {
				st->done = done;
				__atomic_store_n(&ring->done, done, __ATOMIC_SEQ_CST);
				if (__atomic_load_n(&ring->waiting, __ATOMIC_SEQ_CST)) {
					__atomic_store_n(&ring->waiting, 0, __ATOMIC_RELAXED);
					ntbx_futex_wake(&ring->done, INT_MAX);
				}
				work = 1;
			}
		}
	}
	return work;
}

static void on_imm(uint64_t data)
{
	int n = OFI_IMM_NODE(data);
	if (n >= ag.nnodes || n == ag.rank)
		return;   /* garbage */
	struct peer *p = &ag.peer[n];
	p->heard_ns = ntbx_now_ns();
	if (!p->up && __atomic_load_n(&p->met, __ATOMIC_ACQUIRE)) {
		p->up = 1;
		__atomic_store_n(&ag.ctl->node[n].up, 1, __ATOMIC_RELEASE);
	}
	if (OFI_IMM_KIND(data) != OFI_IMM_DB)
		return;
	int port = ag.dev->node_port[n];
	uint32_t bits = OFI_IMM_BITS(data);
	if (port < 0 || !bits)
		return;
	__atomic_fetch_or(ofi_dev_db_reg(ag.dev, port), bits, __ATOMIC_SEQ_CST);
	ofi_dev_db_wake(ag.dev, port, bits);
}

int agent_cq_poll(void)
{
	struct fi_cq_data_entry e[32];
	ssize_t n = fi_cq_read(ag.cq, e, 32);
	if (n == -FI_EAGAIN)
		return 0;
	if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry ee = { 0 };
		if (fi_cq_readerr(ag.cq, &ee, 0) != 1)
			return 1;
		char eb[256] = "";
		const char *es = fi_cq_strerror(ag.cq, ee.prov_errno, ee.err_data, eb,
		                                sizeof eb);
		struct opctx *c = ee.op_context;
		if (c) {
			ag.peer[c->peer].outstanding--;
			peer_down(c->peer, "a transfer to %s failed: %s (%s)",
			          ag.peer[c->peer].name, fi_strerror(ee.err), es ? es : "");
			if (c->slot >= 0)
				slot_complete(c->slot, c->gen, c->idx, -ENOLINK);
			agent_ctx_put(c);
		} else {
			agent_say("an operation failed: %s (%s)", fi_strerror(ee.err), es ? es : "");
		}
		return 1;
	}
	if (n < 0) {
		agent_say("fi_cq_read: %s", fi_strerror((int)-n));
		return 0;
	}
	for (ssize_t k = 0; k < n; k++) {
		if (e[k].flags & FI_REMOTE_CQ_DATA) {
			ag.n.cq_data++;
			on_imm(e[k].data);
		} else if (e[k].op_context) {
			ag.n.cq_local++;
			struct opctx *c = e[k].op_context;
			ag.peer[c->peer].outstanding--;
			if (c->slot >= 0)
				slot_complete(c->slot, c->gen, c->idx, 0);
			agent_ctx_put(c);
		}
	}
	return n > 0;
}

static void progress(void)
{
	agent_cq_poll();
}

/* Hellos the rendezvous thread accepted: apply them. */
int agent_apply_hellos(void)
{
	int work = 0;
	for (int n = 0; n < ag.nnodes; n++) {
		if (!__atomic_load_n(&ag.mbox[n], __ATOMIC_ACQUIRE))
			continue;
		pthread_mutex_lock(&ag.mbox_lock);
		struct hello *h = ag.mbox[n];
		ag.mbox[n] = NULL;
		pthread_mutex_unlock(&ag.mbox_lock);
		if (!h)
			continue;
		work = 1;
		struct peer *p = &ag.peer[n];
		if (p->up && p->boot_id == h->boot_id) {
			free(h);
			continue;   /* the same agent, met from both sides */
		}
		if (p->boot_id && p->boot_id != h->boot_id)
			fi_av_remove(ag.av, &p->fa, 1, 0);
		if (p->boot_id != h->boot_id) {
			fi_addr_t fa = FI_ADDR_NOTAVAIL;
			if (fi_av_insert(ag.av, h->addr, 1, &fa, 0, NULL) != 1) {
				agent_set_why(n, "the address of %s does not fit this provider",
				        p->name);
				agent_say("fi_av_insert of %s's address failed", p->name);
				free(h);
				continue;
			}
			p->fa = fa;
		}
		p->boot_id = h->boot_id;
		p->mem_base = h->mem_base;
		p->mem_key = h->mem_key;
		p->expo_base = h->expo_base;
		p->expo_key = h->expo_key;
		p->heard_ns = ntbx_now_ns();
		p->outstanding = 0;
		struct ofi_peer_state *ps = &ag.ctl->node[n];
		memcpy(ps->addrs, h->addrs, sizeof ps->addrs);
		__atomic_store_n(&ps->naddrs, h->naddrs, __ATOMIC_RELEASE);
		__atomic_store_n(&ps->epoch, h->epoch, __ATOMIC_RELEASE);
		__atomic_fetch_add(&ps->seen, 1, __ATOMIC_RELEASE);
		ps->why[0] = 0;
		p->up = 1;
		__atomic_store_n(&p->met, 1, __ATOMIC_RELEASE);
		push_xlats(n);
		push_spads(n);
		__atomic_store_n(&ps->up, 1, __ATOMIC_RELEASE);
		agent_say("link up to node %d %s (epoch %u)", n, p->name, h->epoch);
		free(h);
	}
	return work;
}

void agent_heartbeat(void)
{
	uint64_t now = ntbx_now_ns();
	for (int n = 0; n < ag.nnodes; n++) {
		struct peer *p = &ag.peer[n];
		if (n == ag.rank || !p->up)
			continue;
		if (now - p->heard_ns > (uint64_t)ag.o->dead_ms * 1000000ull) {
			peer_down(n, "no word from %s for %d ms (its agent died, or the "
			          "link failed)", p->name, ag.o->dead_ms);
			continue;
		}
		uint32_t z = 0;
		int q = ofi_dev_peer_port(ag.dev, ag.dev->node_port[n]);
		size_t at = offsetof(struct ofi_expo, port) +
		            (size_t)q * sizeof(struct ofi_expo_port) +
		            offsetof(struct ofi_expo_port, db_last);
		ssize_t r = fi_inject_writedata(ag.ep, &z, sizeof z,
		                                OFI_IMM(OFI_IMM_HB, ag.rank, 0), p->fa,
		                                expo_addr(n, at), p->expo_key);
		if (r && r != -FI_EAGAIN)
			peer_down(n, "heartbeat to %s failed: %s", p->name,
			          fi_strerror((int)-r));
	}
}
