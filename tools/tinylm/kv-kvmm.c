/* SPDX-License-Identifier: MIT */
/*
 * KV cache in a kvmm region: the same vAttention layout as private memory,
 * but the ranges are reserved by libkvmm and backed by pages of kvmmd's
 * pool, mapped on demand as sequences grow.
 *
 * The engine brackets every forward pass with step_begin/step_end, which
 * map to kvmm_step_begin/kvmm_step_end: the daemon's revocations (pages it
 * takes back under pressure) are applied only there, never while the model
 * reads K/V.  Between steps the revocation fd is polled too, so a client
 * that is between turns still answers promptly.
 *
 * Block cache: when a sequence opens, the hashes of the prompt's full
 * blocks (libkvmm's kvmm_hash_chain, seeded by kvmm_region_hash_seed with
 * the region's layout and a model name holding a checksum of the weights,
 * so only identical models share) go to
 * kvmm_seq_open_prefix_opts, which maps the longest cached prefix and
 * says what each block is: shared zero-copy from the GPU tier, reloaded
 * by the daemon from host or NVMe, or fresh pages to recompute (the
 * daemon's restore plan, kvmmd --restore-mode).  The engine recomputes
 * the RECOMPUTE blocks at their original positions before the prefill and
 * publishes them again afterwards.  Every full block of the prompt is
 * asked for (Documentation/engines.md): when all are cached (a repeated
 * prompt ending on a block boundary), the sequence is truncated by one
 * token, whose logits are needed, and the step's extend over it copies
 * its shared block (kvmmd ABI 1.20): one token recomputed, not a block.
 * Against an older kvmmd, whose extend there is -EROFS, the block of the
 * last prompt token is not asked for.  Full blocks are published with
 * kvmm_block_publish after the prefill and at close, so later turns and
 * other processes find them.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tinylm.h"

int tlm_kv_kvmm_create(const struct tlm_model *m, int max_seqs, int max_tokens,
		       const char *socket_path, bool segments, bool early,
		       struct tlm_kv **out, char *err, size_t errlen);

#if __has_include(<kvmm/kvmm.h>)
#include <kvmm/kvmm.h>
#include <kvmm/uapi.h> /* enum kvmm_block_action */

struct kv_kvmm {
	struct tlm_kv kv;
	struct kvmm_conn *conn;
	struct kvmm_region *region;
	int poll_fd;
	/*
	 * Per slot: the fewest tokens seen backed since the engine last
	 * asked (backed()).  libkvmm clamps a sequence's length when pages
	 * are revoked, and an extend may apply a revocation and grow back
	 * over it, so every observation point folds into this minimum.
	 */
	int *intact;
	/* Block cache. */
	int tpb; /* tokens per block */
	int max_blocks; /* per sequence */
	uint64_t hash_seed;
	bool hashing; /* block hashes available (libxxhash) */
	bool segments; /* KVMM_PREFIX_OPEN_SEGMENTS (--prefix-segments) */
	/* KVMM_PREFIX_OPEN_EARLY with it (off: --no-prefix-early, or kvmmd
	 * before ABI 1.8) */
	bool early;
	/* kvmmd copies shared blocks (ABI 1.20): ask for the last block */
	bool unshare;
	uint32_t *failed32; /* scratch: kvmm_seq_wait_ready()'s answer */
	int *failed; /* ... as ints */
	int *published; /* per slot: leading blocks the cache already has */
	uint64_t *hashes; /* scratch: a sequence's chain */
	uint8_t *actions; /* scratch: enum kvmm_block_action per block */
	int *recompute; /* scratch: blocks the restore plan left to us */
	uint64_t *recompute_hashes; /* ... and their hashes */
	uint32_t *tok32; /* scratch: token ids as u32 */
	uint64_t *mine; /* open-addressing set of hashes we published */
	size_t mine_cap, mine_n;
};

static struct kv_kvmm *to_kvmm(struct tlm_kv *kv)
{
	return (struct kv_kvmm *)kv;
}

/* Apply revocations the daemon posted while we were not in a step. */
static int answer_revocations(struct kv_kvmm *k)
{
	struct pollfd pfd = { .fd = k->poll_fd, .events = POLLIN };

	if (k->poll_fd < 0 || poll(&pfd, 1, 0) <= 0)
		return 0;
	int ret = kvmm_process_revocations(k->conn);
	return ret < 0 ? ret : 0;
}

