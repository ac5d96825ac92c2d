// SPDX-License-Identifier: MIT
/*
 * Shared cached blocks are read-only for their readers (kvmm_seq_open_prefix
 * in kvmm.h): a writer process publishes two blocks; a reader process opens
 * the prefix and
 *   (a) reads the writer's bytes, kvmm_seq_block_readonly() says 1 for the
 *       prefix blocks and 0 for the block it grows past them (writable);
 *   (b) a write into a prefix block kills the writing process with
 *       SIGSEGV (a forked child of the reader writes; its wait status is
 *       checked), and the byte is unchanged for the reader;
 *   (c) extending from a length inside a prefix block (truncated into it)
 *       makes that block the sequence's own first (ABI 1.20: kvmmd copies
 *       it, tests/cache-unshare.c; -EROFS before, which that test checks
 *       against a 1.19 daemon), truncating to the block's start and
 *       extending gives it fresh writable pages;
 * and a later reader, in a third process, still gets the original bytes.
 * Until 5 December libkvmm mapped every block read-write: the child's
 * write succeeded and every later reader got the changed byte.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

#define TPB 256
#define TOKEN_BYTES 256
#define BLOCK_BYTES (TPB * TOKEN_BYTES)

static struct kvmm_region_opts ro = {
	.size = sizeof(ro),
	.layers = 2,
	.kv_heads = 2,
	.head_dim = 64,
	.dtype_bytes = 2,
	.max_seqs = 4,
	.max_tokens = 2048,
};
static const uint64_t hashes[2] = { 0x51a7e0001, 0x51a7e0002 };

static uint8_t pattern(uint32_t layer, int v, uint32_t block)
{
	return (uint8_t)(0x40 + 16 * layer + 8 * v + block);
}

/* Publishes blocks 0 and 1, then waits for a byte on rd. */
static int writer(int wr, int rd)
{
	struct kvmm_conn *c;
	struct kvmm_region *r;
	uint32_t s;
	char go;

	if (kvmm_connect(NULL, &c) || kvmm_region_create(c, &ro, &r) ||
	    kvmm_seq_open(r, &s) || kvmm_seq_extend(r, s, 2 * TPB + 3))
		return 1;
	for (uint32_t l = 0; l < 2; l++)
		for (uint32_t b = 0; b < 2; b++) {
			memset((char *)kvmm_seq_k_ptr(r, s, l) +
				       b * BLOCK_BYTES,
			       pattern(l, 0, b), BLOCK_BYTES);
			memset((char *)kvmm_seq_v_ptr(r, s, l) +
				       b * BLOCK_BYTES,
			       pattern(l, 1, b), BLOCK_BYTES);
		}
	/* the publisher's own blocks stay writable */
	if (kvmm_block_publish(r, s, 0, 2, 0, hashes) != 2 ||
	    kvmm_seq_block_readonly(r, s, 0) != 0)
		return 2;
	if (write(wr, "p", 1) != 1 || read(rd, &go, 1) != 1)
		return 3;
	kvmm_disconnect(c);
	return 0;
}

/* Every byte of the prefix as the writer wrote it: 0, or the first
 * offending offset + 1. */
static long prefix_differs(struct kvmm_region *r, uint32_t s)
{
	for (uint32_t l = 0; l < 2; l++)
		for (int v = 0; v < 2; v++) {
			const uint8_t *p =
				(const uint8_t *)(v ? kvmm_seq_v_ptr(r, s, l) :
						      kvmm_seq_k_ptr(r, s, l));

			for (long i = 0; i < 2 * BLOCK_BYTES; i++)
				if (p[i] != pattern(l, v, i / BLOCK_BYTES))
					return i + 1;
		}
	return 0;
}

/* Fork a child that writes 0xee at p; its wait status. */
static int write_in_child(volatile uint8_t *p)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		/* die of the fault itself, not of a sanitizer's report */
		signal(SIGSEGV, SIG_DFL);
		*p = 0xee;
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	return status;
}

