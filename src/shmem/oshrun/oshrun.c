/* SPDX-License-Identifier: MIT */
/*
 * oshrun — start an OpenSHMEM program on an ntbx fabric.
 *
 *   oshrun -n N [--fabric F] [--topology switch|ring] [--threads K]
 *          [--bind-to core|none] [--timeout S] [--] PROGRAM [ARGS...]
 *   oshrun -n N --hosts A,B,... --fabric F [--rsh AGENT] [--mca NAME VALUE]
 *          [-x VAR[=VALUE]] [--timeout S] [--] PROGRAM [ARGS...]
 *
 * Creates a private fabric of N nodes (or joins --fabric F), starts N PEs
 * (PE i on node i), passes the start-up exchange between them (each PE
 * sends its heap and static-data offsets and queue-pair addresses; every
 * PE gets everyone's), forwards SIGINT/SIGTERM/SIGHUP, and exits with the
 * first non-zero status of a PE (128+signal for a PE killed by a signal;
 * 124 on --timeout).  When a PE fails or calls shmem_global_exit, the
 * others are stopped.  The private fabric is destroyed at the end.
 * --bind-to core (the default on a switch) pins PE i to the i-th CPU of
 * oshrun's own CPU set, round robin, as Open MPI's --bind-to core: PEs that
 * outnumber the CPUs then share a CPU for good and hand it to each other
 * at every wait (4 PEs on 2 CPUs: barrier 3.0 against 3.2 us, broadcast
 * 3.9 against 4.8 us), and none migrates in the middle of a measurement.
 * On a ring the default binds each PE's main thread only (oshrun passes
 * the CPU in NTBX_SHMEM_BIND_CPU and the library pins its calling thread
 * at the end of shmem_init): the transfer and relay threads, started
 * before, must stay free to run wherever a CPU is idle, while PEs that
 * float land on the CPUs in ways that change from second to second (4 PEs
 * on 2 CPUs: 64 B reductions 6 or 12-18 us per call by where the scheduler
 * put them, bound 6.2-6.4).  --bind-to core on a ring binds whole PEs.
 * A PE lets go of its pin while foreign load lasts (shmem_bind.c: oshrun
 * passes the CPU in NTBX_SHMEM_BIND_CPU, and for a whole PE its own set
 * in NTBX_SHMEM_BIND_SET).
 * Open MPI options that mean nothing here (--allow-run-as-root,
 * --oversubscribe, --mca NAME VALUE) are accepted and ignored.
 * With --hosts the PEs run on those hosts of ofi fabric F, started by
 * mpirun (hosts.c); --mca and -x options are then passed on to it.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ntbx/fabric.h"
#include "util/settings.h"
#include "util/util.h"
#include "oshrun.h"

static volatile sig_atomic_t got_sig;
static void on_sig(int s) { got_sig = s; }

static void usage(FILE *f)
{
	fprintf(f, "usage: oshrun -n N [--fabric NAME] [--topology switch|ring] "
	        "[--threads K] [--bind-to core|none] [--timeout SECONDS] [--] "
	        "PROGRAM [ARGS...]\n"
	        "       oshrun -n N --hosts A,B,... --fabric NAME [--rsh AGENT] "
	        "[--mca NAME VALUE] [-x VAR[=VALUE]] [--timeout SECONDS] [--] "
	        "PROGRAM [ARGS...]\n"
	        "  (--hosts: PEs on the hosts of ofi fabric NAME, started by "
	        "Open MPI's mpirun; --rsh or OSHRUN_RSH: its remote start agent)\n"
	        "\nsettings of OpenSHMEM (environment, else ntbx.conf; `ntbx "
	        "settings` lists all):\n");
	for (int i = 0; i < NTBX_SET_COUNT; i++) {
		const struct ntbx_setting_desc *d =
			ntbx_setting_desc((enum ntbx_setting_id)i);
		if (d->scope == NTBX_SS_SHMEM && !(d->flags & (NTBX_SF_INTERNAL |
		                                              NTBX_SF_FOREIGN)))
			fprintf(f, "  %-22s default %s\n", d->name, d->def ? d->def :
			        d->def_text ? d->def_text : "unset");
	}
}

struct pe {
	pid_t pid;
	int fd;           /* our end of the exchange socket */
	int done;         /* exited */
	int status;
	char *rec;
	uint32_t reclen;
	size_t have;
	int hdr_have;
	uint32_t hdr[2];
	int fin;          /* waiting in shmem_finalize */
};

