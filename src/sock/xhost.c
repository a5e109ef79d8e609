/* SPDX-License-Identifier: MIT */
/*
 * xhost.c — the sockets layer's control plane between hosts (ofi backend).
 *
 * On one host every process of the fabric shares the control table
 * (sock-v5.tab, sock_tab.h).  On a fabric that spans hosts that file is
 * per host, so what a connector and an acceptor on two hosts must tell
 * each other goes through node memory instead, by the rules of the rest
 * of the fabric: write remote, read local.  Each node's link block for a
 * neighbour (ntbx_fabric_link_block_at) has a part that belongs to this
 * layer, NTBX_LINK_SOCK_OFF on; the neighbour writes it by DMA and this
 * node's processes read it (struct skx_box):
 *
 *   l[i]   the neighbour's listeners (its table's listener i), so that a
 *          connect() here knows which of its addresses are interposed;
 *   r[k]   requests of the neighbour's connectors to our listeners, and
 *          later each one's switch (tcp_sent, or the fall back to TCP);
 *   a[k]   the neighbour's acceptors' answers to OUR requests k.
 *
 * Each side keeps a slot of its own in its own host's table, tied to the
 * other by (xk, xtag), and the rest of the layer reads only that slot:
 * skx_sync copies what arrived in the box into it (the connector's
 * SK_REQ -> SK_ACC with the acceptor's endpoint; the acceptor's SK_ACC ->
 * SK_FAB with the connector's TCP count), so the hand-over, the reads of
 * the TCP prefix and the wake-ups are the one-host code.
 *
 * Every record carries its writer's node epoch; a reader takes only those
 * of the writer's current epoch, so what a node's previous incarnation
 * wrote is ignored (bring-up clears the rest of a link block, not this
 * part: a neighbour that published before our node was brought up is
 * never asked to publish again).
 *
 * A record is published with its tag last: tag 0, the body, then the tag,
 * each a DMA write of one handle, which lands in order (the device
 * contract), so a reader that sees a tag sees the body written before
 * it; it reads tag, body, tag and uses the copy only if both tags are the
 * one it expects, and a record rewritten meanwhile (tag 0 first) fails
 * that check.  Everything in the box comes from a peer: copied once,
 * checked (addresses, endpoint node, states), and used from the copy.
 *
 * Why a connection is never lost or duplicated, the argument (see also
 * docs/design-notes.md, "Many hosts: sockets across hosts"):
 *   - a request is in the acceptor's memory before the connector's SYN
 *     leaves (the DMA write is waited for, delivery complete), so the
 *     accept() that the kernel gives that connection finds it;
 *   - only that accept() matches it: the kernel hands a 4-tuple to one
 *     accept, and among requests of one 4-tuple (a port reused after
 *     TIME_WAIT, with a request never withdrawn) the newest tag wins;
 *   - an answer is taken only for the tag of the request it answers, by
 *     the connector's slot of that generation (CAS), so an answer to a
 *     request given up, or to an index reused, is ignored;
 *   - the connector switches once (CAS SK_ACC -> SK_FAB under its write
 *     lock, as on one host) and publishes the count of bytes it sent by
 *     TCP before the switch; the acceptor reads exactly that many from
 *     TCP, then the queue pair.  Any failure before the switch leaves
 *     both on TCP: the connector's SK_TCP is published to the acceptor as
 *     its switch, which then reads everything from TCP.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ntbx/fabric.h"
#include "sock/sock.h"
#include "util/util.h"

#define SKX_LISTENERS 64
#define SKX_REQS      128

struct skx_lst {              /* 32 B */
	uint32_t tag;             /* nonzero: valid; written last */
	uint16_t port;
	uint16_t pad;
	uint8_t ip[16];
	uint32_t epoch;           /* the writer's node epoch */
	uint32_t pad1;
};

struct skx_req {              /* 128 B */
	uint32_t tag;             /* nonzero: a request; written last */
	uint32_t epoch;           /* the writer's node epoch */
	struct sk_addr cl, dst;   /* the connector's address, the listener's */
	struct ntbx_qp_addr qc;   /* the connector's endpoint */
	/* The connector's switch, written once after the request: tcp_sent
	 * and sw_state, then sw_tag (= tag) last. */
	uint64_t tcp_sent;
	uint32_t sw_state;        /* SK_FAB or SK_TCP */
	uint32_t sw_tag;
	uint8_t pad1[128 - 8 - 24 - 24 - 24 - 16];
};

