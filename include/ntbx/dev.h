/* SPDX-License-Identifier: MIT */
/*
 * ntbx/dev.h — the NTB device contract.
 *
 * This is the hardware model every layer of ntbx stands on, and the only
 * thing a new backend has to provide.  It mirrors the Linux NTB client API
 * (include/linux/ntb.h) so that anyone who knows NTB knows ntbx:
 *
 *   - a device belongs to one node and has one *port* per directly
 *     connected peer (every other node on a switch, two neighbours on a
 *     ring);
 *   - *memory windows*: an inbound window is this node's own memory exposed
 *     to one peer (ntbx_mw_set_trans); an outbound window is the peer's
 *     inbound window mapped here (ntbx_peer_mw_get_addr).  Stores into an
 *     outbound window land in the peer's memory;
 *   - *doorbells*: 16 bits per port.  A peer sets bits (ntbx_peer_db_set);
 *     this node reads and clears them and masks the ones it does not want
 *     to be woken by.  Sleepers never spin (ntbx_db_wait_*), and
 *     ntbx_db_event_fd gives a descriptor for poll/epoll;
 *   - *scratchpads*: 8 x 32-bit registers per port, written by the peer
 *     (ntbx_peer_spad_write) and read locally, used for link bring-up;
 *   - a *DMA engine* that copies into (or out of) an outbound window
 *     asynchronously; each operation has a status word whose IN_PROGRESS
 *     bit clears on completion (the PLX model of seed 000);
 *   - node *memory*: the RAM that inbound windows translate into, with a
 *     crash-safe allocator shared by every process of the node.
 *
 * Errors: every call that can fail returns a negative errno value.  The
 * meaning of each value is documented on the call.  When a call fails for a
 * reason a person has to fix (a missing fabric, a wrong layout version, a
 * bad environment variable) ntbx_errmsg() returns one line saying what
 * happened and how to fix it.
 *
 * Threads: a device handle may be used by several threads at once.
 * Processes: several processes may open the same node; a handle is used
 * in a child after fork() only through ntbx_dev_fork_* (below).
 */
#ifndef NTBX_DEV_H
#define NTBX_DEV_H

#include <stddef.h>
#include <stdint.h>
#include "ntbx/doorbell.h"   /* which bit is for what */

