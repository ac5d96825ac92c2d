/* SPDX-License-Identifier: MIT */
/*
 * tinylm model: weights (generated from a seed or read from a llama2.c
 * checkpoint) and the forward pass.
 *
 * Everything numeric goes through one code path per operation so that the
 * bits of a token's K, V and logits depend only on the token, its position
 * and the KV before it, never on how tokens were grouped into chunks:
 *   - tlm_dot() is the only dot product: 8 independent lanes over the input
 *     in order, then a fixed pairwise combine, then the tail in order;
 *   - matmul runs that dot once per (row, token), so batching tokens only
 *     changes the loop order, not any single result;
 *   - attention visits positions in increasing order for every token.
 * FMA contraction is turned off for this file so that no compiler setting
 * can fuse a multiply-add differently in two call sites.
 */
#pragma GCC optimize("fp-contract=off")

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tinylm.h"

void tlm_config_default(struct tlm_config *cfg)
{
	cfg->dim = 256;
	cfg->hidden_dim = 768;
	cfg->n_layers = 4;
	cfg->n_heads = 8;
	cfg->n_kv_heads = 2;
	cfg->vocab_size = 2048;
	cfg->seq_len = 1024;
}

int tlm_config_check(const struct tlm_config *c, char *err, size_t errlen)
{
	const char *why = NULL;

	if (c->dim <= 0 || c->dim > 8192)
		why = "dim must be in 1..8192";
	else if (c->hidden_dim <= 0 || c->hidden_dim > 32768)
		why = "hidden_dim must be in 1..32768";
	else if (c->n_layers <= 0 || c->n_layers > 256)
		why = "layers must be in 1..256";
	else if (c->n_heads <= 0 || c->dim % c->n_heads)
		why = "heads must divide dim";
	else if ((c->dim / c->n_heads) % 2)
		why = "head dim (dim / heads) must be even for rotary embeddings";
	else if (c->n_kv_heads <= 0 || c->n_heads % c->n_kv_heads)
		why = "kv heads must divide heads";
	else if (c->vocab_size <= 1 || c->vocab_size > (1 << 20))
		why = "vocab must be in 2..1048576";
	else if (c->seq_len <= 0 || c->seq_len > (1 << 20))
		why = "max tokens (seq_len) must be in 1..1048576";
	if (!why)
		return 0;
	if (err)
		snprintf(err, errlen, "%s", why);
	return -EINVAL;
}

/* Float counts of each tensor, in llama2.c file order. */
static size_t layout(struct tlm_model *m, float *base)
{
	const struct tlm_config *c = &m->cfg;
	size_t L = c->n_layers, d = c->dim, h = c->hidden_dim,
	       kvd = (size_t)m->kv_dim, V = c->vocab_size;
	size_t off = 0;
#define TAKE(field, count)                             \
	do {                                           \
		m->w.field = base ? base + off : NULL; \
		off += (count);                        \
	} while (0)
	TAKE(token_embedding, V * d);
	TAKE(rms_att, L * d);
	TAKE(wq, L * d * d);
	TAKE(wk, L * d * kvd);
	TAKE(wv, L * d * kvd);
	TAKE(wo, L * d * d);
	TAKE(rms_ffn, L * d);
	TAKE(w1, L * d * h);
	TAKE(w2, L * h * d);
	TAKE(w3, L * d * h);
	TAKE(rms_final, d);
	if (m->shared_classifier)
		m->w.wcls = m->w.token_embedding;
	else
		TAKE(wcls, V * d);
#undef TAKE
	return off;
}

static int model_alloc(struct tlm_model *m, const struct tlm_config *cfg,
		       bool shared)
{
	memset(m, 0, sizeof(*m));
	m->cfg = *cfg;
	m->head_dim = cfg->dim / cfg->n_heads;
	m->kv_dim = m->head_dim * cfg->n_kv_heads;
	m->shared_classifier = shared;
	m->data_floats = layout(m, NULL);
	m->data = malloc(m->data_floats * sizeof(float));
	if (!m->data)
		return -ENOMEM;
	layout(m, m->data);
	return 0;
}

