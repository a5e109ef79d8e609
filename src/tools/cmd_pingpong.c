/* SPDX-License-Identifier: MIT */
/*
 * ntbx pingpong — one-way latency between two nodes, like Linux
 * ntb_pingpong, against a raw shared-memory cache-line ping-pong measured
 * in the same run.
 *
 * Each node owns a small region of its node memory: a flag line (a 64-bit
 * sequence number) and the payload behind it.  A ping writes the payload
 * into the peer's region through the outbound window, then either rings a
 * doorbell (the peer sleeps on it) or stores the sequence number last (the
 * peer spins on its own memory).  The peer copies the payload out and
 * answers the same way.  One-way latency is half the round trip.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

#include "args.h"
#include "ntbx/dev.h"
#include "ntbx/fabric.h"
#include "output.h"
#include "proc.h"

#define MAX_SIZES 32
#define FLAG_SPACE 64
#define REPLY_TIMEOUT_NS (10ull * 1000000000ull)

enum { PP_RAW, PP_POLL, PP_DOORBELL };
static const char *const mode_names[] = { "raw", "poll", "doorbell" };
enum { PP_SETUP = CTL_USER, PP_RUN };

struct pp_opts {
	const char *fabric;
	char temp[NTBX_FABRIC_NAME_MAX + 1];
	uint64_t sizes[MAX_SIZES];
	int nsizes;
	int poll, doorbell;
	long iters;
	int json;
	struct bench_remote_opts remote;
};

static void usage(FILE *fp)
{
	fprintf(fp,
	"usage: ntbx pingpong [--fabric NAME] [--sizes LIST]\n"
	"                     [--mode doorbell|poll|both] [--iters N] [--json]\n"
	"                     [--peer N]\n"
	"       ntbx pingpong --serve --fabric NAME [--timeout S]\n"
	"\n"
	"One-way latency between two processes on two nodes, like Linux\n"
	"ntb_pingpong.  Each side writes the payload into the peer's memory\n"
	"through its outbound window (by DMA where the backend maps no peer\n"
	"window), then a sequence number, then:\n"
	"  doorbell  rings the peer (ntbx_peer_db_set); the peer sleeps in\n"
	"            ntbx_db_wait_prepare/commit/finish, clears it, checks the\n"
	"            sequence number and replies;\n"
	"  poll      the peer spins on the sequence number in its own memory.\n"
	"In the same run it measures a raw ping-pong of two processes spinning\n"
	"on one cache line of a shared anonymous page: the floor for 'poll'.\n"
	"The two processes are pinned to different CPUs when there are 2+.\n"
	"Between hosts (an ofi fabric) the raw ping-pong is between two\n"
	"processes of this host.\n"
	"\n"
	"options:\n"
	"  --fabric NAME   use this fabric (nodes 0 and 1); default: a private\n"
	"                  temporary 2-node switch fabric, removed at the end\n"
	"  --sizes LIST    payload sizes (default 8,64,512,4K,64K)\n"
	"  --mode M        doorbell, poll or both (default both)\n"
	"  --iters N       round trips per size and mode (default 5000)\n"
	"  --json          one JSON object per result line\n"
	BENCH_REMOTE_HELP
	"\n"
	"result: size, mode, oneway_ns_p50, oneway_ns_p99, raw_oneway_ns_p50,\n"
	"ratio (p50 / raw p50).\n");
}

/* Both nodes' view of the exchange. */
struct pp_side {
	struct ntbx_dev *dev;
	int port;
	char *mine;          /* own region (node memory) */
	char *theirs;        /* peer's region through the outbound window, or
	                      * NULL: the backend reaches it only by DMA */
	uint64_t peer_off;   /* the peer's region in the window */
	struct ntbx_dma_op op[2];   /* DMA only: payload and flag writes */
	int pending;         /* ... submitted, not yet waited for */
	uint64_t flagv;      /* ... the flag's value, the write's source */
	uint64_t *raw;       /* shared anonymous page */
	char *buf;           /* private copy of received payloads */
	uint64_t max_size;
};

static uint64_t *flag_of(char *region)
{
	return (uint64_t *)region;
}

