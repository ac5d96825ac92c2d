// SPDX-License-Identifier: MIT
/*
 * Revocation: the daemon taking pages back from a client.
 *
 * The daemon cannot unmap memory in another process, so it asks: it
 * detaches the blocks from the sequence at once (ownership and quota come
 * back now; the pool marks their pages REVOKING because the process still
 * maps them), posts one RQ entry per page under one cookie, and keeps the
 * session's holds on those pages.  The client unmaps them at its next step
 * boundary and sends REVOKE_ACK(cookie); the holds drop and the pages
 * become FREE.  If no ack comes within --revoke-timeout, the session is cut
 * off and its holds are quarantined until the process exits.
 *
 * The request is generic ("take back these pages"): tiering and sharing
 * reuse it for any set of pages a session holds.
 */
#include <errno.h>
#include <stdlib.h>

#include "ebpf/telemetry_shm.h"
#include "kvmm/kvmmd/cache.h"
#include "kvmm/kvmmd/kvmmd.h"

static void rearm(struct kd_session *s)
{
	if (s->revokes)
		kd_timer_arm(&s->d->loop, &s->revoke_timer,
			     s->revokes->deadline_ns);
	else
		kd_timer_cancel(&s->d->loop, &s->revoke_timer);
}

static void on_timeout(struct kd_loop *loop, struct kd_timer *t)
{
	struct kd_session *s = t->data;

	/* the client waits for a deferred reply (and cannot acknowledge
	 * while it does): its clock stops, kd_revoke_resume() re-arms */
	if (s->reply_deferred)
		return;
	/* or a thread of it waits for restores without the socket (ABI
	 * 1.16, cache_ready.c): its clock stops as well, in steps of the
	 * timeout, for as long as the daemon's restores last */
	if (kd_cache_session_waits(s)) {
		uint64_t timeout_ns = s->d->cfg.revoke_timeout_ms * 1000000ull;

		kd_revoke_resume(s, kd_now_ns() - timeout_ns);
		return;
	}
	s->d->ctr.revocations_timed_out++;
	s->revoke_timed_out = true;
	vmm_log(VMM_LOG_WARN,
		"session %u (pid %d): revocation %llu not acknowledged within %u ms",
		s->id, (int)s->pid,
		(unsigned long long)(s->revokes ? s->revokes->cookie : 0),
		s->d->cfg.revoke_timeout_ms);
	kd_session_end(s, true, "revocation timeout");
}

int kd_revoke_pages(struct kd_session *s, const struct kvmm_rqe *hints,
		    uint32_t n, void (*done)(void *arg, int status), void *arg,
		    uint64_t *cookie)
{
	struct kd_daemon *d = s->d;
	struct kd_revoke *rv, **pp;
	struct kvmm_rqe *e;
	int err;

	if (!s->ring || !n)
		return -EINVAL;
	e = calloc(n, sizeof(*e));
	rv = calloc(1, sizeof(*rv) + n * sizeof(rv->places[0]));
	if (!e || !rv) {
		err = -ENOMEM;
		goto out;
	}
	rv->cookie = d->next_cookie++;
	for (uint32_t k = 0; k < n; k++) {
		e[k] = hints[k];
		e[k].cookie = rv->cookie;
		e[k].flags = k == n - 1 ? KVMM_RQE_F_LAST : 0;
		rv->places[k] = hints[k];
	}
	err = kd_ring_post_revokes(s, e, n);
	if (err)
		goto out;
	rv->nr_pages = n;
	rv->done = done;
	rv->arg = arg;
	rv->deadline_ns =
		kd_now_ns() + (uint64_t)d->cfg.revoke_timeout_ms * 1000000ull;
	for (pp = &s->revokes; *pp; pp = &(*pp)->next)
		;
	*pp = rv;
	s->revoke_timer.fn = on_timeout;
	rearm(s);
	s->revocations_posted++;
	d->ctr.revocations_posted++;
	if (cookie)
		*cookie = rv->cookie;
	rv = NULL;
out:
	free(e);
	free(rv);
	return err;
}

