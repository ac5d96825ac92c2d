// SPDX-License-Identifier: MIT
/*
 * libkvmm deferred blocks: fresh pages the map-ahead thread received for
 * blocks that are still mapped here.
 *
 * The daemon detaches revoked blocks at once and answers a SEQ_EXTEND
 * that reaches it afterwards with fresh pages for them, while the
 * revocation waits in our ring for the next step boundary.  The engine's
 * own extend maps those pages in place at once (it is documented to apply
 * revocations); the map-ahead thread runs while a step's kernels may read
 * the sequence, so it must not: it keeps the pages here, one ref each, and
 * kvmm_process_revocations() maps them once it has applied the
 * revocations, at the boundary where the old pages go anyway.  Until then
 * the sequence keeps its old pages and length.  A kept page is dropped
 * when a later reply backs its block again, when a revocation names it
 * (revoked before it was ever mapped), and when its block is truncated or
 * closed.  Everything here runs with c->lock held.
 */
#include <errno.h>
#include <stdlib.h>

#include "kvmm/lib/client.h"

bool kc_block_replaces(struct kvmm_region *r, struct kc_seq *q, uint32_t b,
		       const uint32_t *ids)
{
	uint32_t *slots = q->block_pages[b];

	for (uint32_t i = 0; slots && i < r->pages_per_block; i++)
		if (slots[i] != KC_NO_PAGE &&
		    slots[i] != (ids[i] & ~KVMM_PAGE_HELD))
			return true;
	return false;
}

void kc_deferred_drop(struct kvmm_region *r, uint32_t seq, uint32_t b)
{
	struct kvmm_conn *c = r->conn;
	struct kc_seq *q = &r->seqs[seq];
	uint32_t *ids = q->deferred ? q->deferred[b] : NULL;

	if (!ids)
		return;
	for (uint32_t i = 0; i < r->pages_per_block; i++)
		kc_page_unref(c, ids[i]);
	free(ids);
	q->deferred[b] = NULL;
	q->nr_deferred--;
	__atomic_fetch_sub(&c->nr_deferred, 1, __ATOMIC_RELAXED);
}

int kc_defer_block(struct kvmm_region *r, uint32_t seq, uint32_t b,
		   const uint32_t *ids)
{
	struct kvmm_conn *c = r->conn;
	struct kc_seq *q = &r->seqs[seq];
	uint32_t *keep;

	/* checked whole first: a bad reply takes no ref */
	for (uint32_t i = 0; i < r->pages_per_block; i++) {
		uint32_t id = ids[i] & ~KVMM_PAGE_HELD;

		if (id >= c->nr_pages)
			return -EPROTO;
		if ((ids[i] & KVMM_PAGE_HELD) ? !c->pages[id].refs :
						!c->pages[id].staged)
			return -EPROTO;
	}
	if (!q->deferred) {
		q->deferred = calloc(r->max_blocks, sizeof(*q->deferred));
		if (!q->deferred)
			return -ENOMEM;
	}
	keep = malloc(r->pages_per_block * sizeof(*keep));
	if (!keep)
		return -ENOMEM;
	for (uint32_t i = 0; i < r->pages_per_block; i++) {
		struct kc_page *p = &c->pages[ids[i] & ~KVMM_PAGE_HELD];

		/* staged by this reply: now ours, kc_import_end() leaves it */
		p->staged = false;
		p->refs++;
		keep[i] = ids[i] & ~KVMM_PAGE_HELD;
	}
	/* older pages kept for b were revoked since; dropped after the new
	 * refs are taken, in case the two share a page */
	kc_deferred_drop(r, seq, b);
	q->deferred[b] = keep;
	q->nr_deferred++;
	__atomic_fetch_add(&c->nr_deferred, 1, __ATOMIC_RELAXED);
	return 0;
}

