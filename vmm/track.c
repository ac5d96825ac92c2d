/* SPDX-License-Identifier: MIT */
/*
 * Range, mapping and handle bookkeeping for the vmm backends (see track.h).
 *
 * Ranges live in an array sorted by start address, found by binary search;
 * a process holds a few hundred at most (two per model layer).  Each range
 * has one bit per page slot, so a 16 GiB range of 64 KiB pages costs 32 KiB
 * of bitmap.  Live page handles sit in an open-addressed hash set so a
 * double release or a made-up handle is caught before it reaches close(2)
 * or cuMemRelease, where it could hit an unrelated object.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vmm/track.h"

#define BITS_PER_LONG (8 * sizeof(unsigned long))

int vmm_track_init(struct vmm_track *t, size_t page_size)
{
	memset(t, 0, sizeof(*t));
	t->page_size = page_size;
	return 0;
}

void vmm_track_fini(struct vmm_track *t)
{
	for (size_t i = 0; i < t->nr_ranges; i++)
		free(t->ranges[i].mapped);
	free(t->ranges);
	free(t->keys);
	free(t->key_state);
	free(t->key_refs);
	memset(t, 0, sizeof(*t));
}

static bool aligned(const struct vmm_track *t, uint64_t v)
{
	return v % t->page_size == 0;
}

/* Index of the range containing va, or -1. */
static long find_range(const struct vmm_track *t, uint64_t va)
{
	size_t lo = 0, hi = t->nr_ranges;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (t->ranges[mid].va <= va)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return -1;
	lo--;
	if (va - t->ranges[lo].va >= t->ranges[lo].size)
		return -1;
	return (long)lo;
}

int vmm_track_check_reserve(struct vmm_track *t, size_t size)
{
	if (size == 0 || !aligned(t, size))
		return -EINVAL;
	return 0;
}

int vmm_track_add_range(struct vmm_track *t, uint64_t va, size_t size)
{
	struct vmm_track_range r = { .va = va, .size = size };
	size_t pos;

	if (t->nr_ranges == t->cap_ranges) {
		size_t cap = t->cap_ranges ? 2 * t->cap_ranges : 16;
		void *p = realloc(t->ranges, cap * sizeof(*t->ranges));

		if (!p)
			return -ENOMEM;
		t->ranges = p;
		t->cap_ranges = cap;
	}
	r.nr_slots = size / t->page_size;
	r.mapped = calloc((r.nr_slots + BITS_PER_LONG - 1) / BITS_PER_LONG,
			  sizeof(unsigned long));
	if (!r.mapped)
		return -ENOMEM;
	for (pos = 0; pos < t->nr_ranges && t->ranges[pos].va < va; pos++)
		;
	memmove(&t->ranges[pos + 1], &t->ranges[pos],
		(t->nr_ranges - pos) * sizeof(*t->ranges));
	t->ranges[pos] = r;
	t->nr_ranges++;
	return 0;
}

int vmm_track_check_free_range(struct vmm_track *t, uint64_t va, size_t size)
{
	long i;

	if (!aligned(t, va) || size == 0 || !aligned(t, size))
		return -EINVAL;
	i = find_range(t, va);
	if (i < 0)
		return -EFAULT;
	if (t->ranges[i].va != va || t->ranges[i].size != size)
		return -EINVAL;
	if (t->ranges[i].nr_mapped)
		return -EBUSY;
	return 0;
}

void vmm_track_remove_range(struct vmm_track *t, uint64_t va)
{
	long i = find_range(t, va);

	if (i < 0)
		return;
	free(t->ranges[i].mapped);
	memmove(&t->ranges[i], &t->ranges[i + 1],
		(t->nr_ranges - (size_t)i - 1) * sizeof(*t->ranges));
	t->nr_ranges--;
}

static bool slot_test(const struct vmm_track_range *r, size_t slot)
{
	return r->mapped[slot / BITS_PER_LONG] &
	       (1UL << (slot % BITS_PER_LONG));
}

int vmm_track_check_map(struct vmm_track *t, uint64_t va)
{
	long i;

	if (!aligned(t, va))
		return -EINVAL;
	i = find_range(t, va);
	if (i < 0)
		return -EFAULT;
	if (slot_test(&t->ranges[i], (va - t->ranges[i].va) / t->page_size))
		return -EBUSY;
	return 0;
}

int vmm_track_check_unmap(struct vmm_track *t, uint64_t va)
{
	long i;

	if (!aligned(t, va))
		return -EINVAL;
	i = find_range(t, va);
	if (i < 0)
		return -EFAULT;
	if (!slot_test(&t->ranges[i], (va - t->ranges[i].va) / t->page_size))
		return -ENOENT;
	return 0;
}

void vmm_track_set_mapped(struct vmm_track *t, uint64_t va, bool mapped)
{
	long i = find_range(t, va);
	struct vmm_track_range *r;
	size_t slot;
	unsigned long bit;

	if (i < 0)
		return;
	r = &t->ranges[i];
	slot = (va - r->va) / t->page_size;
	bit = 1UL << (slot % BITS_PER_LONG);
	if (mapped && !slot_test(r, slot)) {
		r->mapped[slot / BITS_PER_LONG] |= bit;
		r->nr_mapped++;
		t->nr_mappings++;
	} else if (!mapped && slot_test(r, slot)) {
		r->mapped[slot / BITS_PER_LONG] &= ~bit;
		r->nr_mapped--;
		t->nr_mappings--;
	}
}

