/* SPDX-License-Identifier: MIT */
/*
 * sock_view.h — the live-connection table (sock_tab.h) as an observer sees
 * it: what `ntbx stat` reads, owned by the sockets layer that writes it, so
 * the tool neither maps the file nor walks its rows by hand.
 *
 * The table is shared memory written by other processes: each row is
 * copied once into private memory, and only the copy is checked and used
 * (states and addresses as found, the reason made printable).  Opening
 * changes nothing: the file is mapped read-only and liveness is asked
 * with F_OFD_GETLK (connection sides) and through a device observer
 * (listeners' processes).
 */
#ifndef NTBX_SOCK_VIEW_H
#define NTBX_SOCK_VIEW_H

#include <stddef.h>
#include <stdint.h>

#include "sock/sock_tab.h"

struct sk_view;

/* A listener whose process is alive. */
struct sk_view_listener {
	struct sk_addr a;
	uint32_t node;
	int32_t pid;
};

/* A connection with at least one side held by a live process. */
struct sk_view_conn {
	int slot;
	uint32_t gen;                 /* with slot: the connection's identity */
	uint32_t state;               /* SK_FAB, SK_TCP, or negotiating */
	const char *path;             /* "fabric", "tcp" or "pending" */
	uint32_t node_c, node_a;
	int32_t pid_c, pid_a;
	struct sk_addr cl, dst;       /* connector's address, listener's */
	uint64_t bytes_cl;            /* connector to listener, TCP prefix
	                               * included */
	uint64_t bytes_lc;            /* listener to connector */
	uint64_t fabric_bytes_cl;     /* of bytes_cl, over the fabric */
	uint32_t confined_slices;     /* sleeps in 1 ms slices: the other
	                               * side confined, its rings unable to
	                               * reach the sleeper (sk_sleep_sliced) */
	char reason[65];              /* SK_TCP: why (printable ASCII) */
};

/*
 * Open fabric @fabric's table for reading.  0 and *out; -ENOENT when no
 * program has listened under `ntbx run` there yet (no table); another
 * -errno with a message in @err (naming the fabric or the file).
 */
int sk_view_open(const char *fabric, struct sk_view **out, char *err,
                 size_t errlen);
void sk_view_close(struct sk_view *v);

/* The live listeners, resp. connections (@all: negotiating ones too), at
 * most @max; returns how many were written. */
int sk_view_listeners(struct sk_view *v, struct sk_view_listener *out,
                      int max);
int sk_view_conns(struct sk_view *v, int all, struct sk_view_conn *out,
                  int max);

/* "1.2.3.4:80" or "[fe80:0:...:1]:80" (the preload's log lines too). */
void sk_addr_str(const struct sk_addr *a, char *buf, size_t len);

#endif
