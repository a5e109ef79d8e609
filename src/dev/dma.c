/* SPDX-License-Identifier: MIT */
/*
 * The DMA engine: one thread per device handle that copies into (or out
 * of) outbound windows while the caller goes on, as a PLX DMA channel
 * does.  Each operation's status word has an IN_PROGRESS bit that the
 * engine clears, with release ordering, once the bytes are in place;
 * waiters sleep on that word as a futex.  Operations complete in order.
 * Backend-independent: it needs only ntbx_peer_mw_get_addr.  A backend
 * whose peer windows the layers above may not see (the shm backend in
 * DMA-only mode) queues its copies here too (ntbx_dma_engine_copy), and
 * its doorbells behind them (ntbx_dma_engine_call): one thread executing
 * one queue is what makes writes land in submission order and before the
 * doorbell that announces them.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dev/ops.h"
#include "util/util.h"

#define DMA_QUEUE 256   /* descriptors in flight per handle */

struct dma_desc {
	char *dst;
	const char *src;
	size_t len;
	struct ntbx_dma_op *op;   /* NULL: a call, not a copy */
	void (*fn)(struct ntbx_dev *, int, uint32_t);
	int port;
	uint32_t bits;
};

struct ntbx_dma_engine {
	struct ntbx_dma_engine *next;   /* the process's engines (exit) */
	pid_t pid;                      /* the process whose thread runs it */
	struct ntbx_dev *dev;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;      /* work queued, or room freed, or stop */
	struct dma_desc q[DMA_QUEUE];
	unsigned head, tail;      /* tail - head = queued */
	int stop;
};

static void *dma_main(void *arg)
{
	struct ntbx_dma_engine *e = arg;
	pthread_mutex_lock(&e->lock);
	for (;;) {
		while (e->head == e->tail && !e->stop)
			pthread_cond_wait(&e->cond, &e->lock);
		if (e->head == e->tail)
			break;
		struct dma_desc d = e->q[e->head % DMA_QUEUE];
		pthread_mutex_unlock(&e->lock);
		if (d.op) {
			ntbx_copy(d.dst, d.src, d.len);
			d.op->result = 0;
			__atomic_store_n(&d.op->status, 0, __ATOMIC_RELEASE);
			ntbx_futex_wake(&d.op->status, 0);
		} else {
			/* every copy queued before it is in place */
			__atomic_thread_fence(__ATOMIC_SEQ_CST);
			d.fn(e->dev, d.port, d.bits);
		}
		pthread_mutex_lock(&e->lock);
		e->head++;
		pthread_cond_broadcast(&e->cond);
	}
	pthread_mutex_unlock(&e->lock);
	return NULL;
}

/*
 * Every engine of the process, so that exit() lets queued writes land: the
 * thread dies with the process, and a program that writes and exits
 * without closing (the sockets preload never closes its fabric) would
 * lose what it queued last.  A forked child's list holds its parent's
 * engines, whose threads are not its own: only the pid's are drained.
 */
static struct ntbx_dma_engine *engines;
static pthread_mutex_t engines_mu = PTHREAD_MUTEX_INITIALIZER;

static void engines_add(struct ntbx_dma_engine *e)
{
	pthread_mutex_lock(&engines_mu);
	e->next = engines;
	engines = e;
	pthread_mutex_unlock(&engines_mu);
}

static void engines_remove(struct ntbx_dma_engine *e)
{
	pthread_mutex_lock(&engines_mu);
	for (struct ntbx_dma_engine **p = &engines; *p; p = &(*p)->next)
		if (*p == e) {
			*p = e->next;
			break;
		}
	pthread_mutex_unlock(&engines_mu);
}

__attribute__((destructor)) static void engines_drain(void)
{
	pid_t me = getpid();
	if (pthread_mutex_trylock(&engines_mu))
		return;   /* exit from inside an engine call: do not wait */
	for (struct ntbx_dma_engine *e = engines; e; e = e->next) {
		if (e->pid != me)
			continue;
		struct timespec dl;
		clock_gettime(CLOCK_REALTIME, &dl);
		dl.tv_sec += 2;   /* bounded, as every wait */
		pthread_mutex_lock(&e->lock);
		while (e->head != e->tail && !e->stop &&
		       pthread_cond_timedwait(&e->cond, &e->lock, &dl) == 0)
			;
		pthread_mutex_unlock(&e->lock);
	}
	pthread_mutex_unlock(&engines_mu);
}

