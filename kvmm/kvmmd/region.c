// SPDX-License-Identifier: MIT
/*
 * Regions, sequences and blocks: the daemon's page tables.
 *
 * A region is one model's KV layout in one session.  Its sequences are
 * slots 0..max_seqs-1; slot s owns, in each of the client's 2L virtual
 * ranges, the slice at s * seq_stride.  A sequence is a table of block
 * pointers; block b covers tokens [b * tpb, (b + 1) * tpb) and owns one
 * pool page per (layer, K|V), ordered layer 0 K, layer 0 V, layer 1 K, ...
 * The table grows with the blocks that get pages, never to max_blocks
 * ahead of them (a client picks max_tokens, up to 2^24 blocks), and the
 * tables of all sessions of a uid share one budget (KD_SEQ_SLOTS_MIN).
 *
 * Blocks are reference counted (by the sequences using them) and charge
 * their pages to one uid's quota, so content-addressed sharing (issue #4)
 * can hand one block to several sequences.  Separately, the session counts
 * where its process maps each page (held[]); the client keeps the same
 * count, and a page returns to the free list only when no block owns it
 * and no process holds it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kvmm/kvmmd/cache.h"
#include "kvmm/kvmmd/kvmmd.h"

void kd_hold_page(struct kd_session *s, uint32_t page)
{
	if (s->held[page]++ == 0) {
		/* Only owned (ALLOCATED) pages are handed out; a REVOKING or
		 * free one here would be a page reused before every holder
		 * gave it back. */
		if (vmm_pool_mapped(s->d->pool, page))
			vmm_log(VMM_LOG_ERR,
				"session %u: page %u handed out in state %s",
				s->id, page,
				vmm_page_state_string(
					vmm_pool_page_state(s->d->pool, page)));
		s->pages_held++;
	}
}

void kd_unhold_page(struct kd_session *s, uint32_t page)
{
	if (!s->held[page]) {
		vmm_log(VMM_LOG_ERR, "session %u: page %u not held", s->id,
			page);
		return;
	}
	if (--s->held[page] == 0) {
		vmm_pool_unmapped(s->d->pool, page);
		s->pages_held--;
		/* the last holder of a freed (REVOKING) page: it is free now,
		 * maybe for a parked command */
		kd_cache_pages_back(s->d);
	}
}

void kd_block_put(struct kd_daemon *d, struct kd_block *blk)
{
	kd_cache_block_unref(d, blk); /* a published block loses a user */
	if (--blk->refcnt)
		return;
	if (blk->abandoned) {
		/* allocated for good: nobody else may get them */
		vmm_log(VMM_LOG_ERR,
			"%u pool pages kept out of use: a copy into them may still land",
			blk->nr_pages);
	} else {
		for (uint32_t i = 0; i < blk->nr_pages; i++)
			vmm_pool_free(d->pool, blk->pages[i]);
		kd_zombies_charge(d, blk->pages, blk->nr_pages);
	}
	if (blk->charged) {
		blk->charged->used_pages -= blk->nr_pages;
		kd_quota_maybe_free(d, blk->charged);
	}
	free(blk);
	kd_cache_pages_back(d); /* a parked command may wait for them */
}

static uint32_t div_up(uint64_t a, uint64_t b)
{
	return (a + b - 1) / b;
}

int kd_region_create(struct kd_session *s, const struct kvmm_region_create *rc,
		     struct kvmm_region_create_reply *rep)
{
	struct kd_daemon *d = s->d;
	struct kd_region *r;
	uint64_t token_bytes, max_blocks;

