/* SPDX-License-Identifier: MIT */
/*
 * Queue-pair records and the receive core.
 *
 * This file has no device dependency: it works on a ring and a reader state
 * given as plain memory, so the unit tests and the fuzzer run exactly the
 * code the real receiver runs (reader.c wraps it with waiting, credits and
 * doorbells).
 *
 * Everything in the ring is written by the peer and untrusted.  Everything
 * in the reader state is ours but lives in shared memory, so it is checked
 * too: no value of either makes this code touch memory outside the ring
 * and the node memory it was given.
 */
#include <errno.h>
#include <string.h>

#include "qp/qp_int.h"
#include "util/util.h"

uint64_t qp_tx_need(uint32_t size, uint64_t wpos, uint32_t len)
{
	uint64_t rb = qp_rec_bytes(len);
	uint64_t pos = wpos & (size - 1);
	return pos + rb > size ? (size - pos) + rb : rb;
}

void qp_rec_write(uint8_t *ring, uint64_t pos, uint64_t idx, uint16_t type,
                  uint16_t flags, uint32_t aux, const void *payload,
                  uint32_t len, int64_t zpos)
{
	struct qp_rec_hdr *h = (struct qp_rec_hdr *)(ring + pos);
	if (len && payload)
		ntbx_copy(ring + pos + QP_REC_HDR, payload, len);
	h->len = len;
	h->type = type;
	h->flags = flags;
	h->aux = aux;
	if (zpos >= 0)   /* the next header's line (qp_zmap_rec) */
		__atomic_store_n((uint32_t *)(ring + zpos), 0, __ATOMIC_RELAXED);
	/* Payload, the other header fields and the next header's zero become
	 * visible before seq. */
	__atomic_store_n(&h->seq, qp_seq_of(idx), __ATOMIC_RELEASE);
}

uint64_t qp_tx_put(uint8_t *ring, uint32_t size, uint64_t wpos, uint16_t type,
                   uint16_t flags, uint32_t aux, const void *payload,
                   uint32_t len, struct qp_zmap *z)
{
	uint64_t rb = qp_rec_bytes(payload ? len : 0);
	uint64_t pos = wpos & (size - 1);
	qp_zmap_sync(z, wpos);
	if (z)
		z->zpad = -1;
	if (pos + rb > size) {
		int64_t zp = qp_zmap_rec(z, pos, QP_LINE, size - pos);
		qp_rec_write(ring, pos, wpos, QP_T_PAD, 0, 0, NULL, 0, zp);
		if (z)
			z->zpad = zp;
		wpos += size - pos;
		pos = 0;
	}
	int64_t zr = qp_zmap_rec(z, pos, rb, rb);
	qp_rec_write(ring, pos, wpos, type, flags, aux, payload, len, zr);
	if (z) {
		z->zrec = zr;
		z->wpos = wpos + rb;
	}
	return wpos + rb;
}

int qp_ring_head(const uint8_t *ring, uint32_t size, uint64_t rpos,
                 uint32_t max_payload, struct qp_rec_hdr *h)
{
	uint64_t pos = rpos & (size - 1);
	if (pos & (QP_LINE - 1))
		return -EPROTO;
	const struct qp_rec_hdr *r = (const struct qp_rec_hdr *)(ring + pos);
	uint32_t seq = __atomic_load_n(&r->seq, __ATOMIC_ACQUIRE);
	if (seq == 0)
		return 0;
	if (seq != qp_seq_of(rpos))
		return -EPROTO;
	/* One copy of the header: the peer may change it under us, we use only
	 * what we validated. */
	const volatile struct qp_rec_hdr *vr = r;
	h->seq = seq;
	h->len = vr->len;
	h->type = vr->type;
	h->flags = vr->flags;
	h->aux = vr->aux;
	switch (h->type) {
	case QP_T_PAD:
		if (h->len || h->flags || h->aux || pos == 0)
			return -EPROTO;
		return 1;
	case QP_T_DATA:
	case QP_T_FRAME:
		if (h->len > max_payload || (h->flags & ~QP_F_MORE) ||
		    pos + qp_rec_bytes(h->len) > size)
			return -EPROTO;
		return 1;
	case QP_T_PUSH:
		if (h->flags || h->len == 0)
			return -EPROTO;
		return 1;
	case QP_T_EOF:
		if (h->len || h->flags || h->aux)
			return -EPROTO;
		return 1;
	default:
		return -EPROTO;
	}
}

