// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * A host -> NVMe write that finds no free NVMe slot waits for one that a
 * dropped block's write gives back, instead of failing: a real kvmmd (lru)
 * with 8 cached GPU blocks, a host tier of 8 slots (6 for the policy), an
 * NVMe file of 4 slots (3 for the policy) and demotion jobs that each wait
 * DELAY_MS, so the writes of one publish are all in flight together.
 *   - contents 0 to 5 (8 blocks each) are published one after the other,
 *     each once the tiers settled.  From content 2 on, each publish moves
 *     the previous content down to the host tier and pushes the 6 blocks
 *     there on to NVMe (their writes queued, each holding an NVMe slot),
 *     where the policy drops the older ones again before their writes
 *     ran: those hold their slots until the write ends, so the last
 *     writes find the 4 slots taken.  Before, they failed with -ENOSPC
 *     (migrations_failed) and their blocks were lost; now they wait and
 *     run once the dropped blocks' writes gave their slots back (or are
 *     called off when the policy drops them while they wait);
 *   - once settled: no migration failed, nothing was dropped but the
 *     policy's evictions from NVMe, the tiers hold what lru leaves (8
 *     GPU, 6 host, 3 NVMe, no NVMe slot left held), and content 4 (blocks
 *     0 and 1 on NVMe, the rest on host) comes back byte-identical;
 *   - one more content is published and kvmmd stopped at once, with
 *     writes still waiting: they fail at shutdown, nothing leaks (the
 *     sanitizer build) and kvmmd exits 0.
 */
#include "tests/cache-restore-common.h"

#define DELAY_MS 50
#define NVME_SLOTS 4
#define CONTENTS 6

int main(void)
{
	struct kvmm_tier_stats_reply ts;
	struct cr_env env;
	char delay[16];

	snprintf(delay, sizeof(delay), "%d", DELAY_MS);
	setenv("KVMMD_TEST_DEMOTE_DELAY_MS", delay, 1);
	cr_start(&env, NVME_SLOTS, 0);
	unsetenv("KVMMD_TEST_DEMOTE_DELAY_MS");

	for (int k = 0; k < CONTENTS; k++) {
		cr_write_content(env.d.sock, k);
		cc_settled_stats(env.d.sock, &ts);
		if (ts.migrations_failed)
			t_fail("content %d: %llu migrations failed", k,
			       (unsigned long long)ts.migrations_failed);
	}
	printf("NVMe: %llu blocks in, %llu dropped; %llu migrations failed\n",
	       (unsigned long long)ts.tiers[2].demotions_in,
	       (unsigned long long)ts.tiers[2].drops,
	       (unsigned long long)ts.migrations_failed);
	t_assert_eq(ts.migrations_failed, 0);
	t_assert_eq(ts.tiers[0].used_blocks, 8);
	t_assert_eq(ts.tiers[1].used_blocks, 6);
	t_assert_eq(ts.tiers[2].used_blocks, NVME_SLOTS - 1);
	t_assert_eq(ts.tiers[0].drops + ts.tiers[1].drops, 0);
	/* every block published is cached or was evicted from NVMe */
	t_assert_eq(ts.tiers[2].drops, CONTENTS * CR_NB - 8 - 6 - 3);
	t_assert_eq(ts.tiers[2].demotions_in, (CONTENTS - 1) * CR_NB - 6);
	cr_check_content(env.d.sock, CONTENTS - 2);
	cr_write_content(env.d.sock, CONTENTS);
	cr_stop(&env);
	printf("host -> NVMe writes waited for NVMe slots ok\n");
	return 0;
}
