/*
 * Fuzz the forwarded receive path.  On a ring, a transfer thread takes each
 * frame a neighbour wrote into a bypass ring and, when the frame is for its
 * node, writes it into the queue-pair half the frame names
 * (qp_fwd_deliver_mem): every field of the frame comes from another node.
 * Here a half sits in a node memory block, frames from the input are
 * delivered to it, and the half's reader runs between them (qp_rx_read and
 * qp_rx_recv, the functions ntbx_qp_read/recv call), so a frame that got
 * past the checks is parsed too.
 *
 * The node memory and each payload are heap blocks of exactly their size,
 * and the half's ring ends where the node memory ends, so AddressSanitizer
 * reports any access outside them (dropping the check that a record fits
 * before the ring's end is found within seconds).  The invariants:
 * nothing is read or written outside the node memory, a frame the checks
 * accept stays inside the ring, and the reader fails with -EPROTO, never
 * crashes.
 *
 * Input layout:
 *   byte 0      mode: bit 0 ring 8 KiB instead of 4 KiB; bits 1-3 are
 *               1: then 64 bytes overwrite the half's id block,
 *               2: then 2 bytes give the half's offset, else neither
 *   then        operations: 1 byte op; a frame (op % 4 < 2) is
 *               {flags u8, line delta i8, type u8, len u16, aux u32,
 *               rflags u8} (see make_frame); op % 4 == 2 reads,
 *               3 receives a message
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "qp/qp_int.h"
#include "input.h"

#define MEM_SIZE (32u << 10)
#define COOKIE   0x1234567890abcd0cull
#define PEER     1u

/*
 * A frame for the half at @off, as an honest sender would write it next
 * (at *wpos), or spoiled as the input says.  flags & 15:
 *   0      a raw 48-byte frame from the input
 *   1-4    the destination offset, the cookie, the source node or the
 *          position replaced by 8 input bytes
 *   5      the position moved by delta lines
 *   6-15   honest
 * flags bit 4: aux as given (else right: a one-record message); bit 5:
 * len and aux kept on frames that must have none.  type < 160 is DATA,
 * else type % 8.
 */
