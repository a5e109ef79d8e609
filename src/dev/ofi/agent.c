/* SPDX-License-Identifier: MIT */
/*
 * The node agent of the ofi backend: `ntbx node serve --fabric NAME`, one
 * per host.  It owns the libfabric endpoint of this host's node and
 *
 *   - registers node memory (target of the peers' fi_write, source of
 *     ours) and ofi.expo (scratchpads, window translations) with whatever
 *     mr_mode the provider asks (FI_MR_LOCAL, VIRT_ADDR, PROV_KEY,
 *     ENDPOINT, ALLOCATED);
 *   - meets the other hosts' agents at the addresses of the fabric's
 *     description (a TCP rendezvous on each host's port: addresses, keys,
 *     fabric name, layout and key hash, each side checking the other's),
 *     in a thread of its own that never calls libfabric;
 *   - executes the node's DMA queue (ofi.ctl: one ring per local handle)
 *     as fi_write / fi_read / fi_inject_write(data), in order per ring;
 *   - turns remote CQ data into doorbell bits and wake-ups of local
 *     sleepers, and progresses the provider (tcp;ofi_rxm progresses
 *     manually: a write lands only while the target calls into it);
 *   - sends a heartbeat to each peer; a peer silent for dead_ms, or an
 *     error completion, is link-down.  Its own death drops its lock on
 *     ofi.ctl, which local processes see as link-down.
 * The loop polls while there is work and for a moment after, then sleeps
 * on the CQ's wait descriptor and the kick FIFO, at most one heartbeat.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#ifdef NTBX_HAVE_PMIX
#include <pmix.h>
#endif

#include "dev/ofi/ofi.h"
#include "util/util.h"

#define OFI_API FI_VERSION(1, 9)
#define MR_MODES (FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | \
                  FI_MR_ALLOCATED | FI_MR_ENDPOINT)
#define MODES (FI_CONTEXT | FI_CONTEXT2)
#define KEY_MEM  0x6e74786d656dull   /* our keys when the provider takes ours */
#define KEY_EXPO 0x6e7478657870ull
#define CTX_POOL 4096                /* operations in flight, at most */
#define SPIN_NS  200000ull           /* poll at most this long when idle */
#define HELLO_MAGIC 0x4e58484cu      /* "NXHL" */

/* ------------------------------------------------------------ logging */

static char self_name[128] = "ntbx node serve";

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	fprintf(stderr, "ntbx node serve: %s: %s\n", self_name, msg);
}

/* ---------------------------------------------------------- rendezvous */

struct hello {
	uint32_t magic, version;
	uint32_t node, nnodes;
	uint32_t layout, epoch;
	uint64_t mem_size, window_max;
	uint64_t key_hash, boot_id;
	char name[64];
	char prov[64];
	uint64_t mem_base, mem_key;
	uint64_t expo_base, expo_key;
	uint32_t cq_data_size, addrlen;
	uint8_t addr[256];
	uint32_t naddrs, pad;
	struct ntbx_node_addr addrs[NTBX_NODE_ADDRS];
	char refused[160];       /* non-empty: the sender refuses us, why */
};

struct peer {
	int met;                 /* a hello of boot_id applied (atomic) */
	int up;
	uint64_t boot_id;
	fi_addr_t fa;
	uint64_t mem_base, mem_key, expo_base, expo_key;
	uint64_t heard_ns;       /* last CQ data from it */
	int outstanding;         /* our operations to it in flight */
	/* What local processes wrote into its scratchpads, written again
	 * at each link-up: a write while the link is down (before the
	 * agents met, or while the peer restarts) would be lost, and on the
	 * shm backend a scratchpad keeps what was written */
	uint32_t spad_out[NTBX_SPAD_COUNT];
	uint32_t spad_set;       /* bit i: spad_out[i] was written */
	char name[OFI_HOST_MAX + 32];
	char why[112];           /* rendezvous thread: last reported reason */
};

struct opctx {
	struct fi_context2 ctx;
	int slot;                /* -1: no ring entry */
	uint32_t gen, idx;
	int peer;
	struct opctx *next;
};

struct slot_state {
	uint32_t gen, head, done;
	uint8_t state[OFI_RING];     /* 0 free (or partly posted), 1 all
	                              * posted, in flight, 2 done */
	int32_t res[OFI_RING];       /* the first error of its pieces */
	uint32_t pieces[OFI_RING];   /* operations of it in flight */
	uint64_t posted[OFI_RING];   /* bytes of it posted (split writes) */
};

static struct agent {
	const struct ofi_agent_opts *o;
	struct ntbx_dev *dev;
	struct ofi_ctl *ctl;
	struct ofi_expo *expo;
	struct ofi_desc_file desc;
	struct shm_fabric_desc sdesc;
	int rank, nnodes;
	char *mem;
	uint64_t mem_size;

	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	struct fid_mr *mr_mem, *mr_expo;
	void *desc_mem, *desc_expo;
	uint64_t mr_mode;
	int ordered;
	size_t max_msg;
	int cq_fd;

	struct peer peer[NTBX_MAX_NODES];
	struct slot_state *slots;
	struct opctx *pool, *free_ctx;

	int kick_fd, ep_fd, listen_fd;
	struct hello me;

	pthread_mutex_t mbox_lock;
	struct hello *mbox[NTBX_MAX_NODES];
	volatile sig_atomic_t stop;
	uint64_t min_poll_ns;    /* poll at least this long after work */
} A;

static void on_signal(int sig)
{
	(void)sig;
	A.stop = 1;
}

