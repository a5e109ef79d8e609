/* The settings table and its sources (src/util/settings*.c): the table is
 * whole (defaults valid, names and keys unique); each type accepts what it
 * says and nothing else; a bad value gives exactly one line on stderr
 * naming the variable, the value, what was expected and what is used, even
 * when many threads read it first at once; config files apply with their
 * precedence and per-program lines; files that may not be trusted are
 * refused with one line; hostile files (long lines, NUL bytes, no final
 * newline, bad quotes, unknown keys) are reported with FILE:LINE and
 * skipped line by line. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "util/settings.h"
#include "util/util.h"

static char dir[256], err_path[300];
static int saved_err = -1;

/* ---------------------------------------------------- stderr capture */

static void capture_start(void)
{
	fflush(stderr);
	saved_err = dup(2);
	int fd = open(err_path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	REQUIRE(fd >= 0 && saved_err >= 0);
	dup2(fd, 2);
	close(fd);
}

/* What was written to stderr since capture_start, and the line count. */
static int capture_end(char *buf, size_t len)
{
	fflush(stderr);
	dup2(saved_err, 2);
	close(saved_err);
	int fd = open(err_path, O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, len - 1) : -1;
	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = 0;
	int lines = 0;
	for (char *p = buf; *p; p++)
		lines += *p == '\n';
	return lines;
}

static void write_file(const char *path, const char *text, size_t len,
                       mode_t mode)
{
	unlink(path);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	REQUIRE(fd >= 0);
	REQUIRE(write(fd, text, len) == (ssize_t)len);
	fchmod(fd, mode);
	close(fd);
}

/* ------------------------------------------------------------- table */

static void table_whole(void)
{
	for (int i = 0; i < NTBX_SET_COUNT; i++) {
		enum ntbx_setting_id id = (enum ntbx_setting_id)i;
		const struct ntbx_setting_desc *d = ntbx_setting_desc(id);
		REQUIRE(d && d->name && d->doc && *d->doc);
		CHECK_EQ(ntbx_setting_lookup(d->name), i);
		if (d->def) {
			long n;
			uint64_t z;
			if (ntbx_setting_parse(id, d->def, &n, &z) != 0)
				fprintf(stderr, "default of %s does not parse\n", d->name);
			CHECK_EQ(ntbx_setting_parse(id, d->def, &n, &z), 0);
		}
		CHECK((d->type == NTBX_ST_ENUM) == (d->choices != NULL));
		for (int j = 0; j < i; j++)
			CHECK(strcmp(ntbx_setting_desc((enum ntbx_setting_id)j)->name,
			             d->name) != 0);
	}
	CHECK_EQ(ntbx_setting_lookup("NTBX_NO_SUCH"), -1);
}

/* -------------------------------------------------------------- types */

static int ok(enum ntbx_setting_id id, const char *s)
{
	return ntbx_setting_parse(id, s, NULL, NULL) == 0;
}

static void types(void)
{
	long n = 0;
	uint64_t z = 0;
	/* INT */
	CHECK(ok(NTBX_SET_OFI_POLL_US, "0") && ok(NTBX_SET_OFI_POLL_US, "200"));
	CHECK(!ok(NTBX_SET_OFI_POLL_US, "201") && !ok(NTBX_SET_OFI_POLL_US, "-1"));
	CHECK(!ok(NTBX_SET_OFI_POLL_US, "5x") && !ok(NTBX_SET_OFI_POLL_US, ""));
	CHECK(!ok(NTBX_SET_OFI_POLL_US, "99999999999999999999999"));
	/* SIZE */
	CHECK_EQ(ntbx_setting_parse(NTBX_SET_SOCK_BUF, "1M", &n, &z), 0);
	CHECK_EQ(z, 1u << 20);
	CHECK(ok(NTBX_SET_SOCK_BUF, "4K") && ok(NTBX_SET_SOCK_BUF, "64MiB"));
	CHECK(!ok(NTBX_SET_SOCK_BUF, "2K") && !ok(NTBX_SET_SOCK_BUF, "65M"));
	CHECK(!ok(NTBX_SET_SOCK_BUF, "lots") && !ok(NTBX_SET_SOCK_BUF, "1Q"));
	CHECK(!ok(NTBX_SET_SHMEM_SYMMETRIC_SIZE, "0"));
	CHECK(!ok(NTBX_SET_SHMEM_SYMMETRIC_SIZE, "99999999999T"));
	/* BOOL */
	CHECK_EQ(ntbx_setting_parse(NTBX_SET_SOCK, "off", &n, NULL), 0);
	CHECK_EQ(n, 0);
	CHECK_EQ(ntbx_setting_parse(NTBX_SET_SOCK, "YES", &n, NULL), 0);
	CHECK_EQ(n, 1);
	CHECK(!ok(NTBX_SET_SOCK, "2") && !ok(NTBX_SET_SOCK, "of"));
	/* FLAG: OpenSHMEM's "any" */
	CHECK_EQ(ntbx_setting_parse(NTBX_SET_SHMEM_INFO, "please", &n, NULL), 0);
	CHECK_EQ(n, 1);
	CHECK_EQ(ntbx_setting_parse(NTBX_SET_SHMEM_INFO, "0", &n, NULL), 0);
	CHECK_EQ(n, 0);
	/* ENUM: the index */
	CHECK_EQ(ntbx_setting_parse(NTBX_SET_LOG, "debug", &n, NULL), 0);
	CHECK_EQ(n, NTBX_LOG_DEBUG);
	CHECK(!ok(NTBX_SET_LOG, "verbose") && !ok(NTBX_SET_LOG, "war"));
	CHECK(!ok(NTBX_SET_LOG, "warnx") && !ok(NTBX_SET_LOG, "warn|info"));
	/* PATH */
	CHECK(ok(NTBX_SET_SHM_DIR, "/tmp/x") && !ok(NTBX_SET_SHM_DIR, "tmp"));
	/* PORTS */
	CHECK(ok(NTBX_SET_SOCK_PORTS, "5201,8000-8100"));
	CHECK(ok(NTBX_SET_SOCK_PORTS, "!22,!5432"));
	CHECK(!ok(NTBX_SET_SOCK_PORTS, "0") && !ok(NTBX_SET_SOCK_PORTS, "70000"));
	CHECK(!ok(NTBX_SET_SOCK_PORTS, "9-3") && !ok(NTBX_SET_SOCK_PORTS, "80,"));
	CHECK(!ok(NTBX_SET_SOCK_PORTS, "80,,81") && !ok(NTBX_SET_SOCK_PORTS, "-80"));
	CHECK(!ok(NTBX_SET_SOCK_PORTS, "http"));
	char many[400] = "";
	for (int i = 1; i <= 33; i++)
		snprintf(many + strlen(many), sizeof many - strlen(many), "%s%d",
		         i > 1 ? "," : "", i);
	CHECK(!ok(NTBX_SET_SOCK_PORTS, many));
	char buf[160];
	CHECK(strstr(ntbx_setting_expects(NTBX_SET_LOG, buf, sizeof buf),
	             "error, warn, info or debug") != NULL);
	CHECK(strstr(ntbx_setting_expects(NTBX_SET_SOCK_BUF, buf, sizeof buf),
	             "from 4K to 64M") != NULL);
}

/* --------------------------------------------------- the environment */

static void bad_value(void)
{
	char out[4096], src[64];
	ntbx_settings_test_reset("", "", NULL);
	setenv("NTBX_OFI_POLL_US", "500", 1);
	capture_start();
	long v = ntbx_setting_long(NTBX_SET_OFI_POLL_US);
	long again = ntbx_setting_long(NTBX_SET_OFI_POLL_US);
	int lines = capture_end(out, sizeof out);
	CHECK_EQ(v, 0);
	CHECK_EQ(again, 0);
	CHECK_EQ(lines, 1);   /* once per variable and process */
	CHECK(strstr(out, "ntbx: ignoring NTBX_OFI_POLL_US='500': expected a "
	             "whole number from 0 to 200; using 0\n") != NULL);
	CHECK(ntbx_setting_bad(NTBX_SET_OFI_POLL_US));
	CHECK(!ntbx_setting_is_set(NTBX_SET_OFI_POLL_US));
	CHECK(!strcmp(ntbx_setting_source(NTBX_SET_OFI_POLL_US, src, sizeof src),
	              "default"));
	unsetenv("NTBX_OFI_POLL_US");

	/* a good one, from the environment */
	setenv("NTBX_SOCK_BUF", "1M", 1);
	CHECK_EQ(ntbx_setting_size(NTBX_SET_SOCK_BUF), 1u << 20);
	CHECK(!strcmp(ntbx_setting_source(NTBX_SET_SOCK_BUF, src, sizeof src),
	              "environment"));
	unsetenv("NTBX_SOCK_BUF");

	/* STRICT: the caller refuses it; nothing said here */
	setenv("NTBX_NODE", "one", 1);
	capture_start();
	CHECK(ntbx_setting_bad(NTBX_SET_NODE));
	CHECK(!strcmp(ntbx_setting_given(NTBX_SET_NODE), "one"));
	(void)ntbx_setting_long(NTBX_SET_NODE);
	CHECK_EQ(capture_end(out, sizeof out), 0);
	/* LIVE: a setenv is seen at the next use */
	setenv("NTBX_NODE", "3", 1);
	CHECK_EQ(ntbx_setting_long(NTBX_SET_NODE), 3);
	CHECK(!ntbx_setting_bad(NTBX_SET_NODE));
	unsetenv("NTBX_NODE");
	CHECK(!ntbx_setting_is_set(NTBX_SET_NODE));

	/* an unset value with no default */
	CHECK(ntbx_setting_str(NTBX_SET_SHMEM_FABRIC) == NULL);
	CHECK(!strcmp(ntbx_setting_str(NTBX_SET_LOG), "warn"));
}

/* Many threads read a bad value first at once: one line, one value. */
#define NT 8
static pthread_barrier_t bar;
static void *reader(void *arg)
{
	pthread_barrier_wait(&bar);
	*(long *)arg = ntbx_setting_long(NTBX_SET_COPY);
	return NULL;
}

static void race(void)
{
	char out[4096];
	for (int round = 0; round < 20; round++) {
		ntbx_settings_test_reset("", "", NULL);
		setenv("NTBX_COPY", "fast", 1);
		pthread_t t[NT];
		long v[NT];
		pthread_barrier_init(&bar, NULL, NT);
		capture_start();
		for (int i = 0; i < NT; i++)
			pthread_create(&t[i], NULL, reader, &v[i]);
		for (int i = 0; i < NT; i++)
			pthread_join(t[i], NULL);
		int lines = capture_end(out, sizeof out);
		pthread_barrier_destroy(&bar);
		CHECK_EQ(lines, 1);
		for (int i = 0; i < NT; i++)
			CHECK_EQ(v[i], 0);   /* auto */
	}
	unsetenv("NTBX_COPY");
}

/* ------------------------------------------------------- config files */

static void files(void)
{
	char etc[300], user[300], out[4096], src[400];
	snprintf(etc, sizeof etc, "%s/etc.conf", dir);
	snprintf(user, sizeof user, "%s/user.conf", dir);
	const char *e =
		"# site defaults\n"
		"spin_us = 20\n"
		"sock_buf=1M log=info   # two on a line\n"
		"program=test_sett* spin_us=30\n"
		"program=nginx spin_us=99 sock_ports=80,443\n"
		"shmem_symmetric_size=\"64M\"\n"
		"ofi_poll_us=150\n";
	write_file(etc, e, strlen(e), 0644);
	const char *u = "sock_buf = 2M\r\nofi_poll_us=10";   /* CRLF, no final newline */
	write_file(user, u, strlen(u), 0600);

	ntbx_settings_test_reset(etc, user, "test_settings");
	capture_start();
	CHECK_EQ(ntbx_setting_long(NTBX_SET_SPIN_US), 30);   /* program line */
	CHECK_EQ(ntbx_setting_size(NTBX_SET_SOCK_BUF), 2u << 20);   /* user's */
	CHECK_EQ(ntbx_setting_long(NTBX_SET_LOG), NTBX_LOG_INFO);
	CHECK_EQ(ntbx_setting_size(NTBX_SET_SHMEM_SYMMETRIC_SIZE), 64u << 20);
	CHECK_EQ(ntbx_setting_long(NTBX_SET_OFI_POLL_US), 10);
	CHECK(ntbx_setting_str(NTBX_SET_SOCK_PORTS) == NULL);   /* nginx's only */
	ntbx_setting_source(NTBX_SET_SPIN_US, src, sizeof src);
	CHECK(strstr(src, "etc.conf:4") != NULL);
	ntbx_setting_source(NTBX_SET_OFI_POLL_US, src, sizeof src);
	CHECK(strstr(src, "user.conf:2") != NULL);
	CHECK_EQ(capture_end(out, sizeof out), 0);

	/* as nginx */
	ntbx_settings_test_reset(etc, user, "nginx");
	CHECK_EQ(ntbx_setting_long(NTBX_SET_SPIN_US), 99);
	CHECK(!strcmp(ntbx_setting_str(NTBX_SET_SOCK_PORTS), "80,443"));

	/* the environment wins; a bad one falls back to the file's value */
	ntbx_settings_test_reset(etc, user, "test_settings");
	setenv("NTBX_SPIN_US", "5", 1);
	setenv("NTBX_SOCK_BUF", "huge", 1);
	capture_start();
	CHECK_EQ(ntbx_setting_long(NTBX_SET_SPIN_US), 5);
	CHECK_EQ(ntbx_setting_size(NTBX_SET_SOCK_BUF), 2u << 20);
	CHECK_EQ(capture_end(out, sizeof out), 1);
	CHECK(strstr(out, "ignoring NTBX_SOCK_BUF='huge'") &&
	      strstr(out, "using 2M (") && strstr(out, "user.conf:1)"));
	unsetenv("NTBX_SPIN_US");
	unsetenv("NTBX_SOCK_BUF");

	/* variables of other programs and hand-overs are not config keys */
	const char *f = "fi_provider=tcp\nkeeper=1,2,/x\noshrun_rsh=ssh\n"
	                "NTBX_SPIN_US=4\nspin_us=8\n";
	write_file(etc, f, strlen(f), 0644);
	ntbx_settings_test_reset(etc, "", "test_settings");
	capture_start();
	CHECK(ntbx_setting_str(NTBX_SET_FI_PROVIDER) == NULL ||
	      getenv("FI_PROVIDER"));
	CHECK_EQ(ntbx_setting_long(NTBX_SET_SPIN_US), 8);
	CHECK_EQ(capture_end(out, sizeof out), 4);
	CHECK(strstr(out, "etc.conf:1: unknown key 'fi_provider'") != NULL);
	CHECK(strstr(out, "etc.conf:2: unknown key 'keeper'") != NULL);
	CHECK(strstr(out, "etc.conf:4: expected key=value") != NULL);
}

/* @path as /etc's config file: nothing applied, and @lines lines on
 * stderr, the first containing @why. */
static void refused(const char *path, int lines, const char *why)
{
	char out[4096];
	ntbx_settings_test_reset(path, "", "x");
	capture_start();
	CHECK(!ntbx_setting_is_set(NTBX_SET_SPIN_US));
	CHECK_EQ(capture_end(out, sizeof out), lines);
	if (why && !strstr(out, why))
		fprintf(stderr, "%s: wanted '%s' in: %s\n", path, why, out);
	CHECK(!why || strstr(out, why) != NULL);
}

/* Files that may not be trusted: one line each, nothing applied. */
static void trust(void)
{
	char path[300], link[300];
	snprintf(path, sizeof path, "%s/t.conf", dir);
	snprintf(link, sizeof link, "%s/l.conf", dir);
	const char *t = "spin_us=42\n";
	write_file(path, t, strlen(t), 0664);
	refused(path, 1, "writable by users other than its owner");
	write_file(path, t, strlen(t), 0646);
	refused(path, 1, "writable by users other than its owner");
	write_file(path, t, strlen(t), 0644);
	unlink(link);
	REQUIRE(symlink(path, link) == 0);
	refused(link, 1, "l.conf: a symbolic link; ignored");
	/* a directory, a FIFO (no hang: opened non-blocking) */
	refused(dir, 1, "not a regular file");
	unlink(link);
	REQUIRE(mkfifo(link, 0600) == 0);
	refused(link, 1, "not a regular file");
	unlink(link);
	/* missing: silent */
	refused("/nonexistent/ntbx.conf", 0, NULL);
	/* the file itself, trusted, applies */
	ntbx_settings_test_reset(path, "", "x");
	CHECK_EQ(ntbx_setting_long(NTBX_SET_SPIN_US), 42);
}

/* Hostile text straight into the parser. */
struct seen { int n, id[32]; char value[32][64]; unsigned line[32]; };
static void record(void *ctx, int id, const char *value, const char *file,
                   unsigned line)
{
	(void)file;
	struct seen *s = ctx;
	if (s->n < 32) {
		s->id[s->n] = id;
		snprintf(s->value[s->n], sizeof s->value[0], "%s", value);
		s->line[s->n++] = line;
	}
}

static int parse(const char *text, size_t len, const char *program,
                 struct seen *s, char *out, size_t outlen)
{
	memset(s, 0, sizeof *s);
	capture_start();
	ntbx_settings_file_parse("h.conf", text, len, program, "", record, s);
	return capture_end(out, outlen);
}

static void hostile(void)
{
	struct seen s;
	char out[8192];
	/* a long line, then a good one */
	size_t big = 5000;
	char *t = malloc(big + 32);
	REQUIRE(t);
	memset(t, 'a', big);
	memcpy(t, "spin_us=", 8);
	strcpy(t + big, "\nlog=debug\n");
	CHECK_EQ(parse(t, strlen(t), "p", &s, out, sizeof out), 1);
	CHECK(strstr(out, "h.conf:1: longer than 1024 bytes; line skipped") != NULL);
	CHECK_EQ(s.n, 1);
	CHECK_EQ(s.id[0], NTBX_SET_LOG);
	CHECK_EQ(s.line[0], 2);
	free(t);
	/* NUL bytes inside a line and no final newline */
	static const char nul[] = "log=info\nspin_us=1\0 0\nsock=off";
	CHECK_EQ(parse(nul, sizeof nul - 1, "p", &s, out, sizeof out), 1);
	CHECK(strstr(out, "h.conf:2: a NUL byte; line skipped") != NULL);
	CHECK_EQ(s.n, 2);
	CHECK_EQ(s.id[1], NTBX_SET_SOCK);
	CHECK(!strcmp(s.value[1], "off"));
	CHECK_EQ(s.line[1], 3);
	/* bad lines are skipped whole; the others apply */
	const char *bad =
		"spin_us=\"12\n"                   /* quote that does not end */
		"spin_us=\"1\"2\n"                 /* text after the quote */
		"spin_us=5 sock_buf=1Q\n"          /* one bad value: none applies */
		"bogus=1\n"                        /* unknown key */
		"=5\n"                             /* no key */
		"spin_us\n"                        /* no = */
		"program=\n"                       /* empty glob */
		"program=p\n"                      /* nothing to set */
		"Spin_us=3\n"                      /* keys are lower case */
		"a=1 b=2 c=3 d=4 e=5 f=6 g=7 h=8 i=9 j=10 k=11 l=12 m=13 n=14 "
		"o=15 p=16 q=17\n"                 /* too many */
		"\n   \t\n# only a comment\n"
		"spin_us=7#comment right after\n"
		"program=\"p\" spin_us = \"9\"   # quoted\n";
	int lines = parse(bad, strlen(bad), "p", &s, out, sizeof out);
	CHECK_EQ(lines, 10);
	CHECK(strstr(out, "h.conf:1: a quote that does not end") != NULL);
	CHECK(strstr(out, "h.conf:3: sock_buf='1Q': expected a size") != NULL);
	CHECK(strstr(out, "h.conf:4: unknown key 'bogus'") != NULL);
	CHECK(strstr(out, "h.conf:10: more than 16 settings") != NULL);
	CHECK_EQ(s.n, 2);
	CHECK(!strcmp(s.value[0], "7") && s.line[0] == 14);
	CHECK(!strcmp(s.value[1], "9") && s.line[1] == 15);
	/* empty input */
	CHECK_EQ(parse("", 0, "p", &s, out, sizeof out), 0);
	CHECK_EQ(s.n, 0);
	/* the executable's name matches too */
	memset(&s, 0, sizeof s);
	ntbx_settings_file_parse("h.conf", "program=python3* log=info\n", 26,
	                         "myscript", "python3.11", record, &s);
	CHECK_EQ(s.n, 1);
}

int main(void)
{
	th_init("settings");
	snprintf(dir, sizeof dir, "/tmp/ntbx-settings-XXXXXX");
	REQUIRE(mkdtemp(dir));
	snprintf(err_path, sizeof err_path, "%s/stderr", dir);
	unsetenv("NTBX_LOG");
	unsetenv("NTBX_SPIN_US");
	unsetenv("NTBX_SOCK_BUF");
	table_whole();
	types();
	bad_value();
	race();
	files();
	trust();
	hostile();
	ntbx_settings_test_reset(NULL, NULL, NULL);
	char cmd[400];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	CHECK_EQ(system(cmd), 0);
	return th_done("settings");
}
