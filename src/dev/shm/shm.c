/* SPDX-License-Identifier: MIT */
/*
 * The shared-memory NTB backend: open, close, maps of other nodes, link
 * state, windows, registers and node facts.  Layout: layout.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dev/shm/shm.h"
#include "util/settings.h"
#include "util/util.h"

static const struct ntbx_dev_ops shm_ops, shm_dma_ops;
const struct ntbx_dev_ops *const ntbx_shm_ops = &shm_ops;

/* Either table: the shm backend, mapping peer windows or DMA-only. */
static int is_shm(const struct ntbx_dev *dev)
{
	return dev->ops == &shm_ops || dev->ops == &shm_dma_ops;
}

/* A handle that starts with struct shm_dev: the shm backend's own, or a
 * backend built on it (ofi), which says so with its fork hook. */
static int shm_based(const struct ntbx_dev *dev)
{
	return is_shm(dev) || SHM(dev)->after_fork_child;
}

/* Attempts of a seqlock reader before it gives up: a writer holds the
 * sequence odd for a few stores, a hostile one for ever. */
#define SHM_SEQ_TRIES 10000

/* ------------------------------------------------------------ helpers */

int shm_lock(int fd, short type, off_t start, off_t len, int wait)
{
	if (ntbx_sandboxed)
		return -EPERM;   /* see util.h */
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET,
	                    .l_start = start, .l_len = len };
	while (fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl) < 0) {
		if (errno != EINTR)
			return -errno;
	}
	return 0;
}

int shm_unlock(int fd, off_t start, off_t len)
{
	return shm_lock(fd, F_UNLCK, start, len, 0);
}

int shm_locked_by_other(int fd, off_t start, off_t len)
{
	if (ntbx_sandboxed)
		return 1;   /* cannot ask (util.h): taken for alive */
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET,
	                    .l_start = start, .l_len = len };
	if (fcntl(fd, F_OFD_GETLK, &fl) < 0)
		return -errno;
	return fl.l_type != F_UNLCK;
}

int shm_mutex_lock(pthread_mutex_t *m)
{
	/* A holder that died is no problem: every structure a holder changes
	 * is kept consistent at each store (see mem.c). */
	int r = ntbx_shared_lock(m, NULL);
	if (r < 0)
		return ntbx_err(EIO, "a node's shared lock could not be taken "
		                "(%s): a process holds it while stuck, or the "
		                "register file is corrupt; destroy and create the "
		                "fabric again", r == -ETIMEDOUT
		                ? "held for over 2 s" : "garbage");
	return 0;
}

static void node_file(int node, const char *what, char *buf, size_t len)
{
	snprintf(buf, len, "node-%d.%s", node, what);
}

/* A fabric file could not be opened or mapped: shm_file_open has said why
 * when it refused the file itself; otherwise say it here. */
static int file_err(const struct shm_dev *sd, int r, const char *name)
{
	if (r == -EPROTO || r == -ELOOP)
		return r;
	return ntbx_err(-r, "fabric '%s': cannot open %s: %s", sd->desc.name,
	                name, strerror(-r));
}

int ntbx_shm_read_desc(const char *dir, struct shm_fabric_desc *d)
{
	int dfd;
	struct stat dst;
	int r = shm_dir_open(dir, &dfd, &dst);
	if (r < 0)
		return r;
	r = shm_read_desc_at(dfd, &dst, d);
	close(dfd);
	return r;
}

int shm_read_desc_at(int dfd, const struct stat *dst,
                     struct shm_fabric_desc *d)
{
	memset(d, 0, sizeof *d);
	int fd = shm_file_open(dfd, dst, "fabric", O_RDONLY, 0, 0);
	if (fd == -ENOENT || fd == -ENOTDIR)
		return -ENOENT;
	if (fd < 0)
		return fd;
	ssize_t n = pread(fd, d, sizeof *d, 0);
	close(fd);
	if (n < (ssize_t)(8 + sizeof(uint32_t)) ||
	    memcmp(d->magic, SHM_FABRIC_MAGIC, 8))
		return -ENOENT;
	if (d->layout_version != SHM_LAYOUT_VERSION || n != (ssize_t)sizeof *d)
		return -EPROTO;
	/* Check the wiring once, so nobody else has to. */
	d->name[sizeof d->name - 1] = 0;
	if (d->nnodes < 2 || d->nnodes > NTBX_MAX_NODES || !d->mem_size ||
	    !d->window_max)
		return -EPROTO;
	/* Every port count first: the wiring check below indexes a peer's
	 * ports by what this node's entry says. */
	for (uint32_t n = 0; n < d->nnodes; n++)
		if (d->nports[n] > NTBX_MAX_PORTS || d->nports[n] >= d->nnodes)
			return -EPROTO;
	for (uint32_t n = 0; n < d->nnodes; n++) {
		for (int p = 0; p < d->nports[n]; p++) {
			unsigned peer = d->port_peer[n][p], q = d->peer_port[n][p];
			if (peer >= d->nnodes || peer == n || q >= d->nports[peer] ||
			    d->port_peer[peer][q] != n)
				return -EPROTO;
		}
	}
	return 0;
}