struct skx_ans {              /* 128 B */
	uint32_t tag;             /* the request's tag; written last */
	uint32_t state;           /* SK_ACC or SK_TCP */
	struct ntbx_qp_addr qa;   /* SK_ACC: the acceptor's endpoint */
	char reason[64];          /* SK_TCP: why */
	uint32_t epoch;           /* the writer's node epoch */
	uint8_t pad[128 - 8 - 24 - 64 - 4];
};

struct skx_box {
	struct skx_lst l[SKX_LISTENERS];
	struct skx_req r[SKX_REQS];
	struct skx_ans a[SKX_REQS];
};

_Static_assert(sizeof(struct skx_lst) == 32, "skx_lst");
_Static_assert(sizeof(struct skx_req) == 128, "skx_req");
_Static_assert(sizeof(struct skx_ans) == 128, "skx_ans");
_Static_assert(sizeof(struct skx_box) <= NTBX_LINK_SOCK_SIZE, "skx_box");
_Static_assert(SKX_REQS == sizeof(((struct sk_tab *)0)->xown[0]) /
               sizeof(uint64_t), "xown");

/* ------------------------------------------------------------ the boxes */

/* Our box for @node's writes (read here), or NULL (no link block). */
static struct skx_box *box_local(struct ntbx_fabric *f, int node)
{
	struct ntbx_dev *dev = ntbx_fabric_dev(f);
	int port = ntbx_port_of_node(dev, node);
	uint64_t loff = 0, size = 0;
	if (port < 0)
		return NULL;
	ntbx_fabric_link_block_at(f, port, &loff, NULL, NULL, &size);
	if (size < NTBX_LINK_SOCK_OFF + sizeof(struct skx_box) ||
	    loff > ntbx_mem_size(dev) || size > ntbx_mem_size(dev) - loff)
		return NULL;
	return (struct skx_box *)((char *)ntbx_mem_base(dev) + loff +
	                          NTBX_LINK_SOCK_OFF);
}

/*
 * Write the pieces @n of a record into @node's box for us, in order, and
 * wait for all of them (bounded: 2 s).  0, or -errno (link not ready,
 * DMA failed: the caller stays on TCP).
 */
struct piece { size_t off; const void *p; size_t len; };

static int box_write(struct ntbx_fabric *f, int node, const struct piece *pc,
                     int n)
{
	struct ntbx_dev *dev = ntbx_fabric_dev(f);
	int port = ntbx_port_of_node(dev, node);
	uint64_t roff = 0, size = 0;
	if (port < 0)
		return -EINVAL;
	int r = ntbx_fabric_link_block_at(f, port, NULL, NULL, &roff, &size);
	if (r < 0)
		return r;
	if (size < NTBX_LINK_SOCK_OFF + sizeof(struct skx_box))
		return -ENOSPC;
	struct ntbx_dma_op op[4];
	int posted = 0, rc = 0;
	for (int i = 0; i < n && i < 4; i++) {
		r = ntbx_dma_write(dev, port, 0, roff + NTBX_LINK_SOCK_OFF +
		                   pc[i].off, pc[i].p, pc[i].len, &op[i]);
		if (r < 0) {
			rc = r;
			break;
		}
		posted++;
	}
	for (int i = 0; i < posted; i++) {
		r = ntbx_dma_wait(dev, &op[i], 2000);
		if (r < 0 && !rc)
			rc = r;
	}
	return rc;
}

#define OFF(field) offsetof(struct skx_box, field)

static uint32_t my_epoch(struct ntbx_fabric *f)
{
	return ntbx_node_epoch(ntbx_fabric_dev(f), ntbx_fabric_node(f));
}

/* Is @epoch (from a record of @node) that node's current one? */
static int epoch_ok(struct ntbx_fabric *f, int node, uint32_t epoch)
{
	return epoch && epoch == ntbx_node_epoch(ntbx_fabric_dev(f), node);
}

static const uint32_t zero32;

/* ------------------------------------------------------------ listeners */

/* Our listener @i (state and address as in our table) to @node. */
static uint32_t new_tag(struct sk_tab *t)
{
	uint32_t tag;
	do
		tag = __atomic_add_fetch(&t->xseq, 1, __ATOMIC_RELAXED);
	while (!tag);
	return tag;
}

