// SPDX-License-Identifier: MIT
/*
 * Block pins from clients: BLOCK_PIN and BLOCK_UNPIN.
 *
 * A session keeps one record per hash it pinned.  The policy sees the sum
 * of every session's records on that block:
 *
 *   plain pin       one pol_cache_pin() per record (the block is not
 *                   evicted from its tier while any is held);
 *   TTL pin         the block's TTL is the latest expiry among the live
 *                   TTL records (pol_cache_set_ttl(): the policy compares
 *                   it with its clock, kd_now_ns(), so nothing has to
 *                   run when a TTL passes);
 *   priority        the highest priority among the records that carry
 *                   one, 0 when none does (pol_cache_set_priority()).
 *
 * Records name the cache entry by hash and generation: a block that left
 * the cache (dropped, failed copy) took its policy state with it, and a
 * later block with the same hash is a new entry the old records must not
 * touch.  Expired TTL records are purged when their session next pins or
 * unpins and at its end; until then they count against its quota.  Every
 * record of a session is released when it ends, however it ends.
 *
 * The quota (records per session, kvmmd --pin-quota, default a quarter of
 * the blocks the cache keeps on the GPU) stops one client from pinning
 * the whole cache.
 */
#include <errno.h>
#include <stdlib.h>

#include "kvmm/kvmmd/cache.h"
#include "kvmm/kvmmd/kvmmd.h"
#include "kvmm/policy/policy.h"

struct kd_pin {
	struct kd_pin *next;
	uint64_t hash;
	uint64_t gen; /* the cache entry pinned (cache.c) */
	uint64_t expires; /* TTL pins: kd_now_ns() deadline, else 0 */
	uint32_t flags; /* KVMM_PIN_F_* as asked */
	int32_t priority;
};

#define PIN_FLAGS \
	(KVMM_PIN_F_TTL | KVMM_PIN_F_PRIORITY | KVMM_PIN_F_PRIORITY_ONLY)

/* A record that holds one pol_cache_pin(). */
static bool pin_is_hard(const struct kd_pin *p)
{
	return !(p->flags & (KVMM_PIN_F_TTL | KVMM_PIN_F_PRIORITY_ONLY));
}

static bool pin_live(const struct kd_pin *p, uint64_t now)
{
	return !p->expires || p->expires > now;
}

static uint32_t pin_quota(struct kd_daemon *d)
{
	uint64_t q = d->cfg.pin_quota;

	if (!q)
		q = kd_cache_gpu_capacity(d) / 4;
	if (!q)
		q = 1;
	return q > UINT32_MAX ? UINT32_MAX : (uint32_t)q;
}

/* Recompute the block's TTL and priority from every live record. */
static void pin_apply(struct kd_daemon *d, uint64_t hash, uint64_t gen)
{
	struct pol_cache *pol = kd_cache_pin_policy(d, hash, gen);
	uint64_t now = kd_now_ns(), ttl = 0;
	int prio = 0;
	bool any_prio = false;

	if (!pol)
		return;
	for (struct kd_session *s = d->sessions; s; s = s->next) {
		for (struct kd_pin *p = s->pins; p; p = p->next) {
			if (p->hash != hash || p->gen != gen ||
			    !pin_live(p, now))
				continue;
			if ((p->flags & KVMM_PIN_F_TTL) && p->expires > ttl)
				ttl = p->expires;
			if (p->flags & KVMM_PIN_F_PRIORITY) {
				if (!any_prio || p->priority > prio)
					prio = p->priority;
				any_prio = true;
			}
		}
	}
	(void)pol_cache_set_ttl(pol, hash, ttl);
	(void)pol_cache_set_priority(pol, hash, prio);
}

/* Unlink and free a record, giving back what it held in the policy.  The
 * caller calls pin_apply() (after the record is gone). */
static void pin_drop(struct kd_session *s, struct kd_pin **pp)
{
	struct kd_pin *p = *pp;
	struct pol_cache *pol = kd_cache_pin_policy(s->d, p->hash, p->gen);

	if (pol && pin_is_hard(p))
		(void)pol_cache_unpin(pol, p->hash);
	*pp = p->next;
	s->nr_pins--;
	free(p);
}

static void pin_drop_and_apply(struct kd_session *s, struct kd_pin **pp)
{
	uint64_t hash = (*pp)->hash, gen = (*pp)->gen;

	pin_drop(s, pp);
	pin_apply(s->d, hash, gen);
}

/* Drop the session's expired TTL records and records of blocks that left
 * the cache. */
