// SPDX-License-Identifier: MIT
/*
 * kvmmd's test knobs (test_knob.h): the table of every one, checked once
 * at start (kd_test_knobs_check()), and the one reader of the delays (the
 * cache's, the migration engine's, the NVMe tier's and the policy
 * state's), so that each says the same thing the same way.
 *
 * The knobs were read where their work is set up, many with atoi() or
 * atol(): "50ms", "abc" or "-1" read as 0, and a misspelt name
 * (KVMMD_TEST_NVME_WRTE_DELAY_MS) was not read at all, so a test that set
 * one ran without the delay or fault it relied on and could pass without
 * testing anything.  The readers stay where they are; this table checks
 * the values first.  A value the table takes reads the same in its
 * reader: a number is digits alone, no sign, no blank, no suffix, within
 * the table's range, and its reader reads it with the table's own parse
 * (kd_test_knob_number()); a flag is "0" or "1", which is what its
 * reader (tier_nvme_flag_parse()) takes; the knobs with a grammar of their own are
 * checked by their reader's own parse.  A retired knob (one a later knob
 * replaced) fails the start with the one to set instead, so that a test
 * that still sets it does not run without what it asked for.
 */
#include "kvmm/kvmmd/test_knob.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvmm/kvmmd/cache_priv.h"
#include "kvmm/kvmmd/knob_text.h"
#include "kvmm/kvmmd/migrate.h"
#include "kvmm/kvmmd/tier_nvme.h"
#include "vmm/vmm.h"

/* the longest delay or period a knob takes: an hour, in ms (and a delay
 * in us still fits the uint32_t of kd_test_delay_us()) */
#define KD_KNOB_MS_MAX 3600000u

enum kd_knob_grammar {
	KD_KNOB_NUMBER, /* a whole number from min to max */
	KD_KNOB_FLAG, /* "0" (off, as unset) or "1" */
	KD_KNOB_CHECK, /* its own: check() */
	KD_KNOB_RETIRED, /* gone: refused with what replaced it */
};

/* a number's range, and what it counts, in words */
struct kd_knob_range {
	const char *what;
	uint64_t min, max;
};

static const struct kd_knob_range kd_delay_ms = { "a delay in ms", 0,
						  KD_KNOB_MS_MAX };
static const struct kd_knob_range kd_period_ms = { "a period in ms", 1,
						   KD_KNOB_MS_MAX };
/* KC_HELD_MAX: what the cache's array of held slots holds */
static const struct kd_knob_range kd_slots = { "a number of slots", 0,
					       KC_HELD_MAX };
static const struct kd_knob_range kd_opens = { "a number of opens", 0,
					       1000000 };
static const struct kd_knob_range kd_slow_us = { "a number of us", 0,
						 3600000000ull };
/* the minors before kvmmd's own (abi_play.c) */
static const struct kd_knob_range kd_abi_minors = { "an older ABI minor", 0,
						    KVMM_ABI_MINOR - 1 };

struct kd_test_knob {
	const char *name;
	enum kd_knob_grammar grammar;
	const struct kd_knob_range *range; /* KD_KNOB_NUMBER's */
	/* KD_KNOB_CHECK: 0, or -EINVAL with what is wrong in why ("expected
	 * ...") */
	int (*check)(const char *v, char *why, size_t len);
	/* an empty value is unset (KVMMD_SLOW_CMD_US's reader says so) */
	bool empty_is_unset;
	/* KD_KNOB_RETIRED: what replaced it */
	const char *replaced_by;
};

static int kd_migrate_fail_check(const char *v, char *why, size_t len);
static int kd_slot_list_check(const char *v, char *why, size_t len);
static int kd_retire_fail_check(const char *v, char *why, size_t len);

/*
 * Every knob kvmmd reads, where it is read, and what it does
 * (Documentation/build.md, "Test knobs", has the same table for people).
 */
