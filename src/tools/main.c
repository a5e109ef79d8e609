/* SPDX-License-Identifier: MIT */
/*
 * ntbx — the command-line tool: manage fabrics and measure them, run
 * programs on them (run, stat), IP over them (ipof), and serve a host's
 * node of a many-host fabric (node).
 *
 * Exit codes: 0 success, 1 runtime failure (one line on stderr naming the
 * fabric and the fix), 2 bad command line (one line on stderr); `ntbx run`
 * exits with its program's status.
 */
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "tool.h"

#ifndef NTBX_VERSION
#define NTBX_VERSION "0.1.0"
#endif

static const struct {
	const char *name;
	int (*fn)(int, char **);
	const char *what;
} cmds[] = {
	{ "fabric", cmd_fabric, "create, list, show and destroy fabrics" },
	{ "perf", cmd_perf, "outbound-window write throughput (like ntb_perf)" },
	{ "pingpong", cmd_pingpong,
	  "one-way latency through doorbells and polling (like ntb_pingpong)" },
	{ "qp", cmd_qp, "queue-pair throughput and latency, switch or ring" },
	{ "run", cmd_run, "run a program with its TCP sockets on the fabric" },
	{ "stat", cmd_stat, "live connections of programs under `ntbx run`" },
	{ "ipof", cmd_ipof, "IP over the fabric: a TUN device per node" },
	{ "node", cmd_node, "serve this host's node of a many-host (ofi) fabric" },
	{ "settings", cmd_settings,
	  "every variable ntbx reads, its config key, default and value" },
};

static void usage(FILE *fp)
{
	fprintf(fp,
	        "usage: ntbx COMMAND [OPTIONS]\n"
	        "\n"
	        "ntbx emulates a PCIe non-transparent-bridge cluster fabric in "
	        "shared memory,\nor across hosts over libfabric (the ofi "
	        "backend).\n"
	        "\n"
	        "commands:\n");
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(fp, "  %-10s %s\n", cmds[i].name, cmds[i].what);
	fprintf(fp,
	        "\n"
	        "Every command takes --help.  Results are tables; --json prints "
	        "one JSON object\nper result line.  Sizes: 4096, 64K, 4M, 1G "
	        "(K = 1024).\n"
	        "\n"
	        "settings: the environment, else ~/.config/ntbx.conf, else "
	        "/etc/ntbx.conf;\n`ntbx settings` lists every one with its "
	        "default.  NTBX_FABRIC: the fabric\nwhen --fabric is not given "
	        "(default: \"default\" for root, \"default-UID\" for\nother "
	        "users); NTBX_SHM_DIR: where fabrics live (default: /dev/shm)\n"
	        "\n"
	        "exit status: 0 ok, 1 runtime failure, 2 bad command line "
	        "(ntbx run: its\nprogram's)\n");
}

int main(int argc, char **argv)
{
	if (argc < 2)
		usage_die("missing command");
	const char *c = argv[1];
	if (strcmp(c, "help") == 0 && argc > 2 && strcmp(argv[2], "settings") == 0)
		return cmd_settings(argc - 2, argv + 2);
	if (is_help(c) || strcmp(c, "help") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(c, "--version") == 0 || strcmp(c, "version") == 0) {
		printf("ntbx %s\n", NTBX_VERSION);
		return 0;
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (strcmp(c, cmds[i].name) == 0) {
			g_cmd = cmds[i].name;
			return cmds[i].fn(argc - 1, argv + 1);
		}
	if (c[0] == '-')
		usage_die("unknown option '%s'", c);
	usage_die("unknown command '%s'", c);
}
