/* SPDX-License-Identifier: MIT */
/*
 * The public device calls: argument checks common to every backend, then
 * the backend's ops.  Register access is done here with the ordering the
 * model promises: a doorbell set is a sequentially consistent OR, so a
 * sleeper that registered before it is always seen (see shm/wait.c).
 */
#include <errno.h>
#include <string.h>

#include "dev/ops.h"
#include "util/util.h"

#define CHECK_PORT(dev, port) \
	do { if ((port) < 0 || (port) >= (dev)->nports) return -EINVAL; } while (0)
#define CHECK_BITS(bits) \
	do { if ((bits) & ~NTBX_DB_VALID_MASK) return -EINVAL; } while (0)

void ntbx_dev_init_common(struct ntbx_dev *dev)
{
	for (int n = 0; n < NTBX_MAX_NODES; n++)
		dev->node_port[n] = -1;
	pthread_mutex_init(&dev->dma_lock, NULL);
}

void ntbx_dev_fini_common(struct ntbx_dev *dev)
{
	ntbx_dma_engine_stop(dev);
	pthread_mutex_destroy(&dev->dma_lock);
}

void ntbx_dev_close(struct ntbx_dev *dev)
{
	if (dev)
		dev->ops->close(dev);
}

int ntbx_dev_node(const struct ntbx_dev *dev) { return dev->node; }
int ntbx_dev_node_count(const struct ntbx_dev *dev) { return dev->nnodes; }
int ntbx_port_count(const struct ntbx_dev *dev) { return dev->nports; }

int ntbx_port_peer_node(const struct ntbx_dev *dev, int port)
{
	CHECK_PORT(dev, port);
	return dev->port_peer[port];
}

int ntbx_port_of_node(const struct ntbx_dev *dev, int node)
{
	if (node < 0 || node >= dev->nnodes)
		return -EINVAL;
	return dev->node_port[node] >= 0 ? dev->node_port[node] : -ENOENT;
}

/* ---------------------------------------------------------------- link */

int ntbx_node_alive(struct ntbx_dev *dev, int node)
{
	if (node < 0 || node >= dev->nnodes)
		return -ERANGE;
	return dev->ops->node_alive(dev, node);
}

int ntbx_link_is_up(struct ntbx_dev *dev, int port)
{
	CHECK_PORT(dev, port);
	return dev->ops->node_alive(dev, dev->port_peer[port]) > 0;
}

uint64_t ntbx_link_events(struct ntbx_dev *dev, uint64_t *up)
{
	uint64_t now = 0;
	for (int p = 0; p < dev->nports; p++)
		if (ntbx_link_is_up(dev, p) > 0)
			now |= 1ull << p;
	uint64_t before = __atomic_exchange_n(&dev->link_seen, now,
	                                      __ATOMIC_RELAXED);
	if (up)
		*up = now;
	return before ^ now;
}

uint32_t ntbx_node_epoch(const struct ntbx_dev *dev, int node)
{
	if (node < 0 || node >= dev->nnodes)
		return 0;
	return dev->ops->node_epoch(dev, node);
}

int ntbx_node_set_addrs(struct ntbx_dev *dev, const struct ntbx_node_addr *a,
                        int n)
{
	if (n < 0 || n > NTBX_NODE_ADDRS || (n && !a))
		return -EINVAL;
	return dev->ops->node_set_addrs(dev, a, n);
}

int ntbx_node_get_addrs(struct ntbx_dev *dev, int node,
                        struct ntbx_node_addr *a, int max)
{
	if (node < 0 || node >= dev->nnodes)
		return -ERANGE;
	if (max < 0 || (max && !a))
		return -EINVAL;
	return dev->ops->node_get_addrs(dev, node, a, max);
}

/* -------------------------------------------------------------- memory */

void *ntbx_mem_base(const struct ntbx_dev *dev) { return dev->mem_base; }
size_t ntbx_mem_size(const struct ntbx_dev *dev) { return dev->mem_size; }

int64_t ntbx_mem_alloc(struct ntbx_dev *dev, size_t size, size_t align,
                       const char *tag, int owned)
{
	if (!size || size > dev->mem_size || align < 64 || (align & (align - 1)) ||
	    align > dev->mem_size)
		return -EINVAL;
	return dev->ops->mem_alloc(dev, size, align, tag ? tag : "", owned);
}

