/* SPDX-License-Identifier: MIT */
/*
 * Eviction policies and the tiered cache that drives them.
 *
 * A pol_cache holds the block index and up to three exclusive tiers (GPU,
 * host, NVMe), each with a capacity in blocks and its own instance of one
 * policy.  Blocks enter on the GPU tier.  When a tier is full its policy
 * picks a victim, which moves to the next tier down (demotion) or, from
 * the last tier, is dropped.  A block accessed in a lower tier moves back
 * up to the GPU tier.  The cache only decides and does bookkeeping: every
 * move is reported to a move handler, which in kvmmd performs the copy
 * (and may fail it, see pol_move_fn) and in kvmm-replay only counts.
 *
 * Evictability, checked by the cache for every policy:
 *   - refcount == 0 and pins == 0 (sequences and in-flight steps),
 *   - ttl_expiry <= now (TTL pins from agents waiting on a tool call),
 *   - with the prefix rule: no resident child in this tier or a tier
 *     above it (a prefix hit stops at the first missing block, so a
 *     parent evicted before its children makes them worthless).
 * Policies rank the evictable blocks: lru, lfu, arc (baselines), belady
 * (offline: needs next_use, the limit) and asym (cost-aware GDSF).
 *
 * Clock: pol_cache_set_clock() sets "now" in any unit the owner likes
 * (ns in the daemon, request number in the replay); TTLs and
 * last_access use the same unit.
 */
#ifndef KVMM_POLICY_POLICY_H
#define KVMM_POLICY_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvmm/policy/block_index.h"

struct pol_cache;
struct pol_cost_model;

enum pol_kind {
	POL_LRU,
	POL_LFU,
	POL_ARC,
	POL_BELADY,
	POL_ASYM,
	POL_KIND_COUNT,
};

const char *pol_kind_string(enum pol_kind kind);
/* 0 and *kind, or -EINVAL for an unknown name. */
int pol_kind_parse(const char *name, enum pol_kind *kind);

/* What a saved state says, per class (kvmmctl policy-state FILE). */
#define POL_LEARNED_MAX_CLASSES 32
struct pol_learned_class {
	/* asym: "class 3", "class 8+, few new": turn + uses - 1, capped at
	 * 8, and whether the request brought few new blocks (policy.md) */
	char name[32];
	double lives; /* block lives counted (halved with the counts) */
	double returns; /* of them, came back within the history */
	/* block uses after which half and 90 % of those returns had come
	 * back (the start of their age bucket; 0: none came back) */
	uint64_t median_age, p90_age;
};

struct pol_learned_summary {
	enum pol_kind kind;
	uint32_t version;
	size_t bytes;
	uint64_t decay_in; /* block uses to the next halving of the counts */
	unsigned int nclass;
	struct pol_learned_class cls[POL_LEARNED_MAX_CLASSES];
};

/*
 * One policy instance per tier.  Callbacks get the instance's private
 * state and the block; the tier is fixed at create time, and a policy uses
 * only b->slot[tier] for its own bookkeeping.
 */
