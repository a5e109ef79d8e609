/* shmem-test: 1.6
 * shmem-test-pes-switch: 3 5
 *
 * The sum scans (1.6): dest on team PE k is the sum of the sources of
 * PEs 0..k (inscan) or 0..k-1 (exscan; zero on PE 0), for counts across
 * the sizes where the library cuts its work into slices and chunks, for
 * teams with stride 1, 2 and -1 and a team of n-1 members, in place,
 * back to back without barriers, and, for floating point, exactly the
 * sum taken in PE order (((x0 + x1) + x2) + ...); small scans and small
 * reductions interleaved back to back (a ring's small ones share inboxes
 * and acknowledgements), in place now and then.  Also every reduction
 * operator at a count large enough for a ring's chain and a switch's
 * reduce-scatter. */
#include <string.h>
#include "check.h"

static const size_t counts[] = { 1, 2, 7, 16, 17, 63, 64, 65, 1023, 1025,
                                 2049, 8193, 20000, 70001 };
#define NC (sizeof counts / sizeof counts[0])
#define MAXN 70001

static long lv(int m, size_t i) { return (long)(m * 7 + (int)(i % 13) + 1); }
static double dv(int m, size_t i) { return 0.1 * (m + 1) + 1e-3 * (double)(i % 97); }

static void check_team(shmem_team_t t, const char *tname, long *ls, long *ld,
                       double *ds, double *dd, int *is, int *id)
{
	if (t == SHMEM_TEAM_INVALID)
		return;
	int m = shmem_team_my_pe(t), tn = shmem_team_n_pes(t);
	for (size_t c = 0; c < NC; c++) {
		size_t n = counts[c];
		for (int ex = 0; ex < 2; ex++) {
			int upto = ex ? m : m + 1;   /* PEs 0..upto-1 */
			for (size_t i = 0; i < n; i++) {
				ls[i] = lv(m, i);
				ds[i] = dv(m, i);
				is[i] = (int)((m * 31 + (int)i) % 101) - 50;
			}
			int rl = ex ? shmem_long_sum_exscan(t, ld, ls, n)
			            : shmem_long_sum_inscan(t, ld, ls, n);
			int rd = ex ? shmem_double_sum_exscan(t, dd, ds, n)
			            : shmem_double_sum_inscan(t, dd, ds, n);
			int ri = ex ? shmem_int_sum_exscan(t, id, is, n)
			            : shmem_int_sum_inscan(t, id, is, n);
			CHECK(!rl && !rd && !ri, "%s: scan returned %d %d %d", tname, rl, rd, ri);
			for (size_t i = 0; i < n; i++) {
				long e = 0;
				int ei = 0;
				double f = 0;
				for (int k = 0; k < upto; k++) {
					e += lv(k, i);
					ei += (int)((k * 31 + (int)i) % 101) - 50;
					f = k ? f + dv(k, i) : dv(k, i);
				}
				if (ld[i] != e || id[i] != ei || memcmp(&dd[i], &f, sizeof f)) {
					CHECK(0, "%s %s n=%zu [%zu]: long %ld want %ld, int %d "
					      "want %d, double %.17g want %.17g", tname,
					      ex ? "exscan" : "inscan", n, i, ld[i], e, id[i],
					      ei, dd[i], f);
					break;
				}
			}
			/* in place */
			for (size_t i = 0; i < n; i++)
				ld[i] = lv(m, i) * 3;
			ex ? shmem_long_sum_exscan(t, ld, ld, n)
			   : shmem_long_sum_inscan(t, ld, ld, n);
			for (size_t i = 0; i < n; i++) {
				long e = 0;
				for (int k = 0; k < upto; k++)
					e += lv(k, i) * 3;
				if (ld[i] != e) {
					CHECK(0, "%s %s in place n=%zu [%zu]=%ld want %ld",
					      tname, ex ? "exscan" : "inscan", n, i, ld[i], e);
					break;
				}
			}
			shmem_team_sync(t);
		}
	}
	/* back to back, no synchronisation between, values differ each round */
	for (int r = 0; r < 30; r++) {
		size_t n = counts[(size_t)r % NC] % 5000 + 1;
		int ex = r & 1, upto = ex ? m : m + 1;
		for (size_t i = 0; i < n; i++)
			ls[i] = lv(m, i) * (r + 1);
		ex ? shmem_long_sum_exscan(t, ld, ls, n)
		   : shmem_long_sum_inscan(t, ld, ls, n);
		for (size_t i = 0; i < n; i++) {
			long e = 0;
			for (int k = 0; k < upto; k++)
				e += lv(k, i) * (r + 1);
			if (ld[i] != e) {
				CHECK(0, "%s back to back r=%d n=%zu [%zu]=%ld want %ld",
				      tname, r, n, i, ld[i], e);
				break;
			}
		}
	}
	shmem_team_sync(t);
	/* small scans and small sum reductions interleaved, back to back:
	 * on a ring both go through the same inboxes and acknowledgements
	 * (ring_reduce_ag); in place every ninth call */
	for (int r = 0; r < 600; r++) {
		size_t n = (size_t)(r * 7) % 64 + 1;
		int kind = r % 3, ex = (r / 3) & 1, upto = kind == 2 ? tn :
		           ex ? m : m + 1;
		long *dst = r % 9 == 4 ? ls : ld;
		for (size_t i = 0; i < n; i++)
			ls[i] = lv(m, i) + r;
		if (kind == 2)
			shmem_long_sum_reduce(t, dst, ls, n);
		else if (ex)
			shmem_long_sum_exscan(t, dst, ls, n);
		else
			shmem_long_sum_inscan(t, dst, ls, n);
		for (size_t i = 0; i < n; i++) {
			long e = 0;
			for (int k = 0; k < upto; k++)
				e += lv(k, i) + r;
			if (dst[i] != e) {
				CHECK(0, "%s interleaved r=%d kind %d ex %d n=%zu "
				      "[%zu]=%ld want %ld", tname, r, kind, ex, n, i,
				      dst[i], e);
				break;
			}
		}
	}
	shmem_team_sync(t);
	/* every operator, 20000 elements */
	size_t n = 20000;
	for (size_t i = 0; i < n; i++) {
		is[i] = (int)((m * 37 + (int)i) % 89) - 44;
		ls[i] = (long)(((m + 1) * 11 + (int)i) % 255);
		ds[i] = (double)((m + (int)i) % 3 + 1);
	}
	shmem_int_max_reduce(t, id, is, n);
	for (size_t i = 0; i < n; i++) {
		int e = -1000;
		for (int k = 0; k < tn; k++) {
			int v = (int)((k * 37 + (int)i) % 89) - 44;
			e = v > e ? v : e;
		}
		if (id[i] != e) { CHECK(0, "%s int max [%zu]", tname, i); break; }
	}
	shmem_int_min_reduce(t, id, is, n);
	for (size_t i = 0; i < n; i++) {
		int e = 1000;
		for (int k = 0; k < tn; k++) {
			int v = (int)((k * 37 + (int)i) % 89) - 44;
			e = v < e ? v : e;
		}
		if (id[i] != e) { CHECK(0, "%s int min [%zu]", tname, i); break; }
	}
	for (int op = 0; op < 3; op++) {
		if (op == 0)
			shmem_ulong_and_reduce(t, (unsigned long *)ld, (unsigned long *)ls, n);
		else if (op == 1)
			shmem_ulong_or_reduce(t, (unsigned long *)ld, (unsigned long *)ls, n);
		else
			shmem_ulong_xor_reduce(t, (unsigned long *)ld, (unsigned long *)ls, n);
		for (size_t i = 0; i < n; i++) {
			long e = op == 0 ? -1 : 0;
			for (int k = 0; k < tn; k++) {
				long v = (long)(((k + 1) * 11 + (int)i) % 255);
				e = op == 0 ? e & v : op == 1 ? e | v : e ^ v;
			}
			if (ld[i] != e) { CHECK(0, "%s long bit op %d [%zu]", tname, op, i); break; }
		}
	}
	shmem_double_prod_reduce(t, dd, ds, n);
	for (size_t i = 0; i < n; i++) {
		double e = 1;
		for (int k = 0; k < tn; k++)
			e *= (double)((k + (int)i) % 3 + 1);
		if (dd[i] != e) { CHECK(0, "%s double prod [%zu]", tname, i); break; }
	}
	shmem_team_sync(t);
}

