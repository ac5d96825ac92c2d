/* SPDX-License-Identifier: MIT */
/*
 * What the tinylm engine tests that compare two runs of a workload share:
 * the small model (2 layers of 64 dims, 4 heads over 2 KV heads, a
 * vocabulary of 300, seed 5), a run of the engine whose printed tokens
 * and logit checksums are kept in memory, and the check that two runs
 * printed the same.  The test includes tools/tinylm's .c files itself
 * (it reaches into the engine's KV ops); this header needs only their
 * declarations.
 */
#ifndef KVMM_TESTS_TINYLM_RUN_H
#define KVMM_TESTS_TINYLM_RUN_H

#include <stdio.h>
#include <string.h>

#include "tests/lib/test.h"
#include "tools/tinylm/engine.h"

static const struct tlm_config tl_small_config = { .dim = 64,
						   .hidden_dim = 128,
						   .n_layers = 2,
						   .n_heads = 4,
						   .n_kv_heads = 2,
						   .vocab_size = 300,
						   .seq_len = 512 };

/* The small model, generated (tlm_model_free() it). */
static inline void tl_small_model(struct tlm_model *m)
{
	t_ok(tlm_model_generate(m, &tl_small_config, false, 5));
}

/* Engine options for workload wl on m: prefill chunks of 16 tokens,
 * max_seqs sequences, the KV cache kv_kind ("private" or "kvmm"). */
static inline struct tlm_engine_opts
tl_opts(const struct tlm_model *m, const struct tlm_workload_params *wl,
	int max_seqs, const char *kv_kind)
{
	return (struct tlm_engine_opts){
		.size = sizeof(struct tlm_engine_opts),
		.model = m,
		.chunk = 16,
		.max_seqs = max_seqs,
		.max_tokens = tlm_workload_max_tokens(wl),
		.kv_kind = kv_kind,
	};
}

/*
 * Run wl on an engine made with o (o.out is set here); hook, unless NULL,
 * changes the engine first (its KV ops).  The text the engine printed
 * (the caller frees it), its counters in *st; any failure fails the test.
 */
static inline char *tl_run(struct tlm_engine_opts o,
			   const struct tlm_workload_params *wl,
			   void (*hook)(struct tlm_engine *e),
			   struct tlm_engine_stats *st)
{
	struct tlm_engine *e;
	char *text = NULL, err[256];
	size_t len = 0;

	o.out = open_memstream(&text, &len);
	t_assert(o.out);
	if (tlm_engine_create(&o, &e, err, sizeof(err)))
		t_fail("engine: %s", err);
	if (hook)
		hook(e);
	if (tlm_engine_run_workload(e, wl, 0, 1))
		t_fail("workload: %s", tlm_engine_error(e));
	*st = *tlm_engine_stats(e);
	tlm_engine_destroy(e);
	fclose(o.out);
	return text;
}

/* The same tokens and logit checksums in a and b, or the test fails. */
static inline void tl_expect_same(const char *a, const char *b)
{
	if (strcmp(a, b))
		t_fail("tokens or logit checksums differ:\n%s\n---\n%s", a, b);
}

#endif