struct pol_ops {
	const char *name;
	int (*create)(struct pol_cache *c, unsigned tier, void **priv);
	void (*destroy)(void *priv);
	/* b entered the tier (new, promoted or demoted into it). */
	void (*on_insert)(void *priv, struct pol_block *b);
	/* b was used while in the tier. */
	void (*on_access)(void *priv, struct pol_block *b);
	/* b leaves the tier (moved away or dropped). */
	void (*on_remove)(void *priv, struct pol_block *b);
	/* b's structural evictability changed (children, pins): optional. */
	void (*on_change)(void *priv, struct pol_block *b);
	/*
	 * b, in this tier (not the GPU tier), was used: its tick and access
	 * count changed, and it leaves the tier next (promotion): optional.
	 */
	void (*on_touch)(void *priv, struct pol_block *b);
	/* b is about to be freed from the index (drop the history): optional */
	void (*on_forget)(void *priv, struct pol_block *b);
	/*
	 * The block to evict from the tier, or NULL when none is evictable.
	 * Must return a block for which pol_cache_evictable() is true.
	 */
	struct pol_block *(*victim)(void *priv);
	/* A block is about to be accessed: start fetching what the policy
	 * will read for it (optional; overlaps cache misses). */
	void (*prefetch)(void *priv, uint64_t hash);
	/*
	 * What the policy learned from the workload, so that a restarted
	 * owner need not learn it again (optional; called on the GPU tier's
	 * instance; pol_cache_learned_save() below wraps it).  save: the
	 * bytes it needs, written to buf when len allows.  load: replace what
	 * the instance learned with bytes save wrote: 0, -EINVAL (damaged),
	 * -ESTALE (another layout); lives (may be NULL) gets how many block
	 * lives the state was learned from.
	 */
	size_t (*learned_save)(void *priv, void *buf, size_t len);
	int (*learned_load)(void *priv, const void *buf, size_t len,
			    uint64_t *lives);
	/* Summarize bytes learned_save wrote (no instance needed). */
	int (*learned_describe)(const void *buf, size_t len,
				struct pol_learned_summary *out);
	/*
	 * A tier's capacity changed (pol_cache_set_capacity()), which may
	 * change which tier is the last one with a capacity: re-read what
	 * the instance keeps of either (optional).
	 */
	void (*on_capacity)(void *priv);
};

const struct pol_ops *pol_ops_get(enum pol_kind kind);

/* Move handler: from/to are tiers, to == POL_TIER_NONE means dropped. */
typedef void (*pol_move_fn)(void *arg, const struct pol_block *b, unsigned from,
			    unsigned to);

struct pol_cache_opts {
	size_t size; /* sizeof(struct pol_cache_opts) */
	enum pol_kind kind;
	uint64_t capacity[POL_TIER_COUNT]; /* blocks; 0 = no such tier */
	/*
	 * Bit t: tier t exists with capacity 0 (capacity[t] must be 0) and
	 * takes blocks once pol_cache_set_capacity() raises it: a tier that
	 * joins a running cache (kvmmd's NVMe tier, when its file could not
	 * open at set-up).  Until then blocks pass it by, as if it did not
	 * exist.
	 */
	uint32_t joins_later;
	/* -1: the policy's default (on for asym, and for belady without
	 * msa), 0 off, 1 on */
	int prefix_rule;
	/* Miss costs for cost-aware policies; NULL: the reference profile. */
	const struct pol_cost_model *cost;
	uint32_t expected_blocks; /* sizing hint for the index */
	uint64_t block_bytes; /* default bytes of a block (for cost/bytes) */
	/*
	 * The owner serves blocks with Multi-Segment Attention (the replay's
	 * --msa): a cached block after a missing one is still used, so any
	 * block may go, and a miss costs the recomputation of that block
	 * alone, which grows with its position: asym and belady break ties
	 * by the cheaper miss (the shallower block), and belady's default
	 * is without the prefix rule.  asym keeps its rule by default: a
	 * parent is used by every request that uses its child, so it is
	 * worth at least as much, which asym's per-class values cannot tell
	 * (policy.md, Multi-Segment Attention).
	 */
	bool msa;
};

/* What the owner knows about a block when it accesses it. */
struct pol_block_desc {
	uint64_t hash;
	uint64_t parent_hash;
	uint32_t position; /* index of the block in its sequence */
	uint32_t flags; /* enum pol_block_flags */
	uint64_t next_use; /* belady only; UINT64_MAX if never again */
	uint64_t bytes; /* 0: opts.block_bytes */
	/* who accesses it (kvmmd: a uid or gid): an admission charges the
	 * block to it (pol_cache_tenants()) */
	uint32_t tenant;
	uint32_t pad;
};

