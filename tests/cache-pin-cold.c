// SPDX-License-Identifier: MIT
/*
 * timeout: 120
 * A pin of a block a restart recovered from NVMe ("cold": in the index,
 * outside the policy until an open uses it) takes it into the policy on
 * NVMe and holds it there (Documentation/tiers.md, "Restart").  Before,
 * BLOCK_PIN, BLOCK_PIN_MANY and TTL pins of it answered -ENOENT, while
 * PREFIX_QUERY said NVMe and an open would have served it: an engine
 * re-pinning its blocks after a restart was told they were gone, and the
 * cold eviction then took them first.
 *
 * kvmmd (lru, 2 GPU blocks, 6 host, a 16-slot NVMe tier, --pin-quota 5)
 * saves 4 contents of 2 blocks at a stop; a new kvmmd on the same file
 * recovers the 8, cold, all the test uid's (their headers name it):
 *   1. a plain pin of content 0's first block, BLOCK_PIN_MANY of content
 *      0's second and content 1's two, and a TTL pin (60 s) of content
 *      2's first answer tier 2 (NVMe), as PREFIX_QUERY says, 5 pins; a
 *      hash never cached is still -ENOENT, and a sixth pin, of content
 *      2's second block, -EDQUOT (the quota of 5 holds: that block stays
 *      cold, taken in by no pin); the tenant's row is the same
 *      (8 NVMe blocks, 8 admitted, 0 dropped), TIER_STATS the same 8
 *      NVMe slots used;
 *   2. 10 new contents need NVMe slots: 2 of the 3 unpinned cold blocks
 *      go (the oldest written first; the newest keeps the slot the
 *      policy's capacity of 15 leaves spare), and the policy, holding the
 *      5 pinned ones, drops 2 of the new ones, whose slots the last 2
 *      writes take (16 slots used, 4 drops, every run); the pinned stay:
 *      contents 0 and 1 then open whole from NVMe byte-identical,
 *      content 2 its pinned first block only, content 3 nothing; the
 *      tenant's admitted less dropped is what it has cached;
 *   3. unpinned (content 1) and past its TTL (content 2's first, pinned
 *      again for 300 ms), the blocks are the policy's as any other:
 *      still cached (PREFIX_QUERY: NVMe) until 10 more contents push
 *      them out, while content 0, still pinned, opens whole.
 * As root, on another file: 2 blocks of uid A saved and recovered, one
 * pinned by a root client is charged to A, whose header named it (A's
 * row: 2 NVMe blocks, 2 admitted), as an open's admission charges it,
 * not to the pinning session's uid (which gets no blocks); an operator's
 * cache-drop then keeps it (kept pinned) and drops A's other one.
 * Skips (77) where the NVMe tier cannot run (no O_DIRECT there).
 */
#include <time.h>

#include "tests/lib/nvme_layout.h"
#include "tests/cache-common.h"
#include "tests/cache-drop-common.h"
#include "tests/lib/nvme_probe.h"

#define NB 2
#define NVME_SLOTS 16
#define NEVER_CACHED 0xdeadbeef0001ull
#define UID_A 61351

static const struct cc_contents old = { .base = 0xc01d000,
					.tag0 = 70,
					.nb = NB };
static const struct cc_contents fresh = { .base = 0xf7e5000,
					  .tag0 = 90,
					  .nb = NB };
static const struct cc_contents fresher = { .base = 0xa11e000,
					    .tag0 = 110,
					    .nb = NB };

/* Contents 0 to n-1 written, each once the copies down the one before
 * ended: which cold block a write evicts depends on the slots the writes
 * before it left, and a write sent while another's copy down is in
 * flight finds other ones (KVMMD_TEST_DEMOTE_DELAY_MS=100: a block of
 * content 3 kept, PREFIX_QUERY 1 where 0 is expected, every time). */
static void write_contents(const char *sock, const struct cc_contents *cs,
			   int n)
{
	struct kvmm_tier_stats_reply ts;

	for (int k = 0; k < n; k++) {
		cc_write_content(sock, cs, k);
		cc_settled_stats(sock, &ts);
	}
}

