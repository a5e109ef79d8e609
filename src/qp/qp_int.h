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
#define QP_VERSION   3u   /* 2: sleep counters out of rx/tx; 3: on one
                           * host the writer zeroes the lines of large
                           * records (the record header) */
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
 *         "not written yet": stale bytes of an earlier lap must never look
 *         like a header, so the first word of a line where a header will go
 *         is zero before that header's predecessor becomes valid.  Who
 *         zeroes it:
 *         - the reader, for the lines of every record of at most
 *           QP_RZERO_MAX bytes it consumed (qp_ring_zero), and for every
 *           record on a queue pair whose writer does not zero (below): a
 *           small record's lines are the ones the reader just read, so
 *           zeroing them costs it no transfer;
 *         - on a queue pair written by CPU stores or a DMA engine of this
 *           host (struct ntbx_qp, wz), the writer, for the lines of larger
 *           records: it zeroes the line after each record it writes if
 *           that line was last written inside such a record (struct
 *           qp_zmap), before the record's seq, and waits for the reader
 *           to have given that line back too (qp_zmap_need).  A reader that
 *           zeroed a large record's lines would pull each one into its own
 *           cache, and the writer would pull it back a lap later: a 64 KiB
 *           stream ran at 0.78 of the bare cache-to-cache hand-off that
 *           way, 0.94-0.99 without (design notes).  Across hosts (a zero
 *           would be one more network write) and on the forwarder's
 *           multi-hop rings the reader zeroes everything;
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
/* Records of at most this many bytes (header and padding included) are
 * zeroed by their reader on every queue pair (the record header above). */
#define QP_RZERO_MAX  16384u
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
 * including a PAD record if it does not fit before the ring's end (a
 * writer that zeroes: qp_zmap_need).
 */
uint64_t qp_tx_need(uint32_t size, uint64_t wpos, uint32_t len);

/*
 * Which lines of a peer's ring its writer must zero before a header goes
 * there (a writer that zeroes, the record header above): one bit per line,
 * set when the line may hold what a record of more than QP_RZERO_MAX bytes
 * left there (its reader leaves it as it is), clear when the line was
 * zeroed since (by the writer, or as a fresh ring) and written since only
 * inside small records, which their reader zeroes.  It lives in the
 * writer's handle, not in shared memory; it describes the ring only while
 * this handle wrote last, which the shared write index tells (another
 * process of the node that attached, or a forked child, may have written
 * since): qp_zmap_sync sets every bit when it does not, which only costs
 * zeroes.  The peer cannot steer it: it is never in shared memory, and a
 * peer that scribbles on our write index at worst makes us zero more.
 */
struct qp_zmap {
	uint32_t size;       /* the ring's bytes */
	uint64_t wpos;       /* the write index this map was left at */
	int64_t zpad, zrec;  /* where the last qp_tx_put zeroed (-1: nowhere),
	                      * for a DMA writer, which sends those zeroes */
	uint64_t nset;       /* bits set: none, the common case of small
	                      * records, costs a record no bit work */
	uint64_t bits[];     /* size / QP_LINE bits */
};
/* A map for a fresh ring of @size bytes (free() it), NULL: no memory. */
struct qp_zmap *qp_zmap_new(uint32_t size);
/* Lines [pos, pos + bytes) may hold anything now (a large record, or
 * zero-copy room written beyond what was sent).  @z NULL: nothing. */
void qp_zmap_dirty(struct qp_zmap *z, uint64_t pos, uint64_t bytes);
/* Every bit to @on (qp_zmap_sync). */
void qp_zmap_fill(struct qp_zmap *z, int on);

/* Before writing at @wpos (checked): a fresh ring (0) is all zero; any
 * other index than the one this map was left at: set every bit.
 * qp_tx_put does it, and leaves the map at the index it returns. */
