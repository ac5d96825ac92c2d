// SPDX-License-Identifier: MIT
/*
 * NVMe tier slot metadata: which slot holds which hash (a chained hash
 * index), which slots are free (a stack), each slot's state, and the
 * counters.  Nothing here touches the disk; the batch calls
 * (tier_nvme_batch.c) and the recovery scan (tier_nvme_recover.c) move slots
 * between states, the public lookups below read them.  Everything runs
 * under t->lock (tier_nvme_get_stats() reads the engine's two counters
 * without it: nvme_count()).
 */
#include "tier_nvme_priv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#if HAVE_LIBURING

int nvme_slots_init(struct tier_nvme *t, uint32_t nslots)
{
	uint32_t nb = 1;

	/* about two buckets per slot; the cap keeps nb from wrapping */
	while (nb < 2 * (uint64_t)nslots && nb < (1u << 31))
		nb <<= 1;
	t->slots = calloc(nslots, sizeof(*t->slots));
	t->free_stack = calloc(nslots, sizeof(*t->free_stack));
	t->buckets = malloc(nb * sizeof(*t->buckets));
	if (!t->slots || !t->free_stack || !t->buckets) {
		nvme_slots_fini(t);
		return -ENOMEM;
	}
	t->nslots = nslots;
	t->bucket_mask = nb - 1;
	memset(t->buckets, 0xff, nb * sizeof(*t->buckets));
	/* lowest slot on top: a fresh tier fills the file front to back */
	for (uint32_t i = 0; i < nslots; i++) {
		t->slots[i].next = NVME_NONE;
		t->free_stack[i] = nslots - 1 - i;
	}
	t->nfree = nslots;
	t->next_generation = 1;
	return 0;
}

void nvme_slots_fini(struct tier_nvme *t)
{
	free(t->buckets);
	free(t->free_stack);
	free(t->slots);
	t->buckets = NULL;
	t->free_stack = NULL;
	t->slots = NULL;
}

/* ---- index ---- */

static uint32_t bucket_of(struct tier_nvme *t, uint64_t hash)
{
	hash ^= hash >> 33;
	hash *= 0xff51afd7ed558ccdull;
	hash ^= hash >> 33;
	return (uint32_t)hash & t->bucket_mask;
}

uint32_t nvme_idx_find(struct tier_nvme *t, uint64_t hash)
{
	for (uint32_t s = t->buckets[bucket_of(t, hash)]; s != NVME_NONE;
	     s = t->slots[s].next)
		if (t->slots[s].hash == hash)
			return s;
	return NVME_NONE;
}

void nvme_idx_insert(struct tier_nvme *t, uint32_t slot)
{
	uint32_t b = bucket_of(t, t->slots[slot].hash);

	t->slots[slot].next = t->buckets[b];
	t->buckets[b] = slot;
}

static void idx_remove(struct tier_nvme *t, uint32_t slot)
{
	uint32_t *p = &t->buckets[bucket_of(t, t->slots[slot].hash)];

	while (*p != NVME_NONE) {
		if (*p == slot) {
			*p = t->slots[slot].next;
			return;
		}
		p = &t->slots[*p].next;
	}
}

/* ---- free stack and states ---- */

/* Take a specific slot off the free stack (recovery). */
/*
 * The free stack again from the slots' states, lowest slot on top as at
 * the start: the restart scan marks the slots it keeps READY without
 * taking them off the stack one by one (a search of the stack for each,
 * which made opening a full tier quadratic in its slots).
 */
void nvme_free_stack_rebuild(struct tier_nvme *t)
{
	t->nfree = 0;
	for (uint32_t i = t->nslots; i-- > 0;)
		if (t->slots[i].state == TIER_SLOT_FREE)
			t->free_stack[t->nfree++] = i;
}

/* A free slot not set aside (a reserved write gives its reservation up
 * first: then one is). */
int nvme_slot_alloc(struct tier_nvme *t, uint32_t *slot)
{
	if (t->nfree <= t->reserved) {
		t->st.alloc_failures++;
		return -ENOSPC;
	}
	*slot = t->free_stack[--t->nfree];
	t->st.used_slots++;
	if (t->st.used_slots > t->st.peak_used_slots)
		t->st.peak_used_slots = t->st.used_slots;
	return 0;
}

