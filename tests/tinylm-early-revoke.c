/* SPDX-License-Identifier: MIT */
/*
 * timeout: 120
 * A revocation that reaches an early prefix open (KVMM_PREFIX_OPEN_EARLY)
 * before the engine waited for its reloads does not fail the turn:
 * kvmm_seq_wait_ready() answers -ESTALE (-ERANGE before ABI 1.20) for
 * blocks that have no pages any more, and tinylm applies the revocation,
 * waits only for the blocks
 * still backed and recomputes the rest, printing bitwise the tokens and
 * logit checksums of the private-memory reference.  (It used to fail the
 * turn: "waiting for reloads: Numerical result out of range".)
 *
 * tinylm --prefix-segments against a real kvmmd whose lru cache leaves
 * holes before host blocks (as tests/tinylm-prefix-early.sh); right after
 * each early open the admin revokes the new sequence from block 1 on.
 * The counters add up: every prompt token is prefilled, skipped (found
 * cached and never computed) or recomputed, by the plan or after the
 * revocation, once.
 */
#include "kvmm/lib/client.h"
#include "tests/lib/admin_revoke.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"
#include "tests/lib/tinylm_run.h"
#include "tools/tinylm/engine.c"
#include "tools/tinylm/kv-kvmm.c"
#include "tools/tinylm/kv-private.c"
#include "tools/tinylm/model.c"
#include "tools/tinylm/workload.c"

static struct td_daemon d;
static struct tlm_kv_ops revoking_ops;
static int (*real_open)(struct tlm_kv *kv, const int *tokens, int ntokens,
			struct tlm_restore *r);
static int injected;

/* The open, then (early, two blocks or more) a revocation from block 1. */
static int open_then_revoke(struct tlm_kv *kv, const int *tokens, int ntokens,
			    struct tlm_restore *r)
{
	struct kvmm_stats ks = { .size = sizeof(ks) };
	struct kv_kvmm *k = to_kvmm(kv);
	int ret = real_open(kv, tokens, ntokens, r);

	if (ret || !r->early || r->cached < 2 * r->tokens_per_block)
		return ret;
	t_ok(kvmm_get_stats(k->conn, &ks));
	t_ok(ar_revoke(d.sock, ks.session_id, k->region->id, (uint32_t)r->slot,
		       1));
	injected++;
	return 0;
}

static void revoke_on_open(struct tlm_engine *e)
{
	revoking_ops = *e->kv->ops;
	real_open = revoking_ops.seq_open;
	revoking_ops.seq_open = open_then_revoke;
	e->kv->ops = &revoking_ops;
}

static char *run(const struct tlm_model *m,
		 const struct tlm_workload_params *wl, bool kvmm,
		 struct tlm_engine_stats *st)
{
	struct tlm_engine_opts o = tl_opts(m, wl, 4, kvmm ? "kvmm" : "private");

	o.socket_path = d.sock;
	o.prefix_segments = kvmm;
	o.prefix_early = kvmm;
	return tl_run(o, wl, kvmm ? revoke_on_open : NULL, st);
}

int main(void)
{
	static const char *const extra[] = { "--page-size",
					     "4096",
					     "--gpu-mem",
					     "1M",
					     "--cache-policy",
					     "lru",
					     "--cache-gpu-blocks",
					     "6",
					     "--host-mem",
					     "48K",
					     NULL };
	struct tlm_workload_params wl;
	struct tlm_engine_stats ref, got;
	struct tlm_model m;

	tlm_workload_default(&wl);
	wl.conversations = 8;
	wl.turns = 4;
	wl.system_prompts = 2;
	wl.system_tokens = 128;
	wl.user_tokens = 16;
	wl.gen_tokens = 8;
	wl.vocab = tl_small_config.vocab_size;
	tl_small_model(&m);

	/* reloads still running when the engine first waits */
	setenv("KVMMD_TEST_RESTORE_DELAY_MS", "20", 1);
	td_start_ok(&d, extra);
	char *a = run(&m, &wl, false, &ref);
	char *b = run(&m, &wl, true, &got);
	tl_expect_same(a, b);
	printf("%d early opens revoked; %ld revocations seen, %ld tokens "
	       "recomputed after them\n",
	       injected, got.revocations_seen, got.revoked_tokens_recomputed);
	t_assert(injected > 0);
	t_assert(got.early_opens >= injected);
	t_assert(got.revocations_seen > 0);
	t_assert(got.revoked_tokens_recomputed > 0);
	/* nothing computed twice here: each prompt token counted once */
	t_assert_eq(got.prefill_tokens + got.prefill_tokens_skipped +
			    got.recomputed_tokens +
			    got.revoked_tokens_recomputed,
		    got.prompt_tokens);
	free(a);
	free(b);
	tlm_model_free(&m);
	td_stop_ok(&d);
	return T_PASS;
}
