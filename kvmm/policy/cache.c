/* SPDX-License-Identifier: MIT */
/*
 * The tiered cache (see policy.h): index + per-tier policy instances +
 * the bookkeeping every policy shares (tier membership, child counts for
 * the prefix rule, pins, TTLs, move reporting).
 *
 * Admission inserts first and evicts after, so a policy may pick the
 * block it was just given (a bypass, which belady needs to be optimal).
 * Entry pointers are not kept across pol_index_get(), which may move the
 * entry array; ids are.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kvmm/policy/policy.h"
#include "kvmm/policy/pol_tenant.h"

struct pol_cache {
	struct pol_index ix;
	enum pol_kind kind;
	bool prefix_rule;
	bool msa; /* pol_cache_opts.msa */
	unsigned last_tier; /* lowest tier with a capacity */
	uint64_t cap[POL_TIER_COUNT];
	uint64_t count[POL_TIER_COUNT];
	const struct pol_ops *ops;
	void *priv[POL_TIER_COUNT];
	pol_move_fn move_fn;
	void *move_arg;
	uint64_t now;
	uint64_t ticks;
	const struct pol_cost_model *cost;
	uint64_t block_bytes;
	/* make_room's second pass: demotable TTLs do not hold a block */
	bool ttl_demoting;
	/* blocks set aside (POL_BLOCK_ASIDE) by the calls under way, by id:
	 * a stack, each call releasing what it pushed (fits()) */
	uint32_t *aside;
	uint32_t naside, cap_aside;
	struct pol_cache_stats st;
	struct pol_tenants tenants; /* who brought what each tier holds */
};

static const char *const kind_names[POL_KIND_COUNT] = {
	[POL_LRU] = "lru",	 [POL_LFU] = "lfu",   [POL_ARC] = "arc",
	[POL_BELADY] = "belady", [POL_ASYM] = "asym",
};

const char *pol_kind_string(enum pol_kind kind)
{
	return (unsigned)kind < POL_KIND_COUNT ? kind_names[kind] : "?";
}

int pol_kind_parse(const char *name, enum pol_kind *kind)
{
	for (int k = 0; k < POL_KIND_COUNT; k++)
		if (name && !strcmp(name, kind_names[k])) {
			*kind = (enum pol_kind)k;
			return 0;
		}
	return -EINVAL;
}

extern const struct pol_ops pol_lru_ops, pol_lfu_ops, pol_arc_ops,
	pol_belady_ops, pol_asym_ops;

const struct pol_ops *pol_ops_get(enum pol_kind kind)
{
	switch (kind) {
	case POL_LRU:
		return &pol_lru_ops;
	case POL_LFU:
		return &pol_lfu_ops;
	case POL_ARC:
		return &pol_arc_ops;
	case POL_BELADY:
		return &pol_belady_ops;
	case POL_ASYM:
		return &pol_asym_ops;
	default:
		return NULL;
	}
}

/* The lowest tier with a capacity (the GPU tier when none has one):
 * blocks are dropped from it. */
static void set_last_tier(struct pol_cache *c)
{
	c->last_tier = POL_TIER_GPU;
	for (unsigned t = 0; t < POL_TIER_COUNT; t++)
		if (c->cap[t])
			c->last_tier = t;
}

int pol_cache_create(const struct pol_cache_opts *o, struct pol_cache **out)
{
	struct pol_cache *c;
	int r;

	if (!o || !out || o->size < sizeof(*o) || !pol_ops_get(o->kind))
		return -EINVAL;
	if (!o->capacity[POL_TIER_GPU])
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->kind = o->kind;
	c->ops = pol_ops_get(o->kind);
	/* with MSA a block after a missing one is still served: belady
	 * needs no rule; asym keeps it (a parent is worth at least what its
	 * child is, which its per-class values do not see) */
	c->prefix_rule = o->prefix_rule < 0 ?
				 o->kind == POL_ASYM ||
					 (!o->msa && o->kind == POL_BELADY) :
				 o->prefix_rule != 0;
	c->msa = o->msa;
	c->cost = o->cost;
	c->block_bytes = o->block_bytes ? o->block_bytes : 64ull << 20;
	for (unsigned t = 0; t < POL_TIER_COUNT; t++) {
		if (o->capacity[t] && (o->joins_later & (1u << t)))
			goto err_inval;
		c->cap[t] = o->capacity[t];
	}
	set_last_tier(c);
	r = pol_index_init(&c->ix, o->expected_blocks);
	if (r)
		goto err_free;
	for (unsigned t = 0; t < POL_TIER_COUNT; t++) {
		if (!c->cap[t] && !(o->joins_later & (1u << t)))
			continue;
		r = c->ops->create(c, t, &c->priv[t]);
		if (r)
			goto err_policies;
	}
	*out = c;
	return 0;

err_policies:
	for (unsigned t = 0; t < POL_TIER_COUNT; t++)
		if (c->priv[t])
			c->ops->destroy(c->priv[t]);
	pol_index_fini(&c->ix);
err_free:
	free(c);
	return r;
err_inval:
	free(c);
	return -EINVAL;
}

void pol_cache_destroy(struct pol_cache *c)
{
	if (!c)
		return;
	for (unsigned t = 0; t < POL_TIER_COUNT; t++)
		if (c->priv[t])
			c->ops->destroy(c->priv[t]);
	pol_index_fini(&c->ix);
	free(c->aside);
	free(c);
}

