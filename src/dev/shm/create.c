/* SPDX-License-Identifier: MIT */
/*
 * Creating, destroying and claiming nodes of shm fabrics.
 *
 * A fabric is built in a directory of its own with an unpredictable name
 * beside its final name and renamed into place only if that name is free,
 * so nobody ever opens a half-made fabric and nobody can make us fill
 * theirs; destroy renames it away first for the same reason.  Files are
 * made and opened relative to a directory descriptor (files.c).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dev/shm/shm.h"
#include "util/util.h"

/* A new file of the fabric being made in @dfd, with @len bytes of @data
 * at its start.  0 or -errno. */
static int write_file(int dfd, const char *name, const void *data, size_t len,
                      uint64_t size, mode_t mode, int gid)
{
	int fd = shm_file_create(dfd, name, mode, gid, size);
	if (fd < 0)
		return fd;
	int r = len && pwrite(fd, data, len, 0) != (ssize_t)len ? -EIO : 0;
	close(fd);
	return r;
}

static int init_regs(int dfd, const char *name, int node, int nports,
                     mode_t mode, int gid)
{
	int fd = shm_file_create(dfd, name, mode, gid,
	                         sizeof(struct shm_node_regs));
	if (fd < 0)
		return fd;
	void *m;
	int r = shm_map_fd(fd, sizeof(struct shm_node_regs), 1, &m);
	close(fd);
	if (r < 0)
		return r;
	struct shm_node_regs *regs = m;
	regs->magic = SHM_REGS_MAGIC;
	regs->layout_version = SHM_LAYOUT_VERSION;
	regs->node = (uint32_t)node;
	regs->nports = (uint32_t)nports;
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	r = -pthread_mutex_init(&regs->lock, &a);
	pthread_mutexattr_destroy(&a);
	shm_unmap(regs, sizeof *regs);
	return r;
}

/* Remove every entry of the directory open as @dfd (not recursive: a
 * fabric has no subdirectories), by name relative to it. */
static void empty_dir(int dfd)
{
	int d2 = dup(dfd);
	DIR *d = d2 >= 0 ? fdopendir(d2) : NULL;
	if (!d) {
		if (d2 >= 0)
			close(d2);
		return;
	}
	struct dirent *e;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			unlinkat(dfd, e->d_name, 0);
	closedir(d);
}

/* An empty directory of ours beside @dir, with an unpredictable name
 * (@what: "new" or "dead"), into @out.  0 or -errno. */
static int aside_dir(const char *dir, const char *what, char *out, size_t len)
{
	if ((size_t)snprintf(out, len, "%s.%s.XXXXXX", dir, what) >= len)
		return -ENAMETOOLONG;
	return mkdtemp(out) ? 0 : -errno;
}

int ntbx_shm_create(const char *dir, const struct ntbx_dev_create_params *p)
{
	if (p->nnodes < 2 || p->nnodes > NTBX_MAX_NODES || !p->mem_size ||
	    !p->window_max || (p->mem_size & 4095) || (p->window_max & 4095))
		return -EINVAL;
	struct shm_fabric_desc *d = calloc(1, sizeof *d);
	if (!d)
		return -ENOMEM;
	memcpy(d->magic, SHM_FABRIC_MAGIC, 8);
	d->layout_version = SHM_LAYOUT_VERSION;
	d->nnodes = (uint32_t)p->nnodes;
	d->window_max = p->window_max;
	d->mem_size = p->mem_size;
	d->topology = p->topology;
	d->gid = p->gid >= 0 ? (uint32_t)p->gid : ~0u;
	snprintf(d->name, sizeof d->name, "%s", p->name ? p->name : "");
	memcpy(d->nports, p->nports, sizeof d->nports);
	memcpy(d->port_peer, p->port_peer, sizeof d->port_peer);
	/* peer_port: which of the peer's ports comes back to us. */
	for (int n = 0; n < p->nnodes; n++)
		for (int q = 0; q < p->nports[n]; q++) {
			int peer = p->port_peer[n][q], back = -1;
			for (int k = 0; k < p->nports[peer]; k++)
				if (p->port_peer[peer][k] == n)
					back = k;
			if (back < 0) {
				free(d);
				return -EINVAL;
			}
			d->peer_port[n][q] = (uint8_t)back;
		}

	char tmp[PATH_MAX], name[32];
	mode_t dmode = p->gid >= 0 ? 0770 : 0700, fmode = p->gid >= 0 ? 0660 : 0600;
	int r = aside_dir(dir, "new", tmp, sizeof tmp);
	if (r < 0) {
		free(d);
		return r;
	}
	int dfd = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0) {
		r = -errno;
		rmdir(tmp);
		free(d);
		return r;
	}
	if (fchmod(dfd, dmode) < 0 ||
	    (p->gid >= 0 && fchown(dfd, (uid_t)-1, (gid_t)p->gid) < 0))
		r = -errno;
	for (int n = 0; n < p->nnodes && !r; n++) {
		snprintf(name, sizeof name, "node-%d.regs", n);
		r = init_regs(dfd, name, n, p->nports[n], fmode, p->gid);
		snprintf(name, sizeof name, "node-%d.mem", n);
		if (!r)
			r = write_file(dfd, name, NULL, 0, p->mem_size, fmode, p->gid);
		snprintf(name, sizeof name, "node-%d.live", n);
		if (!r)
			r = write_file(dfd, name, NULL, 0, 0, fmode, p->gid);
	}
	if (!r)   /* the descriptor last: it makes the directory a fabric */
		r = write_file(dfd, "fabric", d, sizeof *d, sizeof *d, fmode,
		               p->gid);
	free(d);
	/* Into place only if nothing of that name exists: not a directory
	 * another user made first, not a symlink. */
	if (!r && renameat2(AT_FDCWD, tmp, AT_FDCWD, dir, RENAME_NOREPLACE) < 0)
		r = errno == EEXIST ? -EEXIST : -errno;
	if (r) {
		empty_dir(dfd);
		rmdir(tmp);
	}
	close(dfd);
	return r;
}

