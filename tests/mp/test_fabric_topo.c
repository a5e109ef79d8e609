/*
 * Processes as nodes, on a switch of 2, 4 and 8 nodes and a ring of 2, 3, 4
 * and 5 (a ring of two is one link): every node joins, brings its links up, writes a token into each
 * neighbour's link block through its outbound window, rings it, and waits
 * until every neighbour's token is in its own memory.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "ntbx/fabric.h"

struct node_arg { const char *fabric; int node, nnodes; int topo; };

static uint64_t token(int from, int to) { return 0x7011000000ull | (uint64_t)from << 8 | (uint64_t)to; }

static int node_main(void *p)
{
	struct node_arg *a = p;
	struct ntbx_fabric *f = th_join(a->fabric, a->node, 20000);
	struct ntbx_dev *dev = ntbx_fabric_dev(f);
	int nports = ntbx_port_count(dev);
	if (nports != (a->topo == NTBX_TOPO_RING && a->nnodes > 2 ? 2
	               : a->nnodes - 1))
		return 12;
	/* Routes: a switch is one hop to everyone; a ring the shorter way. */
	for (int d = 0; d < a->nnodes; d++) {
		int port, hops = ntbx_fabric_route(f, d, &port);
		int dist = (d - a->node + a->nnodes) % a->nnodes;
		int want = d == a->node ? 0 : a->topo == NTBX_TOPO_SWITCH ? 1
		           : dist <= a->nnodes - dist ? dist : a->nnodes - dist;
		if (hops != want)
			return 13;
		if (hops == 1 && ntbx_port_peer_node(dev, port) != d)
			return 14;
		/* next_hop walks the same route, neighbour by neighbour. */
		int x = a->node, steps = 0;
		while (x != d && steps <= a->nnodes) {
			int y = ntbx_fabric_next_hop(f, x, d);
			if (y < 0 || (y != d && a->topo == NTBX_TOPO_SWITCH))
				return 19;
			x = y;
			steps++;
		}
		if (x != d || steps != hops)
			return 20;
		/* The way back crosses the same nodes (a tie on an even ring
		 * included), so acknowledgements meet the same forwarders. */
		int path[NTBX_MAX_NODES + 1], n = 0;
		for (x = a->node; n <= hops; x = ntbx_fabric_next_hop(f, x, d))
			path[n++] = x;
		for (x = d; n > 0; x = ntbx_fabric_next_hop(f, x, a->node))
			if (path[--n] != x)
				return 22;
	}
	if (ntbx_fabric_next_hop(f, a->node, a->nnodes) != -ERANGE)
		return 21;
	/* Write a token into each neighbour's link block for us. */
	for (int p = 0; p < nports; p++) {
		void *remote;
		uint64_t off, size;
		if (ntbx_fabric_link_block(f, p, &off, &remote, &size) < 0 || !remote)
			return 15;
		uint64_t t = token(a->node, ntbx_port_peer_node(dev, p));
		__atomic_store_n((uint64_t *)remote, t, __ATOMIC_RELEASE);
		if (ntbx_peer_db_set(dev, p, 1u << 3) < 0)
			return 16;
	}
	/* Wait for every neighbour's token in our own link blocks. */
	uint64_t deadline = th_now_ns() + 20000000000ull;
	for (;;) {
		int got = 0;
		for (int p = 0; p < nports; p++) {
			uint64_t off;
			ntbx_fabric_link_block(f, p, &off, NULL, NULL);
			uint64_t *mine = (uint64_t *)((char *)ntbx_mem_base(dev) + off);
			got += __atomic_load_n(mine, __ATOMIC_ACQUIRE) ==
			       token(ntbx_port_peer_node(dev, p), a->node);
		}
		if (got == nports)
			break;
		if (th_now_ns() > deadline)
			return 17;
		ntbx_db_wait(dev, ~0ull, 1u << 3, 100);
		for (int p = 0; p < nports; p++)
			ntbx_db_clear(dev, p, 1u << 3);
	}
	/* Stay alive until every node has seen its tokens: a neighbour that
	 * exits early would look like link-down to the slower ones. */
	int r = 0;
	for (int p = 0; p < nports && !r; p++) {
		void *remote;
		ntbx_fabric_link_block(f, p, NULL, &remote, NULL);
		__atomic_store_n((uint64_t *)remote + 1, 1, __ATOMIC_RELEASE);
		ntbx_peer_db_set(dev, p, 1u << 4);
	}
	for (;;) {
		int done = 0;
		for (int p = 0; p < nports; p++) {
			uint64_t off;
			ntbx_fabric_link_block(f, p, &off, NULL, NULL);
			done += __atomic_load_n((uint64_t *)((char *)ntbx_mem_base(dev) +
			                                     off) + 1, __ATOMIC_ACQUIRE) == 1;
		}
		if (done == nports)
			break;
		if (th_now_ns() > deadline) {
			r = 18;
			break;
		}
		ntbx_db_wait(dev, ~0ull, 1u << 4, 100);
		for (int p = 0; p < nports; p++)
			ntbx_db_clear(dev, p, 1u << 4);
	}
	ntbx_fabric_leave(f);
	return r;
}

