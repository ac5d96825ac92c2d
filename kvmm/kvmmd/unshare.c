// SPDX-License-Identifier: MIT
/*
 * SEQ_UNSHARE (ABI 1.20): copy-on-write of one block of a sequence.
 *
 * A block a prefix open shares is the cache's copy, mapped read-only in
 * every reader (lib/readonly.c).  An engine that must write into it (the
 * block holding a prompt's last token, recomputed; a sequence truncated
 * into its shared prefix and grown again: beam search, rewinds,
 * speculative rollbacks) asks kvmmd for a private copy.  kvmmd owns the
 * pages and copies between tiers already, so the copy is done here, page
 * by page through the backend (vmm_page_copy(): copy_file_range between
 * memfds on the host backend, cuMemcpyDtoD on cuda):
 *
 *   1. the sequence's block is put aside and kd_seq_fill_for() backs
 *      the block with fresh pages, exactly as an extend would (the uid's
 *      quota and its idle cached blocks, blocks mapped ahead asked back,
 *      pool pressure; -EINPROGRESS parks the command and it runs again
 *      from the loop); on any failure the old block goes back and
 *      nothing changed.  The pages are allocated for KD_OWNER_COPY(uid),
 *      an owner nobody else allocates for: whoever gets them after this
 *      sequence, its own uid included, gets them zeroed (they hold the
 *      cache scope's bytes, then the sequence's own, and a fresh page
 *      holds zeros or its uid's own writes: tests/daemon-soak.c);
 *   2. the old pages' bytes are copied into the fresh ones;
 *   3. the old block leaves the sequence (the session's holds on its
 *      pages go: the client unmapped them before it asked) and loses
 *      this sequence's reference; the cache's entry, its pages and every
 *      other reader are untouched;
 *   4. the reply is a SEQ_EXTEND reply for that one block, with the
 *      fresh pages' fds (read-write: they are the sequence's own).
 *
 * A block that is already the sequence's own (no other reference, no
 * cache entry) is answered with no block: nothing to copy.  A block whose
 * early-open reload has not landed is -EBUSY (its bytes are not there
 * yet), one with no pages -ENODATA (past the length, or revoked: the
 * revocation waits in the client's ring).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kvmm/kvmmd/cache.h"
#include "kvmm/kvmmd/kvmmd.h"
#include "kvmm/kvmmd/proto_priv.h"

/* Nothing but this sequence holds blk's pages, and they never went out
 * read-only: it is the sequence's own (a published block keeps its hash
 * while the cache holds it, and a copy down may still read a held one;
 * a reloaded block the cache did not keep is one sequence's alone, but
 * its client got read-only fds and cannot map it writable: those are
 * copied; the soak found the last). */
static bool block_own(const struct kd_block *blk)
{
	return blk->refcnt == 1 && !blk->hash && !blk->ro_sent;
}

/* Copy old's pages into fresh's, page by page. */
static int copy_block(struct kd_daemon *d, struct kd_block *fresh,
		      const struct kd_block *old)
{
	for (uint32_t i = 0; i < old->nr_pages; i++) {
		int err = vmm_page_copy(
			d->backend,
			vmm_pool_page_handle(d->pool, fresh->pages[i]),
			vmm_pool_page_handle(d->pool, old->pages[i]));

		if (err)
			return err;
	}
	return 0;
}

/*
 * Block b of r's sequence seq (q) gets fresh pages holding old's bytes:
 * 0 (q->blocks[b] is the fresh block, old still referenced by the
 * caller), -EINPROGRESS (parked: nothing changed), or -errno (nothing
 * changed).
 */
static int unshare_block(struct kd_region *r, uint32_t seq, uint32_t b,
			 struct kd_block *old)
{
	struct kd_session *s = r->owner;
	struct kd_seq *q = &r->seqs[seq];
	struct kd_block *fresh;
	int err;

