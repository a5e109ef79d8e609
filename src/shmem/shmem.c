/* SPDX-License-Identifier: MIT */
/*
 * libntbx-shmem core: start-up (fabric join, symmetric heap, static data,
 * the exchange with oshrun), address translation, RMA, AMOs, ordering,
 * signals, locks, contexts and the deprecated set-up routines.
 */
#include <dlfcn.h>
#include <sched.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ntbx/fabric.h"
#include "ntbx/qp.h"
#include "util/util.h"
#include "heap_size.h"
#include "shmem_int.h"
#include "shmemx.h"

struct sh_state ntbx_sh = { .topo = -1, .npes = 1, .pmi_fd = -1 };
struct ntbx_shmem_ctx ntbx_shmem_ctx_default = { SHMEM_TEAM_WORLD, 0 };
struct ntbx_shmem_team ntbx_shmem_team_world = { 0, 1, 1, 0, 0, { 0 }, 0 };
struct ntbx_shmem_team ntbx_shmem_team_shared = { 0, 1, 1, 0, 1, { 0 }, 0 };
static int init_count;
static int thread_level = SHMEM_THREAD_MULTIPLE;


void ntbx_sh_die(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	fprintf(stderr, "ntbx-shmem: PE %d: %s\n", ntbx_sh.me, buf);
	fflush(NULL);
	shmem_global_exit(1);
	_exit(1);
}

void ntbx_sh_debug(const char *fmt, ...)
{
	if (!ntbx_sh.debug)
		return;
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	fprintf(stderr, "ntbx-shmem: PE %d: %s\n", ntbx_sh.me, buf);
}

static void need_init(const char *what)
{
	if (!init_count)
		ntbx_sh_die("%s called before shmem_init", what);
}

/* ------------------------------------------------------ static data */

struct wseg { uintptr_t lo, hi, relro; };

static int phdr_cb(struct dl_phdr_info *info, size_t sz, void *arg)
{
	(void)sz;
	struct wseg *s = arg;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t a = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_W)) {
			if (a < s->lo)
				s->lo = a;
			if (a + ph->p_memsz > s->hi)
				s->hi = a + ph->p_memsz;
		} else if (ph->p_type == PT_GNU_RELRO) {
			s->relro = a + ph->p_memsz;
		}
	}
	return 1;   /* the first object is the main program */
}

/* Copy without the sanitizer's checks: globals have redzones. */
__attribute__((no_sanitize_address, noinline))
static void copy_words(volatile uint64_t *dst, const volatile uint64_t *src,
                       size_t n)
{
	for (size_t i = 0; i < n / 8; i++)
		dst[i] = src[i];
}

/* This PE's node memory file, to map parts of it where we choose. */
static int open_node_mem(void)
{
	char file[64];
	snprintf(file, sizeof file, "node-%d.mem", ntbx_sh.node);
	/* relative to the fabric's checked directory, never by path */
	int fd = ntbx_fabric_open_file(getenv("NTBX_SHMEM_FABRIC"), file, O_RDWR,
	                               0);
	if (fd < 0)
		ntbx_sh_die("cannot open node memory: %s", ntbx_errmsg());
	return fd;
}

/*
 * Map @size bytes of node memory at @off (fd < 0: anonymous memory) so that
 * the address @lead bytes in is a multiple of @align.  shmem_align needs
 * the user heap's base aligned the same way on every PE: then an offset
 * aligned to any power of two up to @align is an aligned address on every
 * PE, and the same offset.  The slack is only reserved address space.
 */
static char *map_aligned(int fd, uint64_t off, size_t size, size_t lead,
                         size_t align)
{
	size_t span = size + align;
	char *r = mmap(NULL, span, PROT_NONE,
	               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (r == MAP_FAILED)
		return NULL;
	uintptr_t a = ((uintptr_t)r + lead + align - 1) & ~(uintptr_t)(align - 1);
	char *p = (char *)(a - lead);
	void *m = fd < 0 ?
		mmap(p, size, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) :
		mmap(p, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
		     (off_t)off);
	if (m == MAP_FAILED) {
		munmap(r, span);
		return NULL;
	}
	if (p > r)
		munmap(r, (size_t)(p - r));
	if (p + size < r + span)
		munmap(p + size, (size_t)(r + span - (p + size)));
	return p;
}

/* The user heap's base alignment: the heap size rounded up to a power of
 * two (so every alignment an object in it can have), at least 2 MiB. */
static size_t heap_align(size_t user)
{
	size_t a = 2u << 20;
	while (a < user && a < ((size_t)1 << 46))
		a <<= 1;
	return a;
}

/*
 * Move the main program's writable data (.data and .bss) into node memory:
 * copy it to a node-memory block and map that block over the same virtual
 * addresses, shared.  The program keeps running on its own variables;
 * peers store into them through their windows.
 */
static void remap_data(struct ntbx_dev *dev, uint64_t *offp)
{
	struct wseg s = { UINTPTR_MAX, 0, 0 };
	dl_iterate_phdr(phdr_cb, &s);
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
	if (s.hi <= s.lo)
		return;
	uintptr_t lo = s.lo & ~(pg - 1), hi = (s.hi + pg - 1) & ~(pg - 1);
	if (s.relro > lo)
		lo = (s.relro + pg - 1) & ~(pg - 1);
	if (hi <= lo)
		return;
	size_t size = hi - lo;
	int64_t off = ntbx_mem_alloc(dev, size, 4096, "shmem-data", 1);
	if (off < 0)
		ntbx_sh_die("static data (%zu bytes) does not fit in node memory: "
		            "%s", size, strerror((int)-off));
	int fd = open_node_mem();
	void *tmp = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
	                 (off_t)off);
	if (tmp == MAP_FAILED)
		ntbx_sh_die("mmap node memory: %s", strerror(errno));
	copy_words(tmp, (const volatile uint64_t *)lo, size);
	void *r = mmap((void *)lo, size, PROT_READ | PROT_WRITE,
	               MAP_SHARED | MAP_FIXED, fd, (off_t)off);
	if (r == MAP_FAILED)
		ntbx_sh_die("cannot map static data into node memory: %s",
		            strerror(errno));
	munmap(tmp, size);
	close(fd);
	ntbx_sh.data = (char *)lo;
	ntbx_sh.data_size = size;
	*offp = (uint64_t)off;
}

/* ------------------------------------------------------ the exchange */

/* @fd is oshrun's end of a socketpair: if oshrun died, a plain write
 * would kill the PE with SIGPIPE; the error is reported instead. */
