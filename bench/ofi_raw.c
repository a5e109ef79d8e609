/*
 * bench/ofi_raw.c — the raw libfabric peer that ntbx's ofi backend is
 * measured against (issue 13): two processes, one RDM endpoint each, RMA
 * writes with remote CQ data, nothing else in the way.
 *
 *   ofi_raw -s ADDR [opts]          server (the target): binds to ADDR
 *   ofi_raw -c SERVER_ADDR [opts]   client (the initiator): measures, prints CSV
 *
 * Tests (the client chooses; the server learns the schedule from it):
 *   pingpong  fi_writedata of SIZE into the peer's buffer, the remote CQ data
 *             carrying the sequence; the peer answers the same way.  One-way
 *             latency = round trip / 2; p50 and p99.
 *   bw        windows of fi_write of SIZE, the window's last one an
 *             fi_writedata (every one, when the provider does not order writes),
 *             two windows in flight; the target acknowledges each window with
 *             an fi_inject_writedata.  GB/s (1e9 bytes/s).
 * Every transfer carries a stamp (its sequence and offset) at both ends,
 * checked by the receiver; the whole payload pattern is checked on the first
 * and last transfer of each size (every transfer with -V).  A mismatch is a
 * failure on both sides.
 *
 * Addresses and memory keys go over a plain TCP connection (the server
 * listens on ADDR:PORT); the client's libfabric endpoint binds to the local
 * address of that connection, so both use the address the peers share.
 * The provider is FI_PROVIDER's (libfabric filters by it), else the first
 * RDM provider with FI_RMA and remote CQ data, preferring tcp;ofi_rxm and
 * never `sockets`; the client then asks for the server's provider.
 * Progress is manual for most providers: both sides poll their CQ for as
 * long as anything is expected.  Every wait is bounded by -t (default 10 s).
 *
 * Output (client, stdout): CSV "test,size,provider,value,unit".
 * Exit: 0 ok, 1 runtime failure (named host, missing capability, timeout,
 * data mismatch), 2 usage.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#define OFI_API FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION)
#define DEF_PORT 47592
#define MAX_SIZES 32
#define MAX_WIN 256               /* writes per bw window, at most */
#define ACK_AREA 64               /* acks land past the data area */
#define REQ_KEY 0x6f6672617721ull /* our key when the provider takes ours */

/* ---------------------------------------------------------------- errors */

static char self_name[160] = "ofi_raw";  /* "th0 (10.77.0.1)" once known */
static char peer_name[160] = "the peer";
static int oob_fd = -1;
static int oob_quiet;      /* a message is waiting for its reader: stop peeking */

static void oob_abort(const char *why);

static void __attribute__((noreturn, format(printf, 1, 2))) fail(const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	fprintf(stderr, "ofi_raw: %s: %s\n", self_name, msg);
	oob_abort(msg);
	exit(1);
}

static void __attribute__((noreturn)) fail_fi(const char *what, int ret)
{
	fail("%s: %s (%d)", what, fi_strerror(-ret), ret);
}

static void usage(const char *fmt, ...)
{
	if (fmt) {
		va_list ap;
		va_start(ap, fmt);
		fprintf(stderr, "ofi_raw: ");
		vfprintf(stderr, fmt, ap);
		fprintf(stderr, "\n");
		va_end(ap);
	}
	fprintf(stderr,
	        "usage: ofi_raw -s ADDR [options]          server: bind to ADDR, serve one client\n"
	        "       ofi_raw -c SERVER_ADDR [options]   client: run the tests, print CSV\n"
	        "options:\n"
	        "  -p PORT      TCP port of the address/key exchange (default %d); the server's\n"
	        "               libfabric endpoint uses PORT+1\n"
	        "  -T TESTS     pingpong,bw (default both; client)\n"
	        "  -S SIZES     ping-pong sizes, bytes, comma-separated, K/M suffixes (default 8,64,1K,8K,64K)\n"
	        "  -B SIZES     bandwidth sizes (default 4K,16K,64K,256K,1M,4M)\n"
	        "  -n COUNT     ping-pong round trips per size (default 10000; warm-up: COUNT/10 more)\n"
	        "  -M MIB       bandwidth: MiB written per size (default 512; at least 4 windows)\n"
	        "  -w BYTES     bandwidth: a window is at most BYTES (default 8M; two in flight)\n"
	        "  -W COUNT     bandwidth: and at most COUNT writes (default 64, at most %d)\n"
	        "  -V           check the whole payload of every transfer (default: stamps of every\n"
	        "               transfer, the whole payload of the first and last of each size)\n"
	        "  -t SECONDS   bound on every wait (default 10)\n"
	        "  -r FILE      server: write \"ready\" to FILE once it accepts clients\n"
	        "  -q           client: no '#' comment lines on stderr\n"
	        "environment: FI_PROVIDER picks the provider (default: tcp;ofi_rxm if present, else\n"
	        "the first RDM provider with FI_RMA and remote CQ data, never sockets)\n",
	        DEF_PORT, MAX_WIN);
	exit(2);
}

/* ------------------------------------------------------------------ time */

static double timeout_s = 10.0;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t deadline(void)
{
	return now_ns() + (uint64_t)(timeout_s * 1e9);
}

/* ------------------------------------------------- out-of-band messages */

enum { MSG_PARAMS = 1, MSG_HELLO, MSG_RESULT, MSG_ABORT };

struct msg_hdr {
	uint32_t magic;
	uint32_t type;
	uint32_t len;
	uint32_t pad;
};
#define OOB_MAGIC 0x4f464952u /* "OFIR" */

struct params {
	uint32_t tests;           /* bit 0 pingpong, bit 1 bw */
	uint32_t verify_all;
	uint32_t pp_iters, pp_warm;
	uint32_t n_pp, n_bw;
	uint64_t bw_bytes;        /* per size */
	uint64_t win_bytes;       /* a bw window: at most this many bytes, */
	uint32_t win_max, pad;    /* and at most this many writes */
	uint64_t pp_sizes[MAX_SIZES];
	uint64_t bw_sizes[MAX_SIZES];
	char client_host[64];
};

struct hello {
	char host[64];
	char prov[64];
	uint64_t base;            /* remote address of the buffer's start */
	uint64_t key;
	uint64_t len;
	uint32_t addrlen;
	uint32_t cq_data_size;
	uint8_t addr[256];
};

struct result {
	uint64_t checked;         /* transfers whose stamps were checked */
	uint64_t mismatches;
	char first[256];
};

