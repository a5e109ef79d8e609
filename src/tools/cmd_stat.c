/* SPDX-License-Identifier: MIT */
/*
 * ntbx stat — live connections of programs run with `ntbx run`, like
 * smcss: endpoints, nodes, path (fabric, or tcp and why), bytes each way.
 *   (default)      one table;  --json: one object a line
 *   --watch        a refreshing view with byte rates, like vma_stats -v
 *                  (every --interval S; ends on Ctrl-C or after --count N
 *                  frames)
 *   --prometheus   the text exposition format: counters per connection,
 *                  gauges per path and per node, for a scraper to graph
 * Reads the fabric's socket table through the sockets layer's view
 * (sock/sock_view.h); changes nothing.  Rows whose processes are all gone
 * (by the locks the kernel dropped, not by pid) are not shown.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dev/dev.h"
#include "ntbx/fabric.h"
#include "sock/sock_view.h"
#include "args.h"
#include "tool.h"

enum mode { M_TABLE, M_JSON, M_WATCH, M_PROM };

struct snap {
	int nl, nc;
	struct sk_view_listener l[SK_LISTENERS];
	struct sk_view_conn c[SK_CONNS];
};

/* One look at the table.  An absent table (nobody listened yet) is an
 * empty one, and -ENOENT. */
static int snap_take(const char *fabric, int all, struct snap *s)
{
	struct sk_view *v;
	char err[512] = "";
	s->nl = s->nc = 0;
	int rc = sk_view_open(fabric, &v, err, sizeof err);
	if (rc == -ENOENT)
		return rc;
	if (rc < 0)
		runtime_die("%s", err);
	s->nl = sk_view_listeners(v, s->l, SK_LISTENERS);
	s->nc = sk_view_conns(v, all, s->c, SK_CONNS);
	sk_view_close(v);
	return 0;
}

/* ------------------------------------------------------------ table */

static void print_table(const struct snap *s, int json)
{
	if (!json)
		printf("%-6s %-24s %-24s %-9s %-9s %14s %14s  %s\n", "kind",
		       "local (connector)", "remote (listener)", "nodes", "path",
		       "bytes c->l", "bytes l->c", "reason");
	for (int i = 0; i < s->nl; i++) {
		const struct sk_view_listener *l = &s->l[i];
		char a[80];
		sk_addr_str(&l->a, a, sizeof a);
		if (json)
			printf("{\"kind\":\"listen\",\"addr\":\"%s\",\"node\":%u,"
			       "\"pid\":%d}\n", a, l->node, l->pid);
		else
			printf("%-6s %-24s %-24s %-9u %-9s %14s %14s  pid %d\n",
			       "listen", a, "-", l->node, "fabric", "-", "-", l->pid);
	}
	for (int i = 0; i < s->nc; i++) {
		const struct sk_view_conn *c = &s->c[i];
		char a[80], b[80], nodes[24];
		sk_addr_str(&c->cl, a, sizeof a);
		sk_addr_str(&c->dst, b, sizeof b);
		snprintf(nodes, sizeof nodes, "%u->%u", c->node_c, c->node_a);
		unsigned long long cl = c->bytes_cl, lc = c->bytes_lc;
		if (json)
			printf("{\"kind\":\"conn\",\"local\":\"%s\",\"remote\":\"%s\","
			       "\"node_c\":%u,\"node_l\":%u,\"path\":\"%s\","
			       "\"bytes_cl\":%llu,\"bytes_lc\":%llu,"
			       "\"fabric_bytes_cl\":%llu,\"confined_slices\":%u,"
			       "\"reason\":\"%s\"}\n",
			       a, b, c->node_c, c->node_a, c->path, cl, lc,
			       (unsigned long long)c->fabric_bytes_cl,
			       c->confined_slices, c->reason);
		else
			printf("%-6s %-24s %-24s %-9s %-9s %14llu %14llu  %s\n",
			       "conn", a, b, nodes, c->path, cl, lc, c->reason);
	}
	if (!json && !s->nc)
		printf("(no live connections)\n");
}

/* ------------------------------------------------------------ watch */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* 1023 B, 1.5 KB, 12.3 MB ... (powers of 1024, as ntbx perf prints) */
static const char *human(char *buf, size_t len, double v, const char *unit)
{
	static const char *pre[] = { "", "K", "M", "G", "T", "P" };
	int u = 0;
	while (v >= 1024 && u < 5) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%.0f %s%s", v, pre[u], unit);
	else
		snprintf(buf, len, "%.1f %s%s", v, pre[u], unit);
	return buf;
}

