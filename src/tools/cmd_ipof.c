/* SPDX-License-Identifier: MIT */
/*
 * ntbx ipof up|down|show — IP over the fabric (include/ntbx/ipof.h).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "util/util.h"
#include "ntbx/dev.h"
#include "ntbx/fabric.h"
#include "ntbx/ipof.h"
#include "ntbx/qp.h"
#include "output.h"

static void usage(FILE *fp)
{
	fprintf(fp,
	"usage: ntbx ipof up [--fabric F] [--node N] [--addr CIDR] [--mtu M]\n"
	"                    [--name IF] [--daemon --pidfile P [--log FILE]]\n"
	"       ntbx ipof down [--fabric F] [--name IF | --pidfile P]\n"
	"       ntbx ipof show [--fabric F] [--json]\n"
	"\n"
	"IP over the fabric: a TUN network device per node whose link is the\n"
	"fabric.  Packets go as queue-pair messages to the node whose recorded\n"
	"address is their destination (copied below %u bytes, pushed into the\n"
	"receiver's posted buffers above); on a ring, hop by hop.  Unknown\n"
	"destinations, broadcast and multicast are dropped and counted.\n"
	"Needs root (CAP_NET_ADMIN).\n"
	"\n"
	"up options:\n"
	"  --node N        node to be (default: NTBX_NODE, else this network\n"
	"                  namespace's node)\n"
	"  --addr CIDR     address of the interface, e.g. 10.213.0.1/24\n"
	"  --mtu M         %d..%d (default %d: 64 KiB minus the record header)\n"
	"  --name IF       interface name (default %s)\n"
	"  --daemon        detach once the interface is up; needs --pidfile\n"
	"  --pidfile P     write the daemon's pid to P\n"
	"  --log FILE      the daemon's log (default: none; in the foreground\n"
	"                  the log goes to stderr)\n"
	"down stops the daemon named by --pidfile, else the one serving\n"
	"interface --name (default %s) in this network namespace; the\n"
	"interface goes away with it.\n"
	"show prints each node's daemon: interface, address, peers, packets\n"
	"and bytes each way, drops with their reason.\n"
	"\n"
	"common options:\n"
	"  --fabric NAME   the fabric (default $NTBX_FABRIC, else \"default\")\n"
	"  --json          one JSON object per line (show)\n"
	"  -h, --help      this help\n",
	NTBX_QP_PUSH_MIN, NTBX_IPOF_MIN_MTU, NTBX_IPOF_MAX_MTU,
	NTBX_IPOF_DEFAULT_MTU, NTBX_IPOF_DEFAULT_IF, NTBX_IPOF_DEFAULT_IF);
}

static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
	(void)sig;
	g_stop = 1;
}

static void install_signals(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;   /* no SA_RESTART: read() returns EINTR */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

struct up_ctx {
	int fd;               /* readiness pipe (daemon), -1 */
	const char *pidfile;
};

static int write_pidfile(const char *path, pid_t pid)
{
	char tmp[4096];
	if (snprintf(tmp, sizeof tmp, "%s.tmp%d", path, (int)pid) >=
	    (int)sizeof tmp)
		return -ENAMETOOLONG;
	FILE *fp = fopen(tmp, "w");
	if (!fp)
		return -errno;
	fprintf(fp, "%d\n", (int)pid);
	if (fclose(fp) != 0 || rename(tmp, path) != 0) {
		int e = errno;
		unlink(tmp);
		return -e;
	}
	return 0;
}

static void on_ready(void *arg, const char *ifname, int node)
{
	struct up_ctx *c = arg;
	if (c->pidfile) {
		int rc = write_pidfile(c->pidfile, getpid());
		if (rc < 0) {
			ntbx_log(NTBX_LOG_ERROR, "ipof: cannot write pid file %s: %s",
			         c->pidfile, strerror(-rc));
			g_stop = 1;
		}
	}
	if (c->fd >= 0) {
		char msg[128];
		int n = snprintf(msg, sizeof msg, "OK %s %d\n", ifname, node);
		if (write(c->fd, msg, (size_t)n) < 0) {
			/* the parent is gone: keep running */
		}
		close(c->fd);
		c->fd = -1;
	}
}

static int pidfile_read(const char *path)
{
	FILE *fp = fopen(path, "r");
	if (!fp)
		return -errno;
	int pid = 0;
	int ok = fscanf(fp, "%d", &pid) == 1 && pid > 1;
	fclose(fp);
	return ok ? pid : -EINVAL;
}

