/* SPDX-License-Identifier: MIT */
/*
 * Argument checks and GPU launch planning for MSA.  Plain host arithmetic,
 * linked into libkernels.a so the CPU tests cover it; the CUDA launcher
 * (msa.cu) only executes the plan.
 *
 * Split-KV (flash-decoding): a decode step has one query token per
 * sequence, so (sequence, KV head) pairs alone rarely fill the GPU.  The
 * concatenated KV of each sequence (all its segments, in order) is cut into
 * num_splits ranges of split_len tokens; each block attends to one range
 * and writes a partial (O, LSE) state; msa_merge combines them.  Segments
 * are walked inside the block, so more segments cost only the partial
 * tiles at their boundaries, not more launches.
 */
#include <errno.h>

#include "kernels/msa.h"
#include "kernels/msa_config.h"

const char *msa_dtype_string(enum msa_dtype dtype)
{
	switch (dtype) {
	case MSA_F16:
		return "f16";
	case MSA_BF16:
		return "bf16";
	case MSA_F32:
		return "f32";
	}
	return "unknown";
}

size_t msa_dtype_bytes(enum msa_dtype dtype)
{
	switch (dtype) {
	case MSA_F16:
	case MSA_BF16:
		return 2;
	case MSA_F32:
		return 4;
	}
	return 0;
}

const char *msa_kind_string(enum msa_kind kind)
{
	switch (kind) {
	case MSA_DECODE:
		return "decode";
	case MSA_PREFILL:
		return "prefill";
	case MSA_DECODE_NARROW:
		return "decode-narrow";
	}
	return "unknown";
}

/* Sizes, dtype and head counts: what planning needs (no pointers yet). */
static int check_shape(const struct msa_problem *p, bool gpu)
{
	if (!p || p->size < sizeof(*p))
		return -EINVAL;
	if (!msa_dtype_bytes(p->dtype) || (gpu && p->dtype == MSA_F32))
		return gpu && p->dtype == MSA_F32 ? -ENOTSUP : -EINVAL;
	if (!p->num_q_heads || !p->num_kv_heads || !p->head_dim ||
	    p->num_q_heads % p->num_kv_heads)
		return -EINVAL;
	if (gpu && p->head_dim != 64 && p->head_dim != 128 &&
	    p->head_dim != 256)
		return -ENOTSUP;
	if (p->reserved[0] | p->reserved[1] | p->reserved[2] | p->reserved[3])
		return -EINVAL;
	return 0;
}

int msa_problem_check(const struct msa_problem *p, bool gpu)
{
	int err = check_shape(p, gpu);

	if (err)
		return err;
	if (!p->q_start || !p->seg_start || (p->num_seqs && !p->segs))
		return -EINVAL;
	if (p->num_q_tokens && (!p->q || !p->q_pos || !p->o))
		return -EINVAL;
	/* Host copies of the index arrays can be checked; device ones not. */
	if (!gpu) {
		if (p->q_start[0] || p->seg_start[0] ||
		    p->q_start[p->num_seqs] != p->num_q_tokens)
			return -EINVAL;
		for (uint32_t b = 0; b < p->num_seqs; b++)
			if (p->q_start[b + 1] < p->q_start[b] ||
			    p->seg_start[b + 1] < p->seg_start[b])
				return -EINVAL;
	}
	return 0;
}

static uint32_t div_up(uint64_t a, uint64_t b)
{
	return (uint32_t)((a + b - 1) / b);
}

int msa_plan_make(const struct msa_problem *p, uint32_t num_sms,
		  struct msa_plan *plan)
{
	struct msa_kcfg c;
	uint32_t group, rows, want, splits;
	uint64_t base, need, split_len;
	int err = check_shape(p, true);

	if (err)
		return err;
	if (!plan || !num_sms)
		return -EINVAL;
	group = p->num_q_heads / p->num_kv_heads;

	/*
	 * The narrowest configuration whose block holds every row of a
	 * sequence: decode-narrow (4 rows), decode (16), else prefill tiles.
	 */
	need = (uint64_t)(p->max_q_per_seq ? p->max_q_per_seq : 1) * group;
	plan->kind = MSA_DECODE_NARROW;
	if (!msa_kcfg_get(p->head_dim, MSA_DECODE_NARROW, &c))
		return -ENOTSUP;
	if (need > msa_kcfg_rows(&c)) {
		plan->kind = MSA_DECODE;
		msa_kcfg_get(p->head_dim, MSA_DECODE, &c);
	}
	if (need > msa_kcfg_rows(&c)) {
		plan->kind = MSA_PREFILL;
		msa_kcfg_get(p->head_dim, MSA_PREFILL, &c);
	}
	rows = msa_kcfg_rows(&c);
	if (group > rows)
		return -ENOTSUP;
	plan->rows_max = rows;
	plan->q_per_tile = rows / group;
	plan->num_q_tiles = p->max_q_per_seq ?
				    div_up(p->max_q_per_seq, plan->q_per_tile) :
				    1;
	plan->grid_y = p->num_seqs * p->num_kv_heads;
	if ((uint64_t)p->num_seqs * p->num_kv_heads > 65535 ||
	    plan->num_q_tiles > 65535)
		return -E2BIG;
	plan->threads = MSA_THREADS;
	plan->smem_bytes = (uint32_t)msa_smem_bytes(&c);

	/*
	 * Aim for about four blocks per SM in total, but never split below
	 * MSA_MIN_SPLIT tokens (a split must amortise its partial state).
	 */
	base = (uint64_t)plan->grid_y * plan->num_q_tiles;
	want = base ? div_up(4ull * num_sms, base) : 1;
	splits = div_up(p->max_kv_per_seq ? p->max_kv_per_seq : 1,
			MSA_MIN_SPLIT);
	if (want > splits)
		want = splits;
	if (want > MSA_MAX_SPLITS)
		want = MSA_MAX_SPLITS;
	if (want < 1)
		want = 1;
	/*
	 * Whole tiles, counted in 64 bits: one split of a max_kv_per_seq
	 * within a tile of 2^32 rounds up to 2^32, which split_len cannot
	 * hold (it wrapped to 0 and num_splits divided by it).  The longest
	 * whole-tile split that fits leaves a second one, and the last split
	 * takes whatever is left (msa.cu), so every token is still covered.
	 */
	split_len =
		(uint64_t)div_up(
			div_up(p->max_kv_per_seq ? p->max_kv_per_seq : 1, want),
			MSA_TILE) *
		MSA_TILE;
	if (split_len > UINT32_MAX)
		split_len = UINT32_MAX / MSA_TILE * MSA_TILE;
	plan->split_len = (uint32_t)split_len;
	plan->num_splits = div_up(p->max_kv_per_seq ? p->max_kv_per_seq : 1,
				  plan->split_len);
	plan->workspace_bytes = 0;
	if (plan->num_splits > 1)
		plan->workspace_bytes = (size_t)plan->num_splits *
					p->num_q_tokens * p->num_q_heads *
					(p->head_dim + 1) * sizeof(float);
	return 0;
}
