/* SPDX-License-Identifier: MIT */
/*
 * ntbx run [--fabric F] [--node N] [--ports P] [--buf SIZE] -- CMD ARGS
 *
 * Runs CMD with libntbx-preload.so (found beside this binary: ../lib/)
 * and the NTBX_* environment set, so its TCP connections to listeners of
 * interposed programs on the fabric move over the fabric.  Creates the
 * fabric (2 nodes, switch) on first use.  CMD's exit status is ours.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ntbx/fabric.h"
#include "ntbx/qp.h"
#include "args.h"
#include "util/util.h"
#include "util/settings.h"
#include "tool.h"

static void usage(void)
{
	printf("usage: ntbx run [--fabric F] [--node N] [--ports P] "
	       "[--buf SIZE] -- CMD [ARGS]\n"
	       "\n"
	       "Run an unmodified program with its TCP sockets on the fabric "
	       "(LD_PRELOAD of\nlibntbx-preload.so).  Connections between two "
	       "programs run this way (on the\nsame node or on two nodes of the "
	       "fabric) move their bytes over queue pairs;\neverything else "
	       "stays kernel TCP, byte for byte.\n"
	       "\n"
	       "  --fabric F   fabric to use (default $NTBX_FABRIC, else "
	       "\"default\", created\n               with 2 nodes on first "
	       "use)\n"
	       "  --node N     node to join (default: the one of this network "
	       "namespace)\n"
	       "  --ports P    ports to accelerate: 5201,8000-8100, or !22 to "
	       "exclude\n"
	       "  --buf SIZE   per-connection ring size (default 512K)\n"
	       "\n"
	       "settings read by the program (environment, else ntbx.conf; "
	       "`ntbx settings`\nlists them): NTBX_SOCK=on|off, NTBX_SPIN_US, "
	       "NTBX_LOG=info (says which\nconnections stay on TCP and why); "
	       "per program in ntbx.conf:\n    program=nginx sock_ports=80,443\n");
}

/* The preload library: ../lib/ beside the binary (build and install). */
static int find_preload(char *out, size_t len)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n <= 0)
		return -1;
	self[n] = 0;
	char *slash = strrchr(self, '/');
	if (!slash)
		return -1;
	*slash = 0;
	static const char *rel[] = { "../lib", "../lib64",
	                             "../lib/x86_64-linux-gnu",
	                             "../lib/aarch64-linux-gnu", "." };
	for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
		char p[PATH_MAX + 64];
		if (snprintf(p, sizeof p, "%s/%s/libntbx-preload.so", self,
		             rel[i]) >= (int)sizeof p)
			continue;
		char *r = realpath(p, NULL);
		if (r) {
			snprintf(out, len, "%s", r);
			free(r);
			return 0;
		}
	}
	return -1;
}

int cmd_run(int argc, char **argv)
{
	const char *fabric = NULL, *node = NULL, *ports = NULL, *buf = NULL;
	int i;
	for (i = 1; i < argc; i++) {
		const char *v;
		if (is_help(argv[i])) {
			usage();
			return 0;
		}
		if (!strcmp(argv[i], "--")) {
			i++;
			break;
		}
		if ((v = opt_value(argc, argv, &i, "--fabric")))
			fabric = v;
		else if ((v = opt_value(argc, argv, &i, "--node")))
			node = v;
		else if ((v = opt_value(argc, argv, &i, "--ports")))
			ports = v;
		else if ((v = opt_value(argc, argv, &i, "--buf")))
			buf = v;
		else if (argv[i][0] == '-')
			bad_arg(argv[i]);
		else
			break;
	}
	if (i >= argc)
		usage_die("missing command to run (ntbx run -- CMD ARGS)");
	if (node)
		parse_int(node, "--node", 0, NTBX_MAX_NODES - 1);
	if (buf)
		parse_size(buf, "--buf", NTBX_QP_MIN_RING, NTBX_QP_MAX_RING);
	int implicit = !(fabric && *fabric) &&
	               !ntbx_setting_is_set(NTBX_SET_FABRIC);
	fabric = default_fabric(fabric);

	char lib[PATH_MAX];
	if (find_preload(lib, sizeof lib) < 0)
		runtime_die("cannot find libntbx-preload.so in ../lib beside "
		            "the ntbx binary (build it: make)");

	struct ntbx_fabric_info info;
	int irc = ntbx_fabric_info(fabric, &info);
	if (irc == -EPROTO && implicit) {
		/* the default fabric, made by an older ntbx: ours to make again
		 * (processes still on the old one keep it until they exit) */
		ntbx_logp(NTBX_LOG_WARN, "ntbx run", "fabric '%s' has layout version %d "
		          "(an older ntbx); making it again", fabric,
		          info.layout_version);
		ntbx_fabric_destroy(fabric);
		irc = -ENOENT;
	} else if (irc < 0 && irc != -ENOENT) {
		ntbx_logp(NTBX_LOG_WARN, "ntbx run", "%s; sockets will stay on kernel TCP",
		          ntbx_errmsg());
	}
	if (irc == -ENOENT && !implicit)
		/* a named fabric that does not exist is most likely a typo:
		 * only the implicit default is made on first use */
		runtime_die("no fabric '%s': create it with `ntbx fabric create "
		            "%s --nodes N`, or leave out --fabric and NTBX_FABRIC "
		            "to use the default one", fabric, fabric);
	if (irc == -ENOENT) {
		struct ntbx_fabric_params p = { .nodes = 2,
		                                .topology = NTBX_TOPO_SWITCH,
		                                .gid = -1 };
		int rc = ntbx_fabric_create(fabric, &p);
		if (rc < 0 && rc != -EEXIST)
			lib_die(rc, "fabric create");
	}

	const char *old = ntbx_setting_str(NTBX_SET_LD_PRELOAD);
	char pre[PATH_MAX * 3];
#ifdef NTBX_ASAN_RUNTIME
	/* a sanitizer build (make test-san): the ASan runtime must come first
	 * in a program that was not built with it */
	const char *first = NTBX_ASAN_RUNTIME ":";
#else
	const char *first = "";
#endif
	if (old && *old && !strstr(old, "libntbx-preload.so"))
		snprintf(pre, sizeof pre, "%s%s:%s", first, lib, old);
	else
		snprintf(pre, sizeof pre, "%s%s", first, lib);
	setenv("LD_PRELOAD", pre, 1);
	setenv("NTBX_FABRIC", fabric, 1);
	if (node)
		setenv("NTBX_NODE", node, 1);
	if (ports)
		setenv("NTBX_SOCK_PORTS", ports, 1);
	if (buf)
		setenv("NTBX_SOCK_BUF", buf, 1);
	execvp(argv[i], argv + i);
	runtime_die("cannot run '%s': %s", argv[i], strerror(errno));
}
