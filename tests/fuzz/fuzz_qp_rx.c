/*
 * Fuzz the queue-pair receive path: arbitrary bytes become the content of
 * an RX ring, the peer-written control word (peer_closed) and the reader
 * state, then a sequence of receive operations (stream read, message
 * receive, receive into posted buffers, peek, post) runs on them: the very
 * functions ntbx_qp_read/recv/recv_posted/peek_len/post_recv call.
 *
 * The ring and the node memory are separate heap blocks of exactly their
 * size, so AddressSanitizer reports any access outside them.
 *
 * Input layout:
 *   byte 0      mode: bit 0 raw ring bytes / structured records,
 *               bit 1 reader state from the input / zero,
 *               bit 2 ring 8 KiB instead of 4 KiB, bit 3 set peer_closed
 *   structured: records {type u8, flags u8, aux u32, len u16} written with
 *               the writer's own qp_tx_put, then pokes {pos u16, val u8}
 *   then        operations, 4 bytes each
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "qp/qp_int.h"
#include "input.h"

#define MEM_SIZE (64u << 10)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct in in = { data, size };
	uint8_t mode;
	if (!take(&in, &mode, 1))
		return 0;
	uint32_t rs = (mode & 4) ? 8192 : 4096;
	uint8_t *ring = malloc(rs);
	uint8_t *mem = malloc(MEM_SIZE);
	uint8_t *out = malloc(rs * 2);
	struct qp_rxs *st = malloc(sizeof *st);
	if (!ring || !mem || !out || !st)
		goto done;
	memset(ring, 0, rs);
	memset(mem, 0xa5, MEM_SIZE);
	memset(st, 0, sizeof *st);
	uint64_t peer_closed = 0;
	if (mode & 8)
		take(&in, &peer_closed, sizeof peer_closed);
	if (mode & 2)
		take(&in, st, sizeof *st);
	if (mode & 1) {
		/* raw ring image */
		size_t n = in.n < rs ? in.n : rs;
		take(&in, ring, n);
	} else {
		/* records through the writer, then a few pokes */
		uint8_t nrec = 0;
		take(&in, &nrec, 1);
		uint64_t w = st->rpos & ~(uint64_t)63;
		uint8_t pay[2048];
		for (size_t i = 0; i < sizeof pay; i++)
			pay[i] = (uint8_t)i;
		/* mode 16: the writer zeroes the lines of large records */
		struct qp_zmap *z = (mode & 16) ? qp_zmap_new(rs) : NULL;
		for (int i = 0; i < nrec % 32; i++) {
			uint8_t type, flags;
			uint32_t aux;
			uint16_t len;
			take(&in, &type, 1);
			take(&in, &flags, 1);
			take(&in, &aux, 4);
			take(&in, &len, 2);
			len %= qp_max_payload(rs) + 1;
			if ((w - st->rpos) + qp_tx_need(rs, w, len) > rs)
				break;
			w = qp_tx_put(ring, rs, w, type % 8, flags % 4, aux,
			              (type % 8) == QP_T_PUSH ? NULL : pay, len, z);
		}
		free(z);
		uint8_t npoke = 0;
		take(&in, &npoke, 1);
		for (int i = 0; i < npoke % 16; i++) {
			uint16_t pos;
			uint8_t v;
			take(&in, &pos, 2);
			take(&in, &v, 1);
			ring[pos % rs] = v;
		}
	}
	/* mode 16: the reader leaves the lines of large records to the
	 * writer (qp_int.h, the record header) */
	struct qp_rx rx = { .ring = ring, .size = rs, .s = st, .mem = mem,
	                    .mem_size = MEM_SIZE, .peer_closed = peer_closed,
	                    .wz = (mode & 16) != 0 };
	size_t got = 0;
	int in_recv = 0;
	for (int op = 0; op < 64 && in.n >= 4; op++) {
		uint8_t o[4];
		take(&in, o, 4);
		uint32_t arg = (uint32_t)o[1] << 8 | o[2];
		ssize_t rc = 0;
		int eof;
		uint64_t off;
		struct qp_adv adv;
		switch (o[0] % 7) {
		case 0:
			rc = qp_rx_read(&rx, out, arg % (rs * 2) + 1);
			break;
		case 1:
		case 2:
			if (!in_recv)
				got = 0;
			rc = qp_rx_recv(&rx, out, arg % (rs * 2), &got, 0, &off);
			in_recv = rc == -EAGAIN;
			break;
		case 3:
			if (!in_recv)
				got = 0;
			rc = qp_rx_recv(&rx, NULL, 0, &got, 1, &off);
			in_recv = rc == -EAGAIN;
			if (rc == 1 && (off > MEM_SIZE || got > MEM_SIZE - off))
				abort();   /* handed out memory outside the node */
			break;
		case 4:
			rc = qp_rx_msg_len(&rx, &eof);
			break;
		case 5:
			rc = qp_rx_post(&rx, (uint64_t)arg * 16 + o[3],
			                (uint64_t)o[3] << 6, &adv);
			break;
		case 6:
			rc = qp_rx_status(&rx);
			break;
		}
		if (rc == -EPROTO)
			break;   /* the real receiver fails the queue pair here */
	}
done:
	free(ring);
	free(mem);
	free(out);
	free(st);
	return 0;
}
