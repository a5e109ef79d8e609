/* SPDX-License-Identifier: MIT */
/*
 * Queue-pair layer, private: the shared-memory layout of an endpoint
 * ("half"), the record format of its ring, the receive core and the ring
 * forwarder.  Nothing here is a pointer in shared memory: only offsets and
 * monotonic 64-bit byte indexes (position in a ring = index & (size - 1)).
 *
 * Who writes what (write remote, read local).  Endpoint A (in node a's
 * memory) and endpoint B (in node b's memory) form a queue pair:
 *
 *   A.ring         records B sends to A        written by B, read by A
 *   A.tx_tail      how much of A's sends B     written by B (its reader),
 *                  has consumed: A's credits   read by A's writer
 *   A.rx_armed     B's reader is going to      written by B (its reader),
 *                  sleep: A's writer rings     read by A's writer
 *   A.tx_wants     B's writer is waiting for   written by B (its writer),
 *                  room in A.ring: A's reader  read by A's reader
 *                  publishes credits and rings
 *   A.adv[]        buffers B posted for A's    written by B, read by A's writer
 *                  pushes (adverts)
 *   A.peer_closed  B closed its endpoint       written by B
 *   A.tx / A.rx    A's own writer and reader   written and read by A only
 *                  state (so another process of node a that attaches to
 *                  A continues where the last one stopped)
 *
 * Fields written by different sides live on different cache lines (the
 * model is Linux drivers/ntb/ntb_transport.c and DPDK rte_ring.h).  On a
 * ring topology with the peer more than one hop away, B cannot store into
 * A directly: the fields marked "written by B" are then written by node a's
 * forwarder on B's behalf (ACK and CLOSE frames), and the sleep flags are
 * the local ones (self_rx_armed / self_tx_armed) that a's forwarder reads.
 */
#ifndef NTBX_QP_INT_H
#define NTBX_QP_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/util.h"

#define QP_LINE      64u
#define QP_REC_HDR   16u
#define QP_HALF_HDR  4096u          /* bytes before the ring in a half */
#define QP_MAGIC     0x31485051584e544eull   /* "NTNXQPH1" */
#define QP_SPARE     0x31535051584e544eull   /* "NTNXQPS1": a closed half
                                              * whose ring is all zero, kept
                                              * for the next endpoint (qp.c) */
#define QP_VERSION   2u   /* 2: sleep counters out of rx/tx */
#define QP_TAG       "ntbx-qp"

/* Record types (u16) and flags. */
enum {
	QP_T_DATA = 1,   /* payload follows the header */
	QP_T_PAD = 2,    /* fills the ring's tail; the next record is at 0 */
	QP_T_PUSH = 3,   /* payload is in a posted buffer; aux = advert seq */
	QP_T_EOF = 4,    /* the writer shut down */
	QP_T_ACK = 5,    /* multi-hop credits (bypass frames only) */
	QP_T_FRAME = 6,  /* bypass ring: a forwarded frame */
	QP_T_CLOSE = 7,  /* multi-hop: the sender closed (bypass frames only) */
};
#define QP_F_MORE 0x1u   /* message continues in the next record */

/*
 * Record header, at a 64-byte aligned position of a ring; payload follows
 * at +16; the record is padded to a multiple of 64 and never wraps.
 *   seq   (record start index / 64) + 1 truncated to 32 bits, never 0;
 *         written last with release semantics, read with acquire; 0 means
 *         "not written yet" (the reader zeroes the first word of every
 *         64-byte line of a record it consumed, so stale bytes of an earlier
 *         lap can never look like a header);
 *   len   payload bytes in this record (PUSH: bytes in the posted buffer);
 *   type  QP_T_*;  flags  QP_F_*;
 *   aux   DATA: first record of a message: the message's total length;
 *         continuation record: bytes of the message before this record.
 *         PUSH: the advert's seq.  Others: 0.
 */
struct qp_rec_hdr {
	uint32_t seq;
	uint32_t len;
	uint16_t type;
	uint16_t flags;
	uint32_t aux;
};

