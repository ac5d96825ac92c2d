/* SPDX-License-Identifier: MIT */
/*
 * The CPU MSA reference (per-segment softmax + merge) equals dense
 * attention over the gathered context (one global softmax) to float
 * rounding: relative error < 1e-5 in fp32 and < 1e-12 in float64, on
 * random shapes with GQA, empty and single-token segments, holes in the
 * positions and fully masked rows (which must be O = 0, LSE = -inf).
 * Also checks two hand-computed cases.
 */
#include <errno.h>
#include <math.h>

#include "kernels/msa_case.h"
#include "tests/lib/test.h"

/* max |a - b| over the row, relative to max |b| (norm-wise). */
static double row_err_f(const float *a, const float *b, uint32_t n)
{
	double e = 0, m = 0;

	for (uint32_t i = 0; i < n; i++) {
		e = fmax(e, fabs((double)a[i] - b[i]));
		m = fmax(m, fabs((double)b[i]));
	}
	return m > 0 ? e / m : e;
}

static double row_err_d(const double *a, const double *b, uint32_t n)
{
	double e = 0, m = 0;

	for (uint32_t i = 0; i < n; i++) {
		e = fmax(e, fabs(a[i] - b[i]));
		m = fmax(m, fabs(b[i]));
	}
	return m > 0 ? e / m : e;
}

static void hand_cases(void)
{
	/* One token: O = v, LSE = scale * q.k.  Two equal-logit tokens. */
	float q[2] = { 1.0f, 2.0f }, k[4] = { 0.5f, 0.25f, 0.5f, 0.25f };
	float v[4] = { 3.0f, -1.0f, 1.0f, 5.0f }, o[2], lse;
	int32_t qpos = 10, kpos[2] = { 0, 1 };
	struct msa_dense d = { .dtype = MSA_F32,
			       .num_q_heads = 1,
			       .num_kv_heads = 1,
			       .head_dim = 2,
			       .scale = 0.5f,
			       .n_q = 1,
			       .n_ctx = 1,
			       .q = q,
			       .q_pos = &qpos,
			       .k = k,
			       .v = v,
			       .kv_pos = kpos };

	t_ok(msa_dense_f32(&d, o, &lse));
	t_assert(o[0] == 3.0f && o[1] == -1.0f);
	t_assert(fabsf(lse - 0.5f) < 1e-7f);
	d.n_ctx = 2;
	t_ok(msa_dense_f32(&d, o, &lse));
	t_assert(fabsf(o[0] - 2.0f) < 1e-6f && fabsf(o[1] - 2.0f) < 1e-6f);
	t_assert(fabsf(lse - (0.5f + logf(2.0f))) < 1e-6f);
	/* Position 0 query sees only token 0. */
	qpos = 0;
	t_ok(msa_dense_f32(&d, o, &lse));
	t_assert(o[0] == 3.0f && o[1] == -1.0f);
	qpos = -1; /* sees nothing */
	t_ok(msa_dense_f32(&d, o, &lse));
	t_assert(o[0] == 0.0f && o[1] == 0.0f && isinf(lse) && lse < 0);
}

