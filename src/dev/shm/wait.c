/* SPDX-License-Identifier: MIT */
/*
 * Waiter slots, doorbell wake-ups and event descriptors of the shm backend.
 *
 * Each open handle owns a waiter slot (struct shm_waiter) in its node's
 * registers, claimed with an OFD write lock on byte 2+S of node-N.live so
 * that a dead owner's slot is free again.  Sleeping is a Dekker pair:
 *
 *   sleeper                              ringer
 *   sleepers++            (SEQ_CST)      make the condition true (SEQ_CST:
 *   seq0 = seq                           the doorbell OR, a ring write)
 *   check own condition                  if sleepers > 0 (SEQ_CST load)
 *   futex_wait(&seq, seq0)                   seq++, futex_wake(&seq)
 *   sleepers--
 *
 * In the single order of SEQ_CST operations either the ringer sees the
 * sleeper (and bumps seq, so the futex wait returns) or the sleeper sees
 * the condition: no lost wake-up, and no spinning.  seq is a count that
 * nobody consumes and the wake wakes every thread on it, so any number of
 * threads of the handle may sleep on it at once.
 *
 * Event loops sleep in the kernel, on a FIFO per slot instead: the ringer
 * writes a byte when the slot's fd mask matches and its fd_pending flag
 * was clear (one byte per wake-up, not per ring); the sleeper drains it
 * (the bytes, then the flag: see wake_drain) before it arms and checks.
 * A drain consumes every earlier wake-up of the FIFO, so each FIFO must be
 * drained only by sleepers that then check everything it was registered
 * for.  Hence wake objects (ntbx_db_wake_open): a slot of its own, with
 * its own FIFO, flag and mask, per sleeping thread or epoll set, so that
 * several event loops of one process never drain each other's wake-ups.
 * A handle's own FIFO (ntbx_db_event_fd) is for one event loop per handle.
 *
 * A wake object's FIFO also has keys (fd_keys; include/ntbx/dev.h, wake
 * keys): a ring that names a key (ntbx_db_local_ring: a queue pair's ring
 * of its peer on this node) writes the FIFO only if the key is in them.
 * The sleeper stores its keys before it checks, as it stores its bits, so
 * the Dekker argument above covers them: a ringer that made the
 * condition true before the check loads the keys after they were stored.
 * A keyed ring of the object's bits whose key is not its own still writes
 * the FIFO while none of its sleepers is inside the kernel sleep
 * (fd_asleep, ntbx_db_wake_sleeping): the loop is running, the byte costs
 * it no wake-up, and its next sleep returns at once and looks again.
 * That hint is what a busy event loop lived on before keys (a ring of
 * its bit means traffic on the node, and its own next request is likely
 * near), while a loop asleep is no longer woken for others' traffic
 * (design notes, "Wake keys with a hint").  The count is read relaxed:
 * a hint lost or given in a race is a spin more or less, never a lost
 * wake-up, which keys alone decide.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dev/shm/shm.h"
#include "util/util.h"

/* A FIFO's name in the fabric directory: made, opened and removed only
 * relative to the checked directory descriptor (files.c: O_NOFOLLOW,
 * kind, owner and mode checked), never by path, which also works after a
 * privilege drop (the keeper). */
static void fifo_name(int node, int slot, char *buf, size_t len)
{
	snprintf(buf, len, "node-%d.ev-%d", node, slot);
}

static void fifo_at_exit(struct shm_dev *sd, int slot, int add);

/* Slot @s's FIFO file now exists (@on) or not (layout.h: fifo_map). */
static void fifo_mark(struct shm_dev *sd, int s, int on)
{
	uint64_t *w = &sd->regs->fifo_map[s / 64], b = 1ull << (s % 64);
	if (on)
		__atomic_or_fetch(w, b, __ATOMIC_RELEASE);
	else
		__atomic_and_fetch(w, ~b, __ATOMIC_RELEASE);
}

/* Slot @s may wait for doorbell bits @add from now on, and no longer for
 * @drop (layout.h, bit_slots).  Before the caller's condition check:
 * SEQ_CST, as every registration store. */
static void slot_bits_index(struct shm_dev *sd, int s, uint32_t add,
                            uint32_t drop)
{
	uint64_t m = 1ull << (s % 64);
	add &= NTBX_DB_VALID_MASK;
	drop &= NTBX_DB_VALID_MASK & ~add;
	for (uint32_t b = add; b; b &= b - 1) {
		uint64_t *wd = &sd->regs->bit_slots[__builtin_ctz(b)][s / 64];
		if (!(__atomic_load_n(wd, __ATOMIC_RELAXED) & m))
			__atomic_or_fetch(wd, m, __ATOMIC_SEQ_CST);
	}
	for (uint32_t b = drop; b; b &= b - 1) {
		uint64_t *wd = &sd->regs->bit_slots[__builtin_ctz(b)][s / 64];
		if (__atomic_load_n(wd, __ATOMIC_RELAXED) & m)
			__atomic_and_fetch(wd, ~m, __ATOMIC_SEQ_CST);
	}
}

