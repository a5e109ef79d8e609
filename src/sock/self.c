/* SPDX-License-Identifier: MIT */
/*
 * self.c — this process on the fabric: its pid, its network namespace, its
 * fabric handle (joined on first need, taken over by a forked child) and
 * its identity there.  Separate because every concern asks these and none
 * of them owns them: the handle is joined once per process, by whichever
 * call needs it first.
 */
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ntbx/fabric.h"
#include "sock/sock.h"
#include "util/util.h"

SK_FORK_STATE pid_t sk_pid;
uint64_t sk_netns;

static struct ntbx_fabric *g_fab;
static pid_t g_fab_pid;
static pid_t g_fab_failed;   /* pid that failed to join (do not retry) */
/* g_fab is a forked parent's handle whose identity this process takes at
 * its first sk_fab (priv.c's fork handler set it; ntbx_dev_fork_*). */
SK_FORK_STATE static int g_fab_pending;

/* At start-up: the network namespace this process's loopback listeners
 * and connections are in (inode of /proc/self/ns/net, 0 if unknown). */
void sk_self_init(void)
{
	struct stat st;
	if (stat("/proc/self/ns/net", &st) == 0)
		sk_netns = st.st_ino;
}

struct ntbx_fabric *sk_fab(void)
{
	pid_t me = sk_pid;
	if (g_fab && g_fab_pid == me)
		return g_fab;
	if (g_fab_failed == me)
		return NULL;
	pthread_mutex_lock(&sk_lock);
	if (!(g_fab && g_fab_pid == me) &&
	    __atomic_load_n(&g_fab_pending, __ATOMIC_ACQUIRE)) {
		/* a forked child's first use: its own identity now, or kernel
		 * TCP (a sandboxed child cannot open the lock file) */
		__atomic_store_n(&g_fab_pending, 0, __ATOMIC_RELEASE);
		int rc = ntbx_dev_fork_identity(ntbx_fabric_dev(g_fab));
		if (rc == 0) {
			g_fab_pid = me;
		} else if (rc != -EOPNOTSUPP) {
			sk_say_tcp("a forked child of a process on fabric '%s': %s",
			           sk_cfg.fabric, ntbx_errmsg());
			g_fab_failed = me;
			pthread_mutex_unlock(&sk_lock);
			return NULL;
		}
	}
	if (!(g_fab && g_fab_pid == me)) {
		struct ntbx_fabric *f = NULL;
		int rc = ntbx_fabric_join(sk_cfg.fabric, -1, &f);
		if (rc < 0) {
			sk_say_tcp("cannot join fabric '%s': %s", sk_cfg.fabric,
			           ntbx_errmsg());
			g_fab_failed = me;
			f = NULL;
		} else {
			g_fab_pid = me;
		}
		g_fab = f;
	}
	pthread_mutex_unlock(&sk_lock);
	return g_fab_pid == me ? g_fab : NULL;
}

struct ntbx_fabric *sk_fab_mine(void)
{
	return g_fab && g_fab_pid == sk_pid ? g_fab : NULL;
}

/* The handle a forked child would keep: ours, or the one we were forked
 * with and have not used yet (a child's child keeps it as well). */
struct ntbx_fabric *sk_fab_inherited(void)
{
	struct ntbx_fabric *f = sk_fab_mine();
	return f ? f : __atomic_load_n(&g_fab_pending, __ATOMIC_ACQUIRE) ? g_fab
	                                                                 : NULL;
}

void sk_fab_forked(void)
{
	if (g_fab)
		g_fab_pending = 1;
}

/* This process's identity on the fabric (its handle's slot), 0 if it has
 * not joined.  A forked child has its own: it keeps the parent's handle
 * with a waiter slot of its own, taken at its first sk_fab (priv.c,
 * ntbx_dev_fork_identity), or joins
 * again (sk_fab). */
uint64_t sk_self_id(void)
{
	struct ntbx_fabric *f = sk_fab();
	int slot;
	uint32_t gen;
	if (!f || ntbx_dev_self_id(ntbx_fabric_dev(f), &slot, &gen) < 0)
		return 0;
	return sk_id_make(ntbx_fabric_node(f), slot, gen);
}

/* May @id name a live process?  Without a fabric we cannot tell: yes. */
int sk_id_may_live(uint64_t id)
{
	struct ntbx_fabric *f = sk_fab();
	return f ? sk_id_alive(ntbx_fabric_dev(f), id) : 1;
}
