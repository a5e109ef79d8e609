/* SPDX-License-Identifier: MIT */
/*
 * output.h — result printing for the ntbx command.
 *
 * A command declares its columns once; each result is one row.  By default
 * rows are printed as an aligned, human-readable table (the header before
 * the first row); with --json each row is one JSON object on one line, with
 * numbers as numbers and sizes in bytes.  Keys that are not columns appear
 * in JSON only.  Rows are flushed as they are produced, so long runs show
 * progress and a pipe sees whole lines.
 */
#ifndef NTBX_TOOLS_OUTPUT_H
#define NTBX_TOOLS_OUTPUT_H

#include <stdint.h>
#include <stdio.h>

struct out_col {
	const char *key;    /* JSON key and table header */
	int width;          /* table column width (right-aligned; < 0 left) */
};

#define OUT_MAX_COLS 24
#define OUT_ROW_MAX  8192

struct out {
	int json;
	int ncols;
	struct out_col cols[OUT_MAX_COLS];
	char cell[OUT_MAX_COLS][64];
	int header_done;
	char row[OUT_ROW_MAX];  /* JSON row being built */
	size_t len;
	int nfields;
	FILE *fp;
};

/* @cols ends with a {NULL, 0} entry. */
void out_init(struct out *o, int json, const struct out_col *cols);

void out_str(struct out *o, const char *key, const char *v);
void out_int(struct out *o, const char *key, long long v);
void out_u64(struct out *o, const char *key, uint64_t v);
void out_hex(struct out *o, const char *key, uint64_t v, int digits);
/* A double with @prec decimals (JSON: a number; NaN/inf become null). */
void out_dbl(struct out *o, const char *key, double v, int prec);
/* A byte count: "64K" in the table, 65536 in JSON. */
void out_size(struct out *o, const char *key, uint64_t bytes);
/* A ready-made JSON value (array, object) in JSON; @table in the table. */
void out_raw(struct out *o, const char *key, const char *json,
             const char *table);
void out_row_end(struct out *o);

/* Human form of a byte count: 4096 -> "4K", 1536 -> "1536". */
char *fmt_size(char *buf, size_t len, uint64_t bytes);

/* Append a JSON string literal of @s to @buf (NUL-terminated, bounded). */
void json_quote(char *buf, size_t cap, const char *s);

#endif
