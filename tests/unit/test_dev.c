/* The device contract on the shm backend: every call, and bad arguments. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "ntbx/fabric.h"
#include "util/util.h"

static char dir[512];

static struct ntbx_dev *open_node(int n)
{
	struct ntbx_dev *d = NULL;
	int r = ntbx_dev_open_shm(dir, n, &d);
	REQUIRE(r == 0);
	return d;
}

static void test_open_errors(void)
{
	struct ntbx_dev *d;
	char missing[600];
	snprintf(missing, sizeof missing, "%s-missing", dir);
	CHECK_EQ(ntbx_dev_open_shm(missing, 0, &d), -ENOENT);
	CHECK(strstr(ntbx_errmsg(), "ntbx fabric create") != NULL);
	CHECK_EQ(ntbx_dev_open_shm(dir, 2, &d), -ERANGE);
	CHECK(strstr(ntbx_errmsg(), "no node 2") != NULL);
	CHECK_EQ(ntbx_dev_open_shm(dir, -1, &d), -ERANGE);
}

static void test_ports(struct ntbx_dev *a, struct ntbx_dev *b)
{
	CHECK_EQ(ntbx_dev_node(a), 0);
	CHECK_EQ(ntbx_dev_node(b), 1);
	CHECK_EQ(ntbx_dev_node_count(a), 2);
	CHECK_EQ(ntbx_port_count(a), 1);
	CHECK_EQ(ntbx_port_peer_node(a, 0), 1);
	CHECK_EQ(ntbx_port_peer_node(b, 0), 0);
	CHECK_EQ(ntbx_port_peer_node(a, 1), -EINVAL);
	CHECK_EQ(ntbx_port_of_node(a, 1), 0);
	CHECK_EQ(ntbx_port_of_node(a, 0), -ENOENT);
	CHECK_EQ(ntbx_port_of_node(a, 5), -EINVAL);
	CHECK_EQ(ntbx_link_is_up(a, 0), 1);
	CHECK_EQ(ntbx_link_is_up(a, 3), -EINVAL);
	CHECK_EQ(ntbx_node_alive(a, 1), 1);
	uint64_t up;
	CHECK_EQ(ntbx_link_events(a, &up), 1);   /* first call: port 0 came up */
	CHECK_EQ(up, 1);
	CHECK_EQ(ntbx_link_events(a, &up), 0);   /* nothing changed since */
	CHECK(ntbx_node_epoch(a, 1) >= 1);
}