void tlm_model_free(struct tlm_model *m)
{
	free(m->data);
	m->data = NULL;
}

/* Uniform in [-scale, scale) from the top 24 bits: exact in float. */
static void fill_uniform(float *p, size_t n, float scale, uint64_t *rng)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t r = (uint32_t)(tlm_mix64(rng) >> 40);
		p[i] = ((float)r / 8388608.0f - 1.0f) * scale;
	}
}

int tlm_model_generate(struct tlm_model *m, const struct tlm_config *cfg,
		       bool shared_classifier, uint64_t seed)
{
	const struct tlm_config *c = cfg;
	size_t L = c->n_layers, d = c->dim, h = c->hidden_dim;
	uint64_t rng = seed ^ 0x746e796c6d303031ull; /* "tnylm001" */
	int ret;

	ret = tlm_config_check(cfg, NULL, 0);
	if (ret)
		return ret;
	ret = model_alloc(m, cfg, shared_classifier);
	if (ret)
		return ret;
	/*
	 * Scales keep activations O(1) so the sampled tokens vary: matrices
	 * uniform with variance 1 / fan_in (sqrt(3 / fan_in) bound).
	 */
	fill_uniform(m->w.token_embedding, (size_t)c->vocab_size * d, 1.0f,
		     &rng);
	for (size_t i = 0; i < L * d; i++)
		m->w.rms_att[i] = 1.0f;
	float sd = sqrtf(3.0f / (float)d), sh = sqrtf(3.0f / (float)h);
	fill_uniform(m->w.wq, L * d * d, sd, &rng);
	fill_uniform(m->w.wk, L * d * m->kv_dim, sd, &rng);
	fill_uniform(m->w.wv, L * d * m->kv_dim, sd, &rng);
	fill_uniform(m->w.wo, L * d * d, sd * 0.5f, &rng);
	for (size_t i = 0; i < L * d; i++)
		m->w.rms_ffn[i] = 1.0f;
	fill_uniform(m->w.w1, L * d * h, sd, &rng);
	fill_uniform(m->w.w2, L * h * d, sh * 0.5f, &rng);
	fill_uniform(m->w.w3, L * d * h, sd, &rng);
	for (size_t i = 0; i < d; i++)
		m->w.rms_final[i] = 1.0f;
	if (!shared_classifier)
		fill_uniform(m->w.wcls, (size_t)c->vocab_size * d, sd * 4.0f,
			     &rng);
	return 0;
}

int tlm_model_load(struct tlm_model *m, const char *path, char *err,
		   size_t errlen)
{
	struct tlm_config cfg;
	struct stat st;
	int fd, ret;
	bool shared;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return ret;
	}
	if (fstat(fd, &st) < 0 ||
	    pread(fd, &cfg, sizeof(cfg), 0) != (ssize_t)sizeof(cfg)) {
		snprintf(err, errlen, "%s: too short for a llama2.c header",
			 path);
		ret = -EINVAL;
		goto err_close;
	}
	shared = cfg.vocab_size > 0;
	if (cfg.vocab_size < 0)
		cfg.vocab_size = -cfg.vocab_size;
	ret = tlm_config_check(&cfg, err, errlen);
	if (ret)
		goto err_close;
	ret = model_alloc(m, &cfg, shared);
	if (ret) {
		snprintf(err, errlen, "out of memory for %zu floats",
			 m->data_floats);
		goto err_close;
	}
	/*
	 * Between rms_final and an unshared classifier, llama2.c files hold
	 * the old freq_cis tables (seq_len * head_dim floats); skip them.
	 */
	size_t cls = shared ? 0 : (size_t)cfg.vocab_size * cfg.dim;
	size_t before_cls = m->data_floats - cls;
	size_t freq = (size_t)cfg.seq_len * m->head_dim;
	size_t need = sizeof(cfg) +
		      (m->data_floats + (shared ? 0 : freq)) * sizeof(float);
	if ((size_t)st.st_size < need) {
		snprintf(err, errlen,
			 "%s: %lld bytes, the header asks for %zu "
			 "(dim %d, layers %d, vocab %d)",
			 path, (long long)st.st_size, need, cfg.dim,
			 cfg.n_layers, cfg.vocab_size);
		ret = -EINVAL;
		goto err_free;
	}
	off_t off = sizeof(cfg);
	size_t parts[2][2] = { { 0, before_cls }, { before_cls, cls } };
	for (int p = 0; p < 2; p++) {
		char *dst = (char *)(m->data + parts[p][0]);
		size_t left = parts[p][1] * sizeof(float);
		while (left) {
			ssize_t r = pread(fd, dst, left, off);
			if (r <= 0) {
				ret = r < 0 ? -errno : -EIO;
				snprintf(err, errlen, "%s: read failed", path);
				goto err_free;
			}
			dst += r;
			off += r;
			left -= r;
		}
		off += freq * sizeof(float);
	}
	close(fd);
	return 0;
