// SPDX-License-Identifier: MIT
/*
 * libkvmm copy-on-write: kvmm_seq_block_unshare() (ABI 1.20, SEQ_UNSHARE).
 *
 * A block a prefix open shares is mapped read-only (readonly.c).  To
 * write into it the engine asks kvmmd, which owns the pages, for a
 * private copy: kvmmd takes fresh pages for the sequence (charged as an
 * extend's), copies the block into them and replies with their fds, as
 * an extend replies.  Here, with sock_lock held throughout (no revocation
 * is applied and no other reply mapped meanwhile):
 *
 *   1. the block's read-only pages are unmapped, each keeping its ref:
 *      kvmmd drops this process's holds on them with its reply, so they
 *      must be gone from the address space by then (a hold is what keeps
 *      a page out of the free list);
 *   2. SEQ_UNSHARE; the reply's fds are imported as they arrive;
 *   3. the fresh pages are mapped read-write at the same addresses (the
 *      engine's pointers stay valid) and the old pages' refs dropped; or,
 *      when kvmmd answered an error (the uid's quota, the pool: nothing
 *      changed there), the old pages are mapped back read-only, as they
 *      were.  A page that cannot be mapped back leaves the block
 *      unmapped and the length before it, as after a failed extend.
 *
 * An extend whose length ends inside a read-only block (truncated into
 * the prefix) unshares that block first (kc_extend_readonly()): one
 * block's copy in kvmmd and one round trip, where an engine used to
 * truncate to the block's start and recompute the block.  A daemon before
 * 1.20 has no SEQ_UNSHARE: -EOPNOTSUPP without asking, and the extend
 * stays -EROFS.  Short of blocks (the uid's quota, the pool), the blocks
 * mapped ahead go back and it asks once more (kc_unshare()), as an
 * extend does (lend.c).
 */
#include <errno.h>
#include <stdlib.h>

#include "kvmm/lib/client.h"

bool kc_can_unshare(const struct kvmm_conn *c)
{
	return c->hello.abi_major != KVMM_ABI_MAJOR || c->hello.abi_minor >= 20;
}

/* kc_import check() of a SEQ_UNSHARE reply: at most the one block asked
 * for (arg is the region; im->ids gets the page ids). */
struct unshare_arg {
	struct kvmm_region *r;
	uint32_t block;
};

static int unshare_check(struct kc_import *im, const void *body, size_t len)
{
	const struct kvmm_seq_extend_reply *rep = body;
	const struct unshare_arg *a = im->arg;
	int err = kc_extend_reply_check(im, a->r, body, len);

	if (err)
		return err;
	if (rep->first_block != a->block || rep->nr_blocks > 1 || rep->flags ||
	    rep->nr_fds > im->nr_ids)
		return -EPROTO;
	for (uint32_t k = 0; k < im->nr_ids; k++)
		if (im->ids[k] & KVMM_PAGE_HELD)
			return -EPROTO; /* fresh pages, never held */
	return 0;
}

/*
 * The old pages (old[], ids) back where they were (lock held), read-only,
 * or read-write when kvmmd said the block is the sequence's own already
 * (own).  Pages kvmmd sent read-only (host: a shared block's fd) cannot be
 * opened for writing: the block stays read-only, -EROFS.  A page that
 * cannot be mapped at all is dropped, and the sequence ends before the
 * block.
 */
static int map_back(struct kvmm_region *r, uint32_t seq, uint32_t b,
		    const uint32_t *old, bool own)
{
	struct kvmm_conn *c = r->conn;
	struct kc_seq *q = &r->seqs[seq];
	bool lost = false, ro = false;

	for (uint32_t i = 0; i < r->pages_per_block; i++) {
		uint64_t va = kc_slot_va(r, seq, b, i);
		vmm_handle_t h = c->pages[old[i]].handle;

		if (own && !vmm_map_page(c->backend, va, h, VMM_PROT_RW))
			continue;
		if (!vmm_map_page(c->backend, va, h, VMM_PROT_READ)) {
			ro = true;
			continue;
		}
		kc_page_unref(c, old[i]);
		q->block_pages[b][i] = KC_NO_PAGE;
		lost = true;
	}
	if (lost) {
		kc_seq_end_before(r, q, b);
		return 0;
	}
	if (own && ro) {
		/* as one block: read-only throughout (q->ro[b] stays) */
		for (uint32_t i = 0; i < r->pages_per_block; i++)
			kc_open_access(r, seq, b, 1, i);
		return -EROFS;
	}
	if (own)
		q->ro[b] = false;
	return 0;
}