/* What the previous frame saw of each slot, for the rates. */
struct prev {
	uint32_t gen;
	int seen;
	uint64_t cl, lc;
};

static void watch_frame(const char *fabric, const struct snap *s,
                        struct prev *prev, double dt, double interval,
                        int tty)
{
	if (tty)
		fputs("\033[H\033[2J", stdout);   /* home, clear */
	int nfab = 0, ntcp = 0, npend = 0;
	double rate_cl = 0, rate_lc = 0;
	for (int i = 0; i < s->nc; i++) {
		const char *p = s->c[i].path;
		nfab += !strcmp(p, "fabric");
		ntcp += !strcmp(p, "tcp");
		npend += !strcmp(p, "pending");
	}
	time_t t = time(NULL);
	char when[32];
	strftime(when, sizeof when, "%H:%M:%S", localtime(&t));
	printf("ntbx stat --watch: fabric '%s', every %.3g s%s  %s\n", fabric,
	       interval, tty ? " (Ctrl-C ends)" : "", when);
	printf("connections: %d fabric, %d tcp, %d pending; listeners: %d\n\n",
	       nfab, ntcp, npend, s->nl);
	printf("%-22s %-22s %-7s %-7s %11s %11s %13s %13s  %s\n",
	       "local (connector)", "remote (listener)", "nodes", "path",
	       "c->l", "l->c", "c->l rate", "l->c rate", "reason");
	/* Slots not seen in this frame are forgotten. */
	static unsigned char here[SK_CONNS];
	memset(here, 0, sizeof here);
	for (int i = 0; i < s->nc; i++) {
		const struct sk_view_conn *c = &s->c[i];
		struct prev *p = &prev[c->slot];
		char a[80], b[80], nodes[24], x[24], y[24], rx[24] = "-",
		     ry[24] = "-";
		sk_addr_str(&c->cl, a, sizeof a);
		sk_addr_str(&c->dst, b, sizeof b);
		snprintf(nodes, sizeof nodes, "%u->%u", c->node_c, c->node_a);
		if (p->seen && p->gen == c->gen && dt > 0 &&
		    c->bytes_cl >= p->cl && c->bytes_lc >= p->lc) {
			double r1 = (double)(c->bytes_cl - p->cl) / dt;
			double r2 = (double)(c->bytes_lc - p->lc) / dt;
			human(rx, sizeof rx, r1, "B/s");
			human(ry, sizeof ry, r2, "B/s");
			rate_cl += r1;
			rate_lc += r2;
		}
		printf("%-22s %-22s %-7s %-7s %11s %11s %13s %13s  %s\n", a, b,
		       nodes, c->path,
		       human(x, sizeof x, (double)c->bytes_cl, "B"),
		       human(y, sizeof y, (double)c->bytes_lc, "B"), rx, ry,
		       c->reason);
		*p = (struct prev){ .gen = c->gen, .seen = 1, .cl = c->bytes_cl,
		                    .lc = c->bytes_lc };
		here[c->slot] = 1;
	}
	for (int i = 0; i < SK_CONNS; i++)
		if (!here[i])
			prev[i].seen = 0;
	if (!s->nc)
		printf("(no live connections)\n");
	char r1[24], r2[24];
	printf("\ntotal rate: c->l %s, l->c %s\n",
	       human(r1, sizeof r1, rate_cl, "B/s"),
	       human(r2, sizeof r2, rate_lc, "B/s"));
	if (!tty)
		putchar('\n');
	fflush(stdout);
}

static int watch(const char *fabric, int all, double interval, long count)
{
	int tty = isatty(STDOUT_FILENO);
	struct snap *s = malloc(sizeof *s);
	struct prev *prev = calloc(SK_CONNS, sizeof *prev);
	if (!s || !prev)
		runtime_die("out of memory");
	double last = 0;
	for (long k = 0; count <= 0 || k < count; k++) {
		if (k) {
			struct timespec ts = { (time_t)interval,
			                       (long)((interval - (double)(time_t)interval) *
			                              1e9) };
			while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
				;
		}
		snap_take(fabric, all, s);
		double t = now_s();
		watch_frame(fabric, s, prev, k ? t - last : 0, interval, tty);
		last = t;
	}
	free(prev);
	free(s);
	return 0;
}

/* ------------------------------------------------------- prometheus */