static int write_all(int fd, const void *b, size_t n)
{
	const char *p = b;
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int read_all(int fd, void *b, size_t n)
{
	char *p = b;
	while (n) {
		ssize_t r = read(fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

static size_t parse_heap_size(void)
{
	const char *s = getenv("SHMEM_SYMMETRIC_SIZE");
	uint64_t v = NTBX_SH_DEFAULT_HEAP;
	if (s && *s && (ntbx_parse_size(s, &v) < 0 || v == 0)) {
		fprintf(stderr, "ntbx-shmem: SHMEM_SYMMETRIC_SIZE='%s' is not a "
		        "size (bytes, or with a K, M or G suffix)\n", s);
		exit(1);
	}
	return (size_t)((v + 4095) & ~4095ull);
}

static void print_info(void)
{
	if (ntbx_sh.me)
		return;
	if (getenv("SHMEM_VERSION"))
		printf("ntbx OpenSHMEM %d.%d\n", SHMEM_MAJOR_VERSION,
		       SHMEM_MINOR_VERSION);
	if (getenv("SHMEM_INFO")) {
		printf("ntbx OpenSHMEM %d.%d (%s)\n", SHMEM_MAJOR_VERSION,
		       SHMEM_MINOR_VERSION, SHMEM_VENDOR_STRING);
		printf("  PEs                  %d\n", ntbx_sh.npes);
		printf("  topology             %s\n", ntbx_sh.topo < 0 ? "none (one PE)" :
		       ntbx_topology_name((enum ntbx_topology)ntbx_sh.topo));
		printf("  SHMEM_SYMMETRIC_SIZE %zu bytes\n",
		       ntbx_sh.heap_size - SH_INTERNAL_SIZE);
		printf("  static data          %zu bytes, remotely accessible\n",
		       ntbx_sh.data_size);
		printf("  SHMEM_DEBUG          %s\n", ntbx_sh.debug ? "on" : "off");
		printf("  transfer threads     %d (ring forwarding)\n",
		       ntbx_sh.threads);
		printf("  large copies         %s\n", ntbx_copy_info());
		printf("  fabric               %s\n", ntbx_sh.f ?
		       ntbx_fabric_name(ntbx_sh.f) : "-");
	}
	fflush(stdout);
}

static int env_int(const char *name, int def)
{
	const char *s = getenv(name);
	if (!s || !*s)
		return def;
	char *e;
	long v = strtol(s, &e, 10);
	if (*e || v < 0 || v > 1 << 20) {
		fprintf(stderr, "ntbx-shmem: %s='%s' is not a number\n", name, s);
		exit(1);
	}
	return (int)v;
}

/* Whether node @node runs one of the PEs. */
static int node_runs_pe(int node)
{
	for (int j = 0; j < ntbx_sh.npes; j++)
		if (ntbx_sh.node_of[j] == node)
			return 1;
	return 0;
}

/* Wait for the links to the nodes that run PEs (a --fabric may have
 * more nodes than PEs). */
static void wait_links(struct ntbx_dev *dev, const char *fab)
{
	uint64_t t0 = ntbx_now_ns(), s = 0;
	for (;;) {
		int ready = 1;
		for (int p = 0; p < ntbx_port_count(dev); p++) {
			int node = ntbx_port_peer_node(dev, p);
			if (node >= 0 && node != ntbx_sh.node && node_runs_pe(node) &&
			    ntbx_fabric_link_ready(ntbx_sh.f, p) != 1)
				ready = 0;
		}
		if (ready) {
			ntbx_sh_spin_done(&s);
			return;
		}
		if (ntbx_now_ns() - t0 > 60000000000ull)
			ntbx_sh_die("links of fabric '%s' did not come up in 60 s: "
			            "%s", fab, ntbx_errmsg());
		ntbx_sh_spin(&s);
	}
}

/* Each PE's node: PE i on node i under oshrun; under PMIx each PE says
 * which node its host's agent serves. */
static void find_nodes(void)
{
	int n = ntbx_sh.npes;
	if (!ntbx_sh.pmix) {
		for (int j = 0; j < n; j++)
			ntbx_sh.node_of[j] = j;
		return;
	}
	int32_t mine = ntbx_sh.node, *all = calloc((size_t)n, sizeof *all);
	if (!all)
		ntbx_sh_die("out of memory");
	ntbx_sh_pmix_allgather("ntbx.shmem.node", &mine, sizeof mine, all);
	for (int j = 0; j < n; j++) {
		if (all[j] < 0 || all[j] >= ntbx_fabric_nodes(ntbx_sh.f))
			ntbx_sh_die("PE %d says it is on node %d: fabric '%s' has "
			            "nodes 0..%d", j, all[j],
			            ntbx_fabric_name(ntbx_sh.f),
			            ntbx_fabric_nodes(ntbx_sh.f) - 1);
		ntbx_sh.node_of[j] = all[j];
	}
	free(all);
}

/* Every PE's record, gathered: through oshrun's socket, or PMIx. */
static void exchange(const struct sh_rec *rec, struct sh_rec *all,
                     size_t len)
{
	if (ntbx_sh.pmix) {
		ntbx_sh_pmix_allgather("ntbx.shmem.rec", rec, len, all);
		return;
	}
	uint32_t hdr[2] = { 'E', (uint32_t)len };
	if (write_all(ntbx_sh.pmi_fd, hdr, sizeof hdr) < 0 ||
	    write_all(ntbx_sh.pmi_fd, rec, len) < 0 ||
	    read_all(ntbx_sh.pmi_fd, all, len * (size_t)ntbx_sh.npes) < 0)
		ntbx_sh_die("start-up exchange with oshrun failed");
}

/*
 * PE @j shares this node: map its heap and static data from node memory,
 * so puts, gets and atomics to it are loads, stores and CPU atomics, as to
 * a PE behind a mapped window.  Its heap is mapped with the same base
 * alignment as ours, so shmem_ptr to it keeps every alignment.
 */
static void map_local_pe(struct ntbx_dev *dev, int j, const struct sh_rec *r)
{
	uint64_t msz = ntbx_mem_size(dev);
	if (r->heap_off > msz || r->heap_size > msz - r->heap_off ||
	    r->data_off > msz || r->data_size > msz - r->data_off)
		ntbx_sh_die("PE %d's memory is not inside node %d's memory", j,
		            ntbx_sh.node);
	int fd = open_node_mem();
	struct sh_peer *p = &ntbx_sh.peer[j];
	p->heap = map_aligned(fd, r->heap_off, r->heap_size, SH_INTERNAL_SIZE,
	                      heap_align(r->heap_size - SH_INTERNAL_SIZE));
	p->data = !r->data_size ? NULL :
		mmap(NULL, r->data_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		     (off_t)r->data_off);
	close(fd);
	if (!p->heap || p->data == MAP_FAILED)
		ntbx_sh_die("cannot map PE %d's memory (same node): %s", j,
		            strerror(errno));
	p->direct = 1;
}

/* SHMEM_TEAM_SHARED: the PEs of this node when they are consecutive
 * (mpirun's default mapping by slot), else this PE alone. */
static struct ntbx_shmem_team node_team(void)
{
	int first = -1, last = -1, n = 0;
	for (int j = 0; ntbx_sh.node_of && j < ntbx_sh.npes; j++)
		if (!sh_other_node(j)) {
			if (first < 0)
				first = j;
			last = j;
			n++;
		}
	if (n < 2 || last - first + 1 != n)
		return (struct ntbx_shmem_team){ ntbx_sh.me, 1, 1, 0, 1, { 0 }, 0 };
	return (struct ntbx_shmem_team){ first, 1, n, ntbx_sh.me - first, 1,
	                                 { 0 }, 0 };
}

static void sh_init(void)
{
	const char *dbg = getenv("SHMEM_DEBUG");
	ntbx_sh.debug = dbg && *dbg && strcmp(dbg, "0") != 0;
	size_t heap_size = parse_heap_size() + SH_INTERNAL_SIZE;
	const char *fab = getenv("NTBX_SHMEM_FABRIC");
	/* oshrun passes its socket; otherwise a PMIx launcher may have
	 * started us (mpirun -x NTBX_SHMEM_FABRIC=NAME ...). */
	ntbx_sh.pmix = !getenv("NTBX_SHMEM_PMI_FD") && ntbx_sh_pmix_launched();
	if (ntbx_sh.pmix) {
		ntbx_sh_pmix_init(&ntbx_sh.me, &ntbx_sh.npes);
		if ((!fab || !*fab) && ntbx_sh.npes > 1)
			ntbx_sh_die("started by a PMIx launcher as one of %d PEs, but "
			            "NTBX_SHMEM_FABRIC names no fabric: create an ofi "
			            "fabric on every host (`ntbx fabric create NAME "
			            "--backend ofi --hosts A,B`), start its agents "
			            "(`ntbx node serve`) and pass -x "
			            "NTBX_SHMEM_FABRIC=NAME to mpirun", ntbx_sh.npes);
	}
	if (!fab || !*fab) {
		/* Alone: one PE, no fabric (a program run without oshrun). */
		ntbx_sh.me = 0;
		ntbx_sh.npes = 1;
		ntbx_sh.topo = -1;
		char *h = map_aligned(-1, 0, heap_size, SH_INTERNAL_SIZE,
		                      heap_align(heap_size - SH_INTERNAL_SIZE));
		if (!h)
			ntbx_sh_die("cannot reserve a symmetric heap of %zu bytes "
			            "(SHMEM_SYMMETRIC_SIZE): %s", heap_size,
			            strerror(errno));
		ntbx_sh.heap = h;
		ntbx_sh.heap_size = heap_size;
	} else {
		ntbx_sh.threads = env_int("NTBX_SHMEM_THREADS", 1);
		if (!ntbx_sh.pmix) {
			ntbx_sh.me = env_int("NTBX_NODE", 0);
			ntbx_sh.npes = env_int("NTBX_SHMEM_NPES", 1);
			ntbx_sh.pmi_fd = env_int("NTBX_SHMEM_PMI_FD", -1);
			if (ntbx_sh.npes < 1 || ntbx_sh.npes > NTBX_MAX_NODES ||
			    ntbx_sh.me >= ntbx_sh.npes || ntbx_sh.pmi_fd < 0) {
				fprintf(stderr, "ntbx-shmem: inconsistent launch "
				        "environment (start the program with oshrun, or "
				        "with a PMIx launcher such as mpirun)\n");
				exit(1);
			}
		}
		/* oshrun runs PE i on node i; under PMIx this host's node is the
		 * one its agent serves (ofi), and several PEs may share it. */
		int r = ntbx_fabric_join(fab, ntbx_sh.pmix ? -1 : ntbx_sh.me,
		                         &ntbx_sh.f);
		if (r < 0)
			ntbx_sh_die("cannot join fabric '%s': %s", fab, ntbx_errmsg());
		ntbx_sh.node = ntbx_fabric_node(ntbx_sh.f);
		ntbx_sh.topo = (int)ntbx_fabric_topology(ntbx_sh.f);
		struct ntbx_dev *dev = ntbx_fabric_dev(ntbx_sh.f);
		ntbx_sh.via_qp = !ntbx_dev_maps_peer_windows(dev);
		ntbx_sh.node_of = calloc((size_t)ntbx_sh.npes, sizeof(int));
		if (!ntbx_sh.node_of)
			ntbx_sh_die("out of memory");
		find_nodes();
		wait_links(dev, fab);
		int64_t hoff = ntbx_mem_alloc(dev, heap_size, 4096, "shmem-heap", 1);
		if (hoff < 0)
			ntbx_sh_die("the symmetric heap (SHMEM_SYMMETRIC_SIZE + %uK) "
			            "does not fit in node memory (%zu bytes): %s",
			            SH_INTERNAL_SIZE >> 10, ntbx_mem_size(dev),
			            strerror((int)-hoff));
		int mfd = open_node_mem();
		ntbx_sh.heap = map_aligned(mfd, (uint64_t)hoff, heap_size,
		                           SH_INTERNAL_SIZE,
		                           heap_align(heap_size - SH_INTERNAL_SIZE));
		close(mfd);
		if (!ntbx_sh.heap)
			ntbx_sh_die("cannot map the symmetric heap: %s",
			            strerror(errno));
		ntbx_sh.heap_size = heap_size;
		memset(ntbx_sh.heap, 0, SH_HDR_SIZE);
		struct sh_rec *rec = calloc(1, sizeof *rec);
		struct sh_rec *all = calloc((size_t)ntbx_sh.npes, sizeof *all);
		ntbx_sh.peer = calloc((size_t)ntbx_sh.npes, sizeof *ntbx_sh.peer);
		if (!rec || !all || !ntbx_sh.peer)
			ntbx_sh_die("out of memory");
		rec->node = ntbx_sh.node;
		rec->heap_off = (uint64_t)hoff;
		rec->heap_size = heap_size;
		remap_data(dev, &rec->data_off);
		rec->data_size = ntbx_sh.data_size;
		for (int j = 0; j < ntbx_sh.npes; j++)
			pthread_mutex_init(&ntbx_sh.peer[j].lk, NULL);
		if (ntbx_sh_ring_setup_create(rec->cli, rec->srv) < 0)
			ntbx_sh_die("ring set-up failed: %s", ntbx_errmsg());
		exchange(rec, all, sizeof *rec);
		for (int j = 0; j < ntbx_sh.npes; j++) {
			if (all[j].heap_size != heap_size ||
			    all[j].data_size != ntbx_sh.data_size)
				ntbx_sh_die("PE %d has another heap or data size: every "
				            "PE must run the same program with the same "
				            "SHMEM_SYMMETRIC_SIZE", j);
			if (all[j].node != ntbx_sh.node_of[j])
				ntbx_sh_die("PE %d says it is on node %lld, not %d",
				            j, (long long)all[j].node, ntbx_sh.node_of[j]);
			if (j == ntbx_sh.me)
				continue;
			if (!sh_other_node(j)) {
				map_local_pe(dev, j, &all[j]);
				continue;
			}
			int port = ntbx_port_of_node(dev, ntbx_sh.node_of[j]);
			if (port < 0 || ntbx_sh.via_qp)
				continue;
			void *base;
			uint64_t sz;
			if (ntbx_peer_mw_get_addr(dev, port, 0, &base, &sz) < 0 ||
			    all[j].heap_off + heap_size > sz ||
			    all[j].data_off + all[j].data_size > sz)
				ntbx_sh_die("cannot map PE %d's memory: %s", j,
				            ntbx_errmsg());
			ntbx_sh.peer[j].heap = (char *)base + all[j].heap_off;
			ntbx_sh.peer[j].data = (char *)base + all[j].data_off;
			ntbx_sh.peer[j].direct = 1;
		}
		if (ntbx_sh_ring_setup_connect(all, sizeof *all) < 0)
			ntbx_sh_die("ring set-up failed: %s", ntbx_errmsg());
		free(rec);
		free(all);
	}
	ntbx_sh.internal = ntbx_sh.heap;
	ntbx_sh_heap_init(ntbx_sh.heap + SH_INTERNAL_SIZE,
	                  ntbx_sh.heap_size - SH_INTERNAL_SIZE,
	                  heap_align(ntbx_sh.heap_size - SH_INTERNAL_SIZE));
	ntbx_shmem_team_world = (struct ntbx_shmem_team){
		0, 1, ntbx_sh.npes, ntbx_sh.me, 0, { 0 }, 0 };
	if (ntbx_sh.topo == 0 && !ntbx_sh.via_qp)   /* shmem_ptr reaches all */
		ntbx_shmem_team_shared = ntbx_shmem_team_world;
	else
		ntbx_shmem_team_shared = node_team();
	ntbx_shmem_team_shared.slot = 1;
	*(uint64_t *)(ntbx_sh.internal + SH_BITMAP_OFF) = 3;  /* slots 0, 1 */
	ntbx_sh.inited = 1;
	print_info();
	shmem_barrier_all();
	ntbx_sh_coll_init();
}

static int finalized;

void shmem_init(void)
{
	if (init_count++)
		return;
	/* 1.6 lets init calls nest (matched by finalize calls); after the
	 * last finalize this PE has left oshrun's start-up exchange, so it
	 * cannot join again. */
	if (finalized)
		ntbx_sh_die("shmem_init after the last shmem_finalize: ntbx "
		            "cannot initialize again");
	sh_init();
}

void shmem_query_initialized(int *initialized)
{
	if (initialized)
		*initialized = init_count > 0;
}

int shmem_init_thread(int requested, int *provided)
{
	if (requested < SHMEM_THREAD_SINGLE || requested > SHMEM_THREAD_MULTIPLE)
		return -1;
	thread_level = requested;
	shmem_init();
	if (provided)
		*provided = requested;
	return 0;
}

void shmem_query_thread(int *provided)
{
	if (provided)
		*provided = thread_level;
}

void shmem_finalize(void)
{
	if (!init_count || --init_count)
		return;
	shmem_barrier_all();
	ntbx_sh_ring_stop();
	if (ntbx_sh.topo == 1 && ntbx_sh.pmi_fd >= 0) {
		/* Forwarding nodes must outlive the traffic through them: wait
		 * (through oshrun) until every PE has stopped its traffic. */
		uint32_t hdr[2] = { 'F', 0 };
		char c;
		if (write_all(ntbx_sh.pmi_fd, hdr, sizeof hdr) == 0)
			(void)read_all(ntbx_sh.pmi_fd, &c, 1);
	}
	if (ntbx_sh.pmix)
		ntbx_sh_pmix_finalize();
	/* The fabric stays joined until exit: static data lives in node
	 * memory, and leaving would let the node's memory be reclaimed. */
	ntbx_sh.inited = 0;
	finalized = 1;
}

void shmem_global_exit(int status)
{
	fflush(NULL);
	if (ntbx_sh.pmi_fd >= 0) {
		uint32_t hdr[2] = { 'X', (uint32_t)status };
		write_all(ntbx_sh.pmi_fd, hdr, sizeof hdr);
	}
	if (ntbx_sh.pmix) {
		/* the launcher ends every PE of the job (1.6: global_exit) */
		char msg[64];
		snprintf(msg, sizeof msg, "ntbx-shmem: PE %d called "
		         "shmem_global_exit(%d)", ntbx_sh.me, status);
		ntbx_sh_pmix_abort(status, msg);
	}
	_exit(status);
}

int shmem_my_pe(void) { return ntbx_sh.me; }
int shmem_n_pes(void) { return ntbx_sh.npes; }
int _my_pe(void) { return ntbx_sh.me; }
int _num_pes(void) { return ntbx_sh.npes; }
int shmem_num_pes(void) { return ntbx_sh.npes; }
void start_pes(int npes) { (void)npes; shmem_init(); }

int shmem_pe_accessible(int pe)
{
	return pe >= 0 && pe < ntbx_sh.npes;
}

static int is_symmetric(const void *addr)
{
	uintptr_t a = (uintptr_t)addr;
	if (ntbx_sh.topo < 0)
		return 1;
	return (a - (uintptr_t)ntbx_sh.heap < ntbx_sh.heap_size) ||
	       (ntbx_sh.data && a - (uintptr_t)ntbx_sh.data < ntbx_sh.data_size);
}

int shmem_addr_accessible(const void *addr, int pe)
{
	return shmem_pe_accessible(pe) && is_symmetric(addr);
}

void *shmem_ptr(const void *dest, int pe)
{
	if (!shmem_pe_accessible(pe) || !is_symmetric(dest))
		return NULL;
	if (pe == ntbx_sh.me)
		return (void *)dest;
	struct sh_loc l;
	return ntbx_sh_xlate(dest, 1, pe, "shmem_ptr", &l);
}

void *shmem_team_ptr(shmem_team_t team, const void *dest, int pe)
{
	if (!team || pe < 0 || pe >= team->size)
		return NULL;
	return shmem_ptr(dest, team->start + pe * team->stride);
}

void shmem_info_get_version(int *major, int *minor)
{
	*major = SHMEM_MAJOR_VERSION;
	*minor = SHMEM_MINOR_VERSION;
}

void shmem_info_get_name(char *name)
{
	strncpy(name, SHMEM_VENDOR_STRING, SHMEM_MAX_NAME_LEN);
	name[SHMEM_MAX_NAME_LEN - 1] = 0;
}

double shmemx_wtime(void) { return (double)ntbx_now_ns() * 1e-9; }
/* SOS asks for the thread-id function to tell threads apart; ntbx keeps
 * no per-thread state that needs it, so the function is only checked. */
int shmemx_register_gettid(uint64_t (*gettid_fn)(void))
{
	return gettid_fn ? 0 : -1;
}
void shmemx_heap_info(void **base, size_t *size)
{
	*base = ntbx_sh.heap + SH_INTERNAL_SIZE;
	*size = ntbx_sh.heap_size - SH_INTERNAL_SIZE;
}
int shmemx_topology(void) { return ntbx_sh.topo; }

/* ------------------------------------------------------ translation */

int ntbx_sh_ctx_pe(shmem_ctx_t ctx, int pe, const char *what)
{
	if (!ctx)
		ntbx_sh_die("%s: invalid context (SHMEM_CTX_INVALID)", what);
	struct ntbx_shmem_team *t = ctx->team;
	if (pe < 0 || pe >= t->size)
		ntbx_sh_die("%s: PE %d is out of range (the team has %d PEs)",
		            what, pe, t->size);
	return t->start + pe * t->stride;
}

void *ntbx_sh_xlate(const void *addr, size_t len, int pe, const char *what,
                    struct sh_loc *loc)
{
	uintptr_t a = (uintptr_t)addr;
	if (ntbx_sh.topo < 0 || pe == ntbx_sh.me)
		goto self;
	uintptr_t h = a - (uintptr_t)ntbx_sh.heap;
	struct sh_peer *p = &ntbx_sh.peer[pe];
	if (h < ntbx_sh.heap_size && len <= ntbx_sh.heap_size - h) {
		loc->kind = 0;
		loc->off = h;
		return p->direct ? p->heap + h : NULL;
	}
	uintptr_t d = a - (uintptr_t)ntbx_sh.data;
	if (ntbx_sh.data && d < ntbx_sh.data_size &&
	    len <= ntbx_sh.data_size - d) {
		loc->kind = 1;
		loc->off = d;
		return p->direct ? p->data + d : NULL;
	}
	ntbx_sh_die("%s: address %p (%zu bytes) is not symmetric: not in the "
	            "symmetric heap nor in static data", what, addr, len);
self:
	if (ntbx_sh.topo >= 0 && !is_symmetric(addr))
		ntbx_sh_die("%s: address %p is not symmetric: not in the "
		            "symmetric heap nor in static data", what, addr);
	return (void *)addr;
}

/* --------------------------------------------------------------- RMA */

static void kick_at(long *sl);
static void kick_store(int pe, const struct sh_loc *l, size_t len);

void ntbx_sh_put(shmem_ctx_t ctx, void *dest, const void *src, size_t n,
                 int pe)
{
	pe = ntbx_sh_ctx_pe(ctx, pe, "put");
	if (!n)
		return;
	struct sh_loc l;
	char *p = ntbx_sh_xlate(dest, n, pe, "put", &l);
	if (p) {
		ntbx_copy(p, src, n);
		kick_store(pe, &l, n);
	} else {
		ntbx_sh_remote_put(pe, &l, src, n);
	}
}

void ntbx_sh_get(shmem_ctx_t ctx, void *dest, const void *src, size_t n,
                 int pe)
{
	pe = ntbx_sh_ctx_pe(ctx, pe, "get");
	if (!n)
		return;
	struct sh_loc l;
	char *p = ntbx_sh_xlate(src, n, pe, "get", &l);
	if (p)
		ntbx_copy_in(dest, p, n);
	else
		ntbx_sh_remote_get(pe, &l, dest, n);
}

void ntbx_sh_iput(shmem_ctx_t ctx, void *dest, const void *src,
                  ptrdiff_t dst, ptrdiff_t sst, size_t nelems, size_t es,
                  int pe)
{
	int wpe = ntbx_sh_ctx_pe(ctx, pe, "iput");
	if (!nelems)
		return;
	struct sh_loc l;
	char *d = dest;
	const char *s = src;
	/* check the whole span once */
	char *p = ntbx_sh_xlate(dst >= 0 ? d : d + (ptrdiff_t)(nelems - 1) * dst * (ptrdiff_t)es,
	                        ((size_t)(dst < 0 ? -dst : dst) * (nelems - 1) + 1) * es,
	                        wpe, "iput", &l);
	if (p && dst >= 0) {
		for (size_t i = 0; i < nelems; i++)
			memcpy(p + (ptrdiff_t)i * dst * (ptrdiff_t)es,
			       s + (ptrdiff_t)i * sst * (ptrdiff_t)es, es);
		ntbx_sh_kick(wpe);
		return;
	}
	for (size_t i = 0; i < nelems; i++)
		ntbx_sh_put(ctx, d + (ptrdiff_t)i * dst * (ptrdiff_t)es,
		            s + (ptrdiff_t)i * sst * (ptrdiff_t)es, es, pe);
}

void ntbx_sh_ib(shmem_ctx_t ctx, int put, void *dest, const void *src,
                ptrdiff_t dst, ptrdiff_t sst, size_t bsize, size_t nblocks,
                size_t es, int pe)
{
	char *d = dest;
	const char *s = src;
	for (size_t i = 0; i < nblocks; i++) {
		char *bd = d + (ptrdiff_t)i * dst * (ptrdiff_t)es;
		const char *bs = s + (ptrdiff_t)i * sst * (ptrdiff_t)es;
		if (put)
			ntbx_sh_put(ctx, bd, bs, bsize * es, pe);
		else
			ntbx_sh_get(ctx, bd, bs, bsize * es, pe);
	}
}

void ntbx_sh_iget(shmem_ctx_t ctx, void *dest, const void *src,
                  ptrdiff_t dst, ptrdiff_t sst, size_t nelems, size_t es,
                  int pe)
{
	char *d = dest;
	const char *s = src;
	for (size_t i = 0; i < nelems; i++)
		ntbx_sh_get(ctx, d + (ptrdiff_t)i * dst * (ptrdiff_t)es,
		            s + (ptrdiff_t)i * sst * (ptrdiff_t)es, es, pe);
}

/* --------------------------------------------------------------- AMO */

uint64_t ntbx_sh_amo_local(int op, void *p, size_t size, uint64_t v,
                           uint64_t c)
{
#define AMO_CASES(T)                                                        \
	do {                                                                \
		T *q = p, vv = (T)v, cc = (T)c;                             \
		switch (op) {                                               \
		case NTBX_AMO_FETCH: return __atomic_load_n(q, __ATOMIC_SEQ_CST); \
		case NTBX_AMO_SET: __atomic_store_n(q, vv, __ATOMIC_SEQ_CST); return 0; \
		case NTBX_AMO_SWAP: return __atomic_exchange_n(q, vv, __ATOMIC_SEQ_CST); \
		case NTBX_AMO_CSWAP:                                        \
			__atomic_compare_exchange_n(q, &cc, vv, 0, __ATOMIC_SEQ_CST, \
			                            __ATOMIC_SEQ_CST);      \
			return cc;                                          \
		case NTBX_AMO_FADD: return __atomic_fetch_add(q, vv, __ATOMIC_SEQ_CST); \
		case NTBX_AMO_AND: return __atomic_fetch_and(q, vv, __ATOMIC_SEQ_CST); \
		case NTBX_AMO_OR: return __atomic_fetch_or(q, vv, __ATOMIC_SEQ_CST); \
		case NTBX_AMO_XOR: return __atomic_fetch_xor(q, vv, __ATOMIC_SEQ_CST); \
		}                                                           \
	} while (0)
	if (op == NTBX_AMO_SET_WAKE) {
		__atomic_store_n((uint64_t *)p, v, __ATOMIC_SEQ_CST);
		return 0;
	}
	if (op == NTBX_AMO_ADD_WAKE)
		return __atomic_fetch_add((uint64_t *)p, v, __ATOMIC_SEQ_CST);
	if (size == 4)
		AMO_CASES(uint32_t);
	else if (size == 8)
		AMO_CASES(uint64_t);
	return 0;
#undef AMO_CASES
}

uint64_t ntbx_sh_amo(shmem_ctx_t ctx, int op, void *dest, size_t size,
                     uint64_t val, uint64_t cond, int pe)
{
	pe = ntbx_sh_ctx_pe(ctx, pe, "atomic");
	if ((uintptr_t)dest & (size - 1))
		ntbx_sh_die("atomic: address %p is not aligned to %zu bytes", dest,
		            size);
	struct sh_loc l;
	char *p = ntbx_sh_xlate(dest, size, pe, "atomic", &l);
	if (!p)
		return ntbx_sh_remote_amo(pe, &l, op, size, val, cond);
	uint64_t r = ntbx_sh_amo_local(op, p, size, val, cond);
	/* Wake the target's sleepers only if it has any (a syscall costs
	 * more than the barrier); see ntbx_sh_wake_check. */
	if (op != NTBX_AMO_FETCH)
		kick_store(pe, &l, size);
	return r;
}

/* For requests applied here by the ring's progress thread. */
void ntbx_sh_wake_check(int op, void *p)
{
	(void)p;
	if (op != NTBX_AMO_FETCH)
		ntbx_sh_kick_local();
}

/* Waiting: see shmem_int.h.  One wait at a time per thread, so the
 * policy's site and the sleep state are the thread's. */
/* Sleep slices: a safety net, every store that a wait can be for kicks
 * (short slices cost more than they save: 4 PEs on 2 CPUs spent 33-42 us
 * per barrier with slices from 50 us or 1 ms, 18-20 us with 10 ms, the
 * timeouts waking sleepers for nothing).  Before the heap exists (the
 * wait for the links) nothing kicks: short slices there. */
#define SH_SLEEP_MIN_NS  10000000ull   /* every sleep slice */
#define SH_SLEEP_MAX_NS  10000000ull
#define SH_POLL_MIN_NS   50000ull      /* no heap yet: poll */
#define SH_POLL_MAX_NS   2000000ull

static __thread struct ntbx_spin sh_site;
static __thread struct {
	uint64_t budget, slice;
	uint32_t seq;       /* wake sequence seen before the caller's check */
	int announced;      /* counted in sh_sleepers */
	int slept;
} sw;

static void sh_unannounce(void)
{
	if (sw.announced) {
		__atomic_fetch_sub(sh_sleepers(), 1, __ATOMIC_SEQ_CST);
		sw.announced = 0;
	}
}

void ntbx_sh_spin(uint64_t *st)
{
	ntbx_sh_spin_on(st, NULL);
}

/* Announce a sleeper watching @watch (0: anything).  The watch word is
 * stored before the count: a kicker that sees the count sees it.  A
 * second sleeper of this PE makes it "anything" (it may have hidden the
 * first one's word meanwhile: that one's kick can be skipped, and its
 * sleep slice bounds the delay). */
static void sh_announce(uint64_t watch)
{
	uint64_t *wp = (uint64_t *)((char *)sh_sleepers() + SH_WATCH_DELTA);
	if (__atomic_load_n(sh_sleepers(), __ATOMIC_SEQ_CST) > 0)
		watch = 0;
	__atomic_store_n(wp, watch, __ATOMIC_SEQ_CST);
	if (__atomic_fetch_add(sh_sleepers(), 1, __ATOMIC_SEQ_CST) > 0 && watch)
		__atomic_store_n(wp, 0, __ATOMIC_SEQ_CST);
}

/* The CPU the thread the next wait is for last ran on (-1: unknown); it
 * does not spin when that is its own (ntbx_spin_begin_for). */
static __thread int sh_wait_peer_cpu = -1;

void ntbx_sh_spin_peer_cpu(int cpu)
{
	sh_wait_peer_cpu = cpu;
}

void ntbx_sh_spin_on(uint64_t *st, const void *addr)
{
	ntbx_sh_spin_range(st, addr, 8);
}

void ntbx_sh_spin_range(uint64_t *st, const void *addr, size_t len)
{
	uint64_t now = ntbx_now_ns();
	if (!*st) {
		sh_unannounce();   /* a wait that ended without done */
		*st = now;
		uint64_t b = ntbx_spin_begin_for(&sh_site, sh_wait_peer_cpu, now);
		sh_wait_peer_cpu = -1;
		/* More PEs than CPUs: the PE we wait for may need ours (the
		 * policy's crowded case even when the machine looks calm,
		 * because sleeping PEs are not runnable). */
		int ncpu, running;
		ntbx_spin_load(&ncpu, &running);
		uint32_t w = ntbx_spin_wake_ns();
		if (ntbx_sh.npes > ncpu && b > w)
			b = w;
		sw.budget = b;
		sw.slice = ntbx_sh.internal ? SH_SLEEP_MIN_NS : SH_POLL_MIN_NS;
		sw.slept = 0;
		ntbx_cpu_relax();
		return;
	}
	if (!sw.announced) {
		if (now - *st < sw.budget) {
			ntbx_cpu_relax();
			return;
		}
		if (!ntbx_sh.internal) {   /* before the heap (links) */
			sw.seq = 0;
			sw.announced = 0;
			sw.slept = 1;
			ntbx_futex_wait_ns(&sw.seq, 0, sw.slice);
			if (sw.slice < SH_POLL_MAX_NS)
				sw.slice *= 2;
			return;
		}
		/* From here on a kick bumps the sequence: take it before the
		 * caller's next check, which then either sees the store or is
		 * followed by a kick that changes the sequence (SEQ_CST on
		 * both sides: the kicker stores, fences, loads the count). */
		uint64_t watch = 0;
		if (addr) {
			uintptr_t h = (uintptr_t)addr - (uintptr_t)ntbx_sh.heap;
			uintptr_t d = (uintptr_t)addr - (uintptr_t)ntbx_sh.data;
			if (len > SH_WATCH_LEN_MAX)
				len = SH_WATCH_LEN_MAX;
			if (h < ntbx_sh.heap_size)
				watch = (1 + h) | (uint64_t)len << SH_WATCH_LEN_SHIFT;
			else if (ntbx_sh.data && d < ntbx_sh.data_size)
				watch = (1 + d) | SH_WATCH_DATA |
				        (uint64_t)len << SH_WATCH_LEN_SHIFT;
		}
		sh_announce(watch);
		sw.seq = __atomic_load_n(sh_wake_seq(), __ATOMIC_SEQ_CST);
		sw.announced = 1;
		return;
	}
	ntbx_futex_wait_ns(sh_wake_seq(), sw.seq, sw.slice);
	sw.slept = 1;
	if (sw.slice < SH_SLEEP_MAX_NS)
		sw.slice *= 2;
	sw.seq = __atomic_load_n(sh_wake_seq(), __ATOMIC_SEQ_CST);
}

void ntbx_sh_spin_done(uint64_t *st)
{
	if (!*st)
		return;
	sh_unannounce();
	ntbx_spin_end(&sh_site, ntbx_now_ns() - *st, sw.slept);
	*st = 0;
}

/* Wake the sleepers of the PE whose sleepers word is @sl (this PE's, or
 * another's through its window) after a store into its memory of @len
 * bytes at @l (NULL: anything, a sleeper watching one word included). */
static void kick_at_loc(long *sl, const struct sh_loc *l, size_t len)
{
	/* A progress thread may apply a request before this PE's internal
	 * area is set up (DMA-only start-up): nobody sleeps on it yet. */
	if (!ntbx_sh.internal)
		return;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(sl, __ATOMIC_RELAXED) <= 0)
		return;
	uint64_t w = __atomic_load_n((uint64_t *)((char *)sl + SH_WATCH_DELTA),
	                             __ATOMIC_SEQ_CST);
	if (w && l) {
		uint64_t off = (w & SH_WATCH_OFF_MASK) - 1;
		uint64_t wl = (w >> SH_WATCH_LEN_SHIFT) & SH_WATCH_LEN_MAX;
		/* [off, off + wl) and [l->off, l->off + len) do not meet */
		if ((int)!!(w & SH_WATCH_DATA) != l->kind ||
		    off + wl <= l->off || l->off + len <= off)
			return;   /* not what it waits for */
	}
	{
		uint32_t *seq = (uint32_t *)((char *)sl + SH_WAKE_SEQ_DELTA);
		__atomic_fetch_add(seq, 1, __ATOMIC_SEQ_CST);
		ntbx_futex_wake(seq, 1 << 30);
	}
}

static void kick_at(long *sl)
{
	kick_at_loc(sl, NULL, 0);
}

void ntbx_sh_kick(int pe)
{
	struct sh_loc l;
	long *sl = ntbx_sh_xlate(sh_sleepers(), 8, pe, "kick", &l);
	if (sl)   /* else a PE behind the ring: its progress thread kicks */
		kick_at(sl);
}

/* After a store of @len bytes at @l into PE @pe (a put, an atomic). */
static void kick_store(int pe, const struct sh_loc *l, size_t len)
{
	if (pe == ntbx_sh.me || ntbx_sh.topo < 0) {
		kick_at(sh_sleepers());   /* @l is not filled in for ourselves */
		return;
	}
	struct sh_loc m;
	long *sl = ntbx_sh_xlate(sh_sleepers(), 8, pe, "kick", &m);
	if (sl)
		kick_at_loc(sl, l, len);
}

void ntbx_sh_kick_store(int pe, const struct sh_loc *l, size_t len)
{
	kick_store(pe, l, len);
}

void ntbx_sh_kick_local(void)
{
	kick_at(sh_sleepers());
}

void ntbx_sh_kick_local_at(int kind, uint64_t off, size_t len)
{
	struct sh_loc l = { kind, off };
	kick_at_loc(sh_sleepers(), &l, len);
}

void ntbx_sh_progress(void)
{
	/* Remote requests are applied by each PE's progress threads. */
}

void ntbx_sh_bad_cmp(int cmp)
{
	ntbx_sh_die("wait/test: %d is not a SHMEM_CMP_* comparison", cmp);
}

/* ---------------------------------------------------------- ordering */

void shmem_ctx_fence(shmem_ctx_t ctx)
{
	(void)ctx;
	/* Stores through a window are ordered (x86 TSO, one copy path);
	 * requests to non-neighbours travel in order on one queue pair. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

void shmem_fence(void) { shmem_ctx_fence(SHMEM_CTX_DEFAULT); }

void shmem_ctx_quiet(shmem_ctx_t ctx)
{
	(void)ctx;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	ntbx_sh_remote_quiet();
}

void shmem_quiet(void) { shmem_ctx_quiet(SHMEM_CTX_DEFAULT); }

void shmem_ctx_pe_quiet(shmem_ctx_t ctx, const int *target_pes, size_t npes)
{
	for (size_t i = 0; i < npes; i++)
		ntbx_sh_ctx_pe(ctx, target_pes[i], "shmem_pe_quiet");
	/* Quieting every PE completes the listed ones too. */
	shmem_ctx_quiet(ctx);
}

void shmem_pe_quiet(const int *target_pes, size_t npes)
{
	shmem_ctx_pe_quiet(SHMEM_CTX_DEFAULT, target_pes, npes);
}

void shmem_ctx_session_start(shmem_ctx_t ctx, long options,
                             const shmem_session_config_t *config,
                             long config_mask)
{
	if (!ctx)
		ntbx_sh_die("shmem_ctx_session_start: invalid context");
	if (options & ~SHMEM_SESSION_BATCH)
		ntbx_sh_debug("shmem_ctx_session_start: unknown options %#lx "
		              "ignored", options & ~SHMEM_SESSION_BATCH);
	if ((config_mask & SHMEM_SESSION_TOTAL_OPS) && !config)
		ntbx_sh_die("shmem_ctx_session_start: config_mask names a field "
		            "but config is NULL");
}

void shmem_ctx_session_stop(shmem_ctx_t ctx)
{
	if (!ctx)
		ntbx_sh_die("shmem_ctx_session_stop: invalid context");
}

/* -------------------------------------------------------- signalling */

void shmem_ctx_putmem_signal(shmem_ctx_t ctx, void *dest, const void *source,
                             size_t nelems, uint64_t *sig_addr,
                             uint64_t signal, int sig_op, int pe)
{
	if (sig_op != SHMEM_SIGNAL_SET && sig_op != SHMEM_SIGNAL_ADD)
		ntbx_sh_die("put_signal: %d is not SHMEM_SIGNAL_SET or _ADD",
		            sig_op);
	ntbx_sh_put(ctx, dest, source, nelems, pe);
	shmem_ctx_fence(ctx);
	ntbx_sh_amo(ctx, sig_op == SHMEM_SIGNAL_SET ? NTBX_AMO_SET :
	            NTBX_AMO_FADD, sig_addr, 8, signal, 0, pe);
}

void shmem_putmem_signal(void *dest, const void *source, size_t nelems,
                         uint64_t *sig_addr, uint64_t signal, int sig_op,
                         int pe)
{
	shmem_ctx_putmem_signal(SHMEM_CTX_DEFAULT, dest, source, nelems,
	                        sig_addr, signal, sig_op, pe);
}

void shmem_ctx_putmem_signal_nbi(shmem_ctx_t ctx, void *dest,
                                 const void *source, size_t nelems,
                                 uint64_t *sig_addr, uint64_t signal,
                                 int sig_op, int pe)
{
	shmem_ctx_putmem_signal(ctx, dest, source, nelems, sig_addr, signal,
	                        sig_op, pe);
}

void shmem_putmem_signal_nbi(void *dest, const void *source, size_t nelems,
                             uint64_t *sig_addr, uint64_t signal, int sig_op,
                             int pe)
{
	shmem_ctx_putmem_signal(SHMEM_CTX_DEFAULT, dest, source, nelems,
	                        sig_addr, signal, sig_op, pe);
}

void shmem_ctx_signal_add(shmem_ctx_t ctx, uint64_t *sig_addr,
                          uint64_t signal, int pe)
{
	ntbx_sh_amo(ctx, NTBX_AMO_FADD, sig_addr, 8, signal, 0, pe);
}

void shmem_signal_add(uint64_t *sig_addr, uint64_t signal, int pe)
{
	shmem_ctx_signal_add(SHMEM_CTX_DEFAULT, sig_addr, signal, pe);
}

void shmem_ctx_signal_set(shmem_ctx_t ctx, uint64_t *sig_addr,
                          uint64_t signal, int pe)
{
	ntbx_sh_amo(ctx, NTBX_AMO_SET, sig_addr, 8, signal, 0, pe);
}

void shmem_signal_set(uint64_t *sig_addr, uint64_t signal, int pe)
{
	shmem_ctx_signal_set(SHMEM_CTX_DEFAULT, sig_addr, signal, pe);
}

/* The deprecated untyped names, for C99 and C++ (parenthesised: under C11
 * they are also generic macros). */
void (shmem_wait)(long *ivar, long cmp_value)
{
	shmem_long_wait_until(ivar, SHMEM_CMP_NE, cmp_value);
}

void (shmem_wait_until)(long *ivar, int cmp, long cmp_value)
{
	shmem_long_wait_until(ivar, cmp, cmp_value);
}

uint64_t shmem_signal_fetch(const uint64_t *sig_addr)
{
	return __atomic_load_n(sig_addr, __ATOMIC_ACQUIRE);
}

uint64_t shmem_signal_wait_until(uint64_t *sig_addr, int cmp,
                                 uint64_t cmp_value)
{
	shmem_uint64_wait_until(sig_addr, cmp, cmp_value);
	return __atomic_load_n(sig_addr, __ATOMIC_ACQUIRE);
}

/* ------------------------------------------------------------- locks */

/* The lock word lives on PE 0: 0 free, otherwise holder + 1. */
void shmem_set_lock(long *lock)
{
	need_init("shmem_set_lock");
	uint64_t s = 0, me = (uint64_t)ntbx_sh.me + 1;
	while (ntbx_sh_amo(SHMEM_CTX_DEFAULT, NTBX_AMO_CSWAP, lock, 8, me, 0, 0))
		ntbx_sh_spin(&s);
	ntbx_sh_spin_done(&s);
}

int shmem_test_lock(long *lock)
{
	need_init("shmem_test_lock");
	uint64_t me = (uint64_t)ntbx_sh.me + 1;
	return ntbx_sh_amo(SHMEM_CTX_DEFAULT, NTBX_AMO_CSWAP, lock, 8, me, 0,
	                   0) != 0;
}

void shmem_clear_lock(long *lock)
{
	need_init("shmem_clear_lock");
	shmem_quiet();
	ntbx_sh_amo(SHMEM_CTX_DEFAULT, NTBX_AMO_SET, lock, 8, 0, 0, 0);
	/* Its waiters poll PE 0's word and sleep on their own PE's wake
	 * sequence: kick every PE we reach (one load each when none sleeps;
	 * PEs behind the ring wake from their bounded sleep). */
	for (int pe = 0; pe < ntbx_sh.npes; pe++)
		ntbx_sh_kick(pe);
}

/* ---------------------------------------------------------- contexts */

int shmem_team_create_ctx(shmem_team_t team, long options, shmem_ctx_t *ctx)
{
	if (!team || team->my_pe < 0 || !ctx) {
		if (ctx)
			*ctx = SHMEM_CTX_INVALID;
		return -1;
	}
	struct ntbx_shmem_ctx *c = malloc(sizeof *c);
	if (!c) {
		*ctx = SHMEM_CTX_INVALID;
		return -1;
	}
	c->team = team;
	c->options = options;
	*ctx = c;
	return 0;
}

int shmem_ctx_create(long options, shmem_ctx_t *ctx)
{
	return shmem_team_create_ctx(SHMEM_TEAM_WORLD, options, ctx);
}

void shmem_ctx_destroy(shmem_ctx_t ctx)
{
	if (!ctx || ctx == SHMEM_CTX_DEFAULT)
		return;
	shmem_ctx_quiet(ctx);
	free(ctx);
}

int shmem_ctx_get_team(shmem_ctx_t ctx, shmem_team_t *team)
{
	if (!team)
		return -1;
	if (!ctx) {
		*team = SHMEM_TEAM_INVALID;
		return -1;
	}
	*team = ctx->team;
	return 0;
}

/* Cache management of old Cray systems: nothing to do on coherent memory. */
void shmem_clear_cache_inv(void) {}
void shmem_set_cache_inv(void) {}
void shmem_clear_cache_line_inv(void *dest) { (void)dest; }
void shmem_set_cache_line_inv(void *dest) { (void)dest; }
void shmem_udcflush(void) {}
void shmem_udcflush_line(void *dest) { (void)dest; }
void shmem_pcontrol(const int level, ...) { (void)level; }
