/* shmem-test: 1.5
 * The C11 generic interfaces cover every type of their typed routines
 * (spec 1.5 Table 7, bitwise AMOs: unsigned int, unsigned long, unsigned
 * long long, int32_t, int64_t, uint32_t, uint64_t; Table 10, and/or/xor
 * reductions: ... int8_t, int16_t, int32_t, int64_t ...). */
#include <stdint.h>
#include "check.h"

#define BITS(T, v0)                                                          \
	do {                                                                 \
		T *w = shmem_calloc(4, sizeof(T));                           \
		shmem_barrier_all();                                         \
		shmem_atomic_or(&w[0], (T)((T)1 << me), 0);                  \
		shmem_atomic_xor(SHMEM_CTX_DEFAULT, &w[1], (T)((T)1 << me), 0); \
		shmem_barrier_all();                                         \
		shmem_atomic_and(&w[0], (T)~(T)1, 0);                        \
		T old = shmem_atomic_fetch_or(&w[2], (T)1, 0);               \
		CHECK(old == 0 || old == 1, #T " fetch_or %lld", (long long)old); \
		shmem_barrier_all();                                         \
		if (me == 0) {                                               \
			T all = (T)(((T)1 << n) - 1);                        \
			CHECK(w[0] == (T)(all & (T)~(T)1), #T " or/and");    \
			CHECK(w[1] == all, #T " xor");                       \
			CHECK(w[2] == 1, #T " fetch_or");                    \
		}                                                            \
		(void)(v0);                                                  \
		shmem_barrier_all();                                         \
		shmem_free(w);                                               \
	} while (0)

#define RED(T)                                                               \
	do {                                                                 \
		T *s = shmem_malloc(3 * sizeof(T)), *d = shmem_malloc(3 * sizeof(T)); \
		s[0] = (T)(1 << (me % 7));                                   \
		s[1] = (T)0x7f;                                              \
		s[2] = (T)(1 << (me % 7));                                   \
		shmem_barrier_all();                                         \
		T want_or = 0, want_xor = 0;                                 \
		for (int p = 0; p < n; p++) {                                \
			want_or |= (T)(1 << (p % 7));                        \
			want_xor ^= (T)(1 << (p % 7));                       \
		}                                                            \
		CHECK(shmem_or_reduce(SHMEM_TEAM_WORLD, d, s, 1) == 0 &&     \
		      d[0] == want_or, #T " or_reduce");                     \
		CHECK(shmem_and_reduce(SHMEM_TEAM_WORLD, d + 1, s + 1, 1) == 0 && \
		      d[1] == (T)0x7f, #T " and_reduce");                    \
		CHECK(shmem_xor_reduce(SHMEM_TEAM_WORLD, d + 2, s + 2, 1) == 0 && \
		      d[2] == want_xor, #T " xor_reduce");                   \
		shmem_free(d);                                               \
		shmem_free(s);                                               \
	} while (0)

int main(void)
{
	shmem_init();
	int me = shmem_my_pe(), n = shmem_n_pes();
	if (n > 30)
		return test_done("generic_types");
	BITS(int32_t, 0);
	BITS(int64_t, 0);
	BITS(uint32_t, 0);
	BITS(uint64_t, 0);
	BITS(unsigned int, 0);
	BITS(unsigned long, 0);
	BITS(unsigned long long, 0);
	RED(int8_t);
	RED(int16_t);
	RED(int32_t);
	RED(int64_t);
	RED(uint8_t);
	RED(size_t);
	RED(unsigned char);
	return test_done("generic_types");
}
