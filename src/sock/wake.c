/* SPDX-License-Identifier: MIT */
/*
 * wake.c — waking a sleeper: the wake objects of poll, select and epoll
 * sleepers (a waiter slot of the node each, with its FIFO), the doorbell
 * bits a sleeper registers and the arming of its queue pairs before it
 * sleeps, and the wait for the other side's step of the hand-over.
 * Separate because its order of steps is what makes a lost wake-up
 * impossible (below), and every sleeper (ready.c, epoll.c, and stream.c's
 * reads waiting for the hand-over) keeps that order through these calls.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ntbx/fabric.h"
#include "sock/sock.h"
#include "util/util.h"

/*
 * Wake objects.  A process may run many event loops at once (a thread
 * each, as memcached -t 4 does).  Each sleeper that sleeps in the kernel
 * (a thread in poll or select, an epoll set) has a wake object of its own
 * (ntbx_db_wake_open: a waiter slot of the node, with its own FIFO and
 * pending flag), registered with exactly the ports and doorbell bits of
 * the queue pairs it waits on.  A ringer, from any thread or process of
 * any node, makes readable the FIFO of every registered object whose mask
 * matches.  Why no wake-up is lost, however many sleepers wait on a node:
 *
 *  1. A sleeper prepares its object (drains it, registers its mask), then
 *     arms each queue pair, then checks each, then sleeps on the FIFO.
 *  2. The peer rings only after it sees an arm (and after making its data
 *     or room visible), so a ring that matters comes after step 1's
 *     registration; it finds the mask, and the object's flag clear or set
 *     by a ringer that is writing a byte after our drain.  Either way the
 *     FIFO is readable when the sleeper looks, until its own next prepare.
 *     If instead the peer acted before seeing the arm, step 1's check sees
 *     the data or room (the qp layer's Dekker pair).
 *  3. Only the object's own sleepers drain it: a thread's object is that
 *     thread's; an epoll set's object is drained only by threads waiting
 *     on that set, which check the whole set after draining.  So a drain
 *     never consumes a wake-up meant for a condition the drainer does not
 *     check.  (With one FIFO per process, a thread's drain ate another
 *     thread's wake-up, which then slept to the 1 s cap.)
 *
 * A thread's object goes back to a per-process pool when the thread
 * exits; an epoll set's when the set is closed.  If the node has no free
 * waiter slot, sleepers share the handle's FIFO as before and sleep at
 * most FALLBACK_MS at a time, so a lost wake-up costs that, not 1 s.
 */
#define FALLBACK_MS 10

static pthread_mutex_t wpool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct wobj *wpool;
static pid_t wpool_pid;
static pthread_key_t wkey;
static pthread_once_t wkey_once = PTHREAD_ONCE_INIT;
static __thread struct wobj *t_wobj;
static int wobj_warned;

void sk_wobj_put(struct wobj *o)
{
	if (!o)
		return;
	if (o->pid != sk_pid)
		return;   /* the parent's, inherited by fork: it keeps it */
	pthread_mutex_lock(&wpool_lock);
	if (wpool_pid != o->pid) {
		wpool = NULL;
		wpool_pid = o->pid;
	}
	o->next = wpool;
	wpool = o;
	pthread_mutex_unlock(&wpool_lock);
}

static void wkey_free(void *v)
{
	sk_wobj_put(v);
}

static void wkey_make(void)
{
	if (pthread_key_create(&wkey, wkey_free) != 0)
		wkey = (pthread_key_t)-1;
}

/* A wake object of this process, from the pool or new; NULL if the node
 * has none to give. */
struct wobj *sk_wobj_get(struct ntbx_dev *dev)
{
	pid_t me = sk_pid;
	pthread_mutex_lock(&wpool_lock);
	struct wobj *o = wpool_pid == me ? wpool : NULL;
	if (o)
		wpool = o->next;
	pthread_mutex_unlock(&wpool_lock);
	if (o)
		return o;
	o = calloc(1, sizeof *o);
	if (!o)
		return NULL;
	int fd = ntbx_db_wake_open(dev, &o->wk);
	if (fd < 0) {
		if (!__atomic_exchange_n(&wobj_warned, 1, __ATOMIC_RELAXED))
			ntbx_log(NTBX_LOG_WARN, "no wake object for an event loop "
			         "(%s): sleeping in slices of %d ms", strerror(-fd),
			         FALLBACK_MS);
		free(o);
		return NULL;
	}
	o->fd = fd;
	o->dev = dev;
	o->pid = me;
	return o;
}

