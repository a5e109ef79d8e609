/* SPDX-License-Identifier: MIT */
/*
 * tests/ofi/ofidev — the ofi backend at the device API (ntbx/dev.h), run on
 * each of two hosts by tests/ofi_dev.sh (and bench/ofi.sh for numbers).
 *
 *   ofidev FABRIC up MS              wait until the link to the peer is up
 *   ofidev FABRIC a | b              the round trips (a: node 0, b: node 1):
 *       a rings b with a scratchpad written, b checks it and reads a's own
 *       scratchpad back (an RMA read), translates a 1 MiB window and
 *       answers; a writes 1 MiB into it from private memory (staged) and
 *       64 KiB from node memory (zero copy), reads it all back, and b
 *       checks every byte
 *   ofidev FABRIC fork-a | fork-b     a child kept with ntbx_dev_fork_*
 *                                    reads b's window by DMA and rings b
 *   ofidev FABRIC pingpong-a N [sleep] | pingpong-b N [sleep]
 *                                    doorbell round trips, polling; a prints
 *                                    the one-way p50 and p99 in us
 *   ofidev FABRIC bw-a SIZE MIB [private] | bw-b SIZE
 *                                    DMA writes of SIZE from node memory
 *                                    (or private memory: staged), 4 MiB in
 *                                    flight; a prints GB/s
 *   ofidev FABRIC down MS            wait for the link to go down; prints
 *                                    the CLOCK_REALTIME (ns) it saw that
 *   ofidev FABRIC noagent            open must fail naming the agent
 *   ofidev FABRIC join               join the fabric (its bring-up writes the
 *                                    peer's scratchpads) and leave at once
 * Exit 0 ok, 1 failure (a line on stderr).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dev/ofi/ofi.h"
#include "ntbx/dev.h"
#include "ntbx/fabric.h"

static const char *fab;
static struct ntbx_dev *dev;

#define DIE(...) do { fprintf(stderr, "ofidev %s: ", fab); \
	fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); exit(1); } while (0)
#define CHECK(c, ...) do { if (!(c)) DIE(__VA_ARGS__); } while (0)

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static char dir[512];

static void open_dev(void)
{
	CHECK(ntbx_fabric_dir(fab, dir, sizeof dir) == 0, "%s", ntbx_errmsg());
	int r = ntbx_dev_open_ofi(dir, -1, &dev);
	CHECK(r == 0, "open: %s", ntbx_errmsg()[0] ? ntbx_errmsg() : strerror(-r));
	CHECK(!ntbx_dev_maps_peer_windows(dev), "the ofi backend maps peer windows?");
}

/* Why the link is down, as the agent says. */
static const char *why(int node)
{
	static char buf[128];
	struct ofi_desc_file d;
	(void)d;
	buf[0] = 0;
	/* the agent's words live in ofi.ctl, which this test may read */
	FILE *f = NULL;
	char path[600];
	snprintf(path, sizeof path, "%s/ofi.ctl", dir);
	if ((f = fopen(path, "r"))) {
		long off = (long)offsetof(struct ofi_ctl, node) +
		           (long)node * (long)sizeof(struct ofi_peer_state) +
		           (long)offsetof(struct ofi_peer_state, why);
		if (fseek(f, off, SEEK_SET) == 0 &&
		    fread(buf, 1, sizeof buf - 1, f) > 0)
			buf[112] = 0;
		fclose(f);
	}
	return buf;
}

static void wait_up(int ms)
{
	uint64_t until = now_ns() + (uint64_t)ms * 1000000ull;
	while (ntbx_link_is_up(dev, 0) != 1) {
		if (now_ns() > until)
			DIE("link to node %d not up after %d ms: %s",
			    ntbx_port_peer_node(dev, 0), ms, why(ntbx_port_peer_node(dev, 0)));
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);   /* polling a condition, bounded */
	}
}

