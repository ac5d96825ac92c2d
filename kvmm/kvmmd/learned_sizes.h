/* SPDX-License-Identifier: MIT */
/*
 * A --policy-state file of several block sizes (cache_learned_sizes.c):
 * each size's policy state in a section tagged with its pages a block.
 * kvmmd reads and writes it (cache_learned.c), kvmmctl policy-state
 * describes each section.
 */
#ifndef KVMM_KVMMD_LEARNED_SIZES_H
#define KVMM_KVMMD_LEARNED_SIZES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One size's state: pol_cache_learned_save()'s bytes. */
struct kc_learned_sec {
	uint32_t ppb; /* pages a block */
	const void *buf;
	size_t len;
};

/* Is buf a file of several sizes (else one policy's state alone)? */
bool kc_learned_sized(const void *buf, size_t len);
/* Its sections into secs (pointing into buf): 0, or -EINVAL for a
 * damaged one or one of more than max. */
int kc_learned_parse(const void *buf, size_t len, struct kc_learned_sec *secs,
		     uint32_t max, uint32_t *nr);
/* The file of nr sections into buf: the bytes it takes, written when
 * len allows. */
size_t kc_learned_pack(const struct kc_learned_sec *secs, uint32_t nr,
		       void *buf, size_t len);

#endif