static void set_why(int n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_why(int n, const char *fmt, ...)
{
	char buf[112];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	memcpy(A.ctl->node[n].why, buf, sizeof buf);
}

static int fd_wait(int fd, short ev, uint64_t until)
{
	for (;;) {
		uint64_t t = ntbx_now_ns();
		if (t >= until || A.stop)
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
static const char *sz(char b[24], uint64_t v)
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
static int hello_check(const struct hello *h, int expect, char *why, size_t wl)
{
	why[0] = 0;
	if (h->magic != HELLO_MAGIC || h->version != OFI_VERSION)
		snprintf(why, wl, "speaks another ntbx (hello version %u, here %u)",
		         h->version, OFI_VERSION);
	else if (strncmp(h->name, A.desc.name, sizeof h->name))
		snprintf(why, wl, "presents fabric '%.40s', this is fabric '%.40s'",
		         h->name, A.desc.name);
	else if (h->key_hash != A.desc.key_hash)
		snprintf(why, wl, "presents another key for fabric '%s'",
		         A.desc.name);
	else if (h->layout != SHM_LAYOUT_VERSION)
		snprintf(why, wl, "has layout version %u (here %d)", h->layout,
		         SHM_LAYOUT_VERSION);
	else if (h->nnodes != (uint32_t)A.nnodes || h->mem_size != A.mem_size ||
	         h->window_max != A.sdesc.window_max) {
		char a[24], b[24], c[24], d[24];
		snprintf(why, wl, "has another layout: %u nodes, memory %s, window "
		         "%s (here %d, %s, %s)", h->nnodes, sz(a, h->mem_size),
		         sz(b, h->window_max), A.nnodes, sz(c, A.mem_size),
		         sz(d, A.sdesc.window_max));
	}
	else if (h->node >= (uint32_t)A.nnodes || (int)h->node == A.rank ||
	         (expect >= 0 && (int)h->node != expect))
		snprintf(why, wl, "says it is node %u", h->node);
	else if (strncmp(h->prov, A.me.prov, sizeof h->prov))
		snprintf(why, wl, "uses provider %.63s, this host %s", h->prov,
		         A.me.prov);
	else if (h->addrlen > sizeof h->addr || h->naddrs > NTBX_NODE_ADDRS)
		snprintf(why, wl, "sent a malformed hello");
	else if (h->cq_data_size < 4)
		snprintf(why, wl, "carries %u bytes of remote CQ data (4 needed)",
		         h->cq_data_size);
	return why[0] ? -1 : 0;
}

static void mbox_put(const struct hello *h)
{
	struct hello *c = malloc(sizeof *c);
	if (!c)
		return;
	*c = *h;
	pthread_mutex_lock(&A.mbox_lock);
	free(A.mbox[h->node]);
	A.mbox[h->node] = c;
	pthread_mutex_unlock(&A.mbox_lock);
	char b = 1;
	if (write(A.kick_fd, &b, 1) < 0) {
		/* full: the agent wakes anyway */
	}
}

/* One exchange on a connected socket: send ours, read theirs. */
static int exchange(int fd, int expect, const char *who)
{
	uint64_t until = ntbx_now_ns() + (uint64_t)(A.o->timeout_s * 1e9);
	struct hello *h = calloc(1, sizeof *h);
	if (!h)
		return -ENOMEM;
	int r = send_all(fd, &A.me, sizeof A.me, until);
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
	if (expect < 0 && h->node < (uint32_t)A.nnodes && (int)h->node != A.rank) {
		/* an incoming hello names its node: say which host that is */
		snprintf(named, sizeof named, "%s", A.peer[h->node].name);
		who = named;
	}
	if (h->refused[0]) {
		int n = h->node < (uint32_t)A.nnodes ? (int)h->node : expect;
		if (n >= 0 && strncmp(A.peer[n].why, h->refused, sizeof A.peer[n].why)) {
			say("refused by %s: %s", who, h->refused);
			cpy(A.peer[n].why, sizeof A.peer[n].why, h->refused);
			set_why(n, "refused by %s: %s", A.peer[n].name, h->refused);
		}
		free(h);
		return -EPERM;
	}
	if (hello_check(h, expect, why, sizeof why) < 0) {
		int n = expect >= 0 ? expect
		        : h->node < (uint32_t)A.nnodes ? (int)h->node : -1;
		if (n < 0 || strncmp(A.peer[n].why, why, sizeof A.peer[n].why))
			say("refusing %s: it %s%s", who, why,
			    h->key_hash != A.desc.key_hash ? " (check --key of `ntbx "
			    "fabric create` on both hosts)" : "");
		if (n >= 0) {
			cpy(A.peer[n].why, sizeof A.peer[n].why, why);
			set_why(n, "refused %s: it %s", A.peer[n].name, why);
		}
		/* and tell it, so that its log names the reason too */
		struct hello *no = calloc(1, sizeof *no);
		if (no) {
			*no = A.me;
			/* the reason from its side: "it ..." read as ours */
			snprintf(no->refused, sizeof no->refused,
			         "%.60s says this host %.80s", self_name, why);
			send_all(fd, no, sizeof *no, until);
			free(no);
		}
		free(h);
		return -EPERM;
	}
	A.peer[h->node].why[0] = 0;
	mbox_put(h);
	free(h);
	return 0;
}

static struct addrinfo *resolve(const char *host, unsigned port, int passive)
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
	struct peer *p = &A.peer[n];
	struct addrinfo *ai = resolve(A.desc.host[n].addr, A.desc.host[n].port, 0);
	char why[112];
	if (!ai) {
		snprintf(why, sizeof why, "cannot resolve %s", A.desc.host[n].addr);
		goto bad;
	}
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		freeaddrinfo(ai);
		return;
	}
	uint64_t until = ntbx_now_ns() + (uint64_t)(A.o->timeout_s * 1e9);
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
	         A.desc.host[n].port,
	         r == -ETIMEDOUT ? "no answer within the time bound" : strerror(-r));
bad:
	if (strncmp(p->why, why, sizeof p->why)) {
		say("%s (retrying)", why);
		cpy(p->why, sizeof p->why, why);
	}
	if (!__atomic_load_n(&A.ctl->node[n].up, __ATOMIC_ACQUIRE))
		set_why(n, "%s", why);
}

