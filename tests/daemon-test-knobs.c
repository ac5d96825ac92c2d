// SPDX-License-Identifier: MIT
/*
 * timeout: 120
 * Every kvmmd test knob is checked at start against one table
 * (kd_test_knobs_check(), test_knob.c): a bad value of any of them stops
 * kvmmd with one ERR line "NAME=VALUE: ..." saying what was expected, and
 * a KVMMD_TEST_* name that is no knob (a misspelt one) stops it with the
 * knob it likely meant, or the list of them.  Until 7 December most were
 * read with atoi()/atol(): "50ms", "abc" or "-1" read as 0, and a
 * misspelt name was ignored, so the test that set it ran without its
 * delay or fault.  Good values of every knob start kvmmd, and the
 * readers read what the check took (leading zeros: 050 is 50 in the WARN
 * lines).  KVMMD_TEST_MIGRATE_FAIL's message lists every kind
 * (nvme-restamp was missing from the hand-written list); its @PAGES
 * takes a size --cache-block-pages names, or any without it.  The six
 * KVMMD_TEST_ABI_1_* flags that KVMMD_TEST_ABI_MINOR replaced are
 * refused with the value to set instead.
 */
#include "tests/cache-common.h"
#include "tests/lib/daemon.h"

#include <string.h>

enum grammar { NUMBER, PERIOD, FLAG, OWN };

/* the knobs, as test_knob.c's table has them; max: NUMBER's, PERIOD's */
static const struct {
	const char *name;
	enum grammar grammar;
	const char *too_big; /* max + 1 */
	const char *good;
} knobs[] = {
	{ "KVMMD_TEST_ABI_MINOR", NUMBER, "25", "021" },
	{ "KVMMD_TEST_CACHE_OPEN_FAIL", OWN, NULL, "ENOSPC:2" },
	{ "KVMMD_TEST_CACHE_RETRY_MS", PERIOD, "3600001", "3600000" },
	{ "KVMMD_TEST_DEMOTE_DELAY_MS", NUMBER, "3600001", "050" },
	{ "KVMMD_TEST_RESTORE_DELAY_MS", NUMBER, "3600001", "7" },
	{ "KVMMD_TEST_FDS_FAULT", OWN, NULL, "hangup" },
	{ "KVMMD_TEST_HOST_SLOTS_HELD", NUMBER, "65", "03" },
	{ "KVMMD_TEST_NVME_SLOTS_HELD", NUMBER, "65", "0" },
	{ "KVMMD_TEST_MIGRATE_FAIL", OWN, NULL, "nvme-restamp:2+" },
	{ "KVMMD_TEST_NVME_INVALIDATE_DELAY_MS", NUMBER, "3600001", "3600000" },
	{ "KVMMD_TEST_NVME_RESTAMP_DELAY_MS", NUMBER, "3600001", "0" },
	{ "KVMMD_TEST_NVME_OPEN_FAIL", NUMBER, "1000001", "1000000" },
	{ "KVMMD_TEST_NVME_SCAN_FAIL", OWN, NULL, "0,7,4294967294" },
	{ "KVMMD_TEST_NVME_RETIRE_FAIL", OWN, NULL, "superblock" },
	{ "KVMMD_TEST_NVME_CLEAR_FAIL", OWN, NULL, "8,4294967294" },
	{ "KVMMD_TEST_NVME_CLEAR_SYNC_FAIL", FLAG, NULL, "1" },
	{ "KVMMD_TEST_NVME_RESIZE_FAIL", FLAG, NULL, "0" },
	{ "KVMMD_TEST_NVME_WRITE_DELAY_MS", NUMBER, "3600001", "0" },
	{ "KVMMD_TEST_POLICY_SAVE_MS", PERIOD, "3600001", "050" },
	{ "KVMMD_TEST_POLICY_WRITE_DELAY_MS", NUMBER, "3600001", "20" },
	{ "KVMMD_TEST_SLAB_PROGRESS_MS", PERIOD, "3600001", "0100" },
	{ "KVMMD_TEST_TEL_POLL_LOG", FLAG, NULL, "1" },
	{ "KVMMD_SLOW_CMD_US", NUMBER, "3600000001", "" },
};
#define NR_KNOBS (sizeof(knobs) / sizeof(knobs[0]))

