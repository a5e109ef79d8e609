/* SPDX-License-Identifier: MIT */
/*
 * IP over the fabric: the data thread.  Routing (the destination node of
 * a packet, through the route cache over the fabric's recorded addresses),
 * sending (nonblocking; with two nodes straight into room reserved in the
 * peer's memory) and the loop that moves both directions and sleeps in
 * ppoll on the TUN device and the doorbell event FIFO.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "ipof/daemon.h"
#include "util/util.h"

/*
 * Data thread: receive up to @max messages of @p and write them into the
 * TUN device.  Returns how many were taken; *why becomes a reason to tear
 * the pair down when it failed or ended.  Called under p->lk (read).
 * Zero-copy: a message is written to the TUN device from where it lies,
 * the posted buffer it was pushed into or our own ring (the peer wrote
 * it: the kernel checks the virtio-net header and the packet), and only
 * then consumed; the posted buffer it used up is posted again.
 */
static int rx_drain(struct peer *p, int max, const char **why)
{
	struct ipof *d = p->d;
	struct ipof_peer_ctr *c = &d->blk->peer[p->node];
	uint64_t lo = (uint64_t)p->bufs, hi = lo + IPOF_NPOST * IPOF_BUF;
	int k;
	for (k = 0; k < max; k++) {
		uint64_t off = NTBX_QP_NO_BUF;
		const void *m = NULL;
		int eof = 0;
		ssize_t n = ntbx_qp_recv_zc(p->rxq, &m, &off, NTBX_QP_NONBLOCK,
		                            &eof);
		if (n == -EAGAIN)
			return k;
		if (n == -ECONNRESET) {
			*why = "node died";
			return k;
		}
		if (n == -EPIPE || eof) {
			*why = "closed by its daemon";
			return k;
		}
		if (n < 0) {
			*why = "queue pair failed";
			return k;
		}
		if (off != NTBX_QP_NO_BUF &&
		    (off < lo || off >= hi || (off - lo) % IPOF_BUF)) {
			ntbx_qp_recv_zc_done(p->rxq);
			drop(d, NTBX_IPOF_DROP_BAD);
			*why = "queue pair returned a foreign buffer";
			return k;
		}
		/* the virtio-net header is checked by the kernel on write; the
		 * receiving TCP stack runs in this write() */
		const uint8_t *msg = m;
		const uint8_t *pkt = msg + IPOF_VHDR;
		ssize_t plen = n - (ssize_t)IPOF_VHDR;
		int v = n > (ssize_t)IPOF_VHDR ? pkt[0] >> 4 : 0;
		if ((v == 4 && plen >= 20) || (v == 6 && plen >= 40)) {
			if (write(d->tun, msg, (size_t)n) != n)
				drop(d, NTBX_IPOF_DROP_TUN);
			ctr_add(&c->rx_pkts, 1);
			ctr_add(&c->rx_bytes, (uint64_t)plen);
		} else {
			drop(d, NTBX_IPOF_DROP_BAD);
		}
		if (ntbx_qp_recv_zc_done(p->rxq) < 0) {
			*why = "queue pair failed";
			return k + 1;
		}
		if (off != NTBX_QP_NO_BUF &&
		    ntbx_qp_post_recv(p->rxq, off, IPOF_BUF) < 0) {
			*why = "re-posting a buffer failed";
			return k + 1;
		}
	}
	return k;
}

/* Data thread: hand a failed pair to its peer thread (once). */
static void peer_report(struct peer *p, const char *why)
{
	pthread_mutex_lock(&p->mu);
	if (!p->why) {
		p->why = why;
		pthread_cond_signal(&p->cv);
	}
	pthread_mutex_unlock(&p->mu);
}

/* ------------------------------------------------------------ routing */

