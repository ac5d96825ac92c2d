/* SPDX-License-Identifier: MIT */
/*
 * Body of the CPU references, included by msa_ref.c once per accumulation
 * type: REAL is float or double, SFX the name suffix, EXP/LOG the matching
 * libm functions.  Kept as one body so the fp32 and float64 references can
 * only differ in precision.
 */

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define NAME(x) CAT(x, SFX)

/*
 * Attention of one query row over n tokens (stride between tokens in
 * elements), two-pass: exact max, then sum and weighted V.  kv_pos NULL
 * means positions pos0 + t.  Writes the normalised o and returns the
 * natural-log LSE (-inf and o = 0 when no token is visible).
 */
static REAL NAME(attend_row)(enum msa_dtype dt, uint32_t dim, REAL scale,
			     const REAL *q, int32_t qpos, const void *k,
			     const void *v, size_t stride, uint32_t n,
			     const int32_t *kv_pos, int32_t pos0, REAL *o,
			     REAL *scores)
{
	REAL m = -INFINITY, l = 0;

	for (uint32_t d = 0; d < dim; d++)
		o[d] = 0;
	for (uint32_t t = 0; t < n; t++) {
		int32_t pos = kv_pos ? kv_pos[t] : pos0 + (int32_t)t;
		REAL s = 0;

		if (pos > qpos) {
			scores[t] = -INFINITY;
			continue;
		}
		for (uint32_t d = 0; d < dim; d++)
			s += q[d] * (REAL)kern_load(dt, k, t * stride + d);
		scores[t] = s * scale;
		if (scores[t] > m)
			m = scores[t];
	}
	if (m == -INFINITY)
		return -INFINITY;
	for (uint32_t t = 0; t < n; t++) {
		REAL p;

		if (scores[t] == -INFINITY)
			continue;
		p = EXP(scores[t] - m);
		l += p;
		for (uint32_t d = 0; d < dim; d++)
			o[d] += p * (REAL)kern_load(dt, v, t * stride + d);
	}
	for (uint32_t d = 0; d < dim; d++)
		o[d] /= l;
	return m + LOG(l);
}

/*
 * Fold state (o_j, lse_j) into the running (o, *lse):
 * lse' = ln(e^lse + e^lse_j), o' = e^(lse - lse') o + e^(lse_j - lse') o_j.
 */
static void NAME(merge_into)(REAL *o, REAL *lse, const REAL *o_j, REAL lse_j,
			     uint32_t dim)
{
	REAL mx, tot, a, b;

	if (lse_j == -INFINITY)
		return;
	if (*lse == -INFINITY) {
		memcpy(o, o_j, dim * sizeof(REAL));
		*lse = lse_j;
		return;
	}
	mx = *lse > lse_j ? *lse : lse_j;
	tot = mx + LOG(EXP(*lse - mx) + EXP(lse_j - mx));
	a = EXP(*lse - tot);
	b = EXP(lse_j - tot);
	for (uint32_t d = 0; d < dim; d++)
		o[d] = a * o[d] + b * o_j[d];
	*lse = tot;
}

