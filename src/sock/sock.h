/* SPDX-License-Identifier: MIT */
/*
 * sock.h — declarations shared by the files of libntbx-preload.so, each
 * once, grouped by the file that defines them (sock_int.h has the folder's
 * map).  What only one file uses stays static there.
 */
#ifndef NTBX_SOCK_SOCK_H
#define NTBX_SOCK_SOCK_H

#include <sys/stat.h>

#include "sock/sock_int.h"
#include "sock/sock_view.h"   /* sk_addr_str */

/* entry.c: the real libc functions (sk_real, sock_int.h), found once. */
void sk_resolve(void);

/* conf.c */
#define SK_MAX_PORT_RULES 32

struct sk_cfg {
	int on;
	char fabric[64];
	uint32_t ring;
	uint32_t xring;   /* the ring of a connection to another host */
	uint64_t spin_ns;
	int nrules;
	struct { uint16_t lo, hi; int neg; } rules[SK_MAX_PORT_RULES];
};
extern struct sk_cfg sk_cfg;
void sk_conf_read(void);
int sk_port_ok(unsigned port);

/*
 * What the fork handlers write, in the parent (prepare and parent) and in
 * the child, gathered in one section of its own: after fork every page of
 * it is shared copy-on-write with the child, so each page written costs
 * a fault in whichever process writes it (and a forking server writes
 * them once per connection); spread over the .data and .bss of four
 * files they were four pages, here one.
 */
#define SK_FORK_STATE __attribute__((section("ntbx_fork_state")))

/* self.c */
/* This process.  getpid() is a system call since glibc 2.25 and sk_qp runs
 * on every read and write, so the pid is kept here: set at start-up and by
 * the atfork child handler (vfork children run in the parent's memory and
 * may only exec or _exit, so they never need their own). */
extern pid_t sk_pid;
extern uint64_t sk_netns;   /* its network namespace (0: unknown) */
void sk_self_init(void);
struct ntbx_fabric *sk_fab(void);
/* The fabric handle if this process joined (or took it over after fork),
 * without joining; sk_fab_forked: a forked child keeps the parent's
 * handle, made its own at its first sk_fab (priv.c); sk_fab_inherited:
 * the handle a child of ours would keep. */
struct ntbx_fabric *sk_fab_mine(void);
struct ntbx_fabric *sk_fab_inherited(void);
void sk_fab_forked(void);
/* This process's identity (listeners); may @id name a live process? */
uint64_t sk_self_id(void);
int sk_id_may_live(uint64_t id);

/* fds.c */
extern struct sk **sk_fds;
extern int sk_nfds;
/* One past the highest descriptor that ever had an entry (in sk_fds or as
 * a listener): what a scan of the table walks instead of sk_nfds, which is
 * the file limit (65536 or more), so fork, exec and close_range cost what
 * the program's descriptors do.  Only grows; sk_note_fd raises it. */
extern int sk_fd_hi;
static inline void sk_note_fd(int fd)
{
	int hi = __atomic_load_n(&sk_fd_hi, __ATOMIC_RELAXED);
	while (fd >= hi && !__atomic_compare_exchange_n(&sk_fd_hi, &hi, fd + 1,
	                                                 0, __ATOMIC_RELEASE,
	                                                 __ATOMIC_RELAXED))
		;
}
extern pthread_mutex_t sk_lock;
int sk_fds_init(void);
struct sk *sk_get(int fd);
/* sk_get, and the entry still names @fd's socket (one fstat: for calls
 * off the data path); a stale entry is dropped. */
struct sk *sk_get_checked(int fd);
/* The kernel just gave out @fd: an entry left under that number belongs
 * to a descriptor closed behind the preload's back; drop it. */
void sk_fd_new(int fd);
/* A new entry of @role for slot @slot, naming @fd's socket; one that never
 * got a descriptor is freed with sk_free_new. */
struct sk *sk_new(char role, int slot, int fd);
void sk_free_new(struct sk *s);
void sk_set(int fd, struct sk *s);
struct ntbx_qp *sk_qp(struct sk *s);
void sk_drop_fd(int fd);

