// SPDX-License-Identifier: MIT
/*
 * libkvmm extends: kvmm_seq_extend() and the fetch of pages past what a
 * sequence has mapped, for the engine's extend and the map-ahead thread.
 *
 * Within the mapped blocks an extend is a ring round trip.  Past them it
 * asks kvmmd over the socket (SEQ_EXTEND, with KVMM_SEQ_EXTEND_COLLECT
 * against 1.17: a parked extend is waited for without the socket and
 * collected), imports the reply's fds as they arrive (import.c) and maps
 * the pages (region.c's kc_map_blocks()); the map-ahead thread's replies
 * keep pages for blocks whose revocation is still pending aside
 * (defer.c).  An extend short of blocks drops its own blocks ahead, then
 * takes back those of the other sequences (lend.c).
 */
#include <errno.h>
#include <stdlib.h>

#include "ebpf/telemetry_shm.h"
#include "kvmm/lib/client.h"

/*
 * Map a reply of the map-ahead thread, which runs while the engine's step
 * may read the sequence: a block the reply backs again with fresh pages
 * (revoked after we last looked, the revocation still in our ring) keeps
 * its old pages until that revocation is applied at a boundary; its new
 * ones wait in q->deferred.  Blocks past what is mapped are mapped now
 * (lock held).
 */
static int map_background(struct kvmm_region *r, uint32_t seq,
			  const struct kvmm_seq_extend_reply *rep)
{
	struct kc_seq *q = &r->seqs[seq];
	uint32_t first = rep->first_block, end = first + rep->nr_blocks;
	int err = 0;

#define REPLY_IDS(b) (rep->page_ids + (size_t)((b)-first) * r->pages_per_block)
	for (uint32_t b = first; !err && b < end;) {
		uint32_t e = b;

		if (kc_block_replaces(r, q, b, REPLY_IDS(b))) {
			err = kc_defer_block(r, seq, b, REPLY_IDS(b));
			b++;
			continue;
		}
		while (e < end && !kc_block_replaces(r, q, e, REPLY_IDS(e)))
			kc_deferred_drop(r, seq, e++);
		err = kc_map_blocks(r, seq, b, e - b, REPLY_IDS(b), NULL);
		b = e;
	}
#undef REPLY_IDS
	return err;
}

int kc_extend_reply_check(struct kc_import *im, const struct kvmm_region *r,
			  const void *body, size_t len)
{
	const struct kvmm_seq_extend_reply *rep = body;

	if (len < sizeof(*rep) || rep->pages_per_block != r->pages_per_block ||
	    rep->first_block + (uint64_t)rep->nr_blocks > r->max_blocks ||
	    len != sizeof(*rep) + (size_t)rep->nr_blocks *
					  rep->pages_per_block *
					  sizeof(uint32_t))
		return -EPROTO;
	im->ids = rep->page_ids;
	im->nr_ids = rep->nr_blocks * rep->pages_per_block;
	im->nr_fds = rep->nr_fds;
	return 0;
}

/* kc_import check() of a SEQ_EXTEND reply; arg is the region. */
static int extend_check(struct kc_import *im, const void *body, size_t len)
{
	return kc_extend_reply_check(im, im->arg, body, len);
}

void kc_seq_wait_collect(struct kvmm_region *r, uint32_t seq)
{
	struct kvmm_conn *c = r->conn;
	struct kc_seq *q;

	pthread_mutex_lock(&c->lock);
	while (!kc_seq_get(r, seq, &q) && q->collecting) {
		/* the collecting thread needs sock_lock to finish */
		pthread_mutex_unlock(&c->sock_lock);
		pthread_cond_wait(&c->collect_cond, &c->lock);
		pthread_mutex_unlock(&c->lock);
		pthread_mutex_lock(&c->sock_lock);
		pthread_mutex_lock(&c->lock);
	}
	pthread_mutex_unlock(&c->lock);
}

