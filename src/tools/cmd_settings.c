/* SPDX-License-Identifier: MIT */
/*
 * ntbx settings — every variable ntbx reads, from the one table
 * (util/settings.def): what it accepts, its default, its config-file key,
 * and the value this process would use and where it came from.
 *   (default)    a readable list       --json: one object a line
 *   --markdown   the README's table (scripts/readme_settings.sh puts it
 *                there; tests/settings_readme.sh checks it is)
 *   --all        also ntbx's hand-overs between its own processes
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "tool.h"
#include "util/settings.h"

static const char *const scope_name[] = { "all", "sockets", "OpenSHMEM",
                                          "ofi", "tools" };

static void usage(void)
{
	printf("usage: ntbx settings [--markdown | --json] [--all]\n"
	       "\n"
	       "Lists every variable ntbx reads: what it accepts, its default, "
	       "its key in the\nconfig files and the value it has here, with "
	       "where that comes from.\n"
	       "\n"
	       "A value comes from the environment, else from "
	       "$XDG_CONFIG_HOME/ntbx.conf\n(default ~/.config/ntbx.conf), "
	       "else from /etc/ntbx.conf, else the default.\nConfig lines hold "
	       "key=value pairs; a line that starts with program=GLOB\napplies "
	       "only to programs of that name:\n"
	       "    spin_us = 50\n"
	       "    program=nginx sock_ports=80,443\n"
	       "A bad value gives one line on stderr and the default is used.\n"
	       "\n"
	       "  --markdown  the table README.md shows\n"
	       "  --json      one JSON object per setting\n"
	       "  --all       also the hand-overs between ntbx's own processes\n");
}

/* The config key ("spin_us"), or "" for environment-only variables. */
static const char *key_of(const struct ntbx_setting_desc *d, char *buf,
                          size_t len)
{
	buf[0] = 0;
	if (d->flags & (NTBX_SF_ENV | NTBX_SF_FOREIGN | NTBX_SF_INTERNAL))
		return "";
	const char *n = strncmp(d->name, "NTBX_", 5) ? d->name : d->name + 5;
	size_t i = 0;
	for (; n[i] && i + 1 < len; i++)
		buf[i] = (char)tolower((unsigned char)n[i]);
	buf[i] = 0;
	return buf;
}

static const char *default_of(const struct ntbx_setting_desc *d, char *buf,
                              size_t len)
{
	if (d->def_text)
		return d->def_text;
	if (d->def)
		snprintf(buf, len, "`%s`", d->def);
	else
		snprintf(buf, len, "unset");
	return buf;
}

/* @s with '|' escaped for a markdown table cell. */
static void md_cell(const char *s)
{
	for (; *s; s++) {
		if (*s == '|')
			putchar('\\');
		putchar(*s);
	}
}

static void json_str(const char *k, const char *s, int comma)
{
	printf("\"%s\":", k);
	if (!s) {
		printf("null");
	} else {
		putchar('"');
		for (; *s; s++) {
			if (*s == '"' || *s == '\\')
				printf("\\%c", *s);
			else if ((unsigned char)*s < 0x20)
				printf("\\u%04x", *s);
			else
				putchar(*s);
		}
		putchar('"');
	}
	if (comma)
		putchar(',');
}

/* @text wrapped at 76 columns, each line indented by 4. */
static void wrapped(const char *text)
{
	const char *p = text;
	while (*p) {
		size_t n = strlen(p);
		if (n > 72) {
			n = 72;
			while (n && p[n] != ' ')
				n--;
			if (!n)
				n = strcspn(p, " ");
		}
		printf("    %.*s\n", (int)n, p);
		p += n;
		while (*p == ' ')
			p++;
	}
}

int cmd_settings(int argc, char **argv)
{
	int md = 0, json = 0, all = 0;
	for (int i = 1; i < argc; i++) {
		if (is_help(argv[i])) {
			usage();
			return 0;
		} else if (opt_flag(argv[i], "--markdown")) {
			md = 1;
		} else if (opt_flag(argv[i], "--json")) {
			json = 1;
		} else if (opt_flag(argv[i], "--all")) {
			all = 1;
		} else {
			bad_arg(argv[i]);
		}
	}
	if (md && json)
		usage_die("--markdown and --json: choose one");
	if (md)
		printf("| variable | config key | meaning | accepts | default |\n"
		       "|---|---|---|---|---|\n");
	for (int i = 0; i < NTBX_SET_COUNT; i++) {
		enum ntbx_setting_id id = (enum ntbx_setting_id)i;
		const struct ntbx_setting_desc *d = ntbx_setting_desc(id);
		if ((d->flags & NTBX_SF_INTERNAL) && !all)
			continue;
		char key[64], defbuf[96], want[160], src[300];
		key_of(d, key, sizeof key);
		const char *def = default_of(d, defbuf, sizeof defbuf);
		ntbx_setting_expects(id, want, sizeof want);
		if (md) {
			printf("| `%s` | %s%s%s | ", d->name, *key ? "`" : "", *key ?
			       key : "environment only", *key ? "`" : "");
			md_cell(d->doc);
			printf(" | ");
			md_cell(want);
			printf(" | ");
			md_cell(def);
			printf(" |\n");
			continue;
		}
		/* the value here (a bad one is reported by the lookup) */
		const char *now = ntbx_setting_str(id);
		ntbx_setting_source(id, src, sizeof src);
		if (json) {
			putchar('{');
			json_str("name", d->name, 1);
			json_str("key", *key ? key : NULL, 1);
			json_str("scope", scope_name[d->scope], 1);
			json_str("accepts", want, 1);
			json_str("default", d->def, 1);
			json_str("default_text", def, 1);
			json_str("value", now, 1);
			json_str("source", src, 1);
			json_str("doc", d->doc, 0);
			printf("}\n");
			continue;
		}
		printf("%s%s%s%s\n", d->name, *key ? "  (config: " : "", key,
		       *key ? ")" : "  (environment only)");
		printf("    read by: %s%s; accepts %s\n", scope_name[d->scope],
		       d->flags & NTBX_SF_FOREIGN ? " (another program's variable)" :
		       d->flags & NTBX_SF_INTERNAL ? " (ntbx sets it for its own "
		       "processes)" : "", want);
		printf("    default: %s; here: %s (%s)\n", def, now ? now : "unset",
		       src);
		wrapped(d->doc);
	}
	return 0;
}
