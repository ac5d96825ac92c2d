// SPDX-License-Identifier: MIT
/*
 * Block identity across processes, through a real kvmmd: process A
 * derives its seed from its region (kvmm_region_hash_seed), hashes a
 * prompt with kvmm_hash_chain() and publishes its three full blocks under
 * those hashes; process B computes the chain of its own prompt on its own
 * and opens it with kvmm_seq_open_prefix(): A's blocks are mapped (equal
 * page ids, A's bytes) for as long as the prompts agree, and not at all
 * under another model name or another salt.  Only page ids travel between
 * the processes, never hashes.  The region's seed equals kvmm_hash_seed()
 * of the same layout and, without a model name, the golden value of
 * tests/hash-golden.c.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

#define TPB 256
#define PPB 4
#define NBLK 3
#define MODEL "hash-share-model"
#define SEED_NONAME 0x949cc5b8f5a0bbbaULL /* tests/hash-golden.c */

static struct kvmm_region_opts ro = {
	.size = sizeof(ro),
	.layers = 2,
	.kv_heads = 2,
	.head_dim = 64,
	.dtype_bytes = 2,
	.max_seqs = 8,
	.max_tokens = 2048,
	.salt = 7,
};

/* The prompt: NBLK full blocks and a tail; variant != 0 changes the
 * tokens from block 2 on. */
static void prompt(uint32_t *t, size_t n, uint32_t variant)
{
	for (size_t i = 0; i < n; i++)
		t[i] = (uint32_t)(i * 40503u + 11) ^
		       (i >= 2 * TPB ? variant : 0);
}

static int writer(int wr, int rd)
{
	struct kvmm_connect_opts co = { .size = sizeof(co), .name = "A" };
	static uint32_t toks[NBLK * TPB + 10];
	uint64_t seed, hashes[NBLK + 1];
	uint32_t s, ids[NBLK * PPB];
	struct kvmm_conn *c;
	struct kvmm_region *r;
	char go;

	if (kvmm_connect(&co, &c) || kvmm_region_create(c, &ro, &r) ||
	    kvmm_seq_open(r, &s) || kvmm_seq_extend(r, s, NBLK * TPB + 10))
		return 1;
	if (kvmm_region_hash_seed(r, MODEL, &seed))
		return 2;
	prompt(toks, NBLK * TPB + 10, 0);
	if (kvmm_hash_chain(seed, 0, toks, NBLK * TPB + 10, TPB, hashes,
			    NBLK + 1) != NBLK)
		return 3;
	for (uint32_t l = 0; l < 2; l++) {
		memset((void *)kvmm_seq_k_ptr(r, s, l), 0xa0 + l,
		       NBLK * TPB * 256);
		memset((void *)kvmm_seq_v_ptr(r, s, l), 0xb0 + l,
		       NBLK * TPB * 256);
	}
	if (kvmm_block_publish(r, s, 0, NBLK, 0, hashes) != NBLK)
		return 4;
	for (uint32_t b = 0; b < NBLK; b++)
		if (kvmm_seq_block_pages(r, s, b, ids + b * PPB, PPB) != PPB)
			return 5;
	if (write(wr, ids, sizeof(ids)) != sizeof(ids) || read(rd, &go, 1) != 1)
		return 6;
	kvmm_disconnect(c);
	return 0;
}

