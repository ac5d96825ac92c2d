// SPDX-License-Identifier: MIT
/*
 * timeout: 120
 * The example engine of Documentation/engines.md, run against a real
 * kvmmd: the guide quotes the parts between the "snippet:" markers, and
 * tests/doc-engine-guide.sh fails when a quote no longer matches this
 * file.  The engine part (above main) uses kvmm.h only.
 *
 * The "model" is a stand-in whose K and V of a token are a function of
 * the tokens up to it, as a transformer's are, and whose next token is
 * read from every K and V byte before it: a wrong, stale or missing KV
 * byte changes the output.  Every request's tokens are checked against
 * the same model run over private memory, without kvmm.
 *
 * 1. Request A (a system prompt and a user turn) prefills, decodes,
 *    publishes its full blocks and closes; its conversation's blocks get
 *    a TTL pin while "a tool runs".
 * 2. Request B, another user on the same system prompt, in another
 *    process: its first two blocks come shared from A's (same bytes,
 *    mapped read-only), kvmmd's counters say 2 GPU hits.  Then a
 *    prompt shorter than a block, which is opened without a lookup.
 * 3. A's next turn finds all four blocks A published, the answer's
 *    included; kvmmctl revokes its sequence from block 1 in the middle
 *    of the decode, and the engine recomputes the lost tokens at the next
 *    step boundary.
 *    Then a prompt of exactly A's four published blocks: all of it
 *    comes shared, and only its last token is computed again, in the
 *    sequence's own copy of the last block (ABI 1.20).
 * 4. Against a kvmmd that keeps 1 block on the GPU and hands out the
 *    rest for recomputation (--restore-mode recompute): B's prefix comes
 *    back with RECOMPUTE blocks, which the engine computes before reading
 *    past them.
 * Outputs equal the private-memory run's in every case.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

/* The model's layout: 2 layers, 2 KV heads of 64 fp16 values. */
#define LAYERS 2
#define KV_HEADS 2
#define HEAD_DIM 64
#define DTYPE_BYTES 2
#define TOKEN_BYTES (KV_HEADS * HEAD_DIM * DTYPE_BYTES) /* per layer, K|V */
#define MAX_SEQS 4
#define MAX_TOKENS 256
#define MAX_BLOCKS 64 /* room for any tokens_per_block >= 4 */
#define VOCAB 1000
#define MODEL_NAME "guide-example/v1"

/* ---- the stand-in model ------------------------------------------- */

struct kv_ptrs {
	uint8_t *k[LAYERS], *v[LAYERS]; /* one sequence's base per layer */
};

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* Write the K and V of tokens [from, to) in every layer; return the next
 * token, read from the K and V of tokens [0, to) in the last layer. */
static uint32_t forward(const struct kv_ptrs *kv, const uint32_t *tokens,
			uint32_t from, uint32_t to)
{
	uint64_t h = 0, out = 0;

	for (uint32_t p = 0; p < to; p++) {
		h = mix(h ^ tokens[p]); /* the prefix up to p */
		if (p < from)
			continue;
		for (uint32_t l = 0; l < LAYERS; l++)
			for (uint32_t i = 0; i < TOKEN_BYTES; i++) {
				size_t at = (size_t)p * TOKEN_BYTES + i;

				kv->k[l][at] = (uint8_t)mix(h + 2 * l + i * 7);
				kv->v[l][at] = (uint8_t)mix(h + 2 * l + 1 + i);
			}
	}
	for (uint32_t p = 0; p < to; p++)
		for (uint32_t i = 0; i < TOKEN_BYTES; i += 8)
			out = mix(
				out ^ kv->k[LAYERS - 1][p * TOKEN_BYTES + i] ^
				(uint64_t)kv->v[LAYERS - 1][p * TOKEN_BYTES + i]
					<< 8);
	return (uint32_t)(out % VOCAB);
}

/* ---- the engine ---------------------------------------------------- */

