// SPDX-License-Identifier: MIT
/*
 * Early opens after their reply (KVMM_PREFIX_OPEN_EARLY): the client has
 * the pages of its RELOAD blocks before the reloads are done, and asks
 * SEQ_WAIT_READY when it needs some of them.  The open's record
 * (struct kc_pending, replied) stays in kd_cache.pending while blocks
 * [0, lim) still load, so the reloads stay wanted (kc_restore_wanted())
 * and kc_restore_hand_out() marks each block READY or FAILED when its
 * restore settles; it stays after that as long as a block FAILED (every
 * SEQ_WAIT_READY over it says so).  The sequence letting blocks go
 * (truncate, close, region destroy, revocation: kd_cache_seq_cut()) lowers
 * lim: the reloads of those blocks that nobody else waits for are called
 * off when they have not started, as when a client dies
 * (kd_cache_session_end()).
 *
 * A SEQ_WAIT_READY that has to wait defers its session (the socket is not
 * read meanwhile: replies keep request order) and is answered from
 * kc_settle() (kc_ready_sweep()) once no block below its upto_block still
 * loads.
 *
 * PREFIX_COLLECT (ABI 1.16) takes the reply of a KVMM_PREFIX_OPEN_COLLECT
 * open, which answered at once that it waits instead of deferring its
 * session: libkvmm's blocking calls wait on the ring's notify word, not
 * on the socket, so the connection's other threads keep using it.  The
 * word moves (kd_ring_notify()) when such an open can reply and when a
 * block of an early open settles or leaves its sequence.
 */
#include "kvmm/kvmmd/cache_priv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The record of an early open of s's sequence (region, seq, gen), if it
 * has one after its reply. */
static struct kc_pending *kc_ready_find(struct kd_cache *c,
					struct kd_session *s,
					uint32_t region_id, uint32_t seq,
					uint32_t gen)
{
	if (!c)
		return NULL;
	for (struct kc_pending *pr = c->pending; pr; pr = pr->next)
		if (pr->replied && pr->s == s && pr->region_id == region_id &&
		    pr->seq == seq && pr->gen == gen)
			return pr;
	return NULL;
}

/* The cache of r's block size, whose records its opens have (the first
 * for a size no cache serves: its opens' records are there). */
static struct kd_cache *kc_region_cache(struct kd_daemon *d,
					const struct kd_region *r)
{
	struct kd_cache *c = kc_of_region(d, r);

	return c ? c : d->cache;
}

bool kd_cache_session_waits(struct kd_session *s)
{
	struct kd_cache *c;
	uint32_t i;

	kc_for_each(s->d, c, i)
		for (struct kc_pending *pr = c->pending; pr; pr = pr->next)
			if (pr->s == s &&
			    (pr->replied ?
				     pr->nwait > 0 :
				     pr->collect && !kc_pending_ready(pr)))
				return true;
	/* or one waits for a parked extend's reply (ABI 1.17) */
	return kd_cache_park_waits(s);
}

bool kd_cache_region_opening(struct kd_session *s, uint32_t region_id)
{
	struct kd_cache *c;
	uint32_t i;

	kc_for_each(s->d, c, i)
		for (struct kc_pending *pr = c->pending; pr; pr = pr->next)
			if (!pr->replied && pr->s == s &&
			    pr->region_id == region_id)
				return true;
	return false;
}

bool kd_cache_seq_opening(struct kd_session *s, uint32_t region_id,
			  uint32_t seq)
{
	struct kd_cache *c;
	uint32_t i;

	kc_for_each(s->d, c, i)
		for (struct kc_pending *pr = c->pending; pr; pr = pr->next)
			if (!pr->replied && pr->s == s &&
			    pr->region_id == region_id && pr->seq == seq)
				return true;
	return false;
}

/* Blocks below upto still loading. */
uint32_t kc_ready_pending(const struct kc_pending *pr, uint32_t upto)
{
	uint32_t n = 0;

	for (uint32_t i = 0; pr && i < pr->lim && i < upto; i++)
		n += pr->state[i] == KC_SLOT_WAIT;
	return n;
}

