/* SPDX-License-Identifier: MIT */
/*
 * What a real kvmmd holds in fds, read from /proc/PID: its fds and its
 * kvmm page memfds by access mode (read-only page fds are those kept or
 * opened for a shared page's readers), its RLIMIT_NOFILE, and whether it
 * runs with CAP_SYS_RESOURCE (which lets it raise its hard limit).
 * Shared by the tests of read-only page fds (cache-shared-fd-*) and
 * daemon-fd-limit.
 */
#ifndef KVMM_TESTS_SHARED_FD_COMMON_H
#define KVMM_TESTS_SHARED_FD_COMMON_H

#include <dirent.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "tests/lib/test.h"

struct sf_fds {
	int total;
	int ro_pages; /* kvmm page memfds opened O_RDONLY */
	int rw_pages; /* kvmm page memfds opened O_RDWR */
};

/* kvmmd's fds, and its kvmm page fds by access mode. */
static inline struct sf_fds sf_count(pid_t pid)
{
	struct sf_fds n = { 0 };
	char path[64], link[320], target[256], line[128];
	struct dirent *e;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	if (!d)
		t_fail("%s: %s", path, strerror(errno));
	while ((e = readdir(d))) {
		unsigned int flags = ~0u;
		ssize_t len;
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		n.total++;
		snprintf(link, sizeof(link), "%s/%s", path, e->d_name);
		len = readlink(link, target, sizeof(target) - 1);
		if (len < 0)
			continue;
		target[len] = '\0';
		if (strncmp(target, "/memfd:kvmm-page", 16))
			continue;
		snprintf(link, sizeof(link), "/proc/%d/fdinfo/%s", (int)pid,
			 e->d_name);
		f = fopen(link, "re");
		if (!f)
			continue; /* closed since the readdir */
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "flags: %o", &flags) == 1)
				break;
		fclose(f);
		if ((flags & O_ACCMODE) == O_RDONLY)
			n.ro_pages++;
		else if ((flags & O_ACCMODE) == O_RDWR)
			n.rw_pages++;
		else
			t_fail("kvmmd page fd %s: flags %o", e->d_name, flags);
	}
	closedir(d);
	return n;
}

/* The process's "Max open files" soft and hard limits. */
static inline void sf_limits(pid_t pid, unsigned long long *soft,
			     unsigned long long *hard)
{
	char path[64], line[256];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/limits", (int)pid);
	f = fopen(path, "re");
	if (!f)
		t_fail("%s: %s", path, strerror(errno));
	*soft = *hard = 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Max open files %llu %llu", soft, hard) == 2)
			break;
	fclose(f);
}

/* Whether the process may raise its hard limits (CAP_SYS_RESOURCE). */
static inline bool sf_has_cap_sys_resource(pid_t pid)
{
	char path[64], line[256];
	unsigned long long caps = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		t_fail("%s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &caps) == 1)
			break;
	fclose(f);
	return caps & (1ull << 24); /* CAP_SYS_RESOURCE */
}

#endif
