// SPDX-License-Identifier: MIT
/*
 * timeout: 90
 * Copy-on-write of a shared cached block (SEQ_UNSHARE, ABI 1.20), real
 * kvmmd (host backend), real processes.  A publisher process writes a
 * pattern into two blocks (every layer, K and V) and publishes them; a
 * reader process opens the prefix and
 *   (a) unshares block 1 (kvmm_seq_block_unshare()): it reads the same
 *       bytes at the same addresses, the block is writable now and block
 *       0 still read-only; it writes new bytes there, and a third reader
 *       (the test process) still gets the publisher's bytes from the
 *       cache; a second unshare is 0 and copies nothing; TIER_STATS and
 *       kvmm_stats count one block; bad blocks are -ENODATA / -EINVAL;
 *       on the wire, kvmmd answers an own block with no block and bad
 *       requests (flags, reserved, block, ids) with their errors;
 *   (b) a write into block 0, still shared, kills the writing child with
 *       SIGSEGV (tests/cache-shared-readonly.c covers the rest of that);
 *   (c) truncated into block 0, an extend unshares it by itself: the
 *       tokens below the cut are the publisher's, the block writable, and
 *       the third reader's view unchanged;
 *   (d) with the uid's quota at 1 page, unsharing a block of a second
 *       sequence on the prefix is -EDQUOT, and so is an extend from inside
 *       one: the block stays read-only (a write is SIGSEGV) with the
 *       publisher's bytes, no copy counted; with the quota lifted the
 *       extend unshares it;
 *   (e) against a kvmmd whose HELLO says 1.19 (KVMMD_TEST_ABI_MINOR=19)
 *       kvmm_seq_block_unshare() is -EOPNOTSUPP without a message sent,
 *       and the extend from inside a shared block -EROFS, as before;
 *   (f) ADMIN_REVOKE of the reader's sequence racing with its unshares
 *       (truncate into block 1, extend) for 40 rounds: every call ends in
 *       0 or a revocation's error, kvmmd and libkvmm agree on the pages
 *       held after each round, and once the reader is gone the pool holds
 *       only the cache's pages (none mapped, none revoking).
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "kvmm/lib/client.h"
#include "tests/lib/admin_revoke.h"
#include "tests/lib/daemon.h"
#include "tests/lib/page_counts.h"
#include "tests/lib/test.h"
#include "tests/lib/wait.h"

#define TPB 256
#define TOKEN_BYTES 256
#define BLOCK_BYTES (TPB * TOKEN_BYTES)
#define LAYERS 2
#define PPB (2 * LAYERS)
#define ROUNDS 40

static struct kvmm_region_opts ro = {
	.size = sizeof(ro),
	.layers = LAYERS,
	.kv_heads = 2,
	.head_dim = 64,
	.dtype_bytes = 2,
	.max_seqs = 4,
	.max_tokens = 2048,
};
static const uint64_t hashes[2] = { 0xc0e0001, 0xc0e0002 };

static uint8_t pattern(uint32_t layer, int v, uint32_t block)
{
	return (uint8_t)(0x40 + 16 * layer + 8 * v + block);
}

static uint8_t *kv(struct kvmm_region *r, uint32_t s, uint32_t l, int v)
{
	return (uint8_t *)(uintptr_t)(v ? kvmm_seq_v_ptr(r, s, l) :
					  kvmm_seq_k_ptr(r, s, l));
}

/* No map-ahead: the quota case counts every page. */
static void connect_plain(struct kvmm_conn **c)
{
	struct kvmm_connect_opts o = { .size = sizeof(o), .map_ahead_set = 1 };

	t_ok(kvmm_connect(&o, c));
}

/* Token range [from, to) of block b of every layer, K and V, as the
 * publisher wrote it: 0, or 1 + the first layer that differs. */
static int tokens_differ(struct kvmm_region *r, uint32_t s, uint32_t b,
			 uint32_t from, uint32_t to)
{
	for (uint32_t l = 0; l < LAYERS; l++)
		for (int v = 0; v < 2; v++) {
			const uint8_t *p = kv(r, s, l, v) + b * BLOCK_BYTES;

			for (size_t i = from * TOKEN_BYTES;
			     i < to * TOKEN_BYTES; i++)
				if (p[i] != pattern(l, v, b))
					return (int)l + 1;
		}
	return 0;
}

static int prefix_differs(struct kvmm_region *r, uint32_t s)
{
	return tokens_differ(r, s, 0, 0, TPB) ?: tokens_differ(r, s, 1, 0, TPB);
}

