/* SPDX-License-Identifier: MIT */
/*
 * ntbx fabric create|list|show|destroy
 */
#include <arpa/inet.h>
#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "args.h"
#include "util/settings.h"
#include "dev/dev.h"
#include "ntbx/dev.h"
#include "ntbx/fabric.h"
#include "output.h"
#include "proc.h"

static void usage(FILE *fp)
{
	fprintf(fp,
	"usage: ntbx fabric create [NAME] [--nodes N] [--topology switch|ring]\n"
	"                          [--window SIZE] [--memory SIZE] [--group GROUP]\n"
	"       ntbx fabric create [NAME] --backend ofi --hosts A,B[:PORT],...\n"
	"                          [--key KEY] [--window SIZE] [--memory SIZE]\n"
	"       ntbx fabric list\n"
	"       ntbx fabric show [NAME]\n"
	"       ntbx fabric destroy [NAME]\n"
	"\n"
	"Manage fabrics.  A fabric is a set of nodes wired as a switch (every\n"
	"node has a port to every other node) or a ring (two ports per node,\n"
	"traffic to other nodes forwarded hop by hop; a ring of two nodes is\n"
	"one link); on the shared-memory\n"
	"backend it is the directory $NTBX_SHM_DIR/ntbx-NAME.\n"
	"\n"
	"NAME defaults to --fabric NAME, else $NTBX_FABRIC, else \"default\".\n"
	"\n"
	"create options:\n"
	"  --nodes N          number of nodes, 2..%d; default 2\n"
	"  --topology T       switch (default) or ring\n"
	"  --window SIZE      largest inbound window (default %lluM)\n"
	"  --memory SIZE      memory of each node, at most the window\n"
	"                     (default: the window size; a ring needs 17M+)\n"
	"  --group GROUP      give GROUP access (0660/0770) instead of 0600/0700\n"
	"  --backend B        shm (default: every node on this machine) or ofi\n"
	"                     (one node per host, over libfabric; run the same\n"
	"                     create on every host, then `ntbx node serve`)\n"
	"  --hosts LIST       ofi: the hosts' addresses in node order, each with\n"
	"                     an optional :PORT of its agent's rendezvous\n"
	"                     (default 47600; the endpoint uses PORT+1)\n"
	"  --key KEY          ofi: agents refuse a peer whose KEY differs\n"
	"\n"
	"show prints, per node: alive or not, epoch, IP addresses, memory\n"
	"allocations; per port: peer node, link up/down, window translations,\n"
	"doorbell bits and mask and the %d scratchpads (like Linux ntb_tool).\n"
	"It reads each node as an observer: looking changes nothing.\n"
	"\n"
	"common options:\n"
	"  --fabric NAME      the fabric (instead of NAME)\n"
	"  --json             one JSON object per line\n"
	"  -h, --help         this help\n",
	NTBX_MAX_NODES,
	(unsigned long long)(NTBX_DEFAULT_WINDOW >> 20),
	NTBX_SPAD_COUNT);
}

static void check_name(const char *name)
{
	size_t n = strlen(name);
	if (n == 0 || n > NTBX_FABRIC_NAME_MAX)
		usage_die("fabric name '%s' must be 1..%d characters", name,
		          NTBX_FABRIC_NAME_MAX);
	for (const char *p = name; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' ||
		      *p == '.'))
			usage_die("fabric name '%s': use letters, digits, '-', '_' "
			          "and '.'", name);
	if (name[0] == '.' || name[0] == '-')
		usage_die("fabric name '%s' must not start with '%c'", name,
		          name[0]);
}

/* ------------------------------------------------------------ create */

static const char *g_hosts, *g_key;

