/* SPDX-License-Identifier: MIT */
/*
 * Multi-Segment Attention (MSA) and KV page copy kernels: the C API.
 *
 * A sequence's KV context is a list of segments.  Each segment is a run of
 * tokens stored in the vAttention layout: per layer one contiguous range,
 * token t of the segment at  base + t * H_kv * D * sizeof(dtype),  head h
 * of that token at  + h * D * sizeof(dtype).  A segment also carries the
 * position of its first token; positions drive causal masking, so a
 * shared prefix mapped from elsewhere, restored holes and a private tail
 * can be attended to in one call without being copied together.
 *
 * Query token i (with explicit position q_pos[i]) attends, for query head
 * hq, to every KV token of its sequence whose position is <= q_pos[i],
 * using KV head hq / (H_q / H_kv) (grouped-query attention).  Inputs are
 * fp16 or bf16 (the CPU references also take fp32); every product and sum
 * is accumulated in fp32 (float64 in the *_f64 references).
 *
 * Outputs: O[i][hq][:] (fp32) and LSE[i][hq] = ln(sum_t exp(scale * q.k_t))
 * over the visible tokens.  ALL LSE VALUES IN THIS API ARE NATURAL LOGS.
 * A row that sees no token (all masked, or no KV at all) has O = 0 and
 * LSE = -inf; merging such a state with others leaves them unchanged.
 *
 * Merging partial states (o_j, lse_j) computed over disjoint parts of a
 * context gives the exact full result:
 *     lse = ln(sum_j exp(lse_j)),   o = sum_j exp(lse_j - lse) * o_j.
 *
 * GPU entry points (msa_launch, msa_merge_launch, kern_page_*_launch) live
 * in build/libkernels_cuda.a (only built when nvcc is present; programs
 * that use it link -lcudart -lstdc++ themselves).  Everything else is
 * plain C in libkernels.a.  Every function returns 0 or a negative errno.
 */
#ifndef KVMM_KERNELS_MSA_H
#define KVMM_KERNELS_MSA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum msa_dtype {
	MSA_F16 = 1, /* IEEE binary16 */
	MSA_BF16 = 2, /* bfloat16 */
	MSA_F32 = 3, /* CPU references only */
};

const char *msa_dtype_string(enum msa_dtype dtype);
/* Bytes per element, 0 for an unknown dtype. */
size_t msa_dtype_bytes(enum msa_dtype dtype);

/*
 * One run of KV tokens of one layer.  k and v point at head 0 of the
 * segment's first token (so a slice [a, b) of a vAttention range is
 * base + a * H_kv * D * sizeof(dtype)).  Token t of the segment has
 * position pos0 + t.  len may be 0.  GPU: k and v must be 16-byte aligned
 * (true for any token offset when D is a multiple of 8 and the range is).
 */
struct msa_segment {
	const void *k;
	const void *v;
	uint32_t len;
	int32_t pos0;
};

/*
 * One attention call over a batch of sequences.  For the GPU every pointer
 * must be device-accessible; for the CPU references every pointer is a host
 * pointer.  Sequence b owns query tokens [q_start[b], q_start[b+1]) and
 * segments [seg_start[b], seg_start[b+1]).
 */
struct msa_problem {
	uint32_t size; /* sizeof(struct msa_problem) */
	uint32_t dtype; /* enum msa_dtype of q, k and v */
	uint32_t num_q_heads; /* H_q */
	uint32_t num_kv_heads; /* H_kv; H_q % H_kv == 0 */
	uint32_t head_dim; /* D; GPU: 64, 128 or 256 */
	uint32_t num_seqs;
	uint32_t num_q_tokens; /* == q_start[num_seqs] */
	/* Host-known upper bounds used to size the launch (GPU only). */
	uint32_t max_q_per_seq; /* >= q_start[b+1] - q_start[b] */
	uint32_t max_kv_per_seq; /* >= total segment length of any sequence */
	float scale; /* multiplies q.k before the softmax, e.g. 1/sqrt(D) */
	const void *q; /* [num_q_tokens][H_q][D] */
	const int32_t *q_pos; /* [num_q_tokens] */
	const uint32_t *q_start; /* [num_seqs + 1], q_start[0] == 0 */
	const uint32_t *seg_start; /* [num_seqs + 1], seg_start[0] == 0 */
	const struct msa_segment *segs;
	float *o; /* [num_q_tokens][H_q][D] */
	float *lse; /* [num_q_tokens][H_q], natural log; may be NULL */
	uint32_t reserved[4]; /* zero */
};

/* Check the host-visible fields (sizes, dtype, head counts, pointers). */
int msa_problem_check(const struct msa_problem *p, bool gpu);

/* ---- CPU references (host pointers) ---- */

/*
 * MSA by the segment decomposition: an exact two-pass softmax per segment,
 * then the merge formula across segments, in fp32.  Writes p->o and p->lse
 * (natural log).
 */
int msa_cpu_f32(const struct msa_problem *p);
/* The same in float64; writes o and lse (natural log), not p->o/p->lse. */
int msa_cpu_f64(const struct msa_problem *p, double *o, double *lse);

/*
 * Dense attention over one contiguous context: k and v are
 * [n_ctx][H_kv][D], kv_pos[t] the position of token t; q is
 * [n_q][H_q][D].  One global two-pass softmax per row (no segments, no
 * merge): the reference MSA is checked against.  lse is natural log and
 * may be NULL.
 */