static int do_up(struct ntbx_ipof_opts *o, int daemon, const char *pidfile,
                 const char *logpath)
{
	struct up_ctx c = { -1, pidfile };
	/* The data thread polls after its last packet for as long as the
	 * wait policy says (util.h: learned, capped at 50 us, at most a
	 * sleep and wake-up there and back while the machine's runnable
	 * threads outnumber its CPUs), unless the
	 * user sets NTBX_SPIN_US: on 2 cores (bench/ipof.sh) 20-50 us
	 * measured best (0: every packet of a stream wakes a thread; 200:
	 * the spinning takes the CPUs the TCP stack needs).  An idle daemon
	 * sleeps. */
	o->ready = on_ready;
	o->ready_arg = &c;
	o->stop = &g_stop;
	if (!daemon) {
		o->log = stderr;
		install_signals();
		int rc = ntbx_ipof_run(o);
		if (pidfile && pidfile_read(pidfile) == getpid())
			unlink(pidfile);
		if (rc < 0)
			lib_die(rc, "ipof");
		return 0;
	}
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		runtime_die("ipof: pipe: %s", strerror(errno));
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		runtime_die("ipof: fork: %s", strerror(errno));
	if (pid == 0) {
		close(p[0]);
		setsid();
		int nul = open("/dev/null", O_RDWR);
		int lfd = logpath ? open(logpath, O_WRONLY | O_CREAT | O_APPEND |
		                         O_CLOEXEC, 0644) : -1;
		if (nul >= 0) {
			/* stdout and stderr (sanitizer reports too) to the log */
			dup2(nul, 0);
			dup2(lfd >= 0 ? lfd : nul, 1);
			dup2(lfd >= 0 ? lfd : nul, 2);
		}
		install_signals();
		c.fd = p[1];
		FILE *lf = lfd >= 0 ? fdopen(lfd, "a") : NULL;
		o->log = lf;
		int rc = ntbx_ipof_run(o);
		if (rc < 0 && c.fd >= 0) {
			char buf[512];
			lib_msg(buf, sizeof buf, rc, "ipof");
			dprintf(c.fd, "ERR %s\n", buf);
		}
		if (rc < 0 && lf)
			fprintf(lf, "ntbx: %s\n", ntbx_errmsg());
		if (pidfile && pidfile_read(pidfile) == getpid())
			unlink(pidfile);
		_exit(rc < 0 ? 1 : 0);
	}
	close(p[1]);
	char buf[600];
	size_t got = 0;
	for (;;) {
		ssize_t n = read(p[0], buf + got, sizeof buf - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
		if (memchr(buf, '\n', got) || got == sizeof buf - 1)
			break;
	}
	buf[got] = 0;
	close(p[0]);
	if (strncmp(buf, "OK ", 3) == 0) {
		char ifn[32] = "";
		int node = -1;
		sscanf(buf + 3, "%31s %d", ifn, &node);
		printf("ipof: %s up as node %d of fabric %s (pid %d)\n", ifn, node,
		       o->fabric, (int)pid);
		return 0;
	}
	int st = 0;
	waitpid(pid, &st, 0);
	char *nl = strchr(buf, '\n');
	if (nl)
		*nl = 0;
	if (strncmp(buf, "ERR ", 4) == 0)
		ntbx_log(NTBX_LOG_ERROR, "%s", buf + 4);
	else
		ntbx_log(NTBX_LOG_ERROR, "ipof: the daemon exited before the "
		         "interface was up");
	return 1;
}

static int pid_alive(int pid)
{
	return kill(pid, 0) == 0 || errno == EPERM;
}

static uint64_t my_netns(void)
{
	struct stat st;
	return stat("/proc/self/ns/net", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

static int do_down(const char *fabric, const char *ifname,
                   const char *pidfile)
{
	int pid;
	if (pidfile) {
		pid = pidfile_read(pidfile);
		if (pid < 0)
			runtime_die("ipof down: cannot read a pid from %s: %s",
			            pidfile, strerror(-pid));
	} else {
		struct ntbx_fabric_info info;
		int rc = ntbx_fabric_info(fabric, &info);
		if (rc < 0)
			lib_die(rc, "ipof down");
		pid = -1;
		uint64_t ns = my_netns();
		for (int n = 0; n < info.nodes; n++) {
			struct ntbx_ipof_status st;
			if (ntbx_ipof_status(fabric, n, &st) == 0 &&
			    strcmp(st.ifname, ifname) == 0 && st.netns == ns)
				pid = st.pid;
		}
		if (pid < 0)
			runtime_die("ipof down: no ipof daemon serves %s in this "
			            "network namespace on fabric '%s'", ifname,
			            fabric);
	}
	if (!pid_alive(pid)) {
		if (pidfile)
			unlink(pidfile);
		runtime_die("ipof down: process %d is not running", pid);
	}
	kill(pid, SIGTERM);
	/* bounded wait: 10 s, then SIGKILL (the kernel removes the device) */
	for (int i = 0; i < 1000 && pid_alive(pid); i++) {
		struct timespec ts = { 0, 10000000 };
		nanosleep(&ts, NULL);
		/* a zombie child of ours would stay "alive": reap it */
		waitpid(pid, NULL, WNOHANG);
	}
	if (pid_alive(pid)) {
		kill(pid, SIGKILL);
		ntbx_log(NTBX_LOG_WARN, "ipof down: process %d did not stop in 10 s: "
		         "killed", pid);
	}
	if (pidfile && pidfile_read(pidfile) == pid)
		unlink(pidfile);
	printf("ipof: stopped process %d\n", pid);
	return 0;
}

static int do_show(const char *fabric, int json)
{
	struct ntbx_fabric_info info;
	int rc = ntbx_fabric_info(fabric, &info);
	if (rc < 0)
		lib_die(rc, "ipof show");
	static const struct out_col cols[] = {
		{ "node", 4 }, { "if", -8 }, { "addr", -18 }, { "mtu", 6 },
		{ "pid", 7 }, { "peers", -14 }, { "tx_pkts", 10 },
		{ "tx_bytes", 13 }, { "rx_pkts", 10 }, { "rx_bytes", 13 },
		{ "drops", 6 }, { "drop_reasons", -20 }, { NULL, 0 },
	};
	struct out o;
	out_init(&o, json, cols);
	int shown = 0;
	for (int n = 0; n < info.nodes; n++) {
		struct ntbx_ipof_status st;
		if (ntbx_ipof_status(fabric, n, &st) < 0)
			continue;
		shown++;
		char peers[256] = "", pj[4096] = "[";
		for (int i = 0; i < st.npeers; i++) {
			const struct ntbx_ipof_peer_status *p = &st.peers[i];
			static const char *sn[] = { "down", "wait", "up" };
			size_t l = strlen(peers);
			snprintf(peers + l, sizeof peers - l, "%s%d:%s",
			         i ? "," : "", p->node, sn[p->state]);
			l = strlen(pj);
			snprintf(pj + l, sizeof pj - l,
			         "%s{\"node\":%d,\"state\":\"%s\",\"hops\":%d,"
			         "\"tx_pkts\":%" PRIu64 ",\"tx_bytes\":%" PRIu64
			         ",\"rx_pkts\":%" PRIu64 ",\"rx_bytes\":%" PRIu64
			         ",\"pushed_bytes\":%" PRIu64 ",\"connects\":%"
			         PRIu64 "}", i ? "," : "", p->node, sn[p->state],
			         p->hops, p->tx_pkts, p->tx_bytes, p->rx_pkts,
			         p->rx_bytes, p->pushed_bytes, p->connects);
		}
		size_t l = strlen(pj);
		snprintf(pj + l, sizeof pj - l, "]");
		char reasons[256] = "", dj[512] = "{";
		uint64_t total = 0;
		for (int r = 0; r < NTBX_IPOF_NDROPS; r++) {
			total += st.drops[r];
			l = strlen(dj);
			snprintf(dj + l, sizeof dj - l, "%s\"%s\":%" PRIu64,
			         r ? "," : "", ntbx_ipof_drop_name(r), st.drops[r]);
			if (!st.drops[r])
				continue;
			l = strlen(reasons);
			snprintf(reasons + l, sizeof reasons - l, "%s%s=%" PRIu64,
			         *reasons ? "," : "", ntbx_ipof_drop_name(r),
			         st.drops[r]);
		}
		l = strlen(dj);
		snprintf(dj + l, sizeof dj - l, "}");
		out_int(&o, "node", n);
		out_str(&o, "if", st.ifname);
		out_str(&o, "addr", st.addr[0] ? st.addr : "-");
		out_int(&o, "mtu", st.mtu);
		out_int(&o, "pid", st.pid);
		out_raw(&o, "peers", pj, peers[0] ? peers : "-");
		out_u64(&o, "tx_pkts", st.tx_pkts);
		out_u64(&o, "tx_bytes", st.tx_bytes);
		out_u64(&o, "rx_pkts", st.rx_pkts);
		out_u64(&o, "rx_bytes", st.rx_bytes);
		out_u64(&o, "drops", total);
		out_raw(&o, "drop_reasons", dj, reasons[0] ? reasons : "-");
		out_row_end(&o);
	}
	if (!shown)
		runtime_die("ipof show: no ipof daemon runs on fabric '%s' (start "
		            "one with: ntbx ipof up --fabric %s)", fabric, fabric);
	return 0;
}

static int cidr_ok(const char *s)
{
	char a[64];
	if (strlen(s) >= sizeof a)
		return 0;
	strcpy(a, s);
	char *sl = strchr(a, '/');
	long pfx = -1;
	if (sl) {
		*sl = 0;
		char *end;
		pfx = strtol(sl + 1, &end, 10);
		if (end == sl + 1 || *end)
			return 0;
	}
	unsigned char buf[16];
	if (inet_pton(AF_INET, a, buf) == 1)
		return pfx == -1 || (pfx >= 1 && pfx <= 32);
	if (inet_pton(AF_INET6, a, buf) == 1)
		return pfx == -1 || (pfx >= 1 && pfx <= 128);
	return 0;
}

int cmd_ipof(int argc, char **argv)
{
	if (argc < 2)
		usage_die("missing subcommand: up, down or show");
	const char *sub = argv[1];
	if (is_help(sub)) {
		usage(stdout);
		return 0;
	}
	int which = strcmp(sub, "up") == 0 ? 0 : strcmp(sub, "down") == 0 ? 1
	          : strcmp(sub, "show") == 0 ? 2 : -1;
	if (which < 0)
		usage_die("unknown ipof subcommand '%s' (up, down, show)", sub);
	static char cmdname[32];
	snprintf(cmdname, sizeof cmdname, "ipof %s", sub);
	g_cmd = cmdname;

	const char *fabric_opt = NULL, *ifname = NULL, *pidfile = NULL,
	           *logpath = NULL, *addr = NULL;
	int node = -1, mtu = 0, daemon = 0, json = 0;
	for (int i = 2; i < argc; i++) {
		const char *v;
		if (is_help(argv[i])) {
			usage(stdout);
			return 0;
		} else if (opt_flag(argv[i], "--json")) {
			json = 1;
		} else if (which == 0 && opt_flag(argv[i], "--daemon")) {
			daemon = 1;
		} else if ((v = opt_value(argc, argv, &i, "--fabric"))) {
			fabric_opt = v;
		} else if (which == 0 && (v = opt_value(argc, argv, &i, "--node"))) {
			node = (int)parse_int(v, "--node", 0, NTBX_MAX_NODES - 1);
		} else if (which == 0 && (v = opt_value(argc, argv, &i, "--addr"))) {
			addr = v;
		} else if (which == 0 && (v = opt_value(argc, argv, &i, "--mtu"))) {
			mtu = (int)parse_int(v, "--mtu", NTBX_IPOF_MIN_MTU,
			                     NTBX_IPOF_MAX_MTU);
		} else if (which == 0 && (v = opt_value(argc, argv, &i, "--log"))) {
			logpath = v;
		} else if (which != 2 && (v = opt_value(argc, argv, &i, "--name"))) {
			if (!*v || strlen(v) > 15 || strchr(v, '/'))
				usage_die("--name: '%s' is not an interface name "
				          "(1..15 characters, no '/')", v);
			ifname = v;
		} else if (which != 2 &&
		           (v = opt_value(argc, argv, &i, "--pidfile"))) {
			pidfile = v;
		} else {
			bad_arg(argv[i]);
		}
	}
	const char *fabric = default_fabric(fabric_opt);
	if (which == 0) {
		if (daemon && !pidfile)
			usage_die("--daemon needs --pidfile P");
		if (addr && !cidr_ok(addr))
			usage_die("--addr: '%s' is not ADDRESS/PREFIX (e.g. "
			          "10.213.0.1/24 or fd00::1/64)", addr);
		struct ntbx_ipof_opts o = {
			.fabric = fabric, .node = node, .ifname = ifname,
			.addr = addr, .mtu = mtu,
		};
		return do_up(&o, daemon, pidfile, logpath);
	}
	if (which == 1) {
		if (ifname && pidfile)
			usage_die("give --name or --pidfile, not both");
		return do_down(fabric, ifname ? ifname : NTBX_IPOF_DEFAULT_IF,
		               pidfile);
	}
	return do_show(fabric, json);
}