/* Claim a free waiter slot of our node (its lock byte), reset it and
 * bump its generation.  Returns the slot, or -EMFILE; *@claim (if not
 * NULL) is the node's count of claims before this one. */
static int slot_take(struct shm_dev *sd, uint32_t *gen, uint32_t *claim)
{
	struct shm_node_regs *r = sd->regs;
	uint32_t start = __atomic_fetch_add(&r->next_slot, 1, __ATOMIC_RELAXED);
	if (claim)
		*claim = start;
	for (int i = 0; i < SHM_SLOTS; i++) {
		int s = (int)((start + (uint32_t)i) % SHM_SLOTS);
		if (shm_lock(sd->live_fd, F_WRLCK, SHM_LIVE_SLOT0 + s, 1, 0) < 0)
			continue;
		struct shm_waiter *w = &r->waiter[s];
		__atomic_and_fetch(&r->slot_map[s / 64], ~(1ull << (s % 64)),
		                   __ATOMIC_SEQ_CST);
		slot_bits_index(sd, s, 0, NTBX_DB_VALID_MASK);
		__atomic_store_n(&w->sleepers, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&w->ports, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&w->bits, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&w->fd_ports, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&w->fd_bits, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&w->fd_pending, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&w->fd_keys, NTBX_DB_ALL_KEYS, __ATOMIC_RELAXED);
		__atomic_store_n(&w->fd_asleep, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&w->pid, (int32_t)getpid(), __ATOMIC_RELAXED);
		*gen = __atomic_add_fetch(&w->gen, 1, __ATOMIC_SEQ_CST);
		return s;
	}
	return -EMFILE;
}

/* Make and open slot @s's FIFO (O_RDWR: the open does not wait for a
 * writer, reads never see end of file, and our own writes never EPIPE).
 * Returns the fd or -errno. */
static int fifo_make(struct shm_dev *sd, int s)
{
	char name[32];
	fifo_name(sd->dev.node, s, name, sizeof name);
	int group = sd->desc.gid != ~0u;
	int fd = shm_fifo_make(sd->dir_fd, &sd->dir_st, name,
	                       group ? 0660 : 0600,
	                       group ? (int)sd->desc.gid : -1);
	if (fd < 0)
		return ntbx_err(-fd, "cannot make %s/%s: %s", sd->dir, name,
		                strerror(-fd));
	fifo_mark(sd, s, 1);
	fifo_at_exit(sd, s, 1);
	return fd;
}

/*
 * Remove the event FIFOs that dead holders of our node's slots left (a
 * killed process never closes its handle or its wake objects).  Called
 * when a handle claims its slot.  A FIFO is unlinked only while we hold
 * its slot's lock ourselves, so no process can claim that slot and make a
 * new FIFO under the same name between our check and the unlink; a
 * claimer that finds the slot locked by us for that moment takes another.
 */
static void fifo_reap(struct shm_dev *sd, int at_exit)
{
	/* Our own description's locks do not keep us out: a slot of one of
	 * our wake objects would look free.  A handle claims its slot before
	 * it has any (at open, and in a forked child after forgetting the
	 * parent's), so there are none to mistake; be sure of it.  At exit
	 * (@at_exit) ours go too: the last process of a node to exit leaves
	 * no FIFO of the dead behind (clients that _exit()ed after the last
	 * claim, say). */
	if ((sd->wakes && !at_exit) || ntbx_sandboxed)
		return;
	/* The slots that have a FIFO file, from fifo_map: no directory read
	 * (a forked child of an accept-and-fork server claims a slot per
	 * connection), and it works after a privilege drop too. */
	for (int k = 0; k < SHM_SLOTS / 64; k++) {
		uint64_t m = __atomic_load_n(&sd->regs->fifo_map[k],
		                             __ATOMIC_ACQUIRE);
		while (m) {
			int s = k * 64 + __builtin_ctzll(m);
			m &= m - 1;
			if (s == sd->slot && !at_exit)
				continue;
			if (shm_lock(sd->live_fd, F_WRLCK, SHM_LIVE_SLOT0 + s, 1,
			             0) < 0)
				continue;   /* its holder is alive */
			char name[32];
			fifo_name(sd->dev.node, s, name, sizeof name);
			int r = shm_file_unlink(sd->dir_fd, &sd->dir_st, name);
			if (r == 0 || r == -ENOENT)
				fifo_mark(sd, s, 0);
			shm_unlock(sd->live_fd, SHM_LIVE_SLOT0 + s, 1);
		}
	}
}

