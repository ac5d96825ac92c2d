/* SPDX-License-Identifier: MIT */
/*
 * GPU MSA against the float64 CPU reference on fresh random data (never
 * zeros; outputs and workspace poisoned with NaN first): decode and
 * prefill configurations, bf16 and fp16, D = 64/128/256, GQA groups 1-16,
 * empty and single-token segments, holes in positions, fully masked rows
 * (O = 0, LSE = -inf exactly), 1 to MSA_MAX_SPLITS KV splits (forced by
 * planning for few or many SMs), long contexts.  Also: results are
 * bitwise reproducible, and bad launches are refused with -errno.
 * Exits 77 without a GPU.
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "kernels/gpu/gpu_util.h"

static unsigned failures;

/* Compare one case; returns the worst normalised error. */
static double compare(const struct msa_case *c, const float *o,
		      const float *lse, const char *what)
{
	const struct msa_problem *p = &c->p;
	size_t rows = (size_t)p->num_q_tokens * p->num_q_heads;
	uint32_t dim = p->head_dim;
	double *ro = malloc((rows * dim + 1) * 8), *rl = malloc((rows + 1) * 8);
	double worst = 0;

	if (!ro || !rl || msa_cpu_f64(p, ro, rl)) {
		fprintf(stderr, "reference failed\n");
		exit(1);
	}
	for (size_t r = 0; r < rows; r++) {
		double mx = 0, e = 0;

		if (isinf(rl[r])) {
			int bad = !(isinf(lse[r]) && lse[r] < 0);

			for (uint32_t d = 0; d < dim; d++)
				bad |= o[r * dim + d] != 0.0f;
			if (bad && failures++ < 10)
				fprintf(stderr,
					"%s: row %zu fully masked but lse %g o[0] %g\n",
					what, r, lse[r], o[r * dim]);
			continue;
		}
		for (uint32_t d = 0; d < dim; d++) {
			double x = o[r * dim + d];

			mx = fmax(mx, fabs(ro[r * dim + d]));
			/* NaN compares false: count it as an error. */
			e = x == x ? fmax(e, fabs(x - ro[r * dim + d])) :
				     INFINITY;
		}
		if (!(e <= 2e-5 + 1e-4 * mx) ||
		    !(fabs(lse[r] - rl[r]) <= 1e-4 * fmax(1.0, fabs(rl[r])))) {
			if (failures++ < 10)
				fprintf(stderr,
					"%s: row %zu: max err %g (|o| %g), lse %g vs %g\n",
					what, r, e, mx, lse[r], rl[r]);
		}
		worst = fmax(worst, e / fmax(mx, 1e-3));
	}
	free(ro);
	free(rl);
	return worst;
}

static double run_case(const struct msa_case_spec *sp, uint32_t sms,
		       uint32_t *splits_seen, const char *what)
{
	struct msa_case c;
	struct gpu_case g;
	size_t rows;
	float *o, *lse, *o2;
	double e;

	GPU_OK(msa_case_make(sp, &c));
	gpu_case_upload(&c, sms, &g);
	rows = (size_t)c.p.num_q_tokens * c.p.num_q_heads;
	GPU_OK(msa_launch(&g.p, &g.plan, g.ws, g.ws_bytes, NULL));
	GPU_CK(cudaDeviceSynchronize());
	o = malloc(rows * c.p.head_dim * 4 + 4);
	o2 = malloc(rows * c.p.head_dim * 4 + 4);
	lse = malloc(rows * 4 + 4);
	GPU_CK(cudaMemcpy(o, g.o, rows * c.p.head_dim * 4,
			  cudaMemcpyDeviceToHost));
	GPU_CK(cudaMemcpy(lse, g.lse, rows * 4, cudaMemcpyDeviceToHost));
	e = compare(&c, o, lse, what);
	/* Same inputs, same plan: bitwise the same output. */
	gpu_case_poison(&g);
	GPU_OK(msa_launch(&g.p, &g.plan, g.ws, g.ws_bytes, NULL));
	GPU_CK(cudaMemcpy(o2, g.o, rows * c.p.head_dim * 4,
			  cudaMemcpyDeviceToHost));
	if (memcmp(o, o2, rows * c.p.head_dim * 4) && failures++ < 10)
		fprintf(stderr, "%s: second run differs\n", what);
	if (g.plan.num_splits > *splits_seen)
		*splits_seen = g.plan.num_splits;
	free(o);
	free(o2);
	free(lse);
	gpu_case_free(&g);
	msa_case_free(&c);
	return e;
}

