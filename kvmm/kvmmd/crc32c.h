/* SPDX-License-Identifier: MIT */
/*
 * CRC32C (Castagnoli, the iSCSI/ext4/NVMe polynomial 0x1EDC6F41) over the
 * payload of every NVMe-tier slot.  x86-64 CPUs with SSE4.2 compute it with
 * the crc32 instruction; everything else uses a slicing-by-8 table.  The
 * choice is made once, on first use.
 *
 * The value is the conventional one: tier_crc32c(0, "123456789", 9) ==
 * 0xE3069283.  Pass a previous result as crc to continue over more bytes.
 */
#ifndef KVMM_KVMMD_CRC32C_H
#define KVMM_KVMMD_CRC32C_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

uint32_t tier_crc32c(uint32_t crc, const void *buf, size_t len);

/* The two implementations, exposed so tests can compare them. */
uint32_t tier_crc32c_sw(uint32_t crc, const void *buf, size_t len);
/* Same as the table version where the instruction is missing. */
uint32_t tier_crc32c_hw(uint32_t crc, const void *buf, size_t len);
bool tier_crc32c_hw_available(void);

#endif
