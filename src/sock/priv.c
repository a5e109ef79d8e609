/* SPDX-License-Identifier: MIT */
/*
 * priv.c — staying on the fabric across a privilege drop and a fork.
 *
 * A fabric is its creator's (0700, owner-checked: src/dev/shm/files.c).
 * A server started as root under `ntbx run` that changes user (nginx's
 * workers as www-data, a daemon's setuid to nobody) could no longer open
 * a single file of it, so every connection made after the change stayed on
 * kernel TCP without a word.  Nothing is made readable to other users
 * instead.  The setuid/setgid family is interposed, and the first such
 * call made with root's effective uid, before it runs, joins the fabric,
 * maps the socket table and asks the device to keep access
 * (ntbx_dev_keep_access: every node's registers, memory and lock file
 * mapped or open now, and a keeper process, holding the old credentials,
 * for the files made later).  Mappings and descriptors survive setuid, so
 * the process and its forked children go on as before.
 *
 * fork: the child keeps the parent's fabric handle (its mappings, the
 * table, the peers' files) and gets only an identity of its own (its own
 * lock file description, share of the node's liveness and waiter slot:
 * ntbx_dev_fork_*), instead of joining the fabric again by path (160 ms
 * per short-lived child, and impossible after a privilege drop).  It takes
 * that identity at its first use of the fabric (self.c's sk_fab), not
 * here: a forking server's child that leaves its connection on kernel TCP
 * then pays no system call of ours for being forked.
 *
 * When acceleration is refused, the program says so once on stderr
 * (sk_say_tcp).
 */
#include <dlfcn.h>
#include <errno.h>
#include <grp.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ntbx/fabric.h"
#include "sock/sock.h"
#include "util/util.h"

static pid_t g_said;      /* pid that said why it stays on TCP */
static pid_t g_primed;    /* pid that kept access before a drop */