int ntbx_mem_free(struct ntbx_dev *dev, int64_t off)
{
	if (off < 0 || (uint64_t)off >= dev->mem_size)
		return -ENOENT;
	return dev->ops->mem_free(dev, off);
}

int ntbx_mem_reap(struct ntbx_dev *dev) { return dev->ops->mem_reap(dev); }

/* ----------------------------------------------------------- liveness */

int ntbx_dev_self_id(struct ntbx_dev *dev, int *slot, uint32_t *gen)
{
	if (!slot || !gen)
		return -EINVAL;
	return dev->ops->self_id(dev, slot, gen);
}

int ntbx_dev_holder_alive(struct ntbx_dev *dev, int node, int slot,
                          uint32_t gen)
{
	if (node < 0 || node >= dev->nnodes || slot < 0)
		return -ERANGE;
	return dev->ops->holder_alive(dev, node, slot, gen);
}

int ntbx_mem_list(struct ntbx_dev *dev, struct ntbx_mem_block *b, int max)
{
	if (max < 0 || (max && !b))
		return -EINVAL;
	return dev->ops->mem_list(dev, b, max);
}

/* ------------------------------------------------------------- windows */

int ntbx_mw_count(const struct ntbx_dev *dev, int port)
{
	CHECK_PORT(dev, port);
	return NTBX_MW_COUNT;
}

int ntbx_mw_get_align(const struct ntbx_dev *dev, int port, int widx,
                      uint64_t *addr_align, uint64_t *size_align,
                      uint64_t *size_max)
{
	CHECK_PORT(dev, port);
	if (widx < 0 || widx >= NTBX_MW_COUNT)
		return -EINVAL;
	if (addr_align) *addr_align = dev->mw_align;
	if (size_align) *size_align = dev->mw_align;
	if (size_max) *size_max = dev->window_max;
	return 0;
}

int ntbx_mw_set_trans(struct ntbx_dev *dev, int port, int widx, uint64_t off,
                      uint64_t size)
{
	CHECK_PORT(dev, port);
	if (widx < 0 || widx >= NTBX_MW_COUNT)
		return -EINVAL;
	if (size && ((off | size) & (dev->mw_align - 1) || size > dev->window_max ||
	             off > dev->mem_size || size > dev->mem_size - off))
		return -EINVAL;
	return dev->ops->mw_set_trans(dev, port, widx, size ? off : 0, size);
}

int ntbx_mw_get_trans(struct ntbx_dev *dev, int port, int widx,
                      uint64_t *off, uint64_t *size)
{
	CHECK_PORT(dev, port);
	if (widx < 0 || widx >= NTBX_MW_COUNT || !off || !size)
		return -EINVAL;
	dev->ops->mw_get_trans(dev, port, widx, off, size);
	return 0;
}

int ntbx_mw_clear_trans(struct ntbx_dev *dev, int port, int widx)
{
	return ntbx_mw_set_trans(dev, port, widx, 0, 0);
}

int ntbx_peer_mw_get_addr(struct ntbx_dev *dev, int port, int widx,
                          void **addr, uint64_t *size)
{
	CHECK_PORT(dev, port);
	if (widx < 0 || widx >= NTBX_MW_COUNT || !addr)
		return -EINVAL;
	if (!dev->maps_peer_windows || !dev->ops->peer_mw_get_addr)
		return ntbx_err(EOPNOTSUPP, "this backend reaches peer windows only "
		                "through the DMA engine");
	uint64_t sz = 0;
	int r = dev->ops->peer_mw_get_addr(dev, port, widx, addr, &sz);
	if (size)
		*size = sz;
	return r;
}

int ntbx_peer_mw_size(struct ntbx_dev *dev, int port, int widx,
                      uint64_t *size)
{
	CHECK_PORT(dev, port);
	if (widx < 0 || widx >= NTBX_MW_COUNT || !size)
		return -EINVAL;
	if (dev->ops->peer_mw_size)
		return dev->ops->peer_mw_size(dev, port, widx, size);
	void *addr;
	return ntbx_peer_mw_get_addr(dev, port, widx, &addr, size);
}