static int db_wait_bit(struct pp_side *s)
{
	uint64_t start = 0;
	for (;;) {
		uint32_t bits = 0;
		struct ntbx_db_waiter w;
		int rc = ntbx_db_wait_prepare(s->dev, &w, 1ull << s->port,
		                              NTBX_DB_CONTROL_MASK);
		if (rc < 0)
			return rc;
		ntbx_db_read(s->dev, s->port, &bits);
		if (!(bits & 1))
			rc = ntbx_db_wait_commit(s->dev, &w, 1000);
		ntbx_db_wait_finish(s->dev, &w);
		ntbx_db_read(s->dev, s->port, &bits);
		if (bits & 1)
			return ntbx_db_clear(s->dev, s->port, NTBX_DB_CONTROL_MASK);
		if (rc < 0 && rc != -ETIMEDOUT && rc != -EINTR)
			return rc;
		uint64_t t = now_ns();
		if (!start)
			start = t;
		else if (t - start > REPLY_TIMEOUT_NS)
			return -ETIMEDOUT;
		if (!ntbx_node_alive(s->dev, ntbx_port_peer_node(s->dev, s->port)))
			return -ECONNRESET;
	}
}

/*
 * A backend without mapped peer windows: the payload and then the flag go
 * by DMA, without waiting; writes land in submission order and before a
 * later doorbell (the device contract), so the peer that sees the flag or
 * the doorbell sees the payload.  The previous round's writes landed
 * before the peer answered them; they are waited for only to reuse their
 * operations.
 */
static int dma_put(struct pp_side *s, const char *src, size_t size,
                   uint64_t flag)
{
	for (int i = 0; i < s->pending; i++) {
		int rc = ntbx_dma_wait(s->dev, &s->op[i], 10000);
		if (rc < 0)
			return rc;
	}
	s->pending = 0;
	int rc = 0;
	if (size)
		rc = ntbx_dma_write(s->dev, s->port, 0, s->peer_off + FLAG_SPACE,
		                    src, size, &s->op[s->pending++]);
	if (rc == 0 && flag) {
		s->flagv = flag;
		rc = ntbx_dma_write(s->dev, s->port, 0, s->peer_off, &s->flagv,
		                    sizeof s->flagv, &s->op[s->pending++]);
	}
	return rc;
}

/*
 * Wait for the other side's message @seq: its flag, by spinning or after
 * doorbells.  A doorbell proves nothing by itself: bit 0 is also the
 * fabric's link event, which a neighbour's bring-up rings, and on a
 * DMA-only backend that doorbell may land after our set-up cleared the
 * bit; so the flag decides, and a doorbell without it is waited past.
 */
static int wait_msg(struct pp_side *s, int mode, uint64_t seq)
{
	if (mode == PP_POLL)
		return spin_until_eq(flag_of(s->mine), seq, REPLY_TIMEOUT_NS);
	for (;;) {
		int rc = db_wait_bit(s);
		if (rc < 0 || __atomic_load_n(flag_of(s->mine), __ATOMIC_ACQUIRE) == seq)
			return rc;
	}
}

/* One side of one exchange; the initiator sends first.  Returns 0 or
 * -errno. */
static int pp_exchange(struct pp_side *s, int mode, size_t size,
                       uint64_t seq, int initiator)
{
	int rc;
	if (mode == PP_RAW) {
		if (initiator) {
			__atomic_store_n(s->raw, 2 * seq - 1, __ATOMIC_RELEASE);
			return spin_until_eq(s->raw, 2 * seq, REPLY_TIMEOUT_NS);
		}
		rc = spin_until_eq(s->raw, 2 * seq - 1, REPLY_TIMEOUT_NS);
		if (rc == 0)
			__atomic_store_n(s->raw, 2 * seq, __ATOMIC_RELEASE);
		return rc;
	}
	char *src = s->buf;
	if (!initiator) {
		/* Wait for the ping, take the payload out, answer with it. */
		rc = wait_msg(s, mode, seq);
		if (rc < 0)
			return rc;
		memcpy(s->buf, s->mine + FLAG_SPACE, size);
	}
	if (s->theirs) {
		memcpy(s->theirs + FLAG_SPACE, src, size);
		__atomic_store_n(flag_of(s->theirs), seq, __ATOMIC_RELEASE);
	} else {
		rc = dma_put(s, src, size, seq);
		if (rc < 0)
			return rc;
	}
	if (mode != PP_POLL) {
		rc = ntbx_peer_db_set(s->dev, s->port, NTBX_DB_CONTROL_MASK);
		if (rc < 0)
			return rc;
	}
	if (!initiator)
		return 0;
	rc = wait_msg(s, mode, seq);
	if (rc < 0)
		return rc;
	memcpy(s->buf, s->mine + FLAG_SPACE, size);
	keep(s->buf);
	return 0;
}

