/* SPDX-License-Identifier: MIT */
#include "output.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>

void out_init(struct out *o, int json, const struct out_col *cols)
{
	memset(o, 0, sizeof(*o));
	o->json = json;
	o->fp = stdout;
	for (int i = 0; cols && cols[i].key && i < OUT_MAX_COLS; i++)
		o->cols[o->ncols++] = cols[i];
}

void json_quote(char *buf, size_t cap, const char *s)
{
	size_t n = strlen(buf);
	if (cap == 0 || n + 1 >= cap)
		return;
	buf[n++] = '"';
	for (; *s && n + 8 < cap; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			buf[n++] = '\\';
			buf[n++] = (char)c;
		} else if (c < 0x20) {
			n += (size_t)snprintf(buf + n, cap - n, "\\u%04x", c);
		} else {
			buf[n++] = (char)c;
		}
	}
	if (n + 1 < cap)
		buf[n++] = '"';
	buf[n] = 0;
}

static int col_of(struct out *o, const char *key)
{
	for (int i = 0; i < o->ncols; i++)
		if (strcmp(o->cols[i].key, key) == 0)
			return i;
	return -1;
}

/* Add one field: @json is the JSON value text, @table the cell text. */
static void field(struct out *o, const char *key, const char *json,
                  const char *table)
{
	if (o->json) {
		char k[128] = "";
		json_quote(k, sizeof(k), key);
		int n = snprintf(o->row + o->len, sizeof(o->row) - o->len,
		                 "%s%s: %s", o->nfields ? ", " : "{", k, json);
		if (n > 0 && (size_t)n < sizeof(o->row) - o->len)
			o->len += (size_t)n;
		o->nfields++;
		return;
	}
	int c = col_of(o, key);
	if (c >= 0)
		snprintf(o->cell[c], sizeof(o->cell[c]), "%s", table);
}

void out_str(struct out *o, const char *key, const char *v)
{
	char j[1024] = "";
	json_quote(j, sizeof(j), v ? v : "");
	field(o, key, j, v ? v : "");
}

void out_int(struct out *o, const char *key, long long v)
{
	char j[32];
	snprintf(j, sizeof(j), "%lld", v);
	field(o, key, j, j);
}

void out_u64(struct out *o, const char *key, uint64_t v)
{
	char j[32];
	snprintf(j, sizeof(j), "%" PRIu64, v);
	field(o, key, j, j);
}

void out_hex(struct out *o, const char *key, uint64_t v, int digits)
{
	char t[40], j[48];
	snprintf(t, sizeof(t), "0x%0*" PRIx64, digits, v);
	snprintf(j, sizeof(j), "\"%s\"", t);
	field(o, key, j, t);
}

void out_dbl(struct out *o, const char *key, double v, int prec)
{
	char j[64];
	if (isnan(v) || isinf(v))
		snprintf(j, sizeof(j), "null");
	else
		snprintf(j, sizeof(j), "%.*f", prec, v);
	field(o, key, j, strcmp(j, "null") ? j : "-");
}

char *fmt_size(char *buf, size_t len, uint64_t b)
{
	static const char units[] = "KMGTP";
	int u = -1;
	uint64_t v = b;
	while (v >= 1024 && v % 1024 == 0 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(buf, len, "%" PRIu64, b);
	else
		snprintf(buf, len, "%" PRIu64 "%c", v, units[u]);
	return buf;
}

void out_size(struct out *o, const char *key, uint64_t bytes)
{
	char j[32], t[32];
	snprintf(j, sizeof(j), "%" PRIu64, bytes);
	field(o, key, j, fmt_size(t, sizeof(t), bytes));
}

void out_raw(struct out *o, const char *key, const char *json,
             const char *table)
{
	field(o, key, json, table ? table : "");
}

void out_row_end(struct out *o)
{
	if (o->json) {
		fprintf(o->fp, "%s}\n", o->nfields ? o->row : "{");
		o->len = 0;
		o->nfields = 0;
		o->row[0] = 0;
		fflush(o->fp);
		return;
	}
	if (!o->header_done) {
		for (int i = 0; i < o->ncols; i++) {
			int w = o->cols[i].width;
			fprintf(o->fp, "%s%*s", i ? "  " : "", w, o->cols[i].key);
		}
		fputc('\n', o->fp);
		o->header_done = 1;
	}
	for (int i = 0; i < o->ncols; i++) {
		int w = o->cols[i].width;
		fprintf(o->fp, "%s%*s", i ? "  " : "", w,
		        o->cell[i][0] ? o->cell[i] : "-");
		o->cell[i][0] = 0;
	}
	fputc('\n', o->fp);
	fflush(o->fp);
}
