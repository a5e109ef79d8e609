/* SPDX-License-Identifier: MIT */
/*
 * The node agent of the ofi backend: `ntbx node serve --fabric NAME`, one
 * per host.  It owns the libfabric endpoint of this host's node and
 *
 *   - registers node memory (target of the peers' fi_write, source of
 *     ours) and ofi.expo (scratchpads, window translations) with whatever
 *     mr_mode the provider asks (FI_MR_LOCAL, VIRT_ADDR, PROV_KEY,
 *     ENDPOINT, ALLOCATED);
 *   - meets the other hosts' agents at the addresses of the fabric's
 *     description (a TCP rendezvous on each host's port: addresses, keys,
 *     fabric name, layout and key hash, each side checking the other's),
 *     in a thread of its own that never calls libfabric;
 *   - executes the node's DMA queue (ofi.ctl: one ring per local handle)
 *     as fi_write / fi_read / fi_inject_write(data), in order per ring;
 *   - turns remote CQ data into doorbell bits and wake-ups of local
 *     sleepers, and progresses the provider (tcp;ofi_rxm progresses
 *     manually: a write lands only while the target calls into it);
 *   - sends a heartbeat to each peer; a peer silent for dead_ms, or an
 *     error completion, is link-down.  Its own death drops its lock on
 *     ofi.ctl, which local processes see as link-down.
 * The loop polls while there is work and for a moment after, then sleeps
 * on the CQ's wait descriptor and the kick FIFO, at most one heartbeat.
 */
#include "dev/ofi/agent_int.h"

struct agent ag;

/* ------------------------------------------------------------ logging */

/* Who this agent is, once its fabric is read ("" before: the prefix is
 * then the command alone, not "ntbx node serve: ntbx node serve"). */
char agent_self_name[128];

void agent_say(const char *fmt, ...)
{
	/* through ntbx's logger (util.h), always, as the agent's log */
	char who[160];
	snprintf(who, sizeof who, "ntbx node serve%s%s",
	         agent_self_name[0] ? ": " : "", agent_self_name);
	va_list ap;
	va_start(ap, fmt);
	ntbx_vlogp(NTBX_LOG_ERROR, who, fmt, ap);
	va_end(ap);
}

static void on_signal(int sig)
{
	(void)sig;
	ag.stop = 1;
}

/* ------------------------------------------------------------------ PMIx */

#ifdef NTBX_HAVE_PMIX
static int pmix_up;

/*
 * Under a PMIx launcher (Open MPI's mpirun, srun, PRRTE: PMIX_NAMESPACE in
 * the environment), every agent puts its hello, fences with the others and
 * gets theirs: the links come up without the TCP rendezvous, which keeps
 * running for agents that restart.  0 when done or not under PMIx, -1 on a
 * failure that must stop the agent (the launcher's job does not match the
 * fabric).
 */