static void test_windows(struct ntbx_dev *a, struct ntbx_dev *b)
{
	uint64_t aa, sa, max;
	CHECK_EQ(ntbx_mw_count(a, 0), NTBX_MW_COUNT);
	CHECK_EQ(ntbx_mw_get_align(a, 0, 1, &aa, &sa, &max), 0);
	CHECK_EQ(aa, 4096);
	CHECK_EQ(sa, 4096);
	CHECK(max >= ntbx_mem_size(a));
	CHECK_EQ(ntbx_mw_get_align(a, 0, NTBX_MW_COUNT, &aa, &sa, &max), -EINVAL);

	/* Node 1 exposes 64 KiB of its memory through window 1. */
	int64_t off = ntbx_mem_alloc(b, 65536, 4096, "test-window", 0);
	REQUIRE(off > 0);
	void *addr;
	uint64_t size;
	CHECK_EQ(ntbx_mw_clear_trans(b, 0, 1), 0);
	CHECK_EQ(ntbx_peer_mw_get_addr(a, 0, 1, &addr, &size), -ENOTCONN);
	CHECK_EQ(ntbx_mw_set_trans(b, 0, 1, (uint64_t)off + 1, 65536), -EINVAL);
	CHECK_EQ(ntbx_mw_set_trans(b, 0, 1, (uint64_t)off, 65536 + 7), -EINVAL);
	CHECK_EQ(ntbx_mw_set_trans(b, 0, 1, ntbx_mem_size(b), 4096), -EINVAL);
	CHECK_EQ(ntbx_mw_set_trans(b, 0, 1, (uint64_t)off, 65536), 0);
	uint64_t toff, tsize;
	CHECK_EQ(ntbx_mw_get_trans(b, 0, 1, &toff, &tsize), 0);
	CHECK_EQ(toff, off);
	CHECK_EQ(tsize, 65536);
	CHECK_EQ(ntbx_mw_get_trans(b, 0, 2, &toff, &tsize), -EINVAL);
	CHECK_EQ(ntbx_peer_mw_get_addr(a, 0, 1, &addr, &size), 0);
	CHECK_EQ(size, 65536);
	/* Stores through the outbound window land in node 1's memory. */
	memset(addr, 0xab, 100);
	char *mem1 = (char *)ntbx_mem_base(b) + off;
	CHECK(mem1[0] == (char)0xab && mem1[99] == (char)0xab && mem1[100] == 0);
	const char msg[] = "through the cpu path";
	CHECK_EQ(ntbx_cpu_write(a, 0, 1, 200, msg, sizeof msg), 0);
	CHECK(!memcmp(mem1 + 200, msg, sizeof msg));
	CHECK_EQ(ntbx_cpu_write(a, 0, 1, 65536 - 4, msg, sizeof msg), -ERANGE);

	/* DMA: write, then read back, status bit clears on completion. */
	static char src[300000], dst[300000];
	for (size_t i = 0; i < sizeof src; i++)
		src[i] = (char)(i * 7);
	int64_t big = ntbx_mem_alloc(b, sizeof src, 4096, "dma", 0);
	REQUIRE(big > 0);
	uint64_t bsz = NTBX_ALIGN_UP((uint64_t)sizeof src, 4096);
	CHECK_EQ(ntbx_mw_set_trans(b, 0, 1, (uint64_t)big, bsz), 0);
	struct ntbx_dma_op op;
	CHECK_EQ(ntbx_dma_write(a, 0, 1, 0, src, sizeof src, &op), 0);
	CHECK_EQ(ntbx_dma_wait(a, &op, 5000), 0);
	CHECK(ntbx_dma_done(&op));
	CHECK(!memcmp((char *)ntbx_mem_base(b) + big, src, sizeof src));
	CHECK_EQ(ntbx_dma_read(a, 0, 1, 0, dst, sizeof dst, &op), 0);
	CHECK_EQ(ntbx_dma_wait(a, &op, 5000), 0);
	CHECK(!memcmp(dst, src, sizeof src));
	CHECK_EQ(ntbx_dma_write(a, 0, 1, bsz - 10, src, 11, &op), -ERANGE);
	CHECK_EQ(ntbx_dma_write(a, 0, 1, 0, src, 1, NULL), -EINVAL);
	CHECK_EQ(ntbx_mem_free(b, big), 0);
	CHECK_EQ(ntbx_mem_free(b, off), 0);
	ntbx_mw_clear_trans(b, 0, 1);
}

