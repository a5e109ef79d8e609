/* SPDX-License-Identifier: MIT */
/*
 * The shared-memory backend's files.  Everything here is shared between
 * processes and, for a peer's registers, written by other nodes: every
 * reader checks what it reads.  No pointers, only offsets and indexes.
 *
 * A fabric is a directory (mode 0700, or 0770 with a group):
 *
 *   fabric        struct shm_fabric_desc: layout version and wiring
 *   node-N.regs   struct shm_node_regs: node N's registers
 *   node-N.mem    node N's memory (sparse; inbound windows point into it)
 *   node-N.live   lock file: who is attached (see below)
 *   node-N.ev-S   FIFO of waiter slot S (ntbx_db_event_fd, wake objects)
 *
 * Liveness uses open-file-description (OFD) locks on node-N.live, which
 * the kernel drops when a process dies however it dies, and which need no
 * common PID namespace:
 *
 *   byte 0      held exclusively while a process attaches, so exactly one
 *               of several processes that bring a dead node up bumps its
 *               epoch;
 *   byte 1      every attached handle holds a read lock: the node is alive
 *               while anyone holds it;
 *   byte 2+S    the handle that owns waiter slot S holds a write lock.
 *               Allocations "owned" by a process name its slot and the
 *               slot's generation, so a dead owner's blocks can be reaped.
 */
#ifndef NTBX_SHM_LAYOUT_H
#define NTBX_SHM_LAYOUT_H

#include <pthread.h>
#include <stdint.h>
#include "ntbx/dev.h"

#define SHM_LAYOUT_VERSION 7   /* 2: shm_node_regs.block_hi, 3: fifo_map,
                                * 4: shm_waiter.fd_keys, 5: bit_slots,
                                * 6: fd_keys gone, 7: fd_keys, fd_asleep */
#define SHM_FABRIC_MAGIC   "NTBXFAB"   /* 8 bytes with the NUL */
#define SHM_REGS_MAGIC     0x4e545852u /* "NTXR" */
#define SHM_SLOTS          512         /* waiter slots (handles) per node */
#define SHM_BLOCKS         2048        /* allocation table entries */
#define SHM_LIVE_SLOT0     2           /* lock byte of slot 0 */

/* The fabric descriptor.  Written once, at creation, then read only. */
struct shm_fabric_desc {
	char magic[8];              /* SHM_FABRIC_MAGIC */
	uint32_t layout_version;    /* SHM_LAYOUT_VERSION; checked on open */
	uint32_t nnodes;            /* 2..NTBX_MAX_NODES */
	uint64_t window_max;        /* max inbound window, bytes */
	uint64_t mem_size;          /* node memory, bytes */
	uint32_t topology;          /* the fabric layer's; opaque here */
	uint32_t gid;               /* group with access, or ~0 */
	char name[64];              /* fabric name, for messages */
	uint8_t nports[NTBX_MAX_NODES];
	/* port_peer[n][p]: node at the end of node n's port p;
	 * peer_port[n][p]: the index of that port at the peer. */
	uint8_t port_peer[NTBX_MAX_NODES][NTBX_MAX_PORTS];
	uint8_t peer_port[NTBX_MAX_NODES][NTBX_MAX_PORTS];
};

#define CACHELINE 64

/*
 * One port's registers, in the node that owns the port.  @db and @spad are
 * written by the peer (peer_db_set, peer_spad_write) and by this node;
 * @db_mask and @xlat only by this node; the peer reads @xlat to map its
 * outbound window.
 */
struct shm_port_regs {
	uint32_t db;                      /* doorbell bits */
	uint32_t db_mask;                 /* masked bits wake nobody */
	uint32_t spad[NTBX_SPAD_COUNT];   /* scratchpads */
	uint32_t pad0[6];
	struct {
		uint64_t off;                 /* start in node memory */
		uint64_t size;                /* 0 = not translated */
	} xlat[NTBX_MW_COUNT];
	uint8_t pad1[CACHELINE - 16 * NTBX_MW_COUNT];
} __attribute__((aligned(CACHELINE)));

/*
 * A waiter slot: one per open device handle.  A sleeper registers what it
 * waits for here; a ringer wakes it through @seq (a futex) and, for event
 * loops, through the slot's FIFO.  Written by the owner and by ringers.
 */