/* --------------------------------------------------------- other nodes */

static int regs_ok(const struct shm_node_regs *r, int node, int nports)
{
	return r->magic == SHM_REGS_MAGIC &&
	       r->layout_version == SHM_LAYOUT_VERSION &&
	       r->node == (uint32_t)node && r->nports == (uint32_t)nports;
}

struct shm_node_regs *shm_peer_regs(struct shm_dev *sd, int node)
{
	struct shm_peer *p = &sd->peer[node];
	struct shm_node_regs *r = __atomic_load_n(&p->regs, __ATOMIC_ACQUIRE);
	if (r)
		return r;
	pthread_mutex_lock(&sd->map_lock);
	r = p->regs;
	if (!r) {
		char name[32];
		node_file(node, "regs", name, sizeof name);
		void *m;
		int e = shm_map_file(sd->dir_fd, &sd->dir_st, name, sizeof *r, 1,
		                     &m);
		if (e < 0) {
			file_err(sd, e, name);
		} else if (!regs_ok(m, node, sd->desc.nports[node])) {
			shm_unmap(m, sizeof *r);
			ntbx_err(EPROTO, "fabric '%s': registers of node %d are "
			         "corrupt; destroy and recreate the fabric",
			         sd->desc.name, node);
		} else {
			r = m;
			__atomic_store_n(&p->regs, r, __ATOMIC_RELEASE);
		}
	}
	pthread_mutex_unlock(&sd->map_lock);
	return r;
}