/*
 * Any state -> FREE, out of the index; onto the free stack unless the
 * restart scan runs (it rebuilds the stack when it is over: every slot
 * is on it meanwhile, and one more would overflow it).  stale: its
 * header on disk may still name its block (struct nvme_slot.stale),
 * which the slot then remembers, as tenant's (a claimed stale copy
 * keeps the tenant it had).
 */
static void slot_free(struct tier_nvme *t, uint32_t slot, bool push, bool stale,
		      uint32_t tenant)
{
	struct nvme_slot *s = &t->slots[slot];
	bool was_stale = s->stale, was_marked = s->marked;
	uint64_t hash = s->hash;

	if (s->state == TIER_SLOT_FREE)
		return;
	idx_remove(t, slot);
	if (s->state == TIER_SLOT_READY)
		t->st.ready_slots--;
	if (was_stale)
		tenant = s->stale_tenant;
	/* every field, dropping too: a reused slot starts clean */
	*s = (struct nvme_slot){ .state = TIER_SLOT_FREE, .next = NVME_NONE };
	if (stale) {
		s->stale = true;
		s->marked = was_marked; /* its clearing failed: still so */
		s->hash = hash;
		s->stale_tenant = tenant;
	}
	if (push)
		t->free_stack[t->nfree++] = slot;
	t->st.used_slots--;
	/* a claimed stale copy was counted when it was first freed */
	if (!was_stale)
		t->st.frees++;
}

void nvme_slot_release(struct tier_nvme *t, uint32_t slot)
{
	slot_free(t, slot, true, false, TIER_NVME_NOBODY);
}

void nvme_slot_release_stale(struct tier_nvme *t, uint32_t slot,
			     uint32_t tenant)
{
	slot_free(t, slot, true, true, tenant);
}

void nvme_slot_release_recovered(struct tier_nvme *t, uint32_t slot)
{
	slot_free(t, slot, false, true, t->slots[slot].tenant);
}

void nvme_slot_mark_stale(struct tier_nvme *t, uint32_t slot, uint64_t hash,
			  bool marked, uint32_t tenant)
{
	struct nvme_slot *s = &t->slots[slot];

	s->stale = true;
	s->marked = marked;
	s->hash = hash;
	s->stale_tenant = tenant;
}

/* ---- public lookups ---- */

int tier_nvme_reserve(struct tier_nvme *t)
{
	int r = -ENOSPC;

	pthread_mutex_lock(&t->lock);
	if (t->nfree > t->reserved) {
		t->reserved++;
		r = 0;
	}
	pthread_mutex_unlock(&t->lock);
	return r;
}

uint64_t tier_nvme_next_generation(struct tier_nvme *t)
{
	uint64_t g;

	pthread_mutex_lock(&t->lock);
	g = t->next_generation++;
	pthread_mutex_unlock(&t->lock);
	return g;
}

void tier_nvme_unreserve(struct tier_nvme *t)
{
	pthread_mutex_lock(&t->lock);
	if (t->reserved)
		t->reserved--;
	pthread_mutex_unlock(&t->lock);
}

int tier_nvme_lookup(struct tier_nvme *t, uint64_t hash, uint32_t *slot,
		     uint64_t *length, uint64_t *layout_id)
{
	uint32_t s;
	int r = -ENOENT;

	pthread_mutex_lock(&t->lock);
	s = nvme_idx_find(t, hash);
	if (s != NVME_NONE && t->slots[s].state == TIER_SLOT_READY &&
	    !t->slots[s].bad) {
		if (slot)
			*slot = s;
		if (length)
			*length = t->slots[s].length;
		if (layout_id)
			*layout_id = t->slots[s].layout_id;
		r = 0;
	}
	pthread_mutex_unlock(&t->lock);
	return r;
}

int tier_nvme_free(struct tier_nvme *t, uint32_t slot)
{
	return tier_nvme_free_tenant(t, slot, TIER_NVME_NOBODY);
}

