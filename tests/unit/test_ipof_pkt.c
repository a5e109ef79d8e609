/* SPDX-License-Identifier: MIT */
/* ipof: packet classification, CIDR parsing and the status of a node
 * without a daemon (no device, no root needed). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ipof/ipof_int.h"
#include "ntbx/fabric.h"

static uint8_t pkt[128];

static void v4(const char *dst)
{
	memset(pkt, 0, sizeof pkt);
	pkt[0] = 0x45;
	inet_pton(AF_INET, dst, pkt + 16);
}

static void v6(const char *dst)
{
	memset(pkt, 0, sizeof pkt);
	pkt[0] = 0x60;
	inet_pton(AF_INET6, dst, pkt + 24);
}

int main(void)
{
	const char *name = th_init("test_ipof_pkt");
	struct sockaddr_storage ss;
	socklen_t sl;
	uint32_t bc;
	inet_pton(AF_INET, "10.213.0.255", &bc);

	v4("10.213.0.2");
	CHECK_EQ(ipof_classify(pkt, 20, bc, &ss, &sl), IPOF_PKT_UNICAST);
	CHECK_EQ(ss.ss_family, AF_INET);
	CHECK_EQ(sl, sizeof(struct sockaddr_in));
	CHECK(!memcmp(&((struct sockaddr_in *)&ss)->sin_addr, pkt + 16, 4));
	v4("10.213.0.255");
	CHECK_EQ(ipof_classify(pkt, 20, bc, &ss, &sl), IPOF_PKT_BCAST);
	CHECK_EQ(ipof_classify(pkt, 20, 0, &ss, &sl), IPOF_PKT_UNICAST);
	v4("255.255.255.255");
	CHECK_EQ(ipof_classify(pkt, 20, 0, &ss, &sl), IPOF_PKT_BCAST);
	v4("224.0.0.251");
	CHECK_EQ(ipof_classify(pkt, 20, bc, &ss, &sl), IPOF_PKT_MCAST);
	v4("239.255.255.250");
	CHECK_EQ(ipof_classify(pkt, 20, bc, &ss, &sl), IPOF_PKT_MCAST);
	/* truncated, bad IHL, bad version, empty */
	v4("10.213.0.2");
	CHECK_EQ(ipof_classify(pkt, 19, bc, &ss, &sl), IPOF_PKT_BAD);
	pkt[0] = 0x44;
	CHECK_EQ(ipof_classify(pkt, 20, bc, &ss, &sl), IPOF_PKT_BAD);
	pkt[0] = 0x55;
	CHECK_EQ(ipof_classify(pkt, 40, bc, &ss, &sl), IPOF_PKT_BAD);
	CHECK_EQ(ipof_classify(pkt, 0, bc, &ss, &sl), IPOF_PKT_BAD);

	v6("fd00::2");
	CHECK_EQ(ipof_classify(pkt, 40, bc, &ss, &sl), IPOF_PKT_UNICAST);
	CHECK_EQ(ss.ss_family, AF_INET6);
	CHECK(!memcmp(&((struct sockaddr_in6 *)&ss)->sin6_addr, pkt + 24, 16));
	CHECK_EQ(ipof_classify(pkt, 39, bc, &ss, &sl), IPOF_PKT_BAD);
	v6("ff02::1");
	CHECK_EQ(ipof_classify(pkt, 40, bc, &ss, &sl), IPOF_PKT_MCAST);

	int fam, pfx;
	uint8_t a[16];
	CHECK_EQ(ipof_parse_cidr("10.213.0.1/24", &fam, a, &pfx), 0);
	CHECK_EQ(fam, AF_INET);
	CHECK_EQ(pfx, 24);
	CHECK_EQ(a[0], 10);
	CHECK_EQ(a[3], 1);
	CHECK_EQ(ipof_parse_cidr("10.213.0.1", &fam, a, &pfx), 0);
	CHECK_EQ(pfx, 32);
	CHECK_EQ(ipof_parse_cidr("fd00::1/64", &fam, a, &pfx), 0);
	CHECK_EQ(fam, AF_INET6);
	CHECK_EQ(pfx, 64);
	CHECK_EQ(ipof_parse_cidr("10.213.0.1/33", &fam, a, &pfx), -EINVAL);
	CHECK_EQ(ipof_parse_cidr("10.213.0.1/0", &fam, a, &pfx), -EINVAL);
	CHECK_EQ(ipof_parse_cidr("10.213.0.1/", &fam, a, &pfx), -EINVAL);
	CHECK_EQ(ipof_parse_cidr("10.213.0.1/2x", &fam, a, &pfx), -EINVAL);
	CHECK_EQ(ipof_parse_cidr("fd00::1/129", &fam, a, &pfx), -EINVAL);
	CHECK_EQ(ipof_parse_cidr("nonsense", &fam, a, &pfx), -EINVAL);
	CHECK_EQ(ipof_parse_cidr("", &fam, a, &pfx), -EINVAL);
	char longs[200];
	memset(longs, '1', sizeof longs - 1);
	longs[sizeof longs - 1] = 0;
	CHECK_EQ(ipof_parse_cidr(longs, &fam, a, &pfx), -EINVAL);

	/* drop names */
	CHECK(!strcmp(ntbx_ipof_drop_name(NTBX_IPOF_DROP_NO_ROUTE), "no_route"));
	CHECK(!strcmp(ntbx_ipof_drop_name(NTBX_IPOF_NDROPS), "?"));
	CHECK(!strcmp(ntbx_ipof_drop_name(-1), "?"));

	/* status: no fabric, then a fabric whose nodes run no daemon */
	struct ntbx_ipof_status st;
	CHECK(ntbx_ipof_status("ipof-none", 0, &st) < 0);
	th_fabric("ipof-unit", 2, NTBX_TOPO_SWITCH, 4 << 20, 4 << 20);
	CHECK_EQ(ntbx_ipof_status("ipof-unit", 0, &st), -ESRCH);
	CHECK(ntbx_ipof_status("ipof-unit", 5, &st) < 0);
	/* a joined node without a daemon has no status either */
	struct ntbx_fabric *f = th_join("ipof-unit", 1, 0);
	CHECK_EQ(ntbx_ipof_status("ipof-unit", 1, &st), -ESRCH);
	/* running without a stop flag or with a bad MTU is refused before
	 * anything is created */
	struct ntbx_ipof_opts o = { .fabric = "ipof-unit", .node = -1 };
	CHECK_EQ(ntbx_ipof_run(&o), -EINVAL);
	volatile sig_atomic_t stop = 1;
	o.stop = &stop;
	o.mtu = 100;
	CHECK_EQ(ntbx_ipof_run(&o), -EINVAL);
	o.mtu = 0;
	o.addr = "10.1.2.3/40";
	CHECK_EQ(ntbx_ipof_run(&o), -EINVAL);
	ntbx_fabric_leave(f);
	ntbx_fabric_destroy("ipof-unit");
	return th_done(name);
}
