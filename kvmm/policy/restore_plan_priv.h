/* SPDX-License-Identifier: MIT */
/*
 * Restore plans, between restore_plan.c (the timing model, the window
 * search, MSA's greedy) and restore_plan_tiers.c (the searches over
 * every tier's own threshold and, serially, over every choice).
 */
#ifndef KVMM_POLICY_RESTORE_PLAN_PRIV_H
#define KVMM_POLICY_RESTORE_PLAN_PRIV_H

#include "kvmm/policy/restore_plan.h"

struct restore_sim {
	const struct pol_cost_model *m;
	const struct pol_restore_opts *o;
	const uint8_t *tiers;
	uint32_t n;
	double overhead;
	double *ready; /* time block i is on the GPU */
	uint32_t min_blocks, max_blocks; /* recompute chunk bounds */
};

/* Time of the recompute chunk [a, b) in a context of k segments. */
double restore_chunk_time(const struct restore_sim *s, uint32_t a, uint32_t b,
			  unsigned k);
/* The makespan of act (the timing model); fills p's chunks unless NULL. */
double restore_simulate(struct restore_sim *s, const uint8_t *act,
			struct pol_restore_plan *p);
/*
 * Without MSA, blocks before the first miss f: act holds a plan whose
 * makespan is *best_s; these replace it with a faster one if they find
 * one.  0 or -ENOMEM.
 */
int restore_plan_thresholds(struct restore_sim *s, uint32_t f, uint8_t *act,
			    double *best_s);
/*
 * Serial (no_overlap): act gets the exact optimum over every choice.
 * 0, -ENOMEM or -E2BIG (blocks x chunk fills over SERIAL_STATES_MAX: the
 * caller searches the windows instead).
 */
int restore_plan_serial(struct restore_sim *s, uint32_t f, uint8_t *act);

#endif