/*
 * Tenants: who brought the blocks each tier holds.  A block is charged
 * to the tenant of the access that admitted it and stays charged to it
 * in every tier until it leaves the cache.  The first POL_TENANT_ROWS - 1
 * tenants seen get a row each; later ones share the last row, whose id
 * reads POL_TENANT_OTHERS.  Rows stay once made (a tenant whose blocks
 * are all gone reads 0 blocks).
 *
 * A tenant may have a limit per tier (pol_cache_tenant_limit()).  Within
 * its limit a tenant's blocks are ranked by the policy with everyone's;
 * a block of it entering a tier where it is over its limit sends the
 * tenant's own least recently used evictable block there down a tier
 * (dropped from the last), as a memory cgroup over its limit reclaims
 * its own pages.  The search looks at the tenant's 64 least recently
 * used blocks there at most, moving those that cannot go (in use,
 * pinned, TTL, parents of cached children) to the recent end; when it
 * finds none, the entering block goes down itself (a bypass, as a policy
 * may choose), or, when it cannot go either, the tenant stays over its
 * limit until the next check.  A GPU hit checks too, but never moves the
 * block hit (its user is about to take it).
 */
#define POL_TENANT_ROWS 256
#define POL_TENANT_OTHERS UINT32_MAX
struct pol_tenant_count {
	uint32_t id; /* the tenant, or POL_TENANT_OTHERS */
	uint32_t limited; /* 1 while limit[] holds a limit */
	uint64_t blocks[POL_TIER_COUNT]; /* resident now, per tier */
	uint64_t admitted; /* blocks its accesses brought into the cache */
	/* of its blocks, dropped from the last tier (or by the owner:
	 * pol_cache_remove_dropped()) */
	uint64_t dropped;
	uint64_t limit[POL_TIER_COUNT]; /* most blocks per tier; 0: none */
	/* its blocks moved down a tier (or dropped from the last) because
	 * it was over its limit there */
	uint64_t limit_moves;
};

struct pol_cache_stats {
	uint64_t inserts; /* blocks admitted (new to every tier) */
	uint64_t hits[POL_TIER_COUNT]; /* accesses found in each tier */
	uint64_t demotions[POL_TIER_COUNT]; /* moves out of each tier, down */
	/* blocks dropped from the last tier, and those the owner dropped
	 * (pol_cache_remove_dropped()) */
	uint64_t drops;
	uint64_t promotions; /* moves up to the GPU tier */
	uint64_t no_victim; /* times a full tier had nothing evictable */
	/* victims that only a demotable TTL held (pol_cache_set_ttl_demotable) */
	uint64_t ttl_demotions;
	/*
	 * moves not made because the tier below could make no room for the
	 * block without dropping a prefix parent before its cached children,
	 * or a pinned, referenced or TTL-held block (policy.md, "The tiered
	 * cache"): a victim kept where it was, or a lower-tier block left
	 * below by an access
	 */
	uint64_t refused;
};

int pol_cache_create(const struct pol_cache_opts *opts, struct pol_cache **out);
void pol_cache_destroy(struct pol_cache *c);

/*
 * What the cache's policy learned from the workload (asym: its return
 * hazards per class and age), as bytes an owner keeps across its restart
 * (kvmmd --policy-state, kvmm-replay --restart-every): a header (magic,
 * version, policy, length, FNV-1a 64 checksum), then the policy's own
 * bytes.  The cache's blocks are not in it, only what ranks them.
 *
 * pol_cache_learned_save: the bytes needed, written to buf when len is
 * at least that; 0 when the policy learns nothing (lru, lfu, arc, belady).
 * pol_cache_learned_load: 0; -EOPNOTSUPP (the policy learns nothing),
 * -EINVAL (not such bytes, or damaged), -ESTALE (written by another
 * policy or layout).  Call it before the first access: the loaded state
 * replaces what was learned.  lives (may be NULL): how many block lives
 * the state was learned from.
 */
