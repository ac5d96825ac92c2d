// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * Demotions that find the host tier full wait in line for a slot while
 * the loop goes on: a real kvmmd with 8 cached GPU blocks, a host tier of
 * 8 slots (6 for the policy) and an NVMe file, whose demotion jobs each
 * wait DELAY_MS, and real client processes.
 *   - contents 0 to 3 (8 blocks each) are published one after the other:
 *     content 1's publish demotes content 0 into all 8 host slots (copies
 *     in flight, then on to NVMe, each slot held until its NVMe write is
 *     done), so the 16 demotions that contents 2 and 3 cause find no free
 *     host slot.  Content 3's publish reply still comes within DELAY_MS
 *     (a blocking wait took at least one NVMe write of DELAY_MS: content
 *     2's demotions are ahead of content 3's in line): the demotions are
 *     queued (demotions_queued > 0 when the writer asks, right after its
 *     reply; slot_waits counted), and another process's TIER_STATS round
 *     trip meanwhile is as fast;
 *   - once the copies ran the tiers hold what a blocking wait left (8 GPU,
 *     6 host, 18 NVMe, nothing dropped, nothing queued) and contents 0
 *     (NVMe) and 1 (host and NVMe) come back byte-identical.
 *
 * The round trips are bounded by DELAY_MS, what a blocking wait takes at
 * least, not by half of it: at 150 ms and a bound of 75 ms, a publish took
 * up to 37 ms on a loaded 2-core machine; at 250 ms the bound leaves 250
 * ms (Documentation/build.md, "Timing in tests").
 */
#include "tests/cache-restore-common.h"

#define DELAY_MS 250

/* What a writer process saw: the BLOCK_PUBLISH round trip and the
 * demotions queued for a host slot right after its reply. */
struct write_res {
	uint64_t ms;
	uint64_t queued;
};

/* Content k published by a writer process. */
static struct write_res write_timed(const char *sock, int k)
{
	struct write_res res;
	int fd[2];
	pid_t p;

	t_ok(pipe(fd));
	p = fork();
	t_assert(p >= 0);
	if (p == 0) {
		struct kvmm_block_publish_reply rep;
		struct kvmm_status_reply st;
		uint32_t pages[CR_NB * CC_PPB];
		uint64_t h[CR_NB], t0;
		struct kvmm_conn *admin;
		struct cc c;
		uint32_t seq;

		for (int b = 0; b < CR_NB; b++)
			h[b] = cr_hash(k, b);
		cc_connect(&c, sock);
		t_ok(kc_connect_admin(sock, &admin));
		cc_region(&c);
		seq = cc_seq_open(&c);
		cc_extend(&c, seq, CR_NB * CC_TPB, pages);
		cc_fill(&c, pages, CR_NB, 200 + k);
		t0 = cc_now_ms();
		t_ok(cc_publish(&c, seq, 0, h, CR_NB, &rep));
		res.ms = cc_now_ms() - t0;
		t_ok(kc_request(admin, KVMM_CMD_ADMIN_STATUS, NULL, 0, &st,
				sizeof(st), NULL));
		res.queued = st.demotions_queued;
		t_assert_eq(rep.published, CR_NB);
		kvmm_disconnect(admin);
		cc_seq_close(&c, seq, pages, CR_NB * CC_PPB);
		cc_disconnect(&c);
		t_assert_eq(write(fd[1], &res, sizeof(res)), sizeof(res));
		_exit(0);
	}
	t_assert_eq(cc_wait_child(p), 0);
	t_assert_eq(read(fd[0], &res, sizeof(res)), sizeof(res));
	close(fd[0]);
	close(fd[1]);
	return res;
}

/* Another process's TIER_STATS round trip, in ms. */
static uint64_t stats_timed(const char *sock)
{
	struct kvmm_tier_stats_reply ts;
	uint64_t t0;
	struct cc c;

	cc_connect(&c, sock);
	t0 = cc_now_ms();
	cc_tier_stats(&c, &ts);
	t0 = cc_now_ms() - t0;
	cc_disconnect(&c);
	return t0;
}

int main(void)
{
	struct kvmm_tier_stats_reply ts;
	struct kvmm_status_reply st;
	struct write_res pub;
	uint64_t stat_ms;
	struct cr_env env;
	char delay[16];

	snprintf(delay, sizeof(delay), "%d", DELAY_MS);
	setenv("KVMMD_TEST_DEMOTE_DELAY_MS", delay, 1);
	cr_start(&env, 40, 0);
	unsetenv("KVMMD_TEST_DEMOTE_DELAY_MS");

	for (int k = 0; k < 3; k++)
		write_timed(env.d.sock, k);
	pub = write_timed(env.d.sock, 3);
	stat_ms = stats_timed(env.d.sock);
	if (!pub.queued)
		t_fail("no demotion waits for a host slot");
	if (pub.ms >= DELAY_MS || stat_ms >= DELAY_MS)
		t_fail("publish %llu ms, stats %llu ms: demotions take %d ms",
		       (unsigned long long)pub.ms, (unsigned long long)stat_ms,
		       DELAY_MS);
	printf("publish %llu ms with %llu demotions queued, stats %llu ms\n",
	       (unsigned long long)pub.ms, (unsigned long long)pub.queued,
	       (unsigned long long)stat_ms);

	cc_settled_stats(env.d.sock, &ts);
	t_ok(td_status(&env.d, &st));
	t_assert_eq(st.demotions_queued, 0);
	t_assert(ts.slot_waits >= 1);
	t_assert_eq(ts.tiers[0].used_blocks, 8);
	t_assert_eq(ts.tiers[1].used_blocks, 6);
	t_assert_eq(ts.tiers[2].used_blocks, 4 * CR_NB - 14);
	t_assert_eq(ts.tiers[0].drops + ts.tiers[1].drops + ts.tiers[2].drops,
		    0);
	t_assert_eq(ts.migrations_failed, 0);
	cr_check_content(env.d.sock, 0);
	cr_check_content(env.d.sock, 1);
	cr_stop(&env);
	printf("demotions queued for host slots ok\n");
	return 0;
}
