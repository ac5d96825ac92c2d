// SPDX-License-Identifier: MIT
/*
 * timeout: 180
 * A drop answered while the NVMe tier is out is applied when it joins
 * (Documentation/tiers.md, "An NVMe tier that joins late"): blocks on
 * the file from a run before, kvmmd started with the file's directory
 * missing (the tier waits, ENOENT), a drop, the directory back, the
 * join:
 *   - every block (after a --uid drop of a tenant with no block, which
 *     the drop of every block subsumes): none of the 6 comes back at the
 *     join (recovered 0, both contents absent when opened), kvmmctl's
 *     NOTE and JSON and the log lines say so; a restart: still absent,
 *     the file's superblock holds the mark;
 *   - the same with --policy-state and a restart before the join: the
 *     pending drop is kept in FILE.nvme-drops, read back by the next
 *     start, applied at its join (none back), the file then removed; a
 *     restart: still absent;
 *   - the join's write of the marks failing
 *     (KVMMD_TEST_NVME_RETIRE_FAIL=superblock): the ERR line, the tier
 *     stays out (EIO, tried again), nothing recovered; the next start
 *     (the knob off) applies the kept drop: none back;
 *   - --uid A (root only: clients of other uids): B's 3 blocks come back
 *     at the join, from NVMe byte-identical, A's do not, nor after a
 *     restart;
 *   - the same under --cache-scope uid (root only): the join adopts the
 *     file's key first, then the open applies the drop: B's back, A's
 *     not, nor after a restart.
 * On the code before, each join recovered every block of the file.
 * Waits shortened with KVMMD_TEST_CACHE_RETRY_MS=100.  Skips (77) where
 * the NVMe tier cannot run (no O_DIRECT there).
 */
#include "kvmm/kvmmd/tier_nvme.h"
#include "tests/cache-drop-common.h"
#include "tests/lib/nvme_cache_args.h"
#include "tests/lib/nvme_probe.h"

#include <errno.h>
#include <sys/stat.h>

#define NB 3
#define UID_A 61331
#define UID_B 61332
#define UID_C 61333

static const struct cc_contents contents = { .base = 0xe71000,
					     .tag0 = 140,
					     .nb = NB };

static char dir[300], aside[320], nvme[340], state[300], drops[320];

/* kvmmd on the test's tier file; with --policy-state when keep; its
 * retries' first wait 100 ms. */
static void start(struct td_daemon *d, unsigned int flags, bool keep)
{
	const char *argv[24];
	struct nca_args a;
	int n = 0;

	for (const char *const *p = nca_args(&a, nvme, 3, flags); *p; p++)
		argv[n++] = *p;
	if (keep) {
		argv[n++] = "--policy-state";
		argv[n++] = state;
	}
	argv[n] = NULL;
	cc_start_with_delay(d, argv, "KVMMD_TEST_CACHE_RETRY_MS", 100);
	if (flags & NCA_ANY_UID)
		t_ok(chmod(d->dir, 0711));
}

/* Wait (at most 15 s) for the tier to join: nvme_open_error 0. */
static void wait_joined(const char *sock)
{
	struct kvmm_tier_stats_reply ts;

	cc_wait_nvme_joined(sock, &ts);
}

static void expect_out(const char *sock)
{
	struct kvmm_tier_stats_reply ts;

	cc_settled_stats(sock, &ts);
	t_assert_eq(ts.nvme_open_error, ENOENT);
	t_assert_eq(ts.recovered_blocks, 0);
}

static void dir_aside(void)
{
	t_ok(rename(dir, aside));
}

static void dir_back(void)
{
	t_ok(rename(aside, dir));
}

/* The superblock's drop marks. */
static struct tier_nvme_peek peek(void)
{
	struct tier_nvme_peek p;

	t_ok(tier_nvme_peek(nvme, &p));
	return p;
}

/* A run that leaves contents 0 and 1 on the file (6 blocks). */
static void fill(void)
{
	struct td_daemon d;

	start(&d, 0, false);
	cd_fill_to_nvme(d.sock, &contents);
	cc_stop(&d);
}

