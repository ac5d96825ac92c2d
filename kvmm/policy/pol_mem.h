/* SPDX-License-Identifier: MIT */
/*
 * Memory hints for the policy's big arrays (block entries, index table,
 * heap, sketch): at 1M blocks they span hundreds of MB that every
 * decision touches at random, so with 4 KiB pages nearly every access
 * also misses the TLB.  Transparent huge pages (2 MiB) cut those walks;
 * most kernels only give them to ranges that ask (the "madvise" mode).
 */
#ifndef KVMM_POLICY_POL_MEM_H
#define KVMM_POLICY_POL_MEM_H

#include <stddef.h>

/*
 * Ask for huge pages over [p, p + bytes) (the whole pages inside it);
 * a no-op for small arrays and where the kernel says no: only a hint.
 */
void pol_mem_advise_huge(void *p, size_t bytes);

#endif
