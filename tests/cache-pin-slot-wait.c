// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * A block pinned while its move down waits in line for a slot that no
 * move in flight will give back stays cached.  A pin does not stop a move
 * the policy made before it, so BLOCK_PIN can land on a block whose
 * GPU -> host demotion waits for a host slot (kd_cache.slotq) or whose
 * host -> NVMe write waits for an NVMe slot (kd_cache.nvmeq).  When the
 * moves in flight ended without giving one back, the pumps dropped the
 * block (kc_unrun()): its records went with it and the client's
 * BLOCK_UNPIN answered -ENOENT, although its bytes were intact (GPU pages,
 * host slot).  Now the policy makes room where the block goes: its
 * least valued block there moves down a tier (or out of the last), and
 * the pinned block takes the slot that frees.
 *
 * A real kvmmd (lru, 8 cached GPU blocks, 6 policy host slots of 8, an
 * NVMe file; cr_start()) with every copy down slowed (1 s) so the pin
 * lands while the move waits, and slots held back by the test knobs
 * KVMMD_TEST_HOST_SLOTS_HELD / KVMMD_TEST_NVME_SLOTS_HELD (what moves
 * waiting in line hold in real running), one daemon per case:
 *   - host: 3 of the 8 host slots held, content 1's 6 blocks demote
 *     content 0's blocks 0-5; 5 find a slot, block 5 waits and is
 *     pinned: it ends on the host tier, block 0 (the host tier's LRU)
 *     went on to NVMe, nothing dropped, UNPIN answers 0, and content
 *     0's blocks 1-7 open byte-identical (block 0 cannot be staged with
 *     the host slots held back);
 *   - NVMe: 2 of the 4 NVMe slots held, content 0's block 0 is on NVMe,
 *     then two new blocks push blocks 1 and 2 on to NVMe: block 1's
 *     write takes the last slot, block 2's waits and is pinned: block 0
 *     is dropped from NVMe (the policy's victim there), block 2 is
 *     written, UNPIN answers 0, and content 0's blocks 1-7 open
 *     byte-identical.
 */
#include "tests/cache-restore-common.h"

#define DELAY_MS "1000" /* each copy down: the pin lands well before */

static void start(struct cr_env *env, int nvme_slots, const char *knob,
		  const char *held)
{
	setenv(knob, held, 1);
	setenv("KVMMD_TEST_DEMOTE_DELAY_MS", DELAY_MS, 1);
	cr_start(env, nvme_slots, 0);
	unsetenv("KVMMD_TEST_DEMOTE_DELAY_MS");
	unsetenv(knob);
}

/* Plain pin of content 0's block b while its move waits in line (nothing
 * failed or dropped yet): the reply names tier. */
static struct kvmm_conn *pin(struct cr_env *env, int b, unsigned int tier)
{
	struct kvmm_conn *c = cc_connect_lib(env->d.sock, "pinner");
	struct kvmm_tier_stats_reply ts;
	struct kvmm_pin_opts o;
	struct cc s;

	t_ok(cc_pin(c, cr_hash(0, b), 0, 0, 0, &o));
	t_assert_eq(o.tier, tier);
	cc_connect(&s, env->d.sock);
	cc_tier_stats(&s, &ts);
	cc_disconnect(&s);
	if (cr_drops(&ts) || !ts.migrations_in_flight)
		t_fail("the pin of block %d came after the moves (%llu dropped, %llu in flight): a loaded machine? raise DELAY_MS",
		       b, (unsigned long long)cr_drops(&ts),
		       (unsigned long long)ts.migrations_in_flight);
	return c;
}

static void say(const char *what, const struct kvmm_tier_stats_reply *ts)
{
	printf("%s: GPU %llu, host %llu, NVMe %llu blocks; drops %llu/%llu/%llu; migrations failed %llu\n",
	       what, (unsigned long long)ts->tiers[0].used_blocks,
	       (unsigned long long)ts->tiers[1].used_blocks,
	       (unsigned long long)ts->tiers[2].used_blocks,
	       (unsigned long long)ts->tiers[0].drops,
	       (unsigned long long)ts->tiers[1].drops,
	       (unsigned long long)ts->tiers[2].drops,
	       (unsigned long long)ts->migrations_failed);
}

/* Content 0's blocks from..CR_NB-1 open as a prefix, byte-identical. */
static void check_from(const char *sock, uint32_t from)
{
	struct kvmm_prefix_open_reply rep;
	uint32_t ids[CR_NB * CC_PPB];
	uint32_t n = CR_NB - from;
	uint64_t h[CR_NB];
	struct cc c;

	for (uint32_t b = 0; b < n; b++)
		h[b] = cr_hash(0, (int)(from + b));
	cc_connect(&c, sock);
	cc_region(&c);
	cc_prefix(&c, h, n, &rep, ids);
	t_assert_eq(rep.nr_blocks, n);
	for (uint32_t b = 0; b < n; b++)
		for (uint32_t p = 0; p < CC_PPB; p++)
			for (uint32_t o = 0; o < CC_PAGE; o++)
				if (c.map[ids[b * CC_PPB + p]][o] !=
				    cc_pat(200, from + b, p, o))
					t_fail("block %u page %u byte %u differs",
					       from + b, p, o);
	cc_seq_close(&c, rep.seq_id, ids, n * CC_PPB);
	cc_disconnect(&c);
}

/* Block 5's demotion waits for a host slot that never comes back. */
static void host_slot(void)
{
	struct kvmm_tier_stats_reply ts;
	struct kvmm_conn *c;
	struct cr_env env;

	start(&env, 40, "KVMMD_TEST_HOST_SLOTS_HELD", "3");
	cr_write_blocks(env.d.sock, 0, CR_NB);
	cr_write_blocks(env.d.sock, 1, 6); /* demotes content 0's blocks 0-5 */
	c = pin(&env, 5, 1); /* host */
	cc_settled_stats(env.d.sock, &ts);
	say("pinned demotion found no host slot", &ts);
	/* the symptom: the record went with the block */
	t_ok(kvmm_block_unpin(c, cr_hash(0, 5)));
	t_assert_eq(cr_drops(&ts), 0);
	t_assert_eq(ts.migrations_failed, 0);
	t_assert_eq(ts.tiers[0].used_blocks, 8);
	/* 5 blocks in the 5 slots not held back (3 are) */
	t_assert_eq(ts.tiers[1].used_blocks, 5 + 3);
	t_assert_eq(ts.tiers[2].used_blocks, 1);
	kvmm_disconnect(c);
	/* block 0 is on NVMe, where it cannot be staged with the host tier
	 * full of slots held back */
	check_from(env.d.sock, 1);
	cr_stop(&env);
}

/* Block 2's write waits for an NVMe slot that never comes back. */
static void nvme_slot(void)
{
	struct kvmm_tier_stats_reply ts;
	struct kvmm_conn *c;
	struct cr_env env;

	start(&env, 4, "KVMMD_TEST_NVME_SLOTS_HELD", "2");
	cr_write_blocks(env.d.sock, 0, CR_NB);
	cr_write_blocks(env.d.sock, 1,
			7); /* blocks 0-6 to host, 0 on to NVMe */
	cc_settled_stats(env.d.sock, &ts);
	t_assert_eq(ts.tiers[2].used_blocks, 1);
	/* two more GPU victims push blocks 1 and 2 on to NVMe: 1's write
	 * takes the last free slot, 2's waits */
	cr_write_blocks(env.d.sock, 2, 2);
	c = pin(&env, 2, 2); /* NVMe */
	cc_settled_stats(env.d.sock, &ts);
	say("pinned write found no NVMe slot", &ts);
	/* the symptom: the record went with the block */
	t_ok(kvmm_block_unpin(c, cr_hash(0, 2)));
	t_assert_eq(ts.migrations_failed, 0);
	/* block 0, the NVMe tier's victim, and nothing else */
	t_assert_eq(ts.tiers[2].drops, 1);
	t_assert_eq(cr_drops(&ts), 1);
	t_assert_eq(cr_cached(&ts), CR_NB + 7 + 2 - 1);
	t_assert_eq(ts.tiers[2].used_blocks, 2);
	kvmm_disconnect(c);
	check_from(env.d.sock, 1);
	cr_stop(&env);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	host_slot();
	nvme_slot();
	printf("cache-pin-slot-wait: ok\n");
	return 0;
}
