// SPDX-License-Identifier: MIT
/*
 * Commands parked for pool pages.  A SEQ_EXTEND (or a PREFIX_OPEN about to
 * restore) that finds the pool short has the reclaim demote victims; their
 * pages come back only when their copies to host memory are done.  Rather
 * than wait for those copies on the loop (every other client would wait
 * too), the command is parked: its session is deferred (its socket is not
 * read, so replies keep request order) and the request, kept as received,
 * runs again from the loop whenever migrations complete (kc_settle()),
 * whenever pages come back to the pool otherwise and the first parked
 * command's need is free (kd_cache_pages_back(): a sequence closed, a
 * session ended, a restore called off), and at its deadline.  Running it
 * again makes every decision again: it finds its pages, parks again while
 * copies are still in flight, or fails as a blocking wait would have.
 *
 * The line is fair: free pages are earmarked for the parked commands in
 * the order they parked (each for the pages its last run asked), so a
 * later command that needs pages from the pool, parked or new, gets only
 * what is free beyond the earmarks of the commands ahead of it; short of
 * that it takes victims for its own need and parks behind them
 * (kc_reclaim_check(), kc_reclaim_take()).  Without parked commands
 * nothing is earmarked and the reclaim decides as it always did.
 *
 * A SEQ_EXTEND with KVMM_SEQ_EXTEND_COLLECT (ABI 1.17) parks the same
 * way, in the same line, but its session is not deferred: the client was
 * answered at once that the extend waits, and its other threads use the
 * socket meanwhile.  Run again, it takes its pages in line order as any
 * parked command; what it would have replied (its pages, or its error
 * once its time is up) moves to the collected list, the ring's notify
 * word moves, and SEQ_COLLECT takes it from there (proto.c).  The
 * sequence is marked extending until then: the client's other socket
 * commands naming it are -EBUSY, so nothing changes its blocks between
 * the run that took the pages and the reply that hands them out.
 * A PREFIX_OPEN with KVMM_PREFIX_OPEN_COLLECT parks that way too: it opens
 * its sequence when it parks (opening, as the pending open's is) and names
 * it in the pending reply; run again, it goes on into that sequence, and
 * its PREFIX_COLLECT finds the pending open's record once it no longer
 * parks (cache_prefix.c), or here its error.
 */
#include "kvmm/kvmmd/cache_priv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void kc_park_drop(struct kd_cache *c, struct kc_park *pk)
{
	kd_fifo_unlink(&c->parked, &pk->link);
	c->cmds_parked_now--;
	free(pk->rep);
	free(pk);
}

static void kc_collected_drop(struct kd_cache *c, struct kc_park *pk)
{
	kd_fifo_unlink(&c->collected, &pk->link);
	free(pk->rep);
	free(pk);
}

uint64_t kc_reserved(struct kd_cache *c)
{
	uint64_t sum = 0;

	c = kc_line(c); /* one line for the pool every size takes from */
	for (struct kc_park *pk = kc_park_of(kd_fifo_first(&c->parked));
	     pk && pk != c->rerun; pk = kc_park_of(kd_fifo_next(&pk->link)))
		if (pk->s)
			sum += pk->need;
	return sum;
}

bool kc_pages_in_line(struct kd_cache *c, uint64_t pages)
{
	return kc_pool_free(c->d) >= pages + kc_reserved(c);
}

/*
 * A command left the line: restores of pending opens that waited for the
 * earmarks ahead of them (kc_busy_retry()) are tried again, from the loop.
 */
static void kc_park_line_moved(struct kd_cache *line)
{
	struct kd_cache *c;
	uint32_t i;

	kc_for_each(line->d, c, i)
		if (c->busy_in_line && !c->closing && !c->settle_timer.armed)
			kd_timer_arm(&c->d->loop, &c->settle_timer, 0);
}

/* The first parked command's pages are free: it can be served now. */
static bool kc_park_head_fits(struct kd_cache *c)
{
	struct kc_park *head = kc_park_of(kd_fifo_first(&c->parked));

	return head && kc_pool_free(c->d) >= head->need;
}

/*
 * The timer goes off at once when pages came back for the first parked
 * command (kd_cache_pages_back()), else at the earliest deadline of the
 * parked commands.
 */
