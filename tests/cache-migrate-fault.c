// SPDX-License-Identifier: MIT
/*
 * timeout: 120
 * Migrations that fail, end to end: a real kvmmd (lru, 8 cached GPU
 * blocks, 6 policy host slots, an NVMe file; cr_start()) whose migration
 * engine fails the N-th job of a kind with -EIO where that copy's error
 * would surface (KVMMD_TEST_MIGRATE_FAIL), real client processes writing
 * content 0 (8 blocks) and then content 1 (a few blocks) to push content
 * 0 down.  One daemon per case:
 *   - start-up: bad knob values (unknown kind, N 0, not a number, no N,
 *     empty, too many entries) make kvmmd refuse to start;
 *   - a GPU->host copy fails (block 1 of content 0): migrations_failed 1,
 *     the host tier's drops 1, cached = 8 + 3 - 1, an open of content 0
 *     stops before block 1 (a miss, not wrong bytes), blocks 2-7 open
 *     byte-identical, new content is served; the same with the copies
 *     slowed and an open waiting for them: a busy miss at block 1; a
 *     failed copy of a block the policy moved on to NVMe meanwhile: an
 *     NVMe drop;
 *   - a host->NVMe write fails (block 0): the block goes back to the host
 *     tier with its host copy (nvme_write_returns 1, nothing dropped),
 *     the host tier's LRU block is written instead, all 8 open intact;
 *   - a host->GPU or NVMe->GPU restore fails (block 1): a plain open's
 *     prefix ends at it, migrations_failed 1, nothing dropped, the block
 *     stays in its tier and a later open gets all 8 byte-identical; with
 *     KVMM_PREFIX_OPEN_EARLY the reply hands out 8 blocks, SEQ_WAIT_READY
 *     reports block 1 failed (early_reload_failures 1, not a hit), the
 *     others land byte-identical;
 *   - a held block's copy down fails: the holder's sequence keeps its
 *     pages and bytes, the block is no longer cached (a host drop), its
 *     publish again caches it.
 * Every case ends with nothing leaked: the pool holds exactly the cached
 * GPU blocks, nothing mapped or open; kvmmd stops cleanly (ASan: no leak).
 */
#include "tests/cache-restore-common.h"

#define EARLY (KVMM_PREFIX_OPEN_ACTIONS | KVMM_PREFIX_OPEN_EARLY)
#define NVME_SLOTS 40

/* kvmmd with the knob set to spec; restores delayed delay_ms; --restore-mode
 * reload when reload (early opens need actions). */
static void start(struct cr_env *env, const char *spec, int delay_ms,
		  bool reload)
{
	setenv("KVMMD_TEST_MIGRATE_FAIL", spec, 1);
	cr_start_args(env, NVME_SLOTS, delay_ms,
		      reload ? "--restore-mode" : NULL, "reload");
	unsetenv("KVMMD_TEST_MIGRATE_FAIL");
}

/* Nothing in transit, nothing leaked: only the cached GPU blocks (and
 * extra_pages of a live holder) hold pool pages. */
static void check_clean(struct cr_env *env, struct kvmm_tier_stats_reply *ts,
			uint64_t extra_pages, uint64_t sessions)
{
	struct kvmm_status_reply st;

	cc_settled_stats(env->d.sock, ts);
	for (int i = 0; i < 1000; i++) {
		t_ok(td_status(&env->d, &st));
		if (st.sessions <= sessions + 1)
			break;
		usleep(10000);
	}
	t_assert_eq(st.pages_allocated,
		    ts->tiers[0].used_blocks * CC_PPB + extra_pages);
	if (!extra_pages) {
		t_assert_eq(st.pages_mapped, 0);
		t_assert_eq(st.sequences, 0);
	}
	t_assert_eq(st.pages_quarantined, 0);
	t_assert_eq(st.pages_revoking, 0);
	t_assert_eq(ts->prefix_opens_pending, 0);
}

