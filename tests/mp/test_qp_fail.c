/*
 * Queue pairs when the other side fails: the peer node dies (its only
 * process is killed with SIGKILL) -> the reader drains what was sent, then
 * gets -ECONNRESET within a couple of seconds, no hang; a "peer" stores
 * garbage into our ring or our credits -> -EPROTO, NTBX_QP_ERROR, no crash.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "ntbx/doorbell.h"
#include "ntbx/qp.h"
#include "qp/qp_int.h"

#define FABRIC "qpfail"

struct node {
	int node;
	int wfd, rfd;     /* address pipes */
	int done_fd;      /* victim: tells the parent it has sent everything;
	                     reader: reports the time of -ECONNRESET */
	int mode;
};

static struct ntbx_qp *setup(struct node *n, struct ntbx_fabric **f,
                             struct ntbx_qp_addr *other)
{
	struct ntbx_qp_opts o = { 16384, 0 };
	*f = th_join(FABRIC, n->node, 20000);
	return th_qp_to(*f, 1 - n->node, &o, n->wfd, n->rfd, NULL, other);
}

/* ------------------------------------------------------------ death */

#define DEATH_BYTES 100000

static int victim_main(void *arg)
{
	struct node *n = arg;
	struct ntbx_fabric *f;
	struct ntbx_qp *qp = setup(n, &f, NULL);
	uint8_t buf[DEATH_BYTES];
	for (int i = 0; i < DEATH_BYTES; i++)
		buf[i] = (uint8_t)i;
	size_t d = 0;
	while (d < DEATH_BYTES) {   /* more than the ring: the reader reads */
		ssize_t w = ntbx_qp_write(qp, buf + d, DEATH_BYTES - d, 0);
		if (w <= 0)
			return 11;
		d += (size_t)w;
	}
	char c = 1;
	th_xfer(n->done_fd, &c, 1, 1);
	for (;;)
		pause();   /* killed here */
}

static int reader_main(void *arg)
{
	struct node *n = arg;
	struct ntbx_fabric *f;
	struct ntbx_qp *qp = setup(n, &f, NULL);
	uint8_t buf[4096];
	uint64_t got = 0;
	int bad = 0;
	ssize_t r;
	while ((r = ntbx_qp_read(qp, buf, sizeof buf, 0)) > 0) {
		for (ssize_t i = 0; i < r; i++)
			if (buf[i] != (uint8_t)(got + (uint64_t)i))
				bad++;
		got += (uint64_t)r;
	}
	unsigned long long t = th_now_ns();
	CHECK_EQ(r, -ECONNRESET);
	CHECK_EQ(got, DEATH_BYTES);
	CHECK_EQ(bad, 0);
	/* it stays reset, and writes see it too */
	CHECK_EQ(ntbx_qp_read(qp, buf, 10, 0), -ECONNRESET);
	CHECK(ntbx_qp_write(qp, buf, 10, 0) < 0);
	CHECK(ntbx_qp_poll(qp) & NTBX_QP_HUP);
	th_xfer(n->done_fd, &t, sizeof t, 1);
	ntbx_qp_close(qp, 1);
	ntbx_fabric_leave(f);
	return th_failures ? 1 : 0;
}

static void t_death(void)
{
	int a[2], b[2], vd[2], rd[2];
	REQUIRE(pipe(a) == 0 && pipe(b) == 0 && pipe(vd) == 0 && pipe(rd) == 0);
	struct node v = { 1, a[1], b[0], vd[1], 0 };
	struct node r = { 0, b[1], a[0], rd[1], 0 };
	pid_t pv = th_spawn(victim_main, &v);
	pid_t pr = th_spawn(reader_main, &r);
	close(vd[1]);
	close(rd[1]);
	char c;
	CHECK_EQ(th_xfer(vd[0], &c, 1, 0), 0);
	/* let the reader drain first so that the reset is what it waits on */
	unsigned long long tk = th_now_ns();
	kill(pv, SIGKILL);
	CHECK_EQ(th_wait(pv), 128 + SIGKILL);
	unsigned long long tr = 0;
	CHECK_EQ(th_xfer(rd[0], &tr, sizeof tr, 0), 0);
	CHECK_EQ(th_wait(pr), 0);
	double dt = ((double)tr - (double)tk) / 1e9;
	printf("reset seen %.6f s after the kill\n", dt);
	CHECK(dt > 0);
	CHECK(dt < 3.0);
	close(a[0]); close(a[1]); close(b[0]); close(b[1]);
	close(vd[0]); close(rd[0]);
}

