// SPDX-License-Identifier: MIT
/*
 * NVMe tier: the claim of its file, at kvmmd's start before any block
 * size is known (tier_nvme_claim()): made if missing, locked against a
 * second kvmmd (nvme_lock_file()), switched to O_DIRECT
 * (nvme_enable_direct()) and refused when it holds something that is not
 * a kvmm tier; a file the claim made is taken away again when the claim
 * fails.  tier_nvme_open() (tier_nvme.c) takes the claimed fd, or locks
 * and switches a file it opens itself with the same two calls.
 */
#include "tier_nvme_priv.h"

#include "vmm/vmm.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#if HAVE_LIBURING

/* ", a tmpfs file system" etc. for the O_DIRECT error message. */
static const char *path_fs_note(int fd)
{
	struct statfs sfs;

	if (fstatfs(fd, &sfs))
		return "";
	switch ((unsigned long)sfs.f_type) {
	case TMPFS_MAGIC:
		return " (it is on tmpfs, which has no O_DIRECT)";
	case RAMFS_MAGIC:
		return " (it is on ramfs, which has no O_DIRECT)";
	case OVERLAYFS_SUPER_MAGIC:
		return " (it is on overlayfs)";
	default:
		return "";
	}
}

/* O_DIRECT on fd, or -EOPNOTSUPP with a line saying why. */
int nvme_enable_direct(int fd, const char *path)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return -errno;
	if (fcntl(fd, F_SETFL, fl | O_DIRECT) == 0)
		return 0;
	vmm_log(VMM_LOG_ERR,
		"tier_nvme: %s does not support O_DIRECT%s; put the NVMe tier on a disk-backed file system or a block device",
		path, path_fs_note(fd));
	return -EOPNOTSUPP;
}

/*
 * One tier per file: two daemons (one per GPU, say) on the same file would
 * write each other's slots and serve each other's bytes under their own
 * headers.  A POSIX record lock on the whole file, not flock(): the ring
 * holds the file registered and lets it go only when its teardown runs,
 * after close() and even after the process is gone, so a lock that lives
 * with the file (flock, OFD) would outlast the tier and refuse a quick
 * restart; a POSIX lock ends with close() of the fd or the process.
 */
int nvme_lock_file(int fd, const char *path)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	int r;

	if (!fcntl(fd, F_SETLK, &fl))
		return 0;
	r = -errno;
	if (r == -EACCES || r == -EAGAIN) {
		struct flock who = { .l_type = F_WRLCK, .l_whence = SEEK_SET };

		if (fcntl(fd, F_GETLK, &who) || who.l_type == F_UNLCK)
			who.l_pid = 0;
		vmm_log(VMM_LOG_ERR,
			"tier_nvme: %s is in use by another NVMe tier (process %d): each kvmmd needs its own --nvme-path",
			path, (int)who.l_pid);
		return -EBUSY;
	}
	vmm_log(VMM_LOG_ERR, "tier_nvme: %s: locking: %s", path, strerror(-r));
	return r;
}

/* The first 4 KiB: zeros (never formatted), a kvmm superblock (ours,
 * whatever its geometry), or something else (-ENOTEMPTY). */
static int check_contents(int fd, const char *path, bool format_any)
{
	uint64_t *buf, size = 0;
	struct stat st;
	ssize_t n;
	bool zero = true;
	int r = 0;

	if (fstat(fd, &st))
		return -errno;
	if (S_ISREG(st.st_mode))
		size = (uint64_t)st.st_size;
	else if (S_ISBLK(st.st_mode) && ioctl(fd, BLKGETSIZE64, &size))
		return -errno;
	if (posix_memalign((void **)&buf, NVME_ALIGN, NVME_ALIGN))
		return -ENOMEM;
	n = pread(fd, buf, NVME_ALIGN, 0);
	if (n < 0) {
		r = -errno;
		vmm_log(VMM_LOG_ERR, "tier_nvme: reading %s: %s", path,
			strerror(-r));
		goto out;
	}
	for (ssize_t i = 0; i < n / 8; i++)
		zero = zero && !buf[i];
	if (n < 8 || zero || buf[0] == TIER_NVME_SB_MAGIC)
		goto out;
	if (format_any) {
		vmm_log(VMM_LOG_WARN,
			"tier_nvme: %s holds no kvmm tier (%llu bytes): formatting it, as --nvme-format asks",
			path, (unsigned long long)size);
		goto out;
	}
	vmm_log(VMM_LOG_ERR,
		"tier_nvme: %s holds something that is not a kvmm NVMe tier (%llu bytes, no kvmm superblock): not formatting it; give --nvme-format to format it (its contents are lost), or another --nvme-path",
		path, (unsigned long long)size);
	r = -ENOTEMPTY;
out:
	free(buf);
	return r;
}

/*
 * Open path, made if missing; *made says whether this call made it.  A
 * path that names a dangling symbolic link is made through the link,
 * as open(O_CREAT) did, but not counted as made: only a file this call
 * surely made is ever taken away.
 */
static int open_or_make(const char *path, bool *made)
{
	int f = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

	*made = f >= 0;
	if (f >= 0 || errno != EEXIST)
		return f;
	f = open(path, O_RDWR | O_CLOEXEC);
	if (f < 0 && errno == ENOENT)
		f = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	return f;
}

/*
 * A claim that fails takes away the file it made (no O_DIRECT there, say:
 * a refused start left an empty file behind), if the path still names
 * it.  Not when the lock failed: another kvmmd opened the new file and
 * locked it first, and it is that kvmmd's tier now.
 */
static void unmake_file(int fd, const char *path)
{
	if (!tier_nvme_unmake(fd, path))
		vmm_log(VMM_LOG_INFO,
			"tier_nvme: removed %s, which this claim made", path);
}

/*
 * unlink(path) of a path through a symbolic link removed the link (an
 * operator's, there before the start) and left the file the claim made
 * through it: the file the link leads to goes instead.
 */
int tier_nvme_unmake(int fd, const char *path)
{
	struct stat fst, pst;
	char *real = realpath(path, NULL);
	int r = 0;

	if (!real)
		return -errno;
	if (fstat(fd, &fst) || lstat(real, &pst)) {
		r = -errno;
		goto out;
	}
	if (!S_ISREG(fst.st_mode) || !S_ISREG(pst.st_mode) ||
	    fst.st_dev != pst.st_dev || fst.st_ino != pst.st_ino) {
		r = -ESTALE;
		goto out;
	}
	if (unlink(real))
		r = -errno;
out:
	free(real);
	return r;
}

int tier_nvme_claim(const char *path, bool format_any, int *fd)
{
	bool made;
	int r, f = open_or_make(path, &made);

	if (f < 0) {
		r = -errno;
		vmm_log(VMM_LOG_ERR, "tier_nvme: open %s: %s", path,
			strerror(-r));
		return r;
	}
	r = nvme_lock_file(f, path);
	if (r) {
		close(f);
		return r;
	}
	r = nvme_enable_direct(f, path);
	if (!r)
		r = check_contents(f, path, format_any);
	if (r) {
		if (made)
			unmake_file(f, path); /* while the lock holds */
		close(f);
		return r;
	}
	*fd = f;
	return 0;
}

#endif /* HAVE_LIBURING */
