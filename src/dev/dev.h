/* SPDX-License-Identifier: MIT */
/*
 * The device layer's contract with the layers above it (fabric, ipof,
 * tools), besides the public device calls of ntbx/dev.h: what they need of
 * a fabric's directory and of its backend, without naming a backend.  As
 * Linux's ntb.h is one contract for every NTB driver, this is the only
 * header of src/dev/ that a layer above sees (CMakeLists.txt,
 * ntbx_layer_includes): the backends' own headers (dev/shm/shm.h,
 * dev/ofi/ofi.h) and their ops table (dev/ops.h) stay inside src/dev/.
 *
 * Every backend keeps a fabric in a directory of the same shape (the shm
 * backend's; ofi adds its own files), so the directory calls below hold for
 * any fabric; the backend calls find the fabric's backend from its
 * directory (backend.c) and say -ENOENT where it has no such thing.
 */
#ifndef NTBX_DEV_DEV_H
#define NTBX_DEV_DEV_H

#include <stddef.h>
#include <stdint.h>
#include "ntbx/dev.h"

/* ------------------------------------------------- a fabric's directory */

/* What the fabric layer decides when it creates a fabric: sizes and the
 * wiring (the device layer stores the topology without interpreting it). */
struct ntbx_dev_create_params {
	const char *name;          /* for messages */
	int nnodes;
	uint64_t window_max, mem_size;
	uint32_t topology;         /* stored, not interpreted */
	int gid;                   /* -1 = no group */
	uint8_t nports[NTBX_MAX_NODES];
	uint8_t port_peer[NTBX_MAX_NODES][NTBX_MAX_PORTS];
};

/* Create the fabric directory @dir atomically (built aside, renamed).
 * 0, -EEXIST, -EINVAL, or -errno of the file system. */
int ntbx_dev_fabric_create(const char *dir,
                           const struct ntbx_dev_create_params *p);

/* Remove @dir and its files.  -ENOENT if it is not a fabric. */
int ntbx_dev_fabric_destroy(const char *dir);

/* What a fabric's directory says of it (read once, checked). */
struct ntbx_dev_fabric_desc {
	uint32_t layout_version;   /* the directory's */
	uint32_t layout_used;      /* this ntbx's */
	uint32_t nnodes;
	uint32_t topology;         /* as given at creation */
	uint64_t window_max, mem_size;
};
/* 0 and @d; -ENOENT (no fabric at @dir); -EPROTO (another layout
 * version: @d's two versions say which); another -errno with ntbx_errmsg
 * set (owner, symlink, ...). */
int ntbx_dev_fabric_read(const char *dir, struct ntbx_dev_fabric_desc *d);

/* 1 if node @node of the fabric at @dir has a live process, 0 if not,
 * -errno. */
int ntbx_dev_fabric_node_alive(const char *dir, int node);

/* The node claimed by network namespace @ns, claiming the first free node
 * if it has none.  The node, or -EBUSY if every node is claimed by another
 * namespace, or -errno. */
int ntbx_dev_fabric_claim_node(const char *dir, uint64_t ns);

/* File @file of the fabric @name at @dir, opened safely (relative to the
 * owner-checked directory, O_NOFOLLOW; O_CREAT: made with the directory's
 * group and mode, at least @min_size bytes).  The fd, or -errno with
 * ntbx_errmsg set naming the fabric. */
int ntbx_dev_fabric_open_file(const char *name, const char *dir,
                              const char *file, int flags, uint64_t min_size);

/* ------------------------------------------------------------- backends */

/* The backend of the fabric at @dir: "ofi" or "shm" (the default). */
const char *ntbx_dev_backend_of(const char *dir);

/* 1 if the fabric at @dir has one node per host (its backend, not the
 * caller, knows which node this host is), 0 if all its nodes are on this
 * machine. */
int ntbx_dev_fabric_spans_hosts(const char *dir);

/* Open node @node of the fabric at @dir with the fabric's backend; on a
 * fabric that spans hosts, @node < 0 is this host's node.  Errors as
 * ntbx_dev_open_shm / ntbx_dev_open_ofi. */
