/* SPDX-License-Identifier: MIT */
/*
 * GPU launch planning (host arithmetic only): the KV splits cover every
 * token exactly once, in tiles; query tiles cover every query row; decode
 * shapes get enough blocks for the GPU and prefill shapes the prefill
 * configuration; shared memory fits an H100/H200 (227 KiB) and, except
 * D = 256 prefill, an A100 (163 KiB); the workspace matches the split
 * count; unsupported shapes are refused with -ENOTSUP / -EINVAL / -E2BIG.
 */
#include <errno.h>

#include "kernels/msa.h"
#include "kernels/msa_config.h"
#include "tests/lib/test.h"

static struct msa_problem shape(uint32_t hq, uint32_t hkv, uint32_t d,
				uint32_t seqs, uint32_t q, uint32_t kv)
{
	return (struct msa_problem){ .size = sizeof(struct msa_problem),
				     .dtype = MSA_BF16,
				     .num_q_heads = hq,
				     .num_kv_heads = hkv,
				     .head_dim = d,
				     .num_seqs = seqs,
				     .num_q_tokens = seqs * q,
				     .max_q_per_seq = q,
				     .max_kv_per_seq = kv,
				     .scale = 0.1f };
}

static void check_one(uint32_t d, uint32_t kv, uint32_t q, uint32_t grp,
		      uint32_t seqs)
{
	struct msa_problem p = shape(8 * grp, 8, d, seqs, q, kv);
	struct msa_plan pl;
	size_t ws;

	t_ok(msa_plan_make(&p, 132, &pl));
	/* The splits tile [0, kv) exactly. */
	t_assert(pl.split_len % MSA_TILE == 0);
	t_assert((uint64_t)pl.num_splits * pl.split_len >= kv);
	t_assert((uint64_t)(pl.num_splits - 1) * pl.split_len < (kv ? kv : 1));
	t_assert(pl.num_splits >= 1 && pl.num_splits <= MSA_MAX_SPLITS);
	/* The query tiles cover every row. */
	t_assert(pl.q_per_tile * grp <= pl.rows_max);
	t_assert((uint64_t)pl.num_q_tiles * pl.q_per_tile >= q);
	t_assert_eq(pl.grid_y, seqs * 8);
	t_assert(pl.smem_bytes <= 227 * 1024);
	if (!(d == 256 && pl.kind == MSA_PREFILL))
		t_assert(pl.smem_bytes <= 163 * 1024);
	t_assert_eq(pl.kind, q * grp <= 4  ? MSA_DECODE_NARROW :
			     q * grp <= 16 ? MSA_DECODE :
					     MSA_PREFILL);
	ws = (size_t)pl.num_splits * seqs * q * 8 * grp * (d + 1) * 4;
	t_assert_eq(pl.workspace_bytes, pl.num_splits > 1 ? ws : 0);
}

int main(void)
{
	static const uint32_t dims[] = { 64, 128, 256 };
	static const uint32_t kvs[] = { 0,    1,    63,	   64,	  65,
					1000, 4096, 32768, 131072 };
	static const uint32_t qs[] = { 1, 2, 4, 7, 100, 2048 };
	static const uint32_t groups[] = { 1, 4, 8, 16 };
	struct msa_problem p;
	struct msa_plan pl;

	for (uint32_t a = 0; a < 3; a++)
		for (uint32_t b = 0; b < 9; b++)
			for (uint32_t c = 0; c < 6; c++)
				for (uint32_t g = 0; g < 4; g++)
					for (uint32_t n = 1; n <= 64; n *= 8)
						check_one(dims[a], kvs[b],
							  qs[c], groups[g], n);
	/* One long decode sequence is spread over the SMs. */
	p = shape(32, 8, 128, 1, 1, 32768);
	t_ok(msa_plan_make(&p, 132, &pl));
	t_assert(pl.kind == MSA_DECODE_NARROW && pl.num_splits >= 32);
	t_assert(pl.num_splits * pl.grid_y >= 4 * 132 / 2);
	/* Short contexts are not split below MSA_MIN_SPLIT tokens. */
	p = shape(32, 8, 128, 1, 1, 300);
	t_ok(msa_plan_make(&p, 132, &pl));
	t_assert_eq(pl.num_splits, 2);
	/* A big batch needs no split. */
	p = shape(32, 8, 128, 256, 1, 4096);
	t_ok(msa_plan_make(&p, 132, &pl));
	t_assert_eq(pl.num_splits, 1);
	t_assert_eq(pl.workspace_bytes, 0);
	/* Within a tile of 2^32 tokens one split would be 2^32 long, more
	 * than split_len holds: still a plan that covers every token (not a
	 * split_len of 0 and a division by it), with one split or many. */
	for (uint32_t sms = 1; sms <= 132; sms += 131) {
		p = shape(32, 8, 128, 64, 1, 0xffffffc1u);
		t_ok(msa_plan_make(&p, sms, &pl));
		t_assert(pl.split_len % MSA_TILE == 0 && pl.split_len > 0);
		t_assert((uint64_t)pl.num_splits * pl.split_len >= 0xffffffc1u);
		t_assert((uint64_t)(pl.num_splits - 1) * pl.split_len <
			 0xffffffc1u);
		p = shape(32, 8, 128, 1, 1, UINT32_MAX);
		t_ok(msa_plan_make(&p, sms, &pl));
		t_assert((uint64_t)pl.num_splits * pl.split_len >= UINT32_MAX);
		t_assert(pl.num_splits <= MSA_MAX_SPLITS);
	}

	p = shape(32, 8, 96, 1, 1, 10);
	t_assert_eq(msa_plan_make(&p, 132, &pl), -ENOTSUP);
	p = shape(30, 8, 128, 1, 1, 10);
	t_assert_eq(msa_plan_make(&p, 132, &pl), -EINVAL);
	p = shape(128, 1, 128, 1, 1, 10); /* group 128 > 64 rows */
	t_assert_eq(msa_plan_make(&p, 132, &pl), -ENOTSUP);
	p = shape(8, 8, 128, 10000, 1, 10);
	t_assert_eq(msa_plan_make(&p, 132, &pl), -E2BIG);
	p = shape(8, 8, 128, 1, 1, 10);
	p.dtype = MSA_F32;
	t_assert_eq(msa_plan_make(&p, 132, &pl), -ENOTSUP);
	t_assert_eq(msa_plan_make(&p, 0, &pl), -ENOTSUP);
	p.dtype = MSA_F16;
	t_assert_eq(msa_plan_make(&p, 0, &pl), -EINVAL);
	p.reserved[1] = 1;
	t_assert_eq(msa_plan_make(&p, 132, &pl), -EINVAL);
	printf("plans cover every row and token\n");
	return 0;
}