static int pmix_exchange(void)
{
	if (!ntbx_setting_str(NTBX_SET_PMIX_NAMESPACE))
		return 0;
	pmix_proc_t me;
	pmix_status_t rc = PMIx_Init(&me, NULL, 0);
	if (rc != PMIX_SUCCESS) {
		agent_say("PMIx_Init: %s; meeting the peers through the rendezvous only",
		    PMIx_Error_string(rc));
		return 0;
	}
	pmix_up = 1;
	if ((int)me.rank != ag.rank) {
		agent_say("PMIx says rank %u, this host is node %d of fabric '%s'", me.rank,
		    ag.rank, ag.desc.name);
		return -1;
	}
	pmix_proc_t wild;
	PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
	pmix_value_t *v = NULL;
	if (PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &v) == PMIX_SUCCESS && v) {
		uint32_t size = v->type == PMIX_UINT32 ? v->data.uint32 : 0;
		PMIX_VALUE_RELEASE(v);
		if (size != (uint32_t)ag.nnodes) {
			agent_say("the launcher started %u agents; fabric '%s' has %d hosts "
			    "(one agent per host)", size, ag.desc.name, ag.nnodes);
			return -1;
		}
	}
	char key[96];
	snprintf(key, sizeof key, "ntbx.ofi.%s", ag.desc.name);
	pmix_value_t val;
	memset(&val, 0, sizeof val);
	val.type = PMIX_BYTE_OBJECT;
	val.data.bo.bytes = (char *)&ag.me;
	val.data.bo.size = sizeof ag.me;
	if ((rc = PMIx_Put(PMIX_GLOBAL, key, &val)) != PMIX_SUCCESS ||
	    (rc = PMIx_Commit()) != PMIX_SUCCESS) {
		agent_say("PMIx_Put: %s", PMIx_Error_string(rc));
		return 0;
	}
	pmix_info_t info[2];
	bool collect = true;
	int tmo = (int)(ag.o->timeout_s * 5 + 1);
	PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
	PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &tmo, PMIX_INT);
	rc = PMIx_Fence(NULL, 0, info, 2);
	PMIX_INFO_DESTRUCT(&info[0]);
	PMIX_INFO_DESTRUCT(&info[1]);
	if (rc != PMIX_SUCCESS) {
		agent_say("PMIx_Fence: %s (within %d s); meeting the peers through the "
		    "rendezvous", PMIx_Error_string(rc), tmo);
		return 0;
	}
	int got = 0;
	for (int n = 0; n < ag.nnodes; n++) {
		if (n == ag.rank)
			continue;
		pmix_proc_t p;
		PMIX_LOAD_PROCID(&p, me.nspace, (pmix_rank_t)n);
		v = NULL;
		rc = PMIx_Get(&p, key, NULL, 0, &v);
		if (rc != PMIX_SUCCESS || !v || v->type != PMIX_BYTE_OBJECT ||
		    v->data.bo.size != sizeof(struct hello)) {
			agent_say("PMIx_Get of node %d's hello: %s", n, rc != PMIX_SUCCESS ?
			    PMIx_Error_string(rc) : "not an ntbx hello");
			if (v)
				PMIX_VALUE_RELEASE(v);
			continue;
		}
		struct hello *h = calloc(1, sizeof *h);
		if (h) {
			memcpy(h, v->data.bo.bytes, sizeof *h);
			h->refused[sizeof h->refused - 1] = 0;
			char why[160];
			if (agent_hello_check(h, n, why, sizeof why) < 0) {
				agent_say("refusing %s (from PMIx): it %s", ag.peer[n].name, why);
				agent_set_why(n, "refused %s: it %s", ag.peer[n].name, why);
			} else {
				agent_mbox_put(h);
				got++;
			}
			free(h);
		}
		PMIX_VALUE_RELEASE(v);
	}
	agent_say("PMIx (namespace %s): %d of %d peers' hellos", me.nspace, got,
	    ag.nnodes - 1);
	return 0;
}
#endif

/* --------------------------------------------------------------- setup */

static int listen_on(const char *host, unsigned port)
{
	struct addrinfo *ai = agent_resolve(host, port, 1);
	if (!ai) {
		agent_say("cannot resolve %s", host);
		return -1;
	}
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	if (fd >= 0)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 64)) {
		agent_say("cannot listen on %s port %u: %s", host, port, strerror(errno));
		freeaddrinfo(ai);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	freeaddrinfo(ai);
	return fd;
}

static int write_ready(const char *fmt)
{
	/* "%r" in the name is the node (agents of one launch share a path) */
	char file[PATH_MAX - 8], tmp[PATH_MAX];
	const char *r = strstr(fmt, "%r");
	if (r)
		snprintf(file, sizeof file, "%.*s%d%s", (int)(r - fmt), fmt, ag.rank,
		         r + 2);
	else
		snprintf(file, sizeof file, "%s", fmt);
	snprintf(tmp, sizeof tmp, "%s.tmp", file);
	FILE *f = fopen(tmp, "w");
	if (!f || fprintf(f, "ready %d\n", ag.rank) < 0 || fclose(f) ||
	    rename(tmp, file)) {
		agent_say("cannot write %s: %s", file, strerror(errno));
		return -1;
	}
	return 0;
}