static const struct kd_test_knob kd_test_knobs[] = {
	/* abi_play.c: HELLO says 1.N, kvmmd plays that daemon */
	{ "KVMMD_TEST_ABI_MINOR", KD_KNOB_NUMBER, &kd_abi_minors },
	/* until 7 December: one flag a minor, six minors */
	{ "KVMMD_TEST_ABI_1_15", KD_KNOB_RETIRED,
	  .replaced_by = "KVMMD_TEST_ABI_MINOR=15" },
	{ "KVMMD_TEST_ABI_1_16", KD_KNOB_RETIRED,
	  .replaced_by = "KVMMD_TEST_ABI_MINOR=16" },
	{ "KVMMD_TEST_ABI_1_18", KD_KNOB_RETIRED,
	  .replaced_by = "KVMMD_TEST_ABI_MINOR=18" },
	{ "KVMMD_TEST_ABI_1_19", KD_KNOB_RETIRED,
	  .replaced_by = "KVMMD_TEST_ABI_MINOR=19" },
	{ "KVMMD_TEST_ABI_1_20", KD_KNOB_RETIRED,
	  .replaced_by = "KVMMD_TEST_ABI_MINOR=20" },
	{ "KVMMD_TEST_ABI_1_21", KD_KNOB_RETIRED,
	  .replaced_by = "KVMMD_TEST_ABI_MINOR=21" },
	/* cache_open.c: the first N set-ups of the tiers fail */
	{ "KVMMD_TEST_CACHE_OPEN_FAIL", KD_KNOB_CHECK, NULL,
	  kc_open_fail_check },
	/* cache_open.c: the first wait after a failed set-up */
	{ "KVMMD_TEST_CACHE_RETRY_MS", KD_KNOB_NUMBER, &kd_period_ms },
	/* cache_setup.c: each batch of demotions (restores) waits */
	{ "KVMMD_TEST_DEMOTE_DELAY_MS", KD_KNOB_NUMBER, &kd_delay_ms },
	{ "KVMMD_TEST_RESTORE_DELAY_MS", KD_KNOB_NUMBER, &kd_delay_ms },
	/* session_reply.c: FDS continuations spoilt */
	{ "KVMMD_TEST_FDS_FAULT", KD_KNOB_CHECK, NULL, kd_fds_fault_check },
	/* cache_setup.c: slots held back when the tiers open */
	{ "KVMMD_TEST_HOST_SLOTS_HELD", KD_KNOB_NUMBER, &kd_slots },
	{ "KVMMD_TEST_NVME_SLOTS_HELD", KD_KNOB_NUMBER, &kd_slots },
	/* cache_setup.c, migrate_names.c: the N-th job of a kind fails */
	{ "KVMMD_TEST_MIGRATE_FAIL", KD_KNOB_CHECK, NULL,
	  kd_migrate_fail_check },
	/* tier_nvme.c: each batch of a drop's invalidations, of its kept
	 * blocks' header writes waits */
	{ "KVMMD_TEST_NVME_INVALIDATE_DELAY_MS", KD_KNOB_NUMBER, &kd_delay_ms },
	{ "KVMMD_TEST_NVME_RESTAMP_DELAY_MS", KD_KNOB_NUMBER, &kd_delay_ms },
	/* cache_open.c: the first N opens of the NVMe tier after the start */
	{ "KVMMD_TEST_NVME_OPEN_FAIL", KD_KNOB_NUMBER, &kd_opens },
	/* tier_nvme_fault.c: the restart scan's header read of these
	 * slots fails; the fdatasync before drop marks retire, or the
	 * superblock write without them, fails */
	{ "KVMMD_TEST_NVME_SCAN_FAIL", KD_KNOB_CHECK, NULL,
	  kd_slot_list_check },
	{ "KVMMD_TEST_NVME_RETIRE_FAIL", KD_KNOB_CHECK, NULL,
	  kd_retire_fail_check },
	/* tier_nvme_fault.c: zeroing these slots' headers (stale ones past
	 * the last run's end, unreadable ones) fails */
	{ "KVMMD_TEST_NVME_CLEAR_FAIL", KD_KNOB_CHECK, NULL,
	  kd_slot_list_check },
	/* tier_nvme_fault.c: the sync after those zeroings fails; the
	 * superblock write of a grown or shrunk tier fails (the tier reads
	 * the flag with tier_nvme_flag_parse(), the same "0" or "1") */
	{ "KVMMD_TEST_NVME_CLEAR_SYNC_FAIL", KD_KNOB_FLAG },
	{ "KVMMD_TEST_NVME_RESIZE_FAIL", KD_KNOB_FLAG },
	/* migrate.c: host -> NVMe writes wait */
	{ "KVMMD_TEST_NVME_WRITE_DELAY_MS", KD_KNOB_NUMBER, &kd_delay_ms },
	/* cache_learned.c: the policy state saved this often; each periodic
	 * write waits */
	{ "KVMMD_TEST_POLICY_SAVE_MS", KD_KNOB_NUMBER, &kd_period_ms },
	{ "KVMMD_TEST_POLICY_WRITE_DELAY_MS", KD_KNOB_NUMBER, &kd_delay_ms },
	/* telemetry.c: each telemetry tick that fed a poll logs a line */
	{ "KVMMD_TEST_TEL_POLL_LOG", KD_KNOB_FLAG },
	/* cache_start.c: the host slab's touch reports this often */
	{ "KVMMD_TEST_SLAB_PROGRESS_MS", KD_KNOB_NUMBER, &kd_period_ms },
	/* session.c: a diagnostic, not a test knob (admin.md): commands
	 * that took this long logged; 0 or empty: off */
	{ "KVMMD_SLOW_CMD_US", KD_KNOB_NUMBER, &kd_slow_us, NULL, true },
};