/* This thread's wake object (poll, select). */
struct wobj *sk_thread_wobj(struct ntbx_dev *dev)
{
	if (t_wobj && t_wobj->pid == sk_pid)
		return t_wobj;
	t_wobj = NULL;   /* none yet, or the parent's (fork) */
	pthread_once(&wkey_once, wkey_make);
	struct wobj *o = sk_wobj_get(dev);
	if (o && wkey != (pthread_key_t)-1)
		pthread_setspecific(wkey, o);
	t_wobj = o;
	return o;
}

/* What a sleeper on @s waits for, added to *@w. */
void sk_wake_mask(struct sk *s, struct sk_want *w)
{
	/* M_PEND: the acceptor rings our endpoint with its first bytes
	 * (ntbx_qp_notify, stream.c: q_write) */
	if (s->mode != M_FAB && s->mode != M_PEND)
		return;
	struct ntbx_qp *qp = sk_qp(s);
	if (!qp)
		return;
	int port;
	uint32_t b;
	ntbx_qp_wake_bit(qp, &port, &b);
	if (port >= 0 && port < 64) {
		w->ports |= 1ull << port;
		w->bits |= b;
		w->keys |= 1ull << ntbx_qp_wake_key(qp);
	}
}

/*
 * Prepare to sleep on @o (NULL: the handle's shared FIFO) for @w; before
 * arming.  Only @o is woken for @w's keys alone (the shared FIFO takes
 * every ring of its bits).  Returns the descriptor to sleep on, or -1,
 * and lowers *@cap (ms) when wake-ups may be lost.
 */
int sk_sleep_prepare(struct wobj *o, const struct sk_want *w, int *cap)
{
	struct ntbx_fabric *f = sk_fab();
	if (!f)
		return -1;
	struct ntbx_dev *dev = ntbx_fabric_dev(f);
	if (o) {
		if (ntbx_db_wake_prepare_keys(dev, o->wk, w->ports, w->bits,
		                              w->keys) < 0) {
			*cap = FALLBACK_MS;
			return -1;
		}
		return o->fd;
	}
	*cap = FALLBACK_MS;
	int np = ntbx_port_count(dev);
	uint64_t mask = np >= 64 ? ~0ull : (1ull << np) - 1;
	/* Clear the bits first: registering the FIFO makes it readable at
	 * once for bits still set; a ring after the clear still wakes us. */
	for (int p = 0; p < np; p++)
		ntbx_db_clear(dev, p, NTBX_DB_QP_MASK);
	ntbx_db_event_drain(dev);
	return ntbx_db_event_fd(dev, mask ? mask : 1, NTBX_DB_QP_MASK);
}

/*
 * A sleep of @ms on @o's descriptor begins (@on) or ends
 * (ntbx_db_wake_sleeping: rings for others' keys leave a sleeper alone,
 * and tell a running loop that the node has traffic).  A look (0 ms) is
 * not a sleep; NULL: no object of ours in the sleep.
 */
void sk_sleep_mark(struct wobj *o, int ms, int on)
{
	if (o && ms != 0)
		ntbx_db_wake_sleeping(o->dev, o->wk, on);
}

/*
 * Whether a sleeper on @o (NULL: the handle's shared FIFO) must look at
 * @s again in 1 ms slices: the other side is confined (flags.c) and does
 * not hold @o's FIFO, so its rings cannot wake us.  Asked after the
 * sleeper registered (sk_sleep_prepare), so a confinement after this
 * kept our FIFO open (flags.c).  Counted in the connection's record
 * (`ntbx stat --json`: confined_slices).
 */
