// SPDX-License-Identifier: MIT
/*
 * Cost of a kvmm probe site.  Three variants of the same loop, measured
 * in the same run:
 *   baseline    the loop body without the probe
 *   unattached  the body with the probe (semaphore check + nop), no tracer
 *   attached    the body with ebpf/kvmm.bpf.c attached through the loader
 * each per call (one access record) and per batched decode step of 256
 * sequences (one probe carrying 256 records, built only when the semaphore
 * says a tracer listens).  Target: unattached within noise of baseline;
 * attached telemetry under 1% of a 10 ms decode step at 256 sequences.
 * Prints a ratio per variant and ends with one JSON line.  Without root or
 * BPF the attached figures are null.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ebpf/probes.h"
#include "ebpf/telemetry.h"
#include "bench/bench.h"
#include "bench/bench_tel.h"

#define SEQS 256
#define STEP_BUDGET_NS 10000000.0 /* a 10 ms decode step */

static struct kvmm_access_rec recs[SEQS];
static volatile uint64_t sink;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* The work every variant does: a little arithmetic per sequence. */
static inline uint64_t body(uint64_t step, unsigned int nseq)
{
	uint64_t acc = step;
	unsigned int s;

	for (s = 0; s < nseq; s++)
		acc = acc * 6364136223846793005ull + s;
	return acc;
}

/* Tail block of sequence s at this step: a new block every 16 steps. */
static inline void fill(uint64_t step, unsigned int nseq)
{
	unsigned int s;

	for (s = 0; s < nseq; s++) {
		recs[s].hash = ((uint64_t)s << 32) | (step / 16);
		recs[s].seq = s;
		recs[s].tier = KVMM_TEL_TIER_GPU;
		recs[s].flags = 0;
	}
}

static __attribute__((noinline)) void loop_plain(uint64_t n, unsigned nseq)
{
	uint64_t i;

	for (i = 0; i < n; i++)
		sink = body(i, nseq);
}

static __attribute__((noinline)) void loop_probe(uint64_t n, unsigned nseq)
{
	uint64_t i;

	for (i = 0; i < n; i++) {
		sink = body(i, nseq);
		if (KVMM_PROBE_ENABLED(access)) {
			fill(i, nseq);
			kvmm_probe_access(i, recs, nseq);
		}
	}
}

/* Best of `reps` runs, in ns per iteration. */
static double time_loop(void (*fn)(uint64_t, unsigned), uint64_t n,
			unsigned nseq, int reps)
{
	double best = 1e30;
	int r;

	for (r = 0; r < reps; r++) {
		uint64_t t0 = now_ns();

		fn(n, nseq);
		double per = (double)(now_ns() - t0) / (double)n;
		if (per < best)
			best = per;
	}
	return best;
}

int main(int argc, char **argv)
{
	const uint64_t n_call = 10000000, n_step = 100000, n_att = 20000,
		       n_att_step = 4000;
	double base_call, un_call, base_step, un_step;
	double att_call = -1, att_step = -1, pct = -1;
	struct kvmm_counters c;
	struct tel *t = NULL;
	int i;

	static const char usage[] =
		"usage: probes  (no options; as root it also attaches BPF)\n";

	if (bench_help(argc, argv, usage))
		return 0;
	if (argc > 1)
		return bench_usage_error("probes", argv[1], usage);

	/* Interleave so drift hits both sides alike. */
	base_call = un_call = base_step = un_step = 1e30;
	for (i = 0; i < 5; i++) {
		double v;

		v = time_loop(loop_plain, n_call, 1, 1);
		base_call = v < base_call ? v : base_call;
		v = time_loop(loop_probe, n_call, 1, 1);
		un_call = v < un_call ? v : un_call;
		v = time_loop(loop_plain, n_step, SEQS, 1);
		base_step = v < base_step ? v : base_step;
		v = time_loop(loop_probe, n_step, SEQS, 1);
		un_step = v < un_step ? v : un_step;
	}
	printf("per call:  baseline %.2f ns, unattached %.2f ns (ratio %.3f)\n",
	       base_call, un_call, un_call / base_call);
	printf("per step:  baseline %.1f ns, unattached %.1f ns (ratio %.3f)\n",
	       base_step, un_step, un_step / base_step);

	t = bench_tel_self("probes");
	if (t && KVMM_PROBE_ENABLED(access)) {
		att_call = time_loop(loop_probe, n_att, 1, 3);
		att_step = time_loop(loop_probe, n_att_step, SEQS, 3);
		/* telemetry's share of a 10 ms step: what it adds over the
		 * same step without a tracer */
		pct = (att_step - un_step) / STEP_BUDGET_NS * 100.0;
		tel_poll(t);
		tel_counters(t, &c);
		printf("attached:  %.0f ns per call (ratio %.1f), %.0f ns per "
		       "256-seq step (ratio %.2f) = %.3f%% of a 10 ms step; "
		       "%llu records, %llu dropped\n",
		       att_call, att_call / base_call, att_step,
		       att_step / base_step, pct,
		       (unsigned long long)c.accesses,
		       (unsigned long long)(c.access_dropped +
					    c.blocks_dropped));
	} else {
		printf("attached:  skipped (needs root and BPF)\n");
	}
	if (t)
		tel_close(t);

	printf("{\"bench\":\"probes\",\"baseline_call_ns\":%.3f,"
	       "\"unattached_call_ns\":%.3f,\"unattached_call_ratio\":%.4f,"
	       "\"baseline_step256_ns\":%.1f,\"unattached_step256_ns\":%.1f,"
	       "\"unattached_step256_ratio\":%.4f,"
	       "\"unattached_call_extra_ns\":%.3f,",
	       base_call, un_call, un_call / base_call, base_step, un_step,
	       un_step / base_step, un_call - base_call);
	if (att_call >= 0)
		printf("\"attached_call_ns\":%.1f,\"attached_step256_ns\":%.1f,"
		       "\"attached_step256_pct_of_10ms\":%.4f,"
		       "\"target_pct\":1.0,\"meets_target\":%s}\n",
		       att_call, att_step, pct, pct < 1.0 ? "true" : "false");
	else
		printf("\"attached_call_ns\":null,\"attached_step256_ns\":null,"
		       "\"attached_step256_pct_of_10ms\":null,"
		       "\"target_pct\":1.0,\"meets_target\":null}\n");
	return 0;
}
