/* SPDX-License-Identifier: MIT */
/*
 * Cost model: what a missing KV block costs the GPU, by each way of
 * reconstructing it exactly.  For a block of B tokens starting at token
 * position p (p = B * index for a block at index `index`):
 *
 *   bytes         = B * kv_bytes_per_token
 *   kv_bytes_per_token = 2 * layers * kv_heads * head_dim * dtype_bytes
 *   reload(tier)  = bytes / bandwidth[tier] + latency[tier]
 *   flops(p, B)   = linear_flops_per_token * B
 *                 + attn_coef * B * (p + (B + 1) / 2)
 *   attn_coef     = 4 * layers * q_heads * head_dim   (QK^T and PV)
 *   recompute     = flops(p, B) / (peak_flops * efficiency)
 *   msa(k)        = 1 + msa_alpha * (k - 1)
 *
 * msa(k) is the slowdown of attention over a context split into k
 * segments (Multi-Segment Attention), applied to the attention term.
 *
 * Profiles are text files of "key = value" lines ('#' starts a comment);
 * see kvmm/policy/profiles/.  The reference profile h200-llama3-8b-ref is
 * also built in, so replays are comparable wherever they run.
 *
 * Online correction: the daemon reports measured transfers and compute
 * with pol_cost_observe_*(); each moves the rate by an exponentially
 * weighted average (weight `ewma_weight`), never below 1/8 or above 8x
 * the profile's value so a bad measurement cannot wreck the model.
 */
#ifndef KVMM_POLICY_COST_MODEL_H
#define KVMM_POLICY_COST_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvmm/policy/block_index.h"

struct pol_cost_model {
	char name[64];
	/* model */
	uint32_t layers, q_heads, kv_heads, head_dim, dtype_bytes;
	uint32_t tokens_per_block;
	double linear_flops_per_token;
	double attn_coef; /* 0 in a profile: 4 * layers * q_heads * head_dim */
	/* hardware */
	double peak_flops;
	double efficiency; /* achieved share of peak_flops in prefill */
	double bandwidth[POL_TIER_COUNT]; /* bytes/s into GPU memory */
	double latency[POL_TIER_COUNT]; /* s per request */
	double msa_alpha;
	/* restore plans: smallest recompute chunk that keeps the GPU busy */
	uint32_t min_chunk_tokens;
	uint32_t max_chunk_tokens;
	double ewma_weight;
	/* the profile's values, the bounds of online correction */
	double base_bandwidth[POL_TIER_COUNT];
	double base_efficiency;
};

/*
 * Load a profile by name (looked up as NAME.profile in $KVMM_PROFILE_DIR,
 * $KVMM_SRC/kvmm/policy/profiles, ./kvmm/policy/profiles, the running
 * executable's tree (EXEDIR/../kvmm/policy/profiles, then
 * EXEDIR/../share/kvmm/profiles), the installed DATADIR/profiles, then
 * the built-in reference; policy.md has the whole order) or by path (anything containing a '/' or ending in
 * .profile).  err (may be NULL) gets a message on failure.
 * Returns 0, -ENOENT, -EINVAL (bad line; err says which) or -ENOMEM.
 */
int pol_cost_load(const char *name_or_path, struct pol_cost_model *m, char *err,
		  size_t errlen);
/* Parse profile text; same errors. */
int pol_cost_parse(const char *text, const char *name, struct pol_cost_model *m,
		   char *err, size_t errlen);
/*
 * s is a decimal number as profiles and kvmm-agentgen's options take it:
 * digits[.digits][e[+-]digits] (or .digits...), only digits when
 * integer; no sign, hex, nan, inf or blanks, all of which strtod takes
 * (and nan passes every range check).
 */
bool pol_decimal_syntax(const char *s, bool integer);
/* The built-in h200-llama3-8b-ref profile. */
void pol_cost_reference(struct pol_cost_model *m);
/*
 * The whole of a profile-sized text file (at most 1 MiB), NUL-terminated,
 * for the caller to free(); NULL with errno set if it cannot be opened or
 * read, is larger (EFBIG), a directory (EISDIR) or no regular file
 * (EINVAL: a FIFO is not waited on).
 * kvmm-calibrate reads its --base profile with it.
 */
char *pol_cost_read_text(const char *path);

double pol_cost_kv_bytes_per_token(const struct pol_cost_model *m);
double pol_cost_block_bytes(const struct pol_cost_model *m);
double pol_cost_attn_coef(const struct pol_cost_model *m);
/* FLOPs to prefill `tokens` tokens that start at token position `pos`. */
double pol_cost_flops(const struct pol_cost_model *m, double pos,
		      double tokens);
double pol_cost_compute_s(const struct pol_cost_model *m, double flops);
/* Recompute the full block at block index `index`. */
double pol_cost_recompute_block_s(const struct pol_cost_model *m,
				  uint32_t index);
/* Reload `bytes` from a tier (POL_TIER_GPU: a device-to-device copy). */
double pol_cost_reload_s(const struct pol_cost_model *m, unsigned tier,
			 double bytes);
double pol_cost_reload_block_s(const struct pol_cost_model *m, unsigned tier);
/* Attention slowdown over a context split into k >= 1 segments. */
double pol_cost_msa_factor(const struct pol_cost_model *m, unsigned k);

/* Online correction from measurements. */
void pol_cost_observe_transfer(struct pol_cost_model *m, unsigned tier,
			       double bytes, double seconds);
void pol_cost_observe_compute(struct pol_cost_model *m, double flops,
			      double seconds);

#endif
