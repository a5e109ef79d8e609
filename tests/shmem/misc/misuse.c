/* ntbx-specific behaviour under misuse, driven by tests/shmem_errors.sh:
 * misuse.c MODE, MODE one of nonsym, pe, exit3, crash, gexit, sleep, heap,
 * big (three 100 MiB objects, more than older defaults of 64 MiB),
 * affinity (prints PE, the main thread's CPUs and, for every other
 * thread but the wait policy's calibration pair, its CPUs: "PE main
 * other..."), relay (PE 0 puts to PE 2, two hops away on a ring of 5,
 * then PE 1, its relay, prints the CPUs of its progress threads:
 * "1 ntbx-shprog=CPUS..."). */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <shmem.h>

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	shmem_init();
	int me = shmem_my_pe(), n = shmem_n_pes();
	long *sym = shmem_malloc(sizeof(long));
	long local = 1;
	if (!strcmp(mode, "nonsym") && me == 0)
		shmem_long_put(&local, &local, 1, n - 1);
	else if (!strcmp(mode, "pe") && me == 0)
		shmem_long_p(sym, 1, n);
	else if (!strcmp(mode, "exit3") && me == 1)
		exit(3);
	else if (!strcmp(mode, "crash") && me == 1)
		raise(SIGSEGV);
	else if (!strcmp(mode, "gexit") && me == 0)
		shmem_global_exit(5);
	else if (!strcmp(mode, "sleep")) {
		if (me == 0 && argc > 2) {
			FILE *f = fopen(argv[2], "w");
			if (f)
				fclose(f);
		}
		for (;;)
			pause();
	} else if (!strcmp(mode, "big")) {
		/* Only the pages written are ever backed. */
		size_t sz = (size_t)100 << 20;
		char *b[3];
		int ok = 1;
		for (int i = 0; i < 3; i++) {
			b[i] = shmem_malloc(sz);
			ok &= b[i] != NULL;
		}
		if (ok) {
			for (int i = 0; i < 3; i++) {
				char v = (char)(me + i + 1);
				shmem_putmem(b[i] + sz - 1, &v, 1, (me + 1) % n);
			}
			shmem_barrier_all();
			for (int i = 0; i < 3; i++)
				ok &= b[i][sz - 1] == (char)((me + n - 1) % n + i + 1);
		}
		if (me == 0)
			printf("big: %s\n", ok ? "ok" : "failed");
	} else if (!strcmp(mode, "affinity")) {
		char line[256], path[300], mainc[256] = "?", others[1024] = "";
		size_t ol = 0;
		DIR *d = opendir("/proc/self/task");
		struct dirent *e;
		while (d && (e = readdir(d))) {
			if (e->d_name[0] == '.')
				continue;
			snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
			FILE *f = fopen(path, "r");
			int cal = 0;
			while (f && fgets(line, sizeof line, f)) {
				/* the wait policy's measurement of a sleep's
				 * cost pins its two short-lived threads to two
				 * CPUs on purpose (spin.c): not listed */
				if (!strncmp(line, "Name:", 5) &&
				    strstr(line, "ntbx-wakecal"))
					cal = 1;
				if (cal || strncmp(line, "Cpus_allowed_list:", 18))
					continue;
				char *c = line + 18 + strspn(line + 18, " \t");
				c[strcspn(c, "\n")] = 0;
				if (atoi(e->d_name) == getpid())
					snprintf(mainc, sizeof mainc, "%s", c);
				else if (ol + strlen(c) + 2 < sizeof others)
					ol += (size_t)sprintf(others + ol, " %s", c);
			}
			if (f)
				fclose(f);
		}
		if (d)
			closedir(d);
		printf("%d %s%s\n", me, mainc, others);
	} else if (!strcmp(mode, "relay")) {
		if (me == 0 && n >= 5) {
			shmem_long_p(sym, 1, 2);
			shmem_quiet();
		}
		shmem_barrier_all();
		char line[256], path[300], name[64], out[1024] = "";
		size_t ol = 0;
		DIR *d = me == 1 ? opendir("/proc/self/task") : NULL;
		struct dirent *e;
		while (d && (e = readdir(d))) {
			if (e->d_name[0] == '.')
				continue;
			snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
			FILE *f = fopen(path, "r");
			if (!f || !fgets(name, sizeof name, f))
				name[0] = 0;
			if (f)
				fclose(f);
			name[strcspn(name, "\n")] = 0;
			if (strcmp(name, "ntbx-shprog"))
				continue;
			snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
			f = fopen(path, "r");
			while (f && fgets(line, sizeof line, f)) {
				if (strncmp(line, "Cpus_allowed_list:", 18))
					continue;
				char *c = line + 18 + strspn(line + 18, " \t");
				c[strcspn(c, "\n")] = 0;
				if (ol + strlen(c) + 16 < sizeof out)
					ol += (size_t)sprintf(out + ol, " %s=%s", name, c);
			}
			if (f)
				fclose(f);
		}
		if (d) {
			closedir(d);
			printf("%d%s\n", me, out);
		}
	} else if (!strcmp(mode, "heap")) {
		void *p = shmem_malloc((size_t)1 << 40);
		if (me == 0)
			printf("%s\n", p ? "not NULL" : "NULL");
	}
	shmem_barrier_all();
	shmem_finalize();
	return 0;
}