static int unshare_once(struct kvmm_region *r, uint32_t seq, uint32_t b)
{
	struct kvmm_conn *c = r->conn;
	struct vmm_backend *be = c->backend;
	struct kvmm_seq_unshare un = { .size = sizeof(un) };
	struct unshare_arg arg = { .r = r, .block = b };
	size_t cap = sizeof(struct kvmm_seq_extend_reply) +
		     (size_t)r->pages_per_block * sizeof(uint32_t);
	struct kvmm_seq_extend_reply *rep = NULL;
	uint32_t *old = NULL, unmapped = 0;
	struct kc_import im;
	struct kc_seq *q;
	size_t len = 0;
	int err;

	kc_seq_wait_collect(r, seq);
	pthread_mutex_lock(&c->lock);
	err = kc_seq_get_mapped(r, seq, b, &q);
	if (err || !kc_block_ro(q, b))
		goto out_unlock; /* 0: writable, the sequence's own */
	rep = malloc(cap);
	old = malloc(r->pages_per_block * sizeof(*old));
	err = -ENOMEM;
	if (!rep || !old)
		goto out_unlock;
	/* 1: out of the address space before kvmmd drops the holds */
	for (err = 0; !err && unmapped < r->pages_per_block; unmapped++) {
		old[unmapped] = q->block_pages[b][unmapped];
		err = be->ops->unmap(be, kc_slot_va(r, seq, b, unmapped));
	}
	if (err) {
		/* the one that failed is still mapped */
		for (uint32_t i = 0; i + 1 < unmapped; i++)
			if (vmm_map_page(be, kc_slot_va(r, seq, b, i),
					 c->pages[old[i]].handle,
					 VMM_PROT_READ)) {
				kc_page_unref(c, old[i]);
				q->block_pages[b][i] = KC_NO_PAGE;
				kc_seq_end_before(r, q, b);
			}
		goto out_unlock;
	}
	pthread_mutex_unlock(&c->lock);

	/* 2 */
	un.region_id = r->id;
	un.seq_id = seq;
	un.block = b;
	kc_import_init(&im, c, unshare_check, &arg);
	err = kc_import_request(&im, KVMM_CMD_SEQ_UNSHARE, &un, sizeof(un), rep,
				cap, &len);
	if (err == -ENOTTY)
		err = -EOPNOTSUPP; /* said 1.20, knows no SEQ_UNSHARE */

	/* 3 (the sequence is still open: closing it takes sock_lock) */
	pthread_mutex_lock(&c->lock);
	if (im.body_ok && rep->nr_blocks) {
		/* kvmmd put the fresh pages in (its holds on the old ones
		 * are gone), even when their fds did not all come */
		for (uint32_t i = 0; i < r->pages_per_block; i++) {
			kc_page_unref(c, old[i]);
			q->block_pages[b][i] = KC_NO_PAGE;
		}
		/* read-write (ro NULL); on failure the block is unmapped
		 * whole and the sequence ends before it, as after an
		 * extend's failed reply */
		if (!err)
			err = kc_map_blocks(r, seq, b, 1, rep->page_ids, NULL);
		if (err)
			kc_seq_end_before(r, q, b);
		else
			c->st.blocks_unshared++;
	} else {
		/* an error: nothing changed in kvmmd; or no block: the
		 * sequence's own already */
		int err2 = map_back(r, seq, b, old, !err);

		err = err ? err : err2;
	}
	kc_import_end(&im);
out_unlock:
	pthread_mutex_unlock(&c->lock);
	free(rep);
	free(old);
	return err;
}

/*
 * The copy is charged as an extend's blocks are: short of the uid's quota
 * or the pool, the blocks mapped ahead go back first (lend.c) and it asks
 * once more, as an extend does, since map-ahead must never make a call
 * fail that would have succeeded without it.
 */
int kc_unshare(struct kvmm_region *r, uint32_t seq, uint32_t b)
{
	int err = unshare_once(r, seq, b);

	if (kc_short_of_blocks(err) && kc_lend_block(r))
		err = unshare_once(r, seq, b);
	return err;
}

int kvmm_seq_block_unshare(struct kvmm_region *r, uint32_t seq, uint32_t block)
{
	struct kvmm_conn *c;
	int err;

	err = kc_region_usable(r);
	if (err)
		return err;
	c = r->conn;
	if (!kc_can_unshare(c))
		return -EOPNOTSUPP;
	pthread_mutex_lock(&c->sock_lock);
	err = kc_unshare(r, seq, block);
	pthread_mutex_unlock(&c->sock_lock);
	return err;
}
