/* SPDX-License-Identifier: MIT */
/*
 * proto.c — the connection protocol: the connector's request and the
 * acceptor's answer (negotiation), then the switch of the stream from its
 * shadow TCP connection to the queue pair (upgrade).  Separate because
 * this is the one place where a TCP connection becomes a fabric one; the
 * listeners it matches are listen.c's, the slots it changes table.c's.
 *
 * Protocol (no byte ever goes in band on the TCP stream):
 *  1. listen() under the preload registers ip:port in the fabric's table.
 *  2. connect() to a registered listener: the connector binds an ephemeral
 *     port if it has none, makes its queue-pair endpoint, publishes a
 *     request keyed by its port and the listener's address (before the
 *     kernel connect, so the acceptor always finds it), then connects the
 *     shadow TCP socket as usual (nonblocking connect: EINPROGRESS).
 *  3. accept() looks the accepted 4-tuple up; if found it makes its own
 *     endpoint, connects it to the connector's and answers (SK_ACC).  From
 *     then on the acceptor writes on the fabric.  Otherwise: plain TCP.
 *  4. The connector keeps writing by TCP (counted) until it sees the
 *     answer (a connector asleep in a read or a poll is rung at the
 *     acceptor's first write); then it connects its endpoint, publishes
 *     the count and switches (SK_FAB).  The acceptor reads that many
 *     bytes from TCP, then the queue pair.  So a program that connects,
 *     writes and accepts in one thread never blocks, and a stale
 *     registration or a listener that is not interposed costs nothing:
 *     the connector stays on TCP, and falls back for good when the
 *     server sends TCP data.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ntbx/fabric.h"
#include "sock/sock.h"
#include "util/util.h"

/* ------------------------------------------------------------ connect */