/*
 * A forked child (@forked) reaps at one claim in FORK_REAP_EVERY of the
 * node, not at each.  Its parent reaped when it claimed its own slot, and
 * a child of a forking server is forked per connection: its reap found
 * nothing to remove and cost a failed probe of each live FIFO's lock byte
 * (the server's own, at least: EAGAIN in every child).  That is safe
 * because a reap only removes files and marks: a FIFO of a dead holder
 * that stays a while longer is read by nobody, as it was before the reap
 * came (the slot's next holder finds its fd mask cleared by slot_take,
 * and its fifo_make unlinks the old file before it makes its own), and
 * it is removed by the next process that opens the fabric, by the next
 * child whose claim count comes round, or at the exit of any process with
 * a FIFO (fifo_exit_run): at most the FIFOs of the holders killed since,
 * never more than the node's slots.
 */
#define FORK_REAP_EVERY 64

int shm_slot_claim(struct shm_dev *sd, int forked)
{
	uint32_t gen, claim;
	int s = slot_take(sd, &gen, &claim);
	if (s < 0)
		return s;
	sd->slot_gen = gen;
	sd->slot = s;
	if (!forked || claim % FORK_REAP_EVERY == 0)
		fifo_reap(sd, 0);
	return 0;
}

/* Give slot @s up: ringers skip it from now on. */
static void slot_drop(struct shm_dev *sd, int s, int had_fifo)
{
	struct shm_node_regs *r = sd->regs;
	struct shm_waiter *w = &r->waiter[s];
	__atomic_store_n(&w->fd_ports, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&w->ports, 0, __ATOMIC_SEQ_CST);
	__atomic_and_fetch(&r->slot_map[s / 64], ~(1ull << (s % 64)),
	                   __ATOMIC_SEQ_CST);
	if (had_fifo) {
		char name[32];
		fifo_name(sd->dev.node, s, name, sizeof name);
		int r = shm_file_unlink(sd->dir_fd, &sd->dir_st, name);
		if (r == 0 || r == -ENOENT)
			fifo_mark(sd, s, 0);
		fifo_at_exit(sd, s, 0);
	}
	shm_unlock(sd->live_fd, SHM_LIVE_SLOT0 + s, 1);
}

static void wakes_release(struct shm_dev *sd);

void shm_slot_release(struct shm_dev *sd)
{
	wakes_release(sd);
	if (sd->slot < 0)
		return;
	slot_drop(sd, sd->slot, sd->ev_fd >= 0);
	sd->slot = -1;
}

/*
 * write() to a FIFO whose reader may be gone (its process died) without
 * SIGPIPE: these writes run inside programs (under the sockets preload),
 * and ntbx must not raise a signal that kernel TCP would not.  A FIFO has
 * no MSG_NOSIGNAL, so SIGPIPE is blocked for this thread around the write
 * and, if the write raised one (EPIPE, and none was pending before), it
 * is taken with sigtimedwait; a SIGPIPE of the program's own stays
 * pending, and its disposition is never touched.
 */
ssize_t shm_write_nosigpipe(int fd, const void *buf, size_t len)
{
	sigset_t pipe_set, old, pend;
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	int was = sigpending(&pend) == 0 && sigismember(&pend, SIGPIPE);
	ssize_t r = write(fd, buf, len);
	int e = errno;
	if (r < 0 && e == EPIPE && !was) {
		const struct timespec zero = { 0, 0 };
		while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR)
			;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = e;
	return r;
}

/*
 * Node @node's slot @s FIFO, as this handle holds it for ringing: opened
 * on first use (@open) and kept, for the slot's generation @gen (a
 * reclaimed slot has a new FIFO).  O_RDWR|O_NONBLOCK: the open never
 * waits for a reader, and with our own read end a write can never meet a
 * FIFO without readers, so it never fails with EPIPE nor raises SIGPIPE
 * (ntbx raises no signal kernel TCP would not), whatever the program's
 * signal mask, and costs no sigprocmask/sigpending around it (a confined
 * process may not make those).  If the sleeper died, bytes pile up to the
 * pipe's size and then the write fails with EAGAIN, which a ring ignores.
 * Returns the fd or -1.
 */
static int fifo_peer_fd(struct shm_dev *sd, int node, int s, uint32_t gen,
                        int open)
{
	struct shm_peer *p = &sd->peer[node];
	pthread_mutex_lock(&sd->map_lock);
	if (!p->ev_fd && open) {
		p->ev_fd = malloc(sizeof *p->ev_fd * SHM_SLOTS);
		p->ev_gen = calloc(SHM_SLOTS, sizeof *p->ev_gen);
		if (!p->ev_fd || !p->ev_gen) {
			free(p->ev_fd);
			free(p->ev_gen);
			p->ev_fd = NULL;
			p->ev_gen = NULL;
		} else {
			for (int i = 0; i < SHM_SLOTS; i++)
				p->ev_fd[i] = -1;
		}
	}
	int fd = -1;
	if (p->ev_fd) {
		if (p->ev_fd[s] >= 0 && p->ev_gen[s] != gen && open) {
			ntbx_fd_close(p->ev_fd[s]);
			p->ev_fd[s] = -1;
		}
		if (p->ev_fd[s] < 0 && open) {
			char name[64];
			fifo_name(node, s, name, sizeof name);
			p->ev_fd[s] = shm_file_own(sd->dir_fd, &sd->dir_st, name,
			                           O_RDWR | O_NONBLOCK, 1, 0);
			p->ev_gen[s] = gen;
		}
		if (p->ev_fd[s] >= 0 && p->ev_gen[s] == gen)
			fd = p->ev_fd[s];
	}
	pthread_mutex_unlock(&sd->map_lock);
	return fd;
}