int kc_seq_request(struct kvmm_region *r, uint32_t seq, uint16_t cmd,
		   const void *req, size_t req_len, void *reply,
		   size_t reply_cap, size_t *reply_len)
{
	struct kvmm_conn *c = r->conn;
	int err;

	if (kc_inherited(c))
		return -ECHILD; /* before sock_lock: fork.c */
	pthread_mutex_lock(&c->sock_lock);
	kc_seq_wait_collect(r, seq);
	err = kc_request_locked(c, cmd, req, req_len, reply, reply_cap,
				reply_len, NULL, 0, NULL);
	pthread_mutex_unlock(&c->sock_lock);
	return err;
}

/*
 * The extend was answered KVMM_EXTEND_REPLY_PENDING (ABI 1.17: parked for
 * pool pages): wait for its reply on the ring's notify word without the
 * socket, then collect it (SEQ_COLLECT) into rep, its pages imported as
 * the extend's would have been.  sock_lock held on entry and on return;
 * seen: the notify word read before the extend was sent.  The sequence
 * is marked collecting meanwhile (the caller clears it).
 */
static int extend_collect(struct kvmm_region *r, uint32_t seq,
			  struct kc_import *im, uint32_t seen,
			  struct kvmm_seq_extend_reply *rep, size_t cap,
			  size_t *len)
{
	struct kvmm_region_ref ref = { .size = sizeof(ref) };
	struct kvmm_conn *c = r->conn;
	struct kc_seq *q;
	int err;

	if (rep->nr_blocks || rep->nr_fds)
		return -EPROTO;
	pthread_mutex_lock(&c->lock);
	if (!kc_seq_get(r, seq, &q))
		q->collecting = true;
	pthread_mutex_unlock(&c->lock);
	ref.region_id = r->id;
	ref.seq_id = seq;
	err = kc_import_collect(im, KVMM_CMD_SEQ_COLLECT, &ref, seen, rep, cap,
				len);
	if (!err && (rep->flags & KVMM_EXTEND_REPLY_PENDING))
		err = -EPROTO;
	return err;
}

