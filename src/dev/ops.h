/* SPDX-License-Identifier: MIT */
/*
 * The device ops table: what a backend implements (as Linux's struct
 * ntb_dev_ops).  The public calls in ntbx/dev.h check their arguments in
 * dev.c and then call these, so a backend sees only valid ports, window
 * indexes, scratchpad indexes and doorbell bits.  Seen only inside
 * src/dev/ (the backends, each in its folder: shm/, ofi/); the layers above
 * see the device layer's contract, dev/dev.h.
 */
#ifndef NTBX_DEV_OPS_H
#define NTBX_DEV_OPS_H

#include <pthread.h>
#include "ntbx/dev.h"

struct ntbx_dma_engine;

struct ntbx_dev_ops {
	void (*close)(struct ntbx_dev *dev);

	int (*node_alive)(struct ntbx_dev *dev, int node);
	uint32_t (*node_epoch)(const struct ntbx_dev *dev, int node);
	int (*node_set_addrs)(struct ntbx_dev *dev,
	                      const struct ntbx_node_addr *a, int n);
	int (*node_get_addrs)(struct ntbx_dev *dev, int node,
	                      struct ntbx_node_addr *a, int max);

	int64_t (*mem_alloc)(struct ntbx_dev *dev, size_t size, size_t align,
	                     const char *tag, int owned);
	int (*mem_free)(struct ntbx_dev *dev, int64_t off);
	int (*mem_reap)(struct ntbx_dev *dev);
	int (*mem_list)(struct ntbx_dev *dev, struct ntbx_mem_block *b, int max);

	int (*mw_set_trans)(struct ntbx_dev *dev, int port, int widx,
	                    uint64_t off, uint64_t size);
	void (*mw_get_trans)(struct ntbx_dev *dev, int port, int widx,
	                     uint64_t *off, uint64_t *size);
	int (*peer_mw_get_addr)(struct ntbx_dev *dev, int port, int widx,
	                        void **addr, uint64_t *size);
	/* The size of outbound window @widx of @port (the peer's inbound
	 * window as it translated it): 0 and *size, -ENOTCONN if not
	 * translated, -EPROTO if corrupt.  Required when the backend does
	 * not map peer windows; NULL: taken from peer_mw_get_addr. */
	int (*peer_mw_size)(struct ntbx_dev *dev, int port, int widx,
	                    uint64_t *size);
	/* Optional: the backend executes DMA itself (a network: fi_write /
	 * fi_read).  NULL: dma.c's engine copies through peer_mw_get_addr.
	 * Copies @len bytes between local @buf and offset @off of outbound
	 * window @widx of @port (@to_peer 1: a write, 0: a read); dev.c has
	 * checked the span against peer_mw_size.  Completes @op as dma.c
	 * does: @result, then IN_PROGRESS cleared with release ordering,
	 * then a futex wake on @status.  Writes to one port become visible
	 * to the peer in submission order, and before the bits of any later
	 * peer_db_set on that port. */
	int (*dma_submit)(struct ntbx_dev *dev, int port, int widx,
	                  uint64_t off, void *buf, size_t len, int to_peer,
	                  struct ntbx_dma_op *op);
	/* Optional, with dma_submit: sleep at most @ms while @op is in
	 * progress, taking the handle's completions in the sleeping thread
	 * itself.  NULL: dma.c sleeps on @op's status word, which a thread
	 * of the backend completes (one more wake-up on the waiter's path). */
	void (*dma_sleep)(struct ntbx_dev *dev, struct ntbx_dma_op *op,
	                  int ms);

	/* This node's own doorbell, mask and scratchpad registers: memory
	 * of this node, so dev.c works on them with atomics. */
	uint32_t *(*db_reg)(struct ntbx_dev *dev, int port);
	uint32_t *(*db_mask_reg)(struct ntbx_dev *dev, int port);
	uint32_t *(*spad_reg)(struct ntbx_dev *dev, int port, int idx);
	/* The peer's registers are reached only through calls, as Linux's
	 * ntb_peer_db_set / ntb_peer_spad_read / ntb_peer_spad_write: a
	 * backend that has no mapping of them (a network) sends a message.
	 * peer_db_set sets @bits in the doorbell of the peer's port that
	 * faces @port and wakes its sleepers (a full barrier before the
	 * wake: see db_set in dev.c). */
	void (*peer_db_set)(struct ntbx_dev *dev, int port, uint32_t bits);
	uint32_t (*peer_spad_read)(struct ntbx_dev *dev, int port, int idx);
	void (*peer_spad_write)(struct ntbx_dev *dev, int port, int idx,
	                        uint32_t val);
	/* Wake the sleepers of the node behind @port (@peer) or of this node
	 * that wait for @bits on that port; a wake object registered with
	 * keys only if @key is one of them (NTBX_DB_NO_KEY: whatever its
	 * keys). */
	void (*db_wake)(struct ntbx_dev *dev, int port, uint32_t bits, int peer,
	                int key);

