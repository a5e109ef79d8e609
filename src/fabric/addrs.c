/* SPDX-License-Identifier: MIT */
/*
 * Node addresses: each node records the IP addresses of its network
 * namespace, so that a connect() to an address can be mapped to a node.
 * Loopback addresses are not recorded: every namespace has them, and
 * they always mean this node.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <string.h>

#include "fabric/fabric_priv.h"

/* An address as the 16 bytes of its IPv6 form (v4 as v4-mapped). */
static int addr_key(const struct sockaddr *sa, socklen_t len, uint8_t out[16],
                    int *loopback)
{
	static const uint8_t v4map[12] = { 0,0,0,0,0,0,0,0,0,0,0xff,0xff };
	if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *s = (const void *)sa;
		memcpy(out, v4map, 12);
		memcpy(out + 12, &s->sin_addr, 4);
		*loopback = out[12] == 127;
		return 0;
	}
	if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *s = (const void *)sa;
		memcpy(out, &s->sin6_addr, 16);
		*loopback = IN6_IS_ADDR_LOOPBACK(&s->sin6_addr) ||
		            (!memcmp(out, v4map, 12) && out[12] == 127);
		return 0;
	}
	return -EAFNOSUPPORT;
}

int fab_record_addrs(struct ntbx_fabric *f)
{
	struct ifaddrs *ifa;
	if (getifaddrs(&ifa) < 0)
		return -errno;
	struct ntbx_node_addr a[NTBX_NODE_ADDRS];
	int n = 0;
	for (struct ifaddrs *i = ifa; i && n < NTBX_NODE_ADDRS; i = i->ifa_next) {
		if (!i->ifa_addr)
			continue;
		int fam = i->ifa_addr->sa_family;
		socklen_t len = fam == AF_INET ? sizeof(struct sockaddr_in)
		                               : sizeof(struct sockaddr_in6);
		uint8_t key[16];
		int lo;
		if ((fam != AF_INET && fam != AF_INET6) ||
		    addr_key(i->ifa_addr, len, key, &lo) < 0 || lo)
			continue;
		if (fam == AF_INET6 && IN6_IS_ADDR_LINKLOCAL((struct in6_addr *)key))
			continue;
		static const uint8_t zero[16];
		if ((fam == AF_INET && !memcmp(key + 12, zero, 4)) ||
		    !memcmp(key, zero, 16))
			continue;   /* unspecified: an interface with no address */
		memset(&a[n], 0, sizeof a[n]);
		a[n].family = (uint8_t)fam;
		a[n].prefix = fam == AF_INET ? 32 : 128;
		memcpy(a[n].addr, key, 16);
		n++;
	}
	freeifaddrs(ifa);
	return ntbx_node_set_addrs(f->dev, a, n);
}

int ntbx_fabric_record_addrs(struct ntbx_fabric *f)
{
	return fab_record_addrs(f);
}

int ntbx_fabric_node_of_addr(struct ntbx_fabric *f, const struct sockaddr *sa,
                             socklen_t len)
{
	uint8_t key[16];
	int lo;
	if (!sa || addr_key(sa, len, key, &lo) < 0)
		return -EAFNOSUPPORT;
	if (lo)
		return f->node;
	for (int node = 0; node < f->nnodes; node++) {
		struct ntbx_node_addr a[NTBX_NODE_ADDRS];
		int n = ntbx_node_get_addrs(f->dev, node, a, NTBX_NODE_ADDRS);
		for (int i = 0; i < n; i++)
			if (!memcmp(a[i].addr, key, 16))
				return node;
	}
	return -ENOENT;
}