static void say(const char *what, const struct kvmm_tier_stats_reply *ts)
{
	printf("%s: GPU %llu, host %llu, NVMe %llu blocks; drops %llu/%llu/%llu; migrations failed %llu; hits %llu/%llu/%llu\n",
	       what, (unsigned long long)ts->tiers[0].used_blocks,
	       (unsigned long long)ts->tiers[1].used_blocks,
	       (unsigned long long)ts->tiers[2].used_blocks,
	       (unsigned long long)ts->tiers[0].drops,
	       (unsigned long long)ts->tiers[1].drops,
	       (unsigned long long)ts->tiers[2].drops,
	       (unsigned long long)ts->migrations_failed,
	       (unsigned long long)ts->tiers[0].hits,
	       (unsigned long long)ts->tiers[1].hits,
	       (unsigned long long)ts->tiers[2].hits);
}

/* Bad knob values: kvmmd refuses to start and names the variable. */
static void bad_knobs(void)
{
	static const char *const bad[] = {
		"gpu-disk:1",
		"gpu-host:0",
		"gpu-host:x",
		"gpu-host",
		"gpu-host:1,",
		"host-nvme:3-2",
		"host-nvme:+",
		"host-nvme:2-",
		"host-nvme:2++",
		"",
		"host-gpu:1:2",
		"gpu-host:1,gpu-host:2,gpu-host:3,gpu-host:4,gpu-host:5,gpu-host:6,gpu-host:7,gpu-host:8,gpu-host:9",
	};
	const char *args[] = { "--log-level", "info", "--host-mem", "2M",
			       NULL };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		static char log[16384];
		struct td_daemon d;
		int r;

		setenv("KVMMD_TEST_MIGRATE_FAIL", bad[i], 1);
		r = td_start(&d, args);
		unsetenv("KVMMD_TEST_MIGRATE_FAIL");
		if (!r) {
			td_stop(&d);
			t_fail("kvmmd started with KVMMD_TEST_MIGRATE_FAIL='%s'",
			       bad[i]);
		}
		t_assert(td_read_log(&d, log, sizeof(log)) > 0);
		if (!strstr(log, "ERR") ||
		    !strstr(log, "KVMMD_TEST_MIGRATE_FAIL="))
			t_fail("no error naming KVMMD_TEST_MIGRATE_FAIL for '%s'",
			       bad[i]);
		unlink(d.log);
		unlink(d.sock);
		rmdir(d.dir);
	}
	printf("bad knob values refused at start-up: %zu\n",
	       sizeof(bad) / sizeof(bad[0]));
}

/* A GPU->host copy fails: content 0's block 1 (the second demotion). */
static void gpu_host(void)
{
	struct kvmm_tier_stats_reply ts;
	struct cr_env env;

	start(&env, "gpu-host:2", 0, false);
	cr_write_blocks(env.d.sock, 0, CR_NB);
	cr_write_blocks(env.d.sock, 1, 3); /* demotes content 0's blocks 0-2 */
	check_clean(&env, &ts, 0, 0);
	say("GPU->host copy failed", &ts);
	t_assert_eq(ts.migrations_failed, 1);
	t_assert_eq(ts.tiers[1].demotions_in, 3);
	t_assert_eq(ts.tiers[1].drops, 1); /* counted where the move put it */
	t_assert_eq(cr_drops(&ts), 1);
	t_assert_eq(cr_cached(&ts), CR_NB + 3 - 1);
	t_assert_eq(ts.tiers[0].used_blocks, 8);
	t_assert_eq(ts.tiers[1].used_blocks, 2);
	/* block 1 is a miss: the prefix is block 0; the rest is intact */
	cr_open_from(env.d.sock, 0, 0, CR_NB, 1);
	cr_open_from(env.d.sock, 0, 2, CR_NB - 2, CR_NB - 2);
	/* the daemon goes on: new content, and content 1 */
	cr_write_blocks(env.d.sock, 2, 3);
	cr_open_from(env.d.sock, 1, 0, CR_NB, 3); /* 3 of the 8 hashes asked */
	cr_open_from(env.d.sock, 2, 0, CR_NB, 3);
	check_clean(&env, &ts, 0, 0);
	t_assert_eq(ts.migrations_failed, 1);
	t_assert_eq(cr_drops(&ts), 1);
	cr_stop(&env);
}