struct engine {
	struct kvmm_conn *conn;
	struct kvmm_region *region;
	uint32_t tpb; /* tokens per block */
	uint64_t seed; /* block identity of this model and layout */
};

struct request {
	uint32_t tokens[MAX_TOKENS]; /* the prompt, then what was generated */
	uint32_t len; /* tokens known */
	uint32_t max_len; /* stop there */
	uint32_t written; /* leading tokens whose KV the sequence holds */
	uint32_t published; /* leading blocks the cache has */
	uint32_t seq;
	uint64_t hashes[MAX_BLOCKS];
	/* what the prefix open found */
	uint32_t cached_blocks, shared, reloaded, recomputed_blocks;
	uint32_t revoked_tokens; /* recomputed after a revocation */
};

/* snippet: connect */
static int engine_open(struct engine *e, const char *socket_path,
		       const char *name)
{
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.socket_path = socket_path,
					.name = name };
	struct kvmm_region_opts ro = { .size = sizeof(ro),
				       .layers = LAYERS,
				       .kv_heads = KV_HEADS,
				       .head_dim = HEAD_DIM,
				       .dtype_bytes = DTYPE_BYTES,
				       .max_seqs = MAX_SEQS,
				       .max_tokens = MAX_TOKENS };
	int ret;

	ret = kvmm_connect(&co, &e->conn);
	if (ret)
		return ret;
	ret = kvmm_region_create(e->conn, &ro, &e->region);
	if (ret)
		goto err_disconnect;
	/* One page of one (layer, K|V) range: fixed by kvmmd's page size. */
	e->tpb = kvmm_region_tokens_per_block(e->region);
	/* Name blocks by model and layout, so no other model shares them. */
	ret = kvmm_region_hash_seed(e->region, MODEL_NAME, &e->seed);
	if (ret)
		goto err_disconnect;
	return 0;
err_disconnect:
	kvmm_disconnect(e->conn); /* frees the region too */
	return ret;
}
/* snippet end */

static struct kv_ptrs seq_kv(const struct engine *e, uint32_t seq)
{
	struct kv_ptrs kv;

	for (uint32_t l = 0; l < LAYERS; l++) {
		kv.k[l] =
			(uint8_t *)(uintptr_t)kvmm_seq_k_ptr(e->region, seq, l);
		kv.v[l] =
			(uint8_t *)(uintptr_t)kvmm_seq_v_ptr(e->region, seq, l);
	}
	return kv;
}

/* snippet: query */
/*
 * Before admitting (or to route a request to the replica that has it):
 * how many of the prompt's blocks are cached, and how many on the GPU.
 * Nothing is opened or restored, and the cache does not count it as a
 * use.
 */
static int request_cached(struct engine *e, struct request *rq,
			  uint32_t *on_gpu)
{
	uint8_t tiers[MAX_BLOCKS];
	uint32_t ask = (rq->len - 1) / e->tpb;
	int ret;

	*on_gpu = 0;
	if (!ask)
		return 0;
	ret = kvmm_hash_chain(e->seed, 0, rq->tokens, (size_t)ask * e->tpb,
			      e->tpb, rq->hashes, MAX_BLOCKS);
	if (ret < 0)
		return ret;
	ret = kvmm_prefix_query(e->region, rq->hashes, ask, tiers, 0);
	if (ret == -EOPNOTSUPP)
		return 0; /* kvmmd before ABI 1.19: nothing known */
	for (int b = 0; b < ret; b++)
		if (tiers[b] == KVMM_QUERY_GPU)
			(*on_gpu)++;
	return ret; /* cached blocks, or -errno */
}
/* snippet end */

