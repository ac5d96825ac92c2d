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
 *                   it with its clock, so its decisions are right even
 *                   before the record is dropped);
 *   TTL mode        the TTL holds the block in its tier while any live
 *                   TTL record lacks KVMM_PIN_F_DEMOTE; when all have it,
 *                   the block may move down a tier when its tier has
 *                   nothing else to evict (pol_cache_set_ttl_demotable());
 *   priority        the highest priority among the records that carry
 *                   one, 0 when none does (pol_cache_set_priority()).
 *
 * Those are kept per block (struct pin_block, one per pinned cache
 * entry, with the list of its records), so a pin, an unpin or an expiry
 * costs O(1) (O(log n) for a TTL record: the heap, pin_heap.c), plus, when the
 * record that set the block's latest expiry or highest priority goes, a
 * walk of that block's own records (one per session pinning it).  A
 * session's end costs O(its records), not O(its records * all records).
 * Records are found by (session, hash) and blocks by (hash, generation)
 * in two hash tables; TTL records are also in a min-heap on their expiry,
 * and one loop timer armed at the earliest drops each record when its
 * TTL passes, so the quota and kvmmctl tell the truth without waiting for
 * the session's next call.
 *
 * Records name the cache entry by hash and generation: a block that left
 * the cache (dropped, failed copy) took its policy state with it, and a
 * later block with the same hash is a new entry the old records must not
 * touch.  The cache tells pin.c when an entry leaves the policy
 * (kd_pin_block_gone(): its records are dropped then); lookups still
 * check the entry, so a record is never applied to another one.  The
 * cache also asks whether a record keeps an entry cached
 * (kd_pin_block_kept()): a pin may come while the block's copy down
 * runs, and a failed one is then tried again rather than dropping it.  Every
 * record of a session is released when it ends, however it ends.
 *
 * The quota (records per session, kvmmd --pin-quota, default a quarter of
 * the blocks the cache keeps on the GPU) stops one client from pinning
 * the whole cache.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kvmm/kvmmd/abi_play.h"
#include "kvmm/kvmmd/cache.h"
#include "kvmm/kvmmd/htab.h"
#include "kvmm/kvmmd/kvmmd.h"
#include "kvmm/kvmmd/pin_priv.h"
#include "kvmm/policy/policy.h"

#define PIN_TAB_MIN 64u

#define PIN_FLAGS                                                          \
	(KVMM_PIN_F_TTL | KVMM_PIN_F_PRIORITY | KVMM_PIN_F_PRIORITY_ONLY | \
	 KVMM_PIN_F_DEMOTE)

/* ---- hash tables ---- */

