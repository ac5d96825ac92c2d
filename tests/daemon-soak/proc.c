// SPDX-License-Identifier: MIT
/*
 * The mixed-workload soak (tests/daemon-soak.c): what /proc says of
 * kvmmd (its fds, its anonymous memory) and of the processes the
 * clients forked, which the orchestrator reaps as their subreaper.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/daemon-soak/run.h"
#include "tests/lib/wait.h"

long count_fds(pid_t pid)
{
	char path[64];
	struct dirent *de;
	long n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	if (!d)
		return -1;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/* kvmmd's fds but its pool pages' memfds, and how many those are, on
 * stderr: what a leak would be. */
void print_fds(pid_t pid)
{
	char path[64], link[330], target[256];
	struct dirent *de;
	long pages = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	if (!d)
		return;
	while ((de = readdir(d))) {
		ssize_t n;

		if (de->d_name[0] == '.')
			continue;
		snprintf(link, sizeof(link), "%s/%s", path, de->d_name);
		n = readlink(link, target, sizeof(target) - 1);
		if (n < 0)
			continue;
		target[n] = 0;
		if (strstr(target, "memfd:kvmm-page"))
			pages++;
		else
			fprintf(stderr, "kvmmd fd %s -> %s\n", de->d_name,
				target);
	}
	fprintf(stderr, "kvmmd fds of pages: %ld\n", pages);
	closedir(d);
}

long rss_anon_kib(pid_t pid)
{
	char path[64], line[256];
	long kib = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "RssAnon: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

/* What a process is doing (for a session that outlived the load). */
void print_proc(long pid)
{
	char path[64], buf[256];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/wchan", pid);
	f = fopen(path, "r");
	if (f && fgets(buf, sizeof(buf), f))
		fprintf(stderr, "pid %ld wchan %s\n", pid, buf);
	if (f)
		fclose(f);
	snprintf(path, sizeof(path), "/proc/%ld/status", pid);
	f = fopen(path, "r");
	while (f && fgets(buf, sizeof(buf), f))
		if (!strncmp(buf, "State:", 6) || !strncmp(buf, "PPid:", 5))
			fprintf(stderr, "pid %ld %s", pid, buf);
	if (f)
		fclose(f);
}

/*
 * Every process the clients forked is gone too: they are ours (we are
 * their subreaper, main()), also those whose parent a SIGKILL took.  One
 * still there after 30 s hangs.
 */
void wait_orphans(struct run *r)
{
	unsigned long long end = t_now_ms() + 30000;
	long pid = 0;

	for (;;) { /* 30 s of the clock: a /proc scan is slow under load */
		DIR *d = opendir("/proc");
		struct dirent *de;

		pid = 0;
		while (d && (de = readdir(d))) {
			char path[300], line[128];
			long p = strtol(de->d_name, NULL, 10), ppid = -1;
			FILE *f;

			if (p <= 0 || p == r->d.pid)
				continue; /* kvmmd is our child too */
			snprintf(path, sizeof(path), "/proc/%ld/status", p);
			f = fopen(path, "r");
			while (f && fgets(line, sizeof(line), f))
				if (sscanf(line, "PPid: %ld", &ppid) == 1)
					break;
			if (f)
				fclose(f);
			if (ppid == getpid() &&
			    waitpid((pid_t)p, NULL, WNOHANG) != (pid_t)p)
				pid = p;
		}
		if (d)
			closedir(d);
		if (!pid)
			return;
		if (t_now_ms() > end)
			break;
		sleep_ms(10);
	}
	print_proc(pid);
	{
		/* where it waits, if gdb is here (a diagnosis, not a check) */
		char cmd[160];

		snprintf(cmd, sizeof(cmd),
			 "command -v gdb >/dev/null && gdb -p %ld -batch -ex "
			 "'thread apply all bt' 2>&1 | grep '^#' >&2",
			 pid);
		if (system(cmd) < 0)
			perror("gdb");
	}
	run_fail(r,
		 "a forked client process still runs 30 s after the load "
		 "(pid %ld)",
		 pid);
}
