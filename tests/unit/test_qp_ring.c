/* Queue-pair records and the receive core, on plain memory (no device). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "qp/qp_int.h"

#define RS_BIG (256u << 10)    /* big enough for large records */
static uint32_t RS = 4096;     /* the ring's size in this round */

static uint8_t *ring;
static uint8_t *mem;           /* "node memory" for posted buffers */
static struct qp_rxs st;
static struct qp_rx rx;
static uint64_t wpos;
static int wz;                 /* the writer zeroes the lines of large
                                * records (qp_int.h, the record header) */
static struct qp_zmap *zm;     /* its map (wz), else NULL */

static void reset(void)
{
	memset(ring, 0, RS);
	memset(&st, 0, sizeof st);
	wpos = 0;
	free(zm);
	zm = wz ? qp_zmap_new(RS) : NULL;
	rx = (struct qp_rx){ .ring = ring, .size = RS, .s = &st, .mem = mem,
	                     .mem_size = 1 << 20, .wz = wz };
}

static uint64_t free_bytes(void)
{
	return RS - (wpos - st.rpos);
}

/* Send one message the way qp.c does (records of at most max payload). */
static int send_msg(const uint8_t *p, uint32_t len)
{
	uint32_t max = qp_max_payload(RS), done = 0;
	do {
		uint32_t c = len - done > max ? max : len - done;
		if (qp_zmap_need(zm, RS, wpos, c) > free_bytes())
			return -EAGAIN;
		wpos = qp_tx_put(ring, RS, wpos, QP_T_DATA,
		                 done + c < len ? QP_F_MORE : 0,
		                 done ? done : len, p + done, c, zm);
		done += c;
	} while (done < len);
	return 0;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 8));
}

static void t_basic(void)
{
	reset();
	uint8_t a[100], b[200];
	fill(a, sizeof a, 1);
	CHECK_EQ(qp_rx_read(&rx, b, sizeof b), -EAGAIN);
	CHECK_EQ(send_msg(a, 100), 0);
	CHECK_EQ(qp_rx_status(&rx), 1);
	CHECK_EQ(qp_rx_read(&rx, b, 30), 30);
	CHECK_EQ(qp_rx_read(&rx, b + 30, 200), 70);
	CHECK(memcmp(a, b, 100) == 0);
	CHECK_EQ(st.rpos, 128);
	/* nothing stale looks like a header: the reader zeroed the lines of
	 * the small record it consumed */
	CHECK_EQ(*(uint32_t *)ring, 0);
	CHECK_EQ(*(uint32_t *)(ring + 64), 0);
	CHECK_EQ(qp_rx_read(&rx, b, 10), -EAGAIN);
}

/* A large record: its reader leaves its lines to a writer that zeroes
 * (RS_BIG). */
static void t_large(void)
{
	reset();
	uint32_t n = QP_RZERO_MAX + 1000;
	uint8_t *a = malloc(n), *b = malloc(n);
	fill(a, n, 2);
	CHECK_EQ(send_msg(a, n), 0);
	CHECK_EQ(qp_rx_read(&rx, b, n), n);
	CHECK(memcmp(a, b, n) == 0);
	CHECK_EQ(*(uint32_t *)ring, wz ? qp_seq_of(0) : 0);
	CHECK_EQ(*(uint32_t *)(ring + 128), wz ? *(uint32_t *)(a + 112) : 0);
	/* a lap of small records over it: where each header goes, the writer
	 * zeroed the stale payload first */
	for (uint32_t i = 0; i < RS / 64 + 10; i++) {
		fill(a, 40, i);
		CHECK_EQ(send_msg(a, 40), 0);
		CHECK_EQ(qp_rx_read(&rx, b, n), 40);
		CHECK(memcmp(a, b, 40) == 0);
	}
	CHECK_EQ(qp_rx_read(&rx, b, 10), -EAGAIN);
	free(a);
	free(b);
}

/*
 * Records of every size, many laps, and two writers taking turns (the
 * handles of two processes of a node), each with its own map: a map that
 * believed a line clean which the other writer left dirty would let the
 * reader find stale payload (0xa5 never makes a valid seq) where a header
 * goes, and fail.
 */