/* An open waits for content 0's blocks 0-2 being demoted (each copy 400
 * ms) and block 1's copy fails meanwhile: the prefix ends before it, at
 * a block dropped while the open waited for its move (a busy miss). */
static void gpu_host_waited(void)
{
	struct kvmm_tier_stats_reply ts;
	struct cr_env env;

	setenv("KVMMD_TEST_DEMOTE_DELAY_MS", "400", 1);
	start(&env, "gpu-host:2", 0, false);
	unsetenv("KVMMD_TEST_DEMOTE_DELAY_MS");
	cr_write_blocks(env.d.sock, 0, CR_NB);
	cr_write_blocks(env.d.sock, 1, 3); /* replies while the copies run */
	cr_open_from(env.d.sock, 0, 0, CR_NB, 1);
	check_clean(&env, &ts, 0, 0);
	say("GPU->host copy failed while an open waited", &ts);
	t_assert_eq(ts.busy_misses, 1);
	t_assert_eq(ts.migrations_failed, 1);
	t_assert_eq(ts.tiers[1].drops, 1);
	t_assert_eq(cr_drops(&ts), 1);
	t_assert_eq(cr_cached(&ts), CR_NB + 3 - 1);
	cr_open_from(env.d.sock, 0, 2, CR_NB - 2, CR_NB - 2);
	check_clean(&env, &ts, 0, 0);
	t_assert_eq(ts.migrations_failed, 1);
	t_assert_eq(cr_drops(&ts), 1);
	cr_stop(&env);
}

/* Content 0's block 0's copy to host (slowed to 300 ms) fails after the
 * policy moved the block on to NVMe (host full): an NVMe drop. */
static void gpu_host_then_nvme(void)
{
	struct kvmm_tier_stats_reply ts;
	struct cr_env env;

	setenv("KVMMD_TEST_DEMOTE_DELAY_MS", "300", 1);
	start(&env, "gpu-host:1", 0, false);
	unsetenv("KVMMD_TEST_DEMOTE_DELAY_MS");
	cr_write_blocks(env.d.sock, 0, CR_NB);
	cr_write_blocks(env.d.sock, 1, 7); /* blocks 0-6 down, 0 on to NVMe */
	check_clean(&env, &ts, 0, 0);
	say("GPU->host copy failed, block moved on to NVMe", &ts);
	t_assert_eq(ts.migrations_failed, 1);
	t_assert_eq(ts.tiers[1].demotions_in, 7);
	t_assert_eq(ts.tiers[2].demotions_in, 1);
	t_assert_eq(ts.tiers[2].drops, 1); /* where the last move put it */
	t_assert_eq(cr_drops(&ts), 1);
	t_assert_eq(cr_cached(&ts), CR_NB + 7 - 1);
	t_assert_eq(ts.tiers[1].used_blocks, 6);
	t_assert_eq(ts.tiers[2].used_blocks, 0);
	cr_open_from(env.d.sock, 0, 0, CR_NB, 0);
	cr_open_from(env.d.sock, 0, 1, CR_NB - 1, CR_NB - 1);
	check_clean(&env, &ts, 0, 0);
	t_assert_eq(cr_drops(&ts), 1);
	cr_stop(&env);
}

/*
 * A host->NVMe write fails: content 0's block 0 (the only one).  Its
 * host copy is still good: it goes back to the host tier, whose LRU
 * block (1) goes on to NVMe instead, and that write works.  Nothing is
 * lost; all 8 blocks open byte-identical.  (Before, block 0 was dropped
 * with its host copy: an NVMe drop, and a miss.)
 */
