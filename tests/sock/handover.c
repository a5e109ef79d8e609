/* SPDX-License-Identifier: MIT */
/*
 * tests/sock/handover.c — a test library for tests/sock_handover.sh,
 * loaded after libntbx-preload.so into an accepting server.
 *
 * An acceptor looks a request up in the socket table, then takes it with a
 * compare-and-swap of its state and generation.  Between the two, the
 * connector may give up, the slot be reaped and claimed by another
 * connector, and that request answered by another acceptor: the slot is
 * then someone else's, and the first acceptor must not write a byte of
 * it.  This library makes that happen at a fixed point, deterministically:
 * the preload's first fstat() of a socket whose four-tuple has a request
 * in the table (the accepted socket, right after the look) turns that slot
 * into another connection (a new generation, answered: SK_ACC, with
 * marker values in every field an acceptor writes).  handover_check(),
 * called by the server after accept() returned, says whether the slot
 * still holds exactly the markers.  Only with HANDOVER_STEAL=1.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <unistd.h>

#include "sock/sock_tab.h"

static struct sk_tab *tab;
static int stolen = -1;            /* the slot, once taken over */
static struct sk_conn marks;       /* what we put there */

static struct sk_tab *tab_map(void)
{
	const char *dir = getenv("NTBX_SHM_DIR"), *fab = getenv("NTBX_FABRIC");
	if (tab || !dir || !fab)
		return tab;
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/ntbx-%s/%s", dir, fab, SK_TAB_FILE);
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	void *p = mmap(NULL, sizeof *tab, PROT_READ | PROT_WRITE, MAP_SHARED,
	               fd, 0);
	close(fd);
	if (p != MAP_FAILED)
		tab = p;
	return tab;
}

static int port_of(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)ss)->sin_port);
	if (ss->ss_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
	return -1;
}

static void steal(int fd)
{
	struct sockaddr_storage a, b;
	socklen_t al = sizeof a, bl = sizeof b;
	if (getsockname(fd, (struct sockaddr *)&a, &al) < 0 ||
	    getpeername(fd, (struct sockaddr *)&b, &bl) < 0 || !tab_map())
		return;
	int lport = port_of(&a), pport = port_of(&b);
	for (int i = 0; i < SK_CONNS; i++) {
		struct sk_conn *c = &tab->c[i];
		uint64_t sg = __atomic_load_n(&c->sg, __ATOMIC_ACQUIRE);
		union { struct { uint32_t s, g; } p; uint64_t w; } u = { .w = sg };
		if (u.p.s != SK_REQ || c->cl.port != pport || c->dst.port != lport)
			continue;
		/* Another connection now: another connector's request (another
		 * port, no endpoint of ours to reap), answered by another
		 * acceptor (its endpoint, pid and count, a reason). */
		c->cl.port = 1;
		memset(c->cl.ip, 0x77, sizeof c->cl.ip);
		memset(&c->qc, 0, sizeof c->qc);
		c->qa.node = 1;
		c->qa.epoch = 0x5eed;
		c->qa.off = 0x123456;
		c->qa.cookie = 0;
		c->pid_a = 424242;
		c->refs_a = 7;
		snprintf(c->reason, sizeof c->reason, "another acceptor's");
		__atomic_store_n(&c->sg, sk_sg(SK_ACC, u.p.g + 1), __ATOMIC_RELEASE);
		memcpy(&marks, c, sizeof marks);
		stolen = i;
		return;
	}
}

int fstat(int fd, struct stat *st)
{
	static int (*real)(int, struct stat *);
	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "fstat");
	int r = real(fd, st);
	if (r == 0 && S_ISSOCK(st->st_mode) && stolen < 0) {
		const char *on = getenv("HANDOVER_STEAL");
		if (on && *on == '1')
			steal(fd);
	}
	return r;
}

/* -1: nothing was taken over; 0: the slot holds exactly our markers; 1:
 * someone wrote into it (the field is printed on stderr). */
int handover_check(void)
{
	if (stolen < 0)
		return -1;
	const struct sk_conn *c = &tab->c[stolen];
	const char *bad = NULL;
	if (__atomic_load_n(&c->sg, __ATOMIC_ACQUIRE) != marks.sg)
		bad = "state/generation";
	else if (memcmp(&c->qa, &marks.qa, sizeof c->qa))
		bad = "qa";
	else if (c->pid_a != marks.pid_a)
		bad = "pid_a";
	else if (c->refs_a != marks.refs_a)
		bad = "refs_a";
	else if (memcmp(c->reason, marks.reason, sizeof c->reason))
		bad = "reason";
	else if (memcmp(&c->cl, &marks.cl, sizeof c->cl))
		bad = "cl";
	if (bad)
		fprintf(stderr, "handover: slot %d's %s was written\n", stolen, bad);
	return bad != NULL;
}
