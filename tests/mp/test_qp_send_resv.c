/*
 * Zero-copy send (ntbx_qp_send_reserve / _commit / _abort) between two
 * processes, two nodes of a shm switch fabric: the message is written in
 * place, into the next record of the peer's ring or into the buffer the
 * peer posted, and every byte is checked by a receiver that uses the
 * ordinary calls.  Commits shorter than the reservation and of 0 bytes,
 * also after writing bytes beyond what is sent that look exactly like the
 * headers of the records that follow;
 * aborts after writing bytes that look exactly like the headers of the
 * records that follow (a reader that found them would return a bogus
 * message: the abort must clear them); -EBUSY, -EMSGSIZE, -EINVAL; a
 * reservation whose peer closed before the commit sends nothing.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "ntbx/dev.h"
#include "ntbx/qp.h"
#include "qp/qp_int.h"

#define FABRIC "qpresv"
#define RING   (64u << 10)
#define ONE_REC (RING / 4 - 64)
#define NBUF   4
#define BUFSZ  70000u
#define NA     300     /* ring phase */
#define NB     300     /* push phase */

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

static size_t a_len(int i) { return (size_t)(i * 7919) % (ONE_REC + 1); }
static size_t b_len(int i) { return i % 10 == 3 ? 0 : (size_t)(i * 104729) % BUFSZ; }

/* Make the written bytes of a ring reservation at write index @wpos look
 * like valid one-line DATA records at every line that follows. */
static void forge(uint8_t *dst, size_t n, uint64_t wpos)
{
	uint8_t line[64];
	for (size_t at = 64 - QP_REC_HDR; at + 16 <= n; at += 64) {
		struct qp_rec_hdr h = { qp_seq_of(wpos + QP_REC_HDR + at), 8,
		                        QP_T_DATA, 0, 8 };
		memcpy(line, &h, sizeof h);
		memcpy(dst + at, line, 16);   /* write only: never read back */
	}
}

static int sender(struct ntbx_qp *qp, int rfd, int wfd)
{
	uint8_t *src = malloc(BUFSZ);
	void *dst;
	uint64_t wpos = 0;   /* mirror of the ring's write index (ring phase) */
	CHECK_EQ(ntbx_qp_send_commit(qp, 1), -EINVAL);   /* nothing reserved */
	CHECK_EQ(ntbx_qp_send_reserve(qp, &dst, ONE_REC + 1, 0), -EMSGSIZE);
	for (int i = 0; i < NA; i++) {
		size_t len = a_len(i);
		size_t max = i % 3 ? ONE_REC : len;
		REQUIRE(ntbx_qp_send_reserve(qp, &dst, max, 0) == (ssize_t)max);
		CHECK_EQ(ntbx_qp_send_reserve(qp, &dst, max, 0), -EBUSY);
		uint64_t pos = wpos & (RING - 1);
		if (pos + qp_rec_bytes(max) > RING)
			wpos += RING - pos;
		if (i % 10 == 5) {
			/* a packet we decide not to send, after filling it */
			forge(dst, max, wpos);
			ntbx_qp_send_abort(qp, max);
			REQUIRE(ntbx_qp_send_reserve(qp, &dst, max, 0) == (ssize_t)max);
		}
		if (i % 10 == 8)
			/* bytes written beyond what is sent: not sent, and the
			 * reader must not take them for the records after it */
			forge(dst, max, wpos);
		pattern(src, len, (uint64_t)i);
		memcpy(dst, src, len);
		CHECK_EQ(ntbx_qp_send_commit(qp, len), len);
		wpos += qp_rec_bytes(len);
		if (i % 10 == 5 || i % 10 == 8)
			usleep(20000);   /* the reader waits at the forged line */
	}
	CHECK_EQ(ntbx_qp_send_reserve(qp, &dst, 100, 0), 100);
	CHECK_EQ(ntbx_qp_send_commit(qp, 101), -EINVAL);   /* given up */
	char go;
	REQUIRE(th_xfer(rfd, &go, 1, 0) == 0);   /* buffers are posted */
	int direct = 0;
	for (int i = 0; i < NB; i++) {
		size_t len = b_len(i);
		ssize_t r = ntbx_qp_send_reserve(qp, &dst, BUFSZ, 0);
		if (r == -EMSGSIZE) {
			/* no posted buffer free and more than a ring record */
			pattern(src, len, 1000 + (uint64_t)i);
			CHECK_EQ(ntbx_qp_send(qp, src, len, 0), len);
			continue;
		}
		REQUIRE(r == (ssize_t)BUFSZ);
		direct++;
		if (i % 10 == 7) {
			ntbx_qp_send_abort(qp, 0);
			REQUIRE(ntbx_qp_send_reserve(qp, &dst, BUFSZ, 0) ==
			        (ssize_t)BUFSZ);
		}
		pattern(src, len, 1000 + (uint64_t)i);
		memcpy(dst, src, len);
		CHECK_EQ(ntbx_qp_send_commit(qp, len), len);
	}
	struct ntbx_qp_stats st;
	ntbx_qp_get_stats(qp, &st);
	printf("sender: %llu bytes, %llu pushed, %d of %d reserved in buffers\n",
	       (unsigned long long)st.tx_bytes, (unsigned long long)st.pushed_bytes,
	       direct, NB);
	CHECK(direct > 0);
	CHECK(st.pushed_bytes > 0);
	/* the peer closes while we hold a reservation: nothing is sent */
	REQUIRE(ntbx_qp_send_reserve(qp, &dst, 1000, 0) == 1000);
	REQUIRE(th_xfer(wfd, "r", 1, 1) == 0);
	REQUIRE(th_xfer(rfd, &go, 1, 0) == 0);   /* it closed */
	memset(dst, 1, 1000);
	ssize_t c = ntbx_qp_send_commit(qp, 1000);
	CHECK(c == -EPIPE || c == -ECONNRESET);
	CHECK(ntbx_qp_send_reserve(qp, &dst, 10, 0) < 0);
	free(src);
	return 0;
}

