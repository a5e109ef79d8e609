/* SPDX-License-Identifier: MIT */
/*
 * sock_int.h — libntbx-preload.so internals shared by its files.
 *
 * src/sock/ owns the transparent sockets: libntbx-preload.so, which moves
 * unmodified TCP programs' connections onto queue pairs, and the reader
 * of its live-connection table that `ntbx stat` uses.  A file per concern:
 *   entry.c      the constructor, the real libc functions, the calls that
 *                make and change descriptors (socket ... ioctl, syscall)
 *   conf.c       the configuration, read once from the environment
 *   self.c       this process on the fabric: handle, identity, namespace
 *   fds.c        the descriptor table (struct sk entries)
 *   table.c      the control table: slots, who holds their sides, reaping
 *   listen.c     listeners, and the addresses they match
 *   proto.c      the connection protocol: request, answer, switch
 *   inherit.c    fork, exec and descriptor passing
 *   close.c      close and close_range, SO_LINGER, a connection's release
 *   flags.c      O_NONBLOCK and confinement, shared by every holder
 *   stream.c     the data path: reads, writes, the shadow's answers
 *   sendrecv.c   the data path's entry points (read ... splice, sendfile)
 *   ready.c      readiness; poll and select
 *   wake.c       wake objects and arming: no wake-up lost
 *   epoll.c      epoll sets
 *   xhost.c, failover.c      across hosts: control plane, fail-over to TCP
 *   priv.c, signal.c         privilege drops and fork; SA_RESTART
 *   interposed.def/.h        the interposed libc functions, listed once
 *   sock_tab.h, sock_view.*  the table's layout; its reader (`ntbx stat`)
 * sock.h declares what the files share, each once, by file.
 *
 * Every accelerated descriptor points at one struct sk (dup'ed descriptors
 * share it).  Roles: the connector (C) and the acceptor (A).  Modes:
 *   M_PEND  connector whose acceptor has not answered yet: data goes by
 *           TCP, counted in the slot (tcp_sent);
 *   M_FAB   data on the queue pair (the acceptor is M_FAB from accept on,
 *           but first reads the connector's TCP prefix);
 *   M_TCP   fell back: everything goes to libc.
 */
#ifndef NTBX_SOCK_INT_H
#define NTBX_SOCK_INT_H

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "ntbx/qp.h"
#include "sock/interposed.h"
#include "sock/sock_tab.h"

enum { M_PEND = 1, M_FAB = 2, M_TCP = 3 };

struct sk {
	int refs;               /* local descriptors pointing here */
	char role;              /* 'C' or 'A' */
	int mode;
	int slot;
	uint32_t gen;           /* the slot's generation when we took it */
	int side_held;          /* counted in this process's hold of its
	                         * side (table.c, side locks; under g_lk) */
	int fd0;                /* a descriptor of it (for the shadow) */
	pid_t pid;              /* process whose handle qp is */
	uint64_t dev, ino;      /* the shadow's identity (fstat): an entry
	                         * whose descriptor was closed behind our
	                         * back is told from a new one (sk_get_checked) */
	struct ntbx_qp *qp;
	struct ntbx_qp_addr me;
	int shut_wr;
	int qp_conn;            /* connector: its endpoint is connected */
	int rd_fab;             /* connector: reads on the fabric already */
	int sh_fin;             /* the shadow reported FIN/RST (sticky) */
	int prefix_done;        /* acceptor: the TCP prefix is read */
	int answer_due;         /* acceptor: the connector is not rung for
	                         * the answer yet (proto.c, at its first
	                         * write: stream.c, q_write) */
	unsigned fork_mark;     /* atfork: counted once */
	int rst_seen;           /* the peer's abortive close was reported */
	int wr_shadow;          /* the peer closed its fabric end: writes go
	                         * to the shadow, which answers as kernel
	                         * TCP does (stream.c, shadow_send) */
	int cork, kcork;        /* TCP_CORK as the program last set it, and
	                         * as the shadow has it (-1: not known yet);
	                         * they differ only while the data goes on
	                         * the fabric (sockopt.c) */
	uint64_t live_ns;       /* last look at the peer's liveness (stream.c) */
	uint64_t sh_look_ns;    /* a non-blocking read's last look at the
	                         * shadow (stream.c, shadow_look_due) */
	unsigned again;         /* bumped at each EAGAIN: a new edge for
	                         * edge-triggered epoll */
	pthread_mutex_t rlock, wlock;
	pthread_mutex_t qlock;  /* around every queue-pair call that changes
	                         * state: reads, writes, arms (an arm returns
	                         * the reader's credits, so never beside a
	                         * read); polls take none (q_poll_for) */
	char *pk;               /* bytes read ahead (MSG_PEEK, FIONREAD) */
	size_t pklen, pkoff;
	/* Fail-over to the shadow (a connection to another host whose
	 * fabric link fails, failover.c): the last bytes written on the
	 * fabric (rt, a ring of rtsize by stream position), what was left
	 * in our ring and on the shadow before the peer's resent bytes
	 * (fob), and the outcome (fo: 0 not yet, 1 carried on by TCP, -1
	 * could not). */
	pthread_mutex_t folock;
	int fo;
	char *rt;
	size_t rtsize;
	char *fob;
	size_t folen, fooff;
};

/* The real libc functions (interposed.def), filled by sk_resolve. */
struct sk_real {
#define SK_CALL(ret, name, params) ret (*name) params;
#define SK_REAL SK_CALL
#include "sock/interposed.def"
#undef SK_CALL
#undef SK_REAL
};
extern struct sk_real sk_real;

#endif
