// SPDX-License-Identifier: MIT
/*
 * libkvmm's test knobs: the table of every KVMM_TEST_* variable the
 * library reads, checked each time a connection opens
 * (kc_test_knobs_check(), from kvmm_connect() and kc_connect_admin()),
 * and their readers.  Tests only: a process that sets none sees no
 * difference.
 *
 * The knobs were read with strcmp(v, "1") and strtoul() where they were
 * used: a misspelt name (KVMM_TEST_HELO_1_19) or value ("yes", "-1",
 * "5x") read as unset or as something else, and a test that set one ran
 * as the newest client and could pass without testing the older one it
 * meant.  Now an unknown KVMM_TEST_* name or a value the table does not
 * take fails the connect with -EINVAL after one ERR line naming the
 * variable and what is allowed, as kvmmd refuses its own KVMMD_TEST_*
 * (kvmm/kvmmd/test_knob.c) at start.  The library reports through
 * vmm_log(), as its other errors that an errno alone does not explain
 * (a refused HELLO, a hidden GPU): stderr, or where the process sent
 * its log.
 *
 * The test suite sets a few KVMM_TEST_* variables for itself (the
 * harness's, not the library's): they are named below and left alone.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvmm/kvmmd/knob_text.h"
#include "kvmm/lib/client.h"

/*
 * The oldest minor kvmmd serves: its HELLO takes every minor of
 * KVMM_ABI_MAJOR and serves the client as that minor (proto.c's
 * do_hello(): s->client_minor), back to 1.0.
 */
#define KC_HELLO_MINOR_MIN 0u

enum kc_knob_kind {
	KC_KNOB_NUMBER, /* digits alone, from min to max */
	KC_KNOB_HARNESS, /* the test suite's own: any value, not read here */
	KC_KNOB_RETIRED, /* gone: refused with what replaced it */
};

struct kc_test_knob {
	const char *name;
	enum kc_knob_kind kind;
	uint64_t min, max; /* KC_KNOB_NUMBER's */
	/* a number's meaning; a retired knob's replacement */
	const char *what;
};

static const struct kc_test_knob kc_test_knobs[] = {
	/* conn.c: the minor HELLO announces (kc_test_hello_minor()) */
	{ "KVMM_TEST_HELLO_MINOR", KC_KNOB_NUMBER, KC_HELLO_MINOR_MIN,
	  KVMM_ABI_MINOR, "an ABI minor (the HELLO says 1.N)" },
	/* lend.c: at most N blocks given on one request of kvmmd's */
	{ "KVMM_TEST_GIVE_AHEAD_MAX", KC_KNOB_NUMBER, 0, UINT32_MAX,
	  "a number of blocks" },
	/* mapahead.c: ms the map-ahead thread waits between choosing
	 * what to map and mapping it (kc_test_mapahead_delay_ms()) */
	{ "KVMM_TEST_MAPAHEAD_DELAY_MS", KC_KNOB_NUMBER, 0, 10000,
	  "milliseconds" },
	/* until 7 December: one flag a minor */
	{ "KVMM_TEST_HELLO_1_18", KC_KNOB_RETIRED, 0, 0,
	  "KVMM_TEST_HELLO_MINOR=18" },
	{ "KVMM_TEST_HELLO_1_19", KC_KNOB_RETIRED, 0, 0,
	  "KVMM_TEST_HELLO_MINOR=19" },
	/* tests/run.sh: each test's tag and its grace period */
	{ "KVMM_TEST_TAG", KC_KNOB_HARNESS },
	{ "KVMM_TEST_GRACE", KC_KNOB_HARNESS },
	/* tests/lib/daemon.c: the shared kvmmctl copy */
	{ "KVMM_TEST_KVMMCTL", KC_KNOB_HARNESS },
	/* tests/cache-backend-roundtrip.c, cache-host-numa.c (from
	 * vmm-cuda-mock.sh, bench/gpu-check.sh) */
	{ "KVMM_TEST_BACKEND", KC_KNOB_HARNESS },
	{ "KVMM_TEST_GPU_PCI", KC_KNOB_HARNESS },
	/* tests/vmm-host-import-nomremap.c: its child's role */
	{ "KVMM_TEST_NOMREMAP_CHILD", KC_KNOB_HARNESS },
};

