/* SPDX-License-Identifier: MIT */
/* Joining a fabric as a node, and leaving it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dev/dev.h"
#include "fabric/fabric_priv.h"
#include "util/settings.h"
#include "util/util.h"

/* Which node: NTBX_NODE, else this network namespace's claim. */
static int pick_node(const char *name, const char *dir, int nnodes)
{
	/* STRICT in the table: a bad number fails the join here */
	const char *s = ntbx_setting_given(NTBX_SET_NODE);
	if (s) {
		long v = ntbx_setting_long(NTBX_SET_NODE);
		if (ntbx_setting_bad(NTBX_SET_NODE) || v >= nnodes)
			return ntbx_err(EINVAL, "NTBX_NODE='%s' is not a node of fabric "
			                "'%s': use a number from 0 to %d", s, name,
			                nnodes - 1);
		return (int)v;
	}
	struct stat st;
	uint64_t ns = stat("/proc/self/ns/net", &st) == 0 ? st.st_ino : 1;
	int node = ntbx_dev_fabric_claim_node(dir, ns);
	if (node == -EBUSY)
		return ntbx_err(EBUSY, "every node of fabric '%s' is in use by "
		                "another network namespace; set NTBX_NODE, or create "
		                "the fabric with more --nodes", name);
	if (node < 0)
		return ntbx_err(-node, "fabric '%s': cannot pick a node: %s", name,
		                strerror(-node));
	return node;
}

int ntbx_fabric_join(const char *name, int node, struct ntbx_fabric **out)
{
	struct ntbx_fabric *f = calloc(1, sizeof *f);
	if (!f)
		return -ENOMEM;
	pthread_mutex_init(&f->lock, NULL);
	int r = ntbx_fabric_dir(name, f->dir, sizeof f->dir);
	if (r < 0)
		goto fail;
	snprintf(f->name, sizeof f->name, "%s", name);
	struct ntbx_dev_fabric_desc d;
	r = ntbx_dev_fabric_read(f->dir, &d);
	if (r == -ENOENT) {
		r = ntbx_err(ENOENT, "no fabric '%s' (looked for %s); create it "
		             "with `ntbx fabric create %s --nodes N`", name, f->dir,
		             name);
		goto fail;
	}
	if (r == -EPROTO) {
		r = ntbx_err(EPROTO, "fabric '%s' has layout version %u, this ntbx "
		             "uses %d: destroy it with `ntbx fabric destroy %s` and "
		             "create it again", name, d.layout_version,
		             (int)d.layout_used, name);
		goto fail;
	}
	if (r < 0) {
		/* the device layer said why (owner, symlink, ...) */
		goto fail;
	}
	/* many hosts: this host is the node its agent serves */
	f->spans_hosts = ntbx_dev_fabric_spans_hosts(f->dir);
	if (!f->spans_hosts && node < 0 &&
	    (r = node = pick_node(name, f->dir, (int)d.nnodes)) < 0)
		goto fail;
	if ((r = ntbx_dev_open(f->dir, node, &f->dev)) < 0)
		goto fail;
	node = ntbx_dev_node(f->dev);
	f->node = node;
	f->nnodes = (int)d.nnodes;
	f->topo = d.topology == NTBX_TOPO_RING ? NTBX_TOPO_RING : NTBX_TOPO_SWITCH;
	f->nb = ntbx_mem_base(f->dev);
	if (__atomic_load_n(&f->nb->magic, __ATOMIC_ACQUIRE) != FAB_NODE_MAGIC ||
	    f->nb->version != FAB_VERSION ||
	    f->nb->nports != (uint32_t)ntbx_port_count(f->dev) ||
	    f->nb->link_size > ntbx_mem_size(f->dev)) {
		r = ntbx_err(EPROTO, "fabric '%s': node %d's memory is not laid out "
		             "by this ntbx; destroy the fabric and create it again",
		             name, node);
		goto fail;
	}
	for (int p = 0; p < ntbx_port_count(f->dev); p++)
		if (f->nb->link_off[p] > ntbx_mem_size(f->dev) - f->nb->link_size) {
			r = ntbx_err(EPROTO, "fabric '%s': node %d's memory is corrupt; "
			             "destroy the fabric and create it again", name, node);
			goto fail;
		}
	if ((r = fab_bringup(f)) < 0) {
		r = ntbx_err(-r, "fabric '%s': bring-up of node %d failed: %s", name,
		             node, strerror(-r));
		goto fail;
	}
	fab_record_addrs(f);   /* best effort: a node may have no addresses */
	*out = f;
	return 0;
fail:
	if (f->dev)
		ntbx_dev_close(f->dev);
	pthread_mutex_destroy(&f->lock);
	free(f);
	return r;
}

void ntbx_fabric_leave(struct ntbx_fabric *f)
{
	if (!f)
		return;
	for (;;) {
		pthread_mutex_lock(&f->lock);
		if (!f->nhooks) {
			pthread_mutex_unlock(&f->lock);
			break;
		}
		int i = --f->nhooks;
		void (*fn)(void *) = f->hook[i].fn;
		void *arg = f->hook[i].arg;
		pthread_mutex_unlock(&f->lock);
		fn(arg);
	}
	ntbx_dev_close(f->dev);
	pthread_mutex_destroy(&f->lock);
	free(f);
}

int ntbx_fabric_on_leave(struct ntbx_fabric *f, void (*fn)(void *), void *arg)
{
	pthread_mutex_lock(&f->lock);
	int r = -ENOMEM;
	if (f->nhooks < FAB_MAX_HOOKS) {
		f->hook[f->nhooks].fn = fn;
		f->hook[f->nhooks++].arg = arg;
		r = 0;
	}
	pthread_mutex_unlock(&f->lock);
	return r;
}

struct ntbx_dev *ntbx_fabric_dev(struct ntbx_fabric *f) { return f->dev; }
const char *ntbx_fabric_name(const struct ntbx_fabric *f) { return f->name; }
int ntbx_fabric_node(const struct ntbx_fabric *f) { return f->node; }
int ntbx_fabric_nodes(const struct ntbx_fabric *f) { return f->nnodes; }
int ntbx_fabric_spans_hosts(const struct ntbx_fabric *f) { return f->spans_hosts; }
enum ntbx_topology ntbx_fabric_topology(const struct ntbx_fabric *f)
{
	return f->topo;
}