/* Write one byte to @node's slot @s FIFO (waiter @w).  A handle that can
 * open nothing more (a confined process: util.h, ntbx_sandboxed; or one
 * that kept its FIFOs: shm_db_keep_wakes) writes only to FIFOs it holds,
 * and marks one it cannot reach, so that its sleeper sleeps in slices
 * from its next sleep on (shm_wake_kept). */
static void fifo_kick(struct shm_dev *sd, int node, int s,
                      struct shm_waiter *w)
{
	uint32_t gen = __atomic_load_n(&w->gen, __ATOMIC_RELAXED);
	int fd = fifo_peer_fd(sd, node, s, gen,
	                      !ntbx_sandboxed && !sd->kept_only);
	if (fd < 0) {
		if (ntbx_sandboxed || sd->kept_only)
			__atomic_store_n(&w->fd_unreached, gen, __ATOMIC_SEQ_CST);
		return;
	}
	char c = 1;
	/* EAGAIN: the pipe is full, so it is readable anyway. */
	if (write(fd, &c, 1) < 0 && errno != EAGAIN && !ntbx_sandboxed)
		ntbx_log(NTBX_LOG_DEBUG, "event fifo of node %d slot %d: %s",
		         node, s, strerror(errno));
}

/*
 * Before the process loses the right to open files (sshd's pre-auth
 * child: RLIMIT_NOFILE 1, then a seccomp filter): open now, and keep, the
 * FIFO of every waiter slot of the node behind @port (@peer) or of this
 * node that has one and is registered for @port's doorbells, i.e. the
 * poll/epoll sleepers of the other end of a queue pair on that port, so
 * that rings still wake them (fifo_kick).  Each such slot is marked kept
 * (fd_kept = its generation), which its sleeper checks (shm_wake_kept).
 * From then on this handle's rings open no FIFO.  Returns how many it
 * keeps, or -errno if one could not be opened.
 */
int shm_db_keep_wakes(struct ntbx_dev *dev, int port, int peer)
{
	struct shm_dev *sd = SHM(dev);
	int node = peer ? dev->port_peer[port] : dev->node;
	int q = peer ? sd->desc.peer_port[dev->node][port] : port;
	struct shm_node_regs *r = peer ? shm_peer_regs(sd, node) : sd->regs;
	if (!r)
		return -EIO;
	int kept = 0, err = 0;
	for (int wi = 0; wi < SHM_SLOTS / 64; wi++) {
		uint64_t m = __atomic_load_n(&r->fifo_map[wi], __ATOMIC_ACQUIRE);
		while (m) {
			int s = wi * 64 + __builtin_ctzll(m);
			m &= m - 1;
			struct shm_waiter *w = &r->waiter[s];
			if (!(__atomic_load_n(&w->fd_ports, __ATOMIC_ACQUIRE) >> q & 1))
				continue;
			uint32_t gen = __atomic_load_n(&w->gen, __ATOMIC_ACQUIRE);
			if (fifo_peer_fd(sd, node, s, gen, 1) < 0) {
				err = -EIO;
				continue;
			}
			__atomic_store_n(&w->fd_kept, gen, __ATOMIC_SEQ_CST);
			kept++;
		}
	}
	sd->kept_only = 1;
	return err ? err : kept;
}

void shm_db_wake(struct ntbx_dev *dev, int port, uint32_t bits, int peer,
                 int key)
{
	struct shm_dev *sd = SHM(dev);
	int node = peer ? dev->port_peer[port] : dev->node;
	int q = peer ? sd->desc.peer_port[dev->node][port] : port;
	struct shm_node_regs *r = sd->peer[node].regs;
	/* the valid mask too: bits index bit_slots, and the ofi agent's come
	 * from the network */
	bits &= NTBX_DB_VALID_MASK &
	        ~__atomic_load_n(&r->port[q].db_mask, __ATOMIC_RELAXED);
	if (!bits)
		return;
	for (int wi = 0; wi < SHM_SLOTS / 64; wi++) {
		uint64_t m = 0;
		for (uint32_t b = bits; b; b &= b - 1)
			m |= __atomic_load_n(&r->bit_slots[__builtin_ctz(b)][wi],
			                     __ATOMIC_SEQ_CST);
		if (m)
			m &= __atomic_load_n(&r->slot_map[wi], __ATOMIC_SEQ_CST);
		while (m) {
			int s = wi * 64 + __builtin_ctzll(m);
			m &= m - 1;
			struct shm_waiter *w = &r->waiter[s];
			if (__atomic_load_n(&w->sleepers, __ATOMIC_SEQ_CST) &&
			    (__atomic_load_n(&w->ports, __ATOMIC_RELAXED) >> q & 1) &&
			    (__atomic_load_n(&w->bits, __ATOMIC_RELAXED) & bits)) {
				__atomic_fetch_add(&w->seq, 1, __ATOMIC_SEQ_CST);
				ntbx_futex_wake(&w->seq, 0);
			}
			if ((__atomic_load_n(&w->fd_ports, __ATOMIC_SEQ_CST) >> q & 1) &&
			    (__atomic_load_n(&w->fd_bits, __ATOMIC_RELAXED) & bits) &&
			    (key < 0 || (__atomic_load_n(&w->fd_keys,
			                                 __ATOMIC_SEQ_CST) >> key & 1) ||
			     !__atomic_load_n(&w->fd_asleep, __ATOMIC_RELAXED)) &&
			    !__atomic_exchange_n(&w->fd_pending, 1, __ATOMIC_SEQ_CST))
				fifo_kick(sd, node, s, w);
		}
	}
}

