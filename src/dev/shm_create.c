/* SPDX-License-Identifier: MIT */
/*
 * Creating, destroying and claiming nodes of shm fabrics.
 *
 * A fabric is built in a temporary directory beside its final name and
 * renamed into place, so nobody ever opens a half-made fabric; destroy
 * renames it away first for the same reason.
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

#include "dev/shm.h"
#include "util/util.h"

static int write_file(const char *path, const void *data, size_t len,
                      uint64_t size, mode_t mode, int gid)
{
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	int r = 0;
	if (fchmod(fd, mode) < 0 ||
	    (gid >= 0 && fchown(fd, (uid_t)-1, (gid_t)gid) < 0) ||
	    ftruncate(fd, (off_t)size) < 0 ||
	    (len && pwrite(fd, data, len, 0) != (ssize_t)len))
		r = -errno;
	close(fd);
	return r;
}

static int init_regs(const char *path, int node, int nports, mode_t mode,
                     int gid)
{
	int r = write_file(path, NULL, 0, sizeof(struct shm_node_regs), mode, gid);
	if (r < 0)
		return r;
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct shm_node_regs *regs = mmap(NULL, sizeof *regs,
	                                  PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (regs == MAP_FAILED)
		return -errno;
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
	munmap(regs, sizeof *regs);
	return r;
}

static int remove_tree(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return -errno;
	struct dirent *e;
	char path[PATH_MAX];
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		unlink(path);
	}
	closedir(d);
	return rmdir(dir) < 0 ? -errno : 0;
}

int ntbx_shm_create(const char *dir, const struct shm_create_params *p)
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

	char tmp[PATH_MAX], path[PATH_MAX + 32];
	snprintf(tmp, sizeof tmp, "%s.new.%d", dir, (int)getpid());
	mode_t dmode = p->gid >= 0 ? 0770 : 0700, fmode = p->gid >= 0 ? 0660 : 0600;
	struct stat st;
	int r = 0;
	if (stat(dir, &st) == 0) {
		free(d);
		return -EEXIST;
	}
	if (mkdir(tmp, dmode) < 0) {
		free(d);
		return -errno;
	}
	if (chmod(tmp, dmode) < 0 ||
	    (p->gid >= 0 && chown(tmp, (uid_t)-1, (gid_t)p->gid) < 0))
		r = -errno;
	for (int n = 0; n < p->nnodes && !r; n++) {
		snprintf(path, sizeof path, "%s/node-%d.regs", tmp, n);
		r = init_regs(path, n, p->nports[n], fmode, p->gid);
		snprintf(path, sizeof path, "%s/node-%d.mem", tmp, n);
		if (!r)
			r = write_file(path, NULL, 0, p->mem_size, fmode, p->gid);
		snprintf(path, sizeof path, "%s/node-%d.live", tmp, n);
		if (!r)
			r = write_file(path, NULL, 0, 0, fmode, p->gid);
	}
	snprintf(path, sizeof path, "%s/fabric", tmp);
	if (!r)   /* the descriptor last: it makes the directory a fabric */
		r = write_file(path, d, sizeof *d, sizeof *d, fmode, p->gid);
	free(d);
	if (!r && rename(tmp, dir) < 0)
		r = (errno == ENOTEMPTY || errno == EEXIST) ? -EEXIST : -errno;
	if (r)
		remove_tree(tmp);
	return r;
}

int ntbx_shm_destroy(const char *dir)
{
	struct shm_fabric_desc d;
	int r = ntbx_shm_read_desc(dir, &d);
	if (r == -ENOENT || r == -ENOTDIR)
		return -ENOENT;
	/* Another layout version is destroyed too: that is the fix we
	 * recommend for it. */
	char dead[PATH_MAX];
	snprintf(dead, sizeof dead, "%s.dead.%d", dir, (int)getpid());
	if (rename(dir, dead) < 0)
		return -errno;
	return remove_tree(dead);
}

int ntbx_shm_claim_node(const char *dir, uint64_t ns)
{
	struct shm_fabric_desc d;
	int r = ntbx_shm_read_desc(dir, &d);
	if (r < 0)
		return r;
	struct shm_node_regs *regs[NTBX_MAX_NODES] = { 0 };
	int found = -EBUSY;
	char path[PATH_MAX];
	for (uint32_t n = 0; n < d.nnodes; n++) {
		snprintf(path, sizeof path, "%s/node-%u.regs", dir, n);
		int fd = open(path, O_RDWR | O_CLOEXEC);
		if (fd < 0) {
			found = -errno;
			goto out;
		}
		void *m = mmap(NULL, sizeof *regs[0], PROT_READ | PROT_WRITE,
		               MAP_SHARED, fd, 0);
		close(fd);
		if (m == MAP_FAILED) {
			found = -errno;
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
		if (regs[n])
			munmap(regs[n], sizeof *regs[n]);
	return found;
}
