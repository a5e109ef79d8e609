/* SPDX-License-Identifier: MIT */
/*
 * IP over the fabric: the TUN device, its configuration by ioctl (no
 * shelling out), CIDR parsing and packet classification.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ipof/ipof_int.h"
#include "util/util.h"

int ipof_parse_cidr(const char *s, int *family, uint8_t addr[16],
                    int *prefix)
{
	char buf[INET6_ADDRSTRLEN + 8];
	if (!s || strlen(s) >= sizeof buf)
		return -EINVAL;
	strcpy(buf, s);
	char *slash = strchr(buf, '/');
	long pfx = -1;
	if (slash) {
		*slash = 0;
		char *end;
		errno = 0;
		pfx = strtol(slash + 1, &end, 10);
		if (errno || end == slash + 1 || *end)
			return -EINVAL;
	}
	memset(addr, 0, 16);
	if (inet_pton(AF_INET, buf, addr) == 1) {
		if (pfx < 0)
			pfx = 32;
		if (pfx < 1 || pfx > 32)
			return -EINVAL;
		*family = AF_INET;
	} else if (inet_pton(AF_INET6, buf, addr) == 1) {
		if (pfx < 0)
			pfx = 128;
		if (pfx < 1 || pfx > 128)
			return -EINVAL;
		*family = AF_INET6;
	} else {
		return -EINVAL;
	}
	*prefix = (int)pfx;
	return 0;
}

int ipof_classify(const uint8_t *p, size_t n, uint32_t bcast4,
                  struct sockaddr_storage *ss, socklen_t *sslen)
{
	memset(ss, 0, sizeof *ss);
	if (n < 1)
		return IPOF_PKT_BAD;
	int v = p[0] >> 4;
	if (v == 4) {
		if (n < 20 || (p[0] & 0xf) < 5)
			return IPOF_PKT_BAD;
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;
		sin->sin_family = AF_INET;
		memcpy(&sin->sin_addr, p + 16, 4);
		*sslen = sizeof *sin;
		uint32_t d = sin->sin_addr.s_addr;
		if ((ntohl(d) >> 28) == 0xe)
			return IPOF_PKT_MCAST;
		if (d == 0xffffffffu || (bcast4 && d == bcast4))
			return IPOF_PKT_BCAST;
		return IPOF_PKT_UNICAST;
	}
	if (v == 6) {
		if (n < 40)
			return IPOF_PKT_BAD;
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
		sin6->sin6_family = AF_INET6;
		memcpy(&sin6->sin6_addr, p + 24, 16);
		*sslen = sizeof *sin6;
		if (p[24] == 0xff)
			return IPOF_PKT_MCAST;
		return IPOF_PKT_UNICAST;
	}
	return IPOF_PKT_BAD;
}

int ipof_tun_open(const char *want, char *ifname)
{
	if (!want || !*want || strlen(want) >= IFNAMSIZ ||
	    strchr(want, '/') || strchr(want, ' ') || strchr(want, '%'))
		return ntbx_err(EINVAL, "ipof: bad interface name '%s' (1..%d "
		                "characters, no '/', ' ' or '%%')",
		                want ? want : "", IFNAMSIZ - 1);
	int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		if (e == EACCES || e == EPERM)
			return ntbx_err(EPERM, "ipof: needs root (CAP_NET_ADMIN) "
			                "to create a TUN device: run as root");
		return ntbx_err(ENODEV, "ipof: cannot open /dev/net/tun: %s "
		                "(load the tun module)", strerror(e));
	}
	/* A name that is already taken would be attached to, not created:
	 * refuse it, so two daemons never share one device. */
	if (if_nametoindex(want) != 0) {
		close(fd);
		return ntbx_err(EEXIST, "ipof: an interface named %s exists in "
		                "this network namespace ('ntbx ipof down --name "
		                "%s' or choose --name)", want, want);
	}
	struct ifreq ifr;
	memset(&ifr, 0, sizeof ifr);
	ifr.ifr_flags = IFF_TUN | IFF_NO_PI | IFF_VNET_HDR;
	strncpy(ifr.ifr_name, want, IFNAMSIZ - 1);
	if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
		int e = errno;
		close(fd);
		if (e == EPERM || e == EACCES)
			return ntbx_err(EPERM, "ipof: needs root (CAP_NET_ADMIN) "
			                "to create a TUN device: run as root");
		if (e == EBUSY || e == EEXIST)
			return ntbx_err(EEXIST, "ipof: interface %s is in use",
			                want);
		return ntbx_err(e, "ipof: TUNSETIFF %s: %s", want, strerror(e));
	}
	memcpy(ifname, ifr.ifr_name, IFNAMSIZ);
	ifname[IFNAMSIZ - 1] = 0;
	/* checksum offload: the kernel hands us packets whose checksum is
	 * still to be done (VIRTIO_NET_HDR_F_NEEDS_CSUM), the peer's kernel
	 * takes them as such: loopback-like delivery without checksumming */
	int hsz = IPOF_VHDR;
	if (ioctl(fd, TUNSETVNETHDRSZ, &hsz) < 0 ||
	    ioctl(fd, TUNSETOFFLOAD, (unsigned long)TUN_F_CSUM) < 0) {
		int e = errno;
		close(fd);
		return ntbx_err(e, "ipof: TUN offloads on %s: %s", want,
		                strerror(e));
	}
	return fd;
}

