/* SPDX-License-Identifier: MIT */
/*
 * Telemetry keeps tenants apart under --cache-scope uid, for either
 * source (ebpf-scope-shm, ebpf-scope-bpf): kvmmd runs in the test's
 * process (its loop on a thread), and two client processes of two uids
 * publish the same two block hashes (two blocks each in the cache: the
 * uid scope renames them apart), open them again as a prefix (kvmmd
 * reports that, under the cache's names) and run 10 and 25 steps, at
 * each of which libkvmm reports their blocks (in the session's telemetry
 * region, or through the kvmm:access probe).  After the clients have
 * gone and their sessions ended, one poll feeds the policy: the access
 * count of A's blocks is 2 * 10 + 1 and of B's 2 * 25 + 1.  Merged by the
 * clients' hash first (as both sources once did), one tenant's block got
 * the two's steps and the other's none.  Needs root (two uids); skips
 * otherwise.
 */
#ifndef KVMM_TESTS_EBPF_SCOPE_COMMON_H
#define KVMM_TESTS_EBPF_SCOPE_COMMON_H

#include <errno.h>
#include <grp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "kvmm/kvmmd/kvmmd.h"
#include "kvmm/policy/policy.h"
#include "tests/lib/inproc_daemon.h"
#include "tests/lib/small_region.h"
#include "tests/lib/test.h"

#define UID_A 61011
#define UID_B 61012

static const uint64_t scope_hashes[2] = { 0x5c0ee01, 0x5c0ee02 };

/*
 * "client UID STEPS": publish both hashes, open them again as a prefix
 * (kvmmd reports that open itself, under the cache's names), run STEPS
 * steps (libkvmm reports both sequences' blocks at each): a block's count
 * is 2 * STEPS + 1.
 */
#define SCOPE_COUNT(steps) (2 * (steps) + 1)
static inline int scope_client(uid_t uid, int steps)
{
	struct kvmm_connect_opts co = { .size = sizeof(co), .name = "scope" };
	struct kvmm_conn *c;
	struct kvmm_region *r;
	uint32_t s, s1, nb;

	if (setgroups(0, NULL) || setresgid(uid, uid, uid) ||
	    setresuid(uid, uid, uid))
		return 1;
	if (kvmm_connect(&co, &c) ||
	    kvmm_region_create(c, &tr_small_region, &r) ||
	    kvmm_seq_open(r, &s) || kvmm_seq_extend(r, s, 2 * TR_TPB + 10))
		return 2;
	if (kvmm_block_publish(r, s, 0, 2, 0, scope_hashes) != 2)
		return 3;
	if (kvmm_seq_open_prefix(r, scope_hashes, 2, &s1, &nb) || nb != 2)
		return 5;
	for (int i = 0; i < steps; i++)
		if (kvmm_step_begin(c) || kvmm_step_end(c))
			return 4;
	kvmm_disconnect(c);
	return 0;
}

static inline void scope_run_client(uid_t uid, int steps)
{
	char u[16], n[16];
	pid_t pid;
	int ws;

	snprintf(u, sizeof(u), "%u", (unsigned)uid);
	snprintf(n, sizeof(n), "%d", steps);
	pid = fork();
	t_assert(pid >= 0);
	if (pid == 0) { /* exec: a fork of a threaded process may deadlock */
		execl("/proc/self/exe", "client", "client", u, n, (char *)NULL);
		_exit(127);
	}
	t_assert(waitpid(pid, &ws, 0) == pid && WIFEXITED(ws));
	t_assert_eq(WEXITSTATUS(ws), 0);
}

/*
 * Start kvmmd (uid scope, telemetry mode) in this process, or skip; run
 * the two clients; end their sessions, poll once and check the policy's
 * counts.  d stays started for the caller's own checks, then
 * scope_tenants_end().  argv: main's, for the client processes.
 */
static inline void scope_tenants(struct kd_daemon *d, struct kd_config *cfg,
				 char *dir, size_t dir_len, enum tel_mode mode,
				 const char *name, int argc, char **argv)
{
	pthread_t th;

	if (argc == 4 && !strcmp(argv[1], "client"))
		exit(scope_client((uid_t)atoi(argv[2]), atoi(argv[3])));
	if (geteuid() != 0)
		t_skip("needs root, to run clients of two uids");
	inproc_mkdir(dir, dir_len, name);
	t_ok(chmod(dir, 0711));
	inproc_config(d, cfg, dir, name, mode);
	cfg->cache_scope = KD_SCOPE_UID;
	cfg->socket_mode = 0666;
	if (kd_daemon_start(d, cfg)) {
		rmdir(dir);
		t_skip("kvmmd with %s telemetry did not start",
		       mode == TEL_MODE_BPF ? "BPF" : "shm");
	}
	t_assert(pthread_create(&th, NULL, inproc_loop_thread, d) == 0);
	setenv("KVMM_SOCKET", cfg->socket_path, 1);
	scope_run_client(UID_A, 10);
	scope_run_client(UID_B, 25);
	__atomic_store_n(&d->loop.stop, true, __ATOMIC_RELEASE);
	t_assert(pthread_join(th, NULL) == 0);
	/* the clients are gone: their sessions too, before the poll */
	while (d->sessions)
		kd_session_end(d->sessions, false, "the test's client exited");
	t_ok(tel_poll(d->tel)); /* feeds the policy, as the timer would */
	t_assert(d->tel_feed.cache);
	for (int b = 0; b < 2; b++) {
		struct pol_block *pa = pol_cache_lookup(
			d->tel_feed.cache,
			kd_scope_hash(&d->scope, UID_A, scope_hashes[b]));
		struct pol_block *pb = pol_cache_lookup(
			d->tel_feed.cache,
			kd_scope_hash(&d->scope, UID_B, scope_hashes[b]));

		t_assert(pa && pb && pa != pb);
		printf("block %d: access count %u for uid %d, %u for uid %d\n",
		       b, pa->access_count, UID_A, pb->access_count, UID_B);
		t_assert_eq(pa->access_count, SCOPE_COUNT(10));
		t_assert_eq(pb->access_count, SCOPE_COUNT(25));
		/* the clients' own hash names nothing in the cache */
		t_assert(!pol_cache_lookup(d->tel_feed.cache, scope_hashes[b]));
	}
}

static inline void scope_tenants_end(struct kd_daemon *d, const char *dir)
{
	kd_daemon_stop(d);
	rmdir(dir);
}

#endif
