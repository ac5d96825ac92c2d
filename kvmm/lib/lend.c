// SPDX-License-Identifier: MIT
/*
 * libkvmm lending: the blocks the map-ahead thread keeps mapped past the
 * other sequences' lengths go back to kvmmd when an extend's own blocks
 * do not fit the uid's quota, the pool or the uid's block tables.
 *
 * Map-ahead is an optimisation: it must never make an extend fail that
 * would have succeeded without it.  seq_extend() already drops its own
 * blocks ahead when they do not fit; what it could not drop were the
 * blocks held ahead for every other open sequence of the process (64
 * sequences with map_ahead 2: 128 blocks), so near a quota an extend
 * failed -EDQUOT for blocks nobody used.  kc_lend() truncates other
 * sequences to their own lengths (SEQ_TRUNCATE, as the engine's truncate
 * does: unmapped here first, then given back), the sequences with the
 * most blocks ahead first, until the blocks the extend lacks are covered;
 * a sequence gives all its blocks ahead or none (a truncate cannot keep
 * some).  Never a block below a sequence's length.
 *
 * What may change a sequence meanwhile: the caller holds sock_lock, so
 * no socket command (another extend, a truncate, a close, the map-ahead
 * thread's fetch, revocations applied) runs; a ring extend moves its
 * length within its mapped blocks without the socket, so kc_lend() marks
 * the sequences it looks at (q->lending: a new ring extend of them waits,
 * seq_extend()) and waits out those in flight (q->ring_extends) before it
 * reads their lengths.  Skipped: a sequence whose extend waits to be
 * collected (kvmmd answers -EBUSY), and one a revocation in our ring or
 * pages kept for it (defer.c) name: kvmmd may have cut it below the
 * length we know and backed blocks past that again, which a truncate to
 * our length would leave there while we unmapped them.
 *
 * kvmmd may ask for the same (ABI 1.19): an extend of another process
 * of our uid is short of blocks, and kvmmd sees this process hold blocks
 * past its lengths.  It cannot take them itself (a ring extend may have
 * moved a length over them that it has not read yet), so it posts a
 * KVMM_RQE_F_GIVE_AHEAD entry into our revocation ring, and the boundary
 * that applies revocations (revoke.c) answers it with kc_give_ahead():
 * the same truncates, of every sequence, until the pages it asked for
 * are covered.
 *
 * Since ABI 1.20 the map-ahead thread answers too, as soon as kvmmd
 * posts the request (kc_give_ahead_ring(), woken by the ring's eventfd),
 * so that a process that runs no steps and does not poll answers within
 * a millisecond rather than never.  Giving blocks ahead needs no
 * boundary: the truncates touch only blocks past the lengths we know,
 * which no kernel of the engine reads or writes before an extend covers
 * them, and an extend in flight is waited for (the marks above), exactly
 * as when the engine's own extend in the middle of a step takes back the
 * blocks ahead of its other sequences.  What needs a boundary is a
 * revocation (it takes blocks below a length): the thread applies none,
 * and it skips the sequences a revocation still in the ring names, as
 * kc_lend() does; the boundary that applies those revocations finds the
 * request answered (c->rq_given) and does not answer it again.  To a
 * daemon of 1.20 (the entry flagged KVMM_RQE_F_GIVE_ACK) the truncates
 * name the request (its cookie in reserved[0]) and a REVOKE_ACK of the
 * cookie says what was given, so kvmmd stops waiting for us at once.
 *
 * The map-ahead thread must not take the blocks back at once: after a
 * shortage it holds off (kc_mapahead_hold(), mapahead.c) until this
 * process closes or truncates a sequence, an extend gets its blocks ahead
 * again, or the backoff runs out.
 */
#include <errno.h>
#include <stdlib.h>

#include "kvmm/lib/client.h"

struct lend_pick {
	struct kvmm_region *r;
	uint32_t seq;
	uint32_t len; /* the length it is truncated to (its own) */
	uint32_t surplus; /* mapped blocks past it */
	int err; /* its truncate's */
};

/* Does a revocation waiting in our ring name r's sequence seq?  lock and
 * sock_lock held (the ring's head moves under both). */
static bool rq_names(struct kvmm_conn *c, struct kvmm_region *r, uint32_t seq)
{
	const struct kvmm_rqe *rqes = c->r.rq.array;
	uint32_t tail = kr_load_acquire(c->r.rq.tail);

	for (uint32_t h = c->rq_head; h != tail; h++) {
		const struct kvmm_rqe *e = &rqes[h & c->r.rq.mask];

		if (e->flags & KVMM_RQE_F_GIVE_AHEAD)
			continue; /* a request, naming nothing (ABI 1.19) */
		if (e->region_id == r->id && e->seq_id == seq)
			return true;
	}
	return false;
}