/* snippet: admit */
static int request_admit(struct engine *e, struct request *rq)
{
	uint8_t actions[MAX_BLOCKS];
	struct kvmm_prefix_opts po = { .size = sizeof(po), .actions = actions };
	struct kv_ptrs kv;
	uint32_t ask, nb = 0;
	int ret;

	/* Ask for every full block of the prompt. */
	ask = rq->len / e->tpb;
	if (!ask) /* nothing to look up (nr_hashes 0 is -EINVAL) */
		return kvmm_seq_open(e->region, &rq->seq);
	ret = kvmm_hash_chain(e->seed, 0, rq->tokens, (size_t)ask * e->tpb,
			      e->tpb, rq->hashes, MAX_BLOCKS);
	if (ret < 0)
		return ret;
	ret = kvmm_seq_open_prefix_opts(e->region, rq->hashes, ask, &rq->seq,
					&nb, &po);
	if (ret)
		return ret; /* -ENOSPC: no free sequence slot, try later */
	rq->cached_blocks = nb;
	rq->shared = po.shared;
	rq->reloaded = po.reloaded_host + po.reloaded_nvme;
	rq->published = nb;
	/*
	 * The restore plan: RECOMPUTE blocks have fresh pages, to be
	 * computed at their own positions, in order, before anything reads
	 * past them; then published again.
	 */
	kv = seq_kv(e, rq->seq);
	for (uint32_t b = 0; b < nb; b++) {
		if (actions[b] != KVMM_BLOCK_RECOMPUTE)
			continue;
		forward(&kv, rq->tokens, b * e->tpb, (b + 1) * e->tpb);
		if (rq->published > b)
			rq->published = b;
		rq->recomputed_blocks++;
	}
	rq->written = nb * e->tpb; /* the sequence's length now */
	/*
	 * The whole prompt was cached: its last token is computed again, for
	 * its logits.  The step's extend over it copies that block out of
	 * the cache (ABI 1.20): one block's copy, not the block recomputed.
	 */
	if (rq->written == rq->len) {
		ret = kvmm_seq_truncate(e->region, rq->seq, rq->len - 1);
		if (ret)
			return ret;
		rq->written = rq->len - 1;
	}
	return 0;
}
/* snippet end */

/* snippet: step */
/* Compute the KV of every known token that has none, and the next token. */
static int request_step(struct engine *e, struct request *rq)
{
	uint32_t had = rq->written;
	struct kv_ptrs kv;
	int64_t len;
	int ret;

	for (;;) {
		/* Back every known token; the pages come from kvmmd's pool. */
		ret = kvmm_seq_extend(e->region, rq->seq, rq->len);
		if (ret)
			return ret; /* -EDQUOT, -ENOMEM: requeue the request */
		/* Revocations are applied here, never while kernels read. */
		ret = kvmm_step_begin(e->conn);
		if (ret)
			return ret;
		len = kvmm_seq_len(e->region, rq->seq);
		if (len < 0)
			return (int)len;
		if (len < rq->written)
			rq->written = (uint32_t)len; /* revoked from there on */
		if (len == rq->len)
			break;
		ret = kvmm_step_end(e->conn); /* cut meanwhile: back it again */
		if (ret)
			return ret;
	}
	/* The step's kernels: recompute what a revocation took, then the
	 * new tokens.  Every block from rq->written on is the sequence's
	 * own (writable): a revoked block comes back on fresh pages. */
	rq->revoked_tokens += had - rq->written;
	kv = seq_kv(e, rq->seq);
	rq->tokens[rq->len] = forward(&kv, rq->tokens, rq->written, rq->len);
	rq->written = rq->len++;
	return kvmm_step_end(e->conn);
}
/* snippet end */