static void *rendezvous_main(void *arg)
{
	(void)arg;
	uint64_t next_try = 0;
	while (!A.stop) {
		uint64_t now = ntbx_now_ns();
		if (now >= next_try) {
			for (int n = 0; n < A.nnodes && !A.stop; n++)
				if (n != A.rank && !__atomic_load_n(&A.peer[n].met,
				                                    __ATOMIC_ACQUIRE))
					try_meet(n);
			next_try = ntbx_now_ns() + 300 * 1000000ull;
		}
		struct pollfd pf = { .fd = A.listen_fd, .events = POLLIN };
		if (poll(&pf, 1, 100) <= 0)
			continue;
		struct sockaddr_storage ss;
		socklen_t sl = sizeof ss;
		int fd = accept4(A.listen_fd, (struct sockaddr *)&ss, &sl,
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

/* ------------------------------------------------------------- libfabric */

static int fi_fail(const char *what, int ret)
{
	say("%s: %s (%d)", what, fi_strerror(-ret), ret);
	return -1;
}

static struct fi_info *hints_new(int delivery)
{
	struct fi_info *h = fi_allocinfo();
	if (!h)
		return NULL;
	h->ep_attr->type = FI_EP_RDM;
	h->caps = FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
	h->mode = MODES;
	h->domain_attr->mr_mode = MR_MODES;
	h->domain_attr->threading = FI_THREAD_DOMAIN;
	if (delivery)
		h->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
	return h;
}

static int is_sockets(const char *p)
{
	return p && (!strcmp(p, "sockets") || strstr(p, "sockets;") ||
	             strstr(p, ";sockets"));
}

/* No provider fits at @node: ask with less and name what is missing. */
static int explain_none(const char *node, const char *svc)
{
	const char *env = getenv("FI_PROVIDER");
	struct fi_info *h = fi_allocinfo(), *all = NULL;
	if (!h)
		return -1;
	h->ep_attr->type = FI_EP_RDM;
	h->mode = ~0ull;
	h->domain_attr->mr_mode = MR_MODES | FI_MR_RAW | FI_MR_MMU_NOTIFY |
	                          FI_MR_RMA_EVENT | FI_MR_HMEM | FI_MR_COLLECTIVE;
	int r = fi_getinfo(OFI_API, node, svc, FI_SOURCE, h, &all);
	fi_freeinfo(h);
	if (r || !all) {
		if (env)
			say("provider %s (FI_PROVIDER) offers no RDM endpoint with RMA at "
			    "%s (fi_getinfo: %s)", env, node, fi_strerror(-r));
		else
			say("no libfabric provider offers an RDM endpoint with RMA at %s "
			    "(fi_getinfo: %s)", node, fi_strerror(-r));
		return -1;
	}
	struct fi_info *i = all;
	const char *pn = i->fabric_attr->prov_name;
	char mb[64];
	snprintf(mb, sizeof mb, "0x%" PRIx64, (uint64_t)i->domain_attr->mr_mode);
	if (!(i->caps & FI_RMA))
		say("provider %s at %s lacks FI_RMA (RMA reads and writes), which the "
		    "ofi backend needs", pn, node);
	else if (!(i->caps & FI_READ) || !(i->caps & FI_REMOTE_READ))
		say("provider %s at %s lacks FI_READ/FI_REMOTE_READ (RMA reads), which "
		    "the ofi backend needs", pn, node);
	else if (i->domain_attr->cq_data_size < 4)
		say("provider %s at %s lacks remote CQ data (cq_data_size %zu, 4 "
		    "needed for doorbells)", pn, node, i->domain_attr->cq_data_size);
	else if (i->mode & FI_RX_CQ_DATA)
		say("provider %s at %s needs FI_RX_CQ_DATA (posted receives for remote "
		    "CQ data), which the ofi backend does not post", pn, node);
	else if (i->domain_attr->mr_mode & ~(uint64_t)MR_MODES)
		say("provider %s at %s asks mr_mode %s, beyond what the ofi backend "
		    "handles (FI_MR_LOCAL|VIRT_ADDR|PROV_KEY|ALLOCATED|ENDPOINT)", pn,
		    node, mb);
	else
		say("provider %s at %s does not fit (caps 0x%" PRIx64 ", mode 0x%"
		    PRIx64 ")", pn, node, (uint64_t)i->caps, (uint64_t)i->mode);
	fi_freeinfo(all);
	return -1;
}

static int fab_open(const char *node, unsigned port)
{
	char svc[16];
	snprintf(svc, sizeof svc, "%u", port);
	struct fi_info *all = NULL, *pick = NULL;
	int r = -FI_ENODATA;
	/* FI_DELIVERY_COMPLETE: a write's completion means the bytes are in
	 * the peer's memory, as ntbx_dma_write promises; NTBX_OFI_DELIVERY=0
	 * measures what that costs (transmit completion: not the contract) */
	const char *dv = getenv("NTBX_OFI_DELIVERY");
	int want_delivery = !(dv && !strcmp(dv, "0"));
	for (int delivery = want_delivery; delivery >= 0 && (r || !all); delivery--) {
		struct fi_info *h = hints_new(delivery);
		if (!h)
			return -1;
		r = fi_getinfo(OFI_API, node, svc, FI_SOURCE, h, &all);
		fi_freeinfo(h);
	}
	if (r == -FI_ENODATA || (!r && !all))
		return explain_none(node, svc);
	if (r)
		return fi_fail("fi_getinfo", r);
	if (getenv("FI_PROVIDER"))
		pick = all;
	for (struct fi_info *i = all; i && !pick; i = i->next)
		if (!strcmp(i->fabric_attr->prov_name, "tcp;ofi_rxm"))
			pick = i;
	for (struct fi_info *i = all; i && !pick; i = i->next)
		if (!is_sockets(i->fabric_attr->prov_name))
			pick = i;
	if (!pick) {
		say("only the sockets provider offers RMA at %s (1000x slower); set "
		    "FI_PROVIDER=sockets to use it anyway", node);
		fi_freeinfo(all);
		return -1;
	}
	const char *pn = pick->fabric_attr->prov_name;
	if (pick->domain_attr->cq_data_size < 4) {
		say("provider %s at %s lacks remote CQ data (cq_data_size %zu, 4 "
		    "needed for doorbells)", pn, node, pick->domain_attr->cq_data_size);
		fi_freeinfo(all);
		return -1;
	}
	if (pick->domain_attr->mr_key_size > 8) {
		say("provider %s at %s uses %zu-byte memory keys (FI_MR_RAW), not "
		    "supported", pn, node, pick->domain_attr->mr_key_size);
		fi_freeinfo(all);
		return -1;
	}
	A.info = fi_dupinfo(pick);
	fi_freeinfo(all);
	struct fi_info *i = A.info;
	A.mr_mode = i->domain_attr->mr_mode;
	uint64_t o = i->tx_attr->msg_order & i->rx_attr->msg_order;
	A.ordered = !!(o & (FI_ORDER_WAW | FI_ORDER_RMA_WAW));
	A.max_msg = i->ep_attr->max_msg_size ? i->ep_attr->max_msg_size : SIZE_MAX;
	/* NTBX_OFI_MAX_MSG: a smaller limit than the provider's, to test the
	 * split (tcp;ofi_rxm and shm say SIZE_MAX and have no knob for it) */
	long mm = ntbx_env_long("NTBX_OFI_MAX_MSG", 0, 0, 1l << 30);
	if (mm > 0 && (size_t)mm < A.max_msg) {
		A.max_msg = (size_t)mm;
		say("transfers split at %zu bytes (NTBX_OFI_MAX_MSG)", A.max_msg);
	}
	if ((r = fi_fabric(i->fabric_attr, &A.fabric, NULL)))
		return fi_fail("fi_fabric", r);
	if ((r = fi_domain(A.fabric, i, &A.domain, NULL)))
		return fi_fail("fi_domain", r);
	struct fi_cq_attr cqa = { .format = FI_CQ_FORMAT_DATA,
	                          .wait_obj = FI_WAIT_FD, .size = 8192 };
	A.cq_fd = -1;
	if (fi_cq_open(A.domain, &cqa, &A.cq, NULL) == 0) {
		if (fi_control(&A.cq->fid, FI_GETWAIT, &A.cq_fd) != 0)
			A.cq_fd = -1;
	} else {
		cqa.wait_obj = FI_WAIT_NONE;
		if ((r = fi_cq_open(A.domain, &cqa, &A.cq, NULL)))
			return fi_fail("fi_cq_open", r);
	}
	struct fi_av_attr ava = {
		.type = i->domain_attr->av_type == FI_AV_UNSPEC ? FI_AV_MAP
		                                                : i->domain_attr->av_type,
		.count = NTBX_MAX_NODES * 2,
	};
	if ((r = fi_av_open(A.domain, &ava, &A.av, NULL)))
		return fi_fail("fi_av_open", r);
	if ((r = fi_endpoint(A.domain, i, &A.ep, NULL)))
		return fi_fail("fi_endpoint", r);
	if ((r = fi_ep_bind(A.ep, &A.av->fid, 0)))
		return fi_fail("fi_ep_bind(av)", r);
	if ((r = fi_ep_bind(A.ep, &A.cq->fid, FI_TRANSMIT | FI_RECV)))
		return fi_fail("fi_ep_bind(cq)", r);
	if ((r = fi_enable(A.ep)))
		return fi_fail("fi_enable", r);
	return 0;
}

static int mr_reg(void *buf, size_t len, uint64_t access, uint64_t key,
                  struct fid_mr **mr, void **desc)
{
	int r = fi_mr_reg(A.domain, buf, len, access, 0,
	                  (A.mr_mode & FI_MR_PROV_KEY) ? 0 : key, 0, mr, NULL);
	if (r)
		return fi_fail("fi_mr_reg", r);
	if (A.mr_mode & FI_MR_ENDPOINT) {
		if ((r = fi_mr_bind(*mr, &A.ep->fid, 0)))
			return fi_fail("fi_mr_bind", r);
		if ((r = fi_mr_enable(*mr)))
			return fi_fail("fi_mr_enable", r);
	}
	*desc = fi_mr_desc(*mr);
	if (fi_mr_key(*mr) == FI_KEY_NOTAVAIL) {
		say("provider %s gives no 64-bit memory key",
		    A.info->fabric_attr->prov_name);
		return -1;
	}
	return 0;
}

static void local_addrs(struct hello *h)
{
	struct ifaddrs *ifa;
	if (getifaddrs(&ifa) < 0)
		return;
	static const uint8_t v4map[12] = { 0,0,0,0,0,0,0,0,0,0,0xff,0xff };
	uint32_t n = 0;
	for (struct ifaddrs *i = ifa; i && n < NTBX_NODE_ADDRS; i = i->ifa_next) {
		if (!i->ifa_addr)
			continue;
		struct ntbx_node_addr a = { 0 };
		if (i->ifa_addr->sa_family == AF_INET) {
			const struct sockaddr_in *s = (const void *)i->ifa_addr;
			memcpy(a.addr, v4map, 12);
			memcpy(a.addr + 12, &s->sin_addr, 4);
			if (a.addr[12] == 127 || !s->sin_addr.s_addr)
				continue;
			a.family = AF_INET;
			a.prefix = 32;
		} else if (i->ifa_addr->sa_family == AF_INET6) {
			const struct sockaddr_in6 *s = (const void *)i->ifa_addr;
			if (IN6_IS_ADDR_LOOPBACK(&s->sin6_addr) ||
			    IN6_IS_ADDR_LINKLOCAL(&s->sin6_addr))
				continue;
			memcpy(a.addr, &s->sin6_addr, 16);
			a.family = AF_INET6;
			a.prefix = 128;
		} else {
			continue;
		}
		h->addrs[n++] = a;
	}
	freeifaddrs(ifa);
	h->naddrs = n;
}

/* ----------------------------------------------------------- operations */

static struct opctx *ctx_get(void)
{
	struct opctx *c = A.free_ctx;
	if (c)
		A.free_ctx = c->next;
	return c;
}

static void ctx_put(struct opctx *c)
{
	c->next = A.free_ctx;
	A.free_ctx = c;
}

static void peer_down(int n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void peer_down(int n, const char *fmt, ...)
{
	struct peer *p = &A.peer[n];
	char buf[112];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (p->up)
		say("link down to node %d %s: %s", n, p->name, buf);
	p->up = 0;
	__atomic_store_n(&p->met, 0, __ATOMIC_RELEASE);   /* meet it again */
	memcpy(A.ctl->node[n].why, buf, sizeof buf);
	__atomic_store_n(&A.ctl->node[n].up, 0, __ATOMIC_RELEASE);
}

static uint64_t expo_addr(int n, size_t field_off)
{
	struct peer *p = &A.peer[n];
	return ((A.mr_mode & FI_MR_VIRT_ADDR) ? p->expo_base : 0) + field_off;
}

/* Run @call until it is not -FI_EAGAIN, progressing meanwhile (bounded):
 * with manual progress the provider frees room only when called. */
static void progress(void);
#define RETRY(expr) ({ ssize_t _r; int _k = 0; \
	while ((_r = (expr)) == -FI_EAGAIN && _k++ < 100000) { progress(); } \
	_r; })

/* One operation of ring entry @idx completed: the entry is done when its
 * last piece is, with the first error of any. */
static void slot_complete(int s, uint32_t gen, uint32_t idx, int32_t res)
{
	struct slot_state *st = &A.slots[s];
	if (st->gen != gen || (uint32_t)(idx - st->done) >= OFI_RING)
		return;   /* a handle that is gone */
	uint32_t i = idx % OFI_RING;
	if (res < 0 && st->res[i] == 0)
		st->res[i] = res;
	if (st->pieces[i])
		st->pieces[i]--;
	if (!st->pieces[i] && st->state[i] == 1)
		st->state[i] = 2;
}

/* Execute one descriptor.  1: done (result in *res), 0: in flight,
 * -1: not now (try again later, the descriptor stays). */
static int exec_desc(int s, uint32_t idx, const struct ofi_dma_desc *d,
                     int32_t *res)
{
	struct ntbx_dev *dev = A.dev;
	if (d->port >= (uint32_t)dev->nports) {
		*res = -EINVAL;
		return 1;
	}
	int port = (int)d->port;
	int n = dev->port_peer[port];
	struct peer *p = &A.peer[n];
	if (!p->up) {
		/* a scratchpad write is kept for the link-up (push_spads) */
		if (d->op == OFI_OP_SPAD_WRITE && d->widx < NTBX_SPAD_COUNT) {
			p->spad_out[d->widx] = d->val;
			p->spad_set |= 1u << d->widx;
			*res = 0;
			return 1;
		}
		*res = -ENOLINK;
		return 1;
	}
	int q = ofi_dev_peer_port(dev, port);
	size_t pbase = offsetof(struct ofi_expo, port) + (size_t)q * sizeof(struct ofi_expo_port);
	ssize_t r;
	if (d->op == OFI_OP_SPAD_WRITE && d->widx < NTBX_SPAD_COUNT) {
		p->spad_out[d->widx] = d->val;
		p->spad_set |= 1u << d->widx;
	}
	switch (d->op) {
	case OFI_OP_WRITE:
	case OFI_OP_READ: {
		if (s < 0 || d->widx >= NTBX_MW_COUNT || d->len > A.mem_size ||
		    d->loff > A.mem_size - d->len) {
			*res = -EINVAL;
			return 1;
		}
		struct ofi_expo_port *ep = &A.expo->port[port];
		uint64_t sz = __atomic_load_n(&ep->xlat[d->widx].size, __ATOMIC_ACQUIRE);
		uint64_t off = __atomic_load_n(&ep->xlat[d->widx].off, __ATOMIC_ACQUIRE);
		if (__atomic_load_n(&ep->xlat[d->widx].size, __ATOMIC_ACQUIRE) != sz ||
		    !sz) {
			*res = -ENOTCONN;
			return 1;
		}
		if (off > A.mem_size || sz > A.mem_size - off || d->roff > sz ||
		    d->len > sz - d->roff) {
			*res = -ERANGE;
			return 1;
		}
		if (!d->len) {
			*res = 0;
			return 1;
		}
		struct slot_state *st = &A.slots[s];
		uint32_t i = idx % OFI_RING;
		uint64_t pos = st->posted[i];
		if (!pos && !A.ordered && d->op == OFI_OP_READ && p->outstanding)
			return -1;   /* a read after our writes sees them */
		uint64_t raddr = ((A.mr_mode & FI_MR_VIRT_ADDR) ? p->mem_base : 0) +
		                 off + d->roff;
		char *buf = A.mem + d->loff;
		/* Larger than the provider takes in one operation: in pieces of
		 * max_msg_size, each with its own completion; a piece that does
		 * not fit now is posted on a later pass (the entry stays, and
		 * what was posted is remembered).  Pieces of one entry go in
		 * order, so on an ordered provider a doorbell after the entry
		 * still lands after all of them. */
		while (pos < d->len) {
			size_t len = d->len - pos < A.max_msg ? (size_t)(d->len - pos)
			                                      : A.max_msg;
			struct opctx *c = ctx_get();
			if (!c)
				break;
			*c = (struct opctx){ .slot = s, .gen = st->gen, .idx = idx,
			                     .peer = n };
			if (d->op == OFI_OP_WRITE)
				r = fi_write(A.ep, buf + pos, len, A.desc_mem, p->fa,
				             raddr + pos, p->mem_key, c);
			else
				r = fi_read(A.ep, buf + pos, len, A.desc_mem, p->fa,
				            raddr + pos, p->mem_key, c);
			if (r) {
				ctx_put(c);
				if (r == -FI_EAGAIN)
					break;
				peer_down(n, "RMA %s to %s failed: %s", d->op == OFI_OP_WRITE
				          ? "write" : "read", p->name, fi_strerror((int)-r));
				if (!st->res[i])
					st->res[i] = -EIO;
				pos = d->len;   /* nothing more of it */
				break;
			}
			st->pieces[i]++;
			p->outstanding++;
			pos += len;
		}
		st->posted[i] = pos;
		if (pos < d->len)
			return -1;
		if (!st->pieces[i]) {   /* every piece done already, or failed */
			*res = st->res[i];
			return 1;
		}
		return 0;
	}
	case OFI_OP_DB: {
		if (!A.ordered && p->outstanding)
			return -1;   /* bits after the writes they announce */
		uint32_t bits = d->val & NTBX_DB_VALID_MASK;
		r = fi_inject_writedata(A.ep, &bits, sizeof bits,
		                        OFI_IMM(OFI_IMM_DB, dev->node, bits), p->fa,
		                        expo_addr(n, pbase + offsetof(struct ofi_expo_port, db_last)),
		                        p->expo_key);
		break;
	}
	case OFI_OP_SPAD_WRITE: {
		if (d->widx >= NTBX_SPAD_COUNT) {
			*res = -EINVAL;
			return 1;
		}
		if (!A.ordered && p->outstanding)
			return -1;
		uint32_t v = d->val;
		r = fi_inject_write(A.ep, &v, sizeof v, p->fa,
		                    expo_addr(n, pbase + offsetof(struct ofi_expo_port, spad) +
		                              4 * d->widx), p->expo_key);
		break;
	}
	case OFI_OP_SPAD_READ: {
		if (d->widx >= NTBX_SPAD_COUNT || d->loff > A.mem_size - 4) {
			*res = -EINVAL;
			return 1;
		}
		if (!A.ordered && p->outstanding)
			return -1;
		if (s < 0) {
			*res = -EINVAL;
			return 1;
		}
		struct opctx *c = ctx_get();
		if (!c)
			return -1;
		*c = (struct opctx){ .slot = s, .gen = A.slots[s].gen, .idx = idx,
		                     .peer = n };
		r = fi_read(A.ep, A.mem + d->loff, 4, A.desc_mem, p->fa,
		            expo_addr(n, pbase + offsetof(struct ofi_expo_port, spad) +
		                      4 * d->widx), p->expo_key, c);
		if (r == -FI_EAGAIN) {
			ctx_put(c);
			return -1;
		}
		if (r) {
			ctx_put(c);
			break;
		}
		A.slots[s].pieces[idx % OFI_RING]++;
		p->outstanding++;
		return 0;
	}
	case OFI_OP_XLAT: {
		if (d->widx >= NTBX_MW_COUNT) {
			*res = -EINVAL;
			return 1;
		}
		if (!A.ordered && p->outstanding)
			return -1;
		uint64_t off = 0, size = 0, zero = 0;
		ntbx_mw_get_trans(dev, port, (int)d->widx, &off, &size);
		size_t x = pbase + offsetof(struct ofi_expo_port, xlat) + 16 * d->widx;
		/* size 0, offset, size: a reader never pairs the new offset
		 * with the old size (ordered writes; see design-notes) */
		r = RETRY(fi_inject_write(A.ep, &zero, 8, p->fa, expo_addr(n, x + 8),
		                          p->expo_key));
		if (!r)
			r = RETRY(fi_inject_write(A.ep, &off, 8, p->fa, expo_addr(n, x),
			                          p->expo_key));
		if (!r)
			r = RETRY(fi_inject_write(A.ep, &size, 8, p->fa,
			                          expo_addr(n, x + 8), p->expo_key));
		break;
	}
	default:
		*res = -EINVAL;
		return 1;
	}
	if (r == -FI_EAGAIN)
		return -1;
	if (r) {
		peer_down(n, "RMA to %s failed: %s", p->name, fi_strerror((int)-r));
		*res = -ENOLINK;
		return 1;
	}
	*res = 0;
	return 1;
}

/* Push every inbound window translation of the port facing @n. */
static void push_xlats(int n)
{
	int port = A.dev->node_port[n];
	if (port < 0)
		return;
	for (int w = 0; w < NTBX_MW_COUNT; w++) {
		struct ofi_dma_desc d = { .op = OFI_OP_XLAT, .port = (uint32_t)port,
		                          .widx = (uint32_t)w };
		int32_t res;
		exec_desc(-1, 0, &d, &res);
	}
}

/* Write again what local processes wrote into @n's scratchpads, in index
 * order (the fabric's check word is the last index). */
static void push_spads(int n)
{
	int port = A.dev->node_port[n];
	struct peer *p = &A.peer[n];
	if (port < 0)
		return;
	for (uint32_t i = 0; i < NTBX_SPAD_COUNT; i++) {
		if (!(p->spad_set & 1u << i))
			continue;
		struct ofi_dma_desc d = { .op = OFI_OP_SPAD_WRITE,
		                          .port = (uint32_t)port, .widx = i,
		                          .val = p->spad_out[i] };
		int32_t res;
		/* not now (a full queue, or an unordered provider's writes
		 * before it): progress, bounded as RETRY is */
		for (int k = 0; k < 100000 && p->up && exec_desc(-1, 0, &d, &res) < 0;
		     k++)
			progress();
	}
}

/* Take new descriptors of every active ring; 1 if anything happened. */
static int scan_rings(void)
{
	int work = 0;
	for (int w = 0; w < SHM_SLOTS / 64; w++) {
		uint64_t m = __atomic_load_n(&A.ctl->active[w], __ATOMIC_ACQUIRE);
		while (m) {
			int s = w * 64 + __builtin_ctzll(m);
			m &= m - 1;
			struct ofi_ring *ring = &A.ctl->ring[s];
			struct slot_state *st = &A.slots[s];
			uint32_t gen = __atomic_load_n(&ring->gen, __ATOMIC_ACQUIRE);
			if (gen != st->gen) {
				memset(st, 0, sizeof *st);
				st->gen = gen;
			}
			uint32_t tail = __atomic_load_n(&ring->tail, __ATOMIC_ACQUIRE);
			if (__atomic_load_n(&ring->gen, __ATOMIC_ACQUIRE) != gen ||
			    tail - st->done > OFI_RING)
				continue;   /* being reset, or garbage */
			while (st->head != tail) {
				struct ofi_dma_desc d;
				memcpy(&d, &ring->d[st->head % OFI_RING], sizeof d);
				int32_t res = 0;
				uint32_t i = st->head % OFI_RING;
				int r = exec_desc(s, st->head, &d, &res);
				if (r < 0)
					break;
				work = 1;
				if (r) {
					st->res[i] = res;
					st->state[i] = 2;
				} else {   /* its pieces may have completed meanwhile */
					st->state[i] = (uint8_t)(st->pieces[i] ? 1 : 2);
				}
				st->head++;
			}
			uint32_t done = st->done;
			while (done != st->head && st->state[done % OFI_RING] == 2) {
				uint32_t i = done % OFI_RING;
				__atomic_store_n(&ring->d[i].result, st->res[i],
				                 __ATOMIC_RELAXED);
				st->state[i] = 0;
				st->res[i] = 0;
				st->posted[i] = 0;
				done++;
			}
			if (done != st->done) {
				st->done = done;
				__atomic_store_n(&ring->done, done, __ATOMIC_SEQ_CST);
				if (__atomic_load_n(&ring->waiting, __ATOMIC_SEQ_CST)) {
					__atomic_store_n(&ring->waiting, 0, __ATOMIC_RELAXED);
					ntbx_futex_wake(&ring->done, INT_MAX);
				}
				work = 1;
			}
		}
	}
	return work;
}

static void on_imm(uint64_t data)
{
	int n = OFI_IMM_NODE(data);
	if (n >= A.nnodes || n == A.rank)
		return;   /* garbage */
	struct peer *p = &A.peer[n];
	p->heard_ns = ntbx_now_ns();
	if (!p->up && __atomic_load_n(&p->met, __ATOMIC_ACQUIRE)) {
		p->up = 1;
		__atomic_store_n(&A.ctl->node[n].up, 1, __ATOMIC_RELEASE);
	}
	if (OFI_IMM_KIND(data) != OFI_IMM_DB)
		return;
	int port = A.dev->node_port[n];
	uint32_t bits = OFI_IMM_BITS(data);
	if (port < 0 || !bits)
		return;
	__atomic_fetch_or(ofi_dev_db_reg(A.dev, port), bits, __ATOMIC_SEQ_CST);
	ofi_dev_db_wake(A.dev, port, bits);
}

static int cq_poll(void)
{
	struct fi_cq_data_entry e[32];
	ssize_t n = fi_cq_read(A.cq, e, 32);
	if (n == -FI_EAGAIN)
		return 0;
	if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry ee = { 0 };
		if (fi_cq_readerr(A.cq, &ee, 0) != 1)
			return 1;
		char eb[256] = "";
		const char *es = fi_cq_strerror(A.cq, ee.prov_errno, ee.err_data, eb,
		                                sizeof eb);
		struct opctx *c = ee.op_context;
		if (c) {
			A.peer[c->peer].outstanding--;
			peer_down(c->peer, "a transfer to %s failed: %s (%s)",
			          A.peer[c->peer].name, fi_strerror(ee.err), es ? es : "");
			if (c->slot >= 0)
				slot_complete(c->slot, c->gen, c->idx, -ENOLINK);
			ctx_put(c);
		} else {
			say("an operation failed: %s (%s)", fi_strerror(ee.err), es ? es : "");
		}
		return 1;
	}
	if (n < 0) {
		say("fi_cq_read: %s", fi_strerror((int)-n));
		return 0;
	}
	for (ssize_t k = 0; k < n; k++) {
		if (e[k].flags & FI_REMOTE_CQ_DATA) {
			on_imm(e[k].data);
		} else if (e[k].op_context) {
			struct opctx *c = e[k].op_context;
			A.peer[c->peer].outstanding--;
			if (c->slot >= 0)
				slot_complete(c->slot, c->gen, c->idx, 0);
			ctx_put(c);
		}
	}
	return n > 0;
}

static void progress(void)
{
	cq_poll();
}

/* Hellos the rendezvous thread accepted: apply them. */
static int apply_hellos(void)
{
	int work = 0;
	for (int n = 0; n < A.nnodes; n++) {
		if (!__atomic_load_n(&A.mbox[n], __ATOMIC_ACQUIRE))
			continue;
		pthread_mutex_lock(&A.mbox_lock);
		struct hello *h = A.mbox[n];
		A.mbox[n] = NULL;
		pthread_mutex_unlock(&A.mbox_lock);
		if (!h)
			continue;
		work = 1;
		struct peer *p = &A.peer[n];
		if (p->up && p->boot_id == h->boot_id) {
			free(h);
			continue;   /* the same agent, met from both sides */
		}
		if (p->boot_id && p->boot_id != h->boot_id)
			fi_av_remove(A.av, &p->fa, 1, 0);
		if (p->boot_id != h->boot_id) {
			fi_addr_t fa = FI_ADDR_NOTAVAIL;
			if (fi_av_insert(A.av, h->addr, 1, &fa, 0, NULL) != 1) {
				set_why(n, "the address of %s does not fit this provider",
				        p->name);
				say("fi_av_insert of %s's address failed", p->name);
				free(h);
				continue;
			}
			p->fa = fa;
		}
		p->boot_id = h->boot_id;
		p->mem_base = h->mem_base;
		p->mem_key = h->mem_key;
		p->expo_base = h->expo_base;
		p->expo_key = h->expo_key;
		p->heard_ns = ntbx_now_ns();
		p->outstanding = 0;
		struct ofi_peer_state *ps = &A.ctl->node[n];
		memcpy(ps->addrs, h->addrs, sizeof ps->addrs);
		__atomic_store_n(&ps->naddrs, h->naddrs, __ATOMIC_RELEASE);
		__atomic_store_n(&ps->epoch, h->epoch, __ATOMIC_RELEASE);
		__atomic_fetch_add(&ps->seen, 1, __ATOMIC_RELEASE);
		ps->why[0] = 0;
		p->up = 1;
		__atomic_store_n(&p->met, 1, __ATOMIC_RELEASE);
		push_xlats(n);
		push_spads(n);
		__atomic_store_n(&ps->up, 1, __ATOMIC_RELEASE);
		say("link up to node %d %s (epoch %u)", n, p->name, h->epoch);
		free(h);
	}
	return work;
}

static void heartbeat(void)
{
	uint64_t now = ntbx_now_ns();
	for (int n = 0; n < A.nnodes; n++) {
		struct peer *p = &A.peer[n];
		if (n == A.rank || !p->up)
			continue;
		if (now - p->heard_ns > (uint64_t)A.o->dead_ms * 1000000ull) {
			peer_down(n, "no word from %s for %d ms (its agent died, or the "
			          "link failed)", p->name, A.o->dead_ms);
			continue;
		}
		uint32_t z = 0;
		int q = ofi_dev_peer_port(A.dev, A.dev->node_port[n]);
		size_t at = offsetof(struct ofi_expo, port) +
		            (size_t)q * sizeof(struct ofi_expo_port) +
		            offsetof(struct ofi_expo_port, db_last);
		ssize_t r = fi_inject_writedata(A.ep, &z, sizeof z,
		                                OFI_IMM(OFI_IMM_HB, A.rank, 0), p->fa,
		                                expo_addr(n, at), p->expo_key);
		if (r && r != -FI_EAGAIN)
			peer_down(n, "heartbeat to %s failed: %s", p->name,
			          fi_strerror((int)-r));
	}
}

/* ------------------------------------------------------------------ PMIx */

#ifdef NTBX_HAVE_PMIX
static int pmix_up;

/*
 * Under a PMIx launcher (Open MPI's mpirun, srun, PRRTE: PMIX_NAMESPACE in
 * the environment), every agent puts its hello, fences with the others and
 * gets theirs: the links come up without the TCP rendezvous, which keeps
 * running for agents that restart.  0 when done or not under PMIx, -1 on a
 * failure that must stop the agent (the launcher's job does not match the
 * fabric).
 */
static int pmix_exchange(void)
{
	if (!getenv("PMIX_NAMESPACE"))
		return 0;
	pmix_proc_t me;
	pmix_status_t rc = PMIx_Init(&me, NULL, 0);
	if (rc != PMIX_SUCCESS) {
		say("PMIx_Init: %s; meeting the peers through the rendezvous only",
		    PMIx_Error_string(rc));
		return 0;
	}
	pmix_up = 1;
	if ((int)me.rank != A.rank) {
		say("PMIx says rank %u, this host is node %d of fabric '%s'", me.rank,
		    A.rank, A.desc.name);
		return -1;
	}
	pmix_proc_t wild;
	PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
	pmix_value_t *v = NULL;
	if (PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &v) == PMIX_SUCCESS && v) {
		uint32_t size = v->type == PMIX_UINT32 ? v->data.uint32 : 0;
		PMIX_VALUE_RELEASE(v);
		if (size != (uint32_t)A.nnodes) {
			say("the launcher started %u agents; fabric '%s' has %d hosts "
			    "(one agent per host)", size, A.desc.name, A.nnodes);
			return -1;
		}
	}
	char key[96];
	snprintf(key, sizeof key, "ntbx.ofi.%s", A.desc.name);
	pmix_value_t val;
	memset(&val, 0, sizeof val);
	val.type = PMIX_BYTE_OBJECT;
	val.data.bo.bytes = (char *)&A.me;
	val.data.bo.size = sizeof A.me;
	if ((rc = PMIx_Put(PMIX_GLOBAL, key, &val)) != PMIX_SUCCESS ||
	    (rc = PMIx_Commit()) != PMIX_SUCCESS) {
		say("PMIx_Put: %s", PMIx_Error_string(rc));
		return 0;
	}
	pmix_info_t info[2];
	bool collect = true;
	int tmo = (int)(A.o->timeout_s * 5 + 1);
	PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
	PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &tmo, PMIX_INT);
	rc = PMIx_Fence(NULL, 0, info, 2);
	PMIX_INFO_DESTRUCT(&info[0]);
	PMIX_INFO_DESTRUCT(&info[1]);
	if (rc != PMIX_SUCCESS) {
		say("PMIx_Fence: %s (within %d s); meeting the peers through the "
		    "rendezvous", PMIx_Error_string(rc), tmo);
		return 0;
	}
	int got = 0;
	for (int n = 0; n < A.nnodes; n++) {
		if (n == A.rank)
			continue;
		pmix_proc_t p;
		PMIX_LOAD_PROCID(&p, me.nspace, (pmix_rank_t)n);
		v = NULL;
		rc = PMIx_Get(&p, key, NULL, 0, &v);
		if (rc != PMIX_SUCCESS || !v || v->type != PMIX_BYTE_OBJECT ||
		    v->data.bo.size != sizeof(struct hello)) {
			say("PMIx_Get of node %d's hello: %s", n, rc != PMIX_SUCCESS ?
			    PMIx_Error_string(rc) : "not an ntbx hello");
			if (v)
				PMIX_VALUE_RELEASE(v);
			continue;
		}
		struct hello *h = calloc(1, sizeof *h);
		if (h) {
			memcpy(h, v->data.bo.bytes, sizeof *h);
			h->refused[sizeof h->refused - 1] = 0;
			char why[160];
			if (hello_check(h, n, why, sizeof why) < 0) {
				say("refusing %s (from PMIx): it %s", A.peer[n].name, why);
				set_why(n, "refused %s: it %s", A.peer[n].name, why);
			} else {
				mbox_put(h);
				got++;
			}
			free(h);
		}
		PMIX_VALUE_RELEASE(v);
	}
	say("PMIx (namespace %s): %d of %d peers' hellos", me.nspace, got,
	    A.nnodes - 1);
	return 0;
}
#endif

