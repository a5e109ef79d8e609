/* SPDX-License-Identifier: MIT */
/*
 * udpecho — a UDP echo server and checking client, built with `gcc -static`
 * by tests/ipof_net.sh: a program no LD_PRELOAD can interpose, so its
 * packets cross the fabric only through the ipof TUN device.
 *
 *   udpecho server ADDR PORT READYFILE COUNT   echo COUNT datagrams, exit
 *   udpecho client ADDR PORT COUNT SIZE        send COUNT datagrams of SIZE
 *                                              bytes, check each echo
 * Exit 0 on success, 1 with one line on stderr otherwise.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int fail(const char *m)
{
	fprintf(stderr, "udpecho: %s\n", m);
	return 1;
}

int main(int argc, char **argv)
{
	if (argc != 6)
		return fail("usage: server ADDR PORT READYFILE COUNT | client "
		            "ADDR PORT COUNT SIZE");
	struct sockaddr_in sa;
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_port = htons((unsigned short)atoi(argv[3]));
	if (inet_pton(AF_INET, argv[2], &sa.sin_addr) != 1)
		return fail("bad address");
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	if (s < 0)
		return fail("socket");
	static unsigned char buf[65536], want[65536];
	if (strcmp(argv[1], "server") == 0) {
		if (bind(s, (struct sockaddr *)&sa, sizeof sa) < 0)
			return fail("bind");
		FILE *fp = fopen(argv[4], "w");
		if (!fp)
			return fail("ready file");
		fclose(fp);
		int count = atoi(argv[5]);
		for (int i = 0; i < count; i++) {
			struct pollfd p = { s, POLLIN, 0 };
			if (poll(&p, 1, 20000) != 1)
				return fail("server: nothing received in 20 s");
			struct sockaddr_in from;
			socklen_t fl = sizeof from;
			ssize_t n = recvfrom(s, buf, sizeof buf, 0,
			                     (struct sockaddr *)&from, &fl);
			if (n < 0)
				return fail("recvfrom");
			if (sendto(s, buf, (size_t)n, 0, (struct sockaddr *)&from,
			           fl) != n)
				return fail("sendto");
		}
		return 0;
	}
	int count = atoi(argv[4]);
	size_t size = (size_t)atoi(argv[5]);
	if (size < 8 || size > sizeof buf)
		return fail("bad size");
	for (int i = 0; i < count; i++) {
		for (size_t k = 0; k < size; k++)
			want[k] = (unsigned char)(i * 131 + k * 7);
		if (sendto(s, want, size, 0, (struct sockaddr *)&sa, sizeof sa) !=
		    (ssize_t)size)
			return fail("client: sendto");
		struct pollfd p = { s, POLLIN, 0 };
		if (poll(&p, 1, 5000) != 1)
			return fail("client: no echo in 5 s");
		ssize_t n = recv(s, buf, sizeof buf, 0);
		if (n != (ssize_t)size || memcmp(buf, want, size) != 0)
			return fail("client: echo differs from what was sent");
	}
	printf("udpecho: %d echoes of %zu bytes checked\n", count, size);
	return 0;
}