/* snippet: publish */
/* Publish the full blocks the cache does not have yet. */
static int request_publish(struct engine *e, struct request *rq)
{
	uint32_t full, first = rq->published;
	int64_t len;
	int ret;

	for (int tries = 0;; tries++) {
		len = kvmm_seq_len(e->region, rq->seq);
		if (len < 0)
			return (int)len;
		/* revoked since the step: the next step redoes it */
		if (len < rq->written)
			rq->written = (uint32_t)len;
		full = rq->written / e->tpb;
		if (full <= first)
			return 0;
		ret = kvmm_hash_chain(e->seed, 0, rq->tokens,
				      (size_t)full * e->tpb, e->tpb, rq->hashes,
				      MAX_BLOCKS);
		if (ret < 0)
			return ret;
		ret = kvmm_block_publish(e->region, rq->seq, first,
					 full - first,
					 first ? rq->hashes[first - 1] : 0,
					 rq->hashes + first);
		/*
		 * -ESTALE: a revocation posted since took some of these
		 * blocks (-EINVAL from a daemon before ABI 1.20, which
		 * said that of any bad publish).  Apply it (the length
		 * drops) and publish the rest.
		 */
		if ((ret != -ESTALE && ret != -EINVAL) || tries == 3 ||
		    kvmm_process_revocations(e->conn) <= 0)
			break;
	}
	/*
	 * A full cache (-ENOSPC, -ENOMEM, -EBUSY, -EAGAIN), a cache that is
	 * off (-EIO) or one for another block size (-EOPNOTSUPP): the
	 * blocks are just not shared.
	 */
	if (ret < 0 && ret != -ENOSPC && ret != -ENOMEM && ret != -EBUSY &&
	    ret != -EAGAIN && ret != -EIO && ret != -EOPNOTSUPP)
		return ret;
	rq->published = full;
	return 0;
}
/* snippet end */

/* snippet: serve */
static int request_serve(struct engine *e, struct request *rq)
{
	int ret = request_admit(e, rq), close;

	if (ret)
		return ret;
	ret = request_step(e, rq); /* the prefill */
	if (!ret)
		ret = request_publish(e, rq); /* the prompt's blocks */
	while (!ret && rq->len < rq->max_len)
		ret = request_step(e, rq); /* one decode step */
	if (!ret)
		ret = request_publish(e, rq); /* the answer's, for next turn */
	close = kvmm_seq_close(e->region, rq->seq);
	return ret ? ret : close;
}
/* snippet end */

/* snippet: pin */
/* An agent's turn waits on a tool call: keep its blocks cached until it
 * comes back, for at most ttl_s, without holding GPU pages others need. */
static int conversation_pin(struct engine *e, const struct request *rq,
			    uint32_t ttl_s)
{
	struct kvmm_pin_opts po = { .size = sizeof(po),
				    .flags = KVMM_PIN_F_TTL | KVMM_PIN_F_DEMOTE,
				    .ttl_ns = ttl_s * 1000000000ULL };
	int ret;

	if (!rq->published)
		return 0;
	/* one round trip; past the session's pin quota the rest are
	 * -EDQUOT (the oldest kept), a block dropped already -ENOENT */
	ret = kvmm_block_pin_many(e->conn, rq->hashes, rq->published, &po,
				  NULL);
	if (ret != -EOPNOTSUPP)
		return ret < 0 ? ret : 0;
	/* kvmmd before ABI 1.19: one pin a round trip */
	for (uint32_t b = 0; b < rq->published; b++) {
		ret = kvmm_block_pin(e->conn, rq->hashes[b], &po);
		if (ret == -EDQUOT)
			break; /* the session's pin quota: keep the oldest */
		if (ret && ret != -ENOENT) /* -ENOENT: dropped already */
			return ret;
	}
	return 0;
}
/* snippet end */

/* ---- the test ------------------------------------------------------ */

/* The request served over private memory, from its prompt on: the tokens
 * it must have generated. */
static void check_output(const struct request *prompt, const struct request *rq,
			 const char *what)
{
	static uint8_t mem[2 * LAYERS][MAX_TOKENS * TOKEN_BYTES];
	uint32_t want[MAX_TOKENS], len = prompt->len, written = 0;
	struct kv_ptrs kv;

	for (uint32_t l = 0; l < LAYERS; l++) {
		kv.k[l] = mem[2 * l];
		kv.v[l] = mem[2 * l + 1];
	}
	memcpy(want, prompt->tokens, len * sizeof(want[0]));
	for (; len < prompt->max_len; written = len++)
		want[len] = forward(&kv, want, written, len);
	t_assert_eq(rq->len, prompt->max_len);
	for (uint32_t i = 0; i < rq->len; i++)
		if (rq->tokens[i] != want[i])
			t_fail("%s: token %u is %u, %u over private memory",
			       what, i, rq->tokens[i], want[i]);
}

