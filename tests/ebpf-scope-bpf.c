// SPDX-License-Identifier: MIT
/*
 * Two tenants' telemetry stays apart under --cache-scope uid with the BPF
 * source (ebpf-scope-common.h has the workload): the kernel keeps a
 * kvmm_blocks entry per hash, uid and gid, so the two clients' reports
 * of one hash are two entries (10 and 25 steps, checked in the pinned
 * map), each renamed by its own uid when the daemon polls, after both
 * clients' sessions have ended.  Keyed by the hash alone (layout 1), the
 * entry counted the two's steps and went to whichever uid accessed it
 * last.
 *
 * kvmmd's own prefix-open records (KVMM_ACCESS_NAMED) are one entry per
 * cache name under uid and gid 0xffffffff; a client of uid A that sets
 * the flag on a record of its own is still keyed by its uid (the BPF
 * program trusts the flag from the loader's process alone): else it
 * could raise the count of any cache name it learnt.
 *
 * Run twice: first as a kvmmd in a pid namespace of its own (a
 * container's), where the pids SO_PEERCRED gives kvmmd are not the ones
 * BPF sees, then in the test's.  Renaming by the entry's uid, and knowing
 * kvmmd's own records by their KVMM_ACCESS_NAMED flag, needs no pid: the
 * counts are the same in both (renaming by the pid of the latest access,
 * as once, lost every report in the namespace).  Skips (77) without root
 * or BPF.
 */
#include <sched.h>

#include <bpf/bpf.h>

#include "ebpf/probes.h"

#include "tests/ebpf-scope-common.h"

#define FORGED 0xf0f0f0f0f0f0ull

/* "forge UID": as uid, report one access under a forged flag. */
static int forge(uid_t uid)
{
	struct kvmm_access_rec rec = { .hash = FORGED,
				       .tier = KVMM_TEL_TIER_GPU,
				       .flags = KVMM_ACCESS_NAMED };

	if (setgroups(0, NULL) || setresgid(uid, uid, uid) ||
	    setresuid(uid, uid, uid))
		return 1;
	if (!KVMM_PROBE_ENABLED(access))
		return 2; /* nobody listens: the check below would pass */
	kvmm_probe_access(1, &rec, 1);
	return 0;
}

/* The count of the pinned entry (hash, uid, gid), -1 if none. */
static long long map_count_ids(const char *pin_dir, uint64_t hash, uint32_t uid,
			       uint32_t gid)
{
	struct kvmm_block_key key = { .hash = hash, .uid = uid, .gid = gid };
	struct kvmm_block_entry e;
	char path[512];
	int fd, err;

	snprintf(path, sizeof(path), "%s/kvmm_blocks", pin_dir);
	fd = bpf_obj_get(path);
	t_assert(fd >= 0);
	err = bpf_map_lookup_elem(fd, &key, &e);
	close(fd);
	return err ? -1 : (long long)e.stats.count;
}

/* The whole check, with kvmmd in this process; name: its pin root's. */
static int scope_bpf(const char *name, int argc, char **argv)
{
	struct kd_daemon d;
	struct kd_config cfg;
	char dir[64];

	scope_tenants(&d, &cfg, dir, sizeof(dir), TEL_MODE_BPF, name, argc,
		      argv);
	const char *pins = tel_pin_dir(d.tel);
	const uint32_t named = KVMM_TEL_ID_NAMED;
	pid_t pid;
	int ws;

	for (int b = 0; b < 2; b++) {
		uint64_t a_name =
			kd_scope_hash(&d.scope, UID_A, scope_hashes[b]);

		/* the clients' steps; their prefix opens are kvmmd's, one
		 * each under the cache's name */
		t_assert_eq(map_count_ids(pins, scope_hashes[b], UID_A, UID_A),
			    2 * 10);
		t_assert_eq(map_count_ids(pins, scope_hashes[b], UID_B, UID_B),
			    2 * 25);
		t_assert_eq(map_count_ids(pins, a_name, named, named), 1);
		t_assert_eq(map_count_ids(pins, a_name, 0, 0), -1);
	}
	/* a client's KVMM_ACCESS_NAMED is not believed */
	pid = fork();
	t_assert(pid >= 0);
	if (pid == 0) {
		char u[16];

		snprintf(u, sizeof(u), "%u", (unsigned)UID_A);
		execl("/proc/self/exe", "scope-bpf", "forge", u, (char *)NULL);
		_exit(127);
	}
	t_assert(waitpid(pid, &ws, 0) == pid && WIFEXITED(ws));
	t_assert_eq(WEXITSTATUS(ws), 0);
	t_assert_eq(map_count_ids(pins, FORGED, UID_A, UID_A), 1);
	t_assert_eq(map_count_ids(pins, FORGED, named, named), -1);
	scope_tenants_end(&d, dir);
	printf("ok (kvmmd as pid %d%s): two uids' reports of one hash are two entries and two blocks\n",
	       (int)getpid(), getpid() == 1 ? ", in a pid namespace" : "");
	return 0;
}

int main(int argc, char **argv)
{
	pid_t pid;
	int ws;

	if (!HAVE_BPF || !HAVE_SDT)
		t_skip("built without BPF or USDT support");
	if (argc == 3 && !strcmp(argv[1], "forge"))
		return forge((uid_t)atoi(argv[2]));
	if (argc == 3 && !strcmp(argv[1], "pidns")) {
		/* named by the outer pid: here every test is pid 1 */
		char name[48];

		snprintf(name, sizeof(name), "scope-bpf-ns%s", argv[2]);
		return scope_bpf(name, argc, argv);
	}
	if (argc == 1 && geteuid() == 0) {
		/* a child (no thread runs yet) makes the namespace, whose
		 * first process, its pid 1, execs the check */
		char outer[16];

		snprintf(outer, sizeof(outer), "%d", (int)getpid());
		pid = fork();
		t_assert(pid >= 0);
		if (pid == 0) {
			/* LeakSanitizer reads /proc/PID/task by the pid of
			 * the namespace, in the root's /proc: not there */
			const char *ao = getenv("ASAN_OPTIONS");
			char opts[512];

			snprintf(opts, sizeof(opts), "%s%sdetect_leaks=0",
				 ao ? ao : "", ao && *ao ? ":" : "");
			setenv("ASAN_OPTIONS", opts, 1);
			if (unshare(CLONE_NEWPID))
				_exit(126);
			pid = fork();
			if (pid == 0) {
				execl("/proc/self/exe", "scope-bpf", "pidns",
				      outer, (char *)NULL);
				_exit(127);
			}
			if (pid < 0 || waitpid(pid, &ws, 0) != pid ||
			    !WIFEXITED(ws))
				_exit(125);
			_exit(WEXITSTATUS(ws));
		}
		t_assert(waitpid(pid, &ws, 0) == pid && WIFEXITED(ws));
		/* 77: no BPF there (the reason is in the log): the run
		 * below says whether it skips */
		if (WEXITSTATUS(ws) != 77)
			t_assert_eq(WEXITSTATUS(ws), 0);
	}
	return scope_bpf("scope-bpf", argc, argv);
}
