// SPDX-License-Identifier: MIT
/*
 * libkvmm side of the block cache: publishing full blocks under their
 * content hashes and opening a sequence on the longest cached prefix.
 * A prefix-open reply is mapped exactly like an extend reply: pages this
 * process already holds (another of its sequences shares the block) come
 * with KVMM_PAGE_HELD and are mapped once more from the import cache; the
 * others come with an fd.
 *
 * An open whose reply the daemon would defer (restores from a lower tier)
 * holds the socket only for its request and for the reply's collection
 * (KVMM_PREFIX_OPEN_COLLECT, ABI 1.16): in between it waits on the ring's
 * notify word, and the connection's other threads (extends, steps,
 * revocations, the map-ahead thread) use the socket meanwhile.  The pages
 * still arrive in a reply received and mapped under sock_lock, so a
 * revocation never overtakes their mapping (lifecycle.md, "Ordering
 * guarantees").  A blocking kvmm_seq_wait_ready() polls the same way.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvmm/lib/client.h"
#include "kvmm/lib/opts.h"

int kvmm_block_publish(struct kvmm_region *r, uint32_t seq,
		       uint32_t first_block, uint32_t nr_blocks,
		       uint64_t parent_hash, const uint64_t *hashes)
{
	struct kvmm_block_publish bp = { .size = sizeof(bp) };
	struct kvmm_block_publish_reply rep = { 0 };
	size_t len;
	char *req;
	int err;

	if (!r || !hashes || !nr_blocks || nr_blocks > KVMM_PREFIX_MAX_BLOCKS)
		return -EINVAL;
	len = sizeof(bp) + (size_t)nr_blocks * sizeof(uint64_t);
	if (len + sizeof(struct kvmm_msg_hdr) > KVMM_MSG_MAX)
		return -E2BIG;
	req = malloc(len);
	if (!req)
		return -ENOMEM;
	bp.region_id = r->id;
	bp.seq_id = seq;
	bp.first_block = first_block;
	bp.nr_blocks = nr_blocks;
	bp.parent_hash = parent_hash;
	memcpy(req, &bp, sizeof(bp));
	memcpy(req + sizeof(bp), hashes, nr_blocks * sizeof(uint64_t));
	err = kc_seq_request(r, seq, KVMM_CMD_BLOCK_PUBLISH, req, len, &rep,
			     sizeof(rep), NULL);
	free(req);
	if (!err) { /* remember them for the step access probe */
		struct kc_seq *q;

		pthread_mutex_lock(&r->conn->lock);
		if (!kc_seq_get(r, seq, &q))
			kc_seq_hashes_set(r, q, first_block, nr_blocks, hashes);
		pthread_mutex_unlock(&r->conn->lock);
	}
	return err ? err : (int)(rep.published + rep.duplicates);
}

const char *kvmm_block_action_string(uint8_t action)
{
	switch (action) {
	case KVMM_BLOCK_GPU_SHARED:
		return "gpu-shared";
	case KVMM_BLOCK_RELOADED_HOST:
		return "reloaded-host";
	case KVMM_BLOCK_RELOADED_NVME:
		return "reloaded-nvme";
	case KVMM_BLOCK_RECOMPUTE:
		return "recompute";
	}
	return "unknown";
}

int kvmm_seq_open_prefix(struct kvmm_region *r, const uint64_t *hashes,
			 uint32_t nr_hashes, uint32_t *seq, uint32_t *nr_blocks)
{
	return kvmm_seq_open_prefix_opts(r, hashes, nr_hashes, seq, nr_blocks,
					 NULL);
}

/* Check the per-block actions against the reply's counts. */
static int check_actions(const struct kvmm_prefix_open_reply *rep,
			 const uint8_t *acts, struct kvmm_prefix_opts *o)
{
	uint32_t cnt[5] = { 0 };

	for (uint32_t b = 0; b < rep->nr_blocks; b++) {
		if (acts[b] < KVMM_BLOCK_GPU_SHARED ||
		    acts[b] > KVMM_BLOCK_RECOMPUTE)
			return -EPROTO;
		cnt[acts[b]]++;
	}
	if (cnt[KVMM_BLOCK_GPU_SHARED] != rep->from_gpu ||
	    cnt[KVMM_BLOCK_RELOADED_HOST] != rep->from_host ||
	    cnt[KVMM_BLOCK_RELOADED_NVME] != rep->from_nvme ||
	    cnt[KVMM_BLOCK_RECOMPUTE] != rep->nr_recompute)
		return -EPROTO;
	o->shared = rep->from_gpu;
	o->reloaded_host = rep->from_host;
	o->reloaded_nvme = rep->from_nvme;
	o->recompute = rep->nr_recompute;
	return 0;
}