/* Publish the two blocks from a sequence of c (left open). */
static void publish(struct kvmm_region *r)
{
	uint32_t s;

	t_ok(kvmm_seq_open(r, &s));
	t_ok(kvmm_seq_extend(r, s, 2 * TPB + 3));
	for (uint32_t l = 0; l < LAYERS; l++)
		for (int v = 0; v < 2; v++)
			for (uint32_t b = 0; b < 2; b++)
				memset(kv(r, s, l, v) + b * BLOCK_BYTES,
				       pattern(l, v, b), BLOCK_BYTES);
	t_assert_eq(kvmm_block_publish(r, s, 0, 2, 0, hashes), 2);
}

/* The publisher process: publishes, says so on wr, waits for rd. */
static int publisher(int wr, int rd)
{
	struct kvmm_conn *c;
	struct kvmm_region *r;
	char go;

	connect_plain(&c);
	t_ok(kvmm_region_create(c, &ro, &r));
	publish(r);
	if (write(wr, "p", 1) != 1 || read(rd, &go, 1) != 1)
		return 3;
	kvmm_disconnect(c);
	return 0;
}

/* Fork a child that writes 0xee at p; its wait status. */
static int write_in_child(volatile uint8_t *p)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		signal(SIGSEGV, SIG_DFL); /* the fault's, not a sanitizer's */
		*p = 0xee;
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	return status;
}

static bool segv(int status)
{
	return WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV;
}

static uint64_t unshared_here(struct kvmm_conn *c)
{
	struct kvmm_stats st = { .size = sizeof(st) };

	t_ok(kvmm_get_stats(c, &st));
	return st.blocks_unshared;
}

static uint64_t unshared_daemon(struct kvmm_conn *c)
{
	struct kvmm_tier_stats_reply ts;

	t_ok(kvmm_tier_stats(c, &ts, sizeof(ts)));
	t_assert_eq(ts.size, sizeof(ts));
	return ts.blocks_unshared;
}

static void set_quota(const char *sock, uint64_t bytes)
{
	t_ok(td_set_quota(sock, (uint32_t)getuid(), bytes));
}

/* A third reader: the cache still holds the publisher's bytes. */
static void third_reader_sees_pattern(void)
{
	struct kvmm_conn *c;
	struct kvmm_region *r;
	uint32_t s, n;

	connect_plain(&c);
	t_ok(kvmm_region_create(c, &ro, &r));
	t_ok(kvmm_seq_open_prefix(r, hashes, 2, &s, &n));
	t_assert_eq(n, 2);
	t_assert_eq(prefix_differs(r, s), 0);
	kvmm_disconnect(c);
}

/* SEQ_UNSHARE on the wire (no libkvmm call): the status, the reply's
 * nr_blocks in *nr. */
static int raw_unshare(struct kvmm_region *r, uint32_t region, uint32_t seq,
		       uint32_t block, uint32_t flags, uint64_t reserved,
		       uint32_t *nr)
{
	struct kvmm_seq_unshare un = { .size = sizeof(un),
				       .region_id = region,
				       .seq_id = seq,
				       .block = block,
				       .flags = flags,
				       .reserved = { reserved } };
	struct kvmm_seq_extend_reply rep = { 0 };
	size_t len = 0;
	int err = kc_request(r->conn, KVMM_CMD_SEQ_UNSHARE, &un, sizeof(un),
			     &rep, sizeof(rep), &len);

	*nr = err ? UINT32_MAX : rep.nr_blocks;
	if (!err &&
	    (len != sizeof(rep) || rep.first_block != block || rep.nr_fds))
		t_fail("SEQ_UNSHARE of an own block: len %zu, block %u, %u fds",
		       len, rep.first_block, rep.nr_fds);
	return err;
}

