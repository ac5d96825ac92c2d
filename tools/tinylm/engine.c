/* SPDX-License-Identifier: MIT */
/*
 * tinylm engine: the serving loop on top of the model and a KV cache.
 *
 * A turn opens a sequence for its prompt; the cache says how many leading
 * tokens it already holds (a prefix hit).  The rest of the prompt is
 * prefilled in chunks, then tokens are decoded one at a time, each forward
 * pass bracketed by step_begin/step_end so the cache can apply revocations
 * only between passes.  Every generated token is printed with the FNV
 * checksum of the logits it was sampled from.  Sampling randomness is a
 * function of (sample seed, conversation, turn, repeat, index) only, so a
 * run's output does not depend on what was cached.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ebpf/probes.h"
#include "engine.h"

struct tlm_engine {
	struct tlm_engine_opts o;
	const struct tlm_model *m;
	struct tlm_state *state;
	struct tlm_kv *kv;
	float *logits;
	/* per token of a turn's found prefix: computed by the turn */
	unsigned char *prefix_computed;
	struct tlm_engine_stats st;
	char err[256];
};

int tlm_kv_kvmm_create(const struct tlm_model *m, int max_seqs, int max_tokens,
		       const char *socket_path, bool segments, bool early,
		       struct tlm_kv **out, char *err, size_t errlen);