#define KD_TEST_KNOBS_COUNT (sizeof(kd_test_knobs) / sizeof(kd_test_knobs[0]))

/* a variable of this prefix that the table lacks: a misspelt knob */
#define KD_TEST_PREFIX "KVMMD_TEST_"

static int kd_migrate_fail_check(const char *v, char *why, size_t len)
{
	struct migrate_fault f[MIGRATE_FAULTS_MAX];
	unsigned int n;

	return migrate_fault_parse(v, f, &n, why, len);
}

/* KVMMD_TEST_NVME_SCAN_FAIL, _CLEAR_FAIL and _RETIRE_FAIL: the tier's own
 * parse, the one its open reads them with (tier_nvme_fault.c) */
static int kd_slot_list_check(const char *v, char *why, size_t len)
{
	uint32_t slots[TIER_NVME_SCAN_FAIL_MAX], n;

	if (!tier_nvme_scan_fail_parse(v, slots, &n))
		return 0;
	snprintf(
		why, len,
		"expected a slot number list N[,N...] (at most %d slots, each from 0 to %u, no blanks)",
		TIER_NVME_SCAN_FAIL_MAX, UINT32_MAX - 1);
	return -EINVAL;
}

static int kd_retire_fail_check(const char *v, char *why, size_t len)
{
	bool sync, superblock;

	if (!tier_nvme_retire_fail_parse(v, &sync, &superblock))
		return 0;
	snprintf(why, len, "expected sync or superblock");
	return -EINVAL;
}

/* 0 when v is a value of k's grammar, else -EINVAL and why */
static int kd_knob_value_check(const struct kd_test_knob *k, const char *v,
			       char *why, size_t len)
{
	uint64_t n;

	if (!*v && k->empty_is_unset)
		return 0;
	switch (k->grammar) {
	case KD_KNOB_NUMBER:
		if (knob_number(v, k->range->min, k->range->max, &n))
			return 0;
		snprintf(why, len,
			 "expected %s from %llu to %llu (digits only)",
			 k->range->what, (unsigned long long)k->range->min,
			 (unsigned long long)k->range->max);
		return -EINVAL;
	case KD_KNOB_FLAG:
		if (!strcmp(v, "0") || !strcmp(v, "1"))
			return 0;
		snprintf(why, len, "expected 1 (on) or 0 (off)");
		return -EINVAL;
	case KD_KNOB_CHECK:
		return k->check(v, why, len);
	case KD_KNOB_RETIRED:
		snprintf(why, len, "a retired kvmmd test knob: set %s",
			 k->replaced_by);
		return -EINVAL;
	}
	return -EINVAL;
}

