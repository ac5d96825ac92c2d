/* SPDX-License-Identifier: MIT */
/*
 * tinylm — a small Llama-style decoder whose KV cache lives behind an
 * interface with the vAttention layout, so the same model runs on private
 * memory (the reference) and on a kvmm region.
 *
 * Model: token embedding, per layer RMSNorm -> grouped-query attention with
 * rotary embeddings -> residual -> RMSNorm -> SwiGLU MLP -> residual, final
 * RMSNorm and a classifier.  The weight layout and the checkpoint file are
 * those of karpathy/llama2.c (run.c): a header of 7 int32 then fp32 weights,
 * a negative vocab_size meaning "classifier not shared with the embedding".
 *
 * Batch invariance: every token goes through exactly the same sequence of
 * floating point operations whatever the chunk it is computed in (one dot
 * product routine with a fixed 8-lane order, attention over positions in
 * increasing order, no reduction whose order depends on the chunk).  So a
 * block recomputed later, at its original positions and attending to the
 * cached KV before it, produces bitwise the same K, V and logits.
 *
 * KV layout (vAttention): for every (layer, K|V) one contiguous range of
 * max_seqs * max_tokens * kv_heads * head_dim floats; sequence slot s starts
 * at s * max_tokens * kv_dim, token t of it at + t * kv_dim.
 */
#ifndef TINYLM_H
#define TINYLM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* llama2.c Config, in file order. */
struct tlm_config {
	int32_t dim; /* residual width */
	int32_t hidden_dim; /* MLP width */
	int32_t n_layers;
	int32_t n_heads; /* query heads; head_dim = dim / n_heads */
	int32_t n_kv_heads; /* key/value heads (GQA) */
	int32_t vocab_size;
	int32_t seq_len; /* max tokens per sequence */
};

struct tlm_weights {
	float *token_embedding; /* vocab x dim */
	float *rms_att; /* layers x dim */
	float *wq; /* layers x dim x dim (out x in) */
	float *wk; /* layers x kv_dim x dim */
	float *wv; /* layers x kv_dim x dim */
	float *wo; /* layers x dim x dim */
	float *rms_ffn; /* layers x dim */
	float *w1; /* layers x hidden x dim */
	float *w2; /* layers x dim x hidden */
	float *w3; /* layers x hidden x dim */
	float *rms_final; /* dim */
	float *wcls; /* vocab x dim; == token_embedding when shared */
};

struct tlm_model {
	struct tlm_config cfg;
	int head_dim, kv_dim;
	bool shared_classifier;
	struct tlm_weights w;
	float *data; /* one allocation holding every tensor */
	size_t data_floats;
};

/*
 * The KV cache as the model sees it.  Sequences are identified by a slot in
 * [0, max_seqs).  k()/v() return the base of the slot's range for a layer;
 * token t lives at + t * kv_dim floats.
 */
struct tlm_kv;

/*
 * What opening a sequence found: slot is the sequence's slot; the first
 * `cached` prompt tokens have their KV in it once the engine has
 * recomputed the listed blocks (ascending block indexes of tokens_per_block
 * tokens each, all below cached / tokens_per_block), at their original
 * positions.  cached is always below the prompt length so the last prompt
 * token, whose logits are needed, is computed.  The counters describe
 * where the cached blocks came from.
 */
struct tlm_restore {
	int slot;
	int cached;
	int tokens_per_block;
	int nrecompute;
	const int *recompute;
	const uint64_t *recompute_hashes; /* their block hashes, or NULL */
	long shared_blocks; /* mapped zero-copy from the GPU tier */
	long restored_host; /* reloaded from host memory */
	long restored_nvme; /* reloaded from the NVMe tier */
	long prefix_blocks; /* cached blocks found, wherever they were */
	/*
	 * The open returned before its reloads were done (--prefix-segments
	 * with kvmmd ABI 1.8): the engine calls wait_ready() for the blocks
	 * below each one it computes.
	 */
	bool early;
	/*
	 * Blocks shared or reloaded after a block to recompute: with
	 * --prefix-segments, the cached blocks after a hole.  Without it,
	 * only GPU blocks after a lower-tier block that kvmmd handed out to
	 * recompute (--restore-mode recompute); the actions do not tell a
	 * hole from a planned recompute.
	 */
	long reused_after_hole;
	/*
	 * Blocks past the cached prefix that this process had published
	 * before: the cache evicted them, so the prefill recomputes them at
	 * their original positions (patching by recomputation).
	 */
	long evicted_blocks;
	/*
	 * Every block of the prompt was cached (a repeated prompt ending on
	 * a block boundary): cached is ntokens - 1, the last token is
	 * computed again for its logits, and the extend over it makes its
	 * shared block the sequence's own copy first (kvmm ABI 1.20).
	 */
	bool last_block_copied;
};

