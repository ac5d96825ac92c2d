/* SPDX-License-Identifier: MIT */
/*
 * GPU program helpers (see gpu_util.h).  Not a library: programs exit on
 * CUDA errors, which is what a test or benchmark should do.
 */
#include <string.h>

#include "kernels/gpu/gpu_util.h"

int gpu_require(FILE *out, int skip_code)
{
	struct cudaDeviceProp prop;
	int n = 0, sms = 0;
	cudaError_t e = cudaGetDeviceCount(&n);

	if (e != cudaSuccess || n < 1) {
		printf("skip: no CUDA device (cudaGetDeviceCount: %s)\n",
		       e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
		exit(skip_code);
	}
	GPU_CK(cudaSetDevice(0));
	GPU_CK(cudaGetDeviceProperties(&prop, 0));
	GPU_CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
	if (out)
		fprintf(out, "device: %s (sm_%d%d, %d SMs, %.1f GiB)\n",
			prop.name, prop.major, prop.minor, sms,
			prop.totalGlobalMem / 1073741824.0);
	return sms;
}

static void mode_usage(FILE *f, const char *prog, const char *const *modes)
{
	fprintf(f, "usage: %s", prog);
	for (int i = 0; modes[i]; i++)
		fprintf(f, "%s%s", i ? " | " : " [", modes[i]);
	fprintf(f, "%s\n", modes[0] ? "]" : "");
}

int gpu_mode_arg(int argc, char **argv, const char *const *modes)
{
	const char *prog = argc > 0 ? argv[0] : "gpu-program";

	if (argc < 2)
		return -1;
	if (argc == 2 && !strcmp(argv[1], "--help")) {
		mode_usage(stdout, prog, modes);
		exit(0);
	}
	for (int i = 0; argc == 2 && modes[i]; i++)
		if (!strcmp(argv[1], modes[i]))
			return i;
	if (argc > 2)
		fprintf(stderr, "%s: one argument at most\n", prog);
	else
		fprintf(stderr, "%s: unknown argument '%s'\n", prog, argv[1]);
	mode_usage(stderr, prog, modes);
	exit(2);
}

static void *up(const void *host, size_t bytes)
{
	void *d = NULL;

	GPU_CK(cudaMalloc(&d, bytes ? bytes : 16));
	if (bytes)
		GPU_CK(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice));
	return d;
}

void gpu_case_upload(const struct msa_case *c, uint32_t num_sms,
		     struct gpu_case *g)
{
	const struct msa_problem *hp = &c->p;
	size_t esz = msa_dtype_bytes(hp->dtype);
	size_t row = (size_t)hp->num_kv_heads * hp->head_dim * esz;
	size_t nq = hp->num_q_tokens, hq = hp->num_q_heads;
	struct msa_segment *segs;

	memset(g, 0, sizeof(*g));
	g->k = up(c->k_arena, c->arena_tokens * row);
	g->v = up(c->v_arena, c->arena_tokens * row);
	g->q = up(c->q, nq * hq * hp->head_dim * esz);
	g->q_pos = up(c->q_pos, nq * sizeof(int32_t));
	g->q_start = up(c->q_start, (hp->num_seqs + 1) * sizeof(uint32_t));
	g->seg_start = up(c->seg_start, (hp->num_seqs + 1) * sizeof(uint32_t));
	segs = calloc(c->num_segs + 1, sizeof(*segs));
	if (!segs) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	for (uint32_t s = 0; s < c->num_segs; s++) {
		segs[s] = c->segs[s];
		segs[s].k = (char *)g->k + c->seg_off[s] * row;
		segs[s].v = (char *)g->v + c->seg_off[s] * row;
	}
	g->segs = up(segs, c->num_segs * sizeof(*segs));
	free(segs);
	GPU_CK(cudaMalloc((void **)&g->o, (nq * hq * hp->head_dim + 4) * 4));
	GPU_CK(cudaMalloc((void **)&g->lse, (nq * hq + 4) * 4));
	g->p = *hp;
	g->p.q = g->q;
	g->p.q_pos = g->q_pos;
	g->p.q_start = g->q_start;
	g->p.seg_start = g->seg_start;
	g->p.segs = g->segs;
	g->p.o = g->o;
	g->p.lse = g->lse;
	GPU_OK(msa_plan_make(&g->p, num_sms, &g->plan));
	g->ws_bytes = g->plan.workspace_bytes;
	if (g->ws_bytes)
		GPU_CK(cudaMalloc(&g->ws, g->ws_bytes));
	gpu_case_poison(g);
}

void gpu_case_poison(struct gpu_case *g)
{
	size_t rows = (size_t)g->p.num_q_tokens * g->p.num_q_heads;

	/* 0xff bytes are a NaN in fp32: an unwritten output cannot pass. */
	GPU_CK(cudaMemset(g->o, 0xff, rows * g->p.head_dim * 4));
	GPU_CK(cudaMemset(g->lse, 0xff, rows * 4));
	if (g->ws)
		GPU_CK(cudaMemset(g->ws, 0xff, g->ws_bytes));
	GPU_CK(cudaDeviceSynchronize());
}

void gpu_case_free(struct gpu_case *g)
{
	void *ptrs[] = { g->k,	       g->v,	g->q, g->q_pos, g->q_start,
			 g->seg_start, g->segs, g->o, g->lse,	g->ws };

	for (size_t i = 0; i < sizeof(ptrs) / sizeof(ptrs[0]); i++)
		if (ptrs[i])
			cudaFree(ptrs[i]);
	memset(g, 0, sizeof(*g));
}

double gpu_time_ms(void (*fn)(void *arg, cudaStream_t st), void *arg,
		   cudaStream_t st, int warm, int iters)
{
	cudaEvent_t a, b;
	float ms = 0;

	for (int i = 0; i < warm; i++)
		fn(arg, st);
	GPU_CK(cudaEventCreate(&a));
	GPU_CK(cudaEventCreate(&b));
	GPU_CK(cudaEventRecord(a, st));
	for (int i = 0; i < iters; i++)
		fn(arg, st);
	GPU_CK(cudaEventRecord(b, st));
	GPU_CK(cudaEventSynchronize(b));
	GPU_CK(cudaGetLastError());
	GPU_CK(cudaEventElapsedTime(&ms, a, b));
	cudaEventDestroy(a);
	cudaEventDestroy(b);
	return ms / iters;
}