static void run(enum ntbx_topology t, int nodes)
{
	char name[32];
	snprintf(name, sizeof name, "%s%d", ntbx_topology_name(t), nodes);
	th_fabric(name, nodes, t, 32 << 20, 0);
	struct ntbx_fabric_info info;
	CHECK_EQ(ntbx_fabric_info(name, &info), 0);
	CHECK_EQ(info.nodes, nodes);
	CHECK_EQ(info.topology, t);
	struct node_arg args[8];
	pid_t pid[8];
	for (int n = 0; n < nodes; n++) {
		args[n] = (struct node_arg){ name, n, nodes, t };
		pid[n] = th_spawn(node_main, &args[n]);
	}
	for (int n = 0; n < nodes; n++) {
		int rc = th_wait(pid[n]);
		if (rc)
			fprintf(stderr, "%s node %d exited %d\n", name, n, rc);
		CHECK_EQ(rc, 0);
	}
	CHECK_EQ(ntbx_fabric_info(name, &info), 0);
	CHECK_EQ(info.alive_nodes, 0);           /* everyone left */
	CHECK_EQ(ntbx_fabric_destroy(name), 0);
	CHECK_EQ(ntbx_fabric_info(name, &info), -ENOENT);
}

int main(void)
{
	th_init("topo");
	run(NTBX_TOPO_SWITCH, 2);
	run(NTBX_TOPO_SWITCH, 4);
	run(NTBX_TOPO_SWITCH, 8);
	run(NTBX_TOPO_RING, 3);
	run(NTBX_TOPO_RING, 5);
	run(NTBX_TOPO_RING, 4);
	run(NTBX_TOPO_RING, 2);
	/* A ring needs two nodes; names are checked. */
	struct ntbx_fabric_params p = { .nodes = 1, .topology = NTBX_TOPO_RING,
	                                .gid = -1 };
	CHECK_EQ(ntbx_fabric_create("ring1", &p), -EINVAL);
	p.topology = NTBX_TOPO_SWITCH;
	CHECK_EQ(ntbx_fabric_create("bad/name", &p), -EINVAL);
	CHECK_EQ(ntbx_fabric_create("", &p), -EINVAL);
	p.nodes = NTBX_MAX_NODES + 1;
	CHECK_EQ(ntbx_fabric_create("toomany", &p), -EINVAL);
	p.nodes = 2;
	CHECK_EQ(ntbx_fabric_create("twice", &p), 0);
	CHECK_EQ(ntbx_fabric_create("twice", &p), -EEXIST);
	CHECK(strstr(ntbx_errmsg(), "exists") != NULL);
	CHECK_EQ(ntbx_fabric_list(NULL, NULL), 1);
	CHECK_EQ(ntbx_fabric_destroy("twice"), 0);
	CHECK_EQ(ntbx_fabric_destroy("twice"), -ENOENT);
	struct ntbx_fabric *f;
	CHECK_EQ(ntbx_fabric_join("nosuch", 0, &f), -ENOENT);
	CHECK(strstr(ntbx_errmsg(), "nosuch") && strstr(ntbx_errmsg(), "ntbx fabric create"));
	return th_done("test_fabric_topo");
}