size_t pol_cache_learned_save(struct pol_cache *c, void *buf, size_t len);
int pol_cache_learned_load(struct pol_cache *c, const void *buf, size_t len,
			   uint64_t *lives);

/*
 * A state's file: read whole (0, or -errno; -EFBIG: larger than
 * POL_LEARNED_FILE_MAX; -EISDIR: a directory; -EINVAL: not a regular
 * file, e.g. a FIFO, which is never waited on), or written through
 * path.tmp, fsync, rename and an fsync of the directory (0 or -errno;
 * -ENAMETOOLONG for a path of PATH_MAX bytes or more; -EISDIR or -EINVAL
 * when path.tmp is no regular file; the directory's open's or fsync's
 * error, EINVAL aside, with the new file in place).  pol_learned_file_strerror() says
 * what their errors mean.
 */
#define POL_LEARNED_FILE_MAX (1u << 20) /* asym's state is 32 KiB */
int pol_learned_read_file(const char *path, void **buf, size_t *len);
/* The same read for any small file of at most max bytes (profiles too):
 * the buffer has a NUL after its len bytes. */
int pol_read_file(const char *path, size_t max, void **buf, size_t *len);
int pol_learned_write_file(const char *path, const void *buf, size_t len);
const char *pol_learned_file_strerror(int e);
/*
 * For a program that will save to path (kvmmd, kvmm-replay), before it
 * starts: 0 when path and path.tmp are regular files or missing (or
 * cannot be looked at: the read and the save report that);
 * otherwise -errno and why (a sentence naming the path): a directory
 * (-EISDIR), a FIFO, socket or device (-EINVAL), or a symbolic link
 * (-ELOOP: the save's rename would replace the link, not its target).
 */
int pol_learned_check_path(const char *path, char *why, size_t len);
/*
 * Hold path.lock (an flock) while using the state at path, so that two
 * programs do not overwrite each other's (and share path.tmp): the fd
 * to close when done, or -EBUSY (another holds it) or -errno.
 */
int pol_learned_lock_file(const char *path);

/* 0, or -EINVAL / -ESTALE as pol_cache_learned_load() would say. */
int pol_learned_describe(const void *buf, size_t len,
			 struct pol_learned_summary *out);

void pol_cache_set_move_handler(struct pol_cache *c, pol_move_fn fn, void *arg);
void pol_cache_set_clock(struct pol_cache *c, uint64_t now);
uint64_t pol_cache_clock(const struct pol_cache *c);
/* Number of pol_cache_access() calls so far: the policies' age unit. */
uint64_t pol_cache_ticks(const struct pol_cache *c);

/*
 * The owner will access a block with this hash soon (the next block of a
 * request, while it accesses this one): start loading its slot in the
 * index, so that the access does not wait for it.  Changes nothing.
 */
void pol_cache_prefetch(const struct pol_cache *c, uint64_t hash);

/* The resident block with this hash (any tier), or NULL. */
struct pol_block *pol_cache_lookup(struct pol_cache *c, uint64_t hash);

/*
 * Does a request with these block hashes bring few blocks the cache does
 * not know (1..POL_FEW_NEW_MAX not in its index, neither cached nor kept
 * as history)?  A short turn of a conversation (a follow-up message)
 * rather than a new document: asym learns the two kinds' return hazards
 * apart.  Ask before the request's first access, and pass
 * POL_BLOCK_FEW_NEW in the flags of its accesses when true.  Changes
 * nothing.
 */
#define POL_FEW_NEW_MAX 8
bool pol_cache_few_new(struct pol_cache *c, const uint64_t *hashes, uint32_t n);

/* The tier of a hash, or POL_TIER_NONE when in no tier. */
unsigned pol_cache_tier_of(struct pol_cache *c, uint64_t hash);

/*
 * Longest run of leading hashes resident in any tier (a prefix hit stops
 * at the first missing block).  Does not change any state.
 */