/* The test uid's row: cached per tier, admitted, dropped. */
static void expect_tenant(const char *sock, uint64_t gpu, uint64_t host,
			  uint64_t nvme, uint64_t admitted, uint64_t dropped)
{
	struct kvmm_tenants_reply *r = cu_tenants(sock);
	const struct kvmm_tenant_info *t = cu_tenant(r, getuid());

	printf("tenant %u: cached %llu/%llu/%llu admitted %llu dropped %llu\n",
	       getuid(), (unsigned long long)t->cached_blocks[0],
	       (unsigned long long)t->cached_blocks[1],
	       (unsigned long long)t->cached_blocks[2],
	       (unsigned long long)t->admitted_blocks,
	       (unsigned long long)t->dropped_blocks);
	t_assert_eq(t->cached_blocks[0], gpu);
	t_assert_eq(t->cached_blocks[1], host);
	t_assert_eq(t->cached_blocks[2], nvme);
	t_assert_eq(t->admitted_blocks, admitted);
	t_assert_eq(t->dropped_blocks, dropped);
	free(r);
}

/* Whether a tenant's admitted less dropped is what it has cached. */
static void expect_tenant_balanced(const char *sock)
{
	struct kvmm_tenants_reply *r = cu_tenants(sock);
	const struct kvmm_tenant_info *t = cu_tenant(r, getuid());

	t_assert_eq(t->admitted_blocks - t->dropped_blocks,
		    t->cached_blocks[0] + t->cached_blocks[1] +
			    t->cached_blocks[2]);
	free(r);
}

/* What PREFIX_QUERY says of content k: its leading cached blocks, the
 * tier of each in tiers[]. */
static int query(struct kvmm_region *r, int k, uint8_t *tiers)
{
	uint64_t h[NB];

	cc_content_hashes(&old, k, h);
	memset(tiers, 0xee, NB);
	return kvmm_prefix_query(r, h, NB, tiers, 0);
}

static void expect_pins(struct td_daemon *d, uint64_t n)
{
	struct kvmm_status_reply st;

	t_ok(td_status(d, &st));
	t_assert_eq(st.pins, n);
}

/* A's blocks, recovered cold, pinned by root: still A's. */
static void pinned_by_another(const char *nvme, const char *const *args)
{
	const uint64_t h[NB] = { 0xa0a0001, 0xa0a0002 };
	struct kvmm_admin_cache_drop_reply dr;
	struct kvmm_tenants_reply *r;
	const struct kvmm_tenant_info *t;
	struct kvmm_pin_opts po;
	struct kvmm_conn *c;
	struct td_daemon d;

	cu_start(&d, args);
	cu_publish_as(d.sock, UID_A, UID_A, h, NB, 33, NB);
	cc_stop(&d);
	cu_start(&d, args);
	c = cc_connect_lib(d.sock, "pin-cold-root");
	t_assert_eq(cc_pin(c, h[0], 0, 0, 0, &po), 0);
	t_assert_eq(po.tier, 2);
	r = cu_tenants(d.sock);
	t = cu_tenant(r, UID_A);
	printf("uid %d, pinned by uid %u: NVMe %llu, admitted %llu\n", UID_A,
	       getuid(), (unsigned long long)t->cached_blocks[2],
	       (unsigned long long)t->admitted_blocks);
	t_assert_eq(t->cached_blocks[2], NB);
	t_assert_eq(t->admitted_blocks, NB);
	t_assert_eq(t->dropped_blocks, 0);
	for (uint32_t i = 0; i < r->nr; i++)
		if (r->tenants[i].id == getuid())
			t_assert_eq(r->tenants[i].admitted_blocks, 0);
	free(r);
	/* an operator's drop keeps the pinned one, as any pinned block */
	dr = cd_kvmmctl(d.sock, "");
	cd_expect(&dr, 0, 0, 1, 0, 0, 1);
	t_assert_eq(dr.kept_pinned, 1);
	r = cu_tenants(d.sock);
	t = cu_tenant(r, UID_A);
	t_assert_eq(t->cached_blocks[2], 1);
	t_assert_eq(t->dropped_blocks, 1);
	free(r);
	kvmm_disconnect(c);
	cc_stop(&d);
	unlink(nvme);
}