/* What prefix_check() needs besides the body. */
struct prefix_args {
	struct kvmm_region *r;
	uint32_t nr_hashes;
	bool actions;
};

/* kc_import check() of a PREFIX_OPEN reply. */
static int prefix_check(struct kc_import *im, const void *body, size_t len)
{
	const struct kvmm_prefix_open_reply *rep = body;
	const struct prefix_args *a = im->arg;
	struct kvmm_region *r = a->r;
	size_t acts_len = 0;

	if (len < sizeof(*rep))
		return -EPROTO;
	if (a->actions)
		acts_len = ((size_t)rep->nr_blocks + 3) & ~(size_t)3;
	if (rep->seq_id >= r->max_seqs ||
	    rep->pages_per_block != r->pages_per_block ||
	    rep->nr_blocks > r->max_blocks || rep->nr_blocks > a->nr_hashes ||
	    len != sizeof(*rep) +
			    (size_t)rep->nr_blocks * rep->pages_per_block *
				    sizeof(uint32_t) +
			    acts_len ||
	    (!a->actions && rep->nr_recompute))
		return -EPROTO;
	im->ids = rep->page_ids;
	im->nr_ids = rep->nr_blocks * rep->pages_per_block;
	im->nr_fds = rep->nr_fds;
	return 0;
}

/*
 * The open was answered KVMM_PREFIX_REPLY_PENDING (rep, len): wait for its
 * reply without the socket and collect it into rep.  sock_lock held on
 * entry and on return; seen: the notify word read before the open was
 * sent.  An error the collection answers means the open failed (as a
 * deferred open's error reply does: no sequence is ours).
 */
static int prefix_collect(struct kc_import *im, struct prefix_args *pa,
			  uint32_t seen, struct kvmm_prefix_open_reply *rep,
			  size_t *len)
{
	struct kvmm_region_ref ref = { .size = sizeof(ref) };
	int err;

	if (rep->nr_blocks || rep->nr_fds)
		return -EPROTO;
	ref.region_id = pa->r->id;
	ref.seq_id = rep->seq_id;
	err = kc_import_collect(im, KVMM_CMD_PREFIX_COLLECT, &ref, seen, rep,
				KVMM_MSG_MAX, len);
	if (!err && (rep->seq_id != ref.seq_id ||
		     (rep->flags & KVMM_PREFIX_REPLY_PENDING)))
		err = -EPROTO;
	return err;
}

int kvmm_seq_open_prefix_opts(struct kvmm_region *r, const uint64_t *hashes,
			      uint32_t nr_hashes, uint32_t *seq,
			      uint32_t *nr_blocks,
			      struct kvmm_prefix_opts *opts)
{
	struct kvmm_prefix_open po = { .size = sizeof(po) };
	struct kvmm_region_ref ref = { .size = sizeof(ref) };
	struct kvmm_prefix_open_reply *rep = NULL;
	struct prefix_args pa = { .r = r,
				  .nr_hashes = nr_hashes,
				  .actions = opts != NULL };
	struct kvmm_prefix_opts local = { 0 }, *o = NULL;
	struct kc_import im;
	struct kvmm_conn *c;
	struct kc_seq *q = NULL;
	char *req = NULL;
	size_t len = 0, rlen, n = 0;
	const uint8_t *acts = NULL;
	bool clash = false, *ro = NULL, collect;
	uint32_t seen = 0;
	int err;

	if (!r || !hashes || !seq || !nr_blocks || !nr_hashes ||
	    nr_hashes > KVMM_PREFIX_MAX_BLOCKS)
		return -EINVAL;
	if (opts) {
		/* work on a copy of the caller's bytes; the counts go back
		 * into those only (opts.h) */
		err = kc_opts_size(opts, opts->size, KVMM_PREFIX_OPTS_SIZE_VER0,
				   sizeof(local), &n);
		if (err)
			return err;
		memcpy(&local, opts, n);
		o = &local;
	}
	if (o && (o->flags & ~(uint32_t)(KVMM_PREFIX_OPEN_SEGMENTS |
					 KVMM_PREFIX_OPEN_EARLY)))
		return -EINVAL;
	c = r->conn;
	if (kc_inherited(c))
		return -ECHILD; /* before sock_lock: fork.c */
	/* a daemon before ABI 1.6 (1.8 for EARLY) would answer -EINVAL
	 * (unknown flag): say what is missing instead */
	if (o && (o->flags & KVMM_PREFIX_OPEN_SEGMENTS) &&
	    c->hello.abi_major == KVMM_ABI_MAJOR && c->hello.abi_minor < 6)
		return -EOPNOTSUPP;
	if (o && (o->flags & KVMM_PREFIX_OPEN_EARLY) &&
	    c->hello.abi_major == KVMM_ABI_MAJOR && c->hello.abi_minor < 8)
		return -EOPNOTSUPP;

