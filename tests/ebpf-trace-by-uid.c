// SPDX-License-Identifier: MIT
/*
 * `kvmmctl trace --by-uid` shows each uid's figures, as the kvmm_blocks
 * map keys them: kvmmd runs with --telemetry bpf attached to this
 * binary's probes; two processes of two uids (setuid children) report
 * one hash each and a second hash for one of them:
 *
 *	uid A: hash 1 three times, hash 2 once
 *	uid B: hash 1 five times
 *
 * `kvmmctl --json trace --once --by-uid` lists uid A with 2 blocks and 4
 * accesses, uid B with 1 block and 5, and the top blocks per hash and
 * uid (hash 1 under B with 5, under A with 3); without --by-uid hash 1
 * is one block of 8 accesses, as before.  Without the option there was
 * no per-uid figure at all (only bpftool's map dump had them).
 * Skips (77) without root or BPF.
 */
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ebpf/probes.h"
#include "ebpf/telemetry.h"
#include "tests/lib/bpf_test.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

#define UID_A 61031u
#define UID_B 61032u
#define HASH_1 0x5151000000000001ull
#define HASH_2 0x5252000000000002ull

/* As uid (and gid) `uid`, report `n` accesses of `hash` in one step. */
static int report(uid_t uid, uint64_t hash, unsigned int n)
{
	struct kvmm_access_rec recs[8];

	if (n > 8 || setgroups(0, NULL) || setresgid(uid, uid, uid) ||
	    setresuid(uid, uid, uid))
		return 1;
	if (!KVMM_PROBE_ENABLED(access))
		return 2; /* nobody listens: the counts below would be 0 */
	for (unsigned int i = 0; i < n; i++)
		recs[i] = (struct kvmm_access_rec){ .hash = hash,
						    .seq = 1,
						    .tier = KVMM_TEL_TIER_GPU };
	kvmm_probe_access(1, recs, n);
	return 0;
}

/* Run report() in a child process of uid `uid`; asserts it did. */
static void report_as(uid_t uid, uint64_t hash, unsigned int n)
{
	pid_t pid = fork();
	int ws;

	t_assert(pid >= 0);
	if (pid == 0)
		_exit(report(uid, hash, n));
	t_assert(waitpid(pid, &ws, 0) == pid && WIFEXITED(ws));
	t_assert_eq(WEXITSTATUS(ws), 0);
}

int main(void)
{
	struct bpf_test b;
	char cmd[1024], kvmmctl[512], want[256];
	const char *args[] = { "--telemetry",
			       "bpf",
			       "--telemetry-pin-root",
			       b.pin,
			       "--telemetry-attach",
			       b.self,
			       NULL };
	struct td_daemon d;
	struct tel *t;
	char *out;

	bpf_test_init(&b, "trace-uid");
	t = bpf_test_open(&b); /* can this machine load BPF at all? */
	tel_close(t);

	t_ok(td_start(&d, args));
	report_as(UID_A, HASH_1, 3);
	report_as(UID_A, HASH_2, 1);
	report_as(UID_B, HASH_1, 5);
	td_build_path("kvmmctl", kvmmctl, sizeof(kvmmctl));

	snprintf(cmd, sizeof(cmd),
		 "%s --json trace --once --by-uid --top 3 --pin-root %s",
		 kvmmctl, b.pin);
	out = bpf_test_run(cmd);
	printf("%s", out);
	snprintf(want, sizeof(want),
		 "\"uids\":[{\"uid\":%u,\"blocks\":2,\"accesses\":4},"
		 "{\"uid\":%u,\"blocks\":1,\"accesses\":5}]",
		 UID_A, UID_B);
	t_assert(strstr(out, want));
	snprintf(want, sizeof(want),
		 "\"top_blocks\":[{\"hash\":\"0x%016llx\",\"uid\":%u,"
		 "\"gid\":%u,\"count\":5,",
		 HASH_1, UID_B, UID_B);
	t_assert(strstr(out, want));
	snprintf(want, sizeof(want),
		 "{\"hash\":\"0x%016llx\",\"uid\":%u,\"gid\":%u,\"count\":3,",
		 HASH_1, UID_A, UID_A);
	t_assert(strstr(out, want));
	snprintf(want, sizeof(want),
		 "{\"hash\":\"0x%016llx\",\"uid\":%u,\"gid\":%u,\"count\":1,",
		 HASH_2, UID_A, UID_A);
	t_assert(strstr(out, want));

	/* the text view: one line per uid */
	snprintf(cmd, sizeof(cmd), "%s trace --once --by-uid --pin-root %s",
		 kvmmctl, b.pin);
	out = bpf_test_run(cmd);
	printf("%s", out);
	snprintf(want, sizeof(want), "\n  %-10u %-12d %d\n  %-10u %-12d %d\n",
		 UID_A, 2, 4, UID_B, 1, 5);
	t_assert(strstr(out, want));
	snprintf(want, sizeof(want), "  0x%016llx uid %-10u count 5 ", HASH_1,
		 UID_B);
	t_assert(strstr(out, want));

	/* without --by-uid the uids of a hash add up, as before */
	snprintf(cmd, sizeof(cmd), "%s --json trace --once --pin-root %s",
		 kvmmctl, b.pin);
	out = bpf_test_run(cmd);
	printf("%s", out);
	t_assert(!strstr(out, "\"uids\""));
	snprintf(want, sizeof(want),
		 "\"top_blocks\":[{\"hash\":\"0x%016llx\",\"count\":8,",
		 HASH_1);
	t_assert(strstr(out, want));

	t_assert_eq(td_stop(&d), 0);
	printf("ok: kvmmctl trace --by-uid shows each uid's blocks and accesses\n");
	return 0;
}