/*
 * An unknown KVMMD_TEST_ name: the knobs it likely meant (the closest,
 * at most 3 edits away), else every knob's name.
 */
static void kd_unknown_knob(const char *name, size_t len, const char *v)
{
	char names[1024];
	unsigned int best = 4, d, nr = 0;
	size_t used = 0;

	for (size_t i = 0; i < KD_TEST_KNOBS_COUNT; i++) {
		if (kd_test_knobs[i].grammar == KD_KNOB_RETIRED)
			continue;
		d = knob_name_distance(name, len, kd_test_knobs[i].name);
		if (d < best)
			best = d;
	}
	names[0] = '\0';
	for (size_t i = 0; i < KD_TEST_KNOBS_COUNT && used < sizeof(names);
	     i++) {
		const char *k = kd_test_knobs[i].name;

		if (kd_test_knobs[i].grammar == KD_KNOB_RETIRED)
			continue; /* never the one to set */
		if (best <= 3 && knob_name_distance(name, len, k) != best)
			continue;
		if (best > 3 &&
		    strncmp(k, KD_TEST_PREFIX, sizeof(KD_TEST_PREFIX) - 1))
			continue; /* the diagnostic is no test knob */
		used += (size_t)snprintf(names + used, sizeof(names) - used,
					 "%s%s", used ? ", " : "", k);
		nr++;
	}
	if (best <= 3)
		vmm_log(VMM_LOG_ERR,
			"%.*s=%.200s: not a kvmmd test knob; did you mean %s%s?",
			(int)len, name, v, nr > 1 ? "one of " : "", names);
	else
		vmm_log(VMM_LOG_ERR,
			"%.*s=%.200s: not a kvmmd test knob (they are %s)",
			(int)len, name, v, names);
}

int kd_test_knobs_check(void)
{
	int bad = 0;

	for (char **e = environ; e && *e; e++) {
		const char *eq = strchr(*e, '='), *v;
		size_t len = eq ? (size_t)(eq - *e) : strlen(*e);
		const struct kd_test_knob *k = NULL;
		char why[MIGRATE_FAULT_ERR_LEN];

		v = eq ? eq + 1 : "";
		for (size_t i = 0; i < KD_TEST_KNOBS_COUNT; i++)
			if (strlen(kd_test_knobs[i].name) == len &&
			    !strncmp(*e, kd_test_knobs[i].name, len))
				k = &kd_test_knobs[i];
		if (!k) {
			if (!strncmp(*e, KD_TEST_PREFIX,
				     sizeof(KD_TEST_PREFIX) - 1)) {
				kd_unknown_knob(*e, len, v);
				bad++;
			}
			continue;
		}
		why[0] = '\0';
		if (kd_knob_value_check(k, v, why, sizeof(why))) {
			vmm_log(VMM_LOG_ERR, "%s=%.200s: %s", k->name, v, why);
			bad++;
		}
	}
	return bad ? -EINVAL : 0;
}

int kd_test_knob_number(const char *name, uint64_t *out)
{
	const char *v = getenv(name);

	if (!v)
		return -ENOENT;
	for (size_t i = 0; i < KD_TEST_KNOBS_COUNT; i++) {
		const struct kd_test_knob *k = &kd_test_knobs[i];

		if (strcmp(k->name, name) || k->grammar != KD_KNOB_NUMBER)
			continue;
		if (!*v && k->empty_is_unset)
			return -ENOENT;
		/* checked at start (kd_test_knobs_check()): the same parse */
		return knob_number(v, k->range->min, k->range->max, out) ?
			       0 :
			       -EINVAL;
	}
	return -EINVAL; /* not a number knob of the table */
}

uint32_t kd_test_delay_us(const char *name, const char *who, const char *what)
{
	uint64_t ms;

	if (kd_test_knob_number(name, &ms) || !ms)
		return 0;
	vmm_log(VMM_LOG_WARN, "%s: %s=%llu: %s delayed (tests only)", who, name,
		(unsigned long long)ms, what);
	return (uint32_t)ms * 1000u;
}
