/* SPDX-License-Identifier: MIT */
/*
 * What metrics_text.c (every family of a daemon-wide figure) shares with
 * metrics_sizes.c (the kvmm_size_* families, one series per block size
 * cached): the table rows, the tier families and how a sample is
 * printed.  Nothing outside the two includes it.
 */
#ifndef KVMM_KVMMD_METRICS_TEXT_PRIV_H
#define KVMM_KVMMD_METRICS_TEXT_PRIV_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kvmm/kvmmd/metrics_text.h"

enum kd_mtype { KD_GAUGE, KD_COUNTER };

/* how a u64 of the reply becomes the sample's value */
enum kd_munit {
	KD_AS_IS, /* integer */
	KD_MS, /* milliseconds printed as seconds */
	KD_NS, /* nanoseconds printed as seconds */
	KD_MS32, /* a u32 of milliseconds printed as seconds */
	KD_MS_INF, /* milliseconds as seconds, UINT64_MAX as +Inf (never) */
};

struct kd_metric {
	const char *name;
	enum kd_mtype type;
	const char *help; /* NULL: another series of the row above's family */
	const char *labels; /* "" or 'key="value"' without braces */
	size_t off; /* offset of the u64 in the reply */
	enum kd_munit unit;
};

/* The kvmm_tier_* families, a kvmm_tier_info's fields (metrics_text.c;
 * a definition with another count does not compile). */
#define KD_MT_NR_TIER_METRICS 12
extern const struct kd_metric kd_mt_tier_metrics[KD_MT_NR_TIER_METRICS];
extern const char *const kd_mt_tier_names[3]; /* gpu, host, nvme */

/* HELP and TYPE of a family, before its first sample. */
void kd_mt_family(FILE *f, const char *name, enum kd_mtype type,
		  const char *help);
/* One sample: labels (may be NULL or "") and an extra pair (may be
 * NULL). */
void kd_mt_sample(FILE *f, const char *name, const char *labels,
		  const char *extra, uint64_t v, enum kd_munit unit);
/* The u64 (or, KD_MS32, the u32) at m->off in base. */
uint64_t kd_mt_field(const void *base, const struct kd_metric *m);
/* One tenant's labels: kind="uid"|"gid",id="N"|"others" and, with a
 * tier, tier="..." after them. */
void kd_mt_tenant_labels(char *buf, size_t len, uint32_t kind, uint32_t id,
			 const char *tier);

/*
 * metrics_sizes.c, with more than one block size cached (one size's
 * figures are the sums): kd_mt_sizes() the tier families, publishes,
 * NVMe partition opens and writes and queued demotions of each size; kd_mt_size_tenants() the tenants'
 * figures that ADMIN_TENANTS gives per size.
 */
void kd_mt_sizes(FILE *f, const struct kd_metrics_src *src);
void kd_mt_size_tenants(FILE *f, const struct kd_metrics_src *src);

#endif