	if (rc->flags || !kw_all_zero(rc->reserved, sizeof(rc->reserved)))
		return -EINVAL;
	if (!rc->layers || rc->layers > 1024 || !rc->kv_heads ||
	    rc->kv_heads > 4096 || !rc->head_dim || rc->head_dim > 65536 ||
	    !rc->dtype_bytes || rc->dtype_bytes > 16 || !rc->max_seqs ||
	    rc->max_seqs > 65536 || !rc->max_tokens ||
	    rc->max_tokens > (1u << 24))
		return -EINVAL;
	token_bytes = (uint64_t)rc->kv_heads * rc->head_dim * rc->dtype_bytes;
	/* A block must hold whole tokens and start on a page. */
	if (token_bytes > d->page_size || d->page_size % token_bytes)
		return -EINVAL;
	if (2 * rc->layers > KVMM_EXTEND_MAX_PAGES)
		return -EINVAL;
	/* One (layer, K|V) range is max_seqs sequences of max_blocks
	 * pages: with pages near 1 GiB that passes 2^64 bytes, and a
	 * range_size that wrapped would describe a range far smaller than
	 * the sequences' addresses reach. */
	max_blocks = div_up(rc->max_tokens, d->page_size / token_bytes);
	if ((uint64_t)max_blocks * d->page_size > UINT64_MAX / rc->max_seqs)
		return -EINVAL;
	if (s->nr_regions >= KD_MAX_REGIONS_PER_SESSION)
		return -EMFILE;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->seqs = calloc(rc->max_seqs, sizeof(*r->seqs));
	if (!r->seqs) {
		free(r);
		return -ENOMEM;
	}
	r->id = d->next_region_id++;
	r->owner = s;
	r->layers = rc->layers;
	r->kv_heads = rc->kv_heads;
	r->head_dim = rc->head_dim;
	r->dtype_bytes = rc->dtype_bytes;
	r->max_seqs = rc->max_seqs;
	r->max_tokens = rc->max_tokens;
	r->salt = rc->salt;
	r->tokens_per_block = d->page_size / token_bytes;
	r->max_blocks = div_up(rc->max_tokens, r->tokens_per_block);
	r->pages_per_block = 2 * rc->layers;
	r->next = s->regions;
	s->regions = r;
	s->nr_regions++;

	memset(rep, 0, sizeof(*rep));
	rep->size = sizeof(*rep);
	rep->region_id = r->id;
	rep->tokens_per_block = r->tokens_per_block;
	rep->max_blocks = r->max_blocks;
	rep->pages_per_block = r->pages_per_block;
	rep->seq_stride = (uint64_t)r->max_blocks * d->page_size;
	rep->range_size = rep->seq_stride * r->max_seqs;
	return 0;
}

void kd_region_destroy(struct kd_region *r, bool unhold)
{
	struct kd_session *s = r->owner;
	struct kd_region **pp;

	for (uint32_t i = 0; i < r->max_seqs; i++)
		if (r->seqs[i].open)
			kd_seq_close(r, i, unhold);
	for (pp = &s->regions; *pp; pp = &(*pp)->next) {
		if (*pp == r) {
			*pp = r->next;
			break;
		}
	}
	s->nr_regions--;
	free(r->seqs);
	free(r);
}

int kd_region_lookup(struct kd_session *s, uint32_t id, struct kd_region **out)
{
	struct kd_region *r;

	for (r = s->regions; r; r = r->next) {
		if (r->id == id) {
			*out = r;
			return 0;
		}
	}
	for (struct kd_session *o = s->d->sessions; o; o = o->next)
		for (r = o->regions; r; r = r->next)
			if (r->id == id)
				return -EPERM;
	return -ENOENT;
}

int kd_seq_lookup(struct kd_region *r, uint32_t seq, struct kd_seq **out)
{
	if (seq >= r->max_seqs)
		return -EINVAL;
	if (!r->seqs[seq].open)
		return -ENOENT;
	*out = &r->seqs[seq];
	return 0;
}

int kd_seq_lookup_client(struct kd_region *r, uint32_t seq, struct kd_seq **out)
{
	int err = kd_seq_lookup(r, seq, out);

	return !err && ((*out)->opening || (*out)->extending) ? -EBUSY : err;
}

bool kd_region_seqs_busy(const struct kd_region *r)
{
	for (uint32_t i = 0; i < r->max_seqs; i++)
		if (r->seqs[i].open &&
		    (r->seqs[i].opening || r->seqs[i].extending))
			return true;
	return false;
}

int kd_seq_open(struct kd_region *r, uint32_t *seq)
{
	for (uint32_t i = 0; i < r->max_seqs; i++) {
		struct kd_seq *q = &r->seqs[i];

		if (q->open)
			continue;
		q->open = true;
		q->opening = false;
		q->extending = false;
		q->len = 0;
		q->few_new = false;
		if (!++r->next_seq_gen) /* 0 means unknown on the wire */
			++r->next_seq_gen;
		q->gen = r->next_seq_gen;
		r->nr_open++;
		r->owner->nr_sequences++;
		*seq = i;
		return 0;
	}
	return -ENOSPC;
}

