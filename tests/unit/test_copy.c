/* ntbx_copy and ntbx_copy_in: every size class and alignment copies
 * exactly its bytes, with the calibrated choice and with each way that
 * NTBX_COPY forces (memcpy, rep, nt), each in its own process because the
 * choice is made once per process; the choice is reported in words. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "util/util.h"

#define GUARD 64

static int copy_all(void *arg)
{
	(void)arg;
	static const size_t sizes[] = {
		0, 1, 63, 4096, NTBX_COPY_REP_MIN - 1, NTBX_COPY_REP_MIN,
		NTBX_COPY_REP_MIN + 1, (1u << 20) + 3, (4u << 20) + 65,
	};
	static const size_t offs[] = { 0, 1, 7, 63 };
	size_t max = (4u << 20) + 65 + 64 + 2 * GUARD;
	uint8_t *src = malloc(max), *dst = malloc(max);
	REQUIRE(src && dst);
	for (size_t i = 0; i < max; i++)
		src[i] = (uint8_t)(i * 131 + 7);
	int bad = 0;
	for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
		for (size_t a = 0; a < 4; a++)
			for (size_t b = 0; b < 4; b++) {
				size_t n = sizes[si];
				uint8_t *d = dst + GUARD + offs[a];
				const uint8_t *s = src + offs[b];
				for (int in = 0; in < 2; in++) {
					memset(dst, 0xEE, max);
					if (in)
						ntbx_copy_in(d, s, n);
					else
						ntbx_copy(d, s, n);
					if (memcmp(d, s, n) != 0)
						bad++;
					for (size_t g = 0; g < GUARD; g++)
						if (d[-1 - (long)g] != 0xEE ||
						    d[n + g] != 0xEE)
							bad++;
				}
			}
	CHECK_EQ(bad, 0);
	free(src);
	free(dst);
	return th_failures ? 1 : 0;
}

static int copy_forced(void *arg)
{
	const char *way = arg;
	setenv("NTBX_COPY", way, 1);
	int r = copy_all(NULL);
	const char *info = ntbx_copy_info();
	/* forced, or memcpy where no other way exists (sanitized builds) */
	CHECK(strncmp(info, way, strlen(way)) == 0 ||
	      strncmp(info, "memcpy (", 8) == 0);
	return r || th_failures ? 1 : 0;
}

static int copy_auto(void *arg)
{
	int r = copy_all(arg);
	const char *info = ntbx_copy_info();
	CHECK(strncmp(info, "memcpy", 6) == 0 || strncmp(info, "rep", 3) == 0 ||
	      strncmp(info, "nt", 2) == 0);
	return r || th_failures ? 1 : 0;
}

int main(void)
{
	th_init("test_copy");
	CHECK_EQ(th_wait(th_spawn(copy_auto, NULL)), 0);
	CHECK_EQ(th_wait(th_spawn(copy_forced, "memcpy")), 0);
	CHECK_EQ(th_wait(th_spawn(copy_forced, "rep")), 0);
	CHECK_EQ(th_wait(th_spawn(copy_forced, "nt")), 0);
	return th_done("test_copy");
}
