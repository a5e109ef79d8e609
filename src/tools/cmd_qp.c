/* SPDX-License-Identifier: MIT */
/*
 * ntbx qp — queue-pair throughput and latency, between two nodes of a
 * switch or across a ring with forwarding (seed 002, Figs. 5-7).
 *
 * One process per node; this one is node 0 and always one end.  For every
 * forwarding thread count and every distance (hops), node 0 and node
 * `hops` make a queue pair, exchanging their struct ntbx_qp_addr over the
 * control socket (a pipe between the two processes), and then, per size:
 *
 *   latency  node 0 sends one message, the peer sends it back; one-way
 *            is half the round trip (median over --iters or --seconds);
 *   stream   node 0 sends messages for --seconds, then an empty message;
 *            the peer answers with the byte count it received, which must
 *            match.  Alternated with a memcpy of the same size, best of
 *            --reps repetitions each.
 *
 * On a ring every node process runs ntbx_qp_forwarder_start(f, threads).
 * With --push the receiver posts buffers in its node memory
 * (ntbx_qp_post_recv) and receives with ntbx_qp_recv_posted, so large
 * messages are written straight into them.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "ntbx/dev.h"
#include "ntbx/fabric.h"
#include "ntbx/qp.h"
#include "output.h"
#include "proc.h"
#include "util/util.h"

#define MAX_SIZES 32
#define MAX_NODES_QP 8

enum {
	QP_FWD = CTL_USER,  /* a = threads: restart forwarding */
	QP_CREATE,          /* a = peer node, b = ring, c = flags, d = posted,
	                       x = max size, addr = peer's endpoint */
	QP_ECHO,            /* serve echo until an empty message */
	QP_SINK,            /* count bytes until an empty message */
	QP_CLOSE,
};

struct qp_opts {
	const char *fabric;
	char temp[NTBX_FABRIC_NAME_MAX + 1];
	int nodes;
	enum ntbx_topology topo;
	int nodes_set, topo_set;
	uint64_t sizes[MAX_SIZES];
	int nsizes;
	int threads[NTBX_QP_MAX_THREADS];
	int nthreads;
	int hops[NTBX_MAX_NODES];
	int nhops;
	const char *hops_arg;
	int push, dma, posted;
	uint32_t ring;
	double seconds;
	int reps;
	long iters;
	int json;
	struct bench_remote_opts remote;
};

static void usage(FILE *fp)
{
	fprintf(fp,
	"usage: ntbx qp [--fabric NAME] [--nodes N] [--topology switch|ring]\n"
	"               [--sizes LIST] [--threads LIST] [--hops LIST] [--push]\n"
	"               [--posted N] [--dma] [--ring-size SIZE] [--seconds S]\n"
	"               [--reps R] [--iters N] [--json] [--peer N]\n"
	"       ntbx qp --serve --fabric NAME [--timeout S]\n"
	"\n"
	"Queue-pair throughput and latency between node 0 and a node HOPS away,\n"
	"one process per node.  On a ring every node runs THREADS transfer\n"
	"threads (ntbx_qp_forwarder_start) that forward traffic for the others\n"
	"through bypass buffers (seed 002).  For each size: a stream of\n"
	"messages (throughput, against memcpy of the same size in the same run)\n"
	"and a message ping-pong (one-way latency).\n"
	"\n"
	"options:\n"
	"  --fabric NAME    use this fabric; default: a private temporary fabric\n"
	"                   of --nodes and --topology, removed at the end\n"
	"  --nodes N        2..%d nodes for the temporary fabric (default 2;\n"
	"                   ring: 3..%d)\n"
	"  --topology T     switch (default) or ring\n"
	"  --sizes LIST     message sizes (default 64,1K,16K,64K,256K,1M)\n"
	"  --threads LIST   transfer threads per node on a ring, 1..8, e.g.\n"
	"                   1,2,4,8 (default 1)\n"
	"  --hops LIST      distances to measure (default: every distance, 1 to\n"
	"                   nodes/2 on a ring, 1 on a switch)\n"
	"  --push           receiver posts node-memory buffers; messages of %uK\n"
	"                   and more are written straight into them\n"
	"  --posted N       receive buffers kept posted with --push, 1..%d\n"
	"                   (default 2: double buffering)\n"
	"  --dma            push with the DMA engine (NTBX_QP_DMA)\n"
	BENCH_REMOTE_HELP
	"  --ring-size SIZE receive ring per queue pair (default %uK)\n"
	"  --seconds S      stream time per size (default 0.3)\n"
	"  --reps R         stream/memcpy repetitions per size (default 3)\n"
	"  --iters N        latency round trips per size, at most (default 2000)\n"
	"  --json           one JSON object per result line\n"
	"\n"
	"result: size, hops, threads, mbps (stream, MB/s = 10^6 bytes/s),\n"
	"oneway_ns_p50, memcpy_mbps (1 thread, same size), ratio, and\n"
	"handoff_mbps: two bare processes on two CPUs copying the same messages\n"
	"through a shared ring of the same size (the machine's ceiling for any\n"
	"channel that copies in and out), with handoff_ratio = mbps / that.\n",
	MAX_NODES_QP, MAX_NODES_QP, NTBX_QP_PUSH_MIN >> 10, NTBX_QP_MAX_POSTED,
	NTBX_QP_DEFAULT_RING >> 10);
}