static void make_frame(struct in *in, struct qp_frame *fr, uint64_t off,
                       uint64_t *wpos, uint32_t rs)
{
	uint8_t flags = 0, type = 0, rflags = 0;
	int8_t delta = 0;
	uint16_t len = 0;
	uint32_t aux = 0;
	take(in, &flags, 1);
	if ((flags & 15) == 0) {
		take(in, fr, sizeof *fr);
		return;
	}
	take(in, &delta, 1);
	take(in, &type, 1);
	take(in, &len, 2);
	take(in, &aux, 4);
	take(in, &rflags, 1);
	memset(fr, 0, sizeof *fr);
	fr->dst_off = off;
	fr->dst_cookie = COOKIE;
	fr->src_node = PEER;
	fr->rtype = type < 160 ? QP_T_DATA : (uint16_t)(type % 8);
	len %= rs / 2;
	uint64_t p = *wpos & (rs - 1);
	if (fr->rtype == QP_T_DATA && p + qp_rec_bytes(len) > rs)
		fr->rtype = QP_T_PAD;   /* what the writer does at the end */
	fr->pos = *wpos;
	switch (flags & 15) {
	case 1: take(in, &fr->dst_off, 8); break;
	case 2: take(in, &fr->dst_cookie, 8); break;
	case 3: {
		uint64_t v = 0;
		take(in, &v, 8);
		fr->src_node = (uint32_t)v;
		break;
	}
	case 4: take(in, &fr->pos, 8); break;
	case 5: fr->pos += (uint64_t)(int64_t)delta * QP_LINE; break;
	}
	fr->rflags = (uint16_t)(rflags % 4 == 3 ? rflags : 0);
	if (fr->rtype == QP_T_DATA) {
		fr->rlen = len;
		fr->raux = (flags & 0x10) ? aux : len;
	} else if (flags & 0x20) {
		fr->rlen = len;
		fr->raux = aux;
	}
	if (fr->rtype == QP_T_DATA)
		*wpos += qp_rec_bytes(len);
	else if (fr->rtype == QP_T_PAD)
		*wpos += rs - p;
	else if (fr->rtype == QP_T_EOF)
		*wpos += qp_rec_bytes(0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct in in = { data, size };
	uint8_t mode;
	if (!take(&in, &mode, 1))
		return 0;
	uint32_t rs = (mode & 1) ? 8192 : 4096;
	uint8_t *mem = malloc(MEM_SIZE);
	uint8_t *out = malloc(rs * 2);
	if (!mem || !out)
		goto done;
	memset(mem, 0, MEM_SIZE);
	/* The ring ends where the node memory ends, so a record written past
	 * the ring's end is an access outside the block. */
	uint64_t off = MEM_SIZE - QP_HALF_HDR - rs;
	if (((mode >> 1) & 7) == 2) {
		uint16_t o = 0;
		take(&in, &o, 2);
		off = o & ~(uint64_t)(QP_LINE - 1);
	}
	/* The reader's own half must fit: it is ours, made by us. */
	int reader = off + QP_HALF_HDR + rs <= MEM_SIZE;
	if (off + QP_HALF_HDR <= MEM_SIZE) {
		struct qp_half *h = (struct qp_half *)(mem + off);
		h->id.magic = QP_MAGIC;
		h->id.cookie = COOKIE;
		h->id.peer_node = PEER;
		h->id.hops = 2;
		h->id.ring_size = rs;
		h->id.db_bit = 9;
		h->id.wake_port = 0;
		if (((mode >> 1) & 7) == 1) {
			uint8_t raw[64];
			size_t n = sizeof raw < sizeof h->id ? sizeof raw : sizeof h->id;
			take(&in, raw, n);
			memcpy(&h->id, raw, n);
		}
	}
	struct qp_half *h = reader ? (struct qp_half *)(mem + off) : NULL;
	struct qp_rx rx = { .ring = reader ? mem + off + QP_HALF_HDR : NULL,
	                    .size = rs, .s = reader ? &h->rx : NULL,
	                    .mem = mem, .mem_size = MEM_SIZE };
	size_t got = 0;
	uint64_t wpos = 0;   /* the honest sender's next position */
	int in_recv = 0, failed = 0;
	for (int op = 0; op < 64 && in.n > 0; op++) {
		uint8_t o = 0;
		take(&in, &o, 1);
		if (o % 4 < 2) {
			struct qp_frame fr;
			make_frame(&in, &fr, off, &wpos, rs);
			/* the payload is exactly as long as the frame says
			 * (fwd_drain checks that against the record length) */
			uint32_t plen = fr.rtype == QP_T_DATA ? fr.rlen : 0;
			if (plen > QP_FWD_MAX_PAYLOAD)
				plen = 0;   /* fwd_drain never gets there */
			uint8_t *pl = malloc(plen ? plen : 1);
			if (!pl)
				break;
			for (uint32_t i = 0; i < plen; i++)
				pl[i] = (uint8_t)(i * 7);
			int port;
			uint32_t bit = 0;
			int rc = qp_fwd_deliver_mem(mem, MEM_SIZE, &fr, pl, &port,
			                            &bit);
			free(pl);
			if (rc != 0 && rc != -EPROTO)
				abort();   /* documented: 0 or -EPROTO */
			if (rc == 0 && (port < -1 || port > 15 || (port >= 0 &&
			    (!bit || (bit & (bit - 1))))))
				abort();   /* a wake-up must name one bit */
			continue;
		}
		if (!reader || failed)
			continue;
		rx.peer_closed = h->peer_closed;
		ssize_t rc;
		uint64_t poff;
		if (o % 4 == 2) {
			rc = qp_rx_read(&rx, out, (size_t)(o >> 2) * 64 + 1);
		} else {
			if (!in_recv)
				got = 0;
			rc = qp_rx_recv(&rx, out, rs * 2, &got, 0, &poff);
			in_recv = rc == -EAGAIN;
		}
		if (rc == -EPROTO)
			failed = 1;   /* the real reader fails the queue pair */
	}
done:
	free(mem);
	free(out);
	return 0;
}
