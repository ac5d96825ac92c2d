// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * A block pinned while its copy down runs, and that copy fails: the pin
 * keeps it cached.  A pin does not stop a move the policy made before it,
 * so BLOCK_PIN can come while the block's GPU -> host copy or host -> NVMe
 * write is in flight (the reply names the tier it is going to).  Such a
 * copy that failed used to drop the block, and its pin records with it:
 * the client's BLOCK_UNPIN answered -ENOENT (daemon-fuzz phase 2 saw it
 * once, under KVMMD_TEST_MIGRATE_FAIL).  The bytes are still where the
 * copy read them, so kvmmd tries the copy again.  A real kvmmd (lru, 8
 * cached GPU blocks, 6 policy host slots, an NVMe file; cr_start()) with
 * every copy down slowed (KVMMD_TEST_DEMOTE_DELAY_MS) so the pin lands
 * while it runs, one daemon per case:
 *   - the GPU -> host copy of content 0's block 1 fails (gpu-host:2): the
 *     block is on the host tier, nothing dropped, UNPIN answers 0, and
 *     content 0 opens whole and byte-identical;
 *   - the host -> NVMe write of block 0 fails (host-nvme:1; the block was
 *     moved on to NVMe while its copy to host ran): the same, on NVMe;
 *   - the copy of block 1 fails three times in a row (gpu-host:2,4,5:
 *     jobs 4 and 5 are its retries): after two tries the block goes as
 *     any other whose copy failed (a host drop, its record with it).
 */
#include "tests/cache-restore-common.h"

#define NVME_SLOTS 40
#define DELAY_MS "1000" /* each copy down: the pin lands well before */

static void start(struct cr_env *env, const char *spec)
{
	setenv("KVMMD_TEST_MIGRATE_FAIL", spec, 1);
	setenv("KVMMD_TEST_DEMOTE_DELAY_MS", DELAY_MS, 1);
	cr_start(env, NVME_SLOTS, 0);
	unsetenv("KVMMD_TEST_DEMOTE_DELAY_MS");
	unsetenv("KVMMD_TEST_MIGRATE_FAIL");
}

/* Plain pin of content 0's block b, made while its copy down runs (no
 * migration has failed yet): the reply names tier. */
static struct kvmm_conn *pin(const char *sock, int b, unsigned int tier)
{
	struct kvmm_conn *c = cc_connect_lib(sock, "pinner");
	struct kvmm_tier_stats_reply ts;
	struct kvmm_pin_opts o;
	struct cc s;

	t_ok(cc_pin(c, cr_hash(0, b), 0, 0, 0, &o));
	t_assert_eq(o.tier, tier);
	cc_connect(&s, sock);
	cc_tier_stats(&s, &ts);
	cc_disconnect(&s);
	if (ts.migrations_failed || !ts.migrations_in_flight)
		t_fail("the pin of block %d came after its copy (%llu failed, %llu in flight): a loaded machine? raise DELAY_MS",
		       b, (unsigned long long)ts.migrations_failed,
		       (unsigned long long)ts.migrations_in_flight);
	return c;
}

static void say(const char *what, const struct kvmm_tier_stats_reply *ts)
{
	printf("%s: GPU %llu, host %llu, NVMe %llu blocks; drops %llu; migrations failed %llu\n",
	       what, (unsigned long long)ts->tiers[0].used_blocks,
	       (unsigned long long)ts->tiers[1].used_blocks,
	       (unsigned long long)ts->tiers[2].used_blocks,
	       (unsigned long long)cr_drops(ts),
	       (unsigned long long)ts->migrations_failed);
}

/* Block 1's copy to host fails once: tried again, kept. */
static void gpu_host(void)
{
	struct kvmm_tier_stats_reply ts;
	struct kvmm_conn *c;
	struct cr_env env;

	start(&env, "gpu-host:2");
	cr_write_blocks(env.d.sock, 0, CR_NB);
	cr_write_blocks(env.d.sock, 1, 3); /* demotes content 0's blocks 0-2 */
	c = pin(env.d.sock, 1, 1); /* host */
	cc_settled_stats(env.d.sock, &ts);
	say("pinned block's GPU->host copy failed", &ts);
	/* the symptom: the record went with the block */
	t_ok(kvmm_block_unpin(c, cr_hash(0, 1)));
	t_assert_eq(ts.migrations_failed, 1);
	t_assert_eq(cr_drops(&ts), 0);
	t_assert_eq(cr_cached(&ts), CR_NB + 3);
	t_assert_eq(ts.tiers[1].used_blocks, 3);
	kvmm_disconnect(c);
	cr_check_content(env.d.sock, 0);
	cr_stop(&env);
}

/* Block 0's write to NVMe fails once: tried again, kept. */
static void host_nvme(void)
{
	struct kvmm_tier_stats_reply ts;
	struct kvmm_conn *c;
	struct cr_env env;

	start(&env, "host-nvme:1");
	cr_write_blocks(env.d.sock, 0, CR_NB);
	cr_write_blocks(env.d.sock, 1,
			7); /* blocks 0-6 to host, 0 on to NVMe */
	c = pin(env.d.sock, 0, 2); /* NVMe */
	cc_settled_stats(env.d.sock, &ts);
	say("pinned block's host->NVMe write failed", &ts);
	/* the symptom: the record went with the block */
	t_ok(kvmm_block_unpin(c, cr_hash(0, 0)));
	t_assert_eq(ts.migrations_failed, 1);
	t_assert_eq(cr_drops(&ts), 0);
	t_assert_eq(cr_cached(&ts), CR_NB + 7);
	t_assert_eq(ts.tiers[2].used_blocks, 1);
	kvmm_disconnect(c);
	cr_check_content(env.d.sock, 0);
	cr_stop(&env);
}

/* Block 1's copy fails, and so do both retries: dropped, record gone. */
static void gpu_host_keeps_failing(void)
{
	struct kvmm_tier_stats_reply ts;
	struct kvmm_conn *c;
	struct cr_env env;

	start(&env, "gpu-host:2,gpu-host:4,gpu-host:5");
	cr_write_blocks(env.d.sock, 0, CR_NB);
	cr_write_blocks(env.d.sock, 1, 3);
	c = pin(env.d.sock, 1, 1); /* host */
	cc_settled_stats(env.d.sock, &ts);
	say("pinned block's GPU->host copy failed 3 times", &ts);
	t_assert_eq(ts.migrations_failed, 3);
	t_assert_eq(ts.tiers[1].drops, 1);
	t_assert_eq(cr_drops(&ts), 1);
	t_assert_eq(cr_cached(&ts), CR_NB + 3 - 1);
	t_assert_eq(kvmm_block_unpin(c, cr_hash(0, 1)), -ENOENT);
	kvmm_disconnect(c);
	cr_stop(&env);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	gpu_host();
	host_nvme();
	gpu_host_keeps_failing();
	printf("cache-pin-migrate-fault: ok\n");
	return 0;
}
