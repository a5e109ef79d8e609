/* SPDX-License-Identifier: MIT */
/* Fabrics by name: where they live, creating, destroying, listing. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dev/dev.h"
#include "fabric/fabric_priv.h"
#include "util/settings.h"
#include "util/util.h"

#define DIR_PREFIX "ntbx-"

static const char *shm_root(void)
{
	return ntbx_setting_str(NTBX_SET_SHM_DIR);
}

static int name_ok(const char *name)
{
	size_t n = name ? strlen(name) : 0;
	if (n < 1 || n > NTBX_FABRIC_NAME_MAX || name[0] == '.')
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.'))
			return 0;
	}
	/* ".new.PID" and ".dead.PID" name fabrics being made or removed. */
	return !strstr(name, ".new.") && !strstr(name, ".dead.");
}

int ntbx_fabric_dir(const char *name, char *buf, size_t len)
{
	if (!name_ok(name))
		return ntbx_err(EINVAL, "'%s' is not a fabric name: use 1 to %d "
		                "letters, digits, '-', '_' or '.'", name ? name : "",
		                NTBX_FABRIC_NAME_MAX);
	const char *root = shm_root();
	struct stat st;
	if (stat(root, &st) < 0 || !S_ISDIR(st.st_mode))
		return ntbx_err(ENOENT, "NTBX_SHM_DIR='%s' is not a directory; "
		                "set it to an existing directory (default /dev/shm)",
		                root);
	if ((size_t)snprintf(buf, len, "%s/" DIR_PREFIX "%s", root, name) >= len)
		return ntbx_err(ENAMETOOLONG, "fabric path too long under %s", root);
	return 0;
}

int ntbx_fabric_create(const char *name, const struct ntbx_fabric_params *p)
{
	char dir[PATH_MAX - 64];
	int r = ntbx_fabric_dir(name, dir, sizeof dir);
	if (r < 0)
		return r;
	int min = 2;   /* a ring of two is one link (topology.c) */
	if (p->nodes < min || p->nodes > NTBX_MAX_NODES)
		return ntbx_err(EINVAL, "a %s fabric has %d to %d nodes, not %d",
		                ntbx_topology_name(p->topology), min, NTBX_MAX_NODES,
		                p->nodes);
	struct ntbx_dev_create_params *cp = calloc(1, sizeof *cp);
	if (!cp)
		return -ENOMEM;
	cp->name = name;
	cp->nnodes = p->nodes;
	cp->window_max = p->window ? p->window : NTBX_DEFAULT_WINDOW;
	cp->mem_size = p->memory ? p->memory : cp->window_max;
	cp->topology = (uint32_t)p->topology;
	cp->gid = p->gid;
	uint64_t need = (p->topology == NTBX_TOPO_RING ? 2ull * NTBX_LINK_BLOCK_RING
	                 : (uint64_t)(p->nodes - 1) * NTBX_LINK_BLOCK_SWITCH) +
	                (1u << 20);
	if ((cp->window_max & (FAB_PAGE - 1)) || (cp->mem_size & (FAB_PAGE - 1)) ||
	    cp->mem_size < need || cp->mem_size > (1ull << 40)) {
		r = ntbx_err(EINVAL, "window and memory sizes must be multiples of "
		             "4K from %lluK to 1T",
		             (unsigned long long)(need >> 10));
		goto out;
	}
	if (cp->mem_size > cp->window_max) {
		/* Window 0 covers node memory: memory beyond it is unreachable. */
		r = ntbx_err(EINVAL, "node memory (%lluK) is larger than the window "
		             "(%lluK): a peer could not reach all of it; give "
		             "--window at least --memory",
		             (unsigned long long)(cp->mem_size >> 10),
		             (unsigned long long)(cp->window_max >> 10));
		goto out;
	}
	if ((r = fab_wire(p->topology, p->nodes, cp)) < 0)
		goto out;
	r = ntbx_dev_fabric_create(dir, cp);
	if (r == -EEXIST) {
		r = ntbx_err(EEXIST, "fabric '%s' exists already (%s); use it, or "
		             "`ntbx fabric destroy %s` first", name, dir, name);
		goto out;
	}
	if (r < 0) {
		r = ntbx_err(-r, "cannot create fabric '%s' at %s: %s", name, dir,
		             strerror(-r));
		goto out;
	}
	/* Lay out each node's memory: the fabric's block and link blocks. */
	for (int n = 0; n < p->nodes && r == 0; n++) {
		struct ntbx_dev *dev;
		r = ntbx_dev_open(dir, n, &dev);
		if (r == 0) {
			r = fab_node_block_init(dev, p->topology);
			ntbx_dev_close(dev);
		}
	}
	if (r < 0) {
		char msg[512];
		snprintf(msg, sizeof msg, "%s", ntbx_errmsg());
		ntbx_dev_fabric_destroy(dir);
		r = ntbx_err(-r, "cannot create fabric '%s': %s", name, msg);
	}
out:
	free(cp);
	return r;
}

