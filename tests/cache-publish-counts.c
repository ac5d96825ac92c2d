// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * The publish counters add up: TIER_STATS publishes = published +
 * duplicates + not_cached, published being what the tenants'
 * published_blocks sum to (ADMIN_TENANTS).  One block of content is
 * published four times: by its own sequence (published), by the same
 * sequence again and by a sequence a prefix open shared it into (the
 * block has its hash already), and by a fresh sequence holding the same
 * content (the cache has the hash).  The last three are duplicates, in
 * the replies and in the counters; before, the two re-publishes of a
 * block with a hash were in the replies only (publishes 4, duplicates 1).
 * `kvmmctl --json status` says the same.
 */
#include "tests/cache-common.h"

static const uint64_t hash = 0xd0b1e0001;

static void publish(struct cc *c, uint32_t seq, uint32_t want_published,
		    uint32_t want_duplicates)
{
	struct kvmm_block_publish_reply rep;

	t_ok(cc_publish(c, seq, 0, &hash, 1, &rep));
	t_assert_eq(rep.published, want_published);
	t_assert_eq(rep.duplicates, want_duplicates);
	t_assert_eq(rep.not_cached, 0);
}

/* The sum of every tenant's published_blocks (ADMIN_TENANTS). */
static uint64_t tenants_published(const char *sock)
{
	struct kvmm_tenants_reply *r = calloc(1, KVMM_MSG_MAX);
	struct kvmm_conn *c;
	uint64_t sum = 0;
	size_t len = 0;

	t_assert(r);
	t_ok(kc_connect_admin(sock, &c));
	t_ok(kc_request(c, KVMM_CMD_ADMIN_TENANTS, NULL, 0, r, KVMM_MSG_MAX,
			&len));
	kvmm_disconnect(c);
	for (uint32_t i = 0; i < r->nr; i++)
		sum += r->tenants[i].published_blocks;
	free(r);
	return sum;
}

int main(void)
{
	struct kvmm_prefix_open_reply po;
	struct kvmm_tier_stats_reply ts;
	uint32_t ids[CC_PPB], shared[CC_PPB], fresh[CC_PPB];
	uint32_t seq, seq2;
	struct td_daemon d;
	char out[16384];
	struct cc c;

	const char *args[] = { "--cache-gpu-blocks", "8", NULL };
	cc_start(&d, args);
	cc_connect(&c, d.sock);
	cc_region(&c);
	seq = cc_seq_open(&c);
	cc_extend(&c, seq, CC_TPB, ids);
	cc_fill(&c, ids, 1, 7);
	publish(&c, seq, 1, 0);
	publish(&c, seq, 0, 1); /* the same block again */
	cc_prefix(&c, &hash, 1, &po, shared);
	t_assert_eq(po.nr_blocks, 1);
	publish(&c, po.seq_id, 0, 1); /* shared into it by the open */
	seq2 = cc_seq_open(&c);
	cc_extend(&c, seq2, CC_TPB, fresh);
	cc_fill(&c, fresh, 1, 7);
	publish(&c, seq2, 0, 1); /* the cache has its content */

	cc_tier_stats(&c, &ts);
	printf("publishes %llu, duplicates %llu, not cached %llu, tenants' published %llu\n",
	       (unsigned long long)ts.publishes,
	       (unsigned long long)ts.duplicates,
	       (unsigned long long)ts.not_cached,
	       (unsigned long long)tenants_published(d.sock));
	t_assert_eq(ts.publishes, 4);
	t_assert_eq(ts.duplicates, 3);
	t_assert_eq(ts.not_cached, 0);
	t_assert_eq(tenants_published(d.sock), 1);
	t_assert_eq(ts.publishes,
		    tenants_published(d.sock) + ts.duplicates + ts.not_cached);

	t_assert_eq(td_kvmmctl(d.sock, "--json status", out, sizeof(out)), 0);
	t_assert(strstr(out, "\"publishes\":4,\"duplicates\":3,"
			     "\"not_cached\":0,"));

	cc_seq_close(&c, po.seq_id, shared, CC_PPB);
	cc_seq_close(&c, seq2, fresh, CC_PPB);
	cc_seq_close(&c, seq, ids, CC_PPB);
	cc_disconnect(&c);
	cc_stop(&d);
	printf("publish counters add up\n");
	return 0;
}
