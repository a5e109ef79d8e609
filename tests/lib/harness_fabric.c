/*
 * The harness's fabric set-up (harness.h): create a fabric, join a node,
 * make a queue pair across a pipe or on one node.  Each step that fails
 * says which step, for which node, and why (ntbx_errmsg()), then exits:
 * the test fails at the step that broke, not later on a null handle.
 */
#include "harness.h"

#include <errno.h>

#include "ntbx/dev.h"

/* @node < 0: the test's own process, no node yet. */
static void setup_failed(int node, const char *step, const char *name, int rc)
{
	char who[32] = "";
	if (node >= 0)
		snprintf(who, sizeof who, "node %d: ", node);
	fprintf(stderr, "set-up failed: %s%s %s: %s (%s)\n", who, step, name,
	        ntbx_errmsg(), strerror(rc < 0 ? -rc : EIO));
	exit(TH_EXIT_SETUP);
}

void th_fabric(const char *name, int nodes, enum ntbx_topology topo,
               uint64_t window, uint64_t memory)
{
	struct ntbx_fabric_params p = { .nodes = nodes, .topology = topo,
	                                .window = window, .memory = memory,
	                                .gid = -1 };
	int rc = ntbx_fabric_create(name, &p);
	if (rc)
		setup_failed(-1, "creating fabric", name, rc);
}

struct ntbx_fabric *th_join(const char *name, int node, int links_ms)
{
	struct ntbx_fabric *f;
	int rc = ntbx_fabric_join(name, node, &f);
	if (rc)
		setup_failed(node, "joining fabric", name, rc);
	if (links_ms > 0 && (rc = ntbx_fabric_wait_links(f, links_ms)) < 0)
		setup_failed(node, "waiting for the links of fabric", name, rc);
	return f;
}

struct ntbx_qp *th_qp_exchange(struct ntbx_fabric *f, int peer,
                               const struct ntbx_qp_opts *o, int wfd, int rfd,
                               struct ntbx_qp_addr *me,
                               struct ntbx_qp_addr *other)
{
	struct ntbx_qp *qp;
	struct ntbx_qp_addr m, x;
	int node = ntbx_fabric_node(f);
	char to[32];
	snprintf(to, sizeof to, "to node %d", peer);
	int rc = ntbx_qp_create(f, peer, o, &qp, &m);
	if (rc)
		setup_failed(node, "creating a queue pair", to, rc);
	if (th_xfer(wfd, &m, sizeof m, 1) || th_xfer(rfd, &x, sizeof x, 0)) {
		fprintf(stderr, "set-up failed: node %d: exchanging queue-pair "
		        "addresses %s: the other process is gone\n", node, to);
		exit(TH_EXIT_SETUP);
	}
	if (me)
		*me = m;
	if (other)
		*other = x;
	return qp;
}

struct ntbx_qp *th_qp_to(struct ntbx_fabric *f, int peer,
                         const struct ntbx_qp_opts *o, int wfd, int rfd,
                         struct ntbx_qp_addr *me, struct ntbx_qp_addr *other)
{
	struct ntbx_qp_addr x;
	struct ntbx_qp *qp = th_qp_exchange(f, peer, o, wfd, rfd, me, &x);
	int rc = ntbx_qp_connect(qp, &x);
	if (rc) {
		char to[32];
		snprintf(to, sizeof to, "to node %d", peer);
		setup_failed(ntbx_fabric_node(f), "connecting the queue pair", to, rc);
	}
	if (other)
		*other = x;
	return qp;
}

void th_qp_loopback(struct ntbx_fabric *f, const struct ntbx_qp_opts *o,
                    struct ntbx_qp **a, struct ntbx_qp_addr *aa,
                    struct ntbx_qp **b, struct ntbx_qp_addr *ba)
{
	struct ntbx_qp_addr x, y;
	int node = ntbx_fabric_node(f), rc;
	if ((rc = ntbx_qp_create(f, node, o, a, &x)) ||
	    (rc = ntbx_qp_create(f, node, o, b, &y)))
		setup_failed(node, "creating a queue pair", "to itself", rc);
	if ((rc = ntbx_qp_connect(*a, &y)) || (rc = ntbx_qp_connect(*b, &x)))
		setup_failed(node, "connecting the queue pair", "to itself", rc);
	if (aa)
		*aa = x;
	if (ba)
		*ba = y;
}