static void test_doorbells(struct ntbx_dev *a, struct ntbx_dev *b)
{
	uint32_t bits, mask;
	CHECK_EQ(ntbx_db_valid_mask(a), 0xffff);
	CHECK_EQ(ntbx_db_clear(b, 0, 0xffff), 0);
	CHECK_EQ(ntbx_db_read(b, 0, &bits), 0);
	CHECK_EQ(bits, 0);
	CHECK_EQ(ntbx_peer_db_set(a, 0, 0x10000), -EINVAL);
	CHECK_EQ(ntbx_peer_db_set(a, 1, 1), -EINVAL);
	CHECK_EQ(ntbx_peer_db_set(a, 0, 0x0005), 0);
	/* the shm backend maps peers' windows: stores are the fast path */
	CHECK_EQ(ntbx_dev_maps_peer_windows(a), 1);
	CHECK_EQ(ntbx_db_read(b, 0, &bits), 0);
	CHECK_EQ(bits, 0x5);
	CHECK_EQ(ntbx_db_read(a, 0, &bits), 0);
	CHECK_EQ(bits, 0);                       /* rang the peer, not us */
	CHECK_EQ(ntbx_db_clear(b, 0, 0x1), 0);
	ntbx_db_read(b, 0, &bits);
	CHECK_EQ(bits, 0x4);
	/* Pending bits end a wait at once; the wait does not clear them. */
	CHECK_EQ(ntbx_db_wait(b, 1, 0x4, 1000), 0);
	CHECK_EQ(ntbx_db_wait(b, 1, 0x8, 50), -ETIMEDOUT);
	/* Masked bits do not wake. */
	CHECK_EQ(ntbx_db_set_mask(b, 0, 0x4), 0);
	CHECK_EQ(ntbx_db_read_mask(b, 0, &mask), 0);
	CHECK_EQ(mask, 0x4);
	CHECK_EQ(ntbx_db_wait(b, 1, 0x4, 50), -ETIMEDOUT);
	CHECK_EQ(ntbx_db_clear_mask(b, 0, 0x4), 0);
	CHECK_EQ(ntbx_db_wait(b, 1, 0x4, 50), 0);
	ntbx_db_clear(b, 0, 0xffff);

	/* The event descriptor polls readable when an unmasked bit comes. */
	int fd = ntbx_db_event_fd(b, 1, 0x2);
	REQUIRE(fd >= 0);
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	CHECK_EQ(poll(&pfd, 1, 0), 0);
	ntbx_peer_db_set(a, 0, 0x1);             /* a bit it does not watch */
	CHECK_EQ(poll(&pfd, 1, 0), 0);
	ntbx_peer_db_set(a, 0, 0x2);
	CHECK_EQ(poll(&pfd, 1, 1000), 1);
	ntbx_db_event_drain(b);
	CHECK_EQ(poll(&pfd, 1, 0), 0);
	ntbx_db_set_mask(b, 0, 0x2);
	ntbx_peer_db_set(a, 0, 0x2);
	CHECK_EQ(poll(&pfd, 1, 0), 0);
	ntbx_db_clear_mask(b, 0, 0x2);           /* pending bit now wakes */
	CHECK_EQ(poll(&pfd, 1, 1000), 1);
	ntbx_db_event_drain(b);
	ntbx_db_clear(b, 0, 0xffff);

	/* A sleeper's own slot: a ring wakes only the slot whose sleeper
	 * waits for its bits (a commit with no wait tells: 0 once woken or
	 * a watched bit is pending, -ETIMEDOUT otherwise). */
	struct ntbx_db_wake *own = NULL;
	CHECK_EQ(ntbx_db_sleeper_open(b, &own), 0);
	REQUIRE(own);
	struct ntbx_db_waiter ws, wo;
	CHECK_EQ(ntbx_db_wait_prepare(b, &ws, 1, 0x4), 0);     /* shared */
	CHECK_EQ(ntbx_db_wait_prepare_own(b, own, &wo, 1, 0x2), 0);
	CHECK(ws.slot != wo.slot);
	ntbx_peer_db_set(a, 0, 0x2);
	CHECK_EQ(ntbx_db_wait_commit(b, &ws, 0), -ETIMEDOUT);  /* not woken */
	CHECK_EQ(ntbx_db_wait_commit(b, &wo, 0), 0);
	ntbx_db_clear(b, 0, 0xffff);
	ntbx_db_wait_finish(b, &wo);
	CHECK_EQ(ntbx_db_wait_prepare_own(b, own, &wo, 1, 0x2), 0);
	ntbx_peer_db_set(a, 0, 0x4);
	CHECK_EQ(ntbx_db_wait_commit(b, &wo, 0), -ETIMEDOUT);  /* not woken */
	CHECK_EQ(ntbx_db_wait_commit(b, &ws, 0), 0);
	ntbx_db_wait_finish(b, &wo);
	ntbx_db_wait_finish(b, &ws);
	ntbx_db_clear(b, 0, 0xffff);
	/* it has no descriptor */
	CHECK_EQ(ntbx_db_wake_prepare(b, own, 1, 0x2), -EINVAL);
	ntbx_db_wake_kick(b, own);
	ntbx_db_wake_close(b, own);

	/* Local set wakes this node's own sleepers. */
	CHECK_EQ(ntbx_db_local_set(b, 0, 0x100), 0);
	CHECK_EQ(ntbx_db_wait(b, 1, 0x100, 1000), 0);
	ntbx_db_clear(b, 0, 0xffff);

	/* Wake keys: two wake objects of one bit, keys 3 and 40, their
	 * sleepers inside the sleep.  A keyed ring wakes the one that
	 * registered its key (and one registered with every key), never the
	 * other; a ring without a key wakes every one of the bit. */
	struct ntbx_db_wake *k3 = NULL, *k40 = NULL, *kall = NULL;
	int f3 = ntbx_db_wake_open(b, &k3), f40 = ntbx_db_wake_open(b, &k40);
	int fall = ntbx_db_wake_open(b, &kall);
	REQUIRE(f3 > 0 && f40 > 0 && fall > 0);
	struct pollfd kp[3] = { { f3, POLLIN, 0 }, { f40, POLLIN, 0 },
	                        { fall, POLLIN, 0 } };
	CHECK_EQ(ntbx_db_local_ring(b, 0, 0x200, 64), -EINVAL);
	CHECK_EQ(ntbx_db_local_ring(b, 0, 0x200, -2), -EINVAL);
	ntbx_db_wake_sleeping(b, k3, 1);
	ntbx_db_wake_sleeping(b, k40, 1);
	ntbx_db_wake_sleeping(b, kall, 1);
	for (int round = 0; round < 3; round++) {
		CHECK_EQ(ntbx_db_wake_prepare_keys(b, k3, 1, 0x200, 1ull << 3), 0);
		CHECK_EQ(ntbx_db_wake_prepare_keys(b, k40, 1, 0x200, 1ull << 40), 0);
		CHECK_EQ(ntbx_db_wake_prepare(b, kall, 1, 0x200), 0);
		CHECK_EQ(poll(kp, 3, 0), 0);
		int key = round == 0 ? 3 : round == 1 ? 40 : NTBX_DB_NO_KEY;
		CHECK_EQ(ntbx_db_local_ring(b, 0, 0x200, key), 0);
		CHECK_EQ(poll(kp, 3, 1000), round == 2 ? 3 : 2);
		CHECK_EQ(!!(kp[0].revents & POLLIN), key != 40);
		CHECK_EQ(!!(kp[1].revents & POLLIN), key != 3);
		CHECK_EQ(!!(kp[2].revents & POLLIN), 1);
		ntbx_db_clear(b, 0, 0xffff);
	}
	/* A loop that is not inside its sleep gets the others' rings of its
	 * bit as a hint (its next sleep returns at once); asleep again, it
	 * does not. */
	ntbx_db_wake_sleeping(b, k40, 0);
	CHECK_EQ(ntbx_db_wake_prepare_keys(b, k3, 1, 0x200, 1ull << 3), 0);
	CHECK_EQ(ntbx_db_wake_prepare_keys(b, k40, 1, 0x200, 1ull << 40), 0);
	CHECK_EQ(ntbx_db_local_ring(b, 0, 0x200, 3), 0);
	CHECK_EQ(poll(kp, 2, 1000), 2);
	ntbx_db_clear(b, 0, 0xffff);
	ntbx_db_wake_sleeping(b, k40, 1);
	CHECK_EQ(ntbx_db_wake_prepare_keys(b, k40, 1, 0x200, 1ull << 40), 0);
	CHECK_EQ(ntbx_db_local_ring(b, 0, 0x200, 3), 0);
	CHECK_EQ(poll(kp + 1, 1, 0), 0);
	ntbx_db_clear(b, 0, 0xffff);
	/* A key does not widen the bits: key 3 on another bit wakes none. */
	CHECK_EQ(ntbx_db_wake_prepare_keys(b, k3, 1, 0x200, 1ull << 3), 0);
	CHECK_EQ(ntbx_db_local_ring(b, 0, 0x400, 3), 0);
	CHECK_EQ(poll(kp, 1, 0), 0);
	ntbx_db_clear(b, 0, 0xffff);
	/* Moved to another bit: woken by that bit (its ringers look the
	 * slot up by bit), no longer by the old one. */
	CHECK_EQ(ntbx_db_wake_prepare_keys(b, k3, 1, 0x400, 1ull << 3), 0);
	CHECK_EQ(ntbx_db_local_ring(b, 0, 0x200, 3), 0);
	CHECK_EQ(poll(kp, 1, 0), 0);
	CHECK_EQ(ntbx_db_local_ring(b, 0, 0x400, 3), 0);
	CHECK_EQ(poll(kp, 1, 1000), 1);
	ntbx_db_clear(b, 0, 0xffff);
	ntbx_db_wake_close(b, k3);
	ntbx_db_wake_close(b, k40);
	ntbx_db_wake_close(b, kall);
}

