/* SPDX-License-Identifier: MIT */
/*
 * Block index: block hash -> block entry, the metadata of every block the
 * cache knows (resident in a tier, or remembered as history by a policy).
 *
 * Entries live in one array and are named by a 32-bit id that stays valid
 * until the entry is freed; the hash table maps a 64-bit hash to that id
 * with open addressing (linear probing, backward-shift deletion, load
 * factor <= 1/2), so lookup, insert and delete are O(1) and the index
 * grows by doubling to any number of entries (tested at 1M and more).
 * Every 64-bit value is a valid hash, including 0.
 *
 * The index is not thread-safe: its owner (pol_cache, hence the daemon's
 * event loop or the replay) serialises access.
 */
#ifndef KVMM_POLICY_BLOCK_INDEX_H
#define KVMM_POLICY_BLOCK_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define POL_NONE UINT32_MAX

enum pol_tier {
	POL_TIER_GPU = 0,
	POL_TIER_HOST = 1,
	POL_TIER_NVME = 2,
	POL_TIER_COUNT = 3,
	POL_TIER_NONE = 0xff, /* in no tier: history only */
};

const char *pol_tier_string(unsigned tier);

/* Per-tier policy bookkeeping, owned by the policy of that tier. */
struct pol_slot {
	uint32_t prev, next; /* list links (POL_NONE ends) */
	uint8_t list; /* which of the policy's lists holds it (0 = none) */
	uint8_t flags; /* the policy's own (asym: in a list's end windows) */
	uint8_t aux; /* the policy's own (asym: class of the open life) */
	uint8_t pad[5];
	double key; /* policy priority (GDSF value, frequency, next use) */
};

enum pol_block_flags {
	POL_BLOCK_HAS_PARENT = 1 << 0, /* parent_hash is meaningful */
	POL_BLOCK_PARTIAL = 1 << 1, /* a partial tail block (never reused) */
	/* admitted below a parent that had been used twice or more */
	POL_BLOCK_WARM_LINEAGE = 1 << 2,
	/* its TTL may move it down a tier (pol_cache_set_ttl_demotable) */
	POL_BLOCK_TTL_DEMOTE = 1 << 3,
	/*
	 * pol_block_desc only: the request using the block brought few
	 * blocks the cache did not know (pol_cache_few_new()); kept per
	 * block in few_new, from its latest access
	 */
	POL_BLOCK_FEW_NEW = 1 << 4,
	/*
	 * the cache's own, for the length of one call: set aside (not
	 * evictable) while it looks for another victim (set_aside(),
	 * pol_cache_priv.h)
	 */
	POL_BLOCK_ASIDE = 1 << 5,
};

/*
 * One entry per block the cache knows.  At 1M blocks nearly every entry a
 * decision touches is a cache miss, so the layout is by use: entries are
 * 64-byte aligned and everything a decision on the GPU tier reads or
 * writes (index, evictability, prefix rule, policy keys, slot[0]) sits
 * in the first two cache lines; the slots of the lower tiers, bytes and
 * the owner's cookie follow.
 */
struct pol_block {
	/* line 0 */
	uint64_t hash;
	uint64_t parent_hash; /* valid with POL_BLOCK_HAS_PARENT */
	uint64_t last_access; /* cache clock at the last access */
	uint64_t tick; /* cache access counter at the last access */
	uint64_t next_use; /* offline knowledge (belady); UINT64_MAX never */
	uint64_t ttl_expiry; /* pinned until this clock value (0: none) */
	uint32_t position; /* block index in its sequence */
	uint32_t refcount; /* sequences using it now (not evictable) */
	uint32_t pins; /* in-flight steps (not evictable) */
	uint32_t access_count; /* accesses since it was first seen */
	/* line 1 */
	uint32_t nchild[POL_TIER_COUNT]; /* resident children per tier */
	uint8_t tier; /* enum pol_tier or POL_TIER_NONE */
	uint8_t counted; /* tier in which it is counted in its parent */
	uint8_t flags; /* enum pol_block_flags */
	int8_t priority; /* client priority, higher = keep longer */
	uint8_t holds; /* policies keeping it as history (ghost) */
	uint8_t live; /* 1 while the entry is in the index */
	uint8_t turn; /* conversation turn that created it (asym) */
	uint8_t few_new; /* its latest request was short (POL_BLOCK_FEW_NEW) */
	uint32_t parent_id; /* entry id of the parent when admitted (hint) */
	uint16_t tenant; /* row of the tenant it is charged to (pol_tenant.h) */
	uint16_t pad3;
	uint32_t pad2;
	/* slot[POL_TIER_GPU] completes line 1 */
	struct pol_slot slot[POL_TIER_COUNT];
	uint64_t bytes;
	uint64_t cookie; /* owner's location of the bytes (page, slot) */
	/* its tenant's list in its tier, least recently used first (only
	 * while the tenant has a limit: pol_tenant.h) */
	uint32_t tenant_prev, tenant_next;
} __attribute__((aligned(64)));

_Static_assert(sizeof(struct pol_block) == 192, "pol_block: three lines");
_Static_assert(offsetof(struct pol_block, slot[1]) == 120,
	       "pol_block: hot fields in the first two lines");

struct pol_index {
	struct pol_block *blocks; /* entry array, by id */
	uint32_t nblocks; /* entries in use */
	uint32_t cap_blocks; /* allocated entries */
	uint32_t free_head; /* free entry list (linked through slot[0].next) */
	uint32_t high_water; /* entries ever handed out */
	struct pol_index_slot *table;
	uint64_t mask; /* table size - 1 */
};

struct pol_index_slot {
	uint64_t hash;
	uint32_t id; /* POL_NONE: empty */
	uint32_t pad;
};

/* expected: sizing hint (0 for a small default). */
int pol_index_init(struct pol_index *ix, uint32_t expected);
void pol_index_fini(struct pol_index *ix);

/* Entry id for a hash, or POL_NONE. */
uint32_t pol_index_find(const struct pol_index *ix, uint64_t hash);

/*
 * The entry for a hash, created zeroed (tier POL_TIER_NONE, no links) when
 * missing.  *created tells which.  Returns the id or POL_NONE (-ENOMEM).
 * Creating may move the entry array: pointers to entries are invalidated,
 * ids are not.
 */
uint32_t pol_index_get(struct pol_index *ix, uint64_t hash, bool *created);

/* Start loading the table slot of a hash. */
void pol_index_prefetch(const struct pol_index *ix, uint64_t hash);

/* Forget an entry; its id may be reused. */
void pol_index_del(struct pol_index *ix, uint32_t id);

static inline struct pol_block *pol_index_at(const struct pol_index *ix,
					     uint32_t id)
{
	return &ix->blocks[id];
}

/* Start loading the hot lines of an entry (for write when `write`). */
static inline void pol_index_prefetch_entry(const struct pol_index *ix,
					    uint32_t id, int write)
{
	const char *p = (const char *)&ix->blocks[id];

	if (write) {
		__builtin_prefetch(p, 1);
		__builtin_prefetch(p + 64, 1);
	} else {
		__builtin_prefetch(p);
		__builtin_prefetch(p + 64);
	}
}

static inline uint32_t pol_index_id(const struct pol_index *ix,
				    const struct pol_block *b)
{
	return (uint32_t)(b - ix->blocks);
}

#endif