/* Make slot @s visible to ringers of this node. */
static void slot_publish(struct shm_dev *sd, int s)
{
	uint64_t bit = 1ull << (s % 64);
	if (!(__atomic_load_n(&sd->regs->slot_map[s / 64], __ATOMIC_RELAXED) & bit))
		__atomic_or_fetch(&sd->regs->slot_map[s / 64], bit, __ATOMIC_SEQ_CST);
}

int shm_wait_prepare(struct ntbx_dev *dev, struct ntbx_db_waiter *wt)
{
	struct shm_dev *sd = SHM(dev);
	if (sd->slot < 0)
		return -EPERM;   /* an observer handle */
	struct shm_waiter *w = &sd->regs->waiter[sd->slot];
	if ((__atomic_load_n(&w->ports, __ATOMIC_RELAXED) & wt->port_mask) !=
	    wt->port_mask)
		__atomic_or_fetch(&w->ports, wt->port_mask, __ATOMIC_SEQ_CST);
	if ((__atomic_load_n(&w->bits, __ATOMIC_RELAXED) & wt->bits) != wt->bits)
		__atomic_or_fetch(&w->bits, wt->bits, __ATOMIC_SEQ_CST);
	slot_bits_index(sd, sd->slot, wt->bits, 0);   /* a union: never drops */
	slot_publish(sd, sd->slot);
	__atomic_add_fetch(&w->sleepers, 1, __ATOMIC_SEQ_CST);
	wt->seq = __atomic_load_n(&w->seq, __ATOMIC_SEQ_CST);
	wt->slot = sd->slot;
	return 0;
}

int shm_wait_commit(struct ntbx_dev *dev, struct ntbx_db_waiter *wt,
                    int timeout_ms)
{
	struct shm_waiter *w = &SHM(dev)->regs->waiter[wt->slot];
	return ntbx_futex_wait(&w->seq, wt->seq, timeout_ms);
}

void shm_wait_finish(struct ntbx_dev *dev, struct ntbx_db_waiter *wt)
{
	struct shm_waiter *w = &SHM(dev)->regs->waiter[wt->slot];
	__atomic_sub_fetch(&w->sleepers, 1, __ATOMIC_SEQ_CST);
}

/*
 * Wake objects (see the top of this file): each is a waiter slot of its
 * own, claimed like a handle's, with its own FIFO and pending flag.
 */
struct ntbx_db_wake {
	int slot;
	uint32_t gen;                /* the slot's generation, ours */
	int fd;                      /* the slot's FIFO, O_RDWR */
	struct ntbx_db_wake *next;   /* sd->wakes, under map_lock */
};

/* A wake object on a slot of its own, with a FIFO (@fifo) or without.
 * Returns the FIFO's descriptor, 0 without one, or -errno. */
static int wake_new(struct ntbx_dev *dev, int fifo, struct ntbx_db_wake **out)
{
	struct shm_dev *sd = SHM(dev);
	if (sd->slot < 0)
		return -EPERM;   /* an observer handle */
	struct ntbx_db_wake *wk = calloc(1, sizeof *wk);
	if (!wk)
		return -ENOMEM;
	uint32_t gen;
	int s = slot_take(sd, &gen, NULL);
	if (s < 0) {
		free(wk);
		return s;
	}
	int fd = -1;
	if (fifo) {
		fd = fifo_make(sd, s);
		if (fd < 0) {
			slot_drop(sd, s, 0);
			free(wk);
			return fd;
		}
		fd = ntbx_fd_own(fd);
	}
	wk->slot = s;
	wk->gen = gen;
	wk->fd = fd;
	pthread_mutex_lock(&sd->map_lock);
	wk->next = sd->wakes;
	sd->wakes = wk;
	pthread_mutex_unlock(&sd->map_lock);
	*out = wk;
	return fifo ? fd : 0;
}

int shm_wake_open(struct ntbx_dev *dev, struct ntbx_db_wake **out)
{
	return wake_new(dev, 1, out);
}