/* Fold the sequence's current length into its intact watermark. */
static int observe(struct kv_kvmm *k, int slot)
{
	int64_t len = kvmm_seq_len(k->region, (uint32_t)slot);

	if (len < 0)
		len = 0;
	if (len < k->intact[slot])
		k->intact[slot] = (int)len;
	return (int)len;
}

/* The chain of the first nblocks full blocks of tokens into k->hashes. */
static int chain(struct kv_kvmm *k, const int *tokens, int nblocks)
{
	size_t n = (size_t)nblocks * k->tpb;

	for (size_t i = 0; i < n; i++)
		k->tok32[i] = (uint32_t)tokens[i];
	int ret = kvmm_hash_chain(k->hash_seed, 0, k->tok32, n, k->tpb,
				  k->hashes, k->max_blocks);
	return ret < 0 ? ret : (ret == nblocks ? 0 : -EPROTO);
}

static bool mine_has(const struct kv_kvmm *k, uint64_t h)
{
	if (!k->mine_cap)
		return false;
	for (size_t i = h & (k->mine_cap - 1); k->mine[i];
	     i = (i + 1) & (k->mine_cap - 1))
		if (k->mine[i] == h)
			return true;
	return false;
}

static void mine_add(struct kv_kvmm *k, uint64_t h)
{
	if (!h || mine_has(k, h))
		return;
	if (2 * (k->mine_n + 1) > k->mine_cap) {
		size_t cap = k->mine_cap ? 2 * k->mine_cap : 1024;
		uint64_t *old = k->mine, *nw = calloc(cap, sizeof(*nw));
		size_t oldcap = k->mine_cap;
		if (!nw)
			return; /* only a counter is lost */
		k->mine = nw;
		k->mine_cap = cap;
		k->mine_n = 0;
		for (size_t i = 0; i < oldcap; i++)
			if (old[i])
				mine_add(k, old[i]);
		free(old);
	}
	size_t i = h & (k->mine_cap - 1);
	while (k->mine[i])
		i = (i + 1) & (k->mine_cap - 1);
	k->mine[i] = h;
	k->mine_n++;
}

static int kvmm_kv_seq_open(struct tlm_kv *kv, const int *tokens, int ntokens,
			    struct tlm_restore *r)
{
	struct kv_kvmm *k = to_kvmm(kv);
	struct kvmm_prefix_opts po = { .size = sizeof(po) };
	uint32_t seq, nb = 0;
	int ret, nfull, nrec = 0, first_pub, after = 0;

	if (ntokens > kv->max_tokens)
		return -E2BIG;
	ret = answer_revocations(k);
	if (ret)
		return ret;
	/*
	 * Every full block; without copy-on-write, never the block of the
	 * last prompt token, whose logits are computed.
	 */
	nfull = k->hashing && k->tpb ?
			(k->unshare ? ntokens : ntokens - 1) / k->tpb :
			0;
	if (nfull > 0) {
		ret = chain(k, tokens, nfull);
		if (ret)
			return ret;
		po.actions = k->actions;
		if (k->segments)
			po.flags = KVMM_PREFIX_OPEN_SEGMENTS;
		if (k->early)
			po.flags |= KVMM_PREFIX_OPEN_EARLY;
		ret = kvmm_seq_open_prefix_opts(
			k->region, k->hashes, (uint32_t)nfull, &seq, &nb, &po);
		if (ret == -EOPNOTSUPP && k->early) {
			/* kvmmd before ABI 1.8: reloads done before the reply */
			k->early = false;
			po.flags &= ~KVMM_PREFIX_OPEN_EARLY;
			ret = kvmm_seq_open_prefix_opts(k->region, k->hashes,
							(uint32_t)nfull, &seq,
							&nb, &po);
		}
	} else {
		ret = kvmm_seq_open(k->region, &seq);
	}
	if (ret)
		return ret;
	if ((int)seq >= kv->max_seqs || (int)nb > nfull) {
		kvmm_seq_close(k->region, seq);
		return -EPROTO;
	}
	if (nb && (int)nb * k->tpb == ntokens &&
	    k->actions[nb - 1] == KVMM_BLOCK_RECOMPUTE) {
		/*
		 * The whole prompt, but its last block is fresh pages to
		 * compute anyway: leave it to the prefill, as if not found.
		 */
		ret = kvmm_seq_truncate(k->region, seq, (nb - 1) * k->tpb);
		if (ret) {
			kvmm_seq_close(k->region, seq);
			return ret;
		}
		nb--;
	}
	first_pub = (int)nb;
	for (int b = 0; b < (int)nb; b++) {
		if (k->actions[b] != KVMM_BLOCK_RECOMPUTE) {
			if (nrec)
				after++; /* reused past a hole */
			continue;
		}
		if (nrec == 0)
			first_pub = b; /* publish them again once computed */
		k->recompute[nrec] = b;
		k->recompute_hashes[nrec++] = k->hashes[b];
	}
	*r = (struct tlm_restore){ .slot = (int)seq,
				   .cached = (int)nb * k->tpb,
				   .tokens_per_block = k->tpb,
				   .nrecompute = nrec,
				   .recompute = k->recompute,
				   .recompute_hashes = k->recompute_hashes,
				   .shared_blocks = po.shared,
				   .restored_host = po.reloaded_host,
				   .restored_nvme = po.reloaded_nvme,
				   .prefix_blocks = nb,
				   .reused_after_hole = after,
				   .early = k->early && nfull > 0 &&
					    po.reloaded_host +
						    po.reloaded_nvme };
	for (int b = (int)nb; b < nfull; b++)
		if (mine_has(k, k->hashes[b]))
			r->evicted_blocks++;
	if (r->cached == ntokens) {
		/*
		 * Every block: the last token again, for its logits.  Its
		 * block stays mapped (an early reload of it is waited for
		 * before the prefill); the prefill's extend copies it.
		 */
		ret = kvmm_seq_truncate(k->region, seq, (uint32_t)ntokens - 1);
		if (ret) {
			kvmm_seq_close(k->region, seq);
			return ret;
		}
		r->cached = ntokens - 1;
		r->last_block_copied = true;
	}
	k->published[seq] = first_pub;
	k->intact[seq] = kv->max_tokens;
	return 0;
}

