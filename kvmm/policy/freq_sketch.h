/* SPDX-License-Identifier: MIT */
/*
 * Frequency sketch with aging (TinyLFU, Einziger et al., 2017): a
 * count-min sketch of 4 rows of 8-bit counters estimates how often a hash
 * was used recently, in constant memory whatever the number of distinct
 * hashes; every `period` increments all counters are halved, so old
 * popularity fades.  asym uses it as the history of blocks it no longer
 * holds: a block that comes back resumes its count.
 */
#ifndef KVMM_POLICY_FREQ_SKETCH_H
#define KVMM_POLICY_FREQ_SKETCH_H

#include <stdint.h>

struct pol_sketch {
	uint8_t *counters; /* 4 rows of `width` */
	uint64_t mask; /* width - 1 */
	uint64_t adds, period;
};

/* width: counters per row (rounded up to a power of two). */
int pol_sketch_init(struct pol_sketch *s, uint64_t width, uint64_t period);
void pol_sketch_fini(struct pol_sketch *s);
/* Count one use; returns the new estimate. */
unsigned pol_sketch_add(struct pol_sketch *s, uint64_t hash);
unsigned pol_sketch_estimate(const struct pol_sketch *s, uint64_t hash);
/* Start loading the counters of a hash (one line in each row). */
void pol_sketch_prefetch(const struct pol_sketch *s, uint64_t hash);

#endif