static int parse_int(const char *s, int lo, int hi, int *out)
{
	char *e;
	errno = 0;
	long v = strtol(s, &e, 10);
	if (errno || *e || e == s || v < lo || v > hi)
		return -1;
	*out = (int)v;
	return 0;
}

static uint64_t now_ms(void) { return ntbx_now_ns() / 1000000; }

/*
 * Node memory is a sparse file in a memory file system (NTBX_SHM_DIR,
 * /dev/shm by default): a heap larger than that file system could be
 * reserved but the program would die of SIGBUS when it touches the pages
 * past its end.  Refuse it here, naming the variable.
 */
static int heap_too_large(uint64_t heap, const char *ss)
{
	char dir[512];
	struct statvfs st;
	if (ntbx_fabric_dir("x", dir, sizeof dir) < 0)
		return 0;
	char *slash = strrchr(dir, '/');
	if (slash && slash != dir)
		*slash = 0;
	if (statvfs(dir, &st) < 0)
		return 0;
	uint64_t fs = (uint64_t)st.f_blocks * st.f_frsize;
	if (heap <= fs)
		return 0;
	oshrun_err("SHMEM_SYMMETRIC_SIZE=%s (%llu bytes) is larger "
	           "than the %llu bytes of %s, which holds node memory",
	           ss && *ss ? ss : "(default)", (unsigned long long)heap,
	           (unsigned long long)fs, dir);
	return 1;
}

