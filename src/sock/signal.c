/* SPDX-License-Identifier: MIT */
/*
 * signal.c — SA_RESTART on fabric sockets, as the kernel has it.
 *
 * A blocking recv or send on a kernel socket that a signal interrupts is
 * restarted when the handler was installed with SA_RESTART (glibc's
 * signal() does so), and fails with EINTR otherwise, or when the socket
 * has a SO_RCVTIMEO/SO_SNDTIMEO timeout (socket(7)).  A fabric socket
 * sleeps on a futex, which always comes back with EINTR, and does not know
 * which signal ran.  So the preload remembers, per signal, whether its
 * handler interrupts (installed through sigaction without SA_RESTART), and
 * a sleep interrupted while no such handler exists is resumed
 * (sk_wait in stream.c).  Fault signals (SIGSEGV, ...) are left out of that
 * record.  Handlers installed behind libc's back (a raw
 * rt_sigaction, glibc's own sysv_signal or siginterrupt) are not seen: the
 * mask then errs towards EINTR only if such a handler was seen before.
 */
#include <signal.h>

#include "sock/sock.h"

/* bit s-1: signal s has a handler that interrupts system calls */
static uint64_t intr_mask;

int sk_sig_interrupts(void)
{
	return __atomic_load_n(&intr_mask, __ATOMIC_RELAXED) != 0;
}

/* Signals the kernel raises for a fault of the thread that runs (and
 * that nobody sends to interrupt a call): their handlers are crash
 * reporters, language runtimes (a JVM's or Node's SIGSEGV), sanitizers,
 * installed without SA_RESTART, and never the signal that interrupts a
 * blocked recv.  Counting them would make every interrupted sleep of such
 * a program fail with EINTR where the kernel restarts the call. */
static int is_fault_signal(int sig)
{
	return sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE ||
	       sig == SIGILL || sig == SIGTRAP || sig == SIGSYS;
}

static void note(int sig, int handled, int flags)
{
	if (sig < 1 || sig > 64 || is_fault_signal(sig))
		return;
	uint64_t bit = 1ull << (sig - 1);
	if (handled && !(flags & SA_RESTART))
		__atomic_fetch_or(&intr_mask, bit, __ATOMIC_RELAXED);
	else
		__atomic_fetch_and(&intr_mask, ~bit, __ATOMIC_RELAXED);
}

EXPORT int sigaction(int sig, const struct sigaction *act,
                     struct sigaction *old)
{
	sk_resolve();
	int r = sk_real.sigaction(sig, act, old);
	if (r == 0 && act)
		note(sig, (act->sa_flags & SA_SIGINFO) ||
		          (act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN),
		     act->sa_flags);
	return r;
}

EXPORT void (*signal(int sig, void (*h)(int)))(int)
{
	sk_resolve();
	void (*r)(int) = sk_real.signal(sig, h);
	if (r != SIG_ERR)   /* glibc's signal(): BSD semantics, SA_RESTART */
		note(sig, h != SIG_DFL && h != SIG_IGN, SA_RESTART);
	return r;
}
