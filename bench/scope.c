// SPDX-License-Identifier: MIT
/*
 * What --cache-scope uid costs a client: the round trip of a PREFIX_OPEN
 * of a cached 8-block prefix (and the SEQ_CLOSE after it) against a kvmmd
 * in the uid scope, which renames each of the 8 hashes with SipHash-2-4,
 * over the same against a kvmmd in the shared scope.  Both daemons run at
 * once (host backend, 64 KiB pages); rounds alternate which goes first,
 * round 0 is a warm-up, and the ratio is the median of the per-round
 * ratios.  The publish of the prefix is renamed too, once.
 *
 * With --baseline-build DIR the second daemon is DIR's kvmmd in the
 * shared scope instead (another build of kvmmd, e.g. main before a
 * change, against this one, under the same client), and the ratio is
 * this build's time over DIR's: what a daemon change costs a prefix open,
 * under whatever load the machine has, since the rounds alternate.
 *
 *   build/bench/scope [--rounds N] [--opens N] [--baseline-build DIR]
 *                                                  (default 9, 2000)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/ab_rounds.h"
#include "kvmm/kvmm.h"
#include "tests/lib/daemon.h"
#include "tests/lib/small_region.h"

#define NB 8 /* blocks of the prefix: the small region holds 2048 tokens */

struct side {
	const char *name;
	struct td_daemon d;
	struct kvmm_conn *c;
	struct kvmm_region *r;
};

static const uint64_t hashes[NB] = { 0x5c0e01, 0x5c0e02, 0x5c0e03, 0x5c0e04,
				     0x5c0e05, 0x5c0e06, 0x5c0e07, 0x5c0e08 };

/* Start side's kvmmd, connect, publish the prefix once. */
static int setup(struct side *s, const char *scope, const char *build)
{
	const char *args[] = { "--cache-scope", scope, NULL };
	struct kvmm_connect_opts co = { .size = sizeof(co), .name = "bench" };
	uint32_t seq;
	int e;

	s->name = build ? "baseline" : scope;
	e = ab_start(&s->d, args, build);
	if (e)
		return e;
	co.socket_path = s->d.sock;
	e = kvmm_connect(&co, &s->c);
	if (!e)
		e = kvmm_region_create(s->c, &tr_small_region, &s->r);
	if (!e)
		e = kvmm_seq_open(s->r, &seq);
	if (!e)
		e = kvmm_seq_extend(s->r, seq, NB * TR_TPB);
	if (!e)
		e = kvmm_block_publish(s->r, seq, 0, NB, 0, hashes) == NB ?
			    0 :
			    -EIO;
	if (!e)
		e = kvmm_seq_close(s->r, seq);
	return e;
}

/* ns per open + close of the prefix, over n of them. */
static double opens(void *arg, int n)
{
	struct side *s = arg;
	double t0 = now_s();

	for (int i = 0; i < n; i++) {
		uint32_t seq, nb;

		if (kvmm_seq_open_prefix(s->r, hashes, NB, &seq, &nb) ||
		    nb != NB || kvmm_seq_close(s->r, seq)) {
			fprintf(stderr, "scope: %s: prefix open failed\n",
				s->name);
			exit(1);
		}
	}
	return (now_s() - t0) * 1e9 / n;
}

int main(int argc, char **argv)
{
	struct side sh = { 0 }, uid = { 0 };
	struct ab_side a = { "shared", &sh }, b = { "uid", &uid };
	struct ab_args args;
	struct ab_result res;

	if (ab_parse(argc, argv, "scope", "--opens", &args))
		return 2;
	if (setup(&sh, "shared", NULL) ||
	    setup(&uid, args.baseline ? "shared" : "uid", args.baseline)) {
		fprintf(stderr, "scope: could not start the daemons\n");
		return 1;
	}
	if (args.baseline) {
		a.name = "this build";
		b.name = "baseline";
	}
	/* uid / shared; this build / the baseline's */
	ab_run(&args, opens, &a, &b, args.baseline, &res);
	kvmm_disconnect(sh.c);
	kvmm_disconnect(uid.c);
	td_stop(&sh.d);
	td_stop(&uid.d);
	if (args.baseline) {
		printf("prefix open + close of %d blocks: this build %.2f us, %s's kvmmd %.2f us (medians of %d rounds); this / baseline %.3f\n",
		       NB, res.a / 1000, args.baseline, res.b / 1000,
		       res.rounds, res.ratio);
		printf("{\"bench\":\"scope\",\"blocks\":%d,\"this_us\":%.3f,\"baseline_us\":%.3f,\"ratio\":%.4f}\n",
		       NB, res.a / 1000, res.b / 1000, res.ratio);
		return 0;
	}
	printf("prefix open + close of %d blocks: shared %.2f us, uid %.2f us (medians of %d rounds); uid / shared %.3f\n",
	       NB, res.a / 1000, res.b / 1000, res.rounds, res.ratio);
	printf("{\"bench\":\"scope\",\"blocks\":%d,\"shared_us\":%.3f,\"uid_us\":%.3f,\"ratio\":%.4f}\n",
	       NB, res.a / 1000, res.b / 1000, res.ratio);
	return 0;
}
