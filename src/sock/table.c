/* SPDX-License-Identifier: MIT */
/*
 * table.c — this process's use of the control table (sock_tab.h, the
 * live-connection table `ntbx stat` reads through sock_view.c): mapping
 * it; who holds each side of a connection slot (a lock per side, on a
 * description of the table file of our own, kept across fork, exec and
 * the program's own closes); and the slots' life: claimed, handed over
 * only by compare-and-swap, reaped once no process holds either side.
 * Separate because the protocol, inheritance and closing all change
 * slots, and only through these calls.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ntbx/fabric.h"
#include "sock/sock.h"
#include "util/util.h"

static struct sk_tab *g_tab;
static uint64_t g_tab_dev, g_tab_ino;   /* its file (sk_inherit) */

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

/* The table if this process mapped it already (no look for the file). */
struct sk_tab *sk_tab_mapped(void)
{
	return g_tab;
}

/* Is @st the table's file?  (An exec'd program finds the description
 * its predecessor held its sides on: inherit.c.) */
int sk_tab_file_is(const struct stat *st)
{
	return g_tab && (uint64_t)st->st_dev == g_tab_dev &&
	       (uint64_t)st->st_ino == g_tab_ino;
}

struct sk_conn *sk_conn(struct sk *s)
{
	if (!g_tab || s->slot < 0 || s->slot >= SK_CONNS)
		return NULL;
	return &g_tab->c[s->slot];
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
SK_FORK_STATE static int g_lfd = -1;
SK_FORK_STATE static int g_fork_lfd = -1;   /* prepare's fresh description */
static uint32_t g_held[SK_CONNS * 2];   /* entries holding each side */
SK_FORK_STATE static int g_nheld;        /* sides with a count */
SK_FORK_STATE static pthread_mutex_t g_lk = PTHREAD_MUTEX_INITIALIZER;

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
	/* FD_CLOEXEC is the only descriptor flag: no F_GETFD first (this
	 * runs before every fork of a process that holds a side) */
	if (sk_real.fcntl(fd, F_SETFD, 0) < 0) {
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

/* This process's lock description, or -1 (inherit.c: not a stray). */
int sk_lockfd(void)
{
	return __atomic_load_n(&g_lfd, __ATOMIC_ACQUIRE);
}

/* Fork (inherit.c's handlers): in the parent, before, a fresh description
 * with the same locks, and g_lk held until the parent or child handler. */
void sk_sides_fork_prepare(void)
{
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

void sk_sides_fork_parent(void)
{
	if (g_fork_lfd >= 0) {
		sk_real.close(g_lfd);   /* the child's now */
		__atomic_store_n(&g_lfd, g_fork_lfd, __ATOMIC_RELEASE);
		g_fork_lfd = -1;
	}
	pthread_mutex_unlock(&g_lk);
}

void sk_sides_fork_child(void)
{
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
	pthread_mutex_init(&g_lk, NULL);   /* held by the forking thread */
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
int sk_slot_still(struct sk_conn *c, uint32_t gen)
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

void sk_slot_free(struct sk_tab *t, int i, uint32_t st, uint32_t gen)
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
	struct ntbx_fabric *f = sk_fab_mine();
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
	sk_slot_free(t, i, SK_CLAIM, u.p.g);
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

/* Entry @s's side of its slot was just let go (sk_release): reclaim the
 * slot now if the other side is gone too, or look again later. */
void sk_slot_done(struct sk *s)
{
	later_run(g_tab);
	if (!slot_reap(g_tab, s->slot, s->gen))
		later_add(s->slot, s->gen);
}

void sk_slots_fork_child(void)
{
	ntbx_mutex_reset(&g_later_lk);
}