static int do_create(const char *name, int nodes, enum ntbx_topology topo,
                     uint64_t window, uint64_t memory, int gid, int json)
{
	if (window && memory && memory > window)
		usage_die("--memory %" PRIu64 " is larger than --window %" PRIu64
		          " (a peer reaches node memory through the window)",
		          memory, window);
	struct ntbx_fabric_params p = {
		.nodes = nodes, .topology = topo, .window = window,
		.memory = memory, .gid = gid,
	};
	int rc = g_hosts ? ntbx_fabric_create_ofi(name, &p, g_hosts, g_key)
	                 : ntbx_fabric_create(name, &p);
	if (rc == -EEXIST)
		runtime_die("fabric '%s' already exists (remove it with: ntbx "
		            "fabric destroy %s)", name, name);
	if (rc == -EINVAL) {
		const char *m = ntbx_errmsg();
		usage_die("%s", m && *m ? m : "invalid fabric parameters");
	}
	if (rc < 0)
		lib_die(rc, "creating the fabric");
	struct ntbx_fabric_info info;
	memset(&info, 0, sizeof(info));
	if (ntbx_fabric_info(name, &info) < 0) {
		snprintf(info.name, sizeof(info.name), "%s", name);
		info.nodes = nodes;
		info.topology = topo;
		info.window = window;
		info.memory = memory;
	}
	char dir[512] = "";
	ntbx_fabric_dir(name, dir, sizeof(dir));
	if (json) {
		struct out o;
		out_init(&o, 1, NULL);
		out_str(&o, "fabric", name);
		out_str(&o, "action", "created");
		out_int(&o, "nodes", info.nodes);
		out_str(&o, "topology", ntbx_topology_name(info.topology));
		out_u64(&o, "window", info.window);
		out_u64(&o, "memory", info.memory);
		out_str(&o, "dir", dir);
		out_row_end(&o);
	} else {
		char w[32], m[32];
		printf("created fabric %s: %d %s, %s topology, window %s, "
		       "memory %s per node (%s)\n", name, info.nodes,
		       g_hosts ? "hosts (ofi backend)" : "nodes",
		       ntbx_topology_name(info.topology),
		       fmt_size(w, sizeof(w), info.window),
		       fmt_size(m, sizeof(m), info.memory), dir);
	}
	return 0;
}

/* -------------------------------------------------------------- list */

struct list_ctx {
	struct out o;
	int n;
};

static void list_cb(const struct ntbx_fabric_info *fi, void *arg)
{
	struct list_ctx *c = arg;
	out_str(&c->o, "fabric", fi->name);
	out_int(&c->o, "nodes", fi->nodes);
	out_str(&c->o, "topology", ntbx_topology_name(fi->topology));
	out_int(&c->o, "alive", fi->alive_nodes);
	out_size(&c->o, "window", fi->window);
	out_size(&c->o, "memory", fi->memory);
	out_int(&c->o, "layout", fi->layout_version);
	out_row_end(&c->o);
	c->n++;
}

static int do_list(int json)
{
	static const struct out_col cols[] = {
		{ "fabric", -24 }, { "nodes", 5 }, { "topology", 8 },
		{ "alive", 5 }, { "window", 7 }, { "memory", 7 },
		{ "layout", 6 }, { NULL, 0 },
	};
	static struct list_ctx c;
	out_init(&c.o, json, cols);
	/* private fabrics of runs that were killed go first (their owner
	 * lock is free): they are nobody's now */
	ntbx_fabric_reap_private();
	int rc = ntbx_fabric_list(list_cb, &c);
	if (rc < 0)
		lib_die(rc, "listing fabrics");
	if (c.n == 0 && !json) {
		printf("no fabrics in %s (create one with: ntbx fabric create "
		       "NAME --nodes 2)\n", ntbx_setting_str(NTBX_SET_SHM_DIR));
	}
	return 0;
}

/* -------------------------------------------------------------- show */

#define SHOW_MAX_BLOCKS 256

struct port_state {
	int peer;
	int link;
	uint64_t in_off[NTBX_MW_COUNT];    /* inbound translations */
	uint64_t in_size[NTBX_MW_COUNT];
	uint64_t out_size[NTBX_MW_COUNT];  /* outbound window sizes */
	int out_rc[NTBX_MW_COUNT];
	uint32_t db, mask;
	uint32_t spad[NTBX_SPAD_COUNT];
	uint32_t peer_spad[NTBX_SPAD_COUNT];
};