int main(void)
{
	char nvme[256], size[32];
	struct kvmm_region_opts ro = cc_region_opts();
	struct kvmm_tier_stats_reply ts;
	struct kvmm_pin_opts po;
	struct kvmm_region *r;
	struct kvmm_conn *c;
	struct td_daemon d;
	uint64_t c0[NB], c1[NB], c2[NB], many[3];
	uint8_t tiers[NB];
	int32_t res[3];

	cc_nvme_path(nvme, sizeof(nvme), "cache-pin-cold");
	t_nvme_require(nvme);
	nt_size_arg(size, sizeof(size), NVME_SLOTS, 4 * CC_PAGE);
	const char *args[] = { "--cache-policy",
			       "lru",
			       "--cache-block-pages",
			       "4",
			       "--cache-gpu-blocks",
			       "2",
			       "--host-mem",
			       "2M",
			       "--pin-quota",
			       "5",
			       "--nvme-path",
			       nvme,
			       "--nvme-size",
			       size,
			       "--nvme-save-on-stop",
			       "10000",
			       NULL,
			       NULL,
			       NULL };

	cc_content_hashes(&old, 0, c0);
	cc_content_hashes(&old, 1, c1);
	cc_content_hashes(&old, 2, c2);
	cc_start(&d, args);
	write_contents(d.sock, &old, 4);
	cc_stop(&d); /* saves the 8 blocks, content 3's last */

	/* from here on without the save */
	args[14] = NULL; /* ends before --nvme-save-on-stop */
	cc_start(&d, args);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.recovered_blocks, 4 * NB);
	t_assert_eq(ts.tiers[2].used_blocks, 4 * NB);
	expect_tenant(d.sock, 0, 0, 4 * NB, 4 * NB, 0);

	/* 1. pins of cold blocks: where PREFIX_QUERY says they are */
	c = cc_connect_lib(d.sock, "pin-cold");
	t_ok(kvmm_region_create(c, &ro, &r));
	t_assert_eq(query(r, 0, tiers), NB);
	t_assert_eq(tiers[0], KVMM_QUERY_NVME);
	t_assert_eq(cc_pin(c, c0[0], 0, 0, 0, &po), 0); /* main: -ENOENT */
	t_assert_eq(po.tier, 2);
	t_assert_eq(po.pins, 1);
	many[0] = c0[1];
	many[1] = c1[0];
	many[2] = c1[1];
	memset(&po, 0, sizeof(po));
	po.size = sizeof(po);
	t_assert_eq(kvmm_block_pin_many(c, many, 3, &po, res), 3);
	for (int i = 0; i < 3; i++)
		t_assert_eq(res[i], 2);
	t_assert_eq(cc_pin(c, c2[0], KVMM_PIN_F_TTL, 60000000000ull, 0, &po),
		    0);
	t_assert_eq(po.tier, 2);
	t_assert(po.expires_ns != 0);
	t_assert_eq(po.pins, 5);
	/* pinned again: the same record, the block in the policy already */
	t_assert_eq(cc_pin(c, c0[0], 0, 0, 0, &po), 0);
	t_assert_eq(po.tier, 2);
	t_assert_eq(po.pins, 5);
	t_assert_eq(cc_pin(c, NEVER_CACHED, 0, 0, 0, &po), -ENOENT);
	t_assert_eq(cc_pin(c, c2[1], 0, 0, 0, &po), -EDQUOT);
	t_assert_eq(po.pins, 5);
	t_assert_eq(po.pin_quota, 5);
	expect_pins(&d, 5);
	t_assert_eq(query(r, 0, tiers), NB);
	t_assert_eq(tiers[0], KVMM_QUERY_NVME);
	t_assert_eq(tiers[1], KVMM_QUERY_NVME);
	/* the blocks moved from the cold count to the policy's: the
	 * tenant's NVMe and admitted blocks, and the tier, are the same */
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[2].used_blocks, 4 * NB);
	t_assert_eq(ts.tiers[2].drops, 0);
	expect_tenant(d.sock, 0, 0, 4 * NB, 4 * NB, 0);

	/*
	 * 2. 20 new blocks: 2 on the GPU, 6 in host memory, 12 for NVMe,
	 * where 8 slots are free.  The unpinned cold blocks give theirs,
	 * the oldest written first (before: all 8 recovered blocks were
	 * cold, the pins refused, and the oldest went first, pinned or
	 * not): 2 of the 3; the policy, with 5 + 12 blocks there for its
	 * capacity of 15, drops the 2 new ones written first, whose slots
	 * the last 2 writes take, so the newest cold block keeps the 16th
	 * slot.  It was 15 slots and 3 cold blocks evicted now and then:
	 * kvmmd evicted a cold block for a write the policy reported
	 * before the drop that gave it a slot, when the write's copy to
	 * host had ended (kc_pol_nvme_full(), cache_demote.c).
	 */
	write_contents(d.sock, &fresh, 10);
	cc_settled_stats(d.sock, &ts);
	printf("after 10 new contents: NVMe %llu used, %llu drops, %llu cold evicted, %llu cold\n",
	       (unsigned long long)ts.tiers[2].used_blocks,
	       (unsigned long long)ts.tiers[2].drops,
	       (unsigned long long)ts.cold_evicted,
	       (unsigned long long)ts.cold_blocks);
	t_assert_eq(ts.tiers[2].used_blocks, NVME_SLOTS);
	t_assert_eq(ts.tiers[2].drops, 4);
	t_assert_eq(ts.cold_evicted, 2);
	t_assert_eq(ts.cold_blocks, 1);
	t_assert_eq(ts.cold_admitted, 5);
	expect_tenant(d.sock, 2, 6, ts.tiers[2].used_blocks, 4 * NB + 20,
		      ts.tiers[2].drops);
	t_assert_eq(query(r, 0, tiers), NB);
	t_assert_eq(query(r, 1, tiers), NB);
	t_assert_eq(query(r, 2, tiers), 1);
	t_assert_eq(query(r, 3, tiers), 0);
	/* content 0 from NVMe byte-identical (its pins then hold it on the
	 * GPU), content 1 from NVMe as well (the GPU tier is pinned full:
	 * handed out, kept below), content 2's first block alone */
	cc_read_content(d.sock, &old, 0, NB, 2);
	cc_read_content(d.sock, &old, 1, NB, 2);
	cc_read_content(d.sock, &old, 2, 1, 2);
	t_assert_eq(cc_found_on_nvme(d.sock, &old, 3), 0);
	cc_settled_stats(d.sock, &ts);
	expect_tenant_balanced(d.sock);

	/* 3. unpinned, and past a TTL: the policy's blocks as any other */
	t_ok(kvmm_block_unpin(c, c1[0]));
	t_ok(kvmm_block_unpin(c, c1[1]));
	t_assert_eq(cc_pin(c, c2[0], KVMM_PIN_F_TTL, 300000000ull, 0, &po), 0);
	t_assert_eq(po.pins, 3);
	for (int i = 0; i < 500; i++) {
		struct kvmm_status_reply st;

		t_ok(td_status(&d, &st));
		if (st.pins == 2)
			break;
		usleep(10000);
	}
	expect_pins(&d, 2); /* the timer dropped the TTL record */
	t_assert_eq(kvmm_block_unpin(c, c2[0]), -ENOENT);
	t_assert_eq(query(r, 1, tiers), NB);
	t_assert_eq(tiers[0], KVMM_QUERY_NVME);
	t_assert_eq(query(r, 2, tiers), 1);
	t_assert_eq(tiers[0], KVMM_QUERY_NVME);
	write_contents(d.sock, &fresher, 10);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(query(r, 1, tiers), 0);
	t_assert_eq(query(r, 2, tiers), 0);
	t_assert_eq(query(r, 0, tiers), NB);
	cc_read_content(d.sock, &old, 0, NB, -1);
	expect_tenant_balanced(d.sock);

	kvmm_region_destroy(r);
	kvmm_disconnect(c);
	cc_stop(&d);
	unlink(nvme);

	if (getuid()) {
		printf("not root: the pin by another uid is not run\n");
		return 0;
	}
	cc_nvme_path(nvme, sizeof(nvme), "cache-pin-cold-uid");
	args[14] = "--nvme-save-on-stop";
	args[16] = "--socket-mode";
	args[17] = "0666";
	pinned_by_another(nvme, args);
	return 0;
}
