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
 * The table holds TIER_NVME_TENANT_MARKS tenants.  One more in a run
 * raises drop_all to the lowest of the tenants' marks and forgets those
 * it covers: blocks of other tenants below it go too, which a cache can
 * afford, where a dropped block served again it cannot.  Within a run a
 * mark never goes down; a reformat (another geometry or cache scope)
 * starts a new format id, whose slots no earlier header names, with no
 * marks.
 *
 * After the restart scan next_generation goes above every mark
 * (nvme_marks_raise_generation()): a drop that invalidated every header
 * leaves no generation on disk to continue from, and a write after the
 * restart numbered below the mark would be dropped by the next one.
 *
 * A mark retires at a start whose scan found no valid header below it
 * (nvme_marks_hold(), nvme_marks_retire()): it covers nothing on disk,
 * and nothing written from then on goes below it (the generation is
 * above it already).  The scan read every slot the tier has; the headers
 * it found below a mark are zeroed during that run (cache_nvme_marked.c)
 * and the mark retires at the start after, once that scan finds none.
 * A zeroing that failed, or that a crash or a stop cut short, leaves a
 * valid header, which the next scan finds: the mark stays.  What the
 * scan read as zeros or as no header of ours is synced before the
 * superblock without the mark is written, so that a zeroing of the run
 * before whose sync never ran cannot be lost behind it in the device's
 * cache.  A header the scan could not read it zeroed, synced with the
 * rest (tier_nvme_recover.c): it lies below no mark.  Slots the scan
 * does not read are safe without a mark: past the last run's end
 * (known_slots) their headers are zeroed before any recovery takes them
 * (tier_nvme_recover.c), and past a shrunk tier's end they lie beyond the
 * slot count the superblock then says, so past known_slots if it grows
 * again.  So a table filled over a node's life with old marks makes
 * room at a start, and the one-more rule above only bites when more
 * than TIER_NVME_TENANT_MARKS tenants' marks are in it at once: set
 * since the last start, or kept by headers not zeroed yet.
 */
#include "tier_nvme_priv.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

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

bool nvme_header_pending(const struct tier_nvme *t,
			 const struct tier_nvme_slot_header *h)
{
	const struct tier_nvme_drop_pending *p = t->pending;

	if (!p)
		return false;
	if (p->all || !(h->flags & TIER_NVME_HDR_TENANT))
		return p->all || p->n; /* tenant-less: every tenant's */
	for (uint32_t i = 0; i < p->n; i++)
		if (p->tenants[i] == h->tenant)
			return true;
	return false;
}

void nvme_marks_hold(struct tier_nvme *t, const struct tier_nvme_slot_header *h)
{
	const struct nvme_marks *mk = &t->marks;
	bool known = h->flags & TIER_NVME_HDR_TENANT;

	/* every mark that covers it: each alone would drop it */
	if (h->generation < mk->drop_all)
		t->held.all = true;
	for (uint32_t i = 0; i < mk->n; i++)
		if (h->generation < mk->m[i].generation &&
		    (!known || h->tenant == mk->m[i].tenant))
			t->held.tenant[i] = true;
}

uint32_t nvme_marks_retire(struct tier_nvme *t, const char *path,
			   const char *part)
{
	struct nvme_marks *mk = &t->marks;
	struct nvme_marks_held *hd = &t->held;
	uint32_t n = 0, k = 0;
	int r;

	n = mk->drop_all && !hd->all;
	for (uint32_t i = 0; i < mk->n; i++)
		n += !hd->tenant[i];
	if (!n)
		goto out;
	/* the zeros the scan read durable before a superblock that no
	 * longer covers what they replaced (tests fail it on purpose:
	 * KVMMD_TEST_NVME_RETIRE_FAIL=sync) */
	r = t->faults.retire_sync ? -EIO : fdatasync(t->fd) ? -errno : 0;
	if (r) {
		vmm_log(VMM_LOG_WARN,
			"tier_nvme: %s%s: syncing before retiring %u drop marks: %s (they stay)",
			path, part, n, strerror(-r));
		n = 0;
		goto out;
	}
	pthread_mutex_lock(&t->lock);
	if (!hd->all)
		mk->drop_all = 0;
	for (uint32_t i = 0; i < mk->n; i++)
		if (hd->tenant[i])
			mk->m[k++] = mk->m[i];
	mk->n = k;
	pthread_mutex_unlock(&t->lock);
out:
	/* its indices were the marks' as read; they are no more */
	memset(hd, 0, sizeof(*hd));
	return n;
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

/* A drop's mark in memory: of every block, or of tenant's (t->lock). */
static void marks_add(struct nvme_marks *mk, bool all, uint32_t tenant,
		      uint64_t generation)
{
	if (all) {
		if (mk->drop_all < generation)
			mk->drop_all = generation;
		marks_prune(mk);
	} else if (generation > mk->drop_all) {
		marks_add_tenant(mk, tenant, generation);
	}
}

/*
 * The marks of a drop answered while the tier was out, at the open:
 * next_generation is above every header on disk by now (the scan saw
 * them all, those the drop covers included, and
 * nvme_marks_raise_generation() ran), so a mark there covers exactly
 * what the file held when the tier came in, and nothing written after.
 */
bool nvme_marks_add_pending(struct tier_nvme *t)
{
	const struct tier_nvme_drop_pending *p = t->pending;

	if (!p || (!p->all && !p->n))
		return false;
	pthread_mutex_lock(&t->lock);
	if (p->all)
		marks_add(&t->marks, true, 0, t->next_generation);
	for (uint32_t i = 0; !p->all && i < p->n; i++)
		marks_add(&t->marks, false, p->tenants[i], t->next_generation);
	pthread_mutex_unlock(&t->lock);
	return true;
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
	marks_add(mk, all, tenant, generation);
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