int sk_sleep_sliced(struct wobj *o, struct sk *s)
{
	if (!sk_peer_confined(s))
		return 0;
	struct ntbx_fabric *f = sk_fab();
	if (o && f && ntbx_db_wake_kept(ntbx_fabric_dev(f), o->wk))
		return 0;
	struct sk_conn *c = sk_conn(s);
	if (c)
		__atomic_add_fetch(&c->sliced, 1, __ATOMIC_RELAXED);
	return 1;
}

/* Does @s still wait for the other side's step of the hand-over?  The
 * connector for the answer (SK_REQ, or SK_ANS while the acceptor writes
 * it), the acceptor for the connector's switch (SK_ACC). */
static int handover_pending(struct sk *s)
{
	struct sk_conn *c = sk_conn(s);
	if (!c)
		return 0;
	skx_sync(s, c);   /* the other side on another host */
	uint32_t st = __atomic_load_n(&c->state, __ATOMIC_ACQUIRE);
	return s->role == 'C' ? st == SK_REQ || st == SK_ANS : st == SK_ACC;
}

int sk_arm(struct sk *s, int events)
{
	if (s->mode == M_PEND && !s->rd_fab) {
		/* Waiting for the acceptor's answer, which it publishes and
		 * rings at its first write (ntbx_qp_notify; a close without
		 * one is the shadow's FIN): registered for that ring already,
		 * look once more; if it came, do not sleep. */
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		return !handover_pending(s);
	}
	if (s->mode != M_FAB && !s->rd_fab)
		return 0;
	if (s->mode != M_FAB)
		events &= ~POLLOUT;
	if (!sk_qp(s))
		return 1;
	int want = (events & POLLIN ? NTBX_QP_READABLE : 0) |
	           (events & POLLOUT ? NTBX_QP_WRITABLE : 0);
	int m = q_arm(s, want);
	if (m < 0)
		return 0;
	return (m & (want | NTBX_QP_HUP | NTBX_QP_ERROR)) != 0;
}

/* After the shared FIFO (no wake object) polled readable. */
void sk_drain(void)
{
	struct ntbx_fabric *f = sk_fab();
	if (f)
		ntbx_db_event_drain(ntbx_fabric_dev(f));
}

/*
 * A read waiting for the other side's half of the hand-over
 * (handover_pending): the connector for the acceptor's answer, the
 * acceptor, in its TCP prefix read, for the connector's switch.  Each side
 * publishes its step and then rings the other's endpoint
 * (ntbx_qp_notify): the connector at its switch, the acceptor with its
 * first bytes (a reader waits for those, not for the answer itself; an
 * acceptor that closes without writing is the shadow's FIN); we register
 * for that ring before the last look, so the step is seen either by the
 * look or by the ring.  Sleeps until
 * then, news on the shadow, or @ms (the caller's back-off: the safety
 * net for a peer beyond one hop, which no ring reaches).
 */
void sk_wait_pend(struct sk *s, int fd, int ms)
{
	struct ntbx_fabric *f = sk_fab();
	struct pollfd p[2] = { { fd, POLLIN, 0 }, { -1, POLLIN, 0 } };
	struct sk_want want = SK_WANT_NONE;
	int cap = ms;
	struct wobj *o = f ? sk_thread_wobj(ntbx_fabric_dev(f)) : NULL;
	sk_wake_mask(s, &want);
	if (want.ports)
		p[1].fd = sk_sleep_prepare(o, &want, &cap);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (!handover_pending(s))
		return;
	struct wobj *zo = p[1].fd >= 0 ? o : NULL;
	sk_sleep_mark(zo, ms, 1);
	sk_real.poll(p, 2, cap < ms ? cap : ms);
	sk_sleep_mark(zo, ms, 0);
	if (!o && p[1].fd >= 0 && (p[1].revents & POLLIN))
		sk_drain();
}

/* In a forked child: the parent's wake objects are the parent's. */
void sk_wake_atfork(void)
{
	ntbx_mutex_reset(&wpool_lock);
	if (wpool)
		wpool = NULL;           /* the parent's objects */
	if (t_wobj)
		t_wobj = NULL;
}
