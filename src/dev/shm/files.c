/* SPDX-License-Identifier: MIT */
/*
 * A fabric's files, opened safely.
 *
 * The fabric root (/dev/shm by default) is writable by every user, so a
 * name there proves nothing: another user can create a fabric's directory
 * before its owner does (and read the owner's bytes once the owner joins
 * it), or plant a symlink where a file is expected (and make the owner
 * write through it).  So (DESIGN.md, trust boundaries):
 *
 *   - the directory is opened once, O_DIRECTORY | O_NOFOLLOW, and its owner
 *     and mode are checked on the descriptor: ours, or a group fabric whose
 *     group we are in; never open to other users;
 *   - every file is opened relative to that descriptor (openat), with
 *     O_NOFOLLOW, and checked with fstat: a regular file (or FIFO) with the
 *     directory's owner (or, in a group fabric, the fabric's group), no
 *     access for other users, and at least the size
 *     that will be mapped (a short file would fault on access: SIGBUS);
 *   - files are created with O_CREAT | O_EXCL | O_NOFOLLOW and their mode
 *     and group set explicitly (the umask decides nothing);
 *   - mappings sit between two inaccessible guard pages, so a stray access
 *     just past a window faults instead of reaching other memory.
 *
 * Every refusal says what was found and what to do, once, in ntbx_errmsg.
 */
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dev/shm/shm.h"
#include "util/settings.h"
#include "util/util.h"

#define GUARD 4096ul

static int in_group(gid_t g)
{
	if (getegid() == g)
		return 1;
	gid_t list[256];
	int n = getgroups(256, list);
	for (int i = 0; i < n; i++)
		if (list[i] == g)
			return 1;
	return 0;
}

static int keeper_adopt(const char *dir, int *fd_out, struct stat *st);

int shm_dir_open(const char *dir, int *fd_out, struct stat *st)
{
	/* A program exec'd after its root ancestor dropped privileges under
	 * ntbx run: the ancestor's keeper serves it (see the keeper below). */
	if (keeper_adopt(dir, fd_out, st) == 0)
		return 0;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		if (e == ENOENT)
			return -ENOENT;
		if (e == ELOOP || e == ENOTDIR)
			return ntbx_err(ELOOP, "%s is not a fabric directory but a "
			                "symlink or a file: ntbx refuses it; remove "
			                "it, or use another fabric name", dir);
		return ntbx_err(e, "cannot open fabric directory %s: %s", dir,
		                strerror(e));
	}
	if (fstat(fd, st) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	int group = (st->st_mode & 070) == 070 && in_group(st->st_gid);
	if (st->st_uid != geteuid() && !group) {
		close(fd);
		return ntbx_err(EACCES, "fabric directory %s belongs to uid %u, "
		                "not to you (uid %u), and is not a group fabric of "
		                "yours: ntbx refuses another user's fabric; use "
		                "another name (or have its owner remove it)", dir,
		                (unsigned)st->st_uid, (unsigned)geteuid());
	}
	if (st->st_mode & 007) {
		close(fd);
		return ntbx_err(EACCES, "fabric directory %s is open to every user "
		                "(mode %03o): ntbx refuses it; destroy and create "
		                "it again", dir, (unsigned)(st->st_mode & 0777));
	}
	*fd_out = fd;
	return 0;
}

static int open_at(int dfd, const struct stat *dst, const char *name,
                   int flags, int own);

