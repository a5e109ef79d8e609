/* SPDX-License-Identifier: MIT */
/*
 * bench/mcload — a memcached load generator in the manner of
 * memtier_benchmark (which Debian does not package): THREADS threads, each
 * with its own poll loop over CONNS connections, one request outstanding
 * per connection, a get/set mix over a fixed key space, every reply
 * checked byte for byte.  Prints one line:
 *   ops=N secs=S ops_per_s=R p50_us=A p99_us=B p999_us=C max_us=D errors=E
 *
 *   mcload HOST PORT THREADS CONNS SECONDS [GET_PERCENT [VALUE_BYTES]]
 *
 * The text protocol with fixed-length keys and values keeps parsing
 * trivial: a reply is complete when its known length has arrived.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define KEYS 1000
#define MAXC 64
#define MAXV 4096

static struct sockaddr_in srv;
static int nconn, get_pct, vlen;
static double secs;

struct conn {
	int fd;
	int key, is_get;
	uint64_t t0;
	size_t want, got;
	char buf[MAXV + 128];
};

struct worker {
	pthread_t th;
	unsigned seed;
	uint64_t ops, errors;
	uint32_t *lat;            /* latencies in ns, capped at 4.29 s */
	size_t nlat, cap;
};

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void value_of(int key, char *v)
{
	for (int i = 0; i < vlen; i++)
		v[i] = (char)('a' + (key * 7 + i) % 26);
}