#define KC_TEST_KNOBS_COUNT (sizeof(kc_test_knobs) / sizeof(kc_test_knobs[0]))
#define KC_TEST_PREFIX "KVMM_TEST_"

/* An unknown KVMM_TEST_ name: the knob it likely meant (the closest, at
 * most 3 edits away), else the library's knobs. */
static void unknown_knob(const char *name, size_t len, const char *v)
{
	const struct kc_test_knob *near = NULL;
	unsigned int best = 4;

	for (size_t i = 0; i < KC_TEST_KNOBS_COUNT; i++) {
		unsigned int d =
			knob_name_distance(name, len, kc_test_knobs[i].name);

		if (d < best && kc_test_knobs[i].kind == KC_KNOB_NUMBER) {
			best = d;
			near = &kc_test_knobs[i];
		}
	}
	if (near)
		vmm_log(VMM_LOG_ERR,
			"libkvmm: %.*s=%.100s: not a libkvmm test knob; did you mean %s? (the connection is refused, EINVAL)",
			(int)len, name, v, near->name);
	else
		vmm_log(VMM_LOG_ERR,
			"libkvmm: %.*s=%.100s: not a libkvmm test knob (they are KVMM_TEST_HELLO_MINOR, KVMM_TEST_GIVE_AHEAD_MAX and KVMM_TEST_MAPAHEAD_DELAY_MS; the connection is refused, EINVAL)",
			(int)len, name, v);
}

static const struct kc_test_knob *knob_named(const char *name, size_t len)
{
	for (size_t i = 0; i < KC_TEST_KNOBS_COUNT; i++)
		if (strlen(kc_test_knobs[i].name) == len &&
		    !strncmp(name, kc_test_knobs[i].name, len))
			return &kc_test_knobs[i];
	return NULL;
}

int kc_test_knobs_check(void)
{
	int bad = 0;

	for (char **e = environ; e && *e; e++) {
		const char *eq = strchr(*e, '='), *v;
		size_t len = eq ? (size_t)(eq - *e) : strlen(*e);
		const struct kc_test_knob *k;
		uint64_t n;

		if (strncmp(*e, KC_TEST_PREFIX, sizeof(KC_TEST_PREFIX) - 1))
			continue;
		v = eq ? eq + 1 : "";
		k = knob_named(*e, len);
		if (!k) {
			unknown_knob(*e, len, v);
			bad++;
		} else if (k->kind == KC_KNOB_RETIRED) {
			vmm_log(VMM_LOG_ERR,
				"libkvmm: %s=%.100s: a retired libkvmm test knob: set %s (the connection is refused, EINVAL)",
				k->name, v, k->what);
			bad++;
		} else if (k->kind == KC_KNOB_NUMBER &&
			   !knob_number(v, k->min, k->max, &n)) {
			vmm_log(VMM_LOG_ERR,
				"libkvmm: %s=%.100s: expected %s from %llu to %llu, digits only (the connection is refused, EINVAL)",
				k->name, v, k->what, (unsigned long long)k->min,
				(unsigned long long)k->max);
			bad++;
		}
	}
	return bad ? -EINVAL : 0;
}

/* A number knob's value (checked by kc_test_knobs_check() first), or
 * dflt when it is unset. */
static uint64_t knob_value(const char *name, uint64_t dflt)
{
	const char *v = getenv(name);
	const struct kc_test_knob *k = knob_named(name, strlen(name));
	uint64_t n;

	if (!v || !k || !knob_number(v, k->min, k->max, &n))
		return dflt;
	return n;
}

uint16_t kc_test_hello_minor(void)
{
	return (uint16_t)knob_value("KVMM_TEST_HELLO_MINOR", KVMM_ABI_MINOR);
}

uint32_t kc_test_give_max(void)
{
	return (uint32_t)knob_value("KVMM_TEST_GIVE_AHEAD_MAX", UINT32_MAX);
}

uint32_t kc_test_mapahead_delay_ms(void)
{
	return (uint32_t)knob_value("KVMM_TEST_MAPAHEAD_DELAY_MS", 0);
}
