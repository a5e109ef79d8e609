/* ntbx_copy: every size class and alignment copies exactly its bytes, with
 * the CPU's choice (rep movsb above NTBX_COPY_REP_MIN where the CPU has
 * FSRM) and with NTBX_COPY=memcpy, each in its own process because the
 * choice is made once per process. */
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
				memset(dst, 0xEE, max);
				uint8_t *d = dst + GUARD + offs[a];
				const uint8_t *s = src + offs[b];
				ntbx_copy(d, s, n);
				if (memcmp(d, s, n) != 0)
					bad++;
				for (size_t g = 0; g < GUARD; g++)
					if (d[-1 - (long)g] != 0xEE || d[n + g] != 0xEE)
						bad++;
			}
	CHECK_EQ(bad, 0);
	free(src);
	free(dst);
	return th_failures ? 1 : 0;
}

static int copy_forced_memcpy(void *arg)
{
	setenv("NTBX_COPY", "memcpy", 1);
	return copy_all(arg);
}

int main(void)
{
	th_init("test_copy");
	CHECK_EQ(th_wait(th_spawn(copy_all, NULL)), 0);
	CHECK_EQ(th_wait(th_spawn(copy_forced_memcpy, NULL)), 0);
	return th_done("test_copy");
}