int ntbx_window_span(struct ntbx_dev *dev, int port, int widx, uint64_t off,
                     size_t len, char **p)
{
	void *base;
	uint64_t size;
	int r = ntbx_peer_mw_get_addr(dev, port, widx, &base, &size);
	if (r < 0)
		return r;
	if (off > size || len > size - off)
		return -ERANGE;
	*p = (char *)base + off;
	return 0;
}

int ntbx_cpu_write(struct ntbx_dev *dev, int port, int widx, uint64_t off,
                   const void *src, size_t len)
{
	char *dst;
	int r = ntbx_window_span(dev, port, widx, off, len, &dst);
	if (r == 0)
		ntbx_copy(dst, src, len);
	return r;
}

/* ----------------------------------------------------------- doorbells */

uint32_t ntbx_db_valid_mask(const struct ntbx_dev *dev)
{
	(void)dev;
	return NTBX_DB_VALID_MASK;
}

int ntbx_db_read(struct ntbx_dev *dev, int port, uint32_t *bits)
{
	CHECK_PORT(dev, port);
	*bits = __atomic_load_n(dev->ops->db_reg(dev, port), __ATOMIC_ACQUIRE) &
	        NTBX_DB_VALID_MASK;
	return 0;
}

int ntbx_db_clear(struct ntbx_dev *dev, int port, uint32_t bits)
{
	CHECK_PORT(dev, port);
	CHECK_BITS(bits);
	__atomic_fetch_and(dev->ops->db_reg(dev, port), ~bits, __ATOMIC_SEQ_CST);
	return 0;
}

int ntbx_db_set_mask(struct ntbx_dev *dev, int port, uint32_t bits)
{
	CHECK_PORT(dev, port);
	CHECK_BITS(bits);
	__atomic_fetch_or(dev->ops->db_mask_reg(dev, port), bits, __ATOMIC_SEQ_CST);
	return 0;
}

int ntbx_db_clear_mask(struct ntbx_dev *dev, int port, uint32_t bits)
{
	CHECK_PORT(dev, port);
	CHECK_BITS(bits);
	__atomic_fetch_and(dev->ops->db_mask_reg(dev, port), ~bits,
	                   __ATOMIC_SEQ_CST);
	/* Bits that were pending under the mask now count: wake for them. */
	uint32_t pend = __atomic_load_n(dev->ops->db_reg(dev, port),
	                                __ATOMIC_SEQ_CST) & bits;
	if (pend)
		dev->ops->db_wake(dev, port, pend, 0, NTBX_DB_NO_KEY);
	return 0;
}

int ntbx_db_read_mask(struct ntbx_dev *dev, int port, uint32_t *mask)
{
	CHECK_PORT(dev, port);
	*mask = __atomic_load_n(dev->ops->db_mask_reg(dev, port), __ATOMIC_ACQUIRE) &
	        NTBX_DB_VALID_MASK;
	return 0;
}

static int db_set(struct ntbx_dev *dev, int port, uint32_t bits, int peer,
                  int key)
{
	CHECK_PORT(dev, port);
	CHECK_BITS(bits);
	if (key < NTBX_DB_NO_KEY || key >= NTBX_DB_KEYS)
		return -EINVAL;
	if (!bits)
		return 0;
	if (peer) {
		dev->ops->peer_db_set(dev, port, bits);
		return 0;
	}
	/* SEQ_CST: ordered before the load of the sleepers in db_wake, the
	 * other half of the Dekker pair with wait_prepare. */
	__atomic_fetch_or(dev->ops->db_reg(dev, port), bits, __ATOMIC_SEQ_CST);
	dev->ops->db_wake(dev, port, bits, 0, key);
	return 0;
}

int ntbx_dev_maps_peer_windows(const struct ntbx_dev *dev)
{
	return dev->maps_peer_windows;
}

int ntbx_peer_db_set(struct ntbx_dev *dev, int port, uint32_t bits)
{
	int r = db_set(dev, port, bits, 1, NTBX_DB_NO_KEY);
	if (r == 0 && !dev->ops->node_alive(dev, dev->port_peer[port]))
		return -ENOLINK;
	return r;
}

