/* SPDX-License-Identifier: MIT */
/*
 * failover.c — a connection to another host carries on over its shadow TCP
 * connection when the fabric link under it fails (issue 13 item 5).
 *
 * Both ends are interposed (the connection is on the fabric), so after
 * the failure a resynchronisation in band on the shadow is acceptable: no
 * byte of it ever reaches a program that is not interposed.  Each side:
 *
 *   1. reads what landed in its own ring (local memory, whatever became of
 *      the link) into a private buffer, and, an acceptor that had not read
 *      the connector's TCP prefix to its end yet, the rest of it first;
 *   2. sends on the shadow a header: a magic word and the count of the
 *      peer's fabric bytes it holds (those its readers took, and those of
 *      step 1);
 *   3. reads the peer's header, and sends again, from the last bytes it
 *      wrote on the fabric (kept in a private ring, `rt`), everything past
 *      the peer's count;
 *   4. goes on as a TCP connection: reads serve the buffer of step 1, then
 *      the shadow, where the peer's resent bytes come first.
 *
 * In order, without loss or duplicate: each side's count is exactly the
 * prefix of the other's fabric stream it holds (a record lands whole or
 * not at all: its sequence word goes last, qp_dma.c), so the peer resends
 * exactly the suffix, and the shadow delivers it after the bytes already
 * held.  What may be lost is bounded: every byte goes through the ring
 * on such a connection (no push), and credits bound the bytes in flight
 * by the ring's size, so the unlanded bytes are among the last ring's
 * worth written, which `rt` keeps (twice the ring).  While resending, a
 * side also reads what the peer resends (into the buffer of step 1), so
 * two sides resending at once never block each other on full socket
 * buffers.  Every wait is bounded (struct fo_clock: FO_WAIT_MS once the
 * path works, FO_PATH_MS in all); a peer that does not answer (dead, not
 * ours) ends the connection with ECONNRESET, said in one line, and the
 * shadow is shut so the peer learns it too.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <time.h>

#include "ntbx/fabric.h"
#include "sock/sock.h"
#include "util/util.h"

#define FO_MAGIC   0x4e5442584641494full   /* "NTBXFAIO" */
#define FO_WAIT_MS 10000    /* for the peer's answer once the path works */
#define FO_PATH_MS 60000    /* for the path to come back, in all */
#define FO_DRAIN   (64u << 10)

struct fo_hdr {
	uint64_t magic;
	uint64_t got;       /* the peer's fabric bytes we hold */
};

/* The peer's ring on a connection across hosts (NTBX_SOCK_XHOST_BUF, the
 * same on every host): what we may have written and it not yet read. */
static size_t ring_bytes(void)
{
	return sk_cfg.xring ? sk_cfg.xring : NTBX_QP_DEFAULT_RING;
}

/* Keep the @n bytes just written on the fabric, ending at stream position
 * @end.  Write lock held. */
void sk_fo_keep(struct sk *s, const void *buf, size_t n, uint64_t end)
{
	if (!s->rt) {
		if (s->fo)
			return;
		s->rtsize = 2 * ring_bytes();
		s->rt = malloc(s->rtsize);
		if (!s->rt) {
			s->fo = -1;   /* no fail-over for this one */
			return;
		}
	}
	const char *p = buf;
	if (n > s->rtsize) {
		p += n - s->rtsize;
		n = s->rtsize;
	}
	uint64_t pos = end - n;
	while (n) {
		size_t at = (size_t)(pos % s->rtsize);
		size_t k = s->rtsize - at < n ? s->rtsize - at : n;
		memcpy(s->rt + at, p, k);
		p += k;
		pos += k;
		n -= k;
	}
}

/* Why the last shadow step failed, for the line that says so. */
static __thread const char *fo_why;
static __thread int fo_errno;

