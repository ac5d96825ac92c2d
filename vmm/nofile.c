/* SPDX-License-Identifier: MIT */
/*
 * RLIMIT_NOFILE for programs that hold an fd per page: kvmmd's pool (one
 * per created page).  A client holds none per page it imports (the host
 * backend keeps a mapping instead), only the fds one reply brings until
 * they are imported.  Distributions start processes with a soft
 * limit of 1024 and a much higher hard one, which a process may take
 * without privilege; past the hard limit it needs CAP_SYS_RESOURCE and
 * stays under fs.nr_open.  Called by programs only (kvmmd, kvmm-replay):
 * a library must not change its host process's limits.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "vmm/vmm.h"

/* The kernel's default when /proc/sys/fs/nr_open cannot be read. */
#define NR_OPEN_DEFAULT 1048576

static uint64_t nr_open(void)
{
	unsigned long long v = 0;
	FILE *f = fopen("/proc/sys/fs/nr_open", "re");

	if (f) {
		if (fscanf(f, "%llu", &v) != 1)
			v = 0;
		fclose(f);
	}
	return v ? v : NR_OPEN_DEFAULT;
}

static uint64_t lim(rlim_t v)
{
	return v == RLIM_INFINITY ? UINT64_MAX : (uint64_t)v;
}

int vmm_nofile_raise(uint64_t need, struct vmm_nofile *r)
{
	struct rlimit rl;

	memset(r, 0, sizeof(*r));
	r->nr_open = nr_open();
	if (getrlimit(RLIMIT_NOFILE, &rl))
		return -errno;
	r->old_soft = r->soft = lim(rl.rlim_cur);
	r->old_hard = r->hard = lim(rl.rlim_max);
	if (r->soft >= need)
		return 0;
	if (r->hard < need) {
		/* Both limits at once: a soft limit may not pass the hard
		 * one, and the kernel refuses a hard one above nr_open. */
		uint64_t want = need < r->nr_open ? need : r->nr_open;

		if (want > r->hard) {
			struct rlimit up = { .rlim_cur = want,
					     .rlim_max = want };

			if (!setrlimit(RLIMIT_NOFILE, &up))
				goto out;
			r->hard_err = -errno;
		}
	}
	if (r->soft < r->hard) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl))
			return -errno;
	}
out:
	if (getrlimit(RLIMIT_NOFILE, &rl))
		return -errno;
	r->soft = lim(rl.rlim_cur);
	r->hard = lim(rl.rlim_max);
	return r->soft >= need ? 0 : -EMFILE;
}

int vmm_fd_table_reserve(uint64_t upto)
{
	struct rlimit rl;
	int fd, hi, err = 0;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return -errno;
	if (lim(rl.rlim_cur) <= upto)
		upto = lim(rl.rlim_cur) - 1;
	if (upto > INT32_MAX)
		upto = INT32_MAX;
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* the lowest free number at or above upto: the table grows to it */
	hi = fcntl(fd, F_DUPFD_CLOEXEC, (int)upto);
	if (hi < 0)
		err = -errno;
	else
		close(hi);
	close(fd);
	return err;
}