int vmm_track_check_access(struct vmm_track *t, uint64_t va, size_t size,
			   int prot)
{
	struct vmm_track_range *r;
	size_t first, n;
	long i;

	if (prot != VMM_PROT_NONE && prot != VMM_PROT_READ &&
	    prot != VMM_PROT_RW)
		return -EINVAL;
	if (!aligned(t, va) || size == 0 || !aligned(t, size))
		return -EINVAL;
	i = find_range(t, va);
	if (i < 0)
		return -EFAULT;
	r = &t->ranges[i];
	if (size > r->size - (va - r->va))
		return -EFAULT;
	first = (va - r->va) / t->page_size;
	n = size / t->page_size;
	for (size_t s = first; s < first + n; s++)
		if (!slot_test(r, s))
			return -ENOENT;
	return 0;
}

int vmm_track_check_span(struct vmm_track *t, uint64_t va, size_t len, int prot)
{
	size_t ps = t->page_size;

	if (len == 0)
		return 0;
	/* Rounding len up to whole pages must not wrap around to a short
	 * span: no reservation holds that many bytes anyway. */
	if (len > SIZE_MAX - va % ps - (ps - 1))
		return -EFAULT;
	return vmm_track_check_access(t, va / ps * ps,
				      (va % ps + len + ps - 1) / ps * ps, prot);
}

static size_t hash_slot(uint64_t key, size_t cap)
{
	key ^= key >> 33;
	key *= 0xff51afd7ed558ccdULL;
	key ^= key >> 33;
	return (size_t)key & (cap - 1);
}

static long key_find(const struct vmm_track *t, uint64_t key)
{
	if (!t->cap_keys)
		return -1;
	for (size_t i = hash_slot(key, t->cap_keys), n = 0; n < t->cap_keys;
	     i = (i + 1) & (t->cap_keys - 1), n++) {
		if (t->key_state[i] == 0)
			return -1;
		if (t->key_state[i] == 1 && t->keys[i] == key)
			return (long)i;
	}
	return -1;
}

static void key_insert(uint64_t *keys, uint8_t *state, uint32_t *refs,
		       size_t cap, uint64_t key, uint32_t nref)
{
	size_t i = hash_slot(key, cap);

	while (state[i] == 1)
		i = (i + 1) & (cap - 1);
	keys[i] = key;
	state[i] = 1;
	refs[i] = nref;
}

static int key_grow(struct vmm_track *t)
{
	size_t cap = t->cap_keys ? t->cap_keys : 64;
	uint64_t *keys;
	uint8_t *state;
	uint32_t *refs;

	/* Rehash into a table at most half full, dropping tombstones. */
	while ((t->nr_keys + 1) * 2 > cap)
		cap *= 2;
	keys = calloc(cap, sizeof(*keys));
	state = calloc(cap, 1);
	refs = calloc(cap, sizeof(*refs));
	if (!keys || !state || !refs) {
		free(keys);
		free(state);
		free(refs);
		return -ENOMEM;
	}
	for (size_t i = 0; i < t->cap_keys; i++)
		if (t->key_state[i] == 1)
			key_insert(keys, state, refs, cap, t->keys[i],
				   t->key_refs[i]);
	free(t->keys);
	free(t->key_state);
	free(t->key_refs);
	t->keys = keys;
	t->key_state = state;
	t->key_refs = refs;
	t->cap_keys = cap;
	t->nr_deleted = 0;
	return 0;
}

int vmm_track_add_page(struct vmm_track *t, vmm_handle_t page)
{
	if (key_find(t, page) >= 0)
		return -EEXIST;
	if ((t->nr_keys + t->nr_deleted + 1) * 2 > t->cap_keys) {
		int err = key_grow(t);

		if (err)
			return err;
	}
	key_insert(t->keys, t->key_state, t->key_refs, t->cap_keys, page, 1);
	t->nr_keys++;
	return 0;
}

bool vmm_track_page_live(const struct vmm_track *t, vmm_handle_t page)
{
	return key_find(t, page) >= 0;
}

void vmm_track_remove_page(struct vmm_track *t, vmm_handle_t page)
{
	long i = key_find(t, page);

	if (i < 0)
		return;
	t->nr_extra_refs -= t->key_refs[i] - 1;
	t->key_state[i] = 2;
	t->nr_keys--;
	t->nr_deleted++;
}

int vmm_track_page_get(struct vmm_track *t, vmm_handle_t page)
{
	long i = key_find(t, page);

	if (i < 0)
		return -EBADF;
	if (t->key_refs[i] == UINT32_MAX)
		return -EOVERFLOW;
	t->key_refs[i]++;
	t->nr_extra_refs++;
	return 0;
}

uint32_t vmm_track_page_refs(const struct vmm_track *t, vmm_handle_t page)
{
	long i = key_find(t, page);

	return i < 0 ? 0 : t->key_refs[i];
}

void vmm_track_page_put(struct vmm_track *t, vmm_handle_t page)
{
	long i = key_find(t, page);

	if (i >= 0 && t->key_refs[i] > 1) {
		t->key_refs[i]--;
		t->nr_extra_refs--;
	}
}

int vmm_track_check_copy(struct vmm_track *t, vmm_handle_t page, size_t offset,
			 size_t len)
{
	if (!vmm_track_page_live(t, page))
		return -EBADF;
	if (offset > t->page_size || len > t->page_size - offset)
		return -EINVAL;
	return 0;
}

void vmm_track_usage(const struct vmm_track *t, struct vmm_backend_usage *u)
{
	u->pages = t->nr_keys + t->nr_extra_refs;
	u->ranges = t->nr_ranges;
	u->mappings = t->nr_mappings;
}
