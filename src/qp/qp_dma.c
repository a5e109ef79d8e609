/* SPDX-License-Identifier: MIT */
/*
 * Writing into a peer's half by DMA, for backends that do not map peer
 * windows (ntbx_dev_maps_peer_windows() == 0: the ofi backend, the shm
 * backend under NTBX_DEV_DMA_ONLY=1).  Write remote, read local still
 * holds: only the writer's stores change, from CPU stores through a
 * window into DMA writes from local memory.
 *
 * Records are built in a private mirror of the peer's ring, at the
 * positions they take there, and each goes out as two writes: the header
 * after its sequence word and the payload, then the sequence word.  The
 * device contract (ops.h, dma_submit) makes writes to one port visible in
 * submission order and before any later doorbell on that port, so the
 * reader never sees a sequence word before the record it closes, and a
 * doorbell rung after a record finds it in place.  The mirror's bytes of a
 * record are rewritten only one lap later, after the reader gave credits
 * for them, which it can only do after their sequence word (the last
 * write) landed: the DMA engine has read them by then.
 *
 * Small control words (credits, sleep flags, adverts, close) go from a
 * per-operation buffer, never from the mirror or the caller's variables:
 * one field written twice in a row (an advert's seqlock word: 0, then the
 * new seq) must land as two values in that order, whatever the engine's
 * pace.
 *
 * The ring forwarder (fwd.c) writes its neighbours' bypass rings and
 * control blocks with the same object: a block at some window offset,
 * with a ring at some offset inside it.
 *
 * After fork() the child's copies of the operations in flight never
 * complete (the parent's engine runs them), so a child forgets them and,
 * not knowing when they land, says it is never idle: its writers then
 * always ring, which is slower but never loses a wake-up.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ntbx/dev.h"
#include "qp/qp_int.h"
#include "util/util.h"

#define DOUT_OPS 64u   /* operations in flight per queue pair */

struct dout_op {
	struct ntbx_dma_op op;
	uint8_t buf[QP_LINE];
};

struct qp_dout {
	struct qp_dout *next, *prev;   /* all of the process's (fork) */
	struct ntbx_dev *dev;
	int port;
	uint64_t base;         /* window 0 offset of the block (a half) */
	uint64_t ring_off;     /* the ring's offset in the block */
	uint32_t size;         /* ring size */
	int unsure;            /* a forked child: what the parent submitted
	                        * may still be in flight */
	pthread_mutex_t mu;    /* reader and writer threads both write */
	unsigned head, tail;   /* ops [head, tail) submitted, maybe in flight */
	int err;               /* first failure: every later call fails */
	struct dout_op ops[DOUT_OPS];
	uint8_t *mirror;       /* the peer's ring as we wrote it */
};

static struct qp_dout all = { .next = &all, .prev = &all };
static pthread_mutex_t all_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void fork_prepare(void)
{
	pthread_mutex_lock(&all_mu);
}

static void fork_parent(void)
{
	pthread_mutex_unlock(&all_mu);
}

static void fork_child(void)
{
	pthread_mutex_init(&all_mu, NULL);
	for (struct qp_dout *d = all.next; d != &all; d = d->next) {
		pthread_mutex_init(&d->mu, NULL);
		d->head = d->tail;
		d->unsure = 1;
	}
}

