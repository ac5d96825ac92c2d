// SPDX-License-Identifier: MIT
/*
 * The NVMe tier's blocks from the last run, into the cache's index: when
 * the tiers open (kc_open()) and when an NVMe tier joins the running
 * cache (kc_nvme_join(), cache_nvme_join.c).  Each block the cache can
 * serve becomes a cold entry, in no policy, oldest written first on
 * c->cold; the slots of the others (another layout, a hash met twice)
 * are freed.  Its own file because both set-ups share it and it touches
 * only the index and the NVMe tier's slot walk.
 *
 * A cold block is the tenant's its header names (a header from before the
 * tenants: nobody's), as if that tenant had cached it: counted in its
 * row (kd_tenant_counts.cold_of[], added to the policy's counts in
 * ADMIN_TENANTS), dropped by a `--uid` drop of it (cache_drop.c),
 * counted against its NVMe limit (kc_cold_limit()), and charged to it
 * when an open brings it up (cache_restore.c), whoever opens it.  The
 * policy does not see cold blocks, so these counts live here until it
 * does.
 */
#include "kvmm/kvmmd/cache_priv.h"

#include <errno.h>
#include <stdlib.h>

#include "ebpf/telemetry_shm.h"
#include "kvmm/kvmmd/kvmmd.h"
#include "kvmm/kvmmd/tenant.h"
#include "kvmm/kvmmd/tier_nvme.h"

/* What tier_nvme_foreach() found that the cache cannot use: freed after
 * the walk (which holds the tier's lock). */
struct kc_recover {
	struct kd_cache *c;
	uint32_t *unused;
	uint64_t nunused;
};

static int kc_recovered(void *arg, uint32_t slot, uint64_t hash,
			uint64_t length, uint64_t layout_id, uint32_t tenant)
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
	e->is_cold = true;
	c->st.cold_blocks++;
	if (tenant != TIER_NVME_NOBODY) {
		/* the id a session of that tenant is charged under (its row
		 * made now if it has none: a tenant not connected in this
		 * run is listed too), the others' past the 255th */
		struct pol_tenants *map = &c->d->tenants.map;

		e->tenant = map->row[pol_tenant_row(map, tenant)].id;
		e->cold_counted = true;
		kd_tenant(c->d, e->tenant)->cold_of[c->idx].blocks++;
	}
	return 0;
}

/*
 * Each recovered block ends its cold life once, in one of three ways, so
 * that TIER_STATS' recovered_blocks = cold_blocks + cold_admitted +
 * cold_evicted + cold_dropped at every moment: what an operator reads to
 * tell whether the engines use what a stop saved or new traffic pushes
 * it out unused.
 */
void kc_cold_end(struct kd_cache *c, struct kc_entry *e, enum kc_cold_fate fate)
{
	struct kd_tenant_counts *k;

	if (e->is_cold) {
		e->is_cold = false;
		c->st.cold_blocks--;
		if (fate == KC_COLD_ADMITTED)
			c->st.cold_admitted++;
		else if (fate == KC_COLD_EVICTED)
			c->st.cold_evicted++;
		else
			c->st.cold_dropped++;
	}
	if (!e->cold_counted)
		return;
	e->cold_counted = false;
	k = kd_tenant(c->d, e->tenant);
	k->cold_of[c->idx].blocks--;
	if (fate != KC_COLD_ADMITTED)
		k->cold_of[c->idx].dropped++;
}

bool kc_cold_evict(struct kd_cache *c, struct kc_entry *e)
{
	/*
	 * A cold block holds its slot.  One being read stays (its restore
	 * needs it), and so does one the policy dropped earlier in this
	 * policy call (a publish of several blocks): its slot is free
	 * already and it waits on c->dead for kc_reap_dead(), which would
	 * read it after a kc_free() here.  One the policy took (an open
	 * used it, a client pinned it: kc_cold_admit()) is not cold: only
	 * the policy evicts it, and never while a pin holds it.
	 */
	if (e->job || e->rblk || e->dead || e->in_pol)
		return false;
	c->st.tiers[POL_TIER_NVME].drops++;
	kvmm_tel_evict(c->d->tel_local, e->hash, KVMM_TEL_TIER_NVME,
		       c->block_bytes);
	kc_cold_end(c, e, KC_COLD_EVICTED); /* before kc_free() says dropped */
	kc_release(c, e);
	kc_free(c, e);
	return true;
}

/*
 * A client pins a cold block (BLOCK_PIN, BLOCK_PIN_MANY, a TTL or a
 * priority, pin.c): the policy takes it in where it is, on NVMe
 * (pol_cache_admit_at()), so that the pin holds it as any other.  It was
 * -ENOENT, though PREFIX_QUERY said NVMe and an open would have served
 * it: an engine re-pinning its blocks after a restart was told they were
 * gone.
 *
 * Charged as an open's admission charges it: to the tenant its header
 * named, else (a header from before the tenants) to the pinning
 * session s's.  Its counts move from the cold row to the policy's (its
 * tenant's NVMe and admitted blocks stay the same in ADMIN_TENANTS); it
 * counted against its tenant's NVMe limit while cold, so the limit sees
 * no more blocks than before.  No parent: a header does not name it, and
 * an open admits a cold block without one too.  One being read up by an
 * open is admitted all the same, and held for its restore as one the
 * policy had when the restore began (restore_pinned, which the settle
 * lets go): it then settles as any policy block read from NVMe.  One on
 * its way out is not cached (-ENOENT).
 */