int ntbx_db_local_set(struct ntbx_dev *dev, int port, uint32_t bits)
{
	return db_set(dev, port, bits, 0, NTBX_DB_NO_KEY);
}

int ntbx_db_local_ring(struct ntbx_dev *dev, int port, uint32_t bits, int key)
{
	return db_set(dev, port, bits, 0, key);
}

int ntbx_db_wait_prepare(struct ntbx_dev *dev, struct ntbx_db_waiter *w,
                         uint64_t port_mask, uint32_t bits)
{
	if (!w || (bits & ~NTBX_DB_VALID_MASK))
		return -EINVAL;
	if (dev->nports < 64)
		port_mask &= (1ull << dev->nports) - 1;
	w->port_mask = port_mask;
	w->bits = bits;
	return dev->ops->wait_prepare(dev, w);
}

int ntbx_db_wait_commit(struct ntbx_dev *dev, struct ntbx_db_waiter *w,
                        int timeout_ms)
{
	/* Bits already pending (and unmasked) end the wait at once. */
	for (int p = 0; p < dev->nports; p++) {
		if (!(w->port_mask >> p & 1))
			continue;
		uint32_t db = __atomic_load_n(dev->ops->db_reg(dev, p),
		                              __ATOMIC_SEQ_CST);
		uint32_t mask = __atomic_load_n(dev->ops->db_mask_reg(dev, p),
		                                __ATOMIC_RELAXED);
		if (db & ~mask & w->bits)
			return 0;
	}
	return dev->ops->wait_commit(dev, w, timeout_ms);
}

void ntbx_db_wait_finish(struct ntbx_dev *dev, struct ntbx_db_waiter *w)
{
	dev->ops->wait_finish(dev, w);
}

int ntbx_db_wait(struct ntbx_dev *dev, uint64_t port_mask, uint32_t bits,
                 int timeout_ms)
{
	uint64_t deadline = timeout_ms >= 0 ?
		ntbx_now_ns() + (uint64_t)timeout_ms * 1000000ull : 0;
	for (;;) {
		struct ntbx_db_waiter w;
		int r = ntbx_db_wait_prepare(dev, &w, port_mask, bits);
		if (r < 0)
			return r;
		int left = -1;
		if (timeout_ms >= 0) {
			uint64_t now = ntbx_now_ns();
			left = now >= deadline ? 0 : (int)((deadline - now) / 1000000ull);
		}
		r = ntbx_db_wait_commit(dev, &w, left);
		ntbx_db_wait_finish(dev, &w);
		for (int p = 0; p < dev->nports; p++) {
			if (!(w.port_mask >> p & 1))
				continue;
			uint32_t db, mask;
			ntbx_db_read(dev, p, &db);
			ntbx_db_read_mask(dev, p, &mask);
			if (db & ~mask & bits)
				return p;
		}
		if (r == -ETIMEDOUT || r == -EINTR)
			return r;
		if (timeout_ms >= 0 && ntbx_now_ns() >= deadline)
			return -ETIMEDOUT;
		if (r < 0)
			return r;
	}
}

int ntbx_db_event_fd(struct ntbx_dev *dev, uint64_t port_mask, uint32_t bits)
{
	if (bits & ~NTBX_DB_VALID_MASK)
		return -EINVAL;
	return dev->ops->event_fd(dev, port_mask, bits);
}

void ntbx_db_event_drain(struct ntbx_dev *dev)
{
	dev->ops->event_drain(dev);
}

int ntbx_db_wake_open(struct ntbx_dev *dev, struct ntbx_db_wake **wk)
{
	if (!wk)
		return -EINVAL;
	*wk = NULL;
	if (!dev->ops->wake_open)
		return -EOPNOTSUPP;
	return dev->ops->wake_open(dev, wk);
}

int ntbx_db_wake_prepare_keys(struct ntbx_dev *dev, struct ntbx_db_wake *wk,
                              uint64_t port_mask, uint32_t bits, uint64_t keys)
{
	if (!wk || (bits & ~NTBX_DB_VALID_MASK))
		return -EINVAL;
	if (dev->nports < 64)
		port_mask &= (1ull << dev->nports) - 1;
	return dev->ops->wake_prepare(dev, wk, port_mask, bits, keys);
}

