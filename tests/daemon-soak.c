// SPDX-License-Identifier: MIT
/*
 * timeout: 120
 * The mixed-workload soak: one real kvmmd (host backend, 4 KiB pages, a
 * GPU pool, host tier and NVMe file all small, so blocks are evicted,
 * demoted and restored all the time) under everything at once, with its
 * invariants checked the whole time:
 *   - client processes of SOAK_UIDS uids (tests/daemon-soak/client*.c)
 *     open, extend, truncate and close sequences, write KV named by its
 *     hash, publish it, open each other's prefixes (plain, with actions,
 *     early + SEQ_WAIT_READY), pin with TTLs, fork children that use the
 *     inherited connection or drop it, and check every byte they read:
 *     a cached block holds exactly its hash's bytes, a fresh page never
 *     another uid's, no call fails with an error the docs do not give;
 *   - the orchestrator SIGKILLs clients at random and starts new ones,
 *     runs kvmmctl status --json, tenants, sessions, cache-drop of a
 *     tier (of a uid), quota changes, kills sessions, and SIGTERMs and
 *     restarts kvmmd on the same NVMe file (its NVMe blocks come back);
 *   - kvmmd exits 0 at each stop and logs no ERR line, and once the load
 *     stops it comes back to idle: no page mapped, revoking or
 *     quarantined, none allocated but the cached blocks' (none after a
 *     cache-drop), one session, no more fds than after its start and
 *     its anonymous memory within a bound.
 * The first half of the time runs --cache-scope shared, the second uid.
 *
 *   build/tests/daemon-soak [--seconds N] [--seed S] [--clients N]
 *                           [--scope shared|uid|both] [--verbose]
 *
 * Without arguments (make check) 24 s with seed 1.  Needs root (the
 * clients setresuid()); skips otherwise.  Documentation/build.md,
 * "The mixed-workload soak", says how to run it long.
 */

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/daemon-soak/run.h"
#include "tests/daemon-soak/soak.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"
#include "tests/lib/wait.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The first failure wins; the clients' goes first, then ours. */
void __attribute__((noreturn, format(printf, 2, 3)))
run_fail(struct run *r, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	atomic_store(&soak->stop, 1);
	for (unsigned int i = 0; i < r->clients; i++)
		if (r->client[i] > 0)
			kill(r->client[i], SIGKILL);
	if (r->d.pid > 0)
		td_dump_log(&r->d);
	t_fail("seed %llu: %s", (unsigned long long)r->seed,
	       atomic_load(&soak->failed) ? soak->why : msg);
}

void spawn(struct run *r, unsigned int slot)
{
	uint64_t seed = r->seed * 1000003ULL + (++r->gen) * 7919ULL + slot;
	pid_t p = fork();

	if (p < 0)
		run_fail(r, "fork: %s", strerror(errno));
	if (p == 0)
		soak_client(slot, seed); /* never returns */
	r->client[slot] = p;
}

/* A client that exited on its own failed (it reports why). */
static void reap(struct run *r)
{
	int st;

	for (unsigned int i = 0; i < r->clients; i++) {
		if (r->client[i] <= 0 ||
		    waitpid(r->client[i], &st, WNOHANG) != r->client[i])
			continue;
		r->client[i] = 0;
		run_fail(r, "client %u ended with status %#x", i, st);
	}
}

static void epoch(struct run *r, bool scope_uid, int seconds)
{
	double t0 = now_s(), end = t0 + seconds;
	int restarts_due = seconds >= 9 ? 2 : 0, done = 0;

	soak->scope_uid = scope_uid;
	atomic_store(&soak->stop, 0);
	snprintf(r->nvme, sizeof(r->nvme), "%s", "");
	td_build_path("", r->nvme, sizeof(r->nvme));
	snprintf(r->nvme + strlen(r->nvme), sizeof(r->nvme) - strlen(r->nvme),
		 "soak-%d-%s.nvme", (int)getpid(),
		 scope_uid ? "uid" : "shared");
	unlink(r->nvme);
	start_daemon(r, scope_uid);
	r->fds_start = count_fds(r->d.pid);
	r->rss_start = rss_anon_kib(r->d.pid);
	for (unsigned int i = 0; i < r->clients; i++)
		spawn(r, i);
	while (now_s() < end) {
		sleep_ms(20 + soak_below(&r->rng, 120));
		reap(r);
		if (done < restarts_due &&
		    now_s() > t0 + seconds * (done + 1) / (restarts_due + 1)) {
			restart(r, scope_uid);
			done++;
			continue;
		}
		admin_op(r);
	}
	atomic_store(&soak->stop, 1);
	for (unsigned int i = 0; i < r->clients; i++) {
		unsigned long long until = t_now_ms() + 30000;
		int st = 0;
		bool gone = false;

		for (;;) { /* 30 s of the clock, not 3000 tries */
			gone = waitpid(r->client[i], &st, WNOHANG) ==
			       r->client[i];
			if (gone || t_now_ms() > until)
				break;
			sleep_ms(10);
		}
		if (!gone)
			run_fail(r, "client %u did not stop in 30 s", i);
		r->client[i] = 0;
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			run_fail(r, "client %u ended with status %#x", i, st);
	}
	wait_orphans(r);
	check_idle(r);
	stop_daemon(r);
	unlink(r->nvme);
}