static int route(struct ipof *d, const struct sockaddr_storage *ss,
                 socklen_t len)
{
	uint8_t key[17] = { 0 };
	if (ss->ss_family == AF_INET) {
		key[0] = 4;
		memcpy(key + 1, &((const struct sockaddr_in *)ss)->sin_addr, 4);
	} else {
		key[0] = 6;
		memcpy(key + 1, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
	}
	uint32_t h = 2166136261u;
	for (int i = 0; i < 17; i++)
		h = (h ^ key[i]) * 16777619u;
	struct rcache *e = &d->rc[h % RC_SIZE];
	uint64_t now = ntbx_now_ns();
	if (e->until > now && !memcmp(e->key, key, sizeof key))
		return e->node;
	int node = ntbx_fabric_node_of_addr(d->f, (const struct sockaddr *)ss,
	                                    len);
	/* ofi: the peers' interface addresses, which their agents could not
	 * announce (read once per peer set-up, under the peer's lock) */
	for (int n = 0; d->net && node < 0 && n < d->nodes; n++) {
		struct peer *p = &d->peer[n];
		if (n == d->node)
			continue;
		pthread_rwlock_rdlock(&p->lk);
		if (p->rxq && !memcmp(p->addr_key, key, sizeof key))
			node = n;
		pthread_rwlock_unlock(&p->lk);
	}
	memcpy(e->key, key, sizeof key);
	e->node = node < 0 ? -1 : node;
	/* positive answers are kept a second, negative ones 100 ms: a node
	 * that records a new address is found soon */
	e->until = now + (node < 0 ? 100000000ull : 1000000000ull);
	return e->node;
}

/* Count a packet sent to @node, or its drop (@rc: the send's result). */
static void tx_done(struct ipof *d, int node, ssize_t rc, size_t n)
{
	if (rc == (ssize_t)n) {
		struct ipof_peer_ctr *c = &d->blk->peer[node];
		ctr_add(&c->tx_pkts, 1);
		ctr_add(&c->tx_bytes, n - IPOF_VHDR);
	} else if (rc == -EAGAIN) {
		drop(d, NTBX_IPOF_DROP_PEER_FULL);
	} else {
		drop(d, NTBX_IPOF_DROP_PEER_DOWN);
	}
}

/* One nonblocking send of @pkt to @node: the send's result, or -ENOTCONN
 * when there is no queue pair. */
static ssize_t tx_try(struct ipof *d, int node, const uint8_t *pkt, size_t n)
{
	struct peer *p = &d->peer[node];
	pthread_rwlock_rdlock(&p->lk);
	ssize_t rc = p->txq ? ntbx_qp_send(p->txq, pkt, n, NTBX_QP_NONBLOCK)
	                    : -ENOTCONN;
	pthread_rwlock_unlock(&p->lk);
	return rc;
}

/*
 * Classify and route the packet read from the TUN device (@pkt: the
 * virtio-net header and the packet, or at least its first IPOF_HEAD
 * bytes): its destination node, or -1 (dropped and counted).
 */
static int tx_route(struct ipof *d, const uint8_t *pkt, size_t n)
{
	struct sockaddr_storage ss;
	socklen_t sl = 0;
	int cls = ipof_classify(pkt + IPOF_VHDR, n - IPOF_VHDR, d->bcast4, &ss,
	                        &sl);
	if (cls == IPOF_PKT_BAD) {
		drop(d, NTBX_IPOF_DROP_BAD);
		return -1;
	}
	if (cls == IPOF_PKT_BCAST) {
		drop(d, NTBX_IPOF_DROP_BCAST);
		return -1;
	}
	if (cls == IPOF_PKT_MCAST) {
		drop(d, NTBX_IPOF_DROP_MCAST);
		return -1;
	}
	int node = route(d, &ss, sl);
	if (node < 0 || node >= d->nodes) {
		drop(d, NTBX_IPOF_DROP_NO_ROUTE);
		return -1;
	}
	if (node == d->node) {
		drop(d, NTBX_IPOF_DROP_SELF);
		return -1;
	}
	return node;
}

/*
 * Route and send the packet read from the TUN device (@pkt: the
 * virtio-net header and the packet, both go).  Returns the destination
 * node when its ring is full (the caller keeps the packet and retries),
 * else -1 (sent, or dropped and counted).
 */
static int tx_packet(struct ipof *d, const uint8_t *pkt, size_t n)
{
	int node = tx_route(d, pkt, n);
	if (node < 0)
		return -1;
	ssize_t rc = tx_try(d, node, pkt, n);
	if (rc == -EAGAIN)
		return node;
	tx_done(d, node, rc, n);
	return -1;
}

/*
 * Two nodes: every packet goes to the one peer or is dropped, so the next
 * packet is read from the TUN device straight into the peer's memory,
 * into room reserved on its queue pair (a posted buffer, or its ring):
 * the sender's copy is gone.  The headers are read into a local buffer
 * too (readv), to classify and route without reading the peer's memory.
 * Returns 1 when it read (*res: the read's result; the packet is sent or
 * dropped and counted), 0 when the caller reads and sends by copy (no
 * queue pair, no room: the copy path keeps the packet and waits).
 */
#define IPOF_HEAD (IPOF_VHDR + 128u)
static int tx_direct(struct ipof *d, ssize_t *res)
{
	int node = 1 - d->node;
	struct peer *p = &d->peer[node];
	pthread_rwlock_rdlock(&p->lk);
	void *dst;
	if (!p->txq || ntbx_qp_send_reserve(p->txq, &dst, IPOF_BUF,
	                                    NTBX_QP_NONBLOCK) < 0) {
		pthread_rwlock_unlock(&p->lk);
		return 0;
	}
	uint8_t head[IPOF_HEAD];
	struct iovec iov[2] = {
		{ head, IPOF_HEAD },
		{ (uint8_t *)dst + IPOF_HEAD, IPOF_BUF - IPOF_HEAD },
	};
	ssize_t n = readv(d->tun, iov, 2);
	*res = n;
	if (n < 0) {
		int e = errno;
		ntbx_qp_send_abort(p->txq, 0);
		pthread_rwlock_unlock(&p->lk);
		errno = e;
		return 1;
	}
	size_t h = (size_t)n < IPOF_HEAD ? (size_t)n : IPOF_HEAD;
	memcpy(dst, head, h);   /* write remote */
	int to = n > (ssize_t)IPOF_VHDR ? tx_route(d, head, h) : -1;
	if (n <= (ssize_t)IPOF_VHDR)
		drop(d, NTBX_IPOF_DROP_BAD);
	if (to == node) {
		ssize_t rc = ntbx_qp_send_commit(p->txq, (size_t)n);
		tx_done(d, node, rc, (size_t)n);
	} else {
		if (to >= 0)   /* cannot happen with two nodes */
			drop(d, NTBX_IPOF_DROP_NO_ROUTE);
		ntbx_qp_send_abort(p->txq, (size_t)n);
	}
	pthread_rwlock_unlock(&p->lk);
	return 1;
}

/* ------------------------------------------------------- data thread */

#define IPOF_BATCH   16        /* packets per direction per turn */

/* Sleep preparation: arm every receive queue pair and, for a packet
 * waiting for room, its transmit queue pair.  Returns 1 if something is
 * ready already (do not sleep); *writable is set when the waiting packet's
 * queue pair reports room (for a small record: the packet may need more). */
static int data_arm(struct ipof *d, int pend, int *writable)
{
	int ready = 0;
	*writable = 0;
	for (int n = 0; n < d->nodes; n++) {
		if (n == d->node)
			continue;
		struct peer *p = &d->peer[n];
		pthread_rwlock_rdlock(&p->lk);
		if (p->rxq && !__atomic_load_n(&p->why, __ATOMIC_ACQUIRE)) {
			int m = ntbx_qp_arm(p->rxq, NTBX_QP_READABLE);
			if (m < 0 || (m & NTBX_QP_READABLE)) {
				ready = 1;
			} else if (m & NTBX_QP_ERROR) {
				peer_report(p, ntbx_node_alive(d->dev, n) ?
				               "queue pair failed" : "node died");
				ready = 1;
			} else if (m & NTBX_QP_HUP) {
				peer_report(p, "closed by its daemon");
				ready = 1;
			}
		}
		pthread_rwlock_unlock(&p->lk);
	}
	if (pend >= 0) {
		struct peer *p = &d->peer[pend];
		pthread_rwlock_rdlock(&p->lk);
		int m = p->txq ? ntbx_qp_arm(p->txq, NTBX_QP_WRITABLE) : -1;
		pthread_rwlock_unlock(&p->lk);
		if (m < 0 || (m & (NTBX_QP_HUP | NTBX_QP_ERROR)))
			ready = 1;     /* the retry drops it */
		else if (m & NTBX_QP_WRITABLE)
			*writable = 1;
	}
	return ready;
}

/*
 * The data thread (the caller's): one loop moves both directions, so a
 * packet that the kernel answers at once (a TCP ACK generated while we
 * write a segment into the TUN device, the next segment sent while we
 * write an ACK) is picked up by the same thread without a wake-up.  Each
 * turn receives up to IPOF_BATCH messages per peer, then reads up to
 * IPOF_BATCH packets from the (nonblocking) TUN device.  With nothing to
 * do it keeps polling for the wait policy's budget, then sleeps in ppoll()
 * on the TUN
 * device, the doorbell event FIFO (after arming every receive queue pair)
 * and the peer threads' kick.  A packet whose ring is full is kept and
 * retried while the other direction keeps moving; it is dropped
 * (peer_full) after 100 ms: a NIC's full transmit queue.
 */
int ipof_data_loop(struct ipof *d, volatile sig_atomic_t *stop)
{
	uint8_t *buf = malloc(IPOF_BUF + 64);
	if (!buf)
		return -ENOMEM;
	int np = ntbx_port_count(d->dev);
	uint64_t pmask = np >= 64 ? ~0ull : (1ull << np) - 1;
	if (!pmask)
		pmask = 1;
	int rc = ntbx_db_event_fd(d->dev, pmask, NTBX_DB_QP_MASK);
	if (rc < 0) {
		free(buf);
		return rc;
	}
	int evfd = rc;
	struct ntbx_spin spin = { 0 };   /* wait policy (util.h) */
	uint64_t spin_ns = 0;
	int pend = -1;             /* node of the packet in buf waiting */
	size_t pend_n = 0;
	uint64_t pend_until = 0;
	long back_us = 20;         /* back-off: room reported, not enough */
	uint64_t idle_since = 0;
	rc = 0;
	while (!*stop) {
		int work = 0;
		for (int n = 0; n < d->nodes; n++) {
			if (n == d->node)
				continue;
			struct peer *p = &d->peer[n];
			pthread_rwlock_rdlock(&p->lk);
			if (p->rxq && !__atomic_load_n(&p->why, __ATOMIC_ACQUIRE)) {
				const char *why = NULL;
				work += rx_drain(p, IPOF_BATCH, &why);
				if (why)
					peer_report(p, why);
			}
			pthread_rwlock_unlock(&p->lk);
		}
		if (pend >= 0) {
			ssize_t r = tx_try(d, pend, buf, pend_n);
			if (r != -EAGAIN || ntbx_now_ns() >= pend_until) {
				tx_done(d, pend, r, pend_n);
				pend = -1;
				back_us = 20;
				work++;
			}
		}
		for (int k = 0; pend < 0 && k < IPOF_BATCH; k++) {
			ssize_t n;
			int direct = d->nodes == 2 && tx_direct(d, &n);
			if (!direct)
				n = read(d->tun, buf, IPOF_BUF);
			if (n < 0) {
				if (errno == EAGAIN || errno == EINTR)
					break;
				rc = ntbx_err(errno, "ipof: reading %s: %s",
				              d->ifname, strerror(errno));
				goto out;
			}
			work++;
			if (direct)
				continue;
			if (n <= (ssize_t)IPOF_VHDR) {
				drop(d, NTBX_IPOF_DROP_BAD);
				continue;
			}
			int node = tx_packet(d, buf, (size_t)n);
			if (node >= 0) {
				pend = node;
				pend_n = (size_t)n;
				pend_until = ntbx_now_ns() + 100000000ull;
			}
		}
		if (work) {
			if (idle_since)
				ntbx_spin_end(&spin, ntbx_now_ns() - idle_since, 0);
			idle_since = 0;
			continue;
		}
		uint64_t now = ntbx_now_ns();
		if (!idle_since) {
			idle_since = now;
			spin_ns = ntbx_spin_begin(&spin);
		}
		if (now - idle_since < spin_ns) {
			ntbx_cpu_relax();
			continue;
		}
		/* Sleep.  Clear the bits, then re-register the FIFO (it is made
		 * readable at once for bits still set), then arm: a ring after
		 * the arm reaches the FIFO. */
		for (int p = 0; p < np; p++)
			ntbx_db_clear(d->dev, p, NTBX_DB_QP_MASK);
		ntbx_db_event_drain(d->dev);
		rc = ntbx_db_event_fd(d->dev, pmask, NTBX_DB_QP_MASK);
		if (rc < 0)
			goto out;
		rc = 0;
		int writable;
		if (data_arm(d, pend, &writable))
			continue;
		struct timespec ts = { 0, 500000000L };
		if (pend >= 0) {
			uint64_t left = pend_until > now ? pend_until - now : 0;
			if (writable) {
				if ((uint64_t)back_us * 1000u < left)
					left = (uint64_t)back_us * 1000u;
				if (back_us < 1000)
					back_us *= 2;
			}
			ts.tv_sec = (time_t)(left / 1000000000u);
			ts.tv_nsec = (long)(left % 1000000000u);
		}
		struct pollfd pf[3] = {
			{ .fd = evfd, .events = POLLIN },
			{ .fd = d->kick, .events = POLLIN },
			{ .fd = d->tun, .events = pend < 0 ? POLLIN : 0 },
		};
		int pr = ppoll(pf, 3, &ts, NULL);
		if (pr > 0 && (pf[1].revents & POLLIN)) {
			uint64_t v;
			if (read(d->kick, &v, sizeof v) < 0) {
				/* another wake-up raced us to it */
			}
		}
		ntbx_spin_end(&spin, ntbx_now_ns() - idle_since, 1);
		idle_since = 0;
	}
out:
	free(buf);
	return rc;
}

