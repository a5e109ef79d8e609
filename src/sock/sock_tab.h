/* SPDX-License-Identifier: MIT */
/*
 * sock_tab.h — the sockets layer's control table, shared by every process
 * of a fabric (libntbx-preload.so writes it, `ntbx stat` reads it).
 *
 * The table is a file beside the fabric's nodes, $dir/sock-v5.tab, mapped
 * shared; a zero-filled file is an empty table, so creating it never races
 * (O_CREAT + ftruncate to the fixed size).  It holds:
 *   - listeners opened under the preload (ip:port, node, network
 *     namespace, owner), the only ones a connect() may upgrade, and
 *     a generation number of that list (lgen);
 *   - connection slots: the connector publishes a request keyed by its
 *     TCP 4-tuple (before the kernel connect, so accept() always finds it)
 *     with its queue-pair endpoint; the acceptor answers with its own
 *     endpoint; both sides count bytes here (`ntbx stat`).
 * Every field is read as untrusted: indexes and states are checked.
 */
#ifndef NTBX_SOCK_TAB_H
#define NTBX_SOCK_TAB_H

#include <fcntl.h>
#include <stdint.h>
#include "ntbx/dev.h"
#include "ntbx/qp.h"

#define SK_TAB_FILE   "sock-v5.tab"   /* v4: side locks, slot gen;
                                       * v5: requests to other hosts */
#define SK_LISTENERS  256
#define SK_CONNS      2048

/* An address, always IPv6 (IPv4 as ::ffff:a.b.c.d). */
struct sk_addr {
	uint8_t ip[16];
	uint16_t port;   /* host order */
	uint16_t pad_;
	uint32_t pad2_;
};

/*
 * A process, named by its device handle (ntbx_dev_self_id): one word, so
 * it is written and read whole, gen << 32 | node << 16 | (slot + 1); 0 is
 * none.  Liveness is ntbx_dev_holder_alive, the lock the kernel drops, not
 * a pid: pids are reused and a zombie's still answers kill(pid, 0).  Used
 * for listeners; connection sides have locks of their own (below).
 */
static inline uint64_t sk_id_make(int node, int slot, uint32_t gen)
{
	return (uint64_t)gen << 32 | (uint64_t)(node & 0x7f) << 16 |
	       (uint64_t)(slot + 1);
}

/* 1 if @id (read once from the table) may name a live process on @dev's
 * fabric.  Any value is safe. */
static inline int sk_id_alive(struct ntbx_dev *dev, uint64_t id)
{
	if (!id)
		return 0;
	int slot = (int)(id & 0x7fff) - 1, node = (int)(id >> 16 & 0xff);
	return ntbx_dev_holder_alive(dev, node, slot, (uint32_t)(id >> 32)) > 0;
}

struct sk_listener {
	uint32_t state;      /* 0 free, 1 used */
	int32_t pid;         /* process that registered it, for display */
	uint32_t node;
	uint32_t pad_;
	uint64_t id;         /* that process (sk_id_make) */
	uint64_t netns;      /* inode of that process's network namespace */
	uint64_t ino;        /* the listening socket's inode */
	struct sk_addr a;
};

/* Connection states. */
enum {
	SK_FREE = 0,
	SK_CLAIM = 1,   /* being filled by its connector */
	SK_REQ = 2,     /* connector waits for an interposed acceptor */
	SK_ACC = 3,     /* acceptor's endpoint is ready (qa valid) */
	SK_FAB = 4,     /* connector switched: data on the fabric */
	SK_TCP = 5,     /* fell back to TCP: reason[] says why */
	SK_ANS = 6,     /* an acceptor took the request and is answering:
	                 * its fields are the acceptor's to write until it
	                 * publishes SK_ACC or SK_TCP (the connector waits as
	                 * in SK_REQ) */
};

