// SPDX-License-Identifier: MIT
/*
 * What copy-on-write of a shared block costs (ABI 1.20, SEQ_UNSHARE):
 * kvmm_seq_block_unshare() of a block a prefix open shared (kvmmd takes
 * fresh pages, copies the block into them, libkvmm maps them read-write
 * in place of the shared ones), against what an engine did before 1.20
 * to write into that block: truncate the sequence to the block's start
 * and extend over it again (fresh pages, then the whole block
 * recomputed on the GPU, which this does not count).  So the ratio is
 * the copy's price over the fresh pages' alone; the recompute it saves
 * is the model's.  One kvmmd (host backend, 64 KiB pages), a block of a
 * Llama-3-8B-like layout (32 layers, 8 KV heads of 128, fp16: 2048 bytes
 * a token, 32 tokens a page, 64 pages = 4 MiB a block); each operation
 * runs on a sequence just opened on the cached block, and only the call
 * is timed.  Rounds alternate which side goes first, round 0 is a
 * warm-up, the ratio is the median of the per-round ratios.
 *
 *   build/bench/unshare [--rounds N] [--ops N]        (default 9, 50)
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/ab_rounds.h"
#include "bench/bench.h"
#include "kvmm/kvmm.h"
#include "tests/lib/daemon.h"

static const char usage[] =
	"usage: unshare [--rounds 2..64] [--ops N]\n"
	"  kvmm_seq_block_unshare() of a shared 4 MiB block over truncate to\n"
	"  its start + extend (fresh pages), one kvmmd, host backend\n";

static const struct kvmm_region_opts layout = {
	.size = sizeof(layout),
	.layers = 32,
	.kv_heads = 8,
	.head_dim = 128,
	.dtype_bytes = 2,
	.max_seqs = 2,
	.max_tokens = 64,
};
static const uint64_t hash = 0xc0e5eed1;

struct side {
	struct kvmm_region *r;
	uint32_t tpb;
	bool copy; /* unshare; else truncate to 0 + extend */
};

static void die(const char *what, int err)
{
	fprintf(stderr, "unshare: %s: %s\n", what, strerror(-err));
	exit(1);
}

/* ns per operation over n of them, each on a fresh prefix open. */
static double ops(void *arg, int n)
{
	struct side *s = arg;
	double t = 0;

	for (int i = 0; i < n; i++) {
		uint32_t seq, nb;
		double t0;
		int err = kvmm_seq_open_prefix(s->r, &hash, 1, &seq, &nb);

		if (err || nb != 1)
			die("prefix open", err ? err : -ENOENT);
		t0 = now_s();
		if (s->copy)
			err = kvmm_seq_block_unshare(s->r, seq, 0);
		else
			err = kvmm_seq_truncate(s->r, seq, 0) ?:
				      kvmm_seq_extend(s->r, seq, s->tpb);
		t += now_s() - t0;
		if (err)
			die(s->copy ? "unshare" : "truncate + extend", err);
		if (kvmm_seq_block_readonly(s->r, seq, 0) != 0)
			die("block still read-only", -EROFS);
		err = kvmm_seq_close(s->r, seq);
		if (err)
			die("close", err);
	}
	return t * 1e9 / n;
}

int main(int argc, char **argv)
{
	const char *const args[] = { "--gpu-mem", "256M", NULL };
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.name = "bench-unshare",
					.map_ahead_set = 1 };
	struct ab_args ab = { .rounds = 9, .n = 50 };
	struct side cp = { .copy = true }, fresh = { .copy = false };
	struct ab_side a = { "unshare", &cp },
		       b = { "truncate+extend", &fresh };
	struct ab_result res;
	struct td_daemon d;
	struct kvmm_conn *c;
	struct kvmm_region *r;
	uint32_t seq;
	int err;

	if (bench_help(argc, argv, usage))
		return 0;
	for (int i = 1; i < argc; i += 2) {
		if (i + 1 < argc && !strcmp(argv[i], "--rounds"))
			ab.rounds = atoi(argv[i + 1]);
		else if (i + 1 < argc && !strcmp(argv[i], "--ops"))
			ab.n = atoi(argv[i + 1]);
		else
			return bench_usage_error("unshare", argv[i], usage);
	}
	if (ab.rounds < 2 || ab.rounds > AB_MAX_ROUNDS || ab.n < 1)
		return bench_usage_error("unshare", "--rounds/--ops", usage);
	err = td_start(&d, args);
	if (err)
		die("kvmmd", err);
	co.socket_path = d.sock;
	err = kvmm_connect(&co, &c);
	if (!err)
		err = kvmm_region_create(c, &layout, &r);
	if (err)
		die("connect", err);
	/* the cached block: written once, published, its sequence closed */
	cp.r = fresh.r = r;
	cp.tpb = fresh.tpb = kvmm_region_tokens_per_block(r);
	err = kvmm_seq_open(r, &seq) ?: kvmm_seq_extend(r, seq, cp.tpb);
	if (err)
		die("publisher's extend", err);
	for (uint32_t l = 0; l < layout.layers; l++) {
		memset((void *)(uintptr_t)kvmm_seq_k_ptr(r, seq, l), 0x11 + l,
		       64 * 1024);
		memset((void *)(uintptr_t)kvmm_seq_v_ptr(r, seq, l), 0x51 + l,
		       64 * 1024);
	}
	if (kvmm_block_publish(r, seq, 0, 1, 0, &hash) != 1)
		die("publish", -EIO);
	err = kvmm_seq_close(r, seq);
	if (err)
		die("close", err);
	ab_run(&ab, ops, &a, &b, true, &res);
	kvmm_disconnect(c);
	td_stop(&d);
	printf("a 4 MiB shared block made writable: unshare (copy) %.1f us, truncate + extend (fresh pages, to recompute) %.1f us (medians of %d rounds of %d); unshare / truncate+extend %.3f\n",
	       res.a / 1000, res.b / 1000, res.rounds, ab.n, res.ratio);
	printf("{\"bench\":\"unshare\",\"baseline\":\"truncate-extend\",\"unshare_us\":%.3f,\"baseline_us\":%.3f,\"ratio\":%.4f}\n",
	       res.a / 1000, res.b / 1000, res.ratio);
	return 0;
}