static void test_spads(struct ntbx_dev *a, struct ntbx_dev *b)
{
	uint32_t v;
	CHECK_EQ(ntbx_spad_count(a, 0), NTBX_SPAD_COUNT);
	CHECK_EQ(ntbx_peer_spad_write(a, 0, 3, 0xdeadbeef), 0);
	CHECK_EQ(ntbx_spad_read(b, 0, 3, &v), 0);
	CHECK_EQ(v, 0xdeadbeef);
	CHECK_EQ(ntbx_peer_spad_read(a, 0, 3, &v), 0);
	CHECK_EQ(v, 0xdeadbeef);
	CHECK_EQ(ntbx_spad_write(b, 0, 7, 42), 0);
	CHECK_EQ(ntbx_peer_spad_read(a, 0, 7, &v), 0);
	CHECK_EQ(v, 42);
	CHECK_EQ(ntbx_spad_read(a, 0, 8, &v), -EINVAL);
	CHECK_EQ(ntbx_peer_spad_write(a, 0, -1, 1), -EINVAL);
}

static void test_memory(struct ntbx_dev *b)
{
	CHECK_EQ(ntbx_mem_alloc(b, 0, 64, "x", 0), -EINVAL);
	CHECK_EQ(ntbx_mem_alloc(b, 64, 100, "x", 0), -EINVAL);
	CHECK_EQ(ntbx_mem_alloc(b, ntbx_mem_size(b) + 1, 64, "x", 0), -EINVAL);
	int64_t x = ntbx_mem_alloc(b, 1000, 64, "x", 1);
	int64_t y = ntbx_mem_alloc(b, 1000, 4096, "y", 0);
	CHECK(x > 0 && y > 0 && x != y);
	CHECK_EQ(y % 4096, 0);
	CHECK(y >= x + 1024 || x >= y + 1024);   /* no overlap (rounded) */
	struct ntbx_mem_block blk[64];
	int n = ntbx_mem_list(b, blk, 64);
	int seen = 0;
	for (int i = 0; i < n && i < 64; i++)
		if (blk[i].off == (uint64_t)x) {
			seen = 1;
			CHECK(!strcmp(blk[i].tag, "x"));
			CHECK_EQ(blk[i].owner_pid, getpid());
		}
	CHECK(seen);
	/* A full window: ENOSPC with a message, nothing lost. */
	int64_t huge = ntbx_mem_alloc(b, ntbx_mem_size(b) - 4096, 64, "huge", 0);
	CHECK_EQ(huge, -ENOSPC);
	CHECK(strstr(ntbx_errmsg(), "full") != NULL);
	CHECK_EQ(ntbx_mem_free(b, x), 0);
	CHECK_EQ(ntbx_mem_free(b, x), -ENOENT);
	CHECK_EQ(ntbx_mem_free(b, y), 0);
	CHECK_EQ(ntbx_mem_reap(b), 0);           /* our own blocks stay */
}

