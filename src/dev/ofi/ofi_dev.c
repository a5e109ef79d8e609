/* SPDX-License-Identifier: MIT */
/*
 * The ofi backend as a local process sees it (no libfabric here: the
 * node's agent owns the endpoint, agent.c).  Everything local is the shm
 * backend's (registers, memory and its allocator, waiter slots, sleeping
 * and wake-ups); what reaches a peer is a descriptor on this handle's ring
 * in ofi.ctl, executed by the agent:
 *
 *   ntbx_dma_write/read   OFI_OP_WRITE/READ, from or into node memory:
 *                         a buffer outside it goes through this handle's
 *                         staging area (an owned block of node memory),
 *                         in chunks, so the copy overlaps the transfer
 *   ntbx_peer_db_set      OFI_OP_DB (a write with remote CQ data), or,
 *                         right after a write to the same port that the
 *                         agent has not taken yet, the bits of that write
 *                         (OFI_DB_TAKEN in ofi.h)
 *   ntbx_peer_spad_write  OFI_OP_SPAD_WRITE (an RMA write into ofi.expo)
 *   ntbx_peer_spad_read   OFI_OP_SPAD_READ (an RMA read), waited for
 *   ntbx_mw_set_trans     the local registers, then OFI_OP_XLAT, which
 *                         writes the translation into the peer's ofi.expo,
 *                         where its ntbx_peer_mw_size reads it
 *
 * One ring per handle (its waiter slot), executed in order by the agent;
 * a completion thread, started by the first DMA operation, turns the
 * ring's completions into the callers' struct ntbx_dma_op.  A child kept
 * with ntbx_dev_fork_* gets a slot and a ring of its own.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dev/ofi/ofi.h"
#include "util/util.h"

#define STAGE_SIZE  (4u << 20)    /* staging area per handle */
#define STAGE_CHUNK (256u << 10)  /* a staged transfer is cut into these */
#define POST_WAIT_MS 10000        /* bound on waiting for room */
#define SPAD_WAIT_MS 5000

struct pend {
	struct ntbx_dma_op *op;   /* completed with this entry, or NULL */
	char *rdst;               /* a staged read: copy here on completion */
	uint64_t stage_off;       /* node-memory offset of the staged bytes */
	uint64_t stage_len;       /* staging bytes released (with padding) */
	int last;                 /* the op's last entry */
	int32_t err;              /* fail the op with this (submit failed) */
};

struct ofi_dev {
	struct shm_dev sd;        /* first: the shm backend's handle */
	struct ofi_desc_file desc;
	struct ofi_ctl *ctl;
	struct ofi_expo *expo;
	int ctl_fd, kick_fd;
	int agent;                /* this handle is the node's agent */

	pthread_mutex_t lock;     /* the ring, staging, pend */
	struct ofi_ring *ring;
	uint32_t posted, reaped;
	int db_port;              /* the last descriptor posted is a write
	                           * to this port (-1: it is not): a doorbell
	                           * may ride on it */
	int32_t chunk_err;        /* first error of the op being completed */
	struct pend pend[OFI_RING];
	int64_t stage_base;       /* -1: not allocated */
	uint64_t stage_head, stage_tail;
	int64_t spad_buf;         /* 64 bytes for scratchpad reads, or -1 */
	pthread_mutex_t spad_lock;

	pthread_t comp;           /* completion thread */
	int comp_started, comp_stop;
};

#define OFI(d) ((struct ofi_dev *)(d))

static const struct ntbx_dev_ops ofi_ops;

/* ------------------------------------------------------------ helpers */

static int agent_alive(struct ofi_dev *od)
{
	if (od->agent)
		return 1;
	return shm_locked_by_other(od->ctl_fd, 0, 1) > 0;
}