/* the bad values of every number, and of the others */
static const char *const bad_number[] = { "",	"x",  "5ms", "-1",
					  "+5", " 5", "5 ",  "0x10" };
static const char *const bad_flag[] = { "", "2", "01", "yes", "true", " 1" };
static const struct {
	const char *name, *value;
} bad_own[] = {
	{ "KVMMD_TEST_CACHE_OPEN_FAIL", "" },
	{ "KVMMD_TEST_CACHE_OPEN_FAIL", "ENOMEM" },
	{ "KVMMD_TEST_CACHE_OPEN_FAIL", "ENOMEM:0" },
	{ "KVMMD_TEST_CACHE_OPEN_FAIL", "ENOMEM: 1" },
	{ "KVMMD_TEST_CACHE_OPEN_FAIL", "ENOMEM:+1" },
	{ "KVMMD_TEST_CACHE_OPEN_FAIL", "ENOMEM:1x" },
	{ "KVMMD_TEST_CACHE_OPEN_FAIL", "EFOO:1" },
	{ "KVMMD_TEST_FDS_FAULT", "" },
	{ "KVMMD_TEST_FDS_FAULT", "CMD" },
	{ "KVMMD_TEST_FDS_FAULT", "cmd " },
	{ "KVMMD_TEST_FDS_FAULT", "hang-up" },
	{ "KVMMD_TEST_MIGRATE_FAIL", "" },
	{ "KVMMD_TEST_MIGRATE_FAIL", "gpu-host:1," },
	{ "KVMMD_TEST_MIGRATE_FAIL", "nvme-restamp:x" },
	/* @PAGES: a block size, 2 x layers pages */
	{ "KVMMD_TEST_MIGRATE_FAIL", "nvme-mark:1@0" },
	{ "KVMMD_TEST_MIGRATE_FAIL", "nvme-mark:1@x" },
	{ "KVMMD_TEST_MIGRATE_FAIL", "nvme-mark:1@" },
	{ "KVMMD_TEST_MIGRATE_FAIL", "nvme-mark:1@3" },
	{ "KVMMD_TEST_MIGRATE_FAIL", "nvme-mark:1@-2" },
	{ "KVMMD_TEST_MIGRATE_FAIL", "nvme-mark:1@2x" },
	{ "KVMMD_TEST_MIGRATE_FAIL", "nvme-mark:1@2@4" },
	{ "KVMMD_TEST_MIGRATE_FAIL", "nvme-mark:1+@" },
	{ "KVMMD_TEST_MIGRATE_FAIL", "nvme-mark:1@4294967296" },
	{ "KVMMD_TEST_MIGRATE_FAIL", "nvme-mark@2:1" },
	{ "KVMMD_TEST_NVME_SCAN_FAIL", "" },
	{ "KVMMD_TEST_NVME_SCAN_FAIL", "x" },
	{ "KVMMD_TEST_NVME_SCAN_FAIL", "1," },
	{ "KVMMD_TEST_NVME_SCAN_FAIL", ",1" },
	{ "KVMMD_TEST_NVME_SCAN_FAIL", "1,,2" },
	{ "KVMMD_TEST_NVME_SCAN_FAIL", "1, 2" },
	{ "KVMMD_TEST_NVME_SCAN_FAIL", "-1" },
	{ "KVMMD_TEST_NVME_SCAN_FAIL", "4294967295" },
	{ "KVMMD_TEST_NVME_SCAN_FAIL",
	  "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17" },
	{ "KVMMD_TEST_NVME_CLEAR_FAIL", "" },
	{ "KVMMD_TEST_NVME_CLEAR_FAIL", "8," },
	{ "KVMMD_TEST_NVME_CLEAR_FAIL", "-8" },
	{ "KVMMD_TEST_NVME_RETIRE_FAIL", "" },
	{ "KVMMD_TEST_NVME_RETIRE_FAIL", "fsync" },
	{ "KVMMD_TEST_NVME_RETIRE_FAIL", "Sync" },
};

static char log_buf[1 << 16];

/* kvmmd with args refuses to start with var=value; its log has exactly
 * one ERR line, which holds "var=value: " and want (when not NULL). */