void qp_ring_zero(uint8_t *ring, uint32_t size, uint64_t rpos, uint64_t bytes)
{
	if (bytes > size)
		bytes = size;
	for (uint64_t i = 0; i < bytes; i += QP_LINE)
		__atomic_store_n((uint32_t *)(ring + ((rpos + i) & (size - 1) &
		                                      ~(uint64_t)(QP_LINE - 1))),
		                 0, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------ receive core */

#define RX_EOF 2

/* The head record, PADs consumed: 1 record, RX_EOF, -EAGAIN, -EPROTO. */
static int rx_head(struct qp_rx *r, struct qp_rec_hdr *h)
{
	struct qp_rxs *s = r->s;
	for (int i = 0; i < 2; i++) {
		int rc = qp_ring_head(r->ring, r->size, s->rpos,
		                      qp_max_payload(r->size), h);
		if (rc < 0)
			return rc;
		if (rc == 0) {
			if (r->peer_closed) {
				uint64_t end = r->peer_closed - 1;
				if (end == s->rpos)
					return RX_EOF;
				if ((int64_t)(end - s->rpos) < 0)
					return -EPROTO;
			}
			return -EAGAIN;
		}
		if (h->type == QP_T_PAD) {
			if (s->roff)
				return -EPROTO;
			uint64_t pos = s->rpos & (r->size - 1);
			/* one line: a small record (qp_zmap_rec) */
			qp_ring_zero(r->ring, r->size, s->rpos, QP_LINE);
			s->rpos += r->size - pos;
			continue;
		}
		if (h->type == QP_T_EOF)
			return s->roff ? -EPROTO : RX_EOF;
		if (h->type != QP_T_DATA && h->type != QP_T_PUSH)
			return -EPROTO;
		return 1;
	}
	return -EPROTO;   /* PAD after PAD */
}

static int posted_ok(const struct qp_rx *r, const struct qp_posted *p)
{
	return p->len && p->off <= r->mem_size && p->len <= r->mem_size - p->off;
}

/* The oldest posted buffer, if it belongs to message @msg (stale ones are
 * dropped).  NULL if none. */
static struct qp_posted *rx_oldest_for(struct qp_rx *r, uint64_t msg)
{
	struct qp_rxs *s = r->s;
	if (s->post_head - s->post_tail > QP_NPOST)
		return NULL;
	while (s->post_head != s->post_tail) {
		struct qp_posted *p = &s->posted[s->post_tail % QP_NPOST];
		if (p->msg > msg)
			return NULL;
		if (p->msg == msg)
			return p;
		s->post_tail++;   /* stale: cannot happen unless corrupted */
	}
	return NULL;
}

/* Check the head record against the reader state. */
static int rx_check(struct qp_rx *r, const struct qp_rec_hdr *h)
{
	struct qp_rxs *s = r->s;
	if (s->roff > h->len)
		return -EPROTO;
	if (h->type == QP_T_PUSH) {
		if (s->in_msg) {
			/* partly read by a stream read */
			if (!s->roff || s->msg_done || s->msg_total != h->len ||
			    !s->cur_bound || s->cur.seq != h->aux ||
			    h->len > s->cur.len || !posted_ok(r, &s->cur))
				return -EPROTO;
			return 0;
		}
		if (s->roff)
			return -EPROTO;
		struct qp_posted *p = rx_oldest_for(r, s->msg_next);
		if (!p || p->seq != h->aux || h->len > p->len || !posted_ok(r, p))
			return -EPROTO;
		return 0;
	}
	/* DATA */
	int more = !!(h->flags & QP_F_MORE);
	if (s->in_msg) {
		uint64_t want_aux = s->msg_done ? s->msg_done : s->msg_total;
		if (h->aux != want_aux || s->msg_done > s->msg_total ||
		    h->len > s->msg_total - s->msg_done ||
		    more != (s->msg_done + h->len < s->msg_total))
			return -EPROTO;
		return 0;
	}
	if (s->roff || h->len > h->aux || more != (h->len < h->aux))
		return -EPROTO;
	return 0;
}

/* Begin consuming the head record's message. */
static void rx_start(struct qp_rx *r, const struct qp_rec_hdr *h)
{
	struct qp_rxs *s = r->s;
	uint64_t idx = s->msg_next++;
	struct qp_posted *p = rx_oldest_for(r, idx);
	s->in_msg = 1;
	s->msg_done = 0;
	s->msg_total = h->type == QP_T_PUSH ? h->len : h->aux;
	s->cur_bound = 0;
	if (p) {
		s->cur = *p;
		s->cur_bound = 1;
		s->post_tail++;
	}
}

/* The head record is consumed entirely. */
static void rx_advance(struct qp_rx *r, const struct qp_rec_hdr *h)
{
	struct qp_rxs *s = r->s;
	uint64_t rb = qp_rec_bytes(h->type == QP_T_PUSH ? 0 : h->len);
	if (!r->wz || rb <= QP_RZERO_MAX)   /* else its writer zeroes */
		qp_ring_zero(r->ring, r->size, s->rpos, rb);
	s->rpos += rb;
	s->roff = 0;
	if (h->type == QP_T_PUSH || !(h->flags & QP_F_MORE)) {
		s->in_msg = 0;
		s->cur_bound = 0;
		s->msg_done = 0;
		s->msg_total = 0;
	} else {
		s->msg_done += h->len;
	}
}

/* Where the head record's unread payload is (validated by rx_check). */
static const uint8_t *rx_src(struct qp_rx *r, const struct qp_rec_hdr *h)
{
	struct qp_rxs *s = r->s;
	if (h->type == QP_T_PUSH)
		return r->mem + s->cur.off + s->roff;
	return r->ring + (s->rpos & (r->size - 1)) + QP_REC_HDR + s->roff;
}

int qp_rx_status(struct qp_rx *r)
{
	struct qp_rec_hdr h;
	int rc = rx_head(r, &h);
	if (rc == RX_EOF)
		return 0;
	if (rc < 0)
		return rc;
	rc = rx_check(r, &h);
	return rc < 0 ? rc : 1;
}

int qp_rx_peek(const struct qp_rx *r)
{
	/* A private copy of the position: a PAD is looked past, not
	 * consumed, and nothing of the reader's state is written. */
	uint64_t rpos = __atomic_load_n(&r->s->rpos, __ATOMIC_ACQUIRE);
	for (int i = 0; i < 2; i++) {
		struct qp_rec_hdr h;
		int rc = qp_ring_head(r->ring, r->size, rpos,
		                      qp_max_payload(r->size), &h);
		if (rc < 0)
			return 1;   /* garbage: the reader will report it */
		if (rc == 0) {
			if (!r->peer_closed)
				return -EAGAIN;
			uint64_t end = r->peer_closed - 1;
			return end == rpos ? 0 : (int64_t)(end - rpos) < 0 ? 1
			                                               : -EAGAIN;
		}
		if (h.type != QP_T_PAD)
			return h.type == QP_T_EOF ? 0 : 1;
		rpos += r->size - (rpos & (r->size - 1));
	}
	return 1;
}

ssize_t qp_rx_read(struct qp_rx *r, void *buf, size_t len)
{
	struct qp_rxs *s = r->s;
	size_t n = 0;
	while (n < len) {
		struct qp_rec_hdr h;
		int rc = rx_head(r, &h);
		if (rc == -EAGAIN || rc == RX_EOF) {
			if (rc == RX_EOF && !n)
				return 0;
			break;
		}
		if (rc < 0)
			return rc;
		rc = rx_check(r, &h);
		if (rc < 0)
			return rc;
		if (!s->in_msg)
			rx_start(r, &h);
		/* rx_start may not have bound a buffer for a PUSH if state changed */
		if (h.type == QP_T_PUSH && !s->cur_bound)
			return -EPROTO;
		size_t take = h.len - s->roff;
		if (take > len - n)
			take = len - n;
		ntbx_copy_in((uint8_t *)buf + n, rx_src(r, &h), take);
		n += take;
		s->roff += (uint32_t)take;
		if (s->roff == h.len)
			rx_advance(r, &h);
	}
	return n ? (ssize_t)n : -EAGAIN;
}

ssize_t qp_rx_msg_len(struct qp_rx *r, int *eof)
{
	struct qp_rxs *s = r->s;
	struct qp_rec_hdr h;
	*eof = 0;
	int rc = rx_head(r, &h);
	if (rc == RX_EOF) {
		*eof = 1;
		return 0;
	}
	if (rc < 0)
		return rc;
	rc = rx_check(r, &h);
	if (rc < 0)
		return rc;
	if (s->in_msg)
		return (ssize_t)(s->msg_total - s->msg_done - s->roff);
	return h.type == QP_T_PUSH ? h.len : h.aux;
}

int qp_rx_recv(struct qp_rx *r, void *buf, size_t cap, size_t *got,
               int posted, uint64_t *off)
{
	struct qp_rxs *s = r->s;
	for (;;) {
		struct qp_rec_hdr h;
		int rc = rx_head(r, &h);
		if (rc == -EAGAIN)
			return rc;
		if (rc == RX_EOF)
			return *got ? -EPROTO : 0;
		if (rc < 0)
			return rc;
		rc = rx_check(r, &h);
		if (rc < 0)
			return rc;
		uint8_t *dst = buf;
		size_t dcap = cap;
		if (posted) {
			struct qp_posted *p = s->in_msg ? (s->cur_bound ? &s->cur : NULL)
			                                : rx_oldest_for(r, s->msg_next);
			if (!p)
				return *got ? -EPROTO : -ENOBUFS;
			if (!posted_ok(r, p))
				return -EPROTO;
			if (h.type == QP_T_PUSH) {
				/* already in place: no copy */
				if (!s->in_msg)
					rx_start(r, &h);
				*off = s->cur.off + s->roff;
				*got = h.len - s->roff;
				rx_advance(r, &h);
				return 1;
			}
			*off = p->off;
			dst = r->mem + p->off;
			dcap = p->len;
		}
		if (*got == 0) {
			uint64_t rest = s->in_msg ? s->msg_total - s->msg_done - s->roff
			                          : (h.type == QP_T_PUSH ? h.len : h.aux);
			if (rest > dcap)
				return -EMSGSIZE;
		}
		if (!s->in_msg)
			rx_start(r, &h);
		if (h.type == QP_T_PUSH && !s->cur_bound)
			return -EPROTO;
		size_t take = h.len - s->roff;
		if (take > dcap || *got > dcap - take)
			return -EPROTO;   /* the message grew: corrupt */
		ntbx_copy(dst + *got, rx_src(r, &h), take);
		*got += take;
		s->roff += (uint32_t)take;
		rx_advance(r, &h);
		if (!s->in_msg)
			return 1;
	}
}

int qp_rx_post(struct qp_rx *r, uint64_t off, uint64_t len,
               struct qp_adv *adv)
{
	struct qp_rxs *s = r->s;
	struct qp_posted p = { .off = off, .len = len };
	if (!posted_ok(r, &p))
		return -EINVAL;
	if (s->post_head - s->post_tail >= QP_NPOST)
		return -ENOBUFS;
	if (s->post_head != s->post_tail)
		p.msg = s->posted[(s->post_head - 1) % QP_NPOST].msg + 1;
	else
		p.msg = s->msg_next;
	p.seq = ++s->post_head;
	s->posted[(p.seq - 1) % QP_NPOST] = p;
	adv->seq = p.seq;
	adv->pad_ = 0;
	adv->off = p.off;
	adv->len = p.len;
	adv->msg = p.msg;
	return 0;
}

int qp_rx_zc(struct qp_rx *r, const uint8_t **p, uint32_t *len,
             uint64_t *off, struct qp_rec_hdr *h)
{
	struct qp_rxs *s = r->s;
	*off = UINT64_MAX;
	int rc = rx_head(r, h);
	if (rc == RX_EOF)
		return s->in_msg ? -EPROTO : 0;
	if (rc < 0)
		return rc;
	rc = rx_check(r, h);
	if (rc < 0)
		return rc;
	if (h->type == QP_T_PUSH) {
		if (s->in_msg)
			return -EINVAL;   /* partly read by a stream read */
		rx_start(r, h);
		if (!s->cur_bound || !posted_ok(r, &s->cur) || h->len > s->cur.len)
			return -EPROTO;
		*off = s->cur.off;
		*p = r->mem + s->cur.off;
		*len = h->len;
		rx_advance(r, h);
		return QP_RX_ZC_PUSHED;
	}
	if (h->flags & QP_F_MORE)
		return s->in_msg ? -EINVAL : QP_RX_ZC_COPY;
	if (s->in_msg) {
		/* Started and not read: a hold whose handle went away (its
		 * buffer was handed out then).  Anything else was partly read. */
		if (s->roff || s->msg_done)
			return -EINVAL;
	} else {
		rx_start(r, h);
		if (s->cur_bound) {
			if (!posted_ok(r, &s->cur))
				return -EPROTO;
			*off = s->cur.off;
		}
	}
	/* rx_check: one record, len == aux == the message; qp_ring_head: the
	 * record lies inside the ring (records never wrap). */
	*p = r->ring + (s->rpos & (r->size - 1)) + QP_REC_HDR;
	*len = h->len;
	return QP_RX_ZC_HELD;
}

int qp_rx_zc_done(struct qp_rx *r, uint64_t rpos, const struct qp_rec_hdr *h)
{
	struct qp_rxs *s = r->s;
	if (s->rpos != rpos || !s->in_msg || s->roff || s->msg_done ||
	    h->type != QP_T_DATA || (h->flags & QP_F_MORE) ||
	    s->msg_total != h->len)
		return -EINVAL;
	rx_advance(r, h);
	return 0;
}