int sk_connect(int fd, const struct sockaddr *sa, socklen_t len)
{
	int fam;
	struct sk_addr dst;
	if (!sk_cfg.on || fd < 0 || fd >= sk_nfds || sk_get_checked(fd) ||
	    sk_addr_of(sa, len, &dst) < 0 || !sk_tcp_socket(fd, &fam))
		return sk_real.connect(fd, sa, len);
	if (!sk_port_ok(dst.port))
		return sk_real.connect(fd, sa, len);
	struct sk_tab *t = sk_tab(0);
	int loop = sk_addr_loop(&dst);
	/* Any listener on that port at all?  (No join otherwise.)  On a
	 * fabric that spans hosts our table has this host's listeners only:
	 * the others' are in node memory (xhost.c), looked at once joined. */
	int other_hosts = !loop && skx_fabric_spans();
	if ((!t || !sk_port_listened(t, dst.port)) && !other_hosts)
		return sk_real.connect(fd, sa, len);
	struct ntbx_fabric *f = sk_fab();
	if (!f)
		return sk_real.connect(fd, sa, len);
	int node = loop ? -1 : ntbx_fabric_node_of_addr(f, sa, len);
	if (!loop && node < 0)
		return sk_real.connect(fd, sa, len);
	int remote = other_hosts && ntbx_fabric_spans_hosts(f) &&
	             node != ntbx_fabric_node(f);
	if (remote) {
		t = sk_tab(1);
		skx_refresh(f, t);
		if (!t || !skx_listened(f, node, &dst))
			return sk_real.connect(fd, sa, len);
	}
	int li = -1;
	for (int i = 0; i < SK_LISTENERS && t && !remote; i++) {
		struct sk_listener *l = &t->l[i];
		if (__atomic_load_n(&l->state, __ATOMIC_ACQUIRE) != 1 ||
		    l->a.port != dst.port || !sk_addr_match(&l->a, &dst))
			continue;
		if (loop ? l->netns != sk_netns : (int)l->node != node)
			continue;
		if (!sk_id_may_live(__atomic_load_n(&l->id, __ATOMIC_ACQUIRE)))
			continue;
		li = i;
		break;
	}
	if (li < 0 && !remote)
		return sk_real.connect(fd, sa, len);
	if (!remote)
		node = (int)t->l[li].node;
	char ds[80];
	sk_addr_str(&dst, ds, sizeof ds);
	/* Our port must be known before the kernel connects.  Most
	 * connecting sockets are unbound: bind one to an ephemeral port
	 * first (a bound one refuses with EINVAL) and ask the port once,
	 * rather than ask, bind, and ask again. */
	struct sockaddr_storage ss, any6;
	memset(&any6, 0, sizeof any6);
	any6.ss_family = (sa_family_t)fam;
	socklen_t al = fam == AF_INET ? sizeof(struct sockaddr_in)
	                              : sizeof(struct sockaddr_in6);
	socklen_t sl = sizeof ss;
	struct sk_addr me;
	int bound = sk_real.bind(fd, (struct sockaddr *)&any6, al) == 0;
	if ((!bound && errno != EINVAL) ||
	    getsockname(fd, (struct sockaddr *)&ss, &sl) < 0 ||
	    sk_addr_of((struct sockaddr *)&ss, sl, &me) < 0 || me.port == 0) {
		ntbx_log(NTBX_LOG_INFO, "connection to %s stays on TCP: "
		         "cannot bind a local port: %s", ds, strerror(errno));
		return sk_real.connect(fd, sa, len);
	}
	int i = sk_slot_claim(t);
	if (i < 0) {
		ntbx_log(NTBX_LOG_INFO, "connection to %s stays on TCP: "
		         "connection table full", ds);
		return sk_real.connect(fd, sa, len);
	}
	struct sk_conn *c = &t->c[i];
	/* Across hosts every byte goes through the ring (no push), so the
	 * bytes a failed link may have lost are among the last ring's worth
	 * we wrote (failover.c) */
	struct ntbx_qp_opts o = { .ring_size = remote ? sk_cfg.xring : sk_cfg.ring,
	                          .flags = remote ? NTBX_QP_NO_PUSH : 0 };
	struct ntbx_qp *qp = NULL;
	int rc = ntbx_qp_create(f, node, &o, &qp, &c->qc);
	if (rc < 0) {
		snprintf(c->reason, sizeof c->reason, "%s", ntbx_errmsg());
		ntbx_log(NTBX_LOG_INFO, "connection to %s stays on TCP: %s", ds,
		         c->reason);
		sk_slot_free(t, i, SK_CLAIM, c->gen);
		return sk_real.connect(fd, sa, len);
	}
	struct sk *s = sk_new('C', i, fd);
	if (!s) {
		ntbx_qp_close(qp, 1);
		sk_slot_free(t, i, SK_CLAIM, c->gen);
		return sk_real.connect(fd, sa, len);
	}
	s->qp = qp;
	s->me = c->qc;
	s->mode = M_PEND;
	c->node_c = (uint32_t)ntbx_fabric_node(f);
	c->node_a = (uint32_t)node;
	c->pid_c = sk_pid;
	c->refs_c = 1;
	if (sk_side_hold(s) < 0) {
		ntbx_log(NTBX_LOG_INFO, "connection to %s stays on TCP: cannot "
		         "lock its side: %s", ds, strerror(errno));
		ntbx_qp_close(qp, 1);
		sk_slot_free(t, i, SK_CLAIM, s->gen);
		sk_free_new(s);
		return sk_real.connect(fd, sa, len);
	}
	c->netns_c = sk_netns;
	c->cl = me;
	c->dst = dst;
	/* A listener on another host: the request goes into its node's
	 * memory, and is there before our SYN leaves (xhost.c). */
	if (remote && skx_request(f, t, i, node) < 0) {
		ntbx_log(NTBX_LOG_INFO, "connection to %s stays on TCP: %s", ds,
		         ntbx_errmsg());
		ntbx_qp_close(qp, 1);
		__atomic_store_n(&c->refs_c, 0, __ATOMIC_RELEASE);
		sk_slot_free(t, i, SK_CLAIM, s->gen);
		sk_side_drop(s);
		sk_free_new(s);
		return sk_real.connect(fd, sa, len);
	}
	__atomic_store_n(&c->sg, sk_sg(SK_REQ, s->gen), __ATOMIC_RELEASE);
	rc = sk_real.connect(fd, sa, len);
	if (rc < 0 && errno != EINPROGRESS && errno != EINTR) {
		int e = errno;
		skx_withdraw(f, c);
		ntbx_qp_close(qp, 1);
		__atomic_store_n(&c->refs_c, 0, __ATOMIC_RELEASE);
		sk_slot_free(t, i, SK_REQ, s->gen);
		sk_side_drop(s);
		pthread_mutex_destroy(&s->rlock);
		pthread_mutex_destroy(&s->wlock);
		free(s);
		errno = e;
		return rc;
	}
	int e = errno;
	sk_set(fd, s);
	ntbx_log(NTBX_LOG_DEBUG, "fd %d: connection to %s: request published "
	         "(slot %d)", fd, ds, i);
	errno = e;
	return rc;
}

