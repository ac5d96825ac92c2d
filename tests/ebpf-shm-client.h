/* SPDX-License-Identifier: MIT */
/*
 * A client process of kvmmd --telemetry shm that makes blocks known to
 * libkvmm the way an engine does (sequences whose blocks it publishes)
 * and steps them, for the tests of the shared-memory source against a
 * real daemon (kvmmd needs --page-size 4K and room for the blocks).
 */
#ifndef KVMM_TESTS_EBPF_SHM_CLIENT_H
#define KVMM_TESTS_EBPF_SHM_CLIENT_H

#include <stdint.h>
#include <stdlib.h>

#include "kvmm/kvmm.h"

#define SC_BLOCKS_PER_SEQ 1000

/* Open nseq sequences of SC_BLOCKS_PER_SEQ published blocks each, named
 * from `base`, run `steps` steps over them and close them: every block is
 * accessed `steps` times.  0 or a nonzero code. */
static inline int sc_phase(struct kvmm_conn *c, struct kvmm_region *r,
			   uint64_t base, int nseq, int steps)
{
	static uint64_t h[SC_BLOCKS_PER_SEQ];
	uint32_t tpb = kvmm_region_tokens_per_block(r), ids[64];
	int s, b;

	for (s = 0; s < nseq && s < 64; s++) {
		if (kvmm_seq_open(r, &ids[s]) ||
		    kvmm_seq_extend(r, ids[s], SC_BLOCKS_PER_SEQ * tpb))
			return 10;
		for (b = 0; b < SC_BLOCKS_PER_SEQ; b++)
			h[b] = base + (uint64_t)s * 100000 + b + 1;
		if (kvmm_block_publish(r, ids[s], 0, SC_BLOCKS_PER_SEQ, 0, h) <
		    0)
			return 11;
	}
	for (int i = 0; i < steps; i++) {
		kvmm_step_begin(c);
		kvmm_step_end(c);
	}
	for (s = 0; s < nseq && s < 64; s++)
		if (kvmm_seq_close(r, ids[s]))
			return 12;
	return 0;
}

/* Connect and create a region for up to nseq such sequences. */
static inline int sc_open(int nseq, struct kvmm_conn **c,
			  struct kvmm_region **r)
{
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.name = "shm-client" };
	struct kvmm_region_opts ro = { .size = sizeof(ro),
				       .layers = 1,
				       .kv_heads = 1,
				       .head_dim = 64,
				       .dtype_bytes = 2,
				       .max_seqs = (uint32_t)nseq,
				       /* 4 KiB pages, 128 B a token */
				       .max_tokens = 32 * SC_BLOCKS_PER_SEQ };

	if (kvmm_connect(&co, c))
		return 1;
	if (kvmm_region_create(*c, &ro, r))
		return 2;
	return 0;
}

#endif