int ntbx_fabric_create_ofi(const char *name, const struct ntbx_fabric_params *p,
                           const char *hosts, const char *key)
{
	char dir[PATH_MAX - 64];
	int r = ntbx_fabric_dir(name, dir, sizeof dir);
	if (r < 0)
		return r;
	int n = 0;
	if ((r = n = ntbx_dev_backend_nodes("ofi", name, hosts, key)) < 0)
		return r;   /* bad --hosts: said why */
	struct ntbx_fabric_params q = *p;
	q.nodes = n;
	q.topology = NTBX_TOPO_SWITCH;
	if ((r = ntbx_fabric_create(name, &q)) < 0)
		return r;
	if ((r = ntbx_dev_backend_add_files("ofi", dir, name, hosts, key,
	                                    p->gid)) < 0) {
		char msg[512];
		snprintf(msg, sizeof msg, "%s", ntbx_errmsg());
		ntbx_dev_fabric_destroy(dir);
		return ntbx_err(-r, "%s", msg);
	}
	return 0;
}

int ntbx_fabric_destroy(const char *name)
{
	char dir[PATH_MAX - 64];
	int r = ntbx_fabric_dir(name, dir, sizeof dir);
	if (r < 0)
		return r;
	r = ntbx_dev_fabric_destroy(dir);
	if (r == -ENOENT)
		return ntbx_err(ENOENT, "no fabric '%s' (looked for %s); `ntbx "
		                "fabric list` shows the fabrics there are", name, dir);
	if (r < 0)
		return ntbx_err(-r, "cannot destroy fabric '%s' at %s: %s", name,
		                dir, strerror(-r));
	return 0;
}

int ntbx_fabric_info(const char *name, struct ntbx_fabric_info *info)
{
	char dir[PATH_MAX - 64];
	int r = ntbx_fabric_dir(name, dir, sizeof dir);
	if (r < 0)
		return r;
	struct ntbx_dev_fabric_desc d;
	memset(info, 0, sizeof *info);
	snprintf(info->name, sizeof info->name, "%s", name);
	r = ntbx_dev_fabric_read(dir, &d);
	if (r == -ENOENT)
		return ntbx_err(ENOENT, "no fabric '%s' (looked for %s); create it "
		                "with `ntbx fabric create %s --nodes N`", name, dir,
		                name);
	info->layout_version = (int)d.layout_version;
	if (r == -EPROTO)
		return ntbx_err(EPROTO, "fabric '%s' has layout version %u, this "
		                "ntbx uses %d: destroy it with `ntbx fabric destroy "
		                "%s` and create it again", name, d.layout_version,
		                (int)d.layout_used, name);
	if (r < 0)
		return r;   /* the device layer said why (owner, symlink, ...) */
	info->nodes = (int)d.nnodes;
	info->topology = d.topology == NTBX_TOPO_RING ? NTBX_TOPO_RING
	                                              : NTBX_TOPO_SWITCH;
	info->window = d.window_max;
	info->memory = d.mem_size;
	for (int n = 0; n < info->nodes; n++)
		if (ntbx_dev_fabric_node_alive(dir, n) > 0)
			info->alive_nodes++;
	return 0;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int ntbx_fabric_list(void (*fn)(const struct ntbx_fabric_info *, void *),
                     void *arg)
{
	DIR *d = opendir(shm_root());
	if (!d)
		return ntbx_err(errno, "cannot read NTBX_SHM_DIR='%s': %s",
		                shm_root(), strerror(errno));
	char *names[1024];
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) && n < 1024)
		if (!strncmp(e->d_name, DIR_PREFIX, strlen(DIR_PREFIX)) &&
		    name_ok(e->d_name + strlen(DIR_PREFIX)))
			names[n++] = strdup(e->d_name + strlen(DIR_PREFIX));
	closedir(d);
	qsort(names, (size_t)n, sizeof *names, name_cmp);
	int count = 0;
	for (int i = 0; i < n; i++) {
		struct ntbx_fabric_info info;
		/* A fabric of another layout version is listed too, so the
		 * user sees it (nodes 0 tells it apart). */
		int r = names[i] ? ntbx_fabric_info(names[i], &info) : -ENOMEM;
		if (r == 0 || r == -EPROTO) {
			if (fn)
				fn(&info, arg);
			count++;
		}
		free(names[i]);
	}
	ntbx_err_clear();
	return count;
}