int tlm_engine_create(const struct tlm_engine_opts *o, struct tlm_engine **out,
		      char *err, size_t errlen)
{
	struct tlm_engine *e;
	int ret;

	if (o->size < sizeof(*o)) {
		snprintf(err, errlen, "engine options too old");
		return -EINVAL;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->o = *o;
	e->m = o->model;
	if (!e->o.out)
		e->o.out = stdout;
	e->logits = malloc(e->m->cfg.vocab_size * sizeof(float));
	e->prefix_computed = calloc((size_t)o->max_tokens + 1, 1);
	if (!e->logits || !e->prefix_computed) {
		ret = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto err_free;
	}
	ret = tlm_state_create(e->m, o->chunk, &e->state);
	if (ret) {
		snprintf(err, errlen, "scratch buffers: %s", strerror(-ret));
		goto err_free;
	}
	if (!strcmp(o->kv_kind, "kvmm")) {
		ret = tlm_kv_kvmm_create(e->m, o->max_seqs, o->max_tokens,
					 o->socket_path, o->prefix_segments,
					 o->prefix_early, &e->kv, err, errlen);
	} else {
		ret = tlm_kv_private_create(e->m, o->max_seqs, o->max_tokens,
					    &e->kv);
		if (ret)
			snprintf(err, errlen, "private KV cache: %s",
				 strerror(-ret));
	}
	if (ret)
		goto err_state;
	*out = e;
	return 0;
err_state:
	tlm_state_destroy(e->state);
err_free:
	free(e->prefix_computed);
	free(e->logits);
	free(e);
	return ret;
}

void tlm_engine_destroy(struct tlm_engine *e)
{
	if (!e)
		return;
	if (e->kv)
		e->kv->ops->destroy(e->kv);
	tlm_state_destroy(e->state);
	free(e->prefix_computed);
	free(e->logits);
	free(e);
}

const char *tlm_engine_error(const struct tlm_engine *e)
{
	return e->err;
}

const struct tlm_engine_stats *tlm_engine_stats(const struct tlm_engine *e)
{
	return &e->st;
}

static int fail(struct tlm_engine *e, int ret, const char *what)
{
	snprintf(e->err, sizeof(e->err), "%s: %s", what, strerror(-ret));
	return ret;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* A sequence being served: its slot, tokens and how far its KV is valid. */
struct turn {
	int slot;
	const int *tokens; /* the whole sequence */
	int written; /* tokens [0, written) hold their KV */
	int prefix; /* tokens found cached at the open */
	/* prefix tokens this turn computed (holes, failed reloads, tokens
	 * lost to revocations), each once, in computed[] */
	int prefix_computed;
	unsigned char *computed;
};

/* Tokens [a, b) go through a forward pass: count those of the prefix. */
static void mark_computed(struct turn *t, int a, int b)
{
	if (b > t->prefix)
		b = t->prefix;
	for (int i = a; i < b; i++) {
		if (!t->computed[i]) {
			t->computed[i] = 1;
			t->prefix_computed++;
		}
	}
}

/* Clamp t->written to what the cache still backs; returns the backed count. */
static int lost_since(struct tlm_engine *e, struct turn *t)
{
	int backed = e->kv->ops->backed(e->kv, t->slot);

	if (backed < t->written) {
		e->st.revocations_seen++;
		t->written = backed;
	}
	return backed;
}

/* Tokens [a, end) through a forward pass again, counted as recomputed. */
static int recompute_run(struct tlm_engine *e, struct turn *t, int a, int end)
{
	int tpb = e->kv->tokens_per_block;
	int ret = tlm_forward(e->m, e->state, e->kv, t->slot, t->tokens + a, a,
			      end - a, NULL, false);

	if (ret)
		return ret;
	mark_computed(t, a, end);
	e->st.revoked_tokens_recomputed += end - a;
	if (tpb > 0)
		e->st.revoked_blocks_recomputed +=
			(end - 1) / tpb - a / tpb + 1;
	return 0;
}

/*
 * Recompute the tokens [t->written, pos0) a revocation took back, at their
 * original positions, run of writable blocks by run.  The lost range can
 * cover read-only blocks (the cache's copy, shared by a prefix open): an
 * extend that applied a revocation does not say which blocks lost their
 * data, so kv-kvmm.c reports the whole sequence lost.  Those are skipped:
 * no revocation took them, since a revoked block is unmapped and backed
 * again by the sequence's own pages, so they still hold these tokens' KV;
 * and a write into one faults (host: SIGSEGV).  Tokens after a skipped
 * block attend over it as over any KV before them.
 */
static int recompute_lost(struct tlm_engine *e, struct turn *t, int pos0)
{
	struct tlm_kv *kv = e->kv;
	int tpb = kv->tokens_per_block, a = t->written, ret;

	if (tpb <= 0 || !kv->ops->readonly)
		return recompute_run(e, t, a, pos0);
	while (a < pos0) {
		int end = a, ro = 0;

		/* the sequence's own blocks from a on */
		while (end < pos0 &&
		       !(ro = kv->ops->readonly(kv, t->slot, end / tpb)))
			end = (end / tpb + 1) * tpb;
		if (ro < 0)
			return ro;
		if (end > pos0)
			end = pos0;
		if (end > a) {
			ret = recompute_run(e, t, a, end);
			if (ret)
				return ret;
		}
		/* then the read-only block at end, if any, is skipped */
		a = (end / tpb + 1) * tpb;
	}
	return 0;
}

/*
 * One forward pass of tokens [pos0, pos0 + n), bracketed as one engine
 * step.  Revocations are applied at step boundaries and may take back the
 * sequence's pages from some block on: the cache then reports fewer backed
 * tokens, and the lost tail before pos0 is recomputed at its original
 * positions inside the same step (batch invariance makes it bitwise what
 * was there) before the new tokens run.  The pass is this engine's
 * "kernel": its latency goes to the kvmm:kernel probe (prefill for chunks,
 * attention for single-token decode) that calibrates kvmm's cost model.
 */
static int step(struct tlm_engine *e, struct turn *t, int pos0, int n)
{
	struct tlm_kv *kv = e->kv;
	uint64_t t0 = 0;
	int ret, tries = 0, waits = 0;

	for (;;) {
		/* Revocations applied at the end of the last step ... */
		lost_since(e, t);
		ret = kv->ops->extend(kv, t->slot, pos0 + n);
		/*
		 * The pool is shared with other engines: when it is full of
		 * their live sequences, wait for one to finish (up to 60 s)
		 * rather than fail the request.
		 */
		if (ret == -ENOMEM && ++waits <= 6000) {
			if (waits == 1)
				e->st.pool_waits++;
			usleep(10000);
			continue;
		}
		if (ret)
			return fail(e, ret, "extending the sequence");
		ret = kv->ops->step_begin(kv);
		if (ret)
			return fail(e, ret, "step begin");
		/* ... and at its beginning. */
		if (lost_since(e, t) >= pos0 + n)
			break;
		/* Taken back between extend and step begin: grow again. */
		kv->ops->step_end(kv);
		if (++tries == 1000)
			return fail(e, -EAGAIN, "pages revoked on every step");
	}
	if (t->written < pos0) {
		ret = recompute_lost(e, t, pos0);
		if (ret)
			goto out_end;
	}
	if (KVMM_PROBE_ENABLED(kernel))
		t0 = now_ns();
	ret = tlm_forward(e->m, e->state, kv, t->slot, t->tokens + pos0, pos0,
			  n, e->logits, false);
	if (t0)
		kvmm_probe_kernel(n > 1 ? KVMM_TEL_PREFILL : KVMM_TEL_ATTENTION,
				  now_ns() - t0, 1, (uint64_t)pos0 + n);
	if (!ret)
		mark_computed(t, pos0, pos0 + n);
	if (!ret && pos0 + n > t->written)
		t->written = pos0 + n;
out_end:;
	int end = kv->ops->step_end(kv);
	if (ret)
		return fail(e, ret, "forward pass");
	if (end)
		return fail(e, end, "step end");
	e->st.steps++;
	if (e->o.step_delay_us)
		usleep(e->o.step_delay_us);
	return 0;
}

/* Recompute block b of the turn at its original positions. */
static int recompute_block(struct tlm_engine *e, struct turn *t,
			   const struct tlm_restore *r, int b, uint64_t hash)
{
	int b0 = b * r->tokens_per_block, ret;
	uint64_t t0 = now_ns();

	ret = step(e, t, b0, r->tokens_per_block);
	if (ret)
		return ret;
	kvmm_probe_recompute(hash, (uint64_t)b0, (uint32_t)r->tokens_per_block,
			     now_ns() - t0);
	e->st.recomputed_blocks++;
	e->st.recomputed_tokens += r->tokens_per_block;
	return 0;
}

/*
 * After an early open: blocks [*done, upto) are needed (the next block to
 * recompute attends over them, or the prefill over all): wait for their
 * reloads, and recompute those that failed, in ascending order (each
 * attends over the blocks before it, which are valid by then).  The
 * reloads of later blocks go on meanwhile.
 */
static int ready_upto(struct tlm_engine *e, struct turn *t,
		      const struct tlm_restore *r, int *done, int upto)
{
	const int *failed = NULL;
	int n, ret;

	if (upto <= *done)
		return 0;
	n = e->kv->ops->wait_ready(e->kv, t->slot, upto, &failed);
	if (n < 0)
		return fail(e, n, "waiting for reloads");
	for (int i = 0; i < n; i++) {
		if (failed[i] < *done)
			continue; /* recomputed after an earlier wait */
		ret = recompute_block(e, t, r, failed[i], 0);
		if (ret)
			return ret;
		e->st.reload_failures++;
	}
	*done = upto;
	return 0;
}

int tlm_engine_run_turn(struct tlm_engine *e, int *tokens, int len, int gen,
			int conv, int turn, int repeat)
{
	struct tlm_kv *kv = e->kv;
	struct tlm_restore r;
	int slot, cached, ret, done = 0;
	uint64_t t_open = now_ns();

	if (len <= 0 || gen <= 0 || len + gen > e->o.max_tokens) {
		snprintf(e->err, sizeof(e->err),
			 "turn of %d + %d tokens does not fit in %d", len, gen,
			 e->o.max_tokens);
		return -E2BIG;
	}
	ret = kv->ops->seq_open(kv, tokens, len, &r);
	if (ret)
		return fail(e, ret, "opening a sequence");
	slot = r.slot;
	cached = r.cached;
	struct turn t = { .slot = slot,
			  .tokens = tokens,
			  .written = cached,
			  .prefix = cached,
			  .computed = e->prefix_computed };
	if (cached < 0 || cached >= len) {
		snprintf(e->err, sizeof(e->err),
			 "the KV cache claims %d of %d prompt tokens", cached,
			 len);
		ret = -EPROTO;
		goto out_close;
	}
	memset(t.computed, 0, cached);
	e->st.sequences++;
	e->st.prompt_tokens += len;
	e->st.shared_blocks += r.shared_blocks;
	e->st.restored_host += r.restored_host;
	e->st.restored_nvme += r.restored_nvme;
	e->st.prefix_blocks += r.prefix_blocks;
	e->st.reused_after_hole += r.reused_after_hole;
	e->st.evicted_blocks_recomputed += r.evicted_blocks;
	if (r.early && !kv->ops->wait_ready) {
		ret = -EPROTO;
		goto out_close;
	}
	e->st.early_opens += r.early;
	/*
	 * Patch the blocks nobody could reload: recompute each at its
	 * original positions, attending to the KV before it.  Batch
	 * invariance makes the result bitwise what was there.  After an
	 * early open, only the reloads below each block are waited for:
	 * the later ones load while it is recomputed.
	 */
	for (int i = 0; i < r.nrecompute; i++) {
		int b0 = r.recompute[i] * r.tokens_per_block;
		if (b0 < 0 || b0 + r.tokens_per_block > cached) {
			snprintf(e->err, sizeof(e->err),
				 "restore plan names block %d beyond the %d "
				 "cached tokens",
				 r.recompute[i], cached);
			ret = -EPROTO;
			goto out_close;
		}
		if (r.early) {
			ret = ready_upto(e, &t, &r, &done, r.recompute[i]);
			if (ret)
				goto out_close;
			done = r.recompute[i] + 1;
		}
		ret = recompute_block(
			e, &t, &r, r.recompute[i],
			r.recompute_hashes ? r.recompute_hashes[i] : 0);
		if (ret)
			goto out_close;
	}
	/* the prefill attends over the whole prefix (and copies the block
	 * of the last prompt token, when the prefix has it) */
	if (r.early) {
		ret = ready_upto(e, &t, &r, &done,
				 (cached + r.tokens_per_block - 1) /
					 r.tokens_per_block);
		if (ret)
			goto out_close;
	}
	e->st.prefix_ready_ns += now_ns() - t_open;
	e->st.prefill_tokens += len - cached;
	/* a copy only of a block still shared (a failed reload is ours) */
	bool copy =
		r.last_block_copied &&
		(!kv->ops->readonly ||
		 kv->ops->readonly(kv, slot, cached / r.tokens_per_block) == 1);
	ret = step(e, &t, cached, len - cached);
	if (ret)
		goto out_close;
	e->st.blocks_unshared += copy;
	/*
	 * The prefix tokens whose KV the turn did not compute up to here:
	 * not the plan's blocks, the failed reloads, nor what a revocation
	 * took back before the prefill (recomputed, in that step too).
	 */
	e->st.prefill_tokens_skipped += cached - t.prefix_computed;
	if (kv->ops->publish) {
		ret = kv->ops->publish(kv, slot, tokens, len);
		if (ret) {
			fail(e, ret, "publishing blocks");
			goto out_close;
		}
	}
	for (int g = 0; g < gen; g++) {
		int vocab = e->m->cfg.vocab_size;
		uint64_t sum = tlm_checksum(e->logits, vocab);
		/* a repeat (a regenerate) draws anew: repeat 0, the
		 * first ask, keeps the seeds of a run without repeats */
		uint64_t rs = e->o.sample_seed ^ ((uint64_t)repeat << 56) ^
			      ((uint64_t)conv << 40) ^ ((uint64_t)turn << 24) ^
			      (uint64_t)g;
		int tok = tlm_sample(e->logits, vocab, e->o.temperature,
				     tlm_mix64(&rs));
		tokens[len + g] = tok;
		e->st.tokens_generated++;
		if (!e->o.quiet)
			fprintf(e->o.out, "tok %d %d %d %d %016" PRIx64 "\n",
				conv, turn, g, tok, sum);
		if (g + 1 < gen) {
			ret = step(e, &t, len + g, 1);
			if (ret)
				goto out_close;
		}
	}
out_close:;
	/* The last generated token was never fed, so its KV is not there. */
	int close = kv->ops->seq_close(kv, slot, tokens, len + gen - 1);
	if (!ret && close)
		return fail(e, close, "closing the sequence");
	return ret;
}

int tlm_engine_run_prompt(struct tlm_engine *e, const int *prompt, int len,
			  int gen)
{
	int *buf = malloc((size_t)(len + gen) * sizeof(int));
	int ret;

	if (!buf)
		return fail(e, -ENOMEM, "prompt buffer");
	memcpy(buf, prompt, len * sizeof(int));
	ret = tlm_engine_run_turn(e, buf, len, gen, 0, 0, 0);
	free(buf);
	return ret;
}

/*
 * A client's conversations advance together, one turn of each per round
 * (users think between turns), so a conversation's earlier blocks have
 * aged in the cache by the time its next turn comes; the output does not
 * depend on the order.
 */
int tlm_engine_run_workload(struct tlm_engine *e,
			    const struct tlm_workload_params *wl, int client,
			    int clients)
{
	int max = tlm_workload_max_tokens(wl);
	int mine = (wl->conversations - client + clients - 1) / clients;
	int *buf, *len, ret = 0;

	if (mine <= 0)
		return 0;
	buf = malloc((size_t)mine * max * sizeof(int));
	len = calloc(mine, sizeof(int));
	if (!buf || !len) {
		free(buf);
		free(len);
		return fail(e, -ENOMEM, "conversation buffers");
	}
	for (int i = 0; i < mine; i++) {
		tlm_workload_system(wl, client + i * clients,
				    buf + (size_t)i * max);
		len[i] = wl->system_tokens;
	}
	for (int k = 0; k < wl->turns && !ret; k++) {
		for (int i = 0; i < mine && !ret; i++) {
			int c = client + i * clients,
			    *b = buf + (size_t)i * max;
			tlm_workload_user(wl, c, k, b + len[i]);
			len[i] += wl->user_tokens;
			ret = tlm_engine_run_turn(e, b, len[i], wl->gen_tokens,
						  c, k, 0);
			/*
			 * Asked again (a regenerate): the same prompt, its
			 * blocks all published by the first ask, sampled
			 * anew (repeat 1: greedy decoding gives the same
			 * answer, --temperature > 0 another).  Its answer
			 * overwrites the first's, and the conversation goes
			 * on from it, as a chat goes on from the reply
			 * regenerated.
			 */
			if (!ret && tlm_workload_repeated(wl, c, k))
				ret = tlm_engine_run_turn(
					e, b, len[i], wl->gen_tokens, c, k, 1);
			len[i] += wl->gen_tokens;
		}
	}
	free(buf);
	free(len);
	return ret;
}

void tlm_engine_print_stats(const struct tlm_engine *e, double wall_s, FILE *f)
{
	const struct tlm_engine_stats *s = &e->st;

	fprintf(f,
		"{\"kv\":\"%s\",\"sequences\":%ld,\"tokens_generated\":%ld,"
		"\"prompt_tokens\":%ld,\"prefill_tokens\":%ld,"
		"\"prefill_tokens_skipped\":%ld,\"steps\":%ld,"
		"\"shared_blocks\":%ld,\"restored_host\":%ld,"
		"\"restored_nvme\":%ld,\"recomputed_blocks\":%ld,"
		"\"reused_after_hole\":%ld,"
		"\"early_opens\":%ld,\"reload_failures\":%ld,"
		"\"prefix_ready_s\":%.4f,"
		"\"recomputed_tokens\":%ld,\"prefix_blocks\":%ld,"
		"\"evicted_blocks_recomputed\":%ld,\"pool_waits\":%ld,"
		"\"revocations_seen\":%ld,"
		"\"revoked_blocks_recomputed\":%ld,"
		"\"revoked_tokens_recomputed\":%ld,"
		"\"blocks_unshared\":%ld,"
		"\"wall_s\":%.3f,\"tokens_per_s\":%.1f}\n",
		e->kv->ops->name, s->sequences, s->tokens_generated,
		s->prompt_tokens, s->prefill_tokens, s->prefill_tokens_skipped,
		s->steps, s->shared_blocks, s->restored_host, s->restored_nvme,
		s->recomputed_blocks, s->reused_after_hole, s->early_opens,
		s->reload_failures, s->prefix_ready_ns / 1e9,
		s->recomputed_tokens, s->prefix_blocks,
		s->evicted_blocks_recomputed, s->pool_waits,
		s->revocations_seen, s->revoked_blocks_recomputed,
		s->revoked_tokens_recomputed, s->blocks_unshared, wall_s,
		wall_s > 0 ?
			(s->prefill_tokens + s->tokens_generated) / wall_s :
			0.0);
}

void tlm_workload_print(const struct tlm_workload_params *wl, FILE *f)
{
	int *buf = malloc(((size_t)wl->system_tokens + wl->user_tokens + 1) *
			  sizeof(int));

	if (!buf)
		return;
	for (int c = 0; c < wl->conversations; c++) {
		tlm_workload_system(wl, c, buf);
		fprintf(f, "conv %d system %d:", c, c % wl->system_prompts);
		for (int i = 0; i < wl->system_tokens; i++)
			fprintf(f, " %d", buf[i]);
		fputc('\n', f);
		for (int k = 0; k < wl->turns; k++) {
			tlm_workload_user(wl, c, k, buf);
			fprintf(f, "conv %d turn %d user:", c, k);
			for (int i = 0; i < wl->user_tokens; i++)
				fprintf(f, " %d", buf[i]);
			fprintf(f, " then %d generated tokens%s\n",
				wl->gen_tokens,
				tlm_workload_repeated(wl, c, k) ?
					", asked twice" :
					"");
		}
	}
	free(buf);
}
