// SPDX-License-Identifier: MIT
/*
 * Host tier slots: a slab (tier_host_slab.c) cut into block-sized slots,
 * and a free-slot stack.  See tier_host.h for the slot state machine.
 */
#include "tier_host.h"

#include "vmm/vmm.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tier_host_slot {
	enum tier_slot_state state;
	uint64_t hash;
	uint64_t length;
};

struct tier_host {
	pthread_mutex_t lock; /* protects slots, free stack and counters */
	struct tier_host_slab *slab;
	unsigned char *base;
	size_t len; /* the slots' part of the slab */
	size_t slot_bytes;
	size_t stride; /* headroom + slot_bytes */
	uint32_t nslots;
	struct tier_host_slot *slots;
	uint32_t *free_stack;
	uint32_t nfree;
	struct tier_host_stats st;
};

const char *tier_slot_state_string(enum tier_slot_state state)
{
	switch (state) {
	case TIER_SLOT_FREE:
		return "free";
	case TIER_SLOT_FILLING:
		return "filling";
	case TIER_SLOT_READY:
		return "ready";
	}
	return "unknown";
}

int tier_parse_size(const char *s, uint64_t *bytes)
{
	char *end;
	double v;
	uint64_t mul = 1;

	if (!s || !*s)
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || v < 0)
		return -EINVAL;
	switch (toupper((unsigned char)*end)) {
	case '\0':
		break;
	case 'K':
		mul = 1ull << 10;
		break;
	case 'M':
		mul = 1ull << 20;
		break;
	case 'G':
		mul = 1ull << 30;
		break;
	case 'T':
		mul = 1ull << 40;
		break;
	default:
		return -EINVAL;
	}
	if (*end) {
		end++;
		if (toupper((unsigned char)*end) == 'I')
			end++;
		if (toupper((unsigned char)*end) == 'B')
			end++;
		if (*end)
			return -EINVAL;
	}
	if (v * (double)mul > 1.8e19)
		return -ERANGE;
	*bytes = (uint64_t)(v * (double)mul);
	return 0;
}

/* The caller's slab (still the caller's if this fails), or one made
 * here from the placement fields. */
static int take_slab(const struct tier_host_config *cfg, size_t need,
		     struct tier_host_slab **out)
{
	struct tier_host_slab_config sc = { .size = sizeof(sc),
					    .len = need,
					    .numa_node = cfg->numa_node,
					    .pci_addr = cfg->pci_addr,
					    .pin = cfg->pin,
					    .unpin = cfg->unpin,
					    .pin_arg = cfg->pin_arg };
	struct tier_host_slab_info si;

	if (!cfg->slab)
		return tier_host_slab_open(&sc, out);
	tier_host_slab_get_info(cfg->slab, &si);
	if (si.len < need) {
		vmm_log(VMM_LOG_ERR,
			"tier_host: slab of %zu bytes, %zu needed for its slots",
			si.len, need);
		return -EINVAL;
	}
	*out = cfg->slab;
	return 0;
}

int tier_host_open(const struct tier_host_config *cfg, struct tier_host **out)
{
	struct tier_host_slab_info si;
	struct tier_host *h;
	uint64_t nslots;
	int r;

	if (!cfg || cfg->size < sizeof(*cfg) || !cfg->slot_bytes ||
	    cfg->slot_bytes % 4096)
		return -EINVAL;
	nslots = cfg->capacity_bytes / cfg->slot_bytes;
	if (nslots == 0 || nslots > UINT32_MAX)
		return -EINVAL;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	pthread_mutex_init(&h->lock, NULL);
	h->slot_bytes = cfg->slot_bytes;
	h->nslots = (uint32_t)nslots;
	h->stride = TIER_HOST_HEADROOM + cfg->slot_bytes;
	h->len = tier_host_slab_len(cfg->capacity_bytes, cfg->slot_bytes);
	h->slots = calloc(nslots, sizeof(*h->slots));
	h->free_stack = calloc(nslots, sizeof(*h->free_stack));
	if (!h->slots || !h->free_stack) {
		r = -ENOMEM;
		goto err_free_meta;
	}
	r = take_slab(cfg, h->len, &h->slab);
	if (r)
		goto err_free_meta;
	tier_host_slab_get_info(h->slab, &si);
	h->base = si.base;
	/* made for any block size: what the slots do not use goes back */
	tier_host_slab_trim(h->slab, h->len);
	/* Lowest slot on top so allocation order is predictable. */
	for (uint32_t i = 0; i < h->nslots; i++)
		h->free_stack[i] = h->nslots - 1 - i;
	h->nfree = h->nslots;
	h->st.slot_bytes = h->slot_bytes;
	h->st.capacity_slots = h->nslots;
	h->st.capacity_bytes = (uint64_t)h->nslots * h->slot_bytes;
	h->st.numa_node = si.node;
	h->st.pinned = si.pinned;
	vmm_log(VMM_LOG_INFO,
		"tier_host: %u slots of %zu bytes (%zu MiB) on NUMA node %d (%s)%s",
		h->nslots, h->slot_bytes, h->len >> 20, si.node,
		si.node < 0 ? "no libnuma" : si.why,
		si.pinned ? ", pinned" : "");
	*out = h;
	return 0;

err_free_meta:
	free(h->free_stack);
	free(h->slots);
	pthread_mutex_destroy(&h->lock);
	free(h);
	return r;
}