/* A wake object without a FIFO: a slot only one thread sleeps on
 * (ntbx_db_wait_prepare_own). */
int shm_sleeper_open(struct ntbx_dev *dev, struct ntbx_db_wake **out)
{
	return wake_new(dev, 0, out);
}

/* wait_prepare on the object's own slot.  Its one sleeper stores exactly
 * what it waits for (not a union, as on the handle's shared slot): a ring
 * for another thread's bits skips it.  The stores come before the
 * sleepers increment (SEQ_CST), which a ringer loads before it reads
 * them, so a ringer that sees us asleep sees our masks. */
int shm_wait_prepare_own(struct ntbx_dev *dev, struct ntbx_db_wake *wk,
                         struct ntbx_db_waiter *wt)
{
	struct shm_dev *sd = SHM(dev);
	struct shm_waiter *w = &sd->regs->waiter[wk->slot];
	if (__atomic_load_n(&w->ports, __ATOMIC_RELAXED) != wt->port_mask)
		__atomic_store_n(&w->ports, wt->port_mask, __ATOMIC_SEQ_CST);
	uint32_t old = __atomic_load_n(&w->bits, __ATOMIC_RELAXED);
	if (old != wt->bits)
		__atomic_store_n(&w->bits, wt->bits, __ATOMIC_SEQ_CST);
	slot_bits_index(sd, wk->slot, wt->bits, old);
	slot_publish(sd, wk->slot);
	__atomic_add_fetch(&w->sleepers, 1, __ATOMIC_SEQ_CST);
	wt->seq = __atomic_load_n(&w->seq, __ATOMIC_SEQ_CST);
	wt->slot = wk->slot;
	return 0;
}

/* Consume the object's wake-ups: the bytes first, then the flag.  In the
 * other order a ringer between the two would leave the flag set with its
 * byte read, and every later ring would skip the FIFO: a lost wake-up.
 * A read that did not fill the buffer took every byte there was (a pipe
 * read returns what it holds); a byte written after it is a ring after
 * the drain, as one after a read that found nothing would be.  So no
 * second read only to hear EAGAIN (one system call per sleep). */
static void wake_drain(struct shm_waiter *w, int fd)
{
	char buf[64];
	while (read(fd, buf, sizeof buf) == (ssize_t)sizeof buf)
		;
	__atomic_store_n(&w->fd_pending, 0, __ATOMIC_SEQ_CST);
}

int shm_wake_prepare(struct ntbx_dev *dev, struct ntbx_db_wake *wk,
                     uint64_t port_mask, uint32_t bits, uint64_t keys)
{
	struct shm_dev *sd = SHM(dev);
	if (wk->fd < 0)
		return -EINVAL;   /* a sleeper (no FIFO) */
	struct shm_waiter *w = &sd->regs->waiter[wk->slot];
	wake_drain(w, wk->fd);
	/* Exactly what this sleeper waits for, so that a ring wakes only the
	 * sleepers it concerns (a mask stored while a ring is in flight can
	 * only make that ring spurious or skip us: it is for a condition we
	 * check after this). */
	uint32_t old = __atomic_load_n(&w->fd_bits, __ATOMIC_RELAXED);
	if (old != bits)
		__atomic_store_n(&w->fd_bits, bits, __ATOMIC_SEQ_CST);
	slot_bits_index(sd, wk->slot, bits, old);
	if (__atomic_load_n(&w->fd_keys, __ATOMIC_RELAXED) != keys)
		__atomic_store_n(&w->fd_keys, keys, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&w->fd_ports, __ATOMIC_RELAXED) != port_mask)
		__atomic_store_n(&w->fd_ports, port_mask, __ATOMIC_SEQ_CST);
	slot_publish(sd, wk->slot);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return 0;
}

/* Whether every ringer that can open nothing more reaches @wk's FIFO: one
 * of them keeps it, and none has had to skip it (shm_db_keep_wakes).
 * The sleeper of a connection whose other end is confined sleeps without
 * slices only then.  (Not per connection: a second confined ringer that
 * does not hold the FIFO is noticed at its first skipped ring, and the
 * sleeper then sleeps in slices from its next sleep on.) */
int shm_wake_kept(struct ntbx_dev *dev, struct ntbx_db_wake *wk)
{
	struct shm_waiter *w = &SHM(dev)->regs->waiter[wk->slot];
	return __atomic_load_n(&w->fd_kept, __ATOMIC_SEQ_CST) == wk->gen &&
	       __atomic_load_n(&w->fd_unreached, __ATOMIC_SEQ_CST) != wk->gen;
}

void shm_wake_sleeping(struct ntbx_dev *dev, struct ntbx_db_wake *wk,
                       int asleep)
{
	struct shm_waiter *w = &SHM(dev)->regs->waiter[wk->slot];
	if (asleep)
		__atomic_add_fetch(&w->fd_asleep, 1, __ATOMIC_RELAXED);
	else
		__atomic_sub_fetch(&w->fd_asleep, 1, __ATOMIC_RELAXED);
}