/* Open the prefix of B's own chain; the blocks found, checked to be A's. */
static uint32_t open_chain(struct kvmm_region *r, uint64_t seed, uint64_t salt,
			   uint32_t variant, const uint32_t *a_ids)
{
	static uint32_t toks[NBLK * TPB + 3];
	uint64_t hashes[NBLK];
	uint32_t s, n, ids[PPB];

	prompt(toks, NBLK * TPB + 3, variant);
	t_assert_eq(kvmm_hash_chain(seed, salt, toks, NBLK * TPB + 3, TPB,
				    hashes, NBLK),
		    NBLK);
	t_ok(kvmm_seq_open_prefix(r, hashes, NBLK, &s, &n));
	t_assert_eq(kvmm_seq_len(r, s), (int64_t)n * TPB);
	for (uint32_t b = 0; b < n; b++) {
		t_assert_eq(kvmm_seq_block_pages(r, s, b, ids, PPB), PPB);
		for (int i = 0; i < PPB; i++)
			t_assert_eq(ids[i], a_ids[b * PPB + i]);
	}
	for (uint32_t l = 0; l < 2 && n; l++) {
		const uint8_t *k = (const uint8_t *)kvmm_seq_k_ptr(r, s, l);
		const uint8_t *v = (const uint8_t *)kvmm_seq_v_ptr(r, s, l);

		for (uint32_t i = 0; i < n * TPB * 256; i += 101) {
			t_assert_eq(k[i], 0xa0 + l);
			t_assert_eq(v[i], 0xb0 + l);
		}
	}
	t_ok(kvmm_seq_close(r, s));
	return n;
}

int main(void)
{
	struct kvmm_connect_opts co = { .size = sizeof(co), .name = "B" };
	struct kvmm_hash_layout lay = { .size = sizeof(lay),
					.model = MODEL,
					.layers = 2,
					.kv_heads = 2,
					.head_dim = 64,
					.dtype_bytes = 2,
					.tokens_per_block = TPB };
	struct kvmm_status_reply st;
	struct td_daemon d;
	struct kvmm_conn *c;
	struct kvmm_region *r;
	uint32_t a_ids[NBLK * PPB];
	uint64_t seed, seed2;
	int up[2], down[2], status, err;
	pid_t p;

	err = td_start(&d, NULL);
	if (err)
		t_fail("daemon: %s", strerror(-err));
	t_ok(pipe(up));
	t_ok(pipe(down));
	p = fork();
	if (p == 0)
		_exit(writer(up[1], down[0]));
	if (read(up[0], a_ids, sizeof(a_ids)) != sizeof(a_ids)) {
		waitpid(p, &status, 0);
		td_dump_log(&d);
		if (WIFEXITED(status) && WEXITSTATUS(status) == 2)
			t_skip("libkvmm built without libxxhash");
		t_fail("writer failed: %d", WEXITSTATUS(status));
	}

	t_ok(kvmm_connect(&co, &c));
	t_ok(kvmm_region_create(c, &ro, &r));
	t_assert_eq(kvmm_region_tokens_per_block(r), TPB);
	t_ok(kvmm_region_hash_seed(r, MODEL, &seed));
	t_ok(kvmm_hash_seed(&lay, &seed2));
	t_assert(seed == seed2);
	t_ok(kvmm_region_hash_seed(r, NULL, &seed2));
	t_assert(seed2 == SEED_NONAME);
	t_assert_eq(kvmm_region_hash_seed(r, MODEL, NULL), -EINVAL);

	/* the same prompt: all of A's blocks */
	t_assert_eq(open_chain(r, seed, 0, 0, a_ids), NBLK);
	/* a prompt that differs from block 2 on: A's first two blocks */
	t_assert_eq(open_chain(r, seed, 0, 0x5a5a, a_ids), 2);
	/* the same tokens under another model or salt: nothing */
	lay.model = "another-model";
	t_ok(kvmm_hash_seed(&lay, &seed2));
	t_assert_eq(open_chain(r, seed2, 0, 0, a_ids), 0);
	t_assert_eq(open_chain(r, seed, ro.salt, 0, a_ids), 0);

	t_assert_eq(write(down[1], "g", 1), 1);
	t_assert_eq(waitpid(p, &status, 0), p);
	t_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	kvmm_disconnect(c);
	/* nothing mapped once both left (the cache keeps the blocks) */
	for (int i = 0; i < 300; i++) {
		t_ok(td_status(&d, &st));
		if (!st.pages_mapped && st.sessions == 1 && !st.sequences)
			break;
		usleep(10000);
	}
	t_assert_eq(st.pages_mapped, 0);
	t_assert_eq(st.sequences, 0);
	t_assert_eq(td_stop(&d), 0);
	printf("%d blocks shared by independently computed chains\n", NBLK);
	return 0;
}
