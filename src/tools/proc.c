/* SPDX-License-Identifier: MIT */
#include "proc.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "args.h"
#include "util/util.h"

/* ------------------------------------------------------------- spin */

static int online_cpus(void)
{
	static int n;
	if (!n) {
		long v = sysconf(_SC_NPROCESSORS_ONLN);
		n = v > 0 ? (int)v : 1;
	}
	return n;
}

int spin_until_eq(const uint64_t *p, uint64_t v, uint64_t timeout_ns)
{
	/* One CPU: spinning only burns the time slice the other side needs. */
	int yield = cpus_allowed() < 2 || online_cpus() < 2;
	uint64_t deadline = 0;
	for (unsigned n = 1;; n++) {
		if (__atomic_load_n(p, __ATOMIC_ACQUIRE) == v)
			return 0;
		cpu_relax();
		if (yield && n > 64)
			sched_yield();
		if ((n & 0xfff) == 0) {
			uint64_t t = now_ns();
			if (!deadline)
				deadline = t + timeout_ns;
			else if (t > deadline)
				return -ETIMEDOUT;
		}
	}
}

/* ------------------------------------------------------------- CPUs */

static int g_ncpus = -1;

int cpus_allowed(void)
{
	if (g_ncpus < 0) {
		cpu_set_t s;
		CPU_ZERO(&s);
		if (sched_getaffinity(0, sizeof(s), &s) == 0)
			g_ncpus = CPU_COUNT(&s);
		else
			g_ncpus = 1;
	}
	return g_ncpus;
}

int cpu_nth(int idx)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	if (sched_getaffinity(0, sizeof(s), &s) != 0)
		return -1;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &s) && idx-- == 0)
			return c;
	return -1;
}

void cpu_pin(int cpu)
{
	if (cpu < 0)
		return;
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	(void)sched_setaffinity(0, sizeof(s), &s);
}

/* ------------------------------------------------------------ stats */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

void sort_u64(uint64_t *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_u64);
}

uint64_t pctile(const uint64_t *v, size_t n, double p)
{
	if (n == 0)
		return 0;
	size_t i = (size_t)(p / 100.0 * (double)n);
	if (i >= n)
		i = n - 1;
	return v[i];
}

/* ------------------------------------------------ threaded copying */

struct timed_thread {
	pthread_t th;
	int tid;
	copy_work_fn work;
	void *arg;
	const int *stop;
	pthread_barrier_t *bar;
	int64_t bytes;
	uint64_t end;
};

static void *timed_main(void *p)
{
	struct timed_thread *t = p;
	pthread_barrier_wait(t->bar);
	t->bytes = t->work(t->arg, t->tid, t->stop);
	t->end = now_ns();
	return NULL;
}

double run_timed(int threads, double seconds, copy_work_fn work, void *arg)
{
	struct timed_thread t[NTBX_QP_MAX_THREADS];
	pthread_barrier_t bar;
	int stop = 0;
	if (threads < 1 || threads > NTBX_QP_MAX_THREADS)
		return -EINVAL;
	pthread_barrier_init(&bar, NULL, (unsigned)threads + 1);
	for (int i = 0; i < threads; i++) {
		t[i] = (struct timed_thread){ .tid = i, .work = work, .arg = arg,
		                              .stop = &stop, .bar = &bar };
		if (pthread_create(&t[i].th, NULL, timed_main, &t[i]) != 0)
			runtime_die("cannot start a benchmark thread: %s",
			            strerror(errno));
	}
	pthread_barrier_wait(&bar);
	uint64_t start = now_ns();
	struct timespec ts = { (time_t)seconds,
	                       (long)((seconds - (double)(time_t)seconds) * 1e9) };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	int64_t bytes = 0;
	uint64_t end = start;
	int err = 0;
	for (int i = 0; i < threads; i++) {
		pthread_join(t[i].th, NULL);
		if (t[i].bytes < 0)
			err = (int)t[i].bytes;
		else
			bytes += t[i].bytes;
		if (t[i].end > end)
			end = t[i].end;
	}
	pthread_barrier_destroy(&bar);
	if (err)
		return err;
	if (end <= start)
		return 0;
	return (double)bytes / ((double)(end - start) / 1e9) / 1e6;
}