static bool kc_ready_failed(const struct kc_pending *pr)
{
	for (uint32_t i = 0; i < pr->lim; i++)
		if (pr->state[i] == KC_SLOT_FAILED)
			return true;
	return false;
}

/*
 * -ERANGE when a block below upto of q has no pages, -ESTALE instead for a
 * client of ABI 1.20 when a revocation took it (kd_seq_revoked(): the
 * error a publish of it gets), else 0.  Also where an extend for blocks
 * ahead alone (the map-ahead thread's) backed it again since: those
 * fresh pages are not what the client maps there until it applied the
 * revocation, and answered 0 the client read its old pages, into which
 * a reload the revocation took had not landed (tests/daemon-fuzz phase
 * 4: a block reloaded from host with other bytes).
 */
static int kc_ready_missing(const struct kd_session *s, const struct kd_seq *q,
			    uint32_t upto)
{
	bool stale_known = s->client_minor >= KD_ABI_REVOKED;

	for (uint32_t b = 0; b < upto; b++) {
		bool revoked = stale_known && kd_seq_revoked(q, b);

		if (!kd_seq_block(q, b) || revoked)
			return revoked ? -ESTALE : -ERANGE;
	}
	return 0;
}

/*
 * Reply to a SEQ_WAIT_READY (header h) of s over blocks [0, upto) of
 * sequence seq of region r: the blocks still loading (nonzero only for a
 * poll) and those whose reload failed.  -ERANGE when one of the blocks has
 * no pages (any more; -ESTALE: kc_ready_missing()).  0 when it replied, else -errno to reply.
 */
static int kc_ready_reply(struct kd_session *s, const struct kvmm_msg_hdr *h,
			  struct kd_region *r, uint32_t seq, uint32_t upto,
			  const struct kc_pending *pr)
{
	struct kvmm_seq_wait_ready_reply *rep;
	uint32_t nfailed = 0, k = 0;
	struct kd_seq *q;
	size_t len;
	int err;

	err = kd_seq_lookup(r, seq, &q) ?: kc_ready_missing(s, q, upto);
	if (err)
		return err;
	for (uint32_t i = 0; pr && i < pr->lim && i < upto; i++)
		nfailed += pr->state[i] == KC_SLOT_FAILED;
	len = sizeof(*rep) + (size_t)nfailed * sizeof(uint32_t);
	rep = calloc(1, len);
	if (!rep)
		return -ENOMEM;
	rep->size = len;
	rep->upto_block = upto;
	rep->nr_pending = kc_ready_pending(pr, upto);
	rep->nr_failed = nfailed;
	for (uint32_t i = 0; pr && i < pr->lim && i < upto; i++)
		if (pr->state[i] == KC_SLOT_FAILED)
			rep->failed[k++] = i;
	kd_session_reply(s, h, 0, rep, len, NULL, 0);
	free(rep);
	return 0;
}

int kd_cache_seq_wait_ready(struct kd_session *s, const struct kvmm_msg_hdr *h,
			    const void *p, size_t len)
{
	struct kd_cache *c;
	struct kvmm_seq_wait_ready w;
	struct kc_pending *pr;
	struct kd_region *r;
	struct kd_seq *q;
	int err;

	err = kw_copy_struct(&w, sizeof(w), sizeof(w), p, len);
	if (err)
		return err;
	if ((w.flags & ~KVMM_WAIT_READY_POLL) || w.pad ||
	    !kw_all_zero(w.reserved, sizeof(w.reserved)))
		return -EINVAL;
	err = kd_region_lookup(s, w.region_id, &r);
	if (err)
		return err;
	err = kd_seq_lookup_client(r, w.seq_id, &q);
	if (err)
		return err;
	if (w.upto_block > r->max_blocks)
		return -EINVAL;
	c = kc_region_cache(s->d, r);
	pr = kc_ready_find(c, s, w.region_id, w.seq_id, q->gen);
	if (!pr || (w.flags & KVMM_WAIT_READY_POLL) ||
	    !kc_ready_pending(pr, w.upto_block))
		return kc_ready_reply(s, h, r, w.seq_id, w.upto_block, pr);
	/* but first the cheap error: a block without pages */
	err = kc_ready_missing(s, q, w.upto_block);
	if (err)
		return err;
	pr->waiting = true;
	pr->wh = *h;
	pr->wupto = w.upto_block;
	kd_session_defer(s);
	return 0;
}

