/* SPDX-License-Identifier: MIT */
/*
 * Random MSA test cases: shapes, segments laid out in one K and one V arena
 * like slices of vAttention ranges, random positions (including holes and
 * query rows that see nothing), random non-zero values.  Shared by the CPU
 * tests, the GPU tests, the GPU benchmark and the calibration tool so all
 * of them exercise the same layouts.
 */
#ifndef KVMM_KERNELS_MSA_CASE_H
#define KVMM_KERNELS_MSA_CASE_H

#include "kernels/msa.h"

struct msa_case_spec {
	uint32_t dtype, num_q_heads, num_kv_heads, head_dim;
	uint32_t num_seqs;
	uint32_t q_per_seq; /* max query tokens per sequence (>= 1) */
	uint32_t segs_per_seq; /* max segments per sequence */
	uint32_t seg_len; /* max tokens per segment */
	bool exact_shape; /* use the maxima above, not random sizes <= them */
	bool random_pos; /* query positions anywhere (fully masked rows) */
	bool decode; /* queries after the whole context (sees everything) */
	uint64_t seed;
};

struct msa_case {
	struct msa_problem p; /* host pointers into the buffers below */
	uint32_t num_segs;
	size_t arena_tokens; /* tokens in each of the K and V arenas */
	size_t *seg_off; /* [num_segs] token offset of segment s in the arena */
	void *k_arena, *v_arena; /* [arena_tokens][H_kv][D] */
	void *q;
	int32_t *q_pos;
	uint32_t *q_start, *seg_start;
	struct msa_segment *segs;
	float *o, *lse;
};

int msa_case_make(const struct msa_case_spec *spec, struct msa_case *c);
void msa_case_free(struct msa_case *c);
/* Total tokens of sequence b's segments. */
size_t msa_case_kv_len(const struct msa_case *c, uint32_t b);
/* xorshift64* for reproducible data; returns a double in [0, 1). */
double msa_rand01(uint64_t *state);

#endif
