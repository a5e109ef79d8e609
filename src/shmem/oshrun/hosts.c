/* SPDX-License-Identifier: MIT */
/*
 * oshrun --hosts A,B,... : PEs on several hosts of an ofi fabric.
 *
 * Launching across hosts is a launcher's job (DESIGN.md, "Many hosts"):
 * oshrun hands it to Open MPI's mpirun, whose PMIx server gives each PE
 * its rank, size and the start-up exchange (src/shmem/shmem_pmix.c), and
 * which starts the remote PEs with ssh or the agent named by --rsh /
 * OSHRUN_RSH (its plm_rsh_agent).  The PEs are spread in blocks, as many
 * per host as the PE count over the host count rounded up, PE 0 first on
 * the first host.  The fabric must exist on every host with an agent
 * serving it (`ntbx fabric create F --backend ofi --hosts ...`, `ntbx node
 * serve --fabric F`); --fabric names it.  OSHRUN_MPIRUN names mpirun.
 * -x VAR passes a variable on, as mpirun's -x (the SHMEM_* and FI_PROVIDER
 * variables the PEs read are passed when set).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "oshrun.h"
#include "util/util.h"
#include "util/settings.h"

int oshrun_hosts(const struct oshrun_hosts_opts *o, char **prog)
{
	if (!o->fabric) {
		oshrun_err("--hosts needs --fabric NAME: an ofi fabric created "
		           "on every host (`ntbx fabric create NAME --backend ofi "
		           "--hosts ...`) with an agent on each (`ntbx node "
		           "serve --fabric NAME`)");
		return 2;
	}
	char *list = strdup(o->hosts);
	const char *rsh = o->rsh ? o->rsh : ntbx_setting_str(NTBX_SET_OSHRUN_RSH);
	const char *mpirun = ntbx_setting_str(NTBX_SET_OSHRUN_MPIRUN);
	if (!list) {
		oshrun_err("out of memory");
		return 1;
	}
	int nh = 1;
	for (char *p = list; *p; p++)
		nh += *p == ',';
	if (!*o->hosts || nh > 1024) {
		oshrun_err("--hosts '%s': give host names, "
		           "comma-separated", o->hosts);
		return 2;
	}
	int per = (o->n + nh - 1) / nh;
	/* -H h0:per,h1:per,... */
	size_t hl = strlen(o->hosts) + (size_t)nh * 12 + 1;
	char *hspec = malloc(hl), *save = NULL;
	size_t argc = 0, cap = 32 + 3 * (size_t)o->nmca + 2 * (size_t)o->nx + 64;
	char **av = calloc(cap, sizeof *av);
	if (!hspec || !av) {
		oshrun_err("out of memory");
		return 1;
	}
	hspec[0] = 0;
	int k = 0;
	for (char *h = strtok_r(list, ",", &save); h; h = strtok_r(NULL, ",", &save)) {
		if (!*h || strchr(h, ':')) {
			oshrun_err("--hosts '%s': '%s' is not a host name (slots "
			           "are oshrun's: -n over the hosts)", o->hosts, h);
			return 2;
		}
		snprintf(hspec + strlen(hspec), hl - strlen(hspec), "%s%s:%d",
		         k++ ? "," : "", h, per);
	}
	static char np[16], tmo[16], fab[300];
	snprintf(np, sizeof np, "%d", o->n);
	snprintf(fab, sizeof fab, "NTBX_SHMEM_FABRIC=%s", o->fabric);
	av[argc++] = (char *)mpirun;
	if (getuid() == 0)
		av[argc++] = "--allow-run-as-root";
	if (rsh && *rsh) {
		av[argc++] = "--mca";
		av[argc++] = "plm_rsh_agent";
		av[argc++] = (char *)rsh;
	}
	for (int i = 0; i < o->nmca; i++) {
		av[argc++] = "--mca";
		av[argc++] = o->mca[2 * i];
		av[argc++] = o->mca[2 * i + 1];
	}
	if (o->timeout > 0) {
		snprintf(tmo, sizeof tmo, "%d", o->timeout);
		av[argc++] = "--timeout";
		av[argc++] = tmo;
	}
	av[argc++] = "-H";
	av[argc++] = hspec;
	av[argc++] = "-np";
	av[argc++] = np;
	av[argc++] = "-x";
	av[argc++] = fab;
	/* what the PEs read, passed on when set here */
	static const enum ntbx_setting_id pass[] = {
		NTBX_SET_SHMEM_SYMMETRIC_SIZE, NTBX_SET_SHMEM_DEBUG,
		NTBX_SET_SHMEM_INFO, NTBX_SET_SHMEM_VERSION, NTBX_SET_FI_PROVIDER,
		NTBX_SET_SHMEM_THREADS, NTBX_SET_LOG };
	for (size_t i = 0; i < sizeof pass / sizeof pass[0]; i++)
		if (ntbx_setting_env_set(pass[i])) {
			av[argc++] = "-x";
			av[argc++] = (char *)ntbx_setting_desc(pass[i])->name;
		}
	for (int i = 0; i < o->nx; i++) {
		av[argc++] = "-x";
		av[argc++] = o->xenv[i];
	}
	for (char **p = prog; *p && argc + 1 < cap; p++)
		av[argc++] = *p;
	av[argc] = NULL;
	execvp(mpirun, av);
	oshrun_err("--hosts runs the PEs with Open MPI's mpirun (its PMIx "
	           "server), and '%s' cannot be run: %s (install openmpi-bin, "
	           "or set OSHRUN_MPIRUN)", mpirun, strerror(errno));
	return 127;
}
