// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * Map-ahead never makes a copy-on-write fail (SEQ_UNSHARE, ABI 1.20), as
 * it never makes an extend fail (tests/lib-mapahead-lend.c): real kvmmd
 * (host backend), a publisher process caches two blocks of a pattern; the
 * test process, libkvmm with 2 blocks mapped ahead, opens them as a
 * prefix (sequence A) and grows a sequence B by one token (1 block and 2
 * ahead).  With the uid's quota set to exactly the pages it holds:
 *   - kvmm_seq_block_unshare() of A's block 1 gives back B's blocks ahead
 *     (blocks_lent) and succeeds: the copy holds the publisher's bytes
 *     and is writable, B keeps its length and its token's bytes;
 *   - with the quota again at what is held and nothing mapped ahead, the
 *     unshare of block 0, and an extend from inside it (truncated into
 *     it, the quota set again), are -EDQUOT: a
 *     real shortage still fails, nothing changed (the block read-only,
 *     nothing lent, no copy counted).
 */
#include <errno.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "tests/lib/daemon.h"
#include "tests/lib/lend.h"
#include "tests/lib/test.h"

#define PAGE (64 * 1024)

static const uint64_t hashes[2] = { 0x1e4d0001, 0x1e4d0002 };

/* A publisher process: two blocks of tag 1's pattern, cached. */
static int publisher(void)
{
	struct kvmm_region *r;
	struct kvmm_conn *c;
	uint32_t s;

	ld_connect(0, &c, &r);
	t_ok(kvmm_seq_open(r, &s));
	t_ok(kvmm_seq_extend(r, s, 2 * LD_TPB));
	ld_fill(r, s, 0, 2 * LD_TPB, 1);
	t_assert_eq(kvmm_block_publish(r, s, 0, 2, 0, hashes), 2);
	t_ok(kvmm_seq_close(r, s));
	kvmm_disconnect(c);
	return 0;
}

/* The uid's quota at exactly the pages c holds; returns them. */
static uint64_t quota_at_held(const char *sock, struct kvmm_conn *c)
{
	struct kvmm_stats st = ld_stats(c);

	t_ok(td_set_quota(sock, (uint32_t)getuid(), st.pages_held * PAGE));
	return st.pages_held;
}

int main(void)
{
	struct kvmm_stats st0, st1, st2;
	struct kvmm_region *r;
	struct kvmm_conn *c;
	struct td_daemon d;
	uint32_t a, b, n = 0;
	uint64_t held;
	int status;
	pid_t p;

	td_start_ok(&d, NULL);
	p = fork();
	t_assert(p >= 0);
	if (p == 0)
		_exit(publisher());
	t_assert_eq(waitpid(p, &status, 0), p);
	t_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	ld_connect(2, &c, &r);
	t_ok(kvmm_seq_open_prefix(r, hashes, 2, &a, &n));
	t_assert_eq(n, 2);
	t_assert_eq(kvmm_seq_block_readonly(r, a, 1), 1);
	t_ok(kvmm_seq_open(r, &b));
	t_ok(kvmm_seq_extend(r, b, 1));
	ld_fill(r, b, 0, 1, 2);
	t_assert(ld_mapped(r, b, 1) && ld_mapped(r, b, 2));

	held = quota_at_held(d.sock, c);
	st0 = ld_stats(c);
	printf("quota at the %llu pages held (B: 1 block and 2 ahead)\n",
	       (unsigned long long)held);
	t_ok(kvmm_seq_block_unshare(r, a, 1));
	st1 = ld_stats(c);
	printf("unshare: %llu blocks lent, %llu copied\n",
	       (unsigned long long)(st1.blocks_lent - st0.blocks_lent),
	       (unsigned long long)(st1.blocks_unshared - st0.blocks_unshared));
	t_assert_eq(st1.blocks_lent - st0.blocks_lent, 2);
	t_assert_eq(st1.blocks_unshared - st0.blocks_unshared, 1);
	t_assert(!ld_mapped(r, b, 1) && !ld_mapped(r, b, 2));
	t_assert_eq(kvmm_seq_len(r, b), 1);
	t_assert_eq(ld_intact(r, b, 1, 2), 1);
	t_assert_eq(kvmm_seq_block_readonly(r, a, 1), 0);
	t_assert_eq(kvmm_seq_block_readonly(r, a, 0), 1);
	t_assert_eq(ld_intact(r, a, 2 * LD_TPB, 1), 2 * LD_TPB);
	ld_fill(r, a, LD_TPB, LD_TPB + 7, 3); /* writable */

	/* nothing ahead now: a real shortage */
	quota_at_held(d.sock, c);
	t_assert_eq(kvmm_seq_block_unshare(r, a, 0), -EDQUOT);
	t_ok(kvmm_seq_truncate(r, a, 5)); /* the copy of block 1 goes */
	quota_at_held(d.sock, c);
	t_assert_eq(kvmm_seq_extend(r, a, 9), -EDQUOT);
	t_assert_eq(kvmm_seq_len(r, a), 5);
	st2 = ld_stats(c);
	t_assert_eq(st2.blocks_lent, st1.blocks_lent);
	t_assert_eq(st2.blocks_unshared, st1.blocks_unshared);
	t_assert_eq(kvmm_seq_block_readonly(r, a, 0), 1);
	t_assert_eq(ld_intact(r, a, 5, 1), 5);

	t_ok(td_set_quota(d.sock, (uint32_t)getuid(), 0));
	kvmm_disconnect(c);
	td_stop_ok(&d);
	printf("ok: the unshare took back the blocks mapped ahead; a real shortage is -EDQUOT\n");
	return 0;
}