static void pin_purge(struct kd_session *s)
{
	uint64_t now = kd_now_ns();
	struct kd_pin **pp = &s->pins;

	while (*pp) {
		struct kd_pin *p = *pp;

		if (pin_live(p, now) &&
		    kd_cache_pin_policy(s->d, p->hash, p->gen)) {
			pp = &p->next;
			continue;
		}
		pin_drop_and_apply(s, pp);
	}
}

static struct kd_pin **pin_find(struct kd_session *s, uint64_t hash)
{
	struct kd_pin **pp;

	for (pp = &s->pins; *pp; pp = &(*pp)->next)
		if ((*pp)->hash == hash)
			break;
	return pp;
}

static int pin_check(const struct kvmm_block_pin *bp)
{
	if ((bp->flags & ~PIN_FLAGS) || bp->pad ||
	    !kw_all_zero(bp->reserved, sizeof(bp->reserved)) || !bp->hash)
		return -EINVAL;
	if (bp->flags & KVMM_PIN_F_PRIORITY_ONLY &&
	    (!(bp->flags & KVMM_PIN_F_PRIORITY) || bp->flags & KVMM_PIN_F_TTL))
		return -EINVAL;
	if (bp->flags & KVMM_PIN_F_TTL) {
		if (!bp->ttl_ns)
			return -EINVAL;
		if (bp->ttl_ns > KVMM_PIN_TTL_MAX_NS)
			return -ERANGE;
	} else if (bp->ttl_ns) {
		return -EINVAL;
	}
	if (bp->flags & KVMM_PIN_F_PRIORITY) {
		if (bp->priority < -128 || bp->priority > 127)
			return -ERANGE;
	} else if (bp->priority) {
		return -EINVAL;
	}
	return 0;
}

int kd_pin_cmd(struct kd_session *s, const struct kvmm_msg_hdr *h,
	       const void *buf, size_t len)
{
	struct kd_daemon *d = s->d;
	struct kvmm_block_pin bp;
	struct kvmm_block_pin_reply rep = { .size = sizeof(rep) };
	struct pol_cache *pol;
	struct kd_pin **pp, *p;
	uint64_t gen, now = kd_now_ns();
	unsigned tier;
	bool was_hard;
	int err;

	err = kw_copy_struct(&bp, sizeof(bp), sizeof(bp), buf, len);
	if (err)
		return err;
	err = pin_check(&bp);
	if (err)
		return err;
	if (bp.flags & KVMM_PIN_F_TTL && now + bp.ttl_ns < now)
		return -EOVERFLOW;
	err = kd_cache_pin_target(d, bp.hash, &pol, &tier, &gen);
	if (err)
		return err;
	pin_purge(s);
	pp = pin_find(s, bp.hash);
	p = *pp;
	if (!p) {
		if (s->nr_pins >= pin_quota(d))
			return -EDQUOT;
		p = calloc(1, sizeof(*p));
		if (!p)
			return -ENOMEM;
		p->hash = bp.hash;
		p->gen = gen;
		p->next = s->pins;
		s->pins = p;
		s->nr_pins++;
		was_hard = false;
	} else {
		was_hard = pin_is_hard(p); /* purge kept it: same gen */
	}
	p->flags = bp.flags;
	p->priority = bp.priority;
	p->expires = bp.flags & KVMM_PIN_F_TTL ? now + bp.ttl_ns : 0;
	if (pin_is_hard(p) && !was_hard)
		(void)pol_cache_pin(pol, bp.hash);
	else if (!pin_is_hard(p) && was_hard)
		(void)pol_cache_unpin(pol, bp.hash);
	pol_cache_set_clock(pol, now);
	pin_apply(d, bp.hash, gen);
	rep.tier = tier;
	rep.pins = s->nr_pins;
	rep.pin_quota = pin_quota(d);
	rep.expires_ns = p->expires;
	kd_session_reply(s, h, 0, &rep, sizeof(rep), NULL, 0);
	return 1;
}

int kd_unpin_cmd(struct kd_session *s, const void *buf, size_t len)
{
	struct kvmm_block_unpin bu;
	struct kd_pin **pp;
	int err;

	err = kw_copy_struct(&bu, sizeof(bu), sizeof(bu), buf, len);
	if (err)
		return err;
	if (bu.flags || !kw_all_zero(bu.reserved, sizeof(bu.reserved)) ||
	    !bu.hash)
		return -EINVAL;
	pin_purge(s);
	pp = pin_find(s, bu.hash);
	if (!*pp)
		return -ENOENT;
	pin_drop_and_apply(s, pp);
	return 0;
}

void kd_pin_release_all(struct kd_session *s)
{
	while (s->pins)
		pin_drop_and_apply(s, &s->pins);
}
