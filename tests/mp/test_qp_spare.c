/*
 * Spare halves (qp.c): a closed endpoint whose ring can be made all zero is
 * kept and given to the next endpoint of the same ring size, which then
 * skips zeroing the ring.  Round after round on one node, each round with
 * its own byte pattern: every byte read is this round's (nothing stale,
 * also when the last round's reader left records unread, at the ring's
 * start or after wrapping), the halves are reused, and the spares kept
 * stay bounded.  (A writer that plants a record outside the range it
 * declares and then closes cleanly is not caught: a peer with a window on
 * the node can write into any ring at any time, so reading every ring at
 * close guarded nothing; qp.c, "Spare halves".)
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "ntbx/fabric.h"
#include "ntbx/qp.h"
#include "qp/qp_int.h"

#define FABRIC "qpspare"
#define RING 16384u
#define ROUNDS 12

static uint8_t pat(int round, uint64_t i)
{
	return (uint8_t)(i * 131u + (uint64_t)round * 29u + 7u);
}

/* a writes @n bytes of the pattern from *wpos while b reads them all. */
static int pump(struct ntbx_qp *a, struct ntbx_qp *b, int round, uint64_t n,
                uint64_t *wpos, uint64_t *rpos, uint64_t read_to)
{
	uint8_t buf[4096];
	uint64_t end = *wpos + n;
	int bad = 0;
	while (*wpos < end || *rpos < read_to) {
		if (*wpos < end) {
			size_t c = end - *wpos < sizeof buf ? (size_t)(end - *wpos)
			                                   : sizeof buf;
			for (size_t i = 0; i < c; i++)
				buf[i] = pat(round, *wpos + i);
			ssize_t w = ntbx_qp_write(a, buf, c, NTBX_QP_NONBLOCK);
			if (w > 0)
				*wpos += (uint64_t)w;
			else if (w != -EAGAIN)
				return -1;
		}
		if (*rpos < read_to) {
			size_t c = read_to - *rpos < sizeof buf ? (size_t)(read_to - *rpos)
			                                        : sizeof buf;
			ssize_t r = ntbx_qp_read(b, buf, c, NTBX_QP_NONBLOCK);
			if (r > 0) {
				for (ssize_t i = 0; i < r; i++)
					if (buf[i] != pat(round, *rpos + (uint64_t)i))
						bad++;
				*rpos += (uint64_t)r;
			} else if (r != -EAGAIN) {
				return -1;
			}
		}
	}
	return bad;
}

static int qp_blocks(struct ntbx_fabric *f)
{
	struct ntbx_mem_block bl[256];
	int n = ntbx_mem_list(ntbx_fabric_dev(f), bl, 256), k = 0;
	for (int i = 0; i < n && i < 256; i++)
		k += strcmp(bl[i].tag, "ntbx-qp") == 0;
	return k;
}

static int rounds_main(void *arg)
{
	(void)arg;
	struct ntbx_fabric *f = th_join(FABRIC, 0, 0);
	struct ntbx_qp_opts o = { RING, 0 };
	uint64_t seen[2 * ROUNDS];
	int reused = 0, bad = 0, errs = 0, stale = 0;
	for (int r = 0; r < ROUNDS; r++) {
		struct ntbx_qp *a, *b;
		struct ntbx_qp_addr aa, ba;
		th_qp_loopback(f, &o, &a, &aa, &b, &ba);
		for (int k = 0; k < 2 * r; k++)
			reused += seen[k] == aa.off || seen[k] == ba.off;
		seen[2 * r] = aa.off;
		seen[2 * r + 1] = ba.off;
		/* nothing written yet: a stale record from the last round at
		 * the ring's start would be read here */
		uint8_t one;
		stale += ntbx_qp_read(a, &one, 1, NTBX_QP_NONBLOCK) != -EAGAIN;
		stale += ntbx_qp_read(b, &one, 1, NTBX_QP_NONBLOCK) != -EAGAIN;
		/* every third round writes nothing first, so the unread tail
		 * sits at the ring's start; the others wrap the ring first */
		uint64_t wpos = 0, rpos = 0;
		uint64_t bulk = r % 3 == 0 ? 0 : 3 * RING + (uint64_t)r * 1000;
		int rc = pump(a, b, r, bulk, &wpos, &rpos, bulk);
		/* the tail: read all of it, half, or none */
		uint64_t tail = 100 + (uint64_t)r * 37;
		uint64_t want = r % 3 == 1 ? bulk + tail : r % 3 == 2 ? bulk + tail / 2
		                                                     : bulk;
		int rc2 = pump(a, b, r, tail, &wpos, &rpos, want);
		errs += rc < 0 || rc2 < 0;
		bad += (rc > 0 ? rc : 0) + (rc2 > 0 ? rc2 : 0);
		/* b also leaves a byte unread in a's ring */
		CHECK_EQ(ntbx_qp_write(b, "z", 1, NTBX_QP_NONBLOCK), 1);
		ntbx_qp_close(a, 1);
		ntbx_qp_close(b, 1);
	}
	CHECK_EQ(stale, 0);
	CHECK_EQ(errs, 0);
	CHECK_EQ(bad, 0);
	CHECK(reused >= ROUNDS);         /* most rounds took spares */
	int left = qp_blocks(f);
	CHECK(left > 0 && left <= 8);    /* spares kept, at most QP_SPARES_MAX */
	ntbx_fabric_leave(f);
	return th_failures ? 1 : 0;
}

int main(void)
{
	th_init("qp_spare");
	th_fabric(FABRIC, 2, NTBX_TOPO_SWITCH, 0, 16ull << 20);
	CHECK_EQ(th_wait(th_spawn(rounds_main, NULL)), 0);
	ntbx_fabric_destroy(FABRIC);
	return th_done("test_qp_spare");
}