static int file_open(int dfd, const struct stat *dst, const char *name,
                     int flags, int fifo, uint64_t min_size, int own)
{
	int fd = open_at(dfd, dst, name, flags, own);
	if (fd < 0) {
		if (errno == ELOOP)
			return ntbx_err(ELOOP, "fabric file %s is a symlink: ntbx "
			                "refuses it (destroy and create the fabric "
			                "again)", name);
		return -errno;
	}
	struct stat st;
	const char *bad = NULL;
	if (fstat(fd, &st) < 0)
		bad = "cannot be examined";
	else if (fifo ? !S_ISFIFO(st.st_mode) : !S_ISREG(st.st_mode))
		bad = fifo ? "is not a FIFO" : "is not a regular file";
	else if (st.st_uid != dst->st_uid &&
	         !((dst->st_mode & 070) == 070 && st.st_gid == dst->st_gid))
		bad = "belongs to another user than its fabric";   /* a group
		        * fabric's members make files of the fabric's group */
	else if (st.st_mode & 007)
		bad = "is open to every user";
	else if (!fifo && (uint64_t)st.st_size < min_size)
		bad = "is shorter than its layout";
	if (bad) {
		ntbx_fd_close(fd);
		return ntbx_err(EPROTO, "fabric file %s %s: ntbx refuses it "
		                "(destroy and create the fabric again)", name, bad);
	}
	return fd;
}

int shm_file_open(int dfd, const struct stat *dst, const char *name,
                  int flags, int fifo, uint64_t min_size)
{
	return file_open(dfd, dst, name, flags, fifo, min_size, 0);
}

int shm_file_own(int dfd, const struct stat *dst, const char *name,
                 int flags, int fifo, uint64_t min_size)
{
	return file_open(dfd, dst, name, flags, fifo, min_size, 1);
}

