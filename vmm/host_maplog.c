/* SPDX-License-Identifier: MIT */
/*
 * Host backend: why a mapping call failed.  mmap, mremap and mprotect
 * answer ENOMEM both when memory is short and when the process holds
 * vm.max_map_count VMAs, which an imported page (its anchor) and each
 * mapping add to; host_map_err_log() tells the two apart by reading
 * /proc, on the failure path only.  Apart from vmm/host.c so that file
 * keeps to the backend's pages and ranges.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vmm/host_priv.h"
#include "vmm/vmm.h"

/* Read fd to its end: the number of newlines in it, or -1; its first
 * first_len - 1 bytes go to first when given.  No allocation: at the
 * mapping limit, malloc may need a VMA too. */
static long count_lines(int fd, char *first, size_t first_len)
{
	char buf[4096];
	size_t have = 0;
	long lines = 0;
	ssize_t r;

	for (;;) {
		r = read(fd, buf, sizeof(buf));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (!r)
			return lines;
		for (ssize_t i = 0; i < r; i++)
			lines += buf[i] == '\n';
		if (first && have + 1 < first_len) {
			size_t n = (size_t)r < first_len - 1 - have ?
					   (size_t)r :
					   first_len - 1 - have;

			memcpy(first + have, buf, n);
			have += n;
			first[have] = 0;
		}
	}
}

/* /proc/sys/vm/max_map_count and the VMAs this process holds (the lines of
 * /proc/self/maps, near enough: it adds [vsyscall] where there is one). */
static int map_count(long *count, long *max)
{
	char num[32] = "";
	int fd;

	fd = open("/proc/sys/vm/max_map_count", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (count_lines(fd, num, sizeof(num)) < 0) {
		close(fd);
		return -EIO;
	}
	close(fd);
	*max = strtol(num, NULL, 10);
	fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	*count = count_lines(fd, NULL, 0);
	close(fd);
	return *count < 0 || *max <= 0 ? -EIO : 0;
}

/* How close to vm.max_map_count counts as "at" it: a MAP_FIXED in the middle
 * of a range needs 2 VMAs, mremap wants 3 spare (mremap_to), and other
 * threads may map meanwhile. */
#define HOST_MAP_COUNT_SLACK 16

/*
 * Log a failed mmap, mremap or mprotect (err: its errno; fmt: what was
 * being done).  ENOMEM from these is also the kernel's answer at
 * vm.max_map_count, which no caller can tell from a full pool or real
 * memory pressure: when the process is at (or within a few VMAs of) the
 * limit, say so and what to do instead of "Cannot allocate memory".  Only
 * ever on a failure path: it reads all of /proc/self/maps.
 */
void __attribute__((format(printf, 2, 3)))
host_map_err_log(int err, const char *fmt, ...)
{
	char what[160];
	long count = 0, max = 0;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (err == ENOMEM && !map_count(&count, &max) &&
	    count + HOST_MAP_COUNT_SLACK >= max) {
		vmm_log(VMM_LOG_ERR,
			"vmm host: %s: out of mappings: %ld in /proc/self/maps, vm.max_map_count is %ld (an imported page takes 1, each mapping 1 more); raise it (sysctl vm.max_map_count=N, root) or use fewer or larger pages",
			what, count, max);
		return;
	}
	vmm_log(VMM_LOG_ERR, "vmm host: %s: %s", what, strerror(err));
}
