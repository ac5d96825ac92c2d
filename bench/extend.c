// SPDX-License-Identifier: MIT
/*
 * What ABI 1.17 (KVMM_SEQ_EXTEND_COLLECT) costs an extend that is not
 * parked: the round trip of a socket kvmm_seq_extend() by one block (the
 * reply, its fds imported and mapped; map-ahead off) and the truncate to
 * 0 after it, against a kvmmd of this build, over the same against a
 * kvmmd of this build started with KVMMD_TEST_ABI_MINOR=16 (its HELLO says
 * 1.16, so libkvmm sends the extend without the flag, as before 1.17).
 * Both daemons run at once (host backend, 64 KiB pages), with nothing
 * else in their pools; rounds alternate which goes first, round 0 is a
 * warm-up, and the ratio is the median of the per-round ratios.
 *
 * With --baseline-build DIR the second daemon is DIR's kvmmd instead
 * (another build, e.g. main before a change, under the same client), and
 * the ratio is this build's time over DIR's.
 *
 *   build/bench/extend [--rounds N] [--extends N] [--baseline-build DIR]
 *                                                   (default 9, 2000)
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/ab_rounds.h"
#include "kvmm/kvmm.h"
#include "tests/lib/daemon.h"
#include "tests/lib/small_region.h"

struct side {
	const char *name;
	struct td_daemon d;
	struct kvmm_conn *c;
	struct kvmm_region *r;
	uint32_t seq;
};

/* Start side's kvmmd (build: another build's, NULL: this one's; old:
 * standing in for 1.16), connect, open the sequence. */
static int setup(struct side *s, const char *build, bool old)
{
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.name = "bench",
					.map_ahead_set = 1 };
	int e;

	s->name = build ? "baseline" : old ? "abi-1.16" : "this";
	if (old)
		setenv("KVMMD_TEST_ABI_MINOR", "16", 1);
	e = ab_start(&s->d, NULL, build);
	unsetenv("KVMMD_TEST_ABI_MINOR");
	if (e)
		return e;
	co.socket_path = s->d.sock;
	e = kvmm_connect(&co, &s->c);
	if (!e)
		e = kvmm_region_create(s->c, &tr_small_region, &s->r);
	if (!e)
		e = kvmm_seq_open(s->r, &s->seq);
	return e;
}

/* ns per extend by one block + truncate to 0, over n of them. */
static double extends(void *arg, int n)
{
	struct side *s = arg;
	double t0 = now_s();

	for (int i = 0; i < n; i++) {
		if (kvmm_seq_extend(s->r, s->seq, TR_TPB) ||
		    kvmm_seq_truncate(s->r, s->seq, 0)) {
			fprintf(stderr, "extend: %s: extend failed\n", s->name);
			exit(1);
		}
	}
	return (now_s() - t0) * 1e9 / n;
}

int main(int argc, char **argv)
{
	struct side cur = { 0 }, base = { 0 };
	struct ab_side a = { "this build", &cur }, b = { NULL, &base };
	struct ab_args args;
	struct ab_result res;

	if (ab_parse(argc, argv, "extend", "--extends", &args))
		return 2;
	if (setup(&cur, NULL, false) ||
	    setup(&base, args.baseline, !args.baseline)) {
		fprintf(stderr, "extend: could not start the daemons\n");
		return 1;
	}
	b.name = base.name;
	ab_run(&args, extends, &a, &b, true, &res);
	kvmm_disconnect(cur.c);
	kvmm_disconnect(base.c);
	td_stop(&cur.d);
	td_stop(&base.d);
	printf("extend by 1 block + truncate: this build %.2f us, %s %.2f us (medians of %d rounds); this / %s %.3f\n",
	       res.a / 1000,
	       args.baseline ? args.baseline : "ABI 1.16 (no flag)",
	       res.b / 1000, res.rounds, base.name, res.ratio);
	printf("{\"bench\":\"extend\",\"baseline\":\"%s\",\"this_us\":%.3f,\"baseline_us\":%.3f,\"ratio\":%.4f}\n",
	       args.baseline ? "build" : "abi-1.16", res.a / 1000, res.b / 1000,
	       res.ratio);
	return 0;
}