/* struct in6_ifreq of <linux/ipv6.h>, which clashes with <netinet/in.h>. */
struct ipof_in6_ifreq {
	struct in6_addr addr;
	uint32_t prefixlen;
	int ifindex;
};

int ipof_tun_config(const char *ifname, int mtu, int family,
                    const uint8_t addr[16], int prefix)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return ntbx_err(errno, "ipof: socket: %s", strerror(errno));
	struct ifreq ifr;
	memset(&ifr, 0, sizeof ifr);
	strncpy(ifr.ifr_name, ifname, IFNAMSIZ - 1);
	ifr.ifr_mtu = mtu;
	int rc = 0;
	if (ioctl(s, SIOCSIFMTU, &ifr) < 0) {
		rc = ntbx_err(errno, "ipof: MTU %d on %s: %s", mtu, ifname,
		              strerror(errno));
		goto out;
	}
	if (family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)&ifr.ifr_addr;
		memset(&ifr.ifr_addr, 0, sizeof ifr.ifr_addr);
		sin->sin_family = AF_INET;
		memcpy(&sin->sin_addr, addr, 4);
		if (ioctl(s, SIOCSIFADDR, &ifr) < 0) {
			rc = ntbx_err(errno, "ipof: address on %s: %s", ifname,
			              strerror(errno));
			goto out;
		}
		uint32_t m = prefix ? htonl(0xffffffffu << (32 - prefix)) : 0;
		memset(&ifr.ifr_netmask, 0, sizeof ifr.ifr_netmask);
		sin = (struct sockaddr_in *)&ifr.ifr_netmask;
		sin->sin_family = AF_INET;
		sin->sin_addr.s_addr = m;
		if (ioctl(s, SIOCSIFNETMASK, &ifr) < 0) {
			rc = ntbx_err(errno, "ipof: netmask on %s: %s", ifname,
			              strerror(errno));
			goto out;
		}
	}
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0) {
		rc = ntbx_err(errno, "ipof: flags of %s: %s", ifname,
		              strerror(errno));
		goto out;
	}
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0) {
		rc = ntbx_err(errno, "ipof: bringing %s up: %s", ifname,
		              strerror(errno));
		goto out;
	}
	if (family == AF_INET6) {
		int s6 = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (s6 < 0) {
			rc = ntbx_err(errno, "ipof: IPv6 socket: %s",
			              strerror(errno));
			goto out;
		}
		struct ipof_in6_ifreq r6;
		memset(&r6, 0, sizeof r6);
		memcpy(&r6.addr, addr, 16);
		r6.prefixlen = (uint32_t)prefix;
		r6.ifindex = (int)if_nametoindex(ifname);
		if (ioctl(s6, SIOCSIFADDR, &r6) < 0)
			rc = ntbx_err(errno, "ipof: IPv6 address on %s: %s",
			              ifname, strerror(errno));
		close(s6);
	}
out:
	close(s);
	return rc;
}