int ntbx_shm_destroy(const char *dir)
{
	int dfd;
	struct stat dst;
	int r = shm_dir_open(dir, &dfd, &dst);
	if (r < 0)
		return r == -ENOTDIR ? -ENOENT : r;
	struct shm_fabric_desc d;
	r = shm_read_desc_at(dfd, &dst, &d);
	if (r == -ENOENT || r == -ENOTDIR || r == -EACCES || r == -ELOOP) {
		close(dfd);
		return -ENOENT;
	}
	/* Another layout version is destroyed too: that is the fix we
	 * recommend for it.  First out of the way (renamed over an empty
	 * directory of ours with an unpredictable name), so nobody opens a
	 * half-removed fabric; then emptied through the descriptor we
	 * checked, whatever the names point to meanwhile. */
	char dead[PATH_MAX];
	r = aside_dir(dir, "dead", dead, sizeof dead);
	if (r == 0 && rename(dir, dead) < 0) {
		r = -errno;
		rmdir(dead);
	}
	if (r == 0) {
		empty_dir(dfd);
		if (rmdir(dead) < 0)
			r = -errno;
	}
	close(dfd);
	return r;
}

int ntbx_shm_claim_node(const char *dir, uint64_t ns)
{
	int dfd;
	struct stat dst;
	int r = shm_dir_open(dir, &dfd, &dst);
	if (r < 0)
		return r;
	struct shm_fabric_desc d;
	r = shm_read_desc_at(dfd, &dst, &d);
	if (r < 0) {
		close(dfd);
		return r;
	}
	struct shm_node_regs *regs[NTBX_MAX_NODES] = { 0 };
	int found = -EBUSY;
	char name[32];
	for (uint32_t n = 0; n < d.nnodes; n++) {
		snprintf(name, sizeof name, "node-%u.regs", n);
		void *m;
		int e = shm_map_file(dfd, &dst, name, sizeof *regs[0], 1, &m);
		if (e < 0) {
			found = e;
			goto out;
		}
		regs[n] = m;
	}
	/* Ours already?  Else the first unclaimed node; else the first node
	 * that is dead (its namespace may come back: it then gets another). */
	for (uint32_t n = 0; n < d.nnodes && found < 0; n++)
		if (__atomic_load_n(&regs[n]->owner_ns, __ATOMIC_ACQUIRE) == ns)
			found = (int)n;
	for (uint32_t n = 0; n < d.nnodes && found < 0; n++) {
		uint64_t zero = 0;
		if (__atomic_compare_exchange_n(&regs[n]->owner_ns, &zero, ns, 0,
		                                __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			found = (int)n;
	}
	for (uint32_t n = 0; n < d.nnodes && found < 0; n++) {
		uint64_t old = __atomic_load_n(&regs[n]->owner_ns, __ATOMIC_ACQUIRE);
		if (ntbx_shm_node_alive_at(dir, (int)n) == 0 &&
		    __atomic_compare_exchange_n(&regs[n]->owner_ns, &old, ns, 0,
		                                __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			found = (int)n;
	}
out:
	for (uint32_t n = 0; n < d.nnodes; n++)
		shm_unmap(regs[n], sizeof *regs[n]);
	close(dfd);
	return found;
}
