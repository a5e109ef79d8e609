/* SPDX-License-Identifier: MIT */
/*
 * Private to the ofi node agent (`ntbx node serve`): its state and the
 * functions its parts share.  agent.c starts and runs it (PMIx, set-up,
 * the loop), agent_meet.c is the TCP rendezvous, agent_fabric.c opens the
 * provider and registers memory, agent_ops.c executes the node's DMA queue
 * and turns completions and remote CQ data into doorbells.
 */
#ifndef NTBX_OFI_AGENT_INT_H
#define NTBX_OFI_AGENT_INT_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#ifdef NTBX_HAVE_PMIX
#include <pmix.h>
#endif

#include "dev/ofi/ofi.h"

#include "util/settings.h"
#include "util/util.h"

#define OFI_API FI_VERSION(1, 9)
#define MR_MODES (FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | \
                  FI_MR_ALLOCATED | FI_MR_ENDPOINT)
#define MODES (FI_CONTEXT | FI_CONTEXT2)
#define KEY_MEM  0x6e74786d656dull   /* our keys when the provider takes ours */
#define KEY_EXPO 0x6e7478657870ull
#define CTX_POOL 4096                /* operations in flight, at most */
#define SPIN_NS  200000ull           /* poll at most this long when idle */
#define NAP_MIN_NS 20000ull          /* first nap without a wait object */
#define HELLO_MAGIC 0x4e58484cu      /* "NXHL" */

/* ---------------------------------------------------------- rendezvous */

struct hello {
	uint32_t magic, version;
	uint32_t node, nnodes;
	uint32_t layout, epoch;
	uint64_t mem_size, window_max;
	uint64_t key_hash, boot_id;
	char name[64];
	char prov[64];
	uint64_t mem_base, mem_key;
	uint64_t expo_base, expo_key;
	uint32_t cq_data_size, addrlen;
	uint8_t addr[256];
	uint32_t naddrs, pad;
	struct ntbx_node_addr addrs[NTBX_NODE_ADDRS];
	char refused[160];       /* non-empty: the sender refuses us, why */
};

struct peer {
	int met;                 /* a hello of boot_id applied (atomic) */
	int up;
	uint64_t boot_id;
	fi_addr_t fa;
	uint64_t mem_base, mem_key, expo_base, expo_key;
	uint64_t heard_ns;       /* last CQ data from it */
	int outstanding;         /* our operations to it in flight */
	/* What local processes wrote into its scratchpads, written again
	 * at each link-up: a write while the link is down (before the
	 * agents met, or while the peer restarts) would be lost, and on the
	 * shm backend a scratchpad keeps what was written */
	uint32_t spad_out[NTBX_SPAD_COUNT];
	uint32_t spad_set;       /* bit i: spad_out[i] was written */
	char name[OFI_HOST_MAX + 32];
	char why[112];           /* rendezvous thread: last reported reason */
};

struct opctx {
	struct fi_context2 ctx;
	int slot;                /* -1: no ring entry */
	uint32_t gen, idx;
	int peer;
	struct opctx *next;
};

struct slot_state {
	uint32_t gen, head, done;
	uint8_t state[OFI_RING];     /* 0 free (or partly posted), 1 all
	                              * posted, in flight, 2 done */
	int32_t res[OFI_RING];       /* the first error of its pieces */
	uint32_t pieces[OFI_RING];   /* operations of it in flight */
	uint64_t posted[OFI_RING];   /* bytes of it posted (split writes) */
	uint32_t dbits[OFI_RING];    /* a write's doorbell bits, taken from
	                              * the ring (OFI_DB_TAKEN set once) */
};

/* What the agent did, for its log at exit (work per message, measured). */
struct agent_counts {
	uint64_t descs;          /* descriptors executed */
	uint64_t writes, db_rode, db_alone;  /* writes; doorbells on a write,
	                                      * doorbells as their own op */
	uint64_t cq_local;       /* completions of our operations */
	uint64_t cq_data;        /* remote CQ data arrived (doorbells, beats) */
	uint64_t sleeps;         /* the loop slept */
};

struct agent {
	const struct ofi_agent_opts *o;
	struct ntbx_dev *dev;
	struct ofi_ctl *ctl;
	struct ofi_expo *expo;
	struct ofi_desc_file desc;
	struct shm_fabric_desc sdesc;
	int rank, nnodes;
	char *mem;
	uint64_t mem_size;

	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	struct fid_mr *mr_mem, *mr_expo;
	void *desc_mem, *desc_expo;
	uint64_t mr_mode;
	int ordered;
	size_t max_msg;
	int cq_fd;

	struct peer peer[NTBX_MAX_NODES];
	struct slot_state *slots;
	struct opctx *pool, *free_ctx;

	int kick_fd, ep_fd, listen_fd;
	struct hello me;

	pthread_mutex_t mbox_lock;
	struct hello *mbox[NTBX_MAX_NODES];
	volatile sig_atomic_t stop;
	uint64_t min_poll_ns;    /* poll at least this long after work */
	struct agent_counts n;
};

/* The agent's state: one agent per process. */
extern struct agent ag;

/* agent.c */
extern char agent_self_name[128];
void agent_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* agent_meet.c: the TCP rendezvous of the agents (never calls libfabric) */
void agent_set_why(int n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int agent_hello_check(const struct hello *h, int expect, char *why, size_t wl);
void agent_mbox_put(const struct hello *h);
struct addrinfo *agent_resolve(const char *host, unsigned port, int passive);
void *agent_rendezvous_main(void *arg);

/* agent_fabric.c: opening the provider, registering memory */
int agent_fi_fail(const char *what, int ret);
int agent_fab_open(const char *node, unsigned port);
int agent_mr_reg(void *buf, size_t len, uint64_t access, uint64_t key,
                 struct fid_mr **mr, void **desc);
void agent_local_addrs(struct hello *h);

/* agent_ops.c: the DMA queue, completions, doorbells, heartbeats */
void agent_ctx_put(struct opctx *c);
int agent_scan_rings(void);
int agent_cq_poll(void);
int agent_apply_hellos(void);
void agent_heartbeat(void);

#endif
