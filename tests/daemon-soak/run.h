/* SPDX-License-Identifier: MIT */
/*
 * The mixed-workload soak's orchestrator (tests/daemon-soak.c): what its
 * parts share.  daemon-soak.c runs the epochs and the clients;
 * kvmmd.c starts, stops and restarts kvmmd and checks it idle; admin.c
 * is the admin loop (kvmmctl); proc.c reads /proc.  The clients
 * (client.c, client-ops.c, client-check.c, sharing client.h) see none
 * of this: they share soak.h.
 */
#ifndef KVMM_TESTS_DAEMON_SOAK_RUN_H
#define KVMM_TESTS_DAEMON_SOAK_RUN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "tests/daemon-soak/soak.h"
#include "tests/lib/daemon.h"

#define NVME_SIZE "2M"
#define RSS_SLACK_KIB (48 * 1024)

struct run {
	uint64_t rng;
	int seconds;
	unsigned int clients;
	bool verbose;
	char dir[64]; /* our own: the socket link the clients use */
	char nvme[256];
	struct td_daemon d;
	pid_t client[SOAK_MAX_CLIENTS];
	unsigned long long gen; /* clients started */
	uint64_t seed;
	int restarts, kills, admin_kills, drops, quotas, revokes, limits;
	long fds_start, rss_start; /* kvmmd's, at its start */
};

static inline void sleep_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* daemon-soak.c */
void __attribute__((noreturn, format(printf, 2, 3)))
run_fail(struct run *r, const char *fmt, ...);
void spawn(struct run *r, unsigned int slot);

/* kvmmd.c */
void start_daemon(struct run *r, bool scope_uid);
void stop_daemon(struct run *r);
void restart(struct run *r, bool scope_uid);
void check_idle(struct run *r);

/* admin.c */
int ctl(struct run *r, char **out, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
long long json_num(const char *js, const char *after, const char *key);
void status_json(struct run *r, char **js);
void admin_op(struct run *r);

/* proc.c */
long count_fds(pid_t pid);
void print_fds(pid_t pid);
long rss_anon_kib(pid_t pid);
void print_proc(long pid);
void wait_orphans(struct run *r);

#endif