/* kvmmctl cache-drop (every block, every tier) while the tier is out:
 * nothing of the file's counted, the NOTE, the JSON. */
static void drop_all_out(const char *sock)
{
	static char out[4096];
	struct kvmm_admin_cache_drop_reply r;

	t_assert_eq(td_kvmmctl(sock, "cache-drop", out, sizeof(out)), 0);
	t_assert(strstr(out, "nvme 0 blocks\n") != NULL);
	if (!strstr(out,
		    "NOTE         the NVMe tier is out (kvmmctl status): the blocks of its file this drop covers are dropped when it joins, before they are recovered (kvmmd's log says whether a restart before then keeps the drop)\n"))
		t_fail("no NOTE in kvmmctl cache-drop's output:\n%s", out);
	t_assert_eq(td_kvmmctl(sock, "--json cache-drop --tier nvme", out,
			       sizeof(out)),
		    0);
	if (!strstr(out,
		    ",\"nvme_tier_out\":true,\"nvme_drop_pending\":true}\n"))
		t_fail("no nvme_drop_pending in:\n%s", out);
	r = cd_kvmmctl(sock, "--tier host");
	t_assert_eq(r.dropped[2], 0);
}

static void every_block(void)
{
	struct td_daemon d;
	struct kvmm_admin_cache_drop_reply r;

	fill();
	dir_aside();
	start(&d, 0, false);
	expect_out(d.sock);
	/* a tenant with nothing there: subsumed by the drop of every block */
	r = cd_kvmmctl(d.sock, "--tier nvme --uid 12345");
	t_assert_eq(r.dropped[2], 0);
	drop_all_out(d.sock);
	td_log_has(
		&d,
		"the NVMe tier is out (1 size): the blocks of its file the drop covers (every block) are dropped when it joins, before they are recovered (in memory alone: a restart before the join forgets it, no --policy-state to keep it in)",
		true);
	dir_back();
	wait_joined(d.sock);
	t_assert_eq(cd_recovered(d.sock), 0);
	td_wait_log(
		&d,
		"the drop of every block answered while it was out is applied: 6 blocks of its file left out before the recovery, its drop marks on disk",
		5000);
	/* said before the open writes anything (daemon-crash-fuzz's late
	 * run reads it: a kill after it may find the file changed) */
	td_log_has(
		&d,
		": opening it with the drop of every block answered while it was out: its marks are written before any block of its file is recovered",
		true);
	td_log_has(
		&d,
		"6 dropped by an operator's drop mark, left out, 6 of them by a drop answered while the tier was out, its marks written now",
		true);
	cd_open_expect(d.sock, &contents, 0, 0, 0, 0, 0);
	cd_open_expect(d.sock, &contents, 1, 0, 0, 0, 0);
	cc_stop(&d);
	t_assert(peek().drop_all != 0);

	start(&d, 0, false);
	t_assert_eq(cd_recovered(d.sock), 0);
	cd_open_expect(d.sock, &contents, 0, 0, 0, 0, 0);
	cd_open_expect(d.sock, &contents, 1, 0, 0, 0, 0);
	cc_stop(&d);
	printf("a drop of every block while the tier was out: none back at the join, nor at the restart after\n");
}

static void kept_across_restart(void)
{
	struct td_daemon d;
	struct stat st;

	fill();
	dir_aside();
	start(&d, 0, true);
	expect_out(d.sock);
	drop_all_out(d.sock);
	td_log_has(
		&d,
		"(every block) are dropped when it joins, before they are recovered (kept in --policy-state's FILE.nvme-drops across a restart)",
		true);
	t_ok(stat(drops, &st));
	cc_stop(&d);

	/* the restart, the tier still out: the drop read back */
	start(&d, 0, true);
	expect_out(d.sock);
	td_log_has(
		&d,
		".nvme-drops: 1 NVMe drops answered while the tier was out in a run before, applied when it opens",
		true);
	dir_back();
	wait_joined(d.sock);
	t_assert_eq(cd_recovered(d.sock), 0);
	cd_open_expect(d.sock, &contents, 0, 0, 0, 0, 0);
	cd_open_expect(d.sock, &contents, 1, 0, 0, 0, 0);
	/* applied: nothing left to keep */
	t_assert(stat(drops, &st) && errno == ENOENT);
	cc_stop(&d);

	start(&d, 0, true);
	t_assert_eq(cd_recovered(d.sock), 0);
	cd_open_expect(d.sock, &contents, 0, 0, 0, 0, 0);
	cc_stop(&d);
	printf("a drop kept across a restart before the join: none back\n");
}

