// SPDX-License-Identifier: MIT
/*
 * What a tenant limit buys a quiet tenant next to a noisy one, in the
 * policy library (the cache kvmmd runs), against the same tenant alone.
 *
 * The quiet tenant replays the conversation trace (its blocks hit on the
 * longest resident prefix, then every block is accessed, as kvmm-replay
 * does by default).  The noisy one, before each of the quiet tenant's
 * requests, brings NOISE times as many blocks that nobody uses again (a
 * batch job's long prompts, another model's churn).  For lru and asym,
 * on the GPU alone and on GPU + host, the quiet tenant's block hit ratio:
 *   alone       the trace by itself (what it can get)
 *   shared      with the noisy tenant, no limit
 *   limited     with the noisy tenant held to a tenth of each tier
 * and the share of what the noise took that the limit gives back:
 * (limited - shared) / (alone - shared) ("none taken" when the noise
 * cost the quiet tenant less than 0.005: the policy kept it out).
 *
 *   build/bench/tenant-isolation [TRACE] [NOISE]
 * TRACE (or "") defaults to $KVMM_TRACE, then ../shared/traces/mooncake/
 * conversation_trace.jsonl; NOISE to 1.  Exits 77 without the trace.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "kvmm/policy/policy.h"
#include "kvmm/policy/trace.h"

#define QUIET 1001u
#define NOISY 1002u
#define NOISE_HASH (1ull << 62) /* above the trace's ids */

enum mode { ALONE, SHARED, LIMITED, NMODES };
static const char *const mode_names[NMODES] = { "alone", "shared", "limited" };

struct config {
	const char *name;
	uint64_t gpu, host;
};

static const struct config configs[] = {
	{ "gpu 5000", 5000, 0 },
	{ "gpu 1000 + host 4000", 1000, 4000 },
};

/* One request of tenant at clock: its hits (the resident prefix), then
 * every block accessed, parents chained (the last one partial when
 * partial says so).  Returns the hits or -errno. */
static long request(struct pol_cache *c, const uint64_t *h, uint32_t n,
		    uint32_t tenant, uint64_t clock, bool partial)
{
	unsigned few = pol_cache_few_new(c, h, n) ? POL_BLOCK_FEW_NEW : 0;
	uint32_t k = 0;

	pol_cache_set_clock(c, clock);
	while (k < n && pol_cache_tier_of(c, h[k]) != POL_TIER_NONE)
		k++;
	for (uint32_t i = 0; i < n; i++) {
		struct pol_block_desc d = {
			.hash = h[i],
			.parent_hash = i ? h[i - 1] : 0,
			.position = i,
			.flags = (i ? POL_BLOCK_HAS_PARENT : 0) | few,
			.next_use = UINT64_MAX,
			.tenant = tenant,
		};
		int e;

		if (partial && i == n - 1)
			d.flags |= POL_BLOCK_PARTIAL;
		e = pol_cache_access(c, &d, NULL);

		if (e && e != -ENOSPC)
			return e;
	}
	return k;
}

/* The quiet tenant's block hit ratio, or a negative errno. */
static double run(const struct pol_trace *t, enum pol_kind kind,
		  const struct config *cf, enum mode mode, double noise,
		  uint64_t *limit_moves)
{
	struct pol_cache_opts o = { .size = sizeof(o),
				    .kind = kind,
				    .capacity = { cf->gpu, cf->host },
				    .prefix_rule = -1,
				    .expected_blocks = 1 << 20 };
	uint64_t sub = 0, last_ms = UINT64_MAX, hits = 0, blocks = 0;
	uint64_t next_noise = NOISE_HASH;
	static uint64_t noise_h[4096];
	struct pol_tenant_count rows[POL_TENANT_ROWS];
	struct pol_cache *c;
	double owed = 0;
	int e;

	e = pol_cache_create(&o, &c);
	if (e)
		return e;
	if (mode == LIMITED) {
		const uint64_t lim[POL_TIER_COUNT] = { cf->gpu / 10,
						       cf->host / 10 };

		e = pol_cache_tenant_limit(c, NOISY, lim);
		if (e)
			goto out;
	}
	for (size_t r = 0; r < t->nreqs; r++) {
		const struct pol_trace_req *q = &t->reqs[r];
		long k;

		/* kvmm-replay's clock: trace ms, then order within one */
		sub = q->timestamp_ms == last_ms ? sub + 1 : 0;
		last_ms = q->timestamp_ms;

		/* the noise before it: fresh chains of the request's size */
		owed += mode == ALONE ? 0 : noise * q->nblocks;
		while (owed >= 1) {
			uint32_t n = q->nblocks;

			if (n > owed)
				n = (uint32_t)owed;
			if (n > sizeof(noise_h) / sizeof(noise_h[0]))
				n = sizeof(noise_h) / sizeof(noise_h[0]);
			for (uint32_t i = 0; i < n; i++)
				noise_h[i] = next_noise++;
			k = request(c, noise_h, n, NOISY,
				    (q->timestamp_ms << 20) + (sub++ & 0xfffff),
				    false);
			if (k < 0) {
				e = (int)k;
				goto out;
			}
			owed -= n;
		}
		k = request(c, pol_trace_blocks(t, q), q->nblocks, QUIET,
			    (q->timestamp_ms << 20) + (sub & 0xfffff),
			    q->input_length % POL_TRACE_BLOCK_TOKENS);
		if (k < 0) {
			e = (int)k;
			goto out;
		}
		hits += (uint64_t)k;
		blocks += q->nblocks;
	}
	*limit_moves = 0;
	for (size_t i = 0, n = pol_cache_tenants(c, rows, POL_TENANT_ROWS);
	     i < n; i++)
		if (rows[i].id == NOISY)
			*limit_moves = rows[i].limit_moves;
out:
	pol_cache_destroy(c);
	return e ? e : (double)hits / (double)blocks;
}

