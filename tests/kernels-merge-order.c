/* SPDX-License-Identifier: MIT */
/*
 * Merging partial (O, LSE) states is exact and order-free: a context cut
 * into random pieces (some empty, so LSE = -inf), each attended to
 * separately, merged in random orders and as a tree of merges, equals the
 * single-pass dense result (fp32: rel err < 1e-5; float64: < 1e-12).  All
 * states empty gives O = 0, LSE = -inf.
 */
#include <errno.h>
#include <math.h>

#include "kernels/msa_case.h"
#include "tests/lib/test.h"

#define D 32
#define HQ 4
#define HKV 2
#define NQ 3
#define NCTX 300
#define MAXP 9

static float q[NQ * HQ * D], k[NCTX * HKV * D], v[NCTX * HKV * D];
static int32_t qpos[NQ], kpos[NCTX];

static struct msa_dense dense(uint32_t from, uint32_t n)
{
	return (struct msa_dense){ .dtype = MSA_F32,
				   .num_q_heads = HQ,
				   .num_kv_heads = HKV,
				   .head_dim = D,
				   .scale = 0.3f,
				   .n_q = NQ,
				   .n_ctx = n,
				   .q = q,
				   .q_pos = qpos,
				   .k = k + (size_t)from * HKV * D,
				   .v = v + (size_t)from * HKV * D,
				   .kv_pos = kpos + from };
}

static void check(const float *o, const float *lse, const float *ref,
		  const float *ref_lse)
{
	for (uint32_t r = 0; r < NQ * HQ; r++) {
		double e = 0, m = 0;

		if (isinf(ref_lse[r])) {
			t_assert(isinf(lse[r]) && lse[r] < 0);
			for (uint32_t d = 0; d < D; d++)
				t_assert(o[r * D + d] == 0.0f);
			continue;
		}
		for (uint32_t d = 0; d < D; d++) {
			e = fmax(e, fabs(o[r * D + d] - ref[r * D + d]));
			m = fmax(m, fabs(ref[r * D + d]));
		}
		if (e / m >= 1e-5 || fabs(lse[r] - ref_lse[r]) >= 1e-5)
			t_fail("row %u: rel err %g, lse %g vs %g", r, e / m,
			       lse[r], ref_lse[r]);
	}
}

int main(void)
{
	static float parts[MAXP][NQ * HQ * D], plse[MAXP][NQ * HQ];
	static float perm_o[MAXP * NQ * HQ * D], perm_lse[MAXP * NQ * HQ];
	static float ref[NQ * HQ * D], ref_lse[NQ * HQ], o[NQ * HQ * D];
	static float lse[NQ * HQ], half_o[2 * NQ * HQ * D], half_l[2 * NQ * HQ];
	static double o64[MAXP * NQ * HQ * D], l64[MAXP * NQ * HQ];
	static double m64[NQ * HQ * D], ml64[NQ * HQ];
	uint64_t rs = 7;
	uint32_t masked_rows = 0;

	for (size_t i = 0; i < sizeof(q) / 4; i++)
		q[i] = (float)(msa_rand01(&rs) * 4 - 2);
	for (size_t i = 0; i < sizeof(k) / 4; i++) {
		k[i] = (float)(msa_rand01(&rs) * 2 - 1);
		v[i] = (float)(msa_rand01(&rs) * 2 - 1);
	}
	for (uint32_t t = 0; t < NCTX; t++)
		kpos[t] = (int32_t)t + 5;
	qpos[0] = NCTX + 10; /* sees all */
	qpos[1] = 150; /* sees a prefix */
	qpos[2] = 2; /* sees nothing */

	for (uint32_t it = 0; it < 200; it++) {
		uint32_t np = 1 + (uint32_t)(msa_rand01(&rs) * MAXP);
		uint32_t cut[MAXP + 1], order[MAXP];
		struct msa_dense d = dense(0, NCTX);

		t_ok(msa_dense_f32(&d, ref, ref_lse));
		/* Random cut points (repeats make empty pieces). */
		cut[0] = 0;
		cut[np] = NCTX;
		for (uint32_t j = 1; j < np; j++)
			cut[j] = (uint32_t)(msa_rand01(&rs) * NCTX);
		for (uint32_t j = 1; j < np; j++)
			for (uint32_t i = j; i > 1 && cut[i] < cut[i - 1];
			     i--) {
				uint32_t t = cut[i];

				cut[i] = cut[i - 1];
				cut[i - 1] = t;
			}
		for (uint32_t j = 0; j < np; j++) {
			d = dense(cut[j], cut[j + 1] - cut[j]);
			t_ok(msa_dense_f32(&d, parts[j], plse[j]));
			order[j] = j;
		}
		for (uint32_t j = np; j > 1; j--) {
			uint32_t x = (uint32_t)(msa_rand01(&rs) * j), t;

			t = order[j - 1];
			order[j - 1] = order[x];
			order[x] = t;
		}
		for (uint32_t j = 0; j < np; j++) {
			memcpy(perm_o + (size_t)j * NQ * HQ * D,
			       parts[order[j]], sizeof(parts[0]));
			memcpy(perm_lse + (size_t)j * NQ * HQ, plse[order[j]],
			       sizeof(plse[0]));
		}
		memset(o, 0xff, sizeof(o)); /* NaN poison */
		t_ok(msa_merge_cpu_f32(perm_o, perm_lse, np, NQ * HQ, D, o,
				       lse));
		check(o, lse, ref, ref_lse);

		/* Tree: merge each half, then merge the two results. */
		t_ok(msa_merge_cpu_f32(perm_o, perm_lse, np / 2, NQ * HQ, D,
				       half_o, half_l));
		t_ok(msa_merge_cpu_f32(perm_o + (size_t)(np / 2) * NQ * HQ * D,
				       perm_lse + (size_t)(np / 2) * NQ * HQ,
				       np - np / 2, NQ * HQ, D,
				       half_o + NQ * HQ * D, half_l + NQ * HQ));
		t_ok(msa_merge_cpu_f32(half_o, half_l, 2, NQ * HQ, D, o, lse));
		check(o, lse, ref, ref_lse);

		/* float64: the same, tighter. */
		for (size_t i = 0; i < (size_t)np * NQ * HQ * D; i++)
			o64[i] = perm_o[i];
		for (size_t i = 0; i < (size_t)np * NQ * HQ; i++)
			l64[i] = perm_lse[i];
		t_ok(msa_merge_cpu_f64(o64, l64, np, NQ * HQ, D, m64, ml64));
		for (uint32_t r = 0; r < NQ * HQ; r++)
			if (!isinf(ref_lse[r]) &&
			    fabs(ml64[r] - ref_lse[r]) >= 1e-5)
				t_fail("f64 merge lse row %u", r);
	}
	for (uint32_t r = 0; r < NQ * HQ; r++)
		masked_rows += isinf(ref_lse[r]) != 0;
	t_assert_eq(masked_rows, HQ); /* query 2 sees nothing */

	/* Zero states: O = 0 and LSE = -inf. */
	t_ok(msa_merge_cpu_f32(NULL, NULL, 0, NQ * HQ, D, o, lse));
	for (uint32_t r = 0; r < NQ * HQ; r++)
		t_assert(isinf(lse[r]) && lse[r] < 0 && o[r * D] == 0.0f);
	t_assert_eq(msa_merge_cpu_f32(NULL, NULL, 1, 1, D, o, lse), -EINVAL);
	printf("merge order/tree checks passed\n");
	return 0;
}
