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
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dev/shm.h"
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

int shm_dir_open(const char *dir, int *fd_out, struct stat *st)
{
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

int shm_file_open(int dfd, const struct stat *dst, const char *name,
                  int flags, int fifo, uint64_t min_size)
{
	int fd = openat(dfd, name, flags | O_NOFOLLOW | O_CLOEXEC);
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
		close(fd);
		return ntbx_err(EPROTO, "fabric file %s %s: ntbx refuses it "
		                "(destroy and create the fabric again)", name, bad);
	}
	return fd;
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
	return (size_t)((n + GUARD - 1) & ~(uint64_t)(GUARD - 1));
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
