// SPDX-License-Identifier: MIT
/*
 * timeout: 30
 * An open that finds a block whose restore was called off (every open
 * that wanted it went away) but has not settled yet waits for it to
 * settle and restores the block again; it does not join the restore that
 * will not happen.  A real kvmmd (lru, 4 cached GPU blocks, a host tier)
 * whose restore jobs each wait DELAY_MS:
 *   - content C (8 blocks) ends in the host tier (another content pushed
 *     it there);
 *   - client A opens C with KVMM_PREFIX_OPEN_EARLY (8 restores: the two
 *     workers run two, six wait in the engine's queue) and closes the
 *     sequence at once: the queued restores are called off;
 *   - client B then opens C (no flags): all 8 blocks, byte-identical.
 * Before the fix B joined the six called-off restores, which settled as
 * cancelled: its prefix ended after the 2 blocks whose restores ran (an
 * early open got them as failed reloads to recompute).  Found by
 * tests/daemon-fuzz.c (an early open's wait_ready reported failed
 * reloads with no fault injected).
 */
#include "tests/cache-common.h"
#include "tests/lib/daemon.h"

#define NB 8
#define DELAY_MS 300

static const struct cc_contents contents = { .base = 0xca9ce1000ull,
					     .tag0 = 90,
					     .nb = NB };

int main(void)
{
	const char *args[] = { "--cache-gpu-blocks",
			       "4",
			       "--cache-policy",
			       "lru",
			       "--host-mem",
			       "4M",
			       NULL };
	char req[sizeof(struct kvmm_prefix_open) + NB * 8];
	struct kvmm_prefix_open po = { .size = sizeof(po),
				       .nr_hashes = NB,
				       .flags = KVMM_PREFIX_OPEN_ACTIONS |
						KVMM_PREFIX_OPEN_EARLY };
	struct kvmm_prefix_open_reply rep;
	struct kvmm_tier_stats_reply ts;
	uint32_t ids[NB * CC_PPB];
	struct td_daemon d;
	struct cc a, b;
	uint64_t h[NB];

	cc_start_with_delay(&d, args, "KVMMD_TEST_RESTORE_DELAY_MS", DELAY_MS);
	cc_write_content(d.sock, &contents, 0);
	cc_write_content(d.sock, &contents, 1); /* C goes down */
	cc_settled_stats(d.sock, &ts);
	t_assert(ts.tiers[1].used_blocks >= NB);

	cc_connect(&a, d.sock);
	cc_region(&a);
	cc_connect(&b, d.sock);
	cc_region(&b);
	cc_content_hashes(&contents, 0, h);
	po.region_id = a.region;
	memcpy(req, &po, sizeof(po));
	memcpy(req + sizeof(po), h, sizeof(h));
	cc_send(&a, KVMM_CMD_PREFIX_OPEN, req, sizeof(req));
	cc_prefix_recv(&a, &rep, ids);
	t_assert_eq(rep.nr_blocks, NB);
	t_assert_eq(rep.from_host, NB);
	cc_seq_close(&a, rep.seq_id, ids, NB * CC_PPB);
	cc_tier_stats(&b, &ts);
	printf("A closed: %llu restores called off\n",
	       (unsigned long long)ts.restores_cancelled);
	t_assert(ts.restores_cancelled >= 1);

	cc_prefix(&b, h, NB, &rep, ids);
	printf("B: %u blocks (%u from host)\n", rep.nr_blocks, rep.from_host);
	t_assert_eq(rep.nr_blocks, NB);
	cc_check(&b, ids, NB, contents.tag0);
	cc_seq_close(&b, rep.seq_id, ids, NB * CC_PPB);

	cc_disconnect(&a);
	cc_disconnect(&b);
	cc_stop(&d);
	printf("open after a called-off restore ok\n");
	return T_PASS;
}
