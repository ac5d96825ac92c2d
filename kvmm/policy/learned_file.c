// SPDX-License-Identifier: MIT
/*
 * A policy state's file (pol_cache_learned_save() bytes), for every
 * program that keeps one: kvmmd --policy-state, kvmm-replay
 * --policy-state, kvmmctl policy-state.  Written through FILE.tmp:
 * write, fsync, rename over FILE, fsync the directory, so a crash leaves
 * the old file or the new one, never half of one.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kvmm/policy/policy.h"

/* -EISDIR, -EINVAL (a FIFO, socket or device) or 0 for a regular file */
static int regular(mode_t mode)
{
	if (S_ISREG(mode))
		return 0;
	return S_ISDIR(mode) ? -EISDIR : -EINVAL;
}

int pol_read_file(const char *path, size_t max, void **out, size_t *len)
{
	struct stat sb;
	char *buf;
	size_t got = 0;
	/* O_NONBLOCK: opening a FIFO would wait for a writer (kvmmd then
	 * hung at start, deaf to SIGTERM); a regular file ignores it */
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC), r = 0;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &sb)) {
		r = -errno;
		goto out;
	}
	r = regular(sb.st_mode);
	if (r)
		goto out;
	if ((uint64_t)sb.st_size > max) {
		r = -EFBIG;
		goto out;
	}
	buf = malloc((size_t)sb.st_size + 1); /* and a NUL, for text */
	if (!buf) {
		r = -ENOMEM;
		goto out;
	}
	while (got < (size_t)sb.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)sb.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			r = n < 0 ? -errno : -EIO;
			free(buf);
			goto out;
		}
		got += (size_t)n;
	}
	buf[got] = '\0';
	*out = buf;
	*len = got;
out:
	close(fd);
	return r;
}

int pol_learned_read_file(const char *path, void **out, size_t *len)
{
	return pol_read_file(path, POL_LEARNED_FILE_MAX, out, len);
}

const char *pol_learned_file_strerror(int e)
{
	switch (e) {
	case -EISDIR:
		return "a directory, not a policy state file";
	case -EINVAL:
		return "not a regular file (a FIFO, socket or device)";
	case -EFBIG:
		return "larger than a policy state can be (1 MiB)";
	default:
		return strerror(-e);
	}
}

/* What lstat says of one of the paths a save writes, into why. */
static int check_one(const char *path, bool tmp, char *why, size_t len)
{
	const char *role = tmp ? " (each save writes it)" : "";
	struct stat sb;
	int r;

	/* missing or out of reach: the read and the save say so then */
	if (lstat(path, &sb))
		return 0;
	if (S_ISLNK(sb.st_mode)) {
		snprintf(
			why, len, "%s%s is a symbolic link: %s", path, role,
			tmp ? "a save does not write through one" :
			      "a save renames a new file over it, which replaces the link, not the file it points to (give that file's path)");
		return -ELOOP;
	}
	r = regular(sb.st_mode);
	if (r)
		snprintf(why, len, "%s%s is %s, not a regular file", path, role,
			 S_ISDIR(sb.st_mode)  ? "a directory" :
			 S_ISFIFO(sb.st_mode) ? "a FIFO" :
			 S_ISSOCK(sb.st_mode) ? "a socket" :
						"a device");
	return r;
}

int pol_learned_check_path(const char *path, char *why, size_t len)
{
	char tmp[PATH_MAX + 8];
	int r;

	if (strlen(path) >= PATH_MAX) {
		snprintf(why, len, "%.40s...: %s", path,
			 strerror(ENAMETOOLONG));
		return -ENAMETOOLONG;
	}
	r = check_one(path, false, why, len);
	if (r)
		return r;
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	return check_one(tmp, true, why, len);
}

/* Write buf to path through path.tmp: fsync, rename, fsync the dir; a
 * directory that could not be synced is an error, the new file in place. */
int pol_learned_write_file(const char *path, const void *buf, size_t len)
{
	char tmp[PATH_MAX + 8];
	char dir[sizeof(tmp)];
	size_t done = 0;
	int fd, r = 0;

	if (strlen(path) >= PATH_MAX)
		return -ENAMETOOLONG;
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	/* not through a link someone put there */
	fd = open(tmp,
		  O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK |
			  O_CLOEXEC,
		  0600);
	if (fd < 0)
		/* ENXIO: a FIFO nobody reads, or a device without one */
		return errno == ENXIO ? -EINVAL : -errno;
	/* a FIFO there took the writes (O_NONBLOCK: its open no longer
	 * waits for a reader, the save stops here) */
	{
		struct stat sb;

		r = fstat(fd, &sb) ? -errno : regular(sb.st_mode);
		if (r) {
			close(fd);
			return r;
		}
	}
	while (done < len) {
		ssize_t n = write(fd, (const char *)buf + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			r = n < 0 ? -errno : -EIO;
			break;
		}
		done += (size_t)n;
	}
	if (!r && fsync(fd))
		r = -errno;
	close(fd);
	if (!r && rename(tmp, path))
		r = -errno;
	if (r) {
		unlink(tmp);
		return r;
	}
	/*
	 * The rename itself must reach the disk: until it does, a power
	 * loss may bring back the file before (or none), and a caller that
	 * said "kept" (a drop answered while the NVMe tier was out,
	 * FILE.nvme-drops) would have said it too soon.  So a directory
	 * that cannot be opened or synced fails the write, the new file in
	 * place; EINVAL is a file system that cannot sync a directory at
	 * all, where the rename is as safe as it gets.
	 */
	snprintf(dir, sizeof(dir), "%s", path);
	fd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fsync(fd) && errno != EINVAL)
		r = -errno;
	close(fd);
	return r;
}

int pol_learned_lock_file(const char *path)
{
	char lock[PATH_MAX + 8];
	int fd, r;

	if (strlen(path) >= PATH_MAX)
		return -ENAMETOOLONG;
	snprintf(lock, sizeof(lock), "%s.lock", path);
	fd = open(lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		r = errno == EWOULDBLOCK ? -EBUSY : -errno;
		close(fd);
		return r;
	}
	return fd;
}
