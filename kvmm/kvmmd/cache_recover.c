// SPDX-License-Identifier: MIT
/*
 * The NVMe tier's blocks from the last run, into the cache's index: when
 * the tiers open (kc_open()) and when an NVMe tier joins the running
 * cache (kc_nvme_join(), cache_nvme_join.c).  Each block the cache can
 * serve becomes a cold entry, in no policy, oldest written first on
 * c->cold; the slots of the others (another layout, a hash met twice)
 * are freed.  Its own file because both set-ups share it and it touches
 * only the index and the NVMe tier's slot walk.
 */
#include "kvmm/kvmmd/cache_priv.h"

#include <errno.h>
#include <stdlib.h>

#include "kvmm/kvmmd/tier_nvme.h"

/* What tier_nvme_foreach() found that the cache cannot use: freed after
 * the walk (which holds the tier's lock). */
struct kc_recover {
	struct kd_cache *c;
	uint32_t *unused;
	uint64_t nunused;
};

static int kc_recovered(void *arg, uint32_t slot, uint64_t hash,
			uint64_t length, uint64_t layout_id)
{
	struct kc_recover *rc = arg;
	struct kd_cache *c = rc->c;
	struct kc_entry *e;

	/*
	 * Another layout (pages of another size making the same bytes) or a
	 * hash met twice: not the cache's block.  Its slot must go, or it
	 * would stay taken for the run, outside the policy, and a block of
	 * that hash written later would find it and not be written.
	 */
	if (length != c->block_bytes || layout_id != c->ppb ||
	    kc_find(c, hash)) {
		rc->unused[rc->nunused++] = slot;
		return 0;
	}
	e = kc_add(c, hash);
	if (!e)
		return -ENOMEM;
	kc_set_tier(c, e, POL_TIER_NVME);
	e->nvme_slot = slot;
	kd_fifo_push_tail(&c->cold, &e->cold); /* kc_order_cold() sorts */
	c->st.recovered_blocks++;
	return 0;
}

/* The NVMe tier's blocks from the last run that the cache can serve
 * become cold entries (kc_recovered()); the others' slots are freed. */
int kc_recover(struct kd_cache *c, const struct tier_nvme_stats *ns)
{
	struct kc_recover rc = { .c = c };
	uint64_t freed = 0;
	int r;

	if (!ns->ready_slots)
		return 0;
	rc.unused = calloc(ns->ready_slots, sizeof(*rc.unused));
	if (!rc.unused)
		return -ENOMEM;
	r = tier_nvme_foreach(c->nvme, kc_recovered, &rc);
	for (uint64_t i = 0; i < rc.nunused; i++)
		freed += tier_nvme_free(c->nvme, rc.unused[i]) == 0;
	if (rc.nunused)
		vmm_log(VMM_LOG_WARN,
			"cache: %llu NVMe blocks from the last run are of another layout (blocks of %zu bytes in pages of another size): %llu slots freed",
			(unsigned long long)rc.nunused, c->block_bytes,
			(unsigned long long)freed);
	free(rc.unused);
	return r;
}

struct kc_cold_ref {
	uint64_t generation;
	struct kc_entry *e;
};

static int kc_cold_cmp(const void *a, const void *b)
{
	const struct kc_cold_ref *x = a, *y = b;

	return x->generation < y->generation ? -1 :
	       x->generation > y->generation ? 1 :
					       0;
}

/*
 * The recovered blocks on c->cold (kc_recovered() put them there in slot
 * order), sorted oldest written first: when the NVMe tier needs a slot,
 * the oldest goes (kc_nvme_room()).  A stop saves the
 * blocks in the policy's eviction order, the ones it values most last,
 * so they are the last to go; and for blocks demoted in normal running
 * the write order is about the order of last use.  (It used to be the
 * first cold block of the hash index: no order at all, and a scan of the
 * index for each slot.)
 */
int kc_order_cold(struct kd_cache *c)
{
	struct kc_cold_ref *v;
	struct kd_fifo_node *n;
	uint64_t k = 0;

	if (!c->st.recovered_blocks)
		return 0;
	v = calloc(c->st.recovered_blocks, sizeof(*v));
	if (!v)
		return -ENOMEM;
	while ((n = kd_fifo_first(&c->cold))) {
		struct kc_entry *e = kd_fifo_entry(n, struct kc_entry, cold);

		kd_fifo_unlink(&c->cold, n);
		v[k++] = (struct kc_cold_ref){
			.generation = tier_nvme_slot_generation(c->nvme,
								e->nvme_slot),
			.e = e
		};
	}
	qsort(v, k, sizeof(*v), kc_cold_cmp);
	for (uint64_t i = 0; i < k; i++)
		kd_fifo_push_tail(&c->cold, &v[i].e->cold);
	free(v);
	return 0;
}