static int64_t alloc_region(struct ntbx_dev *dev, uint64_t max_size,
                            char **mine)
{
	int64_t off = ntbx_mem_alloc(dev, FLAG_SPACE + max_size, 4096,
	                             "pingpong", 1);
	if (off < 0)
		return off;
	*mine = (char *)ntbx_mem_base(dev) + off;
	memset(*mine, 0, FLAG_SPACE + max_size);
	return off;
}

static int map_peer(struct pp_side *s, uint64_t peer_off)
{
	void *win = NULL;
	uint64_t wsize;
	int rc = ntbx_dev_maps_peer_windows(s->dev)
	         ? ntbx_peer_mw_get_addr(s->dev, s->port, 0, &win, &wsize)
	         : ntbx_peer_mw_size(s->dev, s->port, 0, &wsize);
	if (rc < 0)
		return rc;
	if (peer_off + FLAG_SPACE + s->max_size > wsize)
		return -ERANGE;
	s->peer_off = peer_off;
	s->theirs = win ? (char *)win + peer_off : NULL;
	return 0;
}

/* ---------------------------------------------------------- node 1 */

static void pp_serve(struct ntbx_fabric *f, int fd, void *arg)
{
	struct pp_side s;
	memset(&s, 0, sizeof(s));
	s.dev = ntbx_fabric_dev(f);
	s.raw = arg;
	s.port = ntbx_port_of_node(s.dev, bench_body_node());
	int64_t off = -1;
	struct ctl m;
	while (ctl_recv(fd, &m, -1) == 0) {
		if (m.op == CTL_QUIT)
			break;
		struct ctl r;
		memset(&r, 0, sizeof(r));
		r.op = CTL_OK;
		if (m.op == PP_SETUP) {
			s.max_size = (uint64_t)m.b;
			dma_put(&s, NULL, 0, 0);   /* nothing in flight */
			free(s.buf);
			s.buf = malloc(s.max_size ? s.max_size : 1);
			if (s.buf)
				memset(s.buf, 0xa5, s.max_size);
			off = alloc_region(s.dev, s.max_size, &s.mine);
			int rc = off < 0 ? (int)off : map_peer(&s, (uint64_t)m.a);
			if (!s.buf)
				rc = -ENOMEM;
			ntbx_db_clear_mask(s.dev, s.port, NTBX_DB_CONTROL_MASK);
			ntbx_db_clear(s.dev, s.port, NTBX_DB_CONTROL_MASK);
			r.status = rc;
			r.a = off;
			if (rc < 0)
				lib_msg(r.text, sizeof(r.text), rc, "pingpong peer setup");
			ctl_send(fd, &r);
		} else if (m.op == PP_RUN) {
			/* the request may come from another host: checked */
			if (m.a < PP_RAW || m.a > PP_DOORBELL ||
			    (m.a == PP_RAW && !s.raw) || !s.buf || off < 0 || m.b < 0 ||
			    (uint64_t)m.b > s.max_size || m.c < 0) {
				ctl_reply(fd, -EINVAL, "pingpong peer: a run it was not "
				          "set up for");
				continue;
			}
			ctl_send(fd, &r);   /* ready */
			uint64_t seq0 = (uint64_t)m.d;
			int rc = 0;
			for (int64_t i = 1; i <= m.c && rc == 0; i++)
				rc = pp_exchange(&s, (int)m.a, (size_t)m.b,
				                 seq0 + (uint64_t)i, 0);
			r.status = rc;
			if (rc < 0)
				lib_msg(r.text, sizeof(r.text), rc, "pingpong peer answering");
			ctl_send(fd, &r);   /* done */
		} else {
			ctl_reply(fd, -EINVAL, "unknown request");
		}
	}
	if (off >= 0)
		ntbx_mem_free(s.dev, off);
	dma_put(&s, NULL, 0, 0);   /* nothing in flight from buf */
	free(s.buf);
}

/* ---------------------------------------------------------- node 0 */

struct pp_result {
	uint64_t p50, p99;
};

/* The raw ping-pong's other side when the peer node is on another host:
 * a process of this host, on the peer's CPU, for @total exchanges. */
static pid_t raw_responder(struct pp_side *s, long total, int cpu)
{
	pid_t pid = fork_tied();
	if (pid < 0)
		runtime_die("cannot fork: %s", strerror(errno));
	if (pid == 0) {
		cpu_pin(cpu);
		int rc = 0;
		for (long i = 1; i <= total && rc == 0; i++)
			rc = pp_exchange(s, PP_RAW, 0, (uint64_t)i, 0);
		_exit(rc ? 1 : 0);
	}
	return pid;
}