static bool may_lend(struct kvmm_conn *c, struct kvmm_region *r, uint32_t s)
{
	struct kc_seq *q = &r->seqs[s];

	return q->open && !q->collecting && !q->nr_deferred &&
	       q->backed > kc_blocks_for(r, q->len) && !rq_names(c, r, s);
}

static int by_surplus(const void *a, const void *b)
{
	const struct lend_pick *x = a, *y = b;

	return (x->surplus < y->surplus) - (x->surplus > y->surplus);
}

static void lend_end(struct kvmm_conn *c, struct lend_pick *p)
{
	p->r->seqs[p->seq].lending = false;
	pthread_cond_broadcast(&c->lend_cond);
}

/*
 * Truncate sequences of c to their lengths, the most ahead first, until
 * `missing` is covered: in blocks when xr is the extend's region (its
 * sequence xseq lends nothing), in pages when xr is NULL (kvmmd asked).
 * Blocks given back.
 */
static uint32_t lend(struct kvmm_conn *c, struct kvmm_region *xr, uint32_t xseq,
		     uint64_t missing, uint64_t cookie)
{
	struct kvmm_seq_extend tr = { .size = sizeof(tr) };
	struct lend_pick *p = NULL;
	uint32_t lent = 0, n = 0, k = 0;
	uint64_t covered = 0;
	struct kc_seq *q;

	for (struct kvmm_region *r = c->regions; r; r = r->next)
		for (uint32_t s = 0; s < r->max_seqs; s++)
			n += (r != xr || s != xseq) && may_lend(c, r, s);
	if (!n)
		return 0;
	p = calloc(n, sizeof(*p));
	if (!p)
		return 0;
	n = 0;
	for (struct kvmm_region *r = c->regions; r; r = r->next) {
		for (uint32_t s = 0; s < r->max_seqs; s++) {
			if ((r == xr && s == xseq) || !may_lend(c, r, s))
				continue;
			r->seqs[s].lending = true;
			p[n++] = (struct lend_pick){ .r = r, .seq = s };
		}
	}
	/*
	 * Ring extends of them already sent may still move their lengths:
	 * wait for their answers (no close or truncate can free them
	 * meanwhile: those need sock_lock).  Then the lengths hold still.
	 */
	for (uint32_t i = 0; i < n; i++) {
		q = &p[i].r->seqs[p[i].seq];
		while (q->ring_extends)
			pthread_cond_wait(&c->lend_cond, &c->lock);
		p[i].len = q->len;
		p[i].surplus =
			q->backed > kc_blocks_for(p[i].r, q->len) ?
				q->backed - kc_blocks_for(p[i].r, q->len) :
				0;
	}
	qsort(p, n, sizeof(*p), by_surplus);
	for (k = 0; k < n && covered < missing && p[k].surplus &&
		    (xr || lent + p[k].surplus <= c->give_max);
	     k++) {
		kc_unmap_blocks(p[k].r, p[k].seq,
				kc_blocks_for(p[k].r, p[k].len));
		lent += p[k].surplus;
		covered +=
			xr ? p[k].surplus :
			     (uint64_t)p[k].surplus * p[k].r->pages_per_block;
	}
	/* the others may extend again at once */
	for (uint32_t i = k; i < n; i++)
		lend_end(c, &p[i]);
	pthread_mutex_unlock(&c->lock);

	/* kvmmd drops the blocks from the first past each length on */
	for (uint32_t i = 0; i < k; i++) {
		tr.region_id = p[i].r->id;
		tr.seq_id = p[i].seq;
		tr.new_len = p[i].len;
		tr.reserved[0] = cookie; /* the request it answers (1.20) */
		p[i].err = kc_request_locked(c, KVMM_CMD_SEQ_TRUNCATE, &tr,
					     sizeof(tr), NULL, 0, NULL, NULL, 0,
					     NULL);
	}

	pthread_mutex_lock(&c->lock);
	for (uint32_t i = 0; i < k; i++) {
		if (!p[i].err)
			kc_revoke_truncated(p[i].r, p[i].seq,
					    kc_blocks_for(p[i].r, p[i].len));
		lend_end(c, &p[i]);
	}
	free(p);
	return lent;
}

