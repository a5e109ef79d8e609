/* SPDX-License-Identifier: MIT */
/*
 * Puts and gets by the DMA engine, to PEs of another node on a backend
 * that maps no peer window (ntbx_sh.via_qp: the ofi backend, the shm
 * backend under NTBX_DEV_DMA_ONLY=1), over a port straight to that node.
 *
 * Without this every put and get to such a PE is a request on a queue
 * pair, applied by the target's progress thread (shmem_ring.c): 1 MiB is
 * cut into 32 KiB requests, copied into the queue pair and out again, and
 * a quiet is a SYNC and its reply, a round trip through the target's
 * process.  Across two hosts on tcp;ofi_rxm that ran 1 MiB puts at
 * 0.25x a raw fi_write loop and 8 B put + quiet at ~110 us (design notes).
 * Here, as an NTB driver would:
 *
 *  - a put is copied into this PE's bounce ring (a block of node
 *    memory) and written by DMA straight into the
 *    target's memory: window 0 of a port covers the peer's whole node
 *    memory, and the target's heap and data offsets in it came with its
 *    start-up record.  A KICK request follows on the queue pair; the
 *    target's progress thread wakes the PE's sleepers with it, as it
 *    does after a put it applies itself.  The bounce is there because
 *    the device contract lets the engine read its source until the
 *    operation completes, while a put returns with its source free.
 *  - a get is a DMA read from the target's memory (the target's process
 *    takes no part).
 *  - a quiet waits for the last DMA operation: operations of one handle
 *    complete in submission order, and a write is complete when its
 *    bytes are in the peer's memory (ofi: FI_DELIVERY_COMPLETE).
 *
 * Order.  The device contract makes writes to one port visible in
 * submission order, and a queue pair's messages are such writes, so a
 * request sent after a DMA put (an atomic, the KICK, a SYNC) lands after
 * its bytes: each PE's puts and requests stay in the order they were
 * made, as when puts were requests too, and fence needs nothing more.
 * Every put to such a PE goes this way (also 8 bytes: put + quiet took
 * 70 us as a request and 14 us by DMA in DMA-only mode on one machine,
 * 155 and 85 us across two hosts), so no put request can be applied
 * after a later DMA put.  Reads are not ordered with writes by the
 * contract: a get first waits for the PE's DMA puts.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ntbx/fabric.h"
#include "shmem_int.h"
#include "util/util.h"

#define DOPS 256               /* operations in flight */
#define BOUNCE (8u << 20)      /* bytes of the bounce ring */
#define DCHUNK (256u << 10)    /* a put is cut into operations of this */
#define WAIT_SLICE_MS 1000
#define WAIT_LIMIT_MS 60000    /* a DMA that does not end: the link is gone */

struct dop {
	struct ntbx_dma_op op;
	uint64_t end;              /* the bounce ring's head after it */
	int pe;
};

static struct {
	pthread_mutex_t mu;
	struct ntbx_dev *dev;
	int *port;                 /* per PE: the port to its node, or -1 */
	uint64_t *heap_off, *data_off;   /* per PE: offsets in window 0 */
	uint64_t *last;            /* per PE: 1 + number of its last op */
	char *bounce;              /* node memory (NULL until the first put) */
	int64_t bounce_off;        /* its offset there */
	uint64_t head, tail;       /* bounce bytes taken, freed (monotonic) */
	uint64_t sub, done;        /* operations submitted, reaped */
	struct dop ops[DOPS];
} dm = { .mu = PTHREAD_MUTEX_INITIALIZER };

void ntbx_sh_dma_setup(const struct sh_rec *all)
{
	if (!ntbx_sh.via_qp || ntbx_sh.topo < 0)
		return;
	struct ntbx_dev *dev = ntbx_fabric_dev(ntbx_sh.f);
	int n = ntbx_sh.npes;
	dm.port = malloc((size_t)n * sizeof *dm.port);
	dm.heap_off = calloc((size_t)n, sizeof *dm.heap_off);
	dm.data_off = calloc((size_t)n, sizeof *dm.data_off);
	dm.last = calloc((size_t)n, sizeof *dm.last);
	if (!dm.port || !dm.heap_off || !dm.data_off || !dm.last)
		ntbx_sh_die("out of memory");
	dm.dev = dev;
	for (int j = 0; j < n; j++) {
		dm.port[j] = -1;
		uint64_t sz;
		int port = j == ntbx_sh.me || !sh_other_node(j) ? -1 :
		           ntbx_port_of_node(dev, ntbx_sh.node_of[j]);
		if (port < 0 || ntbx_peer_mw_size(dev, port, 0, &sz) < 0)
			continue;
		if (all[j].heap_off + all[j].heap_size > sz ||
		    all[j].data_off + all[j].data_size > sz)
			ntbx_sh_die("PE %d's memory is outside its node's window "
			            "(%llu bytes)", j, (unsigned long long)sz);
		dm.port[j] = port;
		dm.heap_off[j] = all[j].heap_off;
		dm.data_off[j] = all[j].data_off;
	}
}

int ntbx_sh_dma_ok(int pe)
{
	return dm.port && dm.port[pe] >= 0;
}