static void pp_run(struct pp_side *s, struct node_proc *peer, int mode,
                   size_t size, long iters, uint64_t *seq, int cpu1,
                   struct pp_result *res)
{
	long warm = iters / 10 < 1000 ? iters / 10 : 1000;
	long total = iters + warm;
	uint64_t *lat = malloc(sizeof(*lat) * (size_t)iters);
	if (!lat)
		runtime_die("out of memory");
	if (mode == PP_RAW)
		__atomic_store_n(s->raw, 0, __ATOMIC_RELEASE);
	struct ctl m, r;
	memset(&m, 0, sizeof(m));
	m.op = PP_RUN;
	m.a = mode;
	m.b = (int64_t)size;
	m.c = total;
	m.d = mode == PP_RAW ? 0 : (int64_t)*seq;
	pid_t rawpid = 0;
	if (mode == PP_RAW && peer->pid < 0)
		rawpid = raw_responder(s, total, cpu1);
	else
		ctl_call(peer, &m, &r);
	uint64_t base = mode == PP_RAW ? 0 : *seq;
	for (long i = 1; i <= total; i++) {
		uint64_t t0 = now_ns();
		int rc = pp_exchange(s, mode, size, base + (uint64_t)i, 1);
		uint64_t t1 = now_ns();
		if (rc == -ETIMEDOUT)
			runtime_die("node %d stopped answering (%s ping-pong, %zu bytes)",
			            peer->node, mode_names[mode], size);
		if (rc < 0)
			lib_die(rc, "ping-pong");
		if (i > warm)
			lat[i - warm - 1] = (t1 - t0) / 2;
	}
	if (mode != PP_RAW)
		*seq += (uint64_t)total;
	if (rawpid) {
		int st = 0;
		while (waitpid(rawpid, &st, 0) < 0 && errno == EINTR)
			;
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			runtime_die("the raw ping-pong's responder failed");
	} else {
		if (ctl_recv(peer->fd, &r, 30000) < 0)
			runtime_die("node %d process died", peer->node);
		if (r.status < 0)
			runtime_die("%s", r.text);
	}
	sort_u64(lat, (size_t)iters);
	res->p50 = pctile(lat, (size_t)iters, 50);
	res->p99 = pctile(lat, (size_t)iters, 99);
	free(lat);
}

static int pp_body(void *arg)
{
	struct pp_opts *o = arg;
	const char *fabric = o->temp[0] ? o->temp : o->fabric;
	uint64_t *raw = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
	                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED)
		runtime_die("mmap: %s", strerror(errno));
	int cpu0 = -1, cpu1 = -1;
	if (cpus_allowed() >= 2) {
		cpu0 = cpu_nth(0);
		cpu1 = cpu_nth(1);
	}
	int me, other;
	bench_roles("pingpong", o->temp[0] ? NULL : fabric, o->remote.peer, &me,
	            &other);
	struct node_proc peer;
	node_spawn(&peer, fabric, other, cpu1, me, pp_serve, raw);
	cpu_pin(cpu0);
	struct ntbx_fabric *f = join_or_die(fabric, me);
	node_wait_ready(&peer);
	wait_links_or_die(f, other);

	struct pp_side s;
	memset(&s, 0, sizeof(s));
	s.dev = ntbx_fabric_dev(f);
	s.port = ntbx_port_of_node(s.dev, other);
	s.raw = raw;
	s.max_size = o->sizes[o->nsizes - 1];
	s.buf = malloc(s.max_size);
	if (!s.buf)
		runtime_die("out of memory");
	memset(s.buf, 0x5a, s.max_size);
	int64_t off = alloc_region(s.dev, s.max_size, &s.mine);
	if (off < 0) {
		char mem[32];
		runtime_die("fabric '%s': node %d cannot allocate its pingpong "
		            "buffer (node memory %s; use smaller --sizes or a larger "
		            "--memory)", fabric, me,
		            fmt_size(mem, sizeof(mem), ntbx_mem_size(s.dev)));
	}
	ntbx_db_clear_mask(s.dev, s.port, NTBX_DB_CONTROL_MASK);
	ntbx_db_clear(s.dev, s.port, NTBX_DB_CONTROL_MASK);
	struct ctl m, r;
	memset(&m, 0, sizeof(m));
	m.op = PP_SETUP;
	m.a = off;
	m.b = (int64_t)s.max_size;
	ctl_call(&peer, &m, &r);
	int rc = map_peer(&s, (uint64_t)r.a);
	if (rc == -ERANGE)
		runtime_die("fabric '%s': node %d's buffer lies beyond outbound "
		            "window 0 (recreate the fabric with a larger --window)",
		            fabric, other);
	if (rc < 0)
		lib_die(rc, "mapping outbound window 0");

	static const struct out_col cols[] = {
		{ "size", 6 }, { "mode", -8 }, { "oneway_ns_p50", 13 },
		{ "oneway_ns_p99", 13 }, { "raw_oneway_ns_p50", 17 },
		{ "ratio", 6 }, { NULL, 0 },
	};
	struct out out;
	out_init(&out, o->json, cols);
	uint64_t seq = 0;
	for (int si = 0; si < o->nsizes; si++) {
		size_t size = (size_t)o->sizes[si];
		struct pp_result raw_r, res[3];
		pp_run(&s, &peer, PP_RAW, size, o->iters, &seq, cpu1, &raw_r);
		if (o->poll)
			pp_run(&s, &peer, PP_POLL, size, o->iters, &seq, cpu1,
			       &res[PP_POLL]);
		if (o->doorbell)
			pp_run(&s, &peer, PP_DOORBELL, size, o->iters, &seq, cpu1,
			       &res[PP_DOORBELL]);
		for (int mode = PP_POLL; mode <= PP_DOORBELL; mode++) {
			if ((mode == PP_POLL && !o->poll) ||
			    (mode == PP_DOORBELL && !o->doorbell))
				continue;
			out_size(&out, "size", size);
			out_str(&out, "mode", mode_names[mode]);
			out_u64(&out, "oneway_ns_p50", res[mode].p50);
			out_u64(&out, "oneway_ns_p99", res[mode].p99);
			out_u64(&out, "raw_oneway_ns_p50", raw_r.p50);
			out_dbl(&out, "ratio", raw_r.p50
			        ? (double)res[mode].p50 / (double)raw_r.p50 : 0, 2);
			out_int(&out, "iters", o->iters);
			out_row_end(&out);
		}
	}
	node_stop(&peer);
	ntbx_mem_free(s.dev, off);
	dma_put(&s, NULL, 0, 0);   /* nothing in flight from buf */
	free(s.buf);
	ntbx_fabric_leave(f);
	munmap(raw, 4096);
	return 0;
}

