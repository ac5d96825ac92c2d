/* SPDX-License-Identifier: MIT */
/*
 * The MSA kernel's configurations and shared-memory layout, in one place so
 * the host planner (msa_plan.c, plain C) and the CUDA kernel (msa.cu) can
 * never disagree on them.
 *
 * A block has MSA_THREADS threads and serves one (KV split, sequence, KV
 * head, tile of query tokens).  Its rows are (query token, q head of the KV
 * head's group) pairs, at most rows_max = nrg * rpt of them.  KV is read in
 * tiles of MSA_TILE tokens into shared memory.  For P.V every thread owns
 * one 8-element chunk of the head dimension (dc = D / 8 chunks), for rpt
 * rows, over every ntg-th token of the tile:
 *     dc * ntg * nrg == MSA_THREADS.
 * Decode uses ntg > 1 (few rows, tokens spread over threads, summed at the
 * end; the narrow variant, for <= 4 rows, puts every thread on tokens);
 * prefill uses ntg == 1 (many rows, each thread keeps its rows).
 */
#ifndef KVMM_KERNELS_MSA_CONFIG_H
#define KVMM_KERNELS_MSA_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define MSA_HD __host__ __device__
#else
#define MSA_HD
#endif

#define MSA_THREADS 128
#define MSA_TILE 64 /* KV tokens per shared-memory tile */
#define MSA_KV_PAD 8 /* elements of padding per K/V row: no bank conflicts */
#define MSA_MIN_SPLIT 256 /* fewest KV tokens worth a split of their own */
#define MSA_MAX_SPLITS 128

struct msa_kcfg {
	uint32_t d, ntg, nrg, rpt;
};

/*
 * kind is enum msa_kind: MSA_DECODE_NARROW (<= 4 rows: all threads on
 * tokens, few accumulators), MSA_DECODE (<= 16 rows), MSA_PREFILL.
 * Returns 0 when head_dim or kind is unsupported on the GPU.
 */
static inline MSA_HD int msa_kcfg_get(uint32_t head_dim, int kind,
				      struct msa_kcfg *c)
{
	c->d = head_dim;
	c->ntg = 1;
	c->nrg = 1;
	c->rpt = kind == 2 ? 4 : 8;
	if (kind < 0 || kind > 2)
		return 0;
	switch (head_dim) {
	case 64:
		c->ntg = kind == 1 ? 1 : kind == 2 ? 16 : 8;
		c->rpt = kind == 0 ? 8 : 4;
		break;
	case 128:
		c->ntg = kind == 1 ? 1 : kind == 2 ? 8 : 4;
		break;
	case 256:
		c->ntg = kind == 1 ? 1 : kind == 2 ? 4 : 2;
		break;
	default:
		return 0;
	}
	c->nrg = MSA_THREADS / (head_dim / 8) / c->ntg;
	return 1;
}

static inline MSA_HD uint32_t msa_kcfg_rows(const struct msa_kcfg *c)
{
	return c->nrg * c->rpt;
}

/*
 * Shared memory, in this order (every part a multiple of 16 bytes):
 *   q     float [rows][D]        queries, pre-scaled into the log2 domain
 *   kv    K and V tiles [MSA_TILE][D + MSA_KV_PAD] of 2-byte elements,
 *         reused at the end for the cross-thread sum
 *         float [ntg][rows][D] when ntg > 1
 *   s     float [rows][MSA_TILE] scores, then probabilities
 *   row   float m[rows], l[rows], alpha[rows]; int qpos[rows]
 */
static inline MSA_HD size_t msa_smem_q(const struct msa_kcfg *c)
{
	return (size_t)msa_kcfg_rows(c) * c->d * 4;
}

static inline MSA_HD size_t msa_smem_kv_tile(const struct msa_kcfg *c)
{
	return (size_t)MSA_TILE * (c->d + MSA_KV_PAD) * 2;
}

static inline MSA_HD size_t msa_smem_kv(const struct msa_kcfg *c)
{
	size_t kv = 2 * msa_smem_kv_tile(c);
	size_t red = c->ntg > 1 ? (size_t)c->ntg * msa_kcfg_rows(c) * c->d * 4 :
				  0;
	return kv > red ? kv : red;
}

static inline MSA_HD size_t msa_smem_s(const struct msa_kcfg *c)
{
	return (size_t)msa_kcfg_rows(c) * MSA_TILE * 4;
}

static inline MSA_HD size_t msa_smem_bytes(const struct msa_kcfg *c)
{
	return msa_smem_q(c) + msa_smem_kv(c) + msa_smem_s(c) +
	       (size_t)msa_kcfg_rows(c) * 16;
}

#endif
