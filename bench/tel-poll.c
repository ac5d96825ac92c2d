// SPDX-License-Identifier: MIT
/*
 * What a walk of the BPF map costs with the map full, and what
 * --cache-scope uid|gid adds to it: a walk renames every kvmm_blocks
 * entry with SipHash-2-4 (kvmm/kvmmd/scope.c) before the snapshot merges
 * them.  kvmmd's polls read only the entries that changed
 * (bench/tel-poll-delta); it walks the map at its first poll, after the
 * rename hook is set, after its dirty ring was full, and every poll of a
 * pin reader (kvmmctl trace) walks it.  The bench loads the BPF programs
 * on itself, fires kvmm:access probes for N distinct blocks (default
 * 60,000 of the map's 65,536), then times the polls of a pin reader of
 * those maps with no rename hook (the shared scope: the baseline) and
 * with one that renames as kvmmd's uid scope does, alternated, POLLS
 * polls a round; the ratio is the median of the per-round ratios.
 * Then, renamed, polls begun and ended as an event loop does
 * (tel_poll_begin()/tel_poll_end(): the walk on a thread): the time
 * spent in those two calls, against the whole renamed poll.  Needs root
 * and BPF; prints nulls otherwise.
 *
 *   sudo build/bench/tel-poll [--blocks N] [--rounds N] [--polls N]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/bench_tel.h"
#include "ebpf/probes.h"
#include "ebpf/telemetry.h"
#include "kvmm/kvmmd/siphash.h"

#define MAX_ROUNDS 64
#define CHUNK 4096 /* records a probe carries */

static uint8_t key[KD_SIPHASH_KEY_BYTES] = { 1, 2,  3,	4,  5,	6,  7,	8,
					     9, 10, 11, 12, 13, 14, 15, 16 };

/* As kd_scope_tel_rename() for a BPF entry: the entry's uid || hash. */
static bool rename_uid(void *arg, const struct tel_origin *o, uint64_t *hash)
{
	uint8_t msg[12];
	uint64_t r;

	(void)arg;
	memcpy(msg, &o->uid, 4);
	memcpy(msg + 4, hash, 8);
	r = kd_siphash24(key, msg, sizeof(msg));
	*hash = r ? r : 1;
	return true;
}

/* Seconds per poll over n polls begun and ended as kvmmd's loop does:
 * only the time spent in the two calls (the walk runs on its thread). */
static double time_async(struct tel *t, unsigned int n)
{
	double in_calls = 0, t0;
	int r;

	for (unsigned int i = 0; i < n; i++) {
		t0 = now_s();
		r = tel_poll_begin(t);
		in_calls += now_s() - t0;
		if (r)
			return -1;
		do {
			usleep(1000);
			t0 = now_s();
			r = tel_poll_end(t);
			in_calls += now_s() - t0;
		} while (r == 0);
		if (r < 0)
			return -1;
	}
	return in_calls / n;
}

/* Seconds per poll over n polls. */
static double time_polls(struct tel *t, unsigned int n)
{
	double t0 = now_s();

	for (unsigned int i = 0; i < n; i++)
		if (tel_poll(t))
			return -1;
	return (now_s() - t0) / n;
}