static int receiver(struct ntbx_fabric *f, struct ntbx_qp *qp, int wfd,
                    int rfd)
{
	struct ntbx_dev *dev = ntbx_fabric_dev(f);
	uint8_t *ref = malloc(BUFSZ), *buf = malloc(BUFSZ);
	int eof = 0, bad = 0;
	for (int i = 0; i < NA; i++) {
		size_t len = a_len(i);
		pattern(ref, len, (uint64_t)i);
		ssize_t n = ntbx_qp_recv(qp, buf, BUFSZ, 0, &eof);
		CHECK_EQ(n, len);
		if (n != (ssize_t)len) {
			fprintf(stderr, "ring message %d: %zd, want %zu\n", i, n, len);
			return 2;
		}
		if (memcmp(buf, ref, len))
			bad++;
	}
	int64_t bufs = ntbx_mem_alloc(dev, (size_t)NBUF * BUFSZ, 4096, "test-resv", 1);
	REQUIRE(bufs >= 0);
	for (int b = 0; b < NBUF; b++)
		CHECK_EQ(ntbx_qp_post_recv(qp, (uint64_t)bufs + (uint64_t)b * BUFSZ,
		                           BUFSZ), 0);
	REQUIRE(th_xfer(wfd, "g", 1, 1) == 0);
	for (int i = 0; i < NB; i++) {
		size_t len = b_len(i);
		pattern(ref, len, 1000 + (uint64_t)i);
		const void *m;
		uint64_t off;
		ssize_t n = ntbx_qp_recv_zc(qp, &m, &off, 0, &eof);
		CHECK_EQ(n, len);
		if (n != (ssize_t)len) {
			fprintf(stderr, "push message %d: %zd, want %zu\n", i, n, len);
			return 3;
		}
		if (memcmp(m, ref, len))
			bad++;
		CHECK_EQ(ntbx_qp_recv_zc_done(qp), 0);
		if (off != NTBX_QP_NO_BUF)
			CHECK_EQ(ntbx_qp_post_recv(qp, off, BUFSZ), 0);
	}
	CHECK_EQ(bad, 0);
	char go;
	REQUIRE(th_xfer(rfd, &go, 1, 0) == 0);
	ntbx_qp_close(qp, 1);
	REQUIRE(th_xfer(wfd, "c", 1, 1) == 0);
	free(ref);
	free(buf);
	return 0;
}

static int node_main(void *arg)
{
	struct th_pair *n = arg;
	struct ntbx_qp_opts o = { RING, 0 };
	struct ntbx_fabric *f = th_join(FABRIC, n->node, 20000);
	struct ntbx_qp *qp = th_qp_to(f, n->peer, &o, n->wfd, n->rfd, NULL, NULL);
	int rc = n->node == 0 ? sender(qp, n->rfd, n->wfd) : receiver(f, qp, n->wfd, n->rfd);
	fflush(stdout);
	if (n->node == 0)
		ntbx_qp_close(qp, 1);
	ntbx_fabric_leave(f);
	if (th_failures)
		fprintf(stderr, "node %d: %d checks failed\n", n->node, th_failures);
	return rc ? rc : th_failures ? 1 : 0;
}

int main(void)
{
	th_init("qp_send_resv");
	th_fabric(FABRIC, 2, NTBX_TOPO_SWITCH, 0, 64ull << 20);
	th_run_pair(node_main, NULL);
	ntbx_fabric_destroy(FABRIC);
	return th_done("test_qp_send_resv");
}
