/* SPDX-License-Identifier: MIT */
/* Environment variables, sizes and logging. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

/* Names already warned about, so a bad value is reported once. */
static char warned[16][48];
static int nwarned;

static int warn_once(const char *name)
{
	for (int i = 0; i < __atomic_load_n(&nwarned, __ATOMIC_ACQUIRE); i++)
		if (!strcmp(warned[i], name))
			return 0;
	int i = __atomic_fetch_add(&nwarned, 1, __ATOMIC_ACQ_REL);
	if (i < 16)
		snprintf(warned[i], sizeof warned[i], "%s", name);
	return 1;
}

long ntbx_env_long(const char *name, long def, long min, long max)
{
	const char *s = getenv(name);
	if (!s || !*s)
		return def;
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *end || end == s || v < min || v > max) {
		if (warn_once(name))
			fprintf(stderr, "ntbx: ignoring %s='%s': expected a whole "
			        "number from %ld to %ld; using %ld\n",
			        name, s, min, max, def);
		return def;
	}
	return v;
}

int ntbx_parse_size(const char *s, uint64_t *out)
{
	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	unsigned shift = 0;
	switch (*end) {
	case 0: break;
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	default: return -EINVAL;
	}
	if (*end == 'i' && shift)
		end++;
	if ((*end == 'B' || *end == 'b') && (shift || end[1] == 0))
		end++;
	if (*end)
		return -EINVAL;
	if (shift && v > (~0ull >> shift))
		return -EINVAL;
	*out = v << shift;
	return 0;
}

static int log_level = -1;

int ntbx_log_enabled(enum ntbx_log_level level)
{
	int l = __atomic_load_n(&log_level, __ATOMIC_RELAXED);
	if (l < 0) {
		const char *s = getenv("NTBX_LOG");
		l = NTBX_LOG_WARN;
		if (s && *s) {
			static const char *names[] = { "error", "warn", "info",
			                               "debug" };
			int found = -1;
			for (int i = 0; i < 4; i++)
				if (!strcmp(s, names[i]))
					found = i;
			if (found < 0)
				fprintf(stderr, "ntbx: ignoring NTBX_LOG='%s': expected "
				        "error, warn, info or debug; using warn\n", s);
			else
				l = found;
		}
		__atomic_store_n(&log_level, l, __ATOMIC_RELAXED);
	}
	return (int)level <= l;
}

void ntbx_log(enum ntbx_log_level level, const char *fmt, ...)
{
	/* a confined process (util.h) may not even write to its stderr:
	 * sshd's pre-authentication child has RLIMIT_FSIZE 0 (SIGXFSZ) */
	if (!ntbx_log_enabled(level) || ntbx_sandboxed)
		return;
	char buf[600];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	fprintf(stderr, "ntbx: %s\n", buf);
}

long ntbx_spin_us(void)
{
	static long cached = -1;
	long v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
	if (v < 0) {
		v = ntbx_env_long("NTBX_SPIN_US", 50, 0, 10000000);
		__atomic_store_n(&cached, v, __ATOMIC_RELAXED);
	}
	return v;
}