/* The reader process: (a) to (d); answers on wr, waits on rd. */
static int reader(const char *sock, int wr, int rd)
{
	struct kvmm_conn *c;
	struct kvmm_region *r;
	uint32_t s, s2, n;
	uint64_t k1;
	char go;

	connect_plain(&c);
	t_ok(kvmm_region_create(c, &ro, &r));
	t_ok(kvmm_seq_open_prefix(r, hashes, 2, &s, &n));
	t_assert_eq(n, 2);
	t_assert_eq(prefix_differs(r, s), 0);
	t_assert_eq(kvmm_seq_block_readonly(r, s, 1), 1);

	/* (a) */
	k1 = kvmm_seq_k_ptr(r, s, 1);
	t_ok(kvmm_seq_block_unshare(r, s, 1));
	t_assert_eq(kvmm_seq_k_ptr(r, s, 1), k1);
	t_assert_eq(kvmm_seq_block_readonly(r, s, 1), 0);
	t_assert_eq(kvmm_seq_block_readonly(r, s, 0), 1);
	t_assert_eq(prefix_differs(r, s), 0);
	t_assert_eq(kvmm_seq_len(r, s), 2 * TPB);
	for (uint32_t l = 0; l < LAYERS; l++)
		for (int v = 0; v < 2; v++)
			memset(kv(r, s, l, v) + BLOCK_BYTES + 7 * TOKEN_BYTES,
			       0x99, 3 * TOKEN_BYTES);
	t_assert_eq(kv(r, s, 1, 1)[BLOCK_BYTES + 8 * TOKEN_BYTES], 0x99);
	t_assert_eq(tokens_differ(r, s, 1, 0, 7), 0);
	t_assert_eq(tokens_differ(r, s, 1, 10, TPB), 0);
	t_assert_eq(unshared_here(c), 1);
	t_assert_eq(unshared_daemon(c), 1);
	/* the sequence's own now: nothing asked, nothing copied */
	t_ok(kvmm_seq_block_unshare(r, s, 1));
	t_assert_eq(unshared_here(c), 1);
	t_assert_eq(unshared_daemon(c), 1);
	t_assert_eq(kvmm_seq_block_unshare(r, s, 5), -ENODATA);
	t_assert_eq(kvmm_seq_block_unshare(r, s, 8), -EINVAL);
	t_assert_eq(kvmm_seq_block_unshare(r, 3, 0), -EINVAL);
	/* kvmmd itself: an own block is answered with no block (nothing
	 * copied), bad requests with their errors */
	t_ok(raw_unshare(r, r->id, s, 1, 0, 0, &n));
	t_assert_eq(n, 0);
	t_assert_eq(raw_unshare(r, r->id, s, 0, 1, 0, &n), -EINVAL);
	t_assert_eq(raw_unshare(r, r->id, s, 0, 0, 1, &n), -EINVAL);
	t_assert_eq(raw_unshare(r, r->id, s, 8, 0, 0, &n), -EINVAL);
	t_assert_eq(raw_unshare(r, r->id, s, 5, 0, 0, &n), -ENODATA);
	t_assert_eq(raw_unshare(r, r->id, 3, 0, 0, 0, &n), -ENOENT);
	t_assert_eq(raw_unshare(r, r->id + 1000, s, 0, 0, 0, &n), -ENOENT);
	t_assert_eq(unshared_daemon(c), 1);
	if (write(wr, "a", 1) != 1 || read(rd, &go, 1) != 1)
		return 20;

	/* (b) */
	t_assert(segv(write_in_child(kv(r, s, 0, 0) + 5)));
	t_assert_eq(tokens_differ(r, s, 0, 0, TPB), 0);

	/* (c) */
	t_ok(kvmm_seq_truncate(r, s, 100));
	t_ok(kvmm_seq_extend(r, s, 120));
	t_assert_eq(kvmm_seq_len(r, s), 120);
	t_assert_eq(kvmm_seq_block_readonly(r, s, 0), 0);
	t_assert_eq(tokens_differ(r, s, 0, 0, 100), 0);
	for (uint32_t l = 0; l < LAYERS; l++)
		for (int v = 0; v < 2; v++)
			memset(kv(r, s, l, v) + 100 * TOKEN_BYTES, 0x55,
			       20 * TOKEN_BYTES);
	t_assert_eq(kv(r, s, 1, 0)[119 * TOKEN_BYTES], 0x55);
	t_assert_eq(unshared_here(c), 2);
	t_assert_eq(unshared_daemon(c), 2);
	if (write(wr, "c", 1) != 1 || read(rd, &go, 1) != 1)
		return 21;

	/* (d) */
	t_ok(kvmm_seq_open_prefix(r, hashes, 2, &s2, &n));
	t_assert_eq(n, 2);
	set_quota(sock, 64 * 1024);
	t_assert_eq(kvmm_seq_block_unshare(r, s2, 0), -EDQUOT);
	t_assert_eq(kvmm_seq_block_readonly(r, s2, 0), 1);
	t_ok(kvmm_seq_truncate(r, s2, TPB + 5));
	t_assert_eq(kvmm_seq_extend(r, s2, TPB + 9), -EDQUOT);
	t_assert_eq(kvmm_seq_len(r, s2), TPB + 5);
	t_assert_eq(kvmm_seq_block_readonly(r, s2, 1), 1);
	t_assert(segv(write_in_child(kv(r, s2, 1, 1) + BLOCK_BYTES + 3)));
	t_assert_eq(prefix_differs(r, s2), 0);
	t_assert_eq(unshared_here(c), 2);
	t_assert_eq(unshared_daemon(c), 2);
	set_quota(sock, 0);
	t_ok(kvmm_seq_extend(r, s2, TPB + 9));
	t_assert_eq(kvmm_seq_block_readonly(r, s2, 1), 0);
	t_assert_eq(tokens_differ(r, s2, 1, 0, 5), 0);
	t_assert_eq(unshared_daemon(c), 3);
	kvmm_disconnect(c);
	return 0;
}