/* Connector: connect our endpoint to the acceptor's (once, under qlock).
 * Returns our queue-pair handle, or NULL. */
struct ntbx_qp *sk_connect_qp(struct sk *s, struct sk_conn *c)
{
	struct ntbx_qp *qp = sk_qp(s);
	struct ntbx_qp_addr qa = c->qa;
	pthread_mutex_lock(&s->qlock);
	if (qp && !s->qp_conn && ntbx_qp_connect(qp, &qa) == 0)
		s->qp_conn = 1;
	pthread_mutex_unlock(&s->qlock);
	return qp;
}

/* Connector: has the acceptor answered?  Switch to the fabric.  Under
 * the write lock: no TCP write of ours may be under way (its bytes would
 * miss the count the acceptor reads by TCP). */
void sk_progress(struct sk *s)
{
	if (s->mode != M_PEND)
		return;
	if (pthread_mutex_trylock(&s->wlock) == 0) {
		sk_progress_locked(s);
		pthread_mutex_unlock(&s->wlock);
		return;
	}
	/* A writer of ours is sending by TCP (it may wait for the acceptor,
	 * which may wait for us to read): connect for reading only; the
	 * writer switches at its next write. */
	struct sk_conn *c = sk_conn(s);
	if (c)
		skx_sync(s, c);
	if (!c || s->rd_fab ||
	    __atomic_load_n(&c->state, __ATOMIC_ACQUIRE) != SK_ACC)
		return;
	sk_connect_qp(s, c);
	if (s->qp_conn)
		__atomic_store_n(&s->rd_fab, 1, __ATOMIC_RELEASE);
}

void sk_progress_locked(struct sk *s)
{
	if (s->mode != M_PEND)
		return;
	struct sk_conn *c = sk_conn(s);
	if (!c) {
		s->mode = M_TCP;
		return;
	}
	skx_sync(s, c);
	uint64_t sg = __atomic_load_n(&c->sg, __ATOMIC_ACQUIRE);
	union { struct { uint32_t s, g; } p; uint64_t w; } u = { .w = sg };
	uint32_t st = u.p.g == s->gen ? u.p.s : SK_TCP;
	if (st == SK_REQ || st == SK_ANS)   /* not answered yet */
		return;
	if (st == SK_ACC) {
		struct ntbx_qp *qp = sk_connect_qp(s, c);
		if (qp && s->qp_conn) {
			if (s->shut_wr)
				ntbx_qp_shutdown(qp);
			if (!sk_slot_cas(c, SK_ACC, s->gen, SK_FAB)) {
				s->mode = M_TCP;   /* reaped under us: not ours */
				return;
			}
			/* an acceptor on another host reads the count there */
			if (c->xk)
				skx_switch(sk_fab(), c, SK_FAB);
			/* an acceptor reading our TCP prefix may sleep on it */
			ntbx_qp_notify(qp);
			s->mode = M_FAB;
			ntbx_log(NTBX_LOG_DEBUG, "fd %d: on the fabric after %llu "
			         "TCP bytes", s->fd0,
			         (unsigned long long)c->tcp_sent);
			return;
		}
		if (sk_slot_cas(c, SK_ACC, s->gen, SK_TCP)) {
			snprintf(c->reason, sizeof c->reason, "connect: %s",
			         ntbx_errmsg());
			if (c->xk)
				skx_switch(sk_fab(), c, SK_TCP);
		}
		st = SK_TCP;
	}
	if (st == SK_FAB) {   /* another process of ours switched */
		s->mode = M_FAB;
		return;
	}
	s->mode = M_TCP;
}