struct node_state {
	int ok;
	char err[256];
	int alive;
	uint32_t epoch;
	int naddrs;
	struct ntbx_node_addr addrs[NTBX_NODE_ADDRS];
	uint64_t mem_size;
	int nblocks;
	struct ntbx_mem_block blocks[SHOW_MAX_BLOCKS];
	int nports;
	struct port_state ports[NTBX_MAX_PORTS];
};

static void fmt_addr(const struct ntbx_node_addr *a, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN] = "?";
	int fam = a->family == AF_INET6 ? AF_INET6 : AF_INET;
	/* IPv4 is stored v4-mapped (::ffff:a.b.c.d), as sockets look it up */
	inet_ntop(fam, fam == AF_INET ? a->addr + 12 : a->addr, ip, sizeof(ip));
	snprintf(buf, len, "%s/%u", ip, a->prefix);
}

/* A fabric across hosts: the hosts and the agent's view of each link. */
static int show_ofi(const char *name, const char *dir, int json)
{
	static struct ntbx_dev_agent_status st;
	int rc = ntbx_dev_fabric_agent_status(dir, &st);
	if (rc < 0)
		lib_die(rc, "reading the fabric's ofi files");
	static const struct out_col cols[] = {
		{ "node", 4 }, { "host", -22 }, { "port", 5 }, { "role", -9 },
		{ "link", -4 }, { "epoch", 5 }, { "addrs", -24 }, { "why", -60 },
		{ NULL, 0 },
	};
	if (!json)
		printf("fabric %s: ofi backend, %u hosts; agent %s%s%s%s\n", name,
		       st.hosts.nhosts, st.agent_alive ? "running" : "not running",
		       st.agent_alive ? ", provider " : "",
		       st.agent_alive ? st.provider : "",
		       st.agent_alive ? "" : " (start `ntbx node serve`)");
	struct out o;
	out_init(&o, json, cols);
	for (uint32_t n = 0; n < st.hosts.nhosts; n++) {
		int self = (int)n == st.rank && st.agent_alive;
		out_int(&o, "node", (int)n);
		out_str(&o, "host", st.hosts.host[n].addr);
		out_int(&o, "port", (int)st.hosts.host[n].port);
		out_str(&o, "role", self ? "this host" : "peer");
		out_str(&o, "link", self ? "-" : st.agent_alive && st.up[n] ? "up" : "down");
		out_int(&o, "epoch", self ? 0 : (int)st.epoch[n]);
		/* the addresses the peer's agent announced (sockets use them) */
		char addrs[256] = "", one[64];
		for (uint32_t a = 0; !self && a < st.naddrs[n]; a++) {
			fmt_addr(&st.addrs[n][a], one, sizeof one);
			size_t l = strlen(addrs);
			snprintf(addrs + l, sizeof addrs - l, "%s%s", l ? "," : "", one);
		}
		out_str(&o, "addrs", addrs);
		out_str(&o, "why", self || (st.agent_alive && st.up[n]) ? "" :
		        !st.agent_alive ? "no agent on this host" : st.why[n]);
		out_row_end(&o);
	}
	return 0;
}