int kc_fetch(struct kvmm_region *r, uint32_t seq, uint32_t new_len,
	     uint32_t want, bool background)
{
	struct kvmm_conn *c = r->conn;
	struct kvmm_seq_extend ex = { .size = sizeof(ex) };
	size_t cap = sizeof(struct kvmm_seq_extend_reply) +
		     KVMM_EXTEND_MAX_PAGES * sizeof(uint32_t);
	struct kvmm_seq_extend_reply *rep;
	struct kc_import im;
	struct kc_seq *q;
	uint64_t mapped_len;
	size_t len = 0;
	/* a daemon before 1.17 parks the extend holding the socket */
	bool collect = kc_can_collect_extend(c), collecting = false;
	uint32_t seen = 0;
	int err;

	if (want > r->max_blocks)
		want = r->max_blocks;
	ex.region_id = r->id;
	ex.seq_id = seq;
	ex.new_len = new_len;
	if (collect)
		ex.flags = KVMM_SEQ_EXTEND_COLLECT;
	rep = malloc(cap);
	if (!rep)
		return -ENOMEM;
	/* another thread's extend of it may wait for its reply (the
	 * map-ahead thread's, the engine's) */
	kc_seq_wait_collect(r, seq);
	/*
	 * The wait let go of sock_lock: the engine may have closed the
	 * sequence meanwhile, and kvmm_seq_open() may have reopened its
	 * slot in kvmmd and not marked it open here yet.  The map-ahead
	 * thread's extend sent then backed blocks of that new sequence
	 * which this reply, finding no sequence, did not map (the engine's
	 * extend was -ENODATA), or parked it with no thread collecting it
	 * (the engine's, -EBUSY): tests/daemon-fuzz phase 4, after an
	 * extend parked for the quota failed and its sequence was closed.
	 * A sequence this process does not hold open is not asked about.
	 */
	pthread_mutex_lock(&c->lock);
	err = kc_seq_get(r, seq, &q) ? -ENOENT : 0;
	/*
	 * The map-ahead thread chose want from the length it saw, its lock
	 * let go since (collect(), and the wait above): the engine may have
	 * cut the sequence, or closed it and opened another in its slot.
	 * Blocks past what is ahead of the length now stayed mapped, their
	 * pages and quota held, until the sequence grew over them or
	 * closed: tests/daemon-fuzz (seed 7) found a sequence of 0 tokens
	 * with its block 5 backed, tests/lib-mapahead-truncate-stale.c.
	 * The thread fetches what is ahead of the length now, or nothing.
	 */
	if (!err && background) {
		uint32_t now = kc_mapahead_want(c, r, q);

		if (want > now)
			want = now;
		if (q->backed >= want)
			err = 1; /* nothing to fetch */
	}
	pthread_mutex_unlock(&c->lock);
	if (err) {
		free(rep);
		return err < 0 ? err : 0;
	}
	ex.want_blocks = want;
	if (collect)
		seen = kc_notify_seen(c);
	/* Each message's pages are imported as its fds arrive. */
	kc_import_init(&im, c, extend_check, r);
	err = kc_import_request(&im, KVMM_CMD_SEQ_EXTEND, &ex, sizeof(ex), rep,
				cap, &len);
	if (!err && (rep->flags & KVMM_EXTEND_REPLY_PENDING)) {
		collecting = collect;
		err = collect ? extend_collect(r, seq, &im, seen, rep, cap,
					       &len) :
				-EPROTO;
	}
	pthread_mutex_lock(&c->lock);
	if (err) {
		/* nothing to map */
	} else if (kc_seq_get(r, seq, &q)) {
		err = -ENOENT;
	} else {
		q->replaced = UINT32_MAX;
		if (background) {
			err = map_background(r, seq, rep);
		} else {
			/* the reply is newer than pages kept for its blocks */
			for (uint32_t k = 0; k < rep->nr_blocks; k++)
				kc_deferred_drop(r, seq, rep->first_block + k);
			err = kc_map_blocks(r, seq, rep->first_block,
					    rep->nr_blocks, rep->page_ids,
					    NULL);
		}
		/*
		 * A failed reply unmapped its blocks whole, also one below
		 * q->backed that it backed again (revoked, the revocation
		 * still in our ring, which will find only the old pages
		 * kept, retire.c):
		 * the sequence is mapped only up to there, or a later extend
		 * over it would take the ring's fast path and answer 0.
		 */
		for (uint32_t b = rep->first_block; err && b < q->backed; b++)
			if (!kc_block_mapped(r, q, b))
				q->backed = b;
		while (q->backed < r->max_blocks &&
		       kc_block_mapped(r, q, q->backed))
			q->backed++;
		/* never a length over blocks not mapped here (those a
		 * failed reply gave the daemon's sequence) */
		mapped_len = (uint64_t)q->backed * r->tokens_per_block;
		if (rep->len < mapped_len)
			mapped_len = rep->len;
		/*
		 * ... nor past what this fetch asked for (the map-ahead
		 * thread's asks for none): kvmmd's length stays where an
		 * extend that met a revocation left it, above the intact
		 * length seq_extend() told the engine, and taking it here
		 * grew the sequence back over the fresh pages
		 * (tests/daemon-fuzz phase 4).
		 */
		if (new_len < mapped_len)
			mapped_len = new_len;
		if (!err && mapped_len > q->len)
			q->len = mapped_len;
		/*
		 * Blocks revoked after we last looked and backed again by
		 * this reply hold fresh pages: the sequence is intact only up
		 * to the first of them, as after applying the revocation
		 * (whose entries then find nothing left to take).  The engine
		 * sees the shorter length and recomputes.
		 */
		if (q->replaced != UINT32_MAX &&
		    q->len > q->replaced * r->tokens_per_block) {
			q->len = q->replaced * r->tokens_per_block;
			kc_seq_hashes_trim(q, q->replaced);
		}
	}
	/* whatever this reply imported and nothing maps goes back */
	kc_import_end(&im);
	if (collecting) {
		/* mapped: other threads' commands naming it may go */
		if (!kc_seq_get(r, seq, &q))
			q->collecting = false;
		pthread_cond_broadcast(&c->collect_cond);
	}
	pthread_mutex_unlock(&c->lock);
	free(rep);
	return err;
}