struct sk_conn {
	/* State and generation in one word: gen is bumped at each claim, and
	 * every hand-over compares both (CAS), so a slot reaped and claimed
	 * again meanwhile is never taken for the one a process looked at. */
	union {
		struct { uint32_t state, gen; };
		uint64_t sg;
	};
	uint32_t node_c, node_a;      /* connector's and acceptor's nodes */
	int32_t pid_c, pid_a;         /* last process to use each side, for
	                               * display only */
	int32_t refs_c, refs_a;       /* processes holding each side: the
	                               * last to close ends the stream (a
	                               * count, not liveness: see below) */
	uint32_t nb_flags;            /* each side's O_NONBLOCK, see sk_nonblock */
	uint64_t netns_c;
	struct sk_addr cl;            /* connector's local address */
	struct sk_addr dst;           /* the listener address it connected to */
	struct ntbx_qp_addr qc, qa;   /* the two endpoints */
	uint64_t tcp_sent;            /* connector bytes sent by TCP before the
	                               * switch (valid in SK_FAB) */
	uint64_t tcp_rcvd;            /* of those, read by the acceptor */
	uint64_t bytes_ca, bytes_ac;  /* bytes each way over the fabric */
	char reason[64];              /* SK_TCP: why */
	/* A connection whose other side is on another host (ofi backend,
	 * xhost.c): that side has a slot in its own host's table and these
	 * fields tie the two.  xk: 1 + the index of the request in the
	 * connector's host's allocation toward the other node (0: both
	 * sides in this table); xtag: the request's tag. */
	uint32_t xk, xtag;
	uint32_t reset;               /* SK_RESET_*: a side closed abortively */
	uint32_t sliced;              /* sleeps in 1 ms slices because the
	                               * other side is confined and does not
	                               * hold the sleeper's FIFO (wake.c) */
	/* Bytes each reader took off the fabric (SIOCOUTQ, SO_LINGER): each
	 * on a line of its own, written by that reader only. */
	uint64_t read_ca __attribute__((aligned(64)));
	uint64_t read_ac __attribute__((aligned(64)));
} __attribute__((aligned(64)));

/* sk_conn.reset */
#define SK_RESET_C 0x1u   /* the connector closed with SO_LINGER 0 */
#define SK_RESET_A 0x2u   /* the acceptor did */

struct sk_tab {
	struct sk_listener l[SK_LISTENERS];
	struct sk_conn c[SK_CONNS];
	/* Bumped by every listen and unlisten.  A connector keeps the set of
	 * ports that have listeners and scans l[] again only when this
	 * changed (any value is safe: a wrong one costs a scan). */
	uint64_t lgen __attribute__((aligned(64)));
	/* Where the next claim reaps a few slots (any value is safe). */
	uint32_t reap_next;
	/* Connections to other hosts (xhost.c).  xown[n][k]: the slot that
	 * uses request k toward node n, as gen << 32 | (slot + 1) (0, or a
	 * slot no longer of that generation: free); xseq: the last request
	 * tag given out; xpub[n]: node n's epoch when our listeners were
	 * last published to it.  Any value is safe: a wrong one costs a
	 * request taken over or a publication more. */
	uint32_t xseq __attribute__((aligned(64)));
	uint32_t xpub[NTBX_MAX_NODES];
	uint64_t xown[NTBX_MAX_NODES][128];
};

/*
 * Side locks: who holds a side of a connection.  Every process holding
 * side R of slot I holds a shared OFD lock on byte SK_SIDE_BYTE(I, R) of
 * the table file, through an open file description of its own (never
 * shared with another process: fork gives the parent a fresh one, see
 * table.c).  The kernel drops it however the process ends, so a side is
 * held exactly while such a lock exists: no count to lower, no identity
 * to record.  Anyone with a descriptor of the file asks with F_OFD_GETLK
 * (a read-only one will do, and it changes nothing); a description's own
 * locks are invisible to it, so a holder asks about others only.
 */
#define SK_SIDE_BYTE(i, role) ((off_t)(i) * 2 + ((role) == 'A'))

/* 1 if a description other than @fd's holds side @role of slot @i, 0 if
 * none, -1 if the kernel cannot say. */
static inline int sk_side_locked(int fd, int i, char role)
{
	struct flock l = { .l_type = F_WRLCK, .l_whence = SEEK_SET,
	                   .l_start = SK_SIDE_BYTE(i, role), .l_len = 1 };
	if (fcntl(fd, F_OFD_GETLK, &l) < 0)
		return -1;
	return l.l_type != F_UNLCK;
}

static inline uint64_t sk_sg(uint32_t state, uint32_t gen)
{
	union { struct { uint32_t s, g; } p; uint64_t w; } u = { { state, gen } };
	return u.w;
}

#endif
