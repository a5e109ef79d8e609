/* SPDX-License-Identifier: MIT */
/*
 * ipof on an ofi fabric: the daemons' published entries between hosts.
 *
 * On the shm backend a daemon reads the entry a peer's daemon published
 * for it (struct ipof_ep in the peer's block, tag IPOF_TAG) through an
 * observer of the peer's node files.  On an ofi fabric those files are the
 * peer host's: here they exist but nobody writes them.  So each daemon
 * answers for its own block over TCP, at its host's --hosts address and
 * rendezvous port + 3 (the endpoint has + 1, the tools' --serve + 2): one
 * request (who asks), one reply (the daemon's node epoch, running or not,
 * and its entry for the asker, read under the block's seqlock), one
 * connection each, every wait bounded.  The data still go through the
 * fabric's queue pairs; this carries only the set-up records, which a peer
 * reads again while the pair is up to notice a restarted daemon.  The
 * reply is a peer's word: checked as the observer's read was (sizes,
 * nodes, epoch; the queue-pair layer checks the addresses it connects to).
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dev/dev.h"
#include "ipof/ipof_int.h"
#include "util/util.h"

#define NET_MAGIC   0x54454e464f504958ull   /* "XIPOFNET" */
#define NET_VERSION 1u
#define NET_MS      1000                    /* connect, send, receive */

struct net_req {
	uint64_t magic;
	uint32_t version;
	uint32_t from;          /* the asking node */
	uint32_t to;            /* the node it means to ask */
	uint32_t pad;
};

struct net_reply {
	uint64_t magic;
	uint32_t version;
	uint32_t node;          /* the answering node */
	uint32_t epoch;         /* its node epoch when its daemon started */
	uint32_t found;         /* 1: running, with an entry for the asker */
	struct ipof_ep ep;
	char addr[64];          /* its interface's address (CIDR), routes */
};

struct ipof_net {
	struct ntbx_dev_hosts hosts;
	int me;
	const struct ipof_block *blk;
	int lfd;
	pthread_t th;
	volatile int stop;
};

static int io_full(int fd, void *buf, size_t len, int out)
{
	size_t done = 0;
	uint64_t until = ntbx_now_ns() + NET_MS * 1000000ull;
	while (done < len) {
		uint64_t t = ntbx_now_ns();
		if (t >= until)
			return -ETIMEDOUT;
		struct pollfd p = { .fd = fd, .events = out ? POLLOUT : POLLIN };
		int r = poll(&p, 1, (int)((until - t) / 1000000) + 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -ETIMEDOUT;
		ssize_t n = out ? send(fd, (char *)buf + done, len - done,
		                       MSG_NOSIGNAL | MSG_DONTWAIT)
		                : recv(fd, (char *)buf + done, len - done,
		                       MSG_DONTWAIT);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EPIPE;
		done += (size_t)n;
	}
	return 0;
}

static int addr_of(const struct ntbx_dev_hosts *d, int node, int passive,
                   struct addrinfo **ai)
{
	char port[16];
	snprintf(port, sizeof port, "%u", d->host[node].port + 3);
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
	                          .ai_flags = passive ? AI_PASSIVE : 0 };
	return getaddrinfo(d->host[node].addr, port, &hints, ai) ? -EHOSTUNREACH
	                                                          : 0;
}

static void answer(struct ipof_net *n, int fd)
{
	struct net_req q;
	if (io_full(fd, &q, sizeof q, 0) < 0 || q.magic != NET_MAGIC ||
	    q.version != NET_VERSION || q.to != (uint32_t)n->me ||
	    q.from >= n->hosts.nhosts || q.from == (uint32_t)n->me)
		return;
	struct net_reply r;
	memset(&r, 0, sizeof r);
	r.magic = NET_MAGIC;
	r.version = NET_VERSION;
	r.node = (uint32_t)n->me;
	r.epoch = n->blk->hdr.epoch;
	r.found = __atomic_load_n(&n->blk->hdr.running, __ATOMIC_ACQUIRE) &&
	          ipof_ep_read(n->blk, (int)q.from, &r.ep);
	memcpy(r.addr, n->blk->hdr.addr, sizeof r.addr);
	r.addr[sizeof r.addr - 1] = 0;
	io_full(fd, &r, sizeof r, 1);
}

