/*
 * A forwarding node dies and comes back.  On a ring of 4, node 0 reaches
 * node 2 through node 1 (and node 2 reaches node 0 through node 3: the
 * tie goes the same way round from both).  Node 1 is killed: both ends
 * waiting on the queue pair get -ECONNRESET within a bounded time, the
 * one whose incoming data crossed node 1 and the one whose outgoing data
 * did, instead of hanging.  Node 1
 * restarts (a new epoch, fresh bypass rings): the neighbours start their
 * side of each bypass ring over, and a new queue pair through node 1
 * carries checksummed data both ways.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "ntbx/qp.h"

#define FAB "restart"
#define BIG (1u << 20)

static int ctl[4][2];     /* parent <-> node, socketpairs */
static int addr[2][2];    /* endpoint address pipes: 0 -> 2 and 2 -> 0 */
static int hold[2];       /* intermediates leave when it closes */

static int put(int fd, char c) { return write(fd, &c, 1) == 1 ? 0 : -1; }
static char get(int fd)
{
	char c = 0;
	return read(fd, &c, 1) == 1 ? c : 0;
}

static uint8_t byte_at(uint64_t i, int from)
{
	return (uint8_t)((i * 2654435761u >> 9) + (unsigned)from * 31);
}

static struct ntbx_fabric *join(int node)
{
	struct ntbx_fabric *f = th_join(FAB, node, 20000);
	if (ntbx_qp_forwarder_start(f, 1) != 1) {
		fprintf(stderr, "node %d: %s\n", node, ntbx_errmsg());
		exit(10);
	}
	return f;
}

static struct ntbx_qp *pair(struct ntbx_fabric *f, int node)
{
	int peer = node ? 0 : 2, w = node ? 1 : 0;
	struct ntbx_qp_opts o = { 256u << 10, 0 };
	return th_qp_to(f, peer, &o, addr[w][1], addr[1 - w][0], NULL, NULL);
}

static int endpoint(void *arg)
{
	int node = (int)(intptr_t)arg, c = ctl[node][1];
	struct ntbx_fabric *f = join(node);
	struct ntbx_qp *qp = pair(f, node);
	char msg[64];
	int eof;
	/* 1. it works through node 1 */
	if (node == 0) {
		CHECK_EQ(ntbx_qp_send(qp, "ping", 4, 0), 4);
		CHECK_EQ(ntbx_qp_recv(qp, msg, sizeof msg, 0, &eof), 4);
	} else {
		CHECK_EQ(ntbx_qp_recv(qp, msg, sizeof msg, 0, &eof), 4);
		CHECK_EQ(ntbx_qp_send(qp, "pong", 4, 0), 4);
	}
	CHECK_EQ(ntbx_qp_hops(qp), 2);
	put(c, 'A');
	/* 2. node 1 was killed: both readers get a reset */
	if (get(c) != 'K')
		return 12;
	unsigned long long t0 = th_now_ns();
	ssize_t r = ntbx_qp_recv(qp, msg, sizeof msg, 0, &eof);
	CHECK_EQ(r, -ECONNRESET);
	CHECK(th_now_ns() - t0 < 5000000000ull);
	put(c, 'b');
	get(c);   /* the other end saw it too: now close */
	ntbx_qp_close(qp, 1);
	put(c, 'B');
	/* 3. node 1 is back: a new queue pair through it works both ways */
	if (get(c) != 'R')
		return 13;
	if (ntbx_fabric_wait_links(f, 20000) < 0)
		return 14;
	qp = pair(f, node);
	uint8_t *buf = malloc(BIG), *in = malloc(BIG);
	for (uint32_t i = 0; i < BIG; i++)
		buf[i] = byte_at(i, node);
	for (int turn = 0; turn < 2; turn++) {
		if ((turn == 0) == (node == 0)) {
			CHECK_EQ(ntbx_qp_send(qp, buf, BIG, 0), BIG);
		} else {
			CHECK_EQ(ntbx_qp_recv(qp, in, BIG, 0, &eof), BIG);
			int bad = 0;
			for (uint32_t i = 0; i < BIG; i++)
				bad += in[i] != byte_at(i, node ? 0 : 2);
			CHECK_EQ(bad, 0);
		}
	}
	put(c, 'C');
	get(c);   /* both ends done before either leaves */
	ntbx_qp_close(qp, 1);
	free(buf);
	free(in);
	ntbx_fabric_leave(f);
	return th_failures ? 1 : 0;
}

static int intermediate(void *arg)
{
	int node = (int)(intptr_t)arg;
	close(hold[1]);
	struct ntbx_fabric *f = join(node);
	put(ctl[node][1], 'U');
	char c;
	while (read(hold[0], &c, 1) > 0)
		;
	ntbx_fabric_leave(f);
	return 0;
}

int main(void)
{
	th_init("qp_restart");
	signal(SIGPIPE, SIG_IGN);
	th_fabric(FAB, 4, NTBX_TOPO_RING, 0, 32ull << 20);
	for (int i = 0; i < 4; i++)
		REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, ctl[i]) == 0);
	REQUIRE(pipe(addr[0]) == 0 && pipe(addr[1]) == 0 && pipe(hold) == 0);
	pid_t pid[4];
	pid[1] = th_spawn(intermediate, (void *)1);
	pid[3] = th_spawn(intermediate, (void *)3);
	pid[0] = th_spawn(endpoint, (void *)0);
	pid[2] = th_spawn(endpoint, (void *)2);
	CHECK_EQ(get(ctl[1][0]), 'U');
	CHECK_EQ(get(ctl[3][0]), 'U');
	CHECK_EQ(get(ctl[0][0]), 'A');
	CHECK_EQ(get(ctl[2][0]), 'A');
	kill(pid[1], SIGKILL);
	CHECK_EQ(th_wait(pid[1]), 128 + SIGKILL);
	put(ctl[0][0], 'K');
	put(ctl[2][0], 'K');
	CHECK_EQ(get(ctl[0][0]), 'b');
	CHECK_EQ(get(ctl[2][0]), 'b');
	put(ctl[0][0], 'c');
	put(ctl[2][0], 'c');
	CHECK_EQ(get(ctl[0][0]), 'B');
	CHECK_EQ(get(ctl[2][0]), 'B');
	pid[1] = th_spawn(intermediate, (void *)1);
	CHECK_EQ(get(ctl[1][0]), 'U');
	put(ctl[0][0], 'R');
	put(ctl[2][0], 'R');
	CHECK_EQ(get(ctl[0][0]), 'C');
	CHECK_EQ(get(ctl[2][0]), 'C');
	put(ctl[0][0], 'D');
	put(ctl[2][0], 'D');
	CHECK_EQ(th_wait(pid[0]), 0);
	CHECK_EQ(th_wait(pid[2]), 0);
	close(hold[1]);
	CHECK_EQ(th_wait(pid[1]), 0);
	CHECK_EQ(th_wait(pid[3]), 0);
	ntbx_fabric_destroy(FAB);
	return th_done("test_qp_ring_restart");
}