	/* kd_seq_fill() backs a block that has none, charged as an
	 * extend's: the old one steps aside meanwhile (still referenced,
	 * so no reclaim takes it) */
	q->blocks[b] = NULL;
	s->pages_owned -= old->nr_pages;
	err = kd_seq_fill_for(r, seq, b, b + 1, true, KD_OWNER_COPY(s->uid));
	if (!err) {
		fresh = q->blocks[b];
		err = copy_block(s->d, fresh, old);
		if (err) {
			vmm_log(VMM_LOG_ERR,
				"session %u: copy of block %u of sequence %u for SEQ_UNSHARE: %s",
				s->id, b, seq, strerror(-err));
			for (uint32_t i = 0; i < fresh->nr_pages; i++)
				kd_unhold_page(s, fresh->pages[i]);
			s->pages_owned -= fresh->nr_pages;
			kd_block_put(s->d, fresh);
		}
	}
	if (err) {
		q->blocks[b] = old;
		s->pages_owned += old->nr_pages;
	}
	return err;
}

int kd_cmd_seq_unshare(struct req *rq)
{
	struct kd_session *s = rq->s;
	struct kvmm_seq_extend_reply *rep;
	struct kvmm_seq_unshare un;
	struct kd_block *old, *fresh;
	struct kd_region *r;
	struct kd_seq *q;
	size_t rep_len;
	int err = COPY_IN(rq, un);

	if (err)
		return err;
	if (un.flags || un.pad ||
	    !kw_all_zero(un.reserved, sizeof(un.reserved)))
		return -EINVAL;
	err = kd_region_lookup(s, un.region_id, &r);
	if (!err)
		err = kd_seq_lookup_client(r, un.seq_id, &q);
	if (err)
		return err;
	if (un.block >= r->max_blocks)
		return -EINVAL;
	old = kd_seq_block(q, un.block);
	/* also revoked where an extend for blocks ahead alone (the
	 * map-ahead thread's) backed it again: those fresh pages are not
	 * what the client maps there yet, and answered "your own" it mapped
	 * its old, shared pages writable where the backend lets it */
	if (!old || kd_seq_revoked(q, un.block))
		return -ENODATA;
	if (kd_cache_block_loading(s, r, un.seq_id, un.block))
		return -EBUSY;
	rep_len = sizeof(*rep) + (size_t)r->pages_per_block * sizeof(uint32_t);
	rep = calloc(1, rep_len);
	if (!rep)
		return -ENOMEM;
	rep->first_block = un.block;
	rep->pages_per_block = r->pages_per_block;
	if (block_own(old)) {
		rep->size = sizeof(*rep);
		rep->len = q->len;
		err = kd_extend_send(rq, rep);
		goto out;
	}
	err = unshare_block(r, un.seq_id, un.block, old);
	if (err == -EINPROGRESS && !s->d->cache)
		err = -ENOMEM; /* cannot happen: only the cache parks */
	if (err == -EINPROGRESS) {
		/* pool pages come back when the victims' copies end: run
		 * again from the loop (cache_park.c) */
		err = kd_cache_park(s, rq->h, rq->p, rq->len) ?: 1;
		goto out;
	}
	if (err)
		goto out;
	/* the client unmapped the old pages before it asked */
	for (uint32_t i = 0; i < old->nr_pages; i++)
		kd_unhold_page(s, old->pages[i]);
	kd_block_put(s->d, old);
	kd_cache_count_unshare(s->d, r);
	fresh = q->blocks[un.block];
	rep->size = rep_len;
	rep->nr_blocks = 1;
	rep->nr_fds = fresh->nr_pages;
	rep->len = q->len;
	memcpy(rep->page_ids, fresh->pages,
	       fresh->nr_pages * sizeof(rep->page_ids[0]));
	vmm_log(VMM_LOG_DEBUG,
		"session %u: block %u of sequence %u of region %u unshared (%u pages copied)",
		s->id, un.block, un.seq_id, r->id, fresh->nr_pages);
	err = kd_extend_send(rq, rep);
out:
	free(rep);
	return err;
}
