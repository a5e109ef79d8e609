/*
 * A blocking recv on a fabric socket interrupted by signals, as on a kernel
 * socket (socket(7), signal(7)):
 *   restart   SIGALRM handler with SA_RESTART: recv is resumed and returns
 *             the byte sent after three signals;
 *   eintr     handler without SA_RESTART: recv fails with EINTR;
 *   timeout   SA_RESTART, but SO_RCVTIMEO set: recv fails with EINTR;
 *   crashhandler  as restart, with a SIGSEGV handler without SA_RESTART
 *             installed first, as crash reporters, language runtimes and
 *             sanitizers do: a fault handler never interrupts a recv, so
 *             recv is still resumed.
 * One process connects to its own listener (so the connection is on the
 * fabric under `ntbx run`); a writer thread with SIGALRM blocked sends the
 * byte once the handler has run three times.  Prints "ok MODE".
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static volatile sig_atomic_t alarms;
static volatile int recv_done;   /* main's recv returned */
static int a_fd, c_fd;

static void on_alarm(int s) { (void)s; alarms++; }
static void on_segv(int s) { (void)s; _exit(99); }

static void *writer(void *arg)
{
	(void)arg;
	sigset_t m;
	sigemptyset(&m);
	sigaddset(&m, SIGALRM);
	pthread_sigmask(SIG_BLOCK, &m, NULL);
	for (int i = 0; i < 20000 && alarms < 3 && !recv_done; i++)   /* <= 20 s */
		usleep(1000);
	if (write(c_fd, "x", 1) != 1)
		perror("write");
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	const char *mode = argv[1];
	struct sockaddr_in sa = { .sin_family = AF_INET,
	                          .sin_port = htons((unsigned short)atoi(argv[2])) };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(l, (void *)&sa, sizeof sa) || listen(l, 1))
		return perror("listen"), 3;
	c_fd = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(c_fd, (void *)&sa, sizeof sa))
		return perror("connect"), 3;
	a_fd = accept(l, NULL, NULL);
	/* a first byte each way: the connection is on the fabric after it */
	char b;
	if (write(c_fd, "y", 1) != 1 || read(a_fd, &b, 1) != 1 ||
	    write(a_fd, "z", 1) != 1 || read(c_fd, &b, 1) != 1)
		return perror("warm-up"), 3;
	struct sigaction act;
	memset(&act, 0, sizeof act);
	if (!strcmp(mode, "crashhandler")) {
		act.sa_handler = on_segv;
		act.sa_flags = SA_NODEFER;
		sigaction(SIGSEGV, &act, NULL);
	}
	act.sa_handler = on_alarm;
	act.sa_flags = strcmp(mode, "eintr") ? SA_RESTART : 0;
	sigaction(SIGALRM, &act, NULL);
	if (!strcmp(mode, "timeout")) {
		struct timeval tv = { 30, 0 };
		setsockopt(a_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	}
	pthread_t th;
	pthread_create(&th, NULL, writer, NULL);
	struct itimerval it = { { 0, 20000 }, { 0, 20000 } };
	setitimer(ITIMER_REAL, &it, NULL);
	ssize_t r = recv(a_fd, &b, 1, 0);
	int e = errno;
	recv_done = 1;
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_REAL, &off, NULL);
	pthread_join(th, NULL);
	int resumed = !strcmp(mode, "restart") || !strcmp(mode, "crashhandler");
	int ok = resumed ? r == 1 && b == 'x' && alarms >= 3
	                                  : r == -1 && e == EINTR;
	printf("%s %s: recv %zd (%s), %d signals\n", ok ? "ok" : "FAIL", mode, r,
	       r < 0 ? strerror(e) : "data", (int)alarms);
	return ok ? 0 : 1;
}
