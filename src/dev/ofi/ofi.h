/* SPDX-License-Identifier: MIT */
/*
 * The ofi backend (many hosts over libfabric), internal.
 *
 * One host is one node.  On each host the fabric is an shm-backend fabric
 * directory (same wiring on every host) of which only this host's node is
 * real: its registers, memory file, allocator, waiter slots and wake-ups
 * are the shm backend's, shared by the host's local processes.  What the
 * shm backend does by storing into a peer's files, this backend asks of
 * the node's agent (`ntbx node serve`, agent.c), which owns the libfabric
 * endpoint.  Three more files in the fabric directory:
 *
 *   ofi.desc   struct ofi_desc_file: the hosts, their rendezvous ports and
 *              the hash of the fabric's key; written at `fabric create`,
 *              the same on every host, read only after
 *   ofi.ctl    struct ofi_ctl: the agent's state as local processes see it
 *              (rank, per-peer link state, epoch, why a link is down) and
 *              one descriptor ring per waiter slot (the node's DMA queue).
 *              The agent holds an OFD write lock on byte 0 while it lives:
 *              the kernel drops it when the agent dies, however it dies
 *   ofi.expo   struct ofi_expo: the node's registers that peers reach by
 *              RMA (scratchpads, the mirrors of the peers' inbound window
 *              translations), registered with libfabric
 *   ofi.kick   FIFO: a local process writes a byte when the agent sleeps
 *
 * Node memory (node-N.mem) is registered with libfabric too: the target of
 * the peers' fi_write and the source of ours.  Everything in ofi.ctl is
 * written by local processes and everything in ofi.expo by peers: each
 * reader snapshots and checks what it reads.
 */
#ifndef NTBX_DEV_OFI_H
#define NTBX_DEV_OFI_H

#include <stdint.h>
#include "dev/dev.h"
#include "dev/shm/shm.h"
#include "util/util.h"

#define OFI_DESC_MAGIC   "NTBXOFI"   /* 8 bytes with the NUL */
#define OFI_VERSION      1
#define OFI_CTL_MAGIC    0x4e54584fu /* "NTXO" */
#define OFI_DEFAULT_PORT 47600
#define OFI_RING         64          /* descriptors per waiter slot */
#define OFI_HOST_MAX     64          /* characters of a host address */

/* ofi.desc */
struct ofi_desc_file {
	char magic[8];               /* OFI_DESC_MAGIC */
	uint32_t version;            /* OFI_VERSION */
	uint32_t nhosts;             /* = the fabric's nodes */
	uint64_t key_hash;           /* of --key (0: none given) */
	char name[64];
	struct {
		char addr[OFI_HOST_MAX]; /* numeric IPv4/IPv6 or a host name */
		uint32_t port;           /* rendezvous TCP port; the endpoint
		                          * uses port + 1 */
		uint32_t pad;
	} host[NTBX_MAX_NODES];
};

/* CQ data of a write with immediate: 16 doorbell bits, the sender's node,
 * the kind.  Fits the 4-byte immediates of verbs and efa. */
#define OFI_IMM_BITS(d)   ((uint32_t)(d) & 0xffffu)
#define OFI_IMM_NODE(d)   ((int)((d) >> 16 & 0x3f))
#define OFI_IMM_KIND(d)   ((int)((d) >> 24 & 0xf))
#define OFI_IMM(kind, node, bits) \
	((uint64_t)(kind) << 24 | (uint64_t)(node) << 16 | (bits))
enum { OFI_IMM_DB = 1, OFI_IMM_HB = 2 };

/* A descriptor of the node's DMA queue (64 bytes). */
enum {
	OFI_OP_WRITE = 1,   /* node memory [loff, +len) -> window roff, then
	                     * doorbell bits @val (OFI_DB_TAKEN below) */
	OFI_OP_READ,        /* window roff -> node memory [loff, +len) */
	OFI_OP_DB,          /* ring doorbell bits @val on @port's peer */
	OFI_OP_SPAD_WRITE,  /* peer scratchpad @widx := @val */
	OFI_OP_SPAD_READ,   /* peer scratchpad @widx -> node memory loff */
	OFI_OP_XLAT,        /* push our window @widx's translation to the peer */
};
struct ofi_dma_desc {
	uint32_t op;
	uint32_t port;
	uint32_t widx;      /* window, or scratchpad index */
	uint32_t val;       /* doorbell bits, scratchpad value */
	uint64_t roff;      /* offset in the outbound window */
	uint64_t loff;      /* offset in our node memory */
	uint64_t len;
	int32_t result;     /* written by the agent: 0 or -errno */
	uint32_t pad[5];
};

/*
 * A doorbell rung right after a write to the same port rides on that write
 * (its last piece becomes an fi_writedata whose CQ data are the bits: one
 * operation and one completion at each end instead of two).  The poster
 * ORs the bits into the write's @val with a CAS while the agent has not
 * taken it; the agent takes it with an exchange that sets OFI_DB_TAKEN
 * before it posts anything of the write.  So the bits either go with the
 * write or the poster sees OFI_DB_TAKEN and posts an OFI_OP_DB of its own.
 */
#define OFI_DB_TAKEN 0x80000000u

/* One waiter slot's queue.  The owner writes gen (at claim), the
 * descriptors and tail; the agent reads them once each and writes the
 * results and done (a futex; woken when @waiting). */
struct ofi_ring {
	uint32_t gen;       /* the owner's slot generation */
	uint32_t tail;      /* descriptors posted */
	uint32_t pad0[14];
	uint32_t done;      /* descriptors completed, in order */
	uint32_t waiting;   /* the owner sleeps on done */
	uint32_t pad1[14];
	struct ofi_dma_desc d[OFI_RING];
};

