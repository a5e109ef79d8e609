/*
 * Fuzz the node-memory allocator with the table in the fuzzer's hands: the
 * entries (state, owner slot and generation, offset, size, tag) and the
 * scan bound in a node's register file are shared memory any process of
 * the node can scribble on.  The input fills them, then a few allocations,
 * frees, lists and reaps run.  Whatever the table says, an allocation
 * returns a block inside node memory or an error, a list reports what it
 * can, and nothing crashes or runs past its arrays (ASan).
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
static uint64_t msz;

static void cleanup(void)
{
	if (dev) {
		/* a clean table again, so destroy sees an ordinary fabric */
		memset(regs->block, 0, sizeof regs->block);
		regs->block_hi = 0;
		ntbx_dev_close(dev);
	}
	ntbx_fabric_destroy("fuzzalloc");
	rmdir(getenv("NTBX_SHM_DIR"));
}

static void setup(void)
{
	fuzz_fabric_make("fuzzalloc");
	char dir[512];
	if (ntbx_fabric_dir("fuzzalloc", dir, sizeof dir) ||
	    ntbx_dev_open_shm(dir, 0, &dev)) {
		fprintf(stderr, "fuzz_dev_alloc: %s\n", ntbx_errmsg());
		abort();
	}
	atexit(cleanup);
	regs = SHM(dev)->regs;
	msz = ntbx_mem_size(dev);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!dev)
		setup();
	struct in in = { data, size };
	memset(regs->block, 0, sizeof regs->block);
	uint32_t hi = 0;
	uint8_t nent = 0;
	take(&in, &hi, sizeof hi);
	take(&in, &nent, 1);
	for (int i = 0; i < nent % 64; i++) {
		uint16_t idx = 0;
		take(&in, &idx, sizeof idx);
		take(&in, &regs->block[idx % SHM_BLOCKS], sizeof regs->block[0]);
	}
	regs->block_hi = hi;
	struct ntbx_mem_block list[16];
	for (int step = 0; step < 16 && in.n; step++) {
		uint8_t op = 0;
		uint32_t arg = 0;
		take(&in, &op, 1);
		take(&in, &arg, sizeof arg);
		switch (op % 4) {
		case 0: {
			size_t sz = arg % (1u << 20) + 1;
			int64_t off = ntbx_mem_alloc(dev, sz, 4096, "fz", op & 4);
			if (off >= 0 && ((uint64_t)off > msz || sz > msz - (uint64_t)off))
				abort();   /* a block outside node memory */
			break;
		}
		case 1:
			ntbx_mem_free(dev, (int64_t)arg * 64);
			break;
		case 2: {
			int n = ntbx_mem_list(dev, list, 16);
			for (int i = 0; i < n && i < 16; i++)
				if (memchr(list[i].tag, 0, sizeof list[i].tag) == NULL)
					abort();   /* an unterminated tag */
			break;
		}
		case 3:
			ntbx_mem_reap(dev);
			break;
		}
	}
	return 0;
}