void pol_cache_set_move_handler(struct pol_cache *c, pol_move_fn fn, void *arg)
{
	c->move_fn = fn;
	c->move_arg = arg;
}

void pol_cache_set_clock(struct pol_cache *c, uint64_t now)
{
	c->now = now;
}

uint64_t pol_cache_clock(const struct pol_cache *c)
{
	return c->now;
}

uint64_t pol_cache_ticks(const struct pol_cache *c)
{
	return c->ticks;
}

/* pol_cache_learned_save()'s header, little-endian. */
struct pol_learned_hdr {
	char magic[8]; /* "KVMMLRN1" */
	uint32_t version; /* 1 */
	uint32_t kind; /* enum pol_kind */
	uint64_t payload_bytes; /* the policy's bytes after the header */
	uint64_t checksum; /* FNV-1a 64 of those bytes */
};

static const char learned_magic[8] = "KVMMLRN1";

/* FNV-1a 64: catches a torn or damaged file, not a forged one (the file
 * is the daemon's own, like its NVMe tier). */
static uint64_t fnv1a64(const void *buf, size_t len)
{
	const unsigned char *p = buf;
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

size_t pol_cache_learned_save(struct pol_cache *c, void *buf, size_t len)
{
	struct pol_learned_hdr h = { .version = 1, .kind = c->kind };
	size_t n;

	if (!c->ops->learned_save)
		return 0;
	n = c->ops->learned_save(c->priv[POL_TIER_GPU], NULL, 0);
	if (!n || len < sizeof(h) + n)
		return n ? sizeof(h) + n : 0;
	c->ops->learned_save(c->priv[POL_TIER_GPU], (char *)buf + sizeof(h), n);
	memcpy(h.magic, learned_magic, sizeof(h.magic));
	h.version = htole32(h.version);
	h.kind = htole32(h.kind);
	h.payload_bytes = htole64(n);
	h.checksum = htole64(fnv1a64((char *)buf + sizeof(h), n));
	memcpy(buf, &h, sizeof(h));
	return sizeof(h) + n;
}

/* The header of saved bytes, checked: 0, -EINVAL, -ESTALE (version). */
static int learned_header(const void *buf, size_t len,
			  struct pol_learned_hdr *h)
{
	if (!buf || len < sizeof(*h))
		return -EINVAL;
	memcpy(h, buf, sizeof(*h));
	h->version = le32toh(h->version);
	h->kind = le32toh(h->kind);
	h->payload_bytes = le64toh(h->payload_bytes);
	h->checksum = le64toh(h->checksum);
	if (memcmp(h->magic, learned_magic, sizeof(h->magic)) ||
	    h->payload_bytes != len - sizeof(*h) ||
	    h->checksum !=
		    fnv1a64((const char *)buf + sizeof(*h), len - sizeof(*h)))
		return -EINVAL;
	return h->version != 1 ? -ESTALE : 0;
}

int pol_cache_learned_load(struct pol_cache *c, const void *buf, size_t len,
			   uint64_t *lives)
{
	struct pol_learned_hdr h;
	int e;

	if (!c->ops->learned_load)
		return -EOPNOTSUPP;
	e = learned_header(buf, len, &h);
	if (e)
		return e;
	if (h.kind != (uint32_t)c->kind)
		return -ESTALE;
	return c->ops->learned_load(c->priv[POL_TIER_GPU],
				    (const char *)buf + sizeof(h),
				    len - sizeof(h), lives);
}

int pol_learned_describe(const void *buf, size_t len,
			 struct pol_learned_summary *out)
{
	const struct pol_ops *ops;
	struct pol_learned_hdr h;
	int e = learned_header(buf, len, &h);

	if (e)
		return e;
	memset(out, 0, sizeof(*out));
	out->kind = (enum pol_kind)h.kind;
	out->version = h.version;
	out->bytes = len;
	ops = h.kind < POL_KIND_COUNT ? pol_ops_get((enum pol_kind)h.kind) :
					NULL;
	if (!ops || !ops->learned_describe)
		return -ESTALE;
	return ops->learned_describe((const char *)buf + sizeof(h),
				     len - sizeof(h), out);
}

void *pol_cache_gpu_policy(struct pol_cache *c)
{
	return c->priv[POL_TIER_GPU];
}

struct pol_index *pol_cache_index(struct pol_cache *c)
{
	return &c->ix;
}

const struct pol_cost_model *pol_cache_cost(const struct pol_cache *c)
{
	return c->cost;
}

enum pol_kind pol_cache_kind(const struct pol_cache *c)
{
	return c->kind;
}

bool pol_cache_prefix_rule(const struct pol_cache *c)
{
	return c->prefix_rule;
}

bool pol_cache_msa(const struct pol_cache *c)
{
	return c->msa;
}

uint64_t pol_cache_count(const struct pol_cache *c, unsigned tier)
{
	return tier < POL_TIER_COUNT ? c->count[tier] : 0;
}

uint64_t pol_cache_capacity(const struct pol_cache *c, unsigned tier)
{
	return tier < POL_TIER_COUNT ? c->cap[tier] : 0;
}

bool pol_cache_has_tier(const struct pol_cache *c, unsigned tier)
{
	return tier < POL_TIER_COUNT && c->priv[tier];
}

static int make_room(struct pol_cache *c, unsigned t);
static void tenant_room_slow(struct pol_cache *c, uint16_t row, unsigned t,
			     struct pol_block *in, bool in_may_go);

/*
 * Bring tenant row within its limit in tier t (tenant_room_slow(), only
 * for a limited row: one test for the others).  in (may be NULL): the
 * block whose entry or use made the check, which goes itself only when
 * in_may_go and none of the tenant's others there can.
 */
static inline void tenant_room(struct pol_cache *c, uint16_t row, unsigned t,
			       struct pol_block *in, bool in_may_go)
{
	if (__builtin_expect(c->tenants.row[row].limited, 0))
		tenant_room_slow(c, row, t, in, in_may_go);
}

int pol_cache_set_capacity(struct pol_cache *c, unsigned tier, uint64_t cap)
{
	/* a tier exists when it had a capacity at create time (it has a
	 * policy instance); 0 empties it for now, and it can come back */
	if (tier >= POL_TIER_COUNT || !c->priv[tier])
		return -EINVAL;
	c->cap[tier] = cap;
	/*
	 * A tier at 0 passes blocks by (pol_cache_lower_tier()), one raised
	 * from 0 takes them again: the last tier may be another now, and
	 * with it what may be dropped (leaf_in()) and what the instances
	 * keep of it (asym's tie-break, arc's target).
	 */
	set_last_tier(c);
	for (unsigned t = 0; t < POL_TIER_COUNT; t++)
		if (c->priv[t] && c->ops->on_capacity)
			c->ops->on_capacity(c->priv[t]);
	return make_room(c, tier);
}

void pol_cache_get_stats(const struct pol_cache *c, struct pol_cache_stats *s)
{
	*s = c->st;
}

int pol_cache_tenant_limit(struct pol_cache *c, uint32_t id,
			   const uint64_t limit[POL_TIER_COUNT])
{
	struct pol_tenant_count *r;
	bool any = false;
	uint16_t row;
	int err;

	if (id == POL_TENANT_OTHERS)
		return -EINVAL;
	for (unsigned t = 0; t < POL_TIER_COUNT; t++) {
		if (limit[t] && !pol_cache_has_tier(c, t))
			return -EINVAL;
		any |= limit[t] != 0;
	}
	/* a new row for a tenant not seen yet, unless they are all taken
	 * (then nothing is made); lifting a limit it never had, nothing */
	row = pol_tenant_row_lookup(&c->tenants, id);
	if (row == POL_TENANT_NO_ROW) {
		if (!any)
			return 0;
		if (!pol_tenant_room(&c->tenants))
			return -ENOSPC;
		row = pol_tenant_row(&c->tenants, id);
	}
	r = &c->tenants.row[row];
	if (any && !r->limited) {
		err = pol_tenant_list_build(&c->tenants, &c->ix, row);
		if (err)
			return err;
	}
	r->limited = any;
	for (unsigned t = 0; t < POL_TIER_COUNT; t++)
		r->limit[t] = limit[t];
	/* higher tiers first: what they send down counts below */
	for (unsigned t = 0; t < POL_TIER_COUNT; t++)
		tenant_room(c, row, t, NULL, false);
	return 0;
}

size_t pol_cache_tenants(const struct pol_cache *c,
			 struct pol_tenant_count *out, size_t max)
{
	size_t n = c->tenants.nr;

	if (out && max)
		memcpy(out, c->tenants.row, (n < max ? n : max) * sizeof(*out));
	return n;
}

int pol_cache_tenant_row(const struct pol_cache *c, uint32_t id)
{
	uint16_t row = pol_tenant_row_lookup(&c->tenants, id);

	return id == POL_TENANT_OTHERS || row == POL_TENANT_NO_ROW ? -ENOENT :
								     row;
}

uint32_t pol_cache_tenant_id(const struct pol_cache *c, uint16_t row)
{
	return row < c->tenants.nr ? c->tenants.row[row].id : POL_TENANT_OTHERS;
}

unsigned pol_cache_lower_tier(const struct pol_cache *c, unsigned tier)
{
	for (unsigned t = tier + 1; t < POL_TIER_COUNT; t++)
		if (c->cap[t])
			return t;
	return POL_TIER_NONE;
}

/* Would b be a leaf in tier t (the prefix rule)? */
static bool leaf_in(const struct pol_cache *c, const struct pol_block *b,
		    unsigned t)
{
	unsigned upto;

	if (!c->prefix_rule)
		return true;
	/* From the last tier a block is dropped: no child may stay anywhere. */
	upto = t == c->last_tier ? POL_TIER_COUNT - 1 : t;
	for (unsigned u = 0; u <= upto; u++)
		if (b->nchild[u])
			return false;
	return true;
}

bool pol_cache_is_leaf(const struct pol_cache *c, const struct pol_block *b)
{
	return b->tier >= POL_TIER_COUNT || leaf_in(c, b, b->tier);
}

bool pol_cache_evictable(const struct pol_cache *c, const struct pol_block *b)
{
	if (b->pins || b->refcount || (b->flags & POL_BLOCK_ASIDE))
		return false;
	if (b->ttl_expiry && b->ttl_expiry > c->now &&
	    !(c->ttl_demoting && (b->flags & POL_BLOCK_TTL_DEMOTE)))
		return false;
	return pol_cache_is_leaf(c, b);
}

void pol_cache_hold(struct pol_cache *c, struct pol_block *b)
{
	b->holds++;
}

static void maybe_free(struct pol_cache *c, struct pol_block *b)
{
	if (b->tier == POL_TIER_NONE && !b->holds)
		pol_index_del(&c->ix, pol_index_id(&c->ix, b));
}

void pol_cache_release(struct pol_cache *c, struct pol_block *b)
{
	if (b->holds)
		b->holds--;
	maybe_free(c, b);
}

static void notify_change(struct pol_cache *c, struct pol_block *b)
{
	if (b->tier < POL_TIER_COUNT && c->ops->on_change)
		c->ops->on_change(c->priv[b->tier], b);
}

/*
 * b->parent_id is a hint that saves a table probe (the dominant cost at
 * 1M blocks); it is checked against the hash because ids are reused, so
 * the answer does not depend on how ids were handed out.
 */
struct pol_block *pol_cache_parent(struct pol_cache *c, struct pol_block *b)
{
	uint32_t pid = b->parent_id;
	struct pol_block *p;

	if (!(b->flags & POL_BLOCK_HAS_PARENT))
		return NULL;
	if (pid != POL_NONE && pid < c->ix.high_water) {
		p = pol_index_at(&c->ix, pid);
		if (p->live && p->hash == b->parent_hash)
			return p;
	}
	pid = pol_index_find(&c->ix, b->parent_hash);
	b->parent_id = pid;
	return pid == POL_NONE ? NULL : pol_index_at(&c->ix, pid);
}

/* Account b (now in tier t) in its parent's child counts. */
static void count_in_parent(struct pol_cache *c, struct pol_block *b)
{
	struct pol_block *p;

	if (!c->prefix_rule)
		return;
	p = pol_cache_parent(c, b);
	if (!p)
		return;
	if (p->tier == POL_TIER_NONE || p == b)
		return;
	p->nchild[b->tier]++;
	b->counted = b->tier;
	notify_change(c, p);
}

static void uncount_in_parent(struct pol_cache *c, struct pol_block *b)
{
	struct pol_block *p;
	unsigned t = b->counted;

	if (t == POL_TIER_NONE)
		return;
	b->counted = POL_TIER_NONE;
	p = pol_cache_parent(c, b);
	if (!p)
		return;
	if (p->nchild[t])
		p->nchild[t]--;
	notify_change(c, p);
}

/* Put b (in no tier) into tier t. */
static void enter_tier(struct pol_cache *c, struct pol_block *b, unsigned t)
{
	b->tier = (uint8_t)t;
	c->count[t]++;
	pol_tenant_enter(&c->tenants, &c->ix, b, t);
	c->ops->on_insert(c->priv[t], b);
	count_in_parent(c, b);
}

static void leave_tier(struct pol_cache *c, struct pol_block *b)
{
	unsigned t = b->tier;

	uncount_in_parent(c, b);
	c->ops->on_remove(c->priv[t], b);
	c->count[t]--;
	pol_tenant_leave(&c->tenants, &c->ix, b, t);
	b->tier = POL_TIER_NONE;
}

static void report(struct pol_cache *c, const struct pol_block *b,
		   unsigned from, unsigned to)
{
	if (c->move_fn)
		c->move_fn(c->move_arg, b, from, to);
}

/* make_room()'s choice: the policy's victim, or with a lower tier one
 * that only a demotable TTL holds (counted by the caller). */
static struct pol_block *room_victim(struct pol_cache *c, unsigned t, bool *ttl)
{
	struct pol_block *v = c->ops->victim(c->priv[t]);

	*ttl = false;
	if (!v && pol_cache_lower_tier(c, t) != POL_TIER_NONE) {
		/*
		 * Nothing else can go: rather than refuse the block that
		 * needs the room (a running request's), move a block whose
		 * TTL allows it down a tier.  It stays cached and comes back
		 * by a reload, not a recompute.
		 */
		c->ttl_demoting = true;
		v = c->ops->victim(c->priv[t]);
		c->ttl_demoting = false;
		*ttl = v != NULL;
	}
	return v;
}

/*
 * Setting blocks aside: while the cache looks for a block that can make
 * room, the ones it has ruled out are flagged POL_BLOCK_ASIDE, which
 * pol_cache_evictable() reads, so that the policy's next victim is
 * another.  The policy is told (on_change: asym forgets a candidate's
 * value), nothing moves in its structures.  Each call releases what it
 * set aside before it returns (release_aside() to the mark it took).
 */
static bool set_aside(struct pol_cache *c, struct pol_block *b)
{
	if (b->flags & POL_BLOCK_ASIDE)
		return true;
	if (c->naside == c->cap_aside) {
		uint32_t n = c->cap_aside ? 2 * c->cap_aside : 16;
		uint32_t *a = realloc(c->aside, n * sizeof(*a));

		if (!a)
			return false;
		c->aside = a;
		c->cap_aside = n;
	}
	c->aside[c->naside++] = pol_index_id(&c->ix, b);
	b->flags |= POL_BLOCK_ASIDE;
	notify_change(c, b);
	return true;
}

static void release_aside(struct pol_cache *c, uint32_t mark)
{
	while (c->naside > mark) {
		struct pol_block *b =
			pol_index_at(&c->ix, c->aside[--c->naside]);

		b->flags &= (uint8_t)~POL_BLOCK_ASIDE;
		notify_change(c, b);
	}
}

/*
 * pol_cache_evictable() for b as it would be in tier t (it is in another
 * one, or about to enter t): a live TTL lets it go only down a tier (the
 * second pass of room_victim()), never out of the last.
 */
static bool evictable_in(const struct pol_cache *c, const struct pol_block *b,
			 unsigned t)
{
	/* not POL_BLOCK_ASIDE: promotable() sets the block it asks about
	 * aside in the tier it leaves */
	if (b->pins || b->refcount)
		return false;
	if (b->ttl_expiry && b->ttl_expiry > c->now &&
	    !((b->flags & POL_BLOCK_TTL_DEMOTE) &&
	      pol_cache_lower_tier(c, t) != POL_TIER_NONE))
		return false;
	return leaf_in(c, b, t);
}

/* How many candidates fits() rules out before it gives up (a tier below
 * that is stuck would otherwise be searched through, block by block). */
#define FITS_TRIES 16

static bool fits(struct pol_cache *c, unsigned t, struct pol_block *v,
		 bool self);

/* Can x, evictable in tier t, leave it: dropped from the last tier (its
 * evictability there says no child stays anywhere), or into the next? */
static bool way_down(struct pol_cache *c, struct pol_block *x, unsigned t)
{
	unsigned lower = pol_cache_lower_tier(c, t);

	return lower == POL_TIER_NONE || fits(c, lower, x, true);
}

/*
 * Could tier t take v (NULL: a block new to the cache, with no parent
 * there) and stay within its capacity, by moving down or dropping blocks
 * that may go (v itself among them, with self) as make_room() would?  Side-effect
 * free.  Exact but for a tier more than one block over its capacity and
 * for the bound on the candidates; a no refuses the move, which is safe.
 */
static bool fits(struct pol_cache *c, unsigned t, struct pol_block *v,
		 bool self)
{
	uint32_t mark = c->naside;
	uint64_t need;
	struct pol_block *p;
	bool ttl;

	if (c->count[t] < c->cap[t])
		return true;
	need = c->count[t] + 1 - c->cap[t];
	/* v in t makes its parent, in t or below, a parent of a block
	 * above it or beside it: no longer a victim there */
	p = v && c->prefix_rule ? pol_cache_parent(c, v) : NULL;
	if (p && p->tier != POL_TIER_NONE && p->tier >= t && !set_aside(c, p))
		goto out;
	if (v && self && evictable_in(c, v, t) && way_down(c, v, t))
		need--;
	for (unsigned i = 0; need && i < FITS_TRIES; i++) {
		struct pol_block *x = room_victim(c, t, &ttl);

		if (!x || x == v)
			break;
		if (way_down(c, x, t))
			need--;
		if (need && !set_aside(c, x))
			break;
	}
out:
	release_aside(c, mark);
	return !need;
}

bool pol_cache_can_admit(struct pol_cache *c, unsigned tier)
{
	if (tier >= POL_TIER_COUNT || !c->priv[tier])
		return false;
	/* a victim choice has no side effect in any policy: asym only
	 * remembers the values it computed */
	return fits(c, tier, NULL, false);
}

/*
 * Can b, cached in a tier below t, move up into t?  Its place below is
 * free once it leaves (what goes down from t may take it), and it is not
 * a victim there meanwhile.  self: b may be its own victim (moved up and
 * straight back down, which an access does; kvmmd asks beforehand
 * whether anything else could go, pol_cache_can_promote()).
 */
static bool promotable(struct pol_cache *c, struct pol_block *b, unsigned t,
		       bool self)
{
	uint32_t mark = c->naside;
	unsigned from = b->tier;
	bool ok;

	if (c->count[t] < c->cap[t])
		return true;
	/* a block that may go from t goes from there, wherever it came from:
	 * if t's lower tier is full, b's own place may be its way down */
	if (!set_aside(c, b))
		return false;
	c->count[from]--;
	ok = fits(c, t, b, self);
	c->count[from]++;
	release_aside(c, mark);
	return ok;
}

bool pol_cache_can_promote(struct pol_cache *c, unsigned tier, uint64_t hash)
{
	struct pol_block *b;

	if (tier >= POL_TIER_COUNT || !c->priv[tier])
		return false;
	b = pol_cache_lookup(c, hash);
	if (!b)
		return fits(c, tier, NULL, false);
	if (b->tier <= tier)
		return true;
	return promotable(c, b, tier, false);
}

bool pol_cache_can_access(struct pol_cache *c, uint64_t hash)
{
	struct pol_block *b = pol_cache_lookup(c, hash);

	/* pol_cache_access()'s own test, before it changes anything */
	return !b || b->tier == POL_TIER_GPU ||
	       promotable(c, b, POL_TIER_GPU, true);
}

/* May b (in some tier) be dropped: evictable as from the last tier? */
static bool droppable(const struct pol_cache *c, const struct pol_block *b)
{
	return !b->pins && !b->refcount &&
	       !(b->ttl_expiry && b->ttl_expiry > c->now) &&
	       leaf_in(c, b, c->last_tier);
}

static void drop(struct pol_cache *c, struct pol_block *v)
{
	unsigned from = v->tier;

	leave_tier(c, v);
	c->st.drops++;
	c->tenants.row[v->tenant].dropped++;
	report(c, v, from, POL_TIER_NONE);
	maybe_free(c, v);
}

/*
 * Move v (evictable, in tier t) down a tier, or drop it from the last:
 * 0.  -ENOSPC, and nothing done, when the tier below is full and could
 * make no room for v (fits()): everything there is pinned, referenced,
 * held by a TTL or a parent of a cached child, and v cannot pass through
 * it either.  Dropping v instead could drop a parent whose children are
 * cached below (v is a leaf of t, not of the tiers under it), or break
 * a TTL, so the caller picks another victim (make_room()).
 */
static int move_down(struct pol_cache *c, struct pol_block *v, unsigned t)
{
	unsigned lower = pol_cache_lower_tier(c, t);

	if (lower != POL_TIER_NONE && c->count[lower] >= c->cap[lower] &&
	    !fits(c, lower, v, true)) {
		c->st.refused++;
		return -ENOSPC;
	}
	/*
	 * Start the misses of what follows while the policy takes v out of
	 * its structures: its parent's child counts and, for a drop, v's
	 * slot in the index table.
	 */
	if (v->counted != POL_TIER_NONE && v->parent_id < c->ix.high_water)
		pol_index_prefetch_entry(&c->ix, v->parent_id, 1);
	if (lower == POL_TIER_NONE) {
		pol_index_prefetch(&c->ix, v->hash);
		drop(c, v);
		return 0;
	}
	leave_tier(c, v);
	c->st.demotions[t]++;
	report(c, v, t, lower);
	enter_tier(c, v, lower);
	tenant_room(c, v->tenant, lower, v, true);
	/* fits() said there is room; should the lower tier have been over
	 * its capacity already, v goes only if it may (else it stays, over) */
	if (make_room(c, lower) == -ENOSPC && v->tier == lower &&
	    droppable(c, v))
		drop(c, v);
	return 0;
}

/*
 * Bring tier t back within its capacity by moving victims down (or
 * dropping them from the last tier).  Victims go into the lower tier
 * first, which then makes room the same way.  A victim that cannot go
 * down (move_down()) is set aside and the policy asked for another.
 */
static int make_room(struct pol_cache *c, unsigned t)
{
	uint32_t mark = c->naside;
	int r = 0;

	while (c->count[t] > c->cap[t]) {
		bool ttl;
		struct pol_block *v = room_victim(c, t, &ttl);

		if (!v) {
			c->st.no_victim++;
			r = -ENOSPC;
			break;
		}
		if (move_down(c, v, t)) {
			if (!set_aside(c, v)) {
				r = -ENOSPC;
				break;
			}
			continue;
		}
		if (ttl)
			c->st.ttl_demotions++;
	}
	release_aside(c, mark);
	return r;
}

/* How many of a tenant's least recently used blocks a victim search on
 * an access looks at (bounded: a tenant over its limit with many blocks
 * in use would otherwise be walked through at every access; a limit
 * being set looks at them all, once). */
#define TENANT_SCAN 64

/*
 * The least recently used block of row's in tier t that can go, but for
 * skip.  Blocks that cannot go (in use, pinned, a parent of a cached
 * child) are moved to the recent end as they are passed, as the kernel's
 * LRU rotates referenced pages: the next search starts past them.
 */
static struct pol_block *tenant_victim(struct pol_cache *c, uint16_t row,
				       unsigned t, const struct pol_block *skip,
				       uint64_t bound)
{
	struct pol_tenants *tn = &c->tenants;
	uint64_t n = tn->row[row].blocks[t];

	/* each block looked at once at most */
	for (uint64_t i = 0; i < n && i < bound; i++) {
		uint32_t id = tn->head[row][t];
		struct pol_block *b = pol_index_at(&c->ix, id);

		if (b != skip && pol_cache_evictable(c, b))
			return b;
		pol_tenant_list_del(tn, &c->ix, row, t, id);
		pol_tenant_list_add(tn, &c->ix, row, t, id);
	}
	return NULL;
}

/*
 * Bring tenant row within its limit in tier t by moving its own least
 * recently used blocks down (policy.h, "Tenants"); it stays over when
 * none of them can go.  The fallback to in comes after a search of 64:
 * with more of the tenant's blocks in use at the old end, in may go
 * while an older idle block stays, until the rotation brings that one
 * up (one copy either way; bounded work comes first).
 */
static void tenant_room_slow(struct pol_cache *c, uint16_t row, unsigned t,
			     struct pol_block *in, bool in_may_go)
{
	struct pol_tenant_count *r = &c->tenants.row[row];

	while (r->limited && r->limit[t] && r->blocks[t] > r->limit[t]) {
		struct pol_block *v = tenant_victim(
			c, row, t, in, in ? TENANT_SCAN : UINT64_MAX);

		if (!v && in_may_go && in && in->tier == t &&
		    pol_cache_evictable(c, in))
			v = in;
		if (!v)
			return;
		if (move_down(c, v, t))
			return; /* nowhere to go below: over until later */
		r->limit_moves++;
	}
}

int pol_cache_access(struct pol_cache *c, const struct pol_block_desc *d,
		     unsigned *was_tier)
{
	struct pol_block *b;
	bool created;
	uint32_t id;
	unsigned from;

	if (c->ops->prefetch)
		c->ops->prefetch(c->priv[POL_TIER_GPU], d->hash);
	id = pol_index_get(&c->ix, d->hash, &created);
	if (id == POL_NONE)
		return -ENOMEM;
	b = pol_index_at(&c->ix, id);
	b->few_new = (d->flags & POL_BLOCK_FEW_NEW) ? 1 : 0;
	from = b->tier;
	if (was_tier)
		*was_tier = from;
	/*
	 * Cached below, and the GPU could make no room for it (everything
	 * there in use, pinned, held, or only its parent): it stays where
	 * it is, untouched, and the access is a miss.  Moving it up would
	 * leave it nowhere to go but out, lower copy, pins and all.
	 */
	if (from != POL_TIER_NONE && from != POL_TIER_GPU &&
	    !promotable(c, b, POL_TIER_GPU, true)) {
		c->st.refused++;
		return -ENOSPC;
	}
	if (from == POL_TIER_NONE) {
		b->parent_hash = d->parent_hash;
		b->position = d->position;
		b->flags = (uint8_t)(d->flags &
				     ~(POL_BLOCK_WARM_LINEAGE |
				       POL_BLOCK_TTL_DEMOTE |
				       POL_BLOCK_FEW_NEW | POL_BLOCK_ASIDE));
		b->bytes = d->bytes ? d->bytes : c->block_bytes;
		b->parent_id = POL_NONE;
		if (!b->access_count)
			b->turn = 1;
		if (b->flags & POL_BLOCK_HAS_PARENT) {
			struct pol_block *p = pol_cache_parent(c, b);

			if (p && p->tier != POL_TIER_NONE &&
			    p->access_count >= 2)
				b->flags |= POL_BLOCK_WARM_LINEAGE;
			/* a block created under a parent that an earlier
			 * request made starts the next turn of its chain */
			if (p && !b->access_count) {
				unsigned turn =
					p->turn + (p->access_count >= 2);

				b->turn = turn < 255 ? turn : 255;
			}
		}
	}
	b->next_use = d->next_use;
	b->last_access = c->now;
	b->tick = ++c->ticks;
	b->access_count++;
	if (from != POL_TIER_NONE && from != POL_TIER_GPU && c->ops->on_touch)
		c->ops->on_touch(c->priv[from], b);
	if (from == POL_TIER_GPU) {
		c->st.hits[POL_TIER_GPU]++;
		c->ops->on_access(c->priv[POL_TIER_GPU], b);
		if (c->tenants.row[b->tenant].limited) {
			/* refreshed, and within its limit again if it was
			 * over with nothing that could go; never by moving b,
			 * which its user is about to take */
			pol_tenant_touch(&c->tenants, &c->ix, b, POL_TIER_GPU);
			tenant_room(c, b->tenant, POL_TIER_GPU, b, false);
		}
		return 0;
	}
	if (from != POL_TIER_NONE) {
		c->st.hits[from]++;
		c->st.promotions++;
		leave_tier(c, b);
		report(c, b, from, POL_TIER_GPU);
	} else {
		c->st.inserts++;
		/* charged to whoever admits it, in every tier it goes to */
		b->tenant = pol_tenant_row(&c->tenants, d->tenant);
		c->tenants.row[b->tenant].admitted++;
		report(c, b, POL_TIER_NONE, POL_TIER_GPU);
	}
	enter_tier(c, b, POL_TIER_GPU);
	/* at its limit with nothing else that can go, b goes down itself
	 * (a bypass, as a policy may choose) */
	tenant_room(c, b->tenant, POL_TIER_GPU, b, true);
	if (make_room(c, POL_TIER_GPU) == -ENOSPC) {
		/* b went down for its tenant's limit: it is cached, and the
		 * GPU was over capacity before it came */
		if (b->tier != POL_TIER_GPU && b->tier != POL_TIER_NONE)
			return 0;
		/* Everything else is pinned: the new block is not cached
		 * (one from below stays over, should it not be droppable:
		 * promotable() said there was room, which the lower tiers'
		 * answer can get wrong only when over their capacity) */
		if (b->tier == POL_TIER_GPU &&
		    (from == POL_TIER_NONE || droppable(c, b))) {
			leave_tier(c, b);
			report(c, b, POL_TIER_GPU, POL_TIER_NONE);
			maybe_free(c, b);
		}
		return -ENOSPC;
	}
	return 0;
}

void pol_cache_prefetch(const struct pol_cache *c, uint64_t hash)
{
	pol_index_prefetch(&c->ix, hash);
}

bool pol_cache_few_new(struct pol_cache *c, const uint64_t *hashes, uint32_t n)
{
	uint32_t unknown = 0;

	for (uint32_t i = 0; i < n && unknown <= POL_FEW_NEW_MAX; i++)
		unknown += pol_index_find(&c->ix, hashes[i]) == POL_NONE;
	return unknown >= 1 && unknown <= POL_FEW_NEW_MAX;
}

struct pol_block *pol_cache_lookup(struct pol_cache *c, uint64_t hash)
{
	uint32_t id = pol_index_find(&c->ix, hash);
	struct pol_block *b;

	if (id == POL_NONE)
		return NULL;
	b = pol_index_at(&c->ix, id);
	return b->tier == POL_TIER_NONE ? NULL : b;
}

unsigned pol_cache_tier_of(struct pol_cache *c, uint64_t hash)
{
	struct pol_block *b = pol_cache_lookup(c, hash);

	return b ? b->tier : POL_TIER_NONE;
}

/* Index slots loaded ahead of a prefix lookup (the request's blocks are
 * all accessed after it, so none is loaded in vain). */
#define PREFIX_AHEAD 8

size_t pol_cache_prefix(struct pol_cache *c, const uint64_t *hashes, size_t n)
{
	size_t k = 0;

	/* the slots of the next few hashes load while one is looked up */
	for (size_t i = 0; i < n && i < PREFIX_AHEAD; i++)
		pol_index_prefetch(&c->ix, hashes[i]);
	while (k < n && pol_cache_lookup(c, hashes[k])) {
		if (k + PREFIX_AHEAD < n)
			pol_index_prefetch(&c->ix, hashes[k + PREFIX_AHEAD]);
		k++;
	}
	return k;
}

static int remove_block(struct pol_cache *c, uint64_t hash, bool dropped)
{
	struct pol_block *b = pol_cache_lookup(c, hash);
	unsigned from;

	if (!b)
		return -ENOENT;
	from = b->tier;
	leave_tier(c, b);
	if (dropped) {
		c->st.drops++;
		c->tenants.row[b->tenant].dropped++;
	}
	report(c, b, from, POL_TIER_NONE);
	maybe_free(c, b);
	return 0;
}

int pol_cache_remove(struct pol_cache *c, uint64_t hash)
{
	return remove_block(c, hash, false);
}

int pol_cache_remove_dropped(struct pol_cache *c, uint64_t hash)
{
	return remove_block(c, hash, true);
}

int pol_cache_return(struct pol_cache *c, uint64_t hash, unsigned tier)
{
	struct pol_block *b = pol_cache_lookup(c, hash);

	if (!b)
		return -ENOENT;
	if (tier >= POL_TIER_COUNT || !c->priv[tier] || b->tier <= tier)
		return -EINVAL;
	/* not reported: the owner asked for the move, and has made it */
	leave_tier(c, b);
	enter_tier(c, b, tier);
	tenant_room(c, b->tenant, tier, b, true);
	/*
	 * The tier takes one more block than it had room for: its victim
	 * goes down (or out of the last tier) as for any block that came
	 * in; b itself only when the policy picks it.  With nothing that
	 * may go, b goes if it may (as move_down() does), else the tier
	 * stays over until a block leaves.
	 */
	if (make_room(c, tier) == -ENOSPC) {
		if (b->tier == tier && droppable(c, b))
			drop(c, b);
		return -ENOSPC;
	}
	return 0;
}

#define RESIDENT_OR_ENOENT(c, hash, b)                   \
	struct pol_block *b = pol_cache_lookup(c, hash); \
	if (!b)                                          \
	return -ENOENT

int pol_cache_pin(struct pol_cache *c, uint64_t hash)
{
	RESIDENT_OR_ENOENT(c, hash, b);
	b->pins++;
	notify_change(c, b);
	return 0;
}

int pol_cache_unpin(struct pol_cache *c, uint64_t hash)
{
	RESIDENT_OR_ENOENT(c, hash, b);
	if (!b->pins)
		return -EINVAL;
	b->pins--;
	notify_change(c, b);
	return 0;
}

int pol_cache_ref(struct pol_cache *c, uint64_t hash)
{
	RESIDENT_OR_ENOENT(c, hash, b);
	b->refcount++;
	notify_change(c, b);
	return 0;
}

int pol_cache_unref(struct pol_cache *c, uint64_t hash)
{
	RESIDENT_OR_ENOENT(c, hash, b);
	if (!b->refcount)
		return -EINVAL;
	b->refcount--;
	notify_change(c, b);
	return 0;
}

int pol_cache_set_ttl(struct pol_cache *c, uint64_t hash, uint64_t until)
{
	RESIDENT_OR_ENOENT(c, hash, b);
	b->ttl_expiry = until;
	notify_change(c, b);
	return 0;
}

int pol_cache_set_ttl_demotable(struct pol_cache *c, uint64_t hash,
				bool demotable)
{
	RESIDENT_OR_ENOENT(c, hash, b);
	if (demotable)
		b->flags |= POL_BLOCK_TTL_DEMOTE;
	else
		b->flags &= (uint8_t)~POL_BLOCK_TTL_DEMOTE;
	notify_change(c, b);
	return 0;
}

int pol_cache_set_priority(struct pol_cache *c, uint64_t hash, int priority)
{
	RESIDENT_OR_ENOENT(c, hash, b);
	if (priority < -128 || priority > 127)
		return -ERANGE;
	b->priority = (int8_t)priority;
	notify_change(c, b);
	return 0;
}

int pol_cache_set_cookie(struct pol_cache *c, uint64_t hash, uint64_t cookie)
{
	RESIDENT_OR_ENOENT(c, hash, b);
	b->cookie = cookie;
	return 0;
}

void pol_cache_set_next_use(struct pol_cache *c, struct pol_block *b,
			    uint64_t next_use)
{
	b->next_use = next_use;
	notify_change(c, b);
}
