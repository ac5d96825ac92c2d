/* SPDX-License-Identifier: MIT */
/*
 * asym takes pinned and referenced blocks out of its class lists while
 * they are held (parked) and puts them back in order of last use when
 * the last hold goes, so that a decision never walks past them.  Built
 * with asym's self-checks (POL_ASYM_CHECK, as policy-asym-windows), on
 * workloads of requests that grow their conversations, with random pins
 * and references:
 *   - after every request, the GPU tier's lists hold exactly the blocks
 *     that may go structurally and are not held, each in the list of its
 *     class, in order of last use (held blocks out: fails without the
 *     parking), with and without the prefix rule, on one tier and two;
 *   - every victim is the one asym's ranking gives over the blocks that
 *     are not held (a model: the lowest value among each class's
 *     SCAN_TAIL least recent, then better_victim() across the classes),
 *     and never a held block;
 *   - without holds, the moves are those of main before the parking (a
 *     digest recorded with a4e9dc4).
 */
#define POL_ASYM_CHECK
/* every file of asym: the linker then takes none from the library */
#define pol_asym_ops pol_asym_ops_unchecked
#include "kvmm/policy/pol_asym.c"
#undef pol_asym_ops
#include "kvmm/policy/pol_asym_stats.c"
#include "kvmm/policy/pol_asym_victim.c"
#include "kvmm/policy/pol_asym_win.c"

#include "tests/lib/policy_random.h"
#include "tests/lib/test.h"

/* recorded with main at a4e9dc4 (this file less the parts that need
 * the parking: the list check and the model) */
#define EXPECT_MOVES_NOHOLD 148392
#define EXPECT_DIGEST_NOHOLD 0x6bbb96a04a10102full

#define CONVS 40
#define MAXLEN 24

static struct pol_cache *cache;
static struct pr_moves mv = PR_MOVES_INIT;
static uint64_t modelled;

static uint64_t rnd(void)
{
	static uint64_t x = 88172645463325252ull;

	return pr_xorshift(&x);
}

static uint64_t hash_of(uint64_t conv, uint64_t gen, uint64_t i)
{
	return ((gen * CONVS + conv + 1) << 20) + i;
}

/* resident hashes, for check_lists() (the cache has no iterator) */
static uint64_t resident[CONVS * MAXLEN * 4];
static size_t nresident;

static void track(uint64_t h)
{
	size_t n = 0;

	for (size_t i = 0; i < nresident; i++)
		if (resident[i] == h)
			return;
	if (nresident == sizeof(resident) / sizeof(resident[0])) {
		/* keep those still cached */
		for (size_t i = 0; i < nresident; i++)
			if (pol_cache_tier_of(cache, resident[i]) !=
			    POL_TIER_NONE)
				resident[n++] = resident[i];
		nresident = n;
	}
	t_assert(nresident < sizeof(resident) / sizeof(resident[0]));
	resident[nresident++] = h;
}

/*
 * The victim of a tier by asym's ranking over the blocks that are not
 * held, in the order of its lists (check_lists() checks that order on
 * the GPU tier): per list the lowest value among its SCAN_TAIL least
 * recent blocks that are not held (age 0 above all, a partial block -1,
 * the first from the tail among equals), or if that one may not go (set
 * aside, a TTL) the first from the tail that may, looking at SCAN_MAX
 * of those that may not before a second pass looks at all; then the
 * best of the lists by better_victim() at the block's value.
 */
static struct pol_block *model_victim(struct asym *s)
{
	uint64_t now = pol_cache_ticks(cache);
	struct pol_block *best = NULL;
	double best_v = 0;

	for (unsigned pass = 0; pass < 2 && !best; pass++)
		for (unsigned k = 0; k < NCLASS; k++) {
			struct pol_block *cand = NULL, *b = NULL;
			double cand_v = 0;
			unsigned n = 0, skipped = 0;

			for (uint32_t id = s->list[k].tail;
			     id != POL_NONE && n < SCAN_TAIL;
			     id = SLOT(s, id)->prev) {
				struct pol_block *x = pol_index_at(s->ix, id);
				unsigned a = age_bucket(now - x->tick);
				double v = x->flags & POL_BLOCK_PARTIAL ? -1 :
					   a ? s->st->value[k][a] :
					       HUGE_VAL;

				if (held(x))
					continue;
				if (!cand || v < cand_v) {
					cand = x;
					cand_v = v;
				}
				n++;
			}
			if (cand && pol_cache_evictable(cache, cand))
				b = cand;
			for (uint32_t id = s->list[k].tail;
			     cand && !b && id != POL_NONE;
			     id = SLOT(s, id)->prev) {
				struct pol_block *x = pol_index_at(s->ix, id);

				if (held(x))
					continue;
				if (pol_cache_evictable(cache, x))
					b = x;
				else if (!pass && ++skipped > SCAN_MAX)
					break;
			}
			if (!b)
				continue;
			cand_v = block_value(s, b, now);
			if (!best ||
			    better_victim(s, b, cand_v, best, best_v)) {
				best = b;
				best_v = cand_v;
			}
		}
	return best;
}

/* asym's victim, checked against the model's */
static struct pol_block *checked_victim(void *priv)
{
	struct pol_block *m = model_victim(priv), *v = asym_victim(priv);

