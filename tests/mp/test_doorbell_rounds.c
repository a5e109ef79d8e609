/*
 * No lost wake-up: two processes on two nodes pass a counter back and
 * forth a million times (200,000 under the sanitizers), each sleeping
 * through ntbx_db_wait_prepare/commit with no spinning (NTBX_SPIN_US is
 * irrelevant here: the test never spins).  A lost wake-up would leave a
 * side asleep until its 5 s timeout, which fails the test.
 *
 * On a backend that maps no peer window (NTBX_DEV_DMA_ONLY=1, CTest's
 * dma_test_doorbell_rounds) the counter goes by DMA and the doorbell is
 * rung without waiting for it: the device contract says the write lands
 * before the doorbell's bits, and a side woken before its value arrived
 * would sleep again with no doorbell to come, which fails the test too.
 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "harness.h"
#include "ntbx/fabric.h"

static long rounds;

static int side(void *arg)
{
	int node = (int)(intptr_t)arg;
	struct ntbx_fabric *f = th_join("db", node, 10000);
	struct ntbx_dev *dev = ntbx_fabric_dev(f);
	void *remote;
	uint64_t off, roff;
	if (ntbx_fabric_link_block_at(f, 0, &off, &remote, &roff, NULL) < 0 ||
	    (!remote && ntbx_dev_maps_peer_windows(dev)))
		return 11;
	volatile uint64_t *mine = (uint64_t *)((char *)ntbx_mem_base(dev) + off);
	uint64_t *theirs = remote;
	uint64_t out = 0;            /* DMA only: the write's source */
	struct ntbx_dma_op op = { 0, 0 };
	uint32_t bit = 1u << 9;
	long timeouts = 0;
	for (long i = 1; i <= rounds; i++) {
		/* Node 0 waits for even values and answers odd ones. */
		uint64_t want = (uint64_t)(2 * i - (node == 0 ? 2 : 1));
		for (;;) {
			if (__atomic_load_n(mine, __ATOMIC_SEQ_CST) == want)
				break;
			struct ntbx_db_waiter w;
			ntbx_db_wait_prepare(dev, &w, 1, bit);
			ntbx_db_clear(dev, 0, bit);
			int r = 0;
			if (__atomic_load_n(mine, __ATOMIC_SEQ_CST) != want)
				r = ntbx_db_wait_commit(dev, &w, 5000);
			ntbx_db_wait_finish(dev, &w);
			if (r == -ETIMEDOUT && __atomic_load_n(mine, __ATOMIC_SEQ_CST) != want) {
				fprintf(stderr, "node %d: lost wake-up at round %ld\n", node, i);
				timeouts++;
				return 12;
			}
		}
		if (theirs) {
			__atomic_store_n(theirs, want + 1, __ATOMIC_SEQ_CST);
		} else {
			/* the last write landed before the peer answered it;
			 * its op is waited for only to reuse it */
			if (ntbx_dma_wait(dev, &op, 5000) < 0)
				return 14;
			out = want + 1;
			if (ntbx_dma_write(dev, 0, 0, roff, &out, sizeof out, &op) < 0)
				return 15;
		}
		ntbx_peer_db_set(dev, 0, bit);
	}
	if (!theirs && ntbx_dma_wait(dev, &op, 5000) < 0)
		return 14;
	ntbx_fabric_leave(f);
	return timeouts ? 13 : 0;
}

int main(void)
{
	th_init("dbrounds");
	rounds = getenv("NTBX_SANITIZED") ? 200000 : 1000000;
	/* DMA only: each round waits for the engine thread twice */
	if (getenv("NTBX_DEV_DMA_ONLY"))
		rounds /= 20;
	th_fabric("db", 2, NTBX_TOPO_SWITCH, 8 << 20, 0);
	uint64_t t0 = th_now_ns();
	pid_t a = th_spawn(side, (void *)0), b = th_spawn(side, (void *)1);
	CHECK_EQ(th_wait(a), 0);
	CHECK_EQ(th_wait(b), 0);
	printf("%ld doorbell rounds in %.2f s\n", rounds, (th_now_ns() - t0) / 1e9);
	return th_done("test_doorbell_rounds");
}
