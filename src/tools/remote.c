/* SPDX-License-Identifier: MIT */
/*
 * remote.c — the benchmarks (perf, pingpong, qp) between hosts of an ofi
 * fabric.
 *
 * On an shm fabric every node is on this machine, so a benchmark forks a
 * process per peer node and drives it through a socketpair (proc.c).  On
 * an ofi fabric only this host's node is here: the body joins it, and the
 * peer's process is `ntbx TOOL --serve` on the peer's host, started by the
 * user as iperf3's server is.  The control channel is then a TCP
 * connection from the body to that host's --hosts address at the
 * rendezvous port + 2 (the endpoint has port + 1); the messages are the
 * same struct ctl, and the serving side runs the same serve function, so
 * the measurement itself is unchanged.  What crosses the network is the
 * control only: the data goes through the fabric.
 *
 * The first message is a hello (tool, fabric, both nodes), checked by the
 * serving side; a mismatch is answered with a refusal that names it, so
 * both sides say what is wrong.  Everything from the peer is checked
 * before use (a peer is untrusted), and every wait is bounded: connecting
 * 10 s, the hello 10 s, dead connections by TCP keepalive.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "args.h"
#include "util/util.h"
#include "dev/dev.h"
#include "proc.h"

#define CTL_HELLO      90
#define REMOTE_VERSION 1
#define CONNECT_MS     10000
#define HELLO_MS       10000

static struct {
	int ofi;              /* the fabric is one node per host */
	int me;               /* the body's node */
	const char *tool;
	char fabric[NTBX_FABRIC_NAME_MAX + 1];
	struct ntbx_dev_hosts desc;
} g_roles = { .me = 0, .tool = "" };

static void read_desc_or_die(const char *fabric, struct ntbx_dev_hosts *d,
                             int *is_ofi)
{
	char dir[4096];
	*is_ofi = 0;
	if (ntbx_fabric_dir(fabric, dir, sizeof dir) < 0)
		return;
	int rc = ntbx_dev_fabric_hosts(dir, d);
	if (rc == -ENOENT)
		return;   /* all its nodes are on this machine */
	if (rc < 0)
		lib_die(rc, "reading the fabric's description (ofi.desc)");
	*is_ofi = 1;
}

static int this_host_node(const char *fabric)
{
	char dir[4096], why[256] = "";
	int me = ntbx_fabric_dir(fabric, dir, sizeof dir);
	if (me == 0)
		me = ntbx_dev_fabric_host_node(dir, why, sizeof why);
	if (me < 0)
		runtime_die("fabric '%s': %s", fabric,
		            why[0] ? why : "none of its --hosts is this host");
	return me;
}

void bench_roles(const char *tool, const char *fabric, int peer_opt,
                 int *me, int *peer)
{
	g_roles.tool = tool;
	g_roles.me = 0;
	*me = 0;
	*peer = peer_opt >= 0 ? peer_opt : 1;
	if (!fabric)
		return;
	snprintf(g_roles.fabric, sizeof g_roles.fabric, "%s", fabric);
	read_desc_or_die(fabric, &g_roles.desc, &g_roles.ofi);
	if (!g_roles.ofi)
		return;
	*me = g_roles.me = this_host_node(fabric);
	/* before the peer is asked for anything: this host's part first */
	char dir[4096];
	static struct ntbx_dev_agent_status st;
	if (ntbx_fabric_dir(fabric, dir, sizeof dir) == 0 &&
	    ntbx_dev_fabric_agent_status(dir, &st) == 0 && !st.agent_alive)
		runtime_die("fabric '%s': no agent serves it on this host; start "
		            "one with `ntbx node serve --fabric %s`", fabric, fabric);
	if (peer_opt < 0)
		*peer = *me == 0 ? 1 : 0;
	if (*peer == *me || *peer >= (int)g_roles.desc.nhosts)
		runtime_die("fabric '%s': --peer %d is %s (this host is node %d of "
		            "%u)", fabric, *peer, *peer == *me ? "this host"
		            : "not a node of it", *me, g_roles.desc.nhosts);
}

int bench_remote_opt(int argc, char **argv, int *i,
                     struct bench_remote_opts *r)
{
	const char *v;
	if (opt_flag(argv[*i], "--serve"))
		r->serve = 1;
	else if ((v = opt_value(argc, argv, i, "--timeout")))
		r->timeout = parse_double(v, "--timeout", 0.1, 1e6);
	else if ((v = opt_value(argc, argv, i, "--peer")))
		r->peer = (int)parse_int(v, "--peer", 0, NTBX_MAX_NODES - 1);
	else
		return 0;
	return 1;
}

