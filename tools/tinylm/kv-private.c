/* SPDX-License-Identifier: MIT */
/*
 * Private-memory KV cache: the reference the kvmm-backed cache is compared
 * against.  One anonymous mapping per (layer, K|V) in the vAttention layout;
 * pages are touched lazily by the kernel, so max_seqs * max_tokens can be
 * generous without costing memory.  Nothing is ever shared or evicted.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "tinylm.h"

struct kv_private {
	struct tlm_kv kv;
	size_t range_bytes;
	int next_slot;
	float **ranges; /* 2 * layers: K0, V0, K1, V1, ... */
};

static struct kv_private *to_private(struct tlm_kv *kv)
{
	return (struct kv_private *)kv;
}

/* Slots are handed out round robin; private memory never has a prefix hit. */
static int private_seq_open(struct tlm_kv *kv, const int *tokens, int ntokens,
			    struct tlm_restore *r)
{
	struct kv_private *p = to_private(kv);

	if (ntokens > kv->max_tokens)
		return -E2BIG;
	*r = (struct tlm_restore){ .slot = p->next_slot };
	p->next_slot = (p->next_slot + 1) % kv->max_seqs;
	return 0;
}

static int private_seq_close(struct tlm_kv *kv, int slot, const int *tokens,
			     int ntokens)
{
	return 0;
}

static int private_extend(struct tlm_kv *kv, int slot, int ntokens)
{
	if (slot < 0 || slot >= kv->max_seqs || ntokens < 0 ||
	    ntokens > kv->max_tokens)
		return -EINVAL;
	return 0;
}

static int private_backed(struct tlm_kv *kv, int slot)
{
	return kv->max_tokens;
}

static float *slot_base(struct tlm_kv *kv, int layer, int which, int slot)
{
	struct kv_private *p = to_private(kv);
	return p->ranges[2 * layer + which] +
	       (size_t)slot * kv->max_tokens * kv->kv_dim;
}

static float *private_k(struct tlm_kv *kv, int layer, int slot)
{
	return slot_base(kv, layer, 0, slot);
}

static float *private_v(struct tlm_kv *kv, int layer, int slot)
{
	return slot_base(kv, layer, 1, slot);
}

static int private_step(struct tlm_kv *kv)
{
	return 0;
}

static void private_destroy(struct tlm_kv *kv)
{
	struct kv_private *p = to_private(kv);

	for (int i = 0; i < 2 * kv->layers; i++)
		if (p->ranges[i])
			munmap(p->ranges[i], p->range_bytes);
	free(p->ranges);
	free(p);
}

static const struct tlm_kv_ops private_ops = {
	.name = "private",
	.seq_open = private_seq_open,
	.publish = NULL,
	.seq_close = private_seq_close,
	.extend = private_extend,
	.backed = private_backed,
	.k = private_k,
	.v = private_v,
	.step_begin = private_step,
	.step_end = private_step,
	.destroy = private_destroy,
};

int tlm_kv_private_create(const struct tlm_model *m, int max_seqs,
			  int max_tokens, struct tlm_kv **out)
{
	struct kv_private *p;

	if (max_seqs <= 0 || max_tokens <= 0)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->kv = (struct tlm_kv){
		.ops = &private_ops,
		.layers = m->cfg.n_layers,
		.kv_heads = m->cfg.n_kv_heads,
		.head_dim = m->head_dim,
		.kv_dim = m->kv_dim,
		.max_seqs = max_seqs,
		.max_tokens = max_tokens,
	};
	p->range_bytes =
		(size_t)max_seqs * max_tokens * m->kv_dim * sizeof(float);
	p->ranges = calloc(2 * (size_t)m->cfg.n_layers, sizeof(float *));
	if (!p->ranges)
		goto err_free;
	for (int i = 0; i < 2 * m->cfg.n_layers; i++) {
		void *r = mmap(NULL, p->range_bytes, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
			       0);
		if (r == MAP_FAILED)
			goto err_unmap;
		p->ranges[i] = r;
	}
	*out = &p->kv;
	return 0;
err_unmap:
	private_destroy(&p->kv);
	return -ENOMEM;
err_free:
	free(p);
	return -ENOMEM;
}
