// SPDX-License-Identifier: MIT
/*
 * What a telemetry poll costs with a large kvmm_blocks map of which few
 * entries changed: the loader's poll, which reads the entries the
 * kvmm_dirty ring names, against a walk of the whole map (a pin reader's
 * poll on the same maps, which is what every poll did before: batched
 * lookups of every entry, a new snapshot, a comparison with the last).
 * The bench loads the programs on itself, fills the map with N blocks
 * (default 1,048,576; the map has an eighth more room), then each round
 * fires CHANGED accesses (default 100 blocks) before each of POLLS pairs
 * of polls, one of either kind, alternating which goes first; the ratio
 * is the median of the per-round ratios (the first round warms up).  At the end both
 * snapshots must agree on every block.  Needs root and BPF; prints
 * nulls otherwise.
 *
 *   sudo build/bench/tel-poll-delta [--blocks N] [--changed N]
 *                                   [--rounds N] [--polls N]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"
#include "ebpf/probes.h"
#include "ebpf/telemetry.h"
#include "tests/lib/bpf_pins.h"

#define MAX_ROUNDS 64
#define CHUNK 4096 /* records a probe carries */
#define BASE 0x7d1e000000000000ull

static struct kvmm_access_rec *recs;
static unsigned int next_changed;

/* The loader on this executable with a map of max_blocks entries. */
static struct tel *open_loader(uint32_t max_blocks, char *pin, size_t len)
{
	static char self[4096];
	static const char *targets[2] = { self, NULL };
	struct tel_opts o = { .size = sizeof(o) };
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	struct tel *t;

	if (n <= 0 || !HAVE_BPF || geteuid() != 0)
		return NULL;
	self[n] = 0;
	snprintf(pin, len, "/sys/fs/bpf/kvmm-bench-delta-%d", (int)getpid());
	bpf_pins_own(pin);
	o.mode = TEL_MODE_BPF;
	o.pin_root = pin;
	o.targets = targets;
	o.max_blocks = max_blocks;
	o.quiet = true;
	return tel_open(&o, &t) ? NULL : t;
}

/* `changed` blocks of the map accessed once more (the next ones round). */
static void change(unsigned int blocks, unsigned int changed)
{
	for (unsigned int i = 0; i < changed; i++) {
		recs[i] = (struct kvmm_access_rec){
			.hash = BASE + (next_changed + i) % blocks,
			.seq = 2,
			.tier = KVMM_TEL_TIER_GPU,
		};
	}
	next_changed = (next_changed + changed) % blocks;
	kvmm_probe_access(2, recs, changed);
}

/*
 * Seconds per poll of the walk (ref) and of the loader (t) over n polls,
 * each pair after `changed` accesses (so both see them), in the order
 * walk_first says.
 */
static int time_polls(struct tel *t, struct tel *ref, unsigned int n,
		      unsigned int blocks, unsigned int changed,
		      bool walk_first, double *walk_s, double *delta_s)
{
	double t0;

	*walk_s = *delta_s = 0;
	for (unsigned int i = 0; i < n; i++) {
		change(blocks, changed);
		for (int k = 0; k < 2; k++) {
			bool walk = walk_first ? k == 0 : k == 1;

			t0 = now_s();
			if (tel_poll(walk ? ref : t))
				return -1;
			*(walk ? walk_s : delta_s) += now_s() - t0;
		}
	}
	*walk_s /= n;
	*delta_s /= n;
	return 0;
}

/* The loader's snapshot against the walk's: blocks that differ, and
 * blocks only the loader has (the map's LRU dropped them without a
 * record: they stay until a walk, up to an eighth of the map). */
struct agree {
	struct tel *ref;
	size_t differ, dropped;
};

static int check_block(void *arg, uint64_t hash,
		       const struct kvmm_block_stats *s)
{
	struct agree *a = arg;
	struct kvmm_block_stats r;

	if (tel_block_lookup(a->ref, hash, &r))
		a->dropped++;
	else if (r.count != s->count || r.last_ns != s->last_ns)
		a->differ++;
	return 0;
}

