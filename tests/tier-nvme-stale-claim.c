// SPDX-License-Identifier: MIT
/*
 * NVMe tier: the stale copies it remembers (tier_nvme_stale_claim()), free
 * slots whose header on disk still names a block.  4 slots:
 *   - A (freed under tenant 7) and B (freed with tier_nvme_free(): nobody's)
 *     are stale, C stays READY; a claim of tenant 7's takes A alone, off
 *     the free stack (used 2 with C) and out of reach of a write;
 *   - with both free slots reserved, a claim of every copy takes none and
 *     counts B in left;
 *   - A's claim invalidated (zeroed): no longer stale; B claimed, then
 *     unclaimed: stale again, and claimed a second time;
 *   - a slot written again forgets it: C freed, D written into its slot,
 *     no stale copy left;
 *   - at a restart the older of two copies of one hash is a stale copy
 *     (E written twice, the older slot freed in memory first): the scan
 *     keeps the newer, the claim of E's hash finds the older; the zeroed
 *     headers stay gone (only D and E recovered).
 */
#include "kvmm/kvmmd/tier_nvme.h"
#include "tests/lib/nvme_tier.h"
#include "tests/lib/page_alloc.h"
#include "tests/lib/test.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PAYLOAD (64 * 1024)
#define NSLOTS 4
#define LAYOUT 5
#define HA 0x57a1e0aull
#define HB 0x57a1e0bull
#define HC 0x57a1e0cull
#define HD 0x57a1e0dull
#define HE 0x57a1e0eull
#define HF 0x57a1e0full

struct want {
	uint64_t hash; /* 0: any */
	uint32_t tenant; /* TIER_NVME_NOBODY: any */
};

static bool match(void *arg, uint64_t hash, uint32_t tenant)
{
	const struct want *w = arg;

	return (!w->hash || w->hash == hash) &&
	       (w->tenant == TIER_NVME_NOBODY || w->tenant == tenant);
}

static uint32_t write_one(struct tier_nvme *t, uint64_t hash, void *buf)
{
	return nt_write(t, hash, LAYOUT, 0, buf, PAYLOAD);
}

/* tier_nvme_stale_claim() of w: n claimed (into *v), left not */
static void claim(struct tier_nvme *t, struct want w, uint32_t n, uint32_t left,
		  struct tier_nvme_stale **v)
{
	uint32_t got, l;

	t_ok(tier_nvme_stale_claim(t, match, &w, v, &got, &l));
	t_assert_eq(got, n);
	t_assert_eq(l, left);
	t_assert_eq(*v == NULL, n == 0);
}

static void invalidate(struct tier_nvme *t, const struct tier_nvme_stale *s)
{
	struct tier_nvme_io io = { .hash = s->hash, .slot = s->slot };

	t_assert_eq(tier_nvme_invalidate_batch(t, &io, 1), 0);
	t_assert(io.dropped);
}

static struct tier_nvme *open_tier(const char *path)
{
	return nt_open_slots(path, NSLOTS, PAYLOAD, 4, false);
}

int main(void)
{
	const struct want any = { 0, TIER_NVME_NOBODY };
	const char *dir = getenv("KVMM_NVME_TEST_DIR");
	struct tier_nvme_stale *v;
	struct tier_nvme_stats st;
	uint32_t sa, sb, sc, se;
	struct tier_nvme *t;
	unsigned char *buf = NULL;
	char path[256];

	snprintf(path, sizeof(path), "%s/kvmm-tier-nvme-stale-%d",
		 dir ? dir : "/var/tmp", getpid());
	buf = t_page_alloc(PAYLOAD);
	memset(buf, 0x5a, PAYLOAD);
	t = open_tier(path);

	sa = write_one(t, HA, buf);
	sb = write_one(t, HB, buf);
	sc = write_one(t, HC, buf);
	t_ok(tier_nvme_free_tenant(t, sa, 7));
	t_ok(tier_nvme_free(t, sb));
	claim(t, (struct want){ 0, 8 }, 0, 0, &v);
	claim(t, (struct want){ 0, 7 }, 1, 0, &v);
	t_assert_eq(v[0].slot, sa);
	t_assert_eq(v[0].hash, HA);
	t_assert_eq(v[0].tenant, 7);
	t_assert_eq(tier_nvme_slot_state(t, sa), TIER_SLOT_FILLING);
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.used_slots, 2); /* C and the claim */
	t_assert_eq(st.ready_slots, 1);
	t_assert_eq(st.frees, 2);

	/* B and the slot never written: both reserved, nothing taken */
	t_ok(tier_nvme_reserve(t));
	t_ok(tier_nvme_reserve(t));
	t_assert_eq(tier_nvme_reserve(t), -ENOSPC);
	{
		struct tier_nvme_stale *none;

		claim(t, any, 0, 1, &none);
	}
	tier_nvme_unreserve(t);
	tier_nvme_unreserve(t);

	invalidate(t, &v[0]);
	free(v);
	t_assert_eq(tier_nvme_slot_state(t, sa), TIER_SLOT_FREE);
	claim(t, any, 1, 0, &v); /* B alone now */
	t_assert_eq(v[0].slot, sb);
	t_assert_eq(v[0].tenant, TIER_NVME_NOBODY);
	t_ok(tier_nvme_invalidate_unclaim(t, sb));
	free(v);
	claim(t, any, 1, 0, &v);
	t_assert_eq(v[0].slot, sb);
	invalidate(t, &v[0]);
	free(v);
	claim(t, any, 0, 0, &v);
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.used_slots, 1);
	t_assert_eq(st.frees, 2); /* the stale copies were counted once */
	t_assert_eq(st.invalidations, 2);

	/* C freed: stale; D written into its slot (the top of the stack) */
	t_ok(tier_nvme_free(t, sc));
	claim(t, (struct want){ HC, TIER_NVME_NOBODY }, 1, 0, &v);
	t_ok(tier_nvme_invalidate_unclaim(t, sc));
	free(v);
	t_assert_eq(write_one(t, HD, buf), sc);
	claim(t, any, 0, 0, &v);

	/* E twice: its first slot freed in memory, the copy after it wins */
	se = write_one(t, HE, buf);
	t_assert_eq(write_one(t, HF, buf), se == sa ? sb : sa);
	t_ok(tier_nvme_free(t, se));
	claim(t, (struct want){ HE, TIER_NVME_NOBODY }, 1, 0, &v);
	t_ok(tier_nvme_invalidate_unclaim(t, se));
	free(v);
	t_ok(tier_nvme_lookup(t, HF, &sa, NULL, NULL));
	t_ok(tier_nvme_free(t, sa)); /* F's slot on top: E's next write */
	t_assert_eq(write_one(t, HE, buf), sa);
	tier_nvme_close(t);

	t = open_tier(path);
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.recovered_slots, 2); /* D, and E's newer copy */
	t_ok(tier_nvme_lookup(t, HE, &sb, NULL, NULL));
	t_assert_eq(sb, sa);
	t_ok(tier_nvme_lookup(t, HD, NULL, NULL, NULL));
	claim(t, (struct want){ HE, TIER_NVME_NOBODY }, 1, 0, &v);
	t_assert_eq(v[0].slot, se);
	invalidate(t, &v[0]);
	free(v);
	claim(t, any, 0, 0, &v);
	tier_nvme_close(t);

	unlink(path);
	free(buf);
	printf("nvme stale copies: remembered, claimed, forgotten when written or zeroed\n");
	return 0;
}