static int kvmm_kv_publish(struct tlm_kv *kv, int slot, const int *tokens,
			   int ntokens)
{
	struct kv_kvmm *k = to_kvmm(kv);
	int first = k->published[slot], nfull, len, ret;

	if (!k->hashing || !k->tpb)
		return 0;
	for (int tries = 0;; tries++) {
		/*
		 * Only blocks still backed: a revocation applied at the end of
		 * the last step may have taken the tail back.
		 */
		len = observe(k, slot);
		nfull = (len < ntokens ? len : ntokens) / k->tpb;
		if (nfull <= first)
			return 0;
		ret = chain(k, tokens, nfull);
		if (ret)
			return ret;
		ret = kvmm_block_publish(k->region, (uint32_t)slot,
					 (uint32_t)first,
					 (uint32_t)(nfull - first),
					 first ? k->hashes[first - 1] : 0,
					 k->hashes + first);
		/*
		 * -ESTALE (-EINVAL from a daemon before ABI 1.20) when a
		 * revocation was posted after we looked: the daemon already
		 * detached those blocks.  Apply it and retry.
		 */
		if ((ret != -ESTALE && ret != -EINVAL) || tries == 3)
			break;
		int applied = kvmm_process_revocations(k->conn);
		if (applied <= 0)
			break;
	}
	/*
	 * A full cache is not an error: the blocks just are not shared.  Nor
	 * is a cache that is off (-EIO: its set-up failed, kvmmctl status
	 * says why; kvmmd tries again later or never): the engine serves on
	 * without sharing, as it would without kvmm.
	 */
	if (ret < 0 && ret != -ENOSPC && ret != -ENOMEM && ret != -EBUSY &&
	    ret != -EAGAIN && ret != -EIO)
		return ret;
	for (int b = first; b < nfull; b++)
		mine_add(k, k->hashes[b]);
	k->published[slot] = nfull;
	return 0;
}

static int kvmm_kv_seq_close(struct tlm_kv *kv, int slot, const int *tokens,
			     int ntokens)
{
	struct kv_kvmm *k = to_kvmm(kv);
	int ret = kvmm_kv_publish(kv, slot, tokens, ntokens);
	int close = kvmm_seq_close(k->region, (uint32_t)slot);

	return ret ? ret : close;
}