/* Wait for doorbell @bit on port 0 (bounded), clear it. */
static void wait_db(int bit, int ms)
{
	uint64_t until = now_ns() + (uint64_t)ms * 1000000ull;
	for (;;) {
		uint32_t db;
		ntbx_db_read(dev, 0, &db);
		if (db >> bit & 1) {
			ntbx_db_clear(dev, 0, 1u << bit);
			return;
		}
		if (now_ns() > until)
			DIE("no doorbell bit %d within %d ms (link %s)", bit, ms,
			    ntbx_link_is_up(dev, 0) == 1 ? "up" : "down");
		ntbx_db_wait(dev, 1, 1u << bit, 100);
	}
}

/* Spin for doorbell @bit (the latency test), bounded. */
static void poll_db(int bit)
{
	uint64_t until = 0;
	for (unsigned k = 0;; k++) {
		uint32_t db;
		ntbx_db_read(dev, 0, &db);
		if (db >> bit & 1) {
			ntbx_db_clear(dev, 0, 1u << bit);
			return;
		}
		if ((k & 4095) == 4095) {
			uint64_t t = now_ns();
			if (!until)
				until = t + 5000000000ull;
			else if (t > until)
				DIE("no doorbell bit %d within 5 s", bit);
		}
	}
}

static uint8_t pat(size_t i, int round) { return (uint8_t)(i * 131 + (i >> 10) + round * 7 + 1); }

#define WIN (1u << 20)
#define TAIL (64u << 10)

static void side_a(void)
{
	ntbx_spad_write(dev, 0, 5, 0x5a5a0005u);   /* our own: b reads it */
	CHECK(ntbx_peer_spad_write(dev, 0, 3, 0xa5a50001u) == 0, "peer_spad_write");
	CHECK(ntbx_peer_db_set(dev, 0, 1u << 0) == 0, "peer_db_set");
	wait_db(1, 10000);
	uint32_t v;
	ntbx_spad_read(dev, 0, 4, &v);
	CHECK(v == 0xa5a50002u, "scratchpad 4 is 0x%08x, b wrote 0xa5a50002", v);
	uint64_t sz = 0;
	int r = ntbx_peer_mw_size(dev, 0, 0, &sz);
	CHECK(r == 0 && sz == WIN, "peer window 0: %d, size %llu", r,
	      (unsigned long long)sz);
	/* 1 MiB from private memory: staged */
	uint8_t *buf = malloc(WIN), *back = malloc(WIN);
	CHECK(buf && back, "malloc");
	for (size_t i = 0; i < WIN; i++)
		buf[i] = pat(i, 0);
	struct ntbx_dma_op op;
	CHECK(ntbx_dma_write(dev, 0, 0, 0, buf, WIN, &op) == 0, "dma_write");
	r = ntbx_dma_wait(dev, &op, 10000);
	CHECK(r == 0, "dma_write of 1 MiB: %d (%s)", r, strerror(-r));
	/* the last 64 KiB again, from node memory: zero copy */
	int64_t off = ntbx_mem_alloc(dev, TAIL, 4096, "ofidev", 1);
	CHECK(off >= 0, "mem_alloc: %lld", (long long)off);
	uint8_t *nm = (uint8_t *)ntbx_mem_base(dev) + off;
	for (size_t i = 0; i < TAIL; i++)
		nm[i] = buf[WIN - TAIL + i] = pat(WIN - TAIL + i, 1);
	CHECK(ntbx_dma_write(dev, 0, 0, WIN - TAIL, nm, TAIL, &op) == 0, "dma_write");
	CHECK(ntbx_dma_wait(dev, &op, 10000) == 0, "dma_write of 64 KiB");
	/* out of range is refused at submit */
	CHECK(ntbx_dma_write(dev, 0, 0, WIN - 8, buf, 16, &op) == -ERANGE,
	      "a write past the window was not refused");
	/* and all of it read back */
	memset(back, 0, WIN);
	CHECK(ntbx_dma_read(dev, 0, 0, 0, back, WIN, &op) == 0, "dma_read");
	r = ntbx_dma_wait(dev, &op, 10000);
	CHECK(r == 0, "dma_read of 1 MiB: %d", r);
	for (size_t i = 0; i < WIN; i++)
		CHECK(back[i] == buf[i], "read back: byte %zu is %u, wrote %u", i,
		      back[i], buf[i]);
	CHECK(ntbx_peer_db_set(dev, 0, 1u << 2) == 0, "peer_db_set");
	wait_db(3, 10000);
	printf("a: scratchpads, doorbells, 1 MiB staged write + 64 KiB zero-copy "
	       "write + 1 MiB read back: ok\n");
	free(buf);
	free(back);
}

