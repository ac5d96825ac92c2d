/* SPDX-License-Identifier: MIT */
/*
 * What the tests of a cache set-up that fails after the start share
 * (cache-open-retry-*): kvmmd's own resources as /proc shows them (its
 * fds, the lowest fd number it has free, its threads and memory), so a
 * test can check that failed attempts leave nothing behind; and a wait
 * for the next attempt to be due, read from TIER_STATS on a connection
 * the test holds (a new one needs an fd the daemon may not have).
 */
#ifndef KVMM_TESTS_CACHE_OPEN_COMMON_H
#define KVMM_TESTS_CACHE_OPEN_COMMON_H

#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/cache-common.h"

/* What kvmmd holds now. */
struct co_usage {
	int fds;
	int lowest_free_fd; /* the fd number a new fd would get */
	long threads;
	long rss_kib, size_kib; /* VmRSS, VmSize */
};

/* A "Name:   N" line of /proc/PID/status. */
static inline long co_status_field(pid_t pid, const char *name)
{
	char path[64], line[256];
	size_t n = strlen(name);
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	t_assert(f != NULL);
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, name, n) && line[n] == ':')
			v = strtol(line + n + 1, NULL, 10);
	fclose(f);
	t_assert(v >= 0);
	return v;
}

static inline void co_usage(pid_t pid, struct co_usage *u)
{
	static unsigned char used[1 << 16];
	char path[64];
	struct dirent *e;
	DIR *dir;

	memset(used, 0, sizeof(used));
	memset(u, 0, sizeof(*u));
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	dir = opendir(path);
	t_assert(dir != NULL);
	while ((e = readdir(dir))) {
		long fd;

		if (e->d_name[0] == '.')
			continue;
		fd = strtol(e->d_name, NULL, 10);
		u->fds++;
		if (fd >= 0 && fd < (long)sizeof(used))
			used[fd] = 1;
	}
	closedir(dir);
	while (u->lowest_free_fd < (int)sizeof(used) && used[u->lowest_free_fd])
		u->lowest_free_fd++;
	u->threads = co_status_field(pid, "Threads");
	u->rss_kib = co_status_field(pid, "VmRSS");
	u->size_kib = co_status_field(pid, "VmSize");
}

/* Wait (at most 70 s, more than the longest wait) until the next set-up
 * attempt is due; the TIER_STATS read last into *ts. */
static inline void co_wait_due(struct cc *c, struct kvmm_tier_stats_reply *ts)
{
	uint64_t t0 = cc_now_ms();

	for (;;) {
		cc_tier_stats(c, ts);
		if (!ts->cache_open_retry_ms)
			return;
		if (ts->cache_open_retry_ms == UINT64_MAX)
			t_fail("no attempt will come (cache_open_error %llu)",
			       (unsigned long long)ts->cache_open_error);
		if (cc_now_ms() - t0 > 70000)
			t_fail("the next attempt is still %llu ms away",
			       (unsigned long long)ts->cache_open_retry_ms);
		usleep((useconds_t)(ts->cache_open_retry_ms < 50 ?
					    ts->cache_open_retry_ms * 1000 :
					    50000));
	}
}

#endif