static void kc_park_arm(struct kd_cache *c)
{
	uint64_t when = UINT64_MAX;

	if (c->park_kicked && !kc_park_head_fits(c))
		c->park_kicked = false;
	for (struct kc_park *pk = kc_park_of(kd_fifo_first(&c->parked)); pk;
	     pk = kc_park_of(kd_fifo_next(&pk->link)))
		if (pk->deadline_ns < when)
			when = pk->deadline_ns;
	if (when != UINT64_MAX && (c->park_kicked || c->park_answered))
		when = 0;
	if (when == UINT64_MAX)
		kd_timer_cancel(&c->d->loop, &c->park_timer);
	else if (!c->park_timer.armed || c->park_timer.when_ns != when)
		kd_timer_arm(&c->d->loop, &c->park_timer, when);
}

/* A new command at the end of the line (NULL: no memory). */
static struct kc_park *kc_park_add(struct kd_session *s,
				   const struct kvmm_msg_hdr *h, const void *p,
				   size_t len)
{
	struct kd_cache *c = s->d->cache;
	struct kc_park *pk = calloc(1, sizeof(*pk) + sizeof(*h) + len);

	if (!pk)
		return NULL;
	pk->s = s;
	pk->need = c->park_need;
	pk->parked_ns = kd_now_ns();
	/* one waiting for blocks ahead waits --lend-wait (cache_lend.c) */
	pk->deadline_ns =
		kd_now_ns() + (c->park_ms ?: KD_PARK_MAX_MS) * 1000000ull;
	pk->lend_asked = c->park_lend;
	c->park_lend = false;
	c->park_ms = 0;
	pk->status = -EIO; /* kd_cache_park_done() says what it was */
	pk->cmd = h->cmd;
	pk->len = sizeof(*h) + len;
	memcpy(pk->msg, h, sizeof(*h));
	memcpy((char *)pk->msg + sizeof(*h), p, len);
	kd_fifo_push_tail(&c->parked, &pk->link);
	c->cmds_parked++;
	c->cmds_parked_now++;
	kc_park_arm(c);
	return pk;
}

/* Run again and still waiting: same place in line, same deadline, the
 * pages it asked this time.  Whether s's command is that rerun. */
static bool kc_park_again(struct kd_cache *c, struct kd_session *s)
{
	if (!c->rerun || c->rerun->s != s)
		return false;
	c->park_lend = false; /* a rerun's record says it (cache_lend.c) */
	c->park_ms = 0;
	c->rerun->need = c->park_need;
	c->rerun_parked = true;
	return true;
}

int kd_cache_park(struct kd_session *s, const struct kvmm_msg_hdr *h,
		  const void *p, size_t len)
{
	if (!kc_park_again(s->d->cache, s) && !kc_park_add(s, h, p, len))
		return -ENOMEM;
	kd_session_defer(s);
	return 0;
}

int kd_cache_park_collect(struct kd_session *s, const struct kvmm_msg_hdr *h,
			  const void *p, size_t len, struct kd_region *r,
			  uint32_t seq)
{
	struct kc_park *pk;

	if (kc_park_again(s->d->cache, s))
		return 0;
	pk = kc_park_add(s, h, p, len);
	if (!pk)
		return -ENOMEM;
	pk->collect = true;
	pk->region_id = r->id;
	pk->seq = seq;
	/* a prefix open's sequence is the one it will open */
	if (h->cmd == KVMM_CMD_SEQ_EXTEND)
		r->seqs[seq].extending = true;
	else
		r->seqs[seq].opening = true;
	return 0;
}

bool kd_cache_park_rerun(struct kd_session *s, uint32_t *seq)
{
	struct kd_cache *c = s->d->cache;

	if (!c || !c->rerun || c->rerun->s != s || !c->rerun->collect)
		return false;
	if (seq)
		*seq = c->rerun->seq;
	return true;
}

void kd_cache_park_done(struct kd_session *s, int status, void *rep, size_t len)
{
	struct kc_park *pk = s->d->cache->rerun;

	free(pk->rep);
	pk->status = status;
	pk->rep = status ? NULL : rep;
	pk->rep_len = status ? 0 : len;
	if (status)
		free(rep);
}