/* What the agent tells local processes of one peer. */
struct ofi_peer_state {
	uint32_t up;        /* 1 while the link is up */
	uint32_t epoch;     /* the peer's node epoch, from its hello */
	uint32_t seen;      /* hellos accepted (bumped per new incarnation) */
	uint32_t pad;
	char why[112];      /* why the link is down, for messages */
	uint32_t naddrs;
	uint32_t pad1;
	struct ntbx_node_addr addrs[NTBX_NODE_ADDRS];
};

/* ofi.ctl */
struct ofi_ctl {
	uint32_t magic;     /* OFI_CTL_MAGIC */
	uint32_t version;
	int32_t rank;       /* this host's node, set by the agent; -1 before */
	int32_t agent_pid;  /* for tools */
	uint64_t boot_id;   /* the agent's incarnation */
	uint32_t sleeping;  /* the agent sleeps: kick it through ofi.kick */
	uint32_t kicked;
	char provider[64];  /* the agent's provider, for tools */
	uint64_t active[SHM_SLOTS / 64]; /* slots that ever posted */
	struct ofi_peer_state node[NTBX_MAX_NODES];
	struct ofi_ring ring[SHM_SLOTS];
};

/* ofi.expo: written by peers through RMA, read here. */
struct ofi_expo_port {
	uint32_t spad[NTBX_SPAD_COUNT];
	uint32_t db_last;   /* target of doorbell writes (payload unused) */
	uint32_t pad[7];
	struct {
		uint64_t off, size;      /* the peer's inbound window for us */
	} xlat[NTBX_MW_COUNT];
	uint64_t pad1[4];
};
struct ofi_expo {
	struct ofi_expo_port port[NTBX_MAX_PORTS];
};
#define OFI_EXPO_SIZE NTBX_ALIGN_UP(sizeof(struct ofi_expo), 4096)

/* ---------------------------------------------------------- ofi_files.c */

/* Write ofi.desc, ofi.ctl, ofi.expo into the (new) fabric directory @dir:
 * @hosts is "a,b[:port],..." with one entry per node.  0 or -errno with
 * ntbx_errmsg set. */
int ofi_files_create(const char *dir, const char *name, const char *hosts,
                     const char *key, int gid, int *nhosts);
/* Parse @hosts into @d (no files).  The count, or -EINVAL with ntbx_errmsg
 * set. */
int ofi_parse_hosts(const char *hosts, struct ofi_desc_file *d);
uint64_t ofi_key_hash(const char *name, const char *key);
/* Read and check ofi.desc of the directory open as @dfd: 0, -ENOENT (not
 * an ofi fabric), -EPROTO. */
int ofi_read_desc_at(int dfd, const struct stat *dst, struct ofi_desc_file *d);
int ofi_read_desc(const char *dir, struct ofi_desc_file *d);
/* 1 if @dir is an ofi fabric, 0 if not. */
int ofi_is_fabric(const char *dir);
/* This host's node: PMIX_RANK, SLURM_PROCID, PMI_RANK, else the first host
 * of @d whose address is one of this network namespace's.  -ENOENT. */
int ofi_local_rank(const struct ofi_desc_file *d, char *why, size_t wlen);

/* What `ntbx fabric show` prints of an ofi fabric: the description and
 * the agent's view, read without joining.  0 or -errno. */
int ofi_status(const char *dir, struct ntbx_dev_agent_status *st);

/* This backend's part of the device contract (dev/dev.h, backend.c):
 * ofi_nodes: the nodes of @hosts (checked, with @key); ofi_add_files:
 * ofi_files_create's files; ofi_hosts: the hosts of ofi.desc; ofi_host_node:
 * ofi_local_rank of ofi.desc. */
int ofi_nodes(const char *name, const char *hosts, const char *key);
int ofi_add_files(const char *dir, const char *name, const char *hosts,
                  const char *key, int gid);
int ofi_hosts(const char *dir, struct ntbx_dev_hosts *h);
int ofi_host_node(const char *dir, char *why, size_t wlen);

/* ------------------------------------------------------------ ofi_dev.c */

struct ofi_dev;
/* Open node @node (the agent's rank when < 0) of the ofi fabric at @dir.
 * @agent: the caller is the agent (it takes the agent lock itself). */
int ofi_dev_open(const char *dir, int node, int agent, struct ntbx_dev **out);

/* What the agent needs of its own handle. */
struct ofi_ctl *ofi_dev_ctl(struct ntbx_dev *dev);
struct ofi_expo *ofi_dev_expo(struct ntbx_dev *dev);
int ofi_dev_ctl_fd(struct ntbx_dev *dev);
int ofi_dev_peer_port(struct ntbx_dev *dev, int port);   /* the peer's port for us */
const char *ofi_dev_name(struct ntbx_dev *dev);
uint32_t *ofi_dev_db_reg(struct ntbx_dev *dev, int port);
/* node-N.regs of this node (for the epoch) */
struct shm_node_regs *ofi_dev_regs(struct ntbx_dev *dev);
void ofi_dev_db_wake(struct ntbx_dev *dev, int port, uint32_t bits);
/* 1 if the handle (node, slot, gen) is still open. */
int ofi_dev_holder_alive(struct ntbx_dev *dev, int slot, uint32_t gen);

/* The agent (agent.c, built with libfabric into the ntbx command; run by
 * ntbx_dev_serve, serve.c): its options are the contract's (dev/dev.h). */
#define ofi_agent_opts ntbx_dev_serve_opts
int ofi_agent_run(const struct ofi_agent_opts *o);

#endif