	if (m != v)
		t_fail("victim %llx, the model's %llx",
		       v ? (unsigned long long)v->hash : 0ull,
		       m ? (unsigned long long)m->hash : 0ull);
	t_assert(!v || !held(v));
	modelled++;
	return v;
}

const struct pol_ops pol_asym_ops = {
	.name = "asym",
	.create = asym_create,
	.destroy = asym_destroy,
	.on_insert = asym_insert,
	.on_access = asym_access,
	.on_remove = asym_remove,
	.on_change = asym_change,
	.on_touch = asym_touch,
	.victim = checked_victim,
	.learned_save = asym_learned_save,
	.learned_load = asym_learned_load,
	.learned_describe = asym_stats_describe,
};

static void on_move(void *arg, const struct pol_block *b, unsigned from,
		    unsigned to)
{
	(void)arg;
	pr_move(&mv, b, from, to);
	if (to != POL_TIER_NONE)
		track(b->hash);
	if (from != POL_TIER_NONE && (to == POL_TIER_NONE || to > from))
		t_assert(!held(b));
}

/* The GPU tier's lists: exactly its unheld blocks that may go
 * structurally, each in its class's list, in order of last use (of the
 * request that last used it). */
static void check_lists(void)
{
	struct asym *s = pol_cache_gpu_policy(cache);
	uint64_t listed_n = 0, want = 0;

	for (unsigned k = 0; k < NCLASS; k++) {
		const struct pol_block *prev = NULL;

		for (uint32_t id = s->list[k].head; id != POL_NONE;
		     id = SLOT(s, id)->next) {
			const struct pol_block *b = pol_index_at(s->ix, id);

			t_assert(b->tier == POL_TIER_GPU);
			t_assert(!held(b));
			t_assert(block_class(b) == k);
			/* a request uses its chain from the root at
			 * consecutive ticks: its blocks share a key, and
			 * later requests have greater keys */
			t_assert(!prev || block_key(b) <= block_key(prev));
			prev = b;
			listed_n++;
		}
	}
	for (size_t i = 0; i < nresident; i++) {
		const struct pol_block *b =
			pol_cache_lookup(cache, resident[i]);

		if (b && b->tier == POL_TIER_GPU && !held(b) &&
		    pol_cache_is_leaf(cache, b))
			want++;
	}
	t_assert_eq(listed_n, want);
}

/*
 * Requests of CONVS conversations (a few of them often) that grow, each
 * using its chain from the root; with hold, random pins and references
 * of resident blocks come and go between the requests.
 */
static void run(uint64_t gpu, uint64_t host, int prefix_rule, bool hold)
{
	struct pol_cache_opts o = { .size = sizeof(o),
				    .kind = POL_ASYM,
				    .capacity = { gpu, host },
				    .prefix_rule = prefix_rule };
	uint64_t len[CONVS] = { 0 }, gen[CONVS] = { 0 };

	t_ok(pol_cache_create(&o, &cache));
	pol_cache_set_move_handler(cache, on_move, NULL);
	nresident = 0;
	for (uint64_t r = 0; r < 3000; r++) {
		uint64_t k = rnd() % 2 ? rnd() % 8 : rnd() % CONVS;

		if (len[k] + 4 > MAXLEN) {
			len[k] = 0;
			gen[k]++;
		}
		len[k] += 1 + rnd() % 4;
		pol_cache_set_clock(cache, r);
		for (uint64_t i = 0; i < len[k]; i++) {
			struct pol_block_desc d = {
				.hash = hash_of(k, gen[k], i),
				.parent_hash = hash_of(k, gen[k], i) - 1,
				.position = (uint32_t)i,
				.flags = i ? POL_BLOCK_HAS_PARENT : 0,
			};
			int e;

			if (i + 1 == len[k] && rnd() % 4 == 0)
				d.flags |= POL_BLOCK_PARTIAL;
			track(d.hash);
			e = pol_cache_access(cache, &d, NULL);
			t_assert(e == 0 || e == -ENOSPC);
		}
		for (int j = 0; hold && j < 3; j++) {
			uint64_t h = resident[rnd() % nresident];

			switch (rnd() % 6) {
			case 0:
				(void)pol_cache_pin(cache, h);
				break;
			case 1:
				(void)pol_cache_unpin(cache, h);
				break;
			case 2:
				(void)pol_cache_ref(cache, h);
				break;
			case 3:
				(void)pol_cache_unref(cache, h);
				break;
			}
		}
		check_lists();
	}
	pol_cache_destroy(cache);
}

int main(void)
{
	/* main before the parking, on the same workloads without holds */
	run(120, 0, -1, false);
	run(120, 200, -1, false);
	run(120, 0, 0, false);
	printf("asym without holds: %llu moves, digest %016llx\n",
	       (unsigned long long)mv.moves, (unsigned long long)mv.digest);
	t_assert_eq(mv.moves, EXPECT_MOVES_NOHOLD);
	t_assert(mv.digest == EXPECT_DIGEST_NOHOLD);

	run(120, 0, -1, true);
	run(120, 200, -1, true);
	run(120, 200, 0, true);
	run(300, 0, -1, true);
	t_assert(modelled > 100000);
	return T_PASS;
}
