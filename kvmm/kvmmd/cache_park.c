// SPDX-License-Identifier: MIT
/*
 * Commands parked for pool pages.  A SEQ_EXTEND (or a PREFIX_OPEN about to
 * restore) that finds the pool short has the reclaim demote victims; their
 * pages come back only when their copies to host memory are done.  Rather
 * than wait for those copies on the loop (every other client would wait
 * too), the command is parked: its session is deferred (its socket is not
 * read, so replies keep request order) and the request, kept as received,
 * runs again from the loop whenever migrations complete (kc_settle()) and
 * at its deadline.  Running it again makes every decision again: it finds
 * its pages, parks again while copies are still in flight, or fails as a
 * blocking wait would have.
 */
#include "kvmm/kvmmd/cache_priv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void kc_park_append(struct kd_cache *c, struct kc_park *pk)
{
	pk->next = NULL;
	if (c->parked_tail)
		c->parked_tail->next = pk;
	else
		c->parked_head = pk;
	c->parked_tail = pk;
}

static void kc_park_unlink(struct kd_cache *c, struct kc_park *pk)
{
	struct kc_park **pp, *prev = NULL;

	for (pp = &c->parked_head; *pp; prev = *pp, pp = &(*pp)->next) {
		if (*pp != pk)
			continue;
		*pp = pk->next;
		if (c->parked_tail == pk)
			c->parked_tail = prev;
		pk->next = NULL;
		return;
	}
}

/* The timer goes off at the earliest deadline of the parked commands. */
static void kc_park_arm(struct kd_cache *c)
{
	uint64_t when = UINT64_MAX;

	for (struct kc_park *pk = c->parked_head; pk; pk = pk->next)
		if (pk->deadline_ns < when)
			when = pk->deadline_ns;
	if (when == UINT64_MAX)
		kd_timer_cancel(&c->d->loop, &c->park_timer);
	else if (!c->park_timer.armed || c->park_timer.when_ns != when)
		kd_timer_arm(&c->d->loop, &c->park_timer, when);
}

int kd_cache_park(struct kd_session *s, const struct kvmm_msg_hdr *h,
		  const void *p, size_t len)
{
	struct kd_cache *c = s->d->cache;
	struct kc_park *pk;

	if (c->rerun && c->rerun->s == s) {
		/* run again and still waiting: same place in line, same
		 * deadline */
		c->rerun_parked = true;
		kd_session_defer(s);
		return 0;
	}
	pk = malloc(sizeof(*pk) + sizeof(*h) + len);
	if (!pk)
		return -ENOMEM;
	pk->s = s;
	pk->round = 0;
	pk->deadline_ns = kd_now_ns() + KD_PARK_MAX_MS * 1000000ull;
	pk->len = sizeof(*h) + len;
	memcpy(pk->msg, h, sizeof(*h));
	memcpy((char *)pk->msg + sizeof(*h), p, len);
	kc_park_append(c, pk);
	c->cmds_parked++;
	c->cmds_parked_now++;
	kc_park_arm(c);
	kd_session_defer(s);
	return 0;
}

/*
 * Run every parked command again, oldest first.  One still waiting goes
 * back in line behind the others.  The list is searched from its head
 * each time: a reply that fails ends its session, which takes that
 * session's record off the list.
 */
void kc_park_run(struct kd_cache *c)
{
	uint64_t now = kd_now_ns(), round = ++c->park_round;

	for (;;) {
		struct kc_park *pk = c->parked_head;
		struct kd_session *s;
		bool parked, deferred;

		while (pk && pk->round == round)
			pk = pk->next;
		if (!pk)
			break;
		s = pk->s;
		pk->round = round;
		kc_park_unlink(c, pk);
		c->rerun = pk;
		c->rerun_final = now >= pk->deadline_ns;
		c->rerun_parked = false;
		deferred = kd_session_rerun(s, pk->msg, pk->len);
		parked = c->rerun_parked;
		c->rerun = NULL;
		if (parked) {
			kc_park_append(c, pk);
			continue;
		}
		c->cmds_parked_now--;
		free(pk);
		/* a PREFIX_OPEN now waiting for restores resumes the session
		 * when it replies (kc_pending_finish()) */
		if (!deferred)
			kd_session_resume(s); /* last: may end the session */
	}
	kc_park_arm(c);
}

/* The session ends (kd_cache_session_end()): its parked command goes. */
void kc_park_session_end(struct kd_cache *c, struct kd_session *s)
{
	struct kc_park *pk = c->parked_head;

	while (pk) {
		struct kc_park *next = pk->next;

		if (pk->s == s) {
			kc_park_unlink(c, pk);
			c->cmds_parked_now--;
			free(pk);
		}
		pk = next;
	}
	kc_park_arm(c);
}

void kc_park_fini(struct kd_cache *c)
{
	while (c->parked_head) {
		struct kc_park *pk = c->parked_head;

		kc_park_unlink(c, pk);
		c->cmds_parked_now--;
		free(pk);
	}
	kd_timer_cancel(&c->d->loop, &c->park_timer);
}

void kd_cache_park_stats(struct kd_daemon *d, struct kvmm_status_reply *st)
{
	struct kd_cache *c = d->cache;

	if (!c)
		return;
	st->cmds_parked = c->cmds_parked;
	st->cmds_parked_now = c->cmds_parked_now;
	st->demotions_queued = c->demotions_queued;
}
