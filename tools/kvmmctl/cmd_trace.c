// SPDX-License-Identifier: MIT
/*
 * kvmmctl trace [--once] [--interval MS] [--count N] [--top N]
 *               [--by-uid] [--pin-root DIR]
 *
 * Live telemetry from the BPF maps kvmmd pinned: per-tier hit rates (and
 * over the last interval), the top blocks by accesses with their reuse
 * gap, and the latency histograms; --by-uid keeps the uids that sent a
 * hash apart (the map's key) and adds each uid's blocks and accesses.
 * --once --json prints one JSON object (for scripts and tests).  Reads
 * the pins directly, so it needs the rights to open them (root) but not
 * the daemon's socket.  The work is in ebpf/trace_view.c.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ebpf/trace_view.h"
#include "tools/kvmmctl/kvmmctl.h"

static void trace_usage(FILE *f)
{
	fprintf(f,
		"usage: kvmmctl [--json] trace [--once] [--interval MS] "
		"[--count N] [--top N] [--by-uid] [--pin-root DIR]\n"
		"  --once           one view, then exit (with --json: one "
		"JSON object)\n"
		"  --interval MS    between refreshes (default 1000)\n"
		"  --count N        refreshes, then exit (0: no end)\n"
		"  --top N          blocks listed by accesses (default 10, "
		"at most 100000)\n"
		"  --by-uid         blocks and accesses per uid, and the top "
		"blocks per\n"
		"                   hash and uid (default: every uid's "
		"accesses of a hash\n"
		"                   added up)\n"
		"  --pin-root DIR   where kvmmd pinned its BPF maps (default "
		"/sys/fs/bpf/kvmm)\n");
}

/*
 * The value of a numeric option, in [min, max]; else says which option
 * took what and what it takes (one line, also for a word that is no
 * number: a second line saying only that was noise), and fails.
 */
static int trace_number(const char *opt, const char *s, uint32_t min,
			uint32_t max, const char *what, uint32_t *out)
{
	uint32_t v;

	/* no number at all (-1, x) gets the option's line too */
	if (kvmmctl_u32(s, &v) || v < min || v > max) {
		fprintf(stderr, "kvmmctl: trace: %s '%s': %s (%u to %u)\n", opt,
			s, what, min, max);
		return -1;
	}
	*out = v;
	return 0;
}

int cmd_trace(int argc, char **argv, struct kvmmctl_ctx *ctx)
{
	struct tel_trace_opts o = { .size = sizeof(o) };
	uint32_t v;
	int i;

	o.json = ctx->json;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		bool has_val = i + 1 < argc;

		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			trace_usage(stdout);
			return 0;
		} else if (!strcmp(a, "--once")) {
			o.once = true;
		} else if (!strcmp(a, "--by-uid")) {
			o.by_uid = true;
		} else if (!strcmp(a, "--pin-root") && has_val) {
			o.pin_root = argv[++i];
		} else if (!strcmp(a, "--interval") && has_val) {
			if (trace_number(a, argv[++i], 1, UINT32_MAX,
					 "milliseconds between refreshes", &v))
				return 2;
			o.interval_ms = v;
		} else if (!strcmp(a, "--count") && has_val) {
			if (trace_number(a, argv[++i], 0, UINT32_MAX,
					 "refreshes, 0 for no end", &v))
				return 2;
			o.iterations = v;
		} else if (!strcmp(a, "--top") && has_val) {
			if (trace_number(a, argv[++i], 1, 100000,
					 "blocks to list", &v))
				return 2;
			o.top = v;
		} else {
			/* the word, not only the usage */
			if (!strcmp(a, "--pin-root") ||
			    !strcmp(a, "--interval") || !strcmp(a, "--count") ||
			    !strcmp(a, "--top"))
				fprintf(stderr,
					"kvmmctl: trace: %s needs a value\n",
					a);
			else if (a[0] == '-')
				fprintf(stderr,
					"kvmmctl: trace: unknown option '%s'\n",
					a);
			else
				fprintf(stderr,
					"kvmmctl: trace: unexpected argument '%s'\n",
					a);
			trace_usage(stderr);
			return 2;
		}
	}
	return tel_trace_run(&o) ? 1 : 0;
}