int main(int argc, char **argv)
{
	int n = 0, threads = 1, timeout = 0, bind = -1;   /* -1: by topology */
	const char *fabric = NULL, *hosts = NULL, *rsh = NULL;
	char *mca[64], *xenv[32];
	int nmca = 0, nx = 0;
	enum ntbx_topology topo = NTBX_TOPO_SWITCH;
	int i = 1;
	for (; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--")) { i++; break; }
		if (a[0] != '-')
			break;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		}
		if (!strcmp(a, "--allow-run-as-root") || !strcmp(a, "--oversubscribe"))
			continue;
		if (!strcmp(a, "--mca") || !strcmp(a, "-mca")) {
			if (i + 2 >= argc) {
				oshrun_err("--mca needs a name and a value");
				return 2;
			}
			if (nmca < 32) {
				mca[2 * nmca] = argv[i + 1];
				mca[2 * nmca + 1] = argv[i + 2];
				nmca++;
			}
			i += 2;
			continue;
		}
		if (!v) {
			oshrun_err("%s needs a value", a);
			return 2;
		}
		if (!strcmp(a, "-n") || !strcmp(a, "-np") || !strcmp(a, "--np") ||
		    !strcmp(a, "-c")) {
			if (parse_int(v, 1, NTBX_MAX_NODES, &n) < 0) {
				oshrun_err("%s '%s': the PE count must be 1 "
				           "to %d", a, v, NTBX_MAX_NODES);
				return 2;
			}
		} else if (!strcmp(a, "--fabric")) {
			fabric = v;
		} else if (!strcmp(a, "--hosts")) {
			hosts = v;
		} else if (!strcmp(a, "--rsh")) {
			rsh = v;
		} else if (!strcmp(a, "-x")) {
			/* mpirun's: the PEs here inherit our environment anyway */
			if (nx < 32)
				xenv[nx++] = argv[i + 1];
		} else if (!strcmp(a, "--topology")) {
			if (ntbx_topology_parse(v, &topo) < 0) {
				oshrun_err("--topology '%s': use switch or "
				           "ring", v);
				return 2;
			}
		} else if (!strcmp(a, "--threads")) {
			if (parse_int(v, 1, 8, &threads) < 0) {
				oshrun_err("--threads '%s': use 1 to 8", v);
				return 2;
			}
		} else if (!strcmp(a, "--bind-to")) {
			if (strcmp(v, "core") && strcmp(v, "none")) {
				oshrun_err("--bind-to '%s': use core or "
				           "none", v);
				return 2;
			}
			bind = !strcmp(v, "core");
		} else if (!strcmp(a, "--timeout")) {
			if (parse_int(v, 1, 86400 * 365, &timeout) < 0) {
				oshrun_err("--timeout '%s': seconds, at "
				           "least 1", v);
				return 2;
			}
		} else {
			oshrun_err("unknown option '%s'", a);
			usage(stderr);
			return 2;
		}
		i++;
	}
	if (i >= argc) {
		oshrun_err("no program to run (usage: oshrun -n N "
		           "PROGRAM [ARGS...])");
		return 2;
	}
	if (!n)
		n = 1;
	if (hosts) {
		struct oshrun_hosts_opts o = { hosts, fabric, rsh, n, timeout,
		                               mca, nmca, xenv, nx };
		return oshrun_hosts(&o, &argv[i]);
	}
	if (topo == NTBX_TOPO_RING && n < 2) {
		oshrun_err("a ring needs at least 2 PEs (got %d)", n);
		return 2;
	}

	/* Node memory: the heap, the static data and the link blocks. */
	/* refused here, before any PE starts (a PE would use the default) */
	if (ntbx_setting_bad(NTBX_SET_SHMEM_SYMMETRIC_SIZE)) {
		oshrun_err("SHMEM_SYMMETRIC_SIZE='%s' is not a size "
		           "(bytes, or with a K, M or G suffix)",
		           ntbx_setting_given(NTBX_SET_SHMEM_SYMMETRIC_SIZE));
		return 2;
	}
	uint64_t heap = ntbx_setting_size(NTBX_SET_SHMEM_SYMMETRIC_SIZE);
	const char *ss = ntbx_setting_given(NTBX_SET_SHMEM_SYMMETRIC_SIZE);
	if (heap_too_large(heap, ss))
		return 2;
	char name[64];
	int own = 0, own_lock = -1;
	if (n == 1 && !fabric) {
		/* One PE needs no fabric: it runs alone. */
		unsetenv("NTBX_SHMEM_FABRIC");
		execvp(argv[i], &argv[i]);
		oshrun_err("cannot run '%s': %s", argv[i],
		           strerror(errno));
		return 127;
	}
	int nodes = n < 2 ? 2 : n;
	if (fabric) {
		struct ntbx_fabric_info fi;
		if (ntbx_fabric_info(fabric, &fi) < 0) {
			oshrun_err("%s", ntbx_errmsg());
			return 1;
		}
		if (fi.nodes < n) {
			oshrun_err("fabric '%s' has %d nodes, fewer than "
			           "the %d PEs asked for", fabric, fi.nodes, n);
			return 1;
		}
		snprintf(name, sizeof name, "%s", fabric);
	} else {
		struct ntbx_fabric_params p = { 0 };
		p.nodes = nodes;
		p.topology = topo;
		p.window = NTBX_ALIGN_UP(heap + (256ull << 20), 1ull << 20);
		p.memory = p.window;
		p.gid = -1;
		/* owned by a lock the kernel drops: an oshrun killed with
		 * SIGKILL leaves a fabric that the next one reaps */
		if (ntbx_fabric_create_private("oshrun", &p, name, sizeof name,
		                               &own_lock) < 0) {
			oshrun_err("cannot create a fabric: %s",
			           ntbx_errmsg());
			return 1;
		}
		own = 1;
	}

	struct sigaction sa = { 0 };
	sa.sa_handler = on_sig;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (n < 1 || n > NTBX_MAX_NODES)
		return 2;
	size_t npes = (size_t)n;
	struct pe *pes = calloc(npes, sizeof *pes);
	/* the CPUs PEs are bound to, round robin (none: ncpu = 0) */
	int cpus[CPU_SETSIZE], ncpu = 0;
	cpu_set_t mine;
	/* on a ring by default: the PEs' main threads only (2) */
	if (bind < 0)
		bind = topo == NTBX_TOPO_SWITCH ? 1 : 2;
	/* the same as a list (NTBX_SHMEM_BIND_SET: "0,1,5") */
	char *set = calloc(CPU_SETSIZE, 8);
	if (bind && set && sched_getaffinity(0, sizeof mine, &mine) == 0)
		for (int c = 0; c < CPU_SETSIZE; c++)
			if (CPU_ISSET(c, &mine)) {
				snprintf(set + strlen(set), 8, "%s%d", ncpu ? "," : "", c);
				cpus[ncpu++] = c;
			}
	int rc = 0, failed = 0, alive = 0;
	char buf[32];
	for (int k = 0; k < n; k++) {
		int sv[2];
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
			perror("oshrun: socketpair");
			rc = 1;
			failed = 1;
			break;
		}
		pid_t pid = fork();
		if (pid < 0) {
			perror("oshrun: fork");
			close(sv[0]);
			close(sv[1]);
			rc = 1;
			failed = 1;
			break;
		}
		if (!pid) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			signal(SIGPIPE, SIG_DFL);
			if (ncpu) {   /* shmem_bind.c lets go of it at times */
				snprintf(buf, sizeof buf, "%d", cpus[k % ncpu]);
				setenv("NTBX_SHMEM_BIND_CPU", buf, 1);
			}
			if (ncpu && bind == 1) {   /* a failure costs the binding */
				setenv("NTBX_SHMEM_BIND_SET", set, 1);
				cpu_set_t one;
				CPU_ZERO(&one);
				CPU_SET(cpus[k % ncpu], &one);
				sched_setaffinity(0, sizeof one, &one);
			}
			int fd = fcntl(sv[1], F_DUPFD, 3);   /* without CLOEXEC */
			snprintf(buf, sizeof buf, "%d", fd);
			setenv("NTBX_SHMEM_PMI_FD", buf, 1);
			snprintf(buf, sizeof buf, "%d", k);
			setenv("NTBX_NODE", buf, 1);
			snprintf(buf, sizeof buf, "%d", n);
			setenv("NTBX_SHMEM_NPES", buf, 1);
			snprintf(buf, sizeof buf, "%d", threads);
			setenv("NTBX_SHMEM_THREADS", buf, 1);
			setenv("NTBX_SHMEM_FABRIC", name, 1);
			execvp(argv[i], &argv[i]);
			oshrun_err("cannot run '%s': %s", argv[i],
			           strerror(errno));
			_exit(127);
		}
		close(sv[1]);
		pes[k].pid = pid;
		pes[k].fd = sv[0];
		alive++;
	}

	uint64_t deadline = timeout ? now_ms() + (uint64_t)timeout * 1000 : 0;
	uint64_t kill_at = 0;
	int stopping = failed, sent = 0, fin_sent = 0;
	struct pollfd *pf = calloc(npes, sizeof *pf);
	while (alive > 0) {
		if (got_sig && !stopping) {
			int s = got_sig;
			for (int k = 0; k < n; k++)
				if (pes[k].pid && !pes[k].done)
					kill(pes[k].pid, s);
			if (!rc)
				rc = 128 + s;
			stopping = 1;
			kill_at = now_ms() + 3000;
		}
		if (deadline && !stopping && now_ms() >= deadline) {
			oshrun_err("timed out after %d s; stopping the "
			           "PEs", timeout);
			rc = 124;
			stopping = 1;
			for (int k = 0; k < n; k++)
				if (pes[k].pid && !pes[k].done)
					kill(pes[k].pid, SIGTERM);
			kill_at = now_ms() + 2000;
		}
		if (stopping && kill_at && now_ms() >= kill_at) {
			for (int k = 0; k < n; k++)
				if (pes[k].pid && !pes[k].done)
					kill(pes[k].pid, SIGKILL);
			kill_at = 0;
		}
		for (int k = 0; k < n; k++) {
			pf[k].fd = pes[k].fd;
			pf[k].events = POLLIN;
		}
		poll(pf, (nfds_t)n, 20);
		for (int k = 0; k < n; k++) {
			struct pe *p = &pes[k];
			if (p->fd < 0 || !(pf[k].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			ssize_t r;
			if (p->hdr_have < 8) {
				r = read(p->fd, (char *)p->hdr + p->hdr_have,
				         (size_t)(8 - p->hdr_have));
				if (r <= 0) {
					close(p->fd);
					p->fd = -1;
					continue;
				}
				p->hdr_have += (int)r;
				if (p->hdr_have < 8)
					continue;
				if (p->hdr[0] == 'F') {   /* finalize: wait for all */
					p->fin = 1;
					p->hdr_have = 0;
					continue;
				}
				if (p->hdr[0] == 'X') {   /* shmem_global_exit */
					if (!stopping) {
						rc = (int)p->hdr[1];
						stopping = 1;
						for (int q = 0; q < n; q++)
							if (q != k && pes[q].pid && !pes[q].done)
								kill(pes[q].pid, SIGTERM);
						kill_at = now_ms() + 2000;
					}
					p->hdr_have = 0;
					continue;
				}
				if (p->hdr[0] != 'E' || p->hdr[1] > (1u << 20) || p->rec) {
					oshrun_err("PE %d sent a bad start-up "
					           "message", k);
					close(p->fd);
					p->fd = -1;
					continue;
				}
				p->reclen = p->hdr[1];
				p->rec = malloc(p->reclen ? p->reclen : 1);
				p->have = 0;
			}
			if (p->rec && p->have < p->reclen) {
				r = read(p->fd, p->rec + p->have, p->reclen - p->have);
				if (r <= 0) {
					close(p->fd);
					p->fd = -1;
					continue;
				}
				p->have += (size_t)r;
				if (p->have == p->reclen)
					p->hdr_have = 0;   /* next message */
			}
		}
		if (!sent) {
			int all = 1;
			for (int k = 0; k < n && all; k++)
				all = pes[k].rec && pes[k].have == pes[k].reclen &&
				      pes[k].reclen == pes[0].reclen;
			if (all) {
				for (int k = 0; k < n; k++)
					for (int q = 0; q < n; q++) {
						const char *b = pes[q].rec;
						size_t left = pes[q].reclen;
						while (left && pes[k].fd >= 0) {
							ssize_t w = write(pes[k].fd, b, left);
							if (w < 0 && errno == EINTR)
								continue;
							if (w <= 0)
								break;
							b += w;
							left -= (size_t)w;
						}
					}
				sent = 1;
			}
		}
		if (!fin_sent) {
			int waiting = 0, all = 1;
			for (int k = 0; k < n; k++) {
				waiting += pes[k].fin;
				all &= pes[k].fin || pes[k].done;
			}
			if (waiting && all) {
				for (int k = 0; k < n; k++)
					if (pes[k].fin && pes[k].fd >= 0 &&
					    write(pes[k].fd, "F", 1) < 0)
						pes[k].fin = 0;
				fin_sent = 1;
			}
		}
		int st;
		pid_t pid;
		while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
			for (int k = 0; k < n; k++) {
				struct pe *p = &pes[k];
				if (p->pid != pid || p->done)
					continue;
				p->done = 1;
				alive--;
				int code = WIFEXITED(st) ? WEXITSTATUS(st) :
				           WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1;
				if (code && !stopping) {
					rc = code;
					if (WIFSIGNALED(st))
						oshrun_err("PE %d was killed by signal "
						           "%d; stopping the others", k,
						           WTERMSIG(st));
					stopping = 1;
					for (int q = 0; q < n; q++)
						if (pes[q].pid && !pes[q].done)
							kill(pes[q].pid, SIGTERM);
					kill_at = now_ms() + 2000;
				}
			}
		}
	}
	for (int k = 0; k < n; k++) {
		if (pes[k].fd >= 0)
			close(pes[k].fd);
		free(pes[k].rec);
	}
	free(pes);
	free(set);
	free(pf);
	if (own) {
		ntbx_fabric_destroy(name);
		close(own_lock);
	}
	return rc;
}