static struct ntbx_dma_engine *engine(struct ntbx_dev *dev)
{
	struct ntbx_dma_engine *e = __atomic_load_n(&dev->dma, __ATOMIC_ACQUIRE);
	if (e)
		return e;
	pthread_mutex_lock(&dev->dma_lock);
	e = dev->dma;
	if (!e && (e = calloc(1, sizeof *e))) {
		e->dev = dev;
		e->pid = getpid();
		pthread_mutex_init(&e->lock, NULL);
		pthread_cond_init(&e->cond, NULL);
		if (pthread_create(&e->thread, NULL, dma_main, e)) {
			free(e);
			e = NULL;
		} else {
			engines_add(e);
			__atomic_store_n(&dev->dma, e, __ATOMIC_RELEASE);
		}
	}
	pthread_mutex_unlock(&dev->dma_lock);
	return e;
}

void ntbx_dma_engine_stop(struct ntbx_dev *dev)
{
	struct ntbx_dma_engine *e = dev->dma;
	if (!e)
		return;
	engines_remove(e);
	pthread_mutex_lock(&e->lock);
	e->stop = 1;
	pthread_cond_broadcast(&e->cond);
	pthread_mutex_unlock(&e->lock);
	pthread_join(e->thread, NULL);
	pthread_cond_destroy(&e->cond);
	pthread_mutex_destroy(&e->lock);
	free(e);
	dev->dma = NULL;
}

static int submit(struct ntbx_dev *dev, int port, int widx, uint64_t off,
                  char *local, size_t len, int write, struct ntbx_dma_op *op)
{
	if (!op || (!local && len))
		return -EINVAL;
	if (dev->ops->dma_submit) {
		uint64_t size;
		int r = ntbx_peer_mw_size(dev, port, widx, &size);
		if (r < 0)
			return r;
		if (off > size || len > size - off)
			return -ERANGE;
		__atomic_store_n(&op->status, NTBX_DMA_IN_PROGRESS,
		                 __ATOMIC_RELAXED);
		return dev->ops->dma_submit(dev, port, widx, off, local, len,
		                            write, op);
	}
	char *win;
	int r = ntbx_window_span(dev, port, widx, off, len, &win);
	if (r < 0)
		return r;
	return ntbx_dma_engine_copy(dev, write ? win : local,
	                            write ? local : win, len, op);
}

static int enqueue(struct ntbx_dev *dev, const struct dma_desc *d)
{
	struct ntbx_dma_engine *e = engine(dev);
	if (!e)
		return -ENOMEM;
	if (d->op)
		__atomic_store_n(&d->op->status, NTBX_DMA_IN_PROGRESS,
		                 __ATOMIC_RELAXED);
	pthread_mutex_lock(&e->lock);
	while (e->tail - e->head >= DMA_QUEUE)
		pthread_cond_wait(&e->cond, &e->lock);
	e->q[e->tail++ % DMA_QUEUE] = *d;
	pthread_cond_broadcast(&e->cond);
	pthread_mutex_unlock(&e->lock);
	return 0;
}

int ntbx_dma_engine_copy(struct ntbx_dev *dev, char *dst, const char *src,
                         size_t len, struct ntbx_dma_op *op)
{
	struct dma_desc d = { .dst = dst, .src = src, .len = len, .op = op };
	return enqueue(dev, &d);
}

int ntbx_dma_engine_call(struct ntbx_dev *dev,
                         void (*fn)(struct ntbx_dev *, int, uint32_t),
                         int port, uint32_t bits)
{
	struct dma_desc d = { .fn = fn, .port = port, .bits = bits };
	return enqueue(dev, &d);
}

int ntbx_dma_write(struct ntbx_dev *dev, int port, int widx, uint64_t off,
                   const void *src, size_t len, struct ntbx_dma_op *op)
{
	return submit(dev, port, widx, off, (char *)(uintptr_t)src, len, 1, op);
}

int ntbx_dma_read(struct ntbx_dev *dev, int port, int widx, uint64_t off,
                  void *dst, size_t len, struct ntbx_dma_op *op)
{
	return submit(dev, port, widx, off, dst, len, 0, op);
}

int ntbx_dma_wait(struct ntbx_dev *dev, struct ntbx_dma_op *op,
                  int timeout_ms)
{
	static struct ntbx_spin dma_spin;   /* wait policy (util.h) */
	if (ntbx_dma_done(op))
		return 0;
	uint64_t start = ntbx_now_ns();
	uint64_t spin = ntbx_spin_begin(&dma_spin);
	int slept = 0;
	while (!ntbx_dma_done(op)) {
		uint64_t el = ntbx_now_ns() - start;
		if (timeout_ms >= 0 && el >= (uint64_t)timeout_ms * 1000000ull) {
			ntbx_spin_end(&dma_spin, el, 1);
			return -ETIMEDOUT;
		}
		if (el < spin) {
			ntbx_cpu_relax();
			continue;
		}
		slept = 1;
		if (dev && dev->ops->dma_sleep)
			dev->ops->dma_sleep(dev, op, 10);
		else
			ntbx_futex_wait(&op->status, NTBX_DMA_IN_PROGRESS, 10);
	}
	ntbx_spin_end(&dma_spin, ntbx_now_ns() - start, slept);
	return op->result;
}