uint32_t kc_lend(struct kvmm_region *xr, uint32_t xseq, uint32_t need)
{
	struct kvmm_conn *c = xr->conn;
	uint32_t lent = 0;
	struct kc_seq *q;

	pthread_mutex_lock(&c->lock);
	if (!kc_seq_get(xr, xseq, &q) && q->backed < need) {
		lent = lend(c, xr, xseq, need - q->backed, 0);
		c->st.blocks_lent += lent;
	}
	pthread_mutex_unlock(&c->lock);
	return lent;
}

/*
 * lend() (lock taken here), the blocks given counted in *given_stat; then
 * the map-ahead thread must not take them back at once: the extend that
 * lacked them, ours or another process's, waits for them.
 */
static uint32_t lend_and_hold(struct kvmm_conn *c, struct kvmm_region *xr,
			      uint32_t xseq, uint64_t missing, uint64_t cookie,
			      uint64_t *given_stat)
{
	uint32_t given;

	pthread_mutex_lock(&c->lock);
	given = lend(c, xr, xseq, missing, cookie);
	*given_stat += given;
	if (given)
		kc_mapahead_hold(c);
	pthread_mutex_unlock(&c->lock);
	return given;
}

uint32_t kc_lend_block(struct kvmm_region *r)
{
	/* one block, no sequence left out (UINT32_MAX names none) */
	return lend_and_hold(r->conn, r, UINT32_MAX, 1, 0,
			     &r->conn->st.blocks_lent);
}

uint32_t kc_give_ahead(struct kvmm_conn *c, uint64_t pages, uint64_t cookie)
{
	return lend_and_hold(c, NULL, 0, pages, cookie,
			     &c->st.blocks_lent_on_request);
}

void kc_give_ack(struct kvmm_conn *c, uint64_t cookie, uint32_t given)
{
	struct kvmm_sqe sqe = { .cmd = KVMM_CMD_REVOKE_ACK,
				.arg0 = cookie,
				.arg1 = given };
	struct kvmm_cqe cqe = { 0 };

	/* an answer kvmmd no longer waits for (it asked again since) is
	 * -ENOENT: nothing to do about it, and no revocation's business */
	(void)kc_ring_submit_wait(c, &sqe, &cqe, 1);
}

/* Where the requests nobody answered yet begin (lock held). */
static uint32_t give_from(const struct kvmm_conn *c)
{
	return (int32_t)(c->rq_given - c->rq_head) > 0 ? c->rq_given :
							 c->rq_head;
}

bool kc_give_pending(struct kvmm_conn *c)
{
	return c->ring_mem && kr_load_acquire(c->r.rq.tail) != give_from(c);
}

void kc_give_ahead_ring(struct kvmm_conn *c)
{
	const struct kvmm_rqe *rqes = c->r.rq.array;
	uint64_t pages = 0, cookie = 0;
	uint32_t tail, given = 0;

	pthread_mutex_lock(&c->sock_lock);
	pthread_mutex_lock(&c->lock);
	tail = kr_load_acquire(c->r.rq.tail);
	/* a ring kvmmd filled past its size: the boundary's business (and
	 * nothing for us to look at again until kvmmd posts) */
	if (tail - c->rq_head > c->r.rq.entries) {
		c->rq_given = tail;
		pthread_mutex_unlock(&c->lock);
		pthread_mutex_unlock(&c->sock_lock);
		return;
	}
	for (uint32_t h = give_from(c); h != tail; h++) {
		const struct kvmm_rqe *e = &rqes[h & c->r.rq.mask];

		if (!(e->flags & KVMM_RQE_F_GIVE_AHEAD))
			continue; /* a revocation: for the boundary */
		pages += e->page_id ? e->page_id : UINT32_MAX;
		if (e->flags & KVMM_RQE_F_GIVE_ACK)
			cookie = e->cookie; /* the latest is the one kvmmd
					     * waits for */
	}
	c->rq_given = tail;
	/* requests at the ring's head leave it now (room for kvmmd's next
	 * posts); those behind a revocation wait for the boundary, marked
	 * answered */
	while (c->rq_head != tail &&
	       (rqes[c->rq_head & c->r.rq.mask].flags & KVMM_RQE_F_GIVE_AHEAD))
		/* read unlocked by kc_revocations_pending() */
		__atomic_store_n(&c->rq_head, c->rq_head + 1, __ATOMIC_RELAXED);
	kr_store_release(c->r.rq.head, c->rq_head);
	pthread_mutex_unlock(&c->lock);
	if (pages)
		given = kc_give_ahead(c, pages, cookie);
	if (cookie)
		kc_give_ack(c, cookie, given);
	pthread_mutex_unlock(&c->sock_lock);
}
