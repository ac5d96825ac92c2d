/* SPDX-License-Identifier: MIT */
/*
 * Pin roots of the BPF tests and benches (/sys/fs/bpf/kvmm-NAME-PID): a
 * run that fails (t_fail() exits) or is killed (the runner's timeout)
 * never reaches tel_close(), and each root it leaves holds maps of
 * about 10 MiB of locked kernel memory until someone removes them.  So
 * a run removes its root when it exits, however it exits short of
 * SIGKILL, and first removes the roots of runs whose process is gone
 * and that no loader holds (a kvmmd a killed test started may still
 * run on one: its root stays until it stops).
 */
#ifndef KVMM_TESTS_BPF_PINS_H
#define KVMM_TESTS_BPF_PINS_H

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ebpf/telemetry.h"

#define BPF_PINS_FS "/sys/fs/bpf"

/* The pid whose run made root name kvmm-...-PID, 0 if none: the last
 * number, or for a kvmmd in a pid namespace of its own (pid 1 there)
 * the outer one of kvmm-...-nsPID-1. */
static inline long bpf_pins_owner(const char *name)
{
	const char *dash = strrchr(name, '-'), *p;
	long pid;

	if (strncmp(name, "kvmm-", 5) || !dash || dash == name + 4 ||
	    !dash[1] || dash[1] == '0')
		return 0;
	for (p = dash + 1; *p; p++)
		if (!isdigit((unsigned char)*p))
			return 0;
	pid = strtol(dash + 1, NULL, 10);
	if (pid == 1) { /* ...-nsPID-1 */
		for (p = dash - 1; p > name && isdigit((unsigned char)*p); p--)
			;
		if (p - 1 > name && p[-1] == 'n' && p[0] == 's' &&
		    isdigit((unsigned char)p[1]))
			pid = strtol(p + 1, NULL, 10);
		else
			return 0;
	}
	return pid > 0 && pid < (1L << 22) ? pid : 0;
}

/* Remove the test roots of processes that are gone (see above). */
static inline void bpf_pins_sweep(void)
{
	char path[512];
	struct dirent *de;
	DIR *d = opendir(BPF_PINS_FS);
	long pid;

	if (!d)
		return;
	while ((de = readdir(d))) {
		pid = bpf_pins_owner(de->d_name);
		if (!pid || !kill((pid_t)pid, 0) || errno != ESRCH)
			continue;
		snprintf(path, sizeof(path), "%s/%s", BPF_PINS_FS, de->d_name);
		if (!tel_pins_remove_stale(path))
			printf("removed %s, left by a run that is gone\n",
			       path);
	}
	closedir(d);
}

static char bpf_pins_root[256];
static pid_t bpf_pins_pid;

static inline void bpf_pins_remove_mine(void)
{
	/* not in a forked client, whose exit is no end of the run */
	if (bpf_pins_root[0] && getpid() == bpf_pins_pid)
		tel_pins_remove_all(bpf_pins_root);
}

/*
 * The runner's timeout sends SIGTERM (SIGKILL 5 s later): remove the
 * pins, then die of it.  Not async-signal-safe (opendir()); a run caught
 * inside malloc hangs until the SIGKILL, and the next run's sweep
 * removes its root.
 */
static inline void bpf_pins_on_signal(int sig)
{
	bpf_pins_remove_mine();
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Sweep, then remove root (this process's) at exit, t_fail() included,
 * and on SIGTERM or SIGINT unless the program handles them itself. */
static inline void bpf_pins_own(const char *root)
{
	struct sigaction sa;

	bpf_pins_sweep();
	snprintf(bpf_pins_root, sizeof(bpf_pins_root), "%s", root);
	if (bpf_pins_pid)
		return; /* registered already */
	bpf_pins_pid = getpid();
	atexit(bpf_pins_remove_mine);
	if (!sigaction(SIGTERM, NULL, &sa) && sa.sa_handler == SIG_DFL)
		signal(SIGTERM, bpf_pins_on_signal);
	if (!sigaction(SIGINT, NULL, &sa) && sa.sa_handler == SIG_DFL)
		signal(SIGINT, bpf_pins_on_signal);
}

#endif
