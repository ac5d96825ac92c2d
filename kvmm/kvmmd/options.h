/* SPDX-License-Identifier: MIT */
/*
 * Option values shared by the command line and the config file.
 */
#ifndef KVMM_KVMMD_OPTIONS_H
#define KVMM_KVMMD_OPTIONS_H

#include <stdint.h>

#include "kvmm/kvmmd/kvmmd.h"

/*
 * "64K", "2M", "80G", "4096" (a digit first: no blanks or sign): bytes;
 * -EINVAL (-ERANGE past 2^64) with "WHAT: 's' is not a size ..." on
 * stderr otherwise.  what names the program and the option
 * ("kvmmd: --gpu-mem", "kvmmctl: quota").
 */
int kd_parse_size(const char *what, const char *s, uint64_t *out);
/* Apply option key (the short code of kvmmd's long option) = val. */
int kd_option_apply(struct kd_config *cfg, int key, const char *val);
/* Options that make sense only together, checked once all are read:
 * 0, or -EINVAL with one line on stderr naming them. */
int kd_config_check(const struct kd_config *cfg);
int kd_parse_log_level(const char *s);
/* "FILE:LINE: " when the option of enum kd_origin origin was last set in
 * a config file (in buf), "" when on the command line or not at all:
 * the start's errors about it name the line, as parsing does. */
const char *kd_config_where(const struct kd_config *cfg, int origin, char *buf,
			    size_t len);
/*
 * val as one of names[0..n) (a table indexed by value): 0 with *out its
 * index, or -EINVAL with "kvmmd: OPTION: 'val' is not a, b or c" on stderr.
 */
int kd_parse_name(const char *option, const char *const *names, size_t n,
		  const char *val, uint32_t *out);

/* --page-size at most this: 1 GiB, the largest page kvmmd maps */
#define KD_PAGE_SIZE_MAX (1ull << 30)

/* kvmmd's option number for --pin-quota (no short option) */
#define KD_OPT_PIN_QUOTA 0x202
/* ... and for --cache-block-pages */
#define KD_OPT_CACHE_BLOCK_PAGES 0x204
/* ... and for --host-numa-node */
#define KD_OPT_HOST_NUMA_NODE 0x205
/* ... and for --nvme-save-on-stop */
#define KD_OPT_NVME_SAVE 0x206
/* ... and for --cache-scope */
#define KD_OPT_CACHE_SCOPE 0x207
/* ... and for --policy-state */
#define KD_OPT_POLICY_STATE 0x208
/* ... and for --tenant-limit */
#define KD_OPT_TENANT_LIMIT 0x209
/* ... and for --socket-group */
#define KD_OPT_SOCKET_GROUP 0x20a
/* ... and for --nvme-format */
#define KD_OPT_NVME_FORMAT 0x20b
/* ... and for --max-sessions-per-uid, --hello-timeout and
 * --max-table-entries-per-uid */
#define KD_OPT_SESSIONS_PER_UID 0x20d
#define KD_OPT_HELLO_TIMEOUT 0x20e
#define KD_OPT_TABLE_ENTRIES 0x20f
/* ... and for --max-sessions */
#define KD_OPT_MAX_SESSIONS 0x210
/* ... and for --quarantine-per-uid */
#define KD_OPT_QUARANTINE_PER_UID 0x211
/* ... and for --lend-wait */
#define KD_OPT_LEND_WAIT 0x220

/*
 * A tenant limit, "gpu:N,host:N,nvme:N" (any of them, in any order; N
 * blocks, at least 1) or "none": blocks[] gets N per tier named, 0 for
 * the others.  -EINVAL with one line on stderr that starts with what
 * (e.g. "kvmmd: --tenant-limit 1001=") otherwise.
 */
int kd_parse_tenant_limit(const char *what, const char *spec,
			  uint64_t blocks[3]);

#endif