int main(int argc, char **argv)
{
	static const enum pol_kind kinds[] = { POL_LRU, POL_ASYM };
	const char *path = argc > 1 ? argv[1] : getenv("KVMM_TRACE");
	double noise = argc > 2 ? strtod(argv[2], NULL) : 1.0;
	double ratio[2][2][NMODES], given_back_min = 1e9;
	struct pol_trace t;
	char err[256];
	int e;
	static const char usage[] =
		"usage: tenant-isolation [TRACE [NOISE]]  (TRACE: $KVMM_TRACE or ../shared/traces/mooncake/conversation_trace.jsonl; NOISE in (0, 100], 1 by default)\n";

	if (bench_help(argc, argv, usage))
		return 0;
	if (argc > 3)
		return bench_usage_error("tenant-isolation", argv[3], usage);
	if (!path || !*path)
		path = "../shared/traces/mooncake/conversation_trace.jsonl";
	if (!(noise > 0) || noise > 100) {
		fprintf(stderr,
			"tenant-isolation: NOISE '%s' is not in (0, 100]\n",
			argv[2]);
		return 2;
	}
	e = pol_trace_load(path, &t, err, sizeof(err));
	if (e == -ENOENT) {
		printf("SKIP: no trace at %s (set KVMM_TRACE)\n", path);
		return 77;
	}
	if (e) {
		fprintf(stderr, "tenant-isolation: %s: %s\n", path, err);
		return 1;
	}
	printf("quiet tenant: %s (%zu requests); noisy tenant: %.1fx its blocks, never reused; limited: the noisy one to a tenth of each tier\n",
	       path, t.nreqs, noise);
	printf("%-6s %-22s %8s %8s %8s %12s %12s\n", "policy", "tiers", "alone",
	       "shared", "limited", "given back", "limit moves");
	for (int k = 0; k < 2; k++)
		for (int f = 0; f < 2; f++) {
			uint64_t moves = 0, unused;
			double gb;

			for (int m = 0; m < NMODES; m++) {
				double v = run(&t, kinds[k], &configs[f],
					       (enum mode)m, noise,
					       m == LIMITED ? &moves : &unused);

				if (v < 0) {
					fprintf(stderr,
						"tenant-isolation: %s %s: %s\n",
						pol_kind_string(kinds[k]),
						mode_names[m],
						strerror(-(int)v));
					pol_trace_free(&t);
					return 1;
				}
				ratio[k][f][m] = v;
			}
			printf("%-6s %-22s %8.4f %8.4f %8.4f ",
			       pol_kind_string(kinds[k]), configs[f].name,
			       ratio[k][f][ALONE], ratio[k][f][SHARED],
			       ratio[k][f][LIMITED]);
			/* a share of nothing says nothing: the policy kept
			 * the noise out by itself */
			if (ratio[k][f][ALONE] - ratio[k][f][SHARED] < 0.005) {
				printf("%12s", "none taken");
			} else {
				gb = (ratio[k][f][LIMITED] -
				      ratio[k][f][SHARED]) /
				     (ratio[k][f][ALONE] - ratio[k][f][SHARED]);
				if (gb < given_back_min)
					given_back_min = gb;
				printf("%11.1f%%", 100 * gb);
			}
			printf(" %12llu\n", (unsigned long long)moves);
		}
	printf("{\"bench\":\"tenant-isolation\",\"noise\":%.2f", noise);
	for (int k = 0; k < 2; k++)
		for (int f = 0; f < 2; f++)
			for (int m = 0; m < NMODES; m++)
				printf(",\"%s_%s_%s\":%.4f",
				       pol_kind_string(kinds[k]),
				       configs[f].host ? "gpu_host" : "gpu",
				       mode_names[m], ratio[k][f][m]);
	if (given_back_min > 1e8)
		printf(",\"given_back_min\":null}\n");
	else
		printf(",\"given_back_min\":%.3f}\n", given_back_min);
	pol_trace_free(&t);
	return 0;
}
