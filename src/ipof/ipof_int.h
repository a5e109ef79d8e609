/* SPDX-License-Identifier: MIT */
/*
 * IP over the fabric, private: the block each daemon keeps in its node
 * memory (tag IPOF_TAG, owned: reaped when the daemon dies), packet
 * classification and the TUN helpers.
 *
 * The block is written only by its daemon.  Peers read the ep[] entries
 * through an observer handle at set-up time (seqlock: seq odd while being
 * rewritten), `ntbx ipof show` reads the counters the same way.  Every
 * value read from it is checked before use.
 */
#ifndef NTBX_IPOF_INT_H
#define NTBX_IPOF_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "ntbx/dev.h"
#include "ntbx/ipof.h"
#include "ntbx/qp.h"

#define IPOF_TAG     "ntbx-ipof"
#define IPOF_MAGIC   0x31464f5049584e54ull   /* "TNXIPOF1" */
#define IPOF_VERSION 2u   /* 2: hdr.slot, hdr.slot_gen */
#define IPOF_BUF     (68u << 10)     /* one posted receive buffer */
/* Every message is a struct virtio_net_hdr (IFF_VNET_HDR) and the IP
 * packet: the sender's "checksum not computed yet" travels with the
 * packet, as between virtio-net guests, so neither kernel checksums it. */
#define IPOF_VHDR    10u
#define IPOF_NPOST   8               /* posted buffers per peer */
/* Queue-pair ring per peer.  The receiver writes a message to the TUN
 * device from where it lies (ntbx_qp_recv_zc): from a posted buffer or
 * from the ring, at the same cost, as long as the message is one ring
 * record (up to ring/4 - 64 bytes).  512 KiB holds a 64 KiB packet in one
 * record; with 256 KiB a large packet that found no posted buffer took two
 * records and still a copy, ring to buffer. */
#define IPOF_RING    (512u << 10)

#define IPOF_A64 __attribute__((aligned(64)))

/* Endpoints this daemon made for one peer: @tx (we send on it; the
 * peer's rx connects to it) and @rx (we receive on it). */
struct ipof_ep {
	uint32_t seq;          /* seqlock: odd while rewritten, 0 = never */
	uint32_t for_epoch;    /* the peer's epoch they were made for */
	struct ntbx_qp_addr tx, rx;
	uint64_t connected_to; /* cookie of the peer's rx endpoint our tx
	                        * connected to, 0 before connecting */
};

struct ipof_peer_ctr {
	uint32_t state;        /* 0 down, 1 waiting, 2 up */
	int32_t hops;
	uint64_t tx_pkts, tx_bytes, rx_pkts, rx_bytes, pushed_bytes, connects;
} IPOF_A64;

struct ipof_block {
	struct {
		uint64_t magic;    /* written last (release) */
		uint32_t version, node;
		uint32_t epoch;    /* our node's epoch when the daemon started */
		int32_t pid;       /* for display only */
		int32_t mtu;
		uint32_t running;  /* 1 while forwarding, 0 once stopping */
		uint64_t netns;
		char ifname[16];
		char addr[64];
		/* The daemon's device handle (ntbx_dev_self_id): alive while
		 * that slot is held with this generation. */
		int32_t slot;
		uint32_t slot_gen;
	} hdr IPOF_A64;
	struct ipof_ep ep[NTBX_MAX_NODES] IPOF_A64;
	uint64_t drops[NTBX_IPOF_NDROPS] IPOF_A64;
	struct ipof_peer_ctr peer[NTBX_MAX_NODES];
};

/* Read @b's entry for node @me (seqlock).  1 with *out filled, 0 if none. */
int ipof_ep_read(const struct ipof_block *b, int me, struct ipof_ep *out);

/* ipof_net.c: on an ofi fabric (one node per host) the daemons read each
 * other's entries over TCP instead of through an observer.  *out is NULL
 * on any other fabric.  0 or -errno (ntbx_errmsg set). */
struct ipof_net;
int ipof_net_start(const char *dir, int me, const struct ipof_block *blk,
                   struct ipof_net **out);
void ipof_net_stop(struct ipof_net *n);
/* The entry @peer's daemon has for us, its epoch and its interface's
 * address (CIDR, "" if none; the peer host's agent announced its
 * addresses before the interface existed): 1, or 0 if none (no daemon,
 * not running, nothing for us yet, unreachable). */
int ipof_net_entry(struct ipof_net *n, int peer, uint32_t *epoch,
                   struct ipof_ep *out, char addr[64]);

/* Packet classes. */
enum { IPOF_PKT_BAD = -1, IPOF_PKT_UNICAST = 0, IPOF_PKT_BCAST = 1,
       IPOF_PKT_MCAST = 2 };

/*
 * Classify the IP packet @p of @n bytes and put its destination into @ss
 * (AF_INET or AF_INET6 sockaddr; *sslen its length).  @bcast4, if not 0,
 * is the directed broadcast address of our IPv4 subnet (network order).
 */
int ipof_classify(const uint8_t *p, size_t n, uint32_t bcast4,
                  struct sockaddr_storage *ss, socklen_t *sslen);

/* Parse "A/P" (IPv4 or IPv6); prefix defaults to 32/128.  0 or -EINVAL. */
int ipof_parse_cidr(const char *s, int *family, uint8_t addr[16],
                    int *prefix);

/* TUN: open and name a device (-EPERM, -ENODEV, -EEXIST, -EINVAL);
 * returns the fd, *ifname filled (IFNAMSIZ). */
int ipof_tun_open(const char *want, char *ifname);
/* Set MTU, address (family 0: none) and bring it up.  0 or -errno. */
int ipof_tun_config(const char *ifname, int mtu, int family,
                    const uint8_t addr[16], int prefix);

#endif