int main(int argc, char **argv)
{
	unsigned int blocks = 60000, rounds = 7, polls = 20;
	double plain[MAX_ROUNDS], renamed[MAX_ROUNDS], ratio[MAX_ROUNDS];
	double async[MAX_ROUNDS];
	struct kvmm_access_rec *recs;
	struct tel *t;

	/* an unknown option, or one without its value, is a usage error
	 * (--help ran the whole benchmark) */
	for (int i = 1; i < argc; i += 2) {
		if (i + 1 >= argc)
			blocks = 0;
		else if (!strcmp(argv[i], "--blocks"))
			blocks = (unsigned int)atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--rounds"))
			rounds = (unsigned int)atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--polls"))
			polls = (unsigned int)atoi(argv[i + 1]);
		else
			blocks = 0;
		if (!blocks)
			break;
	}
	if (!blocks || blocks > 65536 || rounds < 2 || rounds > MAX_ROUNDS ||
	    !polls) {
		fprintf(stderr,
			"usage: tel-poll [--blocks 1..65536] [--rounds 2..%d] [--polls N]\n",
			MAX_ROUNDS);
		return 2;
	}
	t = bench_tel_self("poll");
	if (!t || !KVMM_PROBE_ENABLED(access)) {
		printf("no BPF here (needs root and BPF)\n");
		printf("{\"bench\":\"tel-poll\",\"blocks\":%u,\"plain_ms\":null,\"renamed_ms\":null,\"ratio\":null,\"loop_ms\":null,\"loop_ratio\":null}\n",
		       blocks);
		tel_close(t);
		return 0;
	}
	recs = calloc(blocks, sizeof(*recs));
	if (!recs)
		return 1;
	for (unsigned int i = 0; i < blocks; i++)
		recs[i] = (struct kvmm_access_rec){ .hash = 0x7e1e0000ull + i,
						    .seq = 1,
						    .tier = KVMM_TEL_TIER_GPU };
	for (unsigned int i = 0; i < blocks; i += CHUNK)
		kvmm_probe_access(1, recs + i,
				  blocks - i < CHUNK ? blocks - i : CHUNK);
	/* the walks timed are a pin reader's of the same maps */
	char root[256];
	struct tel_opts ro = { .size = sizeof(ro), .mode = TEL_MODE_PINNED };
	struct tel *loader = t;

	snprintf(root, sizeof(root), "%s", tel_pin_dir(loader));
	*strrchr(root, '/') = 0; /* <root>/v<layout> */
	ro.pin_root = root;
	if (tel_open(&ro, &t))
		return 1;
	tel_poll(t); /* the first poll feeds every block; later ones none */
	printf("%zu blocks in the map\n", tel_block_count(t));
	for (unsigned int r = 0; r < rounds; r++) {
		bool first = r & 1; /* alternate which goes first */

		for (int k = 0; k < 2; k++) {
			bool ren = first ? k == 0 : k == 1;

			tel_set_rename(t, ren ? rename_uid : NULL, NULL);
			tel_poll(t); /* the snapshot changes names: settle */
			(ren ? renamed : plain)[r] = time_polls(t, polls);
		}
		/* cppcheck-suppress legacyUninitvar ; k 0 and 1 are each
		 * the renamed or the plain run once: both are set */
		ratio[r] = renamed[r] / plain[r];
		/* renamed, as kvmmd polls now: what its loop spends */
		async[r] = time_async(t, polls);
		printf("round %u: plain %.3f ms, renamed %.3f ms a poll (%.2f); begun and ended: %.3f ms on the caller\n",
		       r, plain[r] * 1e3, renamed[r] * 1e3, ratio[r],
		       async[r] * 1e3);
	}
	/* round 0 warms up */
	double p = median(plain + 1, rounds - 1),
	       q = median(renamed + 1, rounds - 1),
	       m = median(ratio + 1, rounds - 1);
	double a = median(async + 1, rounds - 1);

	printf("poll of %u blocks: %.3f ms plain, %.3f ms renamed (uid scope): ratio %.3f; begun and ended (kvmmd's loop): %.3f ms, %.3f of the whole renamed poll\n",
	       blocks, p * 1e3, q * 1e3, m, a * 1e3, a / q);
	printf("{\"bench\":\"tel-poll\",\"blocks\":%u,\"plain_ms\":%.3f,\"renamed_ms\":%.3f,\"ratio\":%.3f,\"loop_ms\":%.3f,\"loop_ratio\":%.3f}\n",
	       blocks, p * 1e3, q * 1e3, m, a * 1e3, a / q);
	free(recs);
	tel_close(t);
	tel_close(loader);
	return 0;
}