int ntbx_dev_open(const char *dir, int node, struct ntbx_dev **out);

/* Open node @node of the fabric at @dir without attaching, as
 * ntbx_dev_observe_shm (ntbx/dev.h) does: on a fabric that spans hosts,
 * the observer sees this host's files (the node it serves, and what its
 * agent mirrors).  Errors as ntbx_dev_observe_shm. */
int ntbx_dev_observe(const char *dir, int node, struct ntbx_dev **out);

/* Creating a fabric of backend @backend ("shm", "ofi") named @name, with
 * @hosts ("a,b[:port],...", one entry per node) and @key for a backend
 * whose nodes are hosts.  ntbx_dev_backend_nodes: the nodes such a fabric
 * has (0: the caller says, as for shm), or -EINVAL with ntbx_errmsg set
 * (unknown backend, bad --hosts).  ntbx_dev_backend_add_files: add the
 * backend's own files to the new fabric directory @dir, made and laid out
 * by ntbx_dev_fabric_create; 0 or -errno with ntbx_errmsg set. */
int ntbx_dev_backend_nodes(const char *backend, const char *name,
                           const char *hosts, const char *key);
int ntbx_dev_backend_add_files(const char *backend, const char *dir,
                               const char *name, const char *hosts,
                               const char *key, int gid);

/* Where each host of a fabric that spans hosts is: its address (numeric
 * or a host name) and the base of its ports (the rendezvous port; + 1 the
 * agent's endpoint, + 2 the tools' --serve, + 3 ipof's daemons). */
#define NTBX_DEV_HOST_MAX 64
struct ntbx_dev_hosts {
	uint32_t nhosts;
	struct {
		char addr[NTBX_DEV_HOST_MAX];
		uint32_t port;
	} host[NTBX_MAX_NODES];
};
/* 0 and @h; -ENOENT if the fabric at @dir does not span hosts; -EPROTO. */
int ntbx_dev_fabric_hosts(const char *dir, struct ntbx_dev_hosts *h);

/* This host's node of the fabric at @dir (PMIX_RANK, SLURM_PROCID,
 * PMI_RANK, else the first host whose address is one of this network
 * namespace's), or -ENOENT with @why saying why when it can. */
int ntbx_dev_fabric_host_node(const char *dir, char *why, size_t wlen);

/* What `ntbx fabric show` prints of a fabric that spans hosts: its hosts
 * and the view of this host's agent, read without joining.  0, -ENOENT
 * (not such a fabric), -errno. */
struct ntbx_dev_agent_status {
	struct ntbx_dev_hosts hosts;
	int agent_alive, rank, agent_pid;
	char provider[64];
	int up[NTBX_MAX_NODES];
	uint32_t epoch[NTBX_MAX_NODES];
	char why[NTBX_MAX_NODES][112];
	uint32_t naddrs[NTBX_MAX_NODES];   /* the peer's host addresses */
	struct ntbx_node_addr addrs[NTBX_MAX_NODES][NTBX_NODE_ADDRS];
};
int ntbx_dev_fabric_agent_status(const char *dir,
                                 struct ntbx_dev_agent_status *st);

/* Serve this host's node of the fabric @fabric at @dir: the node agent of
 * a backend whose nodes are hosts (`ntbx node serve`), in the foreground
 * until SIGTERM or SIGINT.  The exit status (0, or 1 having said why on
 * stderr, as when the fabric's backend has no agent), or -ENOTSUP with
 * ntbx_errmsg set when this ntbx was built without the agent.  Only in the
 * ntbx command (the agent links libfabric: src/dev/ofi/serve.c), not in
 * libntbx. */
struct ntbx_dev_serve_opts {
	const char *fabric;      /* name, for messages */
	const char *dir;
	double timeout_s;        /* bound of each rendezvous step */
	int hb_ms;               /* heartbeat period */
	int dead_ms;             /* silence that is link-down */
	const char *ready_file;  /* written once the endpoint is up */
};
int ntbx_dev_serve(const struct ntbx_dev_serve_opts *o);

#endif
