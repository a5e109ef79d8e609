/* SPDX-License-Identifier: MIT */
/*
 * Settings: the table, the values' parsing and caching, the one policy for
 * a bad value, and the only reads of the environment in ntbx (settings.h
 * says how a value is found; settings_file.c reads the config files).
 */
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "util/settings.h"
#include "util/util.h"

/* ------------------------------------------------------------- table */

#define LIVE NTBX_SF_LIVE
#define SECURE NTBX_SF_SECURE
#define ENV NTBX_SF_ENV
#define FOREIGN NTBX_SF_FOREIGN
#define INTERNAL NTBX_SF_INTERNAL
#define STRICT NTBX_SF_STRICT
static const struct ntbx_setting_desc table[NTBX_SET_COUNT] = {
#define NTBX_SETTING(id, name, type, def, min, max, scope, flags, choices, \
                     def_text, doc)                                       \
	[NTBX_SET_##id] = { name, NTBX_ST_##type, def, min, max,          \
	                    NTBX_SS_##scope, (flags), choices, def_text, doc },
#include "util/settings.def"
#undef NTBX_SETTING
};
#undef LIVE
#undef SECURE
#undef ENV
#undef FOREIGN
#undef INTERNAL
#undef STRICT

const struct ntbx_setting_desc *ntbx_setting_desc(enum ntbx_setting_id id)
{
	return (unsigned)id < NTBX_SET_COUNT ? &table[id] : NULL;
}

int ntbx_setting_lookup(const char *name)
{
	for (int i = 0; i < NTBX_SET_COUNT; i++)
		if (!strcmp(table[i].name, name))
			return i;
	return -1;
}

/* ----------------------------------------------------------- parsing */

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

/* NTBX_SOCK_PORTS' syntax: "5201,6379,8000-8100" or "!22,!5432". */
static int ports_ok(const char *p)
{
	int n = 0;
	while (*p) {
		if (*p == '!')
			p++;
		char *end;
		errno = 0;
		long a = strtol(p, &end, 10), b = a;
		if (errno || end == p || *p == '-' || *p == '+' || a < 1 ||
		    a > 65535)
			return -1;
		p = end;
		if (*p == '-') {
			b = strtol(p + 1, &end, 10);
			if (end == p + 1 || p[1] == '-' || p[1] == '+' || b < a ||
			    b > 65535)
				return -1;
			p = end;
		}
		if (*p == ',' && p[1])
			p++;
		else if (*p)
			return -1;
		if (++n > 32)
			return -1;
	}
	return n ? 0 : -1;
}

static int bool_word(const char *s)
{
	static const char *const on[] = { "1", "on", "yes", "true" };
	static const char *const off[] = { "0", "off", "no", "false" };
	for (int i = 0; i < 4; i++) {
		if (!strcasecmp(s, on[i]))
			return 1;
		if (!strcasecmp(s, off[i]))
			return 0;
	}
	return -1;
}

/* The index of @s in "a|b|c", or -1. */
static int choice_index(const char *choices, const char *s)
{
	size_t n = strlen(s);
	int i = 0;
	for (const char *c = choices; c && *c; i++) {
		const char *bar = strchr(c, '|');
		size_t l = bar ? (size_t)(bar - c) : strlen(c);
		if (l == n && !strncmp(c, s, n))
			return i;
		c = bar ? bar + 1 : c + l;
	}
	return -1;
}

int ntbx_setting_parse(enum ntbx_setting_id id, const char *s, long *num,
                       uint64_t *size)
{
	const struct ntbx_setting_desc *d = &table[id];
	long n = 0;
	uint64_t z = 0;
	if (!s || !*s)
		return -1;
	switch (d->type) {
	case NTBX_ST_INT: {
		char *end;
		errno = 0;
		n = strtol(s, &end, 10);
		if (errno || *end || end == s || n < d->min || n > d->max)
			return -1;
		z = (uint64_t)n;
		break;
	}
	case NTBX_ST_SIZE:
		if (ntbx_parse_size(s, &z) < 0 || z < (uint64_t)d->min ||
		    z > (uint64_t)d->max)
			return -1;
		n = z > LONG_MAX ? LONG_MAX : (long)z;
		break;
	case NTBX_ST_BOOL:
		if ((n = bool_word(s)) < 0)
			return -1;
		break;
	case NTBX_ST_FLAG:
		n = strcmp(s, "0") != 0;
		break;
	case NTBX_ST_ENUM:
		if ((n = choice_index(d->choices, s)) < 0)
			return -1;
		break;
	case NTBX_ST_PATH:
		if (s[0] != '/' || strlen(s) >= PATH_MAX)
			return -1;
		break;
	case NTBX_ST_PORTS:
		if (ports_ok(s) < 0)
			return -1;
		break;
	case NTBX_ST_STR:
		break;
	}
	if (num)
		*num = n;
	if (size)
		*size = z;
	return 0;
}