static int fd_wait(int fd, short ev, uint64_t until, const char *what)
{
	for (;;) {
		uint64_t t = now_ns();
		if (t >= until)
			fail("timed out after %.0f s waiting for %s (%s)", timeout_s, what, peer_name);
		struct pollfd p = { .fd = fd, .events = ev };
		int ms = (int)((until - t) / 1000000) + 1;
		int r = poll(&p, 1, ms);
		if (r > 0)
			return p.revents;
		if (r < 0 && errno != EINTR)
			fail("poll: %s", strerror(errno));
	}
}

static void oob_send(uint32_t type, const void *buf, uint32_t len)
{
	struct msg_hdr h = { OOB_MAGIC, type, len, 0 };
	struct iovec iov[2] = { { &h, sizeof h }, { (void *)buf, len } };
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = 2 };
	uint64_t until = deadline();
	size_t left = sizeof h + len;
	while (left) {
		ssize_t n = sendmsg(oob_fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			fd_wait(oob_fd, POLLOUT, until, "room on the control connection");
			continue;
		}
		if (n < 0)
			fail("control connection to %s: %s", peer_name, strerror(errno));
		left -= (size_t)n;
		while (n > 0 && m.msg_iovlen) {
			if ((size_t)n >= m.msg_iov[0].iov_len) {
				n -= (ssize_t)m.msg_iov[0].iov_len;
				m.msg_iov++;
				m.msg_iovlen--;
			} else {
				m.msg_iov[0].iov_base = (char *)m.msg_iov[0].iov_base + n;
				m.msg_iov[0].iov_len -= (size_t)n;
				n = 0;
			}
		}
	}
}

static void oob_recv_all(void *buf, size_t len, uint64_t until, const char *what)
{
	char *p = buf;
	while (len) {
		fd_wait(oob_fd, POLLIN, until, what);
		ssize_t n = recv(oob_fd, p, len, MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n <= 0) {
			int e = errno;
			oob_fd = -1;
			fail("%s closed the control connection while this side waited for %s%s%s",
			     peer_name, what, n < 0 ? ": " : "", n < 0 ? strerror(e) : "");
		}
		p += n;
		len -= (size_t)n;
	}
}

/* Receive one message of TYPE (an ABORT from the peer is its error). */
static void oob_recv(uint32_t type, void *buf, uint32_t len, const char *what)
{
	uint64_t until = deadline();
	struct msg_hdr h;
	oob_recv_all(&h, sizeof h, until, what);
	if (h.magic != OOB_MAGIC || h.len > 4096)
		fail("%s does not speak ofi_raw's protocol (bad message header)", peer_name);
	char tmp[4096];
	oob_recv_all(tmp, h.len, until, what);
	if (h.type == MSG_ABORT) {
		tmp[h.len < sizeof tmp ? h.len : sizeof tmp - 1] = 0;
		oob_fd = -1;
		fail("%s failed: %s", peer_name, tmp);
	}
	if (h.type != type || h.len != len)
		fail("%s sent message type %u (%u bytes) where %s was expected", peer_name,
		     h.type, h.len, what);
	memcpy(buf, tmp, len);
}

/* While polling the CQ: has the peer aborted or gone? */
static void oob_check(void)
{
	if (oob_fd < 0 || oob_quiet)
		return;
	struct pollfd p = { .fd = oob_fd, .events = POLLIN };
	if (poll(&p, 1, 0) <= 0)
		return;
	struct msg_hdr h;
	ssize_t n = recv(oob_fd, &h, sizeof h, MSG_PEEK | MSG_DONTWAIT);
	if (n == 0) {
		oob_fd = -1;
		fail("%s closed the control connection (it exited)", peer_name);
	}
	if (n == (ssize_t)sizeof h && h.type == MSG_ABORT)
		oob_recv(MSG_ABORT, &h, 0, "nothing");  /* fails with the peer's reason */
	if (n == (ssize_t)sizeof h)
		oob_quiet = 1;  /* the server's result, early: it waits for its reader */
}

static void oob_abort(const char *why)
{
	if (oob_fd < 0)
		return;
	int fd = oob_fd;
	oob_fd = -1;  /* no recursion from a failing send */
	struct msg_hdr h = { OOB_MAGIC, MSG_ABORT, (uint32_t)strlen(why), 0 };
	struct iovec iov[2] = { { &h, sizeof h }, { (void *)why, h.len } };
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = 2 };
	(void)sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
}

static void addr_str(const struct sockaddr *sa, char *buf, size_t len)
{
	if (getnameinfo(sa, sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
	                                               : sizeof(struct sockaddr_in),
	                buf, (socklen_t)len, NULL, 0, NI_NUMERICHOST))
		snprintf(buf, len, "?");
}

static struct addrinfo *resolve(const char *node, int port, int passive)
{
	char svc[16];
	snprintf(svc, sizeof svc, "%d", port);
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
	                          .ai_flags = passive ? AI_PASSIVE : 0 };
	struct addrinfo *ai;
	int r = getaddrinfo(node, svc, &hints, &ai);
	if (r)
		fail("cannot resolve %s: %s", node, gai_strerror(r));
	return ai;
}

static void tcp_opts(int fd)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static void oob_listen_accept(const char *addr, int port, const char *ready_file)
{
	struct addrinfo *ai = resolve(addr, port, 1);
	int ls = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	if (ls < 0)
		fail("socket: %s", strerror(errno));
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(ls, ai->ai_addr, ai->ai_addrlen) || listen(ls, 1))
		fail("cannot listen on %s port %d: %s (is ADDR one of this host's addresses?)",
		     addr, port, strerror(errno));
	freeaddrinfo(ai);
	if (ready_file) {
		char tmp[4096];
		snprintf(tmp, sizeof tmp, "%s.tmp", ready_file);
		FILE *f = fopen(tmp, "w");
		if (!f || fprintf(f, "ready\n") < 0 || fclose(f) || rename(tmp, ready_file))
			fail("cannot write the ready file %s: %s", ready_file, strerror(errno));
	}
	fprintf(stderr, "ofi_raw: %s: ready, waiting for a client on port %d\n", self_name, port);
	fd_wait(ls, POLLIN, deadline(), "a client to connect");
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	oob_fd = accept4(ls, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
	if (oob_fd < 0)
		fail("accept: %s", strerror(errno));
	close(ls);
	tcp_opts(oob_fd);
	char a[64];
	addr_str((struct sockaddr *)&ss, a, sizeof a);
	snprintf(peer_name, sizeof peer_name, "client %s", a);
}