err_free:
	tlm_model_free(m);
err_close:
	close(fd);
	return ret;
}

static int write_all(FILE *f, const void *p, size_t n)
{
	return fwrite(p, 1, n, f) == n ? 0 : -EIO;
}

int tlm_model_save(const struct tlm_model *m, const char *path)
{
	struct tlm_config cfg = m->cfg;
	size_t cls = m->shared_classifier ? 0 :
					    (size_t)cfg.vocab_size * cfg.dim;
	size_t freq = (size_t)cfg.seq_len * m->head_dim;
	float *zeros;
	FILE *f;
	int ret;

	if (!m->shared_classifier)
		cfg.vocab_size = -cfg.vocab_size;
	zeros = calloc(freq ? freq : 1, sizeof(float));
	if (!zeros)
		return -ENOMEM;
	f = fopen(path, "wbe");
	if (!f) {
		ret = -errno;
		goto err_free;
	}
	ret = write_all(f, &cfg, sizeof(cfg));
	if (!ret)
		ret = write_all(f, m->data,
				(m->data_floats - cls) * sizeof(float));
	if (!ret)
		ret = write_all(f, zeros, freq * sizeof(float));
	if (!ret && cls)
		ret = write_all(f, m->w.wcls, cls * sizeof(float));
	if (fclose(f) && !ret)
		ret = -errno;
err_free:
	free(zeros);
	return ret;
}

/* ---- numerics: one code path per operation ---------------------------- */

typedef float v8f __attribute__((vector_size(32)));

static float tlm_dot(const float *a, const float *b, int n)
{
	v8f acc = { 0 };
	int i = 0;

	for (; i + 8 <= n; i += 8) {
		v8f x, y;
		memcpy(&x, a + i, sizeof(x));
		memcpy(&y, b + i, sizeof(y));
		acc += x * y;
	}
	float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) +
		  ((acc[2] + acc[6]) + (acc[3] + acc[7]));
	for (; i < n; i++)
		s += a[i] * b[i];
	return s;
}

/* out[t][r] = dot(w[r], in[t]) for t < ntok, r < rows. */
static void matmul(float *out, const float *in, const float *w, int ntok,
		   int cols, int rows)
{
	for (int r = 0; r < rows; r++) {
		const float *wr = w + (size_t)r * cols;
		for (int t = 0; t < ntok; t++)
			out[(size_t)t * rows + r] =
				tlm_dot(wr, in + (size_t)t * cols, cols);
	}
}

static void rmsnorm(float *out, const float *x, const float *weight, int n)
{
	float ss = tlm_dot(x, x, n);
	ss = 1.0f / sqrtf(ss / (float)n + 1e-5f);
	for (int i = 0; i < n; i++)
		out[i] = weight[i] * (ss * x[i]);
}

static void softmax(float *x, int n)
{
	float max = x[0], sum = 0.0f;
	for (int i = 1; i < n; i++)
		if (x[i] > max)
			max = x[i];
	for (int i = 0; i < n; i++) {
		x[i] = expf(x[i] - max);
		sum += x[i];
	}
	for (int i = 0; i < n; i++)
		x[i] /= sum;
}

