/* SPDX-License-Identifier: MIT */
/*
 * The small region the libkvmm tests of telemetry open against a daemon
 * with 64 KiB pages: 2 layers of 2 KV heads of 64 dims in 2-byte
 * elements, so a block is TR_TPB tokens (64 KiB / (2 * 64 * 2)), room for
 * 4 sequences of 2048 tokens.
 */
#ifndef KVMM_TESTS_SMALL_REGION_H
#define KVMM_TESTS_SMALL_REGION_H

#include "kvmm/kvmm.h"

#define TR_TPB 256

static const struct kvmm_region_opts tr_small_region = {
	.size = sizeof(struct kvmm_region_opts),
	.layers = 2,
	.kv_heads = 2,
	.head_dim = 64,
	.dtype_bytes = 2,
	.max_seqs = 4,
	.max_tokens = 2048,
};

#endif