/* Connect (retrying a refused connection until the timeout); returns the
 * local address in LOCAL, which the endpoint then binds to. */
static void oob_connect(const char *server, int port, char *local, size_t llen)
{
	struct addrinfo *ai = resolve(server, port, 0);
	uint64_t until = deadline();
	char a[64];
	addr_str(ai->ai_addr, a, sizeof a);
	snprintf(peer_name, sizeof peer_name, "server %s", a);
	for (;;) {
		int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0)
			fail("socket: %s", strerror(errno));
		int r = connect(fd, ai->ai_addr, ai->ai_addrlen);
		if (r < 0 && errno == EINPROGRESS) {
			fd_wait(fd, POLLOUT, until, "an answer to the control connection");
			int err = 0;
			socklen_t el = sizeof err;
			getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
			r = err ? -1 : 0;
			errno = err;
		}
		if (r == 0) {
			oob_fd = fd;
			break;
		}
		int e = errno;
		close(fd);
		if (e == ECONNREFUSED && now_ns() + 20 * 1000000 >= until)
			fail("cannot reach %s port %d: %s for %.0f s (is the server running?)",
			     peer_name, port, strerror(e), timeout_s);
		if (e != ECONNREFUSED)
			fail("cannot reach %s port %d: %s", peer_name, port, strerror(e));
		struct timespec ts = { 0, 20 * 1000000 };  /* the server is not up yet */
		nanosleep(&ts, NULL);
	}
	freeaddrinfo(ai);
	tcp_opts(oob_fd);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	getsockname(oob_fd, (struct sockaddr *)&ss, &sl);
	addr_str((struct sockaddr *)&ss, local, llen);
}

/* ------------------------------------------------------------- libfabric */

struct fab {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	struct fid_mr *mr;
	void *desc;
	uint64_t mr_mode;
	uint64_t data_mask;       /* the bits of remote CQ data the provider carries */
	size_t inject_size;
	int ordered;              /* writes are placed in order (WAW) */
	uint64_t waw_size;
	fi_addr_t peer;
	/* the buffer: [rx: data area | acks] [tx: data area] */
	uint8_t *buf;
	size_t region, rx_len, buf_len;
	uint8_t *rx, *tx;
	/* the peer's */
	uint64_t peer_base, peer_key, peer_len;
} F;

static const char *mr_mode_str(uint64_t m, char *b, size_t n)
{
	static const struct { uint64_t bit; const char *name; } bits[] = {
		{ FI_MR_LOCAL, "FI_MR_LOCAL" }, { FI_MR_VIRT_ADDR, "FI_MR_VIRT_ADDR" },
		{ FI_MR_PROV_KEY, "FI_MR_PROV_KEY" }, { FI_MR_ALLOCATED, "FI_MR_ALLOCATED" },
		{ FI_MR_ENDPOINT, "FI_MR_ENDPOINT" }, { FI_MR_RAW, "FI_MR_RAW" },
		{ FI_MR_MMU_NOTIFY, "FI_MR_MMU_NOTIFY" }, { FI_MR_RMA_EVENT, "FI_MR_RMA_EVENT" },
		{ FI_MR_HMEM, "FI_MR_HMEM" }, { FI_MR_COLLECTIVE, "FI_MR_COLLECTIVE" },
	};
	b[0] = 0;
	for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++)
		if (m & bits[i].bit)
			snprintf(b + strlen(b), n - strlen(b), "%s%s", b[0] ? "|" : "", bits[i].name);
	if (!b[0])
		snprintf(b, n, "none");
	return b;
}

/* What this program can do for a provider: the mr_mode bits it handles, the
 * modes it accepts (contexts it owns; no posted receives for CQ data). */
#define MR_MODES (FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED | \
                  FI_MR_ENDPOINT)
#define MODES (FI_CONTEXT | FI_CONTEXT2)

static struct fi_info *make_hints(const char *prov)
{
	struct fi_info *h = fi_allocinfo();
	if (!h)
		fail("fi_allocinfo: out of memory");
	h->ep_attr->type = FI_EP_RDM;
	h->caps = FI_RMA | FI_WRITE | FI_REMOTE_WRITE;
	h->mode = MODES;
	h->domain_attr->mr_mode = MR_MODES;
	h->domain_attr->threading = FI_THREAD_DOMAIN;
	if (prov)
		h->fabric_attr->prov_name = strdup(prov);
	return h;
}

static int is_sockets(const char *p)
{
	/* "sockets" alone or as a layer ("ofi_rxm;sockets" never exists, but) */
	return p && (!strcmp(p, "sockets") || strstr(p, "sockets;") || strstr(p, ";sockets"));
}

/* Why no provider fits at NODE: ask again with less and name what is missing. */
static void __attribute__((noreturn)) explain_none(const char *node, const char *svc,
                                                   const char *prov)
{
	const char *env = getenv("FI_PROVIDER");
	const char *want = prov ? prov : env;
	char where[200];
	if (want)
		snprintf(where, sizeof where, "provider %s offers no", want);
	else
		snprintf(where, sizeof where, "no libfabric provider offers an");
	struct fi_info *h = fi_allocinfo(), *all = NULL;
	h->ep_attr->type = FI_EP_RDM;
	h->mode = ~0ull;
	h->domain_attr->mr_mode = MR_MODES | FI_MR_RAW | FI_MR_MMU_NOTIFY | FI_MR_RMA_EVENT |
	                          FI_MR_HMEM | FI_MR_COLLECTIVE;
	if (prov)
		h->fabric_attr->prov_name = strdup(prov);
	int r = fi_getinfo(OFI_API, node, svc, FI_SOURCE, h, &all);
	if (r || !all) {
		fi_freeinfo(h);
		fail("%s RDM endpoint at %s (fi_getinfo: %s)%s", where, node, fi_strerror(-r),
		     env ? "; check FI_PROVIDER" : "");
	}
	struct fi_info *i = all;
	const char *pn = i->fabric_attr->prov_name;
	char mb[200], mb2[100];
	if (!(i->caps & FI_RMA))
		fail("provider %s at %s lacks FI_RMA (RMA writes): ofi_raw needs it", pn, node);
	if (!i->domain_attr->cq_data_size)
		fail("provider %s at %s lacks remote CQ data (cq_data_size 0)", pn, node);
	if (i->mode & FI_RX_CQ_DATA)
		fail("provider %s at %s needs FI_RX_CQ_DATA (posted receives for remote CQ data), "
		     "which ofi_raw does not post", pn, node);
	if (i->domain_attr->mr_mode & ~(uint64_t)MR_MODES)
		fail("provider %s at %s asks mr_mode %s; ofi_raw handles %s", pn, node,
		     mr_mode_str(i->domain_attr->mr_mode, mb, sizeof mb),
		     mr_mode_str(MR_MODES, mb2, sizeof mb2));
	if (i->mode & ~(uint64_t)(MODES | FI_BUFFERED_RECV | FI_LOCAL_MR))
		fail("provider %s at %s asks mode 0x%" PRIx64 " that ofi_raw does not support", pn,
		     node, (uint64_t)i->mode);
	fail("provider %s at %s does not fit (caps 0x%" PRIx64 ")", pn, node, (uint64_t)i->caps);
}

