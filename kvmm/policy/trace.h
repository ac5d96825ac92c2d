/* SPDX-License-Identifier: MIT */
/*
 * Mooncake-format request traces: one JSON object per line,
 *   {"timestamp": ms, "input_length": n, "output_length": n,
 *    "hash_ids": [id, ...]}
 * with prefix-chained 512-token block ids (len(hash_ids) ==
 * ceil(input_length / 512)).  Optional agent fields written by
 * kvmm-agentgen: "session" (id), "ttl_ms" (keep this request's blocks
 * pinned that long after it: the agent is waiting on a tool call) and
 * "priority" (-128..127), and "tenant" (0..4294967294: who sends it, a
 * uid as kvmmd would see it; the replay charges its blocks to it).
 * Unknown keys are ignored (any JSON value, nested at most 64 deep).
 *
 * Strict JSON, one object a line: numbers as JSON writes them (no hex,
 * nan or inf, no trailing commas); the integer fields are read exactly
 * (hash_ids and session in the whole uint64_t range; 512.0 or 1e3 only up
 * to 2^53, where a double is exact); timestamp >= 0; a known key given
 * twice is refused.  The loader sorts requests by timestamp, ties in
 * file order, and rejects malformed lines with the line number and the
 * reason.
 */
#ifndef KVMM_POLICY_TRACE_H
#define KVMM_POLICY_TRACE_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#define POL_TRACE_BLOCK_TOKENS 512

struct pol_trace_req {
	uint64_t timestamp_ms;
	uint32_t input_length, output_length;
	uint32_t nblocks;
	uint32_t nout; /* --cache-output: blocks decode produced */
	uint64_t first; /* index of hash_ids[0] in pol_trace.hashes */
	uint64_t out_first; /* index of the output blocks in out_hashes */
	uint64_t session;
	uint32_t ttl_ms;
	int8_t priority;
	uint32_t line; /* line number in the file */
	uint32_t tenant; /* "tenant" (kvmm-agentgen --tenants); 0 without */
};

struct pol_trace {
	struct pol_trace_req *reqs;
	size_t nreqs;
	uint64_t *hashes;
	size_t nhashes;
	uint64_t *out_hashes;
	size_t nout_hashes;
};

/* 0, or -errno with a message in err ("line N: ..."). */
int pol_trace_load(const char *path, struct pol_trace *t, char *err,
		   size_t errlen);
/* Same from a NUL-terminated buffer. */
int pol_trace_parse(const char *text, struct pol_trace *t, char *err,
		    size_t errlen);
void pol_trace_free(struct pol_trace *t);

static inline const uint64_t *pol_trace_blocks(const struct pol_trace *t,
					       const struct pol_trace_req *r)
{
	return t->hashes + r->first;
}

/*
 * Infer the blocks decode writes (for --cache-output): request A's output
 * continues its input, so a later request B of the same conversation whose
 * block at A's last full input block matches A carries A's output blocks
 * next: B's blocks nA-1 .. floor((inA + outA) / 512) - 1 are attributed to
 * A and cached when A completes.  Returns 0 or -ENOMEM.
 */
int pol_trace_infer_outputs(struct pol_trace *t);

/*
 * The replay's clock is the milliseconds since the trace's first request
 * shifted left by 20 bits (the rank within one millisecond below), in 64
 * bits: every timestamp, and timestamp + ttl_ms, must lie less than
 * 2^44 ms (557 years) after the first timestamp.  pol_trace_parse()
 * refuses a trace past that with pol_trace_clock_check()'s message
 * ("line N: ..."): 0 or -EINVAL.  t is sorted (as parsed).
 */
#define POL_TRACE_CLOCK_SPAN_MS (1ull << 44)
int pol_trace_clock_check(const struct pol_trace *t, char *err, size_t errlen);
/* Has some request a ttl_ms or a priority?  *first (may be NULL): the first. */
bool pol_trace_has_ttl(const struct pol_trace *t,
		       const struct pol_trace_req **first);

#endif
