/* SPDX-License-Identifier: MIT */
/*
 * core.c — libntbx-preload.so: configuration, the fabric handle, the
 * control table, the descriptor table, and the connection protocol.
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
 *     answer; then it connects its endpoint, publishes the count and
 *     switches (SK_FAB).  The acceptor reads that many bytes from TCP, then
 *     the queue pair.  So a program that connects, writes and accepts in
 *     one thread never blocks, and a stale registration or a listener that
 *     is not interposed costs nothing: the connector stays on TCP, and
 *     falls back for good when the server sends TCP data.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ntbx/fabric.h"
#include "sock/sock.h"
#include "util/util.h"

struct sk_real sk_real;
struct sk_cfg sk_cfg;
struct sk **sk_fds;
int sk_nfds;
int sk_fd_hi;
pthread_mutex_t sk_lock = PTHREAD_MUTEX_INITIALIZER;
pid_t sk_pid;

static struct ntbx_fabric *g_fab;
static pid_t g_fab_pid;
static pid_t g_fab_failed;   /* pid that failed to join (do not retry) */
static struct sk_tab *g_tab;
static uint64_t g_tab_dev, g_tab_ino;   /* its file (sk_inherit) */
static uint64_t g_netns;
/* By fd: the inode of a listener we registered (0: none), so that it is
 * unregistered even when its descriptor was closed behind our back. */
static uint64_t *g_listen_ino;

/* ------------------------------------------------------------ set-up */

static void *sym(const char *name)
{
	void *p = dlsym(RTLD_NEXT, name);
	return p;
}

