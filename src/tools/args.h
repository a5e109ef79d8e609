/* SPDX-License-Identifier: MIT */
/*
 * args.h — command-line parsing for the ntbx command.
 *
 * Bad input is reported once: usage_die() prints one line to stderr,
 * "ntbx: <what is wrong> (see 'ntbx CMD --help')", and exits 2.
 * Runtime failures go through runtime_die(): one line, exit 1.
 */
#ifndef NTBX_TOOLS_ARGS_H
#define NTBX_TOOLS_ARGS_H

#include <stddef.h>
#include <stdint.h>

#define EXIT_USAGE 2

/* The command being parsed ("fabric create"), named in usage messages. */
extern const char *g_cmd;

__attribute__((noreturn, format(printf, 1, 2)))
void usage_die(const char *fmt, ...);
/* One line to stderr: "ntbx: " + message, exit 1. */
__attribute__((noreturn, format(printf, 1, 2)))
void runtime_die(const char *fmt, ...);
/* Exit 1 after a library call failed with @err: prints ntbx_errmsg() if it
 * has a message, else "@what: strerror(-err)". */
__attribute__((noreturn))
void lib_die(int err, const char *what);
/* The message lib_die would print, into @buf. */
void lib_msg(char *buf, size_t len, int err, const char *what);

/* 1 if @s is -h or --help. */
int is_help(const char *s);

/*
 * Option matching, inside a loop over argv with index *i:
 *   opt_flag(argv[*i], "--json")            -> 1 if it matches
 *   opt_value(argc, argv, i, "--nodes")     -> the value ("--nodes 3" or
 *       "--nodes=3"; consumes the value), NULL if @argv[*i] is not that
 *       option; exits 2 if the value is missing or empty.
 */
int opt_flag(const char *arg, const char *name);
const char *opt_value(int argc, char **argv, int *i, const char *name);
/* Exits 2: unknown option or stray argument. */
__attribute__((noreturn)) void bad_arg(const char *arg);

/* Parsers; each exits 2 naming @opt on bad input. */
long parse_int(const char *s, const char *opt, long min, long max);
double parse_double(const char *s, const char *opt, double min, double max);
/* Sizes: 4096, 64K, 4M, 1G (KiB units; "KiB"/"KB"/"k" accepted). */
uint64_t parse_size(const char *s, const char *opt, uint64_t min,
                    uint64_t max);
/* Returns 0 and *out, or -1 (no message). */
int try_parse_size(const char *s, uint64_t *out);

/*
 * Size lists: "8,64,4K" or ranges of powers of two "1-4M" (1, 2, 4, ...
 * 4M), mixed: "1-64,1M".  Sorted, duplicates removed.  Returns the count;
 * at most @max entries.
 */
int parse_size_list(const char *s, const char *opt, uint64_t min,
                    uint64_t max, uint64_t *out, int maxn);
/* Integer lists: "1,2,4,8" or ranges "1-8" (every integer). */
int parse_int_list(const char *s, const char *opt, long min, long max,
                   int *out, int maxn);

/* --fabric NAME, else $NTBX_FABRIC, else the per-user default
 * (ntbx_fabric_default_name). */
const char *default_fabric(const char *opt);

#endif
