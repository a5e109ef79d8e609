/* SPDX-License-Identifier: MIT */
/*
 * ntbx/qp.h — queue pairs: reliable, ordered channels between two nodes.
 *
 * A queue pair joins two endpoints, each owned by a process on a node of
 * the same fabric (possibly the same node: the loopback path).  Each
 * endpoint keeps, in its own node memory, the ring its peer writes into and
 * the credits its peer returns: write remote, read local.
 *
 *   - Small messages are copied into the receiver's ring (eager), under
 *     credit-based flow control; credits go back in batches (delayed
 *     acknowledgement).
 *   - Large messages skip the intermediate copy when the receiver has
 *     posted a buffer in its node memory (ntbx_qp_post_recv): the sender
 *     writes straight into it (push), by CPU or by the DMA engine.
 *   - A doorbell is rung only when the receiver said it is going to sleep.
 *     Waits spin for NTBX_SPIN_US microseconds (default 50), then sleep.
 *   - On a ring, traffic for a non-neighbour goes hop by hop through bypass
 *     buffers, moved by K transfer threads per node (ntbx_qp_forwarder_start),
 *     each on its own doorbell bit; the destination acknowledges to the
 *     source, so credits are end to end.
 *
 * One channel serves both uses: ntbx_qp_send/ntbx_qp_recv keep message
 * boundaries (OpenSHMEM, IP packets); ntbx_qp_write/ntbx_qp_read treat the
 * same records as a byte stream (sockets).
 *
 * Set-up is out of band: each side creates its endpoint, the two exchange
 * their struct ntbx_qp_addr by any means (a TCP connection, a pipe), and
 * each connects to the other's.
 *
 * Everything read from the peer is checked: a corrupt record fails the
 * queue pair with -EPROTO; it never makes this process read or write
 * outside its windows.
 *
 * A handle may be used by one reader thread and one writer thread at once.
 */
#ifndef NTBX_QP_H
#define NTBX_QP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "ntbx/fabric.h"