/* Bind a fabric to NODE (SERVICE): FI_PROVIDER or PROV if given, else
 * prefer tcp;ofi_rxm and skip sockets. */
static void fab_open(const char *node, const char *svc, const char *prov)
{
	struct fi_info *hints = make_hints(prov), *all = NULL, *pick = NULL;
	int r = fi_getinfo(OFI_API, node, svc, FI_SOURCE, hints, &all);
	fi_freeinfo(hints);
	if (r == -FI_ENODATA || (!r && !all))
		explain_none(node, svc, prov);
	if (r)
		fail_fi("fi_getinfo", r);
	if (prov || getenv("FI_PROVIDER"))
		pick = all;  /* asked for by name */
	for (struct fi_info *i = all; i && !pick; i = i->next)
		if (!strcmp(i->fabric_attr->prov_name, "tcp;ofi_rxm"))
			pick = i;
	for (struct fi_info *i = all; i && !pick; i = i->next)
		if (!is_sockets(i->fabric_attr->prov_name))
			pick = i;
	if (!pick)
		fail("only the sockets provider offers RMA at %s (1000x slower); "
		     "set FI_PROVIDER=sockets to use it anyway", node);
	/* Any of them: check the capability we rely on, and name it. */
	const char *pn = pick->fabric_attr->prov_name;
	if (!(pick->caps & FI_RMA))
		fail("provider %s at %s lacks FI_RMA", pn, node);
	if (!pick->domain_attr->cq_data_size)
		fail("provider %s at %s lacks remote CQ data (cq_data_size 0)", pn, node);
	if (pick->domain_attr->mr_key_size > 8)
		fail("provider %s at %s uses %zu-byte memory keys (FI_MR_RAW), not supported",
		     pn, node, pick->domain_attr->mr_key_size);
	F.info = fi_dupinfo(pick);
	fi_freeinfo(all);
	struct fi_info *i = F.info;
	F.mr_mode = i->domain_attr->mr_mode;
	F.data_mask = i->domain_attr->cq_data_size >= 8
	                      ? ~0ull
	                      : (1ull << (8 * i->domain_attr->cq_data_size)) - 1;
	F.inject_size = i->tx_attr->inject_size;
	uint64_t o = i->tx_attr->msg_order & i->rx_attr->msg_order;
	F.ordered = !!(o & (FI_ORDER_WAW | FI_ORDER_RMA_WAW));
	F.waw_size = i->ep_attr->max_order_waw_size;

	if ((r = fi_fabric(i->fabric_attr, &F.fabric, NULL)))
		fail_fi("fi_fabric", r);
	if ((r = fi_domain(F.fabric, i, &F.domain, NULL)))
		fail_fi("fi_domain", r);
	struct fi_cq_attr cqa = { .format = FI_CQ_FORMAT_DATA, .wait_obj = FI_WAIT_NONE,
	                          .size = 4096 };
	if ((r = fi_cq_open(F.domain, &cqa, &F.cq, NULL)))
		fail_fi("fi_cq_open", r);
	struct fi_av_attr ava = {
		.type = i->domain_attr->av_type == FI_AV_UNSPEC ? FI_AV_MAP : i->domain_attr->av_type,
		.count = 4,
	};
	if ((r = fi_av_open(F.domain, &ava, &F.av, NULL)))
		fail_fi("fi_av_open", r);
	if ((r = fi_endpoint(F.domain, i, &F.ep, NULL)))
		fail_fi("fi_endpoint", r);
	if ((r = fi_ep_bind(F.ep, &F.av->fid, 0)))
		fail_fi("fi_ep_bind(av)", r);
	if ((r = fi_ep_bind(F.ep, &F.cq->fid, FI_TRANSMIT | FI_RECV)))
		fail_fi("fi_ep_bind(cq)", r);
	if ((r = fi_enable(F.ep)))
		fail_fi("fi_enable", r);
}

/* Register [rx | tx]: target of the peer's writes and source of ours. */
static void fab_mr(size_t region)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	F.region = region;
	F.rx_len = (region + ACK_AREA + pg - 1) / pg * pg;
	F.buf_len = F.rx_len + (region + pg - 1) / pg * pg;
	F.buf = mmap(NULL, F.buf_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (F.buf == MAP_FAILED)
		fail("cannot allocate %zu bytes: %s", F.buf_len, strerror(errno));
	memset(F.buf, 0, F.buf_len);  /* FI_MR_ALLOCATED: backed before registration */
	F.rx = F.buf;
	F.tx = F.buf + F.rx_len;
	int r = fi_mr_reg(F.domain, F.buf, F.buf_len, FI_WRITE | FI_REMOTE_WRITE, 0,
	                  (F.mr_mode & FI_MR_PROV_KEY) ? 0 : REQ_KEY, 0, &F.mr, NULL);
	if (r)
		fail_fi("fi_mr_reg", r);
	if (F.mr_mode & FI_MR_ENDPOINT) {
		if ((r = fi_mr_bind(F.mr, &F.ep->fid, 0)))
			fail_fi("fi_mr_bind", r);
		if ((r = fi_mr_enable(F.mr)))
			fail_fi("fi_mr_enable", r);
	}
	F.desc = fi_mr_desc(F.mr);
	if (fi_mr_key(F.mr) == FI_KEY_NOTAVAIL)
		fail("provider %s gives no 64-bit memory key", F.info->fabric_attr->prov_name);
}

static void fab_hello(struct hello *h, const char *host)
{
	memset(h, 0, sizeof *h);
	snprintf(h->host, sizeof h->host, "%s", host);
	snprintf(h->prov, sizeof h->prov, "%s", F.info->fabric_attr->prov_name);
	h->base = (F.mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)F.buf : 0;
	h->key = fi_mr_key(F.mr);
	h->len = F.rx_len;
	h->cq_data_size = (uint32_t)F.info->domain_attr->cq_data_size;
	size_t al = sizeof h->addr;
	int r = fi_getname(&F.ep->fid, h->addr, &al);
	if (r)
		fail_fi("fi_getname", r);
	h->addrlen = (uint32_t)al;
}