int tier_nvme_free_tenant(struct tier_nvme *t, uint32_t slot, uint32_t tenant)
{
	int r = 0;

	if (slot >= t->nslots)
		return -EINVAL;
	pthread_mutex_lock(&t->lock);
	if (t->slots[slot].state != TIER_SLOT_READY) {
		r = -ENOENT;
	} else if (t->slots[slot].readers) {
		r = -EBUSY;
	} else if (t->slots[slot].restamping) {
		/* its header is being written: free once that ended
		 * (nvme_restamp_settle()), out of use meanwhile (FILLING: a
		 * write of its hash waits rather than deduplicate onto it) */
		t->slots[slot].state = TIER_SLOT_FILLING;
		t->slots[slot].restamp_free = true;
		t->slots[slot].restamp_tenant = tenant;
		t->st.ready_slots--;
	} else { /* memory only: its header still names the block */
		nvme_slot_release_stale(t, slot, tenant);
	}
	pthread_mutex_unlock(&t->lock);
	return r;
}

int tier_nvme_invalidate_claim(struct tier_nvme *t, uint32_t slot,
			       uint64_t hash)
{
	struct nvme_slot *s;
	int r = 0;

	if (slot >= t->nslots)
		return -EINVAL;
	pthread_mutex_lock(&t->lock);
	s = &t->slots[slot];
	if (s->state != TIER_SLOT_READY || s->hash != hash) {
		r = -ENOENT;
	} else if (s->readers) {
		r = -EBUSY;
	} else {
		/* stays in the index: a write of hash finds it FILLING and
		 * waits (wait_hashes_settled()) until it is freed */
		s->state = TIER_SLOT_FILLING;
		s->dropping = true;
		t->st.ready_slots--;
	}
	pthread_mutex_unlock(&t->lock);
	return r;
}

int tier_nvme_invalidate_unclaim(struct tier_nvme *t, uint32_t slot)
{
	int r = -ENOENT;

	if (slot >= t->nslots)
		return -EINVAL;
	pthread_mutex_lock(&t->lock);
	if (t->slots[slot].state == TIER_SLOT_FILLING &&
	    t->slots[slot].dropping && t->slots[slot].restamping) {
		/* freed when its restamp's write ended */
		t->slots[slot].dropping = false;
		t->slots[slot].restamp_free = true;
		t->slots[slot].restamp_tenant = TIER_NVME_NOBODY;
		r = 0;
	} else if (t->slots[slot].state == TIER_SLOT_FILLING &&
		   t->slots[slot].dropping) {
		/* FILLING: ready_slots was counted down by the claim; a
		 * write of its hash may be waiting for it.  Nothing was
		 * written: its header still names the block */
		nvme_slot_release_stale(t, slot, TIER_NVME_NOBODY);
		if (t->slot_waiters)
			pthread_cond_broadcast(&t->slot_cond);
		r = 0;
	}
	pthread_mutex_unlock(&t->lock);
	return r;
}

/* Which stale copies a claim takes (under the tier's lock). */
struct stale_pick {
	bool (*match)(void *arg, uint64_t hash, uint32_t tenant);
	void *arg;
	bool marked; /* those a drop mark covers, not match()'s */
};

static bool stale_picked(const struct stale_pick *p, const struct nvme_slot *s)
{
	if (s->state != TIER_SLOT_FREE || !s->stale)
		return false;
	if (p->marked)
		return s->marked;
	return p->match(p->arg, s->hash, s->stale_tenant);
}

