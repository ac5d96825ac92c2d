// SPDX-License-Identifier: MIT
/*
 * The migration engine's names: its kinds and states as strings (the
 * daemon's log lines name a failed move's kind), and the test knob that
 * makes jobs fail (KVMMD_TEST_MIGRATE_FAIL, migrate_fault_parse()) read
 * back into kinds.  No engine state here: the faults parsed are counted
 * by the workers (migrate.c).
 */
#include "migrate.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *migrate_kind_string(enum migrate_kind kind)
{
	switch (kind) {
	case MIGRATE_GPU_TO_HOST:
		return "gpu_to_host";
	case MIGRATE_HOST_TO_NVME:
		return "host_to_nvme";
	case MIGRATE_NVME_TO_HOST:
		return "nvme_to_host";
	case MIGRATE_HOST_TO_GPU:
		return "host_to_gpu";
	case MIGRATE_NVME_TO_GPU:
		return "nvme_to_gpu";
	case MIGRATE_NVME_INVALIDATE:
		return "nvme_invalidate";
	case MIGRATE_NVME_MARK:
		return "nvme_mark";
	case MIGRATE_NVME_RESTAMP:
		return "nvme_restamp";
	case MIGRATE_KIND_COUNT:
		break;
	}
	return "unknown";
}

/* The knob's names for the kinds (KVMMD_TEST_MIGRATE_FAIL). */
static const char *const fault_names[MIGRATE_KIND_COUNT] = {
	[MIGRATE_GPU_TO_HOST] = "gpu-host",
	[MIGRATE_HOST_TO_NVME] = "host-nvme",
	[MIGRATE_NVME_TO_HOST] = "nvme-host",
	[MIGRATE_HOST_TO_GPU] = "host-gpu",
	[MIGRATE_NVME_TO_GPU] = "nvme-gpu",
	[MIGRATE_NVME_INVALIDATE] = "nvme-invalidate",
	[MIGRATE_NVME_MARK] = "nvme-mark",
	[MIGRATE_NVME_RESTAMP] = "nvme-restamp",
};

/*
 * The kinds the knob takes, "gpu-host, host-nvme, ...", from fault_names[]
 * itself: the message listed them by hand and lacked the newest kind
 * (nvme-restamp) for a day.
 */
void migrate_fault_kinds(char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (int k = 0; k < MIGRATE_KIND_COUNT && used < len; k++) {
		int w = snprintf(buf + used, len - used, "%s%s", k ? ", " : "",
				 fault_names[k]);

		if (w < 0)
			break;
		used += (size_t)w;
	}
}

/*
 * An entry's "@PAGES" after its '@' (at s): the block size of the one
 * cache whose engine fails its jobs.  Digits alone, even and at least 2:
 * a block is a K and a V page per layer (a region's pages_per_block is
 * 2 x layers), so an odd size or 0 would name no cache and its jobs
 * would never fail, the test passing without its fault.  *end past it.
 */
static int fault_pages_parse(const char *s, uint32_t *pages, char **end)
{
	unsigned long long v;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, end, 10);
	if (errno || v < 2 || v % 2 || v > UINT32_MAX ||
	    (**end && **end != ','))
		return -EINVAL;
	*pages = (uint32_t)v;
	return 0;
}

int migrate_fault_parse(const char *spec, struct migrate_fault *f,
			unsigned int *n, char *err, size_t errlen)
{
	const char *p = spec;

	*n = 0;
	if (!*p) {
		snprintf(err, errlen,
			 "empty (expected KIND:N[@PAGES][,KIND:N[@PAGES]...])");
		return -EINVAL;
	}
	for (;;) {
		const char *colon = strchr(p, ':');
		size_t len = colon ? (size_t)(colon - p) : strlen(p);
		/* the entry as the messages quote it, bounded
		 * (MIGRATE_FAULT_ERR_LEN) */
		int shown = (int)strcspn(p, ",");
		unsigned long long nth, last;
		uint32_t pages;
		char *end;
		int k;

		if (shown > 200)
			shown = 200;
		for (k = 0; k < MIGRATE_KIND_COUNT; k++)
			if (strlen(fault_names[k]) == len &&
			    !strncmp(p, fault_names[k], len))
				break;
		if (k == MIGRATE_KIND_COUNT || !colon) {
			char kinds[MIGRATE_FAULT_KINDS_LEN];

			migrate_fault_kinds(kinds, sizeof(kinds));
			snprintf(
				err, errlen,
				"'%.*s': expected KIND:N[@PAGES], KIND one of %s",
				shown, p, kinds);
			return -EINVAL;
		}
		errno = 0;
		nth = strtoull(colon + 1, &end, 10);
		last = nth;
		if (*end == '+') {
			last = UINT64_MAX;
			end++;
		} else if (*end == '-' && end[1] >= '0' && end[1] <= '9') {
			last = strtoull(end + 1, &end, 10);
		}
		if (colon[1] < '0' || colon[1] > '9' || errno || !nth ||
		    last < nth || (*end && *end != ',' && *end != '@')) {
			snprintf(
				err, errlen,
				"'%.*s': N must be a whole number >= 1 (N-M: M >= N; N+)",
				shown, p);
			return -EINVAL;
		}
		pages = 0;
		if (*end == '@' && fault_pages_parse(end + 1, &pages, &end)) {
			snprintf(
				err, errlen,
				"'%.*s': @PAGES must name a block size in pages, an even whole number >= 2 (as --cache-block-pages)",
				shown, p);
			return -EINVAL;
		}
		if (*n == MIGRATE_FAULTS_MAX) {
			snprintf(err, errlen, "more than %d entries",
				 MIGRATE_FAULTS_MAX);
			return -EINVAL;
		}
		f[*n].kind = (enum migrate_kind)k;
		f[*n].block_pages = pages;
		f[*n].last = last;
		f[(*n)++].nth = nth;
		if (!*end)
			return 0;
		p = end + 1;
	}
}

const char *migrate_state_string(enum migrate_state state)
{
	switch (state) {
	case MIGRATE_QUEUED:
		return "queued";
	case MIGRATE_RUNNING:
		return "running";
	case MIGRATE_DONE:
		return "done";
	case MIGRATE_FAILED:
		return "failed";
	case MIGRATE_CANCELLED:
		return "cancelled";
	}
	return "unknown";
}

const char *migrate_evict_state_string(enum migrate_evict_state state)
{
	switch (state) {
	case MIGRATE_EVICT_COPYING_MAPPED:
		return "copying_mapped";
	case MIGRATE_EVICT_COPYING:
		return "copying";
	case MIGRATE_EVICT_MAPPED:
		return "mapped";
	case MIGRATE_EVICT_REUSABLE:
		return "reusable";
	case MIGRATE_EVICT_ABORTED:
		return "aborted";
	}
	return "unknown";
}