void kc_pending_say_pending(struct kd_session *s, const struct kvmm_msg_hdr *h,
			    struct kd_region *r, const struct kc_pending *pr)
{
	struct kvmm_prefix_open_reply rep = { .size = sizeof(rep) };

	rep.seq_id = pr->seq;
	rep.seq_gen = pr->gen;
	rep.pages_per_block = r->pages_per_block;
	rep.flags = KVMM_PREFIX_REPLY_PENDING;
	kd_session_reply(s, h, 0, &rep, sizeof(rep), NULL, 0);
}

int kc_prefix_park_collect(struct kd_session *s, const struct kvmm_msg_hdr *h,
			   const void *p, size_t len, struct kd_region *r,
			   bool rerun)
{
	struct kvmm_prefix_open_reply rep = { .size = sizeof(rep) };
	uint32_t seq;
	int err;

	if (rerun)
		return kd_cache_park_collect(s, h, p, len, r, 0);
	/* the pending reply names it: a sequence of the session's own until
	 * the open's reply or error is collected */
	err = kd_seq_open(r, &seq);
	if (err)
		return err;
	err = kd_cache_park_collect(s, h, p, len, r, seq);
	if (err) {
		kd_seq_close(r, seq, false);
		return err;
	}
	rep.seq_id = seq;
	rep.seq_gen = r->seqs[seq].gen;
	rep.pages_per_block = r->pages_per_block;
	rep.flags = KVMM_PREFIX_REPLY_PENDING;
	kd_session_reply(s, h, 0, &rep, sizeof(rep), NULL, 0);
	return 0;
}

/* PREFIX_COLLECT of an open parked for pool pages (ABI 1.17): -EAGAIN
 * while it is, its error once it failed (its sequence closed then),
 * -ENOENT for none. */
static int kc_park_collect(struct kd_session *s, struct kd_region *r,
			   uint32_t seq)
{
	void *rep = NULL;
	size_t len = 0;
	int status, err;

	err = kd_cache_park_collect_take(s, KVMM_CMD_PREFIX_OPEN, r, seq,
					 &status, &rep, &len);
	free(rep); /* none: an open that went on is not there */
	if (err)
		return err;
	kd_seq_close(r, seq, false);
	return status ?: -EPROTO;
}

int kd_cache_prefix_collect(struct kd_session *s, const struct kvmm_msg_hdr *h,
			    const void *p, size_t len)
{
	struct kd_cache *c;
	struct kvmm_region_ref ref;
	struct kc_pending **pp, *pr;
	struct kd_region *r;
	int err;

	err = kw_copy_struct(&ref, sizeof(ref), sizeof(ref), p, len);
	if (err)
		return err;
	if (ref.flags || !kw_all_zero(ref.reserved, sizeof(ref.reserved)))
		return -EINVAL;
	err = kd_region_lookup(s, ref.region_id, &r);
	if (err)
		return err;
	if (ref.seq_id >= r->max_seqs)
		return -EINVAL;
	c = kc_region_cache(s->d, r);
	for (pp = c ? &c->pending : NULL; pp && *pp; pp = &(*pp)->next) {
		pr = *pp;
		if (pr->s != s || pr->replied || !pr->collect ||
		    pr->region_id != ref.region_id || pr->seq != ref.seq_id)
			continue;
		if (!kc_pending_ready(pr))
			return -EAGAIN; /* the notify word moves when it is */
		*pp = pr->next;
		pr->h = *h; /* the reply answers this request */
		kc_pending_finish(c, pr);
		return 0;
	}
	return kc_park_collect(s, r, ref.seq_id);
}

/* Answer pr's SEQ_WAIT_READY; the session reads its socket again (and
 * may end, which frees its records, pr among them). */
