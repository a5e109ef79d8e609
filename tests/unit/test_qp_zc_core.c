/*
 * The receive core's zero-copy calls (qp_rx_zc, qp_rx_zc_done) on plain
 * memory: a one-record message is handed out in the ring and consumed only
 * by the release (lines zeroed, position advanced); PADs are skipped;
 * multi-record messages ask for a copy; corrupt records (length beyond the
 * ring, length and total disagreeing, a record past the ring's end) fail
 * with -EPROTO; random garbage in the ring and the reader state never
 * yields a pointer outside the ring or node memory.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "qp/qp_int.h"

#define RS 4096u
#define MEM (1u << 16)

static uint8_t *ring, *mem;
static struct qp_rxs st;
static struct qp_rx rx;
static uint64_t wpos;

static void reset(void)
{
	memset(ring, 0, RS);
	memset(&st, 0, sizeof st);
	wpos = 0;
	rx = (struct qp_rx){ .ring = ring, .size = RS, .s = &st, .mem = mem,
	                     .mem_size = MEM };
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 8));
}

static void t_inplace(void)
{
	reset();
	uint8_t a[900], ref[900];
	const uint8_t *p;
	uint32_t len;
	uint64_t off;
	struct qp_rec_hdr h;
	CHECK_EQ(qp_rx_zc(&rx, &p, &len, &off, &h), -EAGAIN);
	/* many laps: each message in place, consumed only by the release */
	for (unsigned i = 0; i < 40; i++) {
		uint32_t n = (i * 337) % sizeof a;
		fill(a, n, i);
		wpos = qp_tx_put(ring, RS, wpos, QP_T_DATA, 0, n, a, n, NULL);
		uint64_t at = st.rpos;
		CHECK_EQ(qp_rx_zc(&rx, &p, &len, &off, &h), QP_RX_ZC_HELD);
		CHECK_EQ(len, n);
		CHECK_EQ(off, UINT64_MAX);
		CHECK(p >= ring && p + len <= ring + RS);
		fill(ref, n, i);
		CHECK(memcmp(p, ref, n) == 0);
		/* still at the head until released */
		CHECK(st.rpos != at || qp_rx_status(&rx) == 1);
		uint64_t before = st.rpos;
		CHECK_EQ(qp_rx_zc_done(&rx, before, &h), 0);
		CHECK_EQ(st.rpos, wpos);
		CHECK_EQ(qp_rx_zc_done(&rx, before, &h), -EINVAL);   /* once */
		/* the consumed record's first line is zeroed */
		CHECK_EQ(*(uint32_t *)(ring + (before & (RS - 1))), 0);
	}
	CHECK_EQ(qp_rx_zc(&rx, &p, &len, &off, &h), -EAGAIN);
}

static void t_copy_and_posted(void)
{
	reset();
	uint8_t a[3000];
	fill(a, sizeof a, 9);
	struct qp_adv adv;
	CHECK_EQ(qp_rx_post(&rx, 4096, 4096, &adv), 0);
	CHECK_EQ(qp_rx_post(&rx, 8192, 4096, &adv), 0);
	/* message 0: two records (max payload 960) */
	uint32_t max = qp_max_payload(RS), done = 0, len0 = 1500;
	while (done < len0) {
		uint32_t c = len0 - done > max ? max : len0 - done;
		wpos = qp_tx_put(ring, RS, wpos, QP_T_DATA,
		                 done + c < len0 ? QP_F_MORE : 0,
		                 done ? done : len0, a + done, c, NULL);
		done += c;
	}
	const uint8_t *p;
	uint32_t len;
	uint64_t off;
	struct qp_rec_hdr h;
	CHECK_EQ(qp_rx_zc(&rx, &p, &len, &off, &h), QP_RX_ZC_COPY);
	CHECK_EQ(st.rpos, 0);   /* nothing consumed */
	size_t got = 0;
	CHECK_EQ(qp_rx_recv(&rx, NULL, 0, &got, 1, &off), 1);
	CHECK_EQ(got, len0);
	CHECK_EQ(off, 4096);
	CHECK(memcmp(mem + 4096, a, len0) == 0);
	/* message 1: one record, in the ring; it used up buffer 8192 */
	wpos = qp_tx_put(ring, RS, wpos, QP_T_DATA, 0, 500, a, 500, NULL);
	CHECK_EQ(qp_rx_zc(&rx, &p, &len, &off, &h), QP_RX_ZC_HELD);
	CHECK_EQ(len, 500);
	CHECK_EQ(off, 8192);
	CHECK(p >= ring && p < ring + RS && memcmp(p, a, 500) == 0);
	CHECK_EQ(qp_rx_zc_done(&rx, st.rpos, &h), 0);
	/* message 2: pushed into a posted buffer */
	CHECK_EQ(qp_rx_post(&rx, 12288, 4096, &adv), 0);
	memcpy(mem + 12288, a, 2000);
	wpos = qp_tx_put(ring, RS, wpos, QP_T_PUSH, 0, adv.seq, NULL, 2000, NULL);
	CHECK_EQ(qp_rx_zc(&rx, &p, &len, &off, &h), QP_RX_ZC_PUSHED);
	CHECK_EQ(len, 2000);
	CHECK_EQ(off, 12288);
	CHECK(p == mem + 12288);
	CHECK_EQ(st.rpos, wpos);   /* the descriptor is consumed at once */
	/* a push bigger than its buffer is corrupt */
	CHECK_EQ(qp_rx_post(&rx, 16384, 1024, &adv), 0);
	wpos = qp_tx_put(ring, RS, wpos, QP_T_PUSH, 0, adv.seq, NULL, 2000, NULL);
	CHECK_EQ(qp_rx_zc(&rx, &p, &len, &off, &h), -EPROTO);
}