/* --------------------------------------------------------------- setup */

static int listen_on(const char *host, unsigned port)
{
	struct addrinfo *ai = resolve(host, port, 1);
	if (!ai) {
		say("cannot resolve %s", host);
		return -1;
	}
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	if (fd >= 0)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 64)) {
		say("cannot listen on %s port %u: %s", host, port, strerror(errno));
		freeaddrinfo(ai);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	freeaddrinfo(ai);
	return fd;
}

static int write_ready(const char *fmt)
{
	/* "%r" in the name is the node (agents of one launch share a path) */
	char file[PATH_MAX - 8], tmp[PATH_MAX];
	const char *r = strstr(fmt, "%r");
	if (r)
		snprintf(file, sizeof file, "%.*s%d%s", (int)(r - fmt), fmt, A.rank,
		         r + 2);
	else
		snprintf(file, sizeof file, "%s", fmt);
	snprintf(tmp, sizeof tmp, "%s.tmp", file);
	FILE *f = fopen(tmp, "w");
	if (!f || fprintf(f, "ready %d\n", A.rank) < 0 || fclose(f) ||
	    rename(tmp, file)) {
		say("cannot write %s: %s", file, strerror(errno));
		return -1;
	}
	return 0;
}

static void teardown(void)
{
	if (A.mr_mem)
		fi_close(&A.mr_mem->fid);
	if (A.mr_expo)
		fi_close(&A.mr_expo->fid);
	if (A.ep)
		fi_close(&A.ep->fid);
	if (A.av)
		fi_close(&A.av->fid);
	if (A.cq)
		fi_close(&A.cq->fid);
	if (A.domain)
		fi_close(&A.domain->fid);
	if (A.fabric)
		fi_close(&A.fabric->fid);
	if (A.info)
		fi_freeinfo(A.info);
	if (A.ctl) {
		for (int n = 0; n < NTBX_MAX_NODES; n++)
			__atomic_store_n(&A.ctl->node[n].up, 0, __ATOMIC_RELEASE);
		__atomic_store_n(&A.ctl->rank, A.ctl->rank, __ATOMIC_RELEASE);
	}
	if (A.dev)
		ntbx_dev_close(A.dev);   /* drops the agent lock */
#ifdef NTBX_HAVE_PMIX
	if (pmix_up)
		PMIx_Finalize(NULL, 0);
#endif
	free(A.slots);
	free(A.pool);
	for (int n = 0; n < NTBX_MAX_NODES; n++)
		free(A.mbox[n]);
}