/* The reader: (a), (b), (c) above; exits 0 or the failing step. */
static int reader(void)
{
	struct kvmm_conn *c;
	struct kvmm_region *r;
	uint32_t s, n;
	uint8_t *k0, *v1;
	int status;

	if (kvmm_connect(NULL, &c) || kvmm_region_create(c, &ro, &r) ||
	    kvmm_seq_open_prefix(r, hashes, 2, &s, &n) || n != 2)
		return 10;
	/* (a) */
	if (prefix_differs(r, s))
		return 11;
	if (kvmm_seq_block_readonly(r, s, 0) != 1 ||
	    kvmm_seq_block_readonly(r, s, 1) != 1 ||
	    kvmm_seq_block_readonly(r, s, 2) != -ENODATA)
		return 12;
	if (kvmm_seq_extend(r, s, 2 * TPB + 5) ||
	    kvmm_seq_block_readonly(r, s, 2) != 0)
		return 13;
	k0 = (uint8_t *)kvmm_seq_k_ptr(r, s, 0);
	v1 = (uint8_t *)kvmm_seq_v_ptr(r, s, 1);
	memset(k0 + 2 * BLOCK_BYTES, 0x5a, 5 * TOKEN_BYTES); /* its own */
	/* (b): a write into either prefix block, any layer, K or V */
	status = write_in_child(k0 + 7);
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGSEGV) {
		fprintf(stderr, "write into block 0: status %#x\n", status);
		return 14;
	}
	status = write_in_child(v1 + BLOCK_BYTES + 99);
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGSEGV)
		return 15;
	if (prefix_differs(r, s) || k0[2 * BLOCK_BYTES + 4] != 0x5a)
		return 16;
	/* (c) */
	if (kvmm_seq_truncate(r, s, TPB + 10) ||
	    kvmm_seq_extend(r, s, TPB + 11) || kvmm_seq_len(r, s) != TPB + 11 ||
	    kvmm_seq_block_readonly(r, s, 1) != 0 ||
	    kvmm_seq_block_readonly(r, s, 0) != 1 || prefix_differs(r, s))
		return 17;
	if (kvmm_seq_truncate(r, s, TPB) || kvmm_seq_extend(r, s, TPB + 11) ||
	    kvmm_seq_block_readonly(r, s, 0) != 1 ||
	    kvmm_seq_block_readonly(r, s, 1) != 0)
		return 18;
	memset(k0 + BLOCK_BYTES, 0x77, 11 * TOKEN_BYTES);
	kvmm_disconnect(c);
	return 0;
}

int main(void)
{
	struct kvmm_conn *c;
	struct kvmm_region *r;
	struct td_daemon d;
	uint32_t s, n;
	int up[2], down[2], status, err;
	pid_t w, p;
	char ch;

	err = td_start(&d, NULL);
	if (err)
		t_fail("daemon: %s", strerror(-err));
	t_ok(pipe(up));
	t_ok(pipe(down));
	w = fork();
	if (w == 0)
		_exit(writer(up[1], down[0]));
	if (read(up[0], &ch, 1) != 1) {
		waitpid(w, &status, 0);
		td_dump_log(&d);
		t_fail("writer failed: %d", WEXITSTATUS(status));
	}

	p = fork();
	if (p == 0)
		_exit(reader());
	t_assert_eq(waitpid(p, &status, 0), p);
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		td_dump_log(&d);
		t_fail("reader: status %#x (exit %d)", status,
		       WEXITSTATUS(status));
	}

	/* A later reader gets the writer's bytes, the publisher still
	 * connected or not. */
	t_ok(kvmm_connect(NULL, &c));
	t_ok(kvmm_region_create(c, &ro, &r));
	t_ok(kvmm_seq_open_prefix(r, hashes, 2, &s, &n));
	t_assert_eq(n, 2);
	t_assert_eq(prefix_differs(r, s), 0);
	t_ok(kvmm_seq_close(r, s));
	t_assert_eq(write(down[1], "g", 1), 1);
	t_assert_eq(waitpid(w, &status, 0), w);
	t_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	t_ok(kvmm_seq_open_prefix(r, hashes, 2, &s, &n));
	t_assert_eq(n, 2);
	t_assert_eq(prefix_differs(r, s), 0);
	kvmm_disconnect(c);
	t_assert_eq(td_stop(&d), 0);
	return 0;
}