int shm_file_create(int dfd, const char *name, mode_t mode, int gid,
                    uint64_t size)
{
	int fd = openat(dfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW |
	                O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	if (fchmod(fd, mode) < 0 ||
	    (gid >= 0 && fchown(fd, (uid_t)-1, (gid_t)gid) < 0) ||
	    (size && ftruncate(fd, (off_t)size) < 0)) {
		int e = errno;
		close(fd);
		unlinkat(dfd, name, 0);
		return -e;
	}
	return fd;
}

static size_t page_up(uint64_t n)
{
	return (size_t)NTBX_ALIGN_UP(n, GUARD);
}

int shm_map_fd(int fd, uint64_t size, int writable, void **out)
{
	size_t len = page_up(size);
	uint8_t *r = mmap(NULL, len + 2 * GUARD, PROT_NONE,
	                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (r == MAP_FAILED)
		return -errno;
	void *p = mmap(r + GUARD, len, PROT_READ | (writable ? PROT_WRITE : 0),
	               MAP_SHARED | MAP_FIXED, fd, 0);
	if (p == MAP_FAILED) {
		int e = errno;
		munmap(r, len + 2 * GUARD);
		return -e;
	}
	*out = p;
	return 0;
}

void shm_unmap(void *p, uint64_t size)
{
	if (p)
		munmap((uint8_t *)p - GUARD, page_up(size) + 2 * GUARD);
}

int shm_map_file(int dfd, const struct stat *dst, const char *name,
                 uint64_t size, int writable, void **out)
{
	int fd = shm_file_open(dfd, dst, name, writable ? O_RDWR : O_RDONLY, 0,
	                       size);
	if (fd < 0)
		return fd;
	int r = shm_map_fd(fd, size, writable, out);
	close(fd);
	return r;
}

/* ------------------------------------------------------------ the keeper
 *
 * A process that drops privileges (setuid to www-data, postgres, ...)
 * keeps every descriptor and mapping it has, but can no longer look a name
 * up in the fabric directory (0700, another owner): the kernel checks
 * search permission on the directory at each lookup, openat on an open
 * directory descriptor included.  Some files cannot be opened in advance:
 * the wake FIFOs that peers make later, our own new ones, and a fresh
 * open file description of node-N.live for each forked child.  So before
 * the drop, shm_keeper_start forks a *keeper*: a process that keeps the
 * old credentials and the checked directory descriptor, holds one end of a
 * socket pair whose other end only this process (and its forked children:
 * close-on-exec) holds, and opens, makes or unlinks files of that one
 * directory on request, passing descriptors back with SCM_RIGHTS.  It
 * grants nothing new: whoever can talk to it had the fabric open already;
 * names are plain file names (no '/', no leading '.'), opened with
 * O_NOFOLLOW relative to the checked directory.  It runs only system
 * calls (no libc locks: it is forked from a possibly threaded program, by
 * a raw clone, so no atfork handler of the program runs), is a grandchild
 * (double fork: the program never sees it as a child), and exits when the
 * last holder of the other end is gone (end of file).
 *
 * exec: a program often drops privileges and then execs the server
 * (runuser, su, start-stop-daemon --chuid, sshd's privilege separation):
 * the new image has nothing open and cannot look the directory up.  So
 * our end of the socket pair and a descriptor of the checked directory
 * are inherited across exec (not close-on-exec), named in NTBX_KEEPER
 * ("KEEPER_FD,DIR_FD,DIRECTORY"); a new image that is refused the
 * directory adopts them (keeper_adopt) and opens every file through the
 * keeper.  Only descendants of the process that held the fabric get
 * them, and each file is still checked against the directory's owner.
 */
#include <dlfcn.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

enum { KOP_OPEN = 1, KOP_MKFIFO = 2, KOP_UNLINK = 3 };
struct kreq {
	int op, flags, mode, gid;
	char name[64];
};

static int g_keep_fd = -1;          /* our end, close-on-exec */
static dev_t g_keep_dev;
static ino_t g_keep_ino;            /* the directory it serves */
static long (*real_syscall)(long, ...);

static int name_ok(const char *n)
{
	size_t len = strnlen(n, 64);
	return len > 0 && len < 64 && n[0] != '.' && !memchr(n, '/', len);
}

#define KS(...) real_syscall(__VA_ARGS__)

static void keeper_serve(int ctl, int dfd)
{
	for (;;) {
		struct kreq q;
		union { struct cmsghdr h; char b[CMSG_SPACE(sizeof(int))]; } cb;
		struct iovec iov = { &q, sizeof q };
		struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
		                    .msg_control = cb.b,
		                    .msg_controllen = sizeof cb.b };
		long n = KS(SYS_recvmsg, ctl, &m, MSG_CMSG_CLOEXEC);
		if (n == 0 || (n < 0 && errno != EINTR))
			return;   /* every holder of the other end is gone */
		if (n < 0)
			continue;
		struct cmsghdr *h = CMSG_FIRSTHDR(&m);
		if (!h || h->cmsg_type != SCM_RIGHTS ||
		    h->cmsg_len != CMSG_LEN(sizeof(int)))
			continue;
		int rep;
		memcpy(&rep, CMSG_DATA(h), sizeof rep);
		int res = -EINVAL, fd = -1;
		q.name[63] = 0;
		if (n == (long)sizeof q && name_ok(q.name)) {
			int acc = q.flags & O_ACCMODE;
			int fl = acc | (q.flags & O_NONBLOCK) | O_NOFOLLOW | O_CLOEXEC;
			switch (q.op) {
			case KOP_OPEN:
				fd = (int)KS(SYS_openat, dfd, q.name, fl, 0);
				res = fd < 0 ? -errno : 0;
				break;
			case KOP_MKFIFO:
				KS(SYS_unlinkat, dfd, q.name, 0);
				if (KS(SYS_mknodat, dfd, q.name,
				       S_IFIFO | (q.mode & 0660), 0) < 0) {
					res = -errno;
					break;
				}
				if (q.gid >= 0)
					KS(SYS_fchownat, dfd, q.name, -1, q.gid,
					   AT_SYMLINK_NOFOLLOW);
				fd = (int)KS(SYS_openat, dfd, q.name,
				             O_RDWR | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC, 0);
				res = fd < 0 ? -errno : 0;
				if (fd >= 0)   /* the umask applied to mknodat */
					KS(SYS_fchmod, fd, q.mode & 0660);
				break;
			case KOP_UNLINK:
				res = KS(SYS_unlinkat, dfd, q.name, 0) < 0 ? -errno : 0;
				break;
			}
		}
		union { struct cmsghdr h; char b[CMSG_SPACE(sizeof(int))]; } ob;
		struct iovec oiov = { &res, sizeof res };
		struct msghdr om = { .msg_iov = &oiov, .msg_iovlen = 1 };
		if (fd >= 0) {
			om.msg_control = ob.b;
			om.msg_controllen = sizeof ob.b;
			struct cmsghdr *oh = CMSG_FIRSTHDR(&om);
			oh->cmsg_level = SOL_SOCKET;
			oh->cmsg_type = SCM_RIGHTS;
			oh->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(oh), &fd, sizeof fd);
		}
		KS(SYS_sendmsg, rep, &om, MSG_NOSIGNAL | MSG_DONTWAIT);
		KS(SYS_close, rep);
		if (fd >= 0)
			KS(SYS_close, fd);
	}
}

