// SPDX-License-Identifier: MIT
/*
 * timeout: 240
 * A block `kvmmctl cache-drop` keeps on NVMe (in use: here a client's
 * pin) survives the next restart, where the drop's mark (every header
 * written before the drop is left out at the next start) used to lose
 * it: its header is written again above the mark before the reply
 * (Documentation/tiers.md, "Drop marks").  kvmmd as
 * tests/lib/nvme_cache_args.h sets it up (3 GPU blocks, 6 host, 6 NVMe;
 * contents 0 and 1 of 3 blocks end on NVMe), content 1's first block
 * pinned:
 *   - `--tier nvme`: 5 dropped, 1 kept; kvmmd logs the header written
 *     above the mark, and says it (ABI 1.23): the reply
 *     (`kvmmctl --json cache-drop`'s nvme_restamped 1), a second drop's
 *     text line (`restamped    1 kept NVMe blocks' headers ...`), and
 *     the totals of TIER_STATS, `kvmmctl metrics` and `kvmmctl status`
 *     (1 then 2 restamped, 0 failed); SIGTERM; the restart recovers
 *     exactly that block (0 before), which a new client opens from NVMe
 *     byte-identical, and none of the 5;
 *   - `--uid` of the test's own uid (the tenant's mark): the same;
 *   - every tier dropped, with --nvme-save-on-stop 1 (nothing left to
 *     save but the kept block, which the stop does not write again): the
 *     same (0 before: the stop did not help it);
 *   - a client of ABI 1.22 (its HELLO says so): the drop's reply is the
 *     336 bytes of before, the kept block restamped all the same;
 *   - the header write held back (KVMMD_TEST_NVME_RESTAMP_DELAY_MS), the
 *     mark on disk, the reply not come, SIGKILL: the restart recovers
 *     nothing: the kept block is lost in that window, and none of the 5
 *     dropped comes back;
 *   - host -> NVMe writes held in flight (KVMMD_TEST_NVME_WRITE_DELAY_MS:
 *     content 5 published pushes content 2 down while contents 0 and 1
 *     fill NVMe), all 3 queued (TIER_STATS) before the drop: the drop
 *     keeps the 3 busy;
 *     once they landed their headers are written above the mark too
 *     (in no reply; TIER_STATS' total says them), and the restart recovers exactly those, byte-identical from NVMe (0
 *     before: they landed under the mark);
 *   - the header write failing (KVMMD_TEST_MIGRATE_FAIL=nvme-restamp:1):
 *     the reply still comes, its nvme_invalidate_failures 0 (those are
 *     the dropped blocks') and its nvme_restamp_failures 1 (ABI 1.23,
 *     the wire's bytes), as TIER_STATS', the metrics' and kvmmctl
 *     status's totals say; a WARN line names the block, it is still
 *     served from NVMe in this run, and the restart does not find it.
 * Skips (77) where the NVMe tier cannot run (no O_DIRECT there).
 */
#include <signal.h>
#include <sys/wait.h>

#include "kvmm/kvmmd/tier_nvme.h"
#include "tests/cache-drop-common.h"
#include "tests/lib/nvme_cache_args.h"
#include "tests/lib/nvme_probe.h"

#define NB 3

static const struct cc_contents contents = { .base = 0xda000,
					     .tag0 = 110,
					     .nb = NB };

static void start(struct td_daemon *d, const char *nvme, bool save_on_stop)
{
	struct nca_args a;

	nca_args(&a, nvme, 3, 0);
	for (int i = 0; save_on_stop && a.argv[i]; i++)
		if (!strcmp(a.argv[i], "--nvme-save-on-stop"))
			a.argv[i + 1] = "1";
	cc_start(d, a.argv);
}

/* Contents 0 and 1 on NVMe, content 1's first block pinned by pin. */
static struct kvmm_conn *fill_and_pin(const char *sock)
{
	struct kvmm_pin_opts po;
	struct kvmm_conn *pin;
	uint64_t h[NB];

	cd_fill_to_nvme(sock, &contents);
	pin = cc_connect_lib(sock, "pinner");
	cc_content_hashes(&contents, 1, h);
	t_ok(cc_pin(pin, h[0], 0, 0, 0, &po));
	return pin;
}

/* After a restart: the kept block alone came back, from NVMe. */
static void expect_kept_back(const char *sock)
{
	t_assert_eq(cd_recovered(sock), 1);
	cd_open_expect(sock, &contents, 0, 0, 0, 0, 0);
	/* content 1's prefix: its first block, read from NVMe and checked
	 * byte for byte (cd_open()) */
	cd_open_expect(sock, &contents, 1, 1, 0, 0, 1);
}