/* The record of s's command cmd of (region_id, seq) in q, or NULL. */
static struct kc_park *kc_park_find(struct kd_fifo *q, struct kd_session *s,
				    uint16_t cmd, uint32_t region_id,
				    uint32_t seq)
{
	for (struct kc_park *pk = kc_park_of(kd_fifo_first(q)); pk;
	     pk = kc_park_of(kd_fifo_next(&pk->link)))
		if (pk->s == s && pk->collect && pk->cmd == cmd &&
		    pk->region_id == region_id && pk->seq == seq)
			return pk;
	return NULL;
}

int kd_cache_park_collect_take(struct kd_session *s, uint16_t cmd,
			       struct kd_region *r, uint32_t seq, int *status,
			       void **rep, size_t *len)
{
	struct kd_cache *c = s->d->cache;
	struct kc_park *pk;

	if (!c)
		return -ENOENT;
	pk = kc_park_find(&c->collected, s, cmd, r->id, seq);
	if (!pk)
		return kc_park_find(&c->parked, s, cmd, r->id, seq) ? -EAGAIN :
								      -ENOENT;
	*status = pk->status;
	*rep = pk->rep;
	*len = pk->rep_len;
	pk->rep = NULL;
	kc_collected_drop(c, pk);
	if (seq < r->max_seqs)
		r->seqs[seq].extending = false;
	return 0;
}

bool kd_cache_park_waits(struct kd_session *s)
{
	struct kd_cache *c = s->d->cache;
	struct kd_fifo *lists[2] = { c ? &c->parked : NULL,
				     c ? &c->collected : NULL };

	for (int i = 0; c && i < 2; i++)
		for (struct kc_park *pk = kc_park_of(kd_fifo_first(lists[i]));
		     pk; pk = kc_park_of(kd_fifo_next(&pk->link)))
			if (pk->s == s && pk->collect)
				return true;
	return false;
}

/*
 * Run every parked command again, oldest first.  One still waiting keeps
 * its place in line (and its earmark before the later ones).  The list is
 * searched from its head each time: a reply that fails ends its session,
 * which takes that session's record off the list.
 */
void kc_park_run(struct kd_cache *c)
{
	uint64_t now = kd_now_ns(), round = ++c->park_round;
	bool moved = false;

	c->park_kicked = false;
	c->park_answered = false;
	for (;;) {
		struct kc_park *pk = kc_park_of(kd_fifo_first(&c->parked));
		struct kd_session *s;
		bool parked, deferred;

		while (pk && pk->round == round)
			pk = kc_park_of(kd_fifo_next(&pk->link));
		if (!pk)
			break;
		s = pk->s;
		pk->round = round;
		c->rerun = pk;
		c->rerun_final = now >= pk->deadline_ns;
		c->rerun_parked = false;
		if (pk->collect) {
			/* not deferred: its outcome goes to the record
			 * (kd_cache_park_done()), nothing is sent */
			kd_proto_socket(s, pk->msg, pk->len, NULL, 0);
			deferred = true;
		} else {
			deferred = kd_session_rerun(s, pk->msg, pk->len);
		}
		parked = c->rerun_parked;
		c->rerun = NULL;
		if (!pk->s) {
			/* its session ended meanwhile (kc_park_session_end()
			 * left the record to us): nothing to resume */
			kc_park_drop(c, pk);
			moved = true;
			continue;
		}
		if (parked)
			continue;
		if (pk->collect && pk->status > 0) {
			/* a prefix open that went on: its pending record
			 * answers the collect (cache_pending.c) */
			kc_park_drop(c, pk);
			moved = true;
			continue;
		}
		if (pk->collect) {
			/* out of line (no earmark), for its SEQ_COLLECT */
			kd_fifo_unlink(&c->parked, &pk->link);
			c->cmds_parked_now--;
			kd_fifo_push_tail(&c->collected, &pk->link);
			kd_ring_notify(s);
			moved = true;
			continue;
		}
		kc_park_drop(c, pk);
		moved = true;
		/* a PREFIX_OPEN now waiting for restores resumes the session
		 * when it replies (kc_pending_finish()) */
		if (!deferred)
			kd_session_resume(s); /* last: may end the session */
	}
	kc_park_arm(c);
	if (moved)
		kc_park_line_moved(c);
}