static void lst_publish(struct ntbx_fabric *f, struct sk_tab *t, int node,
                        int i, const struct sk_listener *l, int on)
{
	struct skx_lst e = { .tag = 0, .port = l->a.port, .epoch = my_epoch(f) };
	memcpy(e.ip, l->a.ip, sizeof e.ip);
	uint32_t tag = new_tag(t);
	struct piece pc[3] = {
		{ OFF(l[i].tag), &zero32, sizeof zero32 },
		{ OFF(l[i].tag) + sizeof e.tag, (char *)&e + sizeof e.tag,
		  sizeof e - sizeof e.tag },
		{ OFF(l[i].tag), &tag, sizeof tag },
	};
	box_write(f, node, pc, on ? 3 : 1);
}

/* Every node but ours whose link is ready, in turn. */
#define EACH_PEER(f, node)                                                   \
	for (int node = 0; node < ntbx_fabric_nodes(f); node++)              \
		if (node != ntbx_fabric_node(f) &&                           \
		    ntbx_fabric_link_ready((f), ntbx_port_of_node(           \
		        ntbx_fabric_dev(f), node)) > 0)

void skx_listener_changed(struct ntbx_fabric *f, struct sk_tab *t, int i)
{
	if (!f || !ntbx_fabric_spans_hosts(f) || i < 0 || i >= SKX_LISTENERS)
		return;
	struct sk_listener l = t->l[i];
	int on = __atomic_load_n(&t->l[i].state, __ATOMIC_ACQUIRE) == 1;
	EACH_PEER(f, node)
		lst_publish(f, t, node, i, &l, on);
}

/*
 * A neighbour that restarted (a new epoch: its link blocks were cleared
 * at its bring-up) learns our listeners again from the first process of
 * ours that connects, accepts or listens afterwards.
 */
void skx_refresh(struct ntbx_fabric *f, struct sk_tab *t)
{
	if (!f || !t || !ntbx_fabric_spans_hosts(f))
		return;
	struct ntbx_dev *dev = ntbx_fabric_dev(f);
	EACH_PEER(f, node) {
		uint32_t ep = ntbx_node_epoch(dev, node);
		uint32_t was = __atomic_load_n(&t->xpub[node], __ATOMIC_ACQUIRE);
		if (was == ep || !__atomic_compare_exchange_n(
		        &t->xpub[node], &was, ep, 0, __ATOMIC_ACQ_REL,
		        __ATOMIC_RELAXED))
			continue;
		/* its box is empty (cleared at its bring-up, or never
		 * written): ours that are registered */
		for (int i = 0; i < SKX_LISTENERS; i++) {
			struct sk_listener l = t->l[i];
			if (__atomic_load_n(&t->l[i].state, __ATOMIC_ACQUIRE) == 1)
				lst_publish(f, t, node, i, &l, 1);
		}
	}
}

/*
 * A process with listeners keeps them published: a neighbour whose first
 * process joins after our listen() (its link is not ready before: its
 * bring-up writes our scratchpads), or that restarts, learns them within
 * 100 ms.  One thread per such process, all signals blocked, looking at
 * the links (a few loads and a mutex) every 100 ms while a neighbour
 * lacks our listeners and every second otherwise.
 */
static struct ntbx_fabric *g_pub_f;
static struct sk_tab *g_pub_t;
static pid_t g_pub_pid;

static int pending(struct ntbx_fabric *f, struct sk_tab *t)
{
	struct ntbx_dev *dev = ntbx_fabric_dev(f);
	for (int node = 0; node < ntbx_fabric_nodes(f); node++) {
		if (node == ntbx_fabric_node(f))
			continue;
		if (ntbx_fabric_link_ready(f, ntbx_port_of_node(dev, node)) <= 0 ||
		    __atomic_load_n(&t->xpub[node], __ATOMIC_ACQUIRE) !=
		    ntbx_node_epoch(dev, node))
			return 1;
	}
	return 0;
}

static void *publisher(void *arg)
{
	(void)arg;
	pid_t me = getpid();
	for (;;) {
		struct ntbx_fabric *f = __atomic_load_n(&g_pub_f, __ATOMIC_ACQUIRE);
		if (!f || sk_fab_mine() != f || g_pub_pid != me)
			return NULL;   /* left the fabric */
		skx_refresh(f, g_pub_t);
		struct timespec ts = { 0, pending(f, g_pub_t) ? 100000000L
		                                               : 999999999L };
		nanosleep(&ts, NULL);
	}
}