/* sys_len tokens of the system prompt every user shares, then user_len
 * tokens of user user; gen tokens to generate. */
static void request_init(struct request *rq, uint32_t sys_len, uint32_t user,
			 uint32_t user_len, uint32_t gen)
{
	memset(rq, 0, sizeof(*rq));
	for (uint32_t i = 0; i < sys_len; i++)
		rq->tokens[i] = (i * 37 + 5) % VOCAB;
	for (uint32_t i = 0; i < user_len; i++)
		rq->tokens[sys_len + i] =
			(uint32_t)(mix(user * 1000 + i) % VOCAB);
	rq->len = sys_len + user_len;
	rq->max_len = rq->len + gen;
}

/* A counter of `kvmmctl --json status`: the number after "key": that
 * follows `after` (NULL: from the start). */
static uint64_t status_u64(const char *sock, const char *after, const char *key)
{
	static char out[65536];
	char pat[80];
	const char *p = out;

	t_assert_eq(td_kvmmctl(sock, "--json status", out, sizeof(out)), 0);
	if (after) {
		p = strstr(out, after);
		t_assert(p != NULL);
	}
	snprintf(pat, sizeof(pat), "\"%s\":", key);
	p = strstr(p, pat);
	if (!p)
		t_fail("no %s in %s", pat, out);
	return strtoull(p + strlen(pat), NULL, 10);
}

/* Wait until no block is on its way between tiers. */
static void wait_settled(const char *sock)
{
	for (int i = 0; i < 1000; i++) {
		if (!status_u64(sock, NULL, "migrations_in_flight") &&
		    !status_u64(sock, NULL, "demotions_queued"))
			return;
		usleep(10000);
	}
	t_fail("blocks still moving after 10 s");
}

/* The admin takes the sequence's pages back from block first on. */
static void admin_revoke(const struct td_daemon *d, struct engine *e,
			 uint32_t seq, uint32_t first)
{
	struct kvmm_stats ks = { .size = sizeof(ks) };
	static char out[65536];
	char args[128];
	const char *p;

	t_ok(kvmm_get_stats(e->conn, &ks));
	t_assert_eq(td_kvmmctl(d->sock, "--json sessions", out, sizeof(out)),
		    0);
	p = strstr(out, "\"region_list\":[{\"region\":");
	t_assert(p != NULL);
	snprintf(args, sizeof(args), "revoke %u %lu %u %u", ks.session_id,
		 strtoul(p + strlen("\"region_list\":[{\"region\":"), NULL, 10),
		 seq, first);
	if (td_kvmmctl(d->sock, args, out, sizeof(out)))
		t_fail("kvmmctl %s: %s", args, out);
}

/* Request B in a process of its own: the blocks of the system prompt
 * come from A's, mapped read-only, with the bytes B would compute. */
static int other_process(const char *sock)
{
	static uint8_t mem[2 * LAYERS][MAX_TOKENS * TOKEN_BYTES];
	struct request b, b_prompt;
	struct engine e;
	struct kv_ptrs kv, mine;

	t_ok(engine_open(&e, sock, "engine-B"));
	request_init(&b, 40, 2, 10, 12);
	b_prompt = b;
	t_ok(request_admit(&e, &b));
	t_assert_eq(b.cached_blocks, 2);
	t_assert_eq(b.shared, 2);
	t_assert_eq(b.recomputed_blocks, 0);
	kv = seq_kv(&e, b.seq);
	for (uint32_t l = 0; l < LAYERS; l++) {
		mine.k[l] = mem[2 * l];
		mine.v[l] = mem[2 * l + 1];
	}
	forward(&mine, b.tokens, 0, 2 * e.tpb);
	for (uint32_t blk = 0; blk < 2; blk++)
		t_assert_eq(kvmm_seq_block_readonly(e.region, b.seq, blk), 1);
	for (uint32_t l = 0; l < LAYERS; l++) {
		t_assert(!memcmp(kv.k[l], mine.k[l], 2 * e.tpb * TOKEN_BYTES));
		t_assert(!memcmp(kv.v[l], mine.v[l], 2 * e.tpb * TOKEN_BYTES));
	}
	t_ok(request_step(&e, &b));
	t_assert_eq(kvmm_seq_block_readonly(e.region, b.seq, 2), 0);
	while (b.len < b.max_len)
		t_ok(request_step(&e, &b));
	t_ok(request_publish(&e, &b));
	t_ok(kvmm_seq_close(e.region, b.seq));
	check_output(&b_prompt, &b, "B");
	kvmm_disconnect(e.conn);
	return 0;
}

