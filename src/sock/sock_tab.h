/* SPDX-License-Identifier: MIT */
/*
 * sock_tab.h — the sockets layer's control table, shared by every process
 * of a fabric (libntbx-preload.so writes it, `ntbx stat` reads it).
 *
 * The table is a file beside the fabric's nodes, $dir/sock-v2.tab, mapped
 * shared; a zero-filled file is an empty table, so creating it never races
 * (O_CREAT + ftruncate to the fixed size).  It holds:
 *   - listeners opened under the preload (ip:port, node, network
 *     namespace, owner pid), the only ones a connect() may upgrade, and
 *     a generation number of that list (lgen);
 *   - connection slots: the connector publishes a request keyed by its
 *     TCP 4-tuple (before the kernel connect, so accept() always finds it)
 *     with its queue-pair endpoint; the acceptor answers with its own
 *     endpoint; both sides count bytes here (`ntbx stat`).
 * Every field is read as untrusted: indexes and states are checked.
 */
#ifndef NTBX_SOCK_TAB_H
#define NTBX_SOCK_TAB_H

#include <stdint.h>
#include "ntbx/qp.h"

#define SK_TAB_FILE   "sock-v2.tab"
#define SK_LISTENERS  256
#define SK_CONNS      2048

/* An address, always IPv6 (IPv4 as ::ffff:a.b.c.d). */
struct sk_addr {
	uint8_t ip[16];
	uint16_t port;   /* host order */
	uint16_t pad_;
	uint32_t pad2_;
};

struct sk_listener {
	uint32_t state;      /* 0 free, 1 used */
	int32_t pid;         /* process that registered it */
	uint32_t node;
	uint32_t pad_;
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
};

struct sk_conn {
	uint32_t state;
	uint32_t node_c, node_a;      /* connector's and acceptor's nodes */
	int32_t pid_c, pid_a;         /* last process to use each side */
	int32_t refs_c, refs_a;       /* processes holding each side */
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
	uint32_t reset;               /* SK_RESET_*: a side closed abortively */
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
};

#endif