static void teardown(void)
{
	if (ag.mr_mem)
		fi_close(&ag.mr_mem->fid);
	if (ag.mr_expo)
		fi_close(&ag.mr_expo->fid);
	if (ag.ep)
		fi_close(&ag.ep->fid);
	if (ag.av)
		fi_close(&ag.av->fid);
	if (ag.cq)
		fi_close(&ag.cq->fid);
	if (ag.domain)
		fi_close(&ag.domain->fid);
	if (ag.fabric)
		fi_close(&ag.fabric->fid);
	if (ag.info)
		fi_freeinfo(ag.info);
	if (ag.ctl) {
		for (int n = 0; n < NTBX_MAX_NODES; n++)
			__atomic_store_n(&ag.ctl->node[n].up, 0, __ATOMIC_RELEASE);
		__atomic_store_n(&ag.ctl->rank, ag.ctl->rank, __ATOMIC_RELEASE);
	}
	if (ag.dev)
		ntbx_dev_close(ag.dev);   /* drops the agent lock */
#ifdef NTBX_HAVE_PMIX
	if (pmix_up)
		PMIx_Finalize(NULL, 0);
#endif
	free(ag.slots);
	free(ag.pool);
	for (int n = 0; n < NTBX_MAX_NODES; n++)
		free(ag.mbox[n]);
}