static void fmt_size(char *buf, size_t len, uint64_t v)
{
	static const char unit[] = "KMGT";
	int u = -1;
	while (u < 3 && v >= 1024 && !(v & 1023)) {
		v >>= 10;
		u++;
	}
	if (u < 0)
		snprintf(buf, len, "%llu", (unsigned long long)v);
	else
		snprintf(buf, len, "%llu%c", (unsigned long long)v, unit[u]);
}

const char *ntbx_setting_expects(enum ntbx_setting_id id, char *buf,
                                 size_t len)
{
	const struct ntbx_setting_desc *d = &table[id];
	char a[32], b[32];
	switch (d->type) {
	case NTBX_ST_INT:
		snprintf(buf, len, "a whole number from %lld to %lld",
		         (long long)d->min, (long long)d->max);
		break;
	case NTBX_ST_SIZE:
		fmt_size(a, sizeof a, (uint64_t)d->min);
		fmt_size(b, sizeof b, (uint64_t)d->max);
		snprintf(buf, len, "a size from %s to %s (bytes, or with a K, M, "
		         "G or T suffix)", a, b);
		break;
	case NTBX_ST_BOOL:
		snprintf(buf, len, "1 or 0 (on/off, yes/no, true/false)");
		break;
	case NTBX_ST_FLAG:
		snprintf(buf, len, "anything (set: on; 0: off)");
		break;
	case NTBX_ST_ENUM: {
		/* "a|b|c" -> "a, b or c" */
		size_t o = 0;
		const char *c = d->choices;
		buf[0] = 0;
		while (*c && o + 1 < len) {
			const char *bar = strchr(c, '|');
			size_t l = bar ? (size_t)(bar - c) : strlen(c);
			const char *sep = c == d->choices ? "" :
			                  strchr(c, '|') ? ", " : " or ";
			int w = snprintf(buf + o, len - o, "%s%.*s", sep, (int)l, c);
			o += w > 0 ? (size_t)w : 0;
			c = bar ? bar + 1 : c + l;
		}
		break;
	}
	case NTBX_ST_PATH:
		snprintf(buf, len, "an absolute path");
		break;
	case NTBX_ST_PORTS:
		snprintf(buf, len, "ports and ranges such as 5201,8000-8100 or "
		         "!22 (at most 32)");
		break;
	case NTBX_ST_STR:
		snprintf(buf, len, "a string");
		break;
	}
	return buf;
}

/* ------------------------------------------------------- the sources */

/* The config files' values: each a copy in the pool, with where it was
 * written; filled once (load_files), then read only. */
struct file_val { const char *value, *file; unsigned line; };
static struct file_val file_vals[NTBX_SET_COUNT];
static char pool[16384];
static size_t pool_used;
static int files_state;            /* 0 not read, 1 being read, 2 read */
static pid_t files_reader;         /* the process reading them (state 1) */
static _Thread_local int reading_here;
static const char *test_paths[2];  /* /etc's and the user's, for tests */
static int test_paths_set;
static const char *test_program;

static const char *pool_copy(const char *s)
{
	size_t n = strlen(s) + 1;
	if (pool_used + n > sizeof pool)
		return NULL;
	char *p = memcpy(pool + pool_used, s, n);
	pool_used += n;
	return p;
}

static void file_set(void *ctx, int id, const char *value, const char *file,
                     unsigned line)
{
	(void)ctx;
	const char *v = pool_copy(value);
	if (!v) {
		ntbx_log(NTBX_LOG_WARN, "%s:%u: config files hold more than %zu "
		         "bytes of values; line skipped", file, line, sizeof pool);
		return;
	}
	file_vals[id] = (struct file_val){ v, file, line };
}

static const char *env_of(enum ntbx_setting_id id)
{
	const struct ntbx_setting_desc *d = &table[id];
	return d->flags & NTBX_SF_SECURE ? secure_getenv(d->name)
	                                 : getenv(d->name);
}

static void program_names(char *exe, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", exe, len - 1);
	exe[n > 0 ? n : 0] = 0;
	char *slash = strrchr(exe, '/');
	if (slash)
		memmove(exe, slash + 1, strlen(slash + 1) + 1);
}

