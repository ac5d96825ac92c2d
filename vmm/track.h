/* SPDX-License-Identifier: MIT */
/*
 * Bookkeeping shared by the host and cuda backends: which address ranges
 * are reserved, which page slots in them are mapped, and which page handles
 * are live.  Both backends validate every argument against it before any
 * system or driver call, so they reject bad input with the same errno (see
 * the table in vmm.h) and can report their usage for leak checks.
 *
 * Not locked: the backend holds its own mutex around check + call + commit.
 */
#ifndef KVMM_VMM_TRACK_H
#define KVMM_VMM_TRACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vmm/vmm.h"

struct vmm_track_range {
	uint64_t va;
	size_t size;
	size_t nr_slots;
	uint64_t nr_mapped;
	unsigned long *mapped; /* one bit per page slot */
};

struct vmm_track {
	size_t page_size;
	/* Sorted by va, never overlapping. */
	struct vmm_track_range *ranges;
	size_t nr_ranges, cap_ranges;
	/* Open-addressed set of live page handles; state 0 empty, 1 live,
	 * 2 deleted. */
	uint64_t *keys;
	uint8_t *key_state;
	uint32_t *key_refs; /* references to each live handle, >= 1 */
	size_t cap_keys, nr_keys, nr_deleted;
	uint64_t nr_extra_refs; /* references beyond a handle's first */
	uint64_t nr_mappings;
};

int vmm_track_init(struct vmm_track *t, size_t page_size);
void vmm_track_fini(struct vmm_track *t);

/* Ranges. */
int vmm_track_check_reserve(struct vmm_track *t, size_t size);
int vmm_track_add_range(struct vmm_track *t, uint64_t va, size_t size);
/* 0 when [va, va+size) is exactly one reservation with nothing mapped. */
int vmm_track_check_free_range(struct vmm_track *t, uint64_t va, size_t size);
void vmm_track_remove_range(struct vmm_track *t, uint64_t va);

/* Mappings. */
int vmm_track_check_map(struct vmm_track *t, uint64_t va);
int vmm_track_check_unmap(struct vmm_track *t, uint64_t va);
void vmm_track_set_mapped(struct vmm_track *t, uint64_t va, bool mapped);
/* [va, va+size) page aligned, inside one range, every page mapped. */
int vmm_track_check_access(struct vmm_track *t, uint64_t va, size_t size,
			   int prot);
/* Any [va, va+len): the whole pages it touches, as above; 0 if len is 0
 * (the copy calls take byte spans). */
int vmm_track_check_span(struct vmm_track *t, uint64_t va, size_t len,
			 int prot);

/* Page handles. */
int vmm_track_add_page(struct vmm_track *t, vmm_handle_t page);
bool vmm_track_page_live(const struct vmm_track *t, vmm_handle_t page);
void vmm_track_remove_page(struct vmm_track *t, vmm_handle_t page);
/* One more reference to a live handle (cuda: the driver gave the same
 * handle for a second import); 0 or -EBADF. */
int vmm_track_page_get(struct vmm_track *t, vmm_handle_t page);
/* The references a live handle has (0: not live). */
uint32_t vmm_track_page_refs(const struct vmm_track *t, vmm_handle_t page);
/* Drop one reference of a live handle that has more than one. */
void vmm_track_page_put(struct vmm_track *t, vmm_handle_t page);
/* 0 when offset/len lie inside one page (len 0 allowed). */
int vmm_track_check_copy(struct vmm_track *t, vmm_handle_t page, size_t offset,
			 size_t len);

void vmm_track_usage(const struct vmm_track *t, struct vmm_backend_usage *u);

#endif