void skx_keep_published(struct ntbx_fabric *f, struct sk_tab *t)
{
	if (!f || !t || !ntbx_fabric_spans_hosts(f))
		return;
	pid_t me = getpid();
	pthread_mutex_lock(&sk_lock);
	if (g_pub_pid != me) {
		g_pub_t = t;
		__atomic_store_n(&g_pub_f, f, __ATOMIC_RELEASE);
		g_pub_pid = me;
		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		pthread_t th;
		pthread_attr_t a;
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&th, &a, publisher, NULL) != 0)
			g_pub_pid = 0;
		pthread_attr_destroy(&a);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	pthread_mutex_unlock(&sk_lock);
}

/* Does @node have a listener (interposed) for @dst?  Read from our box. */
int skx_listened(struct ntbx_fabric *f, int node, const struct sk_addr *dst)
{

	if (!f || !ntbx_fabric_spans_hosts(f) || node == ntbx_fabric_node(f) ||
	    ntbx_fabric_link_ready(f, ntbx_port_of_node(ntbx_fabric_dev(f),
	                                                node)) <= 0)
		return 0;
	struct skx_box *b = box_local(f, node);
	if (!b)
		return 0;
	for (int i = 0; i < SKX_LISTENERS; i++) {
		uint32_t tag = __atomic_load_n(&b->l[i].tag, __ATOMIC_ACQUIRE);
		if (!tag)
			continue;
		struct skx_lst e;
		memcpy(&e, &b->l[i], sizeof e);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&b->l[i].tag, __ATOMIC_ACQUIRE) != tag)
			continue;
		struct sk_addr a = { .port = e.port };
		memcpy(a.ip, e.ip, sizeof a.ip);
		if (a.port == dst->port && sk_addr_match(&a, dst) &&
		    epoch_ok(f, node, e.epoch))
			return 1;
	}
	return 0;
}

/* ------------------------------------------------------------ requests */

/* Is xown entry @v free (no slot, or a slot no longer of its generation)? */
static int own_free(struct sk_tab *t, uint64_t v)
{
	if (!v)
		return 1;
	uint32_t slot = (uint32_t)(v & 0xffffffffu) - 1, gen = (uint32_t)(v >> 32);
	if (slot >= SK_CONNS)
		return 1;
	uint64_t sg = __atomic_load_n(&t->c[slot].sg, __ATOMIC_ACQUIRE);
	union { struct { uint32_t s, g; } p; uint64_t w; } u = { .w = sg };
	return u.p.g != gen || u.p.s == SK_FREE;
}