static int do_show(const char *name, int json)
{
	struct ntbx_fabric_info info;
	fabric_require(name, &info);
	char dir[512];
	int rc = ntbx_fabric_dir(name, dir, sizeof(dir));
	if (rc < 0)
		lib_die(rc, "fabric directory");
	if (ntbx_dev_fabric_spans_hosts(dir))
		return show_ofi(name, dir, json);
	int nodes = info.nodes;
	if (nodes < 1 || nodes > NTBX_MAX_NODES)
		runtime_die("fabric '%s' reports %d nodes; it looks corrupt "
		            "(recreate it)", name, nodes);
	struct node_state *ns = calloc((size_t)nodes, sizeof(*ns));
	if (!ns)
		runtime_die("out of memory");

	/* Observer handles: reading a node neither makes it alive nor bumps
	 * its epoch. */
	int alive_known = 0, first_rc = 0;
	for (int k = 0; k < nodes; k++) {
		struct ntbx_dev *dev;
		rc = ntbx_dev_observe(dir, k, &dev);
		if (rc < 0) {
			lib_msg(ns[k].err, sizeof(ns[k].err), rc, "opening the node");
			if (!first_rc)
				first_rc = rc;
			continue;
		}
		alive_known = 1;
		ns[k].alive = ntbx_node_alive(dev, k) > 0;
		ns[k].ok = 1;
		ns[k].epoch = ntbx_node_epoch(dev, k);
		int n = ntbx_node_get_addrs(dev, k, ns[k].addrs, NTBX_NODE_ADDRS);
		ns[k].naddrs = n < 0 ? 0 : (n > NTBX_NODE_ADDRS ? NTBX_NODE_ADDRS : n);
		ns[k].mem_size = ntbx_mem_size(dev);
		n = ntbx_mem_list(dev, ns[k].blocks, SHOW_MAX_BLOCKS);
		ns[k].nblocks = n < 0 ? 0 : n;
		int np = ntbx_port_count(dev);
		if (np < 0)
			np = 0;
		if (np > NTBX_MAX_PORTS)
			np = NTBX_MAX_PORTS;
		ns[k].nports = np;
		for (int p = 0; p < np; p++) {
			struct port_state *ps = &ns[k].ports[p];
			ps->peer = ntbx_port_peer_node(dev, p);
			ps->link = ntbx_link_is_up(dev, p) > 0;
			for (int w = 0; w < NTBX_MW_COUNT; w++) {
				ntbx_mw_get_trans(dev, p, w, &ps->in_off[w], &ps->in_size[w]);
				/* the size only: every backend has one, mapped
				 * windows or not */
				ps->out_rc[w] = ntbx_peer_mw_size(dev, p, w,
				                                  &ps->out_size[w]);
			}
			ntbx_db_read(dev, p, &ps->db);
			ntbx_db_read_mask(dev, p, &ps->mask);
			for (int s = 0; s < NTBX_SPAD_COUNT; s++) {
				ntbx_spad_read(dev, p, s, &ps->spad[s]);
				ntbx_peer_spad_read(dev, p, s, &ps->peer_spad[s]);
			}
		}
		ntbx_dev_close(dev);
	}
	if (!alive_known) {
		/* Not one node could be read: the whole fabric is unusable. */
		const char *m = ntbx_errmsg();
		if (m && *m)
			lib_die(first_rc, name);
		runtime_die("fabric '%s': cannot read its nodes: %s", name,
		            ns[0].err);
	}
	/* A link is up when both ends are alive. */
	for (int k = 0; k < nodes; k++)
		for (int p = 0; p < ns[k].nports; p++) {
			int j = ns[k].ports[p].peer;
			ns[k].ports[p].link = ns[k].alive && j >= 0 && j < nodes &&
			                      ns[j].alive;
		}

	char w[32], m[32];
	if (json) {
		struct out o;
		out_init(&o, 1, NULL);
		out_str(&o, "fabric", name);
		out_int(&o, "nodes", nodes);
		out_str(&o, "topology", ntbx_topology_name(info.topology));
		out_u64(&o, "window", info.window);
		out_u64(&o, "memory", info.memory);
		out_int(&o, "layout", info.layout_version);
		out_int(&o, "alive", info.alive_nodes);
		out_str(&o, "dir", dir);
		out_row_end(&o);
	} else {
		printf("fabric %s: %d nodes, %s topology, window %s, memory %s per "
		       "node, layout %d, %d alive\n", name, nodes,
		       ntbx_topology_name(info.topology),
		       fmt_size(w, sizeof(w), info.window),
		       fmt_size(m, sizeof(m), info.memory), info.layout_version,
		       info.alive_nodes);
		printf("  directory %s\n", dir);
	}

	static char buf[65536];
	for (int k = 0; k < nodes; k++) {
		struct node_state *n = &ns[k];
		if (!n->ok) {
			if (json) {
				struct out o;
				out_init(&o, 1, NULL);
				out_str(&o, "fabric", name);
				out_int(&o, "node", k);
				out_str(&o, "error", n->err);
				out_row_end(&o);
			} else {
				printf("node %d: cannot read: %s\n", k, n->err);
			}
			continue;
		}
		char addrs[2048] = "", a[80];
		for (int i = 0; i < n->naddrs; i++) {
			fmt_addr(&n->addrs[i], a, sizeof(a));
			size_t l = strlen(addrs);
			snprintf(addrs + l, sizeof(addrs) - l, "%s%s", i ? ", " : "", a);
		}
		if (!json) {
			printf("node %d: %s, epoch %u, addresses: %s\n", k,
			       n->alive ? "alive" : "dead", n->epoch,
			       n->naddrs ? addrs : "none");
			printf("  memory %s, %d allocation%s\n",
			       fmt_size(m, sizeof(m), n->mem_size), n->nblocks,
			       n->nblocks == 1 ? "" : "s");
			int shown = n->nblocks < SHOW_MAX_BLOCKS ? n->nblocks
			                                         : SHOW_MAX_BLOCKS;
			if (shown)
				printf("    %-12s %8s  %-10s %s\n", "offset", "size",
				       "owner", "tag");
			for (int i = 0; i < shown; i++) {
				struct ntbx_mem_block *b = &n->blocks[i];
				char tag[sizeof(b->tag) + 1];
				memcpy(tag, b->tag, sizeof(b->tag));
				tag[sizeof(b->tag)] = 0;
				char owner[32] = "-";
				if (b->owner_pid)
					snprintf(owner, sizeof(owner), "pid %d", b->owner_pid);
				printf("    0x%010" PRIx64 " %8s  %-10s %s\n", b->off,
				       fmt_size(w, sizeof(w), b->size), owner, tag);
			}
			for (int p = 0; p < n->nports; p++) {
				struct port_state *ps = &n->ports[p];
				printf("  port %d -> node %d: link %s\n", p, ps->peer,
				       ps->link ? "up" : "down");
				printf("    inbound ");
				for (int x = 0; x < NTBX_MW_COUNT; x++) {
					if (ps->in_size[x] == 0)
						printf("  mw%d -", x);
					else
						printf("  mw%d 0x%" PRIx64 "+%s", x, ps->in_off[x],
						       fmt_size(w, sizeof(w), ps->in_size[x]));
				}
				printf("   (this node's memory, exposed to node %d)\n",
				       ps->peer);
				printf("    outbound");
				for (int x = 0; x < NTBX_MW_COUNT; x++) {
					if (ps->out_rc[x] == -ENOTCONN)
						printf("  mw%d -", x);
					else if (ps->out_rc[x] < 0)
						printf("  mw%d error %d", x, ps->out_rc[x]);
					else
						printf("  mw%d %s", x,
						       fmt_size(w, sizeof(w), ps->out_size[x]));
				}
				printf("   (node %d's memory, mapped here)\n", ps->peer);
				printf("    doorbell 0x%04x mask 0x%04x\n", ps->db, ps->mask);
				printf("    spad     ");
				for (int s = 0; s < NTBX_SPAD_COUNT; s++)
					printf(" %08x", ps->spad[s]);
				printf("\n    peer spad");
				for (int s = 0; s < NTBX_SPAD_COUNT; s++)
					printf(" %08x", ps->peer_spad[s]);
				printf("\n");
			}
			continue;
		}
		/* JSON: one object per node. */
		size_t l = 0;
#define PUT(...) do { int r_ = snprintf(buf + l, sizeof(buf) - l, __VA_ARGS__); \
		      if (r_ > 0 && (size_t)r_ < sizeof(buf) - l) l += (size_t)r_; } while (0)
		PUT("[");
		for (int i = 0; i < n->naddrs; i++) {
			fmt_addr(&n->addrs[i], a, sizeof(a));
			PUT("%s\"%s\"", i ? ", " : "", a);
		}
		PUT("]");
		struct out o;
		out_init(&o, 1, NULL);
		out_str(&o, "fabric", name);
		out_int(&o, "node", k);
		out_raw(&o, "alive", n->alive ? "true" : "false", NULL);
		out_u64(&o, "epoch", n->epoch);
		out_raw(&o, "addresses", buf, NULL);
		out_u64(&o, "memory", n->mem_size);
		l = 0;
		PUT("[");
		int shown = n->nblocks < SHOW_MAX_BLOCKS ? n->nblocks : SHOW_MAX_BLOCKS;
		for (int i = 0; i < shown; i++) {
			struct ntbx_mem_block *b = &n->blocks[i];
			char tag[sizeof(b->tag) + 1], qt[128] = "";
			memcpy(tag, b->tag, sizeof(b->tag));
			tag[sizeof(b->tag)] = 0;
			json_quote(qt, sizeof(qt), tag);
			PUT("%s{\"off\": %" PRIu64 ", \"size\": %" PRIu64
			    ", \"owner_pid\": %d, \"tag\": %s}", i ? ", " : "",
			    b->off, b->size, b->owner_pid, qt);
		}
		PUT("]");
		out_raw(&o, "allocations", buf, NULL);
		l = 0;
		PUT("[");
		for (int p = 0; p < n->nports; p++) {
			struct port_state *ps = &n->ports[p];
			PUT("%s{\"port\": %d, \"peer\": %d, \"link\": \"%s\", "
			    "\"inbound\": [", p ? ", " : "", p, ps->peer,
			    ps->link ? "up" : "down");
			for (int x = 0; x < NTBX_MW_COUNT; x++)
				PUT("%s{\"mw\": %d, \"off\": %" PRIu64 ", \"size\": %"
				    PRIu64 "}", x ? ", " : "", x, ps->in_off[x],
				    ps->in_size[x]);
			PUT("], \"outbound\": [");
			for (int x = 0; x < NTBX_MW_COUNT; x++)
				PUT("%s{\"mw\": %d, \"size\": %" PRIu64 "}", x ? ", " : "",
				    x, ps->out_rc[x] < 0 ? 0 : ps->out_size[x]);
			PUT("], \"doorbell\": \"0x%04x\", \"doorbell_mask\": \"0x%04x\", "
			    "\"spad\": [", ps->db, ps->mask);
			for (int s = 0; s < NTBX_SPAD_COUNT; s++)
				PUT("%s\"0x%08x\"", s ? ", " : "", ps->spad[s]);
			PUT("], \"peer_spad\": [");
			for (int s = 0; s < NTBX_SPAD_COUNT; s++)
				PUT("%s\"0x%08x\"", s ? ", " : "", ps->peer_spad[s]);
			PUT("]}");
		}
		PUT("]");
#undef PUT
		out_raw(&o, "ports", buf, NULL);
		out_row_end(&o);
	}
	free(ns);
	return 0;
}

