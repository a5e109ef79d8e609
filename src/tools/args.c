/* SPDX-License-Identifier: MIT */
#include "args.h"
#include "util/settings.h"
#include "util/util.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ntbx/dev.h"
#include "ntbx/fabric.h"
#include "output.h"

const char *g_cmd = "";

void usage_die(const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	for (char *p = msg; *p; p++)
		if (*p == '\n')
			*p = ' ';
	fflush(stdout);
	if (g_cmd && *g_cmd)
		ntbx_log(NTBX_LOG_ERROR, "%s (see 'ntbx %s --help')", msg,
		         g_cmd);
	else
		ntbx_log(NTBX_LOG_ERROR, "%s (see 'ntbx --help')", msg);
	exit(EXIT_USAGE);
}

void runtime_die(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	for (char *p = msg; *p; p++)
		if (*p == '\n')
			*p = ' ';
	fflush(stdout);
	ntbx_log(NTBX_LOG_ERROR, "%s", msg);
	exit(1);
}

void lib_msg(char *buf, size_t len, int err, const char *what)
{
	const char *m = ntbx_errmsg();
	if (m && *m)
		snprintf(buf, len, "%s", m);
	else
		snprintf(buf, len, "%s: %s", what, strerror(err < 0 ? -err : err));
}

void lib_die(int err, const char *what)
{
	char msg[1024];
	lib_msg(msg, sizeof(msg), err, what);
	/* ntbx_errmsg() may already start with "ntbx: ". */
	if (strncmp(msg, "ntbx: ", 6) == 0)
		runtime_die("%s", msg + 6);
	runtime_die("%s", msg);
}

int is_help(const char *s)
{
	return strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0;
}

int opt_flag(const char *arg, const char *name)
{
	return strcmp(arg, name) == 0;
}

const char *opt_value(int argc, char **argv, int *i, const char *name)
{
	const char *a = argv[*i];
	size_t n = strlen(name);
	if (strncmp(a, name, n) != 0)
		return NULL;
	const char *v;
	if (a[n] == '=') {
		v = a + n + 1;
	} else {
		if (a[n] != 0)
			return NULL;
		if (*i + 1 >= argc)
			usage_die("option '%s' needs a value", name);
		v = argv[++*i];
	}
	if (!*v)   /* no option takes an empty value */
		usage_die("option '%s' needs a value, not an empty one", name);
	return v;
}

void bad_arg(const char *arg)
{
	if (arg[0] == '-')
		usage_die("unknown option '%s'", arg);
	usage_die("unexpected argument '%s'", arg);
}

long parse_int(const char *s, const char *opt, long min, long max)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (!*s || *end || errno || isspace((unsigned char)*s))
		usage_die("%s: '%s' is not a number", opt, s);
	if (v < min || v > max)
		usage_die("%s: %ld is out of range (%ld..%ld)", opt, v, min, max);
	return v;
}

double parse_double(const char *s, const char *opt, double min, double max)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (!*s || *end || errno || isnan(v) || isspace((unsigned char)*s))
		usage_die("%s: '%s' is not a number", opt, s);
	if (v < min || v > max)
		usage_die("%s: %g is out of range (%g..%g)", opt, v, min, max);
	return v;
}

int try_parse_size(const char *s, uint64_t *out)
{
	return ntbx_parse_size(s, out) < 0 ? -1 : 0;
}

uint64_t parse_size(const char *s, const char *opt, uint64_t min,
                    uint64_t max)
{
	uint64_t v;
	char a[32], b[32];
	if (try_parse_size(s, &v) < 0)
		usage_die("%s: '%s' is not a size (use e.g. 4096, 64K, 4M, 1G)",
		          opt, s);
	if (v < min || v > max)
		usage_die("%s: %s is out of range (%s..%s)", opt, s,
		          fmt_size(a, sizeof(a), min), fmt_size(b, sizeof(b), max));
	return v;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return x < y ? -1 : x > y;
}

/* Split @s at commas into a bounded copy; calls @fn per item. */
int parse_size_list(const char *s, const char *opt, uint64_t min,
                    uint64_t max, uint64_t *out, int maxn)
{
	char buf[512];
	int n = 0;
	if (strlen(s) >= sizeof(buf) || !*s)
		usage_die("%s: '%s' is not a size list", opt, s);
	strcpy(buf, s);
	char *save = NULL;
	for (char *tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		char *dash = strchr(tok, '-');
		uint64_t lo, hi;
		if (dash) {
			*dash = 0;
			lo = parse_size(tok, opt, min, max);
			hi = parse_size(dash + 1, opt, min, max);
			if (hi < lo)
				usage_die("%s: range %s-%s is backwards", opt, tok,
				          dash + 1);
			for (uint64_t v = lo; v <= hi; v *= 2) {
				if (n >= maxn)
					usage_die("%s: too many sizes (at most %d)", opt,
					          maxn);
				out[n++] = v;
				if (v > hi / 2)
					break;
			}
		} else {
			if (n >= maxn)
				usage_die("%s: too many sizes (at most %d)", opt, maxn);
			out[n++] = parse_size(tok, opt, min, max);
		}
	}
	if (n == 0)
		usage_die("%s: '%s' is not a size list", opt, s);
	qsort(out, (size_t)n, sizeof(*out), cmp_u64);
	int m = 0;
	for (int i = 0; i < n; i++)
		if (m == 0 || out[m - 1] != out[i])
			out[m++] = out[i];
	return m;
}

int parse_int_list(const char *s, const char *opt, long min, long max,
                   int *out, int maxn)
{
	char buf[256];
	int n = 0;
	if (strlen(s) >= sizeof(buf) || !*s)
		usage_die("%s: '%s' is not a list of numbers", opt, s);
	strcpy(buf, s);
	char *save = NULL;
	for (char *tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		char *dash = strchr(tok, '-');
		long lo, hi;
		if (dash && dash != tok) {
			*dash = 0;
			lo = parse_int(tok, opt, min, max);
			hi = parse_int(dash + 1, opt, min, max);
			if (hi < lo)
				usage_die("%s: range %ld-%ld is backwards", opt, lo, hi);
		} else {
			lo = hi = parse_int(tok, opt, min, max);
		}
		for (long v = lo; v <= hi; v++) {
			if (n >= maxn)
				usage_die("%s: too many values (at most %d)", opt, maxn);
			out[n++] = (int)v;
		}
	}
	if (n == 0)
		usage_die("%s: '%s' is not a list of numbers", opt, s);
	qsort(out, (size_t)n, sizeof(*out), cmp_int);
	int m = 0;
	for (int i = 0; i < n; i++)
		if (m == 0 || out[m - 1] != out[i])
			out[m++] = out[i];
	return m;
}

const char *default_fabric(const char *opt)
{
	if (opt && *opt)
		return opt;
	const char *e = ntbx_setting_str(NTBX_SET_FABRIC);
	if (e)
		return e;
	return ntbx_fabric_default_name();
}