int skx_request(struct ntbx_fabric *f, struct sk_tab *t, int i, int node)
{
	struct sk_conn *c = &t->c[i];
	if (node < 0 || node >= NTBX_MAX_NODES)
		return -EINVAL;
	uint64_t mine = (uint64_t)c->gen << 32 | (uint64_t)(i + 1);
	int k;
	for (k = 0; k < SKX_REQS; k++) {
		uint64_t v = __atomic_load_n(&t->xown[node][k], __ATOMIC_ACQUIRE);
		if (own_free(t, v) &&
		    __atomic_compare_exchange_n(&t->xown[node][k], &v, mine, 0,
		                                __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			break;
	}
	if (k == SKX_REQS)
		return ntbx_err(ENOSPC, "%d requests to node %d in flight already",
		                SKX_REQS, node);
	uint32_t tag = new_tag(t);
	c->xk = (uint32_t)k + 1;
	c->xtag = tag;
	struct skx_req q;
	memset(&q, 0, sizeof q);
	q.epoch = my_epoch(f);
	q.cl = c->cl;
	q.dst = c->dst;
	q.qc = c->qc;
	struct piece pc[3] = {
		{ OFF(r[k].tag), &zero32, sizeof zero32 },
		{ OFF(r[k].tag) + sizeof q.tag, (char *)&q + sizeof q.tag,
		  sizeof q - sizeof q.tag },
		{ OFF(r[k].tag), &tag, sizeof tag },
	};
	int r = box_write(f, node, pc, 3);
	if (r < 0)
		return ntbx_err(-r, "the request could not be written to node %d: "
		                "%s", node, strerror(-r));
	return 0;
}

/* The connector's slot @c (ours, remote) gave its request up. */
void skx_withdraw(struct ntbx_fabric *f, struct sk_conn *c)
{
	uint32_t k = c->xk - 1, node = c->node_a;
	if (!f || !c->xk || k >= SKX_REQS || node >= NTBX_MAX_NODES ||
	    (int)c->node_c != ntbx_fabric_node(f))
		return;
	struct piece pc = { OFF(r[k].tag), &zero32, sizeof zero32 };
	box_write(f, (int)node, &pc, 1);
}

/* The connector's switch (SK_FAB after @tcp_sent bytes by TCP, or SK_TCP). */
void skx_switch(struct ntbx_fabric *f, struct sk_conn *c, uint32_t state)
{
	uint32_t k = c->xk - 1, node = c->node_a;
	if (!f || !c->xk || k >= SKX_REQS || node >= NTBX_MAX_NODES)
		return;
	struct { uint64_t sent; uint32_t state; } sw = { c->tcp_sent, state };
	uint32_t tag = c->xtag;
	_Static_assert(offsetof(struct skx_req, sw_state) ==
	               offsetof(struct skx_req, tcp_sent) + 8, "sw");
	struct piece pc[2] = {
		{ OFF(r[k].tcp_sent), &sw, 12 },
		{ OFF(r[k].sw_tag), &tag, sizeof tag },
	};
	box_write(f, (int)node, pc, 2);
}

/*
 * Acceptor: the request of the connection accepted from @p to our @l,
 * from the node that has address @p (or any neighbour).  Fills @c (our
 * slot, claimed) with it: 1 found, 0 none.
 */
int skx_find(struct ntbx_fabric *f, const struct sk_addr *p,
             const struct sk_addr *l, int pnode, struct sk_conn *c)
{
	if (!f || !ntbx_fabric_spans_hosts(f))
		return 0;
	int best_node = -1, best_k = -1;
	uint32_t best_tag = 0;
	struct skx_req best;
	for (int node = 0; node < ntbx_fabric_nodes(f); node++) {
		if (node == ntbx_fabric_node(f) || (pnode >= 0 && node != pnode))
			continue;
		struct skx_box *b = box_local(f, node);
		if (!b)
			continue;
		for (int k = 0; k < SKX_REQS; k++) {
			uint32_t tag = __atomic_load_n(&b->r[k].tag,
			                               __ATOMIC_ACQUIRE);
			if (!tag)
				continue;
			struct skx_req q;
			memcpy(&q, &b->r[k], sizeof q);
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			if (__atomic_load_n(&b->r[k].tag, __ATOMIC_ACQUIRE) != tag ||
			    q.cl.port != p->port || q.dst.port != l->port ||
			    !sk_addr_match(&q.dst, l) || !sk_addr_match(&q.cl, p) ||
			    q.qc.node != (uint32_t)node ||
			    !epoch_ok(f, node, q.epoch))
				continue;
			/* the newest of one 4-tuple (tags grow per node) */
			if (best_k >= 0 && best_node == node &&
			    (int32_t)(tag - best_tag) < 0)
				continue;
			best = q;
			best_node = node;
			best_k = k;
			best_tag = tag;
		}
	}
	if (best_k < 0)
		return 0;
	c->node_c = (uint32_t)best_node;
	c->node_a = (uint32_t)ntbx_fabric_node(f);
	c->cl = best.cl;
	c->dst = best.dst;
	c->qc = best.qc;
	c->xk = (uint32_t)best_k + 1;
	c->xtag = best_tag;
	return 1;
}

/* Acceptor: answer the request of our slot @c (SK_ACC with our endpoint,
 * or SK_TCP with the reason in c->reason). */
int skx_answer(struct ntbx_fabric *f, struct sk_conn *c, uint32_t state)
{
	uint32_t k = c->xk - 1, node = c->node_c;
	if (!f || !c->xk || k >= SKX_REQS || node >= NTBX_MAX_NODES)
		return -EINVAL;
	struct skx_ans a;
	memset(&a, 0, sizeof a);
	a.state = state;
	a.epoch = my_epoch(f);
	a.qa = c->qa;
	snprintf(a.reason, sizeof a.reason, "%s", c->reason);
	uint32_t tag = c->xtag;
	struct piece pc[3] = {
		{ OFF(a[k].tag), &zero32, sizeof zero32 },
		{ OFF(a[k].tag) + sizeof a.tag, (char *)&a + sizeof a.tag,
		  sizeof a - sizeof a.tag },
		{ OFF(a[k].tag), &tag, sizeof tag },
	};
	return box_write(f, (int)node, pc, 3);
}


/* ------------------------------------------------------------ the bridge */

/*
 * Bring what the other host published into our slot, for the side that
 * waits on it: the connector in SK_REQ for the answer, the acceptor in
 * SK_ACC for the switch.  Cheap when there is nothing to do (two loads).
 */
void skx_sync(struct sk *s, struct sk_conn *c)
{
	uint32_t xk = __atomic_load_n(&c->xk, __ATOMIC_ACQUIRE);
	if (!xk || xk > SKX_REQS)
		return;
	uint64_t sg = __atomic_load_n(&c->sg, __ATOMIC_ACQUIRE);
	union { struct { uint32_t s, g; } p; uint64_t w; } u = { .w = sg };
	if (u.p.g != s->gen)
		return;
	int want = s->role == 'C' ? SK_REQ : SK_ACC;
	if ((int)u.p.s != want)
		return;
	struct ntbx_fabric *f = sk_fab();
	if (!f)
		return;
	int other = (int)(s->role == 'C' ? c->node_a : c->node_c);
	if (other == ntbx_fabric_node(f))
		return;
	struct skx_box *b = box_local(f, other);
	if (!b)
		return;
	uint32_t k = xk - 1, tag = c->xtag;
	if (s->role == 'C') {
		if (__atomic_load_n(&b->a[k].tag, __ATOMIC_ACQUIRE) != tag)
			return;
		struct skx_ans a;
		memcpy(&a, &b->a[k], sizeof a);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&b->a[k].tag, __ATOMIC_ACQUIRE) != tag)
			return;
		a.reason[sizeof a.reason - 1] = 0;
		if (!epoch_ok(f, other, a.epoch))
			return;   /* a previous incarnation's */
		if (a.state == SK_ACC && a.qa.node == (uint32_t)other) {
			c->qa = a.qa;
			sk_slot_cas(c, SK_REQ, s->gen, SK_ACC);
		} else if (sk_slot_cas(c, SK_REQ, s->gen, SK_TCP)) {
			snprintf(c->reason, sizeof c->reason, "node %d: %.48s", other,
			         a.state == SK_TCP ? a.reason : "a bad answer");
			ntbx_log(NTBX_LOG_INFO, "fd %d stays on TCP: %s", s->fd0,
			         c->reason);
		}
		return;
	}
	if (__atomic_load_n(&b->r[k].sw_tag, __ATOMIC_ACQUIRE) != tag)
		return;
	uint64_t sent = b->r[k].tcp_sent;
	uint32_t st = b->r[k].sw_state;
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (__atomic_load_n(&b->r[k].sw_tag, __ATOMIC_ACQUIRE) != tag)
		return;
	if (st == SK_FAB && sent < (1ull << 62)) {
		c->tcp_sent = sent;
		sk_slot_cas(c, SK_ACC, s->gen, SK_FAB);
	} else if (sk_slot_cas(c, SK_ACC, s->gen, SK_TCP)) {
		snprintf(c->reason, sizeof c->reason, "node %d's connector "
		         "stayed on TCP", other);
	}
}