/* Connector saw TCP data from the server: it is not interposed. */
void sk_fallback(struct sk *s, const char *why)
{
	struct sk_conn *c = sk_conn(s);
	if (c && sk_slot_cas(c, SK_REQ, s->gen, SK_TCP)) {
		snprintf(c->reason, sizeof c->reason, "%s", why);
		if (c->xk)   /* an acceptor on another host may have answered */
			skx_switch(sk_fab(), c, SK_TCP);
	}
	ntbx_log(NTBX_LOG_INFO, "fd %d stays on TCP: %s", s->fd0, why);
	s->mode = M_TCP;
}

/* ------------------------------------------------------------ accept */

/*
 * The acceptor's endpoint of slot @c, connected to the connector's @qc on
 * @node_c, adopted by @s: the step that accepting on one host and across
 * hosts share.  0, or -errno with c->reason saying why.
 */
static int accept_endpoint(struct ntbx_fabric *f, struct sk *s,
                           struct sk_conn *c, uint32_t node_c,
                           struct ntbx_qp_addr qc, uint32_t flags)
{
	/* NTBX_QP_NO_PUSH: across hosts, with the ring that covers the
	 * credits' trip through both agents */
	struct ntbx_qp_opts o = { .ring_size = flags & NTBX_QP_NO_PUSH
	                                       ? sk_cfg.xring : sk_cfg.ring,
	                          .flags = flags };
	struct ntbx_qp *qp = NULL;
	struct ntbx_qp_addr qa;
	int rc = ntbx_qp_create(f, (int)node_c, &o, &qp, &qa);
	if (rc == 0 && (rc = ntbx_qp_connect(qp, &qc)) < 0)
		ntbx_qp_close(qp, 1);
	if (rc < 0) {
		snprintf(c->reason, sizeof c->reason, "%s", ntbx_errmsg());
		return rc;
	}
	s->qp = qp;
	s->me = qa;
	s->mode = M_FAB;
	c->qa = qa;
	c->pid_a = sk_pid;
	c->refs_a = 1;
	return 0;
}

/*
 * accept() of a connection from another host (xhost.c): its request is in
 * our node memory, written by the connector's host.  We take a slot of
 * our own table for our side (its connector's side is in its host's
 * table), make our endpoint and answer into the connector's node.
 */