int main(int argc, char **argv)
{
	static const char *const names[SC_NR] = {
		"ops",	       "prefix opens", "early opens", "blocks verified",
		"fresh pages", "recomputes",   "published",   "pins",
		"forks",       "reconnects",   "revoked",     "ENOMEM",
		"EDQUOT",      "other allowed"
	};
	static const char usage[] =
		"usage: %s [--seconds N (>= 2)] [--seed S] [--clients N (1-%u)] "
		"[--scope shared|uid|both] [--verbose]\n";
	struct run r = { .seconds = 24, .clients = 6, .seed = 1 };
	const char *scope = "both";
	char link[140];

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			r.seconds = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			r.seed = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--clients") && i + 1 < argc)
			r.clients = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--scope") && i + 1 < argc)
			scope = argv[++i];
		else if (!strcmp(argv[i], "--verbose"))
			r.verbose = true;
		else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			printf(usage, argv[0], SOAK_MAX_CLIENTS);
			return 0;
		} else {
			fprintf(stderr,
				"daemon-soak: unknown or incomplete "
				"argument '%s'\n",
				argv[i]);
			fprintf(stderr, usage, argv[0], SOAK_MAX_CLIENTS);
			return 2;
		}
	}
	if (r.clients < 1 || r.clients > SOAK_MAX_CLIENTS || r.seconds < 2 ||
	    (strcmp(scope, "both") && strcmp(scope, "shared") &&
	     strcmp(scope, "uid"))) {
		fprintf(stderr,
			"daemon-soak: bad value (--seconds %d, "
			"--clients %u, --scope %s)\n",
			r.seconds, r.clients, scope);
		fprintf(stderr, usage, argv[0], SOAK_MAX_CLIENTS);
		return 2;
	}
	if (geteuid() != 0)
		t_skip("the soak's clients run as other uids: needs root");
	r.rng = r.seed * 0x9e3779b97f4a7c15ULL | 1;
	soak = mmap(NULL, sizeof(*soak), PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	t_assert(soak != MAP_FAILED);
	td_tmp_path("kvmm-soak-XXXXXX", r.dir, sizeof(r.dir));
	t_assert(mkdtemp(r.dir));
	t_ok(chmod(r.dir, 0711));
	/* a client's forked children are ours when a SIGKILL orphans them */
	t_ok(prctl(PR_SET_CHILD_SUBREAPER, 1));
	/* a client stopped by SIGSTOP across a restart, or killed, takes
	 * nothing with it; ours see EPIPE as an error, not a signal */
	signal(SIGPIPE, SIG_IGN);
	printf("soak: seed %llu, %d s, %u clients of %u uids, scope %s\n",
	       (unsigned long long)r.seed, r.seconds, r.clients, SOAK_UIDS,
	       scope);
	fflush(stdout);
	if (strcmp(scope, "uid"))
		epoch(&r, false,
		      strcmp(scope, "both") ? r.seconds : r.seconds / 2);
	if (strcmp(scope, "shared"))
		epoch(&r, true,
		      strcmp(scope, "both") ? r.seconds : r.seconds / 2);
	snprintf(link, sizeof(link), "%s/kvmm.sock", r.dir);
	unlink(link);
	rmdir(r.dir);
	for (int c = 0; c < SC_NR; c++)
		printf("%s %llu%s", names[c],
		       (unsigned long long)atomic_load(&soak->count[c]),
		       c + 1 < SC_NR ? ", " : "\n");
	printf("restarts %d, clients killed %d, sessions killed %d, "
	       "revocations %d, cache drops %d, quota changes %d, tenant "
	       "limits %d\n",
	       r.restarts, r.kills, r.admin_kills, r.revokes, r.drops, r.quotas,
	       r.limits);
	if (!atomic_load(&soak->count[SC_BLOCKS_VERIFIED]) ||
	    !atomic_load(&soak->count[SC_FRESH_CHECKED]))
		t_fail("the soak checked no cached block or no fresh page");
	return T_PASS;
}
