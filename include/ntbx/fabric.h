/* SPDX-License-Identifier: MIT */
/*
 * ntbx/fabric.h — fabrics, nodes, topology, link bring-up and routes.
 *
 * A fabric is a named set of nodes wired as a `switch` (every node has a
 * port to every other node, as behind a PEX8749 or IXS600 in NT mode) or a
 * `ring` (every node has two ports, to its neighbours: seed 002's
 * switchless ring; traffic for other nodes is forwarded hop by hop).
 *
 * On the shared-memory backend a fabric is a directory,
 * $NTBX_SHM_DIR/ntbx-NAME (NTBX_SHM_DIR defaults to /dev/shm).
 *
 * Joining a fabric opens the node's device and brings each link up the way
 * Linux ntb_transport does: every node writes its layout version, node id,
 * epoch and window size into its peer's scratchpads, then reads its own and
 * checks them.  A link is *ready* when both directions check out.
 *
 * Errors are negative errno values; ntbx_errmsg() (ntbx/dev.h) says what
 * happened and how to fix it.
 */
#ifndef NTBX_FABRIC_H
#define NTBX_FABRIC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include "ntbx/dev.h"

#ifdef __cplusplus
extern "C" {
#endif

enum ntbx_topology {
	NTBX_TOPO_SWITCH = 0,
	NTBX_TOPO_RING = 1,
};

/* Name of a topology ("switch", "ring") and the reverse (-EINVAL). */
const char *ntbx_topology_name(enum ntbx_topology t);
int ntbx_topology_parse(const char *s, enum ntbx_topology *t);

#define NTBX_FABRIC_NAME_MAX 63

struct ntbx_fabric_params {
	int nodes;                   /* 2..NTBX_MAX_NODES (ring: 3..) */
	enum ntbx_topology topology;
	uint64_t window;             /* max inbound window size; 0 = default */
	uint64_t memory;             /* node memory size, at most the window
	                              * (peers reach it through window 0);
	                              * 0 = the window size */
	int gid;                     /* group given access (0660/0770), -1 none */
};
#define NTBX_DEFAULT_WINDOW  (256ull << 20)

/*
 * Create fabric @name.  Returns 0, or
 *   -EINVAL  bad name (letters, digits, '-', '_', '.'; 1..63) or params
 *            (sizes not multiples of 4K, memory above the window or below
 *            what the topology's link blocks need)
 *   -EEXIST  a fabric of that name exists
 *   -EACCES, -ENOSPC, -ENOMEM  from the file system
 */
int ntbx_fabric_create(const char *name, const struct ntbx_fabric_params *p);

/*
 * Create fabric @name on this host as part of a many-host fabric (the ofi
 * backend): one node per entry of @hosts ("10.0.0.1,10.0.0.2[:port],...",
 * the same list, in the same order, on every host; each host's agent,
 * `ntbx node serve`, listens at its entry's port, default 47600, and its
 * libfabric endpoint uses port + 1).  @key, if given, must be the same on
 * every host: agents refuse a peer with another key.  @p gives window,
 * memory and group (nodes and topology come from @hosts: a switch).
 * Errors as ntbx_fabric_create.
 */
int ntbx_fabric_create_ofi(const char *name, const struct ntbx_fabric_params *p,
                           const char *hosts, const char *key);

/* Remove fabric @name and everything of it.  -ENOENT if there is none.
 * Processes still attached keep their mappings until they exit. */
int ntbx_fabric_destroy(const char *name);

/* The directory of fabric @name into @buf; -ENAMETOOLONG, -EINVAL. */
int ntbx_fabric_dir(const char *name, char *buf, size_t len);

/*
 * A private fabric for one run of a tool (oshrun, ntbx perf, ...), named
 * "@tag-XXXXXXXX" (random) into @name, and owned by the caller for as long
 * as it lives: *@lock_fd holds an OFD lock on the fabric's "owner.lock",
 * which the kernel drops however the caller dies (children that inherit
 * the fd keep it).  The caller destroys the fabric when it ends; one that
 * was killed leaves it to ntbx_fabric_reap_private(), which every creator
 * calls first (and `ntbx fabric list` too): it destroys each private fabric
 * of this user whose lock nobody holds.  0 or -errno.
 */
int ntbx_fabric_create_private(const char *tag,
                               const struct ntbx_fabric_params *p,
                               char *name, size_t len, int *lock_fd);
/* The number of private fabrics destroyed, or -errno. */
int ntbx_fabric_reap_private(void);

/*
 * The fabric used when none is named (no --fabric, no NTBX_FABRIC): per
 * user, so two users never meet by accident: "default" for root, and
 * "default-UID" for every other user.
 */
const char *ntbx_fabric_default_name(void);

/*
 * Open file @file of fabric @name's directory (a lock file or table that a
 * layer keeps beside the nodes), the safe way: relative to the directory,
 * which must be ours (or our group fabric's), never through a symlink,
 * and checked to be a regular file of the fabric's owner with no access for
 * others and at least @min_size bytes.  With O_CREAT in @flags a missing
 * file is created (O_EXCL; mode 0600, or 0660 and the fabric's group) and
 * extended to @min_size.  Returns the fd (close-on-exec) or -errno with
 * ntbx_errmsg() set.
 */
int ntbx_fabric_open_file(const char *name, const char *file, int flags,
                          uint64_t min_size);

/* Facts about a fabric, without joining it. */
struct ntbx_fabric_info {
	char name[NTBX_FABRIC_NAME_MAX + 1];
	int nodes;
	enum ntbx_topology topology;
	uint64_t window, memory;
	int layout_version;
	int alive_nodes;
};
int ntbx_fabric_info(const char *name, struct ntbx_fabric_info *info);

/* Call @fn for each fabric under NTBX_SHM_DIR; returns the count. */
int ntbx_fabric_list(void (*fn)(const struct ntbx_fabric_info *, void *),
                     void *arg);

/* ------------------------------------------------------------- a node */

struct ntbx_fabric;

/*
 * Join fabric @name as node @node.  @node < 0 picks the node from
 * NTBX_NODE if set, else the node already registered for this network
 * namespace, else the first free node (which is then registered for it).
 * Records this namespace's IP addresses in the fabric and brings the
 * node's links up.
 * Returns 0 and *out, or
 *   -ENOENT  no such fabric (message names it and `ntbx fabric create`)
 *   -EPROTO  other layout version (message says to recreate it)
 *   -ERANGE  node out of range;  -EINVAL bad NTBX_NODE
 *   -EBUSY   every node is taken by another network namespace
 */
int ntbx_fabric_join(const char *name, int node, struct ntbx_fabric **out);

/* Leave: close the device.  The node stays registered. */
void ntbx_fabric_leave(struct ntbx_fabric *f);

struct ntbx_dev *ntbx_fabric_dev(struct ntbx_fabric *f);
const char *ntbx_fabric_name(const struct ntbx_fabric *f);
int ntbx_fabric_node(const struct ntbx_fabric *f);
/* 1 if the fabric's nodes are on different hosts (the ofi backend): its
 * directory's files other than this node's are this host's alone, so
 * what the layers above share through files stays on this host. */
int ntbx_fabric_spans_hosts(const struct ntbx_fabric *f);
int ntbx_fabric_nodes(const struct ntbx_fabric *f);
enum ntbx_topology ntbx_fabric_topology(const struct ntbx_fabric *f);

/*
 * The route to @dst: *port is the first hop's port, the return value the
 * number of hops (1 for a neighbour, 0 for this node itself, where *port
 * is -1).  On a ring the shorter way round is taken (ties go to port 1).
 * -ERANGE for a bad node.
 */
int ntbx_fabric_route(const struct ntbx_fabric *f, int dst, int *port);

/*
 * The next node on the way from @from to @dst, by the same rule as
 * ntbx_fabric_route (so routes need not be symmetric: on a ring with an
 * even number of nodes the two directions between opposite nodes take
 * different halves).  @dst itself when they are neighbours, @from when
 * @from == @dst, -ERANGE for a bad node.
 */
int ntbx_fabric_next_hop(const struct ntbx_fabric *f, int from, int dst);

/*
 * 1 if the link on @port is ready (peer alive, scratchpads exchanged and
 * checked for the peer's current epoch), 0 if not (yet), <0 on error.
 * Re-runs the bring-up step for that port when the peer restarted.
 */
int ntbx_fabric_link_ready(struct ntbx_fabric *f, int port);

/* Wait until every link of this node is ready; -ETIMEDOUT. */
int ntbx_fabric_wait_links(struct ntbx_fabric *f, int timeout_ms);

/* The node whose recorded addresses include @sa, or -ENOENT. */
int ntbx_fabric_node_of_addr(struct ntbx_fabric *f,
                             const struct sockaddr *sa, socklen_t len);

/* Re-read this network namespace's addresses into the fabric. */
int ntbx_fabric_record_addrs(struct ntbx_fabric *f);

/* ------------------------------------ for the queue-pair layer above */

/*
 * Link blocks: for each port, bring-up reserves a block of this node's
 * memory that the neighbour writes into (bypass and control rings of the
 * queue-pair layer), and maps the neighbour's block for us.  Its layout
 * belongs to the queue-pair layer; the fabric only places and checks it.
 * *local_off is our block's offset in our node memory, *remote the
 * neighbour's block as mapped through its outbound window (NULL until the
 * link is ready), *size the size of either.
 * Returns 0, or -EINVAL (bad port), -ENOTCONN (link not ready).
 */
#define NTBX_LINK_BLOCK_RING   ((8u << 20) + (64u << 10))
#define NTBX_LINK_BLOCK_SWITCH (64u << 10)
/* Bytes [NTBX_LINK_SOCK_OFF, +NTBX_LINK_SOCK_SIZE) of every link block
 * belong to the sockets layer (its control plane between hosts); the
 * rest to the queue-pair layer. */
#define NTBX_LINK_SOCK_OFF     (16u << 10)
#define NTBX_LINK_SOCK_SIZE    (48u << 10)
int ntbx_fabric_link_block(struct ntbx_fabric *f, int port,
                           uint64_t *local_off, void **remote,
                           uint64_t *size);
/* The same, and *remote_off, the neighbour's block's offset in its
 * outbound window 0: on a backend that maps no peer window (*remote is
 * then NULL), the block is written with ntbx_dma_write there. */
int ntbx_fabric_link_block_at(struct ntbx_fabric *f, int port,
                              uint64_t *local_off, void **remote,
                              uint64_t *remote_off, uint64_t *size);

/* Run @fn(@arg) at ntbx_fabric_leave, before the device closes, in the
 * reverse order of registration.  -ENOMEM if the table is full. */
int ntbx_fabric_on_leave(struct ntbx_fabric *f, void (*fn)(void *),
                         void *arg);

#ifdef __cplusplus
}
#endif
#endif /* NTBX_FABRIC_H */
