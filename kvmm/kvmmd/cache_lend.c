// SPDX-License-Identifier: MIT
/*
 * Blocks mapped ahead by the other processes of a uid, asked back for an
 * extend short of blocks (ABI 1.19).
 *
 * libkvmm maps blocks ahead of each sequence's length (its map-ahead
 * thread), and since 6 December an extend short of blocks takes back its
 * own process's blocks ahead (kvmm/lib/lend.c).  Several engine processes
 * of one uid on one GPU (replicas, one per model, a scheduler's workers)
 * share this kvmmd's quota for the uid and its pool: one process's
 * extend still failed -EDQUOT (or the pool's -ENOMEM) while another
 * process of the uid held blocks ahead that nobody used.
 *
 * kvmmd cannot take those blocks itself.  It knows each sequence's
 * length and blocks, but a ring extend the client made and kvmmd has not
 * read yet (or one the client is about to make within its mapped blocks)
 * moves the length over them without asking: a block past the length
 * kvmmd knows may already hold the client's KV.  So it asks.  The extend
 * that is short posts a KVMM_RQE_F_GIVE_AHEAD entry into the revocation
 * ring of each other process of its uid (of ABI 1.19 or later: an older
 * libkvmm would take the entry for a revocation) that kvmmd sees holding
 * blocks past its lengths, the most first, until those cover what the
 * extend lacks; the client's libkvmm answers at its next boundary by
 * truncating those sequences to the lengths *it* knows (lend.c's rule:
 * never below a length), and the truncates free the pages.  The extend
 * parks meanwhile (cache_park.c: the same line, earmark and
 * -EINPROGRESS), runs again whenever pages come back, and fails as it
 * did before once --lend-wait (1000 ms by default) is over, or at once
 * when nothing is left ahead to wait for: a client that does not answer
 * (stopped, or never at a boundary) costs the extend that wait, never
 * its session (no acknowledgement is due, nothing times out but the
 * park).  A process is asked again only once its last request's wait is
 * over.
 *
 * ABI 1.20: a client of 1.20 answers the request (KVMM_RQE_F_GIVE_ACK,
 * the entry's cookie): its truncates name the cookie and a REVOKE_ACK of
 * it says it is done.  kvmmd waits only for processes asked and not done
 * yet, so an extend whose asked processes all answered with too little
 * fails at once rather than when --lend-wait is over; and a process that
 * answered is asked again by the next extend that is short.  A process
 * whose wait ran out with no answer and no command at all since it was
 * asked (stopped, hung: any version) is *silent*: no extend asks it or
 * waits for it until it shows life (any socket or ring command, its late
 * answer too), so it costs one extend the wait, not each of them.
 *
 * ADMIN_STATUS lend_blocks counts the blocks given back in answer: of a
 * 1.20 process, those its truncates naming its request dropped past
 * kvmmd's lengths; of a 1.19 one (which names nothing), those it
 * truncated past kvmmd's lengths within the request's wait, whatever the
 * truncate was for.
 *
 * kvmmd's count of blocks ahead (its lengths may lag the client's) only
 * decides whom to ask and whether to wait; what goes back is the
 * client's choice.  Only an extend that wants no block ahead asks
 * (kd_seq_fill()'s ask, proto.c): a map-ahead fetch taking another
 * process's blocks ahead for its own would only move them about.
 */
#include "kvmm/kvmmd/cache_priv.h"

#include <errno.h>
#include <stdlib.h>

/*
 * Pages of t's sequence i's own blocks past its length: what a truncate
 * to it frees (a block another sequence or the cache holds too stays).
 * The length is the furthest of kvmmd's and those the ring extends t
 * submitted and kvmmd has not read yet ask for: counted from kvmmd's
 * alone, blocks such an extend moved over looked ahead, and kvmmd waited
 * for blocks the process would never give.
 */
static uint64_t seq_ahead(struct kd_session *t, const struct kd_region *r,
			  uint32_t i)
{
	const struct kd_seq *q = &r->seqs[i];
	uint32_t len = q->len, unread;
	uint64_t pages = 0;

	if (!q->open || q->opening || q->extending)
		return 0;
	unread = kd_ring_extend_unread(t, r->id, i);
	if (unread > len)
		len = unread;
	for (uint32_t b = kd_region_blocks_for(r, len); b < q->nr_slots; b++)
		if (q->blocks[b] && q->blocks[b]->refcnt == 1)
			pages += q->blocks[b]->nr_pages;
	return pages;
}

