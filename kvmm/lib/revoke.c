// SPDX-License-Identifier: MIT
/*
 * libkvmm revocation handling and step boundaries.
 *
 * The daemon posts one RQ entry per mapping it wants back; the batch's
 * last entry carries KVMM_RQE_F_LAST and its cookie is acknowledged once
 * every entry before it has been applied.  Applying an entry unmaps the
 * page at the place the daemon named (region, sequence and its opening,
 * block), nowhere when that place let it go already, and marks the
 * sequence as mapped only up to that block; where an extend's fresh page
 * has replaced it already, it releases the old page kept for the place
 * (retire.c).  Revocations are applied at
 * step boundaries (no kernel of ours reads the pages then) or on request;
 * so are the fresh pages the map-ahead thread got for revoked blocks
 * meanwhile (defer.c), which it must not map under a running step.
 * An entry flagged KVMM_RQE_F_GIVE_AHEAD (ABI 1.19) is no revocation but
 * kvmmd's request for the blocks mapped ahead of our sequences' lengths,
 * which another process of our uid lacks: answered once the revocations
 * before it are applied, by truncates (lend.c), unless the map-ahead
 * thread answered it already (c->rq_given), and acknowledged only when
 * kvmmd flags it KVMM_RQE_F_GIVE_ACK (ABI 1.20).
 */
#include <errno.h>
#include <stdbool.h>
#include <unistd.h>

#include "ebpf/telemetry_shm.h"
#include "kvmm/lib/client.h"

/* Unmap one slot and shorten its sequence to end before the block. */
static void drop_slot(struct kvmm_region *r, uint32_t s, uint32_t b, uint32_t i)
{
	struct kc_seq *q = &r->seqs[s];

	kc_unmap_slot(r, s, b, i);
	if (q->backed > b)
		q->backed = b;
	if (q->len > b * r->tokens_per_block)
		q->len = b * r->tokens_per_block;
}

/*
 * One entry takes back one mapping of the page, at the place the daemon
 * named (the daemon counts holds per mapping, so exactly one goes per
 * entry).  With the sequence's opening named too (seq_gen), a place that
 * is closed, opened again since, or no longer maps the page means we
 * unmapped it ourselves (close, truncate) and the entry takes nothing:
 * another mapping of a shared page must not pay for it.  Without seq_gen
 * (older daemons) the first place the page is found pays.  lock held.
 * 1 when the entry took a page, 2 when it took an old page an extend
 * had already unmapped (and counted), 0 when it took nothing.
 */
static int drop_page(struct kvmm_conn *c, const struct kvmm_rqe *e)
{
	for (struct kvmm_region *r = c->regions; r; r = r->next) {
		struct kc_seq *q;
		uint32_t *ids;

		if (r->id != e->region_id || e->seq_id >= r->max_seqs ||
		    e->block >= r->max_blocks)
			continue;
		q = &r->seqs[e->seq_id];
		ids = q->open ? q->block_pages[e->block] : NULL;
		if (e->seq_gen && q->gen != e->seq_gen)
			ids = NULL; /* an earlier opening of the slot */
		for (uint32_t i = 0; ids && i < r->pages_per_block; i++) {
			if (ids[i] == e->page_id) {
				drop_slot(r, e->seq_id, e->block, i);
				return 1;
			}
		}
		if (!q->open || (e->seq_gen && q->gen != e->seq_gen))
			continue;
		/* an old page the engine's extend unmapped for a fresh one
		 * (retire.c): its last ref here goes with the daemon's.  The
		 * extend counted it in pages_revoked when it unmapped it. */
		if (kc_retired_revoke(r, e->seq_id, e->block, e->page_id))
			return 2;
		/* fresh pages the map-ahead thread kept for the block,
		 * revoked in turn before they were mapped */
		if (kc_deferred_revoke(r, e->seq_id, e->block, e->page_id))
			return 1;
	}
	if (e->seq_gen)
		return 0;
	for (struct kvmm_region *r = c->regions; r; r = r->next) {
		for (uint32_t s = 0; s < r->max_seqs; s++) {
			struct kc_seq *q = &r->seqs[s];

			for (uint32_t b = 0; q->open && b < r->max_blocks;
			     b++) {
				uint32_t *ids = q->block_pages[b];

				for (uint32_t i = 0;
				     ids && i < r->pages_per_block; i++) {
					if (ids[i] == e->page_id) {
						drop_slot(r, s, b, i);
						return 1;
					}
				}
			}
		}
	}
	return 0;
}

void kc_revoke_truncated(struct kvmm_region *r, uint32_t seq,
			 uint32_t first_block)
{
	struct kvmm_conn *c = r->conn;
	struct kvmm_rqe *rqes = c->r.rq.array;
	uint32_t tail = kr_load_acquire(c->r.rq.tail), gen = r->seqs[seq].gen;

	for (uint32_t i = c->rq_head; gen && i != tail; i++) {
		struct kvmm_rqe *e = &rqes[i & c->r.rq.mask];

		if (!(e->flags & KVMM_RQE_F_GIVE_AHEAD) &&
		    e->region_id == r->id && e->seq_id == seq &&
		    e->seq_gen == gen && e->block >= first_block)
			e->block = UINT32_MAX; /* drop_page(): no such place */
	}
}

