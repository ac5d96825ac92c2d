/* SPDX-License-Identifier: MIT */
/*
 * The Prometheus text exposition format (version 0.0.4) of kvmmd's state,
 * written from the two replies `kvmmctl status` reads (ADMIN_STATUS and
 * TIER_STATS) and the one `kvmmctl tenants` reads (ADMIN_TENANTS), with
 * several block sizes cached each size's too.  One formatter for both
 * exporters: `kvmmctl metrics` (over the control socket) and kvmmd
 * --metrics-listen (GET /metrics, metrics_http.c), so the two print the
 * same families with the same values.  Every metric is listed in Documentation/admin.md.
 */
#ifndef KVMM_KVMMD_METRICS_TEXT_H
#define KVMM_KVMMD_METRICS_TEXT_H

#include <stdint.h>
#include <stdio.h>

#include "kvmm/uapi.h"

/* Content-Type of the format, for an HTTP reply. */
#define KD_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* One block size's cache (kvmmd's own exposition, cache.h). */
struct kd_metrics_size {
	uint32_t pages; /* pages a block */
	struct kvmm_tier_stats_reply ts;
	/* ADMIN_TENANTS of this size alone (ABI 1.22), for the
	 * kvmm_size_tenant_* families; NULL: none (one size, or a daemon
	 * before 1.22 to kvmmctl metrics) */
	const struct kvmm_tenants_reply *tn;
};

struct kd_metrics_src {
	const struct kvmm_status_reply *st;
	/* NULL: the daemon has no block cache stats (no cache families);
	 * ts->size: the bytes of it the daemon filled (an older daemon's
	 * shorter reply: the families it lacks are left out) */
	const struct kvmm_tier_stats_reply *ts;
	/* NULL: no tenant families (a daemon before ABI 1.10) */
	const struct kvmm_tenants_reply *tn;
	uint32_t abi_major, abi_minor; /* the daemon's wire ABI */
	/* more than one block size cached: each size's counters (ts
	 * holds their sums), labelled size="N"; kvmmd --metrics-listen's
	 * own, kvmmctl metrics' from each size's TIER_STATS (NULL: one
	 * size, or a daemon before ABI 1.21 to kvmmctl metrics) */
	const struct kd_metrics_size *sizes;
	uint32_t nr_sizes;
};

/* Write the exposition to f: 0, or -EIO when f reports an error. */
int kd_metrics_write(FILE *f, const struct kd_metrics_src *src);

#endif
