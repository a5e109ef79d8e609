/* SPDX-License-Identifier: MIT */
/*
 * tests/sock/confined.c — a process confined as sshd's pre-authentication
 * child confines itself (RLIMIT_FSIZE 0, RLIMIT_NOFILE 1, RLIMIT_NPROC 0,
 * no_new_privs, then a seccomp filter that allows about what sshd's does,
 * denies open with EACCES and kills the process at anything else) keeps
 * waking a peer that sleeps in epoll_wait (run with NTBX_SPIN_US=0, so
 * every wait sleeps).  Run under `ntbx run` by tests/sock_confined.sh:
 *
 *   confined PORT ROUNDS STATFILE
 *
 * The parent listens and accepts two connections from its forked child
 * (the peer); one round trip on each (blocking calls) switches them to
 * the fabric.  Connection 1: the child sleeps in epoll_wait on it before
 * the parent confines itself (the parent waits until the child's wchan
 * says so, bounded), so the parent's confinement finds its sleeper and
 * keeps its FIFO.  Connection 2: the child polls it from a thread made
 * after the confinement, on a wake object made then, which the parent
 * cannot open: that one is the fallback (1 ms slices).  Both then ping-pong ROUNDS
 * rounds of 64 bytes, the child checking every byte and counting the
 * waits that slept ("slept N1 N2" on stdout); the child writes
 * `ntbx stat --json` (NTBX_BIN) to STATFILE while both are open.  Exit
 * status 0 when everything matched; a line on stderr says what did not.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MSG 64

static int die(const char *what)
{
	fprintf(stderr, "confined: %s: %s\n", what, strerror(errno));
	exit(2);
}

static int full(int fd, char *buf, int len, int wr)
{
	for (int off = 0; off < len;) {
		ssize_t r = wr ? write(fd, buf + off, len - off)
		               : read(fd, buf + off, len - off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		off += (int)r;
	}
	return 0;
}

/* ------------------------------------------------------ the confined */

#define ALLOW(nr) \
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), \
	BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)
#define DENY(nr, e) \
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), \
	BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (e))

/* As sshd's sandbox-seccomp-filter.c does, in the same order. */
static void confine(void)
{
	struct rlimit zero = { 0, 0 }, one = { 1, 1 };
	if (setrlimit(RLIMIT_FSIZE, &zero) < 0)
		die("setrlimit(FSIZE)");
	if (setrlimit(RLIMIT_NOFILE, &one) < 0)
		die("setrlimit(NOFILE)");
	if (setrlimit(RLIMIT_NPROC, &zero) < 0)
		die("setrlimit(NPROC)");
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
		         offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
		         offsetof(struct seccomp_data, nr)),
		DENY(__NR_open, EACCES), DENY(__NR_openat, EACCES),
		DENY(__NR_stat, EACCES), DENY(__NR_lstat, EACCES),
		ALLOW(__NR_brk), ALLOW(__NR_clock_gettime), ALLOW(__NR_close),
		ALLOW(__NR_exit), ALLOW(__NR_exit_group), ALLOW(__NR_futex),
		ALLOW(__NR_getpgid), ALLOW(__NR_getpid), ALLOW(__NR_getrandom),
		ALLOW(__NR_gettid), ALLOW(__NR_gettimeofday), ALLOW(__NR_getuid),
		ALLOW(__NR_geteuid), ALLOW(__NR_madvise), ALLOW(__NR_mmap),
		ALLOW(__NR_mprotect), ALLOW(__NR_mremap), ALLOW(__NR_munmap),
		ALLOW(__NR_nanosleep), ALLOW(__NR_clock_nanosleep),
		ALLOW(__NR_poll), ALLOW(__NR_ppoll), ALLOW(__NR_pselect6),
		ALLOW(__NR_select), ALLOW(__NR_read), ALLOW(__NR_write),
		ALLOW(__NR_rt_sigprocmask), ALLOW(__NR_rt_sigreturn),
		ALLOW(__NR_shutdown), ALLOW(__NR_time),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
	};
	struct sock_fprog prog = { sizeof f / sizeof f[0], f };
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		die("PR_SET_NO_NEW_PRIVS");
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0)
		die("PR_SET_SECCOMP");
}

/* Until @pid sleeps in epoll_wait (its wchan), at most 10 s. */
static int wait_epoll_sleep(pid_t pid)
{
	char path[64], buf[64];
	snprintf(path, sizeof path, "/proc/%d/wchan", (int)pid);
	for (int i = 0; i < 10000; i++) {
		FILE *f = fopen(path, "r");
		size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
		if (f)
			fclose(f);
		buf[n] = 0;
		if (strstr(buf, "epoll"))
			return 0;
		struct timespec ms = { 0, 1000000 };
		nanosleep(&ms, NULL);
	}
	return -1;
}

static int serve(int l, pid_t child, int rounds)
{
	int a1 = accept(l, NULL, NULL), a2 = accept(l, NULL, NULL);
	if (a1 < 0 || a2 < 0)
		die("accept");
	char buf[MSG];
	/* one round trip on each, so that both have switched to the fabric
	 * (no TCP prefix left to read), then the child's last byte on
	 * connection 1: it is about to sleep */
	for (int k = 0; k < 2; k++) {
		int fd = k ? a2 : a1;
		if (full(fd, buf, 1, 0) < 0 || full(fd, buf, 1, 1) < 0)
			die("the first round trip");
	}
	if (full(a1, buf, 1, 0) < 0)
		die("read the child's hello");
	if (wait_epoll_sleep(child) < 0) {
		fprintf(stderr, "confined: the child never slept in epoll_wait\n");
		return 1;
	}
	confine();
	/* from here on: only the calls the filter allows.  Every 10th
	 * answer comes 1 ms late, so that the child has surely gone to
	 * sleep (it counts its sleeps; a pace, not a synchronisation) */
	for (int i = 0; i < rounds; i++)
		for (int k = 0; k < 2; k++) {
			int fd = k ? a2 : a1;
			if (full(fd, buf, MSG, 0) < 0)
				return 3;
			if (i % 10 == 0) {
				struct timespec ms = { 0, 1000000 };
				nanosleep(&ms, NULL);
			}
			buf[0]++;
			if (full(fd, buf, MSG, 1) < 0)
				return 3;
		}
	if (full(a1, buf, 1, 0) < 0)   /* the child's stat is written */
		return 4;
	return 0;
}

