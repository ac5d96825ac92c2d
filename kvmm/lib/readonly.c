// SPDX-License-Identifier: MIT
/*
 * libkvmm: cached blocks are mapped read-only.
 *
 * A block a prefix open shares (on the GPU already, or reloaded from a
 * lower tier) is the cache's copy: the same physical pages that the
 * publisher and every other reader map, in any process.  Written through
 * one mapping, it would change the prefix every later reader gets, and
 * caching would no longer be lossless.  So libkvmm opens such a block's
 * pages with read access only (host: PROT_READ, a write is SIGSEGV; cuda:
 * CU_MEM_ACCESS_FLAGS_PROT_READ) and the sequence's own blocks, past the
 * prefix or recomputed (KVMM_BLOCK_RECOMPUTE: fresh pages), read-write.
 * q->ro says which is which, per block; a block backed again by an
 * extend (revoked, fresh pages) is the sequence's own from then on.
 *
 * Two ways the engine would otherwise write into a read-only block, and
 * what happens instead:
 *   - an early open's reload that failed (SEQ_WAIT_READY lists it): the
 *     pages are the sequence's, never the cache's, and the engine is to
 *     recompute the block in place: kvmm_seq_wait_ready() makes it
 *     writable (kc_ro_release());
 *   - a length that ends inside a read-only block (truncated into the
 *     prefix): extending from there would write the block's next tokens
 *     into the shared pages.  The extend unshares the block first
 *     (unshare.c, ABI 1.20: kvmmd, which owns the pages, copies them into
 *     fresh ones of the sequence, mapped read-write at the same
 *     addresses), then extends; against a daemon before 1.20 it answers
 *     -EROFS, and the engine truncates to the block's start and
 *     recomputes.  kvmm_seq_block_unshare() does the same for any block
 *     the engine means to write (the one holding a prompt's last token).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kvmm/lib/client.h"

int kc_ro_set(struct kvmm_region *r, struct kc_seq *q, uint32_t first,
	      uint32_t n, const bool *ro)
{
	bool any = false;

	for (uint32_t k = 0; ro && k < n; k++)
		any |= ro[k];
	if (!any) {
		if (q->ro)
			memset(q->ro + first, 0, n * sizeof(*q->ro));
		return 0;
	}
	if (!q->ro) {
		q->ro = calloc(r->max_blocks, sizeof(*q->ro));
		if (!q->ro)
			return -ENOMEM;
	}
	memcpy(q->ro + first, ro, n * sizeof(*q->ro));
	return 0;
}

void kc_ro_forget(struct kvmm_region *r, struct kc_seq *q, uint32_t from)
{
	if (q->ro && from < r->max_blocks)
		memset(q->ro + from, 0,
		       (r->max_blocks - from) * sizeof(*q->ro));
}

void kc_ro_release(struct kvmm_region *r, uint32_t seq, uint32_t b)
{
	struct kc_seq *q = &r->seqs[seq];

	if (b >= r->max_blocks || !kc_block_ro(q, b))
		return;
	q->ro[b] = false;
	/* a page that cannot be opened is unmapped: the block is then not
	 * backed, as after a failed extend */
	for (uint32_t i = 0; q->block_pages[b] && i < r->pages_per_block; i++)
		kc_open_access(r, seq, b, 1, i);
	if (!kc_block_mapped(r, q, b))
		kc_seq_end_before(r, q, b);
}

int kc_extend_readonly(struct kvmm_region *r, uint32_t seq, uint32_t new_len)
{
	struct kvmm_conn *c;
	struct kc_seq *q;
	uint32_t b = 0;
	bool ro;
	int err;

	if (!r || kc_inherited(r->conn))
		return 0; /* the extend answers */
	c = r->conn;
	pthread_mutex_lock(&c->lock);
	err = kc_seq_get(r, seq, &q);
	ro = !err && new_len > q->len && q->len % r->tokens_per_block &&
	     kc_block_ro(q, q->len / r->tokens_per_block);
	if (ro)
		b = q->len / r->tokens_per_block;
	pthread_mutex_unlock(&c->lock);
	if (!ro)
		return 0; /* (a bad sequence: the extend answers) */
	if (!kc_can_unshare(c))
		return -EROFS;
	pthread_mutex_lock(&c->sock_lock);
	err = kc_unshare(r, seq, b);
	pthread_mutex_unlock(&c->sock_lock);
	/* revoked meanwhile (the revocation waits in our ring): the extend
	 * applies it and backs the block with fresh pages, the length cut
	 * before it, as any extend over a revoked block */
	return err == -ENODATA ? 0 : err;
}

int kvmm_seq_block_readonly(struct kvmm_region *r, uint32_t seq, uint32_t block)
{
	struct kc_seq *q;
	int err;

	err = kc_region_usable(r);
	if (err)
		return err;
	pthread_mutex_lock(&r->conn->lock);
	err = kc_seq_get_mapped(r, seq, block, &q);
	if (!err)
		err = kc_block_ro(q, block);
	pthread_mutex_unlock(&r->conn->lock);
	return err;
}