static int dial(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	if (connect(fd, (struct sockaddr *)&srv, sizeof srv) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Send the next request of @c; sets the reply length it waits for. */
static int issue(struct worker *w, struct conn *c)
{
	char req[MAXV + 64], v[MAXV];
	c->key = (int)(rand_r(&w->seed) % KEYS);
	c->is_get = (int)(rand_r(&w->seed) % 100) < get_pct;
	int n;
	if (c->is_get) {
		n = snprintf(req, sizeof req, "get key:%06d\r\n", c->key);
		/* VALUE key:000000 0 LEN\r\n DATA \r\nEND\r\n */
		c->want = (size_t)snprintf(NULL, 0, "VALUE key:%06d 0 %d\r\n",
		                           c->key, vlen) + (size_t)vlen + 2 + 5;
	} else {
		n = snprintf(req, sizeof req, "set key:%06d 0 0 %d\r\n", c->key,
		             vlen);
		value_of(c->key, v);
		memcpy(req + n, v, (size_t)vlen);
		n += vlen;
		memcpy(req + n, "\r\n", 2);
		n += 2;
		c->want = 8;   /* STORED\r\n */
	}
	c->got = 0;
	c->t0 = now_ns();
	return send_all(c->fd, req, (size_t)n);
}

/* The reply of @c is complete: check it byte for byte. */
static int reply_ok(const struct conn *c)
{
	if (!c->is_get)
		return memcmp(c->buf, "STORED\r\n", 8) == 0;
	char head[64], v[MAXV];
	int h = snprintf(head, sizeof head, "VALUE key:%06d 0 %d\r\n", c->key,
	                 vlen);
	value_of(c->key, v);
	return memcmp(c->buf, head, (size_t)h) == 0 &&
	       memcmp(c->buf + h, v, (size_t)vlen) == 0 &&
	       memcmp(c->buf + h + vlen, "\r\nEND\r\n", 7) == 0;
}

static void record(struct worker *w, uint64_t ns)
{
	if (w->nlat == w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 65536;
		uint32_t *l = realloc(w->lat, cap * sizeof *l);
		if (!l)
			return;
		w->lat = l;
		w->cap = cap;
	}
	w->lat[w->nlat++] = ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct conn *c = calloc((size_t)nconn, sizeof *c);
	struct pollfd pf[MAXC];
	if (!c)
		return NULL;
	for (int i = 0; i < nconn; i++) {
		c[i].fd = dial();
		pf[i] = (struct pollfd){ .fd = c[i].fd, .events = POLLIN };
		if (c[i].fd < 0 || issue(w, &c[i]) < 0) {
			w->errors++;
			goto out;
		}
	}
	uint64_t end = now_ns() + (uint64_t)(secs * 1e9);
	while (now_ns() < end) {
		int r = poll(pf, (nfds_t)nconn, 1000);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			w->errors++;   /* a second without any reply: a stall */
			continue;
		}
		for (int i = 0; i < nconn; i++) {
			if (!(pf[i].revents & (POLLIN | POLLERR | POLLHUP)))
				continue;
			struct conn *k = &c[i];
			ssize_t n = recv(k->fd, k->buf + k->got, k->want - k->got, 0);
			if (n <= 0) {
				if (n < 0 && (errno == EINTR || errno == EAGAIN))
					continue;
				w->errors++;
				goto out;
			}
			k->got += (size_t)n;
			if (k->got < k->want)
				continue;
			record(w, now_ns() - k->t0);
			w->ops++;
			if (!reply_ok(k))
				w->errors++;
			if (issue(w, k) < 0) {
				w->errors++;
				goto out;
			}
		}
	}
out:
	for (int i = 0; i < nconn; i++)
		if (c[i].fd >= 0)
			close(c[i].fd);
	free(c);
	return NULL;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	if (argc < 6) {
		fprintf(stderr, "usage: mcload HOST PORT THREADS CONNS SECONDS "
		        "[GET_PERCENT [VALUE_BYTES]]\n");
		return 2;
	}
	int nth = atoi(argv[3]);
	nconn = atoi(argv[4]);
	secs = atof(argv[5]);
	get_pct = argc > 6 ? atoi(argv[6]) : 90;
	vlen = argc > 7 ? atoi(argv[7]) : 32;
	srv.sin_family = AF_INET;
	srv.sin_port = htons((uint16_t)atoi(argv[2]));
	if (nth < 1 || nth > 64 || nconn < 1 || nconn > MAXC || secs <= 0 ||
	    vlen < 1 || vlen > MAXV || get_pct < 0 || get_pct > 100 ||
	    inet_pton(AF_INET, argv[1], &srv.sin_addr) != 1) {
		fprintf(stderr, "mcload: bad arguments\n");
		return 2;
	}
	/* every key exists before the clock starts, so every get hits */
	int fd = dial();
	if (fd < 0) {
		perror("mcload: connect");
		return 1;
	}
	for (int k = 0; k < KEYS; k++) {
		char req[MAXV + 64], rep[8];
		int n = snprintf(req, sizeof req, "set key:%06d 0 0 %d\r\n", k, vlen);
		value_of(k, req + n);
		memcpy(req + n + vlen, "\r\n", 2);
		size_t got = 0;
		if (send_all(fd, req, (size_t)n + (size_t)vlen + 2) < 0)
			return 1;
		while (got < sizeof rep) {
			ssize_t r = recv(fd, rep + got, sizeof rep - got, 0);
			if (r <= 0)
				return 1;
			got += (size_t)r;
		}
		if (memcmp(rep, "STORED\r\n", 8)) {
			fprintf(stderr, "mcload: preload failed\n");
			return 1;
		}
	}
	close(fd);
	struct worker *w = calloc((size_t)nth, sizeof *w);
	if (!w)
		return 1;
	uint64_t t0 = now_ns();
	for (int i = 0; i < nth; i++) {
		w[i].seed = 12345u + (unsigned)i;
		pthread_create(&w[i].th, NULL, worker_main, &w[i]);
	}
	uint64_t ops = 0, errors = 0;
	size_t n = 0;
	for (int i = 0; i < nth; i++) {
		pthread_join(w[i].th, NULL);
		ops += w[i].ops;
		errors += w[i].errors;
		n += w[i].nlat;
	}
	double el = (double)(now_ns() - t0) / 1e9;
	uint32_t *all = malloc((n ? n : 1) * sizeof *all);
	size_t k = 0;
	for (int i = 0; i < nth; i++) {
		if (all && w[i].nlat)
			memcpy(all + k, w[i].lat, w[i].nlat * sizeof *all);
		k += w[i].nlat;
		free(w[i].lat);
	}
	if (!all)
		return 1;
	qsort(all, n, sizeof *all, cmp_u32);
	double p50 = n ? all[n / 2] / 1e3 : 0, p99 = n ? all[n * 99 / 100] / 1e3 : 0;
	double p999 = n ? all[n * 999 / 1000] / 1e3 : 0;
	double mx = n ? all[n - 1] / 1e3 : 0;
	printf("ops=%llu secs=%.2f ops_per_s=%.0f p50_us=%.1f p99_us=%.1f "
	       "p999_us=%.1f max_us=%.1f errors=%llu\n", (unsigned long long)ops,
	       el, (double)ops / el, p50, p99, p999, mx,
	       (unsigned long long)errors);
	free(all);
	free(w);
	return errors ? 1 : 0;
}
