/*
 * Fuzz what the device and fabric layers read from shared memory that a
 * peer (or a stray writer) controls:
 *   - the fabric descriptor: the input patches a valid descriptor, which
 *     is then read and checked (ntbx_shm_read_desc) and opened;
 *   - the scratchpads a peer writes at bring-up and the peer's window
 *     translation: written from the input, then the link is checked
 *     (ntbx_fabric_link_ready, ntbx_fabric_link_block) and the window
 *     mapped.  Nothing may crash or touch memory outside the windows.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dev/shm/shm.h"
#include "fabric/fabric_priv.h"
#include "ntbx/fabric.h"
#include "fabric.h"

static char dir[512], desc_path[1024], scratch[1100];
static struct shm_fabric_desc good;
static struct ntbx_fabric *f0;
static struct ntbx_dev *d1;

static void cleanup(void)
{
	if (f0)
		ntbx_fabric_leave(f0);
	if (d1)
		ntbx_dev_close(d1);
	ntbx_fabric_destroy("fuzz");
	unlink(scratch);
	/* the last input left a mangled descriptor, which destroy refuses to
	 * trust: put the good one back first, so nothing stays in /dev/shm */
	int fd = open(desc_path, O_WRONLY);
	if (fd >= 0) {
		if (pwrite(fd, &good, sizeof good, 0) != (ssize_t)sizeof good)
			perror("restore descriptor");
		close(fd);
	}
	ntbx_fabric_destroy("fuzzcopy");
	rmdir(getenv("NTBX_SHM_DIR"));
}

static void setup(void)
{
	fuzz_fabric_make("fuzz");
	fuzz_fabric_make("fuzzcopy");
	ntbx_fabric_dir("fuzz", dir, sizeof dir);
	if (ntbx_fabric_join("fuzz", 0, &f0) || ntbx_dev_open_shm(dir, 1, &d1))
		abort();
	char cdir[512];
	ntbx_fabric_dir("fuzzcopy", cdir, sizeof cdir);
	snprintf(desc_path, sizeof desc_path, "%s/fabric", cdir);
	snprintf(scratch, sizeof scratch, "%s.in", desc_path);
	if (ntbx_shm_read_desc(cdir, &good))
		abort();
	atexit(cleanup);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!f0)
		setup();
	/* Part 1: 32 bytes of scratchpads, 16 of window translation. */
	if (size >= 48) {
		struct ntbx_dev *d0 = ntbx_fabric_dev(f0);
		for (int i = 0; i < NTBX_SPAD_COUNT; i++) {
			uint32_t v;
			memcpy(&v, data + 4 * i, 4);
			ntbx_peer_spad_write(d1, 0, i, v);
		}
		struct shm_node_regs *r1 = ((struct shm_dev *)d1)->regs;
		memcpy(&r1->port[0].xlat[0], data + 32, 16);
		int ready = ntbx_fabric_link_ready(f0, 0);
		void *remote;
		uint64_t off, bsz;
		if (ready > 0 && ntbx_fabric_link_block(f0, 0, &off, &remote, &bsz) == 0) {
			void *base;
			uint64_t wsz;
			if (ntbx_peer_mw_get_addr(d0, 0, 0, &base, &wsz) != 0 ||
			    (char *)remote < (char *)base ||
			    (char *)remote + bsz > (char *)base + wsz)
				abort();   /* a link block outside the window */
			memset(remote, 0x5a, bsz);
		}
		void *base;
		uint64_t wsz;
		if (ntbx_peer_mw_get_addr(d0, 0, 0, &base, &wsz) == 0)
			memset(base, 0, wsz < 4096 ? wsz : 4096);
		data += 48;
		size -= 48;
	}
	/* Part 2: (offset, byte) patches to a valid descriptor. */
	struct shm_fabric_desc d = good;
	for (size_t i = 0; i + 3 <= size; i += 3) {
		size_t at = ((size_t)data[i] | (size_t)data[i + 1] << 8) % sizeof d;
		((uint8_t *)&d)[at] = data[i + 2];
	}
	int fd = open(desc_path, O_WRONLY);
	if (fd < 0 || pwrite(fd, &d, sizeof d, 0) != (ssize_t)sizeof d)
		abort();
	close(fd);
	char cdir[512];
	ntbx_fabric_dir("fuzzcopy", cdir, sizeof cdir);
	struct shm_fabric_desc out;
	if (ntbx_shm_read_desc(cdir, &out) == 0) {
		struct ntbx_dev *dev;
		for (int n = 0; n < 3; n++)
			if (ntbx_dev_open_shm(cdir, n, &dev) == 0)
				ntbx_dev_close(dev);
	}
	return 0;
}