static int stale_claim(struct tier_nvme *t, const struct stale_pick *p,
		       struct tier_nvme_stale **out, uint32_t *n,
		       uint32_t *left)
{
	struct tier_nvme_stale *v = NULL;
	uint32_t want = 0, got = 0, k = 0;
	int r = 0;

	*out = NULL;
	*n = 0;
	*left = 0;
	pthread_mutex_lock(&t->lock);
	for (uint32_t i = 0; i < t->nslots; i++)
		want += stale_picked(p, &t->slots[i]);
	if (!want)
		goto out;
	v = malloc(want * sizeof(*v));
	if (!v) {
		r = -ENOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < t->nslots && got + *left < want; i++) {
		struct nvme_slot *s = &t->slots[i];

		if (!stale_picked(p, s))
			continue;
		/* the free slots set aside for reserved writes stay free:
		 * such a write would fail for want of one (-ENOSPC) */
		if (t->nfree - got <= t->reserved) {
			(*left)++;
			continue;
		}
		/* out of the index already (FREE): a write of its hash does
		 * not wait for it, it takes another slot with a newer
		 * generation, which the zeroed header cannot beat */
		s->state = TIER_SLOT_FILLING;
		s->dropping = true;
		v[got++] = (struct tier_nvme_stale){
			.hash = s->hash, .slot = i, .tenant = s->stale_tenant
		};
	}
	/* the claimed slots off the free stack, in one pass: the others
	 * keep their order */
	for (uint32_t i = 0; i < t->nfree; i++)
		if (t->slots[t->free_stack[i]].state == TIER_SLOT_FREE)
			t->free_stack[k++] = t->free_stack[i];
	t->nfree = k;
	t->st.used_slots += got;
out:
	pthread_mutex_unlock(&t->lock);
	if (!got) {
		free(v);
		v = NULL;
	}
	*out = v;
	*n = got;
	return r;
}

int tier_nvme_stale_claim(struct tier_nvme *t,
			  bool (*match)(void *arg, uint64_t hash,
					uint32_t tenant),
			  void *arg, struct tier_nvme_stale **out, uint32_t *n,
			  uint32_t *left)
{
	const struct stale_pick p = { .match = match, .arg = arg };

	return stale_claim(t, &p, out, n, left);
}

int tier_nvme_marked_claim(struct tier_nvme *t, struct tier_nvme_stale **out,
			   uint32_t *n, uint32_t *left)
{
	const struct stale_pick p = { .marked = true };

	return stale_claim(t, &p, out, n, left);
}

enum tier_slot_state tier_nvme_slot_state(struct tier_nvme *t, uint32_t slot)
{
	enum tier_slot_state s;

	if (slot >= t->nslots)
		return TIER_SLOT_FREE;
	pthread_mutex_lock(&t->lock);
	s = t->slots[slot].state;
	pthread_mutex_unlock(&t->lock);
	return s;
}

uint64_t tier_nvme_slot_generation(struct tier_nvme *t, uint32_t slot)
{
	uint64_t g;

	if (slot >= t->nslots)
		return 0;
	pthread_mutex_lock(&t->lock);
	g = t->slots[slot].state == TIER_SLOT_READY ?
		    t->slots[slot].generation :
		    0;
	pthread_mutex_unlock(&t->lock);
	return g;
}

int tier_nvme_foreach(struct tier_nvme *t,
		      int (*fn)(void *arg, uint32_t slot, uint64_t hash,
				uint64_t length, uint64_t layout_id,
				uint32_t tenant),
		      void *arg)
{
	int r = 0;

	pthread_mutex_lock(&t->lock);
	for (uint32_t i = 0; i < t->nslots && !r; i++) {
		struct nvme_slot s = t->slots[i];

		if (s.state != TIER_SLOT_READY || s.bad)
			continue;
		r = fn(arg, i, s.hash, s.length, s.layout_id, s.tenant);
	}
	pthread_mutex_unlock(&t->lock);
	return r;
}

uint64_t tier_nvme_slot_offset(struct tier_nvme *t, uint32_t slot)
{
	return nvme_slot_offset(t, slot);
}

void tier_nvme_get_stats(struct tier_nvme *t, struct tier_nvme_stats *st)
{
	pthread_mutex_lock(&t->lock);
	*st = t->st;
	st->reserved_slots = t->reserved;
	pthread_mutex_unlock(&t->lock);
	/* the engine's own, without io_lock (nvme_count()) */
	st->sqes = __atomic_load_n(&t->io_sqes, __ATOMIC_RELAXED);
	st->submits = __atomic_load_n(&t->io_submits, __ATOMIC_RELAXED);
	st->ring_wait_ns = __atomic_load_n(&t->io_wait_ns, __ATOMIC_RELAXED);
	st->ring_wait_full_ns =
		__atomic_load_n(&t->io_wait_full_ns, __ATOMIC_RELAXED);
}

#endif /* HAVE_LIBURING */