void shm_wake_kick(struct ntbx_dev *dev, struct ntbx_db_wake *wk)
{
	struct shm_waiter *w = &SHM(dev)->regs->waiter[wk->slot];
	if (wk->fd >= 0 && !__atomic_exchange_n(&w->fd_pending, 1, __ATOMIC_SEQ_CST)) {
		char c = 1;
		/* our own O_RDWR descriptor: never EPIPE; EAGAIN: full, so
		 * readable anyway */
		if (write(wk->fd, &c, 1) < 0 && errno != EAGAIN)
			ntbx_log(NTBX_LOG_DEBUG, "wake object %d: %s", wk->slot,
			         strerror(errno));
	}
}

void shm_wake_close(struct ntbx_dev *dev, struct ntbx_db_wake *wk)
{
	struct shm_dev *sd = SHM(dev);
	pthread_mutex_lock(&sd->map_lock);
	struct ntbx_db_wake **pp = &sd->wakes;
	while (*pp && *pp != wk)
		pp = &(*pp)->next;
	if (*pp)
		*pp = wk->next;
	pthread_mutex_unlock(&sd->map_lock);
	slot_drop(sd, wk->slot, wk->fd >= 0);
	if (wk->fd >= 0)
		ntbx_fd_close(wk->fd);
	free(wk);
}

/* The handle closes: its wake objects go with it. */
static void wakes_release(struct shm_dev *sd)
{
	pthread_mutex_lock(&sd->map_lock);
	struct ntbx_db_wake *wk = sd->wakes;
	sd->wakes = NULL;
	pthread_mutex_unlock(&sd->map_lock);
	while (wk) {
		struct ntbx_db_wake *next = wk->next;
		slot_drop(sd, wk->slot, wk->fd >= 0);
		if (wk->fd >= 0)
			ntbx_fd_close(wk->fd);
		free(wk);
		wk = next;
	}
}

int shm_event_fd(struct ntbx_dev *dev, uint64_t port_mask, uint32_t bits)
{
	struct shm_dev *sd = SHM(dev);
	if (sd->slot < 0)
		return -EPERM;   /* an observer handle */
	struct shm_waiter *w = &sd->regs->waiter[sd->slot];
	if (sd->ev_fd < 0) {
		int fd = fifo_make(sd, sd->slot);
		if (fd < 0)
			return fd;
		sd->ev_fd = ntbx_fd_own(fd);
	}
	if (dev->nports < 64)
		port_mask &= (1ull << dev->nports) - 1;
	__atomic_store_n(&w->fd_bits, bits, __ATOMIC_SEQ_CST);
	__atomic_store_n(&w->fd_pending, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&w->fd_ports, port_mask, __ATOMIC_SEQ_CST);
	/* the handle's slot: its sleepers' union too, so never drops */
	slot_bits_index(sd, sd->slot, bits, 0);
	slot_publish(sd, sd->slot);
	/* Bits already pending make it readable at once. */
	for (int p = 0; p < dev->nports; p++) {
		if (!(port_mask >> p & 1))
			continue;
		uint32_t db = __atomic_load_n(&sd->regs->port[p].db, __ATOMIC_SEQ_CST) &
		              ~sd->regs->port[p].db_mask & bits;
		if (db && !__atomic_exchange_n(&w->fd_pending, 1, __ATOMIC_SEQ_CST)) {
			char c = 1;
			if (write(sd->ev_fd, &c, 1) < 0 && errno != EAGAIN)
				return -errno;
		}
	}
	return sd->ev_fd;
}

void shm_event_drain(struct ntbx_dev *dev)
{
	struct shm_dev *sd = SHM(dev);
	if (sd->ev_fd < 0 || sd->slot < 0)
		return;
	wake_drain(&sd->regs->waiter[sd->slot], sd->ev_fd);
}

/* In a forked child: the wake objects and the handle's FIFO are the
 * parent's (their slots are locked by the parent's open file description),
 * so the child closes its copies and forgets them, changing nothing
 * shared. */
void shm_wakes_forget(struct shm_dev *sd)
{
	struct ntbx_db_wake *wk = sd->wakes;
	sd->wakes = NULL;
	while (wk) {
		struct ntbx_db_wake *next = wk->next;
		if (wk->fd >= 0)
			ntbx_fd_close(wk->fd);
		free(wk);
		wk = next;
	}
	ntbx_fd_close(sd->ev_fd);
	sd->ev_fd = -1;
}

/* ------------------------------------------------------------ liveness */

int shm_self_id(struct ntbx_dev *dev, int *slot, uint32_t *gen)
{
	struct shm_dev *sd = SHM(dev);
	if (sd->slot < 0)
		return -EPERM;   /* an observer handle */
	*slot = sd->slot;
	*gen = sd->slot_gen;
	return 0;
}

