// SPDX-License-Identifier: MIT
/*
 * timeout: 30
 * A revocation that names a sequence the client has closed (and opened
 * again on the same slot) since takes nothing from the new sequence, nor
 * from another sequence sharing the pages.
 *
 * A client opens a cached 2-block content twice as a prefix (slots 0 and
 * 1, the same pages).  The admin revokes slot 0; before the client applies
 * it, it closes slot 0 (unmapping its pages) and opens the prefix again,
 * which takes slot 0 again.  Applying the revocation then must not touch
 * the new slot 0 (its length stays 2 blocks, its bytes readable) or slot
 * 1: the entries name the earlier opening (kvmm_rqe.seq_gen).  The daemon
 * and the client agree on the holds throughout: after the ack the session
 * holds exactly the content's pages, and after closing everything none.
 */
#include <sys/wait.h>

#include "kvmm/kvmm.h"
#include "kvmm/lib/client.h"
#include "tests/cache-common.h"
#include "tests/lib/admin_revoke.h"
#include "tests/lib/daemon.h"
#include "tests/lib/page_counts.h"

#define NB 2

static uint64_t hashes[NB] = { 0xd00001, 0xd00002 };

static void publish(const char *sock)
{
	t_assert_eq(cc_publish_content(sock, hashes, NB, 33, NULL), 0);
}

/* Every page of the sequence's blocks holds the content (sampled). */
static int content_ok(struct kvmm_region *r, uint32_t seq)
{
	return cc_seq_content_ok(r, seq, NB, 33, 1013);
}

int main(void)
{
	const char *args[] = { "--gpu-mem", "2M", NULL };
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.name = "reopen",
					.map_ahead_set = 1 };
	struct kvmm_region_opts ro = cc_region_opts();
	struct kvmm_stats ks = { .size = sizeof(ks) };
	struct kvmm_status_reply st;
	struct kvmm_region *r;
	struct kvmm_conn *c;
	uint32_t s1, s2, s3, nb;
	struct td_daemon d;

	td_start_ok(&d, args);
	publish(d.sock);
	co.socket_path = d.sock;
	t_ok(kvmm_connect(&co, &c));
	t_ok(kvmm_region_create(c, &ro, &r));
	t_ok(kvmm_seq_open_prefix(r, hashes, NB, &s1, &nb));
	t_assert_eq(nb, NB);
	t_ok(kvmm_seq_open_prefix(r, hashes, NB, &s2, &nb));
	t_assert_eq(nb, NB);
	t_assert(r->seqs[s1].gen != 0 && r->seqs[s2].gen != r->seqs[s1].gen);
	t_assert_eq(pc_held(c), NB * CC_PPB);

	t_ok(kvmm_get_stats(c, &ks));
	t_ok(ar_revoke(d.sock, ks.session_id, r->id, s1, 0));

	/* close before applying it, and open the same slot again */
	t_ok(kvmm_seq_close(r, s1));
	t_ok(kvmm_seq_open_prefix(r, hashes, NB, &s3, &nb));
	t_assert_eq(nb, NB);
	t_assert_eq(s3, s1);
	t_assert_eq(kvmm_process_revocations(c), NB * CC_PPB);
	t_assert_eq(kvmm_seq_len(r, s3), NB * CC_TPB);
	t_assert_eq(kvmm_seq_len(r, s2), NB * CC_TPB);
	t_assert(content_ok(r, s3));
	t_assert(content_ok(r, s2));
	t_ok(td_status(&d, &st));
	t_assert_eq(st.revocations_acked, 1);
	t_assert_eq(pc_held(c), NB * CC_PPB);
	/* growing the new sequence maps fresh pages after the shared ones */
	t_ok(kvmm_seq_extend(r, s3, (NB + 1) * CC_TPB));
	t_assert_eq(pc_held(c), (NB + 1) * CC_PPB);
	t_ok(kvmm_seq_close(r, s3));
	t_ok(kvmm_seq_close(r, s2));
	t_assert_eq(pc_held(c), 0);
	kvmm_disconnect(c);
	t_ok(td_status(&d, &st));
	t_assert_eq(st.pages_mapped, 0);
	t_assert_eq(st.pages_revoking, 0);
	{
		/* the cached content is still whole, still on the GPU */
		struct kvmm_prefix_open_reply rep;
		struct kvmm_tier_stats_reply ts;
		uint32_t ids[NB * CC_PPB];
		struct cc rd;

		cc_connect(&rd, d.sock);
		cc_region(&rd);
		cc_tier_stats(&rd, &ts);
		t_assert_eq(ts.tiers[0].used_blocks, NB);
		cc_prefix(&rd, hashes, NB, &rep, ids);
		t_assert_eq(rep.from_gpu, NB);
		cc_check(&rd, ids, NB, 33);
		cc_seq_close(&rd, rep.seq_id, ids, NB * CC_PPB);
		cc_disconnect(&rd);
	}
	td_stop_ok(&d);
	return T_PASS;
}
