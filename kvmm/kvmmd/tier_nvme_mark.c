// SPDX-License-Identifier: MIT
/*
 * NVMe tier drop marks: an operator's drop (ADMIN_CACHE_DROP, cache_drop.c)
 * made durable in the superblock, so that no restart recovers a block it
 * dropped, whatever became of the per-slot header writes that also
 * invalidate them (a crash before they ran, an I/O error).
 *
 * Generations only grow (a write's is taken from next_generation), so
 * "every slot written before the drop" is "every slot whose header has a
 * generation below G", G being next_generation when the drop looked
 * (tier_nvme_drop_generation()).  A drop of every tenant's blocks raises
 * marks.drop_all to G; a drop of one tenant's (`--uid`) sets that
 * tenant's entry, which covers the headers that name the tenant and
 * those that name none (files written before the headers said: whose
 * they are is not known, so every tenant's mark covers them; more
 * dropped, never fewer).
 *
 * The table holds TIER_NVME_TENANT_MARKS tenants.  One more raises
 * drop_all to the lowest of the tenants' marks and forgets those it
 * covers: blocks of other tenants below it go too, which a cache can
 * afford, where a dropped block served again it cannot.  A mark never
 * goes down; a reformat (another geometry or cache scope) starts a new
 * format id, whose slots no earlier header names, with no marks.
 *
 * After the restart scan next_generation goes above every mark
 * (nvme_marks_raise_generation()): a drop that invalidated every header
 * leaves no generation on disk to continue from, and a write after the
 * restart numbered below the mark would be dropped by the next one.
 */
#include "tier_nvme_priv.h"

#include <errno.h>
#include <string.h>

#include "vmm/vmm.h"

#if HAVE_LIBURING

bool nvme_header_marked(const struct tier_nvme *t,
			const struct tier_nvme_slot_header *h)
{
	const struct nvme_marks *mk = &t->marks;
	bool known = h->flags & TIER_NVME_HDR_TENANT;

	if (h->generation < mk->drop_all)
		return true;
	for (uint32_t i = 0; i < mk->n; i++)
		if (h->generation < mk->m[i].generation &&
		    (!known || h->tenant == mk->m[i].tenant))
			return true;
	return false;
}

void nvme_marks_raise_generation(struct tier_nvme *t)
{
	const struct nvme_marks *mk = &t->marks;

	pthread_mutex_lock(&t->lock);
	if (t->next_generation < mk->drop_all)
		t->next_generation = mk->drop_all;
	for (uint32_t i = 0; i < mk->n; i++)
		if (t->next_generation < mk->m[i].generation)
			t->next_generation = mk->m[i].generation;
	pthread_mutex_unlock(&t->lock);
}

/* Forget the tenants' marks drop_all covers (t->lock). */
static void marks_prune(struct nvme_marks *mk)
{
	uint32_t k = 0;

	for (uint32_t i = 0; i < mk->n; i++)
		if (mk->m[i].generation > mk->drop_all)
			mk->m[k++] = mk->m[i];
	mk->n = k;
}

/* tenant's mark at least generation (t->lock). */
static void marks_add_tenant(struct nvme_marks *mk, uint32_t tenant,
			     uint64_t generation)
{
	uint64_t lowest = generation;

	for (uint32_t i = 0; i < mk->n; i++) {
		if (mk->m[i].tenant != tenant)
			continue;
		if (mk->m[i].generation < generation)
			mk->m[i].generation = generation;
		return;
	}
	if (mk->n == TIER_NVME_TENANT_MARKS) {
		/* full: every block below the lowest mark goes, this one's
		 * included, which frees at least one entry */
		for (uint32_t i = 0; i < mk->n; i++)
			if (mk->m[i].generation < lowest)
				lowest = mk->m[i].generation;
		mk->drop_all = lowest;
		marks_prune(mk);
		if (generation <= mk->drop_all)
			return;
	}
	mk->m[mk->n++] = (struct nvme_tenant_mark){ .tenant = tenant,
						    .generation = generation };
}

uint64_t tier_nvme_drop_generation(struct tier_nvme *t)
{
	uint64_t g;

	pthread_mutex_lock(&t->lock);
	g = t->next_generation;
	pthread_mutex_unlock(&t->lock);
	return g;
}

int tier_nvme_mark_drop(struct tier_nvme *t, bool all, uint32_t tenant,
			uint64_t generation)
{
	struct nvme_marks *mk = &t->marks;
	int r;

	pthread_mutex_lock(&t->lock);
	if (all) {
		if (mk->drop_all < generation)
			mk->drop_all = generation;
		marks_prune(mk);
	} else if (generation > mk->drop_all) {
		marks_add_tenant(mk, tenant, generation);
	}
	pthread_mutex_unlock(&t->lock);
	/* each write carries every mark set before it: a later drop's
	 * write that went first wrote this one's too */
	pthread_mutex_lock(&t->sb_lock);
	r = nvme_sb_write(t);
	pthread_mutex_unlock(&t->sb_lock);
	if (r)
		vmm_log(VMM_LOG_ERR,
			"tier_nvme: writing a drop mark (generation %llu) to the superblock: %s",
			(unsigned long long)generation, strerror(-r));
	return r;
}

#endif /* HAVE_LIBURING */