/* table.c: the control table, its slots and who holds their sides (a lock
 * per side). */
struct sk_tab *sk_tab(int create);
struct sk_tab *sk_tab_mapped(void);
int sk_tab_file_is(const struct stat *st);
struct sk_conn *sk_conn(struct sk *s);
int sk_side_hold(struct sk *s);
void sk_side_drop(struct sk *s);
int sk_side_alive(int slot, char role);
int sk_lockfd_keep(unsigned first, unsigned last);
int sk_lockfd(void);
void sk_sides_fork_prepare(void);
void sk_sides_fork_parent(void);
void sk_sides_fork_child(void);
int sk_slot_claim(struct sk_tab *t);
int sk_slot_cas(struct sk_conn *c, uint32_t from, uint32_t gen, uint32_t to);
int sk_slot_still(struct sk_conn *c, uint32_t gen);
void sk_slot_free(struct sk_tab *t, int i, uint32_t st, uint32_t gen);
void sk_slot_done(struct sk *s);
void sk_slots_fork_child(void);

/* listen.c */
int sk_listen_init(size_t n);
int sk_addr_of(const struct sockaddr *sa, socklen_t len, struct sk_addr *a);
int sk_addr_loop(const struct sk_addr *a);
/* @l (a listener's address, possibly a wildcard) matches @a. */
int sk_addr_match(const struct sk_addr *l, const struct sk_addr *a);
/* @fd is a TCP socket over IPv4 or IPv6 (*family: which). */
int sk_tcp_socket(int fd, int *family);
int sk_on_listen(int fd);
void sk_on_close_listener(int fd);
int sk_port_listened(struct sk_tab *t, unsigned port);
int sk_is_listener(int fd);
int sk_is_listener_checked(int fd);
void sk_listen_fork_child(void);

/* proto.c */
int sk_connect(int fd, const struct sockaddr *sa, socklen_t len);
struct ntbx_qp *sk_connect_qp(struct sk *s, struct sk_conn *c);
void sk_progress(struct sk *s);
void sk_progress_locked(struct sk *s);
void sk_fallback(struct sk *s, const char *why);
int sk_on_accept(int lfd, int fd, const struct sockaddr *peer,
                 socklen_t plen);

/* close.c */
void sk_release(struct sk *s);

/* inherit.c */
void sk_inherit_start(void);
/* SCM_RIGHTS: count the processes a message carries fabric sockets to
 * (+1 before sendmsg, -1 if it failed), and adopt the ones received. */
struct msghdr;
void sk_fds_sent(const struct msghdr *m, int delta);
void sk_fds_received(const struct msghdr *m);

/* flags.c */
int sk_nonblock(int fd);
void sk_nonblock_set(int fd, int on);
/* Confinement: mark every connection of ours before a seccomp filter;
 * does @s's peer sleep unreachable by our rings? */
void sk_confine_all(void);
void sk_confine(void);
int sk_peer_confined(struct sk *s);

/* stream.c */
ssize_t sk_read(struct sk *s, int fd, void *buf, size_t len, int flags);
ssize_t sk_write(struct sk *s, int fd, const void *buf, size_t len,
                 int flags);
/* Bytes we wrote on the fabric that the peer has not read; bytes the peer
 * wrote that we have not (our read-ahead included). */
uint64_t sk_unread(struct sk *s);
uint64_t sk_unread_in(struct sk *s);
/* the queue pair's readiness (no lock), and its arming (under s->qlock) */
int q_poll(struct sk *s);
int q_arm(struct sk *s, int events);

/* ready.c */
/* Readiness of @s as poll bits; *kev: events to ask the kernel about the
 * shadow; *slice: 1 if the state may change without a wake-up. */