static int fob_add(struct sk *s, const void *p, size_t n)
{
	char *b = realloc(s->fob, s->folen + n);
	if (!b) {
		fo_why = "no memory for the bytes held";
		fo_errno = ENOMEM;
		return -1;
	}
	s->fob = b;
	memcpy(s->fob + s->folen, p, n);
	s->folen += n;
	return 0;
}

/*
 * The time the peer has to answer.  It answers when it has noticed the
 * failure too, and its answer crosses the path that failed: a bound
 * counted from our own start (10 s) was missed when the link came back
 * late or a side noticed late, and kernel TCP itself rides out longer
 * cuts.  So while the kernel is retransmitting on the shadow (our header
 * or resent bytes not acknowledged: the path is still down) the bound
 * moves on; FO_WAIT_MS counts from the last moment the path was seen
 * failing, and FO_PATH_MS from the start bounds it all.  A dead peer is
 * seen sooner: its kernel resets the shadow once the path works.
 */
struct fo_clock {
	uint64_t start, end, cap;
};

static void clock_start(struct fo_clock *k)
{
	uint64_t now = ntbx_now_ns();
	k->start = now;
	k->end = now + FO_WAIT_MS * 1000000ull;
	k->cap = now + FO_PATH_MS * 1000000ull;
}

/* Is the kernel retransmitting on @fd (the path to the peer fails)?  A
 * confined process asks no socket options (its filter may kill it for
 * one): its bound counts from its own start. */
static int path_retrying(int fd)
{
	struct tcp_info ti;
	socklen_t l = sizeof ti;
	if (ntbx_sandboxed)
		return 0;
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &l) < 0)
		return 0;
	return ti.tcpi_retransmits > 0 || ti.tcpi_backoff > 0;
}

static int wait_fd(int fd, short ev, struct fo_clock *k)
{
	for (;;) {
		uint64_t now = ntbx_now_ns();
		if (path_retrying(fd)) {
			uint64_t e = now + FO_WAIT_MS * 1000000ull;
			if (e > k->cap)
				e = k->cap;
			if (e > k->end)
				k->end = e;
		}
		if (now >= k->end) {
			fo_why = now >= k->cap ? "the path to the peer did not come "
			                         "back in time" :
			                         "the peer did not answer in time";
			return -1;
		}
		/* slices: the path's state is looked at again after each */
		uint64_t left = (k->end - now) / 1000000u + 1;
		struct pollfd p = { fd, ev, 0 };
		int r = sk_real.poll(&p, 1, left < 100 ? (int)left : 100);
		if (r > 0 && !(p.revents & POLLNVAL))
			return 0;
		if (r < 0 && errno != EINTR) {
			fo_why = "poll failed";
			fo_errno = errno;
			return -1;
		}
		if (r > 0) {
			fo_why = "the shadow connection is not open";
			return -1;
		}
	}
}

/* The shadow said something else than bytes: end of stream or an error. */
static int shadow_broke(ssize_t r)
{
	fo_why = r == 0 ? "the shadow connection ended" : "the shadow connection failed";
	fo_errno = r < 0 ? errno : 0;
	return -1;
}

/* Exactly @n bytes from the shadow into the buffer (bounded). */
static int shadow_take(struct sk *s, int fd, size_t n, struct fo_clock *end)
{
	char tmp[16384];
	while (n) {
		ssize_t r = sk_real.recv(fd, tmp, n < sizeof tmp ? n : sizeof tmp,
		                         MSG_DONTWAIT);
		if (r > 0) {
			if (fob_add(s, tmp, (size_t)r) < 0)
				return -1;
			n -= (size_t)r;
			continue;
		}
		if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK &&
		               errno != EINTR))
			return shadow_broke(r);
		if (wait_fd(fd, POLLIN, end) < 0)
			return -1;
	}
	return 0;
}

/* Send @n bytes on the shadow (bounded), taking in what the peer sends
 * meanwhile once its header is read (@take_in). */