static void read_file(const char *path)
{
	static char text[65536];
	int fd = ntbx_settings_file_open(path);
	if (fd < 0)
		return;
	size_t n = 0;
	ssize_t r;
	while (n < sizeof text && (r = read(fd, text + n, sizeof text - n)) != 0) {
		if (r < 0) {
			if (errno == EINTR)
				continue;
			ntbx_log(NTBX_LOG_WARN, "%s: %s; file ignored", path,
			         strerror(errno));
			close(fd);
			return;
		}
		n += (size_t)r;
	}
	char extra;
	if (n == sizeof text && read(fd, &extra, 1) == 1)
		ntbx_log(NTBX_LOG_WARN, "%s: longer than %zu bytes; the rest is "
		         "ignored", path, sizeof text);
	close(fd);
	const char *file = pool_copy(path);
	char exe[PATH_MAX];
	program_names(exe, sizeof exe);
	ntbx_settings_file_parse(file ? file : "ntbx.conf", text, n,
	                         test_program ? test_program :
	                         program_invocation_short_name,
	                         test_program ? test_program : exe, file_set,
	                         NULL);
}

static void load_files(void)
{
	if (ntbx_sandboxed)   /* confined: it may open nothing (util.h) */
		return;
	const char *etc = "/etc/ntbx.conf";
	char user[PATH_MAX] = "";
	if (test_paths_set) {
		etc = test_paths[0];
		snprintf(user, sizeof user, "%s", test_paths[1] ? test_paths[1] : "");
	} else {
		/* set-user-ID programs read /etc's only (secure_getenv) */
		const char *x = env_of(NTBX_SET_XDG_CONFIG_HOME);
		const char *h = env_of(NTBX_SET_HOME);
		if (x && x[0] == '/')
			snprintf(user, sizeof user, "%s/ntbx.conf", x);
		else if (h && h[0] == '/')
			snprintf(user, sizeof user, "%s/.config/ntbx.conf", h);
	}
	if (etc && *etc)
		read_file(etc);
	if (*user)
		read_file(user);
}

void ntbx_settings_load(void)
{
	int st = __atomic_load_n(&files_state, __ATOMIC_ACQUIRE);
	if (st == 2 || reading_here)
		return;
	int zero = 0;
	if (st == 0 && __atomic_compare_exchange_n(&files_state, &zero, 1, 0,
	                                           __ATOMIC_ACQ_REL,
	                                           __ATOMIC_ACQUIRE)) {
		__atomic_store_n(&files_reader, getpid(), __ATOMIC_RELEASE);
		reading_here = 1;
		load_files();
		reading_here = 0;
		__atomic_store_n(&files_state, 2, __ATOMIC_RELEASE);
		return;
	}
	/* another thread reads them: a few microseconds, bounded all the
	 * same (a thread stopped in the middle costs its own values only) */
	uint64_t t0 = ntbx_now_ns();
	while (__atomic_load_n(&files_state, __ATOMIC_ACQUIRE) != 2 &&
	       ntbx_now_ns() - t0 < 1000000000ull) {
		pid_t r = __atomic_load_n(&files_reader, __ATOMIC_ACQUIRE);
		if (r && r != getpid()) {
			/* forked while its parent's thread was reading: nobody
			 * here will finish, so read them again */
			int one = 1;
			if (__atomic_compare_exchange_n(&files_state, &one, 0, 0,
			                                __ATOMIC_ACQ_REL,
			                                __ATOMIC_ACQUIRE)) {
				__atomic_store_n(&files_reader, 0, __ATOMIC_RELEASE);
				memset(file_vals, 0, sizeof file_vals);
				pool_used = 0;
			}
			ntbx_settings_load();
			return;
		}
		ntbx_cpu_relax();
	}
}

/* ------------------------------------------------------------ values */

enum { FROM_DEFAULT, FROM_ENV, FROM_FILE };

struct val {
	long num;
	uint64_t size;
	const char *str;          /* the string the value came from */
	const char *given;        /* a refused value, or NULL */
	const char *file;         /* FROM_FILE: where */
	unsigned line;
	unsigned char from, set;
};

static struct cached { int state; struct val v; } cache[NTBX_SET_COUNT];
static unsigned char warned[NTBX_SET_COUNT];

/* @id's value from its sources; 1 if it may be cached (the config files
 * had been read). */