/*
 * Fresh pages the map-ahead thread kept for blocks of seq revoked since
 * (defer.c) are what kvmmd's sequence holds there already: no SEQ_EXTEND
 * names those blocks again, and the ring's extend finds them backed.  An
 * extend that went on over the old pages still mapped here grew the
 * length over blocks whose KV is gone, and the engine's writes and
 * publishes named kvmmd's fresh pages, not the ones it had written
 * (tests/daemon-fuzz phase 4: a cached block with other bytes).  So the
 * extend applies the revocations first, as it does when it meets one:
 * the kept pages are mapped and the length cut.  Returns the length the
 * revocation left when it cut the sequence's, UINT32_MAX otherwise.
 */
static uint32_t apply_kept(struct kvmm_region *r, uint32_t seq)
{
	struct kvmm_conn *c = r->conn;
	uint32_t intact = UINT32_MAX, had = 0;
	struct kc_seq *q;
	bool kept;

	pthread_mutex_lock(&c->lock);
	kept = !kc_seq_get(r, seq, &q) && q->nr_deferred;
	if (kept)
		had = q->len;
	pthread_mutex_unlock(&c->lock);
	if (!kept)
		return UINT32_MAX;
	kvmm_process_revocations(c);
	pthread_mutex_lock(&c->lock);
	if (!kc_seq_get(r, seq, &q) && q->len < had)
		intact = q->len;
	pthread_mutex_unlock(&c->lock);
	return intact;
}

/* Has the map-ahead thread kept fresh pages for revoked blocks of seq? */
static bool has_kept(struct kvmm_region *r, uint32_t seq)
{
	struct kc_seq *q;
	bool kept;

	pthread_mutex_lock(&r->conn->lock);
	kept = !kc_seq_get(r, seq, &q) && q->nr_deferred;
	pthread_mutex_unlock(&r->conn->lock);
	return kept;
}