int sk_revents(struct sk *s, int fd, int events, int *kev, int *slice);
/* Acceptor: are bytes the connector sent by TCP still to be read? */
int sk_prefix_pending(struct sk *s);
int sk_sleep_slice(uint64_t end, uint64_t now, int slice, unsigned *backoff);
/* A wait's dealings with the wait policy (one site per thread). */
struct sk_spin_wait {
	uint64_t budget;
	int looked, begun, slept;
};
void sk_spin_wait_begin(struct sk_spin_wait *sp, int cpu, uint64_t now);
void sk_spin_wait_end(const struct sk_spin_wait *sp, uint64_t t0);
void sk_peer_cpu_add(int *cpu, struct sk *s, int events);
int sk_ts_ms(const struct timespec *ts);

/* wake.c: a sleeper's wake object (a waiter slot of the node, its FIFO). */
struct wobj {
	struct ntbx_db_wake *wk;
	struct ntbx_dev *dev;   /* whose object it is (wk's device) */
	int fd;
	pid_t pid;
	struct wobj *next;   /* in the pool */
};
struct ntbx_dev;
struct wobj *sk_wobj_get(struct ntbx_dev *dev);
void sk_wobj_put(struct wobj *o);
struct wobj *sk_thread_wobj(struct ntbx_dev *dev);
/* What a sleeper waits for: ports, doorbell bits and wake keys (bit k:
 * key k; include/ntbx/dev.h).  Start from SK_WANT_NONE. */
struct sk_want {
	uint64_t ports, keys;
	uint32_t bits;
};
#define SK_WANT_NONE ((struct sk_want){ 0, 0, 0 })
void sk_wake_mask(struct sk *s, struct sk_want *w);
int sk_sleep_sliced(struct wobj *o, struct sk *s);
int sk_sleep_prepare(struct wobj *o, const struct sk_want *w, int *cap);
void sk_sleep_mark(struct wobj *o, int ms, int on);
int sk_arm(struct sk *s, int events);
void sk_drain(void);
/* Connector's read waiting for the acceptor's answer: at most @ms. */
void sk_wait_pend(struct sk *s, int fd, int ms);
void sk_wake_atfork(void);

/* epoll.c */
void sk_epoll_forget(int fd);
void sk_epoll_atfork(void);
void sk_epoll_closed(int fd);
void sk_epoll_closed_range(unsigned first, unsigned last);

/* priv.c: say once, on stderr, why this process's connections stay on
 * kernel TCP ("ntbx: connections of PID stay on kernel TCP: ..."). */
void sk_say_tcp(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* signal.c: 1 if a signal handler installed without SA_RESTART may
 * interrupt a blocking call. */
int sk_sig_interrupts(void);

/* xhost.c: the control plane between hosts (a fabric that spans hosts). */
int skx_fabric_spans(void);
void skx_listener_changed(struct ntbx_fabric *f, struct sk_tab *t, int i);
void skx_refresh(struct ntbx_fabric *f, struct sk_tab *t);
void skx_keep_published(struct ntbx_fabric *f, struct sk_tab *t);
int skx_listened(struct ntbx_fabric *f, int node, const struct sk_addr *dst);
int skx_request(struct ntbx_fabric *f, struct sk_tab *t, int i, int node);
void skx_withdraw(struct ntbx_fabric *f, struct sk_conn *c);
void skx_switch(struct ntbx_fabric *f, struct sk_conn *c, uint32_t state);
int skx_find(struct ntbx_fabric *f, const struct sk_addr *p,
             const struct sk_addr *l, int pnode, struct sk_conn *c);
int skx_answer(struct ntbx_fabric *f, struct sk_conn *c, uint32_t state);
void skx_sync(struct sk *s, struct sk_conn *c);
int skx_peer_alive(struct sk *s, struct sk_conn *c);

/* sockopt.c: bring the shadow's TCP_CORK to what the program set, before
 * the shadow's own value can matter (a write to it, fork). */
void sk_cork_flush(struct sk *s, int fd);

/* failover.c: a connection to another host goes on over its shadow. */
void sk_fo_keep(struct sk *s, const void *buf, size_t n, uint64_t end);
int sk_failover(struct sk *s, int fd);
size_t sk_fo_take(struct sk *s, void *buf, size_t len, int peek);
int sk_fo_pending(struct sk *s);

#endif
