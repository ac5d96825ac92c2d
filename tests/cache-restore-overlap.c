// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * Restores run on the migration workers, overlapped with serving: a real
 * kvmmd whose restore jobs each wait 150 ms (KVMMD_TEST_RESTORE_DELAY_MS)
 * and a content of 8 blocks pushed down to its NVMe tier.
 *   - client A sends a PREFIX_OPEN of that content and does not read the
 *     reply; another client process connects, gets a NOP and TIER_STATS
 *     answered (the stats show A's open pending and its restores in
 *     flight), and exits, all before A's reply arrives;
 *   - A's reply then comes with all 8 blocks from NVMe, byte-identical,
 *     after at least the delay; the tier stats count 8 NVMe restores and
 *     their latency (sum and max, queueing included);
 *   - a content partly in the host tier comes back byte-identical too
 *     (HOST_TO_GPU jobs);
 *   - a NOP sent right behind a pending PREFIX_OPEN on the same socket is
 *     answered after it: replies keep request order.
 */
#include "tests/cache-restore-common.h"

#define DELAY_MS 150

/* The next reply on c's socket (FDS continuations skipped, fds closed):
 * its header, and the prefix-open reply body into rep when it is one. */
static struct kvmm_msg_hdr next_reply(struct cc *c,
				      struct kvmm_prefix_open_reply *rep)
{
	static char buf[KVMM_MSG_MAX];
	struct kvmm_msg_hdr h;
	int fds[KVMM_MSG_MAX_FDS];
	unsigned int nfds;
	ssize_t n;

	do {
		n = kw_recv(c->sock, buf, sizeof(buf), fds, &nfds,
			    KVMM_MSG_MAX_FDS, 0);
		t_assert(n >= (ssize_t)sizeof(h));
		memcpy(&h, buf, sizeof(h));
		for (unsigned int i = 0; i < nfds; i++)
			close(fds[i]);
	} while (h.cmd == KVMM_CMD_FDS);
	if (rep && h.cmd == KVMM_CMD_PREFIX_OPEN &&
	    n >= (ssize_t)(sizeof(h) + sizeof(*rep)))
		memcpy(rep, buf + sizeof(h), sizeof(*rep));
	return h;
}