/* ------------------------------------------------------ a queue pair */

struct qp_end {
	struct ntbx_fabric *f;
	struct ntbx_qp *qp;
	char *buf;
	size_t cap;
	int push;          /* buffers to keep posted (0: ntbx_qp_recv) */
	int64_t posted[NTBX_QP_MAX_POSTED];
	int nposted;
};

static void end_free_posted(struct qp_end *e)
{
	for (int i = 0; i < e->nposted; i++)
		ntbx_mem_free(ntbx_fabric_dev(e->f), e->posted[i]);
	e->nposted = 0;
}

static int end_post_all(struct qp_end *e)
{
	struct ntbx_dev *dev = ntbx_fabric_dev(e->f);
	for (int i = 0; i < e->push && i < NTBX_QP_MAX_POSTED; i++) {
		int64_t off = ntbx_mem_alloc(dev, e->cap, 4096, "qp posted", 1);
		if (off < 0)
			return (int)off;
		e->posted[e->nposted++] = off;
		int rc = ntbx_qp_post_recv(e->qp, (uint64_t)off, e->cap);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Receive one message: returns its length and where it is. */
static ssize_t end_recv(struct qp_end *e, const char **data)
{
	if (!e->push) {
		int eof = 0;
		ssize_t n = ntbx_qp_recv(e->qp, e->buf, e->cap, 0, &eof);
		if (n == 0 && eof)
			return -EPIPE;
		*data = e->buf;
		return n;
	}
	uint64_t off;
	ssize_t n = ntbx_qp_recv_posted(e->qp, &off, 0);
	if (n < 0)
		return n;
	struct ntbx_dev *dev = ntbx_fabric_dev(e->f);
	if (off + e->cap > ntbx_mem_size(dev))
		return -EPROTO;
	*data = (const char *)ntbx_mem_base(dev) + off;
	/* The buffer goes back to the end of the queue at once: the caller
	 * uses the data before the next receive, and the sender cannot be
	 * more than NTBX_QP_MAX_POSTED - 1 messages ahead into it. */
	int rc = ntbx_qp_post_recv(e->qp, off, e->cap);
	if (rc < 0)
		return rc;
	return n;
}

static ssize_t send_all(struct ntbx_qp *qp, const void *buf, size_t len)
{
	ssize_t n = ntbx_qp_send(qp, buf, len, 0);
	if (n >= 0 && (size_t)n != len)
		return -EIO;
	return n;
}

/* ---------------------------------------------------------- node k */

static void qp_serve(struct ntbx_fabric *f, int fd, void *arg)
{
	(void)arg;
	struct qp_end e;
	memset(&e, 0, sizeof(e));
	e.f = f;
	struct ctl m, r;
	while (ctl_recv(fd, &m, -1) == 0) {
		if (m.op == CTL_QUIT)
			break;
		memset(&r, 0, sizeof(r));
		r.op = CTL_OK;
		int rc = 0;
		switch (m.op) {
		case QP_FWD:
			ntbx_qp_forwarder_stop(f);
			rc = ntbx_qp_forwarder_start(f, (int)m.a);
			ctl_reply(fd, rc < 0 ? rc : 0, "starting transfer threads");
			break;
		case QP_CREATE: {
			struct ntbx_qp_opts qo = { .ring_size = (uint32_t)m.b,
			                           .flags = (uint32_t)m.c };
			e.push = (int)m.d;
			e.cap = (size_t)m.x;
			free(e.buf);
			e.buf = malloc(e.cap ? e.cap : 1);
			if (!e.buf) {
				ctl_reply(fd, -ENOMEM, "receive buffer");
				break;
			}
			rc = ntbx_qp_create(f, (int)m.a, &qo, &e.qp, &r.addr);
			if (rc == 0) {
				rc = ntbx_qp_connect(e.qp, &m.addr);
				if (rc == 0 && e.push)
					rc = end_post_all(&e);
			}
			r.status = rc;
			if (rc < 0) {
				lib_msg(r.text, sizeof(r.text), rc, "queue pair");
				if (e.qp)
					ntbx_qp_close(e.qp, 1);
				e.qp = NULL;
				end_free_posted(&e);
			}
			ctl_send(fd, &r);
			break;
		}
		case QP_ECHO:
		case QP_SINK: {
			ctl_send(fd, &r);  /* ready */
			int64_t bytes = 0;
			for (;;) {
				const char *data;
				ssize_t n = end_recv(&e, &data);
				if (n < 0) {
					rc = (int)n;
					break;
				}
				if (n == 0)
					break;
				bytes += n;
				if (m.op == QP_ECHO) {
					n = send_all(e.qp, data, (size_t)n);
					if (n < 0) {
						rc = (int)n;
						break;
					}
				}
			}
			if (rc == 0 && m.op == QP_SINK) {
				ssize_t n = send_all(e.qp, &bytes, sizeof(bytes));
				if (n < 0)
					rc = (int)n;
			}
			r.status = rc;
			r.a = bytes;
			if (rc < 0)
				lib_msg(r.text, sizeof(r.text), rc,
				        m.op == QP_ECHO ? "echoing" : "receiving");
			ctl_send(fd, &r);  /* done */
			break;
		}
		case QP_CLOSE:
			if (e.qp)
				ntbx_qp_close(e.qp, 1);
			e.qp = NULL;
			end_free_posted(&e);
			ctl_send(fd, &r);
			break;
		default:
			ctl_reply(fd, -EINVAL, "unknown request");
		}
	}
	if (e.qp)
		ntbx_qp_close(e.qp, 1);
	end_free_posted(&e);
	ntbx_qp_forwarder_stop(f);
	free(e.buf);
}

/* ---------------------------------------------------------- node 0 */

struct qp_run {
	struct qp_opts *o;
	struct ntbx_fabric *f;
	struct node_proc *peer;
	struct ntbx_qp *qp;
	char *buf;       /* send data */
	char *rbuf;      /* received data */
	size_t cap;
	size_t size;
	double seconds;
};

static void qp_fail(struct qp_run *q, ssize_t rc, const char *what)
{
	char m[512];
	lib_msg(m, sizeof(m), (int)rc, what);
	runtime_die("fabric '%s', queue pair node %d <-> node %d: %s",
	            ntbx_fabric_name(q->f), ntbx_fabric_node(q->f), q->peer->node,
	            strncmp(m, "ntbx: ", 6) ? m : m + 6);
}

/* The body's sends and receives are bounded: a peer or a link that stops
 * moving for QP_STALL_MS is an error that names it, not a hang. */
#define QP_STALL_MS 30000

static ssize_t body_io(struct qp_run *q, int send, void *buf, size_t len,
                       int *eof)
{
	for (;;) {
		ssize_t n = send ? ntbx_qp_send(q->qp, buf, len, NTBX_QP_NONBLOCK)
		                 : ntbx_qp_recv(q->qp, buf, len, NTBX_QP_NONBLOCK, eof);
		if (n != -EAGAIN)
			return send && n >= 0 && (size_t)n != len ? -EIO : n;
		int r = ntbx_qp_wait(q->qp, send ? NTBX_QP_WRITABLE
		                                 : NTBX_QP_READABLE, QP_STALL_MS);
		if (r == -ETIMEDOUT)
			runtime_die("fabric '%s', queue pair node %d <-> node %d: "
			            "nothing %s for %d s", ntbx_fabric_name(q->f),
			            ntbx_fabric_node(q->f), q->peer->node,
			            send ? "could be sent" : "arrived",
			            QP_STALL_MS / 1000);
		if (r < 0 && r != -EINTR)
			return r;
	}
}

static void wait_done(struct qp_run *q, struct ctl *r)
{
	if (ctl_recv(q->peer->fd, r, 60000) < 0)
		runtime_die("node %d process died or stopped answering",
		            q->peer->node);
	if (r->status < 0)
		runtime_die("node %d: %s", q->peer->node, r->text);
}

/* Median one-way latency of message ping-pong. */
static uint64_t qp_latency(struct qp_run *q)
{
	long max = q->o->iters;
	uint64_t *lat = malloc(sizeof(*lat) * (size_t)max);
	if (!lat)
		runtime_die("out of memory");
	struct ctl m, r;
	memset(&m, 0, sizeof(m));
	m.op = QP_ECHO;
	ctl_call(q->peer, &m, &r);
	long warm = max / 10 < 100 ? max / 10 : 100, n = 0;
	uint64_t deadline = now_ns() + (uint64_t)(q->seconds * 1e9);
	for (long i = 0; i < warm + max; i++) {
		/* Mark both ends of the message so a lost or mixed-up echo shows. */
		q->buf[0] = (char)i;
		q->buf[q->size - 1] = (char)~i;
		uint64_t t0 = now_ns();
		ssize_t rc = body_io(q, 1, q->buf, q->size, NULL);
		if (rc < 0)
			qp_fail(q, rc, "sending");
		int eof = 0;
		rc = body_io(q, 0, q->rbuf, q->cap, &eof);
		if (rc == 0 && eof)
			rc = -EPIPE;
		if (rc < 0)
			qp_fail(q, rc, "receiving the echo");
		uint64_t t1 = now_ns();
		/* every byte, outside the timed part */
		if ((size_t)rc != q->size || memcmp(q->rbuf, q->buf, q->size))
			runtime_die("queue pair node %d <-> node %d: echo %ld of %zu "
			            "bytes came back as %zd different bytes",
			            ntbx_fabric_node(q->f), q->peer->node, i, q->size,
			            rc);
		if (i >= warm)
			lat[n++] = (t1 - t0) / 2;
		if (n >= 10 && t1 > deadline)
			break;
	}
	ssize_t rc = body_io(q, 1, q->buf, 0, NULL);
	if (rc < 0)
		qp_fail(q, rc, "sending the end of the echo");
	wait_done(q, &r);
	sort_u64(lat, (size_t)n);
	uint64_t p50 = pctile(lat, (size_t)n, 50);
	free(lat);
	return p50;
}

/* Stream for q->seconds; returns MB/s. */
static double qp_stream(struct qp_run *q, double seconds)
{
	struct ctl m, r;
	memset(&m, 0, sizeof(m));
	m.op = QP_SINK;
	ctl_call(q->peer, &m, &r);
	int64_t sent = 0;
	uint64_t t0 = now_ns();
	uint64_t end = t0 + (uint64_t)(seconds * 1e9);
	for (unsigned i = 0;; i++) {
		ssize_t rc = body_io(q, 1, q->buf, q->size, NULL);
		if (rc < 0)
			qp_fail(q, rc, "sending");
		sent += rc;
		if ((i & 15) == 15 || q->size >= 4096) {
			if (now_ns() >= end)
				break;
		}
	}
	ssize_t rc = body_io(q, 1, q->buf, 0, NULL);
	if (rc < 0)
		qp_fail(q, rc, "sending the end of the stream");
	int64_t got = -1;
	int eof = 0;
	rc = body_io(q, 0, &got, sizeof(got), &eof);
	if (rc == 0 && eof)
		rc = -EPIPE;
	if (rc < 0)
		qp_fail(q, rc, "receiving the byte count");
	uint64_t t1 = now_ns();
	wait_done(q, &r);
	if (rc != (ssize_t)sizeof(got) || got != sent)
		runtime_die("queue pair node %d -> node %d lost data: sent %" PRId64
		            " bytes, %" PRId64 " arrived", ntbx_fabric_node(q->f),
		            q->peer->node, sent, got);
	return (double)sent / ((double)(t1 - t0) / 1e9) / 1e6;
}

static int qp_body(void *arg)
{
	struct qp_opts *o = arg;
	const char *fabric = o->temp[0] ? o->temp : o->fabric;
	int ring = o->topo == NTBX_TOPO_RING;
	/* Processes: every node on a ring (they forward), else node 0 and
	 * the peers we measure. */
	static struct node_proc procs[NTBX_MAX_NODES];
	int have[NTBX_MAX_NODES] = { 0 };
	/* On a switch the one peer (1 hop), on a ring node h, h hops away
	 * from node 0 (the body) */
	int me, other;
	bench_roles("qp", o->temp[0] ? NULL : fabric, o->remote.peer, &me,
	            &other);
	if (ring && me != 0)
		runtime_die("fabric '%s': on a ring this process is node 0", fabric);
	for (int k = 0; k < o->nodes; k++) {
		if (k == me || !(ring || k == other))
			continue;
		node_spawn(&procs[k], fabric, k, -1, ring ? -1 : me, qp_serve, NULL);
		have[k] = 1;
	}
	struct ntbx_fabric *f = join_or_die(fabric, me);
	for (int k = 0; k < o->nodes; k++)
		if (have[k])
			node_wait_ready(&procs[k]);
	wait_links_or_die(f, ring ? -1 : other);

	uint64_t max_size = o->sizes[o->nsizes - 1];
	struct qp_run q;
	memset(&q, 0, sizeof(q));
	q.o = o;
	q.f = f;
	q.cap = (size_t)max_size;
	q.buf = malloc(q.cap);
	q.rbuf = malloc(q.cap > 8 ? q.cap : 8);
	if (!q.buf || !q.rbuf)
		runtime_die("out of memory");
	memset(q.buf, 0x3c, q.cap);

	static const struct out_col cols[] = {
		{ "size", 6 }, { "hops", 4 }, { "threads", 7 }, { "mbps", 9 },
		{ "oneway_ns_p50", 13 }, { "memcpy_mbps", 11 }, { "ratio", 6 },
		{ "handoff_mbps", 12 }, { "handoff_ratio", 13 }, { NULL, 0 },
	};
	struct out out;
	out_init(&out, o->json, cols);
	struct ntbx_qp_opts qo = {
		.ring_size = o->ring,
		.flags = o->dma ? NTBX_QP_DMA : 0,
	};
	for (int ti = 0; ti < o->nthreads; ti++) {
		int threads = o->threads[ti];
		if (ring) {
			ntbx_qp_forwarder_stop(f);
			int rc = ntbx_qp_forwarder_start(f, threads);
			if (rc < 0)
				lib_die(rc, "starting transfer threads");
			for (int k = 0; k < o->nodes; k++) {
				if (!have[k])
					continue;
				struct ctl m;
				memset(&m, 0, sizeof(m));
				m.op = QP_FWD;
				m.a = threads;
				ctl_call(&procs[k], &m, NULL);
			}
		}
		for (int hi = 0; hi < o->nhops; hi++) {
			int h = o->hops[hi];
			int peer = ring ? h : other;
			q.peer = &procs[peer];
			struct ntbx_qp_addr a0;
			int rc = ntbx_qp_create(f, peer, &qo, &q.qp, &a0);
			if (rc < 0)
				qp_fail(&q, rc, "creating the queue pair");
			struct ctl m, r;
			memset(&m, 0, sizeof(m));
			m.op = QP_CREATE;
			m.a = me;
			m.b = qo.ring_size;
			m.c = qo.flags;
			m.d = o->push ? o->posted : 0;
			m.x = (double)max_size;
			m.addr = a0;
			ctl_call(q.peer, &m, &r);
			rc = ntbx_qp_connect(q.qp, &r.addr);
			if (rc < 0)
				qp_fail(&q, rc, "connecting the queue pair");
			int got_hops = ntbx_qp_hops(q.qp);
			for (int si = 0; si < o->nsizes; si++) {
				q.size = (size_t)o->sizes[si];
				q.seconds = o->seconds;
				double each = o->seconds / o->reps;
				struct memcpy_bench mb;
				if (memcpy_bench_init(&mb, q.size, 1) < 0)
					runtime_die("out of memory");
				double best = 0, best_mc = 0;
				for (int rep = 0; rep < o->reps; rep++) {
					double mc = memcpy_bench_run(&mb, each);
					if (mc > best_mc)
						best_mc = mc;
					double v = qp_stream(&q, each);
					if (v > best)
						best = v;
				}
				memcpy_bench_free(&mb);
				double ho = handoff_bench(q.size, qo.ring_size ? qo.ring_size
				                          : NTBX_QP_DEFAULT_RING, each);
				uint64_t p50 = qp_latency(&q);
				out_size(&out, "size", q.size);
				out_int(&out, "hops", got_hops >= 0 ? got_hops : h);
				out_int(&out, "threads", threads);
				out_dbl(&out, "mbps", best, 1);
				out_u64(&out, "oneway_ns_p50", p50);
				out_dbl(&out, "memcpy_mbps", best_mc, 1);
				out_dbl(&out, "ratio", best_mc > 0 ? best / best_mc : 0, 3);
				out_dbl(&out, "handoff_mbps", ho > 0 ? ho : 0, 1);
				out_dbl(&out, "handoff_ratio", ho > 0 ? best / ho : 0, 3);
				out_int(&out, "nodes", o->nodes);
				out_str(&out, "topology", ntbx_topology_name(o->topo));
				out_int(&out, "peer", peer);
				out_raw(&out, "push", o->push ? "true" : "false", NULL);
				if (o->push)
					out_int(&out, "posted", o->posted);
				out_raw(&out, "dma", o->dma ? "true" : "false", NULL);
				out_row_end(&out);
			}
			memset(&m, 0, sizeof(m));
			m.op = QP_CLOSE;
			ctl_call(q.peer, &m, NULL);
			ntbx_qp_close(q.qp, 1);
			q.qp = NULL;
		}
	}
	for (int k = 0; k < o->nodes; k++)
		if (have[k])
			node_stop(&procs[k]);
	ntbx_qp_forwarder_stop(f);
	ntbx_fabric_leave(f);
	free(q.buf);
	free(q.rbuf);
	return 0;
}

int cmd_qp(int argc, char **argv)
{
	static struct qp_opts o;
	memset(&o, 0, sizeof(o));
	o.nodes = 2;
	o.topo = NTBX_TOPO_SWITCH;
	o.seconds = 0.3;
	o.reps = 3;
	o.iters = 2000;
	o.posted = 2;
	o.remote = (struct bench_remote_opts)BENCH_REMOTE_OPTS_INIT;
	const char *sizes = "64,1K,16K,64K,256K,1M", *threads = "1";
	for (int i = 1; i < argc; i++) {
		const char *v;
		if (is_help(argv[i])) {
			usage(stdout);
			return 0;
		} else if (opt_flag(argv[i], "--json")) {
			o.json = 1;
		} else if (opt_flag(argv[i], "--push")) {
			o.push = 1;
		} else if (opt_flag(argv[i], "--dma")) {
			o.dma = 1;
		} else if ((v = opt_value(argc, argv, &i, "--fabric"))) {
			o.fabric = v;
		} else if ((v = opt_value(argc, argv, &i, "--posted"))) {
			o.posted = (int)parse_int(v, "--posted", 1, NTBX_QP_MAX_POSTED);
		} else if ((v = opt_value(argc, argv, &i, "--nodes"))) {
			o.nodes = (int)parse_int(v, "--nodes", 2, MAX_NODES_QP);
			o.nodes_set = 1;
		} else if ((v = opt_value(argc, argv, &i, "--topology"))) {
			if (ntbx_topology_parse(v, &o.topo) < 0)
				usage_die("--topology: '%s' is not switch or ring", v);
			o.topo_set = 1;
		} else if ((v = opt_value(argc, argv, &i, "--sizes"))) {
			sizes = v;
		} else if ((v = opt_value(argc, argv, &i, "--threads"))) {
			threads = v;
		} else if ((v = opt_value(argc, argv, &i, "--hops"))) {
			o.hops_arg = v;
		} else if ((v = opt_value(argc, argv, &i, "--ring-size"))) {
			uint64_t s = parse_size(v, "--ring-size", NTBX_QP_MIN_RING,
			                        NTBX_QP_MAX_RING);
			if (s & (s - 1))
				usage_die("--ring-size: %s is not a power of two", v);
			o.ring = (uint32_t)s;
		} else if ((v = opt_value(argc, argv, &i, "--seconds"))) {
			o.seconds = parse_double(v, "--seconds", 0.001, 3600);
		} else if ((v = opt_value(argc, argv, &i, "--reps"))) {
			o.reps = (int)parse_int(v, "--reps", 1, 100);
		} else if ((v = opt_value(argc, argv, &i, "--iters"))) {
			o.iters = parse_int(v, "--iters", 1, 10000000);
		} else if (bench_remote_opt(argc, argv, &i, &o.remote)) {
			continue;
		} else {
			bad_arg(argv[i]);
		}
	}
	if (o.remote.serve) {
		if (!o.fabric)
			usage_die("--serve needs --fabric (an ofi fabric)");
		return bench_serve("qp", o.fabric, o.remote.timeout, qp_serve,
		                   NULL);
	}
	o.nsizes = parse_size_list(sizes, "--sizes", 1, 64ull << 20, o.sizes,
	                           MAX_SIZES);
	o.nthreads = parse_int_list(threads, "--threads", 1, NTBX_QP_MAX_THREADS,
	                            o.threads, NTBX_QP_MAX_THREADS);
	if (o.fabric) {
		if (o.nodes_set || o.topo_set)
			usage_die("--nodes and --topology describe a temporary fabric; "
			          "not with --fabric");
		struct ntbx_fabric_info info;
		fabric_require(o.fabric, &info);
		o.nodes = info.nodes;
		o.topo = info.topology;
		if (o.nodes > NTBX_MAX_NODES)
			runtime_die("fabric '%s' has %d nodes", o.fabric, o.nodes);
	} else if (o.topo == NTBX_TOPO_RING && o.nodes < 3) {
		if (o.nodes_set)
			usage_die("--topology ring needs --nodes 3..%d", MAX_NODES_QP);
		o.nodes = 3;
	}
	int max_hops = o.topo == NTBX_TOPO_RING ? o.nodes / 2 : 1;
	if (o.hops_arg) {
		o.nhops = parse_int_list(o.hops_arg, "--hops", 1, NTBX_MAX_NODES,
		                         o.hops, NTBX_MAX_NODES);
		for (int i = 0; i < o.nhops; i++)
			if (o.hops[i] > max_hops)
				usage_die("--hops %d: the farthest node of a %d-node %s is "
				          "%d hop%s away", o.hops[i], o.nodes,
				          ntbx_topology_name(o.topo), max_hops,
				          max_hops == 1 ? "" : "s");
	} else {
		for (int h = 1; h <= max_hops; h++)
			o.hops[o.nhops++] = h;
	}
	if (!o.fabric) {
		/* Posted buffers: NTBX_QP_MAX_POSTED of the largest size. */
		uint64_t need = (o.sizes[o.nsizes - 1] + 4096) *
		                (uint64_t)(o.posted + 2) + (64ull << 20);
		uint64_t mem = need > NTBX_DEFAULT_WINDOW
		               ? NTBX_ALIGN_UP(need, 1ull << 20) : 0;
		temp_fabric_create("qp", o.nodes, o.topo, mem, o.temp,
		                   sizeof(o.temp));
	}
	return supervise(o.temp[0] ? o.temp : NULL, qp_body, &o);
}
