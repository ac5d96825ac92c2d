/* SPDX-License-Identifier: MIT */
/*
 * What the tests of libkvmm's lending (lend.c: an extend short of blocks
 * takes back the blocks mapped ahead of the process's other sequences)
 * share: a region of 256-token blocks of 4 pages of 64 KiB (2 layers, K
 * and V), room for 8 sequences of 16 blocks; a connection with a given
 * map-ahead; whether a block is mapped; a pattern written into a sequence's tokens and checked.
 */
#ifndef KVMM_TESTS_LEND_H
#define KVMM_TESTS_LEND_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "kvmm/kvmm.h"
#include "tests/lib/test.h"

#define LD_TPB 256
#define LD_PPB 4 /* pages a block */
#define LD_TOKEN_BYTES 256 /* one token of one layer's K (or V) */
#define LD_LAYERS 2

static const struct kvmm_region_opts ld_region = {
	.size = sizeof(struct kvmm_region_opts),
	.layers = LD_LAYERS,
	.kv_heads = 2,
	.head_dim = 64,
	.dtype_bytes = 2,
	.max_seqs = 8,
	.max_tokens = 16 * LD_TPB,
};

static inline void ld_connect(uint32_t ahead, struct kvmm_conn **c,
			      struct kvmm_region **r)
{
	struct kvmm_connect_opts co = { .size = sizeof(co) };

	co.map_ahead_set = 1;
	co.map_ahead_blocks = ahead;
	t_ok(kvmm_connect(&co, c));
	t_ok(kvmm_region_create(*c, &ld_region, r));
	t_assert_eq(kvmm_region_tokens_per_block(*r), LD_TPB);
}

/* Whether block b of sequence s has its pages mapped here. */
static inline bool ld_mapped(struct kvmm_region *r, uint32_t s, uint32_t b)
{
	uint32_t ids[LD_PPB];
	int n = kvmm_seq_block_pages(r, s, b, ids, LD_PPB);

	if (n != LD_PPB && n != -ENODATA)
		t_fail("kvmm_seq_block_pages(%u, %u): %d", s, b, n);
	return n == LD_PPB;
}

static inline unsigned char ld_byte(uint32_t tag, uint32_t range, uint32_t t,
				    uint32_t j)
{
	return (unsigned char)(tag * 17 + range * 5 + t * 3 + j);
}

static inline unsigned char *ld_token(struct kvmm_region *r, uint32_t s,
				      uint32_t range, uint32_t t)
{
	uint64_t base = range & 1 ? kvmm_seq_v_ptr(r, s, range / 2) :
				    kvmm_seq_k_ptr(r, s, range / 2);

	return (unsigned char *)(uintptr_t)base + (size_t)t * LD_TOKEN_BYTES;
}

/* Write tag's pattern into tokens [from, to) of every layer's K and V. */
static inline void ld_fill(struct kvmm_region *r, uint32_t s, uint32_t from,
			   uint32_t to, uint32_t tag)
{
	for (uint32_t range = 0; range < 2 * LD_LAYERS; range++)
		for (uint32_t t = from; t < to; t++) {
			unsigned char *p = ld_token(r, s, range, t);

			for (uint32_t j = 0; j < LD_TOKEN_BYTES; j++)
				p[j] = ld_byte(tag, range, t, j);
		}
}

/* The first token of [0, len) whose bytes are not tag's pattern, or len. */
static inline uint32_t ld_intact(struct kvmm_region *r, uint32_t s,
				 uint32_t len, uint32_t tag)
{
	for (uint32_t t = 0; t < len; t++)
		for (uint32_t range = 0; range < 2 * LD_LAYERS; range++) {
			const unsigned char *p = ld_token(r, s, range, t);

			for (uint32_t j = 0; j < LD_TOKEN_BYTES; j++)
				if (p[j] != ld_byte(tag, range, t, j))
					return t;
		}
	return len;
}

static inline struct kvmm_stats ld_stats(struct kvmm_conn *c)
{
	struct kvmm_stats st = { .size = sizeof(st) };

	t_ok(kvmm_get_stats(c, &st));
	return st;
}

#endif
