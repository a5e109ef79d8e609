/* SPDX-License-Identifier: MIT */
/*
 * Link bring-up, as Linux ntb_transport does it: each node points window 0
 * of every port at its memory, writes its version, node id, epoch, window
 * size and link-block place into the peer's scratchpads (check word last),
 * and rings doorbell bit 0.  A link is ready when the peer is alive and
 * what the peer wrote into *our* scratchpads checks out for the peer's
 * current epoch: both sides doing the same makes it ready both ways.
 */
#include <errno.h>
#include <string.h>

#include "fabric/fabric_priv.h"
#include "util/util.h"


static uint32_t spad_check(const uint32_t v[NTBX_SPAD_COUNT])
{
	uint32_t h = 0x9e3779b9u;
	for (int i = 0; i < SPAD_CHECK; i++)
		h = (h ^ v[i]) * 0x01000193u;
	return h ? h : 1;
}

static uint64_t link_block_size(enum ntbx_topology t)
{
	return t == NTBX_TOPO_RING ? NTBX_LINK_BLOCK_RING : NTBX_LINK_BLOCK_SWITCH;
}

int fab_node_block_init(struct ntbx_dev *dev, enum ntbx_topology t)
{
	int64_t off = ntbx_mem_alloc(dev, sizeof(struct fab_node_block), 4096,
	                             "fabric", 0);
	if (off != 0)
		return off < 0 ? (int)off : ntbx_err(EPROTO, "node %d's memory is "
		       "not empty", ntbx_dev_node(dev));
	struct fab_node_block *nb = ntbx_mem_base(dev);
	memset(nb, 0, sizeof *nb);
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&nb->lock, &a);
	pthread_mutexattr_destroy(&a);
	nb->nports = (uint32_t)ntbx_port_count(dev);
	nb->link_size = link_block_size(t);
	for (int p = 0; p < ntbx_port_count(dev); p++) {
		off = ntbx_mem_alloc(dev, nb->link_size, FAB_PAGE, "link", 0);
		if (off < 0)
			return (int)off;
		nb->link_off[p] = (uint64_t)off;
	}
	nb->version = FAB_VERSION;
	__atomic_store_n(&nb->magic, FAB_NODE_MAGIC, __ATOMIC_RELEASE);
	return 0;
}