int bench_body_node(void)
{
	return g_roles.me;
}

int bench_node_is_remote(int node)
{
	return g_roles.ofi && node != g_roles.me;
}

/* Where `ntbx TOOL --serve` of @node listens. */
static void serve_addr(const struct ntbx_dev_hosts *d, int node,
                       const char **host, unsigned *port)
{
	*host = d->host[node].addr;
	*port = d->host[node].port + 2;
}

static void keepalive(int fd)
{
	int one = 1, idle = 5, intvl = 1, cnt = 5;
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static int resolve(const char *host, unsigned port, int passive,
                   struct addrinfo **out)
{
	char ps[16];
	snprintf(ps, sizeof ps, "%u", port);
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
	                          .ai_flags = passive ? AI_PASSIVE : 0 };
	return getaddrinfo(host, ps, &hints, out);
}

/* One connection attempt, bounded: the (blocking) socket or -errno. */
static int connect_once(const struct addrinfo *ai, int timeout_ms)
{
	int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC |
	                SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS) {
		int e = errno;
		close(fd);
		return -e;
	}
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	int r;
	while ((r = poll(&p, 1, timeout_ms)) < 0 && errno == EINTR)
		;
	int err = 0;
	socklen_t el = sizeof err;
	if (r == 0)
		err = ETIMEDOUT;
	else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
		err = errno;
	if (!err && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0)
		err = errno;
	if (err) {
		close(fd);
		return -err;
	}
	return fd;
}

static const char *skip_prefix(const char *m)
{
	return strncmp(m, "ntbx: ", 6) ? m : m + 6;
}

void remote_spawn(struct node_proc *p, const char *fabric, int node)
{
	const char *host;
	unsigned port;
	serve_addr(&g_roles.desc, node, &host, &port);
	struct addrinfo *ai = NULL;
	int gr = resolve(host, port, 0, &ai);
	if (gr)
		runtime_die("fabric '%s': node %d's host %s: %s", fabric, node,
		            host, gai_strerror(gr));
	/* Refused is "not started yet": try again until the bound.  Anything
	 * else (no route, silence) is the answer. */
	uint64_t deadline = now_ns() + CONNECT_MS * 1000000ull;
	int fd;
	for (;;) {
		uint64_t t = now_ns();
		int left = t < deadline ? (int)((deadline - t) / 1000000) + 1 : 1;
		fd = connect_once(ai, left);
		if (fd >= 0 || fd != -ECONNREFUSED || now_ns() >= deadline)
			break;
		usleep(100000);
	}
	freeaddrinfo(ai);
	if (fd == -ECONNREFUSED)
		runtime_die("fabric '%s': nothing serves node %d at its host %s "
		            "port %u (start `ntbx %s --serve --fabric %s` there "
		            "first)", fabric, node, host, port, g_roles.tool,
		            fabric);
	if (fd < 0)
		runtime_die("fabric '%s': cannot reach node %d's host %s port %u: "
		            "%s", fabric, node, host, port, strerror(-fd));
	keepalive(fd);
	struct ctl m;
	memset(&m, 0, sizeof m);
	m.op = CTL_HELLO;
	m.a = REMOTE_VERSION;
	m.b = g_roles.me;
	m.c = node;
	snprintf(m.text, sizeof m.text, "%s %s", g_roles.tool, fabric);
	if (ctl_send(fd, &m) < 0)
		runtime_die("fabric '%s': node %d's host %s closed the connection",
		            fabric, node, host);
	p->pid = -1;
	p->fd = fd;
	p->node = node;
	int rc = ctl_recv(fd, &m, 30000);
	if (rc < 0)
		runtime_die("fabric '%s': node %d's host %s %s", fabric, node, host,
		            rc == -ETIMEDOUT ? "did not join within 30 s"
		                             : "closed the connection while joining");
	if (m.op != CTL_JOINED)
		runtime_die("fabric '%s': node %d's host %s answered something else "
		            "than ntbx %s --serve", fabric, node, host, g_roles.tool);
	if (m.status < 0)
		runtime_die("node %d's host %s: %s", node, host,
		            skip_prefix(m.text));
}