int main(int argc, char **argv)
{
	/* --quick: fewer and smaller cases (the CPU emulator runs this). */
	static const char *const modes[] = { "--quick", NULL };
	bool quick = gpu_mode_arg(argc, argv, modes) == 0;
	static const uint32_t dims[] = { 64, 128, 256 };
	static const uint32_t groups[] = { 1, 2, 4, 8, 16 };
	uint32_t sms = (uint32_t)gpu_require(stdout, 77), splits = 0;
	double worst = 0;
	char what[128];

	/* Random small and medium shapes, splits forced both ways. */
	for (uint32_t it = 0; it < (quick ? 30u : 90u); it++) {
		uint64_t rs = 1000 + it;
		struct msa_case_spec sp = {
			.dtype = it % 2 ? MSA_BF16 : MSA_F16,
			.num_kv_heads = 1 + (uint32_t)(msa_rand01(&rs) * 3),
			.head_dim = dims[it % 3],
			.num_seqs = 1 + (uint32_t)(msa_rand01(&rs) * 4),
			/* Prefill-like cases: many queries, shorter context
			 * (keeps the float64 reference quick). */
			.q_per_seq =
				it % 3 == 2 ?
					1 + (uint32_t)(msa_rand01(&rs) * 40) :
					1 + (uint32_t)(msa_rand01(&rs) * 3),
			.segs_per_seq = (uint32_t)(msa_rand01(&rs) * 10),
			.seg_len =
				it % 7 == 0 ?
					1 :
				it % 3 == 2 ?
					1 + (uint32_t)(msa_rand01(&rs) * 64) :
					1 + (uint32_t)(msa_rand01(&rs) * 300),
			.random_pos = it % 4 == 0,
			.decode = it % 4 == 1,
			.seed = 77 + it,
		};
		uint32_t use_sms = it % 5 == 0 ? 1 : it % 5 == 1 ? 4096 : sms;

		sp.num_q_heads = sp.num_kv_heads * groups[(it / 3) % 5];
		snprintf(what, sizeof(what),
			 "case %u (%s D=%u hq=%u hkv=%u sms=%u)", it,
			 msa_dtype_string(sp.dtype), sp.head_dim,
			 sp.num_q_heads, sp.num_kv_heads, use_sms);
		worst = fmax(worst, run_case(&sp, use_sms, &splits, what));
	}
	/* Llama-3-8B-like decode: long context in 16 segments, batch 4. */
	{
		struct msa_case_spec sp = { .dtype = MSA_BF16,
					    .num_q_heads = 32,
					    .num_kv_heads = 8,
					    .head_dim = 128,
					    .num_seqs = 4,
					    .q_per_seq = 1,
					    .segs_per_seq = 16,
					    .seg_len = quick ? 100 : 1000,
					    .exact_shape = true,
					    .decode = true,
					    .seed = 5 };

		worst = fmax(worst,
			     run_case(&sp, sms, &splits, "llama decode"));
		/* Prefill chunk of 48 tokens at the end of 8 x 300. */
		sp.q_per_seq = quick ? 20 : 48;
		sp.num_seqs = 1;
		sp.segs_per_seq = 8;
		sp.seg_len = quick ? 40 : 300;
		sp.decode = false;
		worst = fmax(worst,
			     run_case(&sp, sms, &splits, "llama prefill"));
	}
	/* Refusals. */
	{
		struct msa_case_spec sp = { .dtype = MSA_BF16,
					    .num_q_heads = 8,
					    .num_kv_heads = 8,
					    .head_dim = 128,
					    .num_seqs = 1,
					    .q_per_seq = 1,
					    .segs_per_seq = 1,
					    .seg_len = 4096,
					    .exact_shape = true,
					    .decode = true,
					    .seed = 9 };
		struct msa_case c;
		struct gpu_case g;
		int r;

		GPU_OK(msa_case_make(&sp, &c));
		gpu_case_upload(&c, 4096, &g);
		if (g.plan.num_splits < 2 ||
		    (r = msa_launch(&g.p, &g.plan, g.ws, g.ws_bytes - 1,
				    NULL)) != -ENOSPC) {
			fprintf(stderr, "short workspace not refused\n");
			failures++;
		}
		g.p.dtype = MSA_F32;
		if (msa_launch(&g.p, &g.plan, g.ws, g.ws_bytes, NULL) !=
		    -ENOTSUP) {
			fprintf(stderr, "f32 not refused\n");
			failures++;
		}
		gpu_case_free(&g);
		msa_case_free(&c);
	}
	printf("worst normalised error %.3g, most splits %u\n", worst, splits);
	if (splits < 2) {
		fprintf(stderr, "no case used the split-KV path\n");
		failures++;
	}
	if (failures) {
		printf("FAIL: %u mismatches\n", failures);
		return 1;
	}
	printf("GPU MSA matches the float64 reference\n");
	return 0;
}
