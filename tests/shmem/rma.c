/* put/get/p/g/iput/iget/nbi on heap and static data, several types. */
#include <string.h>
#include "check.h"

static long sdata[64];           /* static (bss) target */
static int sinit[16] = { 1, 2, 3 };  /* static (data) target */

int main(void)
{
	shmem_init();
	int me = shmem_my_pe(), n = shmem_n_pes();
	int right = (me + 1) % n, left = (me + n - 1) % n;

	long *hl = shmem_malloc(64 * sizeof(long));
	double *hd = shmem_malloc(64 * sizeof(double));
	char *hb = shmem_malloc(1 << 20);
	CHECK(hl && hd && hb, "malloc");
	long src[64];
	double dsrc[64];
	for (int i = 0; i < 64; i++) {
		src[i] = me * 1000 + i;
		dsrc[i] = me + i * 0.5;
		hl[i] = -1;
		sdata[i] = -1;
	}
	shmem_barrier_all();
	shmem_long_put(hl, src, 64, right);
	shmem_double_put(hd, dsrc, 64, right);
	shmem_long_put(sdata, src, 64, right);
	shmem_int_p(&sinit[5], me + 7, right);
	shmem_barrier_all();
	for (int i = 0; i < 64; i++) {
		CHECK(hl[i] == left * 1000 + i, "heap put [%d]=%ld", i, hl[i]);
		CHECK(hd[i] == left + i * 0.5, "double put [%d]", i);
		CHECK(sdata[i] == left * 1000 + i, "static put [%d]=%ld", i, sdata[i]);
	}
	CHECK(sinit[5] == left + 7 && sinit[1] == 2, "static p: %d", sinit[5]);

	/* gets from every PE */
	for (int pe = 0; pe < n; pe++) {
		long g[64];
		shmem_long_get(g, hl, 64, pe);
		int pl = (pe + n - 1) % n;
		CHECK(g[0] == pl * 1000 && g[63] == pl * 1000 + 63, "get from %d", pe);
		CHECK(shmem_long_g(&sdata[3], pe) == pl * 1000 + 3, "g static from %d", pe);
		CHECK(shmem_int_g(&sinit[2], pe) == 3, "g initialised static");
	}

	/* sized and mem variants, large transfers */
	for (int i = 0; i < (1 << 20); i++)
		hb[i] = (char)(i * 7 + me);
	shmem_barrier_all();
	char *big = malloc(1 << 20);
	shmem_getmem(big, hb, 1 << 20, right);
	int bad = 0;
	for (int i = 0; i < (1 << 20); i++)
		bad += big[i] != (char)(i * 7 + right);
	CHECK(!bad, "getmem 1 MiB: %d bad bytes", bad);
	shmem_barrier_all();
	for (int i = 0; i < (1 << 20); i++)
		big[i] = (char)(i * 3 + me);
	shmem_putmem(hb, big, 1 << 20, right);
	shmem_barrier_all();
	bad = 0;
	for (int i = 0; i < (1 << 20); i++)
		bad += hb[i] != (char)(i * 3 + left);
	CHECK(!bad, "putmem 1 MiB: %d bad bytes", bad);
	free(big);

	uint32_t u32[8] = { 1, 2, 3, 4, 5, 6, 7, (uint32_t)me };
	uint32_t *h32 = shmem_malloc(8 * sizeof(uint32_t));
	shmem_put32(h32, u32, 8, right);
	shmem_barrier_all();
	CHECK(h32[7] == (uint32_t)left && h32[0] == 1, "put32");
	uint64_t g64[2];
	shmem_get64(g64, hl, 2, right);
	CHECK((long)g64[1] == me * 1000 + 1, "get64");
	shmem_barrier_all();

	/* strided */
	int *is = shmem_calloc(32, sizeof(int));
	shmem_barrier_all(); /* some implementations zero after their barrier */
	int ssrc[16];
	for (int i = 0; i < 16; i++)
		ssrc[i] = me * 100 + i;
	shmem_int_iput(is, ssrc, 2, 1, 16, right);  /* dest stride 2 */
	shmem_barrier_all();
	for (int i = 0; i < 16; i++) {
		CHECK(is[2 * i] == left * 100 + i, "iput [%d]", i);
		CHECK(is[2 * i + 1] == 0, "iput gap [%d]", i);
	}
	int ig[8];
	shmem_int_iget(ig, is, 1, 4, 8, right);   /* source stride 4 */
	for (int i = 0; i < 8; i++)
		CHECK(ig[i] == me * 100 + 2 * i, "iget [%d]=%d", i, ig[i]);
	shmem_barrier_all();

	/* non-blocking */
	long nb[64];
	for (int i = 0; i < 64; i++)
		nb[i] = me + i;
	shmem_long_put_nbi(hl, nb, 64, right);
	shmem_quiet();
	shmem_barrier_all();
	CHECK(hl[10] == left + 10, "put_nbi");
	long gn[64];
	shmem_long_get_nbi(gn, hl, 64, left);
	shmem_quiet();
	CHECK(gn[5] == (left + n - 1) % n + 5, "get_nbi");
	shmem_barrier_all();

	/* more types */
	short sh = (short)(me - 5), *hs = shmem_malloc(sizeof(short));
	float fl = me * 1.5f, *hf = shmem_malloc(sizeof(float));
	unsigned long long ull = 1ull << 40 | (unsigned)me;
	unsigned long long *hu = shmem_malloc(sizeof *hu);
	shmem_short_p(hs, sh, right);
	shmem_float_p(hf, fl, right);
	shmem_ulonglong_p(hu, ull, right);
	shmem_barrier_all();
	CHECK(*hs == (short)(left - 5) && *hf == left * 1.5f &&
	      *hu == (1ull << 40 | (unsigned)left), "typed p");
	shmem_barrier_all();
	shmem_free(hs);
	shmem_free(hf);
	shmem_free(hu);
	shmem_free(is);
	shmem_free(h32);
	shmem_free(hb);
	shmem_free(hd);
	shmem_free(hl);
	return test_done("rma");
}
