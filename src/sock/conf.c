/* SPDX-License-Identifier: MIT */
/*
 * conf.c — the sockets layer's configuration: read once, at start-up, from
 * the settings table (util/settings.h: the environment, else ntbx.conf;
 * NTBX_SOCK, NTBX_FABRIC, NTBX_SOCK_PORTS, NTBX_SOCK_BUF, NTBX_NODE, and the
 * wait policy's spin budget) into sk_cfg, and the port rules it holds.
 * The rest of the layer sees sk_cfg only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ntbx/fabric.h"
#include "sock/sock.h"
#include "util/settings.h"
#include "util/util.h"

struct sk_cfg sk_cfg;

/* Whether the table refused @id's value.  The sockets then stay on TCP
 * rather than take the default (NTBX_SOCK_PORTS=!22 with a typo must not
 * accelerate port 22), said in one line for the whole process tree: the
 * children inherit the environment, and the mark. */
static int cfg_bad(enum ntbx_setting_id id)
{
	if (!ntbx_setting_bad(id))
		return 0;
	const char *var = ntbx_setting_desc(id)->name;
	const char *w = ntbx_setting_str(NTBX_SET_SOCK_WARNED);
	if (!w || strcmp(w, var)) {
		char want[160];
		ntbx_log(NTBX_LOG_ERROR, "ignoring %s='%s': expected %s; sockets "
		         "stay on TCP", var, ntbx_setting_given(id),
		         ntbx_setting_expects(id, want, sizeof want));
		setenv("NTBX_SOCK_WARNED", var, 1);
	}
	return 1;
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

/* The constructor's first step (entry.c): sk_cfg from the settings.  A
 * bad value leaves every socket on TCP (sk_cfg.on 0), said once. */
/* A ring size: @v rounded up to a power of two, at least the smallest. */
static uint32_t ring_pow2(uint64_t v)
{
	uint32_t r = NTBX_QP_MIN_RING;
	while (r < v && r < NTBX_QP_MAX_RING)
		r <<= 1;
	return r;
}

void sk_conf_read(void)
{
	ntbx_log_set_write(sk_real.write);   /* not our own write wrapper */
	/* each bad one said (a refused value is not asked for: the table
	 * would add its own line) */
	int bad = cfg_bad(NTBX_SET_SOCK) | cfg_bad(NTBX_SET_SOCK_PORTS) |
	          cfg_bad(NTBX_SET_SOCK_BUF) | cfg_bad(NTBX_SET_NODE) |
	          cfg_bad(NTBX_SET_SOCK_XHOST_BUF);
	const char *s = ntbx_setting_str(NTBX_SET_FABRIC);
	snprintf(sk_cfg.fabric, sizeof sk_cfg.fabric, "%s",
	         s ? s : ntbx_fabric_default_name());
	sk_cfg.on = !bad && ntbx_setting_bool(NTBX_SET_SOCK);
	sk_cfg.ring = NTBX_QP_DEFAULT_RING;
	if (!bad) {
		/* the table checked the syntax; the rules fit SK_MAX_PORT_RULES */
		s = ntbx_setting_str(NTBX_SET_SOCK_PORTS);
		if (s && parse_ports(s) < 0)
			sk_cfg.on = 0;
		if (ntbx_setting_is_set(NTBX_SET_SOCK_BUF))
			sk_cfg.ring = ring_pow2(ntbx_setting_size(NTBX_SET_SOCK_BUF));
	}
	sk_cfg.xring = ring_pow2(ntbx_setting_size(NTBX_SET_SOCK_XHOST_BUF));
	sk_cfg.spin_ns = (uint64_t)ntbx_spin_us() * 1000;
}
