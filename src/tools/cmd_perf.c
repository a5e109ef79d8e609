/* SPDX-License-Identifier: MIT */
/*
 * ntbx perf — raw outbound-window write throughput, like Linux ntb_perf.
 *
 * Node 0 (this process) writes blocks into its outbound window 0 toward
 * node 1 (a forked process that keeps the node alive, so the link is up,
 * and owns the target buffer in its node memory).  For every size the same
 * number of threads also memcpy between private buffers; the two are
 * measured alternately, best of a few short repetitions each.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "ntbx/dev.h"
#include "ntbx/fabric.h"
#include "output.h"
#include "proc.h"
#include "util/util.h"

#define MAX_SIZES 64
#define DMA_DEPTH 4

enum { MODE_CPU, MODE_DMA };
enum { PERF_ALLOC = CTL_USER };

struct perf_opts {
	const char *fabric;
	char temp[NTBX_FABRIC_NAME_MAX + 1];
	uint64_t sizes[MAX_SIZES];
	int nsizes;
	int threads[NTBX_QP_MAX_THREADS];
	int nthreads;
	int mode;
	double seconds;
	int reps;
	int json;
	struct bench_remote_opts remote;
};

static void usage(FILE *fp)
{
	fprintf(fp,
	"usage: ntbx perf [--fabric NAME] [--sizes LIST] [--mode cpu|dma]\n"
	"                 [--threads LIST] [--seconds S] [--reps R] [--json]\n"
	"                 [--peer N]\n"
	"       ntbx perf --serve --fabric NAME [--timeout S]\n"
	"\n"
	"Raw outbound-window write throughput, like Linux ntb_perf.  This\n"
	"process joins node 0, a child process joins node 1; node 0 writes\n"
	"SIZE-byte blocks into its outbound window 0 (node 1's memory) over and\n"
	"over, each thread into its own region: by CPU stores (memcpy into the\n"
	"window) or by the DMA engine (ntbx_dma_write + ntbx_dma_wait).  In the\n"
	"same run and with the same threads it measures plain memcpy between\n"
	"private buffers, alternating the two, best of R repetitions each.\n"
	"\n"
	"options:\n"
	"  --fabric NAME   use this fabric (nodes 0 and 1); default: a private\n"
	"                  temporary 2-node switch fabric, removed at the end\n"
	"  --sizes LIST    block sizes: 4096,64K or powers-of-two ranges 1-4M\n"
	"                  (default 1-4M)\n"
	"  --mode M        cpu or dma (default: cpu where the backend maps peer\n"
	"                  windows, else dma: NTBX_DEV_DMA_ONLY=1, the ofi backend)\n"
	"  --threads LIST  writer threads, 1..8, e.g. 1,2,4 (default 1)\n"
	"  --seconds S     measuring time per size and method (default 0.3)\n"
	"  --reps R        repetitions per size and method (default 3)\n"
	"  --json          one JSON object per result line\n"
	BENCH_REMOTE_HELP
	"\n"
	"result: size, mode, threads, mbps (MB/s = 10^6 bytes/s written into\n"
	"the window), memcpy_mbps (same threads, private buffers), ratio.\n");
}

/* ---------------------------------------------------------- node 1 */

static void perf_serve(struct ntbx_fabric *f, int fd, void *arg)
{
	(void)arg;
	struct ntbx_dev *dev = ntbx_fabric_dev(f);
	int64_t off = -1;
	struct ctl m;
	while (ctl_recv(fd, &m, -1) == 0) {
		if (m.op == CTL_QUIT)
			break;
		if (m.op == PERF_ALLOC) {
			if (off >= 0)
				ntbx_mem_free(dev, off);
			off = ntbx_mem_alloc(dev, (size_t)m.a, 4096, "perf target", 1);
			struct ctl r;
			memset(&r, 0, sizeof(r));
			r.op = CTL_OK;
			r.status = off < 0 ? (int)off : 0;
			if (off < 0) {
				char mem[32], need[32];
				snprintf(r.text, sizeof(r.text),
				         "fabric '%s': node %d cannot allocate %s for the "
				         "perf target (node memory %s; recreate the fabric "
				         "with a larger --memory)", ntbx_fabric_name(f),
				         ntbx_fabric_node(f),
				         fmt_size(need, sizeof(need), (uint64_t)m.a),
				         fmt_size(mem, sizeof(mem), ntbx_mem_size(dev)));
			}
			r.a = off;
			ctl_send(fd, &r);
		} else {
			ctl_reply(fd, -EINVAL, "unknown request");
		}
	}
	if (off >= 0)
		ntbx_mem_free(dev, off);
}

/* ---------------------------------------------------------- node 0 */