int kc_cold_admit(struct kd_cache *c, struct kc_entry *e,
		  const struct kd_session *s)
{
	struct pol_block_desc desc = { .hash = e->hash };
	struct pol_block *b;
	int err;

	if (e->in_pol)
		return 0;
	if (!c->pol || e->dead || e->drop_after || e->tier != POL_TIER_NVME ||
	    e->nvme_slot == MIGRATE_NO_SLOT)
		return -ENOENT;
	desc.tenant = e->cold_counted ? e->tenant : kd_tenant_charge(c->d, s);
	pol_cache_set_clock(c->pol, kd_now_ns()); /* TTLs: now */
	err = pol_cache_admit_at(c->pol, &desc, POL_TIER_NVME);
	if (err)
		return err == -EEXIST ? -ENOENT : err;
	e->in_pol = true;
	kc_cold_end(c, e, KC_COLD_ADMITTED);
	if (kd_fifo_linked(&c->cold, &e->cold))
		kd_fifo_unlink(&c->cold, &e->cold);
	/* the tenant the policy charged it to, as kc_move() keeps it: its
	 * stale copy's when its slot is freed */
	b = pol_cache_lookup(c->pol, e->hash);
	if (b)
		e->tenant = pol_cache_tenant_id(c->pol, b->tenant);
	if (e->rblk && !e->restore_pinned)
		e->restore_pinned = pol_cache_pin(c->pol, e->hash) == 0;
	/* the room it took: the policy's victims, dropped (kc_move()) */
	kc_reap_dead(c);
	return 0;
}

/* The policy's blocks of tenant id on NVMe (0 when it has no row there). */
static uint64_t kc_pol_nvme_blocks(struct kd_cache *c, uint32_t id)
{
	int row = c->pol ? pol_cache_tenant_row(c->pol, id) : -ENOENT;
	struct pol_tenant_count *pt;
	uint64_t n = 0;

	if (row < 0)
		return 0;
	pt = calloc((size_t)row + 1, sizeof(*pt));
	if (!pt)
		return 0;
	if (pol_cache_tenants(c->pol, pt, (size_t)row + 1) > (size_t)row)
		n = pt[row].blocks[POL_TIER_NVME];
	free(pt);
	return n;
}

/*
 * The policy of c's block size enforces a tenant's NVMe limit on the
 * blocks it holds; its cold ones in c's partition count there too
 * (`kvmmctl tenants` shows them cached; a limit applies to each size
 * apart, so another size's cold blocks do not), so
 * while both with `coming` pass the limit the tenant's oldest cold block
 * goes: the blocks the NVMe tier gives up first for room anyway
 * (kc_nvme_room()), and the ones its limit would pick, as nothing used
 * them in this run.  The walk of c->cold passes other tenants' blocks;
 * it runs only for a tenant with an NVMe limit and cold blocks.
 */
void kc_cold_limit(struct kd_cache *c, uint32_t id, uint64_t coming)
{
	struct kd_daemon *d = c->d;
	uint16_t row = pol_tenant_row_lookup(&d->tenants.map, id);
	struct kd_fifo_node *n, *next;
	struct kd_tenant_counts *k;
	uint64_t held;

	if (id == KVMM_TENANT_OTHERS || row == POL_TENANT_NO_ROW)
		return;
	k = &d->tenants.row[row];
	if (!k->limit[POL_TIER_NVME] || !k->cold_of[c->idx].blocks)
		return;
	held = kc_pol_nvme_blocks(c, id) + coming;
	for (n = c->cold.head;
	     n && held + k->cold_of[c->idx].blocks > k->limit[POL_TIER_NVME];
	     n = next) {
		struct kc_entry *e = kd_fifo_entry(n, struct kc_entry, cold);

		next = n->next;
		/* cppcheck-suppress nullPointer ; the loop runs while n is not
		 * NULL, nor then e (kd_fifo_entry() maps a NULL node to NULL) */
		if (e->cold_counted && e->tenant == id && !e->in_pol &&
		    kc_cold_evict(c, e))
			k->cold_of[c->idx].limit_drops++;
	}
}

void kc_cold_limits(struct kd_cache *c)
{
	struct pol_tenants *map = &c->d->tenants.map;

	for (uint32_t i = 0; i < map->nr; i++)
		kc_cold_limit(c, map->row[i].id, 0);
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
		uint64_t gen;

		kd_fifo_unlink(&c->cold, n);
		/* cppcheck-suppress nullPointer ; the loop runs while n is not
		 * NULL, nor then e (kd_fifo_entry() maps a NULL node to NULL) */
		gen = tier_nvme_slot_generation(c->nvme, e->nvme_slot);
		v[k++] = (struct kc_cold_ref){ .generation = gen, .e = e };
	}
	qsort(v, k, sizeof(*v), kc_cold_cmp);
	for (uint64_t i = 0; i < k; i++)
		kd_fifo_push_tail(&c->cold, &v[i].e->cold);
	free(v);
	return 0;
}