/* The hello, checked; "" or why it is refused. */
static void check_hello(const struct ctl *m, const char *tool,
                        const char *fabric, int me, unsigned nhosts,
                        char *why, size_t len)
{
	char want[sizeof m->text];
	snprintf(want, sizeof want, "%s %s", tool, fabric);
	why[0] = 0;
	if (m->op != CTL_HELLO || m->a != REMOTE_VERSION)
		snprintf(why, len, "the client is not `ntbx %s` of this version",
		         tool);
	else if (strcmp(m->text, want) != 0)
		snprintf(why, len, "the client asks for `%.60s`; this is `ntbx %s "
		         "--serve --fabric %s`", m->text, tool, fabric);
	else if (m->c != me)
		snprintf(why, len, "the client asks for node %lld; this host is "
		         "node %d of fabric '%s'", (long long)m->c, me, fabric);
	else if (m->b < 0 || m->b >= (int64_t)nhosts || m->b == me)
		snprintf(why, len, "the client presents itself as node %lld of "
		         "fabric '%s' (%u nodes, this is node %d)",
		         (long long)m->b, fabric, nhosts, me);
}

static int serve_refuse(int fd, const char *fmt, const char *why)
{
	struct ctl r;
	memset(&r, 0, sizeof r);
	r.op = CTL_JOINED;
	r.status = -EPROTO;
	snprintf(r.text, sizeof r.text, fmt, why);
	ctl_send(fd, &r);
	ntbx_log(NTBX_LOG_ERROR, "%s", r.text);
	close(fd);
	return 1;
}

int bench_serve(const char *tool, const char *fabric, double timeout_s,
                node_serve_fn fn, void *arg)
{
	int is_ofi;
	struct ntbx_dev_hosts d;
	read_desc_or_die(fabric, &d, &is_ofi);
	if (!is_ofi)
		runtime_die("fabric '%s' has all its nodes on this machine (shm "
		            "backend): run `ntbx %s --fabric %s` without --serve",
		            fabric, tool, fabric);
	int me = this_host_node(fabric);
	const char *host;
	unsigned port;
	serve_addr(&d, me, &host, &port);
	struct addrinfo *ai = NULL;
	int gr = resolve(host, port, 1, &ai);
	if (gr)
		runtime_die("fabric '%s': this host's address %s: %s", fabric, host,
		            gai_strerror(gr));
	int ls = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	if (ls >= 0)
		setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (ls < 0 || bind(ls, ai->ai_addr, ai->ai_addrlen) < 0 ||
	    listen(ls, 1) < 0)
		runtime_die("fabric '%s': cannot listen at %s port %u: %s", fabric,
		            host, port, strerror(errno));
	freeaddrinfo(ai);
	printf("ntbx %s: serving fabric '%s' node %d at %s port %u\n", tool,
	       fabric, me, host, port);
	fflush(stdout);
	struct pollfd pl = { .fd = ls, .events = POLLIN };
	int r;
	while ((r = poll(&pl, 1, (int)(timeout_s * 1000))) < 0 && errno == EINTR)
		;
	if (r == 0)
		runtime_die("fabric '%s': no `ntbx %s` came within %g s", fabric,
		            tool, timeout_s);
	int fd = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		runtime_die("accept: %s", strerror(errno));
	close(ls);
	keepalive(fd);

	struct ctl m;
	char why[200];
	int rc = ctl_recv(fd, &m, HELLO_MS);
	if (rc < 0)
		return serve_refuse(fd, "%s", rc == -ETIMEDOUT
		                    ? "the client said nothing within 10 s"
		                    : "the client closed the connection");
	check_hello(&m, tool, fabric, me, d.nhosts, why, sizeof why);
	if (why[0])
		return serve_refuse(fd, "refused: %s", why);
	int client = (int)m.b;
	g_roles.tool = tool;
	g_roles.me = client;   /* what bench_body_node() means here */

	struct ntbx_fabric *f = NULL;
	memset(&m, 0, sizeof m);
	m.op = CTL_JOINED;
	m.status = rc = ntbx_fabric_join(fabric, me, &f);
	if (rc < 0)
		lib_msg(m.text, sizeof m.text, rc, "joining");
	ctl_send(fd, &m);
	if (rc < 0) {
		ntbx_logp(NTBX_LOG_ERROR, NULL, "%s", m.text);
		close(fd);
		return 1;
	}
	rc = wait_links_to(f, client, 15000);
	memset(&m, 0, sizeof m);
	m.op = CTL_READY;
	m.status = rc;
	if (rc == -ETIMEDOUT)
		snprintf(m.text, sizeof m.text, "fabric '%s': the link from node %d "
		         "to node %d did not come up within 15 s", fabric, me, client);
	else if (rc < 0)
		lib_msg(m.text, sizeof m.text, rc, "waiting for links");
	ctl_send(fd, &m);
	if (rc == 0)
		fn(f, fd, arg);
	else
		ntbx_log(NTBX_LOG_ERROR, "%s", skip_prefix(m.text));
	ntbx_fabric_leave(f);
	close(fd);
	return rc ? 1 : 0;
}
