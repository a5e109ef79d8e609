/* SPDX-License-Identifier: MIT */
/*
 * The config files, /etc/ntbx.conf and $XDG_CONFIG_HOME/ntbx.conf: which
 * may be trusted, and their grammar.
 *
 *	# a comment, to the end of the line
 *	spin_us = 50                      one setting for every program
 *	log=info  sock_buf=1M             several on one line
 *	program=nginx sock_ports=80,443   only in programs called nginx
 *	program="redis-*" sock=off        a glob (fnmatch), quoted or not
 *
 * A key is a variable's name in lower case without NTBX_ (`ntbx settings`
 * lists them); variables of other programs, ntbx's hand-overs and
 * OSHRUN_* are taken from the environment only.  A value runs to the next
 * blank, or is in double quotes.  A line that starts with program=GLOB
 * applies only to a process whose name (program_invocation_short_name,
 * e.g. "nginx" or "python3") or executable's file name matches.  Later
 * lines win over earlier ones, the user's file over /etc's, the
 * environment over both.  A line with an unknown key, a bad value or bad
 * syntax is reported with FILE:LINE and skipped whole; the others apply.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/settings.h"
#include "util/util.h"

#define LINE_MAX_LEN 1024
#define PAIRS_MAX 16

int ntbx_settings_file_open(const char *path)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY |
	              O_CLOEXEC);
	if (fd < 0) {
		if (errno == ELOOP)
			ntbx_log(NTBX_LOG_WARN, "%s: a symbolic link; ignored (a "
			         "config file must be a regular file)", path);
		else if (errno != ENOENT && errno != ENOTDIR)
			/* not readable by this user (a program that dropped to
			 * nobody still has root's HOME): as if absent, unless
			 * asked */
			ntbx_log(errno == EACCES ? NTBX_LOG_INFO : NTBX_LOG_WARN,
			         "%s: %s; ignored", path, strerror(errno));
		return -1;
	}
	struct stat st;
	const char *why = NULL;
	if (fstat(fd, &st) < 0)
		why = "cannot be examined";
	else if (!S_ISREG(st.st_mode))
		why = "not a regular file";
	else if (st.st_uid != 0 && st.st_uid != geteuid())
		why = "owned by another user (it must be root's or yours)";
	else if (st.st_mode & (S_IWGRP | S_IWOTH))
		why = "writable by users other than its owner";
	if (why) {
		ntbx_log(NTBX_LOG_WARN, "%s: %s; ignored", path, why);
		close(fd);
		return -1;
	}
	return fd;
}

/* The key's setting: a variable a config file may set, or -1. */
static int key_id(const char *key)
{
	for (int i = 0; i < NTBX_SET_COUNT; i++) {
		const struct ntbx_setting_desc *d =
			ntbx_setting_desc((enum ntbx_setting_id)i);
		if (d->flags & (NTBX_SF_ENV | NTBX_SF_FOREIGN | NTBX_SF_INTERNAL))
			continue;
		const char *n = d->name;
		if (!strncmp(n, "NTBX_", 5))
			n += 5;
		size_t k = 0;
		while (n[k] && key[k] && tolower((unsigned char)n[k]) == key[k])
			k++;
		if (!n[k] && !key[k])
			return i;
	}
	return -1;
}

struct pair { char *key, *value; };

/* Split @s (one line, NUL-terminated, writable) into pairs; the error in
 * words, or NULL. */
static const char *split(char *s, struct pair *p, int *np)
{
	int n = 0;
	for (;;) {
		while (*s == ' ' || *s == '\t' || *s == '\r')
			s++;
		if (!*s || *s == '#')
			break;
		if (n == PAIRS_MAX)
			return "more than 16 settings on one line";
		p[n].key = s;
		while (*s == '_' || (*s >= 'a' && *s <= 'z') ||
		       (*s >= '0' && *s <= '9'))
			s++;
		char *kend = s;
		while (*s == ' ' || *s == '\t')
			s++;
		if (kend == p[n].key || *s != '=')
			return "expected key=value (keys in lower case: see "
			       "`ntbx settings`)";
		*kend = 0;
		s++;
		while (*s == ' ' || *s == '\t')
			s++;
		if (*s == '"') {
			p[n].value = ++s;
			while (*s && *s != '"')
				s++;
			if (*s != '"')
				return "a quote that does not end";
			*s++ = 0;
			if (*s && *s != ' ' && *s != '\t' && *s != '\r' && *s != '#')
				return "text right after a closing quote";
		} else {
			p[n].value = s;
			while (*s && *s != ' ' && *s != '\t' && *s != '\r' && *s != '#')
				s++;
			char c = *s;
			*s = 0;
			if (c == '#' || !c) {   /* a comment ends the line */
				n++;
				break;
			}
			s++;
		}
		n++;
	}
	*np = n;
	return NULL;
}

static void one_line(const char *file, unsigned ln, char *s,
                     const char *program, const char *exe,
                     ntbx_settings_set_fn set, void *ctx)
{
	struct pair p[PAIRS_MAX];
	int n = 0;
	const char *why = split(s, p, &n);
	if (why) {
		ntbx_log(NTBX_LOG_WARN, "%s:%u: %s; line skipped", file, ln, why);
		return;
	}
	int first = 0, applies = 1;
	if (n && !strcmp(p[0].key, "program")) {
		first = 1;
		if (!*p[0].value || n == 1) {
			ntbx_log(NTBX_LOG_WARN, "%s:%u: program=GLOB must be followed "
			         "by settings; line skipped", file, ln);
			return;
		}
		applies = (program && !fnmatch(p[0].value, program, 0)) ||
		          (exe && *exe && !fnmatch(p[0].value, exe, 0));
	}
	int ids[PAIRS_MAX];
	for (int i = first; i < n; i++) {
		ids[i] = key_id(p[i].key);
		char want[160];
		if (ids[i] < 0) {
			ntbx_log(NTBX_LOG_WARN, "%s:%u: unknown key '%s' (`ntbx "
			         "settings` lists them); line skipped", file, ln,
			         p[i].key);
			return;
		}
		if (ntbx_setting_parse((enum ntbx_setting_id)ids[i], p[i].value,
		                       NULL, NULL) < 0) {
			ntbx_log(NTBX_LOG_WARN, "%s:%u: %s='%s': expected %s; line "
			         "skipped", file, ln, p[i].key, p[i].value,
			         ntbx_setting_expects((enum ntbx_setting_id)ids[i],
			                              want, sizeof want));
			return;
		}
	}
	if (applies)
		for (int i = first; i < n; i++)
			set(ctx, ids[i], p[i].value, file, ln);
}

void ntbx_settings_file_parse(const char *file, const char *text, size_t len,
                              const char *program, const char *exe,
                              ntbx_settings_set_fn set, void *ctx)
{
	char line[LINE_MAX_LEN + 1];
	unsigned ln = 0;
	size_t i = 0;
	while (i < len) {
		ln++;
		const char *nl = memchr(text + i, '\n', len - i);
		size_t end = nl ? (size_t)(nl - text) : len;
		size_t l = end - i;
		if (memchr(text + i, 0, l))
			ntbx_log(NTBX_LOG_WARN, "%s:%u: a NUL byte; line skipped", file,
			         ln);
		else if (l > LINE_MAX_LEN)
			ntbx_log(NTBX_LOG_WARN, "%s:%u: longer than %d bytes; line "
			         "skipped", file, ln, LINE_MAX_LEN);
		else {
			memcpy(line, text + i, l);
			line[l] = 0;
			one_line(file, ln, line, program, exe, set, ctx);
		}
		i = end + 1;
	}
}
