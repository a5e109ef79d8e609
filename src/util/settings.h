/* SPDX-License-Identifier: MIT */
/*
 * Settings: every variable ntbx reads, from one table (settings.def), and
 * the only place that reads the environment.  Internal to libntbx.
 *
 * Where a value comes from, first found wins: the environment; then
 * $XDG_CONFIG_HOME/ntbx.conf (default ~/.config/ntbx.conf); then
 * /etc/ntbx.conf; then the table's default.  Config files hold lines of
 * `key=value` pairs, the key being the variable's name in lower case
 * without NTBX_ (`spin_us = 50`, `shmem_symmetric_size=1G`); a line that
 * starts with `program=GLOB` applies only to programs whose name matches
 * (settings_file.c has the grammar and the trust rules).
 *
 * One policy for a bad value: one line on stderr (once per variable and
 * process) naming the variable, the value, what was expected and what is
 * used instead (the config file's value if the environment's is bad, else
 * the default); never a crash.  Settings marked STRICT are refused by the
 * call that uses them instead (ntbx_setting_bad).
 *
 * Values are parsed at first use and cached, without locks: a thread that
 * finds no cached value parses its own (the same) and the first to finish
 * publishes it, so first use from many threads and from signal handlers
 * is safe.  LIVE settings are read at each use.
 */
#ifndef NTBX_SETTINGS_H
#define NTBX_SETTINGS_H

#include <stddef.h>
#include <stdint.h>

enum ntbx_setting_id {
#define NTBX_SETTING(id, ...) NTBX_SET_##id,
#include "util/settings.def"
#undef NTBX_SETTING
	NTBX_SET_COUNT
};

enum ntbx_setting_type { NTBX_ST_INT, NTBX_ST_SIZE, NTBX_ST_BOOL,
                         NTBX_ST_FLAG, NTBX_ST_ENUM, NTBX_ST_STR,
                         NTBX_ST_PATH, NTBX_ST_PORTS };
enum ntbx_setting_scope { NTBX_SS_ALL, NTBX_SS_SOCK, NTBX_SS_SHMEM,
                          NTBX_SS_OFI, NTBX_SS_TOOLS };
enum {
	NTBX_SF_LIVE = 1, NTBX_SF_SECURE = 2, NTBX_SF_ENV = 4,
	NTBX_SF_FOREIGN = 8, NTBX_SF_INTERNAL = 16, NTBX_SF_STRICT = 32,
};

/* One row of the table, as settings.def wrote it. */
struct ntbx_setting_desc {
	const char *name;          /* NTBX_SPIN_US */
	enum ntbx_setting_type type;
	const char *def;           /* NULL: unset */
	int64_t min, max;          /* INT and SIZE */
	enum ntbx_setting_scope scope;
	unsigned flags;            /* NTBX_SF_* */
	const char *choices;       /* ENUM: "a|b|c" */
	const char *def_text;      /* how to describe the default, or NULL */
	const char *doc;
};
const struct ntbx_setting_desc *ntbx_setting_desc(enum ntbx_setting_id id);

/* The value: an INT, SIZE, BOOL or FLAG's number, an ENUM's index in its
 * choices; the default if unset or bad; 0 if that is unset too. */
long ntbx_setting_long(enum ntbx_setting_id id);
uint64_t ntbx_setting_size(enum ntbx_setting_id id);
static inline int ntbx_setting_bool(enum ntbx_setting_id id)
{
	return ntbx_setting_long(id) != 0;
}
/* The value as a string (a STR, PATH or PORTS, or any other as given):
 * the given one, else the default, else NULL.  Valid for the process's
 * life, except a LIVE one taken from the environment: until the next
 * setenv of that variable, as getenv's. */
const char *ntbx_setting_str(enum ntbx_setting_id id);
/* Whether a valid value was given (environment or config file). */
int ntbx_setting_is_set(enum ntbx_setting_id id);
/* Whether the variable is in this process's environment, even empty (to
 * pass it on to another program: mpirun -x NAME). */
int ntbx_setting_env_set(enum ntbx_setting_id id);
/* Whether a value was given and refused, and that value; neither says
 * anything on stderr (for STRICT settings and for launchers that refuse
 * bad input before they start anything). */
int ntbx_setting_bad(enum ntbx_setting_id id);
const char *ntbx_setting_given(enum ntbx_setting_id id);
/* Where the value comes from: "environment", "FILE:LINE" or "default". */
const char *ntbx_setting_source(enum ntbx_setting_id id, char *buf,
                                size_t len);
/* What a setting accepts, in words ("a whole number from 0 to 200"). */
const char *ntbx_setting_expects(enum ntbx_setting_id id, char *buf,
                                 size_t len);
/* The table's name for a variable, or -1. */
int ntbx_setting_lookup(const char *name);

/* Read the config files now if not done yet (before a seccomp filter:
 * a confined process opens nothing). */
void ntbx_settings_load(void);
/* Tests: read @id again at its next use (after a setenv). */
void ntbx_setting_test_forget(enum ntbx_setting_id id);
/* Tests: forget every cached value and the config files, and read the
 * files from @etc and @user (NULL: the usual places; "" : none) as if
 * the process were called @program (NULL: its own name). */
void ntbx_settings_test_reset(const char *etc, const char *user,
                              const char *program);

/*
 * The config files (settings_file.c).  ntbx_settings_file_parse reads one
 * file's text and calls @set for each pair that applies to @program (keys
 * checked against the table); it reports an unknown key or a bad line on
 * stderr with FILE:LINE and skips it.  Exposed for tests and the fuzzer.
 */
typedef void (*ntbx_settings_set_fn)(void *ctx, int id, const char *value,
                                     const char *file, unsigned line);
void ntbx_settings_file_parse(const char *file, const char *text, size_t len,
                              const char *program, const char *exe,
                              ntbx_settings_set_fn set, void *ctx);
/* Open @path's file for reading if it may be trusted: not a symbolic
 * link, a regular file, owned by root or the caller's effective user,
 * writable by nobody else; else -1 and one line on stderr (none when the
 * file does not exist, none unless NTBX_LOG=info when this user may not
 * read it). */
int ntbx_settings_file_open(const char *path);
/* Check @s against setting @id's type: 0 and its number, or -1. */
int ntbx_setting_parse(enum ntbx_setting_id id, const char *s, long *num,
                       uint64_t *size);

#endif