struct tier_host_slab *tier_host_close_keep_slab(struct tier_host *h)
{
	struct tier_host_slab *slab;

	if (!h)
		return NULL;
	if (h->nfree != h->nslots)
		vmm_log(VMM_LOG_WARN,
			"tier_host: %u slots still in use at close",
			h->nslots - h->nfree);
	slab = h->slab;
	free(h->free_stack);
	free(h->slots);
	pthread_mutex_destroy(&h->lock);
	free(h);
	return slab;
}

void tier_host_close(struct tier_host *h)
{
	tier_host_slab_close(tier_host_close_keep_slab(h));
}

int tier_host_alloc(struct tier_host *h, uint32_t *slot)
{
	uint32_t s;

	pthread_mutex_lock(&h->lock);
	if (h->nfree == 0) {
		h->st.alloc_failures++;
		pthread_mutex_unlock(&h->lock);
		return -ENOSPC;
	}
	s = h->free_stack[--h->nfree];
	h->slots[s] = (struct tier_host_slot){ .state = TIER_SLOT_FILLING };
	h->st.allocs++;
	h->st.used_slots++;
	if (h->st.used_slots > h->st.peak_used_slots)
		h->st.peak_used_slots = h->st.used_slots;
	pthread_mutex_unlock(&h->lock);
	*slot = s;
	return 0;
}

int tier_host_publish(struct tier_host *h, uint32_t slot, uint64_t hash,
		      uint64_t length)
{
	int r = 0;

	if (slot >= h->nslots || length > h->slot_bytes)
		return -EINVAL;
	pthread_mutex_lock(&h->lock);
	if (h->slots[slot].state != TIER_SLOT_FILLING) {
		r = -EBUSY;
	} else {
		h->slots[slot].state = TIER_SLOT_READY;
		h->slots[slot].hash = hash;
		h->slots[slot].length = length;
		h->st.ready_slots++;
	}
	pthread_mutex_unlock(&h->lock);
	return r;
}

int tier_host_free(struct tier_host *h, uint32_t slot)
{
	if (slot >= h->nslots)
		return -EINVAL;
	pthread_mutex_lock(&h->lock);
	if (h->slots[slot].state == TIER_SLOT_FREE) {
		pthread_mutex_unlock(&h->lock);
		return -ENOENT;
	}
	if (h->slots[slot].state == TIER_SLOT_READY)
		h->st.ready_slots--;
	h->slots[slot] = (struct tier_host_slot){ .state = TIER_SLOT_FREE };
	h->free_stack[h->nfree++] = slot;
	h->st.used_slots--;
	h->st.frees++;
	pthread_mutex_unlock(&h->lock);
	return 0;
}

void *tier_host_slot_addr(struct tier_host *h, uint32_t slot)
{
	void *p = NULL;

	if (slot >= h->nslots)
		return NULL;
	pthread_mutex_lock(&h->lock);
	if (h->slots[slot].state != TIER_SLOT_FREE)
		p = h->base + (size_t)slot * h->stride + TIER_HOST_HEADROOM;
	pthread_mutex_unlock(&h->lock);
	return p;
}

const void *tier_host_read_addr(struct tier_host *h, uint32_t slot,
				uint64_t hash)
{
	const void *p = NULL;

	if (slot >= h->nslots)
		return NULL;
	pthread_mutex_lock(&h->lock);
	if (h->slots[slot].state == TIER_SLOT_READY &&
	    (hash == 0 || h->slots[slot].hash == hash))
		p = h->base + (size_t)slot * h->stride + TIER_HOST_HEADROOM;
	pthread_mutex_unlock(&h->lock);
	return p;
}

enum tier_slot_state tier_host_slot_state(struct tier_host *h, uint32_t slot)
{
	enum tier_slot_state s;

	if (slot >= h->nslots)
		return TIER_SLOT_FREE;
	pthread_mutex_lock(&h->lock);
	s = h->slots[slot].state;
	pthread_mutex_unlock(&h->lock);
	return s;
}

uint64_t tier_host_slot_hash(struct tier_host *h, uint32_t slot)
{
	uint64_t v;

	if (slot >= h->nslots)
		return 0;
	pthread_mutex_lock(&h->lock);
	v = h->slots[slot].hash;
	pthread_mutex_unlock(&h->lock);
	return v;
}

void *tier_host_base(struct tier_host *h, size_t *len)
{
	if (len)
		*len = h->len;
	return h->base;
}

void tier_host_get_stats(struct tier_host *h, struct tier_host_stats *st)
{
	pthread_mutex_lock(&h->lock);
	*st = h->st;
	pthread_mutex_unlock(&h->lock);
}