static int shadow_give(struct sk *s, int fd, const char *p, size_t n,
                       int take_in, struct fo_clock *end)
{
	while (n) {
		ssize_t r = sk_real.send(fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (r > 0) {
			p += r;
			n -= (size_t)r;
			continue;
		}
		if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
		    errno != EINTR)
			return shadow_broke(r);
		if (take_in) {
			char tmp[16384];
			ssize_t k = sk_real.recv(fd, tmp, sizeof tmp, MSG_DONTWAIT);
			if (k > 0) {
				if (fob_add(s, tmp, (size_t)k) < 0)
					return -1;
				continue;
			}
			if (k == 0)
				take_in = 0;   /* the peer shut its side: fine */
			else if (errno != EAGAIN && errno != EWOULDBLOCK &&
			         errno != EINTR)
				return shadow_broke(k);
		}
		if (wait_fd(fd, take_in ? POLLOUT | POLLIN : POLLOUT, end) < 0)
			return -1;
	}
	return 0;
}

static int failover(struct sk *s, int fd, struct sk_conn *c)
{
	struct fo_clock end;
	clock_start(&end);
	uint64_t *got_ctr = s->role == 'C' ? &c->read_ac : &c->read_ca;
	uint64_t *out_ctr = s->role == 'C' ? &c->bytes_ca : &c->bytes_ac;
	/* 1. the connector's TCP prefix left on the shadow comes first */
	if (s->role == 'A' && !s->prefix_done) {
		skx_sync(s, c);
		if (__atomic_load_n(&c->state, __ATOMIC_ACQUIRE) != SK_FAB) {
			/* its switch never landed: no count */
			fo_why = "the connector's switch to the fabric never landed";
			return -1;
		}
		uint64_t rem = c->tcp_sent - c->tcp_rcvd;
		if (rem > (1ull << 40)) {
			fo_why = "the connector's TCP count is impossible";
			return -1;
		}
		if (shadow_take(s, fd, (size_t)rem, &end) < 0)
			return -1;
		c->tcp_rcvd += rem;
		s->prefix_done = 1;
	}
	size_t had = s->folen;
	pthread_mutex_lock(&s->qlock);
	for (;;) {
		char tmp[FO_DRAIN];
		ssize_t r = s->qp ? ntbx_qp_read_landed(s->qp, tmp, sizeof tmp)
		                  : -EAGAIN;
		if (r > 0 && fob_add(s, tmp, (size_t)r) == 0)
			continue;
		if (r == 0 || r == -EAGAIN)
			break;
		pthread_mutex_unlock(&s->qlock);
		if (r < 0) {
			fo_why = "our ring could not be read";
			fo_errno = (int)-r;
		}
		return -1;
	}
	pthread_mutex_unlock(&s->qlock);
	uint64_t drained = s->folen - had;
	/* 2-3. the headers */
	struct fo_hdr me = { FO_MAGIC,
	                     __atomic_load_n(got_ctr, __ATOMIC_ACQUIRE) + drained };
	__atomic_fetch_add(got_ctr, drained, __ATOMIC_RELEASE);
	if (shadow_give(s, fd, (const char *)&me, sizeof me, 0, &end) < 0)
		return -1;
	struct fo_hdr peer;
	size_t at = s->folen;
	if (shadow_take(s, fd, sizeof peer, &end) < 0)
		return -1;
	memcpy(&peer, s->fob + at, sizeof peer);
	s->folen = at;   /* the header is not the program's */
	uint64_t out = __atomic_load_n(out_ctr, __ATOMIC_ACQUIRE);
	if (peer.magic != FO_MAGIC || peer.got > out ||
	    out - peer.got > (s->rt ? s->rtsize : 0)) {
		ntbx_log(NTBX_LOG_WARN, "fd %d: the peer's resynchronisation "
		         "cannot be followed (it holds %llu of our %llu bytes)",
		         s->fd0, (unsigned long long)peer.got,
		         (unsigned long long)out);
		fo_why = "the peer's header does not fit our stream";
		return -1;
	}
	/* 3. what it lacks, from the ring of what we wrote */
	for (uint64_t pos = peer.got; pos < out;) {
		size_t o = (size_t)(pos % s->rtsize);
		size_t k = s->rtsize - o;
		if (k > out - pos)
			k = (size_t)(out - pos);
		if (shadow_give(s, fd, s->rt + o, k, 1, &end) < 0)
			return -1;
		pos += k;
	}
	ntbx_log(NTBX_LOG_INFO, "fd %d: the fabric link to node %u failed; the "
	         "connection goes on over TCP (%llu bytes were in our ring, "
	         "%llu sent again, in %llu ms)", s->fd0,
	         s->role == 'C' ? c->node_a : c->node_c,
	         (unsigned long long)drained,
	         (unsigned long long)(out - peer.got),
	         (unsigned long long)((ntbx_now_ns() - end.start) / 1000000u));
	return 0;
}

