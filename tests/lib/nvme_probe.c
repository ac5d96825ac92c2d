// SPDX-License-Identifier: MIT
/*
 * The NVMe tier environment probe; see nvme_probe.h.  The probe does what
 * the tier does first (an O_DIRECT file, aligned I/O, a ring) without the
 * tier itself, so that its errors are the environment's alone.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#if HAVE_LIBURING
#include <linux/io_uring.h>
#endif

#include "tests/lib/nvme_probe.h"

#define PROBE_BLOCK 4096

bool t_nvme_unsupported(int err)
{
	switch (-err) {
	/* fcntl(O_DIRECT) refused (tier_nvme's enable_direct), or a build
	 * without liburing (ENOTSUP == EOPNOTSUPP on Linux) */
	case EOPNOTSUPP:
	/* open(O_DIRECT) on a file system without it (tmpfs before 6.6),
	 * or O_DIRECT I/O the file system will not align to */
	case EINVAL:
	/* io_uring_setup on a kernel without io_uring */
	case ENOSYS:
	/* io_uring_setup with kernel.io_uring_disabled or under a seccomp
	 * filter (containers' default profile) */
	case EPERM:
		return true;
	default:
		return false;
	}
}

static int probe_io(int fd)
{
	unsigned char *blk;
	int r = 0;

	if (posix_memalign((void **)&blk, PROBE_BLOCK, PROBE_BLOCK))
		return -ENOMEM;
	memset(blk, 0x5a, PROBE_BLOCK);
	if (pwrite(fd, blk, PROBE_BLOCK, 0) != PROBE_BLOCK) {
		r = errno ? -errno : -EIO;
		goto out;
	}
	if (pread(fd, blk, PROBE_BLOCK, 0) != PROBE_BLOCK)
		r = errno ? -errno : -EIO;
out:
	free(blk);
	return r;
}

static int probe_ring(void)
{
#if HAVE_LIBURING
	struct io_uring_params p = { 0 };
	int fd = (int)syscall(__NR_io_uring_setup, 1, &p);

	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
#else
	return -EOPNOTSUPP;
#endif
}

int t_nvme_probe(const char *path, const char **step)
{
	int fd, r;

	*step = "O_DIRECT open";
	errno = 0;
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_DIRECT | O_CLOEXEC,
		  0600);
	if (fd < 0) {
		r = -errno;
		/* an older tmpfs creates the file before refusing O_DIRECT */
		unlink(path);
		return r;
	}
	*step = "O_DIRECT write and read";
	errno = 0;
	r = probe_io(fd);
	close(fd);
	unlink(path);
	if (r)
		return r;
	*step = HAVE_LIBURING ? "io_uring_setup" :
				"kvmm built without liburing";
	return probe_ring();
}

/* The one skip message: the step, the reason and the path. */
static void __attribute__((noreturn))
nvme_skip(const char *path, const char *step, int err)
{
	t_skip("no O_DIRECT io_uring for %s (%s: %s); set KVMM_NVME_TEST_DIR to a disk-backed directory",
	       path, step, strerror(-err));
}

void t_nvme_require(const char *path)
{
	const char *step;
	int r = t_nvme_probe(path, &step);

	if (r && t_nvme_unsupported(r))
		nvme_skip(path, step, r);
	if (r)
		t_fail("NVMe probe of %s: %s: %s", path, step, strerror(-r));
}

void t_nvme_skip_if_unsupported(int r, const char *path)
{
	char probe[4096];
	const char *step;

	if (!r || !t_nvme_unsupported(r))
		return;
	snprintf(probe, sizeof(probe), "%s.probe", path);
	r = t_nvme_probe(probe, &step);
	if (r && t_nvme_unsupported(r))
		nvme_skip(path, step, r);
}

bool t_nvme_usable(const char *path)
{
	const char *step;
	int r = t_nvme_probe(path, &step);

	if (r && t_nvme_unsupported(r)) {
		printf("no O_DIRECT io_uring for %s (%s: %s)\n", path, step,
		       strerror(-r));
		return false;
	}
	if (r)
		t_fail("NVMe probe of %s: %s: %s", path, step, strerror(-r));
	return true;
}
