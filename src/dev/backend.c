/* SPDX-License-Identifier: MIT */
/*
 * The device contract's calls that are not on an open device (dev/dev.h):
 * a fabric's directory, and the table of backends by name, so that the
 * layers above ask for "the fabric at this directory" and never name a
 * backend's header or function.  A fabric's directory is the shm
 * backend's on every backend; a backend with more (ofi's files) is told
 * apart by them, and is listed before shm, the default.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dev/dev.h"
#include "dev/ofi/ofi.h"
#include "dev/shm/shm.h"
#include "util/util.h"

/* ------------------------------------------------- a fabric's directory */

int ntbx_dev_fabric_create(const char *dir,
                           const struct ntbx_dev_create_params *p)
{
	return ntbx_shm_create(dir, p);
}

int ntbx_dev_fabric_destroy(const char *dir)
{
	return ntbx_shm_destroy(dir);
}

int ntbx_dev_fabric_read(const char *dir, struct ntbx_dev_fabric_desc *d)
{
	struct shm_fabric_desc sd;
	memset(&sd, 0, sizeof sd);
	int r = ntbx_shm_read_desc(dir, &sd);
	memset(d, 0, sizeof *d);
	d->layout_version = sd.layout_version;
	d->layout_used = SHM_LAYOUT_VERSION;
	if (r < 0)
		return r;
	d->nnodes = sd.nnodes;
	d->topology = sd.topology;
	d->window_max = sd.window_max;
	d->mem_size = sd.mem_size;
	return 0;
}

int ntbx_dev_fabric_node_alive(const char *dir, int node)
{
	return ntbx_shm_node_alive_at(dir, node);
}

int ntbx_dev_fabric_claim_node(const char *dir, uint64_t ns)
{
	return ntbx_shm_claim_node(dir, ns);
}

int ntbx_dev_fabric_open_file(const char *name, const char *dir,
                              const char *file, int flags, uint64_t min_size)
{
	int dfd;
	struct stat dst;
	int r = shm_dir_open(dir, &dfd, &dst);
	if (r == -ENOENT)
		return ntbx_err(ENOENT, "no fabric '%s' (looked for %s)", name, dir);
	if (r < 0)
		return r;
	int fd = -ENOENT;
	if (flags & O_CREAT) {
		/* a group fabric's directory is group-writable: its files too */
		int group = (dst.st_mode & 070) == 070;
		fd = shm_file_create(dfd, file, group ? 0660 : 0600,
		                     group ? (int)dst.st_gid : -1, min_size);
	}
	if (fd == -ENOENT || fd == -EEXIST)
		fd = shm_file_open(dfd, &dst, file, flags & ~(O_CREAT | O_EXCL), 0,
		                   min_size);
	close(dfd);
	if (fd < 0 && fd != -EPROTO && fd != -ELOOP)
		ntbx_err(-fd, "fabric '%s': cannot open %s: %s", name, file,
		         strerror(-fd));
	return fd;
}

/* ------------------------------------------------------------- backends */

/* What a backend offers the layers above besides its ops table.  The
 * entries after open are for a backend whose nodes are hosts (NULL on one
 * whose nodes are all on this machine). */
struct backend {
	const char *name;
	int (*is_fabric)(const char *dir);     /* NULL: any fabric directory */
	int (*open)(const char *dir, int node, struct ntbx_dev **out);
	int (*observe)(const char *dir, int node, struct ntbx_dev **out);
	int (*nodes)(const char *name, const char *hosts, const char *key);
	int (*add_files)(const char *dir, const char *name, const char *hosts,
	                 const char *key, int gid);
	int (*hosts)(const char *dir, struct ntbx_dev_hosts *h);
	int (*host_node)(const char *dir, char *why, size_t wlen);
	int (*agent_status)(const char *dir, struct ntbx_dev_agent_status *st);
};

static const struct backend backends[] = {
	/* an ofi fabric's directory on this host is the shm backend's, of
	 * which the host's node is real: observed as such */
	{ "ofi", ofi_is_fabric, ntbx_dev_open_ofi, ntbx_dev_observe_shm,
	  ofi_nodes, ofi_add_files, ofi_hosts, ofi_host_node, ofi_status },
	{ "shm", NULL, ntbx_dev_open_shm, ntbx_dev_observe_shm,
	  NULL, NULL, NULL, NULL, NULL },
};
#define NBACKENDS (sizeof backends / sizeof backends[0])

static const struct backend *backend_of(const char *dir)
{
	for (size_t i = 0; i < NBACKENDS; i++)
		if (!backends[i].is_fabric || backends[i].is_fabric(dir))
			return &backends[i];
	return &backends[NBACKENDS - 1];
}

static const struct backend *backend_named(const char *name)
{
	for (size_t i = 0; i < NBACKENDS; i++)
		if (name && !strcmp(backends[i].name, name))
			return &backends[i];
	return NULL;
}

const char *ntbx_dev_backend_of(const char *dir)
{
	return backend_of(dir)->name;
}

int ntbx_dev_fabric_spans_hosts(const char *dir)
{
	return backend_of(dir)->hosts != NULL;
}

int ntbx_dev_open(const char *dir, int node, struct ntbx_dev **out)
{
	return backend_of(dir)->open(dir, node, out);
}

int ntbx_dev_observe(const char *dir, int node, struct ntbx_dev **out)
{
	return backend_of(dir)->observe(dir, node, out);
}

int ntbx_dev_backend_nodes(const char *backend, const char *name,
                           const char *hosts, const char *key)
{
	const struct backend *b = backend_named(backend);
	if (!b)
		return ntbx_err(EINVAL, "no backend '%s' (shm or ofi)",
		                backend ? backend : "");
	return b->nodes ? b->nodes(name, hosts, key) : 0;
}

int ntbx_dev_backend_add_files(const char *backend, const char *dir,
                               const char *name, const char *hosts,
                               const char *key, int gid)
{
	const struct backend *b = backend_named(backend);
	if (!b)
		return ntbx_err(EINVAL, "no backend '%s' (shm or ofi)",
		                backend ? backend : "");
	return b->add_files ? b->add_files(dir, name, hosts, key, gid) : 0;
}

int ntbx_dev_fabric_hosts(const char *dir, struct ntbx_dev_hosts *h)
{
	const struct backend *b = backend_of(dir);
	return b->hosts ? b->hosts(dir, h) : -ENOENT;
}

int ntbx_dev_fabric_host_node(const char *dir, char *why, size_t wlen)
{
	const struct backend *b = backend_of(dir);
	if (!b->host_node) {
		snprintf(why, wlen, "the fabric has all its nodes on this machine "
		         "(%s backend)", b->name);
		return -ENOENT;
	}
	return b->host_node(dir, why, wlen);
}

int ntbx_dev_fabric_agent_status(const char *dir,
                                 struct ntbx_dev_agent_status *st)
{
	const struct backend *b = backend_of(dir);
	return b->agent_status ? b->agent_status(dir, st) : -ENOENT;
}