static void host_nvme(void)
{
	struct kvmm_tier_stats_reply ts;
	struct cr_env env;

	start(&env, "host-nvme:1", 0, false);
	cr_write_blocks(env.d.sock, 0, CR_NB);
	cr_write_blocks(env.d.sock, 1,
			7); /* blocks 0-6 to host, 0 on to NVMe */
	check_clean(&env, &ts, 0, 0);
	say("host->NVMe write failed", &ts);
	t_assert_eq(ts.migrations_failed, 1);
	t_assert_eq(ts.nvme_write_returns, 1);
	t_assert_eq(ts.tiers[2].demotions_in, 2); /* block 0, then 1 */
	t_assert_eq(ts.nvme_write_outs, 0);
	t_assert_eq(ts.nvme_write_error, 0);
	t_assert_eq(cr_drops(&ts), 0);
	t_assert_eq(cr_cached(&ts), CR_NB + 7);
	t_assert_eq(ts.tiers[1].used_blocks, 6);
	t_assert_eq(ts.tiers[2].used_blocks, 1);
	cr_open_from(env.d.sock, 0, 0, CR_NB,
		     CR_NB); /* block 0 from host, 1 NVMe */
	check_clean(&env, &ts, 0, 0);
	t_assert_eq(ts.migrations_failed, 1);
	t_assert_eq(ts.tiers[1].hits, 6);
	t_assert_eq(ts.tiers[2].hits, 1);
	t_assert_eq(cr_drops(&ts), 0);
	cr_stop(&env);
}

/* PREFIX_OPEN of content k with flags; its reply (ids mapped, actions). */
static void early_open(struct cc *c, int k, struct kvmm_prefix_open_reply *out,
		       uint32_t *ids, uint8_t *acts)
{
	static char buf[KVMM_MSG_MAX];
	char req[sizeof(struct kvmm_prefix_open) + CR_NB * 8];
	struct kvmm_prefix_open po = { .size = sizeof(po),
				       .region_id = c->region,
				       .nr_hashes = CR_NB,
				       .flags = EARLY };
	struct kvmm_prefix_open_reply *rep = (void *)buf;
	static int fds[CC_MAX_PAGES];
	unsigned int nfds;
	uint32_t npages;

	memcpy(req, &po, sizeof(po));
	for (int b = 0; b < CR_NB; b++) {
		uint64_t h = cr_hash(k, b);

		memcpy(req + sizeof(po) + b * 8, &h, 8);
	}
	cc_send(c, KVMM_CMD_PREFIX_OPEN, req, sizeof(req));
	t_ok(cc_recv(c, buf, sizeof(buf), fds, &nfds));
	*out = *rep;
	npages = rep->nr_blocks * rep->pages_per_block;
	t_assert_eq(rep->nr_fds, nfds);
	cc_map(c, rep->page_ids, npages, fds, nfds);
	for (uint32_t i = 0; i < npages; i++)
		ids[i] = rep->page_ids[i] & ~KVMM_PAGE_HELD;
	memcpy(acts, rep->page_ids + npages, rep->nr_blocks);
}

/* SEQ_WAIT_READY for all CR_NB blocks: the failed block numbers. */
static uint32_t wait_ready(struct cc *c, uint32_t seq, uint32_t *failed)
{
	char buf[sizeof(struct kvmm_seq_wait_ready_reply) + 64 * 4];
	struct kvmm_seq_wait_ready_reply *rep = (void *)buf;
	struct kvmm_seq_wait_ready w = { .size = sizeof(w),
					 .region_id = c->region,
					 .seq_id = seq,
					 .upto_block = CR_NB };

	memset(buf, 0, sizeof(buf));
	t_ok(cc_call(c, KVMM_CMD_SEQ_WAIT_READY, &w, sizeof(w), buf,
		     sizeof(buf), NULL, NULL));
	t_assert_eq(rep->nr_pending, 0);
	t_assert(rep->nr_failed <= 64);
	memcpy(failed, rep->failed, rep->nr_failed * 4);
	return rep->nr_failed;
}

/*
 * A restore of content 0's block 1 fails (tier 1: host->GPU, 2:
 * NVMe->GPU), in a plain open or an early one.  Content 1 (nb1 blocks)
 * pushed content 0's first blocks down: 3 to the host tier, or 8 of
 * which 0 and 1 went on to NVMe.
 */