/* The join's write of the drop's marks fails: the open fails (the tier
 * stays out, tried again), nothing of the file's comes back; the drop,
 * kept, is applied at the next start's open. */
static void mark_write_fails(void)
{
	struct kvmm_tier_stats_reply ts;
	struct td_daemon d;
	struct stat st;

	fill();
	dir_aside();
	start(&d, 0, true);
	(void)cd_kvmmctl(d.sock, "--tier nvme");
	cc_stop(&d);

	setenv("KVMMD_TEST_NVME_RETIRE_FAIL", "superblock", 1);
	start(&d, 0, true);
	unsetenv("KVMMD_TEST_NVME_RETIRE_FAIL");
	expect_out(d.sock);
	dir_back();
	td_wait_log(
		&d,
		"writing the drop marks of a drop answered while the tier was out: Input/output error; the open fails, so that none of the 6 blocks it covers comes back",
		5000);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.nvme_open_error, EIO);
	t_assert_eq(ts.nvme_open_last_error, EIO);
	t_assert(ts.nvme_open_retry_ms != UINT64_MAX); /* tried again */
	t_assert_eq(ts.recovered_blocks, 0);
	cd_open_expect(d.sock, &contents, 0, 0, 0, 0, 0);
	t_ok(stat(drops, &st)); /* still pending */
	cc_stop(&d);
	t_assert_eq(peek().drop_all, 0);

	start(&d, 0, true);
	t_assert_eq(cd_recovered(d.sock), 0);
	cd_open_expect(d.sock, &contents, 0, 0, 0, 0, 0);
	cd_open_expect(d.sock, &contents, 1, 0, 0, 0, 0);
	t_assert(stat(drops, &st) && errno == ENOENT);
	cc_stop(&d);
	t_assert(peek().drop_all != 0);
	printf("the join's mark write failing: the tier stays out, none back; applied at the next start\n");
}

static void one_tenant(void)
{
	static const uint64_t ha[NB] = { 0xe7a0001, 0xe7a0002, 0xe7a0003 };
	static const uint64_t hb[NB] = { 0xe7b0001, 0xe7b0002, 0xe7b0003 };
	struct kvmm_admin_cache_drop_reply r;
	struct td_daemon d;
	char arg[64];

	if (geteuid() != 0) {
		printf("--uid part skipped: needs root (clients of other uids)\n");
		return;
	}
	start(&d, NCA_ANY_UID, false);
	/* A's and B's go down to NVMe under C's three contents (LRU) */
	cu_publish_two_down(d.sock, UID_A, ha, UID_B, hb, UID_C, 0xe7c0000, NB);
	cc_stop(&d);

	dir_aside();
	start(&d, NCA_ANY_UID, false);
	expect_out(d.sock);
	snprintf(arg, sizeof(arg), "--uid %d", UID_A);
	r = cd_kvmmctl(d.sock, arg);
	t_assert_eq(r.dropped[2], 0);
	dir_back();
	wait_joined(d.sock);
	t_assert_eq(cd_recovered(d.sock), NB); /* B's */
	td_wait_log(
		&d,
		"the drop of the blocks of tenant 61331 answered while it was out is applied: 3 blocks",
		5000);
	cu_open_as(d.sock, UID_B, UID_B, hb, NB, NB, 2, 2);
	cu_open_as(d.sock, UID_A, UID_A, ha, NB, 0, 1, -1);
	cc_stop(&d);
	t_assert_eq(peek().tenant_marks, 1);

	start(&d, NCA_ANY_UID, false);
	t_assert_eq(cd_recovered(d.sock), NB);
	cu_open_as(d.sock, UID_A, UID_A, ha, NB, 0, 1, -1);
	cu_open_as(d.sock, UID_B, UID_B, hb, NB, NB, 2, 2);
	cc_stop(&d);
	printf("--uid A while the tier was out: B's back from NVMe, A's not, nor after a restart\n");
}

