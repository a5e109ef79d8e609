/*
 * Fuzz the whole queue-pair API with the peer owning every shared byte.
 *
 * A loopback queue pair (both endpoints on node 0 of a private fabric) is
 * made for each input; the input is then a program of steps, each either
 * an API call on one end (write, send, read, recv, zero-copy receive and
 * release, post a buffer, reserve/commit/abort, poll, wait 0 ms, arm,
 * shutdown) or a poke: the fuzzer, playing the peer, stores a value of 1,
 * 2, 4 or 8 bytes anywhere in either endpoint: identity and connection
 * lines (ring sizes, offsets, cookies, bits), positions, credits, adverts,
 * the closed word, the reader and writer state, the ring itself.
 * Interesting values come from the driver (sizes, powers of two, -1).
 *
 * What must hold whatever the input (node memory is small, 4 MiB, so all
 * of it is compared after each input):
 *   - no crash, no sanitizer report (the call's own buffers are exact
 *     heap blocks);
 *   - every call returns (all data calls are nonblocking, waits 0 ms);
 *   - nothing outside the two endpoints' blocks and the posted buffers
 *     changes in node memory: a corrupt peer may fail its queue pair, never
 *     make us write elsewhere.  Two kinds of field say by design where in
 *     node memory bytes go: a posted buffer (rx.posted, and the advert
 *     that tells the sender of it) names the receiver's own memory, which
 *     a peer that owns the window could write directly anyway.  Pokes
 *     leave those alone, so the check stays exact; everything else in
 *     the endpoints is fair game.  Node memory is mapped between guard
 *     pages, so a store beyond it faults.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ntbx/dev.h"
#include "ntbx/fabric.h"
#include "ntbx/qp.h"
#include "qp/qp_int.h"
#include "input.h"
#include "fabric.h"

#define BUF (64u << 10)

static struct ntbx_fabric *f;
static uint8_t *mem, *before;
static uint64_t msz;

static void cleanup(void)
{
	if (f)
		ntbx_fabric_leave(f);
	ntbx_fabric_destroy("fuzzpeer");
	rmdir(getenv("NTBX_SHM_DIR"));
}

static void setup(void)
{
	/* every input fails a queue pair or two, each logged once: quiet */
	setenv("NTBX_LOG", "error", 0);
	fuzz_fabric_make("fuzzpeer");
	if (ntbx_fabric_join("fuzzpeer", 0, &f)) {
		fprintf(stderr, "fuzz_qp_peer: %s\n", ntbx_errmsg());
		abort();
	}
	atexit(cleanup);
	struct ntbx_dev *dev = ntbx_fabric_dev(f);
	mem = ntbx_mem_base(dev);
	msz = ntbx_mem_size(dev);
	if (!(before = malloc(msz)))
		abort();
}

/* Node memory outside [a, a+as) and [b, b+bs) is as it was. */
static uint64_t post_off[2];