/* llama2.c rotary: pairs (i, i+1) rotated by pos / 10000^(i%hd / hd). */
static void rope(float *vec, int n, int head_dim, int pos)
{
	for (int i = 0; i < n; i += 2) {
		int hd = i % head_dim;
		float freq = 1.0f / powf(10000.0f, (float)hd / (float)head_dim);
		float val = (float)pos * freq;
		float fcr = cosf(val), fci = sinf(val);
		float v0 = vec[i], v1 = vec[i + 1];
		vec[i] = v0 * fcr - v1 * fci;
		vec[i + 1] = v0 * fci + v1 * fcr;
	}
}

struct tlm_state {
	int max_chunk;
	float *x, *xb, *xb2, *q, *k, *v, *hb, *hb2, *att;
	float *buf;
};

int tlm_state_create(const struct tlm_model *m, int max_chunk,
		     struct tlm_state **out)
{
	const struct tlm_config *c = &m->cfg;
	size_t n = max_chunk, d = c->dim, kvd = m->kv_dim, h = c->hidden_dim;
	size_t total = n * (4 * d + 2 * kvd + 2 * h) + c->seq_len;
	struct tlm_state *s;

	if (max_chunk <= 0)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->buf = calloc(total, sizeof(float));
	if (!s->buf) {
		free(s);
		return -ENOMEM;
	}
	s->max_chunk = max_chunk;
	float *p = s->buf;
	s->x = p, p += n * d;
	s->xb = p, p += n * d;
	s->xb2 = p, p += n * d;
	s->q = p, p += n * d;
	s->k = p, p += n * kvd;
	s->v = p, p += n * kvd;
	s->hb = p, p += n * h;
	s->hb2 = p, p += n * h;
	s->att = p;
	*out = s;
	return 0;
}

void tlm_state_destroy(struct tlm_state *s)
{
	if (!s)
		return;
	free(s->buf);
	free(s);
}

/* One chunk of at most max_chunk tokens. */
static void forward_chunk(const struct tlm_model *m, struct tlm_state *s,
			  struct tlm_kv *kv, int slot, const int *tokens,
			  int pos0, int n, float *logits, bool all_logits)
{
	const struct tlm_config *c = &m->cfg;
	const struct tlm_weights *w = &m->w;
	int d = c->dim, kvd = m->kv_dim, hd = m->head_dim, hid = c->hidden_dim;
	int group = c->n_heads / c->n_kv_heads;
	float scale = 1.0f / sqrtf((float)hd);

	for (int t = 0; t < n; t++)
		memcpy(s->x + (size_t)t * d,
		       w->token_embedding + (size_t)tokens[t] * d,
		       d * sizeof(float));

	for (int l = 0; l < c->n_layers; l++) {
		size_t ld = (size_t)l * d;
		float *kc = kv->ops->k(kv, l, slot);
		float *vc = kv->ops->v(kv, l, slot);

		for (int t = 0; t < n; t++)
			rmsnorm(s->xb + (size_t)t * d, s->x + (size_t)t * d,
				w->rms_att + ld, d);
		matmul(s->q, s->xb, w->wq + ld * d, n, d, d);
		matmul(s->k, s->xb, w->wk + ld * kvd, n, d, kvd);
		matmul(s->v, s->xb, w->wv + ld * kvd, n, d, kvd);
		for (int t = 0; t < n; t++) {
			int pos = pos0 + t;
			rope(s->q + (size_t)t * d, d, hd, pos);
			rope(s->k + (size_t)t * kvd, kvd, hd, pos);
			memcpy(kc + (size_t)pos * kvd, s->k + (size_t)t * kvd,
			       kvd * sizeof(float));
			memcpy(vc + (size_t)pos * kvd, s->v + (size_t)t * kvd,
			       kvd * sizeof(float));
		}
		/* Attention: token t sees positions 0..pos0+t, in order. */
		for (int t = 0; t < n; t++) {
			int pos = pos0 + t;
			for (int h = 0; h < c->n_heads; h++) {
				const float *q = s->q + (size_t)t * d + h * hd;
				int kh = (h / group) * hd;
				float *out = s->xb + (size_t)t * d + h * hd;
				for (int p = 0; p <= pos; p++)
					s->att[p] =
						tlm_dot(q,
							kc + (size_t)p * kvd +
								kh,
							hd) *
						scale;
				softmax(s->att, pos + 1);
				memset(out, 0, hd * sizeof(float));
				for (int p = 0; p <= pos; p++) {
					const float *vp =
						vc + (size_t)p * kvd + kh;
					float a = s->att[p];
					for (int i = 0; i < hd; i++)
						out[i] += a * vp[i];
				}
			}
		}
		matmul(s->xb2, s->xb, w->wo + ld * d, n, d, d);
		for (size_t i = 0; i < (size_t)n * d; i++)
			s->x[i] += s->xb2[i];

		for (int t = 0; t < n; t++)
			rmsnorm(s->xb + (size_t)t * d, s->x + (size_t)t * d,
				w->rms_ffn + ld, d);
		size_t lh = (size_t)l * hid * d;
		matmul(s->hb, s->xb, w->w1 + lh, n, d, hid);
		matmul(s->hb2, s->xb, w->w3 + lh, n, d, hid);
		for (size_t i = 0; i < (size_t)n * hid; i++) {
			float g = s->hb[i];
			g *= 1.0f / (1.0f + expf(-g));
			s->hb[i] = g * s->hb2[i];
		}
		matmul(s->xb, s->hb, w->w2 + lh, n, hid, d);
		for (size_t i = 0; i < (size_t)n * d; i++)
			s->x[i] += s->xb[i];
	}

	if (!logits)
		return;
	int first = all_logits ? 0 : n - 1;
	for (int t = first; t < n; t++)
		rmsnorm(s->xb + (size_t)t * d, s->x + (size_t)t * d,
			w->rms_final, d);
	matmul(logits, s->xb + (size_t)first * d, w->wcls, n - first, d,
	       c->vocab_size);
}