static void t_mixed_writers(void)
{
	reset();
	struct qp_zmap *other = wz ? qp_zmap_new(RS) : NULL, *mine = zm;
	uint32_t max = qp_max_payload(RS);
	uint8_t *a = malloc(max), *b = malloc(max);
	uint64_t s = 88172645463325252ull;
	int fails = 0;
	for (int i = 0; i < 4000 && !fails; i++) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		/* small ones more often, large ones by the hundred */
		uint32_t n = 1 + (uint32_t)(s % (i % 3 ? 2 * QP_RZERO_MAX : max));
		if (i % 50 == 0)
			zm = zm == mine ? other : mine;   /* the other writer's turn */
		memset(a, 0xa5, n);
		a[0] = (uint8_t)i;
		wpos = qp_tx_put(ring, RS, wpos, QP_T_DATA, 0, n, a, n, zm);
		ssize_t k = qp_rx_read(&rx, b, max);
		fails += k != (ssize_t)n || memcmp(a, b, n);
	}
	CHECK_EQ(fails, 0);
	CHECK(wpos > 20 * (uint64_t)RS);
	for (struct qp_zmap *m = mine; m; m = m == mine ? other : NULL) {
		uint64_t set = 0;   /* the count the map keeps is its bits' */
		for (uint32_t w = 0; w < RS / QP_LINE / 64; w++)
			set += (uint64_t)__builtin_popcountll(m->bits[w]);
		CHECK_EQ(m->nset, set);
	}
	zm = mine;
	free(other);
	free(a);
	free(b);
}

static void t_wrap_and_stream(void)
{
	reset();
	uint8_t *src = malloc(1 << 16), *dst = malloc(1 << 16);
	fill(src, 1 << 16, 3);
	size_t sent = 0, got = 0;
	unsigned r = 12345;
	while (got < (1 << 16)) {
		r = r * 1103515245 + 12345;
		uint32_t n = (r >> 8) % 700;
		if (sent < (1 << 16)) {
			if (n > (1 << 16) - sent)
				n = (uint32_t)((1 << 16) - sent);
			if (send_msg(src + sent, n) == 0)
				sent += n;
		}
		r = r * 1103515245 + 12345;
		size_t m = (r >> 8) % 900 + 1;
		if (m > (1 << 16) - got)
			m = (1 << 16) - got;
		ssize_t k = qp_rx_read(&rx, dst + got, m);
		if (k > 0)
			got += (size_t)k;
		else
			CHECK_EQ(k, -EAGAIN);
		if (k < 0 && k != -EAGAIN)
			break;
	}
	CHECK(memcmp(src, dst, 1 << 16) == 0);
	CHECK(wpos > RS * 10);   /* wrapped many times, with PADs */
	free(src);
	free(dst);
}

static void t_messages(void)
{
	reset();
	uint8_t a[3000], b[3000];
	size_t got = 0;
	uint64_t off;
	fill(a, sizeof a, 5);
	/* 0-length message */
	CHECK_EQ(send_msg(a, 0), 0);
	CHECK_EQ(qp_rx_recv(&rx, b, 10, &got, 0, &off), 1);
	CHECK_EQ(got, 0);
	/* multi-record message (max payload 960 in a 4 KiB ring) */
	CHECK_EQ(send_msg(a, 2500), 0);
	int eof;
	CHECK_EQ(qp_rx_msg_len(&rx, &eof), 2500);
	got = 0;
	CHECK_EQ(qp_rx_recv(&rx, b, 2000, &got, 0, &off), -EMSGSIZE);
	CHECK_EQ(got, 0);
	CHECK_EQ(qp_rx_msg_len(&rx, &eof), 2500);   /* still queued */
	CHECK_EQ(qp_rx_recv(&rx, b, sizeof b, &got, 0, &off), 1);
	CHECK_EQ(got, 2500);
	CHECK(memcmp(a, b, 2500) == 0);
	/* a message larger than the ring, received while it is written */
	uint8_t *big = malloc(10000), *bb = malloc(10000);
	fill(big, 10000, 9);
	uint32_t max = qp_max_payload(RS), done = 0;
	got = 0;
	int rc = -EAGAIN;
	while (done < 10000 || rc == -EAGAIN) {
		if (done < 10000) {
			uint32_t c = 10000 - done > max ? max : 10000 - done;
			if (qp_zmap_need(zm, RS, wpos, c) <= free_bytes()) {
				wpos = qp_tx_put(ring, RS, wpos, QP_T_DATA,
				                 done + c < 10000 ? QP_F_MORE : 0,
				                 done ? done : 10000, big + done, c, zm);
				done += c;
			}
		}
		rc = qp_rx_recv(&rx, bb, 10000, &got, 0, &off);
		if (rc != -EAGAIN)
			break;
	}
	CHECK_EQ(rc, 1);
	CHECK_EQ(got, 10000);
	CHECK(memcmp(big, bb, 10000) == 0);
	free(big);
	free(bb);
	/* EOF */
	wpos = qp_tx_put(ring, RS, wpos, QP_T_EOF, 0, 0, NULL, 0, zm);
	got = 0;
	CHECK_EQ(qp_rx_recv(&rx, b, 10, &got, 0, &off), 0);
	CHECK_EQ(qp_rx_read(&rx, b, 10), 0);
	CHECK_EQ(qp_rx_status(&rx), 0);
}