static void check_outside(uint64_t a, uint64_t as, uint64_t b, uint64_t bs)
{
	for (uint64_t i = 0; i < msz; i += 64) {
		if ((i >= a && i < a + as) || (i >= b && i < b + bs) ||
		    (i >= post_off[0] && i < post_off[0] + BUF) ||
		    (i >= post_off[1] && i < post_off[1] + BUF))
			continue;
		if (memcmp(mem + i, before + i, 64)) {
			fprintf(stderr, "fuzz_qp_peer: node memory at %llu changed "
			        "outside the endpoints\n", (unsigned long long)i);
			abort();
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!f)
		setup();
	struct in in = { data, size };
	uint8_t mode = 0;
	take(&in, &mode, 1);
	struct ntbx_qp_opts o = { .ring_size = (mode & 1) ? 8192 : 4096,
	                          .flags = (mode & 2) ? NTBX_QP_NO_PUSH : 0 };
	struct ntbx_qp *q[2] = { 0 };
	struct ntbx_qp_addr ad[2];
	if (ntbx_qp_create(f, 0, &o, &q[0], &ad[0]) ||
	    ntbx_qp_create(f, 0, &o, &q[1], &ad[1]) ||
	    ntbx_qp_connect(q[0], &ad[1]) || ntbx_qp_connect(q[1], &ad[0])) {
		fprintf(stderr, "fuzz_qp_peer: set-up: %s\n", ntbx_errmsg());
		abort();
	}
	/* the endpoints' blocks: what the fuzzer may poke and we may write */
	uint64_t span = 4096 + o.ring_size;
	int64_t post[2];
	post[0] = ntbx_mem_alloc(ntbx_fabric_dev(f), BUF, 64, "fuzzbuf", 1);
	post[1] = ntbx_mem_alloc(ntbx_fabric_dev(f), BUF, 64, "fuzzbuf", 1);
	post_off[0] = (uint64_t)post[0];
	post_off[1] = (uint64_t)post[1];
	if (post[0] < 0 || post[1] < 0 || ad[0].off + span > msz ||
	    ad[1].off + span > msz) {
		fprintf(stderr, "fuzz_qp_peer: set-up: %s\n", ntbx_errmsg());
		abort();
	}
	memcpy(before, mem, msz);
	uint8_t *buf = malloc(BUF), *src = malloc(BUF);
	for (size_t i = 0; i < BUF; i++)
		src[i] = (uint8_t)(i * 7);
	int held[2] = { 0 }, resv[2] = { 0 };
	for (int step = 0; step < 64 && in.n; step++) {
		uint8_t op = 0, who;
		uint32_t arg = 0;
		take(&in, &op, 1);
		who = op >> 7;
		op &= 0x7f;
		take(&in, &arg, 4);
		struct ntbx_qp *x = q[who];
		size_t len = arg % BUF;
		const void *zp;
		uint64_t zoff;
		void *rp;
		int eof;
		switch (op % 16) {
		case 0: case 1: case 2: {   /* the peer: poke a value */
			uint64_t v = 0;
			uint8_t w = 0;
			take(&in, &w, 1);
			take(&in, &v, 8);
			size_t n = (size_t)1 << (w & 3);
			uint64_t in_half = (arg % span) & ~(uint64_t)(n - 1);
			uint64_t adv = offsetof(struct qp_half, adv);
			uint64_t pst = offsetof(struct qp_half, rx.posted);
			if ((in_half + n > adv &&
			     in_half < adv + sizeof(struct qp_adv) * QP_NPOST) ||
			    (in_half + n > pst &&
			     in_half < pst + sizeof(struct qp_posted) * QP_NPOST))
				break;   /* where posted buffers are: see above */
			uint64_t at = ad[(w >> 2) & 1].off + in_half;
			memcpy(mem + at, &v, n);
			memcpy(before + at, &v, n);   /* the peer's own store */
			break;
		}
		case 3:
			ntbx_qp_write(x, src, len, NTBX_QP_NONBLOCK);
			break;
		case 4:   /* a message larger than the ring waits even when
		           * nonblocking (qp.h): keep to what fits */
			ntbx_qp_send(x, src, len % (o.ring_size / 2),
			             NTBX_QP_NONBLOCK);
			break;
		case 5:
			if (!held[who])
				ntbx_qp_read(x, buf, len ? len : 1, NTBX_QP_NONBLOCK);
			break;
		case 6:
			if (!held[who])
				ntbx_qp_recv(x, buf, len, NTBX_QP_NONBLOCK, &eof);
			break;
		case 7:
			if (!held[who])
				held[who] = ntbx_qp_recv_zc(x, &zp, &zoff,
				                            NTBX_QP_NONBLOCK, &eof) > 0;
			break;
		case 8:
			ntbx_qp_recv_zc_done(x);
			held[who] = 0;
			break;
		case 9:
			ntbx_qp_post_recv(x, (uint64_t)post[who] + (arg % 4096),
			                  len % (BUF - 4096) + 1);
			break;
		case 10:
			if (!resv[who])
				resv[who] = ntbx_qp_send_reserve(x, &rp, len,
				                                 NTBX_QP_NONBLOCK) > 0;
			break;
		case 11:
			if (resv[who])
				ntbx_qp_send_commit(x, len % 64);
			resv[who] = 0;
			break;
		case 12:
			if (resv[who])
				ntbx_qp_send_abort(x, len % 64);
			resv[who] = 0;
			break;
		case 13:
			ntbx_qp_poll(x);
			ntbx_qp_peek_len(x);
			break;
		case 14:
			ntbx_qp_wait(x, NTBX_QP_READABLE | NTBX_QP_WRITABLE, 0);
			ntbx_qp_arm(x, NTBX_QP_READABLE | NTBX_QP_WRITABLE);
			break;
		case 15:   /* shutdown waits for room for its EOF record (in
		            * one thread the reader never comes): a close */
			if (!resv[who] && !held[who]) {
				ntbx_qp_close(x, 1);
				q[who] = NULL;
				goto closed;
			}
			break;
		}
	}
closed:
	for (int i = 0; i < 2; i++) {
		if (!q[i])
			continue;
		if (held[i])
			ntbx_qp_recv_zc_done(q[i]);
		if (resv[i])
			ntbx_qp_send_abort(q[i], 0);
	}
	check_outside(ad[0].off, span, ad[1].off, span);
	ntbx_qp_close(q[0], 1);   /* NULL: closed already */
	ntbx_qp_close(q[1], 1);
	/* closing may free a block or keep it as a spare: nothing else */
	check_outside(ad[0].off, span, ad[1].off, span);
	ntbx_mem_free(ntbx_fabric_dev(f), post[0]);
	ntbx_mem_free(ntbx_fabric_dev(f), post[1]);
	/* A half whose magic the peer broke is nobody's to free (reaping
	 * recognises halves by it): give the blocks back, spares too, so the
	 * next input starts on an empty node.  -ENOENT if close freed it. */
	ntbx_mem_free(ntbx_fabric_dev(f), (int64_t)ad[0].off);
	ntbx_mem_free(ntbx_fabric_dev(f), (int64_t)ad[1].off);
	free(buf);
	free(src);
	return 0;
}