static uint64_t session_ahead(struct kd_session *t)
{
	uint64_t pages = 0;

	for (const struct kd_region *r = t->regions; r; r = r->next)
		for (uint32_t i = 0; i < r->max_seqs; i++)
			pages += seq_ahead(t, r, i);
	return pages;
}

static uint64_t session_cmds(const struct kd_session *t)
{
	return t->cmds_socket + t->cmds_ring;
}

enum lend_state {
	LEND_ASK, /* may be asked */
	LEND_WAIT, /* asked, its answer may come */
	LEND_SKIP, /* answered since the extend began, or silent */
};

/*
 * What t is to an extend that began (first ran) at `since`.  Marks t
 * silent when its last request's wait ran out with no answer and no
 * command since, and not silent once a command came.
 */
static enum lend_state lend_state(struct kd_session *t, uint64_t now,
				  uint64_t since)
{
	uint64_t cmds = session_cmds(t);

	if (t->lend_silent && cmds != t->lend_cmds)
		t->lend_silent = false; /* it shows life */
	if (t->lend_asked_until && !t->lend_answered_ns &&
	    now >= t->lend_asked_until) {
		t->lend_asked_until = 0;
		t->lend_silent = cmds == t->lend_cmds;
		if (t->lend_silent)
			vmm_log(VMM_LOG_INFO,
				"session %u (pid %d) did not answer for its blocks mapped ahead within %u ms: not waited for until it sends a command",
				t->id, (int)t->pid, t->d->cfg.lend_wait_ms);
	}
	if (t->lend_silent)
		return LEND_SKIP;
	if (t->lend_answered_ns)
		return t->lend_answered_ns >= since ? LEND_SKIP : LEND_ASK;
	return t->lend_asked_until ? LEND_WAIT : LEND_ASK;
}

/* May t be asked for s's extend: another live process of s's uid whose
 * libkvmm answers the entry. */
static bool may_ask(const struct kd_session *s, const struct kd_session *t)
{
	return t != s && t->uid == s->uid && t->hello_done && !t->admin_only &&
	       t->ring && !t->doomed && t->client_minor >= KD_ABI_GIVE_AHEAD;
}

/* The pages s's extend of `pages` lacks: over the uid's quota (err
 * -EDQUOT), else short of the pool's pages not earmarked. */
static uint64_t lend_short(struct kd_session *s, uint64_t pages, int err)
{
	struct kd_cache *c = s->d->cache;
	const struct kd_quota *q = s->quota;
	uint64_t want, free;

	if (err == -EDQUOT) {
		if (!q || !q->limit_pages ||
		    q->used_pages + pages <= q->limit_pages)
			return 0;
		return q->used_pages + pages - q->limit_pages;
	}
	want = pages + kc_reserved(c);
	free = kc_pool_free(s->d);
	return free < want ? want - free : 0;
}

struct lend_ask {
	struct kd_session *t;
	uint64_t ahead; /* pages */
};

static int by_ahead(const void *a, const void *b)
{
	const struct lend_ask *x = a, *y = b;

	return (x->ahead < y->ahead) - (x->ahead > y->ahead);
}

/* Post t the request for `want` pages; 0 or -EBUSY (its ring is full). */
static int lend_request(struct kd_session *t, uint64_t want, uint64_t now)
{
	struct kd_daemon *d = t->d;
	struct kvmm_rqe e = { .flags = KVMM_RQE_F_GIVE_AHEAD };

	e.page_id = want < UINT32_MAX ? (uint32_t)want : UINT32_MAX;
	if (t->client_minor >= KD_ABI_GIVE_ACK) {
		e.flags |= KVMM_RQE_F_GIVE_ACK;
		e.cookie = d->next_cookie++;
	}
	if (kd_ring_post_revokes(t, &e, 1))
		return -EBUSY;
	t->lend_cookie = e.cookie;
	t->lend_answered_ns = 0;
	t->lend_cmds = session_cmds(t);
	t->lend_asked_until = now + d->cfg.lend_wait_ms * 1000000ull;
	d->ctr.lend_requests++;
	return 0;
}

/*
 * Ask the processes of s's uid with blocks ahead, the most first, until
 * they cover `missing` pages, for an extend that began at `since`; those
 * asked before and not done yet count without a new request, those that
 * answered since it began or are silent do not count.  Whether any is to
 * be waited for.
 */