int ntbx_sh_dma_pes(void)
{
	int k = 0;
	for (int j = 0; dm.port && j < ntbx_sh.npes; j++)
		k += dm.port[j] >= 0;
	return k;
}

static uint64_t woff(int pe, const struct sh_loc *l)
{
	return (l->kind ? dm.data_off[pe] : dm.heap_off[pe]) + l->off;
}

/* Wait for operation @k (under dm.mu); dies if it failed. */
static void wait_op(uint64_t k)
{
	struct dop *d = &dm.ops[k % DOPS];
	int r;
	for (int ms = 0;; ms += WAIT_SLICE_MS) {
		r = ntbx_dma_wait(dm.dev, &d->op, WAIT_SLICE_MS);
		if (r != -ETIMEDOUT || ms >= WAIT_LIMIT_MS)
			break;
	}
	if (r < 0)
		ntbx_sh_die("a DMA transfer to PE %d failed: %s", d->pe,
		            strerror(-r));
}

/* Reap operations in order up to (not including) @k, or only the ones
 * already complete if @k is 0; frees their bounce bytes. */
static void reap(uint64_t k)
{
	while (dm.done < dm.sub) {
		struct dop *d = &dm.ops[dm.done % DOPS];
		if (dm.done < k)
			wait_op(dm.done);
		else if (!ntbx_dma_done(&d->op))
			break;
		else if (d->op.result < 0)
			wait_op(dm.done);   /* says why and dies */
		dm.tail = d->end;
		dm.done++;
	}
}

/* @n contiguous bytes of the bounce ring (under dm.mu). */
static char *bounce_take(size_t n)
{
	if (!dm.bounce) {
		int64_t off = ntbx_mem_alloc(dm.dev, BOUNCE, 4096,
		                             "shmem-bounce", 1);
		if (off < 0)
			ntbx_sh_die("no room in node memory for the %u MiB a PE "
			            "puts from: %s", BOUNCE >> 20,
			            strerror((int)-off));
		dm.bounce = (char *)ntbx_mem_base(dm.dev) + off;
		dm.bounce_off = off;
	}
	uint64_t at = dm.head % BOUNCE;
	if (at + n > BOUNCE)   /* not across the end: skip to the start */
		dm.head += BOUNCE - at;
	while (dm.head + n - dm.tail > BOUNCE)
		reap(dm.done + 1);
	char *p = dm.bounce + dm.head % BOUNCE;
	dm.head += n;
	return p;
}

static struct dop *op_take(int pe)
{
	if (dm.sub - dm.done == DOPS)
		reap(dm.done + 1);
	struct dop *d = &dm.ops[dm.sub % DOPS];
	d->pe = pe;
	d->end = dm.head;
	return d;
}

void ntbx_sh_dma_put(int pe, const struct sh_loc *l, const void *src,
                     size_t n)
{
	pthread_mutex_lock(&dm.mu);
	reap(0);
	for (size_t done = 0; done < n;) {
		size_t m = n - done < DCHUNK ? n - done : DCHUNK;
		char *b = bounce_take(m);
		ntbx_copy(b, (const char *)src + done, m);
		struct dop *d = op_take(pe);
		int r = ntbx_dma_write(dm.dev, dm.port[pe], 0, woff(pe, l) + done,
		                       b, m, &d->op);
		if (r < 0)
			ntbx_sh_die("cannot write to PE %d by DMA: %s", pe,
			            strerror(-r));
		dm.last[pe] = ++dm.sub;
		done += m;
	}
	pthread_mutex_unlock(&dm.mu);
}

void ntbx_sh_dma_wait_pe(int pe)
{
	if (!dm.port)
		return;
	pthread_mutex_lock(&dm.mu);
	if (dm.last[pe])
		reap(dm.last[pe]);
	dm.last[pe] = 0;
	pthread_mutex_unlock(&dm.mu);
}

void ntbx_sh_dma_get(int pe, const struct sh_loc *l, void *dst, size_t n)
{
	ntbx_sh_dma_wait_pe(pe);
	pthread_mutex_lock(&dm.mu);
	struct dop *d = op_take(pe);
	int r = ntbx_dma_read(dm.dev, dm.port[pe], 0, woff(pe, l), dst, n,
	                      &d->op);
	if (r < 0)
		ntbx_sh_die("cannot read from PE %d by DMA: %s", pe,
		            strerror(-r));
	uint64_t k = ++dm.sub;
	reap(k);
	pthread_mutex_unlock(&dm.mu);
}

void ntbx_sh_dma_quiet(void)
{
	if (!dm.port)
		return;
	pthread_mutex_lock(&dm.mu);
	reap(dm.sub);
	for (int j = 0; j < ntbx_sh.npes; j++)
		dm.last[j] = 0;
	pthread_mutex_unlock(&dm.mu);
}

void ntbx_sh_dma_stop(void)
{
	if (!dm.port)
		return;
	ntbx_sh_dma_quiet();
	pthread_mutex_lock(&dm.mu);
	if (dm.bounce)
		ntbx_mem_free(dm.dev, dm.bounce_off);
	dm.bounce = NULL;
	dm.head = dm.tail = 0;
	pthread_mutex_unlock(&dm.mu);
}