struct perf_ctx {
	struct ntbx_dev *dev;
	int port;
	char *win;          /* outbound window 0 */
	uint64_t off;       /* target region in the window */
	uint64_t stride;    /* per-thread region */
	size_t size;
	int mode;
	char *src[NTBX_QP_MAX_THREADS];
};

static int64_t window_work(void *arg, int tid, const int *stop)
{
	struct perf_ctx *c = arg;
	uint64_t off = c->off + (uint64_t)tid * c->stride;
	char *src = c->src[tid];
	int64_t bytes = 0;
	if (c->mode == MODE_CPU) {
		/* The library's CPU path (ntbx_cpu_write: one range check, then
		 * the copy routine every data path uses). */
		char *dst = c->win + off;
		while (!__atomic_load_n(stop, __ATOMIC_RELAXED)) {
			if (ntbx_cpu_write(c->dev, c->port, 0, off, src, c->size) < 0)
				return -1;
			keep(dst);
			bytes += (int64_t)c->size;
		}
		return bytes;
	}
	struct ntbx_dma_op ops[DMA_DEPTH];
	int head = 0, inflight = 0;
	while (!__atomic_load_n(stop, __ATOMIC_RELAXED)) {
		if (inflight == DMA_DEPTH) {
			int r = ntbx_dma_wait(c->dev, &ops[head], 10000);
			if (r < 0)
				return r;
			bytes += (int64_t)c->size;
			head = (head + 1) % DMA_DEPTH;
			inflight--;
		}
		int slot = (head + inflight) % DMA_DEPTH;
		int r = ntbx_dma_write(c->dev, c->port, 0, off, src, c->size,
		                       &ops[slot]);
		if (r < 0)
			return r;
		inflight++;
	}
	while (inflight) {
		int r = ntbx_dma_wait(c->dev, &ops[head], 10000);
		if (r < 0)
			return r;
		bytes += (int64_t)c->size;
		head = (head + 1) % DMA_DEPTH;
		inflight--;
	}
	return bytes;
}

static int perf_body(void *arg)
{
	struct perf_opts *o = arg;
	const char *fabric = o->temp[0] ? o->temp : o->fabric;
	int me, other;
	bench_roles("perf", o->temp[0] ? NULL : fabric, o->remote.peer, &me, &other);
	struct node_proc peer;
	node_spawn(&peer, fabric, other, -1, me, perf_serve, NULL);
	struct ntbx_fabric *f = join_or_die(fabric, me);
	node_wait_ready(&peer);
	wait_links_or_die(f, other);
	struct ntbx_dev *dev = ntbx_fabric_dev(f);

	uint64_t max_size = o->sizes[o->nsizes - 1];
	int max_threads = o->threads[o->nthreads - 1];
	uint64_t stride = NTBX_ALIGN_UP(max_size, 4096);
	struct ctl m, r;
	memset(&m, 0, sizeof(m));
	m.op = PERF_ALLOC;
	m.a = (int64_t)(stride * (uint64_t)max_threads);
	ctl_call(&peer, &m, &r);

	struct perf_ctx c;
	memset(&c, 0, sizeof(c));
	c.dev = dev;
	c.port = ntbx_port_of_node(dev, other);
	c.off = (uint64_t)r.a;
	c.stride = stride;
	int maps = ntbx_dev_maps_peer_windows(dev);
	if (o->mode < 0)
		o->mode = maps ? MODE_CPU : MODE_DMA;
	if (o->mode == MODE_CPU && !maps)
		runtime_die("fabric '%s': this backend reaches peer windows only "
		            "by DMA (NTBX_DEV_DMA_ONLY=1?): use --mode dma", fabric);
	c.mode = o->mode;
	if (c.port < 0)
		runtime_die("fabric '%s': node %d has no port to node %d", fabric,
		            me, other);
	void *win = NULL;
	uint64_t wsize;
	int rc = maps ? ntbx_peer_mw_get_addr(dev, c.port, 0, &win, &wsize)
	              : ntbx_peer_mw_size(dev, c.port, 0, &wsize);
	if (rc == -ENOTCONN)
		runtime_die("fabric '%s': node %d has not translated window 0 for "
		            "node %d (is its fabric layer up to date?)", fabric,
		            other, me);
	if (rc < 0)
		lib_die(rc, "mapping outbound window 0");
	if (c.off + stride * (uint64_t)max_threads > wsize)
		runtime_die("fabric '%s': outbound window 0 (%" PRIu64 " bytes) "
		            "does not reach node %d's buffer at %" PRIu64
		            " (recreate the fabric with a larger --window)",
		            fabric, wsize, other, c.off);
	c.win = win;
	for (int t = 0; t < max_threads; t++) {
		if (posix_memalign((void **)&c.src[t], 4096, stride))
			runtime_die("out of memory");
		memset(c.src[t], 0x5a + t, stride);
	}

	static const struct out_col cols[] = {
		{ "size", 6 }, { "mode", 4 }, { "threads", 7 }, { "mbps", 10 },
		{ "memcpy_mbps", 11 }, { "ratio", 6 }, { NULL, 0 },
	};
	struct out out;
	out_init(&out, o->json, cols);
	double each = o->seconds / o->reps;
	for (int ti = 0; ti < o->nthreads; ti++) {
		int threads = o->threads[ti];
		for (int si = 0; si < o->nsizes; si++) {
			size_t size = (size_t)o->sizes[si];
			c.size = size;
			struct memcpy_bench mb;
			if (memcpy_bench_init(&mb, size, threads) < 0)
				runtime_die("out of memory for %zu-byte buffers", size);
			double best = 0, best_mc = 0;
			for (int rep = 0; rep < o->reps; rep++) {
				double v = run_timed(threads, each, window_work, &c);
				if (v < 0)
					lib_die((int)v, o->mode == MODE_DMA
					                 ? "DMA write into the window"
					                 : "writing into the window");
				if (v > best)
					best = v;
				double mc = memcpy_bench_run(&mb, each);
				if (mc > best_mc)
					best_mc = mc;
			}
			memcpy_bench_free(&mb);
			out_size(&out, "size", size);
			out_str(&out, "mode", o->mode == MODE_DMA ? "dma" : "cpu");
			out_int(&out, "threads", threads);
			out_dbl(&out, "mbps", best, 1);
			out_dbl(&out, "memcpy_mbps", best_mc, 1);
			out_dbl(&out, "ratio", best_mc > 0 ? best / best_mc : 0, 3);
			out_row_end(&out);
		}
	}
	for (int t = 0; t < max_threads; t++)
		free(c.src[t]);
	node_stop(&peer);
	ntbx_fabric_leave(f);
	return 0;
}

