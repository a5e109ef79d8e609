/* SPDX-License-Identifier: MIT */
/*
 * proc.h — processes, fabrics and measurement helpers shared by the
 * benchmark subcommands (perf, pingpong, qp).
 *
 * Process tree of a benchmark:
 *
 *   ntbx (supervisor)          blocks signals, waits; on Ctrl-C/SIGTERM or
 *    |                         when the body ends: kills what is left,
 *    |                         reaps everything, destroys the temporary
 *    |                         fabric.  A child subreaper, so orphans are
 *    |                         reaped too.
 *    +-- body (node 0)         its own process group; prints the results
 *         +-- node 1 .. N-1    one process per other node, driven through
 *                              a SOCK_SEQPACKET control socket (struct ctl)
 *
 * Every child dies with its parent (PR_SET_PDEATHSIG).  Node processes are
 * forked before the body joins the fabric, so no library thread is ever
 * forked.
 */
#ifndef NTBX_TOOLS_PROC_H
#define NTBX_TOOLS_PROC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "ntbx/fabric.h"
#include "ntbx/qp.h"

/* ------------------------------------------------------------- time */

static inline uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

/* Keep the compiler from dropping stores to @p (benchmarks copy into
 * buffers nobody reads). */
static inline void keep(void *p)
{
	__asm__ __volatile__("" : : "r"(p) : "memory");
}

/*
 * Spin until the 64-bit word at @p equals @v (acquire), checking the
 * clock every few thousand spins.  Returns 0, or -ETIMEDOUT after
 * @timeout_ns.
 */
int spin_until_eq(const uint64_t *p, uint64_t v, uint64_t timeout_ns);

/* ------------------------------------------------------------- CPUs */

/* Number of CPUs this process may run on, and the @idx-th of them
 * (-1 if there are not that many). */
int cpus_allowed(void);
int cpu_nth(int idx);
/* Pin the calling thread/process to @cpu (no-op if @cpu < 0). */
void cpu_pin(int cpu);

/* ------------------------------------------------------------ stats */

void sort_u64(uint64_t *v, size_t n);
/* Percentile @p (0..100) of a sorted array (nearest rank). */
uint64_t pctile(const uint64_t *sorted, size_t n, double p);

/* ------------------------------------------------ threaded copying */

/*
 * Run @threads threads, each calling @work(arg, tid, stop) which copies
 * until *stop becomes non-zero and returns the bytes it moved.  Returns
 * MB/s (10^6 bytes per second) over the wall time from the common start
 * to the last thread's end, or a negative errno if @work failed
 * (returned a negative value).
 */
typedef int64_t (*copy_work_fn)(void *arg, int tid, const int *stop);
double run_timed(int threads, double seconds, copy_work_fn work, void *arg);

/* Plain memcpy between private buffers, @threads threads: the baseline.
 * @bufs holds 2 * threads buffers of @size bytes (src, dst pairs). */
struct memcpy_bench {
	size_t size;
	int threads;
	char *buf[2 * NTBX_QP_MAX_THREADS];
};
int memcpy_bench_init(struct memcpy_bench *m, size_t size, int threads);
double memcpy_bench_run(struct memcpy_bench *m, double seconds);
void memcpy_bench_free(struct memcpy_bench *m);

/*
 * The machine's ceiling for moving @size-byte messages between two cores
 * through memory: a writer process copies them into a shared ring of
 * @ring bytes and a reader process, on another CPU, copies them out, with
 * nothing but a head and a tail word between them (no library).  Any
 * channel that copies in and out (a queue pair's eager path) is bounded
 * by this.  Returns MB/s, or a negative errno.
 */
double handoff_bench(size_t size, size_t ring, double seconds);

/* ---------------------------------------------------- supervision */

/*
 * Run @body(@arg) in a child process as described above and return the
 * exit code for main: the body's exit code, 128+signal if interrupted, 1
 * if the body was killed.  If @temp_fabric is not NULL it is destroyed at
 * the end whatever happened.
 */
int supervise(const char *temp_fabric, int (*body)(void *), void *arg);
/* fork() a child that dies with this process (proc.c). */
pid_t fork_tied(void);

/*
 * Create a private temporary fabric for command @tag ("perf"): the name
 * (tmp-TAG-PID-N) goes to @name.  Removes the leftovers of temporary
 * fabrics whose creator died without cleaning up.  Exits 1 on failure.
 */
void temp_fabric_create(const char *tag, int nodes, enum ntbx_topology t,
                        uint64_t memory, char *name, size_t len);

/* Exit 1 (message naming the fabric and the fix) if @name is missing. */
void fabric_require(const char *name, struct ntbx_fabric_info *info);