static int64_t memcpy_work(void *arg, int tid, const int *stop)
{
	struct memcpy_bench *m = arg;
	char *src = m->buf[2 * tid], *dst = m->buf[2 * tid + 1];
	int64_t bytes = 0;
	while (!__atomic_load_n(stop, __ATOMIC_RELAXED)) {
		memcpy(dst, src, m->size);
		keep(dst);
		bytes += (int64_t)m->size;
	}
	return bytes;
}

int memcpy_bench_init(struct memcpy_bench *m, size_t size, int threads)
{
	memset(m, 0, sizeof(*m));
	m->size = size;
	m->threads = threads;
	for (int i = 0; i < 2 * threads; i++) {
		if (posix_memalign((void **)&m->buf[i], 4096, size ? size : 1)) {
			memcpy_bench_free(m);
			return -ENOMEM;
		}
		memset(m->buf[i], i + 1, size);
	}
	return 0;
}

double memcpy_bench_run(struct memcpy_bench *m, double seconds)
{
	return run_timed(m->threads, seconds, memcpy_work, m);
}

void memcpy_bench_free(struct memcpy_bench *m)
{
	for (int i = 0; i < 2 * NTBX_QP_MAX_THREADS; i++) {
		free(m->buf[i]);
		m->buf[i] = NULL;
	}
}

/* ---------------------------------------------------- handoff */

struct handoff_ctl {
	uint64_t head;      /* messages written (writer) */
	uint8_t pad0[56];
	uint64_t tail;      /* messages read (reader) */
	uint8_t pad1[56];
	uint32_t stop;
};

double handoff_bench(size_t size, size_t ring, double seconds)
{
	size_t slots = ring / size < 2 ? 2 : ring / size;
	size_t bytes = slots * size + sizeof(struct handoff_ctl);
	char *sh = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
	                MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return -errno;
	struct handoff_ctl *c = (struct handoff_ctl *)(sh + slots * size);
	char *src = malloc(size), *dst = malloc(size);
	if (!src || !dst) {
		free(src);
		free(dst);
		munmap(sh, bytes);
		return -ENOMEM;
	}
	memset(src, 0x5a, size);
	memset(sh, 0, slots * size);
	cpu_set_t saved;
	int have_saved = sched_getaffinity(0, sizeof(saved), &saved) == 0;
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		free(src);
		free(dst);
		munmap(sh, bytes);
		return -errno;
	}
	if (pid == 0) {
		cpu_pin(cpu_nth(1));
		for (uint64_t i = 0;; i++) {
			while (__atomic_load_n(&c->head, __ATOMIC_ACQUIRE) <= i)
				if (__atomic_load_n(&c->stop, __ATOMIC_RELAXED))
					_exit(0);
			memcpy(dst, sh + (i % slots) * size, size);
			__atomic_store_n(&c->tail, i + 1, __ATOMIC_RELEASE);
		}
	}
	cpu_pin(cpu_nth(0));
	uint64_t t0 = now_ns();
	double t = 0;
	uint64_t i = 0;
	while ((t = (double)(now_ns() - t0) / 1e9) < seconds) {
		for (int k = 0; k < 64; k++, i++) {
			while (i - __atomic_load_n(&c->tail, __ATOMIC_ACQUIRE) >= slots)
				;
			memcpy(sh + (i % slots) * size, src, size);
			__atomic_store_n(&c->head, i + 1, __ATOMIC_RELEASE);
		}
	}
	uint64_t done = __atomic_load_n(&c->tail, __ATOMIC_ACQUIRE);
	t = (double)(now_ns() - t0) / 1e9;
	__atomic_store_n(&c->stop, 1, __ATOMIC_RELEASE);
	waitpid(pid, NULL, 0);
	if (have_saved)
		(void)sched_setaffinity(0, sizeof(saved), &saved);
	free(src);
	free(dst);
	munmap(sh, bytes);
	return (double)done * (double)size / t / 1e6;
}

/* ---------------------------------------------------- supervision */

/* fork() a child that dies with this process (PR_SET_PDEATHSIG, and at
 * once if this process is already gone when it asks): the tools' helper
 * processes must not outlive a tool killed by a signal.  Stdio is flushed
 * first, so nothing buffered is written twice.  As fork(): -1 and errno. */