size_t pol_cache_prefix(struct pol_cache *c, const uint64_t *hashes, size_t n);

/*
 * Use a block: touch it where it is and promote it to the GPU tier, or
 * admit it to the GPU tier, evicting as needed.  *was_tier (may be NULL)
 * gets the tier it was found in, POL_TIER_NONE for a new block.
 * The policy may choose the block itself as the victim (a bypass: belady
 * does when it is needed last; any policy does when every other block is
 * pinned): it is then demoted or not cached, which pol_cache_tier_of()
 * tells.  Returns 0, -ENOSPC when no block at all could be evicted (the
 * block is not cached: a new one counts as admitted and dropped, in its
 * tenant's row and stats.drops, as the move to POL_TIER_NONE reported
 * says), or -ENOMEM.
 */
int pol_cache_access(struct pol_cache *c, const struct pol_block_desc *d,
		     unsigned *was_tier);
/*
 * Would one more block fit in `tier` now: is it below its capacity, or
 * would make_room find a victim (with a lower tier, one that only a
 * demotable TTL holds counts)?  Asks the policy without moving anything,
 * so an owner can promote a block whose lower copy it would otherwise
 * lose: pol_cache_access() of a block that finds no room drops it.
 */
bool pol_cache_can_admit(struct pol_cache *c, unsigned tier);
/*
 * The same for a block already cached in a lower tier (hash) moving up
 * into `tier`: also false when the victim would be its parent.  Under
 * the prefix rule the block's arrival makes its parent a non-leaf there,
 * so make_room would no longer find that victim and would drop the block
 * it just moved up (pol_cache_can_admit() answers before the move).
 * Conservative: another victim may exist behind the parent.
 */
bool pol_cache_can_promote(struct pol_cache *c, unsigned tier, uint64_t hash);
/*
 * Would pol_cache_access() of hash take the block: true for one on the
 * GPU or in no tier, and for one below that the GPU tier can make room
 * for, counting the block itself as a victim (moved up and straight back
 * down, as the access then does); false when the access would refuse it
 * (-ENOSPC) and leave it where it is, untouched.  The question the access
 * asks first, for an owner that must decide before the call (kvmmd frees
 * a restored block's lower copy before it tells the policy).
 */
bool pol_cache_can_access(struct pol_cache *c, uint64_t hash);

/*
 * Drop a block from whichever tier holds it; -ENOENT if none.  Whatever
 * held it (pins, references, its TTL and priority) goes with it, as for
 * every block that leaves the cache: an entry a policy keeps as history
 * (pol_cache_hold()) keeps none of them, so the hash admitted again
 * starts unheld.
 */
int pol_cache_remove(struct pol_cache *c, uint64_t hash);
/*
 * The same for a block its owner lost outside the policy's decisions (a
 * copy down that failed, a move down the owner refused, a lower copy
 * whose reads failed): counted as a drop, in stats.drops and its
 * tenant's dropped, as the policy's own drops are, so that a tenant's
 * admitted minus dropped stays the blocks it has cached.
 * pol_cache_remove() counts in neither (the block left without being
 * thrown out: the owner took it back).
 */
int pol_cache_remove_dropped(struct pol_cache *c, uint64_t hash);
/*
 * Undo a move down the owner could not make (kvmmd: a host -> NVMe write
 * that failed, while the host copy is still good): the block with this
 * hash, in a tier below `tier`, is in `tier` again.  The move back is
 * not reported (the owner makes it); the room it takes is made as for
 * any block entering the tier, and those moves are: the tier's victim
 * goes down or out (the block itself only when the policy picks it).
 * 0; -ENOENT (not cached); -EINVAL (not below tier, or no such tier);
 * -ENOSPC when nothing in the tier may go: the block is then dropped
 * (reported) if it may be, else the tier stays over its capacity.
 */
