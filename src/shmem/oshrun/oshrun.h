/* SPDX-License-Identifier: MIT */
#ifndef NTBX_OSHRUN_H
#define NTBX_OSHRUN_H

/* oshrun --hosts (hosts.c) */
struct oshrun_hosts_opts {
	const char *hosts;   /* comma-separated host names */
	const char *fabric;  /* the ofi fabric (required) */
	const char *rsh;     /* remote start agent, or NULL: OSHRUN_RSH, ssh */
	int n, timeout;      /* PEs; seconds (0: none) */
	char **mca;          /* --mca NAME VALUE pairs, passed on */
	int nmca;
	char **xenv;         /* -x VAR[=VALUE], passed on */
	int nx;
};
/* Exec mpirun for @prog (NULL-terminated); returns only on failure, with
 * the exit status to use. */
int oshrun_hosts(const struct oshrun_hosts_opts *o, char **prog);

/* "oshrun: <msg>" on stderr, through ntbx's logger (util.h). */
#define oshrun_err(...) ntbx_logp(NTBX_LOG_ERROR, "oshrun", __VA_ARGS__)

#endif
