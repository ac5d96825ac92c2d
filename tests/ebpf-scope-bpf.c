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

#include "tests/ebpf-scope-common.h"

/* The count of the pinned kvmm_blocks entry (hash, uid, uid), -1 if none. */
static long long map_count(const char *pin_dir, uint64_t hash, uint32_t uid)
{
	struct kvmm_block_key key = { .hash = hash, .uid = uid, .gid = uid };
	struct kvmm_block_stats st;
	char path[512];
	int fd, err;

	snprintf(path, sizeof(path), "%s/kvmm_blocks", pin_dir);
	fd = bpf_obj_get(path);
	t_assert(fd >= 0);
	err = bpf_map_lookup_elem(fd, &key, &st);
	close(fd);
	return err ? -1 : (long long)st.count;
}

/* The whole check, with kvmmd in this process; name: its pin root's. */
static int scope_bpf(const char *name, int argc, char **argv)
{
	struct kd_daemon d;
	struct kd_config cfg;
	char dir[64];

	scope_tenants(&d, &cfg, dir, sizeof(dir), TEL_MODE_BPF, name, argc,
		      argv);
	for (int b = 0; b < 2; b++) {
		const char *pins = tel_pin_dir(d.tel);

		/* the clients' steps; their prefix opens are kvmmd's */
		t_assert_eq(map_count(pins, scope_hashes[b], UID_A), 2 * 10);
		t_assert_eq(map_count(pins, scope_hashes[b], UID_B), 2 * 25);
		t_assert_eq(map_count(pins, scope_hashes[b], 0), -1);
	}
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
		if (WEXITSTATUS(ws) == 77)
			return 77; /* its reason is in the log */
		t_assert_eq(WEXITSTATUS(ws), 0);
	}
	return scope_bpf("scope-bpf", argc, argv);
}