/* A label value: \, " and newline escaped (exposition format). */
static void label(char *buf, size_t len, const char *v)
{
	size_t n = 0;
	for (; *v && n + 3 < len; v++) {
		if (*v == '\\' || *v == '"') {
			buf[n++] = '\\';
			buf[n++] = *v;
		} else if (*v == '\n') {
			buf[n++] = '\\';
			buf[n++] = 'n';
		} else {
			buf[n++] = *v;
		}
	}
	buf[n] = 0;
}

static void family(const char *name, const char *type, const char *help)
{
	printf("# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static int prometheus(const char *fabric)
{
	struct snap *s = malloc(sizeof *s);
	if (!s)
		runtime_die("out of memory");
	snap_take(fabric, 1, s);
	char fab[2 * NTBX_FABRIC_NAME_MAX + 8];
	label(fab, sizeof fab, fabric);

	family("ntbx_sock_bytes_total", "counter",
	       "Bytes a live connection of `ntbx run` programs carried (dir tx: "
	       "connector to listener, rx: listener to connector).");
	for (int i = 0; i < s->nc; i++) {
		const struct sk_view_conn *c = &s->c[i];
		char a[80], b[80];
		sk_addr_str(&c->cl, a, sizeof a);
		sk_addr_str(&c->dst, b, sizeof b);
		for (int d = 0; d < 2; d++)
			printf("ntbx_sock_bytes_total{fabric=\"%s\",conn=\"%d.%u\","
			       "local=\"%s\",remote=\"%s\",node_c=\"%u\",node_l=\"%u\","
			       "path=\"%s\",dir=\"%s\"} %llu\n", fab, c->slot, c->gen,
			       a, b, c->node_c, c->node_a, c->path, d ? "rx" : "tx",
			       (unsigned long long)(d ? c->bytes_lc : c->bytes_cl));
	}
	family("ntbx_sock_fabric_bytes_total", "counter",
	       "Of ntbx_sock_bytes_total dir tx, the bytes that went over the "
	       "fabric (the rest went by TCP before the switch).");
	for (int i = 0; i < s->nc; i++)
		printf("ntbx_sock_fabric_bytes_total{fabric=\"%s\",conn=\"%d.%u\","
		       "dir=\"tx\"} %llu\n", fab, s->c[i].slot, s->c[i].gen,
		       (unsigned long long)s->c[i].fabric_bytes_cl);

	family("ntbx_sock_connections", "gauge",
	       "Live connections by path (fabric, tcp after a fallback, pending "
	       "while negotiating).");
	static const char *paths[] = { "fabric", "tcp", "pending" };
	for (int p = 0; p < 3; p++) {
		int n = 0;
		for (int i = 0; i < s->nc; i++)
			n += !strcmp(s->c[i].path, paths[p]);
		printf("ntbx_sock_connections{fabric=\"%s\",path=\"%s\"} %d\n", fab,
		       paths[p], n);
	}

	/* Per node: node numbers come from the table (shared memory), so
	 * only those within the model's limit are counted. */
	struct ntbx_fabric_info info;
	int nodes = ntbx_fabric_info(fabric, &info) == 0 ? info.nodes : 0;
	if (nodes > NTBX_MAX_NODES)
		nodes = NTBX_MAX_NODES;
	int lis[NTBX_MAX_NODES] = { 0 };
	unsigned long long tx[NTBX_MAX_NODES] = { 0 }, rx[NTBX_MAX_NODES] = { 0 };
	for (int i = 0; i < s->nl; i++)
		if (s->l[i].node < (unsigned)nodes)
			lis[s->l[i].node]++;
	for (int i = 0; i < s->nc; i++) {
		const struct sk_view_conn *c = &s->c[i];
		if (c->node_c < (unsigned)nodes) {
			tx[c->node_c] += c->bytes_cl;
			rx[c->node_c] += c->bytes_lc;
		}
		if (c->node_a < (unsigned)nodes) {
			tx[c->node_a] += c->bytes_lc;
			rx[c->node_a] += c->bytes_cl;
		}
	}
	family("ntbx_sock_listeners", "gauge",
	       "Listening sockets of live `ntbx run` programs, by node.");
	for (int n = 0; n < nodes; n++)
		printf("ntbx_sock_listeners{fabric=\"%s\",node=\"%d\"} %d\n", fab, n,
		       lis[n]);
	family("ntbx_node_sock_bytes", "gauge",
	       "Bytes the node's live connections carried (dir tx: sent by its "
	       "processes); falls when a connection ends.");
	for (int n = 0; n < nodes; n++)
		for (int d = 0; d < 2; d++)
			printf("ntbx_node_sock_bytes{fabric=\"%s\",node=\"%d\","
			       "dir=\"%s\"} %llu\n", fab, n, d ? "rx" : "tx",
			       d ? rx[n] : tx[n]);

	/* Liveness and restarts, through an observer (changes nothing; a
	 * fabric it cannot observe leaves these families empty). */
	struct ntbx_dev *obs = NULL;
	char dir[PATH_MAX];
	if (nodes && (ntbx_fabric_dir(fabric, dir, sizeof dir) < 0 ||
	              ntbx_dev_observe(dir, 0, &obs) < 0))
		obs = NULL;
	family("ntbx_node_up", "gauge",
	       "1 if the node has a live process attached.");
	for (int n = 0; obs && n < nodes; n++)
		printf("ntbx_node_up{fabric=\"%s\",node=\"%d\"} %d\n", fab, n,
		       ntbx_node_alive(obs, n) > 0);
	family("ntbx_node_epoch", "gauge",
	       "The node's generation, bumped each time it comes alive from "
	       "dead: a change is a restart.");
	for (int n = 0; obs && n < nodes; n++)
		printf("ntbx_node_epoch{fabric=\"%s\",node=\"%d\"} %u\n", fab, n,
		       ntbx_node_epoch(obs, n));
	if (obs)
		ntbx_dev_close(obs);
	free(s);
	return 0;
}

/* ------------------------------------------------------------ main */

int cmd_stat(int argc, char **argv)
{
	const char *fabric = NULL;
	enum mode mode = M_TABLE;
	int all = 0, modes = 0, timing = 0;
	double interval = 1;
	long count = 0;
	for (int i = 1; i < argc; i++) {
		const char *v;
		if (is_help(argv[i])) {
			printf("usage: ntbx stat [--fabric F] [--all] [--json]\n"
			       "       ntbx stat --watch [--interval S] [--count N] "
			       "[--fabric F] [--all]\n"
			       "       ntbx stat --prometheus [--fabric F]\n"
			       "\nLive connections of programs run with `ntbx run`: "
			       "connector and listener\naddresses, nodes, path "
			       "(fabric, or tcp with the reason), bytes each way.\n"
			       "--all also lists connections still negotiating.\n"
			       "--watch redraws the view every S seconds (default 1) "
			       "with each connection's\n  byte rates, until Ctrl-C or "
			       "N frames (--count).\n"
			       "--prometheus prints the Prometheus text format: "
			       "ntbx_sock_bytes_total per\n  connection, "
			       "ntbx_sock_connections per path, per-node gauges.\n");
			return 0;
		}
		if ((v = opt_value(argc, argv, &i, "--fabric")))
			fabric = v;
		else if ((v = opt_value(argc, argv, &i, "--interval"))) {
			interval = parse_double(v, "--interval", 0.01, 3600);
			timing = 1;
		} else if ((v = opt_value(argc, argv, &i, "--count"))) {
			count = parse_int(v, "--count", 1, LONG_MAX);
			timing = 1;
		} else if (opt_flag(argv[i], "--json")) {
			mode = M_JSON;
			modes++;
		} else if (opt_flag(argv[i], "--watch")) {
			mode = M_WATCH;
			modes++;
		} else if (opt_flag(argv[i], "--prometheus")) {
			mode = M_PROM;
			modes++;
		} else if (opt_flag(argv[i], "--all"))
			all = 1;
		else
			bad_arg(argv[i]);
	}
	if (modes > 1)
		usage_die("--json, --watch and --prometheus exclude each other");
	if (timing && mode != M_WATCH)
		usage_die("--interval and --count go with --watch");
	fabric = default_fabric(fabric);
	struct ntbx_fabric_info info;
	if (ntbx_fabric_info(fabric, &info) < 0)
		runtime_die("%s", ntbx_errmsg());
	if (mode == M_WATCH)
		return watch(fabric, all, interval, count);
	if (mode == M_PROM)
		return prometheus(fabric);
	struct snap *s = malloc(sizeof *s);
	if (!s)
		runtime_die("out of memory");
	if (snap_take(fabric, all, s) == -ENOENT) {
		if (mode == M_TABLE)
			printf("no connections (no program has listened under "
			       "`ntbx run` on fabric '%s')\n", fabric);
	} else {
		print_table(s, mode == M_JSON);
	}
	free(s);
	return 0;
}