static inline void qp_zmap_sync(struct qp_zmap *z, uint64_t wpos)
{
	if (z && wpos != z->wpos) {
		qp_zmap_fill(z, wpos != 0);
		z->wpos = wpos;
	}
}

static inline int qp_zmap_has(const struct qp_zmap *z, uint64_t line)
{
	return (z->bits[line / 64] >> (line % 64)) & 1;
}

/*
 * qp_tx_need, and the line after the record when the writer must zero it
 * (its bit is set, or the map was not left at @wpos): that line must have
 * been given back by the reader too.  @z NULL: qp_tx_need.
 */
static inline uint64_t qp_zmap_need(const struct qp_zmap *z, uint32_t size,
                                    uint64_t wpos, uint32_t len)
{
	uint64_t need = qp_tx_need(size, wpos, len);
	if (!z || (!z->nset && z->wpos == wpos))
		return need;
	uint64_t rb = qp_rec_bytes(len);
	uint64_t pos = wpos & (size - 1);
	uint64_t q = pos + rb > size ? rb : (pos + rb) & (size - 1);
	return need + (z->wpos != wpos || qp_zmap_has(z, q / QP_LINE)
	               ? QP_LINE : 0);
}

/*
 * A record of @rb bytes goes at ring position @pos, the next header @zb
 * bytes after @pos (@rb; a PAD's: the ring's end).  Returns the position
 * of the next header's line if the writer must zero it now (its bit, which
 * this clears), else -1, and notes a record its reader will not zero.  A
 * small record's bits are left as they were: a set bit only costs one
 * zero, the next time its line gets a header.  @z NULL (a writer that
 * does not zero): -1.
 */
static inline int64_t qp_zmap_rec(struct qp_zmap *z, uint64_t pos,
                                  uint64_t rb, uint64_t zb)
{
	if (!z || (!z->nset && rb <= QP_RZERO_MAX))
		return -1;
	/* a record never covers the next header's line, and zero-copy room
	 * written beyond the record was marked before (qp_zmap_dirty) */
	uint64_t q = ((pos + zb) & (z->size - 1)) / QP_LINE;
	int64_t at = -1;
	if (qp_zmap_has(z, q)) {
		z->bits[q / 64] &= ~(1ull << (q % 64));
		z->nset--;
		at = (int64_t)(q * QP_LINE);
	}
	if (rb > QP_RZERO_MAX)
		qp_zmap_dirty(z, pos, rb);
	return at;
}

/*
 * Write a record into @ring (a peer's ring, seen through a window) at
 * @wpos: a PAD first if needed.  Payload first, header, seq last
 * (release).  Returns the new write index.  Credits are the caller's job.
 * @payload NULL: a record without payload bytes whose len field is @len
 * (PUSH: the length of the message in the posted buffer).  @z: the
 * writer zeroes (qp_zmap), NULL if not.
 */
uint64_t qp_tx_put(uint8_t *ring, uint32_t size, uint64_t wpos, uint16_t type,
                   uint16_t flags, uint32_t aux, const void *payload,
                   uint32_t len, struct qp_zmap *z);
/*
 * Write one record (no PAD logic) at ring position @pos for index @idx.
 * @zpos: a line to zero before the seq (qp_zmap_rec), or -1.
 */
void qp_rec_write(uint8_t *ring, uint64_t pos, uint64_t idx, uint16_t type,
                  uint16_t flags, uint32_t aux, const void *payload,
                  uint32_t len, int64_t zpos);

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
	int wz;              /* the writer zeroes the lines of large records
	                      * (the record header): leave them */
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
/* [pos, pos + bytes) of the mirror, header and payload, then (@znext >= 0)
 * a zero into the first word at ring position @znext (the next header's
 * line; from a buffer of its own, never the mirror, where the next record
 * may put its seq before the engine has read the word), sequence word
 * last */
int qp_dout_rec(struct qp_dout *d, uint64_t pos, uint64_t bytes,
                int64_t znext);
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
