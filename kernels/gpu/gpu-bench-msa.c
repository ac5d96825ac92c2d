/* SPDX-License-Identifier: MIT */
/*
 * MSA timing on the GPU, each figure against a baseline measured in the
 * same run (Llama-3-8B layer shape: 32 q heads, 8 KV heads, D = 128, bf16):
 *
 *   - decode bandwidth (bytes of K and V read / time) against the device
 *     copy bandwidth (cudaMemcpy device-to-device of the same bytes,
 *     counted as read + write, i.e. DRAM traffic / time);
 *   - slowdown of the same context cut into 2, 4, 8, 16 scattered
 *     segments against 1 segment;
 *   - the merge of 8 / 16 partial states against one decode call;
 *   - prefill attention throughput (for information).
 *
 * Prints a table and ends with one JSON line.  Exits 77 without a GPU.
 *   gpu-bench-msa [--quick | --tiny]
 * (--tiny: toy sizes for the CPU emulator, figures meaningless.)
 */
#include <string.h>

#include "kernels/gpu/gpu_util.h"

#define HQ 32
#define HKV 8
#define DIM 128

static double merge_ms(uint32_t n, uint32_t rows)
{
	float *o, *l, *ro, *rl;
	size_t no = (size_t)n * rows * DIM;
	float *h = malloc(no * 4 + (size_t)n * rows * 4);
	uint64_t seed = 3;
	cudaEvent_t a, b;
	float ms;

	for (size_t i = 0; i < no + (size_t)n * rows; i++)
		h[i] = (float)(msa_rand01(&seed) * 2 - 1);
	GPU_CK(cudaMalloc((void **)&o, no * 4));
	GPU_CK(cudaMalloc((void **)&l, (size_t)n * rows * 4));
	GPU_CK(cudaMalloc((void **)&ro, (size_t)rows * DIM * 4));
	GPU_CK(cudaMalloc((void **)&rl, (size_t)rows * 4));
	GPU_CK(cudaMemcpy(o, h, no * 4, cudaMemcpyHostToDevice));
	GPU_CK(cudaMemcpy(l, h + no, (size_t)n * rows * 4,
			  cudaMemcpyHostToDevice));
	for (int i = 0; i < 3; i++)
		GPU_OK(msa_merge_launch(o, l, n, rows, DIM, ro, rl, NULL));
	GPU_CK(cudaEventCreate(&a));
	GPU_CK(cudaEventCreate(&b));
	GPU_CK(cudaEventRecord(a, NULL));
	for (int i = 0; i < 50; i++)
		GPU_OK(msa_merge_launch(o, l, n, rows, DIM, ro, rl, NULL));
	GPU_CK(cudaEventRecord(b, NULL));
	GPU_CK(cudaEventSynchronize(b));
	GPU_CK(cudaEventElapsedTime(&ms, a, b));
	cudaEventDestroy(a);
	cudaEventDestroy(b);
	cudaFree(o);
	cudaFree(l);
	cudaFree(ro);
	cudaFree(rl);
	free(h);
	return ms / 50;
}