/* The table: every entry usable (scans stop at the highest entry ever
 * used, which must grow as the table fills), no overlap, EMFILE when
 * full, and entries freed anywhere are found again. */
static void test_memory_table(struct ntbx_dev *b)
{
	enum { N = 2048 };   /* SHM_BLOCKS */
	static int64_t off[N + 1];
	int base = ntbx_mem_list(b, NULL, 0);   /* blocks the device holds */
	int got = 0, overlap = 0;
	for (int i = 0; i <= N; i++) {
		off[i] = ntbx_mem_alloc(b, 64, 64, "t", 0);
		if (off[i] < 0)
			break;
		got++;
	}
	CHECK_EQ(got, N - base);
	CHECK_EQ(off[got], -EMFILE);
	for (int i = 1; i < got; i++)   /* 64-byte blocks in a row, all apart */
		overlap += off[i] == off[i - 1];
	CHECK_EQ(overlap, 0);
	CHECK_EQ(ntbx_mem_list(b, NULL, 0), N);
	/* free the last and one in the middle: both come back */
	CHECK_EQ(ntbx_mem_free(b, off[got - 1]), 0);
	CHECK_EQ(ntbx_mem_free(b, off[got / 2]), 0);
	int64_t p = ntbx_mem_alloc(b, 64, 64, "t", 0);
	int64_t q = ntbx_mem_alloc(b, 64, 64, "t", 0);
	CHECK((p == off[got / 2] && q == off[got - 1]) ||
	      (p == off[got - 1] && q == off[got / 2]));
	CHECK_EQ(ntbx_mem_alloc(b, 64, 64, "t", 0), -EMFILE);
	int freed = 0;
	for (int i = got - 1; i >= 0; i--)
		freed += ntbx_mem_free(b, off[i]) == 0;
	CHECK_EQ(freed, got);
	CHECK_EQ(ntbx_mem_list(b, NULL, 0), base);
}

