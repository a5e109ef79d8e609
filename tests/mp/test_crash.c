/*
 * kill -9: of a process in the middle of writing into a peer's window, and
 * of a process holding its node's allocation lock.  Peers see link-down
 * within a second, the survivors go on (the lock is recovered, the dead
 * process's owned blocks are reaped), a node that comes back has a new
 * epoch and its links come up again, and destroying the fabric leaves
 * nothing behind.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/mman.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "dev/shm/shm.h"
#include "ntbx/fabric.h"

static int ready_pipe[2];

static void say_ready(void)
{
	char c = 1;
	if (write(ready_pipe[1], &c, 1) != 1)
		_exit(90);
}

static void wait_ready(void)
{
	char c;
	REQUIRE(read(ready_pipe[0], &c, 1) == 1);
}

/* Node 1's only process: write into node 0's window forever. */
static int writer(void *arg)
{
	(void)arg;
	struct ntbx_fabric *f = th_join("crash", 1, 10000);
	void *remote;
	if (ntbx_fabric_link_block(f, 0, NULL, &remote, NULL) < 0)
		return 11;
	say_ready();
	for (uint64_t i = 0;; i++)
		memset(remote, (int)i, 4096);
}

/* A second process of node 0 that dies holding node 0's lock, and with
 * an owned block. */
static int lock_holder(void *arg)
{
	int64_t *owned_off = arg;
	struct ntbx_dev *dev;
	char dir[512];
	ntbx_fabric_dir("crash", dir, sizeof dir);
	if (ntbx_dev_open_shm(dir, 0, &dev) < 0)
		return 10;
	int64_t off = ntbx_mem_alloc(dev, 1 << 20, 4096, "doomed", 1);
	if (off < 0)
		return 11;
	*owned_off = off;   /* shared page: the parent reads it */
	pthread_mutex_lock(&((struct shm_dev *)dev)->regs->lock);
	say_ready();
	for (;;)
		pause();
}

int main(void)
{
	th_init("crash");
	REQUIRE(pipe(ready_pipe) == 0);
	th_fabric("crash", 2, NTBX_TOPO_SWITCH, 16 << 20, 0);
	struct ntbx_fabric *f = th_join("crash", 0, 0);
	struct ntbx_dev *dev = ntbx_fabric_dev(f);
	uint32_t epoch1 = 0;

	/* 1. The peer dies mid-write: link-down within a second. */
	pid_t w = th_spawn(writer, NULL);
	wait_ready();
	CHECK_EQ(ntbx_fabric_wait_links(f, 5000), 0);
	CHECK_EQ(ntbx_link_is_up(dev, 0), 1);
	epoch1 = ntbx_node_epoch(dev, 1);
	uint64_t t0 = th_now_ns();
	kill(w, SIGKILL);
	CHECK_EQ(th_wait(w), 128 + SIGKILL);
	while (ntbx_link_is_up(dev, 0) && th_now_ns() - t0 < 5000000000ull)
		ntbx_db_wait(dev, 1, 1, 10);
	uint64_t down_ms = (th_now_ns() - t0) / 1000000;
	CHECK_EQ(ntbx_link_is_up(dev, 0), 0);
	CHECK(down_ms < 1000);
	CHECK_EQ(ntbx_fabric_link_ready(f, 0), 0);
	CHECK_EQ(ntbx_peer_db_set(dev, 0, 1), -ENOLINK);
	uint64_t up;
	ntbx_link_events(dev, &up);
	CHECK_EQ(up, 0);

	/* 2. The node comes back: a new epoch, links ready again. */
	w = th_spawn(writer, NULL);
	wait_ready();
	CHECK_EQ(ntbx_fabric_wait_links(f, 5000), 0);
	CHECK(ntbx_node_epoch(dev, 1) == epoch1 + 1);
	kill(w, SIGKILL);
	th_wait(w);

	/* 3. A process of our node dies holding the node lock. */
	int64_t *shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
	                       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	REQUIRE(shared != MAP_FAILED);
	pid_t h = th_spawn(lock_holder, shared);
	wait_ready();
	int64_t doomed = *shared;
	CHECK(doomed > 0);
	kill(h, SIGKILL);
	CHECK_EQ(th_wait(h), 128 + SIGKILL);
	/* The survivor allocates (recovering the lock) and the dead
	 * process's block is reaped. */
	int64_t off = ntbx_mem_alloc(dev, 4096, 4096, "after", 0);
	CHECK(off > 0);
	CHECK(ntbx_mem_reap(dev) >= 0);
	struct ntbx_mem_block blk[64];
	int n = ntbx_mem_list(dev, blk, 64), found = 0;
	for (int i = 0; i < n && i < 64; i++)
		found |= blk[i].off == (uint64_t)doomed;
	CHECK(!found);
	CHECK_EQ(ntbx_mem_free(dev, off), 0);
	CHECK_EQ(ntbx_node_alive(dev, 0), 1);

	/* 4. Destroy leaves nothing in NTBX_SHM_DIR. */
	ntbx_fabric_leave(f);
	CHECK_EQ(ntbx_fabric_destroy("crash"), 0);
	DIR *d = opendir(getenv("NTBX_SHM_DIR"));
	REQUIRE(d);
	struct dirent *e;
	int left = 0;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.') {
			fprintf(stderr, "left behind: %s\n", e->d_name);
			left++;
		}
	closedir(d);
	CHECK_EQ(left, 0);
	return th_done("test_crash");
}