void sk_say_tcp(const char *fmt, ...)
{
	pid_t me = getpid();
	if (ntbx_sandboxed ||   /* no writes of ours (util.h) */
	    __atomic_exchange_n(&g_said, me, __ATOMIC_ACQ_REL) == me)
		return;
	char why[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	/* the error level: said whatever NTBX_LOG says (sk_conf_read gave
	 * the logger libc's write) */
	ntbx_log(NTBX_LOG_ERROR, "connections of %d stay on kernel TCP: %s",
	         (int)me, why);
}

/* Before the first change of credentials made as root. */
static void keep_access(const char *call)
{
	if (!sk_cfg.on || geteuid() != 0)
		return;
	pid_t me = getpid();
	if (__atomic_load_n(&g_primed, __ATOMIC_ACQUIRE) == me)
		return;
	struct ntbx_fabric *f = sk_fab();
	if (!f)
		return;   /* sk_fab said why */
	sk_tab(1);
	if (ntbx_dev_keep_access(ntbx_fabric_dev(f)) < 0) {
		sk_say_tcp("before %s(): %s", call, ntbx_errmsg());
		return;
	}
	__atomic_store_n(&g_primed, me, __ATOMIC_RELEASE);
	ntbx_log(NTBX_LOG_INFO, "%s(): fabric '%s' kept open across the change "
	         "of credentials", call, ntbx_fabric_name(f));
}

/* The real function, or ENOSYS when libc has none. */
#define REAL(name) \
	sk_resolve(); \
	__typeof__(name) *real_fn = sk_real.name; \
	if (!real_fn) { \
		errno = ENOSYS; \
		return -1; \
	}

#define WRAP1(name, T1) \
	EXPORT int name(T1 a) \
	{ \
		REAL(name); \
		keep_access(#name); \
		return real_fn(a); \
	}
#define WRAP2(name, T1, T2) \
	EXPORT int name(T1 a, T2 b) \
	{ \
		REAL(name); \
		keep_access(#name); \
		return real_fn(a, b); \
	}
#define WRAP3(name, T1, T2, T3) \
	EXPORT int name(T1 a, T2 b, T3 c) \
	{ \
		REAL(name); \
		keep_access(#name); \
		return real_fn(a, b, c); \
	}

WRAP1(setuid, uid_t)
WRAP1(seteuid, uid_t)
WRAP2(setreuid, uid_t, uid_t)
WRAP3(setresuid, uid_t, uid_t, uid_t)
WRAP1(setgid, gid_t)
WRAP1(setegid, gid_t)
WRAP2(setregid, gid_t, gid_t)
WRAP3(setresgid, gid_t, gid_t, gid_t)
WRAP2(setgroups, size_t, const gid_t *)
WRAP2(initgroups, const char *, gid_t)

/* ------------------------------------------------------------ sandbox */

/*
 * The process is about to lose the right to open files: a seccomp filter
 * (only the system calls kernel TCP needs from then on), or a soft
 * RLIMIT_NOFILE below SK_CONFINE_NOFILE (sshd's pre-auth child sets 1,
 * then installs its filter; a process that keeps so few descriptors
 * means to open nothing more).  Whichever comes first, and before it
 * takes effect: the peers' wake FIFOs of every connection are opened and
 * kept (flags.c), then util.h's ntbx_sandboxed is set, so no call of ours
 * comes after.  The library's descriptors already open stay valid: a
 * limit bounds only new descriptors, and they live at or above half the
 * old limit (src/util/ownfd.c), where the program never lands.
 */
#define SK_CONFINE_NOFILE 64

void sk_confine(void)
{
	if (ntbx_sandboxed)
		return;
	sk_confine_all();
	ntbx_sandbox_entered();
}

EXPORT int prctl(int option, ...)
{
	sk_resolve();
	int (*real_prctl)(int, ...) = sk_real.prctl;
	va_list ap;
	va_start(ap, option);
	unsigned long a2 = va_arg(ap, unsigned long);
	unsigned long a3 = va_arg(ap, unsigned long);
	unsigned long a4 = va_arg(ap, unsigned long);
	unsigned long a5 = va_arg(ap, unsigned long);
	va_end(ap);
	if (!real_prctl) {
		errno = ENOSYS;
		return -1;
	}
	if (option == PR_SET_SECCOMP && a2 == SECCOMP_MODE_FILTER)
		sk_confine();
	return real_prctl(option, a2, a3, a4, a5);
}

/*
 * The limits family.  The sanitizer runtime's own start-up calls setrlimit
 * (RLIMIT_CORE) before its shadow memory exists, and before our
 * constructor: these wrappers are therefore not instrumented, look at
 * nothing but their arguments until they know the call lowers
 * RLIMIT_NOFILE, and find the real function by dlsym if sk_resolve has
 * not run yet (the sanitizer runtime itself resolves with dlsym then).
 * The limit's argument is declared nonnull, yet NULL is allowed (a query
 * for prlimit, EFAULT for setrlimit): the asm hides it from the
 * compiler's assumption.  rlim_cur comes first in both structures.
 */
#define NO_SANITIZE __attribute__((no_sanitize("address", "undefined")))

NO_SANITIZE static int nofile_lowered(pid_t pid, int res, const void *limit)
{
	__asm__("" : "+r"(limit));
	return res == RLIMIT_NOFILE && limit &&
	       *(const rlim_t *)limit < SK_CONFINE_NOFILE &&
	       (pid == 0 || pid == getpid());
}

#define REAL_EARLY(name) \
	__typeof__(name) *real_fn = __atomic_load_n(&sk_real.name, \
	                                            __ATOMIC_ACQUIRE); \
	if (!real_fn) \
		*(void **)&real_fn = dlsym(RTLD_NEXT, #name); \
	if (!real_fn) { \
		errno = ENOSYS; \
		return -1; \
	}

NO_SANITIZE EXPORT int setrlimit(__rlimit_resource_t res, const struct rlimit *rl)
{
	REAL_EARLY(setrlimit);
	if (nofile_lowered(0, (int)res, rl))
		sk_confine();
	return real_fn(res, rl);
}

NO_SANITIZE EXPORT int setrlimit64(__rlimit_resource_t res,
                                   const struct rlimit64 *rl)
{
	REAL_EARLY(setrlimit64);
	if (nofile_lowered(0, (int)res, rl))
		sk_confine();
	return real_fn(res, rl);
}

NO_SANITIZE EXPORT int prlimit(pid_t pid, __rlimit_resource_t res,
                               const struct rlimit *nl, struct rlimit *ol)
{
	REAL_EARLY(prlimit);
	if (nofile_lowered(pid, (int)res, nl))
		sk_confine();
	return real_fn(pid, res, nl, ol);
}

NO_SANITIZE EXPORT int prlimit64(pid_t pid, __rlimit_resource_t res,
                                 const struct rlimit64 *nl,
                                 struct rlimit64 *ol)
{
	REAL_EARLY(prlimit64);
	if (nofile_lowered(pid, (int)res, nl))
		sk_confine();
	return real_fn(pid, res, nl, ol);
}

/* ------------------------------------------------------------ fork */

SK_FORK_STATE static pthread_mutex_t g_fork_lock = PTHREAD_MUTEX_INITIALIZER;
SK_FORK_STATE static struct ntbx_dev *g_fork_dev;   /* prepared for the child, or NULL */

/*
 * Only what must happen at fork happens here: the handle is held still
 * (g_fork_lock) while the child's copy is made, and in the child the
 * device's locks that another thread may have held are made usable
 * (ntbx_dev_fork_child, no system call) and the handle marked as the
 * parent's, to be made the child's at its first use (sk_fab).
 */
static void fork_prepare(void)
{
	pthread_mutex_lock(&g_fork_lock);
	g_fork_dev = NULL;
	struct ntbx_fabric *f = sk_fab_inherited();
	if (f && ntbx_dev_fork_prepare(ntbx_fabric_dev(f)) == 0)
		g_fork_dev = ntbx_fabric_dev(f);
}

static void fork_parent(void)
{
	if (g_fork_dev)
		ntbx_dev_fork_parent(g_fork_dev);
	g_fork_dev = NULL;
	pthread_mutex_unlock(&g_fork_lock);
}

static void fork_child(void)
{
	pthread_mutex_init(&g_fork_lock, NULL);   /* held by the forking thread */
	if (g_fork_dev && ntbx_dev_fork_child(g_fork_dev) == 0)
		sk_fab_forked();   /* the parent's handle, ours at first use */
	g_fork_dev = NULL;
}

__attribute__((constructor)) static void priv_init(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}