int pol_cache_return(struct pol_cache *c, uint64_t hash, unsigned tier);
/*
 * Admit a block new to the cache (d->hash in no tier) straight into
 * `tier`, where its owner holds its bytes already (kvmmd: a block a
 * restart found on NVMe, which a client pins before any request used
 * it).  Not a use: no hit, tick or use counted, so the policy ranks it
 * as a block that came down there (lru: the most recent); an admission
 * all the same, charged to d->tenant (stats.inserts, the tenant's
 * admitted).  The admission is not reported (the owner has the bytes
 * there); the room it takes is made as for any block entering the tier,
 * and those moves are, but never by moving the block itself: when
 * nothing else may go, the tier (or the tenant over its limit there)
 * stays over until a block leaves.  d->parent_hash with
 * POL_BLOCK_HAS_PARENT counts it in its parent as an access would.
 * 0; -EEXIST (cached already); -EINVAL (no such tier, or one at
 * capacity 0, which blocks pass by); -ENOMEM.
 */
int pol_cache_admit_at(struct pol_cache *c, const struct pol_block_desc *d,
		       unsigned tier);

/* Pins for in-flight steps and references from sequences; -ENOENT. */
int pol_cache_pin(struct pol_cache *c, uint64_t hash);
int pol_cache_unpin(struct pol_cache *c, uint64_t hash);
int pol_cache_ref(struct pol_cache *c, uint64_t hash);
int pol_cache_unref(struct pol_cache *c, uint64_t hash);
/* TTL pin until clock value `until` (0 clears) and client priority. */
int pol_cache_set_ttl(struct pol_cache *c, uint64_t hash, uint64_t until);
/*
 * How the TTL holds the block: by default (false) in its tier, like a pin;
 * demotable, it holds the block cached but lets it move down a tier when
 * its tier has no other block that may go (it is never dropped from the
 * last tier before the TTL passes, unless every lower tier is pinned
 * full).  Cleared when the block leaves the cache.
 */
int pol_cache_set_ttl_demotable(struct pol_cache *c, uint64_t hash,
				bool demotable);
int pol_cache_set_priority(struct pol_cache *c, uint64_t hash, int priority);
/* Record where the owner keeps the bytes of a resident block. */
int pol_cache_set_cookie(struct pol_cache *c, uint64_t hash, uint64_t cookie);

/* Update the offline next use of a resident block (belady). */
void pol_cache_set_next_use(struct pol_cache *c, struct pol_block *b,
			    uint64_t next_use);

uint64_t pol_cache_count(const struct pol_cache *c, unsigned tier);
uint64_t pol_cache_capacity(const struct pol_cache *c, unsigned tier);
/* Whether the cache has tier (it had a capacity when created, or was
 * named in opts.joins_later). */
bool pol_cache_has_tier(const struct pol_cache *c, unsigned tier);
/*
 * Change a tier's capacity (blocks; the tier must exist, i.e. have had a
 * capacity at create time or be in opts.joins_later; 0 is allowed and
 * can be raised again): a smaller one moves victims down at once, as an
 * access would.  -ENOSPC when not enough blocks are evictable (the tier
 * stays over its capacity).  The last tier (the one blocks are dropped
 * from) is the lowest with a capacity after the change.
 */
int pol_cache_set_capacity(struct pol_cache *c, unsigned tier, uint64_t cap);
/*
 * Move every block of the tiers above tier to down into it, as a stop
 * that keeps what it can does (kvmmd's --nvme-save-on-stop): each tier
 * above to, from the GPU down, gets capacity 0 after the next one above
 * to was raised to take all of its blocks.  At its capacity that tier
 * could refuse a block (pol_cache_fits(): with the prefix rule, when
 * none of its own blocks could make room for it then), and once its
 * capacity is 0 the tier above is not asked again: such a block stayed
 * where it was.  Tier to keeps its capacity (and drops its lowest for
 * room, as it would).  -EINVAL when to is not a tier of c, -ENOSPC when
 * blocks stay above it (pinned, referenced, held by a TTL).
 */