/* ----------------------------------------------------------- destroy */

static int do_destroy(const char *name, int json)
{
	int rc = ntbx_fabric_destroy(name);
	if (rc == -ENOENT) {
		const char *m = ntbx_errmsg();
		if (m && *m && strstr(m, name))
			lib_die(rc, name);
		runtime_die("no fabric '%s' to destroy (see: ntbx fabric list)",
		            name);
	}
	if (rc < 0)
		lib_die(rc, "destroying the fabric");
	if (json) {
		struct out o;
		out_init(&o, 1, NULL);
		out_str(&o, "fabric", name);
		out_str(&o, "action", "destroyed");
		out_row_end(&o);
	} else {
		printf("destroyed fabric %s\n", name);
	}
	return 0;
}

/* -------------------------------------------------------------- main */

int cmd_fabric(int argc, char **argv)
{
	if (argc < 2)
		usage_die("missing subcommand: create, list, show or destroy");
	const char *sub = argv[1];
	if (is_help(sub) || strcmp(sub, "help") == 0) {
		usage(stdout);
		return 0;
	}
	static const char *const subs[] = { "create", "list", "show", "destroy" };
	int which = -1;
	for (int i = 0; i < 4; i++)
		if (strcmp(sub, subs[i]) == 0)
			which = i;
	if (which < 0)
		usage_die("unknown fabric subcommand '%s' (create, list, show, "
		          "destroy)", sub);
	static char cmdname[32];
	snprintf(cmdname, sizeof(cmdname), "fabric %s", sub);
	g_cmd = cmdname;

	const char *name = NULL, *fabric_opt = NULL;
	int nodes = 2, json = 0, gid = -1;
	enum ntbx_topology topo = NTBX_TOPO_SWITCH;
	uint64_t window = 0, memory = 0;
	int backend = 0;
	for (int i = 2; i < argc; i++) {
		const char *v;
		if (is_help(argv[i])) {
			usage(stdout);
			return 0;
		} else if (opt_flag(argv[i], "--json")) {
			json = 1;
		} else if ((v = opt_value(argc, argv, &i, "--fabric"))) {
			check_name(v);
			fabric_opt = v;
		} else if (which == 0 && (v = opt_value(argc, argv, &i, "--nodes"))) {
			nodes = (int)parse_int(v, "--nodes", 2, NTBX_MAX_NODES);
		} else if (which == 0 &&
		           (v = opt_value(argc, argv, &i, "--topology"))) {
			if (ntbx_topology_parse(v, &topo) < 0)
				usage_die("--topology: '%s' is not switch or ring", v);
		} else if (which == 0 && (v = opt_value(argc, argv, &i, "--window"))) {
			window = parse_size(v, "--window", 4096, 1ull << 40);
		} else if (which == 0 && (v = opt_value(argc, argv, &i, "--memory"))) {
			memory = parse_size(v, "--memory", 65536, 1ull << 40);
		} else if (which == 0 && (v = opt_value(argc, argv, &i, "--group"))) {
			struct group *g = getgrnam(v);
			char *end;
			long id = strtol(v, &end, 10);
			if (g)
				gid = (int)g->gr_gid;
			else if (*v && !*end && id >= 0)
				gid = (int)id;
			else
				usage_die("--group: no group '%s'", v);
		} else if (which == 0 && (v = opt_value(argc, argv, &i, "--backend"))) {
			if (!strcmp(v, "ofi"))
				backend = 1;
			else if (strcmp(v, "shm"))
				usage_die("--backend: '%s' is not shm or ofi", v);
		} else if (which == 0 && (v = opt_value(argc, argv, &i, "--hosts"))) {
			g_hosts = v;
		} else if (which == 0 && (v = opt_value(argc, argv, &i, "--key"))) {
			g_key = v;
		} else if (argv[i][0] != '-' && !name && which != 1) {
			check_name(argv[i]);
			name = argv[i];
		} else {
			bad_arg(argv[i]);
		}
	}
	if (backend && !g_hosts)
		usage_die("--backend ofi needs --hosts A,B,... (the same list on "
		          "every host)");
	if (!backend && (g_hosts || g_key))
		usage_die("--hosts and --key are for --backend ofi");
	if (name && fabric_opt && strcmp(name, fabric_opt) != 0)
		usage_die("two fabric names given: '%s' and --fabric '%s'", name,
		          fabric_opt);
	if (!name)
		name = default_fabric(fabric_opt);
	if (which != 1)
		check_name(name);
	switch (which) {
	case 0:
		return do_create(name, nodes, topo, window, memory, gid, json);
	case 1:
		return do_list(json);
	case 2:
		return do_show(name, json);
	default:
		return do_destroy(name, json);
	}
}