int main(void)
{
	shmem_init();
	int n = shmem_n_pes();
	long *ls = shmem_malloc(MAXN * sizeof(long));
	long *ld = shmem_malloc(MAXN * sizeof(long));
	double *ds = shmem_malloc(MAXN * sizeof(double));
	double *dd = shmem_malloc(MAXN * sizeof(double));
	int *is = shmem_malloc(MAXN * sizeof(int));
	int *id = shmem_malloc(MAXN * sizeof(int));
	check_team(SHMEM_TEAM_WORLD, "world", ls, ld, ds, dd, is, id);
	shmem_team_t even, rev, most;
	shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, (n + 1) / 2, NULL, 0, &even);
	check_team(even, "stride 2", ls, ld, ds, dd, is, id);
	shmem_team_split_strided(SHMEM_TEAM_WORLD, n - 1, -1, n, NULL, 0, &rev);
	check_team(rev, "stride -1", ls, ld, ds, dd, is, id);
	if (n > 2) {
		shmem_team_split_strided(SHMEM_TEAM_WORLD, 1, 1, n - 1, NULL, 0, &most);
		check_team(most, "PEs 1..n-1", ls, ld, ds, dd, is, id);
		shmem_team_destroy(most);
	}
	shmem_team_destroy(even);
	shmem_team_destroy(rev);
	return test_done("scan");
}
