/* SPDX-License-Identifier: MIT */
/*
 * A fixed-size map of 64-bit hashes to 32-bit values (open addressing,
 * linear probing, no deletion) for one pass over a trace: the replay's
 * next-use pass and its set of blocks seen, the --daemon driver's, and
 * pol_trace_infer_outputs()'s block -> request map.  A lookup that
 * misses claims the slot's key but leaves it empty (UINT32_MAX).
 * Sized at init for at most n keys (load factor <= 1/2), so it never
 * grows; every 64-bit key is valid, including 0.
 */
#ifndef KVMM_POLICY_HMAP_H
#define KVMM_POLICY_HMAP_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct pol_hmap {
	uint64_t *keys;
	uint32_t *vals; /* UINT32_MAX: empty */
	uint64_t mask;
};

/*
 * The 64-bit finaliser of splitmix64: spreads structured ids (sequential
 * trace ids, block hashes) over every bit, so the low bits can pick a
 * slot.  The policy's block index and kvmm-agentgen use it too.
 */
static inline uint64_t pol_mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

/* Room for n keys; 0 or -ENOMEM.  pol_hmap_fini() frees it. */
static inline int pol_hmap_init(struct pol_hmap *m, size_t n)
{
	uint64_t size = 1024;

	while (size < 2 * n + 2)
		size <<= 1;
	m->mask = size - 1;
	m->keys = malloc(size * sizeof(*m->keys));
	m->vals = malloc(size * sizeof(*m->vals));
	if (!m->keys || !m->vals) {
		free(m->keys);
		free(m->vals);
		m->keys = NULL;
		m->vals = NULL;
		return -ENOMEM;
	}
	memset(m->vals, 0xff, size * sizeof(*m->vals));
	return 0;
}

static inline void pol_hmap_fini(struct pol_hmap *m)
{
	free(m->keys);
	free(m->vals);
}

/* The value slot for k, claimed (UINT32_MAX: was absent) if absent. */
static inline uint32_t *pol_hmap_slot(struct pol_hmap *m, uint64_t k)
{
	uint64_t i = pol_mix64(k) & m->mask;

	while (m->vals[i] != UINT32_MAX && m->keys[i] != k)
		i = (i + 1) & m->mask;
	m->keys[i] = k;
	return &m->vals[i];
}

#endif
