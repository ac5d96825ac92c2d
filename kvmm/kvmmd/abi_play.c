// SPDX-License-Identifier: MIT
/*
 * What each minor of the wire ABI brought that a client can see, as
 * tables (abi_play.h), and the minor kvmmd plays: KVMM_ABI_MINOR, or
 * KVMMD_TEST_ABI_MINOR=N's for a test that needs the kvmmd of 1.N
 * (libkvmm's and kvmmctl's fallbacks for an older daemon, run against a
 * real one; tests/lib-old-daemon-minor.c walks every minor).
 *
 * Each row cites the minor that brought the change; Documentation/abi.md
 * has a section a minor with what an older peer sees.  A change that came
 * in former reserved space (a word that was 0) is not a size here: its
 * KD_ABI_* minor (abi_play.h) is checked where the word is written.
 */
#include "kvmm/kvmmd/abi_play.h"

#include <errno.h>
#include <string.h>

#include "kvmm/uapi.h"
#include "kvmm/kvmmd/test_knob.h"
#include "vmm/vmm.h"

#define KD_ABI_KNOB "KVMMD_TEST_ABI_MINOR"

uint16_t kd_abi_minor(void)
{
	static int minor = -1;
	uint64_t n;

	if (minor >= 0)
		return (uint16_t)minor;
	minor = KVMM_ABI_MINOR;
	/* checked at start (test_knob.c: 0 to KVMM_ABI_MINOR - 1) */
	if (!kd_test_knob_number(KD_ABI_KNOB, &n) && n < KVMM_ABI_MINOR) {
		minor = (int)n;
		vmm_log(VMM_LOG_WARN,
			"%s=%d: HELLO says ABI 1.%d, kvmmd plays that daemon (tests only)",
			KD_ABI_KNOB, minor, minor);
	}
	return (uint16_t)minor;
}

/* The commands that came after 1.0 (uapi.h's enum kvmm_cmd). */
static const struct {
	uint16_t cmd, since;
} kd_abi_cmds[] = {
	{ KVMM_CMD_SEQ_WAIT_READY, 8 },
	{ KVMM_CMD_ADMIN_TENANTS, 10 },
	{ KVMM_CMD_ADMIN_SET_TENANT_LIMIT, 11 },
	{ KVMM_CMD_ADMIN_CACHE_DROP, 14 },
	{ KVMM_CMD_PREFIX_COLLECT, 16 },
	{ KVMM_CMD_SEQ_COLLECT, 17 },
	{ KVMM_CMD_PREFIX_QUERY, 19 },
	{ KVMM_CMD_BLOCK_PIN_MANY, 19 },
	{ KVMM_CMD_SEQ_UNSHARE, 20 },
};

bool kd_abi_cmd_unknown(uint16_t cmd)
{
	for (size_t i = 0; i < sizeof(kd_abi_cmds) / sizeof(kd_abi_cmds[0]);
	     i++)
		if (kd_abi_cmds[i].cmd == cmd)
			return kd_abi_minor() < kd_abi_cmds[i].since;
	return false;
}

/* The request flags that came after 1.0, and where each command keeps
 * its u32 flags. */
static const struct {
	uint16_t cmd;
	uint16_t since;
	uint32_t flag;
	size_t at;
} kd_abi_flags[] = {
	{ KVMM_CMD_BLOCK_PIN, 3, KVMM_PIN_F_DEMOTE,
	  offsetof(struct kvmm_block_pin, flags) },
	{ KVMM_CMD_PREFIX_OPEN, 6, KVMM_PREFIX_OPEN_SEGMENTS,
	  offsetof(struct kvmm_prefix_open, flags) },
	{ KVMM_CMD_PREFIX_OPEN, 8, KVMM_PREFIX_OPEN_EARLY,
	  offsetof(struct kvmm_prefix_open, flags) },
	{ KVMM_CMD_PREFIX_OPEN, 16, KVMM_PREFIX_OPEN_COLLECT,
	  offsetof(struct kvmm_prefix_open, flags) },
	{ KVMM_CMD_SEQ_EXTEND, 17, KVMM_SEQ_EXTEND_COLLECT,
	  offsetof(struct kvmm_seq_extend, flags) },
};

int kd_abi_flags_check(uint16_t cmd, const void *p, size_t len)
{
	uint16_t minor = kd_abi_minor();

	for (size_t i = 0; i < sizeof(kd_abi_flags) / sizeof(kd_abi_flags[0]);
	     i++) {
		uint32_t flags;

		if (kd_abi_flags[i].cmd != cmd ||
		    minor >= kd_abi_flags[i].since ||
		    len < kd_abi_flags[i].at + sizeof(flags))
			continue;
		memcpy(&flags, (const char *)p + kd_abi_flags[i].at,
		       sizeof(flags));
		if (flags & kd_abi_flags[i].flag)
			return -EINVAL; /* an unknown flag then */
	}
	return 0;
}

/* A reply's size from `since` on, until the next row's minor. */
struct kd_abi_size {
	uint16_t since;
	uint32_t size;
};

#define ST(field) offsetof(struct kvmm_status_reply, field)
#define TS(field) offsetof(struct kvmm_tier_stats_reply, field)
#define DR(field) offsetof(struct kvmm_admin_cache_drop_reply, field)