static int kvmm_kv_extend(struct tlm_kv *kv, int slot, int ntokens)
{
	struct kv_kvmm *k = to_kvmm(kv);
	int len, ret;

	if (slot < 0 || slot >= kv->max_seqs || ntokens < 0 ||
	    ntokens > kv->max_tokens)
		return -EINVAL;
	ret = answer_revocations(k);
	if (ret)
		return ret;
	len = observe(k, slot);
	if (ntokens <= len)
		return 0;
	/*
	 * A revocation racing with the extend is applied inside it (or met
	 * at the daemon) and the range backed again with fresh pages, but
	 * the sequence's length stays where the revocation cut it
	 * (kvmm_seq_extend() in kvmm.h): the KV below that length is the
	 * engine's, the rest is lost, which observe() records.  No socket
	 * round trip (a kvmm_get_stats() before and after) is needed to
	 * tell, and only the lost tail is recomputed.
	 */
	ret = kvmm_seq_extend(k->region, (uint32_t)slot, (uint32_t)ntokens);
	observe(k, slot);
	return ret;
}

static int kvmm_kv_backed(struct tlm_kv *kv, int slot)
{
	struct kv_kvmm *k = to_kvmm(kv);
	int len = observe(k, slot), intact = k->intact[slot];

	k->intact[slot] = len;
	return intact;
}

static int kvmm_kv_readonly(struct tlm_kv *kv, int slot, int block)
{
	return kvmm_seq_block_readonly(to_kvmm(kv)->region, (uint32_t)slot,
				       (uint32_t)block);
}

static float *kvmm_kv_k(struct tlm_kv *kv, int layer, int slot)
{
	return (float *)(uintptr_t)kvmm_seq_k_ptr(
		to_kvmm(kv)->region, (uint32_t)slot, (uint32_t)layer);
}

static float *kvmm_kv_v(struct tlm_kv *kv, int layer, int slot)
{
	return (float *)(uintptr_t)kvmm_seq_v_ptr(
		to_kvmm(kv)->region, (uint32_t)slot, (uint32_t)layer);
}

static int kvmm_kv_wait_ready(struct tlm_kv *kv, int slot, int upto_block,
			      const int **failed)
{
	struct kv_kvmm *k = to_kvmm(kv);
	int n, len;

	for (int tries = 0;; tries++) {
		n = kvmm_seq_wait_ready(k->region, (uint32_t)slot,
					(uint32_t)upto_block, 0, k->failed32,
					(uint32_t)k->max_blocks, NULL);
		if ((n != -ERANGE && n != -ESTALE) || tries == 1000)
			break;
		/*
		 * A block below upto_block has no pages (-ESTALE since ABI
		 * 1.20, -ERANGE before): revoked after the early reply (kvmmd posts a revocation before it detaches
		 * the blocks, so it is in our ring).  Apply it, as a step
		 * boundary would: the length is cut to the first revoked
		 * block, the engine's next step() sees fewer tokens backed
		 * and recomputes from there.  Only the blocks still backed
		 * are waited for.
		 */
		n = kvmm_process_revocations(k->conn);
		if (n < 0)
			return n;
		len = observe(k, slot);
		if (k->tpb && len / k->tpb < upto_block)
			upto_block = len / k->tpb;
	}
	if (n < 0)
		return n;
	if (n > k->max_blocks)
		return -EPROTO;
	for (int i = 0; i < n; i++) {
		k->failed[i] = (int)k->failed32[i];
		/* recomputed: publish it again with the blocks after it */
		if (k->failed[i] < k->published[slot])
			k->published[slot] = k->failed[i];
	}
	*failed = k->failed;
	return n;
}

static int kvmm_kv_step_begin(struct tlm_kv *kv)
{
	return kvmm_step_begin(to_kvmm(kv)->conn);
}

static int kvmm_kv_step_end(struct tlm_kv *kv)
{
	return kvmm_step_end(to_kvmm(kv)->conn);
}

static void kvmm_kv_destroy(struct tlm_kv *kv)
{
	struct kv_kvmm *k = to_kvmm(kv);

	if (k->region)
		kvmm_region_destroy(k->region);
	if (k->conn)
		kvmm_disconnect(k->conn);
	free(k->intact);
	free(k->published);
	free(k->hashes);
	free(k->actions);
	free(k->recompute);
	free(k->recompute_hashes);
	free(k->failed32);
	free(k->failed);
	free(k->tok32);
	free(k->mine);
	free(k);
}

static const struct tlm_kv_ops kvmm_kv_ops = {
	.name = "kvmm",
	.seq_open = kvmm_kv_seq_open,
	.publish = kvmm_kv_publish,
	.seq_close = kvmm_kv_seq_close,
	.extend = kvmm_kv_extend,
	.backed = kvmm_kv_backed,
	.readonly = kvmm_kv_readonly,
	.k = kvmm_kv_k,
	.v = kvmm_kv_v,
	.step_begin = kvmm_kv_step_begin,
	.step_end = kvmm_kv_step_end,
	.destroy = kvmm_kv_destroy,
	.wait_ready = kvmm_kv_wait_ready,
};