static void refused_with(const char *const *args, const char *var,
			 const char *value, const char *want)
{
	char head[512];

	snprintf(head, sizeof(head), "%s=%s: ", var, value);
	td_start_refused(args, var, value, log_buf, sizeof(log_buf));
	if (t_count(log_buf, " ERR ") != 1 || !strstr(log_buf, head))
		t_fail("not one ERR line with '%s' in:\n%s", head, log_buf);
	if (want && !strstr(log_buf, want))
		t_fail("'%s' not in:\n%s", want, log_buf);
}

/* refused_with() a host tier and no size named */
static void refused(const char *var, const char *value, const char *want)
{
	const char *args[] = { "--host-mem", "2M", NULL };

	refused_with(args, var, value, want);
}

static void bad_values(void)
{
	int n = 0;

	for (size_t i = 0; i < NR_KNOBS; i++) {
		const char *name = knobs[i].name;

		if (knobs[i].grammar == FLAG) {
			for (size_t j = 0;
			     j < sizeof(bad_flag) / sizeof(*bad_flag); j++, n++)
				refused(name, bad_flag[j],
					"expected 1 (on) or 0 (off)");
			continue;
		}
		if (knobs[i].grammar == OWN)
			continue;
		for (size_t j = 0; j < sizeof(bad_number) / sizeof(*bad_number);
		     j++) {
			/* the diagnostic's empty value is unset (admin.md) */
			if (!bad_number[j][0] && !knobs[i].good[0])
				continue;
			refused(name, bad_number[j], "(digits only)");
			n++;
		}
		refused(name, knobs[i].too_big, "(digits only)");
		n++;
		if (knobs[i].grammar == PERIOD) {
			refused(name, "0", "from 1 to");
			n++;
		}
	}
	for (size_t i = 0; i < sizeof(bad_own) / sizeof(*bad_own); i++, n++)
		refused(bad_own[i].name, bad_own[i].value, NULL);
	printf("bad values refused at start, one ERR line each: %d\n", n);
}

/* KVMMD_TEST_MIGRATE_FAIL's messages name every kind, the newest too */
static void migrate_fail_kinds(void)
{
	static const char *const kinds[] = {
		"gpu-host", "host-nvme",       "nvme-host", "host-gpu",
		"nvme-gpu", "nvme-invalidate", "nvme-mark", "nvme-restamp",
	};

	refused("KVMMD_TEST_MIGRATE_FAIL", "foo:1",
		"'foo:1': expected KIND:N[@PAGES], KIND one of gpu-host, host-nvme, nvme-host, host-gpu, nvme-gpu, nvme-invalidate, nvme-mark, nvme-restamp");
	for (size_t i = 0; i < sizeof(kinds) / sizeof(*kinds); i++)
		t_assert(strstr(log_buf, kinds[i]));
	refused("KVMMD_TEST_MIGRATE_FAIL", "nvme-restamp:x",
		"'nvme-restamp:x': N must be a whole number >= 1");
	printf("KVMMD_TEST_MIGRATE_FAIL: foo:1 lists the %zu kinds, nvme-restamp:x says N\n",
	       sizeof(kinds) / sizeof(*kinds));
}

/*
 * KVMMD_TEST_MIGRATE_FAIL's @PAGES: the cache of blocks of PAGES pages
 * alone.  A size --cache-block-pages does not name is refused (no engine
 * would fail those jobs); without --cache-block-pages any size is taken
 * (the regions bring theirs).  Each size's WARN line says how many of
 * the entries are its.
 */