/* Is the other side of remote connection @c reachable?  (Its process's
 * liveness cannot be asked across hosts; its shadow's end of stream and
 * its endpoint's close say when it ends.) */
int skx_peer_alive(struct sk *s, struct sk_conn *c)
{
	struct ntbx_fabric *f = sk_fab();
	int other = (int)(s->role == 'C' ? c->node_a : c->node_c);
	if (!f || other < 0 || other >= ntbx_fabric_nodes(f))
		return 0;
	return ntbx_fabric_link_ready(f, ntbx_port_of_node(ntbx_fabric_dev(f),
	                                                   other)) > 0;
}

/* ------------------------------------------------------------ the fabric */

/* Does the fabric span hosts?  Asked before joining (a connect() must not
 * join for nothing): its directory has the ofi backend's description.
 * Once per process. */
int skx_fabric_spans(void)
{
	static int known = -1;
	int k = __atomic_load_n(&known, __ATOMIC_RELAXED);
	if (k >= 0)
		return k;
	int fd = ntbx_fabric_open_file(sk_cfg.fabric, "ofi.desc", O_RDONLY, 0);
	k = fd >= 0;
	if (fd >= 0)
		sk_real.close(fd);
	__atomic_store_n(&known, k, __ATOMIC_RELAXED);
	return k;
}
