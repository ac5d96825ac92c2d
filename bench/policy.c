/* SPDX-License-Identifier: MIT */
/*
 * Policy decision rate: with 1M blocks resident in the GPU tier (prefix
 * chains of 16 blocks, as requests make them), admit new blocks so that
 * every admission is one eviction decision plus one insertion, and count
 * decisions per second for each policy against LRU measured in the same
 * run.  Every 4th access is a hit on a resident block, so the rankings
 * move as they do under a real workload.  Target: >= 1M decisions/s.
 * Rates are per second of this thread's CPU time, so other load on the
 * machine does not count against them.  Before timing, 2 x RESIDENT
 * untimed accesses bring the cache to its steady state (asym's history
 * full, the index at its final size), and the bench tells the cache the
 * next block of a chain before it accesses the current one
 * (pol_cache_prefetch), as kvmm-replay and a daemon knowing the request
 * do.
 *   bench/policy [RESIDENT] [DECISIONS] [POLICY...]
 * With POLICY names only those run (the ratios need lru among them).  The timed
 * loop is decide(), so `valgrind --tool=callgrind --collect-atstart=no
 * --toggle-collect=decide` counts the instructions of the decisions only.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench/bench.h"
#include "kvmm/policy/policy.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void access_block(struct pol_cache *c, uint64_t n, uint64_t next)
{
	/* block n: chain n / 16, position n % 16; every other chain comes
	 * from a short request (asym's second set of classes, which a
	 * replay fills too) */
	struct pol_block_desc d = {
		.hash = n,
		.parent_hash = n - 1,
		.position = (uint32_t)(n % 16),
		.flags = (n % 16 ? POL_BLOCK_HAS_PARENT : 0) |
			 ((n / 16) % 2 ? POL_BLOCK_FEW_NEW : 0),
		.next_use = next,
	};

	int e = pol_cache_access(c, &d, NULL);

	if (e) {
		fprintf(stderr, "policy: access failed (%d)\n", e);
		exit(1);
	}
}

/* `decisions` accesses, 3 in 4 of them admissions; returns the next n. */
static uint64_t accesses(struct pol_cache *c, uint64_t n, uint64_t resident,
			 uint64_t decisions)
{
	uint64_t rng = 12345;

	for (uint64_t i = 0; i < decisions; i++) {
		if (i % 4 == 3) {
			/* a hit somewhere in the resident window */
			rng = rng * 6364136223846793005ull +
			      1442695040888963407ull;
			uint64_t h = n - 1 - (rng >> 33) % (resident / 2);

			if (pol_cache_lookup(c, h))
				access_block(c, h, n + resident);
			continue;
		}
		/* the next block of the chain (the same request) is known */
		if ((n + 1) % 16)
			pol_cache_prefetch(c, n + 1);
		access_block(c, n, n + (rng >> 40) % (4 * resident));
		n++;
	}
	return n;
}

__attribute__((noinline)) static uint64_t warm_up(struct pol_cache *c,
						  uint64_t n, uint64_t resident)
{
	return accesses(c, n, resident, 2 * resident);
}

/* The timed part (what callgrind's --toggle-collect=decide counts). */
__attribute__((noinline)) static void
decide(struct pol_cache *c, uint64_t n, uint64_t resident, uint64_t decisions)
{
	accesses(c, n, resident, decisions);
}

/* Reference up to `held` of the least recent resident leaves (the last
 * block of a chain), as open sequences hold blocks in kvmmd. */
static void hold_cold(struct pol_cache *c, uint64_t n, uint64_t held)
{
	for (uint64_t h = 15; h < n && held; h += 16)
		if (!pol_cache_ref(c, h))
			held--;
}

/* held: blocks referenced at the cold end through the timed part */
static double run(enum pol_kind kind, uint64_t resident, uint64_t decisions,
		  uint64_t held)
{
	struct pol_cache_opts o = { .size = sizeof(o),
				    .kind = kind,
				    .capacity = { resident },
				    .prefix_rule = -1,
				    .expected_blocks = (uint32_t)resident };
	struct pol_cache_stats st;
	struct pol_cache *c;
	uint64_t n = 0, inserts0;
	double t0, t1;

	if (pol_cache_create(&o, &c)) {
		fprintf(stderr, "policy: cannot create a %s cache\n",
			pol_kind_string(kind));
		exit(1);
	}
	for (; n < resident; n++)
		access_block(c, n, n + 2 * resident);
	/*
	 * Warm up to the steady state: asym follows every use for twice the
	 * capacity in uses, and its index grows (new pages, a larger hash
	 * table) until the first of them leave the history.
	 */
	n = warm_up(c, n, resident);
	hold_cold(c, n, held);
	pol_cache_get_stats(c, &st);
	inserts0 = st.drops;
	t0 = now();
	decide(c, n, resident, decisions);
	t1 = now();
	pol_cache_get_stats(c, &st);
	pol_cache_destroy(c);
	return (double)(st.drops - inserts0) / (t1 - t0);
}