static uint64_t seq_slots_budget(const struct kd_daemon *d)
{
	if (d->cfg.max_table_entries)
		return d->cfg.max_table_entries;
	return 2 * d->capacity > KD_SEQ_SLOTS_MIN ? 2 * d->capacity :
						    KD_SEQ_SLOTS_MIN;
}

bool kd_seq_slots_room(const struct kd_session *s, uint32_t nr)
{
	/* the uid's, not the session's: one client opening many sessions
	 * got a budget in each */
	return s->quota->seq_slots + nr <= seq_slots_budget(s->d);
}

static int seq_resize(struct kd_region *r, struct kd_seq *q, uint32_t nr)
{
	struct kd_session *s = r->owner;
	struct kd_block **t;

	if (!nr) {
		free(q->blocks);
		t = NULL;
	} else {
		t = realloc(q->blocks, (size_t)nr * sizeof(*t));
		if (!t)
			return -ENOMEM;
	}
	if (nr > q->nr_slots)
		memset(t + q->nr_slots, 0,
		       (size_t)(nr - q->nr_slots) * sizeof(*t));
	s->seq_slots = s->seq_slots - q->nr_slots + nr;
	s->quota->seq_slots = s->quota->seq_slots - q->nr_slots + nr;
	q->blocks = t;
	q->nr_slots = nr;
	return 0;
}

int kd_seq_reserve(struct kd_region *r, uint32_t seq, uint32_t nr)
{
	struct kd_session *s = r->owner;
	struct kd_seq *q = &r->seqs[seq];
	uint64_t want;

	if (nr <= q->nr_slots)
		return 0;
	if (nr > r->max_blocks)
		return -EINVAL;
	if (!kd_seq_slots_room(s, nr - q->nr_slots))
		return -ENOBUFS;
	/* doubling keeps the copies of a sequence grown block by block
	 * linear; only as far as the budget and max_blocks allow */
	want = 2 * (uint64_t)q->nr_slots;
	if (want < 8)
		want = 8;
	if (want < nr || want > r->max_blocks ||
	    !kd_seq_slots_room(s, want - q->nr_slots))
		want = nr;
	return seq_resize(r, q, want);
}

void kd_seq_trim(struct kd_region *r, uint32_t seq, uint32_t keep)
{
	struct kd_seq *q = &r->seqs[seq];
	uint32_t top = q->nr_slots;

	while (top > keep && !q->blocks[top - 1])
		top--;
	if (top < q->nr_slots)
		(void)seq_resize(r, q, top); /* a failed shrink keeps it all */
}

void kd_seq_drop_blocks(struct kd_region *r, uint32_t seq, uint32_t from,
			bool unhold)
{
	struct kd_session *s = r->owner;
	struct kd_seq *q = &r->seqs[seq];

	for (uint32_t b = from; b < q->nr_slots; b++) {
		struct kd_block *blk = q->blocks[b];

		if (!blk)
			continue;
		if (unhold)
			for (uint32_t i = 0; i < blk->nr_pages; i++)
				kd_unhold_page(s, blk->pages[i]);
		s->pages_owned -= blk->nr_pages;
		q->blocks[b] = NULL;
		kd_block_put(s->d, blk);
	}
}

void kd_seq_close(struct kd_region *r, uint32_t seq, bool unhold)
{
	struct kd_seq *q = &r->seqs[seq];

	kd_seq_drop_blocks(r, seq, 0, unhold);
	(void)seq_resize(r, q, 0); /* cannot fail */
	q->open = false;
	q->opening = false;
	q->extending = false;
	q->len = 0;
	r->nr_open--;
	r->owner->nr_sequences--;
}

struct kd_block *kd_seq_detach_block(struct kd_region *r, uint32_t seq,
				     uint32_t b)
{
	struct kd_seq *q = &r->seqs[seq];
	struct kd_block *blk = kd_seq_block(q, b);

	if (blk) {
		q->blocks[b] = NULL;
		r->owner->pages_owned -= blk->nr_pages;
	}
	return blk;
}

uint64_t kd_cache_owner(const struct kd_session *s)
{
	switch (s->d->scope.mode) {
	case KD_SCOPE_UID:
		return KD_OWNER_UID(s->uid);
	case KD_SCOPE_GID:
		return KD_OWNER_GID(s->gid);
	default:
		return KD_OWNER_SHARED;
	}
}

