// SPDX-License-Identifier: MIT
/*
 * What asym learned survives its cache: pol_cache_learned_save() in one
 * cache and pol_cache_learned_load() in a new, empty one (kvmmd's
 * --policy-state across a restart, kvmm-replay's --restart-every).
 *
 *   - on a workload where short requests come back and long ones never
 *     do, a new cache loaded with the old one's state gets more hits in
 *     its first requests than a new cache that has to learn again, and
 *     exactly as many as a second cache loaded with the same bytes;
 *   - save, load, save gives the same bytes, and the lives it reports
 *     are those of the first cache; pol_learned_describe() reads the
 *     same lives back, per class;
 *   - a state of more lives than half a history (65,536 block uses) is
 *     loaded as a prior of that weight: saved again, it has 65,536;
 *   - bytes that are damaged, cut short or not a state are -EINVAL; a
 *     state of another policy or version is -ESTALE; lru, lfu and arc
 *     learn nothing (save 0 bytes, load -EOPNOTSUPP).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kvmm/policy/policy.h"
#include "tests/lib/policy_workload.h"
#include "tests/lib/test.h"

static size_t workload(struct pol_cache *c, uint64_t first, int nreq)
{
	return pw_short_long(c, first, nreq, true);
}

/* The saved state of c (malloc'd, *len its size). */
static void *save(struct pol_cache *c, size_t *len)
{
	void *buf;

	*len = pol_cache_learned_save(c, NULL, 0);
	t_assert(*len > 0);
	buf = malloc(*len);
	t_assert(buf != NULL);
	t_assert_eq(pol_cache_learned_save(c, buf, *len), *len);
	return buf;
}

/* The block lives a saved state says it holds, over all its classes. */
static double described_lives(const void *buf, size_t len)
{
	struct pol_learned_summary sum;
	double all = 0;

	t_ok(pol_learned_describe(buf, len, &sum));
	for (unsigned k = 0; k < sum.nclass; k++)
		all += sum.cls[k].lives;
	return all;
}

int main(void)
{
	struct pol_cache *old = pw_cache(POL_ASYM, 100), *a, *b, *fresh, *lru,
			 *big;
	size_t len, len2, biglen, hits_a, hits_b, hits_fresh;
	static struct pol_learned_summary sum;
	unsigned char *bigbuf;
	double all = 0, back = 0;
	uint64_t lives = 0, lives2 = 0;
	unsigned char *buf, *buf2, *bad;

	/* learn: 3000 requests */
	workload(old, 1, 3000);
	buf = save(old, &len);
	/* a save asked with too little room writes nothing, says how much */
	t_assert_eq(pol_cache_learned_save(old, buf, len - 1), len);

	/* restart: two caches loaded with the same bytes, one not */
	a = pw_cache(POL_ASYM, 100);
	b = pw_cache(POL_ASYM, 100);
	fresh = pw_cache(POL_ASYM, 100);
	t_ok(pol_cache_learned_load(a, buf, len, &lives));
	t_ok(pol_cache_learned_load(b, buf, len, NULL));
	/* every use starts a life: 1500 short chains of 3 blocks and 1500
	 * long ones of 12, and 1484 comebacks of 3 */
	t_assert_eq(lives, 1500 * 3 + 1500 * 12 + 1484 * 3);
	printf("learned state: %zu bytes, %llu lives\n", len,
	       (unsigned long long)lives);

	/* save, load, save: the same bytes */
	buf2 = save(a, &len2);
	t_assert_eq(len2, len);
	t_assert(!memcmp(buf, buf2, len));
	free(buf2);
	/* what it says, per class */
	t_ok(pol_learned_describe(buf, len, &sum));
	t_assert_eq(sum.kind, POL_ASYM);
	t_assert_eq(sum.nclass, 16);
	t_assert(!strcmp(sum.cls[0].name, "class 1"));
	t_assert(!strcmp(sum.cls[15].name, "class 8+, few new"));
	for (unsigned k = 0; k < sum.nclass; k++) {
		all += sum.cls[k].lives;
		back += sum.cls[k].returns;
	}
	t_assert_eq((uint64_t)all, lives);
	t_assert_eq((uint64_t)back, 1484 * 3); /* the comebacks */

	/* the first 200 requests after the restart, on new chains */
	hits_a = workload(a, 1u << 30, 200);
	hits_b = workload(b, 1u << 30, 200);
	hits_fresh = workload(fresh, 1u << 30, 200);
	printf("hits of the comebacks after a restart: loaded %zu, learning again %zu\n",
	       hits_a, hits_fresh);
	t_assert_eq(hits_a, hits_b);
	t_assert(hits_a > hits_fresh);

	/* damaged, cut short, or not a state at all */
	bad = malloc(len);
	t_assert(bad != NULL);
	memcpy(bad, buf, len);
	bad[len - 3] ^= 0x40; /* a count's bits */
	t_assert_eq(pol_cache_learned_load(fresh, bad, len, NULL), -EINVAL);
	t_assert_eq(pol_cache_learned_load(fresh, buf, len - 8, NULL), -EINVAL);
	t_assert_eq(pol_cache_learned_load(fresh, buf, 10, NULL), -EINVAL);
	t_assert_eq(pol_cache_learned_load(fresh, NULL, 0, NULL), -EINVAL);
	memcpy(bad, buf, len);
	bad[0] ^= 1; /* the magic */
	t_assert_eq(pol_cache_learned_load(fresh, bad, len, NULL), -EINVAL);
	/* another version, another policy: the header after the magic */
	memcpy(bad, buf, len);
	bad[8] = 2; /* version */
	t_assert_eq(pol_cache_learned_load(fresh, bad, len, NULL), -ESTALE);
	memcpy(bad, buf, len);
	bad[12] = POL_LRU; /* kind */
	t_assert_eq(pol_cache_learned_load(fresh, bad, len, NULL), -ESTALE);
	free(bad);

	/* the policies that learn nothing */
	for (enum pol_kind k = POL_LRU; k <= POL_ARC; k++) {
		lru = pw_cache(k, 100);
		workload(lru, 1, 100);
		t_assert_eq(pol_cache_learned_save(lru, NULL, 0), 0);
		t_assert_eq(pol_cache_learned_load(lru, buf, len, NULL),
			    -EOPNOTSUPP);
		pol_cache_destroy(lru);
	}

	/* a long past weighs half a history (65,536 uses) when loaded */
	big = pw_cache(POL_ASYM, 100);
	workload(big, 1u << 29, 10000);
	bigbuf = save(big, &biglen);
	pol_cache_destroy(big);
	all = described_lives(bigbuf, biglen);
	t_assert_eq((uint64_t)all, 5000 * 3 + 5000 * 12 + 4984 * 3);
	big = pw_cache(POL_ASYM, 100);
	t_ok(pol_cache_learned_load(big, bigbuf, biglen, &lives2));
	t_assert_eq(lives2, 5000 * 3 + 5000 * 12 + 4984 * 3); /* as saved */
	buf2 = save(big, &len2);
	pol_cache_destroy(big);
	all = described_lives(buf2, len2);
	printf("a state of 89952 lives loads as %.1f\n", all);
	t_assert(all > 65535.5 && all < 65536.5);
	free(buf2);
	free(bigbuf);
	lives2 = 0;

	/* the loaded cache's state was not shared with the old one */
	pol_cache_destroy(old);
	t_ok(pol_cache_learned_load(b, buf, len, &lives2));
	t_assert_eq(lives2, lives);
	free(buf);
	pol_cache_destroy(a);
	pol_cache_destroy(b);
	pol_cache_destroy(fresh);
	return 0;
}