int tlm_forward(const struct tlm_model *m, struct tlm_state *s,
		struct tlm_kv *kv, int slot, const int *tokens, int pos0, int n,
		float *logits, bool all_logits)
{
	const struct tlm_config *c = &m->cfg;

	if (n <= 0 || pos0 < 0 || pos0 + n > kv->max_tokens ||
	    pos0 + n > c->seq_len || slot < 0 || slot >= kv->max_seqs)
		return -EINVAL;
	for (int i = 0; i < n; i++)
		if (tokens[i] < 0 || tokens[i] >= c->vocab_size)
			return -EINVAL;
	while (n > 0) {
		int k = n < s->max_chunk ? n : s->max_chunk;
		bool last = k == n;
		float *lg = NULL;
		if (logits && all_logits)
			lg = logits;
		else if (logits && last)
			lg = logits;
		forward_chunk(m, s, kv, slot, tokens, pos0, k, lg, all_logits);
		if (logits && all_logits)
			logits += (size_t)k * c->vocab_size;
		tokens += k;
		pos0 += k;
		n -= k;
	}
	return 0;
}

int tlm_sample(const float *logits, int vocab, float temperature,
	       uint64_t rng_seed)
{
	int best = 0;

	for (int i = 1; i < vocab; i++)
		if (logits[i] > logits[best])
			best = i;
	if (temperature <= 0.0f)
		return best;
	/* Inverse-CDF draw over softmax(logits / T), summed in index order. */
	double sum = 0.0, max = logits[best];
	for (int i = 0; i < vocab; i++)
		sum += exp((logits[i] - max) / temperature);
	uint64_t st = rng_seed;
	double u = (double)(tlm_mix64(&st) >> 11) / 9007199254740992.0 * sum;
	double acc = 0.0;
	for (int i = 0; i < vocab; i++) {
		acc += exp((logits[i] - max) / temperature);
		if (u < acc)
			return i;
	}
	return vocab - 1;
}

uint64_t tlm_checksum(const float *v, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	const unsigned char *p = (const unsigned char *)v;

	for (size_t i = 0; i < n * sizeof(float); i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}