static void expect_log(const char *log, const char *what)
{
	if (!strstr(log, what))
		t_fail("no \"%s\" in kvmmd's log:\n%s", what, log);
}

static void expect_in(const char *out, const char *what, const char *whose)
{
	if (!strstr(out, what))
		t_fail("no \"%s\" in %s:\n%s", what, whose, out);
}

/* The kept NVMe blocks' restamps since the start, written and failed, as
 * TIER_STATS, kvmmctl metrics and kvmmctl status say them (ABI 1.23). */
static void expect_restamp_totals(const char *sock, uint64_t written,
				  uint64_t failed)
{
	static char out[1 << 20];
	struct kvmm_tier_stats_reply ts;
	char want[160];

	cc_settled_stats(sock, &ts);
	t_assert_eq(ts.size, sizeof(ts));
	t_assert_eq(ts.nvme_restamped, written);
	t_assert_eq(ts.nvme_restamp_failures, failed);

	t_assert_eq(td_kvmmctl(sock, "metrics", out, sizeof(out)), 0);
	snprintf(want, sizeof(want), "\nkvmm_cache_nvme_restamped_total %llu\n",
		 (unsigned long long)written);
	expect_in(out, want, "kvmmctl metrics");
	snprintf(want, sizeof(want),
		 "\nkvmm_cache_nvme_restamp_failures_total %llu\n",
		 (unsigned long long)failed);
	expect_in(out, want, "kvmmctl metrics");

	t_assert_eq(td_kvmmctl(sock, "--json status", out, sizeof(out)), 0);
	snprintf(want, sizeof(want),
		 "\"nvme_restamped\":%llu,\"nvme_restamp_failures\":%llu",
		 (unsigned long long)written, (unsigned long long)failed);
	expect_in(out, want, "kvmmctl --json status");
	t_assert_eq(td_kvmmctl(sock, "status", out, sizeof(out)), 0);
	snprintf(want, sizeof(want),
		 "%llu kept NVMe blocks restamped above a drop mark, %llu not",
		 (unsigned long long)written, (unsigned long long)failed);
	expect_in(out, want, "kvmmctl status");
}

/* One drop (kvmmctl cache-drop ARGS) keeping the pinned block, a stop,
 * a restart that finds it. */
static void kept_survives(const char *nvme, const char *args, bool save_on_stop,
			  uint64_t dg, uint64_t dh)
{
	static char log[1 << 16];
	struct kvmm_admin_cache_drop_reply r;
	struct kvmm_conn *pin;
	struct td_daemon d;

	start(&d, nvme, save_on_stop);
	pin = fill_and_pin(d.sock);
	r = cd_kvmmctl(d.sock, args);
	cd_expect(&r, dg, dh, 2 * NB - 1, 0, 0, 1);
	t_assert_eq(r.kept_pinned, 1);
	t_assert_eq(r.nvme_invalidate_failures, 0);
	t_assert_eq(r.nvme_restamped, 1);
	t_assert_eq(r.nvme_restamp_failures, 0);
	t_assert_eq(r.nvme_restamp_gone, 0);
	expect_restamp_totals(d.sock, 1, 0);
	if (!strcmp(args, "--tier nvme")) {
		static char out[4096];

		/* again, kvmmctl's text: the pinned block kept and restamped
		 * once more, the totals 2 */
		t_assert_eq(td_kvmmctl(d.sock, "cache-drop --tier nvme", out,
				       sizeof(out)),
			    0);
		printf("%s", out);
		expect_in(
			out,
			"\nrestamped    1 kept NVMe blocks' headers written above the drop mark (a restart finds them), 0 left NVMe first\n",
			"kvmmctl cache-drop");
		if (strstr(out, "WARNING"))
			t_fail("a WARNING line in kvmmctl cache-drop:\n%s",
			       out);
		expect_restamp_totals(d.sock, 2, 0);
	}
	kvmm_disconnect(pin);
	t_ok(td_stop_log(&d, log, sizeof(log)));
	expect_log(
		log,
		"kept NVMe blocks: 1 headers written above the drop mark, 0 not, 0 left NVMe first");

	start(&d, nvme, false);
	expect_kept_back(d.sock);
	cc_stop(&d);
	unlink(nvme);
	printf("cache-drop %s%s: the kept NVMe block recovered after a restart, none of the 5 dropped\n",
	       args, save_on_stop ? " (--nvme-save-on-stop 1)" : "");
}

