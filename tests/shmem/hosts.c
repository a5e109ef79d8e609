/* shmem-test: 1.5
 * What an OpenSHMEM program across hosts needs, each result checked
 * (tests/shmem_ofi.sh runs it on 2 hosts x 2 PEs under mpirun; runner.sh
 * under oshrun): put/get of 8 B and 1 MiB with every byte checked, to
 * and from every PE; fetch-add from every PE on one word; barrier;
 * broadcast; a reduction; shmem_wait_until on a flag another PE sets.
 * Each PE prints its host ("PE i of n on HOST") so the launch is seen.
 * With SHMEM_TEST_DIE=PE, that PE kills itself (SIGKILL) in the middle
 * of the run, while the others wait for it: the job must end with an
 * error, never hang. */
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include "check.h"

#define BIG (1 << 20)

static long flag;          /* static data: set by the left neighbour */
static long bcast_src[64], bcast_dst[64];
static int red_src[8], red_dst[8], mx, mxr;

static unsigned char pat(int pe, int i) { return (unsigned char)(i * 13 + pe * 7 + 1); }

int main(void)
{
	shmem_init();
	int me = shmem_my_pe(), n = shmem_n_pes();
	int right = (me + 1) % n, left = (me + n - 1) % n;
	char host[64] = "?";
	gethostname(host, sizeof host);
	printf("PE %d of %d on %s\n", me, n, host);
	fflush(stdout);

	unsigned char *big = shmem_malloc(BIG);
	long *word = shmem_malloc(8);
	long *cnt = shmem_calloc(1, sizeof(long));
	unsigned char *buf = malloc(BIG);
	CHECK(big && word && cnt && buf, "malloc");
	for (int i = 0; i < BIG; i++)
		big[i] = pat(me, i);
	*word = me * 100 + 1;
	shmem_barrier_all();

	const char *die = getenv("SHMEM_TEST_DIE");
	if (die && atoi(die) == me) {
		printf("PE %d kills itself\n", me);
		fflush(stdout);
		raise(SIGKILL);
	}

	/* gets of 8 B and 1 MiB from every PE, every byte */
	for (int pe = 0; pe < n; pe++) {
		CHECK(shmem_long_g(word, pe) == pe * 100 + 1, "g from PE %d", pe);
		memset(buf, 0, BIG);
		shmem_getmem(buf, big, BIG, pe);
		int bad = 0;
		for (int i = 0; i < BIG; i++)
			bad += buf[i] != pat(pe, i);
		CHECK(!bad, "getmem 1 MiB from PE %d: %d bad bytes", pe, bad);
	}
	shmem_barrier_all();

	/* puts of 8 B and 1 MiB to the right neighbour, every byte */
	for (int i = 0; i < BIG; i++)
		buf[i] = pat(me + 50, i);
	shmem_putmem(big, buf, BIG, right);
	shmem_long_p(word, me * 100 + 2, right);
	shmem_barrier_all();
	{
		int bad = 0;
		for (int i = 0; i < BIG; i++)
			bad += big[i] != pat(left + 50, i);
		CHECK(!bad, "putmem 1 MiB from PE %d: %d bad bytes", left, bad);
		CHECK(*word == left * 100 + 2, "p from PE %d: %ld", left, *word);
	}

	/* fetch-add from every PE on PE 0's word and on the last PE's */
	const int iters = 100;
	for (int i = 0; i < iters; i++) {
		long v = shmem_long_atomic_fetch_add(cnt, 1, 0);
		CHECK(v >= 0 && v < (long)iters * n + (n == 1 ? 3L * iters : 0),
		      "fetch_add returned %ld", v);
		shmem_long_atomic_add(cnt, 3, n - 1);
	}
	shmem_barrier_all();
	if (me == 0)
		CHECK(*cnt == (long)iters * n + (n == 1 ? 3L * iters * n : 0),
		      "fetch_add total %ld, want %ld", *cnt, (long)iters * n);
	if (me == n - 1 && n > 1)
		CHECK(*cnt == 3L * iters * n, "add total %ld, want %ld", *cnt,
		      3L * iters * n);

	/* wait_until: each PE sets its right neighbour's flag after a barrier;
	 * the neighbour waits for exactly that value */
	shmem_barrier_all();
	shmem_long_atomic_set(&flag, me + 1000, right);
	shmem_long_wait_until(&flag, SHMEM_CMP_EQ, left + 1000);
	CHECK(flag == left + 1000, "wait_until: flag %ld", flag);

	/* broadcast from the last PE, reduction over all */
	for (int i = 0; i < 64; i++)
		bcast_src[i] = (n - 1) * 1000 + i;
	for (int i = 0; i < 8; i++)
		red_src[i] = me + i;
	shmem_barrier_all();
	shmem_long_broadcast(SHMEM_TEAM_WORLD, bcast_dst, bcast_src, 64, n - 1);
	for (int i = 0; i < 64; i++)
		CHECK(bcast_dst[i] == (n - 1) * 1000 + i, "broadcast [%d]=%ld", i,
		      bcast_dst[i]);
	shmem_int_sum_reduce(SHMEM_TEAM_WORLD, red_dst, red_src, 8);
	for (int i = 0; i < 8; i++)
		CHECK(red_dst[i] == n * (n - 1) / 2 + n * i, "sum [%d]=%d", i,
		      red_dst[i]);
	mx = me;
	mxr = -1;
	shmem_int_max_reduce(SHMEM_TEAM_WORLD, &mxr, &mx, 1);
	CHECK(mxr == n - 1, "max %d", mxr);

	/* barriers in a row keep PEs in step */
	for (int i = 0; i < 50; i++) {
		shmem_long_atomic_inc(cnt, right);
		shmem_barrier_all();
	}
	free(buf);
	shmem_free(big);
	shmem_free(word);
	shmem_free(cnt);
	return test_done("hosts");
}