#ifdef __cplusplus
extern "C" {
#endif

/* Fixed limits of the model. */
#define NTBX_MAX_NODES      64  /* nodes on one fabric */
#define NTBX_MAX_PORTS      63  /* ports on one device (a 64-node switch) */
#define NTBX_DB_BITS        16  /* doorbell bits per port */
#define NTBX_DB_VALID_MASK  0xffffu
#define NTBX_SPAD_COUNT     8   /* scratchpad registers per port */
#define NTBX_MW_COUNT       2   /* memory windows per port */

struct ntbx_dev;

/* One line describing the last error of this thread, or "" if none. */
const char *ntbx_errmsg(void);

/* ---------------------------------------------------------------- open */

/*
 * Open node @node of the shared-memory fabric whose directory is @dir
 * (for example /dev/shm/ntbx-demo; the fabric layer computes it).
 * Attaching makes the node alive: its peers see the link up while at least
 * one process has it open.
 *
 * Returns 0 and *out, or
 *   -ENOENT    no fabric at @dir
 *   -EPROTO    the fabric was made by an ntbx of another layout version
 *   -ERANGE    @node does not exist on this fabric
 *   -EACCES    no permission on the fabric's files
 *   -ENOMEM    out of memory or address space
 */
int ntbx_dev_open_shm(const char *dir, int node, struct ntbx_dev **out);

/*
 * Open node @node without attaching: the handle reads registers, windows
 * and allocations (for tools such as `ntbx fabric show`) but does not make
 * the node alive, bump its epoch, or take a waiter slot, so the doorbell
 * waits and event descriptors return -EPERM and ntbx_mem_alloc never owns
 * blocks.  Errors as ntbx_dev_open_shm.
 */
int ntbx_dev_observe_shm(const char *dir, int node, struct ntbx_dev **out);

/*
 * Open this host's node of the many-host fabric whose directory is @dir
 * (the ofi backend: one host is one node, peers are reached over
 * libfabric by the node's agent, `ntbx node serve`).  @node < 0: the node
 * the agent serves.  The backend maps no peer window
 * (ntbx_dev_maps_peer_windows is 0): writes to peers go through
 * ntbx_dma_write.  Errors as ntbx_dev_open_shm, and
 *   -ENOLINK   no agent serves the fabric on this host
 *   -ERANGE    @node is not the node this host is
 * ntbx_dev_fork_* work on its handles (the child gets a queue of its own to
 * the agent); ntbx_dev_keep_access and ntbx_dev_open_file return
 * -EOPNOTSUPP.
 */
int ntbx_dev_open_ofi(const char *dir, int node, struct ntbx_dev **out);

/*
 * The process is about to give up the credentials that opened @dev
 * (setuid to a service user): map and open every node's files now and
 * keep a way to open the files made later (peers' wake FIFOs, our own,
 * a lock-file description per forked child) for this process and its
 * forked children only, without opening the fabric to anyone else.  0,
 * or -errno with ntbx_errmsg set.  shm backend only (-EOPNOTSUPP).
 */
int ntbx_dev_keep_access(struct ntbx_dev *dev);

/*
 * Keep using @dev in a forked child instead of opening a new handle:
 * ntbx_dev_fork_prepare in the parent before fork(), then
 * ntbx_dev_fork_parent in the parent and ntbx_dev_fork_child in the child
 * after it (async-signal-safe: no system call), and ntbx_dev_fork_identity
 * in the child before its first other use of @dev.  That gives the child
 * its own liveness and waiter slot, at first use, so a child that never
 * uses @dev costs nothing (no path is looked up, so it works after a
 * privilege drop or chroot; not in a sandboxed process).  The child must
 * not use @dev if ntbx_dev_fork_identity fails.  0 or -errno.
 */
int ntbx_dev_fork_prepare(struct ntbx_dev *dev);
void ntbx_dev_fork_parent(struct ntbx_dev *dev);
int ntbx_dev_fork_child(struct ntbx_dev *dev);
int ntbx_dev_fork_identity(struct ntbx_dev *dev);

/*
 * A fresh open file description of file @name of @dev's fabric directory
 * (a plain name), for locks of one's own on a fabric file (OFD locks
 * belong to the description): opened relative to the directory the handle
 * checked when it opened, never by path (O_NOFOLLOW, close-on-exec; a
 * regular file with the fabric's owner and mode, at least @min_size
 * bytes), and through the keeper after a privilege drop
 * (ntbx_dev_keep_access).  Never creates.  The fd, or -errno with
 * ntbx_errmsg set.  shm backend only (-EOPNOTSUPP).
 */
int ntbx_dev_open_file(struct ntbx_dev *dev, const char *name, int flags,
                       uint64_t min_size);

/* Detach.  The node dies (links go down) when its last process detaches
 * or exits; its memory and registers stay until the fabric is destroyed. */
void ntbx_dev_close(struct ntbx_dev *dev);

/* This device's node id, node count of the fabric, and port count. */
int ntbx_dev_node(const struct ntbx_dev *dev);
int ntbx_dev_node_count(const struct ntbx_dev *dev);
int ntbx_port_count(const struct ntbx_dev *dev);

/* The node at the other end of @port, or -EINVAL for a bad port. */
int ntbx_port_peer_node(const struct ntbx_dev *dev, int port);

/* The port that leads directly to @node, or -ENOENT if @node is not a
 * neighbour (or is this node), -EINVAL if @node is out of range. */
int ntbx_port_of_node(const struct ntbx_dev *dev, int node);

/* ---------------------------------------------------------------- link */

/*
 * 1 if the link on @port is up (both nodes are alive), 0 if down,
 * -EINVAL for a bad port.  Checking costs a system call; hot paths keep
 * their own state and call this only while waiting.
 */
int ntbx_link_is_up(struct ntbx_dev *dev, int port);

/*
 * Link events: re-read every port's link state and return a mask of the
 * ports whose state changed since this handle's previous call (the first
 * call reports every port that is up).  *up, if given, receives the mask
 * of ports that are up now.
 */
uint64_t ntbx_link_events(struct ntbx_dev *dev, uint64_t *up);

/* Generation of @node: incremented each time the node comes alive from
 * dead, so a peer can tell a restarted node from the one it knew. */
uint32_t ntbx_node_epoch(const struct ntbx_dev *dev, int node);

/* ------------------------------------------------------- node memory */

/*
 * Node memory is the RAM that this node's inbound windows translate into.
 * Its allocator lives in shared memory under a robust lock: it stays
 * consistent whatever process dies, and while holding the lock too.
 */

/* Base address and size of this node's memory in the calling process. */
void *ntbx_mem_base(const struct ntbx_dev *dev);
size_t ntbx_mem_size(const struct ntbx_dev *dev);

/*
 * Allocate @size bytes aligned to @align (a power of two, at least 64).
 * @tag is free text shown by tools.  If @owned, the block is freed
 * automatically when the calling process dies (ntbx_mem_reap), so a
 * killed process leaks nothing.
 * Returns the offset in node memory (>= 0), or
 *   -EINVAL    size 0 or bad alignment
 *   -ENOSPC    no free block large enough (a full window)
 *   -EMFILE    the allocation table is full
 */
int64_t ntbx_mem_alloc(struct ntbx_dev *dev, size_t size, size_t align,
                       const char *tag, int owned);

/* Free the block at @off.  -ENOENT if no block starts there. */
int ntbx_mem_free(struct ntbx_dev *dev, int64_t off);

/* Free the owned blocks of processes that died; returns how many. */
int ntbx_mem_reap(struct ntbx_dev *dev);

/* One allocated block, for tools. */
struct ntbx_mem_block {
	uint64_t off, size;
	int32_t owner_pid;  /* 0 if not owned by a process */
	char tag[24];
};
/* Fill up to @max blocks; returns the number of allocated blocks. */
int ntbx_mem_list(struct ntbx_dev *dev, struct ntbx_mem_block *blocks,
                  int max);

/* -------------------------------------------------- process liveness */

/*
 * Who holds a handle, and is it still there.  Every open handle (not an
 * observer) owns a waiter slot of its node, held by a lock that the kernel
 * drops however the process ends (a zombie holds nothing), with a
 * generation number bumped at each claim of the slot.  (node, slot, gen)
 * names the handle for as long as it is open and never again: record it
 * wherever "is that process still there" will be asked, never a pid,
 * which is reused, differs across PID namespaces, and is the parent's in
 * a forking server.  A forked child has an identity of its own: it opens
 * its own handle, or keeps its parent's through ntbx_dev_fork_child,
 * which claims a waiter slot of the child's own.
 */

/* This handle's identity: 0, or -EPERM for an observer handle. */
int ntbx_dev_self_id(struct ntbx_dev *dev, int *slot, uint32_t *gen);

/* 1 if the handle (@node, @slot, @gen) is still open, 0 if it is gone
 * (its slot is not held by anyone, or was claimed again since), or
 * -ERANGE for a node or slot that does not exist (values read from
 * shared memory are input: any value is safe to pass). */
int ntbx_dev_holder_alive(struct ntbx_dev *dev, int node, int slot,
                          uint32_t gen);

/* ---------------------------------------------------- memory windows */

/* Number of inbound windows per port (NTBX_MW_COUNT), or -EINVAL. */
int ntbx_mw_count(const struct ntbx_dev *dev, int port);

/*
 * Alignment and size limits for inbound window @widx of @port: the
 * translation address (node-memory offset) must be a multiple of
 * *addr_align, the size a multiple of *size_align and at most *size_max.
 * Returns 0, or -EINVAL for a bad port or window.
 */
int ntbx_mw_get_align(const struct ntbx_dev *dev, int port, int widx,
                      uint64_t *addr_align, uint64_t *size_align,
                      uint64_t *size_max);

/*
 * Point inbound window @widx of @port at node memory [@off, @off+@size):
 * the peer's outbound window then reaches it.  size 0 clears the window.
 * Returns 0, or -EINVAL (bad port/window, misaligned, beyond node memory
 * or above the window's maximum size).
 */
int ntbx_mw_set_trans(struct ntbx_dev *dev, int port, int widx,
                      uint64_t off, uint64_t size);

/* Read inbound window @widx's translation of @port: *off and *size
 * (0 if not translated).  -EINVAL for a bad port or window. */
int ntbx_mw_get_trans(struct ntbx_dev *dev, int port, int widx,
                      uint64_t *off, uint64_t *size);

/* Clear the translation (the peer's outbound window becomes empty). */
int ntbx_mw_clear_trans(struct ntbx_dev *dev, int port, int widx);

/*
 * 1 if a CPU store reaches a peer's window on this backend (shm, an NTB's
 * BAR): ntbx_peer_mw_get_addr then gives an address.  0 if only the DMA
 * engine reaches it (a network backend): ntbx_peer_mw_get_addr fails with
 * -EOPNOTSUPP and writes go through ntbx_dma_write.  Peer doorbells and
 * scratchpads are calls on every backend (ntbx_peer_db_set,
 * ntbx_peer_spad_read, ntbx_peer_spad_write).
 */
int ntbx_dev_maps_peer_windows(const struct ntbx_dev *dev);

/*
 * The size of outbound window @widx of @port, on every backend: 0 and
 * *size, or -EINVAL, -ENOTCONN (not translated), -EPROTO (corrupt).
 */
int ntbx_peer_mw_size(struct ntbx_dev *dev, int port, int widx,
                      uint64_t *size);

/*
 * Map outbound window @widx of @port: the peer's inbound window.  On
 * success *addr is where stores reach the peer's memory and *size its
 * length.  The mapping stays valid until the handle is closed; if the
 * peer re-translates the window, call again.
 * Returns 0, or
 *   -EINVAL    bad port or window
 *   -ENOTCONN  the peer has not translated this window (its size is 0)
 *   -EPROTO    the peer's translation is out of its memory (corrupt)
 *   -EOPNOTSUPP  the backend does not map peer windows
 *                (ntbx_dev_maps_peer_windows)
 */
int ntbx_peer_mw_get_addr(struct ntbx_dev *dev, int port, int widx,
                          void **addr, uint64_t *size);

/* ---------------------------------------------------------- doorbells */

/* NTBX_DB_VALID_MASK. */
uint32_t ntbx_db_valid_mask(const struct ntbx_dev *dev);

/* Doorbell bits set on @port (ignoring the mask).  -EINVAL bad port. */
int ntbx_db_read(struct ntbx_dev *dev, int port, uint32_t *bits);

/* Clear @bits on @port.  -EINVAL bad port or bits outside the valid mask. */
int ntbx_db_clear(struct ntbx_dev *dev, int port, uint32_t bits);

/* Masked bits do not wake sleepers nor the event fd. */
int ntbx_db_set_mask(struct ntbx_dev *dev, int port, uint32_t bits);
int ntbx_db_clear_mask(struct ntbx_dev *dev, int port, uint32_t bits);
int ntbx_db_read_mask(struct ntbx_dev *dev, int port, uint32_t *mask);

/*
 * Ring the peer: set @bits in the peer's doorbell register for the port
 * that faces us, and wake its sleepers for those bits.
 * Returns 0, or -EINVAL (bad port or bits), -ENOLINK (link down: the bits
 * are still set, so a peer that comes back sees them).
 */
int ntbx_peer_db_set(struct ntbx_dev *dev, int port, uint32_t bits);

/*
 * Set @bits in this node's own register for @port, as if the peer had
 * rung, and wake local sleepers.  Used by a node's transfer threads to
 * hand work to other processes of the same node.
 */
int ntbx_db_local_set(struct ntbx_dev *dev, int port, uint32_t bits);

/*
 * Wake keys: a finer filter than the bits, for rings between the
 * processes of one node.  The few doorbell bits are shared: every queue
 * pair of a node uses one of NTBX_DB_QP_COUNT, so a ring of a bit woke
 * every event loop of the node that waited for any queue pair on that bit
 * (PostgreSQL's backends and pgbench's threads woke for each other's
 * queries).  A key (0 .. NTBX_DB_KEYS-1, a hash of the endpoint rung)
 * narrows it: ntbx_db_local_ring is ntbx_db_local_set naming @key, and
 * a wake object prepared with a key set (ntbx_db_wake_prepare_keys, a bit
 * per key) is woken by a keyed ring of its bits only if the key is in the
 * set.  A ring without a key (NTBX_DB_NO_KEY, ntbx_db_local_set,
 * ntbx_peer_db_set, bits unmasked) wakes on its bits alone, and
 * ntbx_db_wake_prepare registers every key (NTBX_DB_ALL_KEYS); sleepers
 * on ntbx_db_wait_prepare and the event fd ignore keys.  So a key can
 * only make a wake-up rarer, never lose one that its sleeper registered
 * for.  -EINVAL: a key out of range, or as ntbx_db_local_set.
 */
#define NTBX_DB_KEYS     64
#define NTBX_DB_NO_KEY   (-1)
#define NTBX_DB_ALL_KEYS (~0ull)
int ntbx_db_local_ring(struct ntbx_dev *dev, int port, uint32_t bits, int key);

/*
 * Sleeping without a lost wake-up.  A sleeper states what it waits for
 * (ports and doorbell bits), then checks its own condition (a ring, a
 * flag), then sleeps; a doorbell rung after the prepare wakes it even if
 * another process already cleared the bits:
 *
 *     struct ntbx_db_waiter w;
 *     ntbx_db_wait_prepare(dev, &w, port_mask, bits);
 *     if (!condition())
 *             ntbx_db_wait_commit(dev, &w, timeout_ms);
 *     ntbx_db_wait_finish(dev, &w);
 *
 * prepare returns -EPERM on an observer handle (ntbx_dev_observe_shm).
 * commit returns 0 when woken (or when an unmasked bit of @bits is set on
 * a port in @port_mask), -ETIMEDOUT, or -EINTR if a signal arrived.  It
 * may return early; callers re-check their condition.  It never spins.
 * prepare returns 0, or -EMFILE if the node has no free waiter slot.
 */
struct ntbx_db_waiter {
	uint64_t port_mask;
	uint32_t bits;
	uint32_t seq;   /* wake sequence seen at prepare */
	int slot;       /* waiter slot of this process */
};
int ntbx_db_wait_prepare(struct ntbx_dev *dev, struct ntbx_db_waiter *w,
                         uint64_t port_mask, uint32_t bits);
int ntbx_db_wait_commit(struct ntbx_dev *dev, struct ntbx_db_waiter *w,
                        int timeout_ms);
void ntbx_db_wait_finish(struct ntbx_dev *dev, struct ntbx_db_waiter *w);

/*
 * Convenience: wait until an unmasked bit of @bits is set on a port of
 * @port_mask.  Returns the lowest such port (>= 0), -ETIMEDOUT, -EINTR.
 * Does not clear the bits.  timeout_ms < 0 waits forever.
 */
int ntbx_db_wait(struct ntbx_dev *dev, uint64_t port_mask, uint32_t bits,
                 int timeout_ms);

/*
 * A descriptor for poll/epoll: it becomes readable when a peer sets an
 * unmasked bit of @bits on a port of @port_mask.  After it polls readable,
 * call ntbx_db_event_drain() and then read the doorbells (the descriptor
 * is a wake-up, not the state).  One per handle; the descriptor belongs to
 * the handle and is closed with it.  Returns the fd, or -errno.
 */
int ntbx_db_event_fd(struct ntbx_dev *dev, uint64_t port_mask, uint32_t bits);
void ntbx_db_event_drain(struct ntbx_dev *dev);

/*
 * Wake objects: a sleeper's own wake-up descriptor, for processes where
 * several event loops sleep at once (one per thread, or per epoll set).
 * ntbx_db_event_fd is one per handle, and every sleeper that drains it
 * eats the others' wake-ups; a wake object is drained only by its own
 * sleepers.
 *
 *     int fd = ntbx_db_wake_open(dev, &wk);      (once; fd for poll/epoll)
 *     ...
 *     ntbx_db_wake_prepare(dev, wk, port_mask, bits);
 *     arm what it waits for; if (!condition()) poll(fd, ...);
 *
 * prepare consumes the object's earlier wake-ups and registers @port_mask
 * and @bits: from its return on, a ring of a bit of @bits on a port of
 * @port_mask, from any process, makes fd readable until the next prepare.
 * Sleepers that share one object must each check, after their prepare,
 * every condition anyone registered on it (an epoll set: its whole list).
 * kick makes fd readable now (a condition changed that no doorbell will
 * announce: an entry added to an epoll set).  open returns the fd or
 * -errno (-EMFILE: the node has no free waiter slot); the fd belongs to
 * the object and is closed with it (close, or closing the handle).
 */
struct ntbx_db_wake;
int ntbx_db_wake_open(struct ntbx_dev *dev, struct ntbx_db_wake **wk);
int ntbx_db_wake_prepare(struct ntbx_dev *dev, struct ntbx_db_wake *wk,
                         uint64_t port_mask, uint32_t bits);
/* As ntbx_db_wake_prepare, woken by keyed rings (ntbx_db_local_ring) only
 * for the keys in @keys (bit k: key k). */
int ntbx_db_wake_prepare_keys(struct ntbx_dev *dev, struct ntbx_db_wake *wk,
                              uint64_t port_mask, uint32_t bits,
                              uint64_t keys);
void ntbx_db_wake_kick(struct ntbx_dev *dev, struct ntbx_db_wake *wk);
/* Around the sleep itself (poll or epoll_wait on the fd with a timeout):
 * @asleep 1 before it, 0 after.  While one of its sleepers is inside, a
 * keyed ring whose key is not in the object's set leaves the object
 * alone; while none is, such a ring of its bits still makes the fd
 * readable: a hint that the node has traffic, on which a running loop
 * looks once more before it sleeps, and which never wakes a sleeper. */
void ntbx_db_wake_sleeping(struct ntbx_dev *dev, struct ntbx_db_wake *wk,
                           int asleep);
void ntbx_db_wake_close(struct ntbx_dev *dev, struct ntbx_db_wake *wk);

/*
 * For a process about to lose the right to open files (a seccomp filter,
 * RLIMIT_NOFILE 1): keep_wakes opens now, and keeps, the wake FIFOs of the
 * sleepers registered for @port's doorbells on the node behind @port
 * (@peer) or on this node, so that its rings still reach them; from then
 * on its rings open no FIFO.  Returns how many it keeps, or -errno
 * (-EOPNOTSUPP: the backend cannot).  wake_kept: whether @wk's FIFO is
 * held by every such ringer that rang it (1) or not (0: a sleeper whose
 * peer is confined must then sleep in slices).
 */
int ntbx_db_keep_wakes(struct ntbx_dev *dev, int port, int peer);
int ntbx_db_wake_kept(struct ntbx_dev *dev, struct ntbx_db_wake *wk);

/*
 * A thread's own waiter slot, for ntbx_db_wait_prepare_own.  The sleepers
 * of a handle share its slot, and a ring of any bit one of them waits for
 * wakes them all: a thread that sleeps often on bits no other thread
 * waits for (a ring transfer thread, a progress thread) opens one of its
 * own, so that it is woken only for its bits and the others only for
 * theirs.  One thread sleeps on it at a time; commit and finish as with
 * ntbx_db_wait_prepare.  open returns 0 or -errno (-EMFILE: no free slot,
 * -EOPNOTSUPP: the backend has none; callers then use
 * ntbx_db_wait_prepare); close it with ntbx_db_wake_close (closing the
 * handle closes it too).  It has no descriptor: ntbx_db_wake_prepare and
 * ntbx_db_wake_kick refuse it.
 */
int ntbx_db_sleeper_open(struct ntbx_dev *dev, struct ntbx_db_wake **wk);
int ntbx_db_wait_prepare_own(struct ntbx_dev *dev, struct ntbx_db_wake *wk,
                             struct ntbx_db_waiter *w, uint64_t port_mask,
                             uint32_t bits);

/* -------------------------------------------------------- scratchpads */

/* NTBX_SPAD_COUNT, or -EINVAL for a bad port. */
int ntbx_spad_count(const struct ntbx_dev *dev, int port);

/* This node's scratchpad @idx on @port (what the peer wrote there). */
int ntbx_spad_read(struct ntbx_dev *dev, int port, int idx, uint32_t *val);
int ntbx_spad_write(struct ntbx_dev *dev, int port, int idx, uint32_t val);

/* The peer's scratchpad @idx for the port that faces us. */
int ntbx_peer_spad_read(struct ntbx_dev *dev, int port, int idx,
                        uint32_t *val);
int ntbx_peer_spad_write(struct ntbx_dev *dev, int port, int idx,
                         uint32_t val);

/* ---------------------------------------------------------------- DMA */

/*
 * One DMA operation.  The caller owns it; it must stay valid until the
 * IN_PROGRESS bit of @status is clear.  @result is 0 or -errno.
 */
#define NTBX_DMA_IN_PROGRESS 0x1u
struct ntbx_dma_op {
	uint32_t status;    /* accessed with atomic builtins only */
	int32_t result;
};

/*
 * Queue a copy of @len bytes from @src into outbound window @widx of @port
 * at offset @off (a push, an RDMA write).  The engine runs beside the
 * caller; stores are visible to the peer when IN_PROGRESS clears.
 * Operations of one handle complete in submission order.
 * Returns 0 (queued), or -EINVAL (bad port/window/op), -ERANGE (outside
 * the window), -ENOTCONN (window not translated).
 */
int ntbx_dma_write(struct ntbx_dev *dev, int port, int widx, uint64_t off,
                   const void *src, size_t len, struct ntbx_dma_op *op);

/* The reverse: copy from the peer's window into @dst (a pull). */
int ntbx_dma_read(struct ntbx_dev *dev, int port, int widx, uint64_t off,
                  void *dst, size_t len, struct ntbx_dma_op *op);

/* 1 if @op completed, 0 if still in progress. */
static inline int ntbx_dma_done(const struct ntbx_dma_op *op)
{
	return !(__atomic_load_n(&op->status, __ATOMIC_ACQUIRE) &
	         NTBX_DMA_IN_PROGRESS);
}

/* Wait for @op; returns its result, or -ETIMEDOUT.  Does not spin long. */
int ntbx_dma_wait(struct ntbx_dev *dev, struct ntbx_dma_op *op,
                  int timeout_ms);

/*
 * The CPU copy path: copy @len bytes into outbound window @widx of @port
 * at @off now.  Returns 0, -EINVAL, -ERANGE, -ENOTCONN as ntbx_dma_write.
 */
int ntbx_cpu_write(struct ntbx_dev *dev, int port, int widx, uint64_t off,
                   const void *src, size_t len);

/* --------------------------------------------------------- node info */

/* Small per-node facts that other nodes read: IP addresses and names. */
#define NTBX_NODE_ADDRS 16
struct ntbx_node_addr {
	uint8_t family;     /* AF_INET or AF_INET6, 0 = unused */
	uint8_t prefix;
	uint8_t addr[16];
};
/* Replace this node's address list (up to NTBX_NODE_ADDRS). */
int ntbx_node_set_addrs(struct ntbx_dev *dev, const struct ntbx_node_addr *a,
                        int n);
/* Read @node's address list; returns the count, or -ERANGE. */
int ntbx_node_get_addrs(struct ntbx_dev *dev, int node,
                        struct ntbx_node_addr *a, int max);

/* 1 if @node has at least one live process attached, else 0. */
int ntbx_node_alive(struct ntbx_dev *dev, int node);

#ifdef __cplusplus
}
#endif
#endif /* NTBX_DEV_H */