static void kc_ready_answer(struct kc_pending *pr)
{
	struct kd_session *s = pr->s;
	struct kd_region *r;
	int err;

	pr->waiting = false;
	err = kd_region_lookup(s, pr->region_id, &r);
	if (!err)
		err = kc_ready_reply(s, &pr->wh, r, pr->seq, pr->wupto, pr);
	if (err)
		kd_session_reply(s, &pr->wh, err, NULL, 0, NULL, 0);
	kd_session_resume(s); /* last */
}

void kc_ready_sweep(struct kd_cache *c)
{
	struct kc_pending **pp;

again:
	for (pp = &c->pending; *pp;) {
		struct kc_pending *pr = *pp;

		if (!pr->replied) {
			pp = &pr->next;
			continue;
		}
		if (pr->waiting && !kc_ready_pending(pr, pr->wupto)) {
			/* a session that ends frees its records: look again
			 * from the start */
			kc_ready_answer(pr);
			goto again;
		}
		if (!pr->waiting && !pr->nwait && !kc_ready_failed(pr)) {
			/* every block is ready: no record says the same */
			*pp = pr->next;
			kc_pending_free(pr);
			continue;
		}
		pp = &pr->next;
	}
}

int kd_cache_publish_busy(struct kd_session *s, const void *p, size_t len)
{
	struct kd_cache *c = s->d->cache;
	struct kvmm_block_publish bp;
	struct kc_pending *pr;
	struct kd_region *r;
	struct kd_seq *q;

	if (!c || len < sizeof(bp))
		return 0; /* (the request passed kd_cache_publish_check()) */
	memcpy(&bp, p, sizeof(bp));
	if (kd_region_lookup(s, bp.region_id, &r) ||
	    kd_seq_lookup(r, bp.seq_id, &q))
		return 0;
	c = kc_region_cache(s->d, r);
	if (!c->pending)
		return 0;
	pr = kc_ready_find(c, s, bp.region_id, bp.seq_id, q->gen);
	for (uint32_t i = bp.first_block;
	     pr && i < pr->lim && i - bp.first_block < bp.nr_blocks; i++)
		if (pr->state[i] == KC_SLOT_WAIT)
			return -EBUSY;
	return 0;
}

bool kd_cache_block_loading(struct kd_session *s, struct kd_region *r,
			    uint32_t seq, uint32_t b)
{
	struct kd_cache *c = s->d->cache;
	struct kc_pending *pr;

	if (!c)
		return false;
	c = kc_region_cache(s->d, r); /* the records of r's block size */
	if (!c->pending)
		return false;
	pr = kc_ready_find(c, s, r->id, seq, r->seqs[seq].gen);
	return pr && b < pr->lim && pr->state[b] == KC_SLOT_WAIT;
}

void kd_cache_count_unshare(struct kd_daemon *d, const struct kd_region *r)
{
	struct kd_cache *c = kc_region_cache(d, r);

	/* the size's own counters (kvmmd's per-size metrics), summed by
	 * TIER_STATS */
	if (c)
		c->st.blocks_unshared++;
}

void kd_cache_seq_cut(struct kd_region *r, uint32_t seq, uint32_t from)
{
	struct kd_session *s = r->owner;
	struct kd_cache *c = s->d->cache;
	bool cut = false;

	if (!c)
		return;
	c = kc_region_cache(s->d, r);
	for (struct kc_pending *pr = c->pending; pr; pr = pr->next) {
		uint32_t lim = pr->lim;

		if (!pr->replied || pr->s != s || pr->region_id != r->id)
			continue;
		if (seq != UINT32_MAX &&
		    (pr->seq != seq || pr->gen != r->seqs[seq].gen))
			continue;
		if (from >= lim)
			continue;
		/* first out of the record, so kc_restore_wanted() does not
		 * count these blocks */
		pr->lim = from;
		pr->nwait = kc_ready_pending(pr, from);
		kc_pending_call_off(c, pr, from, lim);
		cut = true;
	}
	if (cut) /* a waiter polling these blocks asks again */
		kd_ring_notify(s);
	/* a record with nothing left goes, a SEQ_WAIT_READY (a revocation
	 * from another session) is answered: from the loop */
	if (cut && !c->settle_timer.armed)
		kd_timer_arm(&c->d->loop, &c->settle_timer, 0);
}
