// SPDX-License-Identifier: MIT
/*
 * Restore-plan actions through libkvmm (kvmmd --restore-mode recompute):
 * the GPU tier holds two cached blocks; a third published block sends the
 * least recently used one (block 0 of a two-block prefix) to the host
 * tier.  kvmm_seq_open_prefix_opts() then reports block 0 as
 * RECOMPUTE (fresh pages, not the cached bytes) and block 1 as
 * GPU_SHARED, with counts that agree; an old-style kvmm_seq_open_prefix()
 * on the same prefix still gets block 0 reloaded with its bytes.  With
 * KVMM_PREFIX_OPEN_SEGMENTS a hash cached nowhere between the two is a
 * hole to recompute and block 1 behind it is still shared, its bytes
 * intact (block 0 is on the GPU again by then); an unknown flag is -EINVAL.
 * With KVMM_PREFIX_OPEN_EARLY too the same open comes back the same, and
 * kvmm_seq_wait_ready() finds nothing loading (-ERANGE past the sequence,
 * -EINVAL for bad arguments, -ENOENT once it is closed).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "kvmm/uapi.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

#define TPB 256

static struct kvmm_region_opts ro = {
	.size = sizeof(ro),
	.layers = 2,
	.kv_heads = 2,
	.head_dim = 64,
	.dtype_bytes = 2,
	.max_seqs = 4,
	.max_tokens = 2048,
	.salt = 7,
};
static const uint64_t hashes[2] = { 0x1111, 0x2222 }, other = 0x3333;

static bool block0_is(struct kvmm_region *r, uint32_t s, unsigned char v)
{
	const unsigned char *k = (const void *)kvmm_seq_k_ptr(r, s, 0);

	for (size_t i = 0; i < TPB * 256; i++)
		if (k[i] != v)
			return false;
	return true;
}

int main(void)
{
	/*
	 * lru: the case needs block 0 demoted while its child stays on the
	 * GPU, which the prefix rule of the default policy (asym) forbids.
	 */
	const char *args[] = { "--cache-gpu-blocks",
			       "2",
			       "--host-mem",
			       "4M",
			       "--restore-mode",
			       "recompute",
			       "--cache-policy",
			       "lru",
			       NULL };
	struct kvmm_connect_opts co = { .size = sizeof(co), .name = "A" };
	struct kvmm_prefix_opts po = { .size = sizeof(po) };
	uint8_t acts[2] = { 0 };
	struct td_daemon d;
	struct kvmm_conn *c;
	struct kvmm_region *r;
	uint32_t s, n = 0;
	int err, tries;

	err = td_start(&d, args);
	if (err)
		t_fail("daemon: %s", strerror(-err));
	t_ok(kvmm_connect(&co, &c));
	t_ok(kvmm_region_create(c, &ro, &r));
	t_ok(kvmm_seq_open(r, &s));
	t_ok(kvmm_seq_extend(r, s, 2 * TPB + 10));
	for (uint32_t l = 0; l < 2; l++)
		memset((void *)kvmm_seq_k_ptr(r, s, l), 0xa0 + l,
		       2 * TPB * 256);
	t_assert_eq(kvmm_block_publish(r, s, 0, 2, 0, hashes), 2);
	t_ok(kvmm_seq_close(r, s));
	/* a third block pushes the least recently used one (block 0) down */
	t_ok(kvmm_seq_open(r, &s));
	t_ok(kvmm_seq_extend(r, s, TPB + 10));
	t_assert_eq(kvmm_block_publish(r, s, 0, 1, 0, &other), 1);
	t_ok(kvmm_seq_close(r, s));

	/* a bad options struct is refused before anything is sent */
	po.size = 4;
	t_assert_eq(kvmm_seq_open_prefix_opts(r, hashes, 2, &s, &n, &po),
		    -EINVAL);
	po.size = sizeof(po);

	/* the demotion of block 0 is a migration: wait until it is done */
	for (tries = 0; tries < 500; tries++) {
		po.actions = acts;
		t_ok(kvmm_seq_open_prefix_opts(r, hashes, 2, &s, &n, &po));
		if (n == 2 && acts[0] == KVMM_BLOCK_RECOMPUTE)
			break;
		t_ok(kvmm_seq_close(r, s));
		usleep(10000);
	}
	if (tries == 500) {
		td_dump_log(&d);
		t_fail("block 0 never came back as RECOMPUTE (n %u, %s)", n,
		       kvmm_block_action_string(acts[0]));
	}
	t_assert_eq(acts[1], KVMM_BLOCK_GPU_SHARED);
	t_assert_eq(po.recompute, 1);
	t_assert_eq(po.shared, 1);
	t_assert_eq(po.reloaded_host + po.reloaded_nvme, 0);
	t_assert(!strcmp(kvmm_block_action_string(acts[0]), "recompute"));
	/* fresh pages: not the cached bytes (the engine fills them) */
	t_assert(!block0_is(r, s, 0xa0));
	t_ok(kvmm_seq_close(r, s));

	/* an old-style open never gets a block to recompute */
	t_ok(kvmm_seq_open_prefix(r, hashes, 2, &s, &n));
	t_assert_eq(n, 2);
	t_assert(block0_is(r, s, 0xa0));
	t_ok(kvmm_seq_close(r, s));

	/* segments: block 0 (on the GPU since the reload), a hole, block
	 * 1 (GPU) */
	const uint64_t holed[3] = { hashes[0], 0x9999, hashes[1] };
	uint8_t acts3[3] = { 0 };

	po.flags = 0x8;
	t_assert_eq(kvmm_seq_open_prefix_opts(r, holed, 3, &s, &n, &po),
		    -EINVAL);
	po.flags = KVMM_PREFIX_OPEN_SEGMENTS;
	po.actions = acts3;
	t_ok(kvmm_seq_open_prefix_opts(r, holed, 3, &s, &n, &po));
	t_assert_eq(n, 3);
	t_assert_eq(acts3[0], KVMM_BLOCK_GPU_SHARED);
	t_assert_eq(acts3[1], KVMM_BLOCK_RECOMPUTE);
	t_assert_eq(acts3[2], KVMM_BLOCK_GPU_SHARED);
	t_assert_eq(po.recompute, 1);
	t_assert_eq(po.shared, 2);
	t_assert(block0_is(r, s, 0xa0));
	t_assert_eq(kvmm_seq_len(r, s), 3 * TPB);
	{
		const unsigned char *k = (const void *)kvmm_seq_k_ptr(r, s, 0);

		for (size_t i = 2 * TPB * 256; i < 3 * TPB * 256; i++)
			if (k[i] != 0xa0)
				t_fail("block 2 byte %zu: %#x", i, k[i]);
	}
	t_ok(kvmm_seq_close(r, s));

	/* early (ABI 1.8): nothing to reload here, so ready at once */
	{
		uint32_t failed[4], pending = 99;

		po.flags = KVMM_PREFIX_OPEN_SEGMENTS | KVMM_PREFIX_OPEN_EARLY;
		t_ok(kvmm_seq_open_prefix_opts(r, holed, 3, &s, &n, &po));
		t_assert_eq(n, 3);
		t_assert_eq(acts3[1], KVMM_BLOCK_RECOMPUTE);
		t_assert_eq(kvmm_seq_wait_ready(r, s, 3, KVMM_WAIT_READY_POLL,
						failed, 4, &pending),
			    0);
		t_assert_eq(pending, 0);
		t_assert_eq(kvmm_seq_wait_ready(r, s, 3, 0, failed, 4, NULL),
			    0);
		t_assert_eq(kvmm_seq_wait_ready(r, s, 4, 0, failed, 4, NULL),
			    -ERANGE);
		t_assert_eq(kvmm_seq_wait_ready(r, s, 3, 0x2, failed, 4, NULL),
			    -EINVAL);
		t_assert_eq(kvmm_seq_wait_ready(r, s, 3, 0, NULL, 4, NULL),
			    -EINVAL);
		t_ok(kvmm_seq_close(r, s));
		t_assert_eq(kvmm_seq_wait_ready(r, s, 0, 0, NULL, 0, NULL),
			    -ENOENT);
	}

	kvmm_disconnect(c);
	t_ok(td_stop(&d));
	printf("ok: RECOMPUTE and GPU_SHARED actions; old clients get reloads\n");
	return 0;
}
