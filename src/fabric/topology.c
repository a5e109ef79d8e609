/* SPDX-License-Identifier: MIT */
/*
 * Topologies: how ports are wired, and routes.
 *
 *   switch  node n's ports lead to every other node in increasing order;
 *   ring    node n's port 0 leads to n-1, port 1 to n+1 (mod N), as two
 *           NTB adapters per host cabled in a loop (seed 002).  A ring of
 *           two is the smallest: the two nodes joined by one link (port 0
 *           each), as two hosts cabled with one adapter each; it has no
 *           forwarding, but runs everything above as a ring does.
 */
#include <errno.h>
#include <string.h>

#include "dev/dev.h"
#include "fabric/fabric_priv.h"

const char *ntbx_topology_name(enum ntbx_topology t)
{
	return t == NTBX_TOPO_RING ? "ring" : "switch";
}

int ntbx_topology_parse(const char *s, enum ntbx_topology *t)
{
	if (!s)
		return -EINVAL;
	if (!strcmp(s, "switch"))
		*t = NTBX_TOPO_SWITCH;
	else if (!strcmp(s, "ring"))
		*t = NTBX_TOPO_RING;
	else
		return -EINVAL;
	return 0;
}

int fab_wire(enum ntbx_topology t, int nodes, struct ntbx_dev_create_params *p)
{
	if (t == NTBX_TOPO_RING) {
		if (nodes < 2)
			return -EINVAL;
		if (nodes == 2) {
			for (int n = 0; n < 2; n++) {
				p->nports[n] = 1;
				p->port_peer[n][0] = (uint8_t)(1 - n);
			}
			return 0;
		}
		for (int n = 0; n < nodes; n++) {
			p->nports[n] = 2;
			p->port_peer[n][0] = (uint8_t)((n + nodes - 1) % nodes);
			p->port_peer[n][1] = (uint8_t)((n + 1) % nodes);
		}
		return 0;
	}
	if (t != NTBX_TOPO_SWITCH || nodes < 2)
		return -EINVAL;
	for (int n = 0; n < nodes; n++) {
		int k = 0;
		for (int m = 0; m < nodes; m++)
			if (m != n)
				p->port_peer[n][k++] = (uint8_t)m;
		p->nports[n] = (uint8_t)k;
	}
	return 0;
}

/* Hops from @from to @dst and the direction: +1 (port 1, increasing
 * node numbers) or -1 (port 0).  A tie (the far side of an even ring)
 * goes the way that makes a->b and b->a cross the same nodes (+1 from the
 * lower number), so a queue pair's acknowledgements come back through
 * the transfer threads that carry its data, not through the other half
 * of the ring. */
static int ring_way(int n, int from, int dst, int *dir)
{
	int right = (dst - from + n) % n, left = n - right;
	*dir = right < left || (right == left && from < dst) ? 1 : -1;
	return right <= left ? right : left;
}

int ntbx_fabric_route(const struct ntbx_fabric *f, int dst, int *port)
{
	if (dst < 0 || dst >= f->nnodes)
		return -ERANGE;
	if (dst == f->node) {
		*port = -1;
		return 0;
	}
	if (f->topo == NTBX_TOPO_SWITCH) {
		*port = ntbx_port_of_node(f->dev, dst);
		return 1;
	}
	int dir, hops = ring_way(f->nnodes, f->node, dst, &dir);
	/* A neighbour is the port that leads to it (in a ring of two, the
	 * one link); further on, the way round the ring. */
	*port = hops == 1 ? ntbx_port_of_node(f->dev, dst) : dir > 0 ? 1 : 0;
	return hops;
}

int ntbx_fabric_next_hop(const struct ntbx_fabric *f, int from, int dst)
{
	if (from < 0 || from >= f->nnodes || dst < 0 || dst >= f->nnodes)
		return -ERANGE;
	if (from == dst || f->topo == NTBX_TOPO_SWITCH)
		return dst;
	int dir;
	ring_way(f->nnodes, from, dst, &dir);
	return (from + dir + f->nnodes) % f->nnodes;
}
