/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the GPU test and benchmark programs and the
 * calibration tool (all linked against libkernels_cuda.a and libcudart):
 * the "is there a GPU" skip, error checks, uploading a random MSA case to
 * the device with NaN-poisoned outputs, and event timing.
 */
#ifndef KVMM_KERNELS_GPU_UTIL_H
#define KVMM_KERNELS_GPU_UTIL_H

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/msa_case.h"

/* Abort the program (exit 1) on a CUDA runtime error. */
#define GPU_CK(call)                                                           \
	do {                                                                   \
		cudaError_t _e = (call);                                       \
		if (_e != cudaSuccess) {                                       \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, \
				#call, cudaGetErrorString(_e));                \
			exit(1);                                               \
		}                                                              \
	} while (0)

/* An msa_* call that must return 0. */
#define GPU_OK(call)                                                         \
	do {                                                                 \
		int _r = (call);                                             \
		if (_r) {                                                    \
			fprintf(stderr, "%s:%d: %s returned %d\n", __FILE__, \
				__LINE__, #call, _r);                        \
			exit(1);                                             \
		}                                                            \
	} while (0)

/*
 * Select device 0, print its name to `out`, return its SM count.  Without
 * a usable GPU, print "skip: REASON" and exit with `skip_code` (77 for
 * tests, 0 or 77 for tools, as each prefers).
 */
int gpu_require(FILE *out, int skip_code);

/*
 * The programs' one optional argument, a mode: its index in `modes` (a
 * NULL-ended list such as { "--quick", NULL }), or -1 without one.
 * --help prints the usage line and exits 0; anything else, or a second
 * argument, prints it to stderr and exits 2, so a misspelt mode never
 * starts the long default run.
 */
int gpu_mode_arg(int argc, char **argv, const char *const *modes);

struct gpu_case {
	struct msa_problem p; /* device pointers */
	void *k, *v, *q;
	int32_t *q_pos;
	uint32_t *q_start, *seg_start;
	struct msa_segment *segs;
	float *o, *lse;
	void *ws;
	size_t ws_bytes;
	struct msa_plan plan;
};

/*
 * Upload c (arenas, queries, index arrays; segment pointers rebased onto
 * the device arenas), plan it for num_sms, allocate the workspace and
 * poison O and LSE with NaN.
 */
void gpu_case_upload(const struct msa_case *c, uint32_t num_sms,
		     struct gpu_case *g);
void gpu_case_poison(struct gpu_case *g);
void gpu_case_free(struct gpu_case *g);

/* Milliseconds per call of fn(arg) on stream st, after `warm` warm-ups. */
double gpu_time_ms(void (*fn)(void *arg, cudaStream_t st), void *arg,
		   cudaStream_t st, int warm, int iters);

#endif

/*
 * Timing harness: one device K and V arena of `cap` tokens filled with
 * random non-zero values, and problems laid over it.  Sequence i of a
 * setup owns ctx tokens at arena tokens [i * ctx, (i + 1) * ctx), cut into
 * nseg segments stored in reversed order (so segments are really
 * scattered) with contiguous positions 0..ctx-1.  Decode queries sit at
 * position ctx; prefill queries are the last q_per_seq context positions.
 */
struct gpu_bench {
	uint32_t hq, hkv, dim, dtype, sms;
	size_t row, cap; /* bytes per token (one of K or V), tokens */
	char *k, *v;
	void *q;
	int32_t *q_pos;
	uint32_t *q_start, *seg_start;
	struct msa_segment *segs;
	float *o, *lse;
	void *ws;
	size_t ws_bytes;
	struct msa_problem p;
	struct msa_plan plan;
};

void gpu_bench_init(struct gpu_bench *b, uint32_t hq, uint32_t hkv,
		    uint32_t dim, uint32_t dtype, size_t cap_tokens,
		    uint32_t sms);
/* Returns 0, or -ENOSPC when batch * ctx exceeds the arena. */
int gpu_bench_setup(struct gpu_bench *b, uint32_t batch, uint32_t ctx,
		    uint32_t nseg, uint32_t q_per_seq, bool decode);
/* Milliseconds per msa_launch of the current setup. */
double gpu_bench_time_ms(struct gpu_bench *b, int warm, int iters);
void gpu_bench_free(struct gpu_bench *b);
/* Milliseconds per cudaMemcpyAsync of `bytes` (kind: cudaMemcpyKind). */
double gpu_copy_ms(void *dst, const void *src, size_t bytes, int kind, int warm,
		   int iters);
