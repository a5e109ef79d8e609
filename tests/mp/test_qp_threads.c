/*
 * One queue-pair handle, three threads, as qp.h allows: on each of two
 * nodes a writer thread streams checksummed bytes while a reader thread
 * reads the other direction, both nonblocking and sleeping in
 * ntbx_qp_wait, and a third thread calls ntbx_qp_poll all the time.
 * Readiness must not touch the reader's or the writer's state: a small
 * ring makes PAD records and full/empty waits frequent.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "ntbx/qp.h"

static uint64_t total;

struct side { struct ntbx_qp *qp; int node, peer; volatile int done; int err; };

static uint8_t byte_at(uint64_t i, int from)
{
	return (uint8_t)((i * 0x9e3779b1u >> 13) + (unsigned)from * 101);
}

static void *writer(void *p)
{
	struct side *s = p;
	uint8_t buf[7000];
	uint64_t sent = 0, r = (uint64_t)s->node + 3;
	while (sent < total) {
		r = r * 6364136223846793005ull + 1442695040888963407ull;
		size_t k = (r >> 33) % sizeof buf + 1;
		if (k > total - sent)
			k = total - sent;
		for (size_t i = 0; i < k; i++)
			buf[i] = byte_at(sent + i, s->node);
		size_t done = 0;
		while (done < k) {
			ssize_t w = ntbx_qp_write(s->qp, buf + done, k - done,
			                          NTBX_QP_NONBLOCK);
			if (w > 0) {
				done += (size_t)w;
			} else if (w == -EAGAIN) {
				int m = ntbx_qp_wait(s->qp, NTBX_QP_WRITABLE, 5000);
				if (m < 0 || (m & NTBX_QP_ERROR)) {
					s->err = m < 0 ? m : -EIO;
					return NULL;
				}
			} else {
				s->err = (int)w;
				return NULL;
			}
		}
		sent += k;
	}
	return NULL;
}

static void *reader(void *p)
{
	struct side *s = p;
	uint8_t buf[9000];
	uint64_t got = 0;
	while (got < total) {
		ssize_t k = ntbx_qp_read(s->qp, buf, sizeof buf, NTBX_QP_NONBLOCK);
		if (k > 0) {
			for (ssize_t i = 0; i < k; i++)
				if (buf[i] != byte_at(got + (uint64_t)i, s->peer)) {
					s->err = -EILSEQ;
					return NULL;
				}
			got += (uint64_t)k;
		} else if (k == -EAGAIN) {
			int m = ntbx_qp_wait(s->qp, NTBX_QP_READABLE, 5000);
			if (m < 0 || (m & NTBX_QP_ERROR)) {
				s->err = m < 0 ? m : -EIO;
				return NULL;
			}
		} else {
			s->err = k ? (int)k : -EPIPE;
			return NULL;
		}
	}
	return NULL;
}

static void *poller(void *p)
{
	struct side *s = p;
	while (!s->done)
		if (ntbx_qp_poll(s->qp) & NTBX_QP_ERROR)
			s->err = -EIO;
	return NULL;
}

static int node_main(void *arg)
{
	struct th_pair *n = arg;
	int node = n->node, wfd = n->wfd, rfd = n->rfd;
	struct ntbx_fabric *f = th_join("threads", node, 20000);
	struct side s = { .node = node, .peer = n->peer };
	struct ntbx_qp_opts o = { 8u << 10, 0 };
	s.qp = th_qp_to(f, s.peer, &o, wfd, rfd, NULL, NULL);
	pthread_t w, r, p;
	pthread_create(&p, NULL, poller, &s);
	pthread_create(&w, NULL, writer, &s);
	pthread_create(&r, NULL, reader, &s);
	pthread_join(w, NULL);
	pthread_join(r, NULL);
	s.done = 1;
	pthread_join(p, NULL);
	if (s.err)
		fprintf(stderr, "node %d: error %d\n", node, s.err);
	char c = 'd';
	th_xfer(wfd, &c, 1, 1);   /* both done before either leaves */
	th_xfer(rfd, &c, 1, 0);
	ntbx_qp_close(s.qp, 1);
	ntbx_fabric_leave(f);
	return s.err ? 12 : 0;
}

int main(void)
{
	th_init("qp_threads");
	total = getenv("NTBX_SANITIZED") ? (8u << 20) : (48u << 20);
	th_fabric("threads", 2, NTBX_TOPO_SWITCH, 16 << 20, 0);
	th_run_pair(node_main, NULL);
	return th_done("test_qp_threads");
}
