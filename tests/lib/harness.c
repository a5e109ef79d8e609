#include "harness.h"

#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int th_failures, th_checks;
static char th_dir[256];
static pid_t th_owner;

static int rm_one(const char *path, const struct stat *sb, int flag,
                  struct FTW *ftw)
{
	(void)sb; (void)flag; (void)ftw;
	return remove(path);
}

static void th_cleanup(void)
{
	if (th_dir[0] && getpid() == th_owner)
		nftw(th_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

const char *th_init(const char *test_name)
{
	snprintf(th_dir, sizeof th_dir, "/dev/shm/ntbx-test-%s-XXXXXX", test_name);
	if (!mkdtemp(th_dir)) {
		perror("mkdtemp");
		exit(1);
	}
	th_owner = getpid();
	setenv("NTBX_SHM_DIR", th_dir, 1);
	unsetenv("NTBX_NODE");
	atexit(th_cleanup);
	return th_dir;
}

pid_t th_spawn(int (*fn)(void *), void *arg)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		exit(1);
	}
	if (pid == 0)
		_exit(fn(arg));
	return pid;
}

int th_wait(pid_t pid)
{
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return WEXITSTATUS(st);
}

void th_run_pair(int (*fn)(void *), void *arg)
{
	int a[2], b[2];
	REQUIRE(pipe(a) == 0 && pipe(b) == 0);
	struct th_pair n0 = { 0, 1, a[1], b[0], arg };
	struct th_pair n1 = { 1, 0, b[1], a[0], arg };
	pid_t p0 = th_spawn(fn, &n0);
	pid_t p1 = th_spawn(fn, &n1);
	CHECK_EQ(th_wait(p0), 0);
	CHECK_EQ(th_wait(p1), 0);
	for (int i = 0; i < 2; i++) {
		close(a[i]);
		close(b[i]);
	}
}

int th_done(const char *test_name)
{
	printf("%s: %d passed, %d failed\n", test_name,
	       th_checks - th_failures, th_failures);
	return th_failures ? 1 : 0;
}

unsigned long long th_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

int th_xfer(int fd, void *p, size_t n, int wr)
{
	size_t d = 0;
	while (d < n) {
		ssize_t k = wr ? write(fd, (char *)p + d, n - d)
		               : read(fd, (char *)p + d, n - d);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		d += (size_t)k;
	}
	return 0;
}