/* ADMIN_STATUS: each row ends before the field that came next */
static const struct kd_abi_size kd_abi_status_sizes[] = {
	{ 0, ST(pins) },
	{ 2, ST(cache_policy) },
	{ 5, ST(cache_scope) },
	{ 9, ST(pages_scrubbed) }, /* 400 */
	{ 13, ST(cache_drop_blocks) }, /* 512: 1.13's last growth */
	{ 14, ST(pages_renewed) },
	{ 15, ST(page_ro_fds) },
	{ 18, ST(lend_requests) },
	{ 19, ST(prefix_queries) },
	{ 20, ST(nr_sizes) }, /* 720 */
	{ 22, sizeof(struct kvmm_status_reply) },
};

/* TIER_STATS */
static const struct kd_abi_size kd_abi_tier_stats_sizes[] = {
	{ 0, TS(prefix_holes) },
	{ 7, TS(nvme_read_error_drops) }, /* 504 */
	{ 13, TS(cache_open_attempts) },
	{ 14, TS(lower_free_refused) },
	{ 15, TS(nvme_write_returns) }, /* 616 */
	{ 17, TS(blocks_unshared) },
	{ 20, TS(block_pages) }, /* 656 */
	{ 21, TS(nvme_restamped) },
	{ 23, TS(cold_blocks) },
	{ 24, TS(weights) }, /* 728 */
	{ 25, sizeof(struct kvmm_tier_stats_reply) },
};

/* ADMIN_CACHE_DROP's reply (the command came with 1.14) */
static const struct kd_abi_size kd_abi_cache_drop_sizes[] = {
	{ 0, DR(block_pages) }, /* 104 */
	{ 22, DR(nvme_restamped) },
	{ 23, sizeof(struct kvmm_admin_cache_drop_reply) },
};

/* ADMIN_TENANTS' entries (the command came with 1.10) */
static const struct kd_abi_size kd_abi_tenant_entry_sizes[] = {
	{ 0, KVMM_TENANT_INFO_SIZE_1_10 },
	{ 11, sizeof(struct kvmm_tenant_info) },
};

#define KD_ABI_TABLE(t) t, sizeof(t) / sizeof(t[0])

static const struct {
	const struct kd_abi_size *rows;
	size_t nr;
	/* kvmmd cuts the reply for a client older than this minor to
	 * this minor's size; to one older still it sent what it had
	 * (UINT16_MAX: never cut, it grew in entry_size steps) */
	uint16_t cut_from;
} kd_abi_replies[KD_ABI_REPLY_COUNT] = {
	[KD_ABI_ADMIN_STATUS] = { KD_ABI_TABLE(kd_abi_status_sizes), 21 },
	[KD_ABI_TIER_STATS] = { KD_ABI_TABLE(kd_abi_tier_stats_sizes), 20 },
	[KD_ABI_CACHE_DROP] = { KD_ABI_TABLE(kd_abi_cache_drop_sizes), 21 },
	[KD_ABI_TENANT_ENTRY] = { KD_ABI_TABLE(kd_abi_tenant_entry_sizes),
				  UINT16_MAX },
};

_Static_assert(ST(pages_scrubbed) == 400 && ST(cache_drop_blocks) == 512 &&
		       ST(nr_sizes) == 720,
	       "ADMIN_STATUS' sizes as abi.md gives them");
_Static_assert(TS(nvme_read_error_drops) == 504 &&
		       TS(nvme_write_returns) == 616 &&
		       TS(block_pages) == 656 && TS(weights) == 728 &&
		       sizeof(struct kvmm_tier_stats_reply) == 744,
	       "TIER_STATS' sizes as abi.md gives them");
_Static_assert(DR(block_pages) == 104, "CACHE_DROP's 1.14 reply");

size_t kd_abi_reply_size(enum kd_abi_reply which, uint16_t client_minor)
{
	uint16_t minor = kd_abi_minor(), cut = kd_abi_replies[which].cut_from;
	const struct kd_abi_size *rows = kd_abi_replies[which].rows;
	size_t i = 0;

	if (cut != UINT16_MAX && client_minor < minor)
		minor = client_minor > cut ? client_minor : cut;
	if (minor > kd_abi_minor())
		minor = kd_abi_minor();
	while (i + 1 < kd_abi_replies[which].nr && rows[i + 1].since <= minor)
		i++;
	return rows[i].size;
}

void kd_abi_tier_stats(struct kvmm_tier_stats_reply *st, uint16_t client_minor)
{
	st->size = (uint32_t)kd_abi_reply_size(KD_ABI_TIER_STATS, client_minor);
	if (client_minor < KD_ABI_PROMOTED) /* reserved words then */
		for (unsigned int t = 0; t < 3; t++)
			st->tiers[t].promotions_by_publish = 0;
}

void kd_abi_tenants(struct kvmm_tenants_reply *rep, size_t *len,
		    uint16_t client_minor)
{
	size_t size = kd_abi_reply_size(KD_ABI_TENANT_ENTRY, client_minor);

	for (uint32_t i = 0; i < rep->nr; i++) {
		struct kvmm_tenant_info *t = &rep->tenants[i];

		if (client_minor < KD_ABI_1_13) {
			t->quota_pages = 0;
			t->quota_used_pages = 0;
			t->quota_cached_pages = 0;
		}
		if (size < sizeof(*t)) {
			t->size = (uint32_t)size;
			/* entry i moves down to i * size, below every
			 * entry not moved yet */
			memmove((char *)rep->tenants + i * size, t, size);
		}
	}
	if (size < sizeof(rep->tenants[0])) {
		rep->entry_size = (uint32_t)size;
		*len = sizeof(*rep) + rep->nr * size;
		rep->size = (uint32_t)*len;
	}
}
