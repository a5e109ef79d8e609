/* SPDX-License-Identifier: MIT */
/*
 * sock_view.c — read-only view of the live-connection table (sock_view.h).
 * Built into `ntbx`; the preload, which writes the table, uses only
 * sk_addr_str from here.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dev/dev.h"
#include "ntbx/fabric.h"
#include "sock/sock_view.h"

struct sk_view {
	int fd;
	const struct sk_tab *t;
	struct ntbx_dev *obs;   /* NULL: every listener is shown */
};

int sk_view_open(const char *fabric, struct sk_view **out, char *err,
                 size_t errlen)
{
	*out = NULL;
	int fd = ntbx_fabric_open_file(fabric, SK_TAB_FILE, O_RDONLY, 0);
	if (fd == -ENOENT)
		return -ENOENT;
	if (fd < 0) {
		snprintf(err, errlen, "%s", ntbx_errmsg());
		return fd;
	}
	struct stat st;
	if (fstat(fd, &st) < 0 || (size_t)st.st_size < sizeof(struct sk_tab)) {
		close(fd);
		snprintf(err, errlen, "fabric '%s': %s is not a socket table of "
		         "this ntbx version", fabric, SK_TAB_FILE);
		return -EPROTO;
	}
	const struct sk_tab *t = mmap(NULL, sizeof *t, PROT_READ, MAP_SHARED,
	                              fd, 0);
	if (t == MAP_FAILED) {
		int e = errno;
		close(fd);
		snprintf(err, errlen, "cannot map %s of fabric '%s': %s",
		         SK_TAB_FILE, fabric, strerror(e));
		return -e;
	}
	struct sk_view *v = calloc(1, sizeof *v);
	if (!v) {
		munmap((void *)t, sizeof *t);
		close(fd);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	v->fd = fd;
	v->t = t;
	char dir[PATH_MAX];
	if (ntbx_fabric_dir(fabric, dir, sizeof dir) < 0 ||
	    ntbx_dev_observe(dir, 0, &v->obs) < 0)
		v->obs = NULL;
	*out = v;
	return 0;
}

void sk_view_close(struct sk_view *v)
{
	if (!v)
		return;
	munmap((void *)v->t, sizeof *v->t);
	if (v->obs)
		ntbx_dev_close(v->obs);
	close(v->fd);
	free(v);
}

int sk_view_listeners(struct sk_view *v, struct sk_view_listener *out,
                      int max)
{
	int n = 0;
	for (int i = 0; i < SK_LISTENERS && n < max; i++) {
		struct sk_listener l;
		memcpy(&l, &v->t->l[i], sizeof l);   /* once; then the copy */
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (l.state != 1 || (v->obs && !sk_id_alive(v->obs, l.id)))
			continue;   /* free, or its process died */
		out[n].a = l.a;
		out[n].node = l.node;
		out[n].pid = l.pid;
		n++;
	}
	return n;
}

int sk_view_conns(struct sk_view *v, int all, struct sk_view_conn *out,
                  int max)
{
	int n = 0;
	for (int i = 0; i < SK_CONNS && n < max; i++) {
		uint32_t s = __atomic_load_n(&v->t->c[i].state, __ATOMIC_ACQUIRE);
		if (s == SK_FREE || s == SK_CLAIM)
			continue;
		if (!all && s != SK_FAB && s != SK_TCP)
			continue;
		if (!sk_side_locked(v->fd, i, 'C') && !sk_side_locked(v->fd, i, 'A'))
			continue;   /* every process of it is gone (side locks) */
		struct sk_conn c;
		memcpy(&c, &v->t->c[i], sizeof c);   /* once; then the copy */
		if (c.state == SK_FREE || c.state == SK_CLAIM)
			continue;   /* ended meanwhile */
		struct sk_view_conn *o = &out[n++];
		memset(o, 0, sizeof *o);
		o->slot = i;
		o->gen = c.gen;
		o->state = c.state;
		o->path = c.state == SK_FAB ? "fabric"
		          : c.state == SK_TCP ? "tcp" : "pending";
		o->node_c = c.node_c;
		o->node_a = c.node_a;
		o->pid_c = c.pid_c;
		o->pid_a = c.pid_a;
		o->cl = c.cl;
		o->dst = c.dst;
		o->fabric_bytes_cl = c.bytes_ca;
		o->bytes_cl = c.bytes_ca + c.tcp_sent;
		o->bytes_lc = c.bytes_ac;
		o->confined_slices = c.sliced;
		for (size_t k = 0; k < sizeof c.reason && c.reason[k]; k++) {
			char ch = c.reason[k];
			o->reason[k] = ch < 32 || ch > 126 || ch == '"' || ch == '\\'
			               ? ' ' : ch;
		}
	}
	return n;
}

void sk_addr_str(const struct sk_addr *a, char *buf, size_t len)
{
	static const uint8_t v4[12] = { [10] = 0xff, [11] = 0xff };
	if (!memcmp(a->ip, v4, 12)) {
		snprintf(buf, len, "%u.%u.%u.%u:%u", a->ip[12], a->ip[13],
		         a->ip[14], a->ip[15], a->port);
		return;
	}
	char s[64] = "";
	for (int i = 0; i < 16; i += 2)
		snprintf(s + strlen(s), sizeof s - strlen(s), "%s%x", i ? ":" : "",
		         a->ip[i] << 8 | a->ip[i + 1]);
	snprintf(buf, len, "[%s]:%u", s, a->port);
}