int kd_revoke_seq(struct kd_session *s, struct kd_region *r, uint32_t seq,
		  uint32_t first_block, uint32_t *from)
{
	struct kd_daemon *d = s->d;
	struct kvmm_rqe *e;
	struct kd_seq *q;
	uint32_t n = 0, k = 0, room, entries, start = r->max_blocks, end = 0;
	uint64_t cookie;
	bool partial = false;
	int err;

	if (!s->ring)
		return -EINVAL;
	err = kd_seq_lookup(r, seq, &q);
	if (err)
		return err;
	if (first_block >= r->max_blocks)
		return -EINVAL;
	/* Its blocks are not the client's yet: the holds the ack would
	 * give back come with the open's reply (a revocation taking them
	 * freed pages the client still mapped elsewhere); nor are those of
	 * an extend whose reply waits to be collected (ABI 1.17). */
	if (q->extending || q->opening || kd_cache_seq_opening(s, r->id, seq))
		return -EBUSY;
	err = kd_ring_rq_room(s, &room, &entries);
	if (err)
		return err;
	/*
	 * The blocks from the end down, as many as the RQ has room for: a
	 * sequence of more pages than the ring holds could never be revoked
	 * at once (-EBUSY for good).  A revocation of a suffix is a whole
	 * one; the caller asks again for the rest (-EAGAIN) once the client
	 * has taken these entries off the ring.
	 */
	for (uint32_t b = q->nr_slots; b-- > first_block;) {
		if (!q->blocks[b])
			continue;
		if (n + q->blocks[b]->nr_pages > room) {
			partial = true;
			break;
		}
		n += q->blocks[b]->nr_pages;
		start = b;
	}
	if (!n) {
		if (!partial)
			return -ENODATA;
		/* the last block alone does not fit */
		for (uint32_t b = q->nr_slots; b-- > first_block;)
			if (q->blocks[b])
				return q->blocks[b]->nr_pages > entries ?
					       -E2BIG :
					       -EBUSY;
	}
	e = calloc(n, sizeof(*e));
	if (!e)
		return -ENOMEM;
	for (uint32_t b = start; b < q->nr_slots; b++) {
		struct kd_block *blk = q->blocks[b];

		for (uint32_t i = 0; blk && i < blk->nr_pages; i++, k++) {
			e[k].page_id = blk->pages[i];
			e[k].region_id = r->id;
			e[k].seq_id = seq;
			e[k].seq_gen = q->gen;
			e[k].block = b;
		}
	}
	err = kd_revoke_pages(s, e, n, NULL, NULL, &cookie);
	free(e);
	if (err)
		return err;
	/* Posted: now give up ownership (pages go REVOKING, quota back). */
	for (uint32_t b = start; b < q->nr_slots; b++) {
		struct kd_block *blk = kd_seq_detach_block(r, seq, b);

		if (blk) {
			kd_block_put(d, blk);
			end = b + 1;
		}
	}
	if (q->len > start * r->tokens_per_block)
		q->len = start * r->tokens_per_block;
	/* a publish of these blocks is told why it fails (kd_seq_revoked()) */
	if (q->revoked_gen != q->gen) {
		q->revoked_gen = q->gen;
		q->revoked_from = start;
		q->revoked_to = end;
	} else {
		if (start < q->revoked_from)
			q->revoked_from = start;
		if (end > q->revoked_to)
			q->revoked_to = end;
	}
	vmm_log(VMM_LOG_DEBUG,
		"session %u: revoking %u pages of region %u seq %u from block %u (cookie %llu)%s",
		s->id, n, r->id, seq, start, (unsigned long long)cookie,
		partial ? ", the rest when the ring has room" : "");
	*from = start;
	return partial ? -EAGAIN : 0;
}

