/* SPDX-License-Identifier: MIT */
/*
 * listen.c — listeners: which sockets and addresses the preload may
 * upgrade (TCP over IPv4 or IPv6; the table's addresses and how they
 * match), this process's listeners in the control table (registered by
 * listen(), withdrawn by close(), also when the descriptor went behind our
 * back), and the set of listened ports a connect() looks at first.
 * Separate from the protocol (proto.c) because it is the protocol's input:
 * what listen() publishes, and connect() and accept() match.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ntbx/fabric.h"
#include "sock/sock.h"
#include "util/util.h"

/* By fd: the inode of a listener we registered (0: none), so that it is
 * unregistered even when its descriptor was closed behind our back. */
static uint64_t *g_listen_ino;
/* The process that last registered a listener (0: none did).  Only it can
 * own a registration: a forked child closing the listener it inherited
 * (every child of a fork-per-connection server does) owns none and must
 * not scan the table for one: that scan was 5 pages of the table faulted
 * into every child, and 6% of such a server's time. */
static pid_t g_listen_pid;

/* At start-up (fds.c): a mark for each of @n descriptors.  0, or -1. */
int sk_listen_init(size_t n)
{
	g_listen_ino = calloc(n, sizeof *g_listen_ino);
	return g_listen_ino ? 0 : -1;
}

/* ------------------------------------------------------------ addresses */

int sk_addr_of(const struct sockaddr *sa, socklen_t len, struct sk_addr *a)
{
	memset(a, 0, sizeof *a);
	if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *in = (const void *)sa;
		a->ip[10] = a->ip[11] = 0xff;
		memcpy(a->ip + 12, &in->sin_addr, 4);
		a->port = ntohs(in->sin_port);
		return 0;
	}
	if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *in6 = (const void *)sa;
		memcpy(a->ip, &in6->sin6_addr, 16);
		a->port = ntohs(in6->sin6_port);
		return 0;
	}
	return -1;
}

static int addr_any(const struct sk_addr *a)
{
	static const uint8_t z[16], v4[16] = { [10] = 0xff, [11] = 0xff };
	return !memcmp(a->ip, z, 16) || !memcmp(a->ip, v4, 16);
}

int sk_addr_loop(const struct sk_addr *a)
{
	static const uint8_t l6[16] = { [15] = 1 };
	if (!memcmp(a->ip, l6, 16))
		return 1;
	return a->ip[10] == 0xff && a->ip[11] == 0xff && a->ip[12] == 127 &&
	       !memcmp(a->ip, (uint8_t[10]){ 0 }, 10);
}

/* Same address, a wildcard matching anything. */
int sk_addr_match(const struct sk_addr *l, const struct sk_addr *a)
{
	return addr_any(l) || !memcmp(l->ip, a->ip, 16) ||
	       (sk_addr_loop(l) && sk_addr_loop(a));
}

int sk_tcp_socket(int fd, int *family)
{
	if (ntbx_sandboxed)
		return 0;   /* a confined process: new connections stay TCP */
	int type = 0, dom = 0;
	socklen_t l = sizeof type;
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) < 0 ||
	    type != SOCK_STREAM)
		return 0;
	l = sizeof dom;
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &l) < 0 ||
	    (dom != AF_INET && dom != AF_INET6))
		return 0;
	int proto = 0;
	l = sizeof proto;
	if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &l) < 0 ||
	    proto != IPPROTO_TCP)
		return 0;
	if (family)
		*family = dom;
	return 1;
}