int pol_cache_drain(struct pol_cache *c, unsigned to);
void pol_cache_get_stats(const struct pol_cache *c, struct pol_cache_stats *s);
/* Copy up to max tenant rows, in the order the tenants were first seen;
 * returns how many rows there are (which may be more than max). */
size_t pol_cache_tenants(const struct pol_cache *c,
			 struct pol_tenant_count *out, size_t max);
/* The row of tenant id (its index in pol_cache_tenants(), the
 * pol_block.tenant of its blocks), or -ENOENT when it has none of its own
 * (never seen, or folded into the others' row). */
int pol_cache_tenant_row(const struct pol_cache *c, uint32_t id);
/* The id of row (a pol_block.tenant): a tenant's, or POL_TENANT_OTHERS
 * for the others' row and a row not made. */
uint32_t pol_cache_tenant_id(const struct pol_cache *c, uint16_t row);
/*
 * Limit tenant id's blocks per tier (limit[t] blocks in tier t; 0: no
 * limit there, all 0: none at all), and bring it within the new limits
 * at once (moves reported as an access's are; a set looks at all the
 * tenant's blocks, unlike an access's search).  The tenant gets a row if
 * it has none, unless every limit is 0.  -EINVAL: id is
 * POL_TENANT_OTHERS, or a limit names a tier the cache does not have;
 * -ENOSPC: every row is taken (id would share the others' row); -ENOMEM
 * (the row may have been made); nothing else changes then.
 */
int pol_cache_tenant_limit(struct pol_cache *c, uint32_t id,
			   const uint64_t limit[POL_TIER_COUNT]);
/*
 * A limit as operators write it (kvmmd --tenant-limit, kvmmctl
 * tenant-limit, kvmm-replay --tenant-limit): "gpu:N,host:N,nvme:N" (any
 * of them, in any order, each at most once; N blocks, at least 1) or
 * "none".  limit[] gets N per tier named, 0 for the others.  0 or
 * -EINVAL.
 */
int pol_tenant_limit_parse(const char *spec, uint64_t limit[POL_TIER_COUNT]);
enum pol_kind pol_cache_kind(const struct pol_cache *c);
bool pol_cache_prefix_rule(const struct pol_cache *c);
/* Created with pol_cache_opts.msa. */
bool pol_cache_msa(const struct pol_cache *c);

/* --- for policy implementations --- */

struct pol_index *pol_cache_index(struct pol_cache *c);
/* Private state of the GPU tier's policy (tiers are created GPU first). */
void *pol_cache_gpu_policy(struct pol_cache *c);
const struct pol_cost_model *pol_cache_cost(const struct pol_cache *c);
/* Can b be evicted from its tier now (pins, refs, TTL, prefix rule)? */
bool pol_cache_evictable(const struct pol_cache *c, const struct pol_block *b);
/* b's parent entry (resident or history), or NULL. */
struct pol_block *pol_cache_parent(struct pol_cache *c, struct pol_block *b);
/* Only the structural part: no resident child in its tier or above. */
bool pol_cache_is_leaf(const struct pol_cache *c, const struct pol_block *b);
/* The next tier below `tier` with a capacity, or POL_TIER_NONE. */
unsigned pol_cache_lower_tier(const struct pol_cache *c, unsigned tier);
/*
 * Keep / release b as history after it leaves every tier (ARC ghosts,
 * asym reuse counts); the entry is freed when no policy holds it and it
 * is in no tier.  History is what ranks a return (hash, ticks, use
 * counts, turn, parent): the cache clears the block's pins, references,
 * TTL and priority when it leaves, so none comes back with it.
 */
void pol_cache_hold(struct pol_cache *c, struct pol_block *b);
void pol_cache_release(struct pol_cache *c, struct pol_block *b);

#endif