bool kc_deferred_revoke(struct kvmm_region *r, uint32_t seq, uint32_t b,
			uint32_t page_id)
{
	struct kc_seq *q = &r->seqs[seq];
	uint32_t *ids = q->deferred ? q->deferred[b] : NULL;

	for (uint32_t i = 0; ids && i < r->pages_per_block; i++) {
		if (ids[i] == page_id) {
			/* the block is incomplete without it: none of it is
			 * mapped; the daemon drops the holds of its other
			 * pages with the same acknowledgement */
			kc_deferred_drop(r, seq, b);
			return true;
		}
	}
	return false;
}

/* Map one kept block in place of what is mapped there. */
static int apply_block(struct kvmm_region *r, uint32_t seq, uint32_t b)
{
	struct kvmm_conn *c = r->conn;
	struct kc_seq *q = &r->seqs[seq];
	uint32_t *ids = q->deferred[b], *slots = q->block_pages[b];
	int err = 0;

	if (!slots) {
		slots = malloc(r->pages_per_block * sizeof(*slots));
		if (!slots)
			return -ENOMEM; /* the caller drops the kept block */
		for (uint32_t i = 0; i < r->pages_per_block; i++)
			slots[i] = KC_NO_PAGE;
		q->block_pages[b] = slots;
	}
	for (uint32_t i = 0; i < r->pages_per_block; i++) {
		if (slots[i] == ids[i])
			continue; /* the kept ref goes with the block */
		if (slots[i] != KC_NO_PAGE) {
			/* its revocation is not in the ring yet (kvmmd posts
			 * one before it detaches the blocks, so only a
			 * daemon that did not gets here): what was written
			 * here is gone all the same; the page stays ours
			 * until it is applied
			 * (tests/daemon-revoke-map-ahead-unposted.c) */
			kc_retire_slot(r, seq, b, i);
			c->st.pages_revoked++;
		}
		if (b < q->replaced)
			q->replaced = b;
		err = c->backend->ops->map(c->backend, kc_slot_va(r, seq, b, i),
					   c->pages[ids[i]].handle);
		if (err)
			break;
		c->pages[ids[i]].refs++; /* the mapping's own ref */
		slots[i] = ids[i];
		c->st.pages_mapped++;
	}
	/* fresh pages: the sequence's own, writable */
	kc_ro_set(r, q, b, 1, NULL);
	for (uint32_t i = 0; !err && i < r->pages_per_block; i++)
		err = kc_open_access(r, seq, b, 1, i);
	if (err) {
		/* a block is mapped whole or not at all */
		for (uint32_t i = 0; i < r->pages_per_block; i++)
			if (slots[i] != KC_NO_PAGE) {
				kc_unmap_slot(r, seq, b, i);
				c->st.pages_mapped--;
			}
	}
	return err;
}

/* sock_lock and lock held */
void kc_deferred_apply(struct kvmm_conn *c)
{
	for (struct kvmm_region *r = c->regions; c->nr_deferred && r;
	     r = r->next) {
		for (uint32_t s = 0; s < r->max_seqs; s++) {
			struct kc_seq *q = &r->seqs[s];

			if (!q->open || !q->nr_deferred)
				continue;
			q->replaced = UINT32_MAX;
			for (uint32_t b = 0; b < r->max_blocks; b++) {
				if (!q->deferred[b])
					continue;
				/*
				 * Mapped or not, the block's kept refs go:
				 * a mapped page holds its own.  One that
				 * cannot be mapped stays unmapped, as after
				 * a failed extend: the sequence is backed
				 * only below it.
				 */
				apply_block(r, s, b);
				kc_deferred_drop(r, s, b);
			}
			/* the old contents are gone from the first block
			 * replaced on; what was never revoked stays */
			if (q->replaced != UINT32_MAX)
				kc_seq_end_before(r, q, q->replaced);
			while (q->backed < r->max_blocks &&
			       kc_block_mapped(r, q, q->backed))
				q->backed++;
		}
	}
}