char *shm_peer_mem(struct shm_dev *sd, int node)
{
	struct shm_peer *p = &sd->peer[node];
	char *m = __atomic_load_n(&p->mem, __ATOMIC_ACQUIRE);
	if (m)
		return m;
	pthread_mutex_lock(&sd->map_lock);
	m = p->mem;
	if (!m) {
		char name[32];
		node_file(node, "mem", name, sizeof name);
		void *v;
		int e = shm_map_file(sd->dir_fd, &sd->dir_st, name,
		                     sd->desc.mem_size, 1, &v);
		if (e < 0)
			file_err(sd, e, name);
		else
			__atomic_store_n(&p->mem, m = v, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&sd->map_lock);
	return m;
}

int shm_peer_live_fd(struct shm_dev *sd, int node)
{
	struct shm_peer *p = &sd->peer[node];
	int fd = __atomic_load_n(&p->live_fd, __ATOMIC_ACQUIRE);
	if (fd >= 0)
		return fd;
	pthread_mutex_lock(&sd->map_lock);
	fd = p->live_fd;
	if (fd < 0) {
		char name[32];
		node_file(node, "live", name, sizeof name);
		fd = shm_file_own(sd->dir_fd, &sd->dir_st, name, O_RDWR, 0, 0);
		if (fd >= 0)
			__atomic_store_n(&p->live_fd, fd, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&sd->map_lock);
	return fd;
}

/* ----------------------------------------------------------- open/close */

/*
 * Attach: hold byte 0 while deciding whether the node was dead, so that
 * of several processes starting at once exactly one bumps the epoch; then
 * take our share of byte 1, which keeps the node alive until we go.
 */
static int attach(struct shm_dev *sd)
{
	int r = shm_lock(sd->live_fd, F_WRLCK, 0, 1, 1);
	if (r < 0)
		return r;
	int alive = shm_locked_by_other(sd->live_fd, 1, 1);
	if (alive == 0) {
		__atomic_fetch_add(&sd->regs->epoch, 1, __ATOMIC_SEQ_CST);
		ntbx_log(NTBX_LOG_INFO, "fabric '%s': node %d comes up, epoch %u",
		         sd->desc.name, sd->dev.node, sd->regs->epoch);
	}
	r = shm_lock(sd->live_fd, F_RDLCK, 1, 1, 0);
	shm_unlock(sd->live_fd, 0, 1);
	return r < 0 ? r : 0;
}

void shm_close(struct ntbx_dev *dev)
{
	struct shm_dev *sd = SHM(dev);
	ntbx_dev_fini_common(dev);
	if (sd->fork_pending)
		shm_wakes_forget(sd);   /* the parent's: close, never release */
	shm_slot_release(sd);
	ntbx_fd_close(sd->ev_fd);
	ntbx_fd_close(sd->live_fd);   /* drops our locks: maybe the node dies */
	for (int n = 0; n < NTBX_MAX_NODES; n++) {
		struct shm_peer *p = &sd->peer[n];
		if (p->regs && n != dev->node)
			shm_unmap(p->regs, sizeof *p->regs);
		if (p->mem && n != dev->node)
			shm_unmap(p->mem, sd->desc.mem_size);
		ntbx_fd_close(p->live_fd);
		if (p->ev_fd) {
			for (int s = 0; s < SHM_SLOTS; s++)
				ntbx_fd_close(p->ev_fd[s]);
			free(p->ev_fd);
			free(p->ev_gen);
		}
	}
	if (sd->regs)
		shm_unmap(sd->regs, sizeof *sd->regs);
	if (dev->mem_base)
		shm_unmap(dev->mem_base, sd->desc.mem_size);
	ntbx_fd_close(sd->dir_fd);
	pthread_mutex_destroy(&sd->map_lock);
	free(sd);
}

int shm_open_as(const char *dir, int node, int observe, size_t size,
                const struct ntbx_dev_ops *ops, struct ntbx_dev **out)
{
	struct shm_dev *sd = calloc(1, size < sizeof *sd ? sizeof *sd : size);
	if (!sd)
		return -ENOMEM;
	struct ntbx_dev *dev = &sd->dev;
	dev->ops = ops;
	ntbx_dev_init_common(dev);
	pthread_mutex_init(&sd->map_lock, NULL);
	sd->live_fd = sd->ev_fd = sd->slot = sd->dir_fd = -1;
	for (int n = 0; n < NTBX_MAX_NODES; n++)
		sd->peer[n].live_fd = -1;
	int r;
	if (strlen(dir) >= sizeof sd->dir) {
		r = ntbx_err(ENAMETOOLONG, "fabric directory name too long: %s", dir);
		goto fail;
	}
	strcpy(sd->dir, dir);

	r = shm_dir_open(dir, &sd->dir_fd, &sd->dir_st);
	if (r == 0)
		sd->dir_fd = ntbx_fd_own(sd->dir_fd);
	if (r == 0)
		r = shm_read_desc_at(sd->dir_fd, &sd->dir_st, &sd->desc);
	if (r == -ENOENT || r == -ENOTDIR) {
		r = ntbx_err(ENOENT, "no fabric at %s: create it with "
		             "`ntbx fabric create NAME --nodes N`", dir);
		goto fail;
	}
	if (r == -EPROTO) {
		r = ntbx_err(EPROTO, "fabric at %s has layout version %u, this "
		             "ntbx uses %d: destroy it with `ntbx fabric destroy "
		             "%s` and create it again", dir,
		             sd->desc.layout_version, SHM_LAYOUT_VERSION,
		             sd->desc.name);
		goto fail;
	}
	if (r < 0)
		goto fail;   /* shm_dir_open said why */
	if (node < 0 || (uint32_t)node >= sd->desc.nnodes) {
		r = ntbx_err(ERANGE, "fabric '%s' has nodes 0 to %u; there is no "
		             "node %d", sd->desc.name, sd->desc.nnodes - 1, node);
		goto fail;
	}
	dev->node = node;
	dev->nnodes = (int)sd->desc.nnodes;
	dev->nports = sd->desc.nports[node];
	dev->mem_size = sd->desc.mem_size;
	dev->window_max = sd->desc.window_max;
	dev->mw_align = 4096;
	/* Peers' memory is mapped here; NTBX_DEV_DMA_ONLY=1 hides it from
	 * the layers above, which then reach it only through the DMA
	 * engine, as on a backend that maps nothing (a network). */
	dev->maps_peer_windows = !ntbx_setting_bool(NTBX_SET_DEV_DMA_ONLY);
	if (ops != &shm_ops)   /* another backend built on this one (ofi) */
		dev->maps_peer_windows = 1;   /* it sets its own after */
	else if (!dev->maps_peer_windows) {
		dev->ops = &shm_dma_ops;
		ntbx_log(NTBX_LOG_INFO, "fabric '%s' node %d: DMA-only "
		         "(NTBX_DEV_DMA_ONLY=1): peer windows are reached only "
		         "by DMA", sd->desc.name, node);
	}
	for (int p = 0; p < dev->nports; p++) {
		dev->port_peer[p] = sd->desc.port_peer[node][p];
		dev->node_port[dev->port_peer[p]] = p;
	}

	char name[32];
	node_file(node, "regs", name, sizeof name);
	void *m;
	if ((r = shm_map_file(sd->dir_fd, &sd->dir_st, name, sizeof *sd->regs, 1,
	                      &m)) < 0) {
		r = file_err(sd, r, name);
		goto fail;
	}
	sd->regs = m;
	if (!regs_ok(sd->regs, node, dev->nports)) {
		r = ntbx_err(EPROTO, "fabric '%s': registers of node %d are corrupt;"
		             " destroy and recreate the fabric", sd->desc.name, node);
		goto fail;
	}
	sd->peer[node].regs = sd->regs;
	node_file(node, "mem", name, sizeof name);
	if ((r = shm_map_file(sd->dir_fd, &sd->dir_st, name, sd->desc.mem_size,
	                      1, &m)) < 0) {
		r = file_err(sd, r, name);
		goto fail;
	}
	dev->mem_base = sd->peer[node].mem = m;

	/* Map the neighbours' registers now: doorbells and scratchpads are
	 * then plain stores that cannot fail. */
	for (int p = 0; p < dev->nports; p++)
		if (!shm_peer_regs(sd, dev->port_peer[p])) {
			r = -EPROTO;
			goto fail;
		}

	node_file(node, "live", sd->live_name, sizeof sd->live_name);
	sd->live_fd = shm_file_own(sd->dir_fd, &sd->dir_st, sd->live_name,
	                           O_RDWR, 0, 0);
	if (sd->live_fd < 0) {
		r = file_err(sd, sd->live_fd, sd->live_name);
		goto fail;
	}
	if (observe) {
		*out = dev;
		return 0;
	}
	if (ops->close != shm_close) {
		/* a backend built on this one (ofi): it decides below */
		*out = dev;
		return 0;
	}
	if ((r = shm_attach_slot(sd)) < 0)
		goto fail;
	*out = dev;
	return 0;
fail:
	shm_close(dev);
	return r;
}

int shm_attach_slot(struct shm_dev *sd)
{
	int r;
	struct ntbx_dev *dev = &sd->dev;
	int node = dev->node;
	if ((r = attach(sd)) < 0 || (r = shm_slot_claim(sd, 0)) < 0) {
		if (r == -EMFILE)
			ntbx_err(EMFILE, "fabric '%s': node %d has %d handles open, "
			         "the most it takes", sd->desc.name, node, SHM_SLOTS);
		else
			ntbx_err(-r, "fabric '%s': cannot attach to node %d: %s",
			         sd->desc.name, node, strerror(-r));
		return r;
	}
	shm_mem_reap(dev);   /* blocks of processes that died since */
	return 0;
}

static int open_shm(const char *dir, int node, int observe,
                    struct ntbx_dev **out)
{
	return shm_open_as(dir, node, observe, sizeof(struct shm_dev), &shm_ops,
	                   out);
}

int ntbx_dev_open_shm(const char *dir, int node, struct ntbx_dev **out)
{
	return open_shm(dir, node, 0, out);
}

int ntbx_dev_observe_shm(const char *dir, int node, struct ntbx_dev **out)
{
	return open_shm(dir, node, 1, out);
}

/* ------------------------------------------------- privileges and fork */

/*
 * Before the process gives up the credentials that opened @dev: map every
 * node's registers and memory and open every node's lock file now, so
 * that nothing of the kind is looked up later, and start the keeper
 * (files.c) for what cannot be opened in advance (FIFOs that peers
 * make later, our own new ones, a fresh open file description of our
 * lock file for each forked child).
 */
int ntbx_dev_keep_access(struct ntbx_dev *dev)
{
	if (!shm_based(dev))
		return -EOPNOTSUPP;
	struct shm_dev *sd = SHM(dev);
	/* A derived backend (ofi) reaches its peers through its own files,
	 * already open; only this node's are real (the other nodes' files
	 * exist but nobody reads them), so only the keeper is needed. */
	for (int n = 0; is_shm(dev) && n < dev->nnodes; n++) {
		if (!shm_peer_regs(sd, n) || !shm_peer_mem(sd, n))
			return -EPROTO;   /* ntbx_errmsg says why */
		if (n != dev->node && shm_peer_live_fd(sd, n) < 0)
			return ntbx_err(EACCES, "fabric '%s': cannot open node %d's "
			                "lock file", sd->desc.name, n);
	}
	int r = shm_keeper_start(sd->dir_fd, &sd->dir_st, sd->dir);
	if (r < 0)
		return ntbx_err(-r, "fabric '%s': cannot start the process that "
		                "keeps its files open across the privilege change: "
		                "%s", sd->desc.name, strerror(-r));
	return 0;
}

/*
 * fork() without joining again.  The child inherits every mapping and
 * descriptor; all it lacks is an identity of its own: an open file
 * description of node-N.live (OFD locks belong to the description, which
 * fork shares, so the parent's locks are not the child's) for its share of
 * the node's liveness and for its own waiter slot.
 *
 * The child takes that identity at its first use of the handle
 * (ntbx_dev_fork_identity), not at fork: a forking server's child that
 * never uses the fabric (a connection left on kernel TCP, a CGI that only
 * execs) then costs no system call of ours, where it made about 17 (the
 * parent opening the description and moving it above the program's
 * descriptors, the child's locks, its waiter slot; design-notes, "Short
 * connections").  The child opens it relative to the checked directory
 * descriptor, or through the keeper after a privilege drop: no path is
 * looked up, so it works under chroot and setuid too; a sandboxed child
 * (util.h's ntbx_sandboxed) cannot, and stays off the fabric.
 *
 * What must happen at fork stays in ntbx_dev_fork_child: the locks that
 * another thread of the parent may have held at fork are made usable.
 * Nothing else of the parent's is touched until the identity is taken
 * (its lock description, wake objects and FIFO stay open, unused, and
 * close at exec or exit: all are close-on-exec).
 */
int ntbx_dev_fork_prepare(struct ntbx_dev *dev)
{
	if (!shm_based(dev))
		return -EOPNOTSUPP;
	return SHM(dev)->slot < 0 && !SHM(dev)->fork_pending ? -EPERM : 0;
}

void ntbx_dev_fork_parent(struct ntbx_dev *dev)
{
	(void)dev;   /* nothing was opened for the child */
}

int ntbx_dev_fork_child(struct ntbx_dev *dev)
{
	if (!shm_based(dev))
		return -EOPNOTSUPP;
	struct shm_dev *sd = SHM(dev);
	ntbx_mutex_reset(&sd->map_lock);
	ntbx_mutex_reset(&dev->dma_lock);
	if (dev->dma)   /* a write is a copy-on-write fault: only if needed */
		dev->dma = NULL;   /* its thread stayed in the parent (leaked copy) */
	sd->slot = -1;   /* the parent's; ours comes with the identity */
	sd->fork_pending = 1;
	return 0;
}

int ntbx_dev_fork_identity(struct ntbx_dev *dev)
{
	if (!shm_based(dev))
		return -EOPNOTSUPP;
	struct shm_dev *sd = SHM(dev);
	if (!sd->fork_pending)
		return sd->slot >= 0 ? 0 : -EPERM;
	int fd = shm_file_own(sd->dir_fd, &sd->dir_st, sd->live_name, O_RDWR,
	                      0, 0);
	if (fd < 0)
		return ntbx_err(-fd, "fabric '%s': a forked child cannot open "
		                "its own description of node %d's lock file: %s",
		                sd->desc.name, dev->node, strerror(-fd));
	/* Our share of the node's liveness first, while we still hold the
	 * parent's description: it holds byte 1 (the parent attached before
	 * it forked, or holds its own parent's in turn), so the node is alive
	 * throughout, nobody can hold byte 1 for writing, and attach's
	 * deciding under byte 0 whether the node came up is not needed
	 * (three system calls fewer per forked child).  If the share cannot
	 * be taken anyway, the full attach below decides. */
	int shared = shm_lock(fd, F_RDLCK, 1, 1, 0) == 0;
	/* the parent's: close our copies, never unlock or drop through them */
	shm_wakes_forget(sd);
	ntbx_fd_close(sd->live_fd);
	sd->live_fd = fd;
	sd->fork_pending = 0;
	int r;
	if ((!shared && (r = attach(sd)) < 0) ||
	    (r = shm_slot_claim(sd, 1)) < 0)
		return ntbx_err(-r, "fabric '%s': the child cannot attach to "
		                "node %d: %s", sd->desc.name, dev->node,
		                strerror(-r));
	if (sd->after_fork_child)
		return sd->after_fork_child(sd);
	return 0;
}

int ntbx_dev_open_file(struct ntbx_dev *dev, const char *name, int flags,
                       uint64_t min_size)
{
	if (!shm_based(dev))
		return -EOPNOTSUPP;
	if (!name || !*name || strchr(name, '/'))
		return -EINVAL;
	struct shm_dev *sd = SHM(dev);
	return shm_file_open(sd->dir_fd, &sd->dir_st, name,
	                     flags & ~(O_CREAT | O_EXCL | O_TRUNC), 0, min_size);
}

/* ------------------------------------------------------------ link/node */

static int shm_node_alive(struct ntbx_dev *dev, int node)
{
	struct shm_dev *sd = SHM(dev);
	if (node == dev->node && sd->slot >= 0)
		return 1;   /* we are attached */
	int fd = node == dev->node ? sd->live_fd : shm_peer_live_fd(sd, node);
	if (fd < 0)
		return 0;
	return shm_locked_by_other(fd, 1, 1) > 0;
}

int ntbx_shm_node_alive_at(const char *dir, int node)
{
	int dfd;
	struct stat dst;
	int r = shm_dir_open(dir, &dfd, &dst);
	if (r < 0)
		return r;
	char name[32];
	node_file(node, "live", name, sizeof name);
	int fd = shm_file_open(dfd, &dst, name, O_RDWR, 0, 0);
	close(dfd);
	if (fd < 0)
		return fd;
	r = shm_locked_by_other(fd, 1, 1);
	close(fd);
	return r;
}

static uint32_t shm_node_epoch(const struct ntbx_dev *dev, int node)
{
	struct shm_node_regs *r = shm_peer_regs(SHM(dev), node);
	return r ? __atomic_load_n(&r->epoch, __ATOMIC_ACQUIRE) : 0;
}

static int shm_node_set_addrs(struct ntbx_dev *dev,
                              const struct ntbx_node_addr *a, int n)
{
	struct shm_node_regs *r = SHM(dev)->regs;
	int e = shm_mutex_lock(&r->lock);
	if (e < 0)
		return e;
	/* A writer that died left the sequence odd; make it odd once more. */
	uint32_t s = __atomic_load_n(&r->addr_seq, __ATOMIC_RELAXED) | 1;
	__atomic_store_n(&r->addr_seq, s, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	memcpy(r->addrs, a, sizeof *a * (size_t)n);
	r->naddrs = (uint32_t)n;
	__atomic_store_n(&r->addr_seq, s + 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&r->lock);
	return 0;
}

static int shm_node_get_addrs(struct ntbx_dev *dev, int node,
                              struct ntbx_node_addr *a, int max)
{
	struct shm_node_regs *r = shm_peer_regs(SHM(dev), node);
	if (!r)
		return -EPROTO;
	struct ntbx_node_addr tmp[NTBX_NODE_ADDRS];
	for (int tries = 0; tries < SHM_SEQ_TRIES; tries++) {
		uint32_t s = __atomic_load_n(&r->addr_seq, __ATOMIC_ACQUIRE);
		if (s & 1) {
			ntbx_cpu_relax();
			continue;
		}
		uint32_t n = __atomic_load_n(&r->naddrs, __ATOMIC_RELAXED);
		memcpy(tmp, r->addrs, sizeof tmp);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&r->addr_seq, __ATOMIC_RELAXED) != s)
			continue;
		if (n > NTBX_NODE_ADDRS)
			return -EPROTO;
		int out = 0;
		for (uint32_t i = 0; i < n && out < max; i++) {
			if (tmp[i].family != 2 /* AF_INET */ &&
			    tmp[i].family != 10 /* AF_INET6 */)
				continue;   /* garbage: skip it */
			a[out++] = tmp[i];
		}
		return out;
	}
	return -EAGAIN;
}

/* ------------------------------------------------------------- windows */

static int shm_mw_set_trans(struct ntbx_dev *dev, int port, int widx,
                            uint64_t off, uint64_t size)
{
	struct shm_port_regs *pr = &SHM(dev)->regs->port[port];
	/* Size 0 first, so a peer never pairs the new offset with the old
	 * size (it re-reads the size after the offset). */
	__atomic_store_n(&pr->xlat[widx].size, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&pr->xlat[widx].off, off, __ATOMIC_RELEASE);
	__atomic_store_n(&pr->xlat[widx].size, size, __ATOMIC_RELEASE);
	return 0;
}

static void shm_mw_get_trans(struct ntbx_dev *dev, int port, int widx,
                             uint64_t *off, uint64_t *size)
{
	struct shm_port_regs *pr = &SHM(dev)->regs->port[port];
	uint64_t s1 = 0, s2 = 1;
	/* bounded: the register file is shared, a writer could flip it */
	for (int i = 0; i < SHM_SEQ_TRIES && s1 != s2; i++) {
		s1 = __atomic_load_n(&pr->xlat[widx].size, __ATOMIC_ACQUIRE);
		*off = __atomic_load_n(&pr->xlat[widx].off, __ATOMIC_ACQUIRE);
		s2 = __atomic_load_n(&pr->xlat[widx].size, __ATOMIC_ACQUIRE);
	}
	*size = s1 == s2 ? s1 : 0;
}

static int shm_peer_mw_get_addr(struct ntbx_dev *dev, int port, int widx,
                                void **addr, uint64_t *size)
{
	struct shm_dev *sd = SHM(dev);
	int peer = dev->port_peer[port];
	int q = sd->desc.peer_port[dev->node][port];
	struct shm_node_regs *pr = shm_peer_regs(sd, peer);
	if (!pr)
		return -EPROTO;
	uint64_t off = 0, sz = 0, sz2 = 1;
	for (int i = 0; i < SHM_SEQ_TRIES && sz != sz2; i++) {
		sz = __atomic_load_n(&pr->port[q].xlat[widx].size, __ATOMIC_ACQUIRE);
		off = __atomic_load_n(&pr->port[q].xlat[widx].off, __ATOMIC_ACQUIRE);
		sz2 = __atomic_load_n(&pr->port[q].xlat[widx].size, __ATOMIC_ACQUIRE);
	}
	if (sz != sz2)
		return ntbx_err(EPROTO, "fabric '%s': node %d keeps changing its "
		                "window %d for port %d", sd->desc.name, peer, widx,
		                q);
	if (!sz)
		return -ENOTCONN;
	if ((off | sz) & (dev->mw_align - 1) || sz > dev->window_max ||
	    off > dev->mem_size || sz > dev->mem_size - off)
		return ntbx_err(EPROTO, "fabric '%s': node %d's window %d for port "
		                "%d points outside its memory", sd->desc.name, peer,
		                widx, q);
	char *mem = shm_peer_mem(sd, peer);
	if (!mem)
		return -EPROTO;
	*addr = mem + off;
	*size = sz;
	return 0;
}

/* ----------------------------------------------------------- registers */

static uint32_t *shm_db_reg(struct ntbx_dev *dev, int port)
{
	return &SHM(dev)->regs->port[port].db;
}

static uint32_t *shm_db_mask_reg(struct ntbx_dev *dev, int port)
{
	return &SHM(dev)->regs->port[port].db_mask;
}

static uint32_t *shm_spad_reg(struct ntbx_dev *dev, int port, int idx)
{
	return &SHM(dev)->regs->port[port].spad[idx];
}

/* The peer's registers of the port that faces @port: its register file,
 * mapped at open (neighbours only), so these are plain stores and loads. */
static struct shm_port_regs *peer_port_regs(struct ntbx_dev *dev, int port)
{
	struct shm_dev *sd = SHM(dev);
	struct shm_node_regs *r = sd->peer[dev->port_peer[port]].regs;
	return &r->port[sd->desc.peer_port[dev->node][port]];
}

static void shm_peer_db_set(struct ntbx_dev *dev, int port, uint32_t bits)
{
	/* SEQ_CST: ordered before the load of the sleepers in db_wake, the
	 * other half of the Dekker pair with wait_prepare. */
	__atomic_fetch_or(&peer_port_regs(dev, port)->db, bits, __ATOMIC_SEQ_CST);
	shm_db_wake(dev, port, bits, 1, NTBX_DB_NO_KEY);
}

static uint32_t shm_peer_spad_read(struct ntbx_dev *dev, int port, int idx)
{
	return __atomic_load_n(&peer_port_regs(dev, port)->spad[idx],
	                       __ATOMIC_ACQUIRE);
}

static void shm_peer_spad_write(struct ntbx_dev *dev, int port, int idx,
                                uint32_t val)
{
	__atomic_store_n(&peer_port_regs(dev, port)->spad[idx], val,
	                 __ATOMIC_RELEASE);
}

/*
 * DMA-only mode (NTBX_DEV_DMA_ONLY=1): the backend keeps its mappings of
 * the peers' memory for itself and executes DMA with them, on the handle's
 * engine thread (dma.c), as the ofi backend's agent executes fi_write.
 * The layers above get no address (maps_peer_windows is 0).  Ordering, as
 * ops.h promises: one thread runs the handle's copies in submission order,
 * and a doorbell is queued behind them, so its bits are set only after
 * every write submitted before it is in place.
 */
static int shm_peer_mw_size(struct ntbx_dev *dev, int port, int widx,
                            uint64_t *size)
{
	void *addr;
	return shm_peer_mw_get_addr(dev, port, widx, &addr, size);
}

static int shm_dma_submit(struct ntbx_dev *dev, int port, int widx,
                          uint64_t off, void *buf, size_t len, int to_peer,
                          struct ntbx_dma_op *op)
{
	void *base;
	uint64_t size;
	int r = shm_peer_mw_get_addr(dev, port, widx, &base, &size);
	if (r < 0)
		return r;
	if (off > size || len > size - off)
		return -ERANGE;   /* re-translated since dev.c checked */
	char *win = (char *)base + off;
	return ntbx_dma_engine_copy(dev, to_peer ? win : buf,
	                            to_peer ? buf : win, len, op);
}

static void shm_dma_peer_db_set(struct ntbx_dev *dev, int port, uint32_t bits)
{
	if (ntbx_dma_engine_call(dev, shm_peer_db_set, port, bits) < 0)
		shm_peer_db_set(dev, port, bits);   /* no engine: no copy either */
}

#define SHM_OPS_COMMON \
	.close = shm_close, \
	.node_alive = shm_node_alive, \
	.node_epoch = shm_node_epoch, \
	.node_set_addrs = shm_node_set_addrs, \
	.node_get_addrs = shm_node_get_addrs, \
	.mem_alloc = shm_mem_alloc, \
	.mem_free = shm_mem_free, \
	.mem_reap = shm_mem_reap, \
	.mem_list = shm_mem_list, \
	.mw_set_trans = shm_mw_set_trans, \
	.mw_get_trans = shm_mw_get_trans, \
	.peer_mw_get_addr = shm_peer_mw_get_addr, \
	.db_reg = shm_db_reg, \
	.db_mask_reg = shm_db_mask_reg, \
	.spad_reg = shm_spad_reg, \
	.peer_spad_read = shm_peer_spad_read, \
	.peer_spad_write = shm_peer_spad_write, \
	.db_wake = shm_db_wake, \
	.wait_prepare = shm_wait_prepare, \
	.wait_commit = shm_wait_commit, \
	.wait_finish = shm_wait_finish, \
	.event_fd = shm_event_fd, \
	.event_drain = shm_event_drain, \
	.wake_open = shm_wake_open, \
	.sleeper_open = shm_sleeper_open, \
	.wait_prepare_own = shm_wait_prepare_own, \
	.wake_prepare = shm_wake_prepare, \
	.wake_kick = shm_wake_kick, \
	.wake_sleeping = shm_wake_sleeping, \
	.wake_close = shm_wake_close, \
	.db_keep_wakes = shm_db_keep_wakes, \
	.wake_kept = shm_wake_kept, \
	.self_id = shm_self_id, \
	.holder_alive = shm_holder_alive,

static const struct ntbx_dev_ops shm_ops = {
	SHM_OPS_COMMON
	.peer_db_set = shm_peer_db_set,
};

static const struct ntbx_dev_ops shm_dma_ops = {
	SHM_OPS_COMMON
	.peer_mw_size = shm_peer_mw_size,
	.dma_submit = shm_dma_submit,
	.peer_db_set = shm_dma_peer_db_set,
};
