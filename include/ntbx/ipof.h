/* SPDX-License-Identifier: MIT */
/*
 * ntbx/ipof.h — IP over the fabric: a TUN network device per node whose
 * link is the fabric (seed 003, Dolphin's IPoPCIe; Linux ntb_netdev).
 *
 * One daemon per node (ntbx_ipof_run) owns a TUN device (IFF_TUN |
 * IFF_NO_PI, default name ntbx0, MTU 65520 = 64 KiB minus the queue-pair
 * record header) in the calling network namespace.  Every IP packet the
 * kernel routes into it goes, whole, as one queue-pair message to the node
 * whose recorded address (ntbx_fabric_record_addrs) is the packet's
 * destination; the receiving daemon writes it into its own TUN device.
 *
 *   - Copy and push (seed 003): each daemon posts receive buffers in its
 *     node memory (ntbx_qp_post_recv); packets of NTBX_QP_PUSH_MIN bytes
 *     and more are written by the sender straight into them (push, no
 *     intermediate copy), smaller ones are copied through the ring.
 *   - Two queue pairs per peer node, one per direction; on a ring,
 *     non-neighbours are reached through the queue-pair forwarder that
 *     every daemon runs.  One data thread moves both directions.
 *   - Unknown destinations are dropped and counted, never sent elsewhere.
 *     Broadcast and multicast are dropped and counted (not delivered).
 *   - A peer that goes down turns into drops ("peer_down") and one log line;
 *     when it comes back (a new epoch) the queue pair is made again.
 *
 * Endpoint exchange (qp.h leaves it out of band): each daemon keeps a block
 * tagged "ntbx-ipof" in its own node memory holding, per peer, the address
 * of its endpoint for that peer and the peer epoch it was made for, plus
 * its counters.  The other daemons read that block through an observer
 * handle of the shm backend (as `ntbx fabric show` does) at set-up time
 * only; on hardware it would travel on the management network.
 */
#ifndef NTBX_IPOF_H
#define NTBX_IPOF_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NTBX_IPOF_DEFAULT_IF  "ntbx0"
#define NTBX_IPOF_DEFAULT_MTU 65520   /* 65536 - 16-byte record header */
#define NTBX_IPOF_MIN_MTU     576
#define NTBX_IPOF_MAX_MTU     65535   /* largest MTU of a TUN device */

struct ntbx_ipof_opts {
	const char *fabric;   /* fabric name (required) */
	int node;             /* < 0: NTBX_NODE or this namespace's node */
	const char *ifname;   /* NULL: ntbx0 */
	const char *addr;     /* "10.1.0.1/24" or "fd00::1/64"; NULL: none */
	int mtu;              /* 0: NTBX_IPOF_DEFAULT_MTU */
	/* Called once the interface is up and the node joined (daemon
	 * readiness); may be NULL. */
	void (*ready)(void *arg, const char *ifname, int node);
	void *ready_arg;
	/* The loop ends when *stop becomes non-zero (set it from a signal
	 * handler installed without SA_RESTART: the caller's thread reads the
	 * TUN device and is interrupted by the signal). */
	volatile sig_atomic_t *stop;
	FILE *log;            /* progress lines (NULL: none) */
};

/*
 * Create the interface, join the fabric and forward until *stop.  The
 * interface is removed when it returns.  Returns 0, or
 *   -EPERM   no CAP_NET_ADMIN (message says to run as root)
 *   -ENODEV  no /dev/net/tun
 *   -EEXIST  an interface of that name exists
 *   -EINVAL  bad address, prefix, name or MTU
 *   the errors of ntbx_fabric_join (-ENOENT no fabric, ...)
 *   -ENOSPC  node memory full
 */
int ntbx_ipof_run(const struct ntbx_ipof_opts *o);

/* Drop reasons, counted per node. */
enum ntbx_ipof_drop {
	NTBX_IPOF_DROP_NO_ROUTE,   /* destination is no node's address */
	NTBX_IPOF_DROP_BCAST,      /* IPv4 broadcast */
	NTBX_IPOF_DROP_MCAST,      /* IPv4 or IPv6 multicast */
	NTBX_IPOF_DROP_PEER_DOWN,  /* destination node down / not connected */
	NTBX_IPOF_DROP_PEER_FULL,  /* destination did not take it in time */
	NTBX_IPOF_DROP_BAD,        /* not an IPv4/IPv6 packet */
	NTBX_IPOF_DROP_TUN,        /* writing to the TUN device failed */
	NTBX_IPOF_DROP_SELF,       /* addressed to this node */
	NTBX_IPOF_NDROPS
};
/* "no_route", "broadcast", ... */
const char *ntbx_ipof_drop_name(int reason);

/* What `ntbx ipof show` prints: one daemon, read without joining. */
struct ntbx_ipof_peer_status {
	int node;
	int state;                 /* 0 down, 1 waiting for peer, 2 up */
	int hops;
	uint64_t tx_pkts, tx_bytes, rx_pkts, rx_bytes, pushed_bytes;
	uint64_t connects;         /* times the queue pair was (re)made */
};
struct ntbx_ipof_status {
	int node;
	int pid;
	char ifname[16];
	char addr[64];             /* "10.1.0.1/24" or "" */
	int mtu;
	uint64_t tx_pkts, tx_bytes, rx_pkts, rx_bytes;
	uint64_t drops[NTBX_IPOF_NDROPS];
	int npeers;
	struct ntbx_ipof_peer_status peers[64];
	uint64_t netns;            /* inode of the daemon's network namespace */
};

/*
 * Read the status of the daemon of @node of fabric @fabric.  Returns 0,
 * -ESRCH (no daemon runs there), -ENOENT (no fabric), -ERANGE (no node).
 */
int ntbx_ipof_status(const char *fabric, int node,
                     struct ntbx_ipof_status *st);

#ifdef __cplusplus
}
#endif
#endif /* NTBX_IPOF_H */
