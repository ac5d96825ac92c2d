// SPDX-License-Identifier: MIT
/*
 * Telemetry keeps tenants apart under --cache-scope uid, with the
 * shared-memory source (no BPF needed): kvmmd runs in this process (its
 * loop on a thread, --telemetry shm), and two client processes of two
 * uids publish the same two block hashes (two blocks each in the cache:
 * the uid scope renames them apart) and run 10 and 25 steps, at each of
 * which libkvmm counts their blocks in the session's telemetry region.
 * Each region's reports are renamed by its session's uid as they are
 * read, before they meet the other's, so after a poll the policy's access
 * count of A's blocks is 10 and of B's 25.  Merged by the clients' hash
 * first (as before), one tenant's block got 35 and the other's nothing.
 * Needs root (two uids); skips otherwise.
 */
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

static const uint64_t hashes[2] = { 0x5c0ee01, 0x5c0ee02 };

/* "client UID STEPS": publish both hashes, run STEPS steps. */
static int client(uid_t uid, int steps)
{
	struct kvmm_connect_opts co = { .size = sizeof(co), .name = "scope" };
	struct kvmm_conn *c;
	struct kvmm_region *r;
	uint32_t s;

	if (setgroups(0, NULL) || setresgid(uid, uid, uid) ||
	    setresuid(uid, uid, uid))
		return 1;
	if (kvmm_connect(&co, &c) ||
	    kvmm_region_create(c, &tr_small_region, &r) ||
	    kvmm_seq_open(r, &s) || kvmm_seq_extend(r, s, 2 * TR_TPB + 10))
		return 2;
	if (kvmm_block_publish(r, s, 0, 2, 0, hashes) != 2)
		return 3;
	for (int i = 0; i < steps; i++)
		if (kvmm_step_begin(c) || kvmm_step_end(c))
			return 4;
	kvmm_disconnect(c);
	return 0;
}

static void run_client(uid_t uid, int steps)
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

int main(int argc, char **argv)
{
	struct kd_daemon d;
	struct kd_config cfg;
	pthread_t th;
	char dir[64];

	if (argc == 4 && !strcmp(argv[1], "client"))
		return client((uid_t)atoi(argv[2]), atoi(argv[3]));
	if (geteuid() != 0)
		t_skip("needs root, to run clients of two uids");
	inproc_mkdir(dir, sizeof(dir), "scope-shm");
	t_ok(chmod(dir, 0711));
	inproc_config(&d, &cfg, dir, "scope-shm", TEL_MODE_SHM);
	cfg.cache_scope = KD_SCOPE_UID;
	cfg.socket_mode = 0666;
	t_ok(kd_daemon_start(&d, &cfg));
	t_assert(pthread_create(&th, NULL, inproc_loop_thread, &d) == 0);
	setenv("KVMM_SOCKET", cfg.socket_path, 1);
	run_client(UID_A, 10);
	run_client(UID_B, 25);
	__atomic_store_n(&d.loop.stop, true, __ATOMIC_RELEASE);
	t_assert(pthread_join(th, NULL) == 0);
	/* the clients are gone: their sessions too, before the poll */
	while (d.sessions)
		kd_session_end(d.sessions, false, "the test's client exited");
	t_ok(tel_poll(d.tel)); /* feeds the policy, as the timer would */
	t_assert(d.tel_feed.cache);
	for (int b = 0; b < 2; b++) {
		struct pol_block *pa = pol_cache_lookup(
			d.tel_feed.cache,
			kd_scope_hash(&d.scope, UID_A, hashes[b]));
		struct pol_block *pb = pol_cache_lookup(
			d.tel_feed.cache,
			kd_scope_hash(&d.scope, UID_B, hashes[b]));

		t_assert(pa && pb && pa != pb);
		printf("block %d: access count %u for uid %d, %u for uid %d\n",
		       b, pa->access_count, UID_A, pb->access_count, UID_B);
		t_assert_eq(pa->access_count, 10);
		t_assert_eq(pb->access_count, 25);
		/* the clients' own hash names nothing in the cache */
		t_assert(!pol_cache_lookup(d.tel_feed.cache, hashes[b]));
	}
	kd_daemon_stop(&d);
	rmdir(dir);
	return 0;
}
