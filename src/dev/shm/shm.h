/* SPDX-License-Identifier: MIT */
/*
 * The shared-memory backend, internal to src/dev/.  The fabric-directory
 * calls serve the device layer's contract (dev/dev.h, backend.c); the rest
 * are the backend's own, and the ofi backend's, which is built on it.
 */
#ifndef NTBX_DEV_SHM_H
#define NTBX_DEV_SHM_H

#include <limits.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/types.h>
#include "dev/dev.h"
#include "dev/ops.h"
#include "dev/shm/layout.h"

/* Create the fabric directory @dir atomically (built aside, renamed).
 * 0, -EEXIST, -EINVAL, or -errno of the file system. */
int ntbx_shm_create(const char *dir, const struct ntbx_dev_create_params *p);

/* Remove @dir and its files.  -ENOENT if it is not a fabric. */
int ntbx_shm_destroy(const char *dir);

/* Read and check the descriptor of @dir into @d.  -ENOENT, -EPROTO. */
int ntbx_shm_read_desc(const char *dir, struct shm_fabric_desc *d);

/* 1 if node @node of @dir has a live process, 0 if not, -errno. */
int ntbx_shm_node_alive_at(const char *dir, int node);

/*
 * The node claimed by network namespace @ns, claiming the first free node
 * if it has none.  Returns the node, or -EBUSY if every node is claimed by
 * another namespace.
 */
int ntbx_shm_claim_node(const char *dir, uint64_t ns);

/* ----------------------------------------------------- backend internals */

/* What this handle knows of another node: its files, mapped on first use. */
struct shm_peer {
	struct shm_node_regs *regs;  /* NULL until mapped */
	char *mem;                   /* its node memory, NULL until mapped */
	int live_fd;                 /* its lock file, -1 until opened */
	/* FIFOs of its waiter slots, opened on first wake: fd and the slot
	 * generation it was opened for (a reclaimed slot has a new FIFO). */
	int *ev_fd;
	uint32_t *ev_gen;
};

struct shm_dev {
	struct ntbx_dev dev;
	char dir[PATH_MAX - 32];
	int dir_fd;                      /* the fabric directory, checked */
	struct stat dir_st;
	struct shm_fabric_desc desc;     /* private copy, checked at open */
	struct shm_node_regs *regs;      /* ours */
	int live_fd;                     /* our OFD on node-N.live */
	char live_name[24];              /* "node-N.live": a forked child
	                                  * opens it without a printf */
	int fork_pending;                /* a forked child that has not taken
	                                  * its identity yet (live_fd, ev_fd
	                                  * and wakes are the parent's) */
	int slot;                        /* our waiter slot */
	uint32_t slot_gen;
	int ev_fd;                       /* our FIFO, or -1 */
	struct ntbx_db_wake *wakes;      /* wake objects (map_lock) */
	int kept_only;                   /* after shm_db_keep_wakes: rings
	                                  * open no FIFO (wait.c) */
	/* A backend built on this one (ofi) that supports ntbx_dev_fork_*:
	 * called in the child once it has its own slot
	 * (ntbx_dev_fork_identity); 0 or -errno. */
	int (*after_fork_child)(struct shm_dev *sd);
	pthread_mutex_t map_lock;        /* serialises lazy peer mapping */
	struct shm_peer peer[NTBX_MAX_NODES];
};

#define SHM(d) ((struct shm_dev *)(d))

/* For a backend built on this one (ofi): its struct starts with a struct
 * shm_dev; shm_open_as allocates @size bytes and maps this node's files
 * but, unless @ops is this backend's, neither attaches nor claims a slot:
 * shm_attach_slot does.  shm_close frees the handle.  ntbx_shm_ops: this
 * backend's table, whose local entries such a backend reuses. */
extern const struct ntbx_dev_ops *const ntbx_shm_ops;
int shm_open_as(const char *dir, int node, int observe, size_t size,
                const struct ntbx_dev_ops *ops, struct ntbx_dev **out);
int shm_attach_slot(struct shm_dev *sd);
void shm_close(struct ntbx_dev *dev);

/* The registers / memory / lock file of @node, mapped on first use;
 * NULL (or -1) with ntbx_errmsg set if that fails. */
struct shm_node_regs *shm_peer_regs(struct shm_dev *sd, int node);
char *shm_peer_mem(struct shm_dev *sd, int node);
int shm_peer_live_fd(struct shm_dev *sd, int node);

/* files.c: a fabric's directory and files, opened safely (see there).
 * shm_dir_open: the directory, checked (owner, mode); 0, -ENOENT, -errno
 * with ntbx_errmsg set.  shm_file_open: a file of it, checked (kind,
 * owner, mode, at least @min_size bytes); the fd or -errno.
 * shm_file_own: the same, for a descriptor the library keeps: opened
 * straight at its place above the program's (util.h's ntbx_fd_own;
 * close it with ntbx_fd_close).
 * shm_file_create: O_EXCL, mode and group set; the fd or -errno.
 * shm_map_fd / shm_map_file: mapped between guard pages; shm_unmap. */
