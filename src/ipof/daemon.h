/* SPDX-License-Identifier: MIT */
/*
 * IP over the fabric, private to the daemon's files: its state (struct
 * ipof, one struct peer per peer node, the route cache) and what the files
 * share.  ipof.c owns the daemon's start, stop and status; peer.c the
 * published entries and the peer threads (a pair's set-up, checks and
 * tear-down); data.c routing and the data thread (both directions).
 */
#ifndef NTBX_IPOF_DAEMON_H
#define NTBX_IPOF_DAEMON_H

#include <limits.h>
#include <net/if.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>

#include "ipof/ipof_int.h"
#include "ntbx/fabric.h"

struct peer {
	struct ipof *d;
	int node;
	pthread_t th;
	int started;
	pthread_rwlock_t lk;       /* data thread: read; peer thread: write
	                            * to swap txq/rxq */
	/* Two queue pairs per peer, one per direction, so each handle has
	 * exactly one user thread (qp.h allows a reader and a writer per
	 * handle, but ntbx_qp_wait's readiness check touches both sides'
	 * state): txq is used by the transmit thread only (its receive side
	 * stays empty), rxq by this peer's thread only. */
	struct ntbx_qp *txq;       /* connected, or NULL (under lk) */
	struct ntbx_qp *rxq;       /* connected, or NULL (under lk) */
	struct ntbx_qp *ptx, *prx; /* made, published, not yet connected */
	uint32_t pend_epoch;       /* peer epoch they were made for */
	uint64_t my_cookie;        /* our rx endpoint's cookie: the pair's name */
	uint64_t remote_cookie;    /* the peer rx endpoint we send to */
	int64_t bufs;              /* IPOF_NPOST * IPOF_BUF of node memory */
	struct ntbx_dev *obs;      /* observer of the peer's node */
	/* ofi fabric: the peer's interface address (key as route() makes
	 * it: 4 or 6, then the address), set before the pair is up */
	uint8_t addr_key[17];
	int was_up;                /* for one log line per transition */
	int create_err;            /* last create error logged */
	uint64_t pushed_base;      /* pushed bytes of earlier queue pairs */
	/* The data thread reports a failed queue pair here (under mu) and
	 * stops using it; the peer thread tears the pair down and clears it. */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	const char *why;
};

#define RC_SIZE 256
struct rcache {
	uint8_t key[17];
	int node;
	uint64_t until;
};

struct ipof {
	struct ntbx_fabric *f;
	struct ntbx_dev *dev;
	int node, nodes;
	uint32_t epoch;
	int tun;
	char ifname[IFNAMSIZ];
	char dir[PATH_MAX];
	int kick;                  /* eventfd: a peer came up (data thread) */
	struct ipof_block *blk;
	int64_t blk_off;
	uint8_t *mem;
	uint64_t mem_size;
	uint32_t bcast4;
	volatile int stop_threads;
	FILE *log;
	pthread_mutex_t logmu;
	struct rcache rc[RC_SIZE];
	struct ipof_net *net;      /* ofi fabric: entries over TCP */
	struct peer peer[NTBX_MAX_NODES];
};

/* ipof.c: one line of the daemon's log (--log), with the time. */
__attribute__((format(printf, 2, 3)))
void ipof_logf(struct ipof *d, const char *fmt, ...);

static inline void ctr_add(uint64_t *c, uint64_t v)
{
	__atomic_fetch_add(c, v, __ATOMIC_RELAXED);
}

static inline void drop(struct ipof *d, int reason)
{
	ctr_add(&d->blk->drops[reason], 1);
}

/* peer.c: the block the daemon of @node published, through observer
 * @obs, or NULL. */
struct ipof_block *ipof_find_block(struct ntbx_dev *obs, int node);
/* peer.c: a peer thread. */
void *ipof_peer_main(void *arg);
/* data.c: the data thread's loop, until *@stop. */
int ipof_data_loop(struct ipof *d, volatile sig_atomic_t *stop);

#endif
