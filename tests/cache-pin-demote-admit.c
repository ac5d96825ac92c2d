// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * A TTL pin with KVMM_PIN_F_DEMOTE keeps its block cached until the TTL,
 * also when --nvme-admit-uses would not admit it to NVMe.  A real kvmmd
 * (1 GPU block, a host tier of one block, an NVMe tier, lru,
 * --nvme-admit-uses 2): P is used twice (admitted), A and B once; A
 * (host) and B (GPU) get 60 s DEMOTE pins; P published again is promoted
 * to the GPU, so B goes to the host tier and A from it to NVMe although
 * it was used once: no admission reject, the pin still there (pinning A
 * again is 0, unpinning it is 0), and a prefix open finds A with its
 * bytes.  Before, the admission rule dropped A, and its pin with it
 * (found by a review: pin -ENOENT, the open 0 blocks).
 */
#include "tests/cache-common.h"
#include "tests/lib/daemon.h"

static const struct cc_contents cs = { .base = 0x5100000, .tag0 = 40, .nb = 1 };

static uint64_t H(int k)
{
	return cs.base * (uint64_t)(k + 1) + 1;
}

/* A client that publishes content k from its own fresh pages and reports
 * the reply. */
static void publish_k(const char *sock, int k,
		      struct kvmm_block_publish_reply *out)
{
	uint32_t pages[CC_PPB];
	struct cc c;
	uint32_t seq;
	uint64_t h = H(k);

	cc_connect(&c, sock);
	cc_region(&c);
	seq = cc_seq_open(&c);
	cc_extend(&c, seq, CC_TPB, pages);
	cc_fill(&c, pages, 1, cs.tag0 + k);
	t_ok(cc_publish(&c, seq, 0, &h, 1, out));
	cc_seq_close(&c, seq, pages, CC_PPB);
	cc_disconnect(&c);
}

/* The tiers hold one block each, none dropped or refused by admission. */
static void stats(const char *tag, const char *sock)
{
	struct kvmm_tier_stats_reply ts;

	cc_settled_stats(sock, &ts);
	printf("%-28s gpu %llu host %llu nvme %llu | host drops %llu, admission rejects %llu\n",
	       tag, (unsigned long long)ts.tiers[0].used_blocks,
	       (unsigned long long)ts.tiers[1].used_blocks,
	       (unsigned long long)ts.tiers[2].used_blocks,
	       (unsigned long long)ts.tiers[1].drops,
	       (unsigned long long)ts.nvme_admission_rejects);
	for (int t = 0; t < 3; t++)
		t_assert_eq(ts.tiers[t].used_blocks, 1);
	t_assert_eq(ts.tiers[1].drops, 0);
	t_assert_eq(ts.nvme_admission_rejects, 0);
}

int main(void)
{
	char nvme[256];
	struct td_daemon d;
	struct kvmm_block_publish_reply rep;
	struct kvmm_pin_opts o;
	struct kvmm_conn *pc;
	int r;

	cc_nvme_path(nvme, sizeof(nvme), "r1");
	const char *args[] = { "--cache-gpu-blocks",
			       "1",
			       "--host-mem",
			       "1M",
			       "--nvme-path",
			       nvme,
			       "--nvme-size",
			       "2M",
			       "--nvme-admit-uses",
			       "2",
			       "--cache-policy",
			       "lru",
			       "--pin-quota",
			       "8",
			       NULL };
	cc_start(&d, args);

	/* P (content 0) used twice, so NVMe admits it */
	publish_k(d.sock, 0, &rep);
	publish_k(d.sock, 0, &rep);
	t_assert_eq(rep.duplicates, 1);
	publish_k(d.sock, 1, &rep); /* A: P -> host */
	publish_k(d.sock, 2, &rep); /* B: A -> host, P -> NVMe */
	stats("after P, A, B:", d.sock);

	pc = cc_connect_lib(d.sock, "pinner");
	r = cc_pin(pc, H(1), KVMM_PIN_F_TTL | KVMM_PIN_F_DEMOTE, 60000000000ull,
		   0, &o);
	t_ok(r);
	t_assert_eq(o.tier, 1);
	r = cc_pin(pc, H(2), KVMM_PIN_F_TTL | KVMM_PIN_F_DEMOTE, 60000000000ull,
		   0, &o);
	t_ok(r);
	t_assert_eq(o.tier, 0);

	/* P published again from fresh pages: promoted from NVMe to the GPU,
	 * B TTL-demoted to host, A TTL-demoted host -> NVMe */
	publish_k(d.sock, 0, &rep);
	t_assert_eq(rep.promoted, 1);
	stats("after promoting P:", d.sock);

	r = cc_pin(pc, H(1), KVMM_PIN_F_TTL | KVMM_PIN_F_DEMOTE, 60000000000ull,
		   0, &o);
	t_ok(r); /* still cached, its pin record there */
	r = kvmm_block_unpin(pc, H(1));
	t_ok(r);
	{
		struct kvmm_prefix_open_reply pr;
		uint32_t ids[CC_PPB];
		uint64_t h = H(1);
		struct cc c;

		cc_connect(&c, d.sock);
		cc_region(&c);
		cc_prefix(&c, &h, 1, &pr, ids);
		t_assert_eq(pr.nr_blocks, 1);
		t_assert_eq(pr.from_nvme, 1);
		cc_check(&c, ids, 1, cs.tag0 + 1);
		cc_seq_close(&c, pr.seq_id, ids, pr.nr_blocks * CC_PPB);
		cc_disconnect(&c);
	}
	kvmm_disconnect(pc);
	cc_stop(&d);
	unlink(nvme);
	printf("ok\n");
	return 0;
}
