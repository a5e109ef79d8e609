/* Large and odd-sized puts and gets, the way a DMA engine carries them
 * (a DMA-only backend writes straight into the target's memory from a
 * bounce ring): a put returns with its source free (the source is
 * overwritten at once), puts larger than the bounce ring (8 MiB) and at
 * odd offsets land whole, a PE asleep in wait_until wakes for bytes that
 * a put landed, fence orders a put before a flag, and gets read what was
 * put, at any size. */
#include <stdint.h>
#include <string.h>
#include "check.h"

#define BIG (9u << 20) + 13   /* more than the bounce ring, odd */

static unsigned char pat(int pe, size_t i, int round)
{
	return (unsigned char)(pe * 31 + round * 7 + i * 13 + (i >> 11));
}

int main(void)
{
	shmem_init();
	int me = shmem_my_pe(), n = shmem_n_pes();
	int right = (me + 1) % n, left = (me + n - 1) % n;
	unsigned char *buf = shmem_malloc(BIG + 64);
	long *flag = shmem_malloc(sizeof(long));
	unsigned char *src = malloc(BIG);
	CHECK(buf && flag && src, "malloc");
	*flag = 0;
	memset(buf, 0xee, BIG + 64);
	shmem_barrier_all();

	/* Sizes from 1 byte to more than the bounce ring, at odd offsets,
	 * each put followed at once by a new source (the put's copy must
	 * be taken before it returns). */
	static const size_t sizes[] = { 1, 7, 64, 4095, 4097, 65536 + 3,
	                                262144 + 1, 1048576, BIG - 5 };
	size_t ns = sizeof sizes / sizeof sizes[0];
	for (size_t s = 0; s < ns; s++) {
		size_t len = sizes[s], off = s % 5;
		for (size_t i = 0; i < len; i++)
			src[i] = pat(me, i, (int)s);
		shmem_putmem(buf + off, src, len, right);
		memset(src, 0, len);   /* must not reach the target */
		shmem_fence();
		/* the flag after the bytes: the target sleeps until it */
		shmem_long_p(flag, (long)s + 1, right);
		shmem_long_wait_until(flag, SHMEM_CMP_GE, (long)s + 1);
		size_t bad = len;
		for (size_t i = 0; i < len && bad == len; i++)
			if (buf[off + i] != pat(left, i, (int)s))
				bad = i;
		CHECK(bad == len, "put of %zu at +%zu: byte %zu is %u, not %u",
		      len, off, bad, buf[off + bad], pat(left, bad, (int)s));
		shmem_barrier_all();
	}

	/* Gets of what the left neighbour's last put left in our right
	 * neighbour's buffer (its own pattern, from the last round). */
	size_t last = ns - 1, loff = last % 5;
	for (size_t s = 0; s < ns; s++) {
		size_t len = sizes[s], at = s * 4099 % 65536;
		if (at + len > sizes[last])
			at = 0;
		memset(src, 0, len);
		shmem_getmem(src, buf + loff + at, len, right);
		size_t bad = len;
		for (size_t i = 0; i < len && bad == len; i++)
			if (src[i] != pat(me, at + i, (int)last))
				bad = i;
		CHECK(bad == len, "get of %zu at +%zu: byte %zu is %u", len, at,
		      bad, src[bad]);
	}

	/* Many puts in a row, then one quiet: every one lands. */
	shmem_barrier_all();
	for (int k = 0; k < 200; k++) {
		uint64_t v = (uint64_t)me << 32 | (uint64_t)k;
		shmem_putmem(buf + (size_t)k * 4096, &v, sizeof v, right);
	}
	shmem_quiet();
	shmem_barrier_all();
	for (int k = 0; k < 200; k++) {
		uint64_t v;
		memcpy(&v, buf + (size_t)k * 4096, sizeof v);
		CHECK(v == ((uint64_t)left << 32 | (uint64_t)k),
		      "put %d of a row: %llx", k, (unsigned long long)v);
	}
	free(src);
	(void)n;
	return test_done("bulk");
}
