/* SPDX-License-Identifier: MIT */
/*
 * test_sock_arm — the queue-pair hook the sockets layer sleeps on:
 * ntbx_qp_arm() + the device's event descriptor (how poll/select/epoll
 * under libntbx-preload.so sleep on fabric descriptors), on a loopback
 * pair in one process:
 *   - armed for reading, a write by the peer makes the descriptor readable;
 *   - not armed, a write does not ring (no wake-up nobody asked for);
 *   - armed for writing on a full ring, the peer's read rings us;
 *   - arm reports readiness that is already there (check before sleeping).
 * Runs under the sanitizers too (the end-to-end socket tests cannot).
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "ntbx/doorbell.h"
#include "ntbx/fabric.h"
#include "ntbx/qp.h"

#define BITS NTBX_DB_QP_MASK   /* every queue pair's bit */

static int evfd_prep(struct ntbx_dev *dev)
{
	int np = ntbx_port_count(dev);
	for (int p = 0; p < np; p++)
		ntbx_db_clear(dev, p, BITS);
	ntbx_db_event_drain(dev);
	return ntbx_db_event_fd(dev, (1ull << np) - 1, BITS);
}

static int readable(int fd, int ms)
{
	struct pollfd p = { fd, POLLIN, 0 };
	return poll(&p, 1, ms) == 1;
}

/* Reader @a, writer @b. */
static void check_pair(struct ntbx_dev *dev, struct ntbx_qp *a,
                       struct ntbx_qp *b)
{
	char buf[4096];
	memset(buf, 7, sizeof buf);
	/* 1. armed for reading, empty: a write rings */
	int fd = evfd_prep(dev);
	REQUIRE(fd >= 0);
	int m = ntbx_qp_arm(a, NTBX_QP_READABLE);
	CHECK(m >= 0 && !(m & NTBX_QP_READABLE));
	CHECK(!readable(fd, 0));
	CHECK_EQ(ntbx_qp_write(b, "x", 1, 0), 1);
	CHECK(readable(fd, 2000));
	CHECK(ntbx_qp_arm(a, NTBX_QP_READABLE) & NTBX_QP_READABLE);
	CHECK_EQ(ntbx_qp_read(a, buf, 1, 0), 1);

	/* 2. not armed: a write does not ring (the arm above that reported
	 * readiness is answered by one ring first) */
	CHECK_EQ(ntbx_qp_write(b, "w", 1, 0), 1);
	CHECK_EQ(ntbx_qp_read(a, buf, 1, 0), 1);
	fd = evfd_prep(dev);
	CHECK_EQ(ntbx_qp_write(b, "y", 1, 0), 1);
	CHECK(!readable(fd, 50));
	CHECK(ntbx_qp_poll(a) & NTBX_QP_READABLE);
	CHECK_EQ(ntbx_qp_read(a, buf, 1, 0), 1);

	/* 3. full ring, armed for writing: the reader's read rings us */
	long n = 0;
	while (ntbx_qp_write(b, buf, sizeof buf, NTBX_QP_NONBLOCK) > 0)
		n++;
	CHECK(n > 0);
	fd = evfd_prep(dev);
	m = ntbx_qp_arm(b, NTBX_QP_WRITABLE);
	CHECK(m >= 0 && !(m & NTBX_QP_WRITABLE));
	ssize_t r;
	long got = 0;
	while ((r = ntbx_qp_read(a, buf, sizeof buf, NTBX_QP_NONBLOCK)) > 0)
		got += r;
	CHECK(got > 0);
	CHECK(readable(fd, 2000));
	CHECK(ntbx_qp_arm(b, NTBX_QP_WRITABLE) & NTBX_QP_WRITABLE);
}

int main(void)
{
	th_init("test_sock_arm");
	th_fabric("arm", 2, NTBX_TOPO_SWITCH, 16u << 20, 0);
	struct ntbx_fabric *f = th_join("arm", 0, 0);
	struct ntbx_dev *dev = ntbx_fabric_dev(f);
	struct ntbx_qp_opts o = { .ring_size = 64u << 10, .flags = 0 };

	/* loopback: both endpoints on node 0 */
	struct ntbx_qp *a, *b;
	th_qp_loopback(f, &o, &a, NULL, &b, NULL);
	check_pair(dev, a, b);
	/* an unconnected endpoint cannot be armed */
	struct ntbx_qp *c;
	struct ntbx_qp_addr ca;
	REQUIRE(ntbx_qp_create(f, 0, &o, &c, &ca) == 0);
	CHECK_EQ(ntbx_qp_arm(c, NTBX_QP_READABLE), -ENOTCONN);
	ntbx_qp_close(c, 1);
	ntbx_qp_close(a, 1);
	ntbx_qp_close(b, 1);
	ntbx_fabric_leave(f);
	return th_done("test_sock_arm");
}