static void t_pad_eof(void)
{
	reset();
	uint8_t a[900];
	fill(a, sizeof a, 3);
	const uint8_t *p;
	uint32_t len;
	uint64_t off;
	struct qp_rec_hdr h;
	/* fill up to near the end so the next record needs a PAD */
	for (int i = 0; i < 4; i++) {
		wpos = qp_tx_put(ring, RS, wpos, QP_T_DATA, 0, 900, a, 900, NULL);
		CHECK_EQ(qp_rx_zc(&rx, &p, &len, &off, &h), QP_RX_ZC_HELD);
		CHECK_EQ(qp_rx_zc_done(&rx, st.rpos, &h), 0);
	}
	wpos = qp_tx_put(ring, RS, wpos, QP_T_DATA, 0, 900, a, 900, NULL);
	CHECK_EQ(qp_rx_zc(&rx, &p, &len, &off, &h), QP_RX_ZC_HELD);
	CHECK(p == ring + QP_REC_HDR);   /* after the PAD: at the ring's start */
	CHECK_EQ(qp_rx_zc_done(&rx, st.rpos, &h), 0);
	wpos = qp_tx_put(ring, RS, wpos, QP_T_EOF, 0, 0, NULL, 0, NULL);
	CHECK_EQ(qp_rx_zc(&rx, &p, &len, &off, &h), 0);
}

static void t_corrupt(void)
{
	const uint8_t *p;
	uint32_t len;
	uint64_t off;
	struct qp_rec_hdr h;
	uint8_t a[64] = { 1 };
	/* length beyond the largest payload */
	reset();
	qp_rec_write(ring, 0, 0, QP_T_DATA, 0, 5000, a, 0, -1);
	((struct qp_rec_hdr *)ring)->len = 5000;
	CHECK_EQ(qp_rx_zc(&rx, &p, &len, &off, &h), -EPROTO);
	/* total disagrees with a single record's length */
	reset();
	qp_rec_write(ring, 0, 0, QP_T_DATA, 0, 200, a, 64, -1);
	CHECK_EQ(qp_rx_zc(&rx, &p, &len, &off, &h), -EPROTO);
	/* a record that would run past the ring's end */
	reset();
	st.rpos = RS - 128;
	qp_rec_write(ring, RS - 128, RS - 128, QP_T_DATA, 0, 900, a, 0, -1);
	((struct qp_rec_hdr *)(ring + RS - 128))->len = 900;
	CHECK_EQ(qp_rx_zc(&rx, &p, &len, &off, &h), -EPROTO);
	/* a message partly read by a stream read */
	reset();
	uint8_t b[100];
	fill(b, sizeof b, 5);
	wpos = qp_tx_put(ring, RS, wpos, QP_T_DATA, 0, 100, b, 100, NULL);
	uint8_t t[10];
	CHECK_EQ(qp_rx_read(&rx, t, 10), 10);
	CHECK_EQ(qp_rx_zc(&rx, &p, &len, &off, &h), -EINVAL);
}

static uint64_t xs(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Garbage everywhere: any pointer handed out lies inside ring or memory. */
static void t_garbage(void)
{
	uint64_t s = 0x5eed;
	int outside = 0;
	for (int it = 0; it < 200000; it++) {
		reset();
		uint8_t *raw = (uint8_t *)&st;
		for (size_t i = 0; i < sizeof st; i++)
			raw[i] = (uint8_t)xs(&s);
		if (it & 1)
			st.rpos &= ~(uint64_t)63 & (RS - 1);
		struct qp_rec_hdr *g = (struct qp_rec_hdr *)(ring + (st.rpos & (RS - 1)
		                                                     & ~63u));
		g->seq = qp_seq_of(st.rpos);
		g->len = (uint32_t)(xs(&s) % 2000);
		g->type = (uint16_t)(xs(&s) % 8);
		g->flags = (uint16_t)(xs(&s) % 3);
		g->aux = it & 2 ? g->len : (uint32_t)xs(&s);
		const uint8_t *p = NULL;
		uint32_t len = 0;
		uint64_t off;
		struct qp_rec_hdr h;
		int rc = qp_rx_zc(&rx, &p, &len, &off, &h);
		if (rc == QP_RX_ZC_HELD || rc == QP_RX_ZC_PUSHED) {
			int in_ring = p >= ring && p + len <= ring + RS;
			int in_mem = p >= mem && p + len <= mem + MEM;
			if (!in_ring && !in_mem)
				outside++;
			if (rc == QP_RX_ZC_HELD)
				qp_rx_zc_done(&rx, st.rpos, &h);
		}
	}
	CHECK_EQ(outside, 0);
}

int main(void)
{
	ring = aligned_alloc(64, RS);
	mem = aligned_alloc(64, MEM);
	memset(mem, 0, MEM);
	t_inplace();
	t_copy_and_posted();
	t_pad_eof();
	t_corrupt();
	t_garbage();
	free(ring);
	free(mem);
	return th_done("test_qp_zc_core");
}