static void side_b(void)
{
	wait_db(0, 10000);
	uint32_t v;
	ntbx_spad_read(dev, 0, 3, &v);
	CHECK(v == 0xa5a50001u, "scratchpad 3 is 0x%08x, a wrote 0xa5a50001", v);
	uint32_t pv = 0;
	CHECK(ntbx_peer_spad_read(dev, 0, 5, &pv) == 0 && pv == 0x5a5a0005u,
	      "peer scratchpad 5 reads 0x%08x, a has 0x5a5a0005", pv);
	int64_t off = ntbx_mem_alloc(dev, WIN, 4096, "ofidev-win", 1);
	CHECK(off >= 0, "mem_alloc");
	uint8_t *m = (uint8_t *)ntbx_mem_base(dev) + off;
	memset(m, 0, WIN);
	CHECK(ntbx_mw_set_trans(dev, 0, 0, (uint64_t)off, WIN) == 0, "mw_set_trans");
	CHECK(ntbx_peer_spad_write(dev, 0, 4, v + 1) == 0, "peer_spad_write");
	CHECK(ntbx_peer_db_set(dev, 0, 1u << 1) == 0, "peer_db_set");
	wait_db(2, 20000);
	for (size_t i = 0; i < WIN; i++) {
		uint8_t want = pat(i, i >= WIN - TAIL ? 1 : 0);
		CHECK(m[i] == want, "byte %zu of the window is %u, want %u", i, m[i],
		      want);
	}
	CHECK(ntbx_peer_db_set(dev, 0, 1u << 3) == 0, "peer_db_set");
	printf("b: %u bytes verified\n", WIN);
}

/* fork: a child kept with ntbx_dev_fork_* reads b's window by DMA and rings
 * b; then the parent rings b too. */
static void fork_a(void)
{
	wait_db(10, 10000);
	CHECK(ntbx_dev_fork_prepare(dev) == 0, "fork_prepare: %s", ntbx_errmsg());
	pid_t pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		if (ntbx_dev_fork_child(dev) < 0 ||
		    ntbx_dev_fork_identity(dev) < 0) {
			fprintf(stderr, "fork_child: %s\n", ntbx_errmsg());
			_exit(1);
		}
		uint8_t *buf = malloc(TAIL);
		struct ntbx_dma_op op;
		if (!buf || ntbx_dma_read(dev, 0, 0, 0, buf, TAIL, &op) ||
		    ntbx_dma_wait(dev, &op, 10000)) {
			fprintf(stderr, "child: dma_read failed\n");
			_exit(1);
		}
		for (size_t i = 0; i < TAIL; i++)
			if (buf[i] != pat(i, 2)) {
				fprintf(stderr, "child: byte %zu is %u\n", i, buf[i]);
				_exit(1);
			}
		free(buf);
		ntbx_peer_spad_write(dev, 0, 6, 0xc0ffee01u);
		ntbx_peer_db_set(dev, 0, 1u << 8);
		ntbx_dev_close(dev);
		_exit(0);
	}
	ntbx_dev_fork_parent(dev);
	int st = 0;
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "the child failed (status 0x%x)", st);
	CHECK(ntbx_peer_db_set(dev, 0, 1u << 9) == 0, "parent: peer_db_set");
	printf("a: a forked child read 64 KiB by DMA and rang, then the parent\n");
}

