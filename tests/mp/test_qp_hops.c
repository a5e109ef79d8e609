/*
 * Queue pairs across a ring fabric with a forwarder on every node: node 0
 * and node 2 of rings of 4 and 5 nodes are two hops apart (the ring of 3
 * has no non-neighbours: there the queue pair is one hop, with the
 * forwarders running beside it).  Checksummed data both ways, with 1 and 2
 * transfer threads per node.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "ntbx/qp.h"

#define BYTES (3u << 20)

struct node {
	char fabric[32];
	int node, nthreads;
	int wfd, rfd;     /* address pipe to / from the other end (endpoints) */
	int holdfd;       /* intermediates: wait for EOF here, then leave */
	int holdwfd;      /* its write end, closed in every child */
};

static uint8_t byte_at(uint64_t i, int from)
{
	return (uint8_t)((i * 2654435761u >> 11) + (unsigned)from * 77);
}

static int node_main(void *arg)
{
	struct node *n = arg;
	close(n->holdwfd);
	struct ntbx_fabric *f = th_join(n->fabric, n->node, 20000);
	int fw = ntbx_qp_forwarder_start(f, n->nthreads);
	if (fw != 1) {
		fprintf(stderr, "node %d: forwarder_start %d\n", n->node, fw);
		return 11;
	}
	if (n->holdfd >= 0) {
		char c;
		while (read(n->holdfd, &c, 1) > 0)
			;
		ntbx_fabric_leave(f);
		return 0;
	}
	int peer = n->node == 0 ? 2 : 0;
	struct ntbx_qp_opts o = { 64u << 10, 0 };
	struct ntbx_qp *qp = th_qp_to(f, peer, &o, n->wfd, n->rfd, NULL, NULL);
	int port, hops = ntbx_fabric_route(f, peer, &port);
	CHECK_EQ(ntbx_qp_hops(qp), hops);
	/* both write and read at once: write in chunks, read between */
	uint8_t *wb = malloc(100000), *rb = malloc(100000);
	uint64_t sent = 0, got = 0;
	int bad = 0, eof = 0;
	uint64_t r = (uint64_t)n->node * 7 + 1;
	unsigned long long deadline = th_now_ns() + 60000000000ull;
	while ((sent < BYTES || !eof) && th_now_ns() < deadline) {
		if (sent < BYTES) {
			r = r * 6364136223846793005ull + 1442695040888963407ull;
			size_t k = (r >> 33) % 90000 + 1;
			if (k > BYTES - sent)
				k = BYTES - sent;
			for (size_t i = 0; i < k; i++)
				wb[i] = byte_at(sent + i, n->node);
			ssize_t w = ntbx_qp_write(qp, wb, k, NTBX_QP_NONBLOCK);
			if (w > 0)
				sent += (uint64_t)w;
			else if (w != -EAGAIN) {
				fprintf(stderr, "node %d: write %zd\n", n->node, w);
				return 15;
			}
			if (sent == BYTES)
				CHECK_EQ(ntbx_qp_shutdown(qp), 0);
		}
		ssize_t k = ntbx_qp_read(qp, rb, 100000,
		                         sent < BYTES ? NTBX_QP_NONBLOCK : 0);
		if (k > 0) {
			for (ssize_t i = 0; i < k; i++)
				if (rb[i] != byte_at(got + (uint64_t)i, peer))
					bad++;
			got += (uint64_t)k;
		} else if (k == 0) {
			eof = 1;
		} else if (k != -EAGAIN) {
			fprintf(stderr, "node %d: read %zd\n", n->node, k);
			return 16;
		}
	}
	CHECK_EQ(got, BYTES);
	CHECK_EQ(bad, 0);
	CHECK_EQ(eof, 1);
	free(wb);
	free(rb);
	/* both ends done before either node goes away (a node that leaves
	 * with frames still in flight is a node that died: reset) */
	char c = 'd';
	th_xfer(n->wfd, &c, 1, 1);
	th_xfer(n->rfd, &c, 1, 0);
	ntbx_qp_close(qp, 1);
	ntbx_fabric_leave(f);
	return th_failures ? 1 : 0;
}

static void run_ring(int nodes, int nthreads)
{
	struct node n[8];
	pid_t pid[8];
	int a[2], b[2], hold[2];
	REQUIRE(pipe(a) == 0 && pipe(b) == 0 && pipe(hold) == 0);
	char name[32];
	snprintf(name, sizeof name, "qphops%d-%d", nodes, nthreads);
	th_fabric(name, nodes, NTBX_TOPO_RING, 0, 32ull << 20);
	unsigned long long t0 = th_now_ns();
	for (int i = 0; i < nodes; i++) {
		memset(&n[i], 0, sizeof n[i]);
		snprintf(n[i].fabric, sizeof n[i].fabric, "%s", name);
		n[i].node = i;
		n[i].nthreads = nthreads;
		n[i].holdfd = -1;
		n[i].holdwfd = hold[1];
		if (i == 0) {
			n[i].wfd = a[1];
			n[i].rfd = b[0];
		} else if (i == 2) {
			n[i].wfd = b[1];
			n[i].rfd = a[0];
		} else {
			n[i].holdfd = hold[0];
		}
	}
	for (int i = 0; i < nodes; i++) {
		pid[i] = th_spawn(node_main, &n[i]);
	}
	close(hold[0]);
	CHECK_EQ(th_wait(pid[0]), 0);
	CHECK_EQ(th_wait(pid[2]), 0);
	close(hold[1]);
	for (int i = 0; i < nodes; i++)
		if (i != 0 && i != 2)
			CHECK_EQ(th_wait(pid[i]), 0);
	printf("ring of %d, %d thread(s): %.2f s\n", nodes, nthreads,
	       (th_now_ns() - t0) / 1e9);
	close(a[0]); close(a[1]); close(b[0]); close(b[1]);
	ntbx_fabric_destroy(name);
}

int main(void)
{
	th_init("qp_hops");
	run_ring(3, 1);
	run_ring(4, 1);
	run_ring(5, 1);
	run_ring(5, 2);
	return th_done("test_qp_hops");
}