static int accept_remote(struct sk_tab *t, int fd, const struct sk_addr *p,
                         const struct sk_addr *l, const struct sockaddr *peer,
                         socklen_t plen)
{
	if (sk_addr_loop(p) || !skx_fabric_spans())
		return 0;
	struct ntbx_fabric *f = sk_fab();
	if (!f || !ntbx_fabric_spans_hosts(f))
		return 0;
	skx_refresh(f, t);
	struct sk_conn rq;
	memset(&rq, 0, sizeof rq);
	if (!skx_find(f, p, l, ntbx_fabric_node_of_addr(f, peer, plen), &rq))
		return 0;
	char ps[80];
	sk_addr_str(p, ps, sizeof ps);
	int i = sk_slot_claim(t);
	if (i < 0) {
		snprintf(rq.reason, sizeof rq.reason, "connection table full on "
		         "node %d", ntbx_fabric_node(f));
		ntbx_log(NTBX_LOG_INFO, "connection from %s stays on TCP: %s", ps,
		         rq.reason);
		skx_answer(f, &rq, SK_TCP);
		return 0;
	}
	struct sk_conn *c = &t->c[i];
	uint32_t gen = c->gen;
	c->node_c = rq.node_c;
	c->node_a = rq.node_a;
	c->cl = rq.cl;
	memcpy(c->cl.ip, p->ip, sizeof p->ip);   /* the real address */
	c->dst = rq.dst;
	c->qc = rq.qc;
	c->xk = rq.xk;
	c->xtag = rq.xtag;
	struct sk *s = sk_new('A', i, fd);
	if (!s || sk_side_hold(s) < 0) {
		snprintf(c->reason, sizeof c->reason, "%s", s ? "cannot lock its "
		         "side" : "out of memory");
		ntbx_log(NTBX_LOG_INFO, "connection from %s stays on TCP: %s", ps,
		         c->reason);
		skx_answer(f, c, SK_TCP);
		sk_slot_free(t, i, SK_CLAIM, gen);
		if (s)
			sk_free_new(s);
		return 0;
	}
	/* ours, with our side held: no reaper takes it from here on */
	__atomic_store_n(&c->sg, sk_sg(SK_ANS, gen), __ATOMIC_RELEASE);
	uint32_t st = SK_ANS;
	/* everything through the ring: failover.c resends what did not land */
	int rc = accept_endpoint(f, s, c, rq.node_c, rq.qc, NTBX_QP_NO_PUSH);
	if (rc < 0)
		goto fallback;
	struct ntbx_qp *qp = s->qp;
	sk_slot_cas(c, SK_ANS, gen, SK_ACC);
	st = SK_ACC;
	if ((rc = skx_answer(f, c, SK_ACC)) < 0) {
		snprintf(c->reason, sizeof c->reason, "the answer could not be "
		         "written to node %u: %s", rq.node_c, strerror(-rc));
		ntbx_qp_close(qp, 1);
		s->qp = NULL;
		c->refs_a = 0;
		goto fallback;
	}
	/* The connector may sleep waiting for it: ring, after the answer
	 * (ordered behind it on our queue). */
	ntbx_qp_notify(qp);
	sk_set(fd, s);
	ntbx_log(NTBX_LOG_DEBUG, "fd %d: accepted %s from node %u on the fabric "
	         "(slot %d)", fd, ps, rq.node_c, i);
	return 1;
fallback:
	ntbx_log(NTBX_LOG_INFO, "connection from %s stays on TCP: %s", ps,
	         c->reason);
	skx_answer(f, c, SK_TCP);
	sk_side_drop(s);
	sk_slot_free(t, i, st, gen);
	sk_free_new(s);
	return 0;
}