int ntbx_fabric_open_file(const char *name, const char *file, int flags,
                          uint64_t min_size)
{
	char dir[PATH_MAX - 64];
	int r = ntbx_fabric_dir(name, dir, sizeof dir);
	if (r < 0)
		return r;
	return ntbx_dev_fabric_open_file(name, dir, file, flags, min_size);
}

const char *ntbx_fabric_default_name(void)
{
	static __thread char name[32];
	uid_t u = geteuid();
	if (u == 0)
		return "default";
	snprintf(name, sizeof name, "default-%u", (unsigned)u);
	return name;
}

/* ------------------------------------------------------ private fabrics */

#define OWNER_LOCK "owner.lock"

/* 1 if the owner lock of fabric @name is held, 0 if not, -ENOENT if the
 * fabric has none (not a private fabric, or one being made). */
static int owner_held(const char *name)
{
	int fd = ntbx_fabric_open_file(name, OWNER_LOCK, O_RDWR, 0);
	if (fd < 0)
		return fd;
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET,
	                    .l_start = 0, .l_len = 1 };
	int held = fcntl(fd, F_OFD_SETLK, &fl) < 0;
	close(fd);   /* drops the lock we may have taken */
	return held;
}

struct reap_ctx { char (*names)[NTBX_FABRIC_NAME_MAX + 1]; int n, max; };

static void reap_cb(const struct ntbx_fabric_info *fi, void *arg)
{
	struct reap_ctx *c = arg;
	if (c->n < c->max)
		snprintf(c->names[c->n++], sizeof c->names[0], "%s", fi->name);
}

int ntbx_fabric_reap_private(void)
{
	char (*names)[NTBX_FABRIC_NAME_MAX + 1] = calloc(256, sizeof *names);
	if (!names)
		return -ENOMEM;
	struct reap_ctx c = { names, 0, 256 };
	ntbx_fabric_list(reap_cb, &c);
	int reaped = 0;
	for (int i = 0; i < c.n; i++)
		if (owner_held(names[i]) == 0 && ntbx_fabric_destroy(names[i]) == 0)
			reaped++;
	free(names);
	ntbx_err_clear();
	return reaped;
}

int ntbx_fabric_create_private(const char *tag,
                               const struct ntbx_fabric_params *p,
                               char *name, size_t len, int *lock_fd)
{
	ntbx_fabric_reap_private();
	int r = -EEXIST;
	for (int tries = 0; tries < 16 && r == -EEXIST; tries++) {
		uint32_t rnd = 0;
		if (getrandom(&rnd, sizeof rnd, 0) != sizeof rnd)
			rnd = (uint32_t)(ntbx_now_ns() ^ (uint64_t)getpid() << 16);
		if ((size_t)snprintf(name, len, "%s-%08x", tag, rnd) >= len)
			return ntbx_err(ENAMETOOLONG, "fabric name too long");
		r = ntbx_fabric_create(name, p);
	}
	if (r < 0)
		return r;
	/* The lock is taken before the file gets the name a reaper looks
	 * for, so no reaper ever finds it free while we live. */
	int fd = ntbx_fabric_open_file(name, OWNER_LOCK ".new", O_RDWR | O_CREAT,
	                               0);
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET,
	                    .l_start = 0, .l_len = 1 };
	char dir[PATH_MAX - 64];
	if (fd < 0 || fcntl(fd, F_OFD_SETLK, &fl) < 0 ||
	    ntbx_fabric_dir(name, dir, sizeof dir) < 0) {
		r = fd < 0 ? fd : ntbx_err(errno, "fabric '%s': cannot lock %s",
		                           name, OWNER_LOCK);
		if (fd >= 0)
			close(fd);
		ntbx_fabric_destroy(name);
		return r;
	}
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0 || renameat(dfd, OWNER_LOCK ".new", dfd, OWNER_LOCK) < 0) {
		r = ntbx_err(errno, "fabric '%s': cannot name its owner lock: %s",
		             name, strerror(errno));
		if (dfd >= 0)
			close(dfd);
		close(fd);
		ntbx_fabric_destroy(name);
		return r;
	}
	close(dfd);
	*lock_fd = fd;
	return 0;
}