/*
 * Alive while its slot's lock is held and the slot's generation is still
 * the one recorded.  A lock held by our own open file description does not
 * show in F_OFD_GETLK, so our own slot is answered from private memory;
 * another handle of this process, or the parent's handle inherited across
 * fork, is another description and shows.  The generation is read from the
 * node's registers, which a peer node may have scribbled: it is loaded
 * once and only compared.
 */
int shm_holder_alive(struct ntbx_dev *dev, int node, int slot, uint32_t gen)
{
	struct shm_dev *sd = SHM(dev);
	if (slot >= SHM_SLOTS)
		return -ERANGE;
	if (node == dev->node && slot == sd->slot)
		return gen == sd->slot_gen;
	struct shm_node_regs *r = shm_peer_regs(sd, node);
	int fd = node == dev->node ? sd->live_fd : shm_peer_live_fd(sd, node);
	if (!r || fd < 0)
		return 0;   /* its files are gone: so is it */
	if (__atomic_load_n(&r->waiter[slot].gen, __ATOMIC_ACQUIRE) != gen)
		return 0;
	return shm_locked_by_other(fd, SHM_LIVE_SLOT0 + slot, 1) > 0;
}

/*
 * A process that exits without closing its handles (the sockets preload
 * never closes its fabric) removes their FIFOs, and its wake objects', at
 * exit; one that is killed leaves them to fifo_reap.  Entries name the
 * process, so a forked child's exit does not remove its parent's FIFOs.
 * They are removed relative to the handle's directory descriptor, which
 * stays open while the handle does (closing the handle forgets them), and
 * through the keeper after a privilege drop (shm_file_unlink).
 */
struct fifo_exit_ent {
	int dfd, node, slot;
	pid_t pid;
	struct shm_dev *sd;   /* open while the entry is (closing forgets it) */
	struct stat dst;   /* the directory's, for the keeper */
};
/* As many entries as the process has FIFOs at once (a threaded server has
 * one wake object per event-loop thread: a fixed 64 left the 65th's FIFO
 * behind); grown, never shrunk. */
static struct fifo_exit_ent *fifo_exit;
static int fifo_exit_n;
static pthread_mutex_t fifo_exit_lock = PTHREAD_MUTEX_INITIALIZER;

static void fifo_exit_run(void)
{
	if (ntbx_sandboxed)
		return;   /* no call a filter did not foresee (util.h) */
	pid_t me = getpid();
	for (int i = 0; i < fifo_exit_n; i++)
		if (fifo_exit[i].pid == me) {
			char name[48];
			fifo_name(fifo_exit[i].node, fifo_exit[i].slot, name,
			          sizeof name);
			int r = shm_file_unlink(fifo_exit[i].dfd, &fifo_exit[i].dst,
			                        name);
			if (r == 0 || r == -ENOENT)
				fifo_mark(fifo_exit[i].sd, fifo_exit[i].slot, 0);
		}
	/* then the FIFOs of dead processes of the same nodes (once each) */
	for (int i = 0; i < fifo_exit_n; i++) {
		if (fifo_exit[i].pid != me)
			continue;
		int seen = 0;
		for (int j = 0; j < i && !seen; j++)
			seen = fifo_exit[j].pid == me &&
			       fifo_exit[j].sd == fifo_exit[i].sd;
		if (!seen)
			fifo_reap(fifo_exit[i].sd, 1);
	}
}

/* Remember (@add) or forget slot @slot's FIFO of @sd for removal at exit. */
static void fifo_at_exit(struct shm_dev *sd, int slot, int add)
{
	static int registered;
	pid_t me = getpid();
	pthread_mutex_lock(&fifo_exit_lock);
	if (add && !registered)
		registered = atexit(fifo_exit_run) == 0;
	int spare = -1;
	for (int i = 0; i < fifo_exit_n; i++) {
		int mine = fifo_exit[i].pid == me && fifo_exit[i].dfd == sd->dir_fd &&
		           fifo_exit[i].node == sd->dev.node &&
		           fifo_exit[i].slot == slot;
		if (mine) {
			if (!add)
				fifo_exit[i].pid = 0;
			spare = -2;
			break;
		}
		/* a free entry, or one of a process we were forked from */
		if (spare == -1 && fifo_exit[i].pid != me)
			spare = i;
	}
	if (add && spare == -1) {
		int n = fifo_exit_n ? 2 * fifo_exit_n : 64;
		struct fifo_exit_ent *e = realloc(fifo_exit, (size_t)n * sizeof *e);
		if (e) {
			memset(e + fifo_exit_n, 0,
			       (size_t)(n - fifo_exit_n) * sizeof *e);
			spare = fifo_exit_n;
			fifo_exit = e;
			fifo_exit_n = n;
		}
	}
	if (add && spare >= 0) {
		fifo_exit[spare].sd = sd;
		fifo_exit[spare].dfd = sd->dir_fd;
		fifo_exit[spare].node = sd->dev.node;
		fifo_exit[spare].slot = slot;
		fifo_exit[spare].pid = me;
		fifo_exit[spare].dst = sd->dir_st;
	}
	pthread_mutex_unlock(&fifo_exit_lock);
}
