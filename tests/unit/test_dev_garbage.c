/*
 * Garbage in a node's register file, written by anyone with access to it:
 * the calls that take the node's shared lock (allocation) or read a
 * peer's window translation (a seqlock) return an error within a bounded
 * time instead of blocking or spinning for ever.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "dev/shm/shm.h"
#include "util/util.h"
#include "ntbx/fabric.h"

static char dir[512];

static void scribble(int node, size_t off, size_t len, int byte)
{
	char path[600];
	snprintf(path, sizeof path, "%s/node-%d.regs", dir, node);
	int fd = open(path, O_WRONLY);
	REQUIRE(fd >= 0);
	char buf[256];
	REQUIRE(len <= sizeof buf);
	memset(buf, byte, len);
	REQUIRE(pwrite(fd, buf, len, (off_t)off) == (ssize_t)len);
	close(fd);
}

/* A flipping window size: the peer's seqlock reader gives up. */
static volatile int flip_stop;
static void *flipper(void *arg)
{
	volatile uint64_t *sz = arg;
	for (uint64_t i = 1; !flip_stop; i++)
		*sz = (i & 1) ? 4096 : 8192;
	return NULL;
}

int main(void)
{
	th_init("dev_garbage");
	th_fabric("garbage", 2, NTBX_TOPO_SWITCH, 4 << 20, 0);
	REQUIRE(ntbx_fabric_dir("garbage", dir, sizeof dir) == 0);
	struct ntbx_dev *a, *b;
	REQUIRE(ntbx_dev_open_shm(dir, 0, &a) == 0);
	REQUIRE(ntbx_dev_open_shm(dir, 1, &b) == 0);

	/* the node's robust mutex overwritten with garbage */
	scribble(0, offsetof(struct shm_node_regs, lock), sizeof(pthread_mutex_t),
	         0x5a);
	unsigned long long t0 = th_now_ns();
	int64_t off = ntbx_mem_alloc(a, 4096, 4096, "x", 1);
	double s = (double)(th_now_ns() - t0) / 1e9;
	CHECK_EQ(off, -EIO);
	CHECK(strstr(ntbx_errmsg(), "shared lock") != NULL);
	CHECK(s < NTBX_SHARED_LOCK_MS / 1000.0 + 3);

	/* node 1's translation of its window toward node 0, flipping */
	struct shm_node_regs *r1 = NULL;
	{
		char path[600];
		snprintf(path, sizeof path, "%s/node-1.regs", dir);
		int fd = open(path, O_RDWR);
		REQUIRE(fd >= 0);
		REQUIRE(shm_map_fd(fd, sizeof *r1, 1, (void **)&r1) == 0);
		close(fd);
	}
	r1->port[0].xlat[0].off = 0;
	r1->port[0].xlat[0].size = 4096;
	pthread_t th;
	REQUIRE(pthread_create(&th, NULL, flipper,
	                       (void *)&r1->port[0].xlat[0].size) == 0);
	int fails = 0;
	t0 = th_now_ns();
	for (int i = 0; i < 200; i++) {
		void *addr;
		uint64_t sz;
		int rc = ntbx_peer_mw_get_addr(a, 0, 0, &addr, &sz);
		CHECK(rc == 0 || rc == -EPROTO);
		if (rc == 0)
			CHECK(sz == 4096 || sz == 8192);
		else
			fails++;
	}
	s = (double)(th_now_ns() - t0) / 1e9;
	flip_stop = 1;
	pthread_join(th, NULL);
	CHECK(s < 10);
	printf("dev_garbage: %d of 200 translations refused as unstable, "
	       "%.3f s\n", fails, s);
	shm_unmap(r1, sizeof *r1);
	ntbx_dev_close(a);
	ntbx_dev_close(b);
	ntbx_fabric_destroy("garbage");
	return th_done("dev_garbage");
}