static void migrate_fail_sizes(void)
{
	const char *named[] = { "--host-mem", "4M", "--cache-block-pages",
				"4,2", NULL };
	const char *lazy[] = { "--host-mem", "2M", NULL };
	struct td_daemon d;

	refused("KVMMD_TEST_MIGRATE_FAIL", "nvme-mark:1@3",
		"'nvme-mark:1@3': @PAGES must name a block size in pages, an even whole number >= 2");
	refused_with(
		named, "KVMMD_TEST_MIGRATE_FAIL", "host-nvme:1,nvme-mark:1@6",
		"@6: no cache of blocks of 6 pages (--cache-block-pages 4,2): those jobs would never fail");

	setenv("KVMMD_TEST_MIGRATE_FAIL", "nvme-mark:1@2,host-nvme:2-3", 1);
	td_start_ok(&d, named);
	t_assert(td_read_log(&d, log_buf, sizeof(log_buf)) > 0);
	t_assert_eq(t_count(log_buf, " ERR "), 0);
	t_assert_eq(
		t_count(log_buf,
			"cache: KVMMD_TEST_MIGRATE_FAIL=nvme-mark:1@2,host-nvme:2-3: migrations fail on purpose (tests only) in blocks of 4 pages: 1 of its 2 entries"),
		1);
	t_assert_eq(
		t_count(log_buf,
			"cache: KVMMD_TEST_MIGRATE_FAIL=nvme-mark:1@2,host-nvme:2-3: migrations fail on purpose (tests only) in blocks of 2 pages: 2 of its 2 entries"),
		1);
	td_stop_ok(&d);

	setenv("KVMMD_TEST_MIGRATE_FAIL", "nvme-mark:1@6", 1);
	td_start_ok(&d, lazy);
	td_stop_ok(&d);
	unsetenv("KVMMD_TEST_MIGRATE_FAIL");
	printf("KVMMD_TEST_MIGRATE_FAIL @PAGES: 3 refused, 6 refused with 4,2 named and taken with none, each size's line counts its entries\n");
}

/* A name that is no knob: the one it likely meant, or all of them */
static void misspelt(void)
{
	refused("KVMMD_TEST_NVME_WRTE_DELAY_MS", "50",
		"not a kvmmd test knob; did you mean KVMMD_TEST_NVME_WRITE_DELAY_MS?");
	refused("KVMMD_TEST_DEMOTE_DELAY", "50",
		"did you mean KVMMD_TEST_DEMOTE_DELAY_MS?");
	refused("KVMMD_TEST_HOST_SLOT_HELD", "3",
		"did you mean KVMMD_TEST_HOST_SLOTS_HELD?");
	refused("KVMMD_TEST_ABI_MINR", "18",
		"not a kvmmd test knob; did you mean KVMMD_TEST_ABI_MINOR?");
	refused("KVMMD_TEST_SOMETHING_ELSE", "",
		"not a kvmmd test knob (they are ");
	/* the list is the table: every test knob this test knows is in it */
	for (size_t i = 0; i < NR_KNOBS; i++)
		if (!strncmp(knobs[i].name, "KVMMD_TEST_", 11) &&
		    !strstr(log_buf, knobs[i].name))
			t_fail("%s not listed in:\n%s", knobs[i].name, log_buf);
	printf("misspelt names refused with the knob meant, or the list\n");
}

/*
 * The six flags of before KVMMD_TEST_ABI_MINOR (until 7 December): each
 * refused, whatever its value, with the knob to set instead; a name
 * near one (KVMMD_TEST_ABI_1_17) is never told to set a retired one.
 */
static void retired(void)
{
	static const int minors[] = { 15, 16, 18, 19, 20, 21 };
	char name[32], want[96];

	for (size_t i = 0; i < sizeof(minors) / sizeof(*minors); i++) {
		snprintf(name, sizeof(name), "KVMMD_TEST_ABI_1_%d", minors[i]);
		snprintf(
			want, sizeof(want),
			"a retired kvmmd test knob: set KVMMD_TEST_ABI_MINOR=%d",
			minors[i]);
		refused(name, "1", want);
		refused(name, "0", want);
	}
	refused("KVMMD_TEST_ABI_1_17", "1", "not a kvmmd test knob (they are ");
	if (strstr(strstr(log_buf, "(they are "), "ABI_1_"))
		t_fail("a retired knob offered in:\n%s", log_buf);
	printf("the six retired KVMMD_TEST_ABI_1_* refused with KVMMD_TEST_ABI_MINOR=N\n");
}

/* Every knob at a good value: kvmmd starts, the readers read what the
 * check took. */