static void fab_peer(const struct hello *h)
{
	if (strncmp(h->prov, F.info->fabric_attr->prov_name, sizeof h->prov))
		fail("%s uses provider %.64s, this side %s", peer_name, h->prov,
		     F.info->fabric_attr->prov_name);
	if (h->addrlen > sizeof h->addr)
		fail("%s sent a bad address", peer_name);
	int r = fi_av_insert(F.av, h->addr, 1, &F.peer, 0, NULL);
	if (r != 1)
		fail("fi_av_insert of %s's address failed (%d)", peer_name, r);
	F.peer_base = h->base;
	F.peer_key = h->key;
	F.peer_len = h->len;
	if (h->cq_data_size < F.info->domain_attr->cq_data_size)
		F.data_mask = h->cq_data_size >= 8 ? ~0ull : (1ull << (8 * h->cq_data_size)) - 1;
}

static void fab_close(void)
{
	if (F.mr)
		fi_close(&F.mr->fid);
	if (F.ep)
		fi_close(&F.ep->fid);
	if (F.av)
		fi_close(&F.av->fid);
	if (F.cq)
		fi_close(&F.cq->fid);
	if (F.domain)
		fi_close(&F.domain->fid);
	if (F.fabric)
		fi_close(&F.fabric->fid);
	if (F.info)
		fi_freeinfo(F.info);
	if (F.buf)
		munmap(F.buf, F.buf_len);
}

/* ------------------------------------------------------------- progress */

/* A local operation's context: the provider may use the fi_context2 (mode
 * FI_CONTEXT/FI_CONTEXT2); the counter drops when it completes. */
struct op {
	struct fi_context2 ctx;
	int *pending;
};

/* Arrived remote CQ data, looked up by value (completion order is not
 * promised). */
static uint64_t arrived[1024];
static unsigned n_arrived;
static uint64_t n_remote;

static void progress(void)
{
	struct fi_cq_data_entry e[16];
	ssize_t n = fi_cq_read(F.cq, e, 16);
	if (n == -FI_EAGAIN)
		return;
	if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry ee = { 0 };
		char eb[256] = "";
		fi_cq_readerr(F.cq, &ee, 0);
		const char *s = fi_cq_strerror(F.cq, ee.prov_errno, ee.err_data, eb, sizeof eb);
		fail("a transfer %s %s failed: %s (%s)",
		     (ee.flags & FI_REMOTE_WRITE) ? "from" : "to", peer_name, fi_strerror(ee.err),
		     s ? s : "");
	}
	if (n < 0)
		fail_fi("fi_cq_read", (int)n);
	for (ssize_t k = 0; k < n; k++) {
		if (e[k].flags & FI_REMOTE_CQ_DATA) {
			if (n_arrived == sizeof arrived / sizeof arrived[0])
				fail("more than %u unclaimed arrivals from %s", n_arrived, peer_name);
			arrived[n_arrived++] = e[k].data & F.data_mask;
			n_remote++;
		} else if (e[k].op_context) {
			struct op *o = e[k].op_context;
			(*o->pending)--;
		}
	}
}

static void wait_arrival(uint64_t data, const char *what)
{
	data &= F.data_mask;
	uint64_t until = 0;
	for (unsigned spin = 0;; spin++) {
		for (unsigned i = 0; i < n_arrived; i++)
			if (arrived[i] == data) {
				arrived[i] = arrived[--n_arrived];
				return;
			}
		progress();
		if ((spin & 1023) == 1023) {
			uint64_t t = now_ns();
			if (!until)
				until = t + (uint64_t)(timeout_s * 1e9);
			else if (t >= until)
				fail("timed out after %.0f s waiting for %s from %s "
				     "(remote CQ data 0x%" PRIx64 ")",
				     timeout_s, what, peer_name, data);
			oob_check();
		}
	}
}

static void wait_pending(int *pending, int upto, const char *what)
{
	uint64_t until = 0;
	for (unsigned spin = 0; *pending > upto; spin++) {
		progress();
		if ((spin & 1023) == 1023) {
			uint64_t t = now_ns();
			if (!until)
				until = t + (uint64_t)(timeout_s * 1e9);
			else if (t >= until)
				fail("timed out after %.0f s waiting for %s to %s to complete",
				     timeout_s, what, peer_name);
			oob_check();
		}
	}
}

/* Write LEN bytes from tx+OFF to the peer's rx+ROFF; with remote CQ data
 * DATA when WITH_DATA.  OP (NULL for inject) is the completion's context. */
static void post(size_t off, size_t roff, size_t len, int with_data, uint64_t data,
                 struct op *op)
{
	if (roff + len > F.peer_len)
		fail("internal: write past %s's buffer", peer_name);
	uint64_t raddr = F.peer_base + roff;
	uint64_t until = 0;
	for (unsigned spin = 0;; spin++) {
		ssize_t r;
		if (!op)
			r = fi_inject_writedata(F.ep, F.tx + off, len, data, F.peer, raddr, F.peer_key);
		else if (with_data)
			r = fi_writedata(F.ep, F.tx + off, len, F.desc, data, F.peer, raddr,
			                 F.peer_key, op);
		else
			r = fi_write(F.ep, F.tx + off, len, F.desc, F.peer, raddr, F.peer_key, op);
		if (r == 0) {
			if (op)
				(*op->pending)++;
			return;
		}
		if (r != -FI_EAGAIN)
			fail("RMA write of %zu bytes to %s: %s", len, peer_name, fi_strerror((int)-r));
		progress();
		if ((spin & 1023) == 1023) {
			uint64_t t = now_ns();
			if (!until)
				until = t + (uint64_t)(timeout_s * 1e9);
			else if (t >= until)
				fail("timed out after %.0f s: the provider took no more writes to %s",
				     timeout_s, peer_name);
			oob_check();
		}
	}
}

/* The server, at the end: keep progressing (our last acknowledgements may
 * still sit in the provider) until the client closes the connection. */
static void wait_close(void)
{
	uint64_t until = deadline();
	for (unsigned spin = 0;; spin++) {
		progress();
		if ((spin & 255) != 255)
			continue;
		struct pollfd p = { .fd = oob_fd, .events = POLLIN };
		if (poll(&p, 1, 0) > 0) {
			char c;
			if (recv(oob_fd, &c, 1, MSG_DONTWAIT) <= 0)
				return;
		}
		if (now_ns() >= until)
			fail("timed out after %.0f s waiting for %s to finish", timeout_s, peer_name);
	}
}