/* kvmmd under --cache-scope uid (each uid's hashes named with the key
 * the file's superblock keeps), saving its blocks to NVMe at the stop. */
static void start_scoped(struct td_daemon *d)
{
	const char *a[] = { "--socket-mode",
			    "0666",
			    "--cache-scope",
			    "uid",
			    "--cache-block-pages",
			    "4",
			    "--cache-gpu-blocks",
			    "4",
			    "--host-mem",
			    "2M",
			    "--nvme-path",
			    nvme,
			    "--nvme-size",
			    "16M",
			    "--nvme-save-on-stop",
			    "10000",
			    NULL };

	cc_start_with_delay(d, a, "KVMMD_TEST_CACHE_RETRY_MS", 100);
	t_ok(chmod(d->dir, 0711));
}

/*
 * Under --cache-scope uid the join adopts the file's key at the claim
 * (the start made a new one), then the open applies the --uid drop:
 * B's blocks come back under the adopted key, A's do not.
 */
static void scoped_tenant(void)
{
	static const uint64_t ha[NB] = { 0xe7d0001, 0xe7d0002, 0xe7d0003 };
	static const uint64_t hb[NB] = { 0xe7e0001, 0xe7e0002, 0xe7e0003 };
	struct kvmm_admin_cache_drop_reply r;
	struct td_daemon d;
	char arg[64];

	if (geteuid() != 0) {
		printf("--cache-scope uid part skipped: needs root (clients of other uids)\n");
		return;
	}
	start_scoped(&d);
	cu_publish_as(d.sock, UID_A, UID_A, ha, NB, 1, NB);
	cu_publish_as(d.sock, UID_B, UID_B, hb, NB, 2, NB);
	cc_stop(&d); /* both saved to NVMe */

	dir_aside();
	start_scoped(&d);
	expect_out(d.sock);
	snprintf(arg, sizeof(arg), "--uid %d", UID_A);
	r = cd_kvmmctl(d.sock, arg);
	t_assert_eq(r.dropped[2], 0);
	dir_back();
	wait_joined(d.sock);
	td_log_has(&d,
		   "cache scope: uid, now with the key of the NVMe tier's file",
		   true);
	t_assert_eq(cd_recovered(d.sock), NB); /* B's */
	cu_open_as(d.sock, UID_B, UID_B, hb, NB, NB, 2, 2);
	cu_open_as(d.sock, UID_A, UID_A, ha, NB, 0, 1, -1);
	cc_stop(&d);

	start_scoped(&d);
	t_assert_eq(cd_recovered(d.sock), NB);
	cu_open_as(d.sock, UID_A, UID_A, ha, NB, 0, 1, -1);
	cu_open_as(d.sock, UID_B, UID_B, hb, NB, NB, 2, -1);
	cc_stop(&d);
	printf("--cache-scope uid: the key adopted at the join, then --uid A applied: B's back, A's not\n");
}

int main(void)
{
	char base[256];

	cc_nvme_path(base, sizeof(base), "join-late-drop");
	t_nvme_require(base);
	snprintf(dir, sizeof(dir), "%s.d", base);
	snprintf(aside, sizeof(aside), "%s.aside", base);
	snprintf(nvme, sizeof(nvme), "%s/slots", dir);
	td_tmp_path("kvmm-join-late-drop.state", state, sizeof(state));
	snprintf(drops, sizeof(drops), "%s.nvme-drops", state);
	t_ok(mkdir(dir, 0700));
	every_block();
	unlink(nvme);
	kept_across_restart();
	unlink(nvme);
	mark_write_fails();
	unlink(nvme);
	one_tenant();
	unlink(nvme);
	scoped_tenant();
	unlink(nvme);
	rmdir(dir);
	unlink(state);
	unlink(drops);
	snprintf(drops, sizeof(drops), "%s.lock", state);
	unlink(drops);
	printf("drops while the NVMe tier was out held at its join\n");
	return 0;
}