int ntbx_db_wake_prepare(struct ntbx_dev *dev, struct ntbx_db_wake *wk,
                         uint64_t port_mask, uint32_t bits)
{
	return ntbx_db_wake_prepare_keys(dev, wk, port_mask, bits,
	                                 NTBX_DB_ALL_KEYS);
}

void ntbx_db_wake_kick(struct ntbx_dev *dev, struct ntbx_db_wake *wk)
{
	if (wk)
		dev->ops->wake_kick(dev, wk);
}

void ntbx_db_wake_sleeping(struct ntbx_dev *dev, struct ntbx_db_wake *wk,
                           int asleep)
{
	if (wk && dev->ops->wake_sleeping)
		dev->ops->wake_sleeping(dev, wk, asleep);
}

void ntbx_db_wake_close(struct ntbx_dev *dev, struct ntbx_db_wake *wk)
{
	if (wk)
		dev->ops->wake_close(dev, wk);
}

int ntbx_db_keep_wakes(struct ntbx_dev *dev, int port, int peer)
{
	if (port < 0 || port >= dev->nports)
		return -EINVAL;
	if (!dev->ops->db_keep_wakes)
		return -EOPNOTSUPP;
	return dev->ops->db_keep_wakes(dev, port, !!peer);
}

int ntbx_db_wake_kept(struct ntbx_dev *dev, struct ntbx_db_wake *wk)
{
	return wk && dev->ops->wake_kept && dev->ops->wake_kept(dev, wk);
}

int ntbx_db_sleeper_open(struct ntbx_dev *dev, struct ntbx_db_wake **wk)
{
	if (!wk)
		return -EINVAL;
	*wk = NULL;
	if (!dev->ops->sleeper_open)
		return -EOPNOTSUPP;
	return dev->ops->sleeper_open(dev, wk);
}

int ntbx_db_wait_prepare_own(struct ntbx_dev *dev, struct ntbx_db_wake *wk,
                             struct ntbx_db_waiter *w, uint64_t port_mask,
                             uint32_t bits)
{
	if (!wk || !dev->ops->wait_prepare_own)
		return ntbx_db_wait_prepare(dev, w, port_mask, bits);
	if (!w || (bits & ~NTBX_DB_VALID_MASK))
		return -EINVAL;
	if (dev->nports < 64)
		port_mask &= (1ull << dev->nports) - 1;
	w->port_mask = port_mask;
	w->bits = bits;
	return dev->ops->wait_prepare_own(dev, wk, w);
}

/* --------------------------------------------------------- scratchpads */

#define CHECK_SPAD(dev, port, idx) \
	do { CHECK_PORT(dev, port); \
	     if ((idx) < 0 || (idx) >= NTBX_SPAD_COUNT) return -EINVAL; } while (0)

int ntbx_spad_count(const struct ntbx_dev *dev, int port)
{
	CHECK_PORT(dev, port);
	return NTBX_SPAD_COUNT;
}

int ntbx_spad_read(struct ntbx_dev *dev, int port, int idx, uint32_t *val)
{
	CHECK_SPAD(dev, port, idx);
	*val = __atomic_load_n(dev->ops->spad_reg(dev, port, idx),
	                       __ATOMIC_ACQUIRE);
	return 0;
}

int ntbx_spad_write(struct ntbx_dev *dev, int port, int idx, uint32_t val)
{
	CHECK_SPAD(dev, port, idx);
	__atomic_store_n(dev->ops->spad_reg(dev, port, idx), val,
	                 __ATOMIC_RELEASE);
	return 0;
}

int ntbx_peer_spad_read(struct ntbx_dev *dev, int port, int idx,
                        uint32_t *val)
{
	CHECK_SPAD(dev, port, idx);
	*val = dev->ops->peer_spad_read(dev, port, idx);
	return 0;
}

int ntbx_peer_spad_write(struct ntbx_dev *dev, int port, int idx,
                         uint32_t val)
{
	CHECK_SPAD(dev, port, idx);
	dev->ops->peer_spad_write(dev, port, idx, val);
	return 0;
}