static void t_posted(void)
{
	reset();
	struct qp_adv adv;
	uint8_t a[2000], b[2000];
	size_t got;
	uint64_t off;
	fill(a, sizeof a, 11);
	CHECK_EQ(qp_rx_post(&rx, 1 << 20, 10, &adv), -EINVAL);
	CHECK_EQ(qp_rx_post(&rx, (1 << 20) - 5, 10, &adv), -EINVAL);
	CHECK_EQ(qp_rx_post(&rx, 4096, 0, &adv), -EINVAL);
	CHECK_EQ(qp_rx_post(&rx, 4096, 2000, &adv), 0);
	CHECK_EQ(adv.seq, 1);
	CHECK_EQ(adv.msg, 0);
	CHECK_EQ(qp_rx_post(&rx, 8192, 2000, &adv), 0);
	CHECK_EQ(adv.msg, 1);
	/* message 0 pushed into buffer 1 */
	memcpy(mem + 4096, a, 1500);
	wpos = qp_tx_put(ring, RS, wpos, QP_T_PUSH, 0, 1, NULL, 1500, zm);
	/* message 1 through the ring: copied into buffer 2 */
	CHECK_EQ(send_msg(a + 100, 700), 0);
	got = 0;
	CHECK_EQ(qp_rx_recv(&rx, NULL, 0, &got, 1, &off), 1);
	CHECK_EQ(off, 4096);
	CHECK_EQ(got, 1500);
	got = 0;
	CHECK_EQ(qp_rx_recv(&rx, NULL, 0, &got, 1, &off), 1);
	CHECK_EQ(off, 8192);
	CHECK_EQ(got, 700);
	CHECK(memcmp(mem + 8192, a + 100, 700) == 0);
	/* no buffer left */
	CHECK_EQ(send_msg(a, 10), 0);
	got = 0;
	CHECK_EQ(qp_rx_recv(&rx, NULL, 0, &got, 1, &off), -ENOBUFS);
	CHECK_EQ(qp_rx_read(&rx, b, 100), 10);
	/* a pushed message read with a stream read */
	CHECK_EQ(qp_rx_post(&rx, 4096, 2000, &adv), 0);
	CHECK_EQ(adv.msg, 3);
	wpos = qp_tx_put(ring, RS, wpos, QP_T_PUSH, 0, adv.seq, NULL, 1500, zm);
	CHECK_EQ(qp_rx_read(&rx, b, 1000), 1000);
	CHECK_EQ(qp_rx_read(&rx, b + 1000, 1000), 500);
	CHECK(memcmp(a, b, 1500) == 0);
	/* too many posted */
	for (int i = 0; i < 8; i++)
		CHECK_EQ(qp_rx_post(&rx, 4096 * (i + 1), 100, &adv), 0);
	CHECK_EQ(qp_rx_post(&rx, 4096, 100, &adv), -ENOBUFS);
}

static void t_corrupt(void)
{
	uint8_t b[100];
	struct qp_rec_hdr *h = (struct qp_rec_hdr *)ring;
	/* wrong seq */
	reset();
	send_msg(b, 10);
	h->seq = 7;
	CHECK_EQ(qp_rx_read(&rx, b, 10), -EPROTO);
	/* len over the record bound */
	reset();
	send_msg(b, 10);
	h->len = RS;
	CHECK_EQ(qp_rx_read(&rx, b, 10), -EPROTO);
	/* unknown type */
	reset();
	send_msg(b, 10);
	h->type = 99;
	CHECK_EQ(qp_rx_status(&rx), -EPROTO);
	/* MORE on a complete message */
	reset();
	send_msg(b, 10);
	h->flags = QP_F_MORE;
	CHECK_EQ(qp_rx_status(&rx), -EPROTO);
	/* PUSH without a posted buffer */
	reset();
	wpos = qp_tx_put(ring, RS, wpos, QP_T_PUSH, 0, 1, NULL, 100, zm);
	CHECK_EQ(qp_rx_read(&rx, b, 10), -EPROTO);
	/* PUSH longer than the buffer, or for another advert */
	reset();
	struct qp_adv adv;
	qp_rx_post(&rx, 0, 50, &adv);
	wpos = qp_tx_put(ring, RS, wpos, QP_T_PUSH, 0, 1, NULL, 100, zm);
	CHECK_EQ(qp_rx_read(&rx, b, 10), -EPROTO);
	reset();
	qp_rx_post(&rx, 0, 500, &adv);
	wpos = qp_tx_put(ring, RS, wpos, QP_T_PUSH, 0, 2, NULL, 100, zm);
	CHECK_EQ(qp_rx_read(&rx, b, 10), -EPROTO);
	/* continuation with a wrong offset */
	reset();
	uint8_t big[2000] = { 0 };
	send_msg(big, 2000);
	struct qp_rec_hdr *h2 = (struct qp_rec_hdr *)(ring + qp_rec_bytes(960));
	h2->aux = 5;
	size_t got = 0;
	uint64_t off;
	CHECK_EQ(qp_rx_recv(&rx, big, 2000, &got, 0, &off), -EPROTO);
	/* a record that would run past the ring's end */
	reset();
	st.rpos = wpos = RS - 128;
	qp_rec_write(ring, RS - 128, wpos, QP_T_DATA, 0, 500, NULL, 500, -1);
	CHECK_EQ(qp_rx_status(&rx), -EPROTO);
	/* a corrupt reader state does not make us read outside */
	reset();
	st.rpos = 7;
	CHECK_EQ(qp_rx_status(&rx), -EPROTO);
}