struct shm_waiter {
	uint32_t seq;          /* futex: bumped by every wake of this slot */
	uint32_t sleepers;     /* threads between prepare and finish */
	uint64_t ports;        /* union of port masks waited on (never shrinks) */
	uint32_t bits;         /* union of doorbell bits waited on */
	uint32_t gen;          /* bumped on each claim of the slot */
	uint64_t fd_ports;     /* ports that wake the FIFO (0 = no FIFO) */
	uint32_t fd_bits;      /* bits that wake the FIFO */
	uint32_t fd_pending;   /* 1 after a byte was written, until drained */
	int32_t pid;           /* owner, for tools */
	/* The FIFO as seen by ringers that can open nothing more (a seccomp
	 * filter, RLIMIT_NOFILE 1: shm_db_keep_wakes): fd_kept = gen once one
	 * of them holds it open, fd_unreached = gen once one of them had to
	 * skip it.  Only compared with gen (wait.c, shm_wake_kept). */
	uint32_t fd_kept;
	uint32_t fd_unreached;
	/* Sleepers of the object inside their kernel sleep on the FIFO
	 * (ntbx_db_wake_sleeping), counted: a keyed ring whose key is not in
	 * fd_keys writes the FIFO only while this is 0 (a hint, wait.c). */
	uint32_t fd_asleep;
	/* Keys that wake the FIFO (bit k: key k; include/ntbx/dev.h, wake
	 * keys): a keyed ring of fd_bits wakes it only for one of these.
	 * All ones unless the sleeper named its keys. */
	uint64_t fd_keys;
} __attribute__((aligned(CACHELINE)));

/* An entry of the node-memory allocation table (unsorted). */
enum { SHM_BLOCK_FREE = 0, SHM_BLOCK_USED = 1 };
struct shm_block {
	uint32_t state;        /* written last on alloc, first on free */
	int32_t owner_slot;    /* waiter slot of the owner, -1 = not owned */
	uint32_t owner_gen;    /* that slot's generation at alloc */
	int32_t owner_pid;     /* for tools */
	uint64_t off, size;
	char tag[24];
};

/* A node's register file. */
struct shm_node_regs {
	uint32_t magic;               /* SHM_REGS_MAGIC */
	uint32_t layout_version;
	uint32_t node;
	uint32_t nports;
	uint32_t epoch;               /* bumped when the node comes alive */
	uint32_t reserved;
	uint64_t owner_ns;            /* network namespace that claimed the
	                               * node (its /proc/self/ns/net inode),
	                               * 0 = unclaimed; changed only by CAS */
	uint64_t slot_map[SHM_SLOTS / 64]; /* slots that ever waited */
	uint64_t fifo_map[SHM_SLOTS / 64]; /* slots whose FIFO file exists:
	                               * set after it is made, cleared after
	                               * it is removed, by a holder of the
	                               * slot's lock.  What the reaper of dead
	                               * slots' FIFOs walks instead of the
	                               * directory; a wrong bit costs one lock
	                               * probe and nothing else */
	/* bit_slots[b]: the slots that may wait for doorbell bit b, on any
	 * port (wait.c, slot_bits_index): a ringer visits only these, not
	 * every slot in slot_map (each a cache line its owner writes at
	 * every sleep).  Set by a slot's holder before the condition check
	 * that follows its registration; cleared for bits it no longer waits
	 * for and when the slot is claimed.  A missing bit can only be one a
	 * sleeper has not yet checked after; an extra one costs a visit. */
	uint64_t bit_slots[NTBX_DB_BITS][SHM_SLOTS / 64];
	uint32_t next_slot;           /* where the next claim starts looking */
	uint32_t addr_seq;            /* seqlock of addrs: odd while written */
	uint32_t block_hi;            /* under lock: block[] entries at and
	                               * above this index were never used, so
	                               * scans stop here; only grows (a crash
	                               * between its store and the entry's
	                               * leaves it one too high: harmless) */
	uint32_t pad0[5];

	struct shm_port_regs port[NTBX_MAX_PORTS];
	struct shm_waiter waiter[SHM_SLOTS];

	/* Robust, process-shared: serialises the allocation table and the
	 * writers of the addresses (readers use addr_seq). */
	pthread_mutex_t lock;
	uint32_t naddrs;
	struct ntbx_node_addr addrs[NTBX_NODE_ADDRS];
	struct shm_block block[SHM_BLOCKS];
};

#endif