static inline uint32_t qp_seq_of(uint64_t idx)
{
	uint32_t s = (uint32_t)(idx / QP_LINE + 1);
	return s ? s : 1;
}
static inline uint64_t qp_rec_bytes(uint64_t len)
{
	return NTBX_ALIGN_UP(QP_REC_HDR + len, QP_LINE);
}
/* Largest payload of one record in a ring of @size bytes. */
static inline uint32_t qp_max_payload(uint32_t size)
{
	return size / 4 - QP_LINE;
}

/*
 * An advert: a receive buffer the peer posted, written by the peer into our
 * half (seqlock: seq is 0 while the peer rewrites the slot, then the new
 * seq with release).  seq counts adverts from 1; slot = (seq - 1) % 8.
 * The buffer belongs to the peer's message number @msg exactly (messages
 * counted from 0 by both sides): if our message number @msg qualifies for a
 * push we write into [off, off+len) of the peer's node memory; otherwise
 * (too small, too big, or we only saw the advert after sending that
 * message) the message goes through the ring and the peer copies it there.
 */
struct qp_adv {
	uint32_t seq;
	uint32_t pad_;
	uint64_t off, len, msg;
};

/* A buffer we posted, as the reader remembers it (local). */
struct qp_posted {
	uint64_t off, len, msg;
	uint32_t seq, pad_;
};

#define QP_NPOST 8   /* NTBX_QP_MAX_POSTED */

/* Half state bits (h->state, owner-written). */
#define QP_ST_CONNECTED 0x1u
#define QP_ST_SHUT_WR   0x2u   /* we wrote EOF */
#define QP_ST_CLOSED    0x4u   /* endpoint closed by its owner */
#define QP_ST_FAILED    0x8u   /* h->error holds the reason */

/*
 * Reader state (owner node only).  Also the whole state the receive core
 * works on, so the fuzzer feeds it arbitrary values too: every field is
 * checked before use.
 */
struct qp_rxs {
	uint64_t rpos;       /* index of the record being read */
	uint32_t roff;       /* payload bytes of that record already consumed */
	uint32_t in_msg;     /* 1: a message has started and not ended */
	uint64_t msg_total;  /* current message: its total length */
	uint64_t msg_done;   /* ... bytes in its records before rpos's */
	uint64_t msg_next;   /* number of the next message to start */
	uint64_t published;  /* last consumed index published to the writer */
	uint32_t wants_ack;  /* last peer tx_wants value we answered */
	uint32_t eof;        /* 1: end of stream seen */
	uint32_t cur_bound;  /* current message has a posted buffer: cur */
	struct qp_posted cur;
	/* posted buffers, oldest first: seqs [post_tail, post_head) */
	uint32_t post_head, post_tail;
	struct qp_posted posted[QP_NPOST];
};

/* Writer state (owner node only). */
struct qp_txs {
	uint64_t wpos;       /* index where our next record goes in the peer ring */
	uint64_t msgs;       /* messages sent (the number of the next one) */
	uint64_t tail_seen;  /* last credits (peer consumed index) accepted */
	uint32_t adv_next;   /* seq of the next advert to look at (from 1) */
	uint32_t armed_ack;  /* last peer rx_armed value we answered */
};

#define QP_ALIGNED __attribute__((aligned(64)))