/* ------------------------------------------------------------- payloads */

/* Every transfer: a stamp of (sequence, offset) in its first 8 bytes and its
 * complement in its last 8; the rest a pattern of the offset (and of the
 * sequence, with -V).  The receiver checks what it can afford. */
static int verify_all;
static uint64_t checked, mismatches;
static char first_bad[256];

static uint64_t stamp(uint64_t seq, size_t off)
{
	uint64_t x = (seq + 1) * 0x9e3779b97f4a7c15ull ^ ((uint64_t)off << 20) ^ 0x6f66;
	x ^= x >> 29;
	return x;
}

static uint8_t pat(size_t i, uint64_t seq)
{
	return (uint8_t)(i * 151 + (i >> 9) * 7 + seq * 29 + 0x5a);
}

static void fill(uint8_t *p, size_t off, size_t len, uint64_t seq, int body)
{
	if (body) {
		uint64_t bs = verify_all ? seq : 0;
		for (size_t i = 0; i < len; i++)
			p[i] = pat(off + i, bs);
	}
	uint64_t s = stamp(seq, off), t = ~s;
	memcpy(p, &s, len < 8 ? len : 8);
	if (len >= 16)
		memcpy(p + len - 8, &t, 8);
}

/* OFI_RAW_CORRUPT=SEQ (tests): the client spoils one byte of transfer SEQ
 * after filling it, so that the receiver's check is seen to work. */
static int64_t corrupt_seq = -1;

static void corrupt(uint8_t *p, size_t len, uint64_t seq)
{
	if (corrupt_seq >= 0 && seq == (uint64_t)corrupt_seq)
		p[len / 2] ^= 0x5a;
}

static void check(const uint8_t *p, size_t off, size_t len, uint64_t seq, int body,
                  const char *what)
{
	uint64_t s = stamp(seq, off), t = ~s;
	size_t bad = SIZE_MAX;
	const uint8_t *ps = (const uint8_t *)&s, *pt = (const uint8_t *)&t;
	for (size_t i = 0; i < (len < 8 ? len : 8) && bad == SIZE_MAX; i++)
		if (p[i] != ps[i])
			bad = i;
	for (size_t i = 0; len >= 16 && i < 8 && bad == SIZE_MAX; i++)
		if (p[len - 8 + i] != pt[i])
			bad = len - 8 + i;
	if (bad == SIZE_MAX && body) {
		uint64_t bs = verify_all ? seq : 0;
		size_t lo = len < 8 ? len : 8, hi = len >= 16 ? len - 8 : len;
		for (size_t i = lo; i < hi; i++)
			if (p[i] != pat(off + i, bs)) {
				bad = i;
				break;
			}
	}
	checked++;
	if (bad == SIZE_MAX)
		return;
	if (!mismatches++)
		snprintf(first_bad, sizeof first_bad,
		         "%s, %zu bytes at offset %zu, sequence %" PRIu64 ": byte %zu differs",
		         what, len, off, seq, bad);
}

/* ---------------------------------------------------------------- tests */

static unsigned bw_window(const struct params *p, uint64_t size)
{
	uint64_t w = p->win_bytes / size;
	return (unsigned)(w < 1 ? 1 : w > p->win_max ? p->win_max : w);
}

static uint64_t bw_windows(const struct params *p, uint64_t size)
{
	uint64_t w = p->bw_bytes / (size * bw_window(p, size));
	return w < 4 ? 4 : w;
}

