// SPDX-License-Identifier: MIT
/*
 * Block sharing through libkvmm: process A grows a sequence, writes it and
 * publishes its two full blocks; process B opens a sequence on that
 * prefix with kvmm_seq_open_prefix() and reads A's bytes through the same
 * physical pages (equal page ids, no copy).  A second prefix sequence in B
 * maps the same pages again without importing anything; growing it past
 * the prefix gets private pages.  When everyone has left, no page is
 * mapped any more (the cache still owns the published blocks).
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
static const uint64_t hashes[3] = { 0x1111, 0x2222, 0x3333 };

static int writer(int wr, int rd)
{
	struct kvmm_connect_opts co = { .size = sizeof(co), .name = "A" };
	struct kvmm_conn *c;
	struct kvmm_region *r;
	uint32_t s, ids[2 * PPB];
	char go;

	if (kvmm_connect(&co, &c) || kvmm_region_create(c, &ro, &r) ||
	    kvmm_seq_open(r, &s) || kvmm_seq_extend(r, s, 2 * TPB + 10))
		return 1;
	for (uint32_t l = 0; l < 2; l++) {
		memset((void *)kvmm_seq_k_ptr(r, s, l), 0xa0 + l,
		       2 * TPB * 256);
		memset((void *)kvmm_seq_v_ptr(r, s, l), 0xb0 + l,
		       2 * TPB * 256);
	}
	if (kvmm_block_publish(r, s, 0, 2, 0, hashes) != 2)
		return 2;
	if (kvmm_seq_block_pages(r, s, 0, ids, PPB) != PPB ||
	    kvmm_seq_block_pages(r, s, 1, ids + PPB, PPB) != PPB)
		return 3;
	if (write(wr, ids, sizeof(ids)) != sizeof(ids) || read(rd, &go, 1) != 1)
		return 4;
	kvmm_disconnect(c);
	return 0;
}

int main(void)
{
	struct kvmm_connect_opts co = { .size = sizeof(co), .name = "B" };
	struct kvmm_stats ks = { .size = sizeof(ks) };
	struct kvmm_status_reply st;
	struct td_daemon d;
	struct kvmm_conn *c;
	struct kvmm_region *r;
	uint32_t a_ids[2 * PPB], b_ids[PPB], s1, s2, n;
	uint64_t imported;
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
		t_fail("writer failed: %d", WEXITSTATUS(status));
	}

	t_ok(kvmm_connect(&co, &c));
	t_ok(kvmm_region_create(c, &ro, &r));
	err = kvmm_seq_open_prefix(r, hashes, 3, &s1, &n);
	if (err == -EOPNOTSUPP)
		t_skip("kvmmd built without the block cache");
	t_ok(err);
	t_assert_eq(n, 2);
	t_assert_eq(kvmm_seq_len(r, s1), 2 * TPB);
	for (uint32_t b = 0; b < 2; b++) {
		t_assert_eq(kvmm_seq_block_pages(r, s1, b, b_ids, PPB), PPB);
		for (int i = 0; i < PPB; i++)
			t_assert_eq(b_ids[i], a_ids[b * PPB + i]);
	}
	for (uint32_t l = 0; l < 2; l++) {
		const uint8_t *k = (const uint8_t *)kvmm_seq_k_ptr(r, s1, l);
		const uint8_t *v = (const uint8_t *)kvmm_seq_v_ptr(r, s1, l);

		for (int i = 0; i < 2 * TPB * 256; i += 97) {
			t_assert_eq(k[i], 0xa0 + l);
			t_assert_eq(v[i], 0xb0 + l);
		}
	}
	t_ok(kvmm_get_stats(c, &ks));
	imported = ks.pages_imported;
	t_assert_eq(imported, 2 * PPB);

	/* The same prefix again in this process: no new import. */
	t_ok(kvmm_seq_open_prefix(r, hashes, 2, &s2, &n));
	t_assert_eq(n, 2);
	t_assert(s2 != s1);
	t_assert_eq(((uint8_t *)kvmm_seq_v_ptr(r, s2, 1))[TPB * 256 + 5], 0xb1);
	t_ok(kvmm_get_stats(c, &ks));
	t_assert_eq(ks.pages_imported, imported);
	/* Growing past the prefix: a private block. */
	t_ok(kvmm_seq_extend(r, s2, 2 * TPB + 1));
	t_assert_eq(kvmm_seq_block_pages(r, s2, 2, b_ids, PPB), PPB);
	for (int i = 0; i < PPB; i++)
		for (int j = 0; j < 2 * PPB; j++)
			t_assert(b_ids[i] != a_ids[j]);
	t_ok(kvmm_seq_close(r, s1));
	/* s2 still reads the shared pages after s1 unmapped them. */
	t_assert_eq(((uint8_t *)kvmm_seq_k_ptr(r, s2, 0))[77], 0xa0);
	t_ok(kvmm_seq_close(r, s2));

	t_assert_eq(write(down[1], "g", 1), 1);
	t_assert_eq(waitpid(p, &status, 0), p);
	t_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	kvmm_disconnect(c);
	for (int i = 0; i < 300; i++) {
		t_ok(td_status(&d, &st));
		if (!st.pages_mapped && st.sessions == 1 && !st.sequences)
			break;
		usleep(10000);
	}
	t_assert_eq(st.pages_mapped, 0);
	t_assert_eq(st.sequences, 0);
	t_assert_eq(td_stop(&d), 0);
	return 0;
}