	int (*wait_prepare)(struct ntbx_dev *dev, struct ntbx_db_waiter *w);
	int (*wait_commit)(struct ntbx_dev *dev, struct ntbx_db_waiter *w,
	                   int timeout_ms);
	void (*wait_finish)(struct ntbx_dev *dev, struct ntbx_db_waiter *w);
	int (*event_fd)(struct ntbx_dev *dev, uint64_t port_mask, uint32_t bits);
	void (*event_drain)(struct ntbx_dev *dev);
	int (*wake_open)(struct ntbx_dev *dev, struct ntbx_db_wake **wk);
	int (*wake_prepare)(struct ntbx_dev *dev, struct ntbx_db_wake *wk,
	                    uint64_t port_mask, uint32_t bits, uint64_t keys);
	void (*wake_kick)(struct ntbx_dev *dev, struct ntbx_db_wake *wk);
	/* optional: a sleeper enters (@asleep) or leaves its kernel sleep */
	void (*wake_sleeping)(struct ntbx_dev *dev, struct ntbx_db_wake *wk,
	                      int asleep);
	void (*wake_close)(struct ntbx_dev *dev, struct ntbx_db_wake *wk);
	/* optional: a wake object without a FIFO, for wait_prepare_own */
	int (*sleeper_open)(struct ntbx_dev *dev, struct ntbx_db_wake **wk);
	int (*wait_prepare_own)(struct ntbx_dev *dev, struct ntbx_db_wake *wk,
	                        struct ntbx_db_waiter *w);
	/* optional: ntbx_db_keep_wakes, ntbx_db_wake_kept */
	int (*db_keep_wakes)(struct ntbx_dev *dev, int port, int peer);
	int (*wake_kept)(struct ntbx_dev *dev, struct ntbx_db_wake *wk);

	/* Process liveness (ntbx_dev_self_id, ntbx_dev_holder_alive); @slot
	 * is >= 0 but may be past the backend's slots. */
	int (*self_id)(struct ntbx_dev *dev, int *slot, uint32_t *gen);
	int (*holder_alive)(struct ntbx_dev *dev, int node, int slot,
	                    uint32_t gen);
};

/*
 * The part of a device every backend has.  A backend's own struct starts
 * with this one.  Fields are set at open and never change after.
 */
struct ntbx_dev {
	const struct ntbx_dev_ops *ops;
	int node, nnodes, nports;
	int port_peer[NTBX_MAX_PORTS];   /* node at the other end of port */
	int node_port[NTBX_MAX_NODES];   /* port to node, or -1 */
	void *mem_base;                  /* this node's memory, mapped here */
	uint64_t mem_size;
	uint64_t window_max;             /* largest inbound window */
	uint64_t mw_align;               /* address and size alignment */
	uint64_t link_seen;              /* ports up at the last link event */
	int maps_peer_windows;           /* 1: a CPU store reaches a peer's
	                                  * window (ntbx_peer_mw_get_addr);
	                                  * 0: only the DMA engine does */
	struct ntbx_dma_engine *dma;     /* started on first DMA submit */
	pthread_mutex_t dma_lock;
};

/* Common set-up and tear-down of struct ntbx_dev, for backends. */
void ntbx_dev_init_common(struct ntbx_dev *dev);
void ntbx_dev_fini_common(struct ntbx_dev *dev);

/* Where [@off, @off+@len) of outbound window @widx of @port is mapped
 * here: 0 and *p, or the errors of ntbx_peer_mw_get_addr, or -ERANGE. */
int ntbx_window_span(struct ntbx_dev *dev, int port, int widx, uint64_t off,
                     size_t len, char **p);

/* The DMA engine (dma.c): stop its thread, waiting for queued work. */
void ntbx_dma_engine_stop(struct ntbx_dev *dev);

/* For a backend's dma_submit: queue a copy on the handle's engine thread,
 * completed as dma.c completes its own (0, or -ENOMEM). */
int ntbx_dma_engine_copy(struct ntbx_dev *dev, char *dst, const char *src,
                         size_t len, struct ntbx_dma_op *op);
/* Queue @fn(@dev, @port, @bits) behind every copy queued before it (a
 * doorbell that must not overtake the data it announces).  0, -ENOMEM. */
int ntbx_dma_engine_call(struct ntbx_dev *dev,
                         void (*fn)(struct ntbx_dev *, int, uint32_t),
                         int port, uint32_t bits);

#endif
