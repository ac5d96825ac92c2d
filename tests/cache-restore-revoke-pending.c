// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * An admin revocation of the sequence a PREFIX_OPEN is still opening
 * (its reply waits for an NVMe restore) is refused with -EBUSY: the open
 * has attached a GPU block the client already maps in another sequence,
 * and the session takes the holds of the new sequence's pages only with
 * the reply, so a revocation then, once acknowledged, gave back holds
 * that were never taken.  The client's count of held pages fell from 4
 * to 0 while it still mapped its first sequence's pages, and a later
 * revocation of that sequence freed them at once to another session
 * (found by a review with a real kvmmd).  Here: with a real kvmmd whose
 * restores take 300 ms, the client maps content 3's first block (4
 * pages), asks for that block and one of content 0 (on NVMe); while the
 * reply waits, ADMIN_REVOKE of the new sequence is -EBUSY and the held
 * count stays 4; after the reply (2 blocks, the first shared) the same
 * revocation is accepted, and after its acknowledgement the client holds
 * its first sequence's 4 pages again, no fewer.
 */
#include "tests/cache-restore-common.h"

static uint32_t session_id(struct cc *c)
{
	struct kvmm_stats_reply st;

	t_ok(cc_call(c, KVMM_CMD_STATS, NULL, 0, &st, sizeof(st), NULL, NULL));
	return st.session_id;
}

static int admin_revoke(struct cc *m, uint32_t sid, uint32_t region,
			uint32_t seq, uint32_t first)
{
	struct kvmm_admin_revoke a = { .size = sizeof(a),
				       .session_id = sid,
				       .region_id = region,
				       .seq_id = seq,
				       .first_block = first };

	return cc_call(m, KVMM_CMD_ADMIN_REVOKE, &a, sizeof(a), NULL, 0, NULL,
		       NULL);
}

static uint64_t pages_held(struct cc *m, uint32_t sid)
{
	static char buf[KVMM_MSG_MAX];
	struct kvmm_sessions_reply *rep = (void *)buf;

	t_ok(cc_call(m, KVMM_CMD_ADMIN_SESSIONS, NULL, 0, buf, sizeof(buf),
		     NULL, NULL));
	for (uint32_t i = 0; i < rep->nr; i++)
		if (rep->sessions[i].session_id == sid)
			return rep->sessions[i].pages_held;
	t_fail("session %u not listed", sid);
	return 0;
}

int main(void)
{
	uint64_t first[1] = { cr_hash(3, 0) };
	uint64_t both[2] = { cr_hash(3, 0), cr_hash(0, 0) };
	struct kvmm_tier_stats_reply ts;
	struct kvmm_prefix_open_reply rep, rep2;
	struct kvmm_revoke_ack ack = { .size = sizeof(ack) };
	uint32_t ids1[CC_PPB], ids2[2 * CC_PPB], sid;
	struct cr_env env;
	struct cc c, m;

	cr_start_args(&env, 40, 300, "--revoke-timeout", "60000");
	cr_fill_tiers(&env, &ts); /* content 0 is on NVMe, 3 on the GPU */

	cc_connect(&c, env.d.sock);
	cc_region(&c);
	sid = session_id(&c);
	cc_prefix(&c, first, 1, &rep, ids1);
	t_assert_eq(rep.nr_blocks, 1);
	cc_connect(&m, env.d.sock);
	t_assert_eq(pages_held(&m, sid), CC_PPB);

	cc_prefix_send(&c, both, 2); /* waits for the NVMe restore */
	cr_wait_pending(&m, 1);
	t_assert_eq(admin_revoke(&m, sid, c.region, rep.seq_id ^ 1, 0), -EBUSY);
	t_assert_eq(pages_held(&m, sid), CC_PPB);

	cc_prefix_recv(&c, &rep2, ids2);
	t_assert_eq(rep2.nr_blocks, 2);
	t_assert_eq(rep2.seq_id, rep.seq_id ^ 1);
	for (int i = 0; i < CC_PPB; i++)
		t_assert_eq(ids2[i] & ~KVMM_PAGE_HELD, ids1[i]);
	t_assert_eq(pages_held(&m, sid), 2 * CC_PPB);

	/* replied: now the revocation is the client's to apply */
	t_ok(admin_revoke(&m, sid, c.region, rep2.seq_id, 0));
	ack.cookie = 1;
	t_ok(cc_call(&c, KVMM_CMD_REVOKE_ACK, &ack, sizeof(ack), NULL, 0, NULL,
		     NULL));
	t_assert_eq(pages_held(&m, sid), CC_PPB);
	cc_check(&c, ids1, 1, 203);

	cc_seq_close(&c, rep.seq_id, ids1, CC_PPB);
	cc_disconnect(&c);
	cc_disconnect(&m);
	cr_stop(&env);
	printf("ok\n");
	return 0;
}