/* A client of ABI 1.22 (its HELLO says so): a --tier nvme drop's reply is
 * the 336 bytes of before, without the restamp counts, though the kept
 * block was restamped (TIER_STATS says so to a client of 1.23). */
static void old_client(const char *nvme)
{
	struct kvmm_admin_cache_drop a = { .size = sizeof(a),
					   .tiers = KVMM_CACHE_DROP_NVME };
	struct kvmm_admin_cache_drop_reply r;
	struct kvmm_conn *pin;
	struct td_daemon d;
	struct cc old;

	start(&d, nvme, false);
	pin = fill_and_pin(d.sock);
	cc_connect_minor(&old, d.sock, 22);
	memset(&r, 0xa5, sizeof(r)); /* what the reply did not write */
	t_ok(cc_call(&old, KVMM_CMD_ADMIN_CACHE_DROP, &a, sizeof(a), &r,
		     sizeof(r), NULL, NULL));
	cc_disconnect(&old);
	t_assert_eq(r.size, 336);
	t_assert_eq(offsetof(struct kvmm_admin_cache_drop_reply,
			     nvme_restamped),
		    336);
	t_assert_eq(sizeof(r), 360);
	cd_expect(&r, 0, 0, 2 * NB - 1, 0, 0, 1);
	t_assert_eq(r.nvme_restamped, 0xa5a5a5a5a5a5a5a5ull);
	t_assert_eq(r.nvme_restamp_failures, 0xa5a5a5a5a5a5a5a5ull);
	t_assert_eq(r.nvme_restamp_gone, 0xa5a5a5a5a5a5a5a5ull);
	expect_restamp_totals(d.sock, 1, 0);
	kvmm_disconnect(pin);
	cc_stop(&d);
	unlink(nvme);
	printf("a 1.22 client's drop: the 336 bytes of before, the kept block restamped all the same\n");
}

/* A process that sends a drop of every tier and must not get its reply:
 * kvmmd is killed first (exit 0); a reply is exit 1. */
static pid_t drop_unanswered(const char *sock)
{
	pid_t p = fork();

	t_assert(p >= 0);
	if (p == 0) {
		struct kvmm_admin_cache_drop a = { .size = sizeof(a) };
		struct kvmm_admin_cache_drop_reply r;

		_exit(cd_raw(sock, &a, sizeof(a), &r) ? 0 : 1);
	}
	return p;
}

/* Wait (10 s at most) for the file's mark of every block. */
static void wait_mark(const char *nvme)
{
	for (int i = 0; i < 1000; i++) {
		struct tier_nvme_peek p;

		t_ok(tier_nvme_peek(nvme, &p));
		if (p.drop_all)
			return;
		usleep(10000);
	}
	t_fail("no drop mark in %s's superblock", nvme);
}

static void crash_before_restamp(const char *nvme)
{
	struct td_daemon d;
	struct kvmm_conn *pin;
	pid_t p;

	setenv("KVMMD_TEST_NVME_RESTAMP_DELAY_MS", "60000", 1);
	start(&d, nvme, false);
	unsetenv("KVMMD_TEST_NVME_RESTAMP_DELAY_MS");
	pin = fill_and_pin(d.sock);
	p = drop_unanswered(d.sock);
	wait_mark(nvme);
	td_kill(&d);
	t_assert_eq(cc_wait_child(p), 0); /* never answered */
	kvmm_disconnect(pin);
	td_stop(&d);

	start(&d, nvme, false);
	t_assert_eq(cd_recovered(d.sock), 0);
	cd_open_expect(d.sock, &contents, 0, 0, 0, 0, 0);
	cd_open_expect(d.sock, &contents, 1, 0, 0, 0, 0);
	cc_stop(&d);
	unlink(nvme);
	printf("SIGKILL between the mark and the kept block's header write: the kept block lost, no dropped one back\n");
}