/* ------------------------------------------------------ the peer */

struct conn {
	int k, fd, ep, rounds, first, slept, bad;
};

/* Rounds @first.. of connection k+1: send 64 bytes, wait (epoll on
 * connection 1, poll on 2), check the answer.  ->slept: waits that slept
 * in the kernel (this thread's voluntary context switches grew). */
static void *exchange(void *arg)
{
	struct conn *c = arg;
	char buf[MSG];
	for (int i = c->first; i < c->rounds; i++) {
		char want = (char)(i + c->k + 1);
		memset(buf, 0, sizeof buf);
		buf[0] = (char)(i + c->k);
		buf[MSG - 1] = (char)c->k;
		if (full(c->fd, buf, MSG, 1) < 0)
			die("send");
		struct rusage ru0, ru1;
		getrusage(RUSAGE_THREAD, &ru0);
		if (c->ep >= 0) {
			struct epoll_event out;
			int n;
			/* under ntbx's 1 s cap on a kernel sleep: a wake-up
			 * lost shows here, not as a stall */
			while ((n = epoll_wait(c->ep, &out, 1, 900)) < 0 &&
			       errno == EINTR)
				;
			if (n != 1) {
				fprintf(stderr, "confined: round %d: epoll_wait "
				        "returned %d after 900 ms: a lost "
				        "wake-up\n", i, n);
				c->bad = 1;
				return NULL;
			}
		} else {
			struct pollfd p = { c->fd, POLLIN, 0 };
			if (poll(&p, 1, 10000) != 1) {
				fprintf(stderr, "confined: round %d: poll timed "
				        "out after 10 s\n", i);
				c->bad = 1;
				return NULL;
			}
		}
		getrusage(RUSAGE_THREAD, &ru1);
		c->slept += ru1.ru_nvcsw > ru0.ru_nvcsw;
		if (full(c->fd, buf, MSG, 0) < 0)
			die("recv");
		if (buf[0] != want || buf[MSG - 1] != (char)c->k) {
			fprintf(stderr, "confined: round %d connection %d: "
			        "wrong bytes\n", i, c->k + 1);
			c->bad = 1;
			return NULL;
		}
	}
	return NULL;
}

static int peer(int port, int rounds, const char *statfile)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int c1 = socket(AF_INET, SOCK_STREAM, 0), c2 = socket(AF_INET, SOCK_STREAM, 0);
	if (c1 < 0 || c2 < 0 || connect(c1, (void *)&sa, sizeof sa) < 0 ||
	    connect(c2, (void *)&sa, sizeof sa) < 0)
		die("connect");
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = c1 };
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, c1, &ev) < 0)
		die("epoll");
	char buf[MSG] = { 0 };
	/* blocking calls: see serve() */
	for (int k = 0; k < 2; k++) {
		int fd = k ? c2 : c1;
		if (full(fd, buf, 1, 1) < 0 || full(fd, buf, 1, 0) < 0)
			die("the first round trip");
	}
	if (full(c1, buf, 1, 1) < 0)
		die("hello");
	/* Connection 1's round 0 sleeps while the parent confines itself
	 * (its answer comes after).  Then connection 2 goes on in a thread
	 * made now, whose poll has a wake object of its own, made after the
	 * confinement: the fallback. */
	struct conn e = { 0, c1, ep, 1, 0, 0, 0 };
	struct conn p = { 1, c2, -1, rounds, 0, 0, 0 };
	exchange(&e);
	pthread_t t;
	if (e.bad || pthread_create(&t, NULL, exchange, &p) != 0)
		return 1;
	e.rounds = rounds;
	e.first = 1;
	exchange(&e);
	pthread_join(t, NULL);
	if (e.bad || p.bad)
		return 1;
	char cmd[512];
	const char *bin = getenv("NTBX_BIN");
	snprintf(cmd, sizeof cmd, "%s stat --json > %s", bin ? bin : "ntbx",
	         statfile);
	if (system(cmd) != 0) {
		fprintf(stderr, "confined: %s failed\n", cmd);
		return 1;
	}
	printf("peer ok: %d rounds on each connection\n"
	       "slept %d %d\n", rounds, e.slept, p.slept);
	fflush(stdout);
	if (full(c1, buf, 1, 1) < 0)
		die("bye");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: confined PORT ROUNDS STATFILE\n");
		return 2;
	}
	int port = atoi(argv[1]), rounds = atoi(argv[2]);
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (l < 0 || bind(l, (void *)&sa, sizeof sa) < 0 || listen(l, 4) < 0)
		die("listen");
	pid_t child = fork();
	if (child < 0)
		die("fork");
	if (child == 0) {
		close(l);
		_exit(peer(port, rounds, argv[3]));
	}
	int rc = serve(l, child, rounds);
	/* the confined parent may not wait(): the test script reaps the
	 * child's status through its output and the stat file */
	_exit(rc);
}
