/*
 * A small standalone fuzz driver for LLVMFuzzerTestOneInput targets, so
 * they build and run with gcc and no libFuzzer:
 *
 *   fuzz_x [-seconds=N] [-runs=N] [-seed=N] [-max_len=N] [FILE...]
 *
 * With FILEs, replays each file once (a corpus or a crash reproducer) and
 * exits.  Otherwise generates inputs for N seconds (default 10) or N runs:
 * random bytes, mutations of earlier inputs (bit flips, byte sets, chunk
 * copies, truncation/extension) and "interesting" integers (0, -1,
 * 0x7fffffff, 0x80000000, powers of two and lengths near them, the
 * default ring sizes) written at random aligned places.  The seed is
 * printed first so a run can be repeated.  Exits 0 if no input crashed
 * (a crash is the target's signal, caught by the sanitizers or the OS).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t rs;

static uint64_t rnd(void)
{
	/* xorshift64* */
	rs ^= rs >> 12;
	rs ^= rs << 25;
	rs ^= rs >> 27;
	return rs * 0x2545f4914f6cdd1dull;
}

static const uint64_t interesting[] = {
	0, 1, 2, 15, 16, 17, 63, 64, 65, 127, 128, 255, 256, 1023, 1024,
	4032, 4047, 4048, 4080, 4095, 4096, 4097, 8192, 65535, 65536,
	(32u << 10) - 64, 32u << 10, (128u << 10) - 64, 131072, 262144,
	524288, 524224, 0x7fffffff, 0x80000000u, 0xfffffffeu, 0xffffffffu,
	0x7fffffffffffffffull, 0x8000000000000000ull, ~0ull,
};
#define NINT (sizeof interesting / sizeof interesting[0])

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int replay(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		return 1;
	}
	size_t cap = 1 << 16, n = 0;
	uint8_t *buf = malloc(cap);
	size_t k;
	while (buf && (k = fread(buf + n, 1, cap - n, f)) > 0) {
		n += k;
		if (n == cap) {
			uint8_t *nb = realloc(buf, cap *= 2);
			if (!nb)
				break;
			buf = nb;
		}
	}
	fclose(f);
	if (!buf)
		return 1;
	LLVMFuzzerTestOneInput(buf, n);
	free(buf);
	printf("replayed %s (%zu bytes)\n", path, n);
	return 0;
}

static void mutate(uint8_t *b, size_t *len, size_t max)
{
	int ops = 1 + (int)(rnd() % 8);
	for (int i = 0; i < ops; i++) {
		size_t n = *len;
		switch (rnd() % 7) {
		case 0:   /* bit flip */
			if (n)
				b[rnd() % n] ^= (uint8_t)(1u << (rnd() % 8));
			break;
		case 1:   /* random byte */
			if (n)
				b[rnd() % n] = (uint8_t)rnd();
			break;
		case 2: { /* interesting integer at an aligned place */
			if (n < 8)
				break;
			uint64_t v = interesting[rnd() % NINT];
			if (rnd() & 1)
				v += (rnd() % 5) - 2;
			size_t w = (size_t)1 << (rnd() % 4);
			size_t at = (rnd() % (n - 7)) & ~(w - 1);
			memcpy(b + at, &v, w);
			break;
		}
		case 3: { /* copy a chunk */
			if (n < 2)
				break;
			size_t from = rnd() % n, to = rnd() % n;
			size_t l = rnd() % (n - (from > to ? from : to));
			memmove(b + to, b + from, l);
			break;
		}
		case 4:   /* truncate */
			if (n)
				*len = rnd() % n;
			break;
		case 5: { /* extend with random bytes */
			size_t add = rnd() % 256;
			if (n + add > max)
				add = max - n;
			for (size_t j = 0; j < add; j++)
				b[n + j] = (uint8_t)rnd();
			*len = n + add;
			break;
		}
		case 6: { /* a run of one byte value */
			if (!n)
				break;
			size_t at = rnd() % n, l = rnd() % (n - at + 1);
			memset(b + at, (rnd() & 1) ? 0 : 0xff, l);
			break;
		}
		}
	}
}

int main(int argc, char **argv)
{
	double seconds = 10;
	long long runs = -1;
	size_t max_len = 1 << 16;
	uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32);
	int files = 0;
	for (int i = 1; i < argc; i++) {
		if (!strncmp(argv[i], "-seconds=", 9))
			seconds = atof(argv[i] + 9);
		else if (!strncmp(argv[i], "-max_total_time=", 16))
			seconds = atof(argv[i] + 16);
		else if (!strncmp(argv[i], "-runs=", 6))
			runs = atoll(argv[i] + 6);
		else if (!strncmp(argv[i], "-seed=", 6))
			seed = strtoull(argv[i] + 6, NULL, 0);
		else if (!strncmp(argv[i], "-max_len=", 9))
			max_len = (size_t)atoll(argv[i] + 9);
		else if (argv[i][0] == '-')
			fprintf(stderr, "ignoring option %s\n", argv[i]);
		else
			files++;
	}
	if (files) {
		int rc = 0;
		for (int i = 1; i < argc; i++)
			if (argv[i][0] != '-')
				rc |= replay(argv[i]);
		return rc;
	}
	if (!seed)
		seed = 1;
	rs = seed;
	printf("fuzz driver: seed %llu (repeat with -seed=%llu), %.0f s\n",
	       (unsigned long long)seed, (unsigned long long)seed, seconds);
	fflush(stdout);
	if (max_len < 64)
		max_len = 64;
	uint8_t *cur = calloc(1, max_len), *in = malloc(max_len);
	if (!cur || !in)
		return 1;
	size_t cur_len = 0;
	double t0 = now_s(), end = t0 + seconds;
	long long n = 0;
	for (; runs < 0 || n < runs; n++) {
		if ((n & 63) == 0 && now_s() >= end && runs < 0)
			break;
		size_t len;
		switch (rnd() % 4) {
		case 0:   /* fresh random input of a random size */
			len = (size_t)(rnd() % max_len);
			if (rnd() & 1)
				len = (size_t)(rnd() % 4096);
			for (size_t i = 0; i < len; i++)
				in[i] = (uint8_t)rnd();
			break;
		case 1:   /* fresh, mostly zero with a few interesting words */
			len = (size_t)(rnd() % max_len);
			memset(in, 0, len);
			for (int k = 0; k < 16 && len >= 8; k++) {
				uint64_t v = interesting[rnd() % NINT];
				memcpy(in + ((rnd() % (len - 7)) & ~(size_t)3), &v, 4);
			}
			break;
		default:  /* mutate the current input */
			len = cur_len;
			memcpy(in, cur, len);
			mutate(in, &len, max_len);
			break;
		}
		LLVMFuzzerTestOneInput(in, len);
		/* keep some inputs as the base of later mutations */
		if (rnd() % 8 == 0) {
			memcpy(cur, in, len);
			cur_len = len;
		}
	}
	printf("fuzz driver: %lld runs in %.1f s, no crash\n", n, now_s() - t0);
	free(cur);
	free(in);
	return 0;
}
