/* SPDX-License-Identifier: MIT */
/*
 * The tinylm engine follows a restore plan exactly: with a KV cache that
 * answers prefix lookups, hands back some blocks' KV (as a reload would)
 * and marks others lost (to be recomputed at their original positions),
 * a multi-turn, shared-prompt workload produces bitwise the tokens and
 * logit checksums of the private-memory reference, while skipping prefill
 * work.  The cache here is a small in-process stand-in (this test is about
 * the engine; the kvmm-backed cache has its own tests).
 */
#include "tests/lib/test.h"
#include "tests/lib/tinylm_run.h"
#include "tools/tinylm/engine.c"
#include "tools/tinylm/kv-kvmm.c"
#include "tools/tinylm/kv-private.c"
#include "tools/tinylm/model.c"
#include "tools/tinylm/workload.c"

#define TPB 8 /* tokens per block */
#define MAX_BLOCKS 4096

/* A published block: its whole token prefix and its KV for every layer. */
struct sim_block {
	int ntok; /* (index + 1) * TPB */
	int *prefix;
	float *kv; /* layers x {K, V} x TPB x kv_dim */
	bool lost;
};

struct kv_sim {
	struct tlm_kv kv;
	struct tlm_kv *inner; /* private memory holds the live sequences */
	struct sim_block blocks[MAX_BLOCKS];
	int nblocks;
	int lookups;
	int recompute[256];
};

static struct kv_sim *to_sim(struct tlm_kv *kv)
{
	return (struct kv_sim *)kv;
}

static size_t block_floats(const struct tlm_kv *kv)
{
	return (size_t)kv->layers * 2 * TPB * kv->kv_dim;
}

static void copy_block(struct tlm_kv *in, int slot, int b, float *buf,
		       bool to_slot)
{
	size_t n = (size_t)TPB * in->kv_dim, off = (size_t)b * n;
	for (int l = 0; l < in->layers; l++) {
		float *k = in->ops->k(in, l, slot) + off;
		float *v = in->ops->v(in, l, slot) + off;
		float *bk = buf + (size_t)l * 2 * n, *bv = bk + n;
		if (to_slot) {
			memcpy(k, bk, n * sizeof(float));
			memcpy(v, bv, n * sizeof(float));
		} else {
			memcpy(bk, k, n * sizeof(float));
			memcpy(bv, v, n * sizeof(float));
		}
	}
}

static struct sim_block *find(struct kv_sim *s, const int *tokens, int ntok)
{
	for (int i = 0; i < s->nblocks; i++)
		if (s->blocks[i].ntok == ntok &&
		    !memcmp(s->blocks[i].prefix, tokens, ntok * sizeof(int)))
			return &s->blocks[i];
	return NULL;
}

static int sim_seq_open(struct tlm_kv *kv, const int *tokens, int ntokens,
			struct tlm_restore *r)
{
	struct kv_sim *s = to_sim(kv);
	struct tlm_restore in;
	int b, ret;

	ret = s->inner->ops->seq_open(s->inner, tokens, ntokens, &in);
	if (ret)
		return ret;
	*r = (struct tlm_restore){ .slot = in.slot,
				   .tokens_per_block = TPB,
				   .recompute = s->recompute };
	/* Never claim the block holding the last prompt token. */
	for (b = 0; (b + 1) * TPB <= ntokens - 1; b++) {
		struct sim_block *blk = find(s, tokens, (b + 1) * TPB);
		if (!blk)
			break;
		/* Every third hit is "lost" and must be recomputed. */
		if (++s->lookups % 3 == 0)
			blk->lost = true;
		if (blk->lost) {
			s->recompute[r->nrecompute++] = b;
			/* Garbage where the block goes: it must be rewritten. */
			for (int l = 0; l < kv->layers; l++) {
				memset(s->inner->ops->k(s->inner, l, in.slot) +
					       (size_t)b * TPB * kv->kv_dim,
				       0xff, TPB * kv->kv_dim * sizeof(float));
				memset(s->inner->ops->v(s->inner, l, in.slot) +
					       (size_t)b * TPB * kv->kv_dim,
				       0xff, TPB * kv->kv_dim * sizeof(float));
			}
		} else {
			copy_block(s->inner, in.slot, b, blk->kv, true);
			r->restored_host++;
		}
	}
	r->cached = b * TPB;
	return 0;
}