int main(int argc, char **argv)
{
	static const char usage[] =
		"usage: policy [RESIDENT [DECISIONS [POLICY...]]]  (1000000 resident blocks and 2000000 decisions by default; POLICY lru, lfu, arc, belady or asym, all by default)\n";
	uint64_t resident = 1000000, decisions = 2000000;
	/* blocks held at the cold end in the second run of each policy */
	uint64_t held;
	double rate[POL_KIND_COUNT] = { 0 }, rate_held[POL_KIND_COUNT] = { 0 };
	bool want[POL_KIND_COUNT] = { 0 };

	if (bench_help(argc, argv, usage))
		return 0;
	for (int i = 1; i < argc && i < 3; i++) {
		char *end;
		uint64_t v = strtoull(argv[i], &end, 0);

		if (*end || !v)
			return bench_usage_error("policy", argv[i], usage);
		/* a hit goes to the older half of the resident blocks */
		if (i == 1 && v < 2) {
			fprintf(stderr, "policy: RESIDENT %s: 2 at least\n%s",
				argv[i], usage);
			return 2;
		}
		*(i == 1 ? &resident : &decisions) = v;
	}
	held = resident / 100;
	for (int i = 3; i < argc; i++) {
		enum pol_kind k;

		if (pol_kind_parse(argv[i], &k)) {
			fprintf(stderr, "policy: unknown policy %s\n", argv[i]);
			return 2;
		}
		want[k] = true;
	}
	for (int k = 0; k < POL_KIND_COUNT; k++) {
		if (argc > 3 && !want[k])
			continue;
		rate[k] = run((enum pol_kind)k, resident, decisions, 0);
		printf("%-7s %12.0f evict+insert decisions/s",
		       pol_kind_string((enum pol_kind)k), rate[k]);
		if (rate[POL_LRU])
			printf("  (%.2fx lru)", rate[k] / rate[POL_LRU]);
		printf("\n");
	}
	/* the same with 1 % of the blocks referenced at the cold end: a
	 * decision should not step over them (KVMM_BENCH_UNREFERENCED=1
	 * leaves this out: callgrind's instruction counts of the plain
	 * decisions, performance.md) */
	for (int k = 0; k < POL_KIND_COUNT; k++) {
		if (!rate[k] || getenv("KVMM_BENCH_UNREFERENCED"))
			continue;
		rate_held[k] = run((enum pol_kind)k, resident, decisions, held);
		printf("%-7s %12.0f with %llu referenced at the cold end  (%.2fx unreferenced)\n",
		       pol_kind_string((enum pol_kind)k), rate_held[k],
		       (unsigned long long)held, rate_held[k] / rate[k]);
	}
	printf("{\"bench\":\"policy\",\"resident_blocks\":%llu",
	       (unsigned long long)resident);
	if (rate[POL_LRU])
		printf(",\"baseline\":\"lru\",\"lru_decisions_per_s\":%.0f",
		       rate[POL_LRU]);
	for (int k = 1; k < POL_KIND_COUNT; k++) {
		const char *name = pol_kind_string((enum pol_kind)k);

		if (!rate[k])
			continue;
		printf(",\"%s_decisions_per_s\":%.0f", name, rate[k]);
		if (rate[POL_LRU])
			printf(",\"%s_vs_lru\":%.3f", name,
			       rate[k] / rate[POL_LRU]);
	}
	/* only when that pass ran */
	if (!getenv("KVMM_BENCH_UNREFERENCED"))
		printf(",\"referenced_blocks\":%llu", (unsigned long long)held);
	for (int k = 0; k < POL_KIND_COUNT; k++)
		if (rate_held[k])
			printf(",\"%s_referenced_vs_unreferenced\":%.3f",
			       pol_kind_string((enum pol_kind)k),
			       rate_held[k] / rate[k]);
	if (rate[POL_ASYM])
		printf(",\"target_met\":%s",
		       rate[POL_ASYM] >= 1e6 ? "true" : "false");
	printf("}\n");
	return 0;
}
