// SPDX-License-Identifier: MIT
/*
 * libkvmm retired pages: old pages the engine's extend unmapped in favour
 * of fresh ones, kept imported until their revocation is applied.
 *
 * The daemon detaches revoked blocks at once and answers a SEQ_EXTEND
 * that reaches it afterwards with fresh pages for them; the engine's own
 * extend maps those in place of the old pages at once (lifecycle.md,
 * "Ordering guarantees", 5).  The daemon keeps its hold on each old page
 * until the revocation is acknowledged, and a prefix open in between that
 * shares one (a cached block the sequence published) names it
 * KVMM_PAGE_HELD, "you have it already", without its fd.  So libkvmm
 * keeps it too: the slot is unmapped, but the page keeps the slot's ref
 * here until the revocation entry that names the place is applied (or
 * the block is truncated or closed, which drop the daemon's hold at the
 * same time: kd_revoke_unmapped()).  The two counts of a page then change
 * on the same events again (ordering guarantee 3), and a prefix open of
 * the page maps it from its handle.
 *
 * Why here and not in the protocol: a SEQ_EXTEND flag "I dropped the
 * replaced pages" would let the daemon drop its holds at the extend
 * instead, but the daemon would then free pages on the client's word,
 * which a client that could not read the reply to its end (a connection
 * broken in the middle of it) cannot keep: it still maps the old pages.
 * And every older libkvmm would keep the bug.  Keeping a page a little
 * longer costs an imported handle (on the host backend a PROT_NONE
 * anchor, no fd) and changes nothing on the wire.  Everything here runs
 * with c->lock held.
 */
#include <stdlib.h>

#include "kvmm/lib/client.h"

struct kc_retired {
	uint32_t nr, cap;
	uint32_t ids[];
};

/* Room for one more page in block b's list; NULL when there is none. */
static struct kc_retired *retired_grow(struct kvmm_region *r, struct kc_seq *q,
				       uint32_t b)
{
	struct kc_retired *rt;
	uint32_t cap;

	if (!q->retired) {
		q->retired = calloc(r->max_blocks, sizeof(*q->retired));
		if (!q->retired)
			return NULL;
	}
	rt = q->retired[b];
	if (rt && rt->nr < rt->cap)
		return rt;
	/* a block's pages, more only if it is replaced again before the
	 * first revocation is applied */
	cap = rt ? 2 * rt->cap : r->pages_per_block;
	/* cppcheck-suppress memleakOnRealloc ; q->retired[b] still holds
	 * the old one, freed with the sequence */
	rt = realloc(rt, sizeof(*rt) + cap * sizeof(rt->ids[0]));
	if (!rt)
		return NULL;
	if (!q->retired[b])
		rt->nr = 0;
	rt->cap = cap;
	q->retired[b] = rt;
	return rt;
}

void kc_retire_slot(struct kvmm_region *r, uint32_t seq, uint32_t b, uint32_t i)
{
	struct kvmm_conn *c = r->conn;
	struct kc_seq *q = &r->seqs[seq];
	uint32_t *slots = q->block_pages[b];
	struct kc_retired *rt;

	if (!slots || slots[i] == KC_NO_PAGE)
		return;
	rt = retired_grow(r, q, b);
	if (!rt) {
		/* the ref goes now, as before retired pages were kept: a
		 * prefix open of the page before the ack then fails */
		kc_unmap_slot(r, seq, b, i);
		return;
	}
	c->backend->ops->unmap(c->backend, kc_slot_va(r, seq, b, i));
	rt->ids[rt->nr++] = slots[i]; /* the mapping's ref, now the list's */
	slots[i] = KC_NO_PAGE;
}

bool kc_retired_revoke(struct kvmm_region *r, uint32_t seq, uint32_t b,
		       uint32_t page_id)
{
	struct kc_seq *q = &r->seqs[seq];
	struct kc_retired *rt = q->retired ? q->retired[b] : NULL;

	for (uint32_t k = 0; rt && k < rt->nr; k++) {
		if (rt->ids[k] != page_id)
			continue;
		kc_page_unref(r->conn, page_id);
		rt->ids[k] = rt->ids[--rt->nr];
		return true;
	}
	return false;
}

void kc_retired_drop(struct kvmm_region *r, uint32_t seq, uint32_t b)
{
	struct kc_seq *q = &r->seqs[seq];
	struct kc_retired *rt = q->retired ? q->retired[b] : NULL;

	if (!rt)
		return;
	for (uint32_t k = 0; k < rt->nr; k++)
		kc_page_unref(r->conn, rt->ids[k]);
	free(rt);
	q->retired[b] = NULL;
}

void kc_retired_forget(struct kvmm_region *r, struct kc_seq *q)
{
	for (uint32_t b = 0; q->retired && b < r->max_blocks; b++)
		free(q->retired[b]);
	free(q->retired);
	q->retired = NULL;
}