static int compute(enum ntbx_setting_id id, struct val *v)
{
	const struct ntbx_setting_desc *d = &table[id];
	int env_only = !!(d->flags & (NTBX_SF_ENV | NTBX_SF_FOREIGN |
	                              NTBX_SF_INTERNAL));
	*v = (struct val){ 0 };
	const char *e = env_of(id);
	if (e && *e) {
		if (ntbx_setting_parse(id, e, &v->num, &v->size) == 0) {
			v->str = e;
			v->from = FROM_ENV;
			v->set = 1;
			return 1;
		}
		v->given = e;
	}
	int files = 1;
	if (!env_only) {
		ntbx_settings_load();
		files = __atomic_load_n(&files_state, __ATOMIC_ACQUIRE) == 2;
		const struct file_val *f = &file_vals[id];
		if (files && f->value &&
		    ntbx_setting_parse(id, f->value, &v->num, &v->size) == 0) {
			v->str = f->value;
			v->file = f->file;
			v->line = f->line;
			v->from = FROM_FILE;
			v->set = 1;
			return 1;
		}
	}
	if (d->def)
		ntbx_setting_parse(id, d->def, &v->num, &v->size);
	v->str = d->def;
	v->from = FROM_DEFAULT;
	return files;
}

static void warn_bad(enum ntbx_setting_id id, const struct val *v)
{
	const struct ntbx_setting_desc *d = &table[id];
	if (!v->given || (d->flags & NTBX_SF_STRICT) ||
	    __atomic_exchange_n(&warned[id], 1, __ATOMIC_ACQ_REL))
		return;
	char want[160], used[200];
	if (v->from == FROM_FILE)
		snprintf(used, sizeof used, "%s (%s:%u)", v->str, v->file, v->line);
	else if (d->def)
		snprintf(used, sizeof used, "%s", d->def);
	else
		snprintf(used, sizeof used, "the default: %s",
		         d->def_text ? d->def_text : "unset");
	ntbx_log(NTBX_LOG_WARN, "ignoring %s='%s': expected %s; using %s",
	         d->name, v->given, ntbx_setting_expects(id, want, sizeof want),
	         used);
}

/* The value, cached unless LIVE; first use is lock-free (settings.h). */
static void get(enum ntbx_setting_id id, struct val *out)
{
	struct cached *c = &cache[id];
	if (__atomic_load_n(&c->state, __ATOMIC_ACQUIRE) == 2) {
		*out = c->v;
		return;
	}
	int saved = errno;   /* asked from interposed calls: errno is theirs */
	int cacheable = compute(id, out) && !(table[id].flags & NTBX_SF_LIVE);
	errno = saved;
	int zero = 0;
	if (cacheable && __atomic_compare_exchange_n(&c->state, &zero, 1, 0,
	                                             __ATOMIC_ACQ_REL,
	                                             __ATOMIC_ACQUIRE)) {
		c->v = *out;
		__atomic_store_n(&c->state, 2, __ATOMIC_RELEASE);
	}
}

/* The value a caller uses: a refused one is said here (once). */
static struct val value_of(enum ntbx_setting_id id)
{
	struct val v;
	get(id, &v);
	warn_bad(id, &v);
	return v;
}

long ntbx_setting_long(enum ntbx_setting_id id)
{
	return value_of(id).num;
}

uint64_t ntbx_setting_size(enum ntbx_setting_id id)
{
	return value_of(id).size;
}

const char *ntbx_setting_str(enum ntbx_setting_id id)
{
	return value_of(id).str;
}

int ntbx_setting_is_set(enum ntbx_setting_id id)
{
	struct val v;
	get(id, &v);
	return v.set;
}

int ntbx_setting_env_set(enum ntbx_setting_id id)
{
	return env_of(id) != NULL;
}

int ntbx_setting_bad(enum ntbx_setting_id id)
{
	struct val v;
	get(id, &v);
	return v.given != NULL;
}

const char *ntbx_setting_given(enum ntbx_setting_id id)
{
	struct val v;
	get(id, &v);
	return v.given ? v.given : v.set ? v.str : NULL;
}

const char *ntbx_setting_source(enum ntbx_setting_id id, char *buf,
                                size_t len)
{
	struct val v;
	get(id, &v);
	if (v.from == FROM_FILE)
		snprintf(buf, len, "%s:%u", v.file, v.line);
	else
		snprintf(buf, len, "%s", v.from == FROM_ENV ? "environment" :
		         "default");
	return buf;
}

void ntbx_setting_test_forget(enum ntbx_setting_id id)
{
	__atomic_store_n(&cache[id].state, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&warned[id], 0, __ATOMIC_RELEASE);
}

void ntbx_settings_test_reset(const char *etc, const char *user,
                              const char *program)
{
	memset(cache, 0, sizeof cache);
	memset(warned, 0, sizeof warned);
	memset(file_vals, 0, sizeof file_vals);
	pool_used = 0;
	test_paths_set = etc || user;
	test_paths[0] = etc;
	test_paths[1] = user;
	test_program = program;
	files_reader = 0;
	__atomic_store_n(&files_state, 0, __ATOMIC_RELEASE);
}