int cmd_pingpong(int argc, char **argv)
{
	static struct pp_opts o;
	memset(&o, 0, sizeof(o));
	o.poll = o.doorbell = 1;
	o.iters = 5000;
	o.remote = (struct bench_remote_opts)BENCH_REMOTE_OPTS_INIT;
	const char *sizes = "8,64,512,4K,64K";
	for (int i = 1; i < argc; i++) {
		const char *v;
		if (is_help(argv[i])) {
			usage(stdout);
			return 0;
		} else if (opt_flag(argv[i], "--json")) {
			o.json = 1;
		} else if ((v = opt_value(argc, argv, &i, "--fabric"))) {
			o.fabric = v;
		} else if ((v = opt_value(argc, argv, &i, "--sizes"))) {
			sizes = v;
		} else if ((v = opt_value(argc, argv, &i, "--mode"))) {
			if (strcmp(v, "doorbell") == 0)
				o.poll = 0, o.doorbell = 1;
			else if (strcmp(v, "poll") == 0)
				o.poll = 1, o.doorbell = 0;
			else if (strcmp(v, "both") == 0)
				o.poll = o.doorbell = 1;
			else
				usage_die("--mode: '%s' is not doorbell, poll or both", v);
		} else if ((v = opt_value(argc, argv, &i, "--iters"))) {
			o.iters = parse_int(v, "--iters", 1, 100000000);
		} else if (bench_remote_opt(argc, argv, &i, &o.remote)) {
			continue;
		} else {
			bad_arg(argv[i]);
		}
	}
	if (o.remote.serve) {
		if (!o.fabric)
			usage_die("--serve needs --fabric (an ofi fabric)");
		return bench_serve("pingpong", o.fabric, o.remote.timeout,
		                   pp_serve, NULL);
	}
	o.nsizes = parse_size_list(sizes, "--sizes", 1, 16ull << 20, o.sizes,
	                           MAX_SIZES);
	if (o.fabric) {
		struct ntbx_fabric_info info;
		fabric_require(o.fabric, &info);
		if (info.nodes < 2)
			runtime_die("fabric '%s' has %d node; pingpong needs 2",
			            o.fabric, info.nodes);
	} else {
		temp_fabric_create("pingpong", 2, NTBX_TOPO_SWITCH, 0, o.temp,
		                   sizeof(o.temp));
	}
	return supervise(o.temp[0] ? o.temp : NULL, pp_body, &o);
}
