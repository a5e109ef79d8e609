/* Test harness: checks, a private fabric root per test, child processes. */
#ifndef NTBX_TEST_HARNESS_H
#define NTBX_TEST_HARNESS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

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
 * joined by two pipes: wfd writes to the other, rfd reads from it.
 * Checks (CHECK_EQ) that both exit 0.
 */
struct th_pair { int node, peer, wfd, rfd; };
void th_run_pair(int (*fn)(void *));

/* Read (@write 0) or write exactly @n bytes; 0, or -1 on error or EOF. */
int th_xfer(int fd, void *p, size_t n, int write);

/* Print "name: N passed, N failed" (checks) and return the exit code. */
int th_done(const char *test_name);

/* Monotonic time in nanoseconds. */
unsigned long long th_now_ns(void);

#endif