#ifdef __cplusplus
extern "C" {
#endif

struct ntbx_qp;

/* What the peer needs to reach an endpoint; plain data, copy it anywhere. */
struct ntbx_qp_addr {
	uint32_t node;    /* node of the endpoint */
	uint32_t epoch;   /* that node's epoch when the endpoint was made */
	uint64_t off;     /* endpoint's offset in that node's memory */
	uint64_t cookie;  /* random; checked on every use */
};

#define NTBX_QP_DMA      0x1u  /* push large messages with the DMA engine */
#define NTBX_QP_NO_PUSH  0x2u  /* never push: every byte through the ring */

struct ntbx_qp_opts {
	uint32_t ring_size;  /* bytes of receive ring; power of two, 0 = default */
	uint32_t flags;      /* NTBX_QP_* */
};
#define NTBX_QP_DEFAULT_RING (512u << 10)
#define NTBX_QP_MIN_RING     (4u << 10)
#define NTBX_QP_MAX_RING     (64u << 20)

/* Flags for the data calls. */
#define NTBX_QP_NONBLOCK 0x1   /* return -EAGAIN instead of waiting */

/*
 * Make an endpoint on this node for a queue pair with @peer_node (which may
 * be this node).  *local receives its address, to hand to the peer.
 * Returns 0, or -ERANGE (bad node), -EINVAL (bad opts), -ENOSPC (node
 * memory full), -EHOSTUNREACH (no route).
 */
int ntbx_qp_create(struct ntbx_fabric *f, int peer_node,
                   const struct ntbx_qp_opts *opts, struct ntbx_qp **qp,
                   struct ntbx_qp_addr *local);

/*
 * Connect to the peer endpoint @remote.  Returns 0, or -EINVAL (wrong node
 * or cookie: not the endpoint we expected), -ENOLINK (link down),
 * -EPROTO (its memory does not hold a valid endpoint).
 */
int ntbx_qp_connect(struct ntbx_qp *qp, const struct ntbx_qp_addr *remote);

/* This endpoint's address (as returned by create). */
void ntbx_qp_local_addr(const struct ntbx_qp *qp, struct ntbx_qp_addr *a);

/*
 * Open another handle on an existing local endpoint (after fork or exec,
 * or from another process of the node).  -EINVAL if @local does not name
 * a live endpoint of this node.
 */
int ntbx_qp_attach(struct ntbx_fabric *f, const struct ntbx_qp_addr *local,
                   struct ntbx_qp **qp);

/*
 * Close this handle.  If @last, also close the endpoint: the peer reads
 * everything already sent, then end of stream, and the endpoint's memory is
 * freed once both sides are closed.
 */
void ntbx_qp_close(struct ntbx_qp *qp, int last);

/* ------------------------------------------------------------- stream */

/*
 * Write up to @len bytes; returns the count written (> 0), or
 *   -EAGAIN      NONBLOCK and no room
 *   -EPIPE       this side was shut down for writing, or the peer closed
 *   -ECONNRESET  the peer's node died
 *   -EPROTO      the queue pair failed (corrupt peer)
 *   -ETIMEDOUT   never: writes wait as long as the peer lives
 * Blocking writes return once at least one byte is written and no more
 * fits, or everything is written.
 */
ssize_t ntbx_qp_write(struct ntbx_qp *qp, const void *buf, size_t len,
                      int flags);

/*
 * Read up to @len bytes; returns the count (> 0), 0 at end of stream, or
 * -EAGAIN, -ECONNRESET, -EPROTO as above.
 */
ssize_t ntbx_qp_read(struct ntbx_qp *qp, void *buf, size_t len, int flags);

/* Half-close: the peer reads end of stream after what was written. */
int ntbx_qp_shutdown(struct ntbx_qp *qp);

/*
 * After the queue pair failed (its link went down): copy bytes of the
 * stream that landed in our ring and were not read yet into @buf, without
 * returning credits.  Returns the count, 0 at the peer's end of stream,
 * -EAGAIN when nothing more landed, or -errno (a corrupt record).  For a
 * caller that carries the stream on by other means (the sockets layer's
 * fail-over to its shadow TCP connection).
 */
ssize_t ntbx_qp_read_landed(struct ntbx_qp *qp, void *buf, size_t len);

/*
 * Zero-copy send: reserve room for one message of up to @max bytes in the
 * peer's memory and fill it in place, then send it with
 * ntbx_qp_send_commit or give it up with ntbx_qp_send_abort (one of the
 * two before any other send call on this handle).  *buf is the buffer the
 * peer posted for this message, if there is one and @max fits, else the
 * payload of the next record of the peer's ring.  It is the peer's memory:
 * write into it, never read from it (write remote, read local).
 * Returns @max, or the errors of ntbx_qp_send, -EBUSY (a reservation is
 * pending), -EMSGSIZE (no posted buffer and @max is more than one ring
 * record, ring_size / 4 - 64), -EOPNOTSUPP (the peer is more than one hop
 * away: use ntbx_qp_send).  With NONBLOCK, -EAGAIN when there is no room.
 */
ssize_t ntbx_qp_send_reserve(struct ntbx_qp *qp, void **buf, size_t max,
                             int flags);

/*
 * Send the first @len bytes of the reservation (@len <= max, 0 allowed)
 * as one message; bytes written beyond @len are not sent and harm
 * nothing.  Returns @len, -EINVAL (no reservation, or @len beyond
 * it: the reservation is given up), -EPIPE, -ECONNRESET, -EPROTO (the
 * peer closed, died or failed meanwhile: nothing is sent).
 */
ssize_t ntbx_qp_send_commit(struct ntbx_qp *qp, size_t len);

/*
 * Give the reservation up; @written: how many bytes from the start of
 * *buf were written (they are made harmless in the peer's ring).  Nothing
 * is sent.  A no-op without a reservation.
 */
void ntbx_qp_send_abort(struct ntbx_qp *qp, size_t written);

/* ----------------------------------------------------------- messages */

/*
 * Send one message of @len bytes (0 allowed), kept whole: returns @len, or
 * the errors of ntbx_qp_write.  Large messages are pushed into a buffer the
 * receiver posted, if there is one.
 */
ssize_t ntbx_qp_send(struct ntbx_qp *qp, const void *buf, size_t len,
                     int flags);

/*
 * Receive one whole message into @buf; returns its length, or -EMSGSIZE if
 * it does not fit in @cap (the message stays queued; ntbx_qp_peek_len tells
 * its size), 0-length messages return 0 with *eof unset, end of stream
 * returns 0 with *eof set (eof may be NULL for callers that use ntbx_qp_read
 * semantics), or the errors of ntbx_qp_read.
 */
ssize_t ntbx_qp_recv(struct ntbx_qp *qp, void *buf, size_t cap, int flags,
                     int *eof);

/* Length of the next whole message, or -EAGAIN if none is complete. */
ssize_t ntbx_qp_peek_len(struct ntbx_qp *qp);

/*
 * Post a receive buffer in this node's memory (offset @off, @len bytes).
 * The next message of at least NTBX_QP_PUSH_MIN bytes that fits is written
 * straight into it by the sender; ntbx_qp_recv_posted then returns it.
 * Up to NTBX_QP_MAX_POSTED buffers may be outstanding, used in order.
 * Returns 0, or -EINVAL (outside node memory), -ENOBUFS (too many posted).
 */
#define NTBX_QP_PUSH_MIN    (32u << 10)
#define NTBX_QP_MAX_POSTED  8
int ntbx_qp_post_recv(struct ntbx_qp *qp, uint64_t off, size_t len);

/*
 * Wait for the next message.  If it was pushed into a posted buffer,
 * *off is that buffer's offset and the return value the length; if it came
 * through the ring, it is copied to the oldest posted buffer, which is
 * returned the same way (so callers see one behaviour).  Errors as
 * ntbx_qp_recv.
 */
ssize_t ntbx_qp_recv_posted(struct ntbx_qp *qp, uint64_t *off, int flags);

/*
 * Zero-copy receive: the next whole message where it lies, without copying
 * it.  Returns its length (0 allowed) with *msg pointing at its bytes, 0
 * with *eof set at end of stream (eof may be NULL), or the errors of
 * ntbx_qp_recv, -EBUSY (the previous message was not released), -EINVAL
 * (the head message was partly read by ntbx_qp_read), -ENOBUFS (below).
 * *msg is read-only and stays valid until ntbx_qp_recv_zc_done; the
 * message is consumed (and its ring space given back) only then, which
 * must come before the next receive call on this handle.
 *   - A message that fits one ring record (up to ring_size / 4 - 64
 *     bytes) is handed out in place, in this endpoint's ring: local
 *     memory, but written by the peer, so the bytes are untrusted (the
 *     length is checked; the contents may change under a corrupt peer).
 *   - A message pushed into a posted buffer is handed out there.
 *   - A message of several ring records is copied into its posted buffer
 *     first, as ntbx_qp_recv_posted does; -ENOBUFS if it has none
 *     (nothing consumed: ntbx_qp_recv takes it).
 * *off is the posted buffer the message used up, whether its bytes are
 * there or in the ring: it is the caller's again (post it again, after
 * ntbx_qp_recv_zc_done if *msg points into it), or NTBX_QP_NO_BUF.
 */
#define NTBX_QP_NO_BUF UINT64_MAX
ssize_t ntbx_qp_recv_zc(struct ntbx_qp *qp, const void **msg, uint64_t *off,
                        int flags, int *eof);

/*
 * Consume the message the last ntbx_qp_recv_zc returned (a no-op when
 * there is none, or it was pushed or copied).  Returns 0, or -EINVAL if
 * another receive call consumed it meanwhile.
 */
int ntbx_qp_recv_zc_done(struct ntbx_qp *qp);

/* ---------------------------------------------------------- readiness */

#define NTBX_QP_READABLE 0x1  /* data or end of stream to read */
#define NTBX_QP_WRITABLE 0x2  /* room to write */
#define NTBX_QP_HUP      0x4  /* peer closed or shut down its writing */
#define NTBX_QP_ERROR    0x8  /* failed: reads and writes return the error */

/* Current readiness, without waiting. */
int ntbx_qp_poll(struct ntbx_qp *qp);

/* The same, for @events only: NTBX_QP_WRITABLE is looked at only when
 * asked (NTBX_QP_HUP and NTBX_QP_ERROR always), and a look for reading
 * touches none of the lines the writing side needs. */
int ntbx_qp_poll_for(struct ntbx_qp *qp, int events);

/*
 * Whether something may have arrived for the reader: one load of the line
 * the peer's next record lands on, no lock, no other shared line.  For
 * spin loops between calls of ntbx_qp_poll, which decides: 1 can be a
 * record ntbx_qp_poll finds incomplete, and 0 says nothing about a peer
 * that died or a queue pair that failed.
 */
int ntbx_qp_rx_hint(const struct ntbx_qp *qp);

/*
 * Wait until one of @events is ready; returns the readiness mask, or
 * -ETIMEDOUT, -EINTR.  timeout_ms < 0 waits forever (still noticing a peer
 * that dies).
 */
int ntbx_qp_wait(struct ntbx_qp *qp, int events, int timeout_ms);

/*
 * Prepare to sleep outside ntbx_qp_wait, in an event loop: publish the
 * credits for what was read and ask the peer to ring this endpoint's
 * doorbell when @events (NTBX_QP_READABLE, NTBX_QP_WRITABLE) may have
 * become ready.  The ring reaches sleepers and ntbx_db_event_fd() of the
 * device for doorbell bits 9..15 on every port.  Returns the readiness
 * mask after arming (check it before sleeping), or -ENOTCONN.
 */
int ntbx_qp_arm(struct ntbx_qp *qp, int events);

/*
 * The port and doorbell bit (a mask of one bit) whose ring, after
 * ntbx_qp_arm, wakes this endpoint's sleepers: what an event loop
 * registers on its own wake object (ntbx_db_wake_prepare) before arming.
 */
void ntbx_qp_wake_bit(const struct ntbx_qp *qp, int *port, uint32_t *bits);

/*
 * The wake key (include/ntbx/dev.h) that the peer's rings of this
 * endpoint name: an event loop adds bit (1 << key) to the keys it
 * registers (ntbx_db_wake_prepare_keys), so that it sleeps through the
 * rings of the other queue pairs that share its doorbell bit.
 */
int ntbx_qp_wake_key(const struct ntbx_qp *qp);

/*
 * The blocking calls on this queue pair sleep on @wk, a waiter slot of the
 * calling thread's own (ntbx_db_sleeper_open), instead of the handle's
 * shared one: a thread that alone waits on this queue pair (a progress
 * thread) is then woken only by its own doorbell bit, and the handle's
 * other sleepers no longer by its rings.  Only one thread may block on
 * the queue pair while it is set; NULL returns to the shared slot.  The
 * caller closes @wk after the queue pair.
 */
void ntbx_qp_set_sleeper(struct ntbx_qp *qp, struct ntbx_db_wake *wk);

/*
 * Ring the peer endpoint's wake bit once, whether or not it armed: for a
 * change outside the queue pair that the peer's sleepers wait for (the
 * sockets layer's answer to a connection request).  Make the change
 * visible first; the ring follows a full barrier.  0, -ENOTCONN, or
 * -EOPNOTSUPP when the peer is more than one hop away (its sleepers must
 * then look again by themselves).
 */
int ntbx_qp_notify(struct ntbx_qp *qp);

/* Before this process loses the right to open files: keep open the wake
 * FIFOs of the other end's poll/epoll sleepers (ntbx_db_keep_wakes).
 * How many, or -errno (-EOPNOTSUPP beyond one hop). */
int ntbx_qp_keep_peer_wakes(struct ntbx_qp *qp);

/*
 * The CPU the thread that writes our ring last ran on: the peer's writer
 * (it says so on its next send when it moved), or over forwarding our
 * node's transfer thread that delivered last; -1 if not known (nothing
 * sent yet).  A hint from memory others write, for the wait policy only.
 */
int ntbx_qp_peer_cpu(const struct ntbx_qp *qp);

/* Counters of this endpoint (shared by all its handles). */
struct ntbx_qp_stats {
	uint64_t tx_bytes, rx_bytes;
	uint64_t tx_records, rx_records;
	uint64_t pushed_bytes;   /* bytes that skipped the ring */
	uint64_t doorbells;      /* doorbells this side rang */
	uint64_t sleeps;         /* times this side slept */
};
void ntbx_qp_get_stats(struct ntbx_qp *qp, struct ntbx_qp_stats *s);

/* Number of hops to the peer (0 on the same node). */
int ntbx_qp_hops(const struct ntbx_qp *qp);

/* ------------------------------------------------- ring forwarding */

#define NTBX_QP_MAX_THREADS 8

/*
 * Start this node's transfer threads for ring forwarding: @nthreads (1..8)
 * threads, thread t waiting on doorbell bit 1+t of both ports.  Exactly one
 * process per node forwards; in the others this returns 0 and does
 * nothing (1 is returned by the process that became the forwarder).
 * Queue pairs with non-neighbours need a forwarder on every node of the
 * path, both ends included.  No-op (0) on a switch.
 */
int ntbx_qp_forwarder_start(struct ntbx_fabric *f, int nthreads);

/* Stop this process's transfer threads (ntbx_fabric_leave does it too). */
void ntbx_qp_forwarder_stop(struct ntbx_fabric *f);

#ifdef __cplusplus
}
#endif
#endif /* NTBX_QP_H */