struct qp_half {
	/* -- line: identity, written once by the creator before magic (release);
	 *    read by the peer once at connect (the only load from a peer's
	 *    memory, setup time only, fully validated) and by attach/forwarders. */
	struct {
		uint64_t magic;
		uint32_t version;
		uint32_t ring_size;   /* power of two; the ring follows at QP_HALF_HDR */
		uint64_t cookie;      /* random, low 8 bits = log2(ring_size) */
		uint32_t node;        /* owner node */
		uint32_t epoch;       /* owner node's epoch at creation */
		uint32_t peer_node;   /* the node this endpoint talks to */
		uint32_t flags;       /* NTBX_QP_* options */
		uint64_t size;        /* bytes of the block (header + ring) */
		uint32_t db_bit;      /* doorbell bit our sleepers wait on */
		int32_t wake_port;    /* port our sleepers wait on */
		int32_t hops;         /* 0 loopback, 1 neighbour, >1 forwarded */
		int32_t first_port;   /* port toward the peer (-1 loopback) */
	} id QP_ALIGNED;
	/* -- line: connection state, owner-written. */
	struct {
		uint64_t peer_off, peer_cookie;   /* peer half */
		uint32_t peer_ring, peer_epoch, peer_bit;
		uint32_t state;                   /* QP_ST_* */
		int32_t error;                    /* -errno once failed */
		uint32_t refs;                    /* open handles (attach/close) */
	} conn QP_ALIGNED;
	/* -- line: written by the peer (or our forwarder): peer closed.
	 *    0, or 1 + the peer writer's final index: end of stream there. */
	uint64_t peer_closed QP_ALIGNED;
	/* -- line: written by the peer's reader, read by our writer. */
	struct {
		uint64_t tx_tail;     /* credits: peer consumed of our sends */
		uint32_t rx_armed;    /* bumped when the peer reader sleeps */
		uint32_t cpu;         /* 1 + the CPU that last gave us credits
		                       * (over forwarding: our node's transfer
		                       * thread), 0 unknown: a hint for the wait
		                       * policy, any value harmless */
	} pr QP_ALIGNED;
	/* -- line: written by the peer's writer, read by our reader. */
	struct {
		uint32_t tx_wants;    /* bumped when the peer writer waits for room */
		uint32_t cpu;         /* 1 + the CPU the peer's writer last sent
		                       * from (over forwarding: the CPU of our
		                       * node's transfer thread that delivered
		                       * last), 0 unknown: a hint for the wait
		                       * policy, any value harmless */
	} pw QP_ALIGNED;
	/* -- lines: adverts, written by the peer's reader (post_recv). */
	struct qp_adv adv[QP_NPOST] QP_ALIGNED;
	/* -- line: multi-hop sleep flags: set by our reader/writer, exchanged
	 *    to 0 by our node's forwarder, which then rings us locally. */
	struct {
		uint32_t rx_armed;
		uint32_t tx_armed;
	} self QP_ALIGNED;
	/* -- line: our sleep counters, bumped (atomically, never indexed)
	 *    each time our reader (writer) says it goes to sleep; the value
	 *    written to the peer's pr.rx_armed (pw.tx_wants).  Only a change
	 *    matters, so they stay out of the rx/tx snapshots: a stale copy
	 *    stored back could repeat a value the peer already answered. */
	struct {
		uint32_t rx_armed;
		uint32_t tx_wants;
	} seq QP_ALIGNED;
	/* -- our writer state and counters (our writer only). */
	struct qp_txs tx QP_ALIGNED;
	struct {
		uint64_t bytes, records, pushed, doorbells, sleeps;
	} txstat QP_ALIGNED;
	/* -- our reader state and counters (our reader only). */
	struct qp_rxs rx QP_ALIGNED;
	struct {
		uint64_t bytes, records, doorbells, sleeps;
	} rxstat QP_ALIGNED;
};

_Static_assert(sizeof(struct qp_half) <= QP_HALF_HDR, "half header too big");
_Static_assert(sizeof(struct qp_rec_hdr) == QP_REC_HDR, "record header");

/* ------------------------------------------------------ ring helpers */

/*
 * Bytes the writer needs at @wpos for a record of @len payload bytes,
 * including a PAD record if it does not fit before the ring's end.
 */
uint64_t qp_tx_need(uint32_t size, uint64_t wpos, uint32_t len);

/*
 * Write a record into @ring (a peer's ring, seen through a window) at
 * @wpos: a PAD first if needed.  Payload first, header, seq last
 * (release).  Returns the new write index.  Credits are the caller's job.
 * @payload NULL: a record without payload bytes whose len field is @len
 * (PUSH: the length of the message in the posted buffer).
 */
uint64_t qp_tx_put(uint8_t *ring, uint32_t size, uint64_t wpos, uint16_t type,
                   uint16_t flags, uint32_t aux, const void *payload,
                   uint32_t len);
/* Write one record (no PAD logic) at ring position @pos for index @idx. */
void qp_rec_write(uint8_t *ring, uint64_t pos, uint64_t idx, uint16_t type,
                  uint16_t flags, uint32_t aux, const void *payload,
                  uint32_t len);