static void *responder(void *arg)
{
	struct ipof_net *n = arg;
	while (!n->stop) {
		struct pollfd p = { .fd = n->lfd, .events = POLLIN };
		if (poll(&p, 1, 100) <= 0)
			continue;
		int fd = accept4(n->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		answer(n, fd);
		close(fd);
	}
	return NULL;
}

int ipof_net_start(const char *dir, int me, const struct ipof_block *blk,
                   struct ipof_net **out)
{
	*out = NULL;
	struct ipof_net *n = calloc(1, sizeof *n);
	if (!n)
		return -ENOMEM;
	int rc = ntbx_dev_fabric_hosts(dir, &n->hosts);
	if (rc < 0 || me < 0 || (uint32_t)me >= n->hosts.nhosts) {
		free(n);
		/* -ENOENT: all the fabric's nodes are on this machine */
		return rc == -ENOENT ? 0 : rc < 0 ? rc : -EINVAL;
	}
	n->me = me;
	n->blk = blk;
	struct addrinfo *ai;
	if (addr_of(&n->hosts, me, 1, &ai) < 0) {
		rc = ntbx_err(EHOSTUNREACH, "ipof: cannot resolve this host's "
		              "address %s", n->hosts.host[me].addr);
		free(n);
		return rc;
	}
	n->lfd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	if (n->lfd >= 0)
		setsockopt(n->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (n->lfd < 0 || bind(n->lfd, ai->ai_addr, ai->ai_addrlen) < 0 ||
	    listen(n->lfd, 16) < 0) {
		int e = errno;
		freeaddrinfo(ai);
		if (n->lfd >= 0)
			close(n->lfd);
		rc = ntbx_err(e, "ipof: cannot listen at %s port %u for the "
		              "peers' daemons: %s", n->hosts.host[me].addr,
		              n->hosts.host[me].port + 3, strerror(e));
		free(n);
		return rc;
	}
	freeaddrinfo(ai);
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = pthread_create(&n->th, NULL, responder, n);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		close(n->lfd);
		free(n);
		return -rc;
	}
	*out = n;
	return 0;
}

void ipof_net_stop(struct ipof_net *n)
{
	if (!n)
		return;
	n->stop = 1;
	pthread_join(n->th, NULL);
	close(n->lfd);
	free(n);
}

int ipof_net_entry(struct ipof_net *n, int peer, uint32_t *epoch,
                   struct ipof_ep *out, char addr[64])
{
	if (peer < 0 || (uint32_t)peer >= n->hosts.nhosts || peer == n->me)
		return 0;
	struct addrinfo *ai;
	if (addr_of(&n->hosts, peer, 0, &ai) < 0)
		return 0;
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
	                0);
	int found = 0;
	if (fd < 0)
		goto out;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS)
		goto out;
	struct net_req q = { .magic = NET_MAGIC, .version = NET_VERSION,
	                     .from = (uint32_t)n->me, .to = (uint32_t)peer };
	struct net_reply r;
	if (io_full(fd, &q, sizeof q, 1) < 0 || io_full(fd, &r, sizeof r, 0) < 0)
		goto out;
	if (r.magic != NET_MAGIC || r.version != NET_VERSION ||
	    r.node != (uint32_t)peer || r.found != 1 || !(r.ep.seq && !(r.ep.seq & 1)) ||
	    r.ep.tx.cookie == 0 || r.ep.rx.cookie == 0)
		goto out;
	*epoch = r.epoch;
	*out = r.ep;
	r.addr[sizeof r.addr - 1] = 0;
	memcpy(addr, r.addr, sizeof r.addr);
	found = 1;
out:
	if (fd >= 0)
		close(fd);
	freeaddrinfo(ai);
	return found;
}
