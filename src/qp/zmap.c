/* SPDX-License-Identifier: MIT */
/*
 * Which lines of a peer's ring its writer zeroes (struct qp_zmap in
 * qp_int.h, and the record header there for who zeroes what and why).
 *
 * The reader zeroes the lines of the records of at most QP_RZERO_MAX bytes
 * it consumed; a writer that zeroes must zero the others' lines, but only
 * those where a header goes, and only before that header's predecessor
 * becomes valid.  A header goes at the line after each record, so the
 * writer zeroes that line as it writes the record, if its bit is set.
 * The argument, for a header at line q: when the reader reaches q, the
 * record before q is valid, so the writer has written it, after (release
 * on its seq) either zeroing q, or finding q's bit clear.  A clear bit
 * means that since q was last zeroed (by the writer, or as part of a fresh
 * ring) the writer wrote it only inside small records, and their reader
 * zeroed those lines when it consumed them, before it gave that room back
 * as credit, which the writer waited for (as it waits for q itself when it
 * must zero it: qp_zmap_need).  That holds only while every record written
 * goes through qp_zmap_rec and every other write into the ring sets its
 * bits (qp_zmap_dirty), and while nobody else writes: what this handle did
 * not see (another handle wrote) sets every bit.
 *
 * No device dependency: the unit tests and the fuzzer run this code.
 */
#include <stdlib.h>
#include <string.h>

#include "qp/qp_int.h"

struct qp_zmap *qp_zmap_new(uint32_t size)
{
	uint64_t words = ((uint64_t)size / QP_LINE + 63) / 64;
	/* lines of its own: the writer stores into it at every record */
	size_t bytes = NTBX_ALIGN_UP(sizeof(struct qp_zmap) +
	                             words * sizeof(uint64_t), QP_LINE);
	struct qp_zmap *z = aligned_alloc(QP_LINE, bytes);
	if (!z)
		return NULL;
	memset(z, 0, bytes);
	z->size = size;
	z->wpos = 0;     /* a fresh ring is all zero: no bit set */
	z->zpad = z->zrec = -1;
	return z;
}

/* Bits set in @x (no popcnt instruction is assumed: the build targets
 * any x86-64, where the builtin is a library call). */
static unsigned pop64(uint64_t x)
{
	x = x - ((x >> 1) & 0x5555555555555555ull);
	x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
	x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
	return (unsigned)((x * 0x0101010101010101ull) >> 56);
}

/* Lines [first, first + n) of the map to @on, counted; never wraps
 * (records and reservations do not). */
static void lines_set(struct qp_zmap *z, uint64_t first, uint64_t n, int on)
{
	while (n) {
		uint64_t w = first / 64, b = first % 64;
		uint64_t k = 64 - b < n ? 64 - b : n;
		uint64_t m = (k == 64 ? ~0ull : ((1ull << k) - 1)) << b;
		uint64_t old = z->bits[w];
		uint64_t flip = on ? m & ~old : m & old;
		if (flip) {
			z->bits[w] = old ^ flip;
			if (on)
				z->nset += pop64(flip);
			else
				z->nset -= pop64(flip);
		}
		first += k;
		n -= k;
	}
}

void qp_zmap_fill(struct qp_zmap *z, int on)
{
	lines_set(z, 0, z->size / QP_LINE, on);
}

void qp_zmap_dirty(struct qp_zmap *z, uint64_t pos, uint64_t bytes)
{
	if (!z || !bytes)
		return;
	uint64_t first = pos / QP_LINE;
	uint64_t end = (pos + bytes + QP_LINE - 1) / QP_LINE;
	if (end > z->size / QP_LINE)
		end = z->size / QP_LINE;
	if (end > first)
		lines_set(z, first, end - first, 1);
}
