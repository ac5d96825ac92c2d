/* SPDX-License-Identifier: MIT */
/*
 * Where things lie in an NVMe tier file (or one partition of it), for
 * the tests and benches that size one for kvmmd (--nvme-size) or a
 * tier_nvme_open() (capacity_bytes), or read and corrupt its slots on
 * disk.  The layout is the daemon's ("On-disk format" in
 * kvmm/kvmmd/tier_nvme.h): a superblock of NVME_DATA_OFFSET bytes
 * (kvmm/kvmmd/tier_nvme_priv.h), then slot after slot, each a header of
 * TIER_NVME_HEADER_BYTES and the payload.  The macros below use those
 * constants, so that a bigger header or superblock moves every test's
 * sizes and offsets with it instead of breaking each test separately.
 */
#ifndef KVMM_TESTS_NVME_LAYOUT_H
#define KVMM_TESTS_NVME_LAYOUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kvmm/kvmmd/tier_nvme_priv.h"

/* Slot 0's offset: the superblock's size. */
#define NT_SUPERBLOCK_BYTES ((uint64_t)NVME_DATA_OFFSET)

/* One slot on disk (the tier's slot_bytes): its header and the payload. */
#define NT_SLOT_BYTES(payload) \
	((uint64_t)TIER_NVME_HEADER_BYTES + (uint64_t)(payload))

/* Where slot i starts (its header), from the start of the partition. */
#define NT_SLOT_OFFSET(i, payload) \
	(NT_SUPERBLOCK_BYTES + (uint64_t)(i)*NT_SLOT_BYTES(payload))

/* Where slot i's payload starts. */
#define NT_PAYLOAD_OFFSET(i, payload) \
	(NT_SLOT_OFFSET(i, payload) + TIER_NVME_HEADER_BYTES)

/* The bytes a tier of nslots slots of payload bytes each takes: its
 * capacity_bytes, or kvmmd's --nvme-size for one block size. */
#define NT_CAPACITY(nslots, payload) NT_SLOT_OFFSET(nslots, payload)

/* Room for NT_CAPACITY() in decimal (a uint64_t) and its NUL. */
#define NT_SIZE_ARG_LEN 24

/*
 * NT_CAPACITY(nslots, payload) in decimal into buf (cap bytes), for
 * kvmmd's --nvme-size; returns buf.
 */
static inline const char *nt_size_arg(char *buf, size_t cap, uint64_t nslots,
				      uint64_t payload)
{
	snprintf(buf, cap, "%llu",
		 (unsigned long long)NT_CAPACITY(nslots, payload));
	return buf;
}

#endif