/*
 * Look at the record at @rpos of a ring we read.  Returns 1 with *h filled
 * (validated: seq, position, len <= @max_payload, and the record inside
 * the ring; PAD records are returned as such), 0 if none is there yet,
 * -EPROTO if what is there is not a valid record.
 */
int qp_ring_head(const uint8_t *ring, uint32_t size, uint64_t rpos,
                 uint32_t max_payload, struct qp_rec_hdr *h);

/* Zero the first word of each 64-byte line of [rpos, rpos+bytes). */
void qp_ring_zero(uint8_t *ring, uint32_t size, uint64_t rpos, uint64_t bytes);

/* ------------------------------------------------------ receive core */

/*
 * What the receive core needs: our ring, our reader state, our node memory
 * (posted buffers live there), and a snapshot of peer_closed.  The real
 * receiver and the fuzzer build this the same way.
 */
struct qp_rx {
	uint8_t *ring;
	uint32_t size;
	struct qp_rxs *s;
	uint8_t *mem;
	uint64_t mem_size;
	uint64_t peer_closed;
};

/* Result codes of the core besides byte counts / -errno. */
#define QP_RX_NONE  (-EAGAIN)

/*
 * Status of the head of the stream: 1 data (or a whole record) available,
 * 0 end of stream, -EAGAIN nothing yet, -EPROTO corrupt.  Consumes PADs.
 */
int qp_rx_status(struct qp_rx *r);

/*
 * The same question asked from any thread while another reads: nothing is
 * consumed, validated or written.  1 something to read (or garbage for
 * the reader to find), 0 end of stream, -EAGAIN nothing yet.
 */
int qp_rx_peek(const struct qp_rx *r);

/* Stream read: up to @len bytes; > 0 count, 0 EOF, -EAGAIN, -EPROTO. */
ssize_t qp_rx_read(struct qp_rx *r, void *buf, size_t len);

/*
 * Length of the rest of the current message (or of the next one), from
 * its first visible record: >= 0, -EAGAIN, -EPROTO; *eof set at EOF.
 */
ssize_t qp_rx_msg_len(struct qp_rx *r, int *eof);

/*
 * Receive the rest of the current message into @buf (@cap bytes), which
 * already holds *got bytes of it from earlier calls.  Returns 1 when the
 * message is complete (*got = its length), -EAGAIN when more records are
 * needed (call again with the same *got), 0 at EOF (only with *got == 0),
 * -EMSGSIZE (only with *got == 0; nothing consumed), -EPROTO.
 * @posted: instead of @buf, deliver into the message's posted buffer;
 * *off receives that buffer's offset (-ENOBUFS if it has none).
 */
int qp_rx_recv(struct qp_rx *r, void *buf, size_t cap, size_t *got,
               int posted, uint64_t *off);

/*
 * Zero-copy receive of the head message, where it lies.
 *   1  it was pushed: *p, *len in the posted buffer at *off; consumed.
 *   2  one DATA record in the ring: *p, *len point into the ring, *off is
 *      the posted buffer the message took (UINT64_MAX if none), *h the
 *      validated record header; the message is started but the record is
 *      not consumed: qp_rx_zc_done(@r, its rpos, *h) consumes it.
 *   3  several records: nothing consumed (the caller copies it).
 *   0  EOF; -EAGAIN; -EPROTO; -EINVAL: a message partly read by
 *      another kind of call (a stream read) is at the head.
 */
#define QP_RX_ZC_PUSHED 1
#define QP_RX_ZC_HELD   2
#define QP_RX_ZC_COPY   3
int qp_rx_zc(struct qp_rx *r, const uint8_t **p, uint32_t *len,
             uint64_t *off, struct qp_rec_hdr *h);
/* Consume the record qp_rx_zc held at @rpos (@h as it returned it).
 * 0, or -EINVAL if the reader state no longer matches (nothing done). */
int qp_rx_zc_done(struct qp_rx *r, uint64_t rpos, const struct qp_rec_hdr *h);

