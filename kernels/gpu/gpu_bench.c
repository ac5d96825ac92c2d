/* SPDX-License-Identifier: MIT */
/*
 * The timing harness shared by gpu-bench-msa and kvmm-calibrate (see
 * gpu_util.h).  Inputs are random, generated on the host once in a 16 MiB
 * block and tiled over the device arena: fast to set up for gigabytes of
 * KV, and never zeros (zeros could let a kernel skip work).
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "kernels/gpu/gpu_util.h"

#define FILL_CHUNK (16u << 20)

static void fill_random(char *dev, size_t bytes, uint32_t dtype, uint64_t seed)
{
	size_t n = FILL_CHUNK / 2;
	uint16_t *h = malloc(FILL_CHUNK);

	if (!h) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	for (size_t i = 0; i < n; i++) {
		float v = (float)(0.05 + 0.95 * msa_rand01(&seed));

		kern_store(dtype, h, i, msa_rand01(&seed) < 0.5 ? -v : v);
	}
	for (size_t at = 0; at < bytes; at += FILL_CHUNK)
		GPU_CK(cudaMemcpy(dev + at, h,
				  bytes - at < FILL_CHUNK ? bytes - at :
							    FILL_CHUNK,
				  cudaMemcpyHostToDevice));
	free(h);
}

void gpu_bench_init(struct gpu_bench *b, uint32_t hq, uint32_t hkv,
		    uint32_t dim, uint32_t dtype, size_t cap_tokens,
		    uint32_t sms)
{
	memset(b, 0, sizeof(*b));
	b->hq = hq;
	b->hkv = hkv;
	b->dim = dim;
	b->dtype = dtype;
	b->sms = sms;
	b->row = (size_t)hkv * dim * msa_dtype_bytes(dtype);
	b->cap = cap_tokens;
	GPU_CK(cudaMalloc((void **)&b->k, b->cap * b->row));
	GPU_CK(cudaMalloc((void **)&b->v, b->cap * b->row));
	fill_random(b->k, b->cap * b->row, dtype, 1);
	fill_random(b->v, b->cap * b->row, dtype, 2);
}

static void release_setup(struct gpu_bench *b)
{
	void *ptrs[] = { b->q,	  b->q_pos, b->q_start, b->seg_start,
			 b->segs, b->o,	    b->lse,	b->ws };

	for (size_t i = 0; i < sizeof(ptrs) / sizeof(ptrs[0]); i++)
		if (ptrs[i])
			cudaFree(ptrs[i]);
	b->q = NULL;
	b->q_pos = NULL;
	b->q_start = NULL;
	b->seg_start = NULL;
	b->segs = NULL;
	b->o = NULL;
	b->lse = NULL;
	b->ws = NULL;
	b->ws_bytes = 0;
}

static void *upload(const void *h, size_t bytes)
{
	void *d;

	GPU_CK(cudaMalloc(&d, bytes ? bytes : 16));
	if (bytes)
		GPU_CK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
	return d;
}

int gpu_bench_setup(struct gpu_bench *b, uint32_t batch, uint32_t ctx,
		    uint32_t nseg, uint32_t q_per_seq, bool decode)
{
	size_t nq = (size_t)batch * q_per_seq, ns = (size_t)batch * nseg;
	size_t qn = nq * b->hq * b->dim;
	uint32_t *qs, *ss;
	int32_t *qp;
	struct msa_segment *sg;
	uint16_t *q;
	uint64_t seed = 42;

	/* before the buffers, which a refused shape would leak: a caller
	 * may skip one and go on (kvmm-calibrate's tables would) */
	if ((size_t)batch * ctx > b->cap || !nseg || nseg > ctx ||
	    (!decode && q_per_seq > ctx))
		return -ENOSPC;
	qs = calloc(batch + 1, 4);
	ss = calloc(batch + 1, 4);
	qp = calloc(nq + 1, 4);
	sg = calloc(ns + 1, sizeof(*sg));
	q = calloc(qn + 1, 2);
	if (!qs || !ss || !qp || !sg || !q) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	release_setup(b);
	for (size_t i = 0; i < qn; i++) {
		float v = (float)(0.05 + 0.95 * msa_rand01(&seed));

		kern_store(b->dtype, q, i,
			   msa_rand01(&seed) < 0.5 ? -2 * v : 2 * v);
	}
	for (uint32_t s = 0; s < batch; s++) {
		size_t base = (size_t)s * ctx;
		uint32_t len = ctx / nseg, at = 0;

		qs[s + 1] = (uint32_t)((s + 1) * q_per_seq);
		ss[s + 1] = (uint32_t)((s + 1) * nseg);
		for (uint32_t j = 0; j < nseg; j++) {
			struct msa_segment *x = &sg[(size_t)s * nseg + j];
			uint32_t l = j + 1 == nseg ? ctx - at : len;
			/* Segment j is stored where the reversed order puts it. */
			size_t off = base + (ctx - at - l);

			x->k = b->k + off * b->row;
			x->v = b->v + off * b->row;
			x->len = l;
			x->pos0 = (int32_t)at;
			at += l;
		}
		for (uint32_t i = 0; i < q_per_seq; i++)
			qp[(size_t)s * q_per_seq + i] =
				decode ? (int32_t)(ctx + i) :
					 (int32_t)(ctx - q_per_seq + i);
	}
	b->q = upload(q, qn * 2);
	b->q_pos = upload(qp, nq * 4);
	b->q_start = upload(qs, (batch + 1) * 4);
	b->seg_start = upload(ss, (batch + 1) * 4);
	b->segs = upload(sg, ns * sizeof(*sg));
	GPU_CK(cudaMalloc((void **)&b->o, nq * b->hq * b->dim * 4 + 16));
	GPU_CK(cudaMalloc((void **)&b->lse, nq * b->hq * 4 + 16));
	free(qs);
	free(ss);
	free(qp);
	free(sg);
	free(q);
	b->p = (struct msa_problem){ .size = sizeof(struct msa_problem),
				     .dtype = b->dtype,
				     .num_q_heads = b->hq,
				     .num_kv_heads = b->hkv,
				     .head_dim = b->dim,
				     .num_seqs = batch,
				     .num_q_tokens = (uint32_t)nq,
				     .max_q_per_seq = q_per_seq,
				     .max_kv_per_seq = ctx,
				     .scale = 1.0f / sqrtf((float)b->dim),
				     .q = b->q,
				     .q_pos = b->q_pos,
				     .q_start = b->q_start,
				     .seg_start = b->seg_start,
				     .segs = b->segs,
				     .o = b->o,
				     .lse = b->lse };
	GPU_OK(msa_plan_make(&b->p, b->sms, &b->plan));
	b->ws_bytes = b->plan.workspace_bytes;
	if (b->ws_bytes)
		GPU_CK(cudaMalloc(&b->ws, b->ws_bytes));
	return 0;
}

static void launch_fn(void *arg, cudaStream_t st)
{
	struct gpu_bench *b = arg;

	GPU_OK(msa_launch(&b->p, &b->plan, b->ws, b->ws_bytes, st));
}

double gpu_bench_time_ms(struct gpu_bench *b, int warm, int iters)
{
	return gpu_time_ms(launch_fn, b, NULL, warm, iters);
}

void gpu_bench_free(struct gpu_bench *b)
{
	release_setup(b);
	cudaFree(b->k);
	cudaFree(b->v);
	memset(b, 0, sizeof(*b));
}

struct copy_arg {
	void *dst;
	const void *src;
	size_t bytes;
	int kind;
};

static void copy_fn(void *arg, cudaStream_t st)
{
	struct copy_arg *c = arg;

	GPU_CK(cudaMemcpyAsync(c->dst, c->src, c->bytes,
			       (enum cudaMemcpyKind)c->kind, st));
}

double gpu_copy_ms(void *dst, const void *src, size_t bytes, int kind, int warm,
		   int iters)
{
	struct copy_arg c = { dst, src, bytes, kind };

	return gpu_time_ms(copy_fn, &c, NULL, warm, iters);
}