/* intact: the length a revocation applied before left (apply_kept()) */
static int seq_extend(struct kvmm_region *r, uint32_t seq, uint32_t new_len,
		      uint32_t intact)
{
	uint32_t had;
	struct kvmm_conn *c;
	struct kc_seq *q;
	uint32_t need, want;
	bool short_of, lent = false;
	int err;

	err = kc_region_usable(r);
	if (err)
		return err;
	c = r->conn;
	if (new_len > r->max_tokens)
		return -EINVAL;
	need = kc_blocks_for(r, new_len);
	pthread_mutex_lock(&c->lock);
	err = kc_seq_get(r, seq, &q);
	if (err)
		goto out_unlock;
	if (new_len < q->len) {
		err = -EINVAL;
		goto out_unlock;
	}
	c->st.extends++;
	/* its blocks ahead are being given back for another extend (lend.c):
	 * whether they are still there is known once that ends */
	while (need <= q->backed && q->lending) {
		pthread_cond_wait(&c->lend_cond, &c->lock);
		err = kc_seq_get(r, seq, &q);
		if (err)
			goto out_unlock;
	}
	if (need <= q->backed) {
		bool kick = c->map_ahead && q->backed < need + c->map_ahead &&
			    q->backed < r->max_blocks;

		had = q->len; /* under the lock: a step may cut it */
		q->ring_extends++; /* lend.c waits for its answer */
		pthread_mutex_unlock(&c->lock);
		err = kc_ring_cmd(c, KVMM_CMD_SEQ_EXTEND, r->id, seq, new_len,
				  NULL);
		pthread_mutex_lock(&c->lock);
		/* 0 already: the engine closed it meanwhile */
		if (q->ring_extends)
			q->ring_extends--;
		if (q->lending)
			pthread_cond_broadcast(&c->lend_cond);
		if (err != -ENODATA) {
			if (!err) {
				/*
				 * The thread is kicked once the new length
				 * is set: kicked before, it could look at
				 * the old one, find nothing to map and wait
				 * for the next extend.
				 */
				if (new_len > q->len)
					q->len = new_len;
				if (q->len > intact)
					q->len = intact;
				if (kick)
					kc_mapahead_kick(c);
			}
			pthread_mutex_unlock(&c->lock);
			return err;
		}
		pthread_mutex_unlock(&c->lock);
		/*
		 * Revoked under us: give the pages back, then fetch.  The
		 * fetch backs the blocks the revocation took with fresh
		 * pages, so the length stays where the revocation left it:
		 * the engine sees it shorter than new_len and recomputes,
		 * as after an extend the daemon answered with fresh pages
		 * (kc_fetch(): q->replaced).  Growing it back to new_len
		 * hid the loss: zeros read as KV.
		 */
		kvmm_process_revocations(c);
		pthread_mutex_lock(&c->lock);
		err = kc_seq_get(r, seq, &q);
		if (err)
			goto out_unlock;
		if (q->len < had && q->len < intact)
			intact = q->len;
	}
	c->st.extend_waits++;
	want = need + c->map_ahead;
	if (want > r->max_blocks)
		want = r->max_blocks;
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_lock(&c->sock_lock);
	/*
	 * The map-ahead thread may have kept fresh pages for revoked blocks
	 * of seq since apply_kept() looked: applied first, as there, or the
	 * fetch grew the length over the old pages.  The thread fetches
	 * under sock_lock, so none are kept while we hold it, but for an
	 * extend of its that kvmmd parked: that one waits for its reply
	 * without sock_lock (extend_collect()), and kc_fetch() would wait
	 * for it after we looked, letting go of sock_lock, while its reply
	 * kept pages (tests/daemon-revoke-map-ahead-race.c; daemon-fuzz
	 * phase 4: a block shared from host cached with other bytes).  So
	 * the collect is waited for first; kc_fetch()'s wait then finds
	 * none, since only a thread holding sock_lock starts one.
	 */
	for (;;) {
		uint32_t now;

		kc_seq_wait_collect(r, seq);
		if (!has_kept(r, seq))
			break;
		pthread_mutex_unlock(&c->sock_lock);
		now = apply_kept(r, seq);
		if (now < intact)
			intact = now;
		pthread_mutex_lock(&c->sock_lock);
	}
	err = kc_fetch(r, seq, new_len, want, false);
	short_of = kc_short_of_blocks(err);
	/*
	 * The blocks ahead are best effort: SEQ_EXTEND is all or nothing, so
	 * an extend that fits the quota, the pool or the uid's block tables
	 * exactly failed because of them.  Ask again for what is needed.
	 */
	if (want > need && (short_of || err == -E2BIG))
		err = kc_fetch(r, seq, new_len, need, false);
	/* Nor may the blocks ahead of the other sequences make it fail: they
	 * go back (lend.c), and it asks once more. */
	if (kc_short_of_blocks(err)) {
		short_of = true;
		lent = kc_lend(r, seq, need);
		if (lent)
			err = kc_fetch(r, seq, new_len, need, false);
	}
	pthread_mutex_lock(&c->lock);
	/* the map-ahead thread must not take back what it just gave */
	if (short_of)
		kc_mapahead_hold(c);
	else if (!err && want > need)
		kc_mapahead_room(c); /* it got its blocks ahead */
	if (!err && lent)
		c->st.extends_lent++;
	/* The daemon sends only blocks it had not backed: those an earlier
	 * failed reply gave stay unmapped here until the sequence is
	 * truncated or closed.  Never report them usable. */
	if (!err && !kc_seq_get(r, seq, &q) && q->backed < need)
		err = -ENODATA;
	else if (!err && q->len > intact)
		q->len = intact;
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_unlock(&c->sock_lock);
	return err;

out_unlock:
	pthread_mutex_unlock(&c->lock);
	return err;
}

/* The kvmm:extend probe (ebpf/probes.h), and the shm fallback counters
 * when the daemon reads those, time every successful extend. */
int kvmm_seq_extend(struct kvmm_region *r, uint32_t seq, uint32_t new_len)
{
	struct kvmm_tel_shm *tel = r ? r->conn->tel : NULL;
	uint64_t t0 = kvmm_tel_want(tel, extend) ? kvmm_tel_now_ns() : 0;
	/* before the read-only check: applied, the length may end at the
	 * first block revoked, and kvmmd's copy there is the sequence's own */
	uint32_t intact = r && !kc_inherited(r->conn) ? apply_kept(r, seq) :
							UINT32_MAX;
	int err = kc_extend_readonly(r, seq, new_len);

	if (!err)
		err = seq_extend(r, seq, new_len, intact);
	if (t0 && !err)
		kvmm_tel_extend(tel, (uint64_t)r->id << 32 | seq, new_len,
				kc_blocks_for(r, new_len),
				kvmm_tel_now_ns() - t0);
	return err;
}