int main(void)
{
	ring = aligned_alloc(64, RS_BIG);
	mem = aligned_alloc(64, 1 << 20);
	memset(mem, 0, 1 << 20);
	REQUIRE(ring && mem);
	CHECK_EQ(qp_seq_of(0), 1);
	CHECK_EQ(qp_seq_of(64), 2);
	CHECK_EQ(qp_seq_of(0xffffffffull * 64), 1);
	CHECK_EQ(qp_rec_bytes(0), 64);
	CHECK_EQ(qp_rec_bytes(48), 64);
	CHECK_EQ(qp_rec_bytes(49), 128);
	/* the record, and a PAD to the end if it does not fit */
	CHECK_EQ(qp_tx_need(RS, RS - 64, 48), 64);
	CHECK_EQ(qp_tx_need(RS, RS - 64, 49), 64 + 128);
	/* a writer that zeroes needs the line after the record too when it
	 * must zero it, or does not know */
	struct qp_zmap *z = qp_zmap_new(RS);
	REQUIRE(z);
	CHECK_EQ(qp_zmap_need(z, RS, 0, 48), 64);   /* a fresh ring */
	CHECK_EQ(qp_zmap_need(z, RS, 64, 48), 128);   /* another wrote */
	qp_zmap_dirty(z, 128, 64);
	CHECK_EQ(qp_zmap_need(z, RS, 0, 100), 128 + 64);
	CHECK_EQ(qp_zmap_rec(z, 0, 128, 128), 128);   /* zeroed, now clear */
	CHECK_EQ(qp_zmap_rec(z, 0, 128, 128), -1);
	CHECK_EQ(qp_zmap_need(z, RS, 0, 100), 128);
	z->wpos = RS - 64;   /* as if this writer had got there */
	CHECK_EQ(qp_zmap_need(z, RS, RS - 64, 49), 64 + 128);   /* PAD, 128 */
	qp_zmap_dirty(z, 128, 1);
	CHECK_EQ(qp_zmap_need(z, RS, RS - 64, 49), 64 + 128 + 64);
	qp_zmap_sync(z, 64);   /* another wrote: every line */
	CHECK_EQ(z->wpos, 64);
	CHECK_EQ(qp_zmap_rec(z, 64, 64, RS - 64), 0);
	free(z);
	for (wz = 0; wz <= 1; wz++) {
		t_basic();
		t_wrap_and_stream();
		t_messages();
		t_posted();
		t_corrupt();
	}
	RS = RS_BIG;
	for (wz = 0; wz <= 1; wz++) {
		t_large();
		t_mixed_writers();
	}
	/* a writer that zeroes nothing, to a reader that leaves the lines of
	 * large records to the writer: a stale word is found where a header
	 * goes within a lap or two */
	wz = 1;
	reset();
	int bad = 0;
	uint32_t max = qp_max_payload(RS);
	uint8_t *b = malloc(max);
	memset(b, 0xa5, max);
	for (int i = 0; i < 2000 && !bad; i++) {
		uint32_t n = (uint32_t)((uint64_t)i * 7919 % max);
		if (qp_tx_need(RS, wpos, n) <= free_bytes())
			wpos = qp_tx_put(ring, RS, wpos, QP_T_DATA, 0, n, b, n, NULL);
		ssize_t k;
		while ((k = qp_rx_read(&rx, b, max)) > 0)
			;
		bad = k == -EPROTO;
	}
	CHECK(bad);
	free(b);
	free(zm);
	free(ring);
	free(mem);
	return th_done("test_qp_ring");
}