static void restore_fails(int tier, bool early)
{
	const char *spec = tier == 1 ? "host-gpu:2" : "nvme-gpu:2";
	uint32_t nb1 = tier == 1 ? 3 : CR_NB, lower = nb1; /* not on GPU */
	struct kvmm_tier_stats_reply ts0, ts;
	struct cr_env env;
	char what[80];

	/* early: every restore waits 100 ms, so all land after the reply */
	start(&env, spec, early ? 100 : 0, early);
	cr_write_blocks(env.d.sock, 0, CR_NB);
	cr_write_blocks(env.d.sock, 1, nb1);
	check_clean(&env, &ts0, 0, 0);
	t_assert_eq(cr_drops(&ts0), 0);
	t_assert_eq(ts0.tiers[2].used_blocks, tier == 2 ? 2 : 0);
	if (!early) {
		/* the prefix ends at block 1; block 0 and those after 1
		 * are restored anyway (and stay cached on the GPU) */
		cr_open_from(env.d.sock, 0, 0, CR_NB, 1);
	} else {
		static uint32_t ids[CR_NB * CC_PPB];
		struct kvmm_prefix_open_reply rep;
		struct kvmm_block_publish_reply pub;
		uint8_t acts[CR_NB];
		uint32_t failed[64];
		uint64_t h[CR_NB];
		struct cc c;

		cc_connect(&c, env.d.sock);
		cc_region(&c);
		early_open(&c, 0, &rep, ids, acts);
		t_assert_eq(rep.nr_blocks, CR_NB);
		t_assert_eq(tier == 1 ? rep.from_host :
					rep.from_host + rep.from_nvme,
			    lower);
		t_assert_eq(acts[1], tier == 1 ? KVMM_BLOCK_RELOADED_HOST :
						 KVMM_BLOCK_RELOADED_NVME);
		t_assert_eq(wait_ready(&c, rep.seq_id, failed), 1);
		t_assert_eq(failed[0], 1);
		/* every other block landed intact; the client recomputes
		 * block 1 (writes its bytes) */
		for (uint32_t pg = 0; pg < CC_PPB; pg++)
			for (uint32_t o = 0; o < CC_PAGE; o++)
				c.map[ids[1 * CC_PPB + pg]][o] =
					cc_pat(200, 1, pg, o);
		cc_check(&c, ids, CR_NB, 200);
		cc_tier_stats(&c, &ts);
		t_assert_eq(ts.early_opens - ts0.early_opens, 1);
		t_assert_eq(ts.early_reloads - ts0.early_reloads, lower);
		t_assert_eq(ts.early_reload_failures -
				    ts0.early_reload_failures,
			    1);
		/* the landed reloads are hits, the failed one is not */
		t_assert_eq(ts.prefix_blocks_hit - ts0.prefix_blocks_hit,
			    CR_NB - 1);
		t_assert_eq(ts.tiers[1].hits + ts.tiers[2].hits -
				    ts0.tiers[1].hits - ts0.tiers[2].hits,
			    lower - 1);
		/* block 1 is still cached in its tier (the failed reload
		 * took nothing from it); the client's publish of its
		 * recomputed pages promotes it there (cache-publish-promote):
		 * published, the others duplicates */
		for (int b = 0; b < CR_NB; b++)
			h[b] = cr_hash(0, b);
		t_ok(cc_publish(&c, rep.seq_id, 0, h, CR_NB, &pub));
		t_assert_eq(pub.published, 1);
		t_assert_eq(pub.duplicates, CR_NB - 1);
		cc_seq_close(&c, rep.seq_id, ids, CR_NB * CC_PPB);
		cc_disconnect(&c);
	}
	check_clean(&env, &ts, 0, 0);
	snprintf(what, sizeof(what), "%s restore failed (%s open)",
		 tier == 1 ? "host->GPU" : "NVMe->GPU",
		 early ? "early" : "plain");
	say(what, &ts);
	if (!early) {
		/* a hit for block 0 alone: the restores past the cut are
		 * cached, not handed out */
		t_assert_eq(ts.tiers[tier].hits - ts0.tiers[tier].hits, 1);
		t_assert_eq(ts.tiers[0].hits + ts.tiers[1].hits +
				    ts.tiers[2].hits - ts0.tiers[0].hits -
				    ts0.tiers[1].hits - ts0.tiers[2].hits,
			    1);
		t_assert_eq(ts.prefix_blocks_hit - ts0.prefix_blocks_hit, 1);
	}
	t_assert_eq(ts.migrations_failed, 1);
	t_assert_eq(ts.checksum_failures, 0);
	t_assert_eq(cr_drops(&ts), 0);
	t_assert_eq(cr_cached(&ts), cr_cached(&ts0)); /* nothing lost */
	t_assert_eq(ts.tiers[0].promotions_out + ts.tiers[1].promotions_out +
			    ts.tiers[2].promotions_out -
			    ts0.tiers[0].promotions_out -
			    ts0.tiers[1].promotions_out -
			    ts0.tiers[2].promotions_out,
		    lower - 1);
	/* the failed block stayed in its tier: a later open has it all */
	cr_open_from(env.d.sock, 0, 0, CR_NB, CR_NB);
	check_clean(&env, &ts, 0, 0);
	t_assert_eq(ts.migrations_failed, 1);
	t_assert_eq(cr_drops(&ts), 0);
	t_assert_eq(cr_cached(&ts), cr_cached(&ts0));
	cr_stop(&env);
}

