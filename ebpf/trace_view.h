/* SPDX-License-Identifier: MIT */
/*
 * The operator's view of telemetry (`kvmmctl trace`): per-tier hit rates,
 * the most accessed blocks and the latency histograms, read from the maps
 * kvmmd pinned (TEL_MODE_PINNED), as text refreshed every interval or as
 * one JSON object per refresh.
 */
#ifndef KVMM_EBPF_TRACE_VIEW_H
#define KVMM_EBPF_TRACE_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct tel;

struct tel_trace_opts {
	size_t size; /* sizeof(struct tel_trace_opts) */
	const char *pin_root; /* NULL: TEL_DEFAULT_PIN_ROOT */
	bool once; /* one snapshot, then return */
	bool json;
	unsigned int interval_ms; /* between refreshes (default 1000) */
	unsigned int iterations; /* refreshes before returning (0: forever) */
	unsigned int top; /* blocks to list (default 10) */
	FILE *out; /* default stdout */
	/* each uid's blocks and accesses, and the top blocks per hash and
	 * uid rather than every uid's entries of a hash added up */
	bool by_uid;
};

/* 0, or -errno (the reason is printed to stderr). */
int tel_trace_run(const struct tel_trace_opts *opts);

/* One report of an open telemetry handle (also used by tests). */
int tel_trace_print(struct tel *t, FILE *out, bool json, bool by_uid,
		    unsigned int top, double interval_s,
		    const void *prev_counters);

#endif