void kd_cache_pages_back(struct kd_daemon *d)
{
	struct kd_cache *c = d->cache;

	if (!c || kd_fifo_empty(&c->parked) || c->park_kicked ||
	    !kc_park_head_fits(c))
		return;
	c->park_kicked = true;
	/* from the loop, not from inside whatever freed the pages; during
	 * a pass, kc_park_run() arms it when the pass ends */
	if (!c->rerun)
		kc_park_arm(c);
}

/*
 * A collected extend's reply that will never go out: the holds its run
 * took on its new pages (kd_seq_fill()) go now.  Those pages were never
 * sent, so no process maps them; left held, a session that ended without
 * BYE while its process lived had them quarantined with the pages it did
 * map, until the process exited.  The pages go with the sequence's
 * blocks when the session's regions do.
 */
static void kc_collected_unhold(struct kd_session *s, struct kc_park *pk)
{
	const struct kvmm_seq_extend_reply *rep = pk->rep;
	uint32_t n;

	if (pk->status || !rep || pk->cmd != KVMM_CMD_SEQ_EXTEND)
		return;
	n = rep->nr_blocks * rep->pages_per_block;
	for (uint32_t k = 0; k < n; k++)
		if (!(rep->page_ids[k] & KVMM_PAGE_HELD))
			kd_unhold_page(s, rep->page_ids[k]);
}

/* The session ends (kd_cache_session_end()): its parked command goes. */
void kc_park_session_end(struct kd_cache *c, struct kd_session *s)
{
	struct kc_park *pk = kc_park_of(kd_fifo_first(&c->parked));

	while (pk) {
		struct kc_park *next = kc_park_of(kd_fifo_next(&pk->link));

		if (pk->s == s) {
			if (pk == c->rerun) {
				pk->s = NULL; /* kc_park_run() frees it */
			} else {
				kc_park_drop(c, pk);
				kc_park_line_moved(c);
			}
		}
		pk = next;
	}
	pk = kc_park_of(kd_fifo_first(&c->collected));
	while (pk) {
		struct kc_park *next = kc_park_of(kd_fifo_next(&pk->link));

		if (pk->s == s) {
			kc_collected_unhold(s, pk);
			kc_collected_drop(c, pk);
		}
		pk = next;
	}
	/* the pages it waited for may be enough for the next in line */
	if (kc_park_head_fits(c))
		c->park_kicked = true;
	if (!c->rerun)
		kc_park_arm(c);
}

void kc_park_lend_answered(struct kd_cache *c)
{
	for (struct kc_park *pk = kc_park_of(kd_fifo_first(&c->parked)); pk;
	     pk = kc_park_of(kd_fifo_next(&pk->link))) {
		if (!pk->lend_asked)
			continue;
		c->park_answered = true;
		/* during a pass, kc_park_run() arms it when the pass ends */
		if (!c->rerun)
			kc_park_arm(c);
		return;
	}
}

void kc_park_fini(struct kd_cache *c)
{
	while (!kd_fifo_empty(&c->parked))
		kc_park_drop(c, kc_park_of(kd_fifo_first(&c->parked)));
	while (!kd_fifo_empty(&c->collected))
		kc_collected_drop(c, kc_park_of(kd_fifo_first(&c->collected)));
	kd_timer_cancel(&c->d->loop, &c->park_timer);
}

void kd_cache_park_stats(struct kd_daemon *d, struct kvmm_status_reply *st)
{
	struct kd_cache *c = d->cache;
	uint32_t i;

	if (!c)
		return;
	st->cmds_parked = c->cmds_parked;
	st->cmds_parked_now = c->cmds_parked_now;
	st->demotions_queued = 0;
	st->nr_sizes = 0;
	kc_for_each(d, c, i) { /* every size's, and each apart (ABI 1.22) */
		st->demotions_queued += c->demotions_queued;
		if (!kc_size(c) || st->nr_sizes == KVMM_TIER_STATS_SIZES)
			continue;
		st->sizes[st->nr_sizes] = kc_size(c);
		st->demotions_queued_size[st->nr_sizes++] = c->demotions_queued;
	}
}