static void fork_b(void)
{
	int64_t off = ntbx_mem_alloc(dev, TAIL, 4096, "ofidev-fork", 1);
	CHECK(off >= 0, "mem_alloc");
	uint8_t *m = (uint8_t *)ntbx_mem_base(dev) + off;
	for (size_t i = 0; i < TAIL; i++)
		m[i] = pat(i, 2);
	CHECK(ntbx_mw_set_trans(dev, 0, 0, (uint64_t)off, TAIL) == 0, "mw_set_trans");
	CHECK(ntbx_peer_db_set(dev, 0, 1u << 10) == 0, "peer_db_set");
	wait_db(8, 20000);
	uint32_t v;
	ntbx_spad_read(dev, 0, 6, &v);
	CHECK(v == 0xc0ffee01u, "scratchpad 6 is 0x%08x, the child wrote 0xc0ffee01", v);
	wait_db(9, 20000);
	printf("b: the child's scratchpad and doorbell, then the parent's: ok\n");
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int pp_sleep;   /* wait for the doorbell asleep, not polling */

static void pp_wait(int bit)
{
	if (!pp_sleep) {
		poll_db(bit);
		return;
	}
	uint64_t until = now_ns() + 5000000000ull;
	for (;;) {
		uint32_t db;
		ntbx_db_read(dev, 0, &db);
		if (db >> bit & 1) {
			ntbx_db_clear(dev, 0, 1u << bit);
			return;
		}
		CHECK(now_ns() < until, "no doorbell bit %d within 5 s", bit);
		ntbx_db_wait(dev, 1, 1u << bit, 100);
	}
}

static void pingpong(int a, int n)
{
	uint64_t *t = calloc((size_t)n, sizeof *t);
	CHECK(t, "calloc");
	int warm = n / 10 + 1;
	for (int i = -warm; i < n; i++) {
		if (a) {
			uint64_t t0 = now_ns();
			ntbx_peer_db_set(dev, 0, 1u << 4);
			pp_wait(5);
			if (i >= 0)
				t[i] = now_ns() - t0;
		} else {
			pp_wait(4);
			ntbx_peer_db_set(dev, 0, 1u << 5);
		}
	}
	if (a) {
		qsort(t, (size_t)n, sizeof *t, cmp_u64);
		printf("doorbell one-way p50 %.2f us p99 %.2f us (%d round trips, "
		       "%s)\n", t[n / 2] / 2e3, t[n * 99 / 100] / 2e3, n,
		       pp_sleep ? "waiting asleep" : "polling");
	}
	free(t);
}

static int bw_private;   /* from private memory: staged */

static void bw(int a, uint64_t size, uint64_t mib)
{
	uint64_t win = size * 64 > (4u << 20) ? size * 64 : (4u << 20);
	if (win > (64u << 20))
		win = 64u << 20;
	if (!a) {
		int64_t off = ntbx_mem_alloc(dev, win, 4096, "ofidev-bw", 1);
		CHECK(off >= 0, "mem_alloc");
		CHECK(ntbx_mw_set_trans(dev, 0, 1, (uint64_t)off, win) == 0, "mw_set_trans");
		ntbx_peer_db_set(dev, 0, 1u << 6);
		wait_db(7, 600000);
		return;
	}
	wait_db(6, 10000);
	int64_t off = ntbx_mem_alloc(dev, win, 4096, "ofidev-bw", 1);
	CHECK(off >= 0, "mem_alloc");
	uint8_t *src = (uint8_t *)ntbx_mem_base(dev) + off;
	if (bw_private) {
		src = malloc(win);
		CHECK(src, "malloc");
	}
	memset(src, 0x5a, win);
	uint64_t total = mib << 20, count = total / size;
	if (count < 16)
		count = 16;
	int depth = (int)((4u << 20) / size);
	if (depth < 2)
		depth = 2;
	if (depth > 60)
		depth = 60;
	struct ntbx_dma_op *ops = calloc((size_t)depth, sizeof *ops);
	uint64_t slots = win / size;
	uint64_t t0 = 0;
	uint64_t warm = count / 10 + 2;
	for (uint64_t i = 0; i < count + warm; i++) {
		if (i == warm) {
			for (int k = 0; k < depth; k++)
				if (i >= (uint64_t)depth || (uint64_t)k < i)
					CHECK(ntbx_dma_wait(dev, &ops[k], 10000) == 0, "dma");
			t0 = now_ns();
		}
		struct ntbx_dma_op *op = &ops[i % (uint64_t)depth];
		if (i >= (uint64_t)depth && !(i == warm))
			CHECK(ntbx_dma_wait(dev, op, 10000) == 0, "dma write failed");
		uint64_t o = (i % slots) * size;
		CHECK(ntbx_dma_write(dev, 0, 1, o, src + o, size, op) == 0, "dma_write");
	}
	for (int k = 0; k < depth; k++)
		CHECK(ntbx_dma_wait(dev, &ops[k], 10000) == 0, "dma write failed");
	double s = (double)(now_ns() - t0) / 1e9;
	printf("dma write %llu B: %.3f GB/s (%llu writes, %d in flight, from %s)\n",
	       (unsigned long long)size, (double)(count * size) / s / 1e9,
	       (unsigned long long)count, depth,
	       bw_private ? "private memory, staged" : "node memory");
	if (bw_private)
		free(src);
	ntbx_peer_db_set(dev, 0, 1u << 7);
	free(ops);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: ofidev FABRIC up MS|a|b|pingpong-a N|pingpong-b N|"
		        "bw-a SIZE MIB|bw-b SIZE|down MS|noagent|join\n");
		return 2;
	}
	fab = argv[1];
	const char *m = argv[2];
	if (!strcmp(m, "noagent")) {
		CHECK(ntbx_fabric_dir(fab, dir, sizeof dir) == 0, "%s", ntbx_errmsg());
		int r = ntbx_dev_open_ofi(dir, -1, &dev);
		CHECK(r == -ENOLINK, "open without an agent gave %d", r);
		printf("%s\n", ntbx_errmsg());
		return 0;
	}
	open_dev();
	if (!strcmp(m, "join")) {
		int node = ntbx_dev_node(dev);
		ntbx_dev_close(dev);
		struct ntbx_fabric *f;
		int r = ntbx_fabric_join(fab, node, &f);
		CHECK(r == 0, "join: %s", ntbx_errmsg());
		printf("node %d joined and left\n", node);
		ntbx_fabric_leave(f);
		return 0;
	}
	int arg = argc > 3 ? atoi(argv[3]) : 0;
	if (!strcmp(m, "up")) {
		wait_up(arg ? arg : 10000);
		printf("node %d: link to node %d up, epoch %u\n", ntbx_dev_node(dev),
		       ntbx_port_peer_node(dev, 0),
		       ntbx_node_epoch(dev, ntbx_port_peer_node(dev, 0)));
	} else if (!strcmp(m, "a") || !strcmp(m, "b")) {
		wait_up(10000);
		if (m[0] == 'a')
			side_a();
		else
			side_b();
	} else if (!strcmp(m, "fork-a") || !strcmp(m, "fork-b")) {
		wait_up(10000);
		if (m[5] == 'a')
			fork_a();
		else
			fork_b();
	} else if (!strcmp(m, "pingpong-a") || !strcmp(m, "pingpong-b")) {
		wait_up(10000);
		pp_sleep = argc > 4 && !strcmp(argv[4], "sleep");
		pingpong(m[9] == 'a', arg ? arg : 10000);
	} else if (!strcmp(m, "bw-a") || !strcmp(m, "bw-b")) {
		wait_up(10000);
		uint64_t size = (uint64_t)strtoull(argv[3], NULL, 0);
		CHECK(size >= 64 && size <= (16u << 20), "bad size");
		bw_private = argc > 5 && !strcmp(argv[5], "private");
		bw(m[3] == 'a', size, argc > 4 ? strtoull(argv[4], NULL, 0) : 512);
	} else if (!strcmp(m, "down")) {
		wait_up(10000);
		printf("up\n");
		fflush(stdout);
		uint64_t until = now_ns() + (uint64_t)(arg ? arg : 10000) * 1000000ull;
		while (ntbx_link_is_up(dev, 0) == 1) {
			CHECK(now_ns() < until, "link still up after %d ms", arg);
			struct timespec ts = { 0, 1000000 };
			nanosleep(&ts, NULL);
		}
		struct timespec rt;
		clock_gettime(CLOCK_REALTIME, &rt);
		int r = ntbx_peer_db_set(dev, 0, 1);
		CHECK(r == -ENOLINK, "peer_db_set on a down link gave %d", r);
		printf("down %llu: %s\n",
		       (unsigned long long)rt.tv_sec * 1000000000ull + (unsigned long long)rt.tv_nsec,
		       why(ntbx_port_peer_node(dev, 0)));
	} else {
		DIE("unknown mode %s", m);
	}
	ntbx_dev_close(dev);
	return 0;
}