pid_t fork_tied(void)
{
	fflush(NULL);
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid == 0) {
		(void)prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
		if (getppid() != parent)
			_exit(1);
	}
	return pid;
}

int supervise(const char *temp_fabric, int (*body)(void *), void *arg)
{
	sigset_t set, old;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGQUIT);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, &old);
	(void)prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);

	pid_t pid = fork_tied();
	if (pid < 0) {
		int e = errno;
		if (temp_fabric)
			ntbx_fabric_destroy(temp_fabric);
		runtime_die("cannot fork: %s", strerror(e));
	}
	if (pid == 0) {
		setpgid(0, 0);
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		sigprocmask(SIG_SETMASK, &old, NULL);
		int rc = body(arg);
		fflush(NULL);
		_exit(rc);
	}
	setpgid(pid, pid);

	int status = 0, have_status = 0, sig = 0;
	while (!have_status && !sig) {
		siginfo_t si;
		int s = sigwaitinfo(&set, &si);
		if (s < 0)
			continue;
		if (s == SIGCHLD) {
			int st;
			pid_t w;
			while ((w = waitpid(-1, &st, WNOHANG)) > 0)
				if (w == pid) {
					status = st;
					have_status = 1;
				}
		} else {
			sig = s;
		}
	}
	/* Whatever is left of the body's process group goes now. */
	kill(-pid, SIGKILL);
	for (;;) {
		int st;
		pid_t w = waitpid(-1, &st, 0);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (w == pid && !have_status) {
			status = st;
			have_status = 1;
		}
	}
	if (temp_fabric) {
		int rc = ntbx_fabric_destroy(temp_fabric);
		if (rc < 0 && rc != -ENOENT) {
			char m[512];
			lib_msg(m, sizeof(m), rc, "destroying the temporary fabric");
			ntbx_log(NTBX_LOG_ERROR, "fabric '%s' could not be removed: %s",
			         temp_fabric, m);
		}
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (sig) {
		ntbx_log(NTBX_LOG_ERROR, "interrupted (%s); cleaned up",
		         strsignal(sig));
		return 128 + sig;
	}
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status) && WTERMSIG(status) == SIGPIPE)
		return 128 + SIGPIPE;  /* output closed (| head): quietly */
	if (WIFSIGNALED(status)) {
		ntbx_log(NTBX_LOG_ERROR, "benchmark process killed by %s",
		         strsignal(WTERMSIG(status)));
		return 1;
	}
	return 1;
}

void temp_fabric_create(const char *tag, int nodes, enum ntbx_topology t,
                        uint64_t memory, char *name, size_t len)
{
	/* Owned through a lock the kernel drops when we die however we die:
	 * a run killed with SIGKILL leaves a fabric the next one reaps. */
	static int lock_fd = -1;
	struct ntbx_fabric_params p = {
		.nodes = nodes, .topology = t, .window = memory, .memory = memory,
		.gid = -1,
	};
	char full[NTBX_FABRIC_NAME_MAX + 1];
	snprintf(full, sizeof full, "tmp-%s", tag);
	int fd;
	int rc = ntbx_fabric_create_private(full, &p, name, len, &fd);
	if (rc < 0) {
		char m[512];
		lib_msg(m, sizeof(m), rc, "creating a temporary fabric");
		runtime_die("cannot create a temporary fabric: %s", m);
	}
	if (lock_fd >= 0)
		close(lock_fd);   /* the previous one is destroyed by now */
	lock_fd = fd;
}

void fabric_require(const char *name, struct ntbx_fabric_info *info)
{
	int rc = ntbx_fabric_info(name, info);
	if (rc == 0)
		return;
	const char *m = ntbx_errmsg();
	if (m && *m && strstr(m, name))
		lib_die(rc, name);
	if (rc == -ENOENT)
		runtime_die("no fabric '%s' (create it with: ntbx fabric create %s "
		            "--nodes 2 --topology switch)", name, name);
	char buf[512];
	lib_msg(buf, sizeof(buf), rc, "reading the fabric");
	runtime_die("fabric '%s': %s", name, buf);
}

