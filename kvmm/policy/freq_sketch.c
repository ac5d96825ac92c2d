/* SPDX-License-Identifier: MIT */
/* Count-min frequency sketch with periodic halving (see freq_sketch.h). */
#include <errno.h>
#include <stdlib.h>

#include "kvmm/policy/freq_sketch.h"
#include "kvmm/policy/pol_mem.h"

static const uint64_t seeds[4] = { 0x9e3779b97f4a7c15ull, 0xc2b2ae3d27d4eb4full,
				   0x165667b19e3779f9ull,
				   0xd6e8feb86659fd93ull };

static uint64_t slot(const struct pol_sketch *s, uint64_t hash, int row)
{
	uint64_t x = (hash + seeds[row]) * 0xbf58476d1ce4e5b9ull;

	x ^= x >> 31;
	return (uint64_t)row * (s->mask + 1) + (x & s->mask);
}

int pol_sketch_init(struct pol_sketch *s, uint64_t width, uint64_t period)
{
	uint64_t w = 64;

	while (w < width && w < (1ull << 24))
		w <<= 1;
	s->counters = pol_mem_map(4 * w); /* zeroed */
	if (!s->counters)
		return -ENOMEM;
	s->mask = w - 1;
	s->adds = 0;
	s->period = period ? period : 8 * w;
	return 0;
}

void pol_sketch_fini(struct pol_sketch *s)
{
	pol_mem_unmap(s->counters, 4 * (s->mask + 1));
	s->counters = NULL;
}

/* The counter of each row for a hash: four multiplications, done once. */
static void slots(const struct pol_sketch *s, uint64_t hash, uint64_t idx[4])
{
	for (int r = 0; r < 4; r++)
		idx[r] = slot(s, hash, r);
}

static unsigned min_of(const struct pol_sketch *s, const uint64_t idx[4])
{
	unsigned m = 255;

	for (int r = 0; r < 4; r++) {
		unsigned v = s->counters[idx[r]];

		if (v < m)
			m = v;
	}
	return m;
}

unsigned pol_sketch_estimate(const struct pol_sketch *s, uint64_t hash)
{
	uint64_t idx[4];

	slots(s, hash, idx);
	return min_of(s, idx);
}

unsigned pol_sketch_add(struct pol_sketch *s, uint64_t hash)
{
	uint64_t idx[4];
	unsigned m;

	slots(s, hash, idx);
	m = min_of(s, idx);
	/* Conservative update: raise only the counters at the minimum. */
	for (int r = 0; r < 4 && m < 255; r++) {
		uint8_t *c = &s->counters[idx[r]];

		if (*c == m)
			(*c)++;
	}
	if (++s->adds >= s->period) {
		for (uint64_t i = 0; i < 4 * (s->mask + 1); i++)
			s->counters[i] >>= 1;
		s->adds = 0;
	}
	return m < 255 ? m + 1 : m;
}

void pol_sketch_prefetch(const struct pol_sketch *s, uint64_t hash)
{
	/* One line per row: start all four misses at once. */
	for (int r = 0; r < 4; r++)
		__builtin_prefetch(&s->counters[slot(s, hash, r)], 1);
}
