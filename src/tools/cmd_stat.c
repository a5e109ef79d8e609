/* SPDX-License-Identifier: MIT */
/*
 * ntbx stat [--fabric F] [--json] — live connections of programs run with
 * `ntbx run`, like smcss: endpoints, nodes, path (fabric, or tcp and why),
 * bytes each way.  Reads the fabric's socket table; changes nothing.
 * Rows whose processes are all gone (by the locks the kernel dropped, not
 * by pid) are not shown.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ntbx/fabric.h"
#include "sock/sock_tab.h"
#include "args.h"
#include "tool.h"

static void addr_str(const struct sk_addr *a, char *buf, size_t len)
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

int cmd_stat(int argc, char **argv)
{
	const char *fabric = NULL;
	int json = 0, all = 0;
	for (int i = 1; i < argc; i++) {
		const char *v;
		if (is_help(argv[i])) {
			printf("usage: ntbx stat [--fabric F] [--all] [--json]\n"
			       "\nLive connections of programs run with `ntbx run`: "
			       "connector and listener\naddresses, nodes, path "
			       "(fabric, or tcp with the reason), bytes each way.\n"
			       "--all also lists connections still negotiating.\n");
			return 0;
		}
		if ((v = opt_value(argc, argv, &i, "--fabric")))
			fabric = v;
		else if (opt_flag(argv[i], "--json"))
			json = 1;
		else if (opt_flag(argv[i], "--all"))
			all = 1;
		else
			bad_arg(argv[i]);
	}
	fabric = default_fabric(fabric);
	struct ntbx_fabric_info info;
	if (ntbx_fabric_info(fabric, &info) < 0)
		runtime_die("%s", ntbx_errmsg());
	int fd = ntbx_fabric_open_file(fabric, SK_TAB_FILE, O_RDONLY, 0);
	if (fd == -ENOENT) {
		if (!json)
			printf("no connections (no program has listened under "
			       "`ntbx run` on fabric '%s')\n", fabric);
		return 0;
	}
	if (fd < 0)
		runtime_die("%s", ntbx_errmsg());
	struct stat st;
	if (fstat(fd, &st) < 0 || (size_t)st.st_size < sizeof(struct sk_tab)) {
		close(fd);
		runtime_die("fabric '%s': %s is not a socket table of this ntbx "
		            "version", fabric, SK_TAB_FILE);
	}
	const struct sk_tab *t = mmap(NULL, sizeof *t, PROT_READ, MAP_SHARED,
	                              fd, 0);
	if (t == MAP_FAILED)
		runtime_die("cannot map %s: %s", SK_TAB_FILE, strerror(errno));
	/* Liveness: a connection's sides by their locks on the table file
	 * (F_OFD_GETLK through fd, which changes nothing; an error shows the
	 * row); a listener's process by its device handle's lock, read
	 * through an observer (changes nothing; without one, every listener
	 * is shown). */
	struct ntbx_dev *obs = NULL;
	char dir[PATH_MAX];
	if (ntbx_fabric_dir(fabric, dir, sizeof dir) < 0 ||
	    ntbx_dev_observe_shm(dir, 0, &obs) < 0)
		obs = NULL;
	if (!json)
		printf("%-6s %-24s %-24s %-9s %-9s %14s %14s  %s\n", "kind",
		       "local (connector)", "remote (listener)", "nodes", "path",
		       "bytes c->l", "bytes l->c", "reason");
	int n = 0;
	for (int i = 0; i < SK_LISTENERS; i++) {
		const struct sk_listener *l = &t->l[i];
		if (__atomic_load_n(&l->state, __ATOMIC_ACQUIRE) != 1 ||
		    (obs && !sk_id_alive(obs, __atomic_load_n(&l->id,
		                                              __ATOMIC_ACQUIRE))))
			continue;   /* free, or its process died */
		char a[80];
		addr_str(&l->a, a, sizeof a);
		if (json)
			printf("{\"kind\":\"listen\",\"addr\":\"%s\",\"node\":%u,"
			       "\"pid\":%d}\n", a, l->node, l->pid);
		else
			printf("%-6s %-24s %-24s %-9u %-9s %14s %14s  pid %d\n",
			       "listen", a, "-", l->node, "fabric", "-", "-", l->pid);
	}
	for (int i = 0; i < SK_CONNS; i++) {
		const struct sk_conn *c = &t->c[i];
		uint32_t s = __atomic_load_n(&c->state, __ATOMIC_ACQUIRE);
		if (s == SK_FREE || s == SK_CLAIM)
			continue;
		if (!all && (s == SK_REQ || s == SK_ANS || s == SK_ACC))
			continue;
		if (!sk_side_locked(fd, i, 'C') && !sk_side_locked(fd, i, 'A'))
			continue;   /* every process of it is gone (side locks) */
		char a[80], b[80], nodes[24], reason[65];
		addr_str(&c->cl, a, sizeof a);
		addr_str(&c->dst, b, sizeof b);
		snprintf(nodes, sizeof nodes, "%u->%u", c->node_c, c->node_a);
		memcpy(reason, c->reason, 64);
		reason[64] = 0;
		for (char *p = reason; *p; p++)
			if (*p == '"' || *p == '\\' || (unsigned char)*p < 32)
				*p = ' ';
		const char *path_s = s == SK_FAB ? "fabric"
		                     : s == SK_TCP ? "tcp" : "pending";
		unsigned long long ca = c->bytes_ca + c->tcp_sent;
		unsigned long long ac = c->bytes_ac;
		if (json)
			printf("{\"kind\":\"conn\",\"local\":\"%s\",\"remote\":\"%s\","
			       "\"node_c\":%u,\"node_l\":%u,\"path\":\"%s\","
			       "\"bytes_cl\":%llu,\"bytes_lc\":%llu,"
			       "\"fabric_bytes_cl\":%llu,\"reason\":\"%s\"}\n",
			       a, b, c->node_c, c->node_a, path_s, ca, ac,
			       (unsigned long long)c->bytes_ca, reason);
		else
			printf("%-6s %-24s %-24s %-9s %-9s %14llu %14llu  %s\n",
			       "conn", a, b, nodes, path_s, ca, ac, reason);
		n++;
	}
	if (!json && !n)
		printf("(no live connections)\n");
	munmap((void *)t, sizeof *t);
	if (obs)
		ntbx_dev_close(obs);
	close(fd);
	return 0;
}