int main(void)
{
	static const uint32_t dims[] = { 4, 16, 64, 128 };
	static const uint32_t groups[] = { 1, 2, 4, 8 };
	double worst32 = 0, worst64 = 0;
	unsigned masked = 0, rows_total = 0, empty_segs = 0, one_segs = 0;

	hand_cases();
	for (uint32_t it = 0; it < 60; it++) {
		uint64_t rs = it + 1;
		struct msa_case_spec sp = {
			.dtype = (it % 3) == 0 ? MSA_F32 :
				 (it % 3) == 1 ? MSA_BF16 :
						 MSA_F16,
			.num_kv_heads = 1 + (uint32_t)(msa_rand01(&rs) * 3),
			.head_dim = dims[it % 4],
			.num_seqs = 1 + (uint32_t)(msa_rand01(&rs) * 3),
			.q_per_seq = 1 + (uint32_t)(msa_rand01(&rs) * 6),
			.segs_per_seq = (uint32_t)(msa_rand01(&rs) * 9),
			.seg_len = it % 5 == 0 ?
					   1 :
					   1 + (uint32_t)(msa_rand01(&rs) * 70),
			.random_pos = it % 2 == 0,
			.decode = it % 4 == 1,
			.seed = it,
		};
		struct msa_case c;
		struct msa_problem *p = &c.p;
		uint32_t hq, dim = sp.head_dim;
		double *o64, *lse64;

		sp.num_q_heads = sp.num_kv_heads * groups[(it / 4) % 4];
		hq = sp.num_q_heads;
		t_ok(msa_case_make(&sp, &c));
		for (uint32_t s = 0; s < c.num_segs; s++) {
			empty_segs += c.segs[s].len == 0;
			one_segs += c.segs[s].len == 1;
		}
		/* Poison: the reference must write every output. */
		for (size_t i = 0; i < (size_t)p->num_q_tokens * hq * dim; i++)
			c.o[i] = NAN;
		t_ok(msa_cpu_f32(p));
		o64 = malloc(((size_t)p->num_q_tokens * hq * dim + 1) * 8);
		lse64 = malloc(((size_t)p->num_q_tokens * hq + 1) * 8);
		t_assert(o64 && lse64);
		t_ok(msa_cpu_f64(p, o64, lse64));

		for (uint32_t b = 0; b < p->num_seqs; b++) {
			size_t n = msa_case_kv_len(&c, b), esz;
			uint32_t q0 = p->q_start[b],
				 nq = p->q_start[b + 1] - q0;
			size_t rowb = (size_t)sp.num_kv_heads * dim;
			void *k, *v;
			int32_t *pos;
			float *od, *ld;
			double *od64, *ld64;
			struct msa_dense d;

			esz = msa_dtype_bytes(sp.dtype);
			k = malloc((n + 1) * rowb * esz);
			v = malloc((n + 1) * rowb * esz);
			pos = malloc((n + 1) * sizeof(*pos));
			od = malloc(((size_t)nq * hq * dim + 1) * 4);
			ld = malloc(((size_t)nq * hq + 1) * 4);
			od64 = malloc(((size_t)nq * hq * dim + 1) * 8);
			ld64 = malloc(((size_t)nq * hq + 1) * 8);
			t_assert(k && v && pos && od && ld && od64 && ld64);
			t_assert_eq(msa_gather_context(p, b, k, v, pos, n), n);
			if (n)
				t_assert_eq(msa_gather_context(p, b, k, v, pos,
							       n - 1),
					    -ENOSPC);
			d = (struct msa_dense){
				.dtype = sp.dtype,
				.num_q_heads = hq,
				.num_kv_heads = sp.num_kv_heads,
				.head_dim = dim,
				.scale = p->scale,
				.n_q = nq,
				.n_ctx = (uint32_t)n,
				.q = (const char *)c.q +
				     (size_t)q0 * hq * dim * esz,
				.q_pos = c.q_pos + q0,
				.k = k,
				.v = v,
				.kv_pos = pos,
			};
			t_ok(msa_dense_f32(&d, od, ld));
			t_ok(msa_dense_f64(&d, od64, ld64));
			for (uint32_t r = 0; r < nq * hq; r++) {
				size_t g = (size_t)q0 * hq + r;
				const float *om = c.o + g * dim;
				double e;

				rows_total++;
				if (isinf(ld[r])) {
					masked++;
					t_assert(ld[r] < 0 && isinf(c.lse[g]) &&
						 c.lse[g] < 0 &&
						 isinf(lse64[g]));
					for (uint32_t i = 0; i < dim; i++)
						t_assert(om[i] == 0.0f &&
							 od[r * dim + i] ==
								 0.0f &&
							 o64[g * dim + i] ==
								 0.0);
					continue;
				}
				e = row_err_f(om, od + (size_t)r * dim, dim);
				worst32 = fmax(worst32, e);
				if (e >= 1e-5)
					t_fail("case %u row %u: fp32 rel err %g",
					       it, r, e);
				if (fabs(c.lse[g] - ld[r]) >=
				    1e-5 * fmax(1.0, fabs(ld[r])))
					t_fail("case %u row %u: lse %g vs %g",
					       it, r, c.lse[g], ld[r]);
				e = row_err_d(o64 + g * dim,
					      od64 + (size_t)r * dim, dim);
				worst64 = fmax(worst64, e);
				if (e >= 1e-12 ||
				    fabs(lse64[g] - ld64[r]) >= 1e-12)
					t_fail("case %u row %u: f64 err %g", it,
					       r, e);
				/* fp32 and float64 references agree too. */
				for (uint32_t i = 0; i < dim; i++)
					if (fabs(om[i] - o64[g * dim + i]) >
					    1e-4)
						t_fail("case %u: f32 vs f64",
						       it);
			}
			free(k);
			free(v);
			free(pos);
			free(od);
			free(ld);
			free(od64);
			free(ld64);
		}
		free(o64);
		free(lse64);
		msa_case_free(&c);
	}
	printf("rows %u (fully masked %u), empty segments %u, single-token %u\n",
	       rows_total, masked, empty_segs, one_segs);
	printf("worst rel err fp32 %.3g, f64 %.3g\n", worst32, worst64);
	/* The cases must actually cover the edge conditions. */
	t_assert(masked > 0 && masked < rows_total);
	t_assert(empty_segs > 0 && one_segs > 0);
	return 0;
}