/*
 * The queue pair of @s failed.  A connection to another host whose shadow
 * is still open carries on over it: 0, and @s is M_TCP (reads serve
 * sk_fo_take first).  -1: it cannot (the caller reports the error).
 * Either lock of @s may be held.
 */
int sk_failover(struct sk *s, int fd)
{
	struct sk_conn *c = sk_conn(s);
	if (!c || !c->xk)
		return -1;
	pthread_mutex_lock(&s->folock);
	int r = s->fo;
	if (!r && s->mode == M_FAB) {
		fo_why = "?";
		fo_errno = 0;
		uint64_t t0 = ntbx_now_ns();
		struct timespec rt;
		clock_gettime(CLOCK_REALTIME, &rt);
		ntbx_log(NTBX_LOG_DEBUG, "fd %d: fail-over starts at %lld.%03ld "
		         "(%s)", s->fd0, (long long)rt.tv_sec, rt.tv_nsec / 1000000,
		         s->role == 'C' ? "connector" : "acceptor");
		sk_cork_flush(s, fd);   /* its headers go on the shadow */
		r = failover(s, fd, c) == 0 ? 1 : -1;
		if (r < 0) {
			ntbx_log(NTBX_LOG_WARN, "fd %d: the fabric link to node %u "
			         "failed and the connection cannot go on over TCP "
			         "after %llu ms: %s%s%s; it is reset", s->fd0,
			         s->role == 'C' ? c->node_a : c->node_c,
			         (unsigned long long)((ntbx_now_ns() - t0) / 1000000u),
			         fo_why, fo_errno ? ": " : "",
			         fo_errno ? strerror(fo_errno) : "");
			/* the peer, maybe waiting for our answer, learns it
			 * now rather than at its own bound */
			sk_real.shutdown(fd, SHUT_RDWR);
		}
		if (r > 0) {
			sk_cork_flush(s, fd);   /* a set kept meanwhile */
			__atomic_store_n(&s->mode, M_TCP, __ATOMIC_RELEASE);
		}
		s->fo = r;
	} else if (!r) {
		r = s->fo = -1;
	}
	pthread_mutex_unlock(&s->folock);
	return r > 0 ? 0 : -1;
}

/* Bytes of ours from before the fail-over, for a read: up to @len into
 * @buf (not consumed with @peek).  Read lock held. */
size_t sk_fo_take(struct sk *s, void *buf, size_t len, int peek)
{
	pthread_mutex_lock(&s->folock);
	size_t n = s->folen - s->fooff;
	if (n > len)
		n = len;
	if (n)
		memcpy(buf, s->fob + s->fooff, n);
	if (!peek)
		s->fooff += n;
	pthread_mutex_unlock(&s->folock);
	return n;
}

int sk_fo_pending(struct sk *s)
{
	return __atomic_load_n(&s->fo, __ATOMIC_ACQUIRE) > 0 &&
	       s->fooff < s->folen;
}