int cmd_perf(int argc, char **argv)
{
	static struct perf_opts o;
	memset(&o, 0, sizeof(o));
	o.mode = -1;   /* by the backend, once joined */
	o.remote = (struct bench_remote_opts)BENCH_REMOTE_OPTS_INIT;
	o.seconds = 0.3;
	o.reps = 3;
	const char *sizes = "1-4M", *threads = "1";
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
		} else if ((v = opt_value(argc, argv, &i, "--threads"))) {
			threads = v;
		} else if ((v = opt_value(argc, argv, &i, "--mode"))) {
			if (strcmp(v, "cpu") == 0)
				o.mode = MODE_CPU;
			else if (strcmp(v, "dma") == 0)
				o.mode = MODE_DMA;
			else
				usage_die("--mode: '%s' is not cpu or dma", v);
		} else if ((v = opt_value(argc, argv, &i, "--seconds"))) {
			o.seconds = parse_double(v, "--seconds", 0.001, 3600);
		} else if ((v = opt_value(argc, argv, &i, "--reps"))) {
			o.reps = (int)parse_int(v, "--reps", 1, 100);
		} else if (bench_remote_opt(argc, argv, &i, &o.remote)) {
			continue;
		} else {
			bad_arg(argv[i]);
		}
	}
	if (o.remote.serve) {
		if (!o.fabric)
			usage_die("--serve needs --fabric (an ofi fabric)");
		return bench_serve("perf", o.fabric, o.remote.timeout, perf_serve,
		                   NULL);
	}
	o.nsizes = parse_size_list(sizes, "--sizes", 1, 64ull << 20, o.sizes,
	                           MAX_SIZES);
	o.nthreads = parse_int_list(threads, "--threads", 1, NTBX_QP_MAX_THREADS,
	                            o.threads, NTBX_QP_MAX_THREADS);
	if (o.fabric) {
		struct ntbx_fabric_info info;
		fabric_require(o.fabric, &info);
		if (info.nodes < 2)
			runtime_die("fabric '%s' has %d node; perf needs 2", o.fabric,
			            info.nodes);
	} else {
		uint64_t need = NTBX_ALIGN_UP(o.sizes[o.nsizes - 1], 4096) *
		                (uint64_t)o.threads[o.nthreads - 1];
		uint64_t mem = need + (64ull << 20) > NTBX_DEFAULT_WINDOW
		               ? NTBX_ALIGN_UP(need + (64ull << 20), 1ull << 20) : 0;
		temp_fabric_create("perf", 2, NTBX_TOPO_SWITCH, mem, o.temp,
		                   sizeof(o.temp));
	}
	return supervise(o.temp[0] ? o.temp : NULL, perf_body, &o);
}