/* Post a buffer (validated against mem_size); -EINVAL, -ENOBUFS.  *adv
 * receives the advert to send to the peer. */
int qp_rx_post(struct qp_rx *r, uint64_t off, uint64_t len,
               struct qp_adv *adv);

/* ------------------------------------------- writing by DMA (qp_dma.c) */

/*
 * A peer's half reached only by DMA (the backend maps no peer window): a
 * writer for the half at window 0 offset @base of @port, whose ring is
 * @size bytes at @ring_off in it (QP_HALF_HDR; fwd.c: a bypass ring in a
 * link block).  Records are built in qp_dout_ring(), a private mirror of
 * the peer's ring, then sent with qp_dout_rec; control fields of the half
 * with qp_dout_field; pushes into posted buffers with qp_dout_bulk.  Each
 * returns 0 or -errno (then the queue pair fails).  Writes land in call
 * order, and before any later doorbell on the port (the device contract).
 */
struct ntbx_dev;
struct qp_dout;
int qp_dout_open(struct qp_dout **out, struct ntbx_dev *dev, int port,
                 uint64_t base, uint64_t ring_off, uint32_t size);
void qp_dout_close(struct qp_dout *d);
uint8_t *qp_dout_ring(struct qp_dout *d);
/* [pos, pos + bytes) of the mirror, header and payload, sequence word last */
int qp_dout_rec(struct qp_dout *d, uint64_t pos, uint64_t bytes);
/* @len <= 64 bytes at offset @off of the block, copied now */
int qp_dout_field(struct qp_dout *d, uint64_t off, const void *p, size_t len);
/* @len bytes of @p (valid until qp_dout_flush) at window offset @win_off */
int qp_dout_bulk(struct qp_dout *d, uint64_t win_off, const void *p,
                 size_t len);
/* 1 if everything submitted has landed */
int qp_dout_idle(struct qp_dout *d);
/* Wait until everything submitted has landed: 0 or -errno. */
int qp_dout_flush(struct qp_dout *d);

/* ------------------------------------------------------ forwarder */

struct ntbx_fabric;
struct ntbx_qp;

/* Frame header, after the bypass record header. */
struct qp_frame {
	uint32_t dst_node, src_node;
	uint64_t dst_off;     /* half offset in the destination's memory */
	uint64_t dst_cookie;
	uint64_t pos;         /* record index in the destination ring; ACK:
	                         new tail; CLOSE: final write index */
	uint16_t rtype, rflags;
	uint32_t rlen;
	uint32_t raux, src_hint;
};
_Static_assert(sizeof(struct qp_frame) == 48, "frame header");

#define QP_FWD_RINGS     8u
#define QP_FWD_CTL       (64u << 10)
#define QP_FWD_RING_SIZE (1u << 20)
/* Largest QP record payload carried over more than one hop. */
#define QP_FWD_MAX_PAYLOAD ((128u << 10) - QP_LINE)

/*
 * Inject one QP record as a frame toward @dst (first hop @port), from a
 * source process.  Blocks for bypass room unless @nonblock (-EAGAIN).
 * -ECONNRESET if the neighbour or destination died while waiting.
 */
int qp_fwd_inject(struct ntbx_fabric *f, int port, const struct qp_frame *fr,
                  const void *payload, int nonblock, int src_hint);

/* Deliver a frame whose destination is this node (forwarder threads and
 * the tests).  Returns 0, or -EPROTO if it does not match a live half. */
int qp_fwd_deliver(struct ntbx_fabric *f, const struct qp_frame *fr,
                   const uint8_t *payload);

/* Its core, on node memory [mem, mem + msz) (the fuzz target calls it):
 * checks the frame against the half it names and writes it there.  On 0,
 * *wake_port is the port whose doorbell bit *wake_bit wakes the endpoint's
 * sleeper, or -1 when it is not asleep.  Frames come from another node's
 * memory: every field is checked before use (-EPROTO). */
int qp_fwd_deliver_mem(uint8_t *mem, uint64_t msz, const struct qp_frame *fr,
                       const uint8_t *payload, int *wake_port,
                       uint32_t *wake_bit);

#endif