static void writes_in_flight(const char *nvme)
{
	static char log[1 << 16];
	struct kvmm_admin_cache_drop_reply r;
	struct td_daemon d;
	uint32_t from[3], found = 0;

	setenv("KVMMD_TEST_NVME_WRITE_DELAY_MS", "3000", 1);
	start(&d, nvme, false);
	unsetenv("KVMMD_TEST_NVME_WRITE_DELAY_MS");
	cd_fill_to_nvme(d.sock, &contents);
	/* content 5 on the GPU: content 2 from the host down to NVMe, its
	 * writes held 3 s, numbered once queued */
	cc_write_content(d.sock, &contents, 5);
	cd_wait_writes_held(d.sock, NB);
	r = cd_kvmmctl(d.sock, "--tier nvme");
	t_assert_eq(r.kept[2], NB);
	t_assert_eq(r.kept_busy, NB);
	/* (content 0's stale copies whose slots the writes reserved are
	 * left, counted as failures: the mark covers them) */
	/* restamped when they land, after the reply: in no drop's reply,
	 * in TIER_STATS' total (10 s at most for the writes held 3 s) */
	t_assert_eq(r.nvme_restamped + r.nvme_restamp_failures, 0);
	for (int i = 0; i < 1000; i++) {
		struct kvmm_tier_stats_reply ts;

		cc_settled_stats(d.sock, &ts);
		if (ts.nvme_restamped == r.kept[2])
			break;
		if (i == 999)
			t_fail("TIER_STATS: %llu restamped, expected %llu",
			       (unsigned long long)ts.nvme_restamped,
			       (unsigned long long)r.kept[2]);
		usleep(10000);
	}
	expect_restamp_totals(d.sock, r.kept[2], 0);
	t_ok(td_stop_log(&d, log, sizeof(log))); /* after the writes */

	start(&d, nvme, false);
	t_assert_eq(cd_recovered(d.sock), r.kept[2]);
	for (int k = 0; k < 6; k++) {
		if (cd_open(d.sock, &contents, k, from) && k != 2)
			t_fail("content %d found after the restart", k);
		found += from[2];
	}
	/* content 2's prefix: the blocks that landed, from NVMe */
	t_assert_eq(found, r.kept[2]);
	cc_stop(&d);
	unlink(nvme);
	printf("%llu NVMe writes in flight through a drop, numbered before it: recovered after a restart\n",
	       (unsigned long long)r.kept[2]);
}

static void failed_restamp(const char *nvme)
{
	static char log[1 << 16];
	struct kvmm_admin_cache_drop a = { .size = sizeof(a) };
	struct kvmm_admin_cache_drop_reply r;
	struct kvmm_conn *pin;
	struct td_daemon d;

	setenv("KVMMD_TEST_MIGRATE_FAIL", "nvme-restamp:1", 1);
	start(&d, nvme, false);
	unsetenv("KVMMD_TEST_MIGRATE_FAIL");
	pin = fill_and_pin(d.sock);
	/* every tier: the open below then moves nothing else down to NVMe;
	 * the reply's bytes (cd_raw(): all 360 of ABI 1.23) */
	t_ok(cd_raw(d.sock, &a, sizeof(a), &r));
	cd_expect(&r, NB, 2 * NB, 2 * NB - 1, 0, 0, 1);
	t_assert_eq(r.nvme_invalidate_failures, 0);
	t_assert_eq(r.nvme_restamped, 0);
	t_assert_eq(r.nvme_restamp_failures, 1);
	t_assert_eq(r.nvme_restamp_gone, 0);
	expect_restamp_totals(d.sock, 0, 1);
	/* served in this run */
	cd_open_expect(d.sock, &contents, 1, 1, 0, 0, 1);
	kvmm_disconnect(pin);
	t_ok(td_stop_log(&d, log, sizeof(log)));
	expect_log(
		log,
		"header not written above the drop mark (Input/output error); served in this run, a restart will not find it (1 such since the start)");
	expect_log(
		log,
		"kept NVMe blocks: 0 headers written above the drop mark, 1 not, 0 left NVMe first");

	start(&d, nvme, false);
	t_assert_eq(cd_recovered(d.sock), 0);
	cd_open_expect(d.sock, &contents, 1, 0, 0, 0, 0);
	cc_stop(&d);
	unlink(nvme);
	printf("a kept block's header write failing: logged, served in the run, not recovered\n");
}

int main(void)
{
	char nvme[256], uid[32];

	cc_nvme_path(nvme, sizeof(nvme), "cache-drop-kept");
	t_nvme_require(nvme);
	unlink(nvme);
	kept_survives(nvme, "--tier nvme", false, 0, 0);
	snprintf(uid, sizeof(uid), "--uid %u --tier nvme", (unsigned)getuid());
	kept_survives(nvme, uid, false, 0, 0);
	/* the GPU holds one content, the host the other two */
	kept_survives(nvme, "", true, NB, 2 * NB);
	old_client(nvme);
	crash_before_restamp(nvme);
	writes_in_flight(nvme);
	failed_restamp(nvme);
	return 0;
}
