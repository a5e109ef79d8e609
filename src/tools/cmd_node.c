/* SPDX-License-Identifier: MIT */
/*
 * ntbx node serve — the per-host agent of a many-host (ofi) fabric.
 *
 * The agent is the one libfabric user of ntbx, and libfabric brings its
 * providers' libraries with it: Debian's links libpsm_infinipath, whose
 * constructor polls for an InfiniPath card (about 850 sleeps, 0.2 s).  So
 * the ntbx command does not link it: `ntbx node ...` executes the agent
 * program, ntbx-node-agent, built from this same file with
 * NTBX_NODE_AGENT, and every other command (`ntbx run` above all: it
 * stands before each program it starts) starts in milliseconds.  The
 * agent is looked for beside the running ntbx (a build tree), in
 * ../libexec/ntbx from it (an installation, moved or not), then in
 * NTBX_LIBEXECDIR (the configured one).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "dev/dev.h"
#include "ntbx/dev.h"
#include "ntbx/fabric.h"
#include "tool.h"

#ifndef NTBX_NODE_AGENT
/* Execute the agent program with our arguments; returns only on failure. */
int cmd_node(int argc, char **argv)
{
	(void)argc;
	char self[PATH_MAX], path[PATH_MAX + 64];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	const char *where[3][2] = { { NULL, "" }, { NULL, "/../libexec/ntbx" },
	                            { NTBX_LIBEXECDIR, "" } };
	if (n > 0) {
		self[n] = 0;
		char *slash = strrchr(self, '/');
		if (slash) {
			*slash = 0;
			where[0][0] = where[1][0] = self;
		}
	}
	char *args[argc + 2];
	args[0] = "ntbx-node-agent";
	for (int i = 0; i <= argc; i++)   /* "node" ... and the NULL */
		args[i + 1] = argv[i];
	int err = ENOENT;
	for (int d = 0; d < 3; d++) {
		if (!where[d][0])
			continue;
		snprintf(path, sizeof path, "%s%s/ntbx-node-agent", where[d][0],
		         where[d][1]);
		execv(path, args);
		if (errno != ENOENT)
			err = errno;
	}
	runtime_die("the node agent program ntbx-node-agent could not be "
	            "started (looked beside this ntbx and in %s): %s",
	            NTBX_LIBEXECDIR, strerror(err));
}
#else

static void usage(FILE *fp)
{
	fprintf(fp,
	"usage: ntbx node serve [--fabric NAME] [--ready FILE] [--heartbeat MS]\n"
	"                       [--dead MS] [--timeout SEC]\n"
	"\n"
	"Serve this host's node of a many-host fabric (made with `ntbx fabric\n"
	"create NAME --backend ofi --hosts A,B,...` on every host): run in the\n"
	"foreground, one per host, until SIGTERM or SIGINT.  The agent owns the\n"
	"libfabric endpoint (provider: FI_PROVIDER, else tcp;ofi_rxm or the first\n"
	"RDM provider with RMA and remote CQ data), meets the other hosts' agents\n"
	"at the addresses of --hosts, executes the node's DMA queue, turns remote\n"
	"CQ data into doorbells, and reports a peer that falls silent as\n"
	"link-down.  Its own death is link-down for the local processes and,\n"
	"within --dead MS, for the peers.  The node is the position of this\n"
	"host's address in --hosts, or PMIX_RANK / SLURM_PROCID / PMI_RANK.\n"
	"\n"
	"options:\n"
	"  --fabric NAME    the fabric (default $NTBX_FABRIC, else \"default\")\n"
	"  --ready FILE     write \"ready NODE\" to FILE once the endpoint is up\n"
	"  --heartbeat MS   heartbeat period (default 100)\n"
	"  --dead MS        a peer silent this long is down (default 1000)\n"
	"  --timeout SEC    bound of each rendezvous step (default 2)\n"
	"  -h, --help       this help\n");
}

/* ntbx-node-agent: argv as `ntbx` would have it, from "node" on. */
int main(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "node"))
		usage_die("ntbx-node-agent is run by `ntbx node` (ntbx node --help)");
	g_cmd = "node";
	return cmd_node(argc - 1, argv + 1);
}

int cmd_node(int argc, char **argv)
{
	if (argc < 2 || is_help(argv[1])) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? EXIT_USAGE : 0;
	}
	if (strcmp(argv[1], "serve"))
		usage_die("unknown node command '%s' (serve)", argv[1]);
	g_cmd = "node serve";
	const char *fabric = NULL, *ready = NULL, *v;
	int hb = 100, dead = 1000;
	double timeout = 2;
	for (int i = 2; i < argc; i++) {
		if (is_help(argv[i])) {
			usage(stdout);
			return 0;
		} else if ((v = opt_value(argc, argv, &i, "--fabric"))) {
			fabric = v;
		} else if ((v = opt_value(argc, argv, &i, "--ready"))) {
			ready = v;
		} else if ((v = opt_value(argc, argv, &i, "--heartbeat"))) {
			hb = (int)parse_int(v, "--heartbeat", 1, 60000);
		} else if ((v = opt_value(argc, argv, &i, "--dead"))) {
			dead = (int)parse_int(v, "--dead", 10, 600000);
		} else if ((v = opt_value(argc, argv, &i, "--timeout"))) {
			timeout = parse_double(v, "--timeout", 0.01, 3600);
		} else {
			bad_arg(argv[i]);
		}
	}
	if (dead <= hb)
		usage_die("--dead %d must be longer than --heartbeat %d", dead, hb);
	const char *name = default_fabric(fabric);
	char dir[512];
	if (ntbx_fabric_dir(name, dir, sizeof dir) < 0)
		runtime_die("%s", ntbx_errmsg());
	struct ntbx_dev_serve_opts o = {
		.fabric = name, .dir = dir, .timeout_s = timeout, .hb_ms = hb,
		.dead_ms = dead, .ready_file = ready,
	};
	int rc = ntbx_dev_serve(&o);
	if (rc < 0)
		runtime_die("%s", ntbx_errmsg());
	return rc;
}
#endif