static size_t region_for(const struct params *p)
{
	size_t r = 4096;
	if (p->tests & 1)
		for (unsigned i = 0; i < p->n_pp; i++)
			if (p->pp_sizes[i] > r)
				r = p->pp_sizes[i];
	if (p->tests & 2)
		for (unsigned i = 0; i < p->n_bw; i++) {
			size_t n = 2 * (size_t)bw_window(p, p->bw_sizes[i]) * p->bw_sizes[i];
			if (n > r)
				r = n;
		}
	return r;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static uint64_t seq_next;  /* both sides count the same way */

/* Ping-pong of SIZE; the client returns one-way latencies in LAT (ns). */
static void pingpong(int client, uint64_t size, const struct params *p, uint64_t *lat)
{
	int pending = 0;
	struct op op = { .pending = &pending };
	int inject = size <= F.inject_size;
	unsigned total = p->pp_warm + p->pp_iters;
	/* the body pattern once (stamps per round) */
	if (!verify_all)
		fill(F.tx, 0, size, 0, 1);
	for (unsigned i = 0; i < total; i++) {
		uint64_t seq = seq_next++;
		int body = verify_all || i == 0 || i == total - 1;
		if (client) {
			fill(F.tx, 0, size, seq, verify_all);
			corrupt(F.tx, size, seq);
			uint64_t t0 = now_ns();
			post(0, 0, size, 1, seq, inject ? NULL : &op);
			wait_arrival(seq, "a ping-pong reply");
			uint64_t t1 = now_ns();
			check(F.rx, 0, size, seq, body, "ping-pong reply");
			if (i >= p->pp_warm)
				lat[i - p->pp_warm] = (t1 - t0) / 2;
		} else {
			wait_arrival(seq, "a ping-pong message");
			check(F.rx, 0, size, seq, body, "ping-pong message");
			fill(F.tx, 0, size, seq, verify_all);
			post(0, 0, size, 1, seq, inject ? NULL : &op);
		}
		wait_pending(&pending, 0, "a ping-pong write");
	}
}

/* Bandwidth of SIZE: returns bytes/ns for the client. */
static double bandwidth(int client, uint64_t size, const struct params *p)
{
	unsigned w = bw_window(p, size);
	uint64_t k_total = bw_windows(p, size), warm = k_total / 10 ? k_total / 10 : 1;
	int ordered = F.ordered && size <= F.waw_size;
	int pending[2] = { 0, 0 };
	struct op ops[2][MAX_WIN];
	uint64_t base = seq_next;
	seq_next += warm + k_total;
	uint64_t t0 = 0, acked = 0;
	if (!verify_all)
		fill(F.tx, 0, 2 * (size_t)w * size, 0, 1);
	for (uint64_t k = 0; k < warm + k_total; k++) {
		unsigned par = (unsigned)(k & 1);
		uint64_t seq = base + k;
		int body = verify_all || k == 0 || k == warm + k_total - 1;
		if (client) {
			/* two windows in flight: this half is free once the window
			 * before last is acknowledged and its writes complete */
			uint64_t need = k == warm ? k : k >= 2 ? k - 1 : 0;
			for (; acked < need; acked++)
				wait_arrival(base + acked, "a bandwidth window's acknowledgement");
			wait_pending(&pending[par], 0, "a bandwidth window's writes");
			if (k == warm)
				t0 = now_ns();
			for (unsigned j = 0; j < w; j++) {
				size_t off = ((size_t)par * w + j) * size;
				ops[par][j].pending = &pending[par];
				fill(F.tx + off, off, size, seq, verify_all);
				if (j == 0)
					corrupt(F.tx + off, size, seq);
				post(off, off, size, !ordered || j == w - 1, seq, &ops[par][j]);
			}
		} else {
			for (unsigned j = 0; j < (ordered ? 1 : w); j++)
				wait_arrival(seq, "a bandwidth window");
			for (unsigned j = 0; j < w; j++) {
				size_t off = ((size_t)par * w + j) * size;
				check(F.rx + off, off, size, seq, body, "bandwidth write");
			}
			/* the acknowledgement: 8 bytes past the data area */
			size_t aoff = F.region;
			fill(F.tx + aoff - 8, aoff, 8, seq, 0);
			int apending = 0;
			struct op aop = { .pending = &apending };
			if (F.inject_size >= 8) {
				post(aoff - 8, aoff, 8, 1, seq, NULL);
			} else {
				post(aoff - 8, aoff, 8, 1, seq, &aop);
				wait_pending(&apending, 0, "an acknowledgement");
			}
		}
	}
	if (!client)
		return 0;
	for (; acked < warm + k_total; acked++)
		wait_arrival(base + acked, "a bandwidth window's acknowledgement");
	uint64_t t1 = now_ns();
	wait_pending(&pending[0], 0, "bandwidth writes");
	wait_pending(&pending[1], 0, "bandwidth writes");
	return (double)(k_total * w * size) / (double)(t1 - t0);
}

/* ---------------------------------------------------------------- main */

static int parse_size(const char *s, uint64_t *out)
{
	char *e;
	errno = 0;
	unsigned long long v = strtoull(s, &e, 10);
	if (e == s || errno)
		return -1;
	if (*e == 'K' || *e == 'k')
		v <<= 10, e++;
	else if (*e == 'M' || *e == 'm')
		v <<= 20, e++;
	if (*e || v == 0 || v > (64ull << 20))
		return -1;
	*out = v;
	return 0;
}

static unsigned parse_sizes(const char *arg, uint64_t *out, const char *opt)
{
	char buf[512];
	unsigned n = 0;
	snprintf(buf, sizeof buf, "%s", arg);
	for (char *sv, *t = strtok_r(buf, ",", &sv); t; t = strtok_r(NULL, ",", &sv)) {
		if (n == MAX_SIZES)
			usage("%s: at most %d sizes", opt, MAX_SIZES);
		if (parse_size(t, &out[n++]))
			usage("%s: bad size '%s' (1 byte to 64M)", opt, t);
	}
	if (!n)
		usage("%s: no sizes", opt);
	return n;
}

static long parse_num(const char *s, long lo, long hi, const char *opt)
{
	char *e;
	errno = 0;
	long v = strtol(s, &e, 10);
	if (e == s || *e || errno || v < lo || v > hi)
		usage("%s: '%s' is not a number in %ld..%ld", opt, s, lo, hi);
	return v;
}

int main(int argc, char **argv)
{
	const char *server = NULL, *connect_to = NULL, *ready = NULL;
	int port = DEF_PORT, quiet = 0;
	struct params P = { .tests = 3, .pp_iters = 10000, .win_bytes = 8 << 20, .win_max = 64 };
	uint64_t bw_mib = 512;
	int pp_set = 0, bw_set = 0;
	int c;
	while ((c = getopt(argc, argv, "s:c:p:T:S:B:n:M:w:W:Vt:r:qh")) != -1) {
		switch (c) {
		case 's': server = optarg; break;
		case 'c': connect_to = optarg; break;
		case 'p': port = (int)parse_num(optarg, 1, 65534, "-p"); break;
		case 'T': {
			P.tests = 0;
			char buf[64];
			snprintf(buf, sizeof buf, "%s", optarg);
			for (char *sv, *t = strtok_r(buf, ",", &sv); t; t = strtok_r(NULL, ",", &sv)) {
				if (!strcmp(t, "pingpong"))
					P.tests |= 1;
				else if (!strcmp(t, "bw"))
					P.tests |= 2;
				else
					usage("-T: unknown test '%s' (pingpong, bw)", t);
			}
			break;
		}
		case 'S': P.n_pp = parse_sizes(optarg, P.pp_sizes, "-S"); pp_set = 1; break;
		case 'B': P.n_bw = parse_sizes(optarg, P.bw_sizes, "-B"); bw_set = 1; break;
		case 'n': P.pp_iters = (uint32_t)parse_num(optarg, 1, 100000000, "-n"); break;
		case 'M': bw_mib = (uint64_t)parse_num(optarg, 1, 1 << 20, "-M"); break;
		case 'w':
			if (parse_size(optarg, &P.win_bytes))
				usage("-w: bad size '%s' (1 byte to 64M)", optarg);
			break;
		case 'W': P.win_max = (uint32_t)parse_num(optarg, 1, MAX_WIN, "-W"); break;
		case 'V': P.verify_all = 1; break;
		case 't': timeout_s = (double)parse_num(optarg, 1, 86400, "-t"); break;
		case 'r': ready = optarg; break;
		case 'q': quiet = 1; break;
		case 'h': usage(NULL); break;
		default: usage(NULL);
		}
	}
	if (optind != argc)
		usage("unexpected argument '%s'", argv[optind]);
	if (!server == !connect_to)
		usage("give exactly one of -s ADDR (server) and -c SERVER_ADDR (client)");
	if (!pp_set) {
		static const uint64_t d[] = { 8, 64, 1024, 8192, 65536 };
		memcpy(P.pp_sizes, d, sizeof d);
		P.n_pp = 5;
	}
	if (!bw_set) {
		static const uint64_t d[] = { 4096, 16384, 65536, 262144, 1 << 20, 4 << 20 };
		memcpy(P.bw_sizes, d, sizeof d);
		P.n_bw = 6;
	}
	P.pp_warm = P.pp_iters / 10 ? P.pp_iters / 10 : 1;
	P.bw_bytes = bw_mib << 20;

	char host[64];
	gethostname(host, sizeof host);
	host[sizeof host - 1] = 0;
	int is_client = connect_to != NULL;
	const char *cs = getenv("OFI_RAW_CORRUPT");
	if (cs && *cs)
		corrupt_seq = parse_num(cs, 0, INT32_MAX, "OFI_RAW_CORRUPT");

	if (!is_client) {
		snprintf(peer_name, sizeof peer_name, "the client");
		snprintf(self_name, sizeof self_name, "%s (%s)", host, server);
		char svc[16];
		snprintf(svc, sizeof svc, "%d", port + 1);
		fab_open(server, svc, NULL);
		oob_listen_accept(server, port, ready);
		oob_recv(MSG_PARAMS, &P, sizeof P, "the test parameters");
		if (P.n_pp > MAX_SIZES || P.n_bw > MAX_SIZES || !P.win_max || P.win_max > MAX_WIN ||
		    !P.win_bytes)
			fail("bad parameters from %s", peer_name);
		P.client_host[sizeof P.client_host - 1] = 0;
		char pn[160];
		snprintf(pn, sizeof pn, "%.63s (%.64s)", P.client_host, peer_name + 7);
		memcpy(peer_name, pn, sizeof pn);
		verify_all = (int)P.verify_all;
		fab_mr(region_for(&P));
		struct hello h;
		fab_hello(&h, host);
		oob_send(MSG_HELLO, &h, sizeof h);
		oob_recv(MSG_HELLO, &h, sizeof h, "the client's address and key");
		fab_peer(&h);
		for (unsigned i = 0; (P.tests & 1) && i < P.n_pp; i++)
			pingpong(0, P.pp_sizes[i], &P, NULL);
		for (unsigned i = 0; (P.tests & 2) && i < P.n_bw; i++)
			bandwidth(0, P.bw_sizes[i], &P);
		struct result res = { checked, mismatches, "" };
		snprintf(res.first, sizeof res.first, "%s", first_bad);
		oob_send(MSG_RESULT, &res, sizeof res);
		/* the client closes first: our last acknowledgements are out */
		wait_close();
		fprintf(stderr, "ofi_raw: %s: %s, %" PRIu64 " transfers from %s checked, "
		        "%" PRIu64 " mismatches\n", self_name, F.info->fabric_attr->prov_name,
		        checked, peer_name, mismatches);
		if (mismatches)
			fprintf(stderr, "ofi_raw: %s: data mismatch: %s\n", self_name, first_bad);
		close(oob_fd);
		oob_fd = -1;
		fab_close();
		return mismatches ? 1 : 0;
	}

	char local[64];
	snprintf(self_name, sizeof self_name, "%s", host);
	oob_connect(connect_to, port, local, sizeof local);
	snprintf(self_name, sizeof self_name, "%s (%s)", host, local);
	snprintf(P.client_host, sizeof P.client_host, "%s", host);
	verify_all = (int)P.verify_all;
	oob_send(MSG_PARAMS, &P, sizeof P);
	struct hello sh, h;
	oob_recv(MSG_HELLO, &sh, sizeof sh, "the server's address and key");
	sh.host[sizeof sh.host - 1] = sh.prov[sizeof sh.prov - 1] = 0;
	char pn[160];
	snprintf(pn, sizeof pn, "%.63s (%.64s)", sh.host, peer_name + 7);
	memcpy(peer_name, pn, sizeof pn);
	/* the server's provider, bound to the address the server sees us at */
	fab_open(local, NULL, sh.prov);
	fab_mr(region_for(&P));
	fab_hello(&h, host);
	fab_peer(&sh);
	oob_send(MSG_HELLO, &h, sizeof h);
	const char *prov = F.info->fabric_attr->prov_name;
	if (!quiet) {
		char mb[200];
		fprintf(stderr, "# ofi_raw: %s -> %s, provider %s, fabric %s, domain %s\n", self_name,
		        peer_name, prov, F.info->fabric_attr->name, F.info->domain_attr->name);
		fprintf(stderr, "# mr_mode %s, cq_data_size %zu, inject %zu, writes %s\n",
		        mr_mode_str(F.mr_mode, mb, sizeof mb), F.info->domain_attr->cq_data_size,
		        F.inject_size, F.ordered ? "ordered (WAW): one fi_writedata per window"
		                                 : "unordered: every write an fi_writedata");
	}
	printf("test,size,provider,value,unit\n");
	fflush(stdout);
	for (unsigned i = 0; (P.tests & 1) && i < P.n_pp; i++) {
		uint64_t size = P.pp_sizes[i];
		uint64_t *lat = calloc(P.pp_iters, sizeof *lat);
		if (!lat)
			fail("out of memory");
		pingpong(1, size, &P, lat);
		qsort(lat, P.pp_iters, sizeof *lat, cmp_u64);
		uint64_t p50 = lat[(P.pp_iters - 1) / 2];
		uint64_t p99 = lat[(size_t)((P.pp_iters - 1) * 0.99)];
		printf("pingpong_p50,%" PRIu64 ",%s,%.2f,us\n", size, prov, p50 / 1e3);
		printf("pingpong_p99,%" PRIu64 ",%s,%.2f,us\n", size, prov, p99 / 1e3);
		fflush(stdout);
		free(lat);
	}
	for (unsigned i = 0; (P.tests & 2) && i < P.n_bw; i++) {
		double bpns = bandwidth(1, P.bw_sizes[i], &P);
		printf("bw,%" PRIu64 ",%s,%.3f,GB/s\n", P.bw_sizes[i], prov, bpns);
		fflush(stdout);
	}
	struct result res;
	oob_recv(MSG_RESULT, &res, sizeof res, "the server's check of the data");
	res.first[sizeof res.first - 1] = 0;
	close(oob_fd);
	oob_fd = -1;
	int rc = 0;
	if (res.mismatches || mismatches) {
		fprintf(stderr, "ofi_raw: data mismatch: %s saw %" PRIu64 " of %" PRIu64 "%s%s; "
		        "%s saw %" PRIu64 " of %" PRIu64 "%s%s\n",
		        peer_name, res.mismatches, res.checked, res.mismatches ? ": " : "", res.first,
		        self_name, mismatches, checked, mismatches ? ": " : "", first_bad);
		rc = 1;
	} else if (!quiet) {
		fprintf(stderr, "# data checked: %" PRIu64 " transfers at %s, %" PRIu64 " here, "
		        "no mismatch\n", res.checked, peer_name, checked);
	}
	fab_close();
	return rc;
}