/* ------------------------------------------------- control channel */

enum {
	CTL_JOINED = 1,   /* node process: joined the fabric (status) */
	CTL_READY,        /* node process: links up (status) */
	CTL_QUIT,         /* body: leave and exit */
	CTL_OK,           /* generic reply (status, text on error) */
	CTL_USER = 100,   /* command-specific operations from here */
};

struct ctl {
	int32_t op;
	int32_t status;       /* 0 or -errno */
	int64_t a, b, c, d;   /* command-specific */
	double x, y;
	struct ntbx_qp_addr addr;
	char text[240];       /* error message when status < 0 */
};

int ctl_send(int fd, const struct ctl *m);
/* 0, -EPIPE when the other side is gone, -ETIMEDOUT (timeout_ms < 0: none). */
int ctl_recv(int fd, struct ctl *m, int timeout_ms);
/* Reply CTL_OK with @status (and ntbx_errmsg/strerror text if < 0). */
void ctl_reply(int fd, int status, const char *what);

/* ---------------------------------------------------- node processes */

struct node_proc {
	pid_t pid;
	int fd;      /* control socket, body side */
	int node;
};

/*
 * Serve function of a node process: called after the node joined the
 * fabric and its links are ready; reads commands from @fd until CTL_QUIT
 * or EOF, then returns (the node leaves and the process exits).
 */
typedef void (*node_serve_fn)(struct ntbx_fabric *f, int fd, void *arg);

/*
 * Fork a process that joins @fabric as @node (pinned to @cpu if >= 0) and
 * then waits for its link to @wait_peer (-1: every link of the node).
 * Returns 0 once it has joined; node_wait_ready() then waits for its
 * links.  Exits 1 with the node's message on failure.
 */
void node_spawn(struct node_proc *p, const char *fabric, int node, int cpu,
                int wait_peer, node_serve_fn fn, void *arg);
void node_wait_ready(struct node_proc *p);
/* Send CTL_QUIT, wait for the process and reap it. */
void node_stop(struct node_proc *p);

/* Join @fabric as @node in this process (exits 1 on failure). */
struct ntbx_fabric *join_or_die(const char *fabric, int node);
/* Wait until the link toward @peer (-1: all links) is ready. */
int wait_links_to(struct ntbx_fabric *f, int peer, int timeout_ms);
void wait_links_or_die(struct ntbx_fabric *f, int peer);

/* ------------------------------------- between hosts (remote.c) */

/*
 * The nodes of a benchmark on @fabric (NULL: a temporary shm fabric):
 * @me, the node this process joins, and @peer, the node it measures
 * against (@peer_opt, or by default 1, on an ofi fabric the lowest node
 * that is not this host's).  On an ofi fabric @me is this host's node, and
 * node_spawn() reaches @peer's process over TCP: `ntbx @tool --serve` on
 * that host.  Exits 1 with a message on a bad --peer.
 */
void bench_roles(const char *tool, const char *fabric, int peer_opt,
                 int *me, int *peer);
/* The body's node, in the body and in the node processes it drives. */
int bench_body_node(void);
/* 1 if @node runs on another host (node_spawn connects to it). */
int bench_node_is_remote(int node);
/* The options every benchmark takes for it: --peer N, --serve, --timeout S. */
struct bench_remote_opts {
	int peer;         /* -1: default */
	int serve;
	double timeout;   /* --serve's wait for a client */
};
#define BENCH_REMOTE_OPTS_INIT { .peer = -1, .serve = 0, .timeout = 60 }
#define BENCH_REMOTE_HELP \
	"  --peer N        the node measured against (default 1; on an ofi\n" \
	"                  fabric, the lowest node that is not this host)\n" \
	"  --serve         ofi fabric (one node per host): be the peer node of\n" \
	"                  one run started on another host, then exit\n" \
	"  --timeout S     how long --serve waits for that run (default 60)\n"
/* 1 if argv[*i] is one of them (consumed into @r). */
int bench_remote_opt(int argc, char **argv, int *i,
                     struct bench_remote_opts *r);
/* node_spawn() of a node on another host. */
void remote_spawn(struct node_proc *p, const char *fabric, int node);
/*
 * `ntbx @tool --serve --fabric F`: wait (at most @timeout_s) for one
 * benchmark from another host of the ofi fabric, join this host's node for
 * it and run @fn as a node process would; returns the exit code.
 */
int bench_serve(const char *tool, const char *fabric, double timeout_s,
                node_serve_fn fn, void *arg);

/* Send a command and wait for its CTL_OK reply; exits 1 naming the node
 * if the reply is an error or the node died. */
void ctl_call(struct node_proc *p, struct ctl *m, struct ctl *reply);

#endif