void sk_resolve(void)
{
	if (sk_real.close)
		return;
#define SK_CALL(ret, name, params) \
	(*(void **)&sk_real.name = sym(#name));
#define SK_REAL SK_CALL
#include "sock/interposed.def"   /* close last: the check above */
#undef SK_CALL
#undef SK_REAL
}

/* One line per bad variable for the whole process tree: the children
 * inherit the environment, and the mark. */
static void cfg_bad(const char *var, const char *val, const char *want)
{
	const char *w = getenv("NTBX_SOCK_WARNED");
	if (w && !strcmp(w, var))
		return;
	fprintf(stderr, "ntbx: ignoring %s='%s': expected %s; sockets stay on "
	        "TCP\n", var, val, want);
	setenv("NTBX_SOCK_WARNED", var, 1);
}

/* NTBX_SOCK_PORTS: "5201,6379,8000-8100" accelerates only those;
 * "!22,!5432" everything but those. */
static int parse_ports(const char *s)
{
	int n = 0;
	const char *p = s;
	while (*p) {
		int neg = 0;
		if (*p == '!') {
			neg = 1;
			p++;
		}
		char *end;
		long a = strtol(p, &end, 10), b = a;
		if (end == p || a < 1 || a > 65535)
			return -1;
		p = end;
		if (*p == '-') {
			b = strtol(p + 1, &end, 10);
			if (end == p + 1 || b < a || b > 65535)
				return -1;
			p = end;
		}
		if (*p == ',')
			p++;
		else if (*p)
			return -1;
		if (n >= SK_MAX_PORT_RULES)
			return -1;
		sk_cfg.rules[n].lo = (uint16_t)a;
		sk_cfg.rules[n].hi = (uint16_t)b;
		sk_cfg.rules[n].neg = neg;
		n++;
	}
	sk_cfg.nrules = n;
	return 0;
}

int sk_port_ok(unsigned port)
{
	if (!sk_cfg.nrules)
		return 1;
	int any_pos = 0;
	for (int i = 0; i < sk_cfg.nrules; i++) {
		int in = port >= sk_cfg.rules[i].lo && port <= sk_cfg.rules[i].hi;
		if (sk_cfg.rules[i].neg && in)
			return 0;
		if (!sk_cfg.rules[i].neg) {
			any_pos = 1;
			if (in)
				return 1;
		}
	}
	return !any_pos;
}

static void atfork_prepare(void);
static void atfork_parent(void);
static void atfork_child(void);

__attribute__((constructor)) static void sk_init(void)
{
	sk_pid = getpid();
	sk_resolve();
	sk_cfg.on = 1;
	const char *s = getenv("NTBX_SOCK");
	if (s && *s) {
		if (!strcmp(s, "off") || !strcmp(s, "0"))
			sk_cfg.on = 0;
		else if (strcmp(s, "on") && strcmp(s, "1")) {
			cfg_bad("NTBX_SOCK", s, "on or off");
			sk_cfg.on = 0;
		}
	}
	s = getenv("NTBX_FABRIC");
	snprintf(sk_cfg.fabric, sizeof sk_cfg.fabric, "%s",
	         s && *s ? s : ntbx_fabric_default_name());
	s = getenv("NTBX_SOCK_PORTS");
	if (s && *s && parse_ports(s) < 0) {
		cfg_bad("NTBX_SOCK_PORTS", s, "ports and ranges such as "
		        "5201,8000-8100 or !22");
		sk_cfg.on = 0;
	}
	sk_cfg.ring = NTBX_QP_DEFAULT_RING;
	s = getenv("NTBX_SOCK_BUF");
	if (s && *s) {
		uint64_t v = 0;
		if (ntbx_parse_size(s, &v) < 0 || v < NTBX_QP_MIN_RING ||
		    v > NTBX_QP_MAX_RING) {
			cfg_bad("NTBX_SOCK_BUF", s, "a size from 4K to 64M");
			sk_cfg.on = 0;
		} else {
			uint32_t r = NTBX_QP_MIN_RING;
			while (r < v)
				r <<= 1;
			sk_cfg.ring = r;
		}
	}
	s = getenv("NTBX_NODE");
	if (s && *s) {
		char *end;
		long v = strtol(s, &end, 10);
		if (*end || v < 0 || v >= NTBX_MAX_NODES) {
			cfg_bad("NTBX_NODE", s, "a node number from 0 to 63");
			sk_cfg.on = 0;
		}
	}
	sk_cfg.spin_ns = (uint64_t)ntbx_spin_us() * 1000;
	struct rlimit rl;
	long n = 65536;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    (long)rl.rlim_cur > n)
		n = (long)rl.rlim_cur;
	if (n > (1 << 20))
		n = 1 << 20;
	sk_fds = calloc((size_t)n, sizeof *sk_fds);
	g_listen_ino = calloc((size_t)n, sizeof *g_listen_ino);
	if (!sk_fds || !g_listen_ino) {
		sk_cfg.on = 0;
		return;
	}
	sk_nfds = (int)n;
	struct stat st;
	if (stat("/proc/self/ns/net", &st) == 0)
		g_netns = st.st_ino;
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
	if (sk_cfg.on)
		sk_inherit();
}

/* ------------------------------------------------------------ fabric */

struct ntbx_fabric *sk_fab(void)
{
	pid_t me = sk_pid;
	if (g_fab && g_fab_pid == me)
		return g_fab;
	if (g_fab_failed == me)
		return NULL;
	pthread_mutex_lock(&sk_lock);
	if (!(g_fab && g_fab_pid == me)) {
		struct ntbx_fabric *f = NULL;
		int rc = ntbx_fabric_join(sk_cfg.fabric, -1, &f);
		if (rc < 0) {
			sk_say_tcp("cannot join fabric '%s': %s", sk_cfg.fabric,
			           ntbx_errmsg());
			g_fab_failed = me;
			f = NULL;
		} else {
			g_fab_pid = me;
		}
		g_fab = f;
	}
	pthread_mutex_unlock(&sk_lock);
	return g_fab_pid == me ? g_fab : NULL;
}

struct ntbx_fabric *sk_fab_mine(void)
{
	return g_fab && g_fab_pid == getpid() ? g_fab : NULL;
}

void sk_fab_forked(void)
{
	if (g_fab)
		g_fab_pid = getpid();
}

/*
 * The control table, mapped on first success.  Without @create, a table
 * that does not exist yet is looked for again at the next call: a client
 * started before any listener of the fabric must still find the table
 * the listener makes (one failed open per connect() until then, and only
 * while no program on the fabric has listened).
 */
struct sk_tab *sk_tab(int create)
{
	if (g_tab)
		return g_tab;
	/* relative to the fabric's checked directory, never by path: the
	 * file could be another user's or a symlink (ntbx/fabric.h) */
	int fd = ntbx_fabric_open_file(sk_cfg.fabric, SK_TAB_FILE,
	                               O_RDWR | (create ? O_CREAT : 0), 0);
	if (fd < 0)
		return NULL;
	struct stat st;
	if (fstat(fd, &st) < 0 ||
	    ((size_t)st.st_size < sizeof(struct sk_tab) &&
	     ftruncate(fd, sizeof(struct sk_tab)) < 0)) {
		sk_real.close(fd);
		return NULL;
	}
	void *p = mmap(NULL, sizeof(struct sk_tab), PROT_READ | PROT_WRITE,
	               MAP_SHARED, fd, 0);
	sk_real.close(fd);
	if (p == MAP_FAILED)
		return NULL;
	g_tab_dev = (uint64_t)st.st_dev;
	g_tab_ino = (uint64_t)st.st_ino;
	g_tab = p;
	return g_tab;
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

static int tcp_socket(int fd, int *family)
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

/* ------------------------------------------------------------ liveness */

/* This process's identity on the fabric (its handle's slot), 0 if it has
 * not joined.  A forked child has its own: it keeps the parent's handle
 * with a waiter slot of its own (priv.c, ntbx_dev_fork_child), or joins
 * again (sk_fab). */
uint64_t sk_self_id(void)
{
	struct ntbx_fabric *f = sk_fab();
	int slot;
	uint32_t gen;
	if (!f || ntbx_dev_self_id(ntbx_fabric_dev(f), &slot, &gen) < 0)
		return 0;
	return sk_id_make(ntbx_fabric_node(f), slot, gen);
}

/* May @id name a live process?  Without a fabric we cannot tell: yes. */
static int id_alive(uint64_t id)
{
	struct ntbx_fabric *f = sk_fab();
	return f ? sk_id_alive(ntbx_fabric_dev(f), id) : 1;
}

/* ------------------------------------------------------------ side locks */

/*
 * Who holds a side of a connection is a lock, not a count (sock_tab.h,
 * "Side locks").  g_lfd is this process's own open file description of
 * the table file, on which it holds a shared lock for every side it
 * holds; g_held counts, per side, the descriptor entries of this process
 * that hold it (each entry once: sk.side_held), because a description's
 * own locks are invisible to F_OFD_GETLK through it, and because two
 * entries of one process may name one slot for a moment (an acceptor
 * that locked the side of a request that was meanwhile reaped and
 * reclaimed, while another thread answers the new one): the lock goes
 * when the last of them lets go, never under another entry's feet.  They
 * change under g_lk only, which the fork handlers hold across fork:
 *   - prepare (parent): a fresh description with the same locks;
 *   - parent: keeps the fresh one, closes its copy of the old one;
 *   - child: keeps the old one, closes its copy of the fresh one.
 * An OFD lock belongs to its description and lasts until the last
 * descriptor of it is closed, so afterwards each process holds its sides
 * on a description nobody else has: the child holds every side it
 * inherited without doing anything, drops one by unlocking it on its own
 * description (never the parent's), and the kernel drops all of them
 * when it ends, however it ends.  At no moment between prepare and the
 * handlers is an inherited side unlocked.
 *
 * The description is not close-on-exec, so an exec'd program still holds
 * what it inherited while it starts; its constructor adopts its sockets
 * (locking them on a description of its own) and then closes the one it
 * inherited (sk_inherit).
 */
static int g_lfd = -1;
static int g_fork_lfd = -1;        /* prepare's fresh description */
static uint32_t g_held[SK_CONNS * 2];   /* entries holding each side */
static int g_nheld;                      /* sides with a count */
static pthread_mutex_t g_lk = PTHREAD_MUTEX_INITIALIZER;

static int held_bit(int i, char role)
{
	return i * 2 + (role == 'A');
}

static int held(int b)
{
	return g_held[b] != 0;
}

/* A description of the table file of our own: through our fabric handle
 * (relative to its checked directory; the keeper after a privilege drop,
 * when the directory can no longer be looked in), else by the fabric's
 * name.  Not close-on-exec (above). */
static int lock_fd_open(void)
{
	struct ntbx_fabric *f = sk_fab_mine();
	int fd = f ? ntbx_dev_open_file(ntbx_fabric_dev(f), SK_TAB_FILE, O_RDWR,
	                                0) : -1;
	if (fd < 0)
		fd = ntbx_fabric_open_file(sk_cfg.fabric, SK_TAB_FILE, O_RDWR, 0);
	if (fd < 0)
		return -1;
	int fl = sk_real.fcntl(fd, F_GETFD);
	if (fl < 0 || sk_real.fcntl(fd, F_SETFD, fl & ~FD_CLOEXEC) < 0) {
		sk_real.close(fd);
		return -1;
	}
	return fd;
}

static int side_setlk(int fd, int b, short type)
{
	struct flock l = { .l_type = type, .l_whence = SEEK_SET,
	                   .l_start = SK_SIDE_BYTE(b / 2, b % 2 ? 'A' : 'C'),
	                   .l_len = 1 };
	return sk_real.fcntl(fd, F_OFD_SETLK, &l);
}

/* Entry @s holds its side from now on (once: a second call changes
 * nothing): 0, or -1 if it could not say so (the caller then gives the
 * connection up). */
int sk_side_hold(struct sk *s)
{
	if (s->slot < 0 || s->slot >= SK_CONNS)
		return -1;
	int b = held_bit(s->slot, s->role), rc = 0;
	pthread_mutex_lock(&g_lk);
	if (!s->side_held) {
		if (!held(b)) {
			if (g_lfd < 0)
				__atomic_store_n(&g_lfd, lock_fd_open(),
				                 __ATOMIC_RELEASE);
			if (g_lfd < 0 || side_setlk(g_lfd, b, F_RDLCK) < 0)
				rc = -1;
			else
				g_nheld++;
		}
		if (rc == 0) {
			g_held[b]++;
			s->side_held = 1;
		}
	}
	pthread_mutex_unlock(&g_lk);
	return rc;
}

/* Entry @s no longer holds its side; the process lets the side go when
 * no other entry of it holds it. */
void sk_side_drop(struct sk *s)
{
	if (s->slot < 0 || s->slot >= SK_CONNS)
		return;
	int b = held_bit(s->slot, s->role);
	pthread_mutex_lock(&g_lk);
	if (s->side_held) {
		s->side_held = 0;
		if (g_held[b] && --g_held[b] == 0) {
			side_setlk(g_lfd, b, F_UNLCK);
			g_nheld--;
		}
	}
	pthread_mutex_unlock(&g_lk);
}

/*
 * The program is about to close descriptors @first..@last, or to put
 * another file on one of them (dup2): our lock description must not go
 * with them (programs close what they do not know of before exec, or in
 * a loop over every number).  Another descriptor of the same description
 * keeps its locks, so ours moves to a number outside the range and the
 * program's call closes the old number.  Returns -1, or the number of
 * ours if no number outside the range was free (the caller then leaves it
 * out of its range).
 */
int sk_lockfd_keep(unsigned first, unsigned last)
{
	/* A look without the lock first: most closes are not near ours,
	 * and the code that holds g_lk closes descriptors of its own
	 * (lock_fd_open), never ours. */
	int cur = __atomic_load_n(&g_lfd, __ATOMIC_ACQUIRE), r = -1;
	if (cur < 0 || (unsigned)cur < first || (unsigned)cur > last)
		return -1;
	pthread_mutex_lock(&g_lk);
	if (g_lfd >= 0 && (unsigned)g_lfd >= first && (unsigned)g_lfd <= last) {
		int n = last < INT_MAX - 1
		        ? sk_real.fcntl(g_lfd, F_DUPFD, (int)last + 1) : -1;
		if (n < 0) {
			n = sk_real.fcntl(g_lfd, F_DUPFD, 0);
			if (n >= 0 && (unsigned)n >= first) {
				sk_real.close(n);
				n = -1;
			}
		}
		if (n >= 0)
			__atomic_store_n(&g_lfd, n, __ATOMIC_RELEASE);
		else
			r = g_lfd;
	}
	pthread_mutex_unlock(&g_lk);
	return r;
}

/* Does any process (this one included) hold side @role of slot @i?  When
 * the kernel cannot say: yes (a slot kept is safe, one reaped is not). */
int sk_side_alive(int i, char role)
{
	if (i < 0 || i >= SK_CONNS)
		return 0;
	int b = held_bit(i, role), r = 1;
	pthread_mutex_lock(&g_lk);
	if (!held(b)) {
		if (g_lfd < 0)
			__atomic_store_n(&g_lfd, lock_fd_open(), __ATOMIC_RELEASE);
		if (g_lfd >= 0) {
			struct flock l = { .l_type = F_WRLCK, .l_whence = SEEK_SET,
			                   .l_start = SK_SIDE_BYTE(i, role),
			                   .l_len = 1 };
			if (sk_real.fcntl(g_lfd, F_OFD_GETLK, &l) == 0)
				r = l.l_type != F_UNLCK;
		}
	}
	pthread_mutex_unlock(&g_lk);
	return r;
}

/* ------------------------------------------------------------ listeners */

/* Register listening socket @fd: 1 registered, 0 stays on TCP (said
 * why), -1 not bound yet. */

int sk_on_listen(int fd)
{
	if (!sk_cfg.on || fd < 0 || fd >= sk_nfds)
		return 0;
	int fam;
	if (!tcp_socket(fd, &fam))
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
		    !id_alive(__atomic_load_n(&l->id, __ATOMIC_ACQUIRE))) {
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
		l->netns = g_netns;
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
	if (!g_tab)
		return;
	uint64_t me = sk_self_id();
	for (int i = 0; i < SK_LISTENERS; i++) {
		struct sk_listener *l = &g_tab->l[i];
		if (__atomic_load_n(&l->state, __ATOMIC_ACQUIRE) == 1 &&
		    l->ino == ino && me && l->id == me) {
			__atomic_store_n(&l->state, 0, __ATOMIC_RELEASE);
			__atomic_add_fetch(&g_tab->lgen, 1, __ATOMIC_RELEASE);
			skx_listener_changed(sk_fab_mine(), g_tab, i);
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

static int port_listened(struct sk_tab *t, unsigned port)
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

/* ------------------------------------------------------------ slots */

/* Hand slot @c over from (@from, @gen) to @to: 1 if it was still that
 * state of that generation.  Every change of a slot that was not ours a
 * moment ago goes through here. */
int sk_slot_cas(struct sk_conn *c, uint32_t from, uint32_t gen, uint32_t to)
{
	uint64_t want = sk_sg(from, gen);
	return __atomic_compare_exchange_n(&c->sg, &want, sk_sg(to, gen), 0,
	                                   __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
}

/*
 * After locking a side: is slot @c still the connection of generation
 * @gen?  A reaper that took it (SK_CLAIM) before it could see our lock
 * gives it back when it does, or frees it: wait for which (the reaper
 * runs a few fcntl calls meanwhile; bounded at 100 ms all the same).
 */
static int slot_still(struct sk_conn *c, uint32_t gen)
{
	uint64_t end = ntbx_now_ns() + 100000000ull;
	for (;;) {
		uint64_t sg = __atomic_load_n(&c->sg, __ATOMIC_ACQUIRE);
		union { struct { uint32_t s, g; } p; uint64_t w; } u = { .w = sg };
		if (u.p.g != gen || u.p.s == SK_FREE)
			return 0;
		if (u.p.s != SK_CLAIM)
			return 1;
		if (ntbx_now_ns() >= end)
			return 0;
		sched_yield();
	}
}

static void slot_free(struct sk_tab *t, int i, uint32_t st, uint32_t gen)
{
	sk_slot_cas(&t->c[i], st, gen, SK_FREE);
}

/*
 * Reclaim slot @i of generation @gen (any, if @gen is ~0) if no process
 * holds either side any more, however they ended, and free the endpoints
 * of the dead sides on this node (the queue-pair layer cannot know that a
 * killed process is gone).  The slot is taken (SK_CLAIM) before the
 * endpoints are closed, so of several reapers exactly one closes them,
 * and an acceptor still answering a request finds the slot changed and
 * gives its endpoint up.  Endpoints on another node are that node's
 * processes' to free.
 */
static int slot_reap(struct sk_tab *t, int i, uint32_t gen)
{
	struct sk_conn *c = &t->c[i];
	uint64_t sg = __atomic_load_n(&c->sg, __ATOMIC_ACQUIRE);
	union { struct { uint32_t s, g; } p; uint64_t w; } u = { .w = sg };
	uint32_t st = u.p.s;
	if (gen != ~0u && u.p.g != gen)
		return 1;
	if (st == SK_FREE || st == SK_CLAIM)
		return 1;
	/* A request nobody answered has no acceptor side yet. */
	if (sk_side_alive(i, 'C') || (st != SK_REQ && sk_side_alive(i, 'A')))
		return 0;
	if (!sk_slot_cas(c, st, u.p.g, SK_CLAIM))
		return 1;
	/* Taken; look again.  A process that takes up a side it was handed
	 * (a descriptor received, or adopted after exec) locks it first and
	 * looks at the slot after (sk_adopt): if it locked between our look
	 * and the swap, we see it now and give the slot back as it was; if
	 * later, it sees the slot taken and leaves it. */
	if (sk_side_alive(i, 'C') || (st != SK_REQ && sk_side_alive(i, 'A'))) {
		sk_slot_cas(c, SK_CLAIM, u.p.g, st);
		return 0;
	}
	struct ntbx_fabric *f = g_fab && g_fab_pid == getpid() ? g_fab : NULL;
	if (f && st == SK_REQ)
		skx_withdraw(f, c);   /* a request to another host: gone too */
	if (f) {
		int me = ntbx_fabric_node(f);
		struct ntbx_qp_addr q[2] = { c->qc, c->qa };
		int32_t refs[2] = { c->refs_c, st == SK_REQ ? 0 : c->refs_a };
		for (int k = 0; k < 2; k++) {
			struct ntbx_qp *qp;
			if (refs[k] > 0 && (int)q[k].node == me && q[k].cookie &&
			    ntbx_qp_attach(f, &q[k], &qp) == 0)
				ntbx_qp_close(qp, 1);
		}
	}
	slot_free(t, i, SK_CLAIM, u.p.g);
	return 1;
}

/*
 * Slots this process closed its side of while the other side was still
 * held: looked at again, a few at each later accept, connect and close,
 * so that a peer whose end of stream came before the kernel dropped its
 * lock (an exiting process sends its FIN and drops its locks in one
 * exit, in either order) is reclaimed without waiting for the cursor.
 * A ring: when full the oldest is forgotten (the cursor still comes).
 */
#define SK_LATER 64
static struct { int slot; uint32_t gen; } g_later[SK_LATER];
static unsigned g_later_first, g_later_n;
static pthread_mutex_t g_later_lk = PTHREAD_MUTEX_INITIALIZER;

static void later_add(int i, uint32_t gen)
{
	pthread_mutex_lock(&g_later_lk);
	if (g_later_n == SK_LATER) {
		g_later_first = (g_later_first + 1) % SK_LATER;
		g_later_n--;
	}
	unsigned k = (g_later_first + g_later_n++) % SK_LATER;
	g_later[k].slot = i;
	g_later[k].gen = gen;
	pthread_mutex_unlock(&g_later_lk);
}

#define SK_LATER_STEP 4   /* entries looked at per call */

static void later_run(struct sk_tab *t)
{
	for (int n = 0; n < SK_LATER_STEP && t; n++) {
		pthread_mutex_lock(&g_later_lk);
		if (!g_later_n) {
			pthread_mutex_unlock(&g_later_lk);
			return;
		}
		int i = g_later[g_later_first].slot;
		uint32_t gen = g_later[g_later_first].gen;
		g_later_first = (g_later_first + 1) % SK_LATER;
		g_later_n--;
		pthread_mutex_unlock(&g_later_lk);
		if (!slot_reap(t, i, gen))
			later_add(i, gen);
	}
}

#define SK_REAP_STEP 8   /* slots looked at per claim */

static int slot_take(struct sk_conn *c)
{
	uint64_t sg = __atomic_load_n(&c->sg, __ATOMIC_ACQUIRE);
	union { struct { uint32_t s, g; } p; uint64_t w; } u = { .w = sg };
	if (u.p.s != SK_FREE || !sk_slot_cas(c, SK_FREE, u.p.g, SK_CLAIM))
		return 0;
	/* Ours now: a new generation, everything else zero. */
	__atomic_store_n(&c->sg, sk_sg(SK_CLAIM, u.p.g + 1), __ATOMIC_RELEASE);
	memset((char *)c + sizeof c->sg, 0, sizeof *c - sizeof c->sg);
	return 1;
}

/*
 * Take a free slot.  Each claim first reaps SK_REAP_STEP slots at a
 * cursor shared by all processes, so every slot is looked at again after
 * SK_CONNS / SK_REAP_STEP claims wherever the claimers start; a full
 * table is reaped whole before giving up.
 */
int sk_slot_claim(struct sk_tab *t)
{
	static unsigned hint;
	later_run(t);
	uint32_t r = __atomic_fetch_add(&t->reap_next, SK_REAP_STEP,
	                                __ATOMIC_RELAXED);
	for (int k = 0; k < SK_REAP_STEP; k++)
		slot_reap(t, (int)((r + (uint32_t)k) % SK_CONNS), ~0u);
	for (int pass = 0; pass < 2; pass++) {
		for (int n = 0; n < SK_CONNS; n++) {
			int i = (int)((hint + (unsigned)n) % SK_CONNS);
			if (slot_take(&t->c[i])) {
				hint = (unsigned)i + 1;
				return i;
			}
		}
		for (int i = 0; i < SK_CONNS && !pass; i++)
			slot_reap(t, i, ~0u);
	}
	return -1;
}

/* ------------------------------------------------------------ the table */

struct sk *sk_get(int fd)
{
	if (fd < 0 || fd >= sk_nfds || !sk_fds)
		return NULL;
	return __atomic_load_n(&sk_fds[fd], __ATOMIC_ACQUIRE);
}

/*
 * A descriptor can be closed without the preload seeing it (a raw system
 * call, a close_range we do not wrap), and the kernel then gives its
 * number to the next descriptor.  The data path trusts the table (a
 * system call per read would cost the fabric its point); the calls that
 * create descriptors drop what they find under the new number
 * (sk_fd_new), and the calls off the data path (close, shutdown, dup,
 * connect, listen, epoll_ctl ADD, descriptor passing) check the shadow's
 * identity first.
 */
struct sk *sk_get_checked(int fd)
{
	struct sk *s = sk_get(fd);
	if (!s)
		return NULL;
	struct stat st;
	if (ntbx_sandboxed)
		return s;   /* cannot ask (util.h): the table is trusted */
	if (fstat(fd, &st) == 0 && (uint64_t)st.st_ino == s->ino &&
	    (uint64_t)st.st_dev == s->dev)
		return s;
	ntbx_log(NTBX_LOG_DEBUG, "fd %d: entry of a descriptor closed behind "
	         "the preload's back dropped", fd);
	sk_drop_fd(fd);
	return NULL;
}

void sk_fd_new(int fd)
{
	if (fd < 0 || fd >= sk_nfds || !sk_fds)
		return;
	if (sk_get(fd)) {
		ntbx_log(NTBX_LOG_DEBUG, "fd %d: entry of a descriptor closed "
		         "behind the preload's back dropped", fd);
		sk_drop_fd(fd);
	}
	if (sk_is_listener(fd))
		sk_on_close_listener(fd);
}

static struct sk *sk_new(char role, int slot, int fd)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return NULL;
	struct sk *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->dev = (uint64_t)st.st_dev;
	s->ino = (uint64_t)st.st_ino;
	s->refs = 1;
	s->role = role;
	s->slot = slot;
	s->gen = slot >= 0 && g_tab ? g_tab->c[slot].gen : 0;
	s->fd0 = fd;
	s->pid = getpid();
	pthread_mutex_init(&s->rlock, NULL);
	pthread_mutex_init(&s->wlock, NULL);
	pthread_mutex_init(&s->qlock, NULL);
	pthread_mutex_init(&s->folock, NULL);
	return s;
}

/* An entry made by sk_new that never got a descriptor. */
static void sk_free_new(struct sk *s)
{
	pthread_mutex_destroy(&s->rlock);
	pthread_mutex_destroy(&s->wlock);
	pthread_mutex_destroy(&s->qlock);
	pthread_mutex_destroy(&s->folock);
	free(s);
}

void sk_set(int fd, struct sk *s)
{
	if (s)
		sk_note_fd(fd);
	__atomic_store_n(&sk_fds[fd], s, __ATOMIC_RELEASE);
}

struct sk_conn *sk_conn(struct sk *s)
{
	if (!g_tab || s->slot < 0 || s->slot >= SK_CONNS)
		return NULL;
	return &g_tab->c[s->slot];
}

/* The queue-pair handle for this process (attach after fork or exec). */
struct ntbx_qp *sk_qp(struct sk *s)
{
	if (s->qp && s->pid == sk_pid)
		return s->qp;
	/* A forked child, an exec'd program or a receiver of the descriptor
	 * uses the connection: it holds the side from now on (already, but
	 * for a child whose parent could not give it a lock description of
	 * its own: then it locks now and looks again, as sk_adopt does). */
	struct sk_conn *c = sk_conn(s);
	if (c && sk_side_hold(s) == 0 && !slot_still(c, s->gen)) {
		ntbx_log(NTBX_LOG_WARN, "fd %d: its connection was reclaimed "
		         "while no process held it", s->fd0);
		return NULL;
	}
	struct ntbx_fabric *f = sk_fab();
	if (!f)
		return NULL;
	struct ntbx_qp *qp = NULL;
	if (ntbx_qp_attach(f, &s->me, &qp) < 0) {
		ntbx_log(NTBX_LOG_WARN, "cannot attach to a connection's "
		         "endpoint: %s", ntbx_errmsg());
		return NULL;
	}
	s->qp = qp;
	s->pid = sk_pid;
	return qp;
}

/* ------------------------------------------------------------ connect */

int sk_connect(int fd, const struct sockaddr *sa, socklen_t len)
{
	int fam;
	struct sk_addr dst;
	if (!sk_cfg.on || fd < 0 || fd >= sk_nfds || sk_get_checked(fd) ||
	    sk_addr_of(sa, len, &dst) < 0 || !tcp_socket(fd, &fam))
		return sk_real.connect(fd, sa, len);
	if (!sk_port_ok(dst.port))
		return sk_real.connect(fd, sa, len);
	struct sk_tab *t = sk_tab(0);
	int loop = sk_addr_loop(&dst);
	/* Any listener on that port at all?  (No join otherwise.)  On a
	 * fabric that spans hosts our table has this host's listeners only:
	 * the others' are in node memory (xhost.c), looked at once joined. */
	int other_hosts = !loop && skx_fabric_spans();
	if ((!t || !port_listened(t, dst.port)) && !other_hosts)
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
		if (loop ? l->netns != g_netns : (int)l->node != node)
			continue;
		if (!id_alive(__atomic_load_n(&l->id, __ATOMIC_ACQUIRE)))
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
	/* Our port must be known before the kernel connects. */
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	struct sk_addr me;
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0 ||
	    sk_addr_of((struct sockaddr *)&ss, sl, &me) < 0)
		return sk_real.connect(fd, sa, len);
	if (me.port == 0) {
		struct sockaddr_storage any6;
		memset(&any6, 0, sizeof any6);
		any6.ss_family = (sa_family_t)fam;
		socklen_t al = fam == AF_INET ? sizeof(struct sockaddr_in)
		                              : sizeof(struct sockaddr_in6);
		sl = sizeof ss;
		if (sk_real.bind(fd, (struct sockaddr *)&any6, al) < 0 ||
		    getsockname(fd, (struct sockaddr *)&ss, &sl) < 0 ||
		    sk_addr_of((struct sockaddr *)&ss, sl, &me) < 0) {
			ntbx_log(NTBX_LOG_INFO, "connection to %s stays on TCP: "
			         "cannot bind a local port: %s", ds,
			         strerror(errno));
			return sk_real.connect(fd, sa, len);
		}
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
	struct ntbx_qp_opts o = { .ring_size = sk_cfg.ring,
	                          .flags = remote ? NTBX_QP_NO_PUSH : 0 };
	struct ntbx_qp *qp = NULL;
	int rc = ntbx_qp_create(f, node, &o, &qp, &c->qc);
	if (rc < 0) {
		snprintf(c->reason, sizeof c->reason, "%s", ntbx_errmsg());
		ntbx_log(NTBX_LOG_INFO, "connection to %s stays on TCP: %s", ds,
		         c->reason);
		slot_free(t, i, SK_CLAIM, c->gen);
		return sk_real.connect(fd, sa, len);
	}
	struct sk *s = sk_new('C', i, fd);
	if (!s) {
		ntbx_qp_close(qp, 1);
		slot_free(t, i, SK_CLAIM, c->gen);
		return sk_real.connect(fd, sa, len);
	}
	s->qp = qp;
	s->me = c->qc;
	s->mode = M_PEND;
	c->node_c = (uint32_t)ntbx_fabric_node(f);
	c->node_a = (uint32_t)node;
	c->pid_c = getpid();
	c->refs_c = 1;
	if (sk_side_hold(s) < 0) {
		ntbx_log(NTBX_LOG_INFO, "connection to %s stays on TCP: cannot "
		         "lock its side: %s", ds, strerror(errno));
		ntbx_qp_close(qp, 1);
		slot_free(t, i, SK_CLAIM, s->gen);
		sk_free_new(s);
		return sk_real.connect(fd, sa, len);
	}
	c->netns_c = g_netns;
	c->cl = me;
	c->dst = dst;
	/* A listener on another host: the request goes into its node's
	 * memory, and is there before our SYN leaves (xhost.c). */
	if (remote && skx_request(f, t, i, node) < 0) {
		ntbx_log(NTBX_LOG_INFO, "connection to %s stays on TCP: %s", ds,
		         ntbx_errmsg());
		ntbx_qp_close(qp, 1);
		__atomic_store_n(&c->refs_c, 0, __ATOMIC_RELEASE);
		slot_free(t, i, SK_CLAIM, s->gen);
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
		slot_free(t, i, SK_REQ, s->gen);
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
static struct ntbx_qp *sk_connect_qp(struct sk *s, struct sk_conn *c)
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
	struct ntbx_qp_opts o = { .ring_size = sk_cfg.ring, .flags = flags };
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
	c->pid_a = getpid();
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
		slot_free(t, i, SK_CLAIM, gen);
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
	slot_free(t, i, st, gen);
	sk_free_new(s);
	return 0;
}

int sk_on_accept(int lfd, int fd, const struct sockaddr *peer,
                 socklen_t plen)
{
	if (!sk_cfg.on || fd < 0 || fd >= sk_nfds || !sk_is_listener(lfd))
		return 0;
	struct sk_tab *t = g_tab;
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
		if (loop && c->netns_c != g_netns)
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
	 * epoll with its endpoint's wake bit registered): ring it, after the
	 * answer is visible.  Beyond one hop it looks again by itself. */
	ntbx_qp_notify(qp);
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

/* ------------------------------------------------------------ close */

/* The last local descriptor of @s is gone. */
void sk_release(struct sk *s)
{
	struct sk_conn *c = sk_conn(s);
	int last = 1;
	if (c) {
		int32_t *mine = s->role == 'C' ? &c->refs_c : &c->refs_a;
		int32_t left = __atomic_sub_fetch(mine, 1, __ATOMIC_ACQ_REL);
		last = left <= 0;
		if (last && s->mode != M_TCP) {
			uint32_t st = __atomic_load_n(&c->state, __ATOMIC_ACQUIRE);
			/* The acceptor may be writing into our endpoint: connect
			 * it, so closing tells the acceptor. */
			struct ntbx_qp *qp = s->role == 'C' && st == SK_ACC
			                     ? sk_connect_qp(s, c) : sk_qp(s);
			/* M_PEND with rd_fab: a connector whose whole request
			 * went by TCP before the acceptor answered, and whose
			 * reply came by the fabric (a short connection on a
			 * busy machine): on the fabric too */
			int fab = s->mode == M_FAB ||
			          __atomic_load_n(&s->rd_fab, __ATOMIC_ACQUIRE);
			if (ntbx_log_enabled(NTBX_LOG_INFO) && fab) {
				/* the connector's first bytes may have gone by TCP,
				 * before the acceptor answered: counted, and said */
				/* "in" is what this side's readers took (read_*),
				 * not what the other side counts as sent: that
				 * counter may lag the bytes we already read */
				uint64_t pre = c->tcp_sent;
				uint64_t out = s->role == 'C' ? c->bytes_ca + pre
				                              : c->bytes_ac;
				uint64_t in = s->role == 'C' ? c->read_ac
				                             : c->read_ca + pre;
				ntbx_log(NTBX_LOG_INFO, "fd %d closed: path fabric, "
				         "%llu bytes out, %llu bytes in (%llu sent by "
				         "TCP before the switch)", s->fd0,
				         (unsigned long long)out,
				         (unsigned long long)in,
				         (unsigned long long)pre);
			}
			if (qp)
				ntbx_qp_close(qp, 1);
			s->qp = NULL;
		}
	}
	if (s->qp && s->pid == getpid())
		ntbx_qp_close(s->qp, last);
	s->qp = NULL;
	if (c) {
		/* Our handle is closed: only now may a reaper free the memory
		 * under it.  Then, both ends gone however the other one ended
		 * (forked children that never used the side included: they
		 * held it by their own locks): reclaim the slot and the
		 * other end's memory now, or look again later. */
		sk_side_drop(s);
		later_run(g_tab);
		if (!slot_reap(g_tab, s->slot, s->gen))
			later_add(s->slot, s->gen);
	}
	pthread_mutex_destroy(&s->rlock);
	pthread_mutex_destroy(&s->wlock);
	pthread_mutex_destroy(&s->qlock);
	pthread_mutex_destroy(&s->folock);
	free(s->pk);
	free(s->rt);
	free(s->fob);
	free(s);
}

/* ------------------------------------------------------------ fork/exec */

/* Before fork, in the parent: the child will hold every connection we
 * hold, so count it now (a parent that closes its copy right after fork,
 * as accept-and-fork servers do, must not end the stream), and give the
 * parent a fresh lock description (side locks, above). */
static void atfork_prepare(void)
{
	static unsigned gen;
	gen++;
	for (int fd = 0; fd < sk_fd_hi; fd++) {
		struct sk *s = sk_fds[fd];
		if (!s || s->fork_mark == gen)
			continue;
		s->fork_mark = gen;
		struct sk_conn *c = sk_conn(s);
		if (c)
			__atomic_add_fetch(s->role == 'C' ? &c->refs_c : &c->refs_a,
			                   1, __ATOMIC_ACQ_REL);
	}
	pthread_mutex_lock(&g_lk);
	g_fork_lfd = -1;
	if (g_lfd >= 0 && g_nheld) {
		int n = lock_fd_open();
		for (int b = 0; n >= 0 && b < SK_CONNS * 2; b++)
			if (held(b) && side_setlk(n, b, F_RDLCK) < 0) {
				sk_real.close(n);
				n = -1;
			}
		if (n < 0)
			ntbx_log(NTBX_LOG_WARN, "fork: no lock description of its "
			         "own for the parent: %s", strerror(errno));
		g_fork_lfd = n;
	}
}

static void atfork_parent(void)
{
	if (g_fork_lfd >= 0) {
		sk_real.close(g_lfd);   /* the child's now */
		__atomic_store_n(&g_lfd, g_fork_lfd, __ATOMIC_RELEASE);
		g_fork_lfd = -1;
	}
	pthread_mutex_unlock(&g_lk);
}

static void atfork_child(void)
{
	sk_pid = getpid();
	if (g_fork_lfd >= 0) {
		sk_real.close(g_fork_lfd);   /* the parent's */
		g_fork_lfd = -1;
	} else if (g_lfd >= 0) {
		/* Shared with the parent (nothing held, or no fresh one could
		 * be made): ours must be our own.  Without it our inherited
		 * sides are held again at first use (sk_qp). */
		sk_real.close(g_lfd);
		__atomic_store_n(&g_lfd, -1, __ATOMIC_RELEASE);
		memset(g_held, 0, sizeof g_held);
		g_nheld = 0;
		for (int fd = 0; fd < sk_fd_hi; fd++)
			if (sk_fds[fd])
				sk_fds[fd]->side_held = 0;
	}
	/* Every write here is a copy-on-write fault per fork: write only
	 * what differs. */
	pthread_mutex_init(&g_lk, NULL);   /* held by the forking thread */
	ntbx_mutex_reset(&g_later_lk);
	ntbx_mutex_reset(&sk_lock);
	ntbx_mutex_reset(&g_ports_lock);
	for (int fd = 0; fd < sk_fd_hi; fd++) {
		struct sk *s = sk_fds[fd];
		if (!s)
			continue;
		/* the parent's handles belong to the parent */
		if (s->qp)
			s->qp = NULL;
		ntbx_mutex_reset(&s->rlock);
		ntbx_mutex_reset(&s->wlock);
		ntbx_mutex_reset(&s->qlock);
	}
	sk_epoll_atfork();
	sk_wake_atfork();
}

/* Under sk_lock: if an entry of ours holds side @role of slot @i of
 * generation @gen already, give @fd one more reference to it. */
static int adopt_more(int fd, int i, char role, uint32_t gen)
{
	for (int k = 0; k < sk_fd_hi; k++) {
		struct sk *s = sk_fds[k];
		if (s && s->slot == i && s->role == role && s->gen == gen) {
			s->refs++;
			sk_set(fd, s);
			return 1;
		}
	}
	return 0;
}

/* After exec: find the sockets we inherited by their inode. */
/*
 * Find the connection whose shadow @fd is (its 4-tuple in the table) and
 * give @fd a descriptor entry for it.  In-process copies share the struct,
 * as dup does.  @inflight: the sender of an SCM_RIGHTS message counted
 * this process in already (sk_fds_sent); a process that holds the side
 * already gives that count back.  Returns 1 if @fd is a fabric socket.
 */
static int sk_adopt(struct sk_tab *t, int fd, int inflight)
{
	struct stat st;
	if (fd < 0 || fd >= sk_nfds || sk_get_checked(fd) || fstat(fd, &st) < 0 ||
	    !S_ISSOCK(st.st_mode))
		return 0;
	struct sockaddr_storage a, b;
	socklen_t al = sizeof a, bl = sizeof b;
	struct sk_addr la, pa;
	if (getsockname(fd, (struct sockaddr *)&a, &al) < 0 ||
	    getpeername(fd, (struct sockaddr *)&b, &bl) < 0 ||
	    sk_addr_of((struct sockaddr *)&a, al, &la) < 0 ||
	    sk_addr_of((struct sockaddr *)&b, bl, &pa) < 0)
		return 0;
	for (int i = 0; i < SK_CONNS; i++) {
		struct sk_conn *c = &t->c[i];
		uint64_t sg = __atomic_load_n(&c->sg, __ATOMIC_ACQUIRE);
		union { struct { uint32_t s, g; } p; uint64_t w; } u = { .w = sg };
		uint32_t cs = u.p.s;
		if (cs != SK_ACC && cs != SK_FAB && cs != SK_REQ && cs != SK_ANS)
			continue;
		char role;
		if (c->cl.port == la.port && c->dst.port == pa.port &&
		    sk_addr_match(&c->dst, &pa))
			role = 'C';
		else if (c->cl.port == pa.port && c->dst.port == la.port &&
		         sk_addr_match(&c->dst, &la) && cs != SK_REQ && cs != SK_ANS)
			role = 'A';
		else
			continue;
		pthread_mutex_lock(&sk_lock);
		if (adopt_more(fd, i, role, u.p.g)) {
			pthread_mutex_unlock(&sk_lock);
			if (inflight)
				__atomic_sub_fetch(role == 'C' ? &c->refs_c
				                               : &c->refs_a, 1,
				                   __ATOMIC_ACQ_REL);
			return 1;
		}
		pthread_mutex_unlock(&sk_lock);
		struct sk *s = sk_new(role, i, fd);
		if (!s)
			return 0;
		s->me = role == 'C' ? c->qc : c->qa;
		s->gen = u.p.g;
		s->pid = 0;   /* attach on first use */
		s->mode = role == 'A' ? M_FAB : cs == SK_FAB ? M_FAB : M_PEND;
		/* Lock the side, then look again (slot_reap's other half): if
		 * every holder let go between our look and our lock, the slot
		 * may have been reaped, and claimed again, and it is not this
		 * descriptor's connection any more. */
		if (sk_side_hold(s) < 0)
			ntbx_log(NTBX_LOG_WARN, "fd %d: cannot lock its connection's "
			         "side: %s", fd, strerror(errno));
		else if (!slot_still(c, s->gen)) {
			sk_side_drop(s);
			sk_free_new(s);
			return 0;
		}
		pthread_mutex_lock(&sk_lock);
		if (adopt_more(fd, i, role, s->gen)) {   /* another thread did */
			pthread_mutex_unlock(&sk_lock);
			sk_side_drop(s);
			sk_free_new(s);
			if (inflight)
				__atomic_sub_fetch(role == 'C' ? &c->refs_c
				                               : &c->refs_a, 1,
				                   __ATOMIC_ACQ_REL);
			return 1;
		}
		sk_set(fd, s);
		pthread_mutex_unlock(&sk_lock);
		return 1;
	}
	return 0;
}

void sk_inherit(void)
{
	struct sk_tab *t = sk_tab(0);
	if (!t)
		return;
	int any = 0;
	for (int i = 0; i < SK_CONNS && !any; i++) {
		uint32_t st = __atomic_load_n(&t->c[i].state, __ATOMIC_ACQUIRE);
		any = st == SK_ACC || st == SK_FAB || st == SK_REQ ||
		      st == SK_ANS;
	}
	if (!any)
		return;
	/* Only descriptors 0..1023: enough for what exec'd children get. */
	int stray[16], ns = 0;
	for (int fd = 0; fd < 1024 && fd < sk_nfds; fd++) {
		struct stat st;
		if (fd != g_lfd && ns < 16 && fstat(fd, &st) == 0 &&
		    S_ISREG(st.st_mode) && (uint64_t)st.st_dev == g_tab_dev &&
		    (uint64_t)st.st_ino == g_tab_ino)
			stray[ns++] = fd;
		else
			sk_adopt(t, fd, 0);
	}
	/* The lock description the program before exec held its sides on:
	 * ours hold what we adopted now (side locks, above). */
	for (int k = 0; k < ns; k++)
		sk_real.close(stray[k]);
}

/*
 * Descriptor passing (SCM_RIGHTS), as DESIGN.md asks: the receiver finds
 * the connection by its shadow, like an exec'd child.  The sender counts
 * the receiving process in before the message leaves (sk_fds_sent), so a
 * sender that closes its copy right after sendmsg does not end the
 * connection while the descriptor is in flight; the receiver takes that
 * count over (sk_fds_received), or gives it back if it held the socket
 * already.  A descriptor never received (the receiver dies first, or is
 * not interposed) leaves the count high: the peer's end of stream then
 * comes from the shadow's FIN, as when a holder exits without closing.
 */
static void fds_each(const struct msghdr *m, void (*fn)(int fd, void *arg),
                     void *arg)
{
	if (!m || !m->msg_control)
		return;
	for (struct cmsghdr *h = CMSG_FIRSTHDR((struct msghdr *)m); h;
	     h = CMSG_NXTHDR((struct msghdr *)m, h)) {
		if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS ||
		    h->cmsg_len < CMSG_LEN(0))
			continue;
		size_t n = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(h) + i * sizeof(int), sizeof fd);
			fn(fd, arg);
		}
	}
}

static void count_sent(int fd, void *arg)
{
	int d = *(int *)arg;
	struct sk *s = sk_get(fd);
	struct sk_conn *c = s ? sk_conn(s) : NULL;
	if (c)
		__atomic_add_fetch(s->role == 'C' ? &c->refs_c : &c->refs_a, d,
		                   __ATOMIC_ACQ_REL);
}

void sk_fds_sent(const struct msghdr *m, int delta)
{
	fds_each(m, count_sent, &delta);
}

static void adopt_received(int fd, void *arg)
{
	sk_adopt(arg, fd, 1);
}

static void fresh_received(int fd, void *arg)
{
	(void)arg;
	sk_fd_new(fd);   /* a received descriptor is a new number */
}

void sk_fds_received(const struct msghdr *m)
{
	fds_each(m, fresh_received, NULL);
	/* (sk_tab(1): the table may have appeared since start-up) */
	struct sk_tab *t = m && m->msg_controllen ? sk_tab(1) : NULL;
	if (t)
		fds_each(m, adopt_received, t);
}