/* Hand our keeper to the images this process (and its children) exec. */
static void keeper_export(int dfd, const char *dir)
{
	int d = fcntl(dfd, F_DUPFD, 3);
	if (d < 0)
		return;
	d = ntbx_fd_own(d);
	int fl = fcntl(g_keep_fd, F_GETFD);
	char v[PATH_MAX + 32];
	if (fl < 0 || fcntl(g_keep_fd, F_SETFD, fl & ~FD_CLOEXEC) < 0 ||
	    (size_t)snprintf(v, sizeof v, "%d,%d,%s", g_keep_fd, d, dir) >=
	    sizeof v || setenv("NTBX_KEEPER", v, 1) < 0)
		ntbx_fd_close(d);
}

static int keeper_adopt(const char *dir, int *fd_out, struct stat *st)
{
	const char *e = ntbx_setting_str(NTBX_SET_KEEPER);
	int k, d, n = 0;
	if (!e || sscanf(e, "%d,%d,%n", &k, &d, &n) != 2 || !n ||
	    strcmp(e + n, dir) != 0)
		return -ENOENT;
	struct stat ks;
	if (fstat(k, &ks) < 0 || !S_ISSOCK(ks.st_mode) || fstat(d, st) < 0 ||
	    !S_ISDIR(st->st_mode) || (st->st_mode & 007))
		return -ENOENT;
	if (g_keep_fd >= 0 && g_keep_fd != k)
		return -ENOENT;   /* a keeper of our own already */
	int fd = fcntl(d, F_DUPFD_CLOEXEC, 3);
	if (fd < 0)
		return -errno;
	if (!real_syscall)
		*(void **)&real_syscall = dlsym(RTLD_NEXT, "syscall");
	if (!real_syscall)
		real_syscall = syscall;
	/* ours, as they were the exec'ing image's (they sit high already,
	 * unless this image has a lower descriptor limit) */
	int k2 = ntbx_fd_own(k), d2 = ntbx_fd_own(d);
	char v[PATH_MAX + 32];
	if ((k2 != k || d2 != d) &&
	    (size_t)snprintf(v, sizeof v, "%d,%d,%s", k2, d2, dir) < sizeof v)
		setenv("NTBX_KEEPER", v, 1);
	k = k2;
	g_keep_fd = k;
	g_keep_dev = st->st_dev;
	g_keep_ino = st->st_ino;
	*fd_out = fd;
	return 0;
}

