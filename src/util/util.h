/* SPDX-License-Identifier: MIT */
/*
 * Small helpers every layer uses: error messages, logging, futexes, time
 * (settings: util/settings.h).  Internal to libntbx.
 */
#ifndef NTBX_UTIL_H
#define NTBX_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <time.h>

/*
 * Record a one-line message for ntbx_errmsg() and return -err, so a failing
 * call reads `return ntbx_err(ENOENT, "no fabric '%s' ...", name);`.
 */
int ntbx_err(int err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Forget the last message (a call that succeeded after a retry). */
void ntbx_err_clear(void);

/* Log levels of NTBX_LOG=error|warn|info|debug (default warn); errors
 * are always printed. */
enum ntbx_log_level { NTBX_LOG_ERROR, NTBX_LOG_WARN, NTBX_LOG_INFO,
                      NTBX_LOG_DEBUG };
/* The one logger (log.c): "ntbx: <msg>" on stderr, one write per line,
 * if @level is enabled and the process is not confined (ntbx_sandboxed).
 * ntbx_logp writes "<prefix>: <msg>" (OpenSHMEM's "ntbx-shmem: PE 3",
 * the agent's "ntbx node serve: NAME"). */
void ntbx_log(enum ntbx_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void ntbx_logp(enum ntbx_log_level level, const char *prefix,
               const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void ntbx_vlogp(enum ntbx_log_level level, const char *prefix,
                const char *fmt, va_list ap);
int ntbx_log_enabled(enum ntbx_log_level level);
/* The preload: write log lines with @w (libc's write, not its own). */
#include <sys/types.h>
void ntbx_log_set_write(ssize_t (*w)(int, const void *, size_t));

/*
 * The library's own long-lived descriptors (ownfd.c): ntbx_fd_own moves @fd
 * above the numbers programs use and marks it ours (returns the new
 * number; the old one is closed); the preload's close family leaves marked
 * ones alone (ntbx_fd_owned, ntbx_fd_next_owned: the lowest of ours in
 * [first, last], or -1).  Close ours with ntbx_fd_close.
 * ntbx_fd_own_cloexec: the same for a descriptor known to be
 * close-on-exec (one system call fewer).
 */
int ntbx_fd_own(int fd);
int ntbx_fd_own_cloexec(int fd);
int ntbx_fd_owned(int fd);
int ntbx_fd_next_owned(unsigned first, unsigned last);
int ntbx_fd_close(int fd);

/*
 * Set once the program confined itself with a seccomp filter (the preload
 * sees prctl(PR_SET_SECCOMP) and seccomp(2)): sshd's pre-authentication
 * child, browsers' renderers, services with SystemCallFilter=.  A filter
 * kills the process at the first system call it did not foresee, and
 * every filter for a network process allows what kernel TCP needs (read,
 * write, poll, futex, the clock), so from then on the library makes no
 * other call: it does not yield (it pauses), it does not probe locks (a
 * peer counts as alive: the stream's own end tells), it opens nothing new
 * (no FIFO, no keeper: a wake-up then reaches a sleeper through its futex
 * or its next slice), and it asks the kernel no socket option.
 */
extern int ntbx_sandboxed;
void ntbx_sandbox_entered(void);

/* Every variable ntbx reads is in util/settings.def and read through
 * util/settings.h (ntbx_setting_long(NTBX_SET_SPIN_US), ...). */

/* Parse a size such as 4096, 64K, 4M, 1G, 1T, 64KiB, 512B (K = 1024).
 * 0 or -EINVAL. */
int ntbx_parse_size(const char *s, uint64_t *out);

/*
 * @x rounded up to a multiple of @a, a power of two, in the type of @x (so
 * a 64-bit size is never masked by a 32-bit ~(a - 1)); a constant when
 * both are, for sizes in #defines.  The one spelling of it in the tree.
 */
#define NTBX_ALIGN_UP(x, a) \
	(((x) + ((__typeof__(x))(a) - 1)) & ~((__typeof__(x))(a) - 1))

/* Monotonic clock in nanoseconds. */
static inline uint64_t ntbx_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The same clock at the kernel's tick (1-10 ms), read from the vDSO's
 * data page without a time-stamp counter read (no serialising rdtscp or
 * fence): for rate limits on hot paths, where a millisecond either way
 * does not matter. */
static inline uint64_t ntbx_coarse_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A rate limit for an occasional look on a hot path: whether @period_ns
 * has passed since *@last (0: never looked), and if so *@last = @now.
 * Relaxed: threads that race may both look, which is only a look more. */
static inline int ntbx_due(uint64_t *last, uint64_t now, uint64_t period_ns)
{
	uint64_t l = __atomic_load_n(last, __ATOMIC_RELAXED);
	if (l && now - l < period_ns)
		return 0;
	__atomic_store_n(last, now, __ATOMIC_RELAXED);
	return 1;
}

/* Spin-wait hint. */
static inline void ntbx_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/*
 * Shared (not private) futexes: they work across processes that map the
 * same file at different addresses.  futex_wait returns 0 when woken or
 * when *addr != val, -ETIMEDOUT, -EINTR.
 */
int ntbx_futex_wait(uint32_t *addr, uint32_t val, int timeout_ms);
/* The same with a timeout in nanoseconds (a bounded sleep). */
int ntbx_futex_wait_ns(uint32_t *addr, uint32_t val, uint64_t timeout_ns);
void ntbx_futex_wake(uint32_t *addr, int n);

/*
 * In a fork child: make a private (default-kind) mutex usable again, as
 * pthread_mutex_init does, but write it only if it is not already in the
 * unlocked state (all zero bytes for glibc's default mutex).  A write in
 * a fork child costs a copy-on-write fault of its page, and an
 * accept-and-fork server pays each one per connection.
 */
static inline void ntbx_mutex_reset(pthread_mutex_t *m)
{
	static const pthread_mutex_t unlocked = PTHREAD_MUTEX_INITIALIZER;
	if (__builtin_memcmp(m, &unlocked, sizeof *m))
		pthread_mutex_init(m, NULL);
}

/*
 * Take a robust, process-shared mutex that lives in shared memory, which
 * anyone with access to it may have scribbled on: at most
 * NTBX_SHARED_LOCK_MS (no holder keeps these locks longer than a few
 * microseconds), a holder that died is recovered (*@owner_died set, if
 * given, so the caller can repair what it guarded).  0, -ETIMEDOUT, or
 * -EIO when the lock is garbage; the caller fails its call and says so.
 */
#include <pthread.h>
#define NTBX_SHARED_LOCK_MS 2000
int ntbx_shared_lock(pthread_mutex_t *m, int *owner_died);

/*
 * Copy @n bytes between buffers that do not overlap, as fast as this
 * machine allows.  Every data path (windows, DMA, rings, OpenSHMEM) copies
 * with this, so one place decides how bytes move: memcpy below
 * NTBX_COPY_REP_MIN; above, the way (memcpy, rep movsb, non-temporal
 * stores) that a calibration at the first large copy of the process found
 * fastest for copies into shared memory (copy.c), or NTBX_COPY's.
 * ntbx_copy_in is for copies into private memory that the caller reads
 * next (gets, receives): it never uses non-temporal stores.
 */
#define NTBX_COPY_REP_MIN (512u << 10)
void ntbx_copy_large(void *dst, const void *src, size_t n);
void ntbx_copy_in_large(void *dst, const void *src, size_t n);
static inline void ntbx_copy(void *dst, const void *src, size_t n)
{
	if (n < NTBX_COPY_REP_MIN)
		__builtin_memcpy(dst, src, n);
	else
		ntbx_copy_large(dst, src, n);
}
static inline void ntbx_copy_in(void *dst, const void *src, size_t n)
{
	if (n < NTBX_COPY_REP_MIN)
		__builtin_memcpy(dst, src, n);
	else
		ntbx_copy_in_large(dst, src, n);
}
/* The large-copy choice in words (calibrates if not done yet), for
 * SHMEM_INFO and logs; also logged at NTBX_LOG=info when made. */
const char *ntbx_copy_info(void);
/* What the calibration measured for memcpy of 1 MiB into a shared mapping,
 * in ns per byte (calibrates if not done yet); 0 when not calibrated
 * (sanitized build, NTBX_COPY forced, calibration failed). */
double ntbx_copy_ns_per_byte(void);

/* Microseconds a waiter spins before it sleeps (NTBX_SPIN_US, default 50). */
long ntbx_spin_us(void);

/*
 * The wait policy (spin.c, the argument in full there and in
 * docs/design-notes.md): a waiter spins only while spinning pays (a budget
 * learned from recent waits), not at all when its peer last ran on its
 * CPU, at most what a sleep and wake-up there and back costs while the
 * runnable threads outnumber the CPUs, and then sleeps on its doorbell;
 * it spins with pause instructions, never sched_yield() (but see
 * ntbx_spin_group_yield: a group whose members are the whole load; and
 * ntbx_spin_turn: a thread that has held its CPU for long on a crowded
 * machine gives it up at its next wait).  One
 * struct ntbx_spin per waiter site (a queue pair, a socket, a thread's
 * poll, a forwarder) keeps the budget learned from its recent waits;
 * zero-initialised is ready to use, and threads may share one (updates
 * are single relaxed stores: a lost one only delays the learning).
 *
 *	uint64_t t0 = ntbx_now_ns(), budget = ntbx_spin_begin(&site);
 *	while (!ready() && ntbx_now_ns() - t0 < budget)
 *		ntbx_cpu_relax();
 *	... sleep on the doorbell until ready ...
 *	ntbx_spin_end(&site, ntbx_now_ns() - t0, slept);
 *
 * NTBX_SPIN_US, when set, fixes the budget (no learning, no load check).
 */
#define NTBX_SPIN_FLOOR_NS 1000u
#define NTBX_SPIN_INIT_NS  10000u
#define NTBX_SPIN_CAP_NS   50000u
#define NTBX_SPIN_CALM     12   /* samples (of 4 ms) to leave "crowded" */
enum { NTBX_SPIN_FREE, NTBX_SPIN_CROWDED, NTBX_SPIN_FIXED, NTBX_SPIN_NEAR };
struct ntbx_spin {
	uint32_t budget_ns;   /* learned; 0 until the first wait */
	int mode;             /* NTBX_SPIN_*, set by ntbx_spin_begin */
	int halving;          /* set by ntbx_spin_begin_halving */
};
/* Start of a wait: nanoseconds to spin before sleeping (0: sleep now). */
uint64_t ntbx_spin_begin(struct ntbx_spin *s);
/* The same for a wait on a peer that last ran on CPU @peer_cpu (-1: not
 * known), begun at @now (ntbx_now_ns(): one clock read fewer): 0 when
 * that is this thread's CPU (NTBX_SPIN_NEAR). */
uint64_t ntbx_spin_begin_for(struct ntbx_spin *s, int peer_cpu, uint64_t now);
/* The same for a site whose crowded spin that ends in a sleep anyway
 * halves its budget (pure loss: see spin.c) instead of raising it to the
 * wait's length: the sockets' waits. */
uint64_t ntbx_spin_begin_halving(struct ntbx_spin *s, int peer_cpu,
                                 uint64_t now);
/* End of a wait that lasted @waited_ns; @slept if it went to sleep (the
 * length of a wait that did not sleep is not used). */
void ntbx_spin_end(struct ntbx_spin *s, uint64_t waited_ns, int slept);
/* A socket thread's call into a wait at @now: sched_yield() and 1 when
 * it has run NTBX_TURN_NS without being switched out while the machine
 * is crowded (spin.c, "taking turns"), else 0.  At most one look every
 * 100 us; a system call per look only while crowded. */
int ntbx_spin_turn(uint64_t now);
/* A waiter of a group of processes that share this machine's CPUs and
 * count their sleepers (OpenSHMEM's PEs): its budget @budget (from
 * ntbx_spin_begin*, which set @s's mode) while @awake members (not asleep
 * in a wait, itself included) fit on the CPUs the waiting thread may use, else
 * at most a sleep and wake-up there and back (ntbx_spin_wake_ns, as
 * crowded); asked again while spinning, as the count changes.
 * NTBX_SPIN_US: @budget whatever the count. */
uint64_t ntbx_spin_group(const struct ntbx_spin *s, uint64_t budget,
                         int awake);
/* Whether such a waiter, its @awake members outnumbering the CPUs, should
 * sched_yield() instead of sleeping: while the machine's runnable threads
 * beside the group's awake members (sampled with @awake every half
 * millisecond, the least of the last four) are fewer than the CPUs the
 * waiting thread may use, so that the group keeps a CPU of its own
 * (spin.c).  Never with NTBX_SPIN_US set; never while the members fit
 * on the CPUs of a machine that is not crowded (the waiter spins), unless
 * the peer
 * waited for last ran on the waiter's CPU (NTBX_SPIN_NEAR: a yield hands
 * it the CPU).  The yield hands the CPU to a member, not a stranger
 * (spin.c). */
int ntbx_spin_group_yield(const struct ntbx_spin *s, int awake, uint64_t now);
/* A yield of such a waiter came back only after a long while (at @now):
 * it handed the CPU to something that ran on; no yields for 20 ms, unless
 * the run queue now holds fewer foreign threads beside the group's @awake
 * members than CPUs (one of them computing, or a stranger the group yields
 * beside anyway) and no other yield ran long in the 20 ms before. */
void ntbx_spin_group_yield_long(int awake, uint64_t now);
/* The least count of foreign runnable threads in the group's recent
 * samples (ntbx_spin_group_yield's window); INT_MAX before a sample. */
int ntbx_spin_group_foreign(void);
/* The CPUs this process may use changed (a thread's affinity): sample
 * them and the run queue again at the next look. */
void ntbx_spin_cpus_changed(void);
/* Forget the group's samples and a long yield's pause, so that the next
 * waiter samples afresh (the end of a start-up whose waits said nothing
 * about the load to come: spin.c). */
void ntbx_spin_group_restart(void);
/* The runnable threads that are not the group's: @running (the machine's,
 * -1 unknown: INT_MAX) less the group's @awake members. */
int ntbx_spin_foreign_runnable(int running, int awake);
/* Whether the runnable threads outnumber the CPUs this process may use
 * (cached counts, with hysteresis: see spin.c), and the counts. */
int ntbx_spin_crowded(void);
void ntbx_spin_load(int *ncpu, int *running);
/* A sleep and wake-up there and back here, in ns: the crowded budget
 * (measured once per process in the background from the first call;
 * NTBX_SPIN_FLOOR_NS until known). */
uint32_t ntbx_spin_wake_ns(void);
/* Tests: inject the counts (ncpu <= 0: sample the machine again), force a
 * fixed budget in us (-1: adaptive, -2: read NTBX_SPIN_US again), set the
 * cost of a sleep (0: measure again). */
void ntbx_spin_test_load(int ncpu, int running);
void ntbx_spin_test_fixed(long us);
void ntbx_spin_test_wake(uint32_t ns);

#endif