/* (e): a kvmmd that says 1.19. */
static void old_daemon(void)
{
	struct kvmm_stats a = { .size = sizeof(a) }, b = { .size = sizeof(b) };
	const char *const extra[] = { NULL };
	struct kvmm_conn *c;
	struct kvmm_region *r;
	struct td_daemon d;
	struct kvmm_daemon_info di = { .size = sizeof(di) };
	uint64_t base;
	uint32_t s, n;

	setenv("KVMMD_TEST_ABI_MINOR", "19", 1);
	td_start_ok(&d, extra);
	unsetenv("KVMMD_TEST_ABI_MINOR");
	connect_plain(&c);
	t_ok(kvmm_get_daemon_info(c, &di));
	t_assert_eq(di.abi_minor, 19);
	t_ok(kvmm_region_create(c, &ro, &r));
	publish(r);
	t_ok(kvmm_seq_open_prefix(r, hashes, 2, &s, &n));
	t_assert_eq(n, 2);
	/* two STATS in a row: what one costs in socket commands */
	t_ok(kvmm_get_stats(c, &a));
	t_ok(kvmm_get_stats(c, &b));
	base = b.cmds_socket - a.cmds_socket;
	t_ok(kvmm_get_stats(c, &a));
	t_assert_eq(kvmm_seq_block_unshare(r, s, 1), -EOPNOTSUPP);
	t_ok(kvmm_get_stats(c, &b));
	t_assert_eq(b.cmds_socket - a.cmds_socket, base);
	t_ok(kvmm_seq_truncate(r, s, TPB + 5));
	t_assert_eq(kvmm_seq_extend(r, s, TPB + 6), -EROFS);
	t_assert_eq(kvmm_seq_block_readonly(r, s, 1), 1);
	t_assert_eq(b.blocks_unshared, 0);
	kvmm_disconnect(c);
	td_stop_ok(&d);
}

/* (f), the racing reader: ROUNDS rounds of open, truncate into block 1,
 * extend; its ids go to the parent first. */
static int racer(int wr, int rd)
{
	struct kvmm_stats st = { .size = sizeof(st) };
	struct kvmm_conn *c;
	struct kvmm_region *r;
	uint32_t ids[2], s, n;
	char go;

	connect_plain(&c);
	t_ok(kvmm_region_create(c, &ro, &r));
	t_ok(kvmm_get_stats(c, &st));
	ids[0] = st.session_id;
	ids[1] = r->id;
	if (write(wr, ids, sizeof(ids)) != sizeof(ids) || read(rd, &go, 1) != 1)
		return 30;
	for (int i = 0; i < ROUNDS; i++) {
		int err;

		t_ok(kvmm_seq_open_prefix(r, hashes, 2, &s, &n));
		t_assert(kvmm_process_revocations(c) >= 0);
		if (kvmm_seq_len(r, s) > TPB + 7)
			t_ok(kvmm_seq_truncate(r, s, TPB + 7));
		err = kvmm_seq_extend(r, s, TPB + 8);
		if (err && err != -ENODATA) {
			fprintf(stderr, "round %d: extend %d\n", i, err);
			return 31;
		}
		t_assert(kvmm_process_revocations(c) >= 0);
		/* what kvmmd counts held is what libkvmm holds */
		t_assert_eq(pc_held(c), pc_client_pages(c));
		/* a block still shared has the publisher's bytes */
		for (uint32_t b = 0; b < 2; b++)
			if (kvmm_seq_block_readonly(r, s, b) == 1)
				t_assert_eq(tokens_differ(r, s, b, 0, 7), 0);
		t_ok(kvmm_seq_close(r, s));
	}
	kvmm_disconnect(c);
	return 0;
}