static int sim_publish(struct tlm_kv *kv, int slot, const int *tokens,
		       int ntokens)
{
	struct kv_sim *s = to_sim(kv);

	for (int b = 0; (b + 1) * TPB <= ntokens; b++) {
		struct sim_block *blk = find(s, tokens, (b + 1) * TPB);
		if (!blk) {
			t_assert(s->nblocks < MAX_BLOCKS);
			blk = &s->blocks[s->nblocks++];
			blk->ntok = (b + 1) * TPB;
			blk->prefix = malloc(blk->ntok * sizeof(int));
			blk->kv = malloc(block_floats(kv) * sizeof(float));
			t_assert(blk->prefix && blk->kv);
			memcpy(blk->prefix, tokens, blk->ntok * sizeof(int));
		} else if (!blk->lost) {
			/* Already there: it must be what we computed. */
			float *now = malloc(block_floats(kv) * sizeof(float));
			copy_block(s->inner, slot, b, now, false);
			if (memcmp(now, blk->kv,
				   block_floats(kv) * sizeof(float)))
				t_fail("block %d recomputed differently", b);
			free(now);
			continue;
		}
		copy_block(s->inner, slot, b, blk->kv, false);
		blk->lost = false;
	}
	return 0;
}

static int sim_seq_close(struct tlm_kv *kv, int slot, const int *tokens,
			 int ntokens)
{
	sim_publish(kv, slot, tokens, ntokens);
	return 0;
}

static int sim_extend(struct tlm_kv *kv, int slot, int n)
{
	return to_sim(kv)->inner->ops->extend(to_sim(kv)->inner, slot, n);
}

static int sim_backed(struct tlm_kv *kv, int slot)
{
	return kv->max_tokens;
}

static float *sim_k(struct tlm_kv *kv, int l, int slot)
{
	return to_sim(kv)->inner->ops->k(to_sim(kv)->inner, l, slot);
}

static float *sim_v(struct tlm_kv *kv, int l, int slot)
{
	return to_sim(kv)->inner->ops->v(to_sim(kv)->inner, l, slot);
}

static int sim_step(struct tlm_kv *kv)
{
	return 0;
}

static void sim_destroy(struct tlm_kv *kv)
{
	struct kv_sim *s = to_sim(kv);
	for (int i = 0; i < s->nblocks; i++) {
		free(s->blocks[i].prefix);
		free(s->blocks[i].kv);
	}
	s->inner->ops->destroy(s->inner);
	free(s);
}

static const struct tlm_kv_ops sim_ops = {
	.name = "sim",
	.seq_open = sim_seq_open,
	.publish = sim_publish,
	.seq_close = sim_seq_close,
	.extend = sim_extend,
	.backed = sim_backed,
	.k = sim_k,
	.v = sim_v,
	.step_begin = sim_step,
	.step_end = sim_step,
	.destroy = sim_destroy,
};

/* The stand-in cache in front of the engine's private memory. */
static void use_sim(struct tlm_engine *e)
{
	struct kv_sim *s = calloc(1, sizeof(*s));
	t_assert(s);
	s->inner = e->kv;
	s->kv = *e->kv;
	s->kv.ops = &sim_ops;
	e->kv = &s->kv;
}

static char *run(const struct tlm_model *m,
		 const struct tlm_workload_params *wl, bool sim,
		 struct tlm_engine_stats *st)
{
	return tl_run(tl_opts(m, wl, 2, "private"), wl, sim ? use_sim : NULL,
		      st);
}

int main(void)
{
	struct tlm_workload_params wl;
	struct tlm_engine_stats ref, got;
	struct tlm_model m;

	tlm_workload_default(&wl);
	wl.conversations = 4;
	wl.turns = 3;
	wl.system_tokens = 40;
	wl.user_tokens = 11;
	wl.gen_tokens = 6;
	wl.vocab = tl_small_config.vocab_size;
	tl_small_model(&m);

	char *a = run(&m, &wl, false, &ref);
	char *b = run(&m, &wl, true, &got);
	t_assert_eq(ref.tokens_generated, 4 * 3 * 6);
	t_assert_eq(ref.prefill_tokens_skipped, 0);
	t_assert_eq(strlen(a), strlen(b));
	tl_expect_same(a, b);
	/* The cache did its job: reuse, reloads and recomputation happened. */
	t_assert(got.prefill_tokens_skipped > 0);
	t_assert(got.restored_host > 0);
	t_assert(got.recomputed_blocks > 0);
	t_assert_eq(got.recomputed_tokens, got.recomputed_blocks * TPB);
	t_assert(got.prefill_tokens < ref.prefill_tokens);
	t_assert_eq(got.prefill_tokens + got.prefill_tokens_skipped +
			    got.recomputed_tokens,
		    ref.prefill_tokens);
	printf("ok: %ld of %ld prompt tokens reused, %ld blocks recomputed\n",
	       got.prefill_tokens_skipped, got.prompt_tokens,
	       got.recomputed_blocks);
	free(a);
	free(b);
	tlm_model_free(&m);
	return 0;
}