int ofi_agent_run(const struct ofi_agent_opts *o)
{
	memset(&ag, 0, sizeof ag);
	ag.o = o;
	ag.kick_fd = ag.listen_fd = ag.ep_fd = ag.cq_fd = -1;
	pthread_mutex_init(&ag.mbox_lock, NULL);
	int r = ofi_read_desc(o->dir, &ag.desc);
	if (r < 0) {
		agent_say("fabric '%s' at %s is not an ofi fabric (%s): create it with "
		    "`ntbx fabric create %s --backend ofi --hosts A,B`", o->fabric,
		    o->dir, ntbx_errmsg()[0] ? ntbx_errmsg() : strerror(-r), o->fabric);
		return 1;
	}
	if ((r = ntbx_shm_read_desc(o->dir, &ag.sdesc)) < 0) {
		agent_say("fabric '%s': %s", o->fabric, ntbx_errmsg());
		return 1;
	}
	char why[256];
	ag.rank = ofi_local_rank(&ag.desc, why, sizeof why);
	if (ag.rank < 0) {
		agent_say("%s", why);
		return 1;
	}
	ag.nnodes = (int)ag.desc.nhosts;
	const char *host = ag.desc.host[ag.rank].addr;
	unsigned port = ag.desc.host[ag.rank].port;
	char hn[64] = "";
	gethostname(hn, sizeof hn - 1);
	snprintf(agent_self_name, sizeof agent_self_name, "%.30s (%.46s), fabric '%.30s' node %d",
	         hn[0] ? hn : "?", host, ag.desc.name, ag.rank);
	for (int n = 0; n < ag.nnodes; n++)
		snprintf(ag.peer[n].name, sizeof ag.peer[n].name, "node %d's host %s",
		         n, ag.desc.host[n].addr);

	if ((r = ofi_dev_open(o->dir, ag.rank, 1, &ag.dev)) < 0) {
		agent_say("%s", ntbx_errmsg());
		return 1;
	}
	ag.ctl = ofi_dev_ctl(ag.dev);
	ag.expo = ofi_dev_expo(ag.dev);
	ag.mem = ntbx_mem_base(ag.dev);
	ag.mem_size = ntbx_mem_size(ag.dev);
	/* a new incarnation of the node for the peers: they bring links up
	 * again (scratchpads and windows) */
	uint32_t epoch = __atomic_add_fetch(&ofi_dev_regs(ag.dev)->epoch, 1,
	                                    __ATOMIC_SEQ_CST);
	ag.slots = calloc(SHM_SLOTS, sizeof *ag.slots);
	ag.pool = calloc(CTX_POOL, sizeof *ag.pool);
	if (!ag.slots || !ag.pool) {
		agent_say("out of memory");
		goto fail;
	}
	for (int i = 0; i < CTX_POOL; i++)
		agent_ctx_put(&ag.pool[i]);
	/* descriptors left from a previous agent are not run: they end with
	 * -ENOLINK (the link went down with that agent) */
	for (int s = 0; s < SHM_SLOTS; s++) {
		struct ofi_ring *ring = &ag.ctl->ring[s];
		ag.slots[s].gen = __atomic_load_n(&ring->gen, __ATOMIC_ACQUIRE);
		uint32_t tail = __atomic_load_n(&ring->tail, __ATOMIC_ACQUIRE);
		uint32_t done = __atomic_load_n(&ring->done, __ATOMIC_ACQUIRE);
		for (uint32_t i = done; tail - done <= OFI_RING && i != tail; i++)
			__atomic_store_n(&ring->d[i % OFI_RING].result, -ENOLINK,
			                 __ATOMIC_RELAXED);
		ag.slots[s].head = ag.slots[s].done = tail;
		__atomic_store_n(&ring->done, tail, __ATOMIC_RELEASE);
		ntbx_futex_wake(&ring->done, INT_MAX);
	}
	for (int n = 0; n < NTBX_MAX_NODES; n++) {
		__atomic_store_n(&ag.ctl->node[n].up, 0, __ATOMIC_RELEASE);
		agent_set_why(n, "not met yet");
	}

	if (agent_fab_open(host, port + 1) < 0)
		goto fail;
	if (agent_mr_reg(ag.mem, ag.mem_size, FI_READ | FI_WRITE | FI_REMOTE_READ |
	           FI_REMOTE_WRITE, KEY_MEM, &ag.mr_mem, &ag.desc_mem) < 0 ||
	    agent_mr_reg(ag.expo, OFI_EXPO_SIZE, FI_READ | FI_WRITE | FI_REMOTE_READ |
	           FI_REMOTE_WRITE, KEY_EXPO, &ag.mr_expo, &ag.desc_expo) < 0)
		goto fail;

	struct hello *me = &ag.me;
	me->magic = HELLO_MAGIC;
	me->version = OFI_VERSION;
	me->node = (uint32_t)ag.rank;
	me->nnodes = (uint32_t)ag.nnodes;
	me->layout = SHM_LAYOUT_VERSION;
	me->epoch = epoch;
	me->mem_size = ag.mem_size;
	me->window_max = ag.sdesc.window_max;
	me->key_hash = ag.desc.key_hash;
	if (getrandom(&me->boot_id, sizeof me->boot_id, 0) != sizeof me->boot_id)
		me->boot_id = ntbx_now_ns() ^ (uint64_t)getpid() << 32;
	me->boot_id |= 1;
	snprintf(me->name, sizeof me->name, "%s", ag.desc.name);
	snprintf(me->prov, sizeof me->prov, "%s", ag.info->fabric_attr->prov_name);
	me->mem_base = (ag.mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)ag.mem : 0;
	me->mem_key = fi_mr_key(ag.mr_mem);
	me->expo_base = (ag.mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)ag.expo : 0;
	me->expo_key = fi_mr_key(ag.mr_expo);
	me->cq_data_size = (uint32_t)ag.info->domain_attr->cq_data_size;
	size_t al = sizeof me->addr;
	if ((r = fi_getname(&ag.ep->fid, me->addr, &al))) {
		agent_fi_fail("fi_getname", r);
		goto fail;
	}
	me->addrlen = (uint32_t)al;
	agent_local_addrs(me);

	/* the kick FIFO; then the rendezvous */
	{
		int dfd;
		struct stat dst;
		if (shm_dir_open(o->dir, &dfd, &dst) < 0) {
			agent_say("%s", ntbx_errmsg());
			goto fail;
		}
		ag.kick_fd = shm_fifo_make(dfd, &dst, "ofi.kick",
		                          ag.sdesc.gid != ~0u ? 0660 : 0600,
		                          ag.sdesc.gid != ~0u ? (int)ag.sdesc.gid : -1);
		close(dfd);
		if (ag.kick_fd < 0) {
			agent_say("cannot make ofi.kick: %s", strerror(-ag.kick_fd));
			goto fail;
		}
	}
	if ((ag.listen_fd = listen_on(host, port)) < 0)
		goto fail;
	snprintf(ag.ctl->provider, sizeof ag.ctl->provider, "%s", me->prov);
	ag.ctl->agent_pid = getpid();
	ag.ctl->boot_id = me->boot_id;
	__atomic_store_n(&ag.ctl->rank, ag.rank, __ATOMIC_RELEASE);

	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
#ifdef NTBX_HAVE_PMIX
	if (pmix_exchange() < 0)
		goto fail;
#endif
	pthread_t rdv;
	if (pthread_create(&rdv, NULL, agent_rendezvous_main, NULL)) {
		agent_say("cannot start the rendezvous thread");
		goto fail;
	}
	ag.ep_fd = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = { .events = EPOLLIN };
	ev.data.fd = ag.kick_fd;
	epoll_ctl(ag.ep_fd, EPOLL_CTL_ADD, ag.kick_fd, &ev);
	if (ag.cq_fd >= 0) {
		ev.data.fd = ag.cq_fd;
		epoll_ctl(ag.ep_fd, EPOLL_CTL_ADD, ag.cq_fd, &ev);
	}
	agent_say("serving with provider %s%s, endpoint %s:%u, rendezvous port %u; "
	    "%d peer%s", me->prov, ag.ordered ? " (ordered writes)" : "", host,
	    port + 1, port, ag.nnodes - 1, ag.nnodes == 2 ? "" : "s");
	if (o->ready_file && write_ready(o->ready_file) < 0)
		ag.stop = 1;

	uint64_t spin_t0 = 0, spin_budget = 0, next_hb = 0, nap_ns = NAP_MIN_NS;
	/* NTBX_OFI_POLL_US: poll at least this long after work, whatever the
	 * wait policy says (an answer often follows within a round trip) */
	ag.min_poll_ns = (uint64_t)ntbx_setting_long(NTBX_SET_OFI_POLL_US) * 1000;
	static struct ntbx_spin idle_spin;
	while (!ag.stop) {
		int work = agent_apply_hellos();
		work |= agent_cq_poll();
		work |= agent_scan_rings();
		uint64_t now = ntbx_now_ns();
		if (now >= next_hb) {
			agent_heartbeat();
			next_hb = now + (uint64_t)o->hb_ms * 1000000ull;
		}
		if (work) {
			if (spin_t0)
				ntbx_spin_end(&idle_spin, now - spin_t0, 0);
			spin_t0 = 0;
			nap_ns = NAP_MIN_NS;
			continue;
		}
		/* idle: poll while the wait policy says polling pays (a CPU
		 * free for whoever we wait for), then sleep */
		if (!spin_t0) {
			spin_t0 = now;
			spin_budget = ntbx_spin_begin(&idle_spin);
			if (spin_budget > SPIN_NS)
				spin_budget = SPIN_NS;
			if (spin_budget < ag.min_poll_ns)
				spin_budget = ag.min_poll_ns;
		}
		if (now - spin_t0 < spin_budget) {
			ntbx_cpu_relax();
			continue;
		}
		/* sleep: announce it, look once more, then wait for the CQ,
		 * a kick or the next heartbeat */
		__atomic_store_n(&ag.ctl->sleeping, 1, __ATOMIC_SEQ_CST);
		work = agent_scan_rings() | agent_cq_poll();
		uint64_t ns = next_hb - now + 1000000;
		if (!work && ag.cq_fd >= 0) {
			struct fid *f = &ag.cq->fid;
			if (fi_trywait(ag.fabric, &f, 1) != FI_SUCCESS)
				work = 1;
		} else if (!work) {
			/* No wait object (the shm provider): what peers write is
			 * seen only by polling.  Short naps right after work, as
			 * an answer often follows within a round trip, doubling
			 * to 1 ms once idle (a fixed 1 ms made every crossing
			 * of a ping-pong cost up to a millisecond). */
			ns = nap_ns;
			nap_ns = nap_ns * 2 > 1000000 ? 1000000 : nap_ns * 2;
		}
		if (!work) {
			struct epoll_event evs[4];
			struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000),
			                       .tv_nsec = (long)(ns % 1000000000) };
			ag.n.sleeps++;
			epoll_pwait2(ag.ep_fd, evs, 4, &ts, NULL);
		}
		char buf[64];
		while (read(ag.kick_fd, buf, sizeof buf) > 0)
			;
		__atomic_store_n(&ag.ctl->sleeping, 0, __ATOMIC_SEQ_CST);
		__atomic_store_n(&ag.ctl->kicked, 0, __ATOMIC_SEQ_CST);
		ntbx_spin_end(&idle_spin, ntbx_now_ns() - spin_t0, 1);
		spin_t0 = 0;
	}
	agent_say("stopping: %" PRIu64 " descriptors (%" PRIu64 " writes, %"
	          PRIu64 " doorbells on a write, %" PRIu64 " alone), %" PRIu64
	          " completions, %" PRIu64 " CQ data in, %" PRIu64 " sleeps",
	          ag.n.descs, ag.n.writes, ag.n.db_rode, ag.n.db_alone,
	          ag.n.cq_local, ag.n.cq_data, ag.n.sleeps);
	ag.stop = 1;
	pthread_join(rdv, NULL);
	close(ag.listen_fd);
	close(ag.ep_fd);
	teardown();
	return 0;
fail:
	ag.stop = 1;
	if (ag.listen_fd >= 0)
		close(ag.listen_fd);
	teardown();
	return 1;
}

