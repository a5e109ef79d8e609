/* SPDX-License-Identifier: MIT */
/*
 * The ofi backend's files (see ofi.h): the description every host writes
 * the same way at `ntbx fabric create --backend ofi --hosts ...`, the
 * agent's control file and the area peers write by RMA; and which host
 * this one is.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dev/ofi/ofi.h"
#include "util/settings.h"
#include "util/util.h"

uint64_t ofi_key_hash(const char *name, const char *key)
{
	if (!key || !*key)
		return 0;
	/* FNV-1a over name NUL key: an identity check against mistakes (a
	 * host of another fabric), not authentication (see design-notes) */
	uint64_t h = 0xcbf29ce484222325ull;
	for (const char *s = name; *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
	h = (h ^ 0) * 0x100000001b3ull;
	for (const char *s = key; *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
	return h ? h : 1;
}

int ofi_parse_hosts(const char *hosts, struct ofi_desc_file *d)
{
	int n = 0;
	const char *p = hosts ? hosts : "";
	while (*p) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (n >= NTBX_MAX_NODES)
			return ntbx_err(EINVAL, "--hosts names more than %d hosts",
			                NTBX_MAX_NODES);
		char tmp[OFI_HOST_MAX + 16];
		if (!len || len >= sizeof tmp)
			return ntbx_err(EINVAL, "--hosts: entry %d is empty or too "
			                "long", n + 1);
		memcpy(tmp, p, len);
		tmp[len] = 0;
		long port = OFI_DEFAULT_PORT;
		/* [v6]:port, v4:port, name:port; a bare v6 address has 2+ ':' */
		char *addr = tmp, *colon = NULL;
		if (tmp[0] == '[') {
			char *rb = strchr(tmp, ']');
			if (!rb || (rb[1] && rb[1] != ':'))
				return ntbx_err(EINVAL, "--hosts: bad entry '%s'", tmp);
			*rb = 0;
			addr = tmp + 1;
			colon = rb[1] ? rb + 1 : NULL;
		} else if (strchr(tmp, ':') == strrchr(tmp, ':')) {
			colon = strchr(tmp, ':');
		}
		if (colon) {
			*colon = 0;
			char *end;
			errno = 0;
			port = strtol(colon + 1, &end, 10);
			if (errno || *end || port < 1 || port > 65534)
				return ntbx_err(EINVAL, "--hosts: bad port in '%.*s' (1 to "
				                "65534; the endpoint uses port + 1)",
				                (int)len, p);
		}
		if (!*addr || strlen(addr) >= OFI_HOST_MAX)
			return ntbx_err(EINVAL, "--hosts: bad address in '%.*s'",
			                (int)len, p);
		for (int i = 0; i < n; i++)
			if (!strcmp(d->host[i].addr, addr) &&
			    d->host[i].port == (uint32_t)port)
				return ntbx_err(EINVAL, "--hosts names %s:%ld twice", addr,
				                port);
		memcpy(d->host[n].addr, addr, strlen(addr) + 1);   /* fits: above */
		d->host[n].port = (uint32_t)port;
		n++;
		p += len;
		if (*p == ',')
			p++;
	}
	if (n < 2)
		return ntbx_err(EINVAL, "--hosts names %d host%s; a fabric has at "
		                "least 2 (a,b[:port],...)", n, n == 1 ? "" : "s");
	d->nhosts = (uint32_t)n;
	return n;
}

