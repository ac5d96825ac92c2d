// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * Under --cache-policy arc, a block dropped while a client pinned it
 * comes back unpinned when it is published again.  kvmmd drops a pinned
 * block whose copy down keeps failing (cache-pin-migrate-fault's third
 * case): the policy's remove takes it out pinned, and kvmmd forgets its
 * pin records with it (kd_pin_block_gone()).  arc keeps the block's
 * entry as a ghost; the ghost used to keep the pin too, so the block
 * published again was pinned for good with no record to release it:
 * never evictable, a GPU block lost until the stop, and lost with the
 * process at the stop's save (the policy would not let it go down).
 *
 * A real kvmmd (arc, 8 cached GPU blocks, 6 policy host slots, an NVMe
 * file, --nvme-save-on-stop; every copy down slowed so the pin lands
 * while the copy runs): content 0's block 1 is pinned while its copy to
 * host runs, that copy and both retries fail, the block is dropped and
 * its record with it (UNPIN: -ENOENT).  Content 0 published again brings
 * block 1 back (from arc's ghost list).  At the stop every block must go
 * down to NVMe: the save's log says no block was left above it (before
 * the fix: "1 GPU and 0 host blocks not moved down", block 1 "pins 1").
 */
#include "tests/cache-restore-common.h"

#define NVME_SLOTS 40
#define DELAY_MS "1000" /* each copy down: the pin lands well before */

static void start(struct cr_env *env)
{
	cc_nvme_path(env->nvme, sizeof(env->nvme), "pin-history");
	t_nvme_require(env->nvme);
	nt_size_arg(env->nvme_size, sizeof(env->nvme_size), NVME_SLOTS,
		    CC_PPB * CC_PAGE);
	/* the placements below are lru's too: every block is new, and
	 * arc's T1 goes least recent first */
	const char *args[] = { "--log-level",
			       "info",
			       "--cache-gpu-blocks",
			       "8",
			       "--cache-policy",
			       "arc",
			       "--host-mem",
			       "2M",
			       "--nvme-path",
			       env->nvme,
			       "--nvme-size",
			       env->nvme_size,
			       "--nvme-save-on-stop",
			       "20000",
			       NULL };

	setenv("KVMMD_TEST_MIGRATE_FAIL", "gpu-host:2,gpu-host:4,gpu-host:5",
	       1);
	setenv("KVMMD_TEST_DEMOTE_DELAY_MS", DELAY_MS, 1);
	if (td_start(&env->d, args))
		t_fail("kvmmd did not start");
	unsetenv("KVMMD_TEST_DEMOTE_DELAY_MS");
	unsetenv("KVMMD_TEST_MIGRATE_FAIL");
}

int main(void)
{
	static char log[1 << 16];
	struct kvmm_tier_stats_reply ts;
	struct kvmm_pin_opts o;
	struct kvmm_conn *c;
	struct cr_env env = { 0 };

	setvbuf(stdout, NULL, _IOLBF, 0);
	start(&env);
	cr_write_blocks(env.d.sock, 0, CR_NB);
	cr_write_blocks(env.d.sock, 1, 3); /* demotes content 0's blocks 0-2 */
	c = cc_connect_lib(env.d.sock, "pinner");
	t_ok(cc_pin(c, cr_hash(0, 1), 0, 0, 0, &o));
	t_assert_eq(o.tier, 1); /* host */
	cc_settled_stats(env.d.sock, &ts);
	/* the copy and both retries failed: dropped, pinned, its record
	 * gone with it */
	t_assert_eq(ts.migrations_failed, 3);
	t_assert_eq(ts.tiers[1].drops, 1);
	t_assert_eq(kvmm_block_unpin(c, cr_hash(0, 1)), -ENOENT);
	kvmm_disconnect(c);

	/* published again: block 1 back from arc's ghost list (B1) */
	cr_write_blocks(env.d.sock, 0, CR_NB);
	cc_settled_stats(env.d.sock, &ts);
	printf("published again: GPU %llu, host %llu, NVMe %llu blocks\n",
	       (unsigned long long)ts.tiers[0].used_blocks,
	       (unsigned long long)ts.tiers[1].used_blocks,
	       (unsigned long long)ts.tiers[2].used_blocks);
	t_assert_eq(cr_cached(&ts), CR_NB + 3);
	cr_check_content(env.d.sock, 0);

	/* the stop saves everything: nothing holds block 1 any more */
	t_assert_eq(td_stop_log(&env.d, log, sizeof(log)), 0);
	unlink(env.nvme);
	for (const char *l = strstr(log, "cache: stopping"); l;
	     l = strstr(l + 1, "cache: stopping"))
		printf("%.*s\n", (int)strcspn(l, "\n"), l);
	t_assert_eq(t_count(log, "cache: stopping: moving"), 1);
	if (t_count(log, "not moved down, lost with the process"))
		t_fail("the stop left blocks above NVMe (block %016llx: its pin came back with it)",
		       (unsigned long long)cr_hash(0, 1));
	t_assert_eq(t_count(log, "0 dropped or failed on the way"), 1);
	printf("cache-pin-history-arc: ok\n");
	return 0;
}
