/* Test harness: checks, a private fabric root per test, child processes. */
#ifndef NTBX_TEST_HARNESS_H
#define NTBX_TEST_HARNESS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "ntbx/qp.h"

extern int th_failures, th_checks;

/* Fail the test (but keep going) when @cond is false. */
#define CHECK(cond) do { th_checks++; if (!(cond)) { th_failures++; \
	fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
	} } while (0)
/* Compare two integers, printing both on failure. */
#define CHECK_EQ(a, b) do { th_checks++; long long th_a = (long long)(a), th_b = (long long)(b); \
	if (th_a != th_b) { th_failures++; \
	fprintf(stderr, "%s:%d: CHECK_EQ failed: %s == %lld, %s == %lld\n", \
	        __FILE__, __LINE__, #a, th_a, #b, th_b); } } while (0)
/* Abort the whole test at once. */
#define REQUIRE(cond) do { if (!(cond)) { \
	fprintf(stderr, "%s:%d: REQUIRE failed: %s\n", __FILE__, __LINE__, #cond); \
	exit(1); } } while (0)

/*
 * Give this test its own NTBX_SHM_DIR (a fresh directory under /dev/shm),
 * removed at exit by the process that called th_init, so tests run in
 * parallel and leave nothing behind.  Returns the directory.
 */
const char *th_init(const char *test_name);

/* Run fn(arg) in a child process; its return value is the exit code. */
pid_t th_spawn(int (*fn)(void *), void *arg);

/* Wait for @pid; returns its exit code, or 128+signal if it was killed. */
int th_wait(pid_t pid);

/*
 * Nodes 0 and 1 of a two-node test, each a process running fn(&pair),
 * joined by two pipes: wfd writes to the other, rfd reads from it; @arg is
 * the caller's, the same for both.  Checks (CHECK_EQ) that both exit 0.
 */
struct th_pair { int node, peer, wfd, rfd; void *arg; };
void th_run_pair(int (*fn)(void *), void *arg);

/* Read (@write 0) or write exactly @n bytes; 0, or -1 on error or EOF. */
int th_xfer(int fd, void *p, size_t n, int write);

/* Print "name: N passed, N failed" (checks) and return the exit code. */
int th_done(const char *test_name);

/* Monotonic time in nanoseconds. */
unsigned long long th_now_ns(void);

/*
 * Fabrics, nodes and queue pairs (tests/lib/harness_fabric.c): the set-up
 * every queue-pair test needs.  A step that fails prints what failed and
 * ntbx_errmsg() on stderr and exits TH_EXIT_SETUP, in a node's process as
 * in the test's own: set-up is never what a test asserts.
 */
#define TH_EXIT_SETUP 10

/* Create fabric @name: @nodes nodes wired as @topo, inbound windows of
 * @window bytes and node memory of @memory (0: the defaults), no group. */
void th_fabric(const char *name, int nodes, enum ntbx_topology topo,
               uint64_t window, uint64_t memory);

/* Join fabric @name as @node; then, if @links_ms > 0, wait that long for
 * every link of the node to be ready. */
struct ntbx_fabric *th_join(const char *name, int node, int links_ms);

/*
 * This side of a queue pair to node @peer: make the endpoint (@o), send
 * its address on @wfd, read the peer's from @rfd (the peer does the same
 * the other way round).  th_qp_exchange leaves connecting to the caller;
 * th_qp_to connects.  @me and @other, if not NULL, receive the addresses.
 */
struct ntbx_qp *th_qp_exchange(struct ntbx_fabric *f, int peer,
                               const struct ntbx_qp_opts *o, int wfd, int rfd,
                               struct ntbx_qp_addr *me,
                               struct ntbx_qp_addr *other);
struct ntbx_qp *th_qp_to(struct ntbx_fabric *f, int peer,
                         const struct ntbx_qp_opts *o, int wfd, int rfd,
                         struct ntbx_qp_addr *me, struct ntbx_qp_addr *other);

/* A loopback queue pair: endpoints @a and @b, both on this node, each
 * connected to the other; @aa and @ba their addresses (NULL: not wanted). */
void th_qp_loopback(struct ntbx_fabric *f, const struct ntbx_qp_opts *o,
                    struct ntbx_qp **a, struct ntbx_qp_addr *aa,
                    struct ntbx_qp **b, struct ntbx_qp_addr *ba);

#endif