int sk_on_accept(int lfd, int fd, const struct sockaddr *peer,
                 socklen_t plen)
{
	if (!sk_cfg.on || fd < 0 || fd >= sk_nfds || !sk_is_listener(lfd))
		return 0;
	struct sk_tab *t = sk_tab_mapped();
	struct sk_addr p, l;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	if (!t || sk_addr_of(peer, plen, &p) < 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &sl) < 0 ||
	    sk_addr_of((struct sockaddr *)&ss, sl, &l) < 0)
		return 0;
	int loop = sk_addr_loop(&p);
	int i;
	uint32_t gen = 0;
	struct sk_conn *c = NULL;
	for (i = 0; i < SK_CONNS; i++) {
		c = &t->c[i];
		uint64_t sg = __atomic_load_n(&c->sg, __ATOMIC_ACQUIRE);
		union { struct { uint32_t s, g; } p; uint64_t w; } u = { .w = sg };
		gen = u.p.g;
		if (u.p.s != SK_REQ ||
		    c->cl.port != p.port || c->dst.port != l.port ||
		    !sk_addr_match(&c->dst, &l) || !sk_addr_match(&c->cl, &p))
			continue;
		if (loop && c->netns_c != sk_netns)
			continue;
		break;
	}
	if (i == SK_CONNS)
		return accept_remote(t, fd, &p, &l, peer, plen);
	char ps[80];
	sk_addr_str(&p, ps, sizeof ps);
	/*
	 * Take the request we looked at, of that generation, before writing
	 * a byte of the slot (SK_REQ -> SK_ANS): a request that was given
	 * up, reaped and claimed again since our look is someone else's,
	 * and the compare-and-swap fails.  Our side is locked first, so from
	 * the swap on the slot is never seen with its acceptor side unheld
	 * and no reaper takes it from under us; the connector only ever
	 * changes the slot from SK_REQ or SK_ACC, so in SK_ANS it is ours
	 * alone.  The request's fields are read after the swap, and the
	 * answer (SK_ACC, or SK_TCP with the reason) is published with
	 * release once every field of ours is written.
	 */
	struct sk *s = sk_new('A', i, fd);
	if (!s || sk_side_hold(s) < 0) {
		/* not ours to write into (no reason): just say no */
		ntbx_log(NTBX_LOG_INFO, "connection from %s stays on TCP: %s", ps,
		         s ? "cannot lock its side" : "out of memory");
		sk_slot_cas(c, SK_REQ, gen, SK_TCP);
		if (s)
			sk_free_new(s);
		return 0;
	}
	s->gen = gen;
	if (!sk_slot_cas(c, SK_REQ, gen, SK_ANS)) {
		/* the connector gave up meanwhile */
		sk_side_drop(s);
		sk_free_new(s);
		return 0;
	}
	uint32_t node_a = __atomic_load_n(&c->node_a, __ATOMIC_RELAXED);
	uint32_t node_c = __atomic_load_n(&c->node_c, __ATOMIC_RELAXED);
	struct ntbx_qp_addr qc = c->qc;
	struct ntbx_fabric *f = sk_fab();
	struct ntbx_qp *qp = NULL;
	if (!f) {
		snprintf(c->reason, sizeof c->reason, "acceptor has no fabric");
		goto fallback;
	}
	if ((int)node_a != ntbx_fabric_node(f)) {
		snprintf(c->reason, sizeof c->reason, "acceptor on node %d, "
		         "not %u", ntbx_fabric_node(f), node_a);
		goto fallback;
	}
	if (accept_endpoint(f, s, c, node_c, qc, 0) < 0)
		goto fallback;
	qp = s->qp;
	/* The connector's address as bound may be the wildcard (it bound
	 * before connecting, to learn its port); the accepted peer address
	 * is the real one.  Nobody matches on it after SK_REQ. */
	memcpy(c->cl.ip, p.ip, sizeof p.ip);
	if (!sk_slot_cas(c, SK_ANS, gen, SK_ACC)) {
		/* cannot happen (SK_ANS is ours): never use what is not */
		ntbx_qp_close(qp, 1);
		sk_side_drop(s);
		sk_free_new(s);
		return 0;
	}
	/* The connector may sleep waiting for this answer (a read, poll or
	 * epoll with its endpoint's wake bit registered).  What it waits for
	 * is our bytes, or our end of stream: it is rung at our first write
	 * (stream.c, q_write), after the bytes, and a close or shutdown
	 * without one reaches it as the shadow's FIN, which it sleeps on
	 * too.  Not now: rung here, it woke only to sleep again until the
	 * bytes came, and in a forking server the parent rang it before its
	 * child had done anything, so each short connection cost a wake-up
	 * more than kernel TCP (design notes, "The answer rides the first
	 * write").  Any call of the connector sees the answer anyway
	 * (sk_progress). */
	s->answer_due = 1;
	sk_set(fd, s);
	ntbx_log(NTBX_LOG_DEBUG, "fd %d: accepted %s on the fabric (slot %d)",
	         fd, ps, i);
	return 1;
fallback:
	ntbx_log(NTBX_LOG_INFO, "connection from %s stays on TCP: %s", ps,
	         c->reason);
	sk_slot_cas(c, SK_ANS, gen, SK_TCP);
	sk_side_drop(s);
	sk_free_new(s);
	return 0;
}
