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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kvmm/policy/policy.h"

/* Read all of path (at most POL_LEARNED_FILE_MAX bytes) into a new buffer. */
int pol_learned_read_file(const char *path, void **out, size_t *len)
{
	struct stat sb;
	char *buf;
	size_t got = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC), r = 0;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &sb)) {
		r = -errno;
		goto out;
	}
	if (!S_ISREG(sb.st_mode) || sb.st_size > POL_LEARNED_FILE_MAX) {
		r = -EFBIG;
		goto out;
	}
	buf = malloc(sb.st_size ? (size_t)sb.st_size : 1);
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
	*out = buf;
	*len = got;
out:
	close(fd);
	return r;
}

/* Write buf to path through path.tmp: fsync, rename, fsync the dir. */
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
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
		  0600);
	if (fd < 0)
		return -errno;
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
	/* the rename itself must reach the disk */
	snprintf(dir, sizeof(dir), "%s", path);
	fd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		(void)fsync(fd);
		close(fd);
	}
	return 0;
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
