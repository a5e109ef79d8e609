/*
 * Fuzz what a ringer reads from a node's register file to find its
 * sleepers: the waiter slots (the futex sleepers' count, ports and bits;
 * the FIFO's ports, bits, keys, pending flag, count of sleepers inside
 * their sleep and generation), the slots published (slot_map), the slots
 * indexed per doorbell bit (bit_slots), the FIFOs that exist (fifo_map)
 * and the ports' doorbell masks.  Any process of the node writes there.
 * The input fills them, then rings with and without keys, sleeper
 * registrations of two real wake objects, a futex wait that does not
 * sleep and the FIFO keeping of a confined process run.  Whatever the
 * slots say, a ring visits the slots of its node only, writes only FIFOs
 * of that node, never blocks, and nothing crashes or runs past its arrays
 * (ASan).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dev/shm/shm.h"
#include "ntbx/fabric.h"
#include "input.h"
#include "fabric.h"

static struct ntbx_dev *dev;
static struct shm_node_regs *regs;
static struct ntbx_db_wake *wk[2];

/* Every field a ringer or a sleeper reads, back to a node with no one
 * waiting (what destroy expects to find). */
static void clean(void)
{
	memset(regs->waiter, 0, sizeof regs->waiter);
	memset(regs->slot_map, 0, sizeof regs->slot_map);
	memset(regs->bit_slots, 0, sizeof regs->bit_slots);
	for (int p = 0; p < NTBX_MAX_PORTS; p++)
		regs->port[p].db_mask = 0;
}

static void cleanup(void)
{
	if (dev) {
		for (int i = 0; i < 2; i++)
			ntbx_db_wake_close(dev, wk[i]);
		clean();
		memset(regs->fifo_map, 0, sizeof regs->fifo_map);
		ntbx_dev_close(dev);
	}
	ntbx_fabric_destroy("fuzzwake");
	rmdir(getenv("NTBX_SHM_DIR"));
}

static void setup(void)
{
	fuzz_fabric_make("fuzzwake");
	char dir[512];
	if (ntbx_fabric_dir("fuzzwake", dir, sizeof dir) ||
	    ntbx_dev_open_shm(dir, 0, &dev)) {
		fprintf(stderr, "fuzz_db_wake: %s\n", ntbx_errmsg());
		abort();
	}
	atexit(cleanup);
	regs = SHM(dev)->regs;
	/* two wake objects with FIFO files, so that a ring may reach one */
	for (int i = 0; i < 2; i++)
		if (ntbx_db_wake_open(dev, &wk[i]) < 0)
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!dev)
		setup();
	struct in in = { data, size };
	clean();
	take(&in, regs->slot_map, sizeof regs->slot_map);
	take(&in, regs->bit_slots, sizeof regs->bit_slots);
	uint64_t fifo[SHM_SLOTS / 64];
	if (take(&in, fifo, sizeof fifo))
		memcpy(regs->fifo_map, fifo, sizeof fifo);
	uint32_t mask = 0;
	take(&in, &mask, sizeof mask);
	regs->port[0].db_mask = mask;
	uint8_t nw = 0;
	take(&in, &nw, 1);
	for (int i = 0; i < nw % 16; i++) {
		uint16_t idx = 0;
		take(&in, &idx, sizeof idx);
		take(&in, &regs->waiter[idx % SHM_SLOTS], sizeof regs->waiter[0]);
	}
	for (int step = 0; step < 16 && in.n; step++) {
		uint8_t op = 0;
		uint32_t arg = 0;
		take(&in, &op, 1);
		take(&in, &arg, sizeof arg);
		uint32_t bits = arg & NTBX_DB_VALID_MASK;
		int key = (int)(arg >> 16) % (NTBX_DB_KEYS + 1) - 1;
		struct ntbx_db_wake *w = wk[op >> 7];
		switch (op % 6) {
		case 0:
			if (ntbx_db_local_ring(dev, 0, bits, key) != 0)
				abort();   /* every key in range is taken */
			break;
		case 1:
			ntbx_db_local_set(dev, 0, bits);
			break;
		case 2:
			ntbx_db_wake_prepare_keys(dev, w, 1, bits,
			                          (uint64_t)arg * 0x9e3779b97f4a7c15ull);
			break;
		case 3:
			ntbx_db_wake_sleeping(dev, w, arg & 1);
			break;
		case 4: {
			struct ntbx_db_waiter wt;
			if (ntbx_db_wait_prepare(dev, &wt, 1, bits ? bits : 1) == 0) {
				int rc = ntbx_db_wait_commit(dev, &wt, 0);
				if (rc != 0 && rc != -ETIMEDOUT && rc != -EINTR)
					abort();
				ntbx_db_wait_finish(dev, &wt);
			}
			break;
		}
		case 5:
			ntbx_db_clear(dev, 0, NTBX_DB_VALID_MASK);
			break;
		}
	}
	ntbx_db_clear(dev, 0, NTBX_DB_VALID_MASK);
	return 0;
}
