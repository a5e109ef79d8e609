/* SPDX-License-Identifier: MIT */
/*
 * bench/shortconn — short connections against a fork-per-connection
 * server, as inetd, Python's ForkingTCPServer or gunicorn's sync workers
 * serve them.
 *
 *   shortconn server PORT
 *       accept; fork a child per connection that reads a 64-byte request,
 *       answers 64 bytes and exits.
 *   shortconn client HOST PORT PROCS SECONDS
 *       PROCS processes, each: connect, send 64 B, receive 64 B (checked),
 *       close, again, for SECONDS.  Prints one line:
 *       conns=N secs=S conns_per_s=R p50_us=A p99_us=B errors=E
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MSG 64
#define MAXLAT 200000   /* per client process */

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static int io_all(int fd, void *p, size_t n, int out)
{
	char *c = p;
	while (n) {
		ssize_t r = out ? send(fd, c, n, MSG_NOSIGNAL) : recv(fd, c, n, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		c += r;
		n -= (size_t)r;
	}
	return 0;
}

static int serve(int port)
{
	int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
	                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) < 0 ||
	    listen(ls, 512) < 0) {
		perror("shortconn server");
		return 1;
	}
	signal(SIGCHLD, SIG_IGN);   /* children are reaped by the kernel */
	for (;;) {
		int c = accept(ls, NULL, NULL);
		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			perror("shortconn accept");
			return 1;
		}
		pid_t p = fork();
		if (p == 0) {
			close(ls);
			char b[MSG];
			if (io_all(c, b, MSG, 0) == 0) {
				for (int i = 0; i < MSG; i++)
					b[i] = (char)(b[i] ^ 0x5a);
				io_all(c, b, MSG, 1);
			}
			close(c);
			_exit(0);
		}
		close(c);
	}
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

struct result {
	uint64_t conns, errors;
	uint32_t n;
	uint32_t lat[MAXLAT];
};

static void client(const struct sockaddr_in *srv, double secs,
                   struct result *res, int id)
{
	uint64_t end = now_ns() + (uint64_t)(secs * 1e9);
	char q[MSG], r[MSG];
	for (uint64_t k = 0; now_ns() < end; k++) {
		for (int i = 0; i < MSG; i++)
			q[i] = (char)(k * 31 + (uint64_t)i + (uint64_t)id);
		uint64_t t0 = now_ns();
		int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1, ok = 0;
		if (fd >= 0) {
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
			ok = connect(fd, (const struct sockaddr *)srv, sizeof *srv) == 0 &&
			     io_all(fd, q, MSG, 1) == 0 && io_all(fd, r, MSG, 0) == 0;
			for (int i = 0; ok && i < MSG; i++)
				ok = r[i] == (char)(q[i] ^ 0x5a);
			close(fd);
		}
		if (!ok) {
			res->errors++;
			continue;
		}
		res->conns++;
		if (res->n < MAXLAT)
			res->lat[res->n++] = (uint32_t)((now_ns() - t0) / 1000);
	}
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "server"))
		return serve(atoi(argv[2]));
	if (argc != 6 || strcmp(argv[1], "client")) {
		fprintf(stderr, "usage: shortconn server PORT\n"
		        "       shortconn client HOST PORT PROCS SECONDS\n");
		return 2;
	}
	struct sockaddr_in srv = { .sin_family = AF_INET,
	                           .sin_port = htons((uint16_t)atoi(argv[3])) };
	int procs = atoi(argv[4]);
	double secs = atof(argv[5]);
	if (inet_pton(AF_INET, argv[2], &srv.sin_addr) != 1 || procs < 1 ||
	    procs > 64 || secs <= 0) {
		fprintf(stderr, "shortconn: bad arguments\n");
		return 2;
	}
	struct result *res = mmap(NULL, sizeof *res * (size_t)procs,
	                          PROT_READ | PROT_WRITE,
	                          MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (res == MAP_FAILED)
		return 1;
	uint64_t t0 = now_ns();
	for (int i = 0; i < procs; i++) {
		pid_t p = fork();
		if (p == 0) {
			client(&srv, secs, &res[i], i);
			_exit(0);
		}
	}
	while (wait(NULL) > 0)
		;
	double el = (double)(now_ns() - t0) / 1e9;
	uint64_t conns = 0, errors = 0;
	size_t n = 0;
	for (int i = 0; i < procs; i++) {
		conns += res[i].conns;
		errors += res[i].errors;
		n += res[i].n;
	}
	uint32_t *all = malloc((n ? n : 1) * sizeof *all);
	if (!all)
		return 1;
	size_t k = 0;
	for (int i = 0; i < procs; i++) {
		memcpy(all + k, res[i].lat, res[i].n * sizeof *all);
		k += res[i].n;
	}
	qsort(all, n, sizeof *all, cmp_u32);
	printf("conns=%llu secs=%.2f conns_per_s=%.0f p50_us=%u p99_us=%u "
	       "errors=%llu\n", (unsigned long long)conns, el, (double)conns / el,
	       n ? all[n / 2] : 0, n ? all[n * 99 / 100] : 0,
	       (unsigned long long)errors);
	free(all);
	return errors ? 1 : 0;
}
