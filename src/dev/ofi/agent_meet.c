/* SPDX-License-Identifier: MIT */
/*
 * The agents' rendezvous: each agent listens on its host's port of the
 * fabric's description and calls the others until they have exchanged
 * hellos (addresses, keys, fabric name, layout and key hash), each side
 * checking the other's.  It runs in a thread of its own that never calls
 * libfabric: met hellos go through a mailbox that the loop applies.
 */
#include "dev/ofi/agent_int.h"

void agent_set_why(int n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void agent_set_why(int n, const char *fmt, ...)
{
	char buf[112];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	memcpy(ag.ctl->node[n].why, buf, sizeof buf);
}

static int fd_wait(int fd, short ev, uint64_t until)
{
	for (;;) {
		uint64_t t = ntbx_now_ns();
		if (t >= until || ag.stop)
			return -ETIMEDOUT;
		struct pollfd p = { .fd = fd, .events = ev };
		int r = poll(&p, 1, (int)((until - t) / 1000000) + 1);
		if (r > 0)
			return p.revents;
		if (r < 0 && errno != EINTR)
			return -errno;
	}
}

static int send_all(int fd, const void *buf, size_t len, uint64_t until)
{
	const char *p = buf;
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			int r = fd_wait(fd, POLLOUT, until);
			if (r < 0)
				return r;
			continue;
		}
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int recv_all(int fd, void *buf, size_t len, uint64_t until)
{
	char *p = buf;
	while (len) {
		int r = fd_wait(fd, POLLIN, until);
		if (r < 0)
			return r;
		ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -ECONNRESET;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Copy a string, cut to @n bytes with its NUL. */
static void cpy(char *dst, size_t n, const char *src)
{
	size_t l = strnlen(src, n - 1);
	memcpy(dst, src, l);
	dst[l] = 0;
}

/* A size for messages: 64M, 4K, or bytes. */
static const char *agent_size_str(char b[24], uint64_t v)
{
	if (v && !(v & ((1u << 20) - 1)))
		snprintf(b, 24, "%" PRIu64 "M", v >> 20);
	else if (v && !(v & 1023))
		snprintf(b, 24, "%" PRIu64 "K", v >> 10);
	else
		snprintf(b, 24, "%" PRIu64, v);
	return b;
}

/* Check a peer's hello; "" if it fits, else why not (into @why). */
int agent_hello_check(const struct hello *h, int expect, char *why, size_t wl)
{
	why[0] = 0;
	if (h->magic != HELLO_MAGIC || h->version != OFI_VERSION)
		snprintf(why, wl, "speaks another ntbx (hello version %u, here %u)",
		         h->version, OFI_VERSION);
	else if (strncmp(h->name, ag.desc.name, sizeof h->name))
		snprintf(why, wl, "presents fabric '%.40s', this is fabric '%.40s'",
		         h->name, ag.desc.name);
	else if (h->key_hash != ag.desc.key_hash)
		snprintf(why, wl, "presents another key for fabric '%s'",
		         ag.desc.name);
	else if (h->layout != SHM_LAYOUT_VERSION)
		snprintf(why, wl, "has layout version %u (here %d)", h->layout,
		         SHM_LAYOUT_VERSION);
	else if (h->nnodes != (uint32_t)ag.nnodes || h->mem_size != ag.mem_size ||
	         h->window_max != ag.sdesc.window_max) {
		char a[24], b[24], c[24], d[24];
		snprintf(why, wl, "has another layout: %u nodes, memory %s, window "
		         "%s (here %d, %s, %s)", h->nnodes, agent_size_str(a, h->mem_size),
		         agent_size_str(b, h->window_max), ag.nnodes, agent_size_str(c, ag.mem_size),
		         agent_size_str(d, ag.sdesc.window_max));
	}
	else if (h->node >= (uint32_t)ag.nnodes || (int)h->node == ag.rank ||
	         (expect >= 0 && (int)h->node != expect))
		snprintf(why, wl, "says it is node %u", h->node);
	else if (strncmp(h->prov, ag.me.prov, sizeof h->prov))
		snprintf(why, wl, "uses provider %.63s, this host %s", h->prov,
		         ag.me.prov);
	else if (h->addrlen > sizeof h->addr || h->naddrs > NTBX_NODE_ADDRS)
		snprintf(why, wl, "sent a malformed hello");
	else if (h->cq_data_size < 4)
		snprintf(why, wl, "carries %u bytes of remote CQ data (4 needed)",
		         h->cq_data_size);
	return why[0] ? -1 : 0;
}

void agent_mbox_put(const struct hello *h)
{
	struct hello *c = malloc(sizeof *c);
	if (!c)
		return;
	*c = *h;
	pthread_mutex_lock(&ag.mbox_lock);
	free(ag.mbox[h->node]);
	ag.mbox[h->node] = c;
	pthread_mutex_unlock(&ag.mbox_lock);
	char b = 1;
	if (write(ag.kick_fd, &b, 1) < 0) {
		/* full: the agent wakes anyway */
	}
}

/* One exchange on a connected socket: send ours, read theirs. */
static int exchange(int fd, int expect, const char *who)
{
	uint64_t until = ntbx_now_ns() + (uint64_t)(ag.o->timeout_s * 1e9);
	struct hello *h = calloc(1, sizeof *h);
	if (!h)
		return -ENOMEM;
	int r = send_all(fd, &ag.me, sizeof ag.me, until);
	if (r == 0)
		r = recv_all(fd, h, sizeof *h, until);
	if (r < 0) {
		free(h);
		return r;
	}
	h->refused[sizeof h->refused - 1] = 0;
	h->name[sizeof h->name - 1] = 0;
	h->prov[sizeof h->prov - 1] = 0;
	char why[160], named[OFI_HOST_MAX + 32];
	if (expect < 0 && h->node < (uint32_t)ag.nnodes && (int)h->node != ag.rank) {
		/* an incoming hello names its node: say which host that is */
		snprintf(named, sizeof named, "%s", ag.peer[h->node].name);
		who = named;
	}
	if (h->refused[0]) {
		int n = h->node < (uint32_t)ag.nnodes ? (int)h->node : expect;
		if (n >= 0 && strncmp(ag.peer[n].why, h->refused, sizeof ag.peer[n].why)) {
			agent_say("refused by %s: %s", who, h->refused);
			cpy(ag.peer[n].why, sizeof ag.peer[n].why, h->refused);
			agent_set_why(n, "refused by %s: %s", ag.peer[n].name, h->refused);
		}
		free(h);
		return -EPERM;
	}
	if (agent_hello_check(h, expect, why, sizeof why) < 0) {
		int n = expect >= 0 ? expect
		        : h->node < (uint32_t)ag.nnodes ? (int)h->node : -1;
		if (n < 0 || strncmp(ag.peer[n].why, why, sizeof ag.peer[n].why))
			agent_say("refusing %s: it %s%s", who, why,
			    h->key_hash != ag.desc.key_hash ? " (check --key of `ntbx "
			    "fabric create` on both hosts)" : "");
		if (n >= 0) {
			cpy(ag.peer[n].why, sizeof ag.peer[n].why, why);
			agent_set_why(n, "refused %s: it %s", ag.peer[n].name, why);
		}
		/* and tell it, so that its log names the reason too */
		struct hello *no = calloc(1, sizeof *no);
		if (no) {
			*no = ag.me;
			/* the reason from its side: "it ..." read as ours */
			snprintf(no->refused, sizeof no->refused,
			         "%.60s says this host %.80s", agent_self_name, why);
			send_all(fd, no, sizeof *no, until);
			free(no);
		}
		free(h);
		return -EPERM;
	}
	ag.peer[h->node].why[0] = 0;
	agent_mbox_put(h);
	free(h);
	return 0;
}

struct addrinfo *agent_resolve(const char *host, unsigned port, int passive)
{
	char svc[16];
	snprintf(svc, sizeof svc, "%u", port);
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
	                          .ai_flags = passive ? AI_PASSIVE : 0 };
	struct addrinfo *ai = NULL;
	if (getaddrinfo(host, svc, &hints, &ai))
		return NULL;
	return ai;
}

static void try_meet(int n)
{
	struct peer *p = &ag.peer[n];
	struct addrinfo *ai = agent_resolve(ag.desc.host[n].addr, ag.desc.host[n].port, 0);
	char why[112];
	if (!ai) {
		snprintf(why, sizeof why, "cannot resolve %s", ag.desc.host[n].addr);
		goto bad;
	}
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		freeaddrinfo(ai);
		return;
	}
	uint64_t until = ntbx_now_ns() + (uint64_t)(ag.o->timeout_s * 1e9);
	int r = connect(fd, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(ai);
	if (r < 0 && errno == EINPROGRESS) {
		r = fd_wait(fd, POLLOUT, until);
		if (r >= 0) {
			int err = 0;
			socklen_t el = sizeof err;
			getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
			r = err ? -err : 0;
		}
	} else if (r < 0) {
		r = -errno;
	}
	if (r == 0) {
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		r = exchange(fd, n, p->name);
	}
	close(fd);
	if (r == 0 || r == -EPERM)
		return;
	snprintf(why, sizeof why, "cannot reach %.44s port %u: %.40s", p->name,
	         ag.desc.host[n].port,
	         r == -ETIMEDOUT ? "no answer within the time bound" : strerror(-r));
bad:
	if (strncmp(p->why, why, sizeof p->why)) {
		agent_say("%s (retrying)", why);
		cpy(p->why, sizeof p->why, why);
	}
	if (!__atomic_load_n(&ag.ctl->node[n].up, __ATOMIC_ACQUIRE))
		agent_set_why(n, "%s", why);
}

void *agent_rendezvous_main(void *arg)
{
	(void)arg;
	uint64_t next_try = 0;
	while (!ag.stop) {
		uint64_t now = ntbx_now_ns();
		if (now >= next_try) {
			for (int n = 0; n < ag.nnodes && !ag.stop; n++)
				if (n != ag.rank && !__atomic_load_n(&ag.peer[n].met,
				                                    __ATOMIC_ACQUIRE))
					try_meet(n);
			next_try = ntbx_now_ns() + 300 * 1000000ull;
		}
		struct pollfd pf = { .fd = ag.listen_fd, .events = POLLIN };
		if (poll(&pf, 1, 100) <= 0)
			continue;
		struct sockaddr_storage ss;
		socklen_t sl = sizeof ss;
		int fd = accept4(ag.listen_fd, (struct sockaddr *)&ss, &sl,
		                 SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0)
			continue;
		char who[80] = "?";
		getnameinfo((struct sockaddr *)&ss, sl, who, sizeof who, NULL, 0,
		            NI_NUMERICHOST);
		char name[96];
		snprintf(name, sizeof name, "the host at %s", who);
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		exchange(fd, -1, name);
		close(fd);
	}
	return NULL;
}