/* ------------------------------------------------------------ garbage */

/* mode 0: garbage record in the ring; 1: impossible credits;
 * 2: a PUSH record for a buffer never posted; 3: random bytes */
static int evil_main(void *arg)
{
	struct node *n = arg;
	struct ntbx_fabric *f;
	struct ntbx_qp_addr other;
	struct ntbx_qp *qp = setup(n, &f, &other);
	struct ntbx_dev *dev = ntbx_fabric_dev(f);
	void *win;
	uint64_t wsz;
	int port = ntbx_port_of_node(dev, 0);
	if (ntbx_peer_mw_get_addr(dev, port, 0, &win, &wsz) < 0)
		return 11;
	struct qp_half *ph = (struct qp_half *)((uint8_t *)win + other.off);
	uint8_t *ring = (uint8_t *)ph + QP_HALF_HDR;
	struct qp_rec_hdr *h = (struct qp_rec_hdr *)ring;
	switch (n->mode) {
	case 0:
		h->len = 0x7fffffff;
		h->type = QP_T_DATA;
		h->aux = 0x7fffffff;
		__atomic_store_n(&h->seq, 1, __ATOMIC_RELEASE);
		break;
	case 1:
		__atomic_store_n(&ph->pr.tx_tail, 1ull << 40, __ATOMIC_RELEASE);
		break;
	case 2:
		h->len = 100;
		h->type = QP_T_PUSH;
		h->aux = 1;
		__atomic_store_n(&h->seq, 1, __ATOMIC_RELEASE);
		break;
	case 3: {
		uint64_t s = 88172645463325252ull;
		for (int i = 64; i < 16384; i++) {
			s ^= s << 13; s ^= s >> 7; s ^= s << 17;
			ring[i] = (uint8_t)s;
		}
		memcpy(ring + 4, "\xff\xff\xff\x7f\x01\x00\x00\x00", 8);
		__atomic_store_n(&h->seq, 1, __ATOMIC_RELEASE);
		break;
	}
	}
	ntbx_peer_db_set(dev, port, NTBX_DB_QP_MASK);
	char c = 1;
	th_xfer(n->done_fd, &c, 1, 1);   /* wait for the victim to finish */
	th_xfer(n->rfd, &c, 1, 0);
	ntbx_qp_close(qp, 1);
	ntbx_fabric_leave(f);
	return 0;
}

static int victim2_main(void *arg)
{
	struct node *n = arg;
	struct ntbx_fabric *f;
	struct ntbx_qp *qp = setup(n, &f, NULL);
	char c;
	uint8_t buf[4096];
	th_xfer(n->done_fd, &c, 1, 0);   /* the garbage is in place */
	if (n->mode == 1) {
		CHECK_EQ(ntbx_qp_write(qp, buf, 100, 0), -EPROTO);
	} else {
		CHECK_EQ(ntbx_qp_read(qp, buf, sizeof buf, 0), -EPROTO);
		int eof;
		CHECK_EQ(ntbx_qp_recv(qp, buf, sizeof buf, 0, &eof), -EPROTO);
	}
	CHECK(ntbx_qp_poll(qp) & NTBX_QP_ERROR);
	CHECK_EQ(ntbx_qp_write(qp, buf, 10, 0), -EPROTO);
	CHECK_EQ(ntbx_qp_read(qp, buf, 10, 0), -EPROTO);
	th_xfer(n->wfd, &c, 1, 1);
	ntbx_qp_close(qp, 1);
	ntbx_fabric_leave(f);
	return th_failures ? 1 : 0;
}

static void t_garbage(int mode)
{
	int a[2], b[2], d[2];
	REQUIRE(pipe(a) == 0 && pipe(b) == 0 && pipe(d) == 0);
	struct node evil = { 1, a[1], b[0], d[1], mode };
	struct node vic = { 0, b[1], a[0], d[0], mode };
	pid_t pe = th_spawn(evil_main, &evil);
	pid_t pv = th_spawn(victim2_main, &vic);
	CHECK_EQ(th_wait(pv), 0);
	CHECK_EQ(th_wait(pe), 0);
	close(a[0]); close(a[1]); close(b[0]); close(b[1]);
	close(d[0]); close(d[1]);
}

int main(void)
{
	th_init("qp_fail");
	th_fabric(FABRIC, 2, NTBX_TOPO_SWITCH, 0, 16ull << 20);
	for (int m = 0; m < 4; m++)
		t_garbage(m);
	t_death();
	ntbx_fabric_destroy(FABRIC);
	return th_done("test_qp_fail");
}
