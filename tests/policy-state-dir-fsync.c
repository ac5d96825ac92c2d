// SPDX-License-Identifier: MIT
/*
 * pol_learned_write_file() (kvmm/policy/learned_file.c) syncs the
 * directory after its rename, and a sync that fails is its error: the
 * write returned 0 whatever the directory's fsync said, so kvmmd
 * answered a drop while the NVMe tier was out as kept in FILE.nvme-drops
 * (and counted a policy save as saved) when a power loss could still
 * bring back the file before.  This test's fsync() stands in for libc's
 * (the policy library is linked into it): on a directory it fails with
 * the errno the case sets.  EIO: the write fails with -EIO, the new
 * bytes in place; EINVAL (a file system that cannot sync a directory):
 * 0, as the rename is as safe as it gets there; a file's fsync that fails
 * still fails the write before the rename, the old bytes kept.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kvmm/policy/policy.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

static int dir_errno; /* a directory's fsync fails with it (0: not) */
static int file_errno; /* a file's fsync fails with it (0: not) */
static int dir_syncs; /* directory fsyncs seen */

int fsync(int fd)
{
	struct stat sb;

	if (fstat(fd, &sb))
		return -1;
	if (S_ISDIR(sb.st_mode)) {
		dir_syncs++;
		if (dir_errno) {
			errno = dir_errno;
			return -1;
		}
	} else if (file_errno) {
		errno = file_errno;
		return -1;
	}
	return (int)syscall(SYS_fsync, fd);
}

/* path's bytes are want's */
static void expect_bytes(const char *path, const char *want)
{
	void *buf = NULL;
	size_t len = 0;

	t_ok(pol_learned_read_file(path, &buf, &len));
	if (len != strlen(want) || memcmp(buf, want, len))
		t_fail("%s holds '%.*s', expected '%s'", path, (int)len,
		       (char *)buf, want);
	free(buf);
}

int main(void)
{
	char dir[64], path[512], tmp[520];

	td_tmp_path("kvmm-state-dirsync-XXXXXX", dir, sizeof(dir));
	if (!mkdtemp(dir))
		t_fail("mkdtemp: %s", strerror(errno));
	snprintf(path, sizeof(path), "%s/policy.state", dir);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);

	/* every sync works: 0, one directory sync */
	t_assert_eq(pol_learned_write_file(path, "one", 3), 0);
	t_assert_eq(dir_syncs, 1);
	expect_bytes(path, "one");
	printf("syncs work: 0, the directory synced once\n");

	/* the directory's sync fails: the error, the new file in place */
	dir_errno = EIO;
	t_assert_eq(pol_learned_write_file(path, "two", 3), -EIO);
	t_assert_eq(dir_syncs, 2);
	expect_bytes(path, "two");
	t_assert(access(tmp, F_OK) && errno == ENOENT);
	printf("directory sync EIO: -EIO, the new bytes in place\n");

	/* a file system that cannot sync a directory: 0 */
	dir_errno = EINVAL;
	t_assert_eq(pol_learned_write_file(path, "three", 5), 0);
	t_assert_eq(dir_syncs, 3);
	expect_bytes(path, "three");
	printf("directory sync EINVAL: 0\n");

	/* the file's own sync fails: no rename, no directory sync, the
	 * old bytes kept and no FILE.tmp left */
	dir_errno = 0;
	file_errno = EIO;
	t_assert_eq(pol_learned_write_file(path, "four", 4), -EIO);
	t_assert_eq(dir_syncs, 3);
	expect_bytes(path, "three");
	t_assert(access(tmp, F_OK) && errno == ENOENT);
	printf("file sync EIO: -EIO, the old bytes kept\n");

	t_ok(unlink(path));
	t_ok(rmdir(dir));
	return 0;
}