int main(int argc, char **argv)
{
	/* --quick: fewer sizes; --tiny: toy sizes (the emulator's run). */
	static const char *const modes[] = { "--quick", "--tiny", NULL };
	int mode = gpu_mode_arg(argc, argv, modes);
	bool tiny = mode == 1;
	bool quick = mode >= 0;
	uint32_t sms = (uint32_t)gpu_require(stdout, 77);
	uint32_t ctx_long = tiny ? 1024 : quick ? 8192 : 32768;
	uint32_t batch = tiny ? 2 : 8, ctx = tiny ? 512 : 8192;
	uint32_t pf_ctx = tiny ? 256 : 4096, pf_q = tiny ? 32 : 512;
	static const uint32_t segs[] = { 1, 2, 4, 8, 16 };
	double t_seg[5], t_seg_long[5], t_copy, t_dec, t_dec_b8, t_pf;
	double copy_gbps, dec_gbps, dec_b8_gbps, m8, m16, pf_tflops;
	size_t x, x8;
	struct gpu_bench b;
	char *scratch;
	int iters = tiny ? 1 : quick ? 5 : 20, warm = tiny ? 0 : 3;

	gpu_bench_init(&b, HQ, HKV, DIM, MSA_BF16,
		       ctx_long > batch * ctx ? ctx_long : batch * ctx, sms);
	/* Baseline: copy the K and V bytes one decode call reads. */
	x = 2 * (size_t)ctx_long * b.row;
	GPU_CK(cudaMalloc((void **)&scratch, x));
	t_copy = gpu_copy_ms(scratch, b.k, x / 2, cudaMemcpyDeviceToDevice,
			     warm, iters) +
		 gpu_copy_ms(scratch + x / 2, b.v, x / 2,
			     cudaMemcpyDeviceToDevice, warm, iters);
	copy_gbps = 2.0 * x / (t_copy * 1e6);

	for (int i = 0; i < 5; i++) {
		GPU_OK(gpu_bench_setup(&b, 1, ctx_long, segs[i], 1, true));
		t_seg_long[i] = gpu_bench_time_ms(&b, warm, iters);
		GPU_OK(gpu_bench_setup(&b, batch, ctx, segs[i], 1, true));
		t_seg[i] = gpu_bench_time_ms(&b, warm, iters);
	}
	t_dec = t_seg_long[0];
	t_dec_b8 = t_seg[0];
	dec_gbps = x / (t_dec * 1e6);
	x8 = 2 * (size_t)batch * ctx * b.row;
	dec_b8_gbps = x8 / (t_dec_b8 * 1e6);
	m8 = merge_ms(8, batch * HQ);
	m16 = merge_ms(16, batch * HQ);

	/* Prefill: the last pf_q tokens of a pf_ctx context, causal. */
	GPU_OK(gpu_bench_setup(&b, 1, pf_ctx, 1, pf_q, false));
	t_pf = gpu_bench_time_ms(&b, tiny ? 0 : 2, tiny ? 1 : quick ? 3 : 10);
	/* Visible pairs: query i of pf_q sees pf_ctx - pf_q + i + 1 keys. */
	pf_tflops = 4.0 * HQ * DIM *
		    ((double)pf_q * (pf_ctx - pf_q) + pf_q * (pf_q + 1.0) / 2) /
		    (t_pf * 1e9);

	printf("\nMSA on this GPU (Llama-3-8B layer: 32 q / 8 kv heads, "
	       "D=128, bf16; batch %u x ctx %u, long ctx %u, prefill %u of %u)\n",
	       batch, ctx, ctx_long, pf_q, pf_ctx);
	printf("%-44s %12s %12s\n", "measurement", "value", "vs baseline");
	printf("%-44s %9.1f GB/s %12s\n", "copy D2D (read+write), same bytes",
	       copy_gbps, "baseline");
	printf("%-44s %9.1f GB/s %11.2fx\n",
	       "decode 1 seq, 1 segment (ctx long)", dec_gbps,
	       dec_gbps / copy_gbps);
	printf("%-44s %9.1f GB/s %11.2fx\n", "decode batch x ctx, 1 segment",
	       dec_b8_gbps, dec_b8_gbps / copy_gbps);
	for (int i = 1; i < 5; i++) {
		char name[64];

		snprintf(name, sizeof(name), "decode %u x %u, %u segments",
			 batch, ctx, segs[i]);
		printf("%-44s %10.1f us %11.3fx\n", name, t_seg[i] * 1e3,
		       t_seg[i] / t_seg[0]);
		snprintf(name, sizeof(name), "decode 1 x %u, %u segments",
			 ctx_long, segs[i]);
		printf("%-44s %10.1f us %11.3fx\n", name, t_seg_long[i] * 1e3,
		       t_seg_long[i] / t_seg_long[0]);
	}
	printf("%-44s %10.1f us %11.3fx\n", "merge 8 states (batch x 32 rows)",
	       m8 * 1e3, m8 / t_dec_b8);
	printf("%-44s %10.1f us %11.3fx\n", "merge 16 states (batch x 32 rows)",
	       m16 * 1e3, m16 / t_dec_b8);
	printf("%-44s %8.2f TFLOPS %12s\n", "prefill (last q of ctx, causal)",
	       pf_tflops, "-");
	printf("targets: decode >= 0.80x copy; 8 segments <= 1.10x of 1\n");
	printf("{\"bench\":\"gpu-kernels\",\"copy_GBps\":%.1f,"
	       "\"decode_GBps\":%.1f,\"decode_vs_copy\":%.3f,"
	       "\"decode_b8_vs_copy\":%.3f,\"seg2\":%.3f,\"seg4\":%.3f,"
	       "\"seg8\":%.3f,\"seg16\":%.3f,\"seg8_long\":%.3f,"
	       "\"merge8_us\":%.2f,\"merge8_vs_decode\":%.3f,"
	       "\"prefill_tflops\":%.2f}\n",
	       copy_gbps, dec_gbps, dec_gbps / copy_gbps,
	       dec_b8_gbps / copy_gbps, t_seg[1] / t_seg[0],
	       t_seg[2] / t_seg[0], t_seg[3] / t_seg[0], t_seg[4] / t_seg[0],
	       t_seg_long[3] / t_seg_long[0], m8 * 1e3, m8 / t_dec_b8,
	       pf_tflops);
	cudaFree(scratch);
	gpu_bench_free(&b);
	return 0;
}