static int NAME(msa_cpu)(const struct msa_problem *p, REAL *o_out,
			 REAL *lse_out, bool lse_wanted)
{
	uint32_t dim = p->head_dim, hq = p->num_q_heads, hkv = p->num_kv_heads;
	uint32_t group = hq / hkv;
	size_t stride = (size_t)hkv * dim, max_len = 1;
	REAL *q = NULL, *part = NULL, *scores = NULL;
	int err = msa_problem_check(p, false);

	if (err)
		return err;
	for (uint32_t b = 0; b < p->num_seqs; b++)
		for (uint32_t s = p->seg_start[b]; s < p->seg_start[b + 1]; s++)
			if (p->segs[s].len > max_len)
				max_len = p->segs[s].len;
	q = malloc(dim * sizeof(REAL));
	part = malloc(dim * sizeof(REAL));
	scores = malloc(max_len * sizeof(REAL));
	if (!q || !part || !scores) {
		err = -ENOMEM;
		goto out_free;
	}
	for (uint32_t b = 0; b < p->num_seqs; b++) {
		for (uint32_t i = p->q_start[b]; i < p->q_start[b + 1]; i++) {
			for (uint32_t h = 0; h < hq; h++) {
				size_t row = (size_t)i * hq + h;
				REAL *o = o_out + row * dim, lse = -INFINITY;
				uint32_t kvh = h / group;

				for (uint32_t d = 0; d < dim; d++) {
					q[d] = (REAL)kern_load(p->dtype, p->q,
							       row * dim + d);
					o[d] = 0;
				}
				for (uint32_t s = p->seg_start[b];
				     s < p->seg_start[b + 1]; s++) {
					const struct msa_segment *sg =
						&p->segs[s];
					size_t off = (size_t)kvh * dim *
						     msa_dtype_bytes(p->dtype);
					REAL l;

					if (!sg->len)
						continue;
					if (!sg->k || !sg->v) {
						err = -EINVAL;
						goto out_free;
					}
					l = NAME(attend_row)(
						p->dtype, dim, (REAL)p->scale,
						q, p->q_pos[i],
						(const char *)sg->k + off,
						(const char *)sg->v + off,
						stride, sg->len, NULL, sg->pos0,
						part, scores);
					NAME(merge_into)(o, &lse, part, l, dim);
				}
				if (lse_wanted)
					lse_out[row] = lse;
			}
		}
	}
out_free:
	free(scores);
	free(part);
	free(q);
	return err;
}

static int NAME(msa_dense)(const struct msa_dense *dn, REAL *o_out,
			   REAL *lse_out)
{
	uint32_t dim = dn->head_dim, hq = dn->num_q_heads;
	uint32_t hkv = dn->num_kv_heads;
	size_t stride = (size_t)hkv * dim, esz = msa_dtype_bytes(dn->dtype);
	REAL *q = NULL, *scores = NULL;
	int err = 0;

	if (!esz || !hq || !hkv || !dim || hq % hkv)
		return -EINVAL;
	if (dn->n_q && (!dn->q || !dn->q_pos || !o_out))
		return -EINVAL;
	if (dn->n_ctx && (!dn->k || !dn->v || !dn->kv_pos))
		return -EINVAL;
	q = malloc(dim * sizeof(REAL));
	scores = malloc((dn->n_ctx ? dn->n_ctx : 1) * sizeof(REAL));
	if (!q || !scores) {
		err = -ENOMEM;
		goto out_free;
	}
	for (uint32_t i = 0; i < dn->n_q; i++) {
		for (uint32_t h = 0; h < hq; h++) {
			size_t row = (size_t)i * hq + h;
			size_t off = (size_t)(h / (hq / hkv)) * dim * esz;
			REAL l;

			for (uint32_t d = 0; d < dim; d++)
				q[d] = (REAL)kern_load(dn->dtype, dn->q,
						       row * dim + d);
			l = NAME(attend_row)(
				dn->dtype, dim, (REAL)dn->scale, q,
				dn->q_pos[i],
				dn->n_ctx ? (const char *)dn->k + off : NULL,
				dn->n_ctx ? (const char *)dn->v + off : NULL,
				stride, dn->n_ctx, dn->kv_pos, 0,
				o_out + row * dim, scores);
			if (lse_out)
				lse_out[row] = l;
		}
	}
out_free:
	free(scores);
	free(q);
	return err;
}

int NAME(msa_merge_cpu_)(const REAL *o_in, const REAL *lse_in,
			 uint32_t n_states, uint32_t rows, uint32_t head_dim,
			 REAL *o_out, REAL *lse_out)
{
	if (!head_dim || (rows && (!o_out || (n_states && (!o_in || !lse_in)))))
		return -EINVAL;
	for (uint32_t r = 0; r < rows; r++) {
		REAL *o = o_out + (size_t)r * head_dim, lse = -INFINITY;

		for (uint32_t d = 0; d < head_dim; d++)
			o[d] = 0;
		for (uint32_t j = 0; j < n_states; j++) {
			size_t at = (size_t)j * rows + r;

			NAME(merge_into)
			(o, &lse, o_in + at * head_dim, lse_in[at], head_dim);
		}
		if (lse_out)
			lse_out[r] = lse;
	}
	return 0;
}

#undef NAME
#undef CAT
#undef CAT2