int main(void)
{
	struct kvmm_tier_stats_reply ts0, ts, bs;
	struct kvmm_prefix_open_reply rep;
	struct pollfd pfd;
	uint32_t ids[CR_NB * CC_PPB];
	uint64_t h[CR_NB], t0, a_ms, b_ms;
	struct cr_env env;
	struct cc a;
	int pfds[2];
	pid_t p;

	cr_start(&env, 40, DELAY_MS);
	cr_fill_tiers(&env, &ts0);

	for (int b = 0; b < CR_NB; b++)
		h[b] = cr_hash(0, b);
	cc_connect(&a, env.d.sock);
	cc_region(&a);
	t0 = cc_now_ms();
	cc_prefix_send(&a, h, CR_NB);

	/* another client process, while A's restores run */
	t_ok(pipe(pfds));
	p = fork();
	t_assert(p >= 0);
	if (p == 0) {
		struct cc b;
		uint64_t t;

		close(pfds[0]);
		t = cc_now_ms();
		cc_connect(&b, env.d.sock);
		t_ok(cc_call(&b, KVMM_CMD_NOP, NULL, 0, NULL, 0, NULL, NULL));
		cr_wait_pending(&b, 1);
		cc_tier_stats(&b, &bs);
		t = cc_now_ms() - t;
		cc_disconnect(&b);
		t_assert_eq(write(pfds[1], &t, sizeof(t)), sizeof(t));
		t_assert_eq(write(pfds[1], &bs, sizeof(bs)), sizeof(bs));
		_exit(0);
	}
	close(pfds[1]);
	t_assert_eq(cc_wait_child(p), 0);
	/* B has been answered; A's reply has not come yet */
	pfd = (struct pollfd){ .fd = a.sock, .events = POLLIN };
	t_assert_eq(poll(&pfd, 1, 0), 0);
	t_assert_eq(read(pfds[0], &b_ms, sizeof(b_ms)), sizeof(b_ms));
	t_assert_eq(read(pfds[0], &bs, sizeof(bs)), sizeof(bs));
	close(pfds[0]);
	t_assert_eq(bs.prefix_opens_pending, 1);
	t_assert(bs.migrations_in_flight >= 1);

	cc_prefix_recv(&a, &rep, ids);
	a_ms = cc_now_ms() - t0;
	t_assert_eq(rep.nr_blocks, CR_NB);
	t_assert_eq(rep.from_nvme, CR_NB);
	t_assert_eq(rep.len, CR_NB * CC_TPB);
	cc_check(&a, ids, CR_NB, 200);
	t_assert(a_ms >= DELAY_MS);
	t_assert(b_ms < a_ms);

	cc_settled_stats(env.d.sock, &ts);
	t_assert_eq(ts.tiers[2].promotions_out - ts0.tiers[2].promotions_out,
		    CR_NB);
	t_assert_eq(ts.tiers[2].hits - ts0.tiers[2].hits, CR_NB);
	t_assert(ts.tiers[2].restore_max_ns >= DELAY_MS * 1000000ull);
	t_assert(ts.tiers[2].restore_ns >= CR_NB * DELAY_MS * 1000000ull);
	t_assert_eq(ts.restores_waited, 0);
	t_assert_eq(ts.migrations_failed, 0);
	printf("client B served in %llu ms while A's open of %d NVMe blocks took %llu ms; restore latency mean %.1f ms, max %.1f ms (delay %d ms per batch)\n",
	       (unsigned long long)b_ms, CR_NB, (unsigned long long)a_ms,
	       ts.tiers[2].restore_ns / 1e6 / ts.tiers[2].promotions_out,
	       ts.tiers[2].restore_max_ns / 1e6, DELAY_MS);
	cc_seq_close(&a, rep.seq_id, ids, CR_NB * CC_PPB);

	/* content 3: its first blocks went to the host tier */
	for (int b = 0; b < CR_NB; b++)
		h[b] = cr_hash(3, b);
	cc_prefix(&a, h, CR_NB, &rep, ids);
	t_assert_eq(rep.nr_blocks, CR_NB);
	t_assert(rep.from_host >= 1);
	cc_check(&a, ids, CR_NB, 203);
	cc_seq_close(&a, rep.seq_id, ids, CR_NB * CC_PPB);

	/* pipelined on one socket: the NOP's reply waits for the open's */
	{
		struct kvmm_region_ref ref = { .size = sizeof(ref),
					       .region_id = a.region };
		struct kvmm_msg_hdr rh;
		uint32_t open_id;

		for (int b = 0; b < CR_NB; b++)
			h[b] = cr_hash(1, b);
		cc_prefix_send(&a, h, CR_NB);
		open_id = a.id;
		cc_send(&a, KVMM_CMD_NOP, NULL, 0);
		rh = next_reply(&a, &rep);
		t_assert_eq(rh.id, open_id);
		t_assert_eq(rh.cmd, KVMM_CMD_PREFIX_OPEN);
		t_assert_eq(rh.status, 0);
		t_assert(rep.from_nvme >= 1); /* it was deferred */
		rh = next_reply(&a, NULL);
		t_assert_eq(rh.id, open_id + 1);
		t_assert_eq(rh.cmd, KVMM_CMD_NOP);
		t_assert_eq(rh.status, 0);
		/* nothing of it is mapped here: close without unmapping */
		ref.seq_id = rep.seq_id;
		t_ok(cc_call(&a, KVMM_CMD_SEQ_CLOSE, &ref, sizeof(ref), NULL, 0,
			     NULL, NULL));
	}
	cc_disconnect(&a);

	cc_settled_stats(env.d.sock, &ts);
	t_assert(ts.tiers[1].promotions_out >= 1);
	t_assert(ts.tiers[1].restore_ns > 0);
	t_assert_eq(ts.migrations_failed, 0);
	cr_stop(&env);
	printf("restore overlap ok\n");
	return 0;
}
