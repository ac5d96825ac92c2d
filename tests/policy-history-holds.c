/* SPDX-License-Identifier: MIT */
/*
 * A block removed from the cache while it is still held (pins, sequence
 * references, a TTL, a client priority, a demotable TTL) comes back
 * without any of it when its hash is admitted again.
 *
 * The owner takes a block out with pol_cache_remove() or
 * pol_cache_remove_dropped() whatever holds it (kvmmd: a copy down that
 * failed, a restore whose reads failed, of a block a client pinned), and
 * forgets what it held then: the pin records go (kd_pin_block_gone()),
 * the sequences' references are never given back to the policy.  arc
 * (its ghost lists) and asym (its return statistics) keep the block's
 * entry as history; that entry used to keep the pins, references and TTL
 * too, so the block came back held for good: never evictable, its tier's
 * room lost until the owner stopped.  lru, lfu and belady free the entry
 * and were right already.
 *
 * For each policy and each removal (remove, remove_dropped), a block
 * pinned, referenced, TTL-held and given a priority is removed, then
 * admitted again (pol_cache_access(), and pol_cache_admit_at() into the
 * host tier): it reads no pins, references, TTL or priority, an unpin
 * and an unreference are refused (-EINVAL: none to release), and the
 * tier it is in, shrunk to capacity 0, lets it go as any idle block
 * (held, it stayed: -ENOSPC).  Checked: arc and asym did keep the entry
 * (the index knows the hash: pol_cache_few_new()), lru, lfu and belady
 * freed it, so the test reaches the history it is about.  Before the
 * fix arc and asym failed all four cases (pins 2, references 1).
 */
#include <errno.h>

#include "kvmm/policy/policy.h"
#include "tests/lib/test.h"

#define HELD 100 /* the block removed while held */
#define CAP 4 /* GPU tier; the host tier has as many */
#define FAR (1ull << 60) /* a TTL that never passes here */

static uint64_t clock_now = 10;

static int use(struct pol_cache *c, uint64_t h)
{
	struct pol_block_desc d = { .hash = h, .next_use = UINT64_MAX };

	pol_cache_set_clock(c, ++clock_now);
	return pol_cache_access(c, &d, NULL);
}

/* Every hold the owner can put on a block, twice where it counts. */
static void hold(struct pol_cache *c, uint64_t h)
{
	t_ok(pol_cache_pin(c, h));
	t_ok(pol_cache_pin(c, h));
	t_ok(pol_cache_ref(c, h));
	t_ok(pol_cache_set_ttl(c, h, FAR));
	t_ok(pol_cache_set_ttl_demotable(c, h, true));
	t_ok(pol_cache_set_priority(c, h, 100));
}

/* Is hash in the index (resident or history)?  pol_cache_few_new()
 * counts the hashes it does not know. */
static bool known(struct pol_cache *c, uint64_t h)
{
	return !pol_cache_few_new(c, &h, 1);
}

static void check_fresh(struct pol_cache *c, const char *kind, const char *how,
			const char *back)
{
	struct pol_block *b = pol_cache_lookup(c, HELD);

	if (!b)
		t_fail("%s, %s, back by %s: not cached", kind, how, back);
	if (b->pins || b->refcount || b->ttl_expiry || b->priority ||
	    (b->flags & POL_BLOCK_TTL_DEMOTE))
		t_fail("%s, %s, back by %s: came back held (pins %u, references %u, TTL %llu, priority %d, demotable %d)",
		       kind, how, back, b->pins, b->refcount,
		       (unsigned long long)b->ttl_expiry, b->priority,
		       !!(b->flags & POL_BLOCK_TTL_DEMOTE));
	t_assert_eq(pol_cache_unpin(c, HELD), -EINVAL);
	t_assert_eq(pol_cache_unref(c, HELD), -EINVAL);
}

static void one(enum pol_kind k, bool dropped, bool admit_at)
{
	struct pol_cache_opts o = { .size = sizeof(o),
				    .kind = k,
				    .capacity = { CAP, CAP },
				    .prefix_rule = -1 };
	const char *kind = pol_kind_string(k);
	const char *how = dropped ? "remove_dropped" : "remove";
	const char *back = admit_at ? "admit_at (host)" : "an access";
	bool history = k == POL_ARC || k == POL_ASYM;
	struct pol_cache *c;
	uint64_t h = 1000;
	unsigned t;

	t_ok(pol_cache_create(&o, &c));
	/* a few idle blocks, then the held one, used twice (arc: T2) */
	for (int i = 0; i < CAP - 1; i++)
		t_ok(use(c, h++));
	t_ok(use(c, HELD));
	t_ok(use(c, HELD));
	hold(c, HELD);
	t_ok(dropped ? pol_cache_remove_dropped(c, HELD) :
		       pol_cache_remove(c, HELD));
	t_assert_eq(pol_cache_tier_of(c, HELD), POL_TIER_NONE);
	/* what the test is about: the entry stays as history (or not) */
	if (known(c, HELD) != history)
		t_fail("%s, %s: the entry is %s the index after the removal, expected %s",
		       kind, how, history ? "not in" : "in",
		       history ? "history" : "freed");

	if (admit_at) {
		struct pol_block_desc d = { .hash = HELD,
					    .next_use = UINT64_MAX };

		t_ok(pol_cache_admit_at(c, &d, POL_TIER_HOST));
		t_assert_eq(pol_cache_tier_of(c, HELD), POL_TIER_HOST);
	} else {
		t_ok(use(c, HELD));
		t_assert_eq(pol_cache_tier_of(c, HELD), POL_TIER_GPU);
	}
	check_fresh(c, kind, how, back);

	/*
	 * Idle now: the tier it came back to, shrunk to nothing, lets it go
	 * (down to the host tier, or out of the host tier, the last one
	 * with a capacity then), as any idle block.  Held, it stayed, and
	 * the shrink said -ENOSPC.
	 */
	t = pol_cache_tier_of(c, HELD);
	t_assert(pol_cache_evictable(c, pol_cache_lookup(c, HELD)));
	t_ok(pol_cache_set_capacity(c, t, 0));
	if (pol_cache_tier_of(c, HELD) == t)
		t_fail("%s, %s, back by %s: still in tier %s at capacity 0",
		       kind, how, back, pol_tier_string(t));
	t_assert_eq(pol_cache_count(c, t), 0);
	pol_cache_destroy(c);
}

int main(void)
{
	for (int k = 0; k < POL_KIND_COUNT; k++)
		for (int dropped = 0; dropped < 2; dropped++)
			for (int admit_at = 0; admit_at < 2; admit_at++)
				one((enum pol_kind)k, dropped, admit_at);
	return T_PASS;
}