struct tlm_kv_ops {
	const char *name;
	/*
	 * Open a sequence for a prompt (prefix lookup and restore plan;
	 * nothing cached on private memory).  Reloads are complete when this
	 * returns.  Close releases the sequence; tokens is its content then.
	 */
	int (*seq_open)(struct tlm_kv *kv, const int *tokens, int ntokens,
			struct tlm_restore *r);
	/* Offer the full blocks among tokens[0, ntokens) for sharing. */
	int (*publish)(struct tlm_kv *kv, int slot, const int *tokens,
		       int ntokens);
	int (*seq_close)(struct tlm_kv *kv, int slot, const int *tokens,
			 int ntokens);
	/* Make tokens [0, ntokens) of the slot addressable and writable. */
	int (*extend)(struct tlm_kv *kv, int slot, int ntokens);
	/*
	 * How many leading tokens of the slot are still backed: fewer than
	 * extended when the cache took pages back (revocation).  Valid inside
	 * a step; those tokens' KV is intact, the rest must be recomputed
	 * but for the blocks readonly() names.
	 */
	int (*backed)(struct tlm_kv *kv, int slot);
	/*
	 * Is block b of the slot the cache's read-only copy (a block a
	 * prefix open shared)?  1 yes, 0 the sequence's own, -errno.  Such
	 * a block is never among the tokens to recompute: it holds exactly
	 * these tokens' KV, a revocation unmaps it and whatever backs it
	 * again is the sequence's own; and a write into it faults.  Valid
	 * inside a step.  NULL: every block is the sequence's own.
	 */
	int (*readonly)(struct tlm_kv *kv, int slot, int block);
	float *(*k)(struct tlm_kv *kv, int layer, int slot);
	float *(*v)(struct tlm_kv *kv, int layer, int slot);
	/* Around each forward pass: pointers are stable between the two. */
	int (*step_begin)(struct tlm_kv *kv);
	int (*step_end)(struct tlm_kv *kv);
	void (*destroy)(struct tlm_kv *kv);
	/*
	 * After an early open (tlm_restore.early): wait until the slot's
	 * blocks below upto_block are loaded.  Returns how many of them
	 * failed to load (*failed: their numbers, ascending; they are to be
	 * recomputed like the plan's blocks), or -errno.  NULL: not early.
	 * Blocks taken back meanwhile (revocation) are not waited for: the
	 * cache applies the revocation, backed() then reports fewer tokens
	 * and the engine's next step recomputes them.
	 */
	int (*wait_ready)(struct tlm_kv *kv, int slot, int upto_block,
			  const int **failed);
};

struct tlm_kv {
	const struct tlm_kv_ops *ops;
	int layers, kv_heads, head_dim, kv_dim;
	int max_seqs, max_tokens;
	int tokens_per_block; /* 0: no blocks (private memory) */
};

/* Private-memory KV: the reference implementation. */
int tlm_kv_private_create(const struct tlm_model *m, int max_seqs,
			  int max_tokens, struct tlm_kv **out);

/* Default model: small enough for a 2-core machine, GQA 8 q / 2 kv heads. */
void tlm_config_default(struct tlm_config *cfg);
/* 0 or -EINVAL with a message in err (size errlen). */
int tlm_config_check(const struct tlm_config *cfg, char *err, size_t errlen);

/* Weights generated deterministically from seed. */
int tlm_model_generate(struct tlm_model *m, const struct tlm_config *cfg,
		       bool shared_classifier, uint64_t seed);
/* llama2.c checkpoint load/save.  0 or -errno; err gets a reason. */
int tlm_model_load(struct tlm_model *m, const char *path, char *err,
		   size_t errlen);
int tlm_model_save(const struct tlm_model *m, const char *path);
void tlm_model_free(struct tlm_model *m);

/* Scratch buffers for a forward pass over up to max_chunk tokens. */
struct tlm_state;
int tlm_state_create(const struct tlm_model *m, int max_chunk,
		     struct tlm_state **out);
void tlm_state_destroy(struct tlm_state *s);

/*
 * Run n tokens at positions pos0.. of the sequence in slot through every
 * layer, writing their K and V into kv and attending to positions
 * [0, pos0 + i] for token i.  The caller has extended the slot to pos0 + n.
 * logits: NULL, or n x vocab floats (all_logits) or vocab floats (the
 * last token only).  Chunks larger than the state's max_chunk are split;
 * the result is the same bitwise whatever the split.
 */
int tlm_forward(const struct tlm_model *m, struct tlm_state *s,
		struct tlm_kv *kv, int slot, const int *tokens, int pos0, int n,
		float *logits, bool all_logits);

/* Greedy (temperature <= 0) or seeded sampling; ties go to the low id. */
int tlm_sample(const float *logits, int vocab, float temperature,
	       uint64_t rng_seed);

/* FNV-1a 64 over the bit patterns of n floats. */
uint64_t tlm_checksum(const float *v, size_t n);

/* splitmix64: the generator behind weights, workloads and sampling. */
static inline uint64_t tlm_mix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/*
 * Workload: conversations that share system prompts, several turns each.
 * Turn k's prompt is the whole conversation so far (system prompt, earlier
 * user messages and generated answers) plus a new user message.
 */
struct tlm_workload_params {
	uint64_t seed;
	int conversations;
	int turns;
	int system_prompts; /* distinct system prompts shared by conversations */
	int system_tokens;
	int user_tokens;
	int gen_tokens;
	int vocab;
	/* every repeat_every-th turn (0: none) is asked twice, the same
	 * prompt again: a user's regenerate, a client's retry, sampled
	 * anew (tlm_engine_run_turn()'s repeat); the conversation goes on
	 * from the second answer */
	int repeat_every;
};

void tlm_workload_default(struct tlm_workload_params *p);
int tlm_workload_max_tokens(const struct tlm_workload_params *p);
/* Token ids of the system prompt used by conversation c (out: system_tokens). */
void tlm_workload_system(const struct tlm_workload_params *p, int c, int *out);
/* User message of turn k of conversation c (out: user_tokens). */
void tlm_workload_user(const struct tlm_workload_params *p, int c, int k,
		       int *out);
/* Is turn k of conversation c asked twice (repeat_every)? */
bool tlm_workload_repeated(const struct tlm_workload_params *p, int c, int k);

#endif