static void race(struct td_daemon *d)
{
	struct kvmm_status_reply st;
	struct kvmm_tier_stats_reply ts;
	struct kvmm_conn *admin, *c;
	int up[2], down[2], status;
	uint32_t ids[2];
	pid_t p;

	t_ok(pipe(up));
	t_ok(pipe(down));
	p = fork();
	if (p == 0)
		_exit(racer(up[1], down[0]));
	t_assert_eq(read(up[0], ids, sizeof(ids)), (ssize_t)sizeof(ids));
	t_ok(kc_connect_admin(d->sock, &admin));
	t_assert_eq(write(down[1], "g", 1), 1);
	/* revoke its sequence 0 (the slot each round opens) from block 0,
	 * as fast as kvmmd answers, until the racer is done */
	while (waitpid(p, &status, WNOHANG) == 0) {
		(void)ar_revoke_on(admin, ids[0], ids[1], 0, 0);
		usleep(200);
	}
	kvmm_disconnect(admin);
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		td_dump_log(d);
		t_fail("racer: status %#x", status);
	}
	/* the racer is gone: only the cache's pages are allocated */
	connect_plain(&c);
	t_wait_until(
		20000, t_ok(td_status(d, &st)),
		st.sessions == 2 && !st.pages_mapped && !st.pages_revoking,
		"the racer's session and pages not gone (%llu sessions, %llu pages mapped, %llu revoking)",
		(unsigned long long)st.sessions,
		(unsigned long long)st.pages_mapped,
		(unsigned long long)st.pages_revoking);
	t_ok(kvmm_tier_stats(c, &ts, sizeof(ts)));
	t_assert_eq(st.pages_mapped, 0);
	t_assert_eq(st.pages_revoking, 0);
	t_assert_eq(st.pages_allocated, ts.tiers[0].used_blocks * PPB);
	printf("race: %llu revocations posted, %llu blocks unshared\n",
	       (unsigned long long)st.revocations_posted,
	       (unsigned long long)ts.blocks_unshared);
	/* kvmmctl shows kvmmd's count: JSON always, text when not 0 */
	{
		static char out[65536];
		char want[96];

		t_assert(ts.blocks_unshared > 0);
		t_assert_eq(td_kvmmctl(d->sock, "status --json", out,
				       sizeof(out)),
			    0);
		snprintf(want, sizeof(want), "\"blocks_unshared\":%llu,",
			 (unsigned long long)ts.blocks_unshared);
		if (!strstr(out, want))
			t_fail("no %s in: %s", want, out);
		t_assert_eq(td_kvmmctl(d->sock, "status", out, sizeof(out)), 0);
		snprintf(want, sizeof(want),
			 " %llu shared blocks copied for a sequence",
			 (unsigned long long)ts.blocks_unshared);
		if (!strstr(out, want))
			t_fail("no '%s' in: %s", want, out);
	}
	kvmm_disconnect(c);
}

int main(void)
{
	int up[2], down[2], rup[2], rdown[2], status;
	struct td_daemon d;
	pid_t w, p;
	char ch;

	td_start_ok(&d, NULL);
	t_ok(pipe(up));
	t_ok(pipe(down));
	w = fork();
	if (w == 0)
		_exit(publisher(up[1], down[0]));
	t_assert_eq(read(up[0], &ch, 1), 1);

	t_ok(pipe(rup));
	t_ok(pipe(rdown));
	p = fork();
	if (p == 0)
		_exit(reader(d.sock, rup[1], rdown[0]));
	/* after (a), then after (c): the cache's copy is the publisher's */
	for (int step = 0; step < 2; step++) {
		if (read(rup[0], &ch, 1) != 1)
			break;
		third_reader_sees_pattern();
		t_assert_eq(write(rdown[1], "g", 1), 1);
	}
	t_assert_eq(waitpid(p, &status, 0), p);
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		td_dump_log(&d);
		t_fail("reader: status %#x", status);
	}
	third_reader_sees_pattern();
	/* the publisher goes; its blocks stay cached */
	t_assert_eq(write(down[1], "g", 1), 1);
	t_assert_eq(waitpid(w, &status, 0), w);
	t_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	race(&d); /* (f) */
	third_reader_sees_pattern();
	td_stop_ok(&d);

	old_daemon(); /* (e) */
	printf("ok\n");
	return 0;
}
