/* SPDX-License-Identifier: MIT */
/*
 * sockopt.c — TCP_CORK on a connection whose data goes on the fabric.
 *
 * Every other option goes to the shadow (the connection's kernel socket,
 * which the descriptor is): the kernel keeps it, answers getsockopt, and
 * applies it if the connection falls back to TCP.  TCP_CORK is different
 * only in cost: servers that send files with it (nginx's `tcp_nopush on`,
 * Debian's default) set it and clear it around every response, two
 * system calls per request that change nothing while the bytes go on the
 * fabric, which corks nothing.  Measured with nginx's default
 * configuration under `ntbx run`, keep-alive 1 KiB: 136-142k requests/s,
 * 155-159k with `tcp_nopush off`.
 *
 * So while the data goes on the fabric (M_FAB, not writing to the shadow,
 * no fail-over), a set is kept here (s->cork) once the shadow's own value
 * is known (s->kcork, learnt from a set that went to the kernel: the
 * first one of a connection goes there), and the shadow is brought to it
 * (sk_cork_flush) before anything can see the difference: a getsockopt of
 * TCP_CORK, a write to the shadow (stream.c's shadow_send, the fail-over),
 * and fork (inherit.c: the child, or a program it execs, shares the
 * kernel socket).
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include "sock/sock.h"

/* The data goes on the fabric only, so the shadow's cork matters to no
 * byte.  Write lock held. */
static int cork_is_ours(struct sk *s)
{
	return __atomic_load_n(&s->mode, __ATOMIC_ACQUIRE) == M_FAB &&
	       !s->wr_shadow && !__atomic_load_n(&s->fo, __ATOMIC_ACQUIRE) &&
	       __atomic_load_n(&s->kcork, __ATOMIC_RELAXED) >= 0;
}

void sk_cork_flush(struct sk *s, int fd)
{
	int want = __atomic_load_n(&s->cork, __ATOMIC_RELAXED);
	int k = __atomic_load_n(&s->kcork, __ATOMIC_RELAXED);
	if (k < 0 || k == want)
		return;
	sk_resolve();
	int e = errno;
	if (sk_real.setsockopt(fd, IPPROTO_TCP, TCP_CORK, &want,
	                       sizeof want) == 0)
		__atomic_store_n(&s->kcork, want, __ATOMIC_RELAXED);
	errno = e;
}

EXPORT int setsockopt(int fd, int level, int name, const void *val,
                      socklen_t len)
{
	sk_resolve();
	struct sk *s;
	if (level != IPPROTO_TCP || name != TCP_CORK || !val ||
	    len < (socklen_t)sizeof(int) || !(s = sk_get(fd)))
		return sk_real.setsockopt(fd, level, name, val, len);
	int on = *(const int *)val != 0;   /* as the kernel reads it */
	pthread_mutex_lock(&s->wlock);
	int r = 0;
	if (cork_is_ours(s)) {
		__atomic_store_n(&s->cork, on, __ATOMIC_RELAXED);
	} else {
		r = sk_real.setsockopt(fd, level, name, &on, sizeof on);
		if (r == 0) {
			__atomic_store_n(&s->cork, on, __ATOMIC_RELAXED);
			__atomic_store_n(&s->kcork, on, __ATOMIC_RELAXED);
		}
	}
	pthread_mutex_unlock(&s->wlock);
	return r;
}

EXPORT int getsockopt(int fd, int level, int name, void *__restrict val,
                      socklen_t *__restrict len)
{
	sk_resolve();
	struct sk *s;
	if (level == IPPROTO_TCP && name == TCP_CORK && (s = sk_get(fd))) {
		pthread_mutex_lock(&s->wlock);
		sk_cork_flush(s, fd);
		pthread_mutex_unlock(&s->wlock);
	}
	return sk_real.getsockopt(fd, level, name, val, len);
}