int tlm_kv_kvmm_create(const struct tlm_model *m, int max_seqs, int max_tokens,
		       const char *socket_path, bool segments, bool early,
		       struct tlm_kv **out, char *err, size_t errlen)
{
	struct kvmm_connect_opts co = { .size = sizeof(co) };
	struct kvmm_region_opts ro = { .size = sizeof(ro) };
	struct kv_kvmm *k;
	int ret;

	k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	k->intact = calloc(max_seqs, sizeof(int));
	if (!k->intact) {
		free(k);
		return -ENOMEM;
	}
	k->kv = (struct tlm_kv){
		.ops = &kvmm_kv_ops,
		.layers = m->cfg.n_layers,
		.kv_heads = m->cfg.n_kv_heads,
		.head_dim = m->head_dim,
		.kv_dim = m->kv_dim,
		.max_seqs = max_seqs,
		.max_tokens = max_tokens,
	};
	co.socket_path = socket_path;
	co.name = "tinylm";
	ret = kvmm_connect(&co, &k->conn);
	if (ret) {
		snprintf(err, errlen, "connecting to kvmmd at %s: %s",
			 socket_path ? socket_path :
				       "$KVMM_SOCKET or /run/kvmm/kvmm.sock",
			 kvmm_strerror(ret));
		goto err_free;
	}
	ro.layers = m->cfg.n_layers;
	ro.kv_heads = m->cfg.n_kv_heads;
	ro.head_dim = m->head_dim;
	ro.dtype_bytes = sizeof(float);
	ro.max_seqs = max_seqs;
	ro.max_tokens = max_tokens;
	ro.salt = tlm_checksum(m->data, m->data_floats);
	k->segments = segments;
	k->early = segments && early;
	ret = kvmm_region_create(k->conn, &ro, &k->region);
	if (ret) {
		snprintf(err, errlen, "creating the kvmm region: %s",
			 kvmm_strerror(ret));
		goto err_disconnect;
	}
	k->poll_fd = kvmm_poll_fd(k->conn);
	struct kvmm_daemon_info di = { .size = sizeof(di) };
	k->unshare = !kvmm_get_daemon_info(k->conn, &di) &&
		     di.abi_major == KVMM_ABI_MAJOR && di.abi_minor >= 20;
	k->tpb = (int)kvmm_region_tokens_per_block(k->region);
	k->kv.tokens_per_block = k->tpb;
	if (k->tpb > 0) {
		char name[64];

		snprintf(name, sizeof(name), "tinylm/%016llx",
			 (unsigned long long)ro.salt);
		k->max_blocks = max_tokens / k->tpb + 1;
		k->hashing = kvmm_region_hash_seed(k->region, name,
						   &k->hash_seed) == 0;
	}
	k->published = calloc(max_seqs, sizeof(int));
	k->hashes = calloc(k->max_blocks + 1, sizeof(uint64_t));
	k->actions = calloc(k->max_blocks + 1, 1);
	k->recompute = calloc(k->max_blocks + 1, sizeof(int));
	k->recompute_hashes = calloc(k->max_blocks + 1, sizeof(uint64_t));
	k->tok32 = calloc((size_t)max_tokens + 1, sizeof(uint32_t));
	k->failed32 = calloc(k->max_blocks + 1, sizeof(uint32_t));
	k->failed = calloc(k->max_blocks + 1, sizeof(int));
	if (!k->published || !k->hashes || !k->actions || !k->recompute ||
	    !k->recompute_hashes || !k->tok32 || !k->failed32 || !k->failed) {
		snprintf(err, errlen, "out of memory");
		ret = -ENOMEM;
		kvmm_kv_destroy(&k->kv);
		return ret;
	}
	*out = &k->kv;
	return 0;
err_disconnect:
	kvmm_disconnect(k->conn);
err_free:
	free(k->intact);
	free(k);
	return ret;
}

#else /* no kvmm client library in this tree */

int tlm_kv_kvmm_create(const struct tlm_model *m, int max_seqs, int max_tokens,
		       const char *socket_path, bool segments, bool early,
		       struct tlm_kv **out, char *err, size_t errlen)
{
	snprintf(err, errlen,
		 "--kv kvmm: this build has no kvmm client library");
	return -ENOTSUP;
}

#endif
