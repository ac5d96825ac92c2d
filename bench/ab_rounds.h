/* SPDX-License-Identifier: MIT */
/*
 * Two daemons timed against each other in alternating rounds (scope.c,
 * extend.c).  On this shared machine absolute times drift with the load,
 * so each round times both sides back to back, the order flipping every
 * round (A/B, then B/A), round 0 is a warm-up that is not counted, and
 * what a benchmark reports is the median of the per-round ratios, next
 * to the medians of each side's times.
 */
#ifndef KVMM_BENCH_AB_ROUNDS_H
#define KVMM_BENCH_AB_ROUNDS_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "tests/lib/daemon.h"

#define AB_MAX_ROUNDS 64

struct ab_args {
	int rounds; /* --rounds, 2..AB_MAX_ROUNDS (default 9) */
	int n; /* operations a side times per round (default 2000) */
	const char *baseline; /* --baseline-build DIR, or NULL */
};

/*
 * [--rounds N] [--COUNT N] [--baseline-build DIR], count_opt naming the
 * benchmark's count ("--opens").  0, or 2 with the usage on stderr: an
 * unknown option, or one without its value, is a usage error (--help
 * once ran the whole benchmark).
 */
static inline int ab_parse(int argc, char **argv, const char *prog,
			   const char *count_opt, struct ab_args *a)
{
	a->rounds = 9;
	a->n = 2000;
	a->baseline = NULL;
	for (int i = 1; i < argc; i += 2) {
		if (i + 1 >= argc)
			a->rounds = 0;
		else if (!strcmp(argv[i], "--rounds"))
			a->rounds = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], count_opt))
			a->n = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--baseline-build"))
			a->baseline = argv[i + 1];
		else
			a->rounds = 0;
		if (!a->rounds)
			break;
	}
	if (a->rounds < 2 || a->rounds > AB_MAX_ROUNDS || a->n < 1) {
		fprintf(stderr,
			"usage: %s [--rounds 2..%d] [%s N] [--baseline-build DIR]\n",
			prog, AB_MAX_ROUNDS, count_opt);
		return 2;
	}
	return 0;
}

/*
 * Start a side's kvmmd with args: this build's, or with build the kvmmd
 * of that build directory (td_start() takes KVMM_BUILD's), the caller's
 * KVMM_BUILD put back afterwards.  td_start()'s 0 or -errno.
 */
static inline int ab_start(struct td_daemon *d, const char *const *args,
			   const char *build)
{
	const char *own = getenv("KVMM_BUILD");
	char *saved = own ? strdup(own) : NULL;
	int e;

	if (build)
		setenv("KVMM_BUILD", build, 1);
	e = td_start(d, args);
	if (build) {
		if (saved)
			setenv("KVMM_BUILD", saved, 1);
		else
			unsetenv("KVMM_BUILD");
	}
	free(saved);
	return e;
}

/* What one side costs: ns per operation over n of them. */
typedef double (*ab_time_fn)(void *side, int n);

struct ab_side {
	const char *name; /* in the round lines */
	void *arg; /* time's side */
};

struct ab_result {
	double a, b; /* medians of each side's ns per operation */
	double ratio; /* median of the per-round ratios */
	int rounds; /* rounds counted (the warm-up is not) */
};

/*
 * Time a and b in a->rounds alternating rounds, printing one line a
 * round; the ratio is b / a, or a / b with a_over_b.
 */
static inline void ab_run(const struct ab_args *args, ab_time_fn time,
			  const struct ab_side *a, const struct ab_side *b,
			  bool a_over_b, struct ab_result *res)
{
	double ta[AB_MAX_ROUNDS], tb[AB_MAX_ROUNDS], ratio[AB_MAX_ROUNDS];
	int k = 0;

	for (int r = 0; r < args->rounds; r++) {
		double x, y;

		if (r % 2) {
			y = time(b->arg, args->n);
			x = time(a->arg, args->n);
		} else {
			x = time(a->arg, args->n);
			y = time(b->arg, args->n);
		}
		if (!r)
			continue; /* warm-up */
		ta[k] = x;
		tb[k] = y;
		ratio[k++] = a_over_b ? x / y : y / x;
		printf("round %d: %s %.2f us, %s %.2f us, ratio %.3f\n", r,
		       a->name, x / 1000, b->name, y / 1000, ratio[k - 1]);
	}
	res->a = median(ta, (unsigned)k);
	res->b = median(tb, (unsigned)k);
	res->ratio = median(ratio, (unsigned)k);
	res->rounds = k;
}

#endif