	rlen = sizeof(po) + (size_t)nr_hashes * sizeof(uint64_t);
	if (rlen + sizeof(struct kvmm_msg_hdr) > KVMM_MSG_MAX)
		return -E2BIG;
	req = malloc(rlen);
	rep = malloc(KVMM_MSG_MAX);
	if (!req || !rep) {
		err = -ENOMEM;
		goto out;
	}
	po.region_id = r->id;
	po.nr_hashes = nr_hashes;
	if (o)
		po.flags = KVMM_PREFIX_OPEN_ACTIONS | o->flags;
	/* a daemon before 1.16 defers the reply, holding the socket */
	collect = kc_can_notify(c);
	if (collect)
		po.flags |= KVMM_PREFIX_OPEN_COLLECT;
	memcpy(req, &po, sizeof(po));
	memcpy(req + sizeof(po), hashes, nr_hashes * sizeof(uint64_t));
	pthread_mutex_lock(&c->sock_lock);
	if (collect)
		seen = kc_notify_seen(c);
	/* Each message's pages are imported as its fds arrive. */
	kc_import_init(&im, c, prefix_check, &pa);
	err = kc_import_request(&im, KVMM_CMD_PREFIX_OPEN, req, rlen, rep,
				KVMM_MSG_MAX, &len);
	if (!err && (rep->flags & KVMM_PREFIX_REPLY_PENDING))
		err = collect ? prefix_collect(&im, &pa, seen, rep, &len) :
				-EPROTO;
	if (err && !im.body_ok)
		goto out_unlock; /* no sequence opened that we know of */
	/* From here on the daemon has opened rep->seq_id for us. */
	if (!err && o) {
		acts = (const uint8_t *)(rep->page_ids +
					 (size_t)rep->nr_blocks *
						 rep->pages_per_block);
		err = check_actions(rep, acts, o);
	}
	pthread_mutex_lock(&c->lock);
	q = &r->seqs[rep->seq_id];
	if (q->open) {
		clash = true; /* ours already: not the daemon's to reopen */
		if (!err)
			err = -EPROTO;
	}
	if (!err) {
		q->block_pages = calloc(r->max_blocks, sizeof(*q->block_pages));
		/* the cached blocks are read-only here (readonly.c); only a
		 * block to recompute is on pages of the sequence's own */
		ro = malloc(rep->nr_blocks * sizeof(*ro) + 1);
		if (!q->block_pages || !ro)
			err = -ENOMEM;
	}
	if (!err) {
		for (uint32_t b = 0; b < rep->nr_blocks; b++)
			ro[b] = !acts || acts[b] != KVMM_BLOCK_RECOMPUTE;
		q->open = true;
		q->gen = rep->seq_gen;
		q->len = rep->len;
		q->backed = 0;
		err = kc_map_blocks(r, rep->seq_id, 0, rep->nr_blocks,
				    rep->page_ids, ro);
		while (q->backed < r->max_blocks &&
		       kc_block_mapped(r, q, q->backed))
			q->backed++;
		if (!err)
			kc_seq_hashes_set(r, q, 0, rep->nr_blocks, hashes);
	}
	if (err && !clash) {
		/* Give the sequence back rather than leave it half mapped. */
		if (q->open)
			kc_unmap_blocks(r, rep->seq_id, 0);
		free(q->block_pages);
		free(q->hashes);
		free(q->ro);
		memset(q, 0, sizeof(*q));
	}
	/* whatever this reply imported and nothing maps goes back */
	kc_import_end(&im);
	pthread_mutex_unlock(&c->lock);
	if (err && !clash) {
		ref.region_id = r->id;
		ref.seq_id = rep->seq_id;
		kc_request_locked(c, KVMM_CMD_SEQ_CLOSE, &ref, sizeof(ref),
				  NULL, 0, NULL, NULL, 0, NULL);
	} else if (!err) {
		*seq = rep->seq_id;
		*nr_blocks = rep->nr_blocks;
		if (o && o->actions)
			memcpy(o->actions, acts, rep->nr_blocks);
		if (o)
			memcpy(opts, o, n);
	}
out_unlock:
	pthread_mutex_unlock(&c->sock_lock);
out:
	free(ro);
	free(rep);
	free(req);
	return err;
}

