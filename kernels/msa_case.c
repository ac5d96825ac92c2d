/* SPDX-License-Identifier: MIT */
/*
 * Random MSA cases (see msa_case.h).  Segments of all sequences are placed
 * at shuffled, gapped offsets of one arena so no test can pass by
 * accidentally reading a contiguous context.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/msa_case.h"

double msa_rand01(uint64_t *s)
{
	uint64_t x = *s ? *s : 0x9e3779b97f4a7c15ull;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return (double)((x * 0x2545f4914f6cdd1dull) >> 11) / 9007199254740992.0;
}

static uint32_t rand_upto(uint64_t *s, uint32_t max) /* 0..max */
{
	return (uint32_t)(msa_rand01(s) * (max + 1.0));
}

/* A value in +-[0.05, 1] times amp: never zero, both signs. */
static float rand_val(uint64_t *s, float amp)
{
	float v = (float)(0.05 + 0.95 * msa_rand01(s));

	return (msa_rand01(s) < 0.5 ? -v : v) * amp;
}

static void fill(uint64_t *s, enum msa_dtype dt, void *base, size_t n,
		 float amp)
{
	for (size_t i = 0; i < n; i++)
		kern_store(dt, base, i, rand_val(s, amp));
}

void msa_case_free(struct msa_case *c)
{
	free(c->seg_off);
	free(c->k_arena);
	free(c->v_arena);
	free(c->q);
	free(c->q_pos);
	free(c->q_start);
	free(c->seg_start);
	free(c->segs);
	free(c->o);
	free(c->lse);
	memset(c, 0, sizeof(*c));
}

size_t msa_case_kv_len(const struct msa_case *c, uint32_t b)
{
	size_t n = 0;

	for (uint32_t s = c->seg_start[b]; s < c->seg_start[b + 1]; s++)
		n += c->segs[s].len;
	return n;
}

int msa_case_make(const struct msa_case_spec *sp, struct msa_case *c)
{
	uint64_t rs = sp->seed * 2654435761u + 12345;
	uint32_t nseq = sp->num_seqs, hq = sp->num_q_heads;
	size_t esz = msa_dtype_bytes(sp->dtype), row, nq = 0, ns = 0, at = 0;
	size_t max_kv = 0, max_q = 0;
	uint32_t *order = NULL;

	memset(c, 0, sizeof(*c));
	if (!esz || !hq || !sp->num_kv_heads || hq % sp->num_kv_heads ||
	    !sp->head_dim || !sp->q_per_seq)
		return -EINVAL;
	row = (size_t)sp->num_kv_heads * sp->head_dim;
	c->q_start = calloc(nseq + 1, sizeof(uint32_t));
	c->seg_start = calloc(nseq + 1, sizeof(uint32_t));
	if (!c->q_start || !c->seg_start)
		goto err_free;
	/* Counts first, so every array is allocated once. */
	for (uint32_t b = 0; b < nseq; b++) {
		uint32_t q = sp->exact_shape ?
				     sp->q_per_seq :
				     1 + rand_upto(&rs, sp->q_per_seq - 1);
		uint32_t g = sp->exact_shape ? sp->segs_per_seq :
					       rand_upto(&rs, sp->segs_per_seq);

		nq += q;
		ns += g;
		c->q_start[b + 1] = (uint32_t)nq;
		c->seg_start[b + 1] = (uint32_t)ns;
	}
	c->num_segs = (uint32_t)ns;
	c->segs = calloc(ns + 1, sizeof(*c->segs));
	c->seg_off = calloc(ns + 1, sizeof(size_t));
	order = calloc(ns + 1, sizeof(uint32_t));
	c->q = calloc(nq * hq * sp->head_dim + 1, esz);
	c->q_pos = calloc(nq + 1, sizeof(int32_t));
	c->o = calloc(nq * hq * sp->head_dim + 1, sizeof(float));
	c->lse = calloc(nq * hq + 1, sizeof(float));
	if (!c->segs || !c->seg_off || !order || !c->q || !c->q_pos || !c->o ||
	    !c->lse)
		goto err_free;
	/* Segment lengths; arena offsets in shuffled order with gaps. */
	for (size_t s = 0; s < ns; s++) {
		c->segs[s].len = sp->exact_shape ? sp->seg_len :
						   rand_upto(&rs, sp->seg_len);
		order[s] = (uint32_t)s;
	}
	for (size_t s = ns; s > 1; s--) {
		uint32_t j = rand_upto(&rs, (uint32_t)s - 1), t = order[s - 1];

		order[s - 1] = order[j];
		order[j] = t;
	}
	for (size_t s = 0; s < ns; s++) {
		c->seg_off[order[s]] = at;
		at += c->segs[order[s]].len +
		      (sp->exact_shape ? 0 : rand_upto(&rs, 3));
	}
	c->arena_tokens = at ? at : 1;
	c->k_arena = malloc(c->arena_tokens * row * esz);
	c->v_arena = malloc(c->arena_tokens * row * esz);
	if (!c->k_arena || !c->v_arena)
		goto err_free;
	fill(&rs, sp->dtype, c->k_arena, c->arena_tokens * row, 1.0f);
	fill(&rs, sp->dtype, c->v_arena, c->arena_tokens * row, 1.0f);
	fill(&rs, sp->dtype, c->q, nq * hq * sp->head_dim, 2.0f);

	for (uint32_t b = 0; b < nseq; b++) {
		int32_t pos = (int32_t)rand_upto(&rs, 5), first = pos;
		uint32_t q0 = c->q_start[b], q1 = c->q_start[b + 1];

		for (uint32_t s = c->seg_start[b]; s < c->seg_start[b + 1];
		     s++) {
			struct msa_segment *sg = &c->segs[s];

			sg->k = (char *)c->k_arena + c->seg_off[s] * row * esz;
			sg->v = (char *)c->v_arena + c->seg_off[s] * row * esz;
			sg->pos0 = pos;
			/* Sometimes a hole: positions not present. */
			pos += (int32_t)sg->len +
			       (sp->exact_shape ? 0 :
						  (int32_t)rand_upto(&rs, 2));
		}
		for (uint32_t i = q0; i < q1; i++) {
			if (sp->random_pos)
				c->q_pos[i] =
					first - 3 +
					(int32_t)rand_upto(
						&rs,
						(uint32_t)(pos - first) + 6);
			else if (sp->decode)
				c->q_pos[i] = pos + (int32_t)(i - q0);
			else /* prefill: the last q1-q0 positions, causal */
				c->q_pos[i] = pos - (int32_t)(q1 - i);
		}
		if (msa_case_kv_len(c, b) > max_kv)
			max_kv = msa_case_kv_len(c, b);
		if (q1 - q0 > max_q)
			max_q = q1 - q0;
	}
	free(order);

	c->p = (struct msa_problem){
		.size = sizeof(struct msa_problem),
		.dtype = sp->dtype,
		.num_q_heads = hq,
		.num_kv_heads = sp->num_kv_heads,
		.head_dim = sp->head_dim,
		.num_seqs = nseq,
		.num_q_tokens = (uint32_t)nq,
		.max_q_per_seq = (uint32_t)max_q,
		.max_kv_per_seq = (uint32_t)max_kv,
		.scale = 1.0f / sqrtf((float)sp->head_dim),
		.q = c->q,
		.q_pos = c->q_pos,
		.q_start = c->q_start,
		.seg_start = c->seg_start,
		.segs = c->segs,
		.o = c->o,
		.lse = c->lse,
	};
	return 0;

err_free:
	free(order);
	msa_case_free(c);
	return -ENOMEM;
}