static void test_addrs(struct ntbx_dev *a, struct ntbx_dev *b)
{
	struct ntbx_node_addr in[2] = { { .family = 2, .prefix = 24 },
	                                { .family = 10, .prefix = 64 } };
	in[0].addr[10] = in[0].addr[11] = 0xff;
	in[0].addr[12] = 10; in[0].addr[15] = 7;
	in[1].addr[0] = 0xfd; in[1].addr[15] = 1;
	CHECK_EQ(ntbx_node_set_addrs(b, in, 2), 0);
	struct ntbx_node_addr out[NTBX_NODE_ADDRS];
	CHECK_EQ(ntbx_node_get_addrs(a, 1, out, NTBX_NODE_ADDRS), 2);
	CHECK(!memcmp(out, in, sizeof in));
	CHECK_EQ(ntbx_node_get_addrs(a, 1, out, 1), 1);
	CHECK_EQ(ntbx_node_get_addrs(a, 9, out, 1), -ERANGE);
	CHECK_EQ(ntbx_node_set_addrs(b, in, NTBX_NODE_ADDRS + 1), -EINVAL);
}

static void test_layout_version(void)
{
	th_fabric("oldversion", 2, NTBX_TOPO_SWITCH, 8 << 20, 0);
	char d2[600], path[700];
	ntbx_fabric_dir("oldversion", d2, sizeof d2);
	snprintf(path, sizeof path, "%s/fabric", d2);
	int fd = open(path, O_RDWR);
	REQUIRE(fd >= 0);
	uint32_t v = 999;
	REQUIRE(pwrite(fd, &v, 4, 8) == 4);   /* layout_version follows magic */
	close(fd);
	struct ntbx_dev *d;
	CHECK_EQ(ntbx_dev_open_shm(d2, 0, &d), -EPROTO);
	CHECK(strstr(ntbx_errmsg(), "layout version 999") != NULL);
	CHECK(strstr(ntbx_errmsg(), "ntbx fabric destroy oldversion") != NULL);
	struct ntbx_fabric *f;
	CHECK_EQ(ntbx_fabric_join("oldversion", 0, &f), -EPROTO);
	CHECK_EQ(ntbx_fabric_destroy("oldversion"), 0);   /* the fix works */
	CHECK_EQ(access(d2, F_OK), -1);
}

int main(void)
{
	th_init("dev");
	th_fabric("unit", 2, NTBX_TOPO_SWITCH, 16 << 20, 0);
	ntbx_fabric_dir("unit", dir, sizeof dir);
	test_open_errors();
	struct ntbx_dev *a = open_node(0), *b = open_node(1);
	test_ports(a, b);
	test_windows(a, b);
	test_doorbells(a, b);
	test_spads(a, b);
	test_memory(b);
	test_memory_table(b);
	test_addrs(a, b);
	/* An observer reads without attaching: node 1 dies when b closes. */
	struct ntbx_dev *o;
	REQUIRE(ntbx_dev_observe_shm(dir, 1, &o) == 0);
	uint32_t ep = ntbx_node_epoch(a, 1);
	CHECK_EQ(ntbx_node_alive(o, 1), 1);
	ntbx_dev_close(b);
	CHECK_EQ(ntbx_node_alive(o, 1), 0);
	CHECK_EQ(ntbx_node_alive(a, 1), 0);
	CHECK_EQ(ntbx_link_is_up(a, 0), 0);
	CHECK_EQ(ntbx_db_wait(o, 1, 1, 0), -EPERM);
	CHECK_EQ(ntbx_db_event_fd(o, 1, 1), -EPERM);
	ntbx_dev_close(o);
	REQUIRE(ntbx_dev_observe_shm(dir, 1, &o) == 0);
	CHECK_EQ(ntbx_node_epoch(a, 1), ep);      /* observing did not bump it */
	CHECK_EQ(ntbx_node_alive(a, 1), 0);
	ntbx_dev_close(o);
	ntbx_dev_close(a);
	test_layout_version();
	return th_done("test_dev");
}
