// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * A PREFIX_OPEN of blocks still being demoted waits for their moves and
 * restores them, instead of missing: a real kvmmd with 8 cached GPU
 * blocks and a host tier, whose demotions each wait 100 ms
 * (KVMMD_TEST_DEMOTE_DELAY_MS).  A writer process publishes content 0,
 * then content 1, which pushes content 0's 8 blocks to the host tier; a
 * reader process opens content 0 right away, while those copies are in
 * flight (the open is seen pending).  It gets all 8 blocks, reloaded from
 * the host tier and byte-identical; no busy miss, no miss.
 */
#include "tests/cache-restore-common.h"

int main(void)
{
	const char *args[] = { "--cache-gpu-blocks", "8", "--host-mem", "4M",
			       NULL };
	struct kvmm_tier_stats_reply ts;
	struct td_daemon d;
	pid_t p;
	int r;

	setenv("KVMMD_TEST_DEMOTE_DELAY_MS", "100", 1);
	r = td_start(&d, args);
	unsetenv("KVMMD_TEST_DEMOTE_DELAY_MS");
	if (r)
		t_fail("kvmmd did not start: %d", r);
	cr_write_content(d.sock, 0);
	cr_write_content(d.sock, 1); /* content 0's demotions start */

	p = fork();
	t_assert(p >= 0);
	if (p == 0) {
		struct kvmm_prefix_open_reply rep;
		uint32_t ids[CR_NB * CC_PPB];
		uint64_t h[CR_NB];
		struct cc c;

		for (int b = 0; b < CR_NB; b++)
			h[b] = cr_hash(0, b);
		cc_connect(&c, d.sock);
		cc_region(&c);
		cc_prefix(&c, h, CR_NB, &rep, ids);
		if (rep.nr_blocks != CR_NB)
			t_fail("%u blocks of %d (gpu %u host %u)",
			       rep.nr_blocks, CR_NB, rep.from_gpu,
			       rep.from_host);
		t_assert_eq(rep.from_host, CR_NB);
		cc_check(&c, ids, CR_NB, 200);
		cc_seq_close(&c, rep.seq_id, ids, CR_NB * CC_PPB);
		cc_disconnect(&c);
		_exit(0);
	}
	{
		struct cc m;

		cc_connect(&m, d.sock);
		cr_wait_pending(&m, 1); /* waiting for the demotions */
		cc_disconnect(&m);
	}
	t_assert_eq(cc_wait_child(p), 0);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.busy_misses, 0);
	t_assert_eq(ts.misses, 0);
	t_assert_eq(ts.tiers[1].promotions_out, CR_NB);
	t_assert_eq(ts.migrations_failed, 0);
	r = td_stop(&d);
	if (r)
		td_dump_log(&d);
	t_assert_eq(r, 0);
	printf("open during demotion ok\n");
	return 0;
}
