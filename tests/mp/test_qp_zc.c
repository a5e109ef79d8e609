/*
 * Zero-copy receive (ntbx_qp_recv_zc / ntbx_qp_recv_zc_done) between two
 * processes, two nodes of a shm switch fabric: every message's bytes are
 * checked (each has its own pattern, so a message handed out twice or one
 * skipped fails), one-record messages are handed out in the ring,
 * multi-record ones copied into their posted buffer (-ENOBUFS without one,
 * then ntbx_qp_recv takes them), pushed ones in the buffer; the posted
 * buffer each message used up is reported exactly once; -EBUSY before the
 * release, -EINVAL when another call consumed the held message, -EAGAIN,
 * and end of stream.  The ring is small and the stream many times its size,
 * so a release that did not give the ring space back would stall it.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "ntbx/dev.h"
#include "ntbx/qp.h"

#define FABRIC "qpzc"
#define RING   (64u << 10)            /* one record: up to 16320 bytes */
#define ONE_REC (RING / 4 - 64)
#define NBUF   4
#define BUFSZ  70000u
#define NB     600                    /* phase B messages */

static uint64_t xs(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void pattern(uint8_t *p, size_t n, uint64_t seed)
{
	uint64_t s = seed * 0x9e3779b97f4a7c15ull | 1;
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(xs(&s) >> 24);
}

/* Phase A (nothing posted) and phase B (NBUF buffers posted) sizes. */
static const size_t a_sizes[] = { 0, 1, 100, ONE_REC, ONE_REC + 1, 50 };
#define NA (sizeof a_sizes / sizeof a_sizes[0])
static size_t b_size(int i)
{
	static const size_t s[] = { 10, 1000, ONE_REC, ONE_REC + 1, 40000,
	                            65000, 64, 33000, 3 };
	return s[(size_t)i % (sizeof s / sizeof s[0])] + (size_t)(i % 7);
}

static int sender(struct ntbx_qp *qp, int rfd)
{
	uint8_t *buf = malloc(BUFSZ);
	for (size_t i = 0; i < NA; i++) {
		pattern(buf, a_sizes[i], 1000 + i);
		CHECK_EQ(ntbx_qp_send(qp, buf, a_sizes[i], 0), a_sizes[i]);
	}
	char go;
	REQUIRE(th_xfer(rfd, &go, 1, 0) == 0);   /* buffers are posted */
	for (int i = 0; i < NB; i++) {
		size_t sz = b_size(i);
		pattern(buf, sz, (uint64_t)i);
		CHECK_EQ(ntbx_qp_send(qp, buf, sz, 0), sz);
	}
	struct ntbx_qp_stats st;
	ntbx_qp_get_stats(qp, &st);
	printf("sender: %llu bytes, %llu pushed\n",
	       (unsigned long long)st.tx_bytes, (unsigned long long)st.pushed_bytes);
	CHECK(st.pushed_bytes > 0);
	CHECK_EQ(ntbx_qp_shutdown(qp), 0);
	free(buf);
	return 0;
}

static int receiver(struct ntbx_fabric *f, struct ntbx_qp *qp, int wfd)
{
	struct ntbx_dev *dev = ntbx_fabric_dev(f);
	const uint8_t *mem = ntbx_mem_base(dev);
	uint8_t *ref = malloc(BUFSZ), *tmp = malloc(BUFSZ);
	const void *m;
	uint64_t off;
	int eof = 0;
	CHECK_EQ(ntbx_qp_recv_zc_done(qp), 0);   /* nothing held: no-op */

	/* Phase A: nothing posted. */
	for (size_t i = 0; i < NA; i++) {
		size_t sz = a_sizes[i];
		pattern(ref, sz, 1000 + i);
		ssize_t n = ntbx_qp_recv_zc(qp, &m, &off, 0, &eof);
		if (sz > ONE_REC) {
			/* several records, no posted buffer: nothing consumed */
			CHECK_EQ(n, -ENOBUFS);
			CHECK_EQ(ntbx_qp_recv(qp, tmp, BUFSZ, 0, &eof), sz);
			CHECK(memcmp(tmp, ref, sz) == 0);
			continue;
		}
		CHECK_EQ(n, sz);
		CHECK_EQ(eof, 0);
		CHECK_EQ(off, NTBX_QP_NO_BUF);
		CHECK(m != NULL && memcmp(m, ref, sz) == 0);
		const void *m2;
		CHECK_EQ(ntbx_qp_recv_zc(qp, &m2, &off, 0, &eof), -EBUSY);
		if (i == NA - 1) {
			/* another call takes the held message: the release says so */
			CHECK_EQ(ntbx_qp_recv(qp, tmp, BUFSZ, 0, &eof), sz);
			CHECK(memcmp(tmp, ref, sz) == 0);
			CHECK_EQ(ntbx_qp_recv_zc_done(qp), -EINVAL);
		} else {
			CHECK_EQ(ntbx_qp_recv_zc_done(qp), 0);
		}
	}
	CHECK_EQ(ntbx_qp_recv_zc(qp, &m, &off, NTBX_QP_NONBLOCK, &eof), -EAGAIN);

	/* Phase B: NBUF buffers posted, each reported once and posted again. */
	int64_t bufs = ntbx_mem_alloc(dev, (size_t)NBUF * BUFSZ, 4096, "test-zc", 1);
	REQUIRE(bufs >= 0);
	int posted[NBUF];
	for (int b = 0; b < NBUF; b++) {
		CHECK_EQ(ntbx_qp_post_recv(qp, (uint64_t)bufs + (uint64_t)b * BUFSZ,
		                           BUFSZ), 0);
		posted[b] = 1;
	}
	REQUIRE(th_xfer(wfd, "g", 1, 1) == 0);
	int bad = 0, inring = 0, inbuf = 0, badbuf = 0;
	for (int i = 0; i < NB; i++) {
		size_t sz = b_size(i);
		pattern(ref, sz, (uint64_t)i);
		ssize_t n = ntbx_qp_recv_zc(qp, &m, &off, i % 3 ? 0 : NTBX_QP_NONBLOCK,
		                            &eof);
		if (n == -EAGAIN) {
			i--;
			continue;
		}
		CHECK_EQ(n, sz);
		if (n != (ssize_t)sz) {
			fprintf(stderr, "message %d: %zd\n", i, n);
			return 2;
		}
		if (memcmp(m, ref, sz))
			bad++;
		/* every message used up the buffer posted for it */
		int b = -1;
		if (off != NTBX_QP_NO_BUF && off >= (uint64_t)bufs &&
		    (off - (uint64_t)bufs) % BUFSZ == 0)
			b = (int)((off - (uint64_t)bufs) / BUFSZ);
		if (b < 0 || b >= NBUF || !posted[b]) {
			badbuf++;
			continue;
		}
		posted[b] = 0;
		const uint8_t *pm = m;
		if (pm == mem + off)
			inbuf++;
		else
			inring++;
		if (i % 25 == 1) {
			/* held: the sender, blocked on a full ring meanwhile,
			 * must not reuse the bytes we were shown */
			usleep(20000);
			if (memcmp(m, ref, sz))
				bad++;
		}
		CHECK_EQ(ntbx_qp_recv_zc_done(qp), 0);
		CHECK_EQ(ntbx_qp_post_recv(qp, off, BUFSZ), 0);
		posted[b] = 1;
	}
	printf("receiver: %d messages in the ring, %d in posted buffers\n",
	       inring, inbuf);
	CHECK_EQ(bad, 0);
	CHECK_EQ(badbuf, 0);
	CHECK(inring > NB / 3);
	CHECK(inbuf > NB / 10);
	CHECK_EQ(ntbx_qp_recv_zc(qp, &m, &off, 0, &eof), 0);
	CHECK_EQ(eof, 1);
	CHECK_EQ(ntbx_qp_recv_zc_done(qp), 0);
	struct ntbx_qp_stats st;
	ntbx_qp_get_stats(qp, &st);
	CHECK_EQ(st.rx_records, NA + NB);
	free(ref);
	free(tmp);
	return 0;
}

static int node_main(void *arg)
{
	struct th_pair *n = arg;
	struct ntbx_qp_opts o = { RING, 0 };
	struct ntbx_fabric *f = th_join(FABRIC, n->node, 20000);
	struct ntbx_qp *qp = th_qp_to(f, n->peer, &o, n->wfd, n->rfd, NULL, NULL);
	int rc = n->node == 0 ? sender(qp, n->rfd) : receiver(f, qp, n->wfd);
	fflush(stdout);
	ntbx_qp_close(qp, 1);
	ntbx_fabric_leave(f);
	if (th_failures)
		fprintf(stderr, "node %d: %d checks failed\n", n->node, th_failures);
	return rc ? rc : th_failures ? 1 : 0;
}

int main(void)
{
	th_init("qp_zc");
	th_fabric(FABRIC, 2, NTBX_TOPO_SWITCH, 0, 64ull << 20);
	th_run_pair(node_main, NULL);
	ntbx_fabric_destroy(FABRIC);
	return th_done("test_qp_zc");
}
