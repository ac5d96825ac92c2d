/* SPDX-License-Identifier: MIT */
/*
 * CPU references for MSA, in fp32 and float64.
 *
 * msa_cpu_* follows the segment decomposition literally: each segment gets
 * an exact two-pass softmax (max, then sum), the per-segment states are
 * folded with the merge formula.  msa_dense_* is the independent check:
 * one global softmax over a contiguous context with explicit positions.
 * The two agree to rounding exactly when segmenting and merging are exact,
 * which is what the tests assert.  All LSE values are natural logs.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/msa.h"

#define REAL float
#define SFX f32
#define EXP expf
#define LOG logf
#include "kernels/msa_ref_impl.h"
#undef REAL
#undef SFX
#undef EXP
#undef LOG

#define REAL double
#define SFX f64
#define EXP exp
#define LOG log
#include "kernels/msa_ref_impl.h"
#undef REAL
#undef SFX
#undef EXP
#undef LOG

int msa_cpu_f32(const struct msa_problem *p)
{
	if (!p)
		return -EINVAL;
	return msa_cpuf32(p, p->o, p->lse, p->lse != NULL);
}

int msa_cpu_f64(const struct msa_problem *p, double *o, double *lse)
{
	if (!p || (p->num_q_tokens && !o))
		return -EINVAL;
	return msa_cpuf64(p, o, lse, lse != NULL);
}

int msa_dense_f32(const struct msa_dense *d, float *o, float *lse)
{
	return d ? msa_densef32(d, o, lse) : -EINVAL;
}

int msa_dense_f64(const struct msa_dense *d, double *o, double *lse)
{
	return d ? msa_densef64(d, o, lse) : -EINVAL;
}

long msa_gather_context(const struct msa_problem *p, uint32_t b, void *k_out,
			void *v_out, int32_t *pos_out, size_t max_tokens)
{
	size_t row = (size_t)p->num_kv_heads * p->head_dim *
		     msa_dtype_bytes(p->dtype);
	size_t n = 0;

	if (msa_problem_check(p, false) || b >= p->num_seqs)
		return -EINVAL;
	for (uint32_t s = p->seg_start[b]; s < p->seg_start[b + 1]; s++) {
		const struct msa_segment *sg = &p->segs[s];

		if (n + sg->len > max_tokens)
			return -ENOSPC;
		if (!sg->len)
			continue;
		memcpy((char *)k_out + n * row, sg->k, sg->len * row);
		memcpy((char *)v_out + n * row, sg->v, sg->len * row);
		for (uint32_t t = 0; t < sg->len; t++)
			pos_out[n + t] = sg->pos0 + (int32_t)t;
		n += sg->len;
	}
	return (long)n;
}