int main(void)
{
	const char *args[] = { "--page-size", "4096", NULL };
	const char *plan_args[] = {
		"--page-size", "4096", "--cache-gpu-blocks", "1",
		"--host-mem",  "1M",   "--restore-mode",     "recompute",
		NULL
	};
	struct kvmm_pin_opts pin = { .size = sizeof(pin),
				     .flags = KVMM_PIN_F_TTL |
					      KVMM_PIN_F_DEMOTE,
				     .ttl_ns = 60000000000ULL };
	struct kvmm_stats ks = { .size = sizeof(ks) };
	struct request a, a_prompt, a2, a2_prompt, s, s_prompt, q, q_prompt;
	uint32_t had = 0, on_gpu;
	struct td_daemon d;
	struct engine e;
	int status;
	pid_t p;

	td_start_ok(&d, args);
	t_ok(engine_open(&e, d.sock, "engine-A"));
	t_assert_eq(e.tpb, 4096 / TOKEN_BYTES);

	/* 1. A: 50 prompt tokens, 20 generated; nothing cached yet. */
	request_init(&a, 40, 1, 10, 20);
	a_prompt = a;
	t_ok(request_serve(&e, &a));
	check_output(&a_prompt, &a, "A");
	t_assert_eq(a.cached_blocks, 0);
	t_assert_eq(a.written, 69);
	t_assert_eq(a.published, 4); /* 64 of the 69 tokens with KV */
	t_ok(conversation_pin(&e, &a, 60));
	/* pinning one again says how many this connection holds */
	t_ok(kvmm_block_pin(e.conn, a.hashes[3], &pin));
	t_assert_eq(pin.pins, 4);
	t_assert_eq(pin.tier, 0);

	/* 2. B, another process, another user on the same system prompt. */
	p = fork();
	if (p == 0)
		_exit(other_process(d.sock));
	t_assert_eq(waitpid(p, &status, 0), p);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		t_fail("request B's process failed (status %#x)", status);
	t_assert_eq(status_u64(d.sock, NULL, "prefix_blocks_hit"), 2);
	t_assert_eq(status_u64(d.sock, "\"gpu\":{", "hits"), 2);

	/* A prompt within one block: opened without a lookup. */
	request_init(&s, 0, 3, 10, 4);
	s_prompt = s;
	t_ok(request_serve(&e, &s));
	check_output(&s_prompt, &s, "a short prompt");
	t_assert_eq(s.published, 0);
	t_assert_eq(status_u64(d.sock, NULL, "prefix_opens"), 2);

	/* 3. A's next turn: its answer and a tool's result, 12 tokens. */
	a2 = a;
	a2.max_len = a.len + 12 + 10;
	for (uint32_t i = 0; i < 12; i++)
		a2.tokens[a.len + i] = (uint32_t)(mix(77 + i) % VOCAB);
	a2.len = a.len + 12;
	a2.written = a2.published = a2.revoked_tokens = 0;
	a2_prompt = a2;
	/* asked first: 4 blocks, all on the GPU, and no hit counted */
	t_assert_eq(request_cached(&e, &a2, &on_gpu), 4);
	t_assert_eq(on_gpu, 4);
	t_assert_eq(status_u64(d.sock, NULL, "prefix_blocks_hit"), 2);
	t_ok(request_admit(&e, &a2));
	t_assert_eq(a2.cached_blocks, 4); /* the answer's block too */
	t_assert_eq(a2.shared, 4);
	for (uint32_t b = 0; b < 4; b++)
		t_ok(kvmm_block_unpin(e.conn, a.hashes[b])); /* it came back */
	t_ok(request_step(&e, &a2));
	t_ok(request_publish(&e, &a2));
	t_assert_eq(a2.published, 5);
	for (int step = 0; a2.len < a2.max_len; step++) {
		if (step == 3) {
			had = a2.written;
			admin_revoke(&d, &e, a2.seq, 1);
		}
		t_ok(request_step(&e, &a2));
	}
	/* the tokens from block 1 on, recomputed at the step after */
	t_assert_eq(a2.revoked_tokens, had - e.tpb);
	t_ok(kvmm_get_stats(e.conn, &ks));
	t_assert(ks.pages_revoked > 0);
	t_ok(request_publish(&e, &a2));
	t_ok(kvmm_seq_close(e.region, a2.seq));
	check_output(&a2_prompt, &a2, "A's next turn");
	t_assert_eq(status_u64(d.sock, NULL, "prefix_blocks_hit"), 6);

	/* A prompt of A's 4 published blocks exactly: all shared, its last
	 * token computed again in a copy of block 3, 3 blocks still shared */
	memset(&q, 0, sizeof(q));
	memcpy(q.tokens, a.tokens, 4 * e.tpb * sizeof(q.tokens[0]));
	q.len = 4 * e.tpb;
	q.max_len = q.len + 6;
	q_prompt = q;
	t_ok(request_admit(&e, &q));
	t_assert_eq(q.cached_blocks, 4);
	t_assert_eq(q.shared, 4);
	t_assert_eq(q.written, q.len - 1);
	t_ok(request_step(&e, &q));
	for (uint32_t b = 0; b < 4; b++)
		t_assert_eq(kvmm_seq_block_readonly(e.region, q.seq, b), b < 3);
	t_ok(kvmm_get_stats(e.conn, &ks));
	t_assert_eq(ks.blocks_unshared, 1);
	while (q.len < q.max_len)
		t_ok(request_step(&e, &q));
	t_ok(kvmm_seq_close(e.region, q.seq));
	check_output(&q_prompt, &q, "a prompt on a block boundary");
	t_assert_eq(status_u64(d.sock, NULL, "prefix_blocks_hit"), 10);
	kvmm_disconnect(e.conn);
	td_stop_ok(&d);

	/* 4. One GPU block cached, the others handed out to recompute. */
	td_start_ok(&d, plan_args);
	t_ok(engine_open(&e, d.sock, "engine-C"));
	request_init(&a, 40, 1, 10, 20);
	t_ok(request_serve(&e, &a));
	t_assert_eq(a.published, 4);
	wait_settled(d.sock);
	request_init(&a2, 40, 2, 10, 12);
	a2_prompt = a2;
	/* the system prompt's 2 blocks, one of them at most on the GPU */
	t_assert_eq(request_cached(&e, &a2, &on_gpu), 2);
	t_assert(on_gpu <= 1);
	t_ok(request_serve(&e, &a2));
	check_output(&a2_prompt, &a2, "B after demotions");
	t_assert_eq(a2.cached_blocks, 2);
	t_assert(a2.recomputed_blocks >= 1);
	t_assert_eq(a2.shared + a2.recomputed_blocks, 2);
	t_assert_eq(status_u64(d.sock, "\"plan_recomputes\":{", "host"),
		    a2.recomputed_blocks);
	kvmm_disconnect(e.conn);
	td_stop_ok(&d);
	printf("outputs as over private memory; 2 blocks shared across "
	       "processes, %u tokens recomputed after a revocation, "
	       "blocks recomputed by the restore plan: %u\n",
	       had - e.tpb, a2.recomputed_blocks);
	return 0;
}
