/* Contexts: ctx_create, ctx RMA/AMO, ctx_quiet/fence, ctx_destroy. */
#include "check.h"

int main(void)
{
	shmem_init();
	int me = shmem_my_pe(), n = shmem_n_pes();
	int right = (me + 1) % n, left = (me + n - 1) % n;
	long *buf = shmem_calloc(16, sizeof(long));
	long *c = shmem_calloc(1, sizeof(long));
	shmem_barrier_all();
	shmem_ctx_t ctx;
	int r = shmem_ctx_create(SHMEM_CTX_PRIVATE, &ctx);
	CHECK(r == 0, "ctx_create %d", r);
	long v[16];
	for (int i = 0; i < 16; i++)
		v[i] = me * 100 + i;
	shmem_ctx_long_put(ctx, buf, v, 16, right);
	shmem_ctx_long_atomic_add(ctx, c, 1, 0);
	shmem_ctx_quiet(ctx);
	shmem_barrier_all();
	CHECK(buf[15] == left * 100 + 15, "ctx put");
	long g = shmem_ctx_long_g(ctx, &buf[2], right);
	CHECK(g == me * 100 + 2, "ctx g");
	shmem_ctx_long_p(ctx, &buf[0], -1, right);
	shmem_ctx_fence(ctx);
	shmem_ctx_quiet(ctx);
	long f = shmem_ctx_long_atomic_fetch_add(ctx, c, 0, 0);
	CHECK(f >= n, "ctx fetch %ld", f);
	shmem_ctx_putmem(ctx, &buf[1], &v[3], sizeof(long), right);
	shmem_ctx_quiet(ctx);
	shmem_ctx_destroy(ctx);
	shmem_barrier_all();
	CHECK(buf[0] == -1 && buf[1] == left * 100 + 3, "ctx p/putmem");
	if (me == 0)
		CHECK(*c == n, "ctx amo %ld", *c);
	/* the default context works as a handle too */
	shmem_ctx_long_p(SHMEM_CTX_DEFAULT, &buf[4], 77, right);
	shmem_ctx_quiet(SHMEM_CTX_DEFAULT);
	shmem_barrier_all();
	CHECK(buf[4] == 77, "default ctx");
	return test_done("ctx");
}