/* One SEQ_WAIT_READY (kvmm_seq_wait_ready(), arguments checked). */
static int wait_ready_once(struct kvmm_region *r, uint32_t seq,
			   uint32_t upto_block, uint32_t flags,
			   uint32_t *failed, uint32_t max_failed,
			   uint32_t *pending)
{
	struct kvmm_seq_wait_ready w = { .size = sizeof(w) };
	struct kvmm_seq_wait_ready_reply *rep;
	struct kvmm_conn *c = r->conn;
	size_t len = 0, cap;
	int err;

	cap = sizeof(*rep) + (size_t)upto_block * sizeof(uint32_t);
	rep = malloc(cap);
	if (!rep)
		return -ENOMEM;
	w.region_id = r->id;
	w.seq_id = seq;
	w.upto_block = upto_block;
	w.flags = flags;
	err = kc_seq_request(r, seq, KVMM_CMD_SEQ_WAIT_READY, &w, sizeof(w),
			     rep, cap, &len);
	if (!err &&
	    (len < sizeof(*rep) ||
	     len != sizeof(*rep) + (size_t)rep->nr_failed * 4 ||
	     rep->upto_block != upto_block || rep->nr_failed > upto_block ||
	     rep->nr_pending > upto_block))
		err = -EPROTO;
	for (uint32_t i = 0; !err && i < rep->nr_failed; i++)
		if (rep->failed[i] >= upto_block ||
		    (i && rep->failed[i] <= rep->failed[i - 1]))
			err = -EPROTO;
	if (!err && rep->nr_failed) {
		struct kc_seq *q;

		/* a failed reload's pages are the sequence's own, to
		 * recompute the block in: writable (readonly.c) */
		pthread_mutex_lock(&c->lock);
		if (!kc_seq_get(r, seq, &q))
			for (uint32_t i = 0; i < rep->nr_failed; i++)
				kc_ro_release(r, seq, rep->failed[i]);
		pthread_mutex_unlock(&c->lock);
	}
	if (!err) {
		for (uint32_t i = 0; i < rep->nr_failed && i < max_failed; i++)
			failed[i] = rep->failed[i];
		if (pending)
			*pending = rep->nr_pending;
		err = (int)rep->nr_failed;
	}
	free(rep);
	return err;
}

int kvmm_seq_wait_ready(struct kvmm_region *r, uint32_t seq,
			uint32_t upto_block, uint32_t flags, uint32_t *failed,
			uint32_t max_failed, uint32_t *pending)
{
	uint32_t left = 0;
	struct kvmm_conn *c;
	int err;

	if (!r || (flags & ~KVMM_WAIT_READY_POLL) || (max_failed && !failed))
		return -EINVAL;
	c = r->conn;
	if (kc_inherited(c))
		return -ECHILD; /* before sock_lock: fork.c */
	if (c->hello.abi_major == KVMM_ABI_MAJOR && c->hello.abi_minor < 8)
		return -EOPNOTSUPP; /* it would answer -ENOTTY */
	if (upto_block > r->max_blocks)
		return -EINVAL;
	if ((flags & KVMM_WAIT_READY_POLL) || !kc_can_notify(c))
		/* a daemon before 1.16 defers the reply, holding the
		 * socket */
		return wait_ready_once(r, seq, upto_block, flags, failed,
				       max_failed, pending);
	/*
	 * Blocking: poll, and sleep on the notify word between polls (the
	 * daemon moves it when a block of the sequence settles or leaves
	 * it), so the socket is the other threads' meanwhile.
	 */
	for (;;) {
		uint32_t seen = kc_notify_seen(c);

		err = wait_ready_once(r, seq, upto_block, KVMM_WAIT_READY_POLL,
				      failed, max_failed, &left);
		if (err < 0 || !left)
			break;
		err = kc_notify_wait(c, seen);
		if (err)
			break;
	}
	if (pending && err >= 0)
		*pending = 0;
	return err;
}