static void fork_init(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

int qp_dout_open(struct qp_dout **out, struct ntbx_dev *dev, int port,
                 uint64_t base, uint64_t ring_off, uint32_t size)
{
	pthread_once(&fork_once, fork_init);
	struct qp_dout *d = calloc(1, sizeof *d);
	if (!d)
		return -ENOMEM;
	d->mirror = calloc(1, size);
	if (!d->mirror) {
		free(d);
		return -ENOMEM;
	}
	d->dev = dev;
	d->port = port;
	d->base = base;
	d->ring_off = ring_off;
	d->size = size;
	pthread_mutex_init(&d->mu, NULL);
	pthread_mutex_lock(&all_mu);
	d->next = all.next;
	d->prev = &all;
	all.next->prev = d;
	all.next = d;
	pthread_mutex_unlock(&all_mu);
	*out = d;
	return 0;
}

/* Retire completed operations from the head.  Lock held. */
static void retire(struct qp_dout *d)
{
	while (d->head != d->tail &&
	       ntbx_dma_done(&d->ops[d->head % DOUT_OPS].op)) {
		int r = d->ops[d->head % DOUT_OPS].op.result;
		if (r < 0 && !d->err)
			d->err = r;
		d->head++;
	}
}

/* Wait for the oldest operation; bounded, the engine is local.  A
 * network backend's operation to a link that failed may stay in flight
 * until the link comes back (libfabric retries under it): the link's
 * failure, looked at every 100 ms, ends the wait at once, so the caller
 * learns it as a waiting reader does (sockets across hosts fail over on
 * it: a writer held here for the whole outage answered its peer's
 * fail-over too late).  Lock held. */
static int wait_head(struct qp_dout *d)
{
	struct ntbx_dma_op *op = &d->ops[d->head % DOUT_OPS].op;
	int peer = ntbx_port_peer_node(d->dev, d->port);
	int r;
	for (int ms = 0; (r = ntbx_dma_wait(d->dev, op, 100)) == -ETIMEDOUT;) {
		ms += 100;
		if (ms >= 10000 || (peer >= 0 && ntbx_node_alive(d->dev, peer) <= 0))
			return -ECONNRESET;
	}
	if (r < 0 && !d->err)
		d->err = r;
	d->head++;
	return 0;
}

/* Submit a write of @len bytes from @src to offset @woff of window 0;
 * @src NULL: from the op's own buffer, filled from @copy.  Lock held. */
static int submit(struct qp_dout *d, uint64_t woff, const void *src,
                  const void *copy, size_t len)
{
	if (d->err)
		return d->err;
	retire(d);
	if (d->tail - d->head == DOUT_OPS) {
		int r = wait_head(d);
		if (r < 0)
			return r;
	}
	struct dout_op *o = &d->ops[d->tail % DOUT_OPS];
	if (!src) {
		memcpy(o->buf, copy, len);
		src = o->buf;
	}
	int r = ntbx_dma_write(d->dev, d->port, 0, woff, src, len,
	                       &o->op);
	if (r < 0) {
		d->err = r;
		return r;
	}
	d->tail++;
	return 0;
}

uint8_t *qp_dout_ring(struct qp_dout *d)
{
	return d->mirror;
}

int qp_dout_field(struct qp_dout *d, uint64_t off, const void *p, size_t len)
{
	if (len > QP_LINE)
		return -EINVAL;
	pthread_mutex_lock(&d->mu);
	int r = submit(d, d->base + off, NULL, p, len);
	pthread_mutex_unlock(&d->mu);
	return r;
}

int qp_dout_rec(struct qp_dout *d, uint64_t pos, uint64_t bytes,
                int64_t znext)
{
	if (pos + bytes > d->size || bytes < QP_REC_HDR ||
	    (znext >= 0 && (znext >= (int64_t)d->size ||
	                    (znext & (QP_LINE - 1)))))
		return -EINVAL;
	uint64_t off = d->base + d->ring_off + pos;
	static const uint32_t zero;
	pthread_mutex_lock(&d->mu);
	int r = submit(d, off + 4, d->mirror + pos + 4, NULL, bytes - 4);
	if (r == 0 && znext >= 0)
		r = submit(d, d->base + d->ring_off + (uint64_t)znext, NULL,
		           &zero, sizeof zero);
	if (r == 0)   /* the sequence word last: it makes the record valid */
		r = submit(d, off, d->mirror + pos, NULL, 4);
	pthread_mutex_unlock(&d->mu);
	return r;
}

int qp_dout_bulk(struct qp_dout *d, uint64_t win_off, const void *p,
                 size_t len)
{
	pthread_mutex_lock(&d->mu);
	int r = submit(d, win_off, p, NULL, len);
	pthread_mutex_unlock(&d->mu);
	return r;
}

int qp_dout_idle(struct qp_dout *d)
{
	pthread_mutex_lock(&d->mu);
	retire(d);
	int idle = d->head == d->tail && !d->unsure;
	pthread_mutex_unlock(&d->mu);
	return idle;
}

int qp_dout_flush(struct qp_dout *d)
{
	pthread_mutex_lock(&d->mu);
	int r = 0;
	while (d->head != d->tail && r == 0)
		r = wait_head(d);
	if (r == 0)
		r = d->err;
	pthread_mutex_unlock(&d->mu);
	return r;
}

void qp_dout_close(struct qp_dout *d)
{
	if (!d)
		return;
	/* the engine may still read our buffers: wait (bounded); if it
	 * does not finish, leak them rather than free them under it */
	pthread_mutex_lock(&d->mu);
	while (d->head != d->tail)
		if (wait_head(d) < 0) {
			pthread_mutex_unlock(&d->mu);
			return;
		}
	pthread_mutex_unlock(&d->mu);
	pthread_mutex_lock(&all_mu);
	d->prev->next = d->next;
	d->next->prev = d->prev;
	pthread_mutex_unlock(&all_mu);
	pthread_mutex_destroy(&d->mu);
	free(d->mirror);
	free(d);
}
