/* SPDX-License-Identifier: MIT */
/*
 * conf.c — the sockets layer's configuration: read once, at start-up, from
 * the environment (NTBX_SOCK, NTBX_FABRIC, NTBX_SOCK_PORTS, NTBX_SOCK_BUF,
 * NTBX_NODE, and the wait policy's spin budget) into sk_cfg, and the port
 * rules it holds.  Separate so that every variable the preload reads is
 * read here and nowhere else (one place to move to a settings table); the
 * rest of the layer sees sk_cfg only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ntbx/fabric.h"
#include "sock/sock.h"
#include "util/util.h"

struct sk_cfg sk_cfg;

/* One line per bad variable for the whole process tree: the children
 * inherit the environment, and the mark. */
static void cfg_bad(const char *var, const char *val, const char *want)
{
	const char *w = getenv("NTBX_SOCK_WARNED");
	if (w && !strcmp(w, var))
		return;
	fprintf(stderr, "ntbx: ignoring %s='%s': expected %s; sockets stay on "
	        "TCP\n", var, val, want);
	setenv("NTBX_SOCK_WARNED", var, 1);
}

/* NTBX_SOCK_PORTS: "5201,6379,8000-8100" accelerates only those;
 * "!22,!5432" everything but those. */
static int parse_ports(const char *s)
{
	int n = 0;
	const char *p = s;
	while (*p) {
		int neg = 0;
		if (*p == '!') {
			neg = 1;
			p++;
		}
		char *end;
		long a = strtol(p, &end, 10), b = a;
		if (end == p || a < 1 || a > 65535)
			return -1;
		p = end;
		if (*p == '-') {
			b = strtol(p + 1, &end, 10);
			if (end == p + 1 || b < a || b > 65535)
				return -1;
			p = end;
		}
		if (*p == ',')
			p++;
		else if (*p)
			return -1;
		if (n >= SK_MAX_PORT_RULES)
			return -1;
		sk_cfg.rules[n].lo = (uint16_t)a;
		sk_cfg.rules[n].hi = (uint16_t)b;
		sk_cfg.rules[n].neg = neg;
		n++;
	}
	sk_cfg.nrules = n;
	return 0;
}

int sk_port_ok(unsigned port)
{
	if (!sk_cfg.nrules)
		return 1;
	int any_pos = 0;
	for (int i = 0; i < sk_cfg.nrules; i++) {
		int in = port >= sk_cfg.rules[i].lo && port <= sk_cfg.rules[i].hi;
		if (sk_cfg.rules[i].neg && in)
			return 0;
		if (!sk_cfg.rules[i].neg) {
			any_pos = 1;
			if (in)
				return 1;
		}
	}
	return !any_pos;
}

/* The constructor's first step (entry.c): sk_cfg from the environment.  A
 * bad value leaves every socket on TCP (sk_cfg.on 0), said once. */
void sk_conf_read(void)
{
	sk_cfg.on = 1;
	const char *s = getenv("NTBX_SOCK");
	if (s && *s) {
		if (!strcmp(s, "off") || !strcmp(s, "0"))
			sk_cfg.on = 0;
		else if (strcmp(s, "on") && strcmp(s, "1")) {
			cfg_bad("NTBX_SOCK", s, "on or off");
			sk_cfg.on = 0;
		}
	}
	s = getenv("NTBX_FABRIC");
	snprintf(sk_cfg.fabric, sizeof sk_cfg.fabric, "%s",
	         s && *s ? s : ntbx_fabric_default_name());
	s = getenv("NTBX_SOCK_PORTS");
	if (s && *s && parse_ports(s) < 0) {
		cfg_bad("NTBX_SOCK_PORTS", s, "ports and ranges such as "
		        "5201,8000-8100 or !22");
		sk_cfg.on = 0;
	}
	sk_cfg.ring = NTBX_QP_DEFAULT_RING;
	s = getenv("NTBX_SOCK_BUF");
	if (s && *s) {
		uint64_t v = 0;
		if (ntbx_parse_size(s, &v) < 0 || v < NTBX_QP_MIN_RING ||
		    v > NTBX_QP_MAX_RING) {
			cfg_bad("NTBX_SOCK_BUF", s, "a size from 4K to 64M");
			sk_cfg.on = 0;
		} else {
			uint32_t r = NTBX_QP_MIN_RING;
			while (r < v)
				r <<= 1;
			sk_cfg.ring = r;
		}
	}
	s = getenv("NTBX_NODE");
	if (s && *s) {
		char *end;
		long v = strtol(s, &end, 10);
		if (*end || v < 0 || v >= NTBX_MAX_NODES) {
			cfg_bad("NTBX_NODE", s, "a node number from 0 to 63");
			sk_cfg.on = 0;
		}
	}
	sk_cfg.spin_ns = (uint64_t)ntbx_spin_us() * 1000;
}