static uint64_t fd_ino(int fd)
{
	struct stat st;
	return fstat(fd, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* ------------------------------------------------------------ listeners */

/* Register listening socket @fd: 1 registered, 0 stays on TCP (said
 * why), -1 not bound yet. */

int sk_on_listen(int fd)
{
	if (!sk_cfg.on || fd < 0 || fd >= sk_nfds)
		return 0;
	int fam;
	if (!sk_tcp_socket(fd, &fam))
		return 0;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	struct sk_addr a;
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0 ||
	    sk_addr_of((struct sockaddr *)&ss, sl, &a) < 0)
		return 0;
	if (a.port == 0)
		return -1;   /* not bound yet: listen() binds it */
	if (!sk_port_ok(a.port)) {
		ntbx_log(NTBX_LOG_INFO, "port %u left on TCP (NTBX_SOCK_PORTS)",
		         a.port);
		return 0;
	}
	int saved = errno;
	struct ntbx_fabric *f = sk_fab();
	struct sk_tab *t = f ? sk_tab(1) : NULL;
	if (!t) {
		if (f)
			ntbx_log(NTBX_LOG_INFO, "listener on port %u stays on TCP: "
			         "no control table", a.port);
		errno = saved;
		return 0;
	}
	uint64_t ino = fd_ino(fd);
	for (int i = 0; i < SK_LISTENERS; i++) {
		struct sk_listener *l = &t->l[i];
		uint32_t z = 0;
		if (__atomic_load_n(&l->state, __ATOMIC_ACQUIRE) == 1 &&
		    !sk_id_may_live(__atomic_load_n(&l->id, __ATOMIC_ACQUIRE))) {
			__atomic_store_n(&l->state, 0, __ATOMIC_RELEASE);
			__atomic_add_fetch(&t->lgen, 1, __ATOMIC_RELEASE);
			skx_listener_changed(f, t, i);
		}
		if (!__atomic_compare_exchange_n(&l->state, &z, 2, 0,
		                                 __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			continue;
		l->pid = getpid();
		l->id = sk_self_id();
		l->node = (uint32_t)ntbx_fabric_node(f);
		l->netns = sk_netns;
		l->ino = ino;
		l->a = a;
		__atomic_store_n(&l->state, 1, __ATOMIC_RELEASE);
		__atomic_add_fetch(&t->lgen, 1, __ATOMIC_RELEASE);
		/* other hosts learn it from their node memory (xhost.c) */
		skx_refresh(f, t);
		skx_listener_changed(f, t, i);
		skx_keep_published(f, t);
		sk_note_fd(fd);
		g_listen_ino[fd] = ino;
		g_listen_pid = sk_pid;
		char s[80];
		sk_addr_str(&a, s, sizeof s);
		ntbx_log(NTBX_LOG_INFO, "listener %s registered on fabric '%s' "
		         "node %d", s, sk_cfg.fabric, ntbx_fabric_node(f));
		errno = saved;
		return 1;
	}
	ntbx_log(NTBX_LOG_INFO, "listener on port %u stays on TCP: listener "
	         "table full", a.port);
	errno = saved;
	return 0;
}

void sk_on_close_listener(int fd)
{
	if (fd < 0 || fd >= sk_nfds || !g_listen_ino || !g_listen_ino[fd])
		return;
	uint64_t ino = g_listen_ino[fd];
	g_listen_ino[fd] = 0;
	struct sk_tab *t = sk_tab_mapped();
	if (!t || g_listen_pid != sk_pid)
		return;   /* not registered by this process: not ours */
	uint64_t me = sk_self_id();
	for (int i = 0; i < SK_LISTENERS; i++) {
		struct sk_listener *l = &t->l[i];
		if (__atomic_load_n(&l->state, __ATOMIC_ACQUIRE) == 1 &&
		    l->ino == ino && me && l->id == me) {
			__atomic_store_n(&l->state, 0, __ATOMIC_RELEASE);
			__atomic_add_fetch(&t->lgen, 1, __ATOMIC_RELEASE);
			skx_listener_changed(sk_fab_mine(), t, i);
		}
	}
}

/*
 * Has any listener registered port @port?  Answered from a private set of
 * ports rebuilt whenever the table's generation (lgen, bumped by every
 * listen and unlisten) differs from the one it was built at, so a connect
 * costs a scan of the listeners only after they changed, and a client
 * that looked before its server listened looks again.
 */
static pthread_mutex_t g_ports_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_ports_gen;
static int g_ports_valid;
static uint8_t g_ports[65536 / 8];

int sk_port_listened(struct sk_tab *t, unsigned port)
{
	pthread_mutex_lock(&g_ports_lock);
	uint64_t gen = __atomic_load_n(&t->lgen, __ATOMIC_ACQUIRE);
	if (!g_ports_valid || gen != g_ports_gen) {
		memset(g_ports, 0, sizeof g_ports);
		for (int i = 0; i < SK_LISTENERS; i++) {
			if (__atomic_load_n(&t->l[i].state, __ATOMIC_ACQUIRE) != 1)
				continue;
			uint16_t p = t->l[i].a.port;   /* read once */
			g_ports[p / 8] |= (uint8_t)(1u << (p % 8));
		}
		g_ports_gen = gen;
		g_ports_valid = 1;
	}
	int r = port < 65536 && (g_ports[port / 8] >> (port % 8) & 1);
	pthread_mutex_unlock(&g_ports_lock);
	return r;
}

int sk_is_listener(int fd)
{
	return fd >= 0 && fd < sk_nfds && g_listen_ino && g_listen_ino[fd];
}

/* listen() on @fd: is it registered already?  A registration left by a
 * listener closed behind our back (same number, other inode) goes. */
int sk_is_listener_checked(int fd)
{
	if (!sk_is_listener(fd))
		return 0;
	if (fd_ino(fd) == g_listen_ino[fd])
		return 1;
	sk_on_close_listener(fd);
	return 0;
}

void sk_listen_fork_child(void)
{
	ntbx_mutex_reset(&g_ports_lock);
}