int shm_keeper_start(int dfd, const struct stat *dst, const char *dir)
{
	if (g_keep_fd >= 0)
		return 0;
	if (!real_syscall)
		*(void **)&real_syscall = dlsym(RTLD_NEXT, "syscall");
	if (!real_syscall)
		real_syscall = syscall;
	int sv[2];
	if (KS(SYS_socketpair, AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	/* Raw clone, twice: no atfork handler runs, and the keeper is a
	 * grandchild that the program never waits for. */
	long pid = KS(SYS_clone, SIGCHLD, 0, 0, 0, 0);
	if (pid < 0) {
		int e = errno;
		KS(SYS_close, sv[0]);
		KS(SYS_close, sv[1]);
		return -e;
	}
	if (pid == 0) {
		long p2 = KS(SYS_clone, SIGCHLD, 0, 0, 0, 0);
		if (p2 != 0)
			KS(SYS_exit_group, p2 < 0);
		/* the keeper: nothing but the directory and its end */
		int ctl = sv[1], d = dfd;
		int lo = ctl < d ? ctl : d, hi = ctl < d ? d : ctl;
		if (lo > 0)
			KS(SYS_close_range, 0, lo - 1, 0);
		if (hi > lo + 1)
			KS(SYS_close_range, lo + 1, hi - 1, 0);
		KS(SYS_close_range, hi + 1, ~0u, 0);
		sigset_t all;
		sigfillset(&all);
		sigdelset(&all, SIGKILL);
		KS(SYS_rt_sigprocmask, SIG_SETMASK, &all, NULL, sizeof(long));
		keeper_serve(ctl, d);
		KS(SYS_exit_group, 0);
	}
	KS(SYS_close, sv[1]);
	int st;
	while (KS(SYS_wait4, pid, &st, 0, NULL) < 0 && errno == EINTR)
		;
	g_keep_fd = ntbx_fd_own(sv[0]);
	g_keep_dev = dst->st_dev;
	g_keep_ino = dst->st_ino;
	keeper_export(dfd, dir);
	return 0;
}

/* Ask the keeper (bounded: 2 s).  The fd, 0 for done, or -errno. */
static int keeper_ask(const struct stat *dst, int op, const char *name,
                      int flags, int mode, int gid)
{
	if (g_keep_fd < 0 || dst->st_dev != g_keep_dev ||
	    dst->st_ino != g_keep_ino || ntbx_sandboxed)
		return -EACCES;
	struct kreq q;
	memset(&q, 0, sizeof q);
	q.op = op;
	q.flags = flags;
	q.mode = mode;
	q.gid = gid;
	if (strlen(name) >= sizeof q.name)
		return -ENAMETOOLONG;
	strcpy(q.name, name);
	int sv[2];
	if (KS(SYS_socketpair, AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	union { struct cmsghdr h; char b[CMSG_SPACE(sizeof(int))]; } cb;
	memset(&cb, 0, sizeof cb);
	struct iovec iov = { &q, sizeof q };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
	                    .msg_control = cb.b, .msg_controllen = sizeof cb.b };
	struct cmsghdr *h = CMSG_FIRSTHDR(&m);
	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(h), &sv[1], sizeof(int));
	int r = -EIO;
	if (KS(SYS_sendmsg, g_keep_fd, &m, MSG_NOSIGNAL) != (long)sizeof q) {
		r = -errno;
		goto out;
	}
	KS(SYS_close, sv[1]);
	sv[1] = -1;
	struct pollfd p = { sv[0], POLLIN, 0 };
	if (KS(SYS_poll, &p, 1, 2000) != 1) {
		r = -ETIMEDOUT;
		goto out;
	}
	int res = -EIO;
	union { struct cmsghdr h; char b[CMSG_SPACE(sizeof(int))]; } ob;
	struct iovec oiov = { &res, sizeof res };
	struct msghdr om = { .msg_iov = &oiov, .msg_iovlen = 1,
	                     .msg_control = ob.b, .msg_controllen = sizeof ob.b };
	long n = KS(SYS_recvmsg, sv[0], &om, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (n != (long)sizeof res) {
		r = -EIO;
		goto out;
	}
	r = res;
	struct cmsghdr *oh = CMSG_FIRSTHDR(&om);
	if (oh && oh->cmsg_type == SCM_RIGHTS &&
	    oh->cmsg_len == CMSG_LEN(sizeof(int))) {
		memcpy(&r, CMSG_DATA(oh), sizeof r);
		if (res < 0) {   /* cannot happen: a descriptor with an error */
			KS(SYS_close, r);
			r = res;
		}
	}
out:
	KS(SYS_close, sv[0]);
	if (sv[1] >= 0)
		KS(SYS_close, sv[1]);
	return r;
}

/*
 * A descriptor the library opens for itself, moved to SHM_FD_LOW or above
 * (close-on-exec kept): these are opened in the middle of a program's life
 * (a wake object's FIFO at its first sleep, a peer's FIFO at the first
 * ring), and one that took the lowest free number would take the number
 * the program's next socket() or open() gets from the kernel, which some
 * programs rely on (a socket on the number of one just closed, close(0)
 * then open()).  If the limit on descriptors is lower, it stays.
 */
#define SHM_FD_LOW 64

static int fd_high(int fd)
{
	if (fd < 0 || fd >= SHM_FD_LOW)
		return fd;
	int hi = fcntl(fd, F_DUPFD_CLOEXEC, SHM_FD_LOW);
	if (hi < 0)
		return fd;
	close(fd);
	return hi;
}

/* @own: a descriptor the library keeps (util.h's ntbx_fd_own), moved
 * straight to the library's base instead of to SHM_FD_LOW first: a forked
 * child's identity (node-N.live) is one per short connection, and the
 * two moves cost two system calls and a close more than one. */
static int open_at(int dfd, const struct stat *dst, const char *name,
                   int flags, int own)
{
	if (ntbx_sandboxed) {   /* nothing new (util.h) */
		errno = EACCES;
		return -1;
	}
	int fd = openat(dfd, name, flags | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && (errno == EACCES || errno == EPERM)) {
		int e = errno;
		fd = keeper_ask(dst, KOP_OPEN, name, flags, 0, -1);
		if (fd < 0) {
			errno = fd == -EACCES ? e : -fd;
			return -1;
		}
	}
	return own ? ntbx_fd_own_cloexec(fd) : fd_high(fd);
}

int shm_open_at(int dfd, const struct stat *dst, const char *name, int flags)
{
	return open_at(dfd, dst, name, flags, 0);
}

int shm_open_own(int dfd, const struct stat *dst, const char *name, int flags)
{
	return open_at(dfd, dst, name, flags, 1);
}

int shm_fifo_make(int dfd, const struct stat *dst, const char *name,
                  mode_t mode, int gid)
{
	if (ntbx_sandboxed)
		return -EACCES;   /* nothing new (util.h) */
	unlinkat(dfd, name, 0);
	if (mknodat(dfd, name, S_IFIFO | mode, 0) < 0) {
		int e = errno;
		if (e != EACCES && e != EPERM)
			return -e;
		int fd = keeper_ask(dst, KOP_MKFIFO, name, 0, (int)mode, gid);
		return fd == -EACCES ? -e : fd_high(fd);
	}
	int fd = openat(dfd, name, O_RDWR | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		unlinkat(dfd, name, 0);
		return -e;
	}
	/* the mode explicitly (the umask applied to mknodat), and the
	 * fabric's group: group members ring us */
	if (fchmod(fd, mode) < 0 ||
	    (gid >= 0 && fchown(fd, (uid_t)-1, (gid_t)gid) < 0))
		ntbx_log(NTBX_LOG_WARN, "cannot give %s mode %03o and group %d: %s",
		         name, (unsigned)mode, gid, strerror(errno));
	return fd_high(fd);
}

int shm_file_unlink(int dfd, const struct stat *dst, const char *name)
{
	if (unlinkat(dfd, name, 0) == 0)
		return 0;
	int e = errno;
	if (e != EACCES && e != EPERM)
		return -e;
	int r = keeper_ask(dst, KOP_UNLINK, name, 0, 0, -1);
	return r == -EACCES ? -e : r;
}