/* A held block's copy down fails: its sequence keeps pages and bytes. */
static void held(void)
{
	uint32_t pages[(CR_NB + 1) * CC_PPB];
	struct kvmm_block_publish_reply rep;
	struct kvmm_tier_stats_reply ts;
	uint64_t h[CR_NB + 1];
	struct cr_env env;
	struct cc c;
	uint32_t seq;

	start(&env, "gpu-host:1", 0, false);
	for (int b = 0; b <= CR_NB; b++)
		h[b] = cr_hash(0, b);
	cc_connect(&c, env.d.sock);
	cc_region(&c);
	seq = cc_seq_open(&c);
	cc_extend(&c, seq, (CR_NB + 1) * CC_TPB, pages);
	cc_fill(&c, pages, CR_NB + 1, 200);
	/* blocks 0-7 fill the GPU tier, all held: block 8 is its own
	 * victim, copied down while held, and that copy fails */
	t_ok(cc_publish(&c, seq, 0, h, CR_NB + 1, &rep));
	t_assert_eq(rep.published, CR_NB + 1);
	t_assert_eq(rep.not_cached, 0);
	check_clean(&env, &ts, CC_PPB, 1);
	say("held block's copy failed", &ts);
	t_assert_eq(ts.held_copies, 1);
	t_assert_eq(ts.migrations_failed, 1);
	t_assert_eq(ts.tiers[1].drops, 1);
	t_assert_eq(cr_drops(&ts), 1);
	t_assert_eq(cr_cached(&ts), CR_NB);
	cc_check(&c, pages, CR_NB + 1, 200); /* the holder's: untouched */
	/* block 8 is no longer cached: published again, copied again (this
	 * copy works) */
	t_ok(cc_publish(&c, seq, CR_NB, h + CR_NB, 1, &rep));
	t_assert_eq(rep.published, 1);
	t_assert_eq(rep.duplicates, 0);
	check_clean(&env, &ts, CC_PPB, 1);
	t_assert_eq(ts.held_copies, 2);
	t_assert_eq(ts.migrations_failed, 1);
	t_assert_eq(cr_cached(&ts), CR_NB + 1);
	cc_check(&c, pages, CR_NB + 1, 200);
	cc_seq_close(&c, seq, pages, (CR_NB + 1) * CC_PPB);
	cc_disconnect(&c);
	check_clean(&env, &ts, 0, 0);
	cr_open_from(env.d.sock, 0, 0, CR_NB,
		     CR_NB); /* 8 of the 9 asked: whole */
	check_clean(&env, &ts, 0, 0);
	t_assert_eq(cr_drops(&ts), 1);
	cr_stop(&env);
}

int main(void)
{
	bad_knobs();
	gpu_host();
	gpu_host_waited();
	gpu_host_then_nvme();
	host_nvme();
	restore_fails(1, false);
	restore_fails(1, true);
	restore_fails(2, false);
	restore_fails(2, true);
	held();
	printf("failed migrations ok\n");
	return 0;
}