int kd_revoke_ack(struct kd_session *s, uint64_t cookie)
{
	struct kd_revoke **pp, *rv;

	for (pp = &s->revokes; *pp; pp = &(*pp)->next)
		/* cppcheck-suppress nullPointerRedundantCheck ; the loop
		 * runs while *pp is not NULL */
		if ((*pp)->cookie == cookie)
			break;
	rv = *pp;
	if (!rv)
		return -ENOENT;
	*pp = rv->next;
	for (uint32_t i = 0; i < rv->nr_pages; i++)
		if (rv->places[i].page_id != KD_REVOKE_GONE)
			kd_unhold_page(s, rv->places[i].page_id);
	/* kvmm:revoke (ebpf/probes.h): post -> acknowledgement time */
	kvmm_tel_revoke(s->d->tel_local, s->id, 0,
			kd_now_ns() - (rv->deadline_ns -
				       (uint64_t)s->d->cfg.revoke_timeout_ms *
					       1000000ull));
	if (rv->done)
		rv->done(rv->arg, 0);
	free(rv);
	rearm(s);
	s->revocations_acked++;
	s->d->ctr.revocations_acked++;
	return 0;
}

/*
 * libkvmm unmaps a sequence's blocks before it sends their close or
 * truncate (or its region's destroy), revoked ones whose revocation it
 * has not applied yet included; the entries of those places take nothing
 * when it applies them later.  So their holds go now, as at the close of
 * any other place: the daemon's and the client's counts of a page change
 * on the same events (lifecycle.md, "Ordering guarantees", 3).  Kept
 * until the acknowledgement, they said the client still mapped a page it
 * had let go, and a prefix open in between that shared the page (a
 * cached block the sequence had published) sent it as KVMM_PAGE_HELD,
 * without its fd, which libkvmm refused (-EPROTO;
 * tests/daemon-revoke-close-prefix.c).
 */
void kd_revoke_unmapped(struct kd_session *s, uint32_t region_id, uint32_t seq,
			uint32_t gen, uint32_t first_block)
{
	for (struct kd_revoke *rv = s->revokes; rv; rv = rv->next) {
		for (uint32_t i = 0; i < rv->nr_pages; i++) {
			struct kvmm_rqe *p = &rv->places[i];

			if (p->page_id == KD_REVOKE_GONE ||
			    p->region_id != region_id ||
			    (seq != UINT32_MAX &&
			     (p->seq_id != seq || p->seq_gen != gen ||
			      p->block < first_block)))
				continue;
			kd_unhold_page(s, p->page_id);
			p->page_id = KD_REVOKE_GONE;
		}
	}
}

void kd_revoke_resume(struct kd_session *s, uint64_t since_ns)
{
	uint64_t now = kd_now_ns(),
		 timeout = (uint64_t)s->d->cfg.revoke_timeout_ms * 1000000ull;

	/* each revocation gets back the time it waited for the reply */
	for (struct kd_revoke *rv = s->revokes; rv; rv = rv->next) {
		uint64_t posted = rv->deadline_ns - timeout;
		uint64_t from = posted > since_ns ? posted : since_ns;

		if (now > from)
			rv->deadline_ns += now - from;
	}
	rearm(s);
}

/*
 * A revocation the session ends with is neither acknowledged nor (but
 * for one) timed out: it counts as cancelled, so that posted = acked +
 * timed_out + cancelled + those pending.  The timeout that cut a session
 * off counted the oldest (on_timeout(): the timer runs for the head of
 * the list, whose deadline is the earliest); the others were cancelled
 * with the session.  Before, a client that exited without acknowledging
 * left its revocations in posted for good.
 */
void kd_revoke_free_all(struct kd_session *s, bool release_holds, int status)
{
	bool timed_out = s->revoke_timed_out;

	while (s->revokes) {
		struct kd_revoke *rv = s->revokes;

		s->revokes = rv->next;
		if (timed_out)
			timed_out = false; /* in revocations_timed_out */
		else
			s->d->ctr.revocations_cancelled++;
		for (uint32_t i = 0; release_holds && i < rv->nr_pages; i++)
			if (rv->places[i].page_id != KD_REVOKE_GONE)
				kd_unhold_page(s, rv->places[i].page_id);
		if (rv->done)
			rv->done(rv->arg, status);
		free(rv);
	}
	kd_timer_cancel(&s->d->loop, &s->revoke_timer);
}
