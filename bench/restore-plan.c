/* SPDX-License-Identifier: MIT */
/*
 * Restore plan cost: CPU time of pol_restore_plan_build() without MSA on
 * the reference profile, for prefixes of 100, 1000 and 65536
 * (POL_RESTORE_MAX_BLOCKS) blocks whose tiers mix GPU, host and NVMe
 * (2:2:6, random), and for 65536 blocks all on NVMe but the last, with
 * and without overlap (no_overlap: kvmmd's plan for a client that does
 * not open early).  The baseline in the same run is one
 * pol_restore_plan_eval() of the plan's actions (one pass of the timing
 * model): the ratio says how many evaluations a plan costs.  Median of
 * the rounds, per thread CPU time.
 *   bench/restore-plan [ROUNDS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench.h"
#include "kvmm/policy/restore_plan.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(uint32_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng % n);
}

struct row {
	const char *name;
	uint32_t n;
	bool nvme_only, serial;
};

int main(int argc, char **argv)
{
	static const struct row rows[] = {
		{ "mixed", 100, false, false },
		{ "mixed", 1000, false, false },
		{ "mixed", POL_RESTORE_MAX_BLOCKS, false, false },
		{ "nvme", POL_RESTORE_MAX_BLOCKS, true, false },
		{ "mixed", 100, false, true },
		{ "mixed", 1000, false, true },
		{ "mixed", POL_RESTORE_MAX_BLOCKS, false, true },
	};
	static const char usage[] =
		"usage: restore-plan [ROUNDS]  (1..64, 21 by default)\n";
	unsigned rounds = 21;
	struct pol_cost_model m;
	static uint8_t tiers[POL_RESTORE_MAX_BLOCKS];
	double plan[64], eval[64];

	if (bench_help(argc, argv, usage))
		return 0;
	if (argc > 2)
		return bench_usage_error("restore-plan", argv[2], usage);
	if (argc > 1) {
		char *end;
		unsigned long v = strtoul(argv[1], &end, 10);

		if (*end || !v || v > 64)
			return bench_usage_error("restore-plan", argv[1],
						 usage);
		rounds = (unsigned)v;
	}
	pol_cost_reference(&m);
	printf("{\"bench\": \"restore-plan\", \"rows\": [");
	for (unsigned r = 0; r < sizeof(rows) / sizeof(rows[0]); r++) {
		const struct row *w = &rows[r];
		struct pol_restore_opts o = { .size = sizeof(o),
					      .no_overlap = w->serial };
		struct pol_restore_plan p;
		double total = 0;

		for (uint32_t i = 0; i < w->n; i++) {
			uint32_t x = rnd(10);

			tiers[i] = w->nvme_only ? POL_TIER_NVME :
				   x < 2	? POL_TIER_GPU :
				   x < 4	? POL_TIER_HOST :
						  POL_TIER_NVME;
		}
		if (w->nvme_only)
			tiers[w->n - 1] = POL_TIER_HOST;
		for (unsigned k = 0; k < rounds; k++) {
			double t0 = now(), t1, t2;

			if (pol_restore_plan_build(&m, tiers, w->n, &o, &p)) {
				fprintf(stderr, "restore-plan: build failed\n");
				return 1;
			}
			t1 = now();
			if (pol_restore_plan_eval(&m, tiers, w->n, &o, p.action,
						  &total)) {
				fprintf(stderr, "restore-plan: eval failed\n");
				return 1;
			}
			t2 = now();
			plan[k] = t1 - t0;
			eval[k] = t2 - t1;
			pol_restore_plan_free(&p);
		}
		double pm = median(plan, rounds), em = median(eval, rounds);

		fprintf(stderr,
			"%-5s %5u blocks %-7s plan %9.1f us  eval %8.1f us  "
			"ratio %6.1f  makespan %.6f s\n",
			w->name, w->n, w->serial ? "serial" : "overlap",
			pm * 1e6, em * 1e6, pm / em, total);
		printf("%s{\"tiers\": \"%s\", \"blocks\": %u, \"overlap\": %s, "
		       "\"plan_us\": %.1f, \"eval_us\": %.1f, \"ratio\": %.2f, "
		       "\"makespan_s\": %.6f}",
		       r ? ", " : "", w->name, w->n,
		       w->serial ? "false" : "true", pm * 1e6, em * 1e6,
		       pm / em, total);
	}
	printf("]}\n");
	return 0;
}