int kd_block_new(struct kd_session *s, uint32_t nr_pages, struct kd_block **out)
{
	return kd_block_new_for(s, nr_pages, KD_OWNER_UID(s->uid), out);
}

int kd_block_new_for(struct kd_session *s, uint32_t nr_pages, uint64_t owner,
		     struct kd_block **out)
{
	/* the processes that may get the pages' fds: the cache scope's */
	uint64_t domain = kd_cache_owner(s);
	struct kd_block *blk;
	uint32_t i;
	int err = 0;

	blk = calloc(1, sizeof(*blk) + nr_pages * sizeof(blk->pages[0]));
	if (!blk)
		return -ENOMEM;
	for (i = 0; i < nr_pages; i++) {
		err = vmm_pool_alloc_for(s->d->pool, owner, domain,
					 &blk->pages[i]);
		if (err)
			goto err_free_pages;
	}
	blk->refcnt = 1;
	blk->nr_pages = nr_pages;
	blk->charged = s->quota;
	if (blk->charged)
		blk->charged->used_pages += nr_pages;
	*out = blk;
	return 0;

err_free_pages:
	while (i--)
		vmm_pool_free(s->d->pool, blk->pages[i]);
	free(blk);
	return err;
}

int kd_seq_fill(struct kd_region *r, uint32_t seq, uint32_t from, uint32_t to,
		bool ask)
{
	return kd_seq_fill_for(r, seq, from, to, ask,
			       KD_OWNER_UID(r->owner->uid));
}

int kd_seq_fill_for(struct kd_region *r, uint32_t seq, uint32_t from,
		    uint32_t to, bool ask, uint64_t owner)
{
	struct kd_session *s = r->owner;
	struct kd_seq *q = &r->seqs[seq];
	struct kd_block **made;
	uint32_t missing = 0, n = 0;
	uint64_t need;
	int err = 0;

	for (uint32_t b = from; b < to; b++)
		missing += !kd_seq_block(q, b);
	if (!missing)
		return 0;
	need = (uint64_t)missing * r->pages_per_block;
	/* over the quota: the uid's own idle cached blocks make room first
	 * (-EDQUOT when they cannot; -EINPROGRESS: the caller parks until
	 * their copies down are done) */
	err = kd_cache_quota_reclaim(s, need);
	/* ... then the blocks other processes of the uid map ahead, asked
	 * back (cache_lend.c; -EINPROGRESS: the caller parks) */
	if (err == -EDQUOT && ask)
		err = kd_cache_lend_ask(s, need, err);
	if (err)
		return err;
	/* the table first, so nothing fails once pages are taken; when the
	 * pages do not come it stays grown to `to` until the sequence closes
	 * (the client asked for that much; a trim here could take the room
	 * an early PREFIX_OPEN's restores will attach to) */
	err = kd_seq_reserve(r, seq, to);
	if (err)
		return err;
	/* a full pool: cached blocks nobody uses make room (the allocation
	 * below fails if they cannot); when their pages come back only once
	 * their copies are done, or commands parked before this one wait for
	 * the free pages, the caller parks the command */
	err = kd_cache_reclaim(s->d, need);
	if (err == -EINPROGRESS)
		return err;
	/* nothing the cache holds frees enough: blocks ahead may (else the
	 * allocation fails below, as it did) */
	if (err == -ENOSPC && ask &&
	    kd_cache_lend_ask(s, need, err) == -EINPROGRESS)
		return -EINPROGRESS;
	made = calloc(missing, sizeof(*made));
	if (!made)
		return -ENOMEM;
	for (n = 0; n < missing; n++) {
		err = kd_block_new_for(s, r->pages_per_block, owner, &made[n]);
		if (err)
			goto err_put;
	}
	n = 0;
	for (uint32_t b = from; b < to; b++) {
		if (q->blocks[b])
			continue;
		q->blocks[b] = made[n++];
		s->pages_owned += r->pages_per_block;
		for (uint32_t i = 0; i < r->pages_per_block; i++)
			kd_hold_page(s, q->blocks[b]->pages[i]);
	}
	free(made);
	kd_cache_lend_filled(s); /* counted when it had asked */
	return 0;

err_put:
	while (n--)
		kd_block_put(s->d, made[n]);
	free(made);
	return err;
}