int shm_dir_open(const char *dir, int *fd, struct stat *st);
int shm_file_open(int dfd, const struct stat *dst, const char *name,
                  int flags, int fifo, uint64_t min_size);
int shm_file_own(int dfd, const struct stat *dst, const char *name,
                 int flags, int fifo, uint64_t min_size);
int shm_file_create(int dfd, const char *name, mode_t mode, int gid,
                    uint64_t size);
int shm_map_fd(int fd, uint64_t size, int writable, void **out);
int shm_map_file(int dfd, const struct stat *dst, const char *name,
                 uint64_t size, int writable, void **out);
void shm_unmap(void *p, uint64_t size);
/* The descriptor of the fabric whose directory is open as @dfd. */
int shm_read_desc_at(int dfd, const struct stat *dst,
                     struct shm_fabric_desc *d);

/* Files of the directory open as @dfd, by name (openat, O_NOFOLLOW,
 * close-on-exec): after a privilege drop a lookup there fails (EACCES),
 * and these ask the keeper (files.c) instead, when it serves that
 * directory.  shm_open_at: the fd or -1 with errno (shm_open_own: one
 * the library keeps, as shm_file_own); shm_fifo_make: a new
 * FIFO (an old one of the name removed first), open O_RDWR|O_NONBLOCK, the
 * fd or -errno; shm_file_unlink: 0 or -errno.  shm_keeper_start: fork the
 * keeper for directory @dir open as @dfd, while the process can still open
 * it, and hand it to the images exec'd later (NTBX_KEEPER). */
int shm_open_at(int dfd, const struct stat *dst, const char *name, int flags);
int shm_open_own(int dfd, const struct stat *dst, const char *name, int flags);
int shm_fifo_make(int dfd, const struct stat *dst, const char *name,
                  mode_t mode, int gid);
int shm_file_unlink(int dfd, const struct stat *dst, const char *name);
int shm_keeper_start(int dfd, const struct stat *dst, const char *dir);

/* Lock-file helpers (OFD locks). */
int shm_lock(int fd, short type, off_t start, off_t len, int wait);
int shm_unlock(int fd, off_t start, off_t len);
/* 1 if another open file description holds a lock on [start, start+len). */
int shm_locked_by_other(int fd, off_t start, off_t len);

/* Robust mutex lock: recovers a lock whose holder died. */
int shm_mutex_lock(pthread_mutex_t *m);

/* mem.c */
int64_t shm_mem_alloc(struct ntbx_dev *dev, size_t size, size_t align,
                      const char *tag, int owned);
int shm_mem_free(struct ntbx_dev *dev, int64_t off);
int shm_mem_reap(struct ntbx_dev *dev);
int shm_mem_list(struct ntbx_dev *dev, struct ntbx_mem_block *b, int max);

/* wait.c */
/* write(2) to a FIFO whose reader may be gone: EPIPE, never SIGPIPE. */
ssize_t shm_write_nosigpipe(int fd, const void *buf, size_t len);
/* The handle's waiter slot; @forked: a forked child's (no FIFO reap at
 * each: see there). */
int shm_slot_claim(struct shm_dev *sd, int forked);
void shm_slot_release(struct shm_dev *sd);
void shm_db_wake(struct ntbx_dev *dev, int port, uint32_t bits, int peer,
                 int key);
int shm_db_keep_wakes(struct ntbx_dev *dev, int port, int peer);
int shm_wake_kept(struct ntbx_dev *dev, struct ntbx_db_wake *wk);
int shm_wait_prepare(struct ntbx_dev *dev, struct ntbx_db_waiter *w);
int shm_wait_commit(struct ntbx_dev *dev, struct ntbx_db_waiter *w,
                    int timeout_ms);
void shm_wait_finish(struct ntbx_dev *dev, struct ntbx_db_waiter *w);
int shm_event_fd(struct ntbx_dev *dev, uint64_t port_mask, uint32_t bits);
void shm_event_drain(struct ntbx_dev *dev);
int shm_wake_open(struct ntbx_dev *dev, struct ntbx_db_wake **wk);
int shm_wake_prepare(struct ntbx_dev *dev, struct ntbx_db_wake *wk,
                     uint64_t port_mask, uint32_t bits, uint64_t keys);
void shm_wake_kick(struct ntbx_dev *dev, struct ntbx_db_wake *wk);
void shm_wake_sleeping(struct ntbx_dev *dev, struct ntbx_db_wake *wk,
                       int asleep);
void shm_wake_close(struct ntbx_dev *dev, struct ntbx_db_wake *wk);
int shm_sleeper_open(struct ntbx_dev *dev, struct ntbx_db_wake **wk);
int shm_wait_prepare_own(struct ntbx_dev *dev, struct ntbx_db_wake *wk,
                         struct ntbx_db_waiter *w);
void shm_wakes_forget(struct shm_dev *sd);
int shm_self_id(struct ntbx_dev *dev, int *slot, uint32_t *gen);
int shm_holder_alive(struct ntbx_dev *dev, int node, int slot, uint32_t gen);

#endif
