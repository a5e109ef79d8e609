/* SPDX-License-Identifier: MIT */
/*
 * libntbx-shmem set-up: start-up (the environment, fabric join, symmetric
 * heap, static data moved into node memory, the exchange with oshrun or
 * PMIx), finalize and global exit, the queries, and the symmetric address
 * space (which addresses are symmetric, and where another PE's copy is).
 *
 * OpenSHMEM 1.6: Library Setup, Exit, and Query Routines (shmem_init,
 * shmem_finalize, shmem_global_exit, shmem_my_pe, shmem_n_pes,
 * shmem_pe_accessible, shmem_addr_accessible, shmem_ptr, shmem_team_ptr,
 * shmem_info_get_*, shmem_query_initialized, start_pes and the other
 * deprecated names); Thread Support (shmem_init_thread,
 * shmem_query_thread); Cache Management (deprecated, no-ops); the
 * profiling interface's shmem_pcontrol; shmemx_wtime, _register_gettid,
 * _heap_info, _topology.  The start-up environment (SHMEM_*,
 * NTBX_SHMEM_*, NTBX_NODE) is read here, but for the collectives' line of
 * SHMEM_INFO (shmem_coll.c) and the PMIx launcher's variables
 * (shmem_pmix.c).
 */
#include <dlfcn.h>
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
#include "util/settings.h"
#include "util/util.h"
#include "shmem_int.h"
#include "shmemx.h"

struct sh_state ntbx_sh = { .topo = -1, .npes = 1, .pmi_fd = -1 };
struct ntbx_shmem_ctx ntbx_shmem_ctx_default = { SHMEM_TEAM_WORLD, 0 };
struct ntbx_shmem_team ntbx_shmem_team_world = { 0, 1, 1, 0, 0, { 0 }, 0 };
struct ntbx_shmem_team ntbx_shmem_team_shared = { 0, 1, 1, 0, 1, { 0 }, 0 };
static int init_count;
static int thread_level = SHMEM_THREAD_MULTIPLE;


/* "ntbx-shmem: PE N: <msg>" through ntbx's logger (util.h), always: a
 * fatal error, or a SHMEM_DEBUG line the user asked for. */
static void sh_say(const char *fmt, va_list ap)
{
	char who[32];
	snprintf(who, sizeof who, "ntbx-shmem: PE %d", ntbx_sh.me);
	ntbx_vlogp(NTBX_LOG_ERROR, who, fmt, ap);
}

void ntbx_sh_die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	sh_say(fmt, ap);
	va_end(ap);
	fflush(NULL);
	shmem_global_exit(1);
	_exit(1);
}

void ntbx_sh_debug(const char *fmt, ...)
{
	if (!ntbx_sh.debug)
		return;
	va_list ap;
	va_start(ap, fmt);
	sh_say(fmt, ap);
	va_end(ap);
}

void ntbx_sh_need_init(const char *what)
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
	int fd = ntbx_fabric_open_file(ntbx_setting_str(NTBX_SET_SHMEM_FABRIC), file, O_RDWR,
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
	uintptr_t a = NTBX_ALIGN_UP((uintptr_t)r + lead, align);
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
	uintptr_t lo = s.lo & ~(pg - 1), hi = NTBX_ALIGN_UP(s.hi, pg);
	if (s.relro > lo)
		lo = NTBX_ALIGN_UP(s.relro, pg);
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

/* SHMEM_SYMMETRIC_SIZE, whole pages (a bad one: the table's line and
 * default; oshrun refuses it before it starts any PE) */
static size_t parse_heap_size(void)
{
	uint64_t v = ntbx_setting_size(NTBX_SET_SHMEM_SYMMETRIC_SIZE);
	return (size_t)NTBX_ALIGN_UP(v, 4096);
}

static void print_info(void)
{
	if (ntbx_sh.me)
		return;
	if (ntbx_setting_bool(NTBX_SET_SHMEM_VERSION))
		printf("ntbx OpenSHMEM %d.%d\n", SHMEM_MAJOR_VERSION,
		       SHMEM_MINOR_VERSION);
	if (ntbx_setting_bool(NTBX_SET_SHMEM_INFO)) {
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
		printf("  puts and gets by DMA to %d of the other PEs\n",
		       ntbx_sh_dma_pes());
		printf("  fabric               %s\n", ntbx_sh.f ?
		       ntbx_fabric_name(ntbx_sh.f) : "-");
	}
	fflush(stdout);
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
	ntbx_sh.debug = ntbx_setting_bool(NTBX_SET_SHMEM_DEBUG);
	size_t heap_size = parse_heap_size() + SH_INTERNAL_SIZE;
	const char *fab = ntbx_setting_str(NTBX_SET_SHMEM_FABRIC);
	/* oshrun passes its socket; otherwise a PMIx launcher may have
	 * started us (mpirun -x NTBX_SHMEM_FABRIC=NAME ...). */
	ntbx_sh.pmix = !ntbx_setting_env_set(NTBX_SET_SHMEM_PMI_FD) &&
	               ntbx_sh_pmix_launched();
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
		ntbx_sh.threads = (int)ntbx_setting_long(NTBX_SET_SHMEM_THREADS);
		if (!ntbx_sh.pmix) {
			/* oshrun's hand-over (NTBX_NODE is STRICT: refused here) */
			ntbx_sh.me = (int)ntbx_setting_long(NTBX_SET_NODE);
			ntbx_sh.npes = (int)ntbx_setting_long(NTBX_SET_SHMEM_NPES);
			ntbx_sh.pmi_fd = (int)ntbx_setting_long(NTBX_SET_SHMEM_PMI_FD);
			if (ntbx_sh.npes < 1 || ntbx_sh.npes > NTBX_MAX_NODES ||
			    ntbx_sh.me >= ntbx_sh.npes || ntbx_sh.pmi_fd < 0 ||
			    ntbx_setting_bad(NTBX_SET_NODE) ||
			    ntbx_setting_bad(NTBX_SET_SHMEM_NPES) ||
			    ntbx_setting_bad(NTBX_SET_SHMEM_PMI_FD)) {
				ntbx_logp(NTBX_LOG_ERROR, "ntbx-shmem", "inconsistent "
				          "launch environment (start the program with "
				          "oshrun, or with a PMIx launcher such as mpirun)");
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
		ntbx_sh_dma_setup(all);
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
	ntbx_sh_bind();
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
	ntbx_sh_wait_stats();
	ntbx_sh_dma_stop();
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


/* Cache management of old Cray systems: nothing to do on coherent memory. */
void shmem_clear_cache_inv(void) {}
void shmem_set_cache_inv(void) {}
void shmem_clear_cache_line_inv(void *dest) { (void)dest; }
void shmem_set_cache_line_inv(void *dest) { (void)dest; }
void shmem_udcflush(void) {}
void shmem_udcflush_line(void *dest) { (void)dest; }
void shmem_pcontrol(const int level, ...) { (void)level; }