int ofi_agent_run(const struct ofi_agent_opts *o)
{
	memset(&A, 0, sizeof A);
	A.o = o;
	A.kick_fd = A.listen_fd = A.ep_fd = A.cq_fd = -1;
	pthread_mutex_init(&A.mbox_lock, NULL);
	int r = ofi_read_desc(o->dir, &A.desc);
	if (r < 0) {
		say("fabric '%s' at %s is not an ofi fabric (%s): create it with "
		    "`ntbx fabric create %s --backend ofi --hosts A,B`", o->fabric,
		    o->dir, ntbx_errmsg()[0] ? ntbx_errmsg() : strerror(-r), o->fabric);
		return 1;
	}
	if ((r = ntbx_shm_read_desc(o->dir, &A.sdesc)) < 0) {
		say("fabric '%s': %s", o->fabric, ntbx_errmsg());
		return 1;
	}
	char why[256];
	A.rank = ofi_local_rank(&A.desc, why, sizeof why);
	if (A.rank < 0) {
		say("%s", why);
		return 1;
	}
	A.nnodes = (int)A.desc.nhosts;
	const char *host = A.desc.host[A.rank].addr;
	unsigned port = A.desc.host[A.rank].port;
	char hn[64] = "";
	gethostname(hn, sizeof hn - 1);
	snprintf(self_name, sizeof self_name, "%.30s (%.46s), fabric '%.30s' node %d",
	         hn[0] ? hn : "?", host, A.desc.name, A.rank);
	for (int n = 0; n < A.nnodes; n++)
		snprintf(A.peer[n].name, sizeof A.peer[n].name, "node %d's host %s",
		         n, A.desc.host[n].addr);

	if ((r = ofi_dev_open(o->dir, A.rank, 1, &A.dev)) < 0) {
		say("%s", ntbx_errmsg());
		return 1;
	}
	A.ctl = ofi_dev_ctl(A.dev);
	A.expo = ofi_dev_expo(A.dev);
	A.mem = ntbx_mem_base(A.dev);
	A.mem_size = ntbx_mem_size(A.dev);
	/* a new incarnation of the node for the peers: they bring links up
	 * again (scratchpads and windows) */
	uint32_t epoch = __atomic_add_fetch(&ofi_dev_regs(A.dev)->epoch, 1,
	                                    __ATOMIC_SEQ_CST);
	A.slots = calloc(SHM_SLOTS, sizeof *A.slots);
	A.pool = calloc(CTX_POOL, sizeof *A.pool);
	if (!A.slots || !A.pool) {
		say("out of memory");
		goto fail;
	}
	for (int i = 0; i < CTX_POOL; i++)
		ctx_put(&A.pool[i]);
	/* descriptors left from a previous agent are not run: they end with
	 * -ENOLINK (the link went down with that agent) */
	for (int s = 0; s < SHM_SLOTS; s++) {
		struct ofi_ring *ring = &A.ctl->ring[s];
		A.slots[s].gen = __atomic_load_n(&ring->gen, __ATOMIC_ACQUIRE);
		uint32_t tail = __atomic_load_n(&ring->tail, __ATOMIC_ACQUIRE);
		uint32_t done = __atomic_load_n(&ring->done, __ATOMIC_ACQUIRE);
		for (uint32_t i = done; tail - done <= OFI_RING && i != tail; i++)
			__atomic_store_n(&ring->d[i % OFI_RING].result, -ENOLINK,
			                 __ATOMIC_RELAXED);
		A.slots[s].head = A.slots[s].done = tail;
		__atomic_store_n(&ring->done, tail, __ATOMIC_RELEASE);
		ntbx_futex_wake(&ring->done, INT_MAX);
	}
	for (int n = 0; n < NTBX_MAX_NODES; n++) {
		__atomic_store_n(&A.ctl->node[n].up, 0, __ATOMIC_RELEASE);
		set_why(n, "not met yet");
	}

	if (fab_open(host, port + 1) < 0)
		goto fail;
	if (mr_reg(A.mem, A.mem_size, FI_READ | FI_WRITE | FI_REMOTE_READ |
	           FI_REMOTE_WRITE, KEY_MEM, &A.mr_mem, &A.desc_mem) < 0 ||
	    mr_reg(A.expo, OFI_EXPO_SIZE, FI_READ | FI_WRITE | FI_REMOTE_READ |
	           FI_REMOTE_WRITE, KEY_EXPO, &A.mr_expo, &A.desc_expo) < 0)
		goto fail;

	struct hello *me = &A.me;
	me->magic = HELLO_MAGIC;
	me->version = OFI_VERSION;
	me->node = (uint32_t)A.rank;
	me->nnodes = (uint32_t)A.nnodes;
	me->layout = SHM_LAYOUT_VERSION;
	me->epoch = epoch;
	me->mem_size = A.mem_size;
	me->window_max = A.sdesc.window_max;
	me->key_hash = A.desc.key_hash;
	if (getrandom(&me->boot_id, sizeof me->boot_id, 0) != sizeof me->boot_id)
		me->boot_id = ntbx_now_ns() ^ (uint64_t)getpid() << 32;
	me->boot_id |= 1;
	snprintf(me->name, sizeof me->name, "%s", A.desc.name);
	snprintf(me->prov, sizeof me->prov, "%s", A.info->fabric_attr->prov_name);
	me->mem_base = (A.mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)A.mem : 0;
	me->mem_key = fi_mr_key(A.mr_mem);
	me->expo_base = (A.mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)A.expo : 0;
	me->expo_key = fi_mr_key(A.mr_expo);
	me->cq_data_size = (uint32_t)A.info->domain_attr->cq_data_size;
	size_t al = sizeof me->addr;
	if ((r = fi_getname(&A.ep->fid, me->addr, &al))) {
		fi_fail("fi_getname", r);
		goto fail;
	}
	me->addrlen = (uint32_t)al;
	local_addrs(me);

	/* the kick FIFO; then the rendezvous */
	{
		int dfd;
		struct stat dst;
		if (shm_dir_open(o->dir, &dfd, &dst) < 0) {
			say("%s", ntbx_errmsg());
			goto fail;
		}
		A.kick_fd = shm_fifo_make(dfd, &dst, "ofi.kick",
		                          A.sdesc.gid != ~0u ? 0660 : 0600,
		                          A.sdesc.gid != ~0u ? (int)A.sdesc.gid : -1);
		close(dfd);
		if (A.kick_fd < 0) {
			say("cannot make ofi.kick: %s", strerror(-A.kick_fd));
			goto fail;
		}
	}
	if ((A.listen_fd = listen_on(host, port)) < 0)
		goto fail;
	snprintf(A.ctl->provider, sizeof A.ctl->provider, "%s", me->prov);
	A.ctl->agent_pid = getpid();
	A.ctl->boot_id = me->boot_id;
	__atomic_store_n(&A.ctl->rank, A.rank, __ATOMIC_RELEASE);

	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
#ifdef NTBX_HAVE_PMIX
	if (pmix_exchange() < 0)
		goto fail;
#endif
	pthread_t rdv;
	if (pthread_create(&rdv, NULL, rendezvous_main, NULL)) {
		say("cannot start the rendezvous thread");
		goto fail;
	}
	A.ep_fd = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = { .events = EPOLLIN };
	ev.data.fd = A.kick_fd;
	epoll_ctl(A.ep_fd, EPOLL_CTL_ADD, A.kick_fd, &ev);
	if (A.cq_fd >= 0) {
		ev.data.fd = A.cq_fd;
		epoll_ctl(A.ep_fd, EPOLL_CTL_ADD, A.cq_fd, &ev);
	}
	say("serving with provider %s%s, endpoint %s:%u, rendezvous port %u; "
	    "%d peer%s", me->prov, A.ordered ? " (ordered writes)" : "", host,
	    port + 1, port, A.nnodes - 1, A.nnodes == 2 ? "" : "s");
	if (o->ready_file && write_ready(o->ready_file) < 0)
		A.stop = 1;

	uint64_t spin_t0 = 0, spin_budget = 0, next_hb = 0;
	/* NTBX_OFI_POLL_US: poll at least this long after work, whatever the
	 * wait policy says (an answer often follows within a round trip) */
	A.min_poll_ns = (uint64_t)ntbx_env_long("NTBX_OFI_POLL_US", 0, 0, 200) * 1000;
	static struct ntbx_spin idle_spin;
	while (!A.stop) {
		int work = apply_hellos();
		work |= cq_poll();
		work |= scan_rings();
		uint64_t now = ntbx_now_ns();
		if (now >= next_hb) {
			heartbeat();
			next_hb = now + (uint64_t)o->hb_ms * 1000000ull;
		}
		if (work) {
			if (spin_t0)
				ntbx_spin_end(&idle_spin, now - spin_t0, 0);
			spin_t0 = 0;
			continue;
		}
		/* idle: poll while the wait policy says polling pays (a CPU
		 * free for whoever we wait for), then sleep */
		if (!spin_t0) {
			spin_t0 = now;
			spin_budget = ntbx_spin_begin(&idle_spin);
			if (spin_budget > SPIN_NS)
				spin_budget = SPIN_NS;
			if (spin_budget < A.min_poll_ns)
				spin_budget = A.min_poll_ns;
		}
		if (now - spin_t0 < spin_budget) {
			ntbx_cpu_relax();
			continue;
		}
		/* sleep: announce it, look once more, then wait for the CQ,
		 * a kick or the next heartbeat */
		__atomic_store_n(&A.ctl->sleeping, 1, __ATOMIC_SEQ_CST);
		work = scan_rings() | cq_poll();
		int ms = (int)((next_hb - now) / 1000000) + 1;
		if (!work && A.cq_fd >= 0) {
			struct fid *f = &A.cq->fid;
			if (fi_trywait(A.fabric, &f, 1) != FI_SUCCESS)
				work = 1;
		} else if (!work) {
			ms = 1;   /* no wait object: poll every millisecond */
		}
		if (!work) {
			struct epoll_event evs[4];
			epoll_wait(A.ep_fd, evs, 4, ms);
		}
		char buf[64];
		while (read(A.kick_fd, buf, sizeof buf) > 0)
			;
		__atomic_store_n(&A.ctl->sleeping, 0, __ATOMIC_SEQ_CST);
		__atomic_store_n(&A.ctl->kicked, 0, __ATOMIC_SEQ_CST);
		ntbx_spin_end(&idle_spin, ntbx_now_ns() - spin_t0, 1);
		spin_t0 = 0;
	}
	say("stopping");
	A.stop = 1;
	pthread_join(rdv, NULL);
	close(A.listen_fd);
	close(A.ep_fd);
	teardown();
	return 0;
fail:
	A.stop = 1;
	if (A.listen_fd >= 0)
		close(A.listen_fd);
	teardown();
	return 1;
}