static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len) {
		ssize_t w = write(fd, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

int ofi_files_create(const char *dir, const char *name, const char *hosts,
                     const char *key, int gid, int *nhosts)
{
	struct ofi_desc_file *d = calloc(1, sizeof *d);
	if (!d)
		return -ENOMEM;
	int r = ofi_parse_hosts(hosts, d);
	if (r < 0)
		goto out;
	if (nhosts)
		*nhosts = r;
	memcpy(d->magic, OFI_DESC_MAGIC, 8);
	d->version = OFI_VERSION;
	snprintf(d->name, sizeof d->name, "%s", name);
	d->key_hash = ofi_key_hash(name, key);
	if (!dir) {
		r = 0;
		goto out;
	}
	int dfd;
	struct stat dst;
	if ((r = shm_dir_open(dir, &dfd, &dst)) < 0)
		goto out;
	mode_t mode = gid >= 0 ? 0660 : 0600;
	int fd = shm_file_create(dfd, "ofi.desc", mode, gid, 0);
	if (fd >= 0) {
		r = write_all(fd, d, sizeof *d);
		close(fd);
	} else {
		r = fd;
	}
	if (r == 0) {
		fd = shm_file_create(dfd, "ofi.ctl", mode, gid, sizeof(struct ofi_ctl));
		if (fd >= 0) {
			struct ofi_ctl h;
			memset(&h, 0, offsetof(struct ofi_ctl, active));
			h.magic = OFI_CTL_MAGIC;
			h.version = OFI_VERSION;
			h.rank = -1;
			r = pwrite(fd, &h, offsetof(struct ofi_ctl, active), 0) < 0 ?
			    -errno : 0;
			close(fd);
		} else {
			r = fd;
		}
	}
	if (r == 0) {
		fd = shm_file_create(dfd, "ofi.expo", mode, gid, OFI_EXPO_SIZE);
		r = fd < 0 ? fd : 0;
		if (fd >= 0)
			close(fd);
	}
	close(dfd);
	if (r < 0)
		r = ntbx_err(-r, "fabric '%s': cannot write its ofi files at %s: %s",
		             name, dir, strerror(-r));
out:
	free(d);
	return r;
}

int ofi_read_desc_at(int dfd, const struct stat *dst, struct ofi_desc_file *d)
{
	memset(d, 0, sizeof *d);
	int fd = shm_file_open(dfd, dst, "ofi.desc", O_RDONLY, 0, 0);
	if (fd == -ENOENT)
		return -ENOENT;
	if (fd < 0)
		return fd;
	ssize_t n = pread(fd, d, sizeof *d, 0);
	close(fd);
	if (n != (ssize_t)sizeof *d || memcmp(d->magic, OFI_DESC_MAGIC, 8) ||
	    d->version != OFI_VERSION || d->nhosts < 2 ||
	    d->nhosts > NTBX_MAX_NODES)
		return -EPROTO;
	d->name[sizeof d->name - 1] = 0;
	for (uint32_t i = 0; i < d->nhosts; i++) {
		d->host[i].addr[OFI_HOST_MAX - 1] = 0;
		if (!d->host[i].addr[0] || !d->host[i].port ||
		    d->host[i].port > 65534)
			return -EPROTO;
	}
	return 0;
}

int ofi_read_desc(const char *dir, struct ofi_desc_file *d)
{
	int dfd;
	struct stat dst;
	int r = shm_dir_open(dir, &dfd, &dst);
	if (r < 0)
		return r;
	r = ofi_read_desc_at(dfd, &dst, d);
	close(dfd);
	return r;
}

int ofi_is_fabric(const char *dir)
{
	int dfd;
	struct stat dst;
	if (shm_dir_open(dir, &dfd, &dst) < 0)
		return 0;
	int fd = shm_file_open(dfd, &dst, "ofi.desc", O_RDONLY, 0, 0);
	close(dfd);
	if (fd < 0)
		return 0;
	close(fd);
	return 1;
}

/* Is @host (numeric, or a name) one of this namespace's addresses? */
static int host_is_local(const char *host, struct ifaddrs *ifs)
{
	struct addrinfo hints = { .ai_flags = AI_NUMERICSERV }, *ai = NULL;
	if (getaddrinfo(host, NULL, &hints, &ai))
		return 0;
	int found = 0;
	for (struct addrinfo *a = ai; a && !found; a = a->ai_next)
		for (struct ifaddrs *i = ifs; i && !found; i = i->ifa_next) {
			if (!i->ifa_addr || i->ifa_addr->sa_family != a->ai_family)
				continue;
			if (a->ai_family == AF_INET)
				found = !memcmp(&((struct sockaddr_in *)a->ai_addr)->sin_addr,
				                &((struct sockaddr_in *)i->ifa_addr)->sin_addr, 4);
			else if (a->ai_family == AF_INET6)
				found = !memcmp(&((struct sockaddr_in6 *)a->ai_addr)->sin6_addr,
				                &((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr,
				                16);
		}
	freeaddrinfo(ai);
	return found;
}

int ofi_local_rank(const struct ofi_desc_file *d, char *why, size_t wlen)
{
	static const enum ntbx_setting_id envs[] = {
		NTBX_SET_PMIX_RANK, NTBX_SET_SLURM_PROCID, NTBX_SET_PMI_RANK };
	for (size_t i = 0; i < sizeof envs / sizeof envs[0]; i++) {
		const char *s = ntbx_setting_str(envs[i]);
		if (!s || !*s)
			continue;
		char *end;
		errno = 0;
		long v = strtol(s, &end, 10);
		if (errno || *end || v < 0 || v >= (long)d->nhosts) {
			snprintf(why, wlen, "%s='%s' is not a node of fabric '%s' (0 to "
			         "%u)", ntbx_setting_desc(envs[i])->name, s, d->name,
			         d->nhosts - 1);
			return -ERANGE;
		}
		return (int)v;
	}
	struct ifaddrs *ifs = NULL;
	if (getifaddrs(&ifs) < 0) {
		snprintf(why, wlen, "getifaddrs: %s", strerror(errno));
		return -errno;
	}
	int rank = -ENOENT;
	for (uint32_t n = 0; n < d->nhosts && rank < 0; n++)
		if (host_is_local(d->host[n].addr, ifs))
			rank = (int)n;
	freeifaddrs(ifs);
	if (rank < 0)
		snprintf(why, wlen, "none of the hosts of fabric '%s' (%s, ...) is an "
		         "address of this host; set PMIX_RANK (or SLURM_PROCID, "
		         "PMI_RANK) to its position in --hosts", d->name,
		         d->host[0].addr);
	return rank;
}

/* The hosts of @d as the device contract gives them (dev/dev.h). */
static void hosts_of(const struct ofi_desc_file *d, struct ntbx_dev_hosts *h)
{
	_Static_assert(OFI_HOST_MAX == NTBX_DEV_HOST_MAX, "host address sizes");
	memset(h, 0, sizeof *h);
	h->nhosts = d->nhosts;
	for (uint32_t n = 0; n < d->nhosts; n++) {
		memcpy(h->host[n].addr, d->host[n].addr, OFI_HOST_MAX);
		h->host[n].port = d->host[n].port;
	}
}

int ofi_status(const char *dir, struct ntbx_dev_agent_status *st)
{
	memset(st, 0, sizeof *st);
	int dfd;
	struct stat dst;
	int r = shm_dir_open(dir, &dfd, &dst);
	if (r < 0)
		return r;
	struct ofi_desc_file d;
	if ((r = ofi_read_desc_at(dfd, &dst, &d)) < 0) {
		close(dfd);
		return r;
	}
	hosts_of(&d, &st->hosts);
	int fd = shm_file_open(dfd, &dst, "ofi.ctl", O_RDONLY, 0,
	                       sizeof(struct ofi_ctl));
	close(dfd);
	if (fd < 0)
		return fd;
	void *m;
	if ((r = shm_map_fd(fd, sizeof(struct ofi_ctl), 0, &m)) < 0) {
		close(fd);
		return r;
	}
	const struct ofi_ctl *c = m;
	/* read once, checked by the printer (strings cut here) */
	st->agent_alive = shm_locked_by_other(fd, 0, 1) > 0;
	st->rank = __atomic_load_n(&c->rank, __ATOMIC_ACQUIRE);
	st->agent_pid = c->agent_pid;
	memcpy(st->provider, c->provider, sizeof st->provider);
	st->provider[sizeof st->provider - 1] = 0;
	for (uint32_t n = 0; n < st->hosts.nhosts; n++) {
		st->up[n] = __atomic_load_n(&c->node[n].up, __ATOMIC_ACQUIRE) == 1;
		st->epoch[n] = __atomic_load_n(&c->node[n].epoch, __ATOMIC_ACQUIRE);
		memcpy(st->why[n], c->node[n].why, sizeof st->why[n]);
		st->why[n][sizeof st->why[n] - 1] = 0;
		uint32_t na = __atomic_load_n(&c->node[n].naddrs, __ATOMIC_ACQUIRE);
		st->naddrs[n] = na < NTBX_NODE_ADDRS ? na : NTBX_NODE_ADDRS;
		memcpy(st->addrs[n], c->node[n].addrs, sizeof st->addrs[n]);
	}
	shm_unmap(m, sizeof(struct ofi_ctl));
	close(fd);
	return 0;
}

/* ------------------------------------ this backend's part of dev/dev.h */

int ofi_nodes(const char *name, const char *hosts, const char *key)
{
	int n = 0;
	int r = ofi_files_create(NULL, name, hosts, key, -1, &n);
	return r < 0 ? r : n;
}

int ofi_add_files(const char *dir, const char *name, const char *hosts,
                  const char *key, int gid)
{
	return ofi_files_create(dir, name, hosts, key, gid, NULL);
}

int ofi_hosts(const char *dir, struct ntbx_dev_hosts *h)
{
	struct ofi_desc_file d;
	int r = ofi_read_desc(dir, &d);
	if (r == 0)
		hosts_of(&d, h);
	return r;
}

int ofi_host_node(const char *dir, char *why, size_t wlen)
{
	struct ofi_desc_file d;
	int r = ofi_read_desc(dir, &d);
	if (r < 0) {
		snprintf(why, wlen, "cannot read the fabric's description "
		         "(ofi.desc): %s", strerror(-r));
		return r;
	}
	return ofi_local_rank(&d, why, wlen);
}