/* ------------------------------------------------- control channel */

int ctl_send(int fd, const struct ctl *m)
{
	for (;;) {
		ssize_t n = send(fd, m, sizeof(*m), MSG_NOSIGNAL);
		if (n == (ssize_t)sizeof(*m))
			return 0;
		if (n < 0 && errno == EINTR)
			continue;
		return -EPIPE;
	}
}

int ctl_recv(int fd, struct ctl *m, int timeout_ms)
{
	uint64_t deadline = timeout_ms < 0 ? 0
	                    : now_ns() + (uint64_t)timeout_ms * 1000000ull;
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int wait = -1;
		if (timeout_ms >= 0) {
			uint64_t t = now_ns();
			if (t >= deadline)
				return -ETIMEDOUT;
			wait = (int)((deadline - t) / 1000000ull) + 1;
		}
		int r = poll(&p, 1, wait);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			continue;
		ssize_t n = recv(fd, m, sizeof(*m), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n > 0 && (size_t)n < sizeof(*m)) {
			/* a stream (a peer on another host): the rest follows */
			ssize_t k = recv(fd, (char *)m + n, sizeof(*m) - (size_t)n,
			                 MSG_WAITALL);
			n = k > 0 ? n + k : -1;
		}
		if (n == (ssize_t)sizeof(*m)) {
			/* printable, terminated: the text may come from a peer */
			m->text[sizeof(m->text) - 1] = 0;
			for (char *c = m->text; *c; c++)
				if ((unsigned char)*c < 0x20 || *c == 0x7f)
					*c = '?';
			return 0;
		}
		return -EPIPE;
	}
}

void ctl_reply(int fd, int status, const char *what)
{
	struct ctl m;
	memset(&m, 0, sizeof(m));
	m.op = CTL_OK;
	m.status = status;
	if (status < 0)
		lib_msg(m.text, sizeof(m.text), status, what ? what : "error");
	ctl_send(fd, &m);
}

/* ---------------------------------------------------- node processes */

/* Control sockets of live node processes, closed in every new child. */
static int g_fds[NTBX_MAX_NODES];
static int g_nfds;

struct ntbx_fabric *join_or_die(const char *fabric, int node)
{
	struct ntbx_fabric *f;
	int rc = ntbx_fabric_join(fabric, node, &f);
	if (rc < 0) {
		char m[512];
		lib_msg(m, sizeof(m), rc, "joining");
		if (strstr(m, fabric))
			runtime_die("%s", strncmp(m, "ntbx: ", 6) ? m : m + 6);
		runtime_die("fabric '%s', node %d: %s", fabric, node, m);
	}
	return f;
}

int wait_links_to(struct ntbx_fabric *f, int peer, int timeout_ms)
{
	if (peer < 0)
		return ntbx_fabric_wait_links(f, timeout_ms);
	int port = ntbx_port_of_node(ntbx_fabric_dev(f), peer);
	if (port < 0)
		return port;
	uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000ull;
	for (;;) {
		int r = ntbx_fabric_link_ready(f, port);
		if (r > 0)
			return 0;
		if (r < 0)
			return r;
		if (now_ns() > deadline)
			return -ETIMEDOUT;
		usleep(500);
	}
}

void wait_links_or_die(struct ntbx_fabric *f, int peer)
{
	int rc = wait_links_to(f, peer, 15000);
	if (rc == 0)
		return;
	if (rc == -ETIMEDOUT) {
		if (peer >= 0)
			runtime_die("fabric '%s': the link from node %d to node %d did "
			            "not come up within 15 s (is node %d alive?)",
			            ntbx_fabric_name(f), ntbx_fabric_node(f), peer,
			            peer);
		runtime_die("fabric '%s': the links of node %d did not come up "
		            "within 15 s (are all its neighbours alive?)",
		            ntbx_fabric_name(f), ntbx_fabric_node(f));
	}
	lib_die(rc, "waiting for links");
}

