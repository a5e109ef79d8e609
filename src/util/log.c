/* SPDX-License-Identifier: MIT */
/*
 * The logger every layer writes its diagnostics through: one line on
 * stderr, "PREFIX: message", when NTBX_LOG's level allows it.  One write(2)
 * per line, so lines of threads and processes sharing stderr do not mix
 * and no stdio lock is taken (the preload logs from interposed calls).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util/settings.h"
#include "util/util.h"

/* How a line reaches fd 2: write(2), or the function the preload gives,
 * its resolved libc write (its own exported write would look at fd 2 as a
 * socket the program may have put there). */
static ssize_t (*log_write)(int, const void *, size_t);

void ntbx_log_set_write(ssize_t (*w)(int, const void *, size_t))
{
	__atomic_store_n(&log_write, w, __ATOMIC_RELEASE);
}

int ntbx_log_enabled(enum ntbx_log_level level)
{
	/* errors always; the rest as NTBX_LOG says (its index in
	 * error|warn|info|debug is the level) */
	return level == NTBX_LOG_ERROR ||
	       (long)level <= ntbx_setting_long(NTBX_SET_LOG);
}

void ntbx_vlogp(enum ntbx_log_level level, const char *prefix,
                const char *fmt, va_list ap)
{
	/* a confined process (util.h) may not even write to its stderr:
	 * sshd's pre-authentication child has RLIMIT_FSIZE 0 (SIGXFSZ) */
	if (ntbx_sandboxed || !ntbx_log_enabled(level))
		return;
	int saved = errno;   /* callers log between a failure and its return */
	char line[1024];
	int n = snprintf(line, sizeof line, "%s: ", prefix);
	if (n < 0 || n >= (int)sizeof line - 1)
		n = 0;
	int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
	if (m < 0)
		m = 0;
	n += m;
	if (n > (int)sizeof line - 2)
		n = (int)sizeof line - 2;
	line[n++] = '\n';
	ssize_t (*wr)(int, const void *, size_t) =
		__atomic_load_n(&log_write, __ATOMIC_ACQUIRE);
	if (!wr)
		wr = write;
	for (int off = 0; off < n;) {
		ssize_t w = wr(2, line + off, (size_t)(n - off));
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		off += (int)w;
	}
	errno = saved;
}

void ntbx_logp(enum ntbx_log_level level, const char *prefix,
               const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	ntbx_vlogp(level, prefix, fmt, ap);
	va_end(ap);
}

void ntbx_log(enum ntbx_log_level level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	ntbx_vlogp(level, "ntbx", fmt, ap);
	va_end(ap);
}
