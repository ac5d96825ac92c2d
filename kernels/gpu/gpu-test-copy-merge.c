/* SPDX-License-Identifier: MIT */
/*
 * GPU page gather/scatter and merge: gathering pages scattered over device
 * memory into a staging buffer and scattering it to other pages
 * reproduces every byte (aligned fast path, unaligned byte path, more
 * pages than one launch carries, partial tails); the GPU merge of random
 * partial states (some empty: LSE = -inf) equals the CPU merge.  Exits 77
 * without a GPU.
 */
#include <math.h>
#include <string.h>

#include "kernels/gpu/gpu_util.h"

static int copy_case(uint32_t n, size_t page, size_t bytes, size_t skew,
		     uint64_t seed)
{
	size_t arena = (size_t)n * (page + skew) + 64;
	unsigned char *h = malloc(arena), *back = malloc(arena);
	unsigned char *stage_h = malloc((size_t)n * bytes);
	char *src, *dst, *stage;
	const void **pin = malloc(n * sizeof(void *));
	void **pout = malloc(n * sizeof(void *));
	int bad = 0;

	GPU_CK(cudaMalloc((void **)&src, arena));
	GPU_CK(cudaMalloc((void **)&dst, arena));
	GPU_CK(cudaMalloc((void **)&stage, (size_t)n * bytes + 16));
	for (size_t i = 0; i < arena; i++)
		h[i] = (unsigned char)(msa_rand01(&seed) * 256);
	GPU_CK(cudaMemcpy(src, h, arena, cudaMemcpyHostToDevice));
	GPU_CK(cudaMemset(dst, 0xa5, arena));
	GPU_CK(cudaMemset(stage, 0x5a, (size_t)n * bytes));
	for (uint32_t i = 0; i < n; i++) {
		/* Reversed and interleaved so order matters. */
		pin[i] = src + (size_t)(n - 1 - i) * (page + skew) + skew;
		pout[i] = dst + (size_t)((i * 7) % n) * (page + skew) + skew;
	}
	GPU_OK(kern_page_gather_launch(stage, pin, n, bytes, NULL));
	GPU_CK(cudaMemcpy(stage_h, stage, (size_t)n * bytes,
			  cudaMemcpyDeviceToHost));
	for (uint32_t i = 0; i < n; i++)
		bad |= memcmp(stage_h + (size_t)i * bytes,
			      h + ((const char *)pin[i] - src), bytes);
	GPU_OK(kern_page_scatter_launch(pout, stage, n, bytes, NULL));
	GPU_CK(cudaMemcpy(back, dst, arena, cudaMemcpyDeviceToHost));
	for (uint32_t i = 0; i < n; i++) {
		size_t o = (size_t)((char *)pout[i] - dst);

		bad |= memcmp(back + o, h + ((const char *)pin[i] - src),
			      bytes);
		for (size_t b = bytes; b < page; b++)
			bad |= back[o + b] != 0xa5;
	}
	cudaFree(src);
	cudaFree(dst);
	cudaFree(stage);
	free(h);
	free(back);
	free(stage_h);
	free(pin);
	free(pout);
	if (bad)
		fprintf(stderr, "copy n=%u page=%zu bytes=%zu skew=%zu wrong\n",
			n, page, bytes, skew);
	return bad;
}