void node_spawn(struct node_proc *p, const char *fabric, int node, int cpu,
                int wait_peer, node_serve_fn fn, void *arg)
{
	if (bench_node_is_remote(node)) {
		remote_spawn(p, fabric, node);
		goto track;
	}
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		runtime_die("socketpair: %s", strerror(errno));
	pid_t pid = fork_tied();
	if (pid < 0)
		runtime_die("cannot fork: %s", strerror(errno));
	if (pid == 0) {
		close(sv[0]);
		for (int i = 0; i < g_nfds; i++)
			close(g_fds[i]);
		g_nfds = 0;
		int fd = sv[1];
		cpu_pin(cpu);
		struct ctl m;
		memset(&m, 0, sizeof(m));
		struct ntbx_fabric *f = NULL;
		int rc = ntbx_fabric_join(fabric, node, &f);
		m.op = CTL_JOINED;
		m.status = rc;
		if (rc < 0)
			lib_msg(m.text, sizeof(m.text), rc, "joining");
		ctl_send(fd, &m);
		if (rc < 0)
			_exit(1);
		rc = wait_links_to(f, wait_peer, 15000);
		memset(&m, 0, sizeof(m));
		m.op = CTL_READY;
		m.status = rc;
		if (rc == -ETIMEDOUT)
			snprintf(m.text, sizeof(m.text),
			         "fabric '%s': links of node %d did not come up "
			         "within 15 s", fabric, node);
		else if (rc < 0)
			lib_msg(m.text, sizeof(m.text), rc, "waiting for links");
		ctl_send(fd, &m);
		if (rc == 0)
			fn(f, fd, arg);
		ntbx_fabric_leave(f);
		fflush(NULL);
		_exit(rc ? 1 : 0);
	}
	close(sv[1]);
	p->pid = pid;
	p->fd = sv[0];
	p->node = node;
	struct ctl m;
	int rc = ctl_recv(p->fd, &m, 30000);
	if (rc < 0)
		runtime_die("fabric '%s': node %d process %s", fabric, node,
		            rc == -ETIMEDOUT ? "did not join within 30 s"
		                             : "died while joining");
	if (m.status < 0)
		runtime_die("%s", strncmp(m.text, "ntbx: ", 6) ? m.text
		                                              : m.text + 6);
track:
	if (g_nfds < NTBX_MAX_NODES)
		g_fds[g_nfds++] = p->fd;
}

void node_wait_ready(struct node_proc *p)
{
	struct ctl m;
	int rc = ctl_recv(p->fd, &m, 30000);
	if (rc < 0)
		runtime_die("node %d process %s", p->node,
		            rc == -ETIMEDOUT ? "did not bring its links up in 30 s"
		                             : "died while bringing links up");
	if (m.status < 0)
		runtime_die("%s", strncmp(m.text, "ntbx: ", 6) ? m.text
		                                              : m.text + 6);
}

void node_stop(struct node_proc *p)
{
	if (p->pid == 0)
		return;
	struct ctl m;
	memset(&m, 0, sizeof(m));
	m.op = CTL_QUIT;
	ctl_send(p->fd, &m);
	if (p->pid < 0) {
		/* on another host: it leaves, then closes (bounded) */
		while (ctl_recv(p->fd, &m, 5000) == 0)
			;
		goto reaped;
	}
	/* Give it a few seconds to leave cleanly, then kill it. */
	for (int i = 0; i < 500; i++) {
		pid_t w = waitpid(p->pid, NULL, WNOHANG);
		if (w == p->pid || (w < 0 && errno == ECHILD))
			goto reaped;
		usleep(10000);
	}
	kill(p->pid, SIGKILL);
	while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR)
		;
reaped:
	close(p->fd);
	for (int i = 0; i < g_nfds; i++)
		if (g_fds[i] == p->fd)
			g_fds[i] = g_fds[--g_nfds];
	p->pid = 0;
	p->fd = -1;
}

void ctl_call(struct node_proc *p, struct ctl *m, struct ctl *reply)
{
	struct ctl tmp;
	if (!reply)
		reply = &tmp;
	if (ctl_send(p->fd, m) < 0)
		runtime_die("node %d process died", p->node);
	int rc = ctl_recv(p->fd, reply, -1);
	if (rc < 0)
		runtime_die("node %d process died", p->node);
	if (reply->status < 0)
		runtime_die("node %d: %s", p->node,
		            strncmp(reply->text, "ntbx: ", 6) ? reply->text
		                                             : reply->text + 6);
}
