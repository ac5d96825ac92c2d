/* SPDX-License-Identifier: MIT */
/*
 * Shared between vmm/host.c (open and close, ranges, page lifetimes),
 * vmm/host_map.c (mapping pages and copying through them) and
 * vmm/host_maplog.c (what an ENOMEM from the mapping calls means): the
 * backend struct, the layout of a page handle and its decoders.
 */
#ifndef KVMM_VMM_HOST_PRIV_H
#define KVMM_VMM_HOST_PRIV_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "vmm/track.h"
#include "vmm/vmm.h"

/* Imported-page handles: bit 63, an 18-bit generation in bits 45..62, the
 * anchor's address / 4096 in bits 0..44 (user addresses stay below 2^57,
 * also with 5-level page tables).  An fd never has bit 63 set. */
#define HOST_ANCHOR_TAG (1ULL << 63)
#define HOST_ANCHOR_SHIFT 12
#define HOST_ANCHOR_ADDR_BITS 45
#define HOST_ANCHOR_GEN_MASK ((1ULL << 18) - 1)

/* Created-page handles: the memfd in bits 0..31, a 31-bit generation in
 * bits 32..62 (bit 63 clear).  The kernel hands a released page's fd
 * number to the next memfd at once, so without the generation a stale
 * handle would silently name the next page created. */
#define HOST_MEMFD_SHIFT 32
#define HOST_MEMFD_GEN_MASK ((1ULL << 31) - 1)

struct host_backend {
	struct vmm_backend base;
	pthread_mutex_t lock; /* protects track, anchor_gen and memfd_gen */
	struct vmm_track track;
	uint64_t anchor_gen; /* imports so far: the next handle's generation */
	uint64_t memfd_gen; /* pages created so far: the same for those */
	/* mremap() cannot duplicate a mapping here: an import keeps a dup
	 * of its fd, as a created page does, instead of an anchor (set once
	 * at open, read-only after) */
	bool import_keeps_fd;
	/* /proc/self/fd/N cannot be opened (no /proc): page_fd_readonly
	 * answers -EOPNOTSUPP from then on (lock held) */
	bool no_readonly_fd;
};

static inline struct host_backend *to_host(struct vmm_backend *b)
{
	return (struct host_backend *)b;
}

static inline bool is_anchor(vmm_handle_t page)
{
	return page & HOST_ANCHOR_TAG;
}

/* The memfd behind a created page's handle. */
static inline int page_memfd(vmm_handle_t page)
{
	return (int)(page & 0xffffffffu);
}

static inline void *anchor_addr(vmm_handle_t page)
{
	return (void *)(uintptr_t)((page &
				    ((1ULL << HOST_ANCHOR_ADDR_BITS) - 1))
				   << HOST_ANCHOR_SHIFT);
}

/* Log a failed mmap, mremap or mprotect: vmm/host_maplog.c. */
void __attribute__((format(printf, 2, 3)))
host_map_err_log(int err, const char *fmt, ...);

/* The ops vmm/host_map.c implements: vmm_ops in vmm/vmm.h. */
int host_map(struct vmm_backend *b, uint64_t va, vmm_handle_t page);
int host_unmap(struct vmm_backend *b, uint64_t va);
int host_set_access(struct vmm_backend *b, uint64_t va, size_t size, int prot);
int host_copy_to_host(struct vmm_backend *b, void *dst, vmm_handle_t page,
		      size_t offset, size_t len);
int host_copy_from_host(struct vmm_backend *b, vmm_handle_t page, size_t offset,
			const void *src, size_t len);
int host_page_zero(struct vmm_backend *b, vmm_handle_t page);
int host_page_copy(struct vmm_backend *b, vmm_handle_t dst, vmm_handle_t src);
int host_copy_va_to_host_async(struct vmm_backend *b, void *dst, uint64_t va,
			       size_t len);
int host_copy_host_to_va_async(struct vmm_backend *b, uint64_t va,
			       const void *src, size_t len);

#endif