int main(int argc, char **argv)
{
	unsigned int blocks = 1u << 20, changed = 100, rounds = 7, polls = 5;
	double walk[MAX_ROUNDS], delta[MAX_ROUNDS], ratio[MAX_ROUNDS];
	struct tel_opts ro = { .size = sizeof(ro), .mode = TEL_MODE_PINNED };
	struct tel_poll_stats ps0, ps;
	struct agree ag = { 0 };
	char pin[128];
	struct tel *t, *ref;

	static const char usage[] =
		"usage: tel-poll-delta [--blocks 1024..] [--changed 1..blocks] [--rounds 2..64] [--polls N]\n";

	if (bench_help(argc, argv, usage))
		return 0;
	for (int i = 1; i < argc; i += 2) {
		if (i + 1 >= argc)
			return bench_usage_error("tel-poll-delta", argv[i],
						 usage);
		if (!strcmp(argv[i], "--blocks"))
			blocks = (unsigned int)atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--changed"))
			changed = (unsigned int)atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--rounds"))
			rounds = (unsigned int)atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--polls"))
			polls = (unsigned int)atoi(argv[i + 1]);
		else
			return bench_usage_error("tel-poll-delta", argv[i],
						 usage);
	}
	if (blocks < 1024 || !changed || changed > blocks || rounds < 2 ||
	    rounds > MAX_ROUNDS || !polls) {
		fprintf(stderr,
			"usage: tel-poll-delta [--blocks 1024..] [--changed 1..blocks] [--rounds 2..%d] [--polls N]\n",
			MAX_ROUNDS);
		return 2;
	}
	/* an eighth more room: the LRU drops entries before it is full */
	t = open_loader(blocks + blocks / 8, pin, sizeof(pin));
	if (!t || !KVMM_PROBE_ENABLED(access)) {
		printf("no BPF here (needs root and BPF)\n");
		printf("{\"bench\":\"tel-poll-delta\",\"blocks\":%u,\"changed\":%u,\"walk_ms\":null,\"delta_ms\":null,\"ratio\":null}\n",
		       blocks, changed);
		tel_close(t);
		return 0;
	}
	ro.pin_root = pin;
	if (tel_open(&ro, &ref)) {
		fprintf(stderr, "cannot read the pins under %s\n", pin);
		tel_close(t);
		return 1;
	}
	recs = calloc(changed > CHUNK ? changed : CHUNK, sizeof(*recs));
	if (!recs)
		return 1;
	for (unsigned int i = 0; i < blocks; i += CHUNK) {
		unsigned int n = blocks - i < CHUNK ? blocks - i : CHUNK;

		for (unsigned int j = 0; j < n; j++)
			recs[j] = (struct kvmm_access_rec){
				.hash = BASE + i + j,
				.seq = 1,
				.tier = KVMM_TEL_TIER_GPU
			};
		kvmm_probe_access(1, recs, n);
	}
	/* the first polls walk the map (and feed every block) */
	if (tel_poll(t) || tel_poll(ref))
		return 1;
	printf("%zu blocks in the map, %u accessed again before each poll\n",
	       tel_block_count(t), changed);
	tel_poll_stats(t, &ps0);
	for (unsigned int r = 0; r < rounds; r++) {
		/* alternate which goes first */
		if (time_polls(t, ref, polls, blocks, changed, !(r & 1),
			       &walk[r], &delta[r]))
			return 1;
		ratio[r] = delta[r] / walk[r];
		printf("round %u: walk %.3f ms, changed only %.3f ms a poll (%.4f)\n",
		       r, walk[r] * 1e3, delta[r] * 1e3, ratio[r]);
	}
	tel_poll_stats(t, &ps);
	/* both read every change: the same snapshot */
	if (tel_poll(t) || tel_poll(ref))
		return 1;
	ag.ref = ref;
	tel_block_foreach(t, check_block, &ag);
	if (tel_block_count(t) != tel_block_count(ref) + ag.dropped)
		ag.differ++;
	/* round 0 warms up */
	double w = median(walk + 1, rounds - 1),
	       d = median(delta + 1, rounds - 1),
	       m = median(ratio + 1, rounds - 1);

	printf("poll of %u blocks, %u changed: walk %.3f ms, changed only %.3f ms: ratio %.4f; %llu walks and %llu entries read by key in %llu polls; snapshots %s\n",
	       blocks, changed, w * 1e3, d * 1e3, m,
	       (unsigned long long)(ps.full_walks - ps0.full_walks),
	       (unsigned long long)(ps.keys_read - ps0.keys_read),
	       (unsigned long long)(ps.polls - ps0.polls),
	       ag.differ ? "DIFFER" : "agree");
	if (ag.dropped)
		printf("%zu blocks the map's LRU dropped are still in the loader's snapshot (until its next walk)\n",
		       ag.dropped);
	printf("{\"bench\":\"tel-poll-delta\",\"blocks\":%u,\"changed\":%u,\"walk_ms\":%.3f,\"delta_ms\":%.3f,\"ratio\":%.4f,\"walks\":%llu,\"keys_read\":%llu,\"agree\":%s,\"lru_dropped_kept\":%zu}\n",
	       blocks, changed, w * 1e3, d * 1e3, m,
	       (unsigned long long)(ps.full_walks - ps0.full_walks),
	       (unsigned long long)(ps.keys_read - ps0.keys_read),
	       ag.differ ? "false" : "true", ag.dropped);
	free(recs);
	tel_close(ref);
	tel_close(t);
	return ag.differ ? 1 : 0;
}
