/* SPDX-License-Identifier: MIT */
/* The fabric layer, internal. */
#ifndef NTBX_FABRIC_PRIV_H
#define NTBX_FABRIC_PRIV_H

#include <limits.h>
#include <pthread.h>
#include "ntbx/fabric.h"

#define FAB_NODE_MAGIC  0x4e584e42u   /* "NXNB" */
#define FAB_VERSION     1
/* Scratchpad 0 as written by a peer: magic and transport version. */
#define FAB_SPAD_MAGIC  (0x4e580000u | FAB_VERSION)

/* Scratchpads a node writes into its peer's port at bring-up. */
enum {
	SPAD_VERSION = 0,   /* FAB_SPAD_MAGIC */
	SPAD_NODE,          /* writer's node id */
	SPAD_EPOCH,         /* writer's epoch when it wrote these */
	SPAD_WINDOW,        /* pages of window 0 (over the writer's memory) */
	SPAD_BLOCK_OFF,     /* writer's link block for this port, in pages */
	SPAD_BLOCK_SIZE,    /* its size, in pages */
	SPAD_TOPO,          /* topology | nodes << 8 */
	SPAD_CHECK,         /* check word over the others; written last */
};
#define FAB_PAGE 4096u

/*
 * The fabric's block at offset 0 of every node's memory, made when the
 * fabric is created.  Shared by the node's processes; peers never read it.
 */
struct fab_node_block {
	uint32_t magic;                  /* FAB_NODE_MAGIC */
	uint32_t version;                /* FAB_VERSION */
	pthread_mutex_t lock;            /* robust: serialises bring-up */
	uint32_t up_epoch;               /* node epoch the link blocks and
	                                  * scratchpads were set up for */
	uint32_t nports;
	uint64_t link_size;              /* bytes of each link block */
	uint64_t link_off[NTBX_MAX_PORTS]; /* our link block per port */
};

/* What this process knows of one link. */
struct fab_link {
	int ready;             /* last check passed */
	uint32_t peer_epoch;   /* the peer's epoch it passed for */
	void *remote_block;    /* the peer's link block for us, mapped (NULL
	                        * on a backend that maps no peer window) */
	uint64_t remote_off;   /* its offset in the peer's window 0 */
};

#define FAB_MAX_HOOKS 16

struct ntbx_fabric {
	char name[NTBX_FABRIC_NAME_MAX + 1];
	char dir[PATH_MAX - 64];
	struct ntbx_dev *dev;
	int node, nnodes;
	int spans_hosts;                 /* ofi: one node per host */
	enum ntbx_topology topo;
	struct fab_node_block *nb;
	pthread_mutex_t lock;            /* links[] and hooks */
	struct fab_link link[NTBX_MAX_PORTS];
	int nhooks;
	struct { void (*fn)(void *); void *arg; } hook[FAB_MAX_HOOKS];
};

/* topology.c: the wiring of a topology, into the backend's terms. */
struct ntbx_dev_create_params;
int fab_wire(enum ntbx_topology t, int nodes, struct ntbx_dev_create_params *p);

/* bringup.c */
int fab_bringup(struct ntbx_fabric *f);
int fab_node_block_init(struct ntbx_dev *dev, enum ntbx_topology t);

/* addrs.c */
int fab_record_addrs(struct ntbx_fabric *f);

#endif
