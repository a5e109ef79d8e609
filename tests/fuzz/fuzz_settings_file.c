/*
 * Fuzz the config-file parser (src/util/settings_file.c) with text in the
 * fuzzer's hands: half the inputs as they come (bytes, NULs, lines of any
 * length, no final newline), half built from the grammar's pieces (keys,
 * '=', quotes, blanks, '#', program=, values good and bad) so that most
 * lines get past the first character.  Whatever the text, the parser
 * hands on only known keys with values their type accepts, from lines
 * that exist, and never reads or writes out of bounds (ASan).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/settings.h"

static const char *const piece[] = {
	"spin_us", "sock_buf", "log", "sock_ports", "shmem_symmetric_size",
	"program", "nosuch", "NTBX_SPIN_US", "=", "=", " = ", " ", "\t", "\n",
	"\r\n", "#", "\"", "\"p*\"", "ntbx", "fuzz_*", "[!a-z]*", "50", "1M",
	"-1", "99999999999999999999", "info", "80,443", "!22", "off", "1Q", "",
	"\0", "\\", "*", "?",
};
#define NPIECE (sizeof piece / sizeof piece[0])

static size_t lines_in;

static void check(void *ctx, int id, const char *value, const char *file,
                  unsigned line)
{
	(void)ctx;
	(void)file;
	const struct ntbx_setting_desc *d =
		ntbx_setting_desc((enum ntbx_setting_id)id);
	if (!d || (d->flags & (NTBX_SF_ENV | NTBX_SF_FOREIGN | NTBX_SF_INTERNAL)) ||
	    ntbx_setting_parse((enum ntbx_setting_id)id, value, NULL, NULL) != 0 ||
	    line == 0 || line > lines_in) {
		fprintf(stderr, "parser handed on id %d '%s' at line %u of %zu\n",
		        id, value, line, lines_in);
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int once;
	if (!once) {
		once = 1;
		setenv("NTBX_LOG", "error", 0);   /* the reports are expected */
	}
	char *text;
	size_t len = 0;
	if (size && (data[0] & 1)) {
		/* built from pieces: each byte picks one */
		text = malloc(size * 24 + 1);
		if (!text)
			return 0;
		for (size_t i = 1; i < size; i++) {
			const char *p = piece[data[i] % NPIECE];
			size_t l = data[i] % NPIECE == NPIECE - 4 ? 1 : strlen(p);
			memcpy(text + len, p, l);
			len += l;
		}
	} else {
		text = malloc(size + 1);
		if (!text)
			return 0;
		memcpy(text, data, size);
		len = size;
	}
	lines_in = 1;
	for (size_t i = 0; i < len; i++)
		lines_in += text[i] == '\n';
	/* the exact length: no terminating NUL for the parser to lean on */
	char *exact = malloc(len ? len : 1);
	if (exact) {
		memcpy(exact, text, len);
		ntbx_settings_file_parse("fuzz.conf", exact, len, "fuzz_settings",
		                         "ntbx", check, NULL);
		free(exact);
	}
	free(text);
	return 0;
}