static uint64_t pin_mix(uint64_t a, uint64_t b)
{
	uint64_t x = a ^ (b * 0x9e3779b97f4a7c15ull);

	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

/* ---- state ---- */

static void pin_on_timer(struct kd_loop *loop, struct kd_timer *t);

static struct kd_pins *pins_get(struct kd_daemon *d)
{
	struct kd_pins *ps = d->pins;

	if (ps)
		return ps;
	ps = calloc(1, sizeof(*ps));
	if (!ps)
		return NULL;
	if (kd_htab_init(&ps->recs, PIN_TAB_MIN) ||
	    kd_htab_init(&ps->blocks, PIN_TAB_MIN)) {
		kd_htab_fini(&ps->recs); /* calloc'd: NULL when not made */
		free(ps);
		return NULL;
	}
	ps->d = d;
	ps->timer.fn = pin_on_timer;
	ps->timer.data = ps;
	d->pins = ps;
	return ps;
}

static void pins_put_if_empty(struct kd_daemon *d)
{
	struct kd_pins *ps = d->pins;

	if (!ps || ps->nr_recs)
		return;
	kd_timer_cancel(&d->loop, &ps->timer);
	kd_htab_fini(&ps->recs);
	kd_htab_fini(&ps->blocks);
	free(ps->heap);
	free(ps);
	d->pins = NULL;
}

/* Arm the timer at the earliest TTL (none: disarm). */
static void pins_rearm(struct kd_pins *ps)
{
	struct kd_loop *loop = &ps->d->loop;

	if (!ps->heap_n) {
		if (ps->timer.armed)
			kd_timer_cancel(loop, &ps->timer);
		return;
	}
	if (!ps->timer.armed || ps->timer.when_ns != ps->heap[0]->expires)
		kd_timer_arm(loop, &ps->timer, ps->heap[0]->expires);
}

/* ---- records and blocks ---- */

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

static struct pol_cache *block_policy(struct kd_daemon *d,
				      const struct pin_block *b)
{
	return kd_cache_pin_policy(d, b->hash, b->gen);
}

static struct pin_block *block_find(struct kd_pins *ps, uint64_t hash,
				    uint64_t gen)
{
	uint64_t key = pin_mix(hash, gen);

	for (struct kd_hnode *n = kd_htab_first(&ps->blocks, key); n;
	     n = n->next) {
		struct pin_block *b = (struct pin_block *)n;

		if (n->key == key && b->hash == hash && b->gen == gen)
			return b;
	}
	return NULL;
}

static struct kd_pin *rec_find(struct kd_pins *ps, struct kd_session *s,
			       uint64_t hash)
{
	uint64_t key = pin_mix(hash, (uintptr_t)s);

	for (struct kd_hnode *n = kd_htab_first(&ps->recs, key); n;
	     n = n->next) {
		struct kd_pin *p = (struct kd_pin *)n;

		if (n->key == key && p->s == s && p->hash == hash)
			return p;
	}
	return NULL;
}

/* A TTL record that holds its block in its tier (not KVMM_PIN_F_DEMOTE). */
static bool pin_holds_tier(const struct kd_pin *p)
{
	return (p->flags & (KVMM_PIN_F_TTL | KVMM_PIN_F_DEMOTE)) ==
	       KVMM_PIN_F_TTL;
}

/* A record's share of its block's TTL and priority. */
static void block_add_share(struct pin_block *b, const struct kd_pin *p)
{
	if ((p->flags & KVMM_PIN_F_TTL) && p->expires > b->ttl)
		b->ttl = p->expires;
	if (pin_holds_tier(p))
		b->nr_hold++;
	if (p->flags & KVMM_PIN_F_PRIORITY) {
		if (!b->nr_prio++ || p->priority > b->prio)
			b->prio = p->priority;
	}
}

/* Take p's share back (p is off the block's list already): only when p
 * set the latest expiry or the highest priority are the others walked. */
static void block_drop_share(struct pin_block *b, const struct kd_pin *p)
{
	bool ttl = (p->flags & KVMM_PIN_F_TTL) && p->expires == b->ttl;
	bool prio = false, any = false;

	if (pin_holds_tier(p))
		b->nr_hold--;
	if (p->flags & KVMM_PIN_F_PRIORITY) {
		b->nr_prio--;
		prio = p->priority == b->prio;
	}
	if (!ttl && !prio)
		return;
	if (ttl)
		b->ttl = 0;
	for (const struct kd_pin *q = b->recs; q; q = q->b_next) {
		if (ttl && (q->flags & KVMM_PIN_F_TTL) && q->expires > b->ttl)
			b->ttl = q->expires;
		if (prio && (q->flags & KVMM_PIN_F_PRIORITY) &&
		    (!any || q->priority > b->prio)) {
			b->prio = q->priority;
			any = true;
		}
	}
	if (prio && !any)
		b->prio = 0;
}

/*
 * Tell the policy the block's TTL, how it holds (in its tier while any
 * live TTL record lacks KVMM_PIN_F_DEMOTE) and its priority, when they
 * changed.
 */
static void block_push(struct kd_daemon *d, struct pin_block *b,
		       uint64_t old_ttl, int old_prio)
{
	bool demote = b->ttl && !b->nr_hold;
	struct pol_cache *pol;

	if (b->ttl == old_ttl && b->prio == old_prio && demote == b->demote)
		return;
	pol = block_policy(d, b);
	if (!pol)
		return;
	if (b->ttl != old_ttl)
		(void)pol_cache_set_ttl(pol, b->hash, b->ttl);
	if (demote != b->demote)
		(void)pol_cache_set_ttl_demotable(pol, b->hash, demote);
	b->demote = demote;
	if (b->prio != old_prio)
		(void)pol_cache_set_priority(pol, b->hash, b->prio);
}

static void block_link(struct pin_block *b, struct kd_pin *p)
{
	p->blk = b;
	p->b_prev = NULL;
	p->b_next = b->recs;
	if (b->recs)
		b->recs->b_prev = p;
	b->recs = p;
}

static void block_unlink(struct pin_block *b, struct kd_pin *p)
{
	if (p->b_prev)
		p->b_prev->b_next = p->b_next;
	else
		b->recs = p->b_next;
	if (p->b_next)
		p->b_next->b_prev = p->b_prev;
	p->blk = NULL;
}

/* Unlink and free a record, giving back what it held in the policy. */
static void pin_drop(struct kd_pins *ps, struct kd_pin *p)
{
	struct kd_session *s = p->s;
	struct pin_block *b = p->blk;
	uint64_t ttl = b->ttl;
	int prio = b->prio;

	if (pin_is_hard(p)) {
		struct pol_cache *pol = block_policy(ps->d, b);

		if (pol)
			(void)pol_cache_unpin(pol, b->hash);
	}
	block_unlink(b, p);
	block_drop_share(b, p);
	block_push(ps->d, b, ttl, prio);
	s->pinned_bytes -= b->bytes;
	if (!b->recs) {
		ps->pinned_bytes -= b->bytes;
		kd_htab_del(&ps->blocks, &b->node);
		free(b);
	}
	if (p->heap != PIN_NO_HEAP)
		pin_heap_del(ps, p);
	kd_htab_del(&ps->recs, &p->node);
	if (p->s_prev)
		p->s_prev->s_next = p->s_next;
	else
		s->pins = p->s_next;
	if (p->s_next)
		p->s_next->s_prev = p->s_prev;
	s->nr_pins--;
	ps->nr_recs--;
	free(p);
}

/* At the quota: drop the session's records past their TTL that the timer
 * has not dropped yet (it was busy) and any of a block that left the
 * cache.  O(its records), only when a pin would be refused. */
static void pin_purge(struct kd_pins *ps, struct kd_session *s)
{
	uint64_t now = kd_now_ns();
	struct kd_pin *p = s->pins, *next;

	for (; p; p = next) {
		next = p->s_next;
		if (!pin_live(p, now) || !block_policy(ps->d, p->blk))
			pin_drop(ps, p);
	}
}

static void pin_on_timer(struct kd_loop *loop, struct kd_timer *t)
{
	struct kd_pins *ps = t->data;
	uint64_t now = kd_now_ns();

	(void)loop;
	while (ps->heap_n && ps->heap[0]->expires <= now)
		pin_drop(ps, ps->heap[0]);
	pins_rearm(ps);
	pins_put_if_empty(ps->d); /* the loop is done with t */
}

/* A new record of s on (hash, gen), with no share yet. */
static int pin_new(struct kd_pins *ps, struct kd_session *s, uint64_t hash,
		   uint64_t gen, uint64_t bytes, struct kd_pin **out)
{
	struct pin_block *b = block_find(ps, hash, gen);
	struct kd_pin *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	if (!b) {
		b = calloc(1, sizeof(*b));
		if (!b) {
			free(p);
			return -ENOMEM;
		}
		b->hash = hash;
		b->gen = gen;
		b->bytes = bytes;
		ps->pinned_bytes += bytes;
		b->node.key = pin_mix(hash, gen);
		kd_htab_add(&ps->blocks, &b->node);
	}
	p->s = s;
	p->hash = hash;
	p->heap = PIN_NO_HEAP;
	p->node.key = pin_mix(hash, (uintptr_t)s);
	kd_htab_add(&ps->recs, &p->node);
	block_link(b, p);
	p->s_next = s->pins;
	if (s->pins)
		s->pins->s_prev = p;
	s->pins = p;
	s->nr_pins++;
	s->pinned_bytes += b->bytes;
	ps->nr_recs++;
	*out = p;
	return 0;
}

static int pin_check(const struct kvmm_block_pin *bp)
{
	if ((bp->flags & ~PIN_FLAGS) || bp->pad ||
	    !kw_all_zero(bp->reserved, sizeof(bp->reserved)) || !bp->hash)
		return -EINVAL;
	if (bp->flags & KVMM_PIN_F_PRIORITY_ONLY &&
	    (!(bp->flags & KVMM_PIN_F_PRIORITY) || bp->flags & KVMM_PIN_F_TTL))
		return -EINVAL;
	if (bp->flags & KVMM_PIN_F_DEMOTE && !(bp->flags & KVMM_PIN_F_TTL))
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

/* The session's live record for hash (one of a block that left the cache,
 * or past its TTL, is dropped first), or NULL. */
static struct kd_pin *pin_lookup(struct kd_pins *ps, struct kd_session *s,
				 uint64_t hash, uint64_t now)
{
	struct kd_pin *p = rec_find(ps, s, hash);

	if (p && (!pin_live(p, now) || !block_policy(ps->d, p->blk))) {
		pin_drop(ps, p);
		p = NULL;
	}
	return p;
}

/* -EDQUOT with a body (ABI 1.13): how many records the session holds
 * and may hold, as a pin's reply says; returns 1 (replied). */
static int pin_quota_reply(struct kd_session *s, const struct kvmm_msg_hdr *h)
{
	struct kvmm_block_pin_reply rep = { .size = sizeof(rep) };

	/* before 1.13 an error had no body (abi_play.h) */
	if (KD_ABI_BEFORE(s, KD_ABI_1_13))
		return -EDQUOT;
	rep.pins = s->nr_pins;
	rep.pin_quota = pin_quota(s->d);
	kd_session_reply(s, h, -EDQUOT, &rep, sizeof(rep), NULL, 0);
	return 1;
}

/*
 * The cache entry of the first of names[0..n) the cache holds, its name
 * into *hash.  A block a restart found on NVMe, no open used yet, is
 * taken into the policy by its pin (kd_cache_pin_target()), which must
 * then be made: without room (the session holds its quota of records)
 * it stays cold and the answer is -EDQUOT, as a new record of it would
 * be (it cannot have one: its records went when it last left the
 * policy, and a cold block was never in it).
 */
static int pin_target(struct kd_session *s, const uint64_t *names, uint32_t n,
		      bool room, uint64_t *hash, struct pol_cache **pol,
		      unsigned *tier, uint64_t *gen, uint64_t *bytes)
{
	int err = -ENOENT;

	for (uint32_t i = 0; err == -ENOENT && i < n; i++) {
		err = kd_cache_pin_target(s->d, s, names[i], room, pol, tier,
					  gen, bytes);
		if (!err)
			*hash = names[i];
	}
	return err;
}

/*
 * One pin of a checked request (BLOCK_PIN's, or one hash of
 * BLOCK_PIN_MANY's, bp->hash the client's name): 0 with where the block
 * is and the record's expiry, or -errno (-EDQUOT: the session holds its
 * quota of records).  Nothing is replied.
 */
static int pin_one(struct kd_session *s, struct kvmm_block_pin *bp,
		   uint64_t now, unsigned *tier_out, uint64_t *expires)
{
	struct kd_daemon *d = s->d;
	struct pol_cache *pol;
	struct kd_pins *ps;
	struct pin_block *b;
	struct kd_pin *p;
	uint64_t gen, ttl, bytes;
	uint64_t names[KD_MAX_REGIONS_PER_SESSION];
	uint32_t nr_names;
	unsigned tier;
	bool was_hard;
	int prio, err;

	/* the first of the hash's names (one per salt of the session's
	 * regions, scope.h) that the cache holds */
	nr_names = kd_scope_pin_names(s, bp->hash, names);
	err = pin_target(s, names, nr_names, s->nr_pins < pin_quota(d),
			 &bp->hash, &pol, &tier, &gen, &bytes);
	if (err == -EDQUOT) {
		/* a cold block past the quota: records past their TTL go
		 * first, as for any new record (below) */
		pin_purge(d->pins, s);
		pins_rearm(d->pins);
		if (s->nr_pins < pin_quota(d))
			err = pin_target(s, names, nr_names, true, &bp->hash,
					 &pol, &tier, &gen, &bytes);
		pins_put_if_empty(d);
	}
	if (err)
		return err;
	ps = pins_get(d);
	if (!ps)
		return -ENOMEM;
	if (bp->flags & KVMM_PIN_F_TTL) {
		err = pin_heap_reserve(ps);
		if (err)
			goto out;
	}
	p = pin_lookup(ps, s, bp->hash, now);
	if (!p) {
		if (s->nr_pins >= pin_quota(d))
			pin_purge(ps, s);
		err = s->nr_pins >= pin_quota(d) ?
			      -EDQUOT :
			      pin_new(ps, s, bp->hash, gen, bytes, &p);
		if (err)
			goto out;
		was_hard = false;
	} else {
		/* a live record names the current entry: same gen */
		was_hard = pin_is_hard(p);
	}
	b = p->blk;
	ttl = b->ttl;
	prio = b->prio;
	/* the old share goes (a walk of the block's records at most) */
	block_unlink(b, p);
	block_drop_share(b, p);
	if (p->heap != PIN_NO_HEAP)
		pin_heap_del(ps, p);
	p->flags = bp->flags;
	p->priority = bp->priority;
	p->expires = bp->flags & KVMM_PIN_F_TTL ? now + bp->ttl_ns : 0;
	block_link(b, p);
	block_add_share(b, p);
	if (p->expires)
		pin_heap_add(ps, p); /* room reserved above */
	if (pin_is_hard(p) && !was_hard)
		(void)pol_cache_pin(pol, bp->hash);
	else if (!pin_is_hard(p) && was_hard)
		(void)pol_cache_unpin(pol, bp->hash);
	pol_cache_set_clock(pol, now);
	block_push(d, b, ttl, prio);
	pins_rearm(ps);
	*tier_out = tier;
	*expires = p->expires;
	return 0;
out:
	pins_rearm(ps);
	pins_put_if_empty(d);
	return err;
}

int kd_pin_cmd(struct kd_session *s, const struct kvmm_msg_hdr *h,
	       const void *buf, size_t len)
{
	struct kvmm_block_pin bp;
	struct kvmm_block_pin_reply rep = { .size = sizeof(rep) };
	uint64_t now = kd_now_ns(), expires;
	unsigned tier;
	int err;

	err = kw_copy_struct(&bp, sizeof(bp), sizeof(bp), buf, len);
	if (err)
		return err;
	err = pin_check(&bp);
	if (err)
		return err;
	if (bp.flags & KVMM_PIN_F_TTL && now + bp.ttl_ns < now)
		return -EOVERFLOW;
	err = pin_one(s, &bp, now, &tier, &expires);
	if (err == -EDQUOT)
		return pin_quota_reply(s, h);
	if (err)
		return err;
	rep.tier = tier;
	rep.pins = s->nr_pins;
	rep.pin_quota = pin_quota(s->d);
	rep.expires_ns = expires;
	kd_session_reply(s, h, 0, &rep, sizeof(rep), NULL, 0);
	return 1;
}

/*
 * BLOCK_PIN_MANY (ABI 1.19): one pin per hash, in order, each exactly as
 * a BLOCK_PIN of it with the request's flags, TTL and priority would be
 * (the same records, the same quota: past it, the rest are -EDQUOT),
 * answered in one reply with a result per hash.  Only a malformed request
 * fails as a whole, before any pin.
 */
int kd_pin_many_cmd(struct kd_session *s, const struct kvmm_msg_hdr *h,
		    const void *buf, size_t len)
{
	struct kvmm_block_pin_many pm;
	struct kvmm_block_pin_many_reply rep = { .size = sizeof(rep) };
	struct kvmm_block_pin bp = { .size = sizeof(bp) };
	uint64_t now = kd_now_ns(), expires;
	const char *hashes;
	size_t out_len;
	int32_t *res;
	char *out;
	unsigned tier;
	uint32_t size;
	int err;

	if (len < sizeof(pm))
		return -EINVAL;
	memcpy(&pm, buf, sizeof(pm));
	size = pm.size;
	if (size < sizeof(pm) || !pm.nr_hashes ||
	    pm.nr_hashes > KVMM_PIN_MANY_MAX ||
	    len != size + (uint64_t)pm.nr_hashes * sizeof(uint64_t))
		return -EINVAL;
	/* a newer client's larger struct: what we do not know must be 0 */
	for (size_t i = sizeof(pm); i < size; i++)
		if (((const unsigned char *)buf)[i])
			return -E2BIG;
	if (!kw_all_zero(pm.reserved, sizeof(pm.reserved)))
		return -EINVAL;
	bp.flags = pm.flags;
	bp.ttl_ns = pm.ttl_ns;
	bp.priority = pm.priority;
	bp.hash = 1; /* the hashes are checked one by one below */
	err = pin_check(&bp);
	if (err)
		return err;
	if (bp.flags & KVMM_PIN_F_TTL && now + bp.ttl_ns < now)
		return -EOVERFLOW;
	out_len = sizeof(rep) +
		  (((size_t)pm.nr_hashes * sizeof(int32_t) + 7) & ~(size_t)7);
	out = calloc(1, out_len);
	if (!out)
		return -ENOMEM;
	res = (int32_t *)(out + sizeof(rep));
	hashes = (const char *)buf + size;
	for (uint32_t i = 0; i < pm.nr_hashes; i++) {
		memcpy(&bp.hash, hashes + (size_t)i * sizeof(uint64_t),
		       sizeof(bp.hash));
		err = bp.hash ? pin_one(s, &bp, now, &tier, &expires) : -EINVAL;
		if (err) {
			res[i] = err;
			continue;
		}
		res[i] = (int32_t)tier;
		rep.pinned++;
		rep.expires_ns = expires;
	}
	rep.nr_hashes = pm.nr_hashes;
	rep.pins = s->nr_pins;
	rep.pin_quota = pin_quota(s->d);
	memcpy(out, &rep, sizeof(rep));
	kd_session_reply(s, h, 0, out, out_len, NULL, 0);
	free(out);
	s->d->ctr.pin_many_calls++; /* ADMIN_STATUS, ABI 1.20 */
	s->d->ctr.pin_many_hashes += pm.nr_hashes;
	s->d->ctr.pin_many_pinned += rep.pinned;
	return 1;
}

int kd_unpin_cmd(struct kd_session *s, const void *buf, size_t len)
{
	struct kvmm_block_unpin bu;
	struct kd_pins *ps = s->d->pins;
	struct kd_pin *p = NULL;
	uint64_t names[KD_MAX_REGIONS_PER_SESSION], now = kd_now_ns();
	uint32_t nr_names;
	int err;

	err = kw_copy_struct(&bu, sizeof(bu), sizeof(bu), buf, len);
	if (err)
		return err;
	if (bu.flags || !kw_all_zero(bu.reserved, sizeof(bu.reserved)) ||
	    !bu.hash)
		return -EINVAL;
	/* the first of the hash's names this session pinned */
	nr_names = kd_scope_pin_names(s, bu.hash, names);
	for (uint32_t i = 0; ps && !p && i < nr_names; i++)
		p = pin_lookup(ps, s, names[i], now);
	if (!p) {
		if (ps)
			pins_rearm(ps);
		return -ENOENT;
	}
	pin_drop(ps, p);
	pins_rearm(ps);
	return 0;
}

void kd_pin_release_all(struct kd_session *s)
{
	struct kd_pins *ps = s->d->pins;

	if (!ps)
		return;
	while (s->pins)
		pin_drop(ps, s->pins);
	pins_rearm(ps);
	pins_put_if_empty(s->d);
}

void kd_pin_block_gone(struct kd_daemon *d, uint64_t hash, uint64_t gen)
{
	struct kd_pins *ps = d->pins;
	struct pin_block *b = ps ? block_find(ps, hash, gen) : NULL;

	if (!b)
		return;
	/* the entry is out of the policy: pin_drop() tells it nothing */
	while (b->recs->b_next)
		pin_drop(ps, b->recs);
	pin_drop(ps, b->recs); /* the last one frees b */
	pins_rearm(ps);
}

bool kd_pin_block_kept(struct kd_daemon *d, uint64_t hash, uint64_t gen)
{
	struct kd_pins *ps = d->pins;
	struct pin_block *b = ps ? block_find(ps, hash, gen) : NULL;
	uint64_t now = kd_now_ns();

	if (!b)
		return false;
	/* a priority-only record ranks the block, it does not keep it */
	for (const struct kd_pin *p = b->recs; p; p = p->b_next)
		if (pin_is_hard(p) ||
		    ((p->flags & KVMM_PIN_F_TTL) && pin_live(p, now)))
			return true;
	return false;
}

void kd_pin_session_info(struct kd_session *s, struct kvmm_session_info *i)
{
	i->pins = s->nr_pins;
	i->pin_quota = pin_quota(s->d);
	i->pinned_bytes = s->pinned_bytes;
}

void kd_pin_status(struct kd_daemon *d, struct kvmm_status_reply *st)
{
	struct kd_pins *ps = d->pins;

	if (!ps)
		return;
	st->pins = ps->nr_recs;
	st->pinned_bytes = ps->pinned_bytes;
}