struct msa_dense {
	uint32_t dtype, num_q_heads, num_kv_heads, head_dim;
	float scale;
	uint32_t n_q, n_ctx;
	const void *q;
	const int32_t *q_pos;
	const void *k, *v;
	const int32_t *kv_pos;
};
int msa_dense_f32(const struct msa_dense *d, float *o, float *lse);
int msa_dense_f64(const struct msa_dense *d, double *o, double *lse);

/*
 * Copy sequence b's segments, in order, into contiguous k_out/v_out
 * ([n][H_kv][D] in p->dtype) and their positions into pos_out.  The
 * buffers must hold max_tokens tokens.  Returns the token count or
 * -ENOSPC.
 */
long msa_gather_context(const struct msa_problem *p, uint32_t b, void *k_out,
			void *v_out, int32_t *pos_out, size_t max_tokens);

/*
 * Merge n_states partial states of `rows` rows: o_in is
 * [n_states][rows][head_dim], lse_in [n_states][rows] (natural log).
 * Writes o_out [rows][head_dim] and lse_out [rows] (natural log; may be
 * NULL).  Rows whose every state has lse = -inf get O = 0, LSE = -inf.
 */
int msa_merge_cpu_f32(const float *o_in, const float *lse_in, uint32_t n_states,
		      uint32_t rows, uint32_t head_dim, float *o_out,
		      float *lse_out);
int msa_merge_cpu_f64(const double *o_in, const double *lse_in,
		      uint32_t n_states, uint32_t rows, uint32_t head_dim,
		      double *o_out, double *lse_out);

/* ---- GPU launch planning (host-only, no CUDA needed) ---- */

enum msa_kind {
	MSA_DECODE = 0, /* few query rows per KV head: split-KV over the SMs */
	MSA_PREFILL = 1, /* many query rows: tiles of query tokens */
	MSA_DECODE_NARROW = 2, /* decode with <= 4 rows (GQA group <= 4) */
};
const char *msa_kind_string(enum msa_kind kind);

struct msa_plan {
	uint32_t kind; /* enum msa_kind */
	uint32_t rows_max; /* query rows (token x q head) one block holds */
	uint32_t q_per_tile; /* query tokens per block */
	uint32_t num_q_tiles; /* grid.z */
	uint32_t num_splits; /* grid.x: KV splits per (sequence, KV head) */
	uint32_t split_len; /* KV tokens per split, a multiple of the tile */
	uint32_t grid_y; /* num_seqs * H_kv */
	uint32_t threads; /* per block */
	uint32_t smem_bytes; /* dynamic shared memory per block */
	size_t workspace_bytes; /* device scratch msa_launch needs */
};

/*
 * Choose the kernel configuration and KV split for a problem on a GPU with
 * num_sms multiprocessors.  Pure host arithmetic (tested on the CPU).
 */
int msa_plan_make(const struct msa_problem *p, uint32_t num_sms,
		  struct msa_plan *plan);

/* ---- GPU entry points (libkernels_cuda.a) ---- */

/*
 * Run MSA on `stream` (a cudaStream_t; NULL = legacy default stream).
 * workspace: device memory of at least plan->workspace_bytes (may be NULL
 * when that is 0).  Writes p->o and p->lse (natural log).  Asynchronous:
 * the return value reports launch errors only.
 */
int msa_launch(const struct msa_problem *p, const struct msa_plan *plan,
	       void *workspace, size_t workspace_bytes, void *stream);

/* msa_plan_make for the current device, then msa_launch. */
int msa_run(const struct msa_problem *p, void *workspace,
	    size_t workspace_bytes, void *stream);

/* The merge above on the GPU (device pointers; natural log in and out). */
int msa_merge_launch(const float *o_in, const float *lse_in, uint32_t n_states,
		     uint32_t rows, uint32_t head_dim, float *o_out,
		     float *lse_out, void *stream);

/* ---- page gather / scatter ---- */

/*
 * Gather: copy the first `bytes` bytes of each of n pages into staging,
 * page i at staging + i * bytes.  Scatter is the inverse.  The pages array
 * itself is in host memory (its entries are device addresses for the GPU
 * versions), so no metadata upload is needed.  GPU: 16-byte alignment of
 * every address and of bytes gives the fast path; anything works.
 */
int kern_page_gather_cpu(void *staging, const void *const *pages, uint32_t n,
			 size_t bytes);
int kern_page_scatter_cpu(void *const *pages, const void *staging, uint32_t n,
			  size_t bytes);
int kern_page_gather_launch(void *staging, const void *const *pages, uint32_t n,
			    size_t bytes, void *stream);
int kern_page_scatter_launch(void *const *pages, const void *staging,
			     uint32_t n, size_t bytes, void *stream);

/* ---- fp16 / bf16 conversion (round to nearest even, NaN kept NaN) ---- */

float kern_bf16_to_float(uint16_t h);
uint16_t kern_bf16_from_float(float f);
float kern_f16_to_float(uint16_t h);
uint16_t kern_f16_from_float(float f);
/* Element i of an array of dtype as float / store a float as dtype. */
float kern_load(enum msa_dtype dtype, const void *base, size_t i);
void kern_store(enum msa_dtype dtype, void *base, size_t i, float f);

#ifdef __cplusplus
}
#endif

#endif