static bool lend_post(struct kd_session *s, uint64_t missing, uint64_t since)
{
	struct kd_daemon *d = s->d;
	uint64_t now = kd_now_ns(), covered = 0;
	struct lend_ask *a;
	uint32_t n = 0, k = 0;

	for (struct kd_session *t = d->sessions; t; t = t->next)
		n += may_ask(s, t);
	if (!n)
		return false;
	a = calloc(n, sizeof(*a));
	if (!a)
		return false;
	for (struct kd_session *t = d->sessions; t && k < n; t = t->next) {
		if (!may_ask(s, t))
			continue;
		a[k].t = t;
		a[k].ahead = session_ahead(t);
		k += a[k].ahead > 0;
	}
	qsort(a, k, sizeof(*a), by_ahead);
	n = 0;
	for (uint32_t i = 0; i < k && covered < missing; i++) {
		struct kd_session *t = a[i].t;
		uint64_t want = missing - covered;

		switch (lend_state(t, now, since)) {
		case LEND_SKIP:
			continue;
		case LEND_ASK:
			/* a full ring: that one is not asked this time */
			if (lend_request(t, want, now))
				continue;
			vmm_log(VMM_LOG_DEBUG,
				"session %u: asked session %u (pid %d) for %llu pages mapped ahead",
				s->id, t->id, (int)t->pid,
				(unsigned long long)want);
			break;
		case LEND_WAIT:
			break;
		}
		covered += a[i].ahead;
		n++;
	}
	free(a);
	return n > 0;
}

int kd_cache_lend_ask(struct kd_session *s, uint64_t pages, int err)
{
	struct kd_daemon *d = s->d;
	struct kd_cache *c = d->cache;
	struct kc_park *pk;
	uint64_t missing;

	if (!c || !d->cfg.lend_wait_ms)
		return err;
	pk = c->rerun && c->rerun->s == s ? c->rerun : NULL;
	missing = pk && c->rerun_final ? 0 : lend_short(s, pages, err);
	if (!missing ||
	    !lend_post(s, missing, pk ? pk->parked_ns : kd_now_ns())) {
		/* its wait is over, or nothing is left ahead to wait for */
		if (pk && pk->lend_asked) {
			pk->lend_asked = false;
			d->ctr.lend_failures++;
		}
		return err;
	}
	if (pk) {
		pk->lend_asked = true; /* its deadline stays */
	} else {
		c->park_lend = true;
		c->park_ms = d->cfg.lend_wait_ms;
	}
	c->park_need = pages;
	return -EINPROGRESS;
}

void kd_cache_lend_filled(struct kd_session *s)
{
	struct kd_cache *c = s->d->cache;

	if (!c || !c->rerun || c->rerun->s != s || !c->rerun->lend_asked)
		return;
	c->rerun->lend_asked = false;
	s->d->ctr.lend_extends++;
}

bool kd_cache_lend_acked(struct kd_session *s, uint64_t cookie, uint64_t blocks)
{
	struct kd_cache *c = s->d->cache;

	if (!cookie || cookie != s->lend_cookie)
		return false;
	if (s->lend_answered_ns)
		return true; /* said twice: the first counts */
	s->lend_answered_ns = kd_now_ns();
	vmm_log(VMM_LOG_DEBUG,
		"session %u (pid %d): gave %llu blocks mapped ahead when asked",
		s->id, (int)s->pid, (unsigned long long)blocks);
	/* the extends waiting for it decide again, from the loop */
	if (c)
		kc_park_lend_answered(c);
	return true;
}

void kd_cache_lend_truncated(struct kd_session *s, struct kd_region *r,
			     uint32_t seq, uint32_t from, uint64_t cookie)
{
	const struct kd_seq *q = &r->seqs[seq];
	uint32_t b = kd_region_blocks_for(r, q->len);

	if (s->client_minor >= KD_ABI_GIVE_ACK) {
		/* its answers name the request: only they count */
		if (!cookie || cookie != s->lend_cookie)
			return;
	} else if (!s->lend_asked_until || kd_now_ns() >= s->lend_asked_until) {
		return;
	}
	for (b = b > from ? b : from; b < q->nr_slots; b++)
		s->d->ctr.lend_blocks += q->blocks[b] != NULL;
}
