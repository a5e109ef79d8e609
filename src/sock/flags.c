/* SPDX-License-Identifier: MIT */
/*
 * flags.c — the flags every holder of a fabric socket shares, kept in its
 * connection's record (sk_conn.nb_flags): its O_NONBLOCK, known without a
 * system call on the data path, and which sides are confined by a seccomp
 * filter.  Separate because the bits have one owner here while fcntl and
 * ioctl (entry.c), the data path, readiness and the privilege code
 * (priv.c) ask or change them.
 */
#include <errno.h>
#include <fcntl.h>

#include "sock/sock.h"
#include "util/util.h"

/*
 * O_NONBLOCK of a socket, without a system call on the data path: it is
 * kept in the connection's shared record (nb_flags: bits 0-1 for the
 * connector, 2-3 for the acceptor; KNOWN, then ON).  The flag belongs to
 * the open file description, and every process holding a socket shares
 * its description and its record (fork, dup, SCM_RIGHTS, exec), so one
 * copy serves them all; fcntl(F_SETFL) and ioctl(FIONBIO) through the
 * preload overwrite it (sk_nonblock_set).  A lookup records only an
 * unknown flag, so it cannot undo a concurrent F_SETFL.
 */
#define NB_KNOWN 1u
#define NB_ON    2u

static unsigned nb_shift(const struct sk *s)
{
	return s->role == 'A' ? 2 : 0;
}

int sk_nonblock(int fd)
{
	struct sk *s = sk_get(fd);
	struct sk_conn *c = s ? sk_conn(s) : NULL;
	uint32_t f = c ? __atomic_load_n(&c->nb_flags, __ATOMIC_ACQUIRE) : 0;
	if (c && (f >> nb_shift(s)) & NB_KNOWN)
		return !!((f >> nb_shift(s)) & NB_ON);
	int fl = sk_real.fcntl(fd, F_GETFL);
	int nb = fl >= 0 && (fl & O_NONBLOCK);
	if (c && fl >= 0) {
		uint32_t mine = (NB_KNOWN | (nb ? NB_ON : 0)) << nb_shift(s);
		while (!((f >> nb_shift(s)) & NB_KNOWN) &&
		       !__atomic_compare_exchange_n(&c->nb_flags, &f, f | mine, 0,
		                                    __ATOMIC_ACQ_REL,
		                                    __ATOMIC_ACQUIRE))
			;
	}
	return nb;
}

/* After a successful change of O_NONBLOCK on @fd. */
void sk_nonblock_set(int fd, int on)
{
	struct sk *s = sk_get(fd);
	struct sk_conn *c = s ? sk_conn(s) : NULL;
	if (!c)
		return;
	unsigned sh = nb_shift(s);
	uint32_t f = __atomic_load_n(&c->nb_flags, __ATOMIC_ACQUIRE), nf;
	do
		nf = (f & ~(3u << sh)) | ((NB_KNOWN | (on ? NB_ON : 0)) << sh);
	while (!__atomic_compare_exchange_n(&c->nb_flags, &f, nf, 0,
	                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
}

/*
 * A side confined by a seccomp filter or RLIMIT_NOFILE 1 (util.h,
 * ntbx_sandboxed; sk_confine_all) can no longer open the wake FIFOs of its
 * peer's sleepers.  Just before, it opens and keeps those its peer has
 * registered for the connection (ntbx_qp_keep_peer_wakes), then sets
 * nb_flags bit 4 (connector) or 5 (acceptor).  A peer that sleeps in poll
 * or epoll on a FIFO the confined side does not hold (one made later, or
 * one it could not open: ntbx_db_wake_kept) sleeps in slices of 1 ms
 * (sk_peer_confined, wake.c sk_sleep_sliced).  The keep scans the
 * sleepers' registrations before the bit is set, and a sleeper registers
 * before it reads the bit (both SEQ_CST): a sleeper the scan missed sees
 * the bit and sleeps in slices.
 */
#define NB_CONFINED(role) (1u << ((role) == 'A' ? 5 : 4))

void sk_confine_all(void)
{
	int kept = 0, missed = 0;
	for (int fd = 0; fd < sk_fd_hi; fd++) {
		struct sk *s = sk_get(fd);
		struct sk_conn *c = s ? sk_conn(s) : NULL;
		if (!c)
			continue;
		struct ntbx_qp *qp = s->mode == M_FAB || s->mode == M_PEND
		                     ? sk_qp(s) : NULL;
		int r = qp ? ntbx_qp_keep_peer_wakes(qp) : -ENOTCONN;
		if (r < 0 && qp)
			missed++;
		else if (r > 0)
			kept += r;
		__atomic_fetch_or(&c->nb_flags, NB_CONFINED(s->role),
		                  __ATOMIC_SEQ_CST);
	}
	ntbx_log(NTBX_LOG_DEBUG, "confined: %d wake FIFOs of peers kept open, "
	         "%d connections without", kept, missed);
}

int sk_peer_confined(struct sk *s)
{
	struct sk_conn *c = sk_conn(s);
	return c && (__atomic_load_n(&c->nb_flags, __ATOMIC_SEQ_CST) &
	             NB_CONFINED(s->role == 'A' ? 'C' : 'A'));
}