int fab_bringup(struct ntbx_fabric *f)
{
	struct ntbx_dev *dev = f->dev;
	struct fab_node_block *nb = f->nb;
	int died;
	int r = ntbx_shared_lock(&nb->lock, &died);
	if (r < 0)
		return ntbx_err(EIO, "fabric '%s': node %d's bring-up lock could "
		                "not be taken (%s); destroy and create the fabric "
		                "again", f->name, f->node,
		                r == -ETIMEDOUT ? "held for over 2 s" : "corrupt");
	if (died)   /* a process died bringing the node up: do it again */
		nb->up_epoch = 0;
	uint32_t epoch = ntbx_node_epoch(dev, f->node);
	uint64_t window = ntbx_mem_size(dev);
	uint64_t wmax;
	ntbx_mw_get_align(dev, 0, 0, NULL, NULL, &wmax);
	if (window > wmax)
		window = wmax;
	if (nb->up_epoch != epoch) {
		/* The node (re)starts: nothing a neighbour wrote before counts. */
		for (int p = 0; p < ntbx_port_count(dev); p++) {
			/* the sockets layer's part stays: its records carry
			 * their writer's epoch, and a neighbour that published
			 * before our bring-up is not asked to again */
			char *b = (char *)ntbx_mem_base(dev) + nb->link_off[p];
			uint64_t keep = NTBX_LINK_SOCK_OFF + NTBX_LINK_SOCK_SIZE;
			memset(b, 0, NTBX_LINK_SOCK_OFF);
			if (nb->link_size > keep)
				memset(b + keep, 0, nb->link_size - keep);
			ntbx_mw_set_trans(dev, p, 0, 0, window);
			uint32_t v[NTBX_SPAD_COUNT] = {
				[SPAD_VERSION] = FAB_SPAD_MAGIC,
				[SPAD_NODE] = (uint32_t)f->node,
				[SPAD_EPOCH] = epoch,
				[SPAD_WINDOW] = (uint32_t)(window / FAB_PAGE),
				[SPAD_BLOCK_OFF] = (uint32_t)(nb->link_off[p] / FAB_PAGE),
				[SPAD_BLOCK_SIZE] = (uint32_t)(nb->link_size / FAB_PAGE),
				[SPAD_TOPO] = (uint32_t)f->topo | (uint32_t)f->nnodes << 8,
			};
			v[SPAD_CHECK] = spad_check(v);
			ntbx_peer_spad_write(dev, p, SPAD_CHECK, 0);
			for (int i = 0; i < NTBX_SPAD_COUNT; i++)
				ntbx_peer_spad_write(dev, p, i, v[i]);
		}
		__atomic_store_n(&nb->up_epoch, epoch, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&nb->lock);
	/* Tell the neighbours (a link event); a dead one sees it later. */
	for (int p = 0; p < ntbx_port_count(dev); p++)
		ntbx_peer_db_set(dev, p, NTBX_DB_CONTROL_MASK);
	return 0;
}

/* Check what the peer on @port wrote into our scratchpads. */
static int check_peer(struct ntbx_fabric *f, int port, struct fab_link *l)
{
	struct ntbx_dev *dev = f->dev;
	uint32_t v[NTBX_SPAD_COUNT];
	for (int i = 0; i < NTBX_SPAD_COUNT; i++)
		ntbx_spad_read(dev, port, i, &v[i]);
	int peer = ntbx_port_peer_node(dev, port);
	uint32_t epoch = ntbx_node_epoch(dev, peer);
	if (v[SPAD_CHECK] != spad_check(v) || v[SPAD_VERSION] != FAB_SPAD_MAGIC ||
	    v[SPAD_NODE] != (uint32_t)peer || v[SPAD_EPOCH] != epoch ||
	    v[SPAD_TOPO] != ((uint32_t)f->topo | (uint32_t)f->nnodes << 8))
		return 0;   /* not (yet) written for this epoch */
	/* the window's size on every backend; an address only where the
	 * backend maps it (else the queue pairs write the block by DMA) */
	void *base = NULL;
	uint64_t size;
	if (ntbx_peer_mw_size(dev, port, 0, &size) < 0 ||
	    (ntbx_dev_maps_peer_windows(dev) &&
	     ntbx_peer_mw_get_addr(dev, port, 0, &base, &size) < 0))
		return 0;
	uint64_t off = (uint64_t)v[SPAD_BLOCK_OFF] * FAB_PAGE;
	uint64_t bsz = (uint64_t)v[SPAD_BLOCK_SIZE] * FAB_PAGE;
	if (bsz != f->nb->link_size || off > size || bsz > size - off) {
		ntbx_log(NTBX_LOG_WARN, "fabric '%s': node %d's link block is "
		         "outside its window; link %d stays down", f->name, peer,
		         port);
		return 0;
	}
	l->remote_block = base ? (char *)base + off : NULL;
	l->remote_off = off;
	l->peer_epoch = epoch;
	return 1;
}

int ntbx_fabric_link_ready(struct ntbx_fabric *f, int port)
{
	if (port < 0 || port >= ntbx_port_count(f->dev))
		return -EINVAL;
	struct fab_link *l = &f->link[port];
	pthread_mutex_lock(&f->lock);
	int ok = ntbx_link_is_up(f->dev, port) > 0;
	if (ok) {
		int peer = ntbx_port_peer_node(f->dev, port);
		if (!l->ready || l->peer_epoch != ntbx_node_epoch(f->dev, peer))
			ok = check_peer(f, port, l);
	}
	l->ready = ok;
	pthread_mutex_unlock(&f->lock);
	return ok;
}

int ntbx_fabric_wait_links(struct ntbx_fabric *f, int timeout_ms)
{
	struct ntbx_dev *dev = f->dev;
	int nports = ntbx_port_count(dev);
	uint64_t all = nports >= 64 ? ~0ull : (1ull << nports) - 1;
	uint64_t deadline = ntbx_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	for (;;) {
		for (int p = 0; p < nports; p++)
			ntbx_db_clear(dev, p, NTBX_DB_CONTROL_MASK);
		int ready = 0;
		for (int p = 0; p < nports; p++)
			ready += ntbx_fabric_link_ready(f, p) > 0;
		if (ready == nports)
			return 0;
		uint64_t now = ntbx_now_ns();
		if (timeout_ms >= 0 && now >= deadline)
			return ntbx_err(ETIMEDOUT, "fabric '%s': node %d has %d of %d "
			                "links up after %d ms; are the other nodes' "
			                "processes running?", f->name, f->node, ready,
			                nports, timeout_ms);
		/* Sleep until a neighbour rings bit 0; wake every 100 ms to
		 * notice peers that died or appeared without ringing. */
		int slice = 100;
		if (timeout_ms >= 0 && (deadline - now) / 1000000ull < 100)
			slice = (int)((deadline - now) / 1000000ull) + 1;
		ntbx_db_wait(dev, all, NTBX_DB_CONTROL_MASK, slice);
	}
}

int ntbx_fabric_link_block(struct ntbx_fabric *f, int port,
                           uint64_t *local_off, void **remote,
                           uint64_t *size)
{
	return ntbx_fabric_link_block_at(f, port, local_off, remote, NULL,
	                                 size);
}

int ntbx_fabric_link_block_at(struct ntbx_fabric *f, int port,
                              uint64_t *local_off, void **remote,
                              uint64_t *remote_off, uint64_t *size)
{
	if (port < 0 || port >= ntbx_port_count(f->dev))
		return -EINVAL;
	if (local_off)
		*local_off = f->nb->link_off[port];
	if (size)
		*size = f->nb->link_size;
	int ready = ntbx_fabric_link_ready(f, port);
	if (remote)
		*remote = ready > 0 ? f->link[port].remote_block : NULL;
	if (remote_off)
		*remote_off = ready > 0 ? f->link[port].remote_off : 0;
	return ready > 0 ? 0 : -ENOTCONN;
}
