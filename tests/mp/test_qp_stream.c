/*
 * Queue pairs between two processes that are two nodes of a real shm
 * switch fabric: stream transfer with random sizes, message boundaries
 * (0-length, multi-record, larger than the ring, -EMSGSIZE), push into
 * posted buffers (CPU and DMA), nonblocking -EAGAIN, shutdown, and a
 * loopback queue pair on one node.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "ntbx/qp.h"

#define FABRIC "qpstream"

/* What each node of a pair (th_run_pair) runs: fn on a queue pair to the
 * other node, its ring ring[node] bytes (0: the default), with flags. */
struct pair_test {
	int (*fn)(struct th_pair *, struct ntbx_fabric *, struct ntbx_qp *);
	uint32_t ring[2], flags;
};

static uint64_t xs(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void pattern(uint8_t *p, size_t n, uint64_t seed)
{
	uint64_t s = seed | 1;
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(xs(&s) >> 24);
}

static int node_main(void *arg)
{
	struct th_pair *n = arg;
	const struct pair_test *t = n->arg;
	struct ntbx_fabric *f = th_join(FABRIC, n->node, 20000);
	struct ntbx_qp_opts o = { t->ring[n->node], t->flags };
	struct ntbx_qp *qp = th_qp_to(f, n->peer, &o, n->wfd, n->rfd, NULL, NULL);
	int rc = t->fn(n, f, qp);
	fflush(stdout);
	ntbx_qp_close(qp, 1);
	ntbx_fabric_leave(f);
	if (th_failures)
		fprintf(stderr, "node %d: %d checks failed\n", n->node, th_failures);
	return rc ? rc : th_failures ? 1 : 0;
}

/* Run fn on node 0 and node 1, connected by a fresh queue pair. */
static void run_pair(const char *what,
                     int (*fn)(struct th_pair *, struct ntbx_fabric *, struct ntbx_qp *),
                     uint32_t ring0, uint32_t ring1, uint32_t flags)
{
	struct pair_test t = { fn, { ring0, ring1 }, flags };
	unsigned long long t0 = th_now_ns();
	th_run_pair(node_main, &t);
	printf("%s: %.2f s\n", what, (th_now_ns() - t0) / 1e9);
}

/* ------------------------------------------------------------ stream */

#define STREAM_BYTES (12u << 20)

static int stream_fn(struct th_pair *n, struct ntbx_fabric *f, struct ntbx_qp *qp)
{
	(void)f;
	uint8_t *buf = malloc(300000), *ref = malloc(300000);
	uint64_t rs = 0x1234 + (uint64_t)n->node;
	uint64_t ds = 0xdada;   /* data stream, same on both sides */
	if (n->node == 0) {
		size_t sent = 0;
		while (sent < STREAM_BYTES) {
			size_t k = xs(&rs) % 200000 + 1;
			if (k > STREAM_BYTES - sent)
				k = STREAM_BYTES - sent;
			pattern(buf, k, ds + sent / 4096);   /* any deterministic data */
			for (size_t i = 0; i < k; i++)
				buf[i] = (uint8_t)((sent + i) * 2654435761u >> 13);
			size_t d = 0;
			while (d < k) {
				ssize_t w = ntbx_qp_write(qp, buf + d, k - d, 0);
				if (w <= 0) {
					fprintf(stderr, "write: %zd\n", w);
					return 2;
				}
				d += (size_t)w;
			}
			sent += k;
		}
		CHECK_EQ(ntbx_qp_shutdown(qp), 0);
		CHECK_EQ(ntbx_qp_write(qp, buf, 1, 0), -EPIPE);
		uint64_t got = 0;
		CHECK_EQ(ntbx_qp_read(qp, &got, sizeof got, 0), 8);
		CHECK_EQ(got, STREAM_BYTES);
		struct ntbx_qp_stats st;
		ntbx_qp_get_stats(qp, &st);
		CHECK_EQ(st.tx_bytes, STREAM_BYTES);
	} else {
		uint64_t total = 0;
		int bad = 0;
		for (;;) {
			size_t k = xs(&rs) % 250000 + 1;
			ssize_t r = ntbx_qp_read(qp, buf, k, 0);
			if (r < 0) {
				fprintf(stderr, "read: %zd\n", r);
				return 3;
			}
			if (r == 0)
				break;
			for (ssize_t i = 0; i < r; i++)
				if (buf[i] != (uint8_t)((total + (uint64_t)i) * 2654435761u >> 13))
					bad++;
			total += (uint64_t)r;
		}
		CHECK_EQ(bad, 0);
		printf("stream: received %llu bytes\n", (unsigned long long)total);
		CHECK_EQ(total, STREAM_BYTES);
		CHECK_EQ(ntbx_qp_read(qp, buf, 10, 0), 0);   /* EOF stays */
		CHECK_EQ(ntbx_qp_write(qp, &total, sizeof total, 0), 8);
	}
	(void)ref;
	free(buf);
	free(ref);
	return 0;
}

/* ------------------------------------------------------------ messages */

static const size_t msg_sizes[] = { 0, 1, 100, 4000, 0, 65536, 200000, 1500000, 7 };
#define NMSG (sizeof msg_sizes / sizeof msg_sizes[0])

static int msg_fn(struct th_pair *n, struct ntbx_fabric *f, struct ntbx_qp *qp)
{
	(void)f;
	uint8_t *buf = malloc(1600000), *ref = malloc(1600000);
	if (n->node == 0) {
		for (size_t i = 0; i < NMSG; i++) {
			pattern(buf, msg_sizes[i], i + 1);
			CHECK_EQ(ntbx_qp_send(qp, buf, msg_sizes[i], 0), msg_sizes[i]);
		}
		CHECK_EQ(ntbx_qp_shutdown(qp), 0);
		/* nonblocking receive on an empty direction */
		int eof;
		CHECK_EQ(ntbx_qp_recv(qp, buf, 10, NTBX_QP_NONBLOCK, &eof), -EAGAIN);
	} else {
		for (size_t i = 0; i < NMSG; i++) {
			size_t sz = msg_sizes[i];
			int m = ntbx_qp_wait(qp, NTBX_QP_READABLE, 10000);
			CHECK(m > 0 && (m & NTBX_QP_READABLE));
			CHECK_EQ(ntbx_qp_peek_len(qp), sz);
			int eof = 7;
			if (sz) {
				CHECK_EQ(ntbx_qp_recv(qp, buf, sz - 1, 0, &eof), -EMSGSIZE);
				CHECK_EQ(ntbx_qp_peek_len(qp), sz);   /* still queued */
			}
			memset(buf, 0, sz + 1);
			CHECK_EQ(ntbx_qp_recv(qp, buf, 1600000, 0, &eof), sz);
			CHECK_EQ(eof, 0);
			pattern(ref, sz, i + 1);
			CHECK(memcmp(buf, ref, sz) == 0);
		}
		int eof = 0;
		CHECK_EQ(ntbx_qp_recv(qp, buf, 100, 0, &eof), 0);
		CHECK_EQ(eof, 1);
		CHECK(ntbx_qp_poll(qp) & NTBX_QP_HUP);
	}
	free(buf);
	free(ref);
	return 0;
}

/* ------------------------------------------------------------ push */

#define PUSH_SZ (256u << 10)
#define PUSH_N 24

static int push_fn(struct th_pair *n, struct ntbx_fabric *f, struct ntbx_qp *qp)
{
	struct ntbx_dev *dev = ntbx_fabric_dev(f);
	uint8_t *buf = malloc(PUSH_SZ), *ref = malloc(PUSH_SZ);
	if (n->node == 0) {
		char go;
		CHECK_EQ(ntbx_qp_read(qp, &go, 1, 0), 1);   /* buffers are posted */
		for (int i = 0; i < PUSH_N; i++) {
			size_t sz = i == PUSH_N - 1 ? 64 << 10 : PUSH_SZ - (size_t)i * 100;
			pattern(buf, sz, 100 + (uint64_t)i);
			CHECK_EQ(ntbx_qp_send(qp, buf, sz, 0), sz);
		}
		struct ntbx_qp_stats st;
		ntbx_qp_get_stats(qp, &st);
		printf("pushed %llu of %llu bytes\n", (unsigned long long)st.pushed_bytes,
		       (unsigned long long)st.tx_bytes);
		CHECK(st.pushed_bytes >= 4ull * (PUSH_SZ - 300));
		CHECK_EQ(ntbx_qp_read(qp, &go, 1, 0), 1);
	} else {
		int64_t off[4];
		for (int i = 0; i < 4; i++) {
			off[i] = ntbx_mem_alloc(dev, PUSH_SZ, 4096, "test-push", 1);
			REQUIRE(off[i] >= 0);
			CHECK_EQ(ntbx_qp_post_recv(qp, (uint64_t)off[i], PUSH_SZ), 0);
		}
		CHECK_EQ(ntbx_qp_post_recv(qp, ntbx_mem_size(dev), 10), -EINVAL);
		CHECK_EQ(ntbx_qp_write(qp, "g", 1, 0), 1);
		uint8_t *mem = ntbx_mem_base(dev);
		for (int i = 0; i < PUSH_N - 1; i++) {
			uint64_t o = 0;
			size_t sz = PUSH_SZ - (size_t)i * 100;
			ssize_t r = ntbx_qp_recv_posted(qp, &o, 0);
			CHECK_EQ(r, sz);
			CHECK_EQ(o, off[i % 4]);
			pattern(ref, sz, 100 + (uint64_t)i);
			CHECK(r > 0 && memcmp(mem + o, ref, sz) == 0);
			/* repost: it belongs to a later message */
			if (i < PUSH_N - 5)
				CHECK_EQ(ntbx_qp_post_recv(qp, o, PUSH_SZ), 0);
		}
		/* last one: read with a plain recv (pushed or not) */
		CHECK_EQ(ntbx_qp_post_recv(qp, (uint64_t)off[0], PUSH_SZ), 0);
		int eof;
		CHECK_EQ(ntbx_qp_recv(qp, buf, PUSH_SZ, 0, &eof), 64 << 10);
		pattern(ref, 64 << 10, 100 + PUSH_N - 1);
		CHECK(memcmp(buf, ref, 64 << 10) == 0);
		CHECK_EQ(ntbx_qp_write(qp, "d", 1, 0), 1);
	}
	free(buf);
	free(ref);
	return 0;
}

/* ------------------------------------------------------------ nonblock */

static int nonblock_fn(struct th_pair *n, struct ntbx_fabric *f, struct ntbx_qp *qp)
{
	(void)f;
	uint8_t buf[1000];
	char c = 0;
	if (n->node == 0) {
		CHECK_EQ(th_xfer(n->rfd, &c, 1, 0), 0);   /* the peer looked: empty */
		size_t total = 0;
		ssize_t r;
		memset(buf, 0x5a, sizeof buf);
		while ((r = ntbx_qp_write(qp, buf, 300, NTBX_QP_NONBLOCK)) > 0)
			total += (size_t)r;
		CHECK_EQ(r, -EAGAIN);
		CHECK(total > 3000 && total <= 4096);
		CHECK(!(ntbx_qp_poll(qp) & NTBX_QP_WRITABLE));
		CHECK_EQ(ntbx_qp_send(qp, buf, 1000, NTBX_QP_NONBLOCK), -EAGAIN);
		CHECK_EQ(th_xfer(n->wfd, &total, sizeof total, 1), 0);
		CHECK_EQ(th_xfer(n->rfd, &c, 1, 0), 0);   /* drained */
		/* the reader drained: writing works again */
		CHECK_EQ(ntbx_qp_send(qp, buf, 1000, 0), 1000);
	} else {
		CHECK_EQ(ntbx_qp_read(qp, buf, 10, NTBX_QP_NONBLOCK), -EAGAIN);
		CHECK_EQ(ntbx_qp_peek_len(qp), -EAGAIN);
		CHECK(!(ntbx_qp_poll(qp) & NTBX_QP_READABLE));
		/* the spinners' hint: nothing landed, nothing said */
		CHECK(!ntbx_qp_rx_hint(qp));
		CHECK_EQ(th_xfer(n->wfd, &c, 1, 1), 0);
		size_t total = 0, got = 0;
		CHECK_EQ(th_xfer(n->rfd, &total, sizeof total, 0), 0);
		ssize_t r;
		/* readable: the hint says so (it may say so first, never after) */
		CHECK(ntbx_qp_wait(qp, NTBX_QP_READABLE, 2000) > 0);
		CHECK(ntbx_qp_rx_hint(qp));
		/* A write that returned may still be on its way on a DMA-only
		 * backend (NTBX_DEV_DMA_ONLY=1): what is not there yet is
		 * waited for, bounded; then nothing more is readable. */
		do {
			while ((r = ntbx_qp_read(qp, buf, 77, NTBX_QP_NONBLOCK)) > 0)
				got += (size_t)r;
		} while (r == -EAGAIN && got < total &&
		         ntbx_qp_wait(qp, NTBX_QP_READABLE, 2000) > 0);
		CHECK_EQ(r, -EAGAIN);
		CHECK_EQ(got, total);
		CHECK(!ntbx_qp_rx_hint(qp));   /* all read: quiet again */
		CHECK_EQ(th_xfer(n->wfd, &c, 1, 1), 0);
		int eof;
		CHECK_EQ(ntbx_qp_recv(qp, buf, sizeof buf, 0, &eof), 1000);
	}
	return 0;
}

/* ------------------------------------------------------------ shutdown */

static int shutdown_fn(struct th_pair *n, struct ntbx_fabric *f, struct ntbx_qp *qp)
{
	(void)f;
	char buf[16];
	if (n->node == 0) {
		CHECK_EQ(ntbx_qp_write(qp, "abc", 3, 0), 3);
		CHECK_EQ(ntbx_qp_shutdown(qp), 0);
		CHECK_EQ(ntbx_qp_write(qp, "x", 1, 0), -EPIPE);
		CHECK_EQ(ntbx_qp_read(qp, buf, sizeof buf, 0), 5);
		CHECK(memcmp(buf, "reply", 5) == 0);
		CHECK_EQ(ntbx_qp_read(qp, buf, sizeof buf, 0), 0);
	} else {
		CHECK_EQ(ntbx_qp_read(qp, buf, sizeof buf, 0), 3);
		CHECK_EQ(ntbx_qp_read(qp, buf, sizeof buf, 0), 0);
		CHECK(ntbx_qp_poll(qp) & NTBX_QP_HUP);
		/* the other direction still works */
		CHECK_EQ(ntbx_qp_write(qp, "reply", 5, 0), 5);
		CHECK_EQ(ntbx_qp_shutdown(qp), 0);
	}
	return 0;
}

/* ------------------------------------------------------------ loopback */

struct lb { struct ntbx_qp *qp; int rc; };

static void *lb_writer(void *p)
{
	struct lb *l = p;
	uint8_t buf[70000];
	for (uint32_t i = 0; i < 100; i++) {
		uint32_t sz = (i * 7919) % sizeof buf;
		for (uint32_t j = 0; j < sz; j++)
			buf[j] = (uint8_t)(i + j);
		if (ntbx_qp_send(l->qp, buf, sz, 0) != (ssize_t)sz)
			l->rc = 1;
	}
	ntbx_qp_shutdown(l->qp);
	return NULL;
}

static int loopback_main(void *arg)
{
	(void)arg;
	struct ntbx_qp *a, *b;
	struct ntbx_qp_addr ba;
	struct ntbx_qp_opts o = { 16384, 0 };
	struct ntbx_fabric *f = th_join(FABRIC, 0, 0);
	th_qp_loopback(f, &o, &a, NULL, &b, &ba);
	CHECK_EQ(ntbx_qp_hops(a), 0);
	struct ntbx_qp_addr bad = ba;
	bad.cookie ^= 0x100;
	struct ntbx_qp *c;
	struct ntbx_qp_addr ca;
	REQUIRE(ntbx_qp_create(f, 0, &o, &c, &ca) == 0);
	CHECK_EQ(ntbx_qp_connect(c, &bad), -EINVAL);
	ntbx_qp_close(c, 1);
	struct lb l = { a, 0 };
	pthread_t th;
	pthread_create(&th, NULL, lb_writer, &l);
	uint8_t buf[70000];
	int bad_bytes = 0, eof = 0;
	for (uint32_t i = 0; i < 100; i++) {
		uint32_t sz = (i * 7919) % sizeof buf;
		ssize_t r = ntbx_qp_recv(b, buf, sizeof buf, 0, &eof);
		CHECK_EQ(r, sz);
		for (uint32_t j = 0; j < sz && r == (ssize_t)sz; j++)
			if (buf[j] != (uint8_t)(i + j))
				bad_bytes++;
	}
	CHECK_EQ(ntbx_qp_recv(b, buf, sizeof buf, 0, &eof), 0);
	CHECK_EQ(eof, 1);
	CHECK_EQ(bad_bytes, 0);
	pthread_join(th, NULL);
	CHECK_EQ(l.rc, 0);
	/* attach a second handle to b, as another process would */
	struct ntbx_qp *b2;
	CHECK_EQ(ntbx_qp_attach(f, &ba, &b2), 0);
	CHECK_EQ(ntbx_qp_write(b2, "hi", 2, 0), 2);
	ntbx_qp_close(b2, 0);
	CHECK_EQ(ntbx_qp_read(a, buf, 10, 0), 2);
	ntbx_qp_close(a, 1);
	ntbx_qp_close(b, 1);
	ntbx_fabric_leave(f);
	return th_failures ? 1 : 0;
}

int main(void)
{
	th_init("qp_stream");
	th_fabric(FABRIC, 2, NTBX_TOPO_SWITCH, 0, 64ull << 20);
	run_pair("stream", stream_fn, 0, 0, 0);
	run_pair("stream small rings", stream_fn, 8192, 4096, 0);
	run_pair("messages", msg_fn, 0, 0, 0);
	run_pair("push", push_fn, 0, 0, 0);
	run_pair("push dma", push_fn, 0, 0, NTBX_QP_DMA);
	run_pair("nonblock", nonblock_fn, 4096, 4096, 0);
	run_pair("shutdown", shutdown_fn, 0, 0, 0);
	CHECK_EQ(th_wait(th_spawn(loopback_main, NULL)), 0);
	ntbx_fabric_destroy(FABRIC);
	return th_done("test_qp_stream");
}