int kvmm_process_revocations(struct kvmm_conn *c)
{
	struct kvmm_rqe *rqes;
	uint64_t cookies[64];
	uint32_t nr_cookies = 0;
	int pages = 0, counted = 0, err = 0;
	uint64_t give = 0; /* pages kvmmd asked for (lend.c) */
	uint64_t give_cookie = 0; /* the request to acknowledge (1.20) */
	uint32_t given = 0;
	bool more;
	uint64_t v;

	if (!c || !c->ring_mem)
		return -EINVAL;
	if (kc_inherited(c))
		return -ECHILD;
	if (read(c->rv_efd, &v, sizeof(v)) < 0) {
		/* EAGAIN: nothing signalled; look at the ring anyway */
	}
	pthread_mutex_lock(&c->sock_lock);
	pthread_mutex_lock(&c->lock);
	rqes = c->r.rq.array;
	for (;;) {
		uint32_t tail = kr_load_acquire(c->r.rq.tail);

		if (tail == c->rq_head || nr_cookies == 64)
			break;
		while (c->rq_head != tail && nr_cookies < 64) {
			struct kvmm_rqe e = rqes[c->rq_head & c->r.rq.mask];

			if (e.flags & KVMM_RQE_F_GIVE_AHEAD) {
				/* the map-ahead thread answered those
				 * before rq_given (lend.c) */
				if ((int32_t)(c->rq_head - c->rq_given) >= 0) {
					give += e.page_id ? e.page_id :
							    UINT32_MAX;
					if (e.flags & KVMM_RQE_F_GIVE_ACK)
						give_cookie = e.cookie;
				}
			} else if (drop_page(c, &e) == 2)
				counted++;
			pages += !(e.flags & KVMM_RQE_F_GIVE_AHEAD);
			/* read unlocked by kc_revocations_pending() */
			__atomic_store_n(&c->rq_head, c->rq_head + 1,
					 __ATOMIC_RELAXED);
			if (e.flags & KVMM_RQE_F_LAST)
				cookies[nr_cookies++] = e.cookie;
		}
		kr_store_release(c->r.rq.head, c->rq_head);
	}
	c->st.pages_revoked += pages - counted;
	/* kept within 2^31 of the head, for the comparisons above */
	if ((int32_t)(c->rq_given - c->rq_head) < 0)
		c->rq_given = c->rq_head;
	more = kr_load_acquire(c->r.rq.tail) != c->rq_head;
	/* Pages kept for revoked blocks go in once every revocation before
	 * them is applied: one still in the ring may name them. */
	if (!more)
		kc_deferred_apply(c);
	pthread_mutex_unlock(&c->lock);
	if (more) {
		/* 64 requests a call: the eventfd was cleared above, so a
		 * caller asleep on kvmm_poll_fd() would not learn of the
		 * rest until the daemon posted again (or timed it out) */
		uint64_t one = 1;

		if (write(c->rv_efd, &one, sizeof(one)) < 0) {
			/* EAGAIN: the counter is saturated, still readable */
		}
	}
	for (uint32_t i = 0; i < nr_cookies; i++) {
		int e = kc_ring_cmd(c, KVMM_CMD_REVOKE_ACK, 0, 0, cookies[i],
				    NULL);
		if (e && !err)
			err = e;
	}
	if (give)
		given = kc_give_ahead(c, give, give_cookie);
	if (give_cookie)
		kc_give_ack(c, give_cookie, given);
	pthread_mutex_unlock(&c->sock_lock);
	return err ? err : pages;
}

/*
 * Revocations in the ring, or pages kept for revoked blocks.  The daemon
 * posts a revocation before it detaches the blocks, so kept pages come
 * with entries in the ring; the count (read without the lock) covers a
 * call that left them because more requests were waiting.
 */
static bool boundary_work(struct kvmm_conn *c)
{
	return kc_revocations_pending(c) ||
	       __atomic_load_n(&c->nr_deferred, __ATOMIC_RELAXED);
}

int kvmm_step_begin(struct kvmm_conn *c)
{
	int err;

	if (!c || !c->ring_mem)
		return -EINVAL;
	if (kc_inherited(c))
		return -ECHILD;
	if (boundary_work(c)) {
		err = kvmm_process_revocations(c);
		if (err < 0)
			return err;
	}
	return kc_ring_cmd(c, KVMM_CMD_STEP_BEGIN, 0, 0, 0, NULL);
}

int kvmm_step_end(struct kvmm_conn *c)
{
	int err;

	if (!c || !c->ring_mem)
		return -EINVAL;
	if (kc_inherited(c))
		return -ECHILD;
	/* no lock: threads may end steps of one connection at once */
	__atomic_add_fetch(&c->tel_step, 1, __ATOMIC_RELAXED);
	if (kvmm_tel_want(c->tel, access))
		kc_step_access(c);
	err = kc_ring_cmd(c, KVMM_CMD_STEP_END, 0, 0, 0, NULL);
	if (err)
		return err;
	if (boundary_work(c)) {
		err = kvmm_process_revocations(c);
		if (err < 0)
			return err;
	}
	return 0;
}
