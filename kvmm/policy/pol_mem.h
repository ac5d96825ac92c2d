/* SPDX-License-Identifier: MIT */
/*
 * Memory for the policy's big arrays (block entries, index table, heap,
 * sketch).  At 1M blocks they span hundreds of MB that every decision
 * touches at random, so with 4 KiB pages nearly every access also misses
 * the TLB: arrays of 4 MiB and more ask for transparent huge pages
 * (2 MiB), which most kernels only give to ranges that ask ("madvise"
 * mode).  The arrays are mapped whole from the kernel: page aligned
 * (entries can be cache-line aligned), zeroed, and they grow without a
 * copy (mremap).  The advice covers the whole mapping: a partly advised
 * range is two kernel mappings, which mremap() refuses.
 */
#ifndef KVMM_POLICY_POL_MEM_H
#define KVMM_POLICY_POL_MEM_H

#include <stddef.h>

/* NULL on failure; pass the same byte counts back to remap and unmap. */
void *pol_mem_map(size_t bytes);
void *pol_mem_remap(void *p, size_t old_bytes, size_t bytes);
void pol_mem_unmap(void *p, size_t bytes);

#endif