static int merge_case(uint32_t n, uint32_t rows, uint32_t dim, uint64_t seed)
{
	size_t no = (size_t)n * rows * dim, nl = (size_t)n * rows;
	float *o = malloc(no * 4 + 4), *l = malloc(nl * 4 + 4);
	float *ro = malloc((size_t)rows * dim * 4), *rl = malloc(rows * 4);
	float *go = malloc((size_t)rows * dim * 4), *gl = malloc(rows * 4);
	float *d_o, *d_l, *d_ro, *d_rl;
	int bad = 0;

	for (size_t i = 0; i < no; i++)
		o[i] = (float)(msa_rand01(&seed) * 2 - 1);
	for (size_t i = 0; i < nl; i++)
		l[i] = msa_rand01(&seed) < 0.2 ?
			       -INFINITY :
			       (float)(msa_rand01(&seed) * 40 - 20);
	for (uint32_t r = 0; r < rows; r += 7) /* some rows all empty */
		for (uint32_t j = 0; j < n; j++)
			l[(size_t)j * rows + r] = -INFINITY;
	GPU_OK(msa_merge_cpu_f32(o, l, n, rows, dim, ro, rl));
	GPU_CK(cudaMalloc((void **)&d_o, no * 4 + 4));
	GPU_CK(cudaMalloc((void **)&d_l, nl * 4 + 4));
	GPU_CK(cudaMalloc((void **)&d_ro, (size_t)rows * dim * 4));
	GPU_CK(cudaMalloc((void **)&d_rl, rows * 4));
	GPU_CK(cudaMemcpy(d_o, o, no * 4, cudaMemcpyHostToDevice));
	GPU_CK(cudaMemcpy(d_l, l, nl * 4, cudaMemcpyHostToDevice));
	GPU_CK(cudaMemset(d_ro, 0xff, (size_t)rows * dim * 4));
	GPU_CK(cudaMemset(d_rl, 0xff, rows * 4));
	GPU_OK(msa_merge_launch(d_o, d_l, n, rows, dim, d_ro, d_rl, NULL));
	GPU_CK(cudaMemcpy(go, d_ro, (size_t)rows * dim * 4,
			  cudaMemcpyDeviceToHost));
	GPU_CK(cudaMemcpy(gl, d_rl, rows * 4, cudaMemcpyDeviceToHost));
	for (uint32_t r = 0; r < rows; r++) {
		if (isinf(rl[r]))
			bad |= !(isinf(gl[r]) && gl[r] < 0);
		else
			bad |= !(fabsf(gl[r] - rl[r]) <=
				 1e-5f * fmaxf(1.0f, fabsf(rl[r])));
		for (uint32_t d = 0; d < dim; d++) {
			float a = go[(size_t)r * dim + d],
			      b = ro[(size_t)r * dim + d];

			bad |= !(fabsf(a - b) <= 1e-5f + 1e-5f * fabsf(b));
		}
	}
	cudaFree(d_o);
	cudaFree(d_l);
	cudaFree(d_ro);
	cudaFree(d_rl);
	free(o);
	free(l);
	free(ro);
	free(rl);
	free(go);
	free(gl);
	if (bad)
		fprintf(stderr, "merge n=%u rows=%u dim=%u wrong\n", n, rows,
			dim);
	return bad;
}

int main(int argc, char **argv)
{
	/* --quick: smaller pages (the CPU emulator runs this). */
	static const char *const modes[] = { "--quick", NULL };
	bool quick = gpu_mode_arg(argc, argv, modes) == 0;
	size_t big = quick ? 64 << 10 : 2 << 20;
	int bad = 0;

	gpu_require(stdout, 77);
	bad |= copy_case(64, big / 32, big / 32, 0, 1); /* aligned */
	bad |= copy_case(300, 4096, 4096, 0, 2); /* > one launch */
	bad |= copy_case(17, 4096, 1000, 3, 3); /* unaligned, partial */
	bad |= copy_case(5, big, big, 0, 4); /* 2 MiB pages */
	bad |= copy_case(9, 4096, 4096 - 16, 16, 5); /* aligned tail */
	bad |= merge_case(1, 100, 128, 6);
	bad |= merge_case(8, 1000, 128, 7);
	bad |= merge_case(77, 33, 64, 8);
	bad |= merge_case(3, 50, 256, 9);
	bad |= merge_case(2, 10, 40, 10); /* odd head_dim */
	if (bad) {
		printf("FAIL\n");
		return 1;
	}
	printf("GPU gather/scatter exact; GPU merge matches the CPU merge\n");
	return 0;
}