static void good_values(void)
{
	const char *lazy[] = { "--host-mem", "2M", NULL };
	char dir[256], state[300];
	const char *named[] = { "--host-mem",
				"2M",
				"--cache-block-pages",
				"4",
				"--policy-state",
				state,
				"--cache-gpu-blocks",
				"4",
				NULL };
	struct td_daemon d;

	td_tmp_path("kvmm-knobs-XXXXXX", dir, sizeof(dir));
	t_assert(mkdtemp(dir));
	snprintf(state, sizeof(state), "%s/policy.state", dir);
	/* all at once; the tiers open at the first publish */
	for (size_t i = 0; i < NR_KNOBS; i++)
		setenv(knobs[i].name, knobs[i].good, 1);
	td_start_ok(&d, lazy);
	kvmm_disconnect(cc_connect_lib(d.sock, "knobs"));
	/* KVMMD_SLOW_CMD_US empty: off (a line would be written before the
	 * stop) */
	t_assert_eq(td_stop_log(&d, log_buf, sizeof(log_buf)), 0);
	t_assert_eq(t_count(log_buf, "us of it sending the reply"), 0);
	printf("every knob at a good value: kvmmd starts\n");

	/* the tiers open at start (a failed set-up would stop it): what
	 * the readers made of the values */
	unsetenv("KVMMD_TEST_CACHE_OPEN_FAIL");
	setenv("KVMMD_SLOW_CMD_US", "01", 1); /* every command logged */
	td_start_ok(&d, named);
	kvmm_disconnect(cc_connect_lib(d.sock, "knobs"));
	/* logged after the reply is sent */
	td_wait_log(&d, "us of it sending the reply", 10000);
	t_assert(td_read_log(&d, log_buf, sizeof(log_buf)) > 0);
	t_assert_eq(t_count(log_buf, " ERR "), 0);
	t_assert_eq(
		t_count(log_buf,
			"cache: KVMMD_TEST_DEMOTE_DELAY_MS=50: migrations delayed (tests only)"),
		1);
	t_assert_eq(
		t_count(log_buf,
			"cache: KVMMD_TEST_RESTORE_DELAY_MS=7: migrations delayed"),
		1);
	t_assert_eq(t_count(log_buf, "KVMMD_TEST_NVME_WRITE_DELAY_MS"), 0);
	t_assert_eq(
		t_count(log_buf,
			"cache: KVMMD_TEST_HOST_SLOTS_HELD=3: slots held back"),
		1);
	t_assert_eq(t_count(log_buf, "KVMMD_TEST_NVME_SLOTS_HELD"), 0);
	t_assert_eq(
		t_count(log_buf,
			"host tier: KVMMD_TEST_SLAB_PROGRESS_MS=100 (tests only)"),
		1);
	t_assert_eq(
		t_count(log_buf,
			"policy state: KVMMD_TEST_POLICY_SAVE_MS: saved every 50 ms"),
		1);
	t_assert_eq(
		t_count(log_buf,
			"policy state: KVMMD_TEST_POLICY_WRITE_DELAY_MS=20: periodic saves delayed"),
		1);
	t_assert_eq(
		t_count(log_buf,
			"cache: KVMMD_TEST_MIGRATE_FAIL=nvme-restamp:2+: migrations fail"),
		1);
	t_assert_eq(t_count(log_buf, "KVMMD_TEST_CACHE_RETRY_MS=3600000: "), 1);
	t_assert_eq(t_count(log_buf, "KVMMD_TEST_NVME_OPEN_FAIL=1000000: "), 1);
	t_assert_eq(
		t_count(log_buf,
			"KVMMD_TEST_ABI_MINOR=21: HELLO says ABI 1.21, kvmmd plays that daemon (tests only)"),
		1);
	td_stop_ok(&d);
	for (size_t i = 0; i < NR_KNOBS; i++)
		unsetenv(knobs[i].name);
	unlink(state);
	strcat(state, ".lock"); /* kvmmd's lock beside it (cache_learned.c) */
	unlink(state);
	t_ok(rmdir(dir));
	printf("the readers read what the check took (050 is 50, 03 is 3, 0100 is 100, 021 is 21, 0 and empty are off, 01 is 1)\n");
}

int main(void)
{
	bad_values();
	migrate_fail_kinds();
	migrate_fail_sizes();
	misspelt();
	retired();
	good_values();
	return 0;
}