static void kick_agent(struct ofi_dev *od)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (!__atomic_load_n(&od->ctl->sleeping, __ATOMIC_SEQ_CST))
		return;
	if (__atomic_exchange_n(&od->ctl->kicked, 1, __ATOMIC_SEQ_CST))
		return;   /* someone kicked it already */
	int fd = __atomic_load_n(&od->kick_fd, __ATOMIC_ACQUIRE);
	if (fd < 0) {
		fd = shm_open_own(od->sd.dir_fd, &od->sd.dir_st, "ofi.kick",
		                  O_WRONLY | O_NONBLOCK);
		if (fd < 0)
			return;   /* the agent is gone: its death is link-down */
		int old = -1;
		if (!__atomic_compare_exchange_n(&od->kick_fd, &old, fd, 0,
		                                 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			ntbx_fd_close(fd);
			fd = old;
		}
	}
	char b = 1;
	if (ntbx_sandboxed)
		return;   /* the agent sleeps a heartbeat at most (util.h) */
	if (shm_write_nosigpipe(fd, &b, 1) < 0 && errno == EPIPE) {
		/* a new agent made a new FIFO: open it next time */
		if (__atomic_compare_exchange_n(&od->kick_fd, &fd, -1, 0,
		                                __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			ntbx_fd_close(fd);
	}
}

static void complete_op(struct ntbx_dma_op *op, int32_t result)
{
	op->result = result;
	__atomic_store_n(&op->status, 0, __ATOMIC_RELEASE);
	ntbx_futex_wake(&op->status, INT_MAX);
}

/* Finish entry @i with @result (lock held). */
static void finish(struct ofi_dev *od, uint32_t i, int32_t result)
{
	struct pend *p = &od->pend[i % OFI_RING];
	if (result > 0 || result < -4095)
		result = -EIO;   /* shared memory is input */
	if (!result && p->err)
		result = p->err;
	if (result && !od->chunk_err)
		od->chunk_err = result;
	if (p->rdst && !od->chunk_err)
		ntbx_copy(p->rdst, (char *)od->sd.dev.mem_base + p->stage_off,
		          (size_t)(p->stage_len & 0xffffffffu));
	od->stage_tail += p->stage_len >> 32;
	if (p->last) {
		if (p->op)
			complete_op(p->op, od->chunk_err);
		od->chunk_err = 0;
	}
	memset(p, 0, sizeof *p);
}

/* Take the agent's completions (lock held). */
static void reap(struct ofi_dev *od)
{
	uint32_t done = __atomic_load_n(&od->ring->done, __ATOMIC_ACQUIRE);
	if ((int32_t)(done - od->reaped) <= 0)
		return;
	if (done - od->reaped > od->posted - od->reaped)
		done = od->posted;   /* a bogus count: take what we posted */
	while (od->reaped != done) {
		int32_t r = __atomic_load_n(&od->ring->d[od->reaped % OFI_RING].result,
		                            __ATOMIC_RELAXED);
		finish(od, od->reaped, r);
		od->reaped++;
	}
}

/* The agent died: fail what is outstanding (lock held). */
static void fail_all(struct ofi_dev *od)
{
	while (od->reaped != od->posted) {
		finish(od, od->reaped, -ENOLINK);
		od->reaped++;
	}
}

/* Sleep a little for the agent's progress (lock held, dropped inside).
 * 0, or -ENOLINK when the agent is gone. */
static int wait_progress(struct ofi_dev *od, int ms)
{
	uint32_t seen = od->reaped;
	uint32_t done = __atomic_load_n(&od->ring->done, __ATOMIC_SEQ_CST);
	if (done != seen)
		return 0;
	__atomic_store_n(&od->ring->waiting, 1, __ATOMIC_SEQ_CST);
	pthread_mutex_unlock(&od->lock);
	if (__atomic_load_n(&od->ring->done, __ATOMIC_SEQ_CST) == seen)
		ntbx_futex_wait(&od->ring->done, seen, ms);
	pthread_mutex_lock(&od->lock);
	if (!agent_alive(od)) {
		fail_all(od);
		return -ENOLINK;
	}
	return 0;
}

/*
 * While waiting for room for an operation to @port (-1: none): has the
 * agent declared that port's link down?  What fills the ring then is
 * mostly that link's operations, which libfabric completes only when the
 * link comes back (or never): the caller learns the failure now, as a
 * waiting reader does from the link state, instead of after POST_WAIT_MS
 * (sockets across hosts fail over on it: a writer stuck here for the
 * whole outage answered its peer's fail-over too late).
 */
static int link_down(struct ofi_dev *od, int port)
{
	if (port < 0 || port >= od->sd.dev.nports)
		return 0;
	int n = od->sd.dev.port_peer[port];
	if (n < 0 || n >= NTBX_MAX_NODES || n == od->sd.dev.node)
		return 0;
	return __atomic_load_n(&od->ctl->node[n].up, __ATOMIC_ACQUIRE) != 1;
}

static int link_down_err(struct ofi_dev *od, int port)
{
	return ntbx_err(ENOLINK, "fabric '%s': the link to node %d is down "
	                "(its operations in flight wait for it)", od->desc.name,
	                od->sd.dev.port_peer[port]);
}

/* Room for one more descriptor to @port (-1: none) (lock held). */
static int ring_room(struct ofi_dev *od, int port)
{
	uint64_t until = ntbx_now_ns() + POST_WAIT_MS * 1000000ull;
	for (;;) {
		reap(od);
		if (od->posted - od->reaped < OFI_RING)
			return 0;
		if (link_down(od, port))
			return link_down_err(od, port);
		kick_agent(od);
		int r = wait_progress(od, 5);
		if (r < 0)
			return r;
		if (ntbx_now_ns() > until)
			return ntbx_err(ETIMEDOUT, "fabric '%s': the agent has not "
			                "taken this process's requests for %d s",
			                od->desc.name, POST_WAIT_MS / 1000);
	}
}

/* Post one descriptor (lock held, room checked). */
static void post(struct ofi_dev *od, const struct ofi_dma_desc *d,
                 const struct pend *p)
{
	uint32_t i = od->posted;
	od->ring->d[i % OFI_RING] = *d;
	od->pend[i % OFI_RING] = *p;
	od->posted = i + 1;
	od->db_port = d->op == OFI_OP_WRITE && d->len ? (int)d->port : -1;
	__atomic_store_n(&od->ring->tail, i + 1, __ATOMIC_SEQ_CST);
	kick_agent(od);
}

static int post1(struct ofi_dev *od, const struct ofi_dma_desc *d,
                 const struct pend *p, uint32_t *idx)
{
	if (!agent_alive(od))
		return -ENOLINK;
	pthread_mutex_lock(&od->lock);
	int r = ring_room(od, (int)d->port);
	if (r == 0) {
		if (idx)
			*idx = od->posted;
		post(od, d, p);
	}
	pthread_mutex_unlock(&od->lock);
	return r;
}

/* --------------------------------------------------------- completions */

/*
 * A thread waiting for its own operation takes the ring's completions
 * itself: it sleeps on the ring's done word, as the completion thread
 * does, and the agent's wake reaches both.  Waiting on the operation's
 * status instead put the completion thread's wake-up on the waiter's
 * path: the agent woke it, and it woke the waiter.
 */
static void ofi_dma_sleep(struct ntbx_dev *dev, struct ntbx_dma_op *op,
                          int ms)
{
	struct ofi_dev *od = OFI(dev);
	pthread_mutex_lock(&od->lock);
	reap(od);
	if (!ntbx_dma_done(op))
		wait_progress(od, ms);
	reap(od);
	pthread_mutex_unlock(&od->lock);
}

/*
 * It sleeps on the ring's done word, never on the posters: the agent wakes
 * it when it completes something (ring->waiting), so a post costs no wake
 * of this thread and it never spins (on 2 CPUs a spin here took the CPU
 * the agent needed to complete what it waits for).  The period bounds how
 * late a dead agent is noticed.
 */
static void *comp_main(void *arg)
{
	struct ofi_dev *od = arg;
	pthread_mutex_lock(&od->lock);
	for (;;) {
		reap(od);
		if (od->reaped == od->posted &&
		    __atomic_load_n(&od->comp_stop, __ATOMIC_SEQ_CST))
			break;
		wait_progress(od, 100);
	}
	pthread_mutex_unlock(&od->lock);
	return NULL;
}

static int comp_start(struct ofi_dev *od)
{
	if (__atomic_load_n(&od->comp_started, __ATOMIC_ACQUIRE))
		return 0;
	pthread_mutex_lock(&od->lock);
	int r = 0;
	if (!od->comp_started) {
		if (pthread_create(&od->comp, NULL, comp_main, od))
			r = -EAGAIN;
		else
			__atomic_store_n(&od->comp_started, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&od->lock);
	return r;
}

/* ---------------------------------------------------------------- DMA */

static int in_node_mem(struct ofi_dev *od, const void *buf, size_t len,
                       uint64_t *off)
{
	const char *b = od->sd.dev.mem_base, *p = buf;
	if (p < b || p > b + od->sd.dev.mem_size ||
	    len > od->sd.dev.mem_size - (uint64_t)(p - b))
		return 0;
	*off = (uint64_t)(p - b);
	return 1;
}

/* Reserve @len staging bytes (lock held): 0, *off and *taken (with the
 * padding skipped at the end of the area), or -errno. */
static int stage_get(struct ofi_dev *od, uint64_t len, uint64_t *off,
                     uint64_t *taken, int port)
{
	if (od->stage_base < 0) {
		int64_t b = shm_mem_alloc(&od->sd.dev, STAGE_SIZE, 4096,
		                          "ofi-staging", 1);
		if (b < 0)
			return ntbx_err(ENOMEM, "fabric '%s': no room in node memory "
			                "for this process's %u MiB DMA staging area",
			                od->desc.name, STAGE_SIZE >> 20);
		od->stage_base = b;
	}
	uint64_t until = ntbx_now_ns() + POST_WAIT_MS * 1000000ull;
	for (;;) {
		uint64_t pos = od->stage_head % STAGE_SIZE;
		uint64_t need = len + (pos + len > STAGE_SIZE ? STAGE_SIZE - pos : 0);
		if (STAGE_SIZE - (od->stage_head - od->stage_tail) >= need) {
			if (pos + len > STAGE_SIZE)
				pos = 0;
			*off = (uint64_t)od->stage_base + pos;
			*taken = need;
			od->stage_head += need;
			return 0;
		}
		reap(od);
		if (STAGE_SIZE - (od->stage_head - od->stage_tail) >= need)
			continue;
		if (link_down(od, port))
			return link_down_err(od, port);
		kick_agent(od);
		int r = wait_progress(od, 5);
		if (r < 0)
			return r;
		if (ntbx_now_ns() > until)
			return -ETIMEDOUT;
	}
}

static int ofi_dma_submit(struct ntbx_dev *dev, int port, int widx,
                          uint64_t off, void *buf, size_t len, int to_peer,
                          struct ntbx_dma_op *op)
{
	struct ofi_dev *od = OFI(dev);
	int r = comp_start(od);
	if (r < 0)
		return r;
	if (!agent_alive(od))
		return -ENOLINK;
	struct ofi_dma_desc d = {
		.op = to_peer ? OFI_OP_WRITE : OFI_OP_READ,
		.port = (uint32_t)port, .widx = (uint32_t)widx,
	};
	uint64_t loff;
	pthread_mutex_lock(&od->lock);
	if (in_node_mem(od, buf, len, &loff) || len == 0) {
		/* zero copy: the agent reaches node memory itself */
		d.roff = off;
		d.loff = len ? loff : 0;
		d.len = len;
		struct pend p = { .op = op, .last = 1 };
		if ((r = ring_room(od, port)) == 0)
			post(od, &d, &p);
		pthread_mutex_unlock(&od->lock);
		return r;
	}
	size_t done = 0;
	while (done < len) {
		size_t n = len - done < STAGE_CHUNK ? len - done : STAGE_CHUNK;
		uint64_t soff = 0, taken = 0;
		if ((r = ring_room(od, port)) < 0 ||
		    (r = stage_get(od, n, &soff, &taken, port)) < 0 ||
		    (r = ring_room(od, port)) < 0)
			break;
		if (to_peer)
			ntbx_copy((char *)dev->mem_base + soff, (char *)buf + done, n);
		d.roff = off + done;
		d.loff = soff;
		d.len = n;
		struct pend p = {
			.op = op, .last = done + n == len,
			.rdst = to_peer ? NULL : (char *)buf + done,
			.stage_off = soff,
			.stage_len = taken << 32 | n,
		};
		post(od, &d, &p);
		done += n;
	}
	if (r < 0 && done) {
		/* the op's first chunks are posted: it ends with the error */
		struct pend *p = &od->pend[(od->posted - 1) % OFI_RING];
		p->last = 1;
		p->err = r;
		r = 0;
	}
	pthread_mutex_unlock(&od->lock);
	return r;
}

/* ------------------------------------------------------- peer registers */

/* Put @bits on the write posted last, if it is to @port and the agent has
 * not taken it yet: 1 if they ride on it. */
static int db_ride(struct ofi_dev *od, int port, uint32_t bits)
{
	pthread_mutex_lock(&od->lock);
	int rode = 0;
	if (od->db_port == port && od->posted != od->reaped) {
		uint32_t *v = &od->ring->d[(od->posted - 1) % OFI_RING].val;
		uint32_t old = __atomic_load_n(v, __ATOMIC_ACQUIRE);
		while (!(old & OFI_DB_TAKEN) && !rode)
			rode = __atomic_compare_exchange_n(v, &old, old | bits, 0,
			                                   __ATOMIC_SEQ_CST,
			                                   __ATOMIC_ACQUIRE);
		if (!rode)
			od->db_port = -1;   /* taken: the next one goes alone too */
	}
	pthread_mutex_unlock(&od->lock);
	if (rode)
		kick_agent(od);
	return rode;
}

static void ofi_peer_db_set(struct ntbx_dev *dev, int port, uint32_t bits)
{
	if (db_ride(OFI(dev), port, bits))
		return;
	struct ofi_dma_desc d = { .op = OFI_OP_DB, .port = (uint32_t)port,
	                          .val = bits };
	struct pend p = { .last = 1 };
	post1(OFI(dev), &d, &p, NULL);   /* a dead agent: the link is down */
}

static void ofi_peer_spad_write(struct ntbx_dev *dev, int port, int idx,
                                uint32_t val)
{
	struct ofi_dma_desc d = { .op = OFI_OP_SPAD_WRITE, .port = (uint32_t)port,
	                          .widx = (uint32_t)idx, .val = val };
	struct pend p = { .last = 1 };
	post1(OFI(dev), &d, &p, NULL);
}

static uint32_t ofi_peer_spad_read(struct ntbx_dev *dev, int port, int idx)
{
	struct ofi_dev *od = OFI(dev);
	uint32_t val = 0;
	pthread_mutex_lock(&od->spad_lock);
	if (od->spad_buf < 0)
		od->spad_buf = shm_mem_alloc(dev, 64, 64, "ofi-spad", 1);
	if (od->spad_buf < 0)
		goto out;
	uint32_t *slot = (uint32_t *)((char *)dev->mem_base + od->spad_buf);
	__atomic_store_n(slot, 0, __ATOMIC_RELAXED);
	struct ofi_dma_desc d = { .op = OFI_OP_SPAD_READ, .port = (uint32_t)port,
	                          .widx = (uint32_t)idx,
	                          .loff = (uint64_t)od->spad_buf, .len = 4 };
	struct pend p = { .last = 1 };
	uint32_t i;
	if (post1(od, &d, &p, &i) < 0)
		goto out;
	uint64_t until = ntbx_now_ns() + SPAD_WAIT_MS * 1000000ull;
	pthread_mutex_lock(&od->lock);
	int ok = 0;
	for (;;) {
		reap(od);
		if ((int32_t)(od->reaped - i) > 0) {
			ok = __atomic_load_n(&od->ring->d[i % OFI_RING].result,
			                     __ATOMIC_RELAXED) == 0;
			break;
		}
		kick_agent(od);
		if (wait_progress(od, 5) < 0 || ntbx_now_ns() > until)
			break;
	}
	pthread_mutex_unlock(&od->lock);
	if (ok)
		val = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
out:
	pthread_mutex_unlock(&od->spad_lock);
	return val;
}

static uint32_t *ofi_spad_reg(struct ntbx_dev *dev, int port, int idx)
{
	return &OFI(dev)->expo->port[port].spad[idx];
}

/* ------------------------------------------------------------- windows */

static int ofi_mw_set_trans(struct ntbx_dev *dev, int port, int widx,
                            uint64_t off, uint64_t size)
{
	int r = ntbx_shm_ops->mw_set_trans(dev, port, widx, off, size);
	if (r < 0)
		return r;
	struct ofi_dma_desc d = { .op = OFI_OP_XLAT, .port = (uint32_t)port,
	                          .widx = (uint32_t)widx };
	struct pend p = { .last = 1 };
	r = post1(OFI(dev), &d, &p, NULL);
	/* a link that is down gets every translation when it comes up */
	return r == -ENOLINK ? 0 : r;
}

static int ofi_peer_mw_size(struct ntbx_dev *dev, int port, int widx,
                            uint64_t *size)
{
	struct ofi_dev *od = OFI(dev);
	struct ofi_expo_port *ep = &od->expo->port[port];
	uint64_t sz = 0, sz2 = 1, off = 0;
	for (int i = 0; i < 1000 && sz != sz2; i++) {
		sz = __atomic_load_n(&ep->xlat[widx].size, __ATOMIC_ACQUIRE);
		off = __atomic_load_n(&ep->xlat[widx].off, __ATOMIC_ACQUIRE);
		sz2 = __atomic_load_n(&ep->xlat[widx].size, __ATOMIC_ACQUIRE);
	}
	int peer = dev->port_peer[port];
	if (sz != sz2)
		return ntbx_err(EPROTO, "fabric '%s': node %d keeps changing its "
		                "window %d", od->desc.name, peer, widx);
	if (!sz)
		return -ENOTCONN;
	if ((off | sz) & (dev->mw_align - 1) || sz > dev->window_max ||
	    off > dev->mem_size || sz > dev->mem_size - off)
		return ntbx_err(EPROTO, "fabric '%s': node %d's window %d points "
		                "outside its memory", od->desc.name, peer, widx);
	*size = sz;
	return 0;
}

/* --------------------------------------------------------- link/nodes */

static int ofi_node_alive(struct ntbx_dev *dev, int node)
{
	struct ofi_dev *od = OFI(dev);
	if (node == dev->node)
		return ntbx_shm_ops->node_alive(dev, node);
	return __atomic_load_n(&od->ctl->node[node].up, __ATOMIC_ACQUIRE) == 1 &&
	       agent_alive(od);
}

static uint32_t ofi_node_epoch(const struct ntbx_dev *dev, int node)
{
	if (node == dev->node)
		return ntbx_shm_ops->node_epoch(dev, node);
	return __atomic_load_n(&OFI(dev)->ctl->node[node].epoch, __ATOMIC_ACQUIRE);
}

static int ofi_node_get_addrs(struct ntbx_dev *dev, int node,
                              struct ntbx_node_addr *a, int max)
{
	if (node == dev->node)
		return ntbx_shm_ops->node_get_addrs(dev, node, a, max);
	struct ofi_peer_state *ps = &OFI(dev)->ctl->node[node];
	uint32_t n = __atomic_load_n(&ps->naddrs, __ATOMIC_ACQUIRE);
	if (n > NTBX_NODE_ADDRS)
		return -EPROTO;
	int out = 0;
	for (uint32_t i = 0; i < n && out < max; i++) {
		struct ntbx_node_addr x = ps->addrs[i];
		if (x.family == 2 || x.family == 10)
			a[out++] = x;
	}
	return out;
}

static int ofi_holder_alive(struct ntbx_dev *dev, int node, int slot,
                            uint32_t gen)
{
	if (node == dev->node)
		return ntbx_shm_ops->holder_alive(dev, node, slot, gen);
	/* a process of another host: as alive as its host's link */
	return ofi_node_alive(dev, node);
}

/* ---------------------------------------------------------- open/close */

/* Start this handle's ring on its (new) waiter slot. */
static void ring_start(struct ofi_dev *od)
{
	struct ofi_ring *ring = &od->ctl->ring[od->sd.slot];
	__atomic_store_n(&ring->tail, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&ring->done, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&ring->waiting, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&ring->gen, od->sd.slot_gen, __ATOMIC_SEQ_CST);
	__atomic_fetch_or(&od->ctl->active[od->sd.slot / 64],
	                  1ull << (od->sd.slot % 64), __ATOMIC_SEQ_CST);
	od->ring = ring;
	od->posted = od->reaped = 0;
	od->db_port = -1;
	od->chunk_err = 0;
	memset(od->pend, 0, sizeof od->pend);
}

/*
 * ntbx_dev_fork_identity (shm/shm.c) gave the child a waiter slot of its own: it
 * gets a ring of its own too.  What the parent had in flight is the
 * parent's; so are its staging blocks (owned by the parent's slot) and its
 * completion thread, which did not come along.
 */
static int ofi_after_fork_child(struct shm_dev *sd)
{
	struct ofi_dev *od = (struct ofi_dev *)sd;
	pthread_mutex_init(&od->lock, NULL);
	pthread_mutex_init(&od->spad_lock, NULL);
	od->comp_started = od->comp_stop = 0;
	od->stage_base = od->spad_buf = -1;
	od->stage_head = od->stage_tail = 0;
	ring_start(od);
	return 0;
}

static void ofi_close(struct ntbx_dev *dev)
{
	struct ofi_dev *od = OFI(dev);
	if (od->sd.fork_pending)
		od->comp_started = 0;   /* the parent's thread (a forked child
		                         * that never took its identity) */
	if (od->comp_started) {
		pthread_mutex_lock(&od->lock);
		od->comp_stop = 1;
		/* outstanding operations end, bounded: the agent completes
		 * them, or its death fails them */
		uint64_t until = ntbx_now_ns() + POST_WAIT_MS * 1000000ull;
		while (od->reaped != od->posted && ntbx_now_ns() < until) {
			reap(od);
			if (od->reaped != od->posted && wait_progress(od, 5) < 0)
				break;
		}
		fail_all(od);
		pthread_mutex_unlock(&od->lock);
		ntbx_futex_wake(&od->ring->done, INT_MAX);
		pthread_join(od->comp, NULL);
	}
	if (od->ctl && od->sd.slot >= 0 && od->ring) {
		pthread_mutex_lock(&od->lock);
		reap(od);
		pthread_mutex_unlock(&od->lock);
	}
	if (od->stage_base >= 0)
		shm_mem_free(dev, od->stage_base);
	if (od->spad_buf >= 0)
		shm_mem_free(dev, od->spad_buf);
	if (od->ctl)
		shm_unmap(od->ctl, sizeof *od->ctl);
	if (od->expo)
		shm_unmap(od->expo, OFI_EXPO_SIZE);
	ntbx_fd_close(od->ctl_fd);
	ntbx_fd_close(od->kick_fd);
	pthread_mutex_destroy(&od->lock);
	pthread_mutex_destroy(&od->spad_lock);
	shm_close(dev);
}

int ofi_dev_open(const char *dir, int node, int agent, struct ntbx_dev **out)
{
	struct ofi_desc_file *desc = malloc(sizeof *desc);
	if (!desc)
		return -ENOMEM;
	int r = ofi_read_desc(dir, desc);
	if (r == -ENOENT) {
		free(desc);
		return ntbx_err(ENOENT, "no ofi fabric at %s: create it with `ntbx "
		                "fabric create NAME --backend ofi --hosts A,B`", dir);
	}
	if (r < 0) {
		free(desc);
		return r == -EPROTO ? ntbx_err(EPROTO, "fabric at %s: its ofi.desc "
		                               "is not of this ntbx; destroy and "
		                               "create the fabric again", dir) : r;
	}
	/* this host's node: the agent decides (and records it in ofi.ctl) */
	int dfd;
	struct stat dst;
	struct ofi_ctl *ctl = NULL;
	int ctl_fd = -1;
	if ((r = shm_dir_open(dir, &dfd, &dst)) < 0) {
		free(desc);
		return r;
	}
	ctl_fd = shm_file_open(dfd, &dst, "ofi.ctl", O_RDWR, 0, sizeof *ctl);
	if (ctl_fd >= 0) {
		void *m;
		r = shm_map_fd(ctl_fd, sizeof *ctl, 1, &m);
		if (r == 0)
			ctl = m;
	} else {
		r = ctl_fd;
	}
	close(dfd);
	if (r < 0 || ctl->magic != OFI_CTL_MAGIC || ctl->version != OFI_VERSION) {
		if (ctl)
			shm_unmap(ctl, sizeof *ctl);
		if (ctl_fd >= 0)
			close(ctl_fd);
		r = ntbx_err(r < 0 ? -r : EPROTO, "fabric '%s': its ofi.ctl "
		             "cannot be used (%s); destroy and create the fabric "
		             "again", desc->name, r < 0 ? strerror(-r) : "corrupt");
		free(desc);
		return r;
	}
	ctl_fd = ntbx_fd_own(ctl_fd);
	if (!agent) {
		if (shm_locked_by_other(ctl_fd, 0, 1) <= 0) {
			r = ntbx_err(ENOLINK, "fabric '%s': no agent serves it on this "
			             "host; start one with `ntbx node serve --fabric %s`",
			             desc->name, desc->name);
			goto fail_early;
		}
		int rank = __atomic_load_n(&ctl->rank, __ATOMIC_ACQUIRE);
		if (node < 0)
			node = rank;
		if (node < 0 || node != rank || (uint32_t)node >= desc->nhosts) {
			r = ntbx_err(ERANGE, "fabric '%s': this host is node %d (its "
			             "agent says), not node %d", desc->name, rank, node);
			goto fail_early;
		}
	}
	struct ntbx_dev *dev;
	if ((r = shm_open_as(dir, node, 0, sizeof(struct ofi_dev), &ofi_ops,
	                     &dev)) < 0)
		goto fail_early;
	struct ofi_dev *od = OFI(dev);
	od->desc = *desc;
	free(desc);
	desc = NULL;
	od->ctl = ctl;
	od->ctl_fd = ctl_fd;
	od->kick_fd = -1;
	od->agent = agent;
	od->stage_base = od->spad_buf = -1;
	pthread_mutex_init(&od->lock, NULL);
	pthread_mutex_init(&od->spad_lock, NULL);
	dev->maps_peer_windows = 0;
	void *m;
	if ((r = shm_map_file(od->sd.dir_fd, &od->sd.dir_st, "ofi.expo",
	                      OFI_EXPO_SIZE, 1, &m)) < 0) {
		r = ntbx_err(-r, "fabric '%s': cannot map ofi.expo: %s",
		             od->desc.name, strerror(-r));
		ofi_close(dev);   /* unmaps ofi.ctl and closes its fd too */
		return r;
	}
	od->expo = m;
	if (agent && (r = shm_lock(ctl_fd, F_WRLCK, 0, 1, 0)) < 0) {
		r = ntbx_err(EBUSY, "fabric '%s': an agent (pid %d) serves it on "
		             "this host already", od->desc.name, ctl->agent_pid);
		ofi_close(dev);
		return r;
	}
	if ((r = shm_attach_slot(&od->sd)) < 0) {
		ofi_close(dev);
		return r;
	}
	ring_start(od);
	if (!agent)
		od->sd.after_fork_child = ofi_after_fork_child;
	*out = dev;
	return 0;
fail_early:
	shm_unmap(ctl, sizeof *ctl);
	ntbx_fd_close(ctl_fd);
	free(desc);
	return r;
}

/* -------------------------------------------------------- for the agent */

struct ofi_ctl *ofi_dev_ctl(struct ntbx_dev *dev) { return OFI(dev)->ctl; }
struct ofi_expo *ofi_dev_expo(struct ntbx_dev *dev) { return OFI(dev)->expo; }
int ofi_dev_ctl_fd(struct ntbx_dev *dev) { return OFI(dev)->ctl_fd; }
const char *ofi_dev_name(struct ntbx_dev *dev) { return OFI(dev)->desc.name; }
struct shm_node_regs *ofi_dev_regs(struct ntbx_dev *dev)
{
	return OFI(dev)->sd.regs;
}
int ofi_dev_peer_port(struct ntbx_dev *dev, int port)
{
	return OFI(dev)->sd.desc.peer_port[dev->node][port];
}
uint32_t *ofi_dev_db_reg(struct ntbx_dev *dev, int port)
{
	return &OFI(dev)->sd.regs->port[port].db;
}
void ofi_dev_db_wake(struct ntbx_dev *dev, int port, uint32_t bits)
{
	shm_db_wake(dev, port, bits, 0, NTBX_DB_NO_KEY);
}
int ofi_dev_holder_alive(struct ntbx_dev *dev, int slot, uint32_t gen)
{
	return ntbx_shm_ops->holder_alive(dev, dev->node, slot, gen);
}

int ntbx_dev_open_ofi(const char *dir, int node, struct ntbx_dev **out)
{
	return ofi_dev_open(dir, node, 0, out);
}

/* The shm backend's local entries that are static there. */
static int ofi_node_set_addrs(struct ntbx_dev *dev,
                              const struct ntbx_node_addr *a, int n)
{
	return ntbx_shm_ops->node_set_addrs(dev, a, n);
}
static void ofi_mw_get_trans(struct ntbx_dev *dev, int port, int widx,
                             uint64_t *off, uint64_t *size)
{
	ntbx_shm_ops->mw_get_trans(dev, port, widx, off, size);
}
static uint32_t *ofi_db_reg(struct ntbx_dev *dev, int port)
{
	return ntbx_shm_ops->db_reg(dev, port);
}
static uint32_t *ofi_db_mask_reg(struct ntbx_dev *dev, int port)
{
	return ntbx_shm_ops->db_mask_reg(dev, port);
}

static const struct ntbx_dev_ops ofi_ops = {
	.close = ofi_close,
	.node_alive = ofi_node_alive,
	.node_epoch = ofi_node_epoch,
	.node_set_addrs = ofi_node_set_addrs,
	.node_get_addrs = ofi_node_get_addrs,
	.mem_alloc = shm_mem_alloc,
	.mem_free = shm_mem_free,
	.mem_reap = shm_mem_reap,
	.mem_list = shm_mem_list,
	.mw_set_trans = ofi_mw_set_trans,
	.mw_get_trans = ofi_mw_get_trans,
	.peer_mw_get_addr = NULL,
	.peer_mw_size = ofi_peer_mw_size,
	.dma_submit = ofi_dma_submit,
	.dma_sleep = ofi_dma_sleep,
	.db_reg = ofi_db_reg,
	.db_mask_reg = ofi_db_mask_reg,
	.spad_reg = ofi_spad_reg,
	.peer_db_set = ofi_peer_db_set,
	.peer_spad_read = ofi_peer_spad_read,
	.peer_spad_write = ofi_peer_spad_write,
	.db_wake = shm_db_wake,
	.wait_prepare = shm_wait_prepare,
	.wait_commit = shm_wait_commit,
	.wait_finish = shm_wait_finish,
	.event_fd = shm_event_fd,
	.event_drain = shm_event_drain,
	.wake_open = shm_wake_open,
	.wake_prepare = shm_wake_prepare,
	.wake_kick = shm_wake_kick,
	.wake_sleeping = shm_wake_sleeping,
	.wake_close = shm_wake_close,
	.wake_kept = shm_wake_kept,   /* keep_wakes: not across hosts */
	.self_id = shm_self_id,
	.holder_alive = ofi_holder_alive,
};
