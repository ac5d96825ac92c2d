// SPDX-License-Identifier: MIT
/*
 * timeout: 120
 * --cache-scope uid with an NVMe tier that joins late (Documentation/
 * tiers.md, "An NVMe tier that joins late"): the start cannot read the
 * file, so it makes a new key; when the file is claimed and nothing was
 * named under that key yet, kvmmd takes the file's key and its blocks
 * are recovered as at a start.
 *
 *   - a run under the uid scope: uid A publishes 3 blocks, the stop
 *     saves them to NVMe (--nvme-save-on-stop);
 *   - the file's directory moved aside, kvmmd started (a new key,
 *     TIER_STATS at ENOENT), the directory put back: the tier joins, the
 *     log says the file's key was taken, the 3 blocks are recovered; a
 *     process of A opens them from NVMe byte-identical, one of uid B
 *     gets nothing; again with telemetry on (--telemetry auto: BPF where
 *     it loads, whose poll thread renames with the key, else shared
 *     memory);
 *   - the same, but A publishes a block before the directory comes back:
 *     a name was given out under the start's key, so the key stays, the
 *     log says why and the file is formatted (nothing recovered, A's
 *     saved blocks are gone).
 *
 * Waits shortened with KVMMD_TEST_CACHE_RETRY_MS=100.  Needs root (two
 * uids) and O_DIRECT where the file lives; skips otherwise.
 */
#include "tests/cache-uids.h"
#include "tests/lib/nvme_probe.h"

#include <errno.h>

#define UID_A 61011
#define UID_B 61012
#define NB 3
#define TAG_A 7

static const uint64_t hashes[NB] = { 0x1a7e0001, 0x1a7e0002, 0x1a7e0003 };
static const uint64_t early = 0x1a7e00ee; /* published before the join */

static const char adopted_line[] =
	"cache scope: uid, now with the key of the NVMe tier's file";
static const char kept_line[] =
	"(names already given out), so it keeps its key";
static const char format_line[] =
	"cached under another cache scope or key: formatting it anew";

static const char **args(const char **a, const char *nvme,
			 const char *telemetry)
{
	int n = 0;

	a[n++] = "--socket-mode";
	a[n++] = "0666";
	a[n++] = "--cache-scope";
	a[n++] = "uid";
	a[n++] = "--cache-block-pages";
	a[n++] = "4";
	a[n++] = "--cache-gpu-blocks";
	a[n++] = "4";
	a[n++] = "--host-mem";
	a[n++] = "2M";
	a[n++] = "--nvme-path";
	a[n++] = nvme;
	a[n++] = "--nvme-size";
	a[n++] = "16M";
	a[n++] = "--nvme-save-on-stop";
	a[n++] = "10000";
	if (telemetry) {
		a[n++] = "--telemetry";
		a[n++] = telemetry;
	}
	a[n] = NULL;
	return a;
}

static void start(struct td_daemon *d, const char *nvme, const char *telemetry)
{
	const char *a[24];

	t_ok(setenv("KVMMD_TEST_CACHE_RETRY_MS", "100", 1));
	cu_start(d, args(a, nvme, telemetry));
	unsetenv("KVMMD_TEST_CACHE_RETRY_MS");
}

/* Start kvmmd with dir aside: it starts without the tier, a new key. */
static void start_late(struct td_daemon *d, const char *dir, const char *away,
		       const char *nvme, const char *telemetry)
{
	static char log[1 << 16];
	struct kvmm_tier_stats_reply ts;

	t_ok(rename(dir, away));
	start(d, nvme, telemetry);
	cc_settled_stats(d->sock, &ts);
	t_assert_eq(ts.nvme_open_error, (uint64_t)ENOENT);
	t_assert_eq(ts.tiers[2].capacity_blocks, 0);
	t_assert(td_read_log(d, log, sizeof(log)) > 0);
	t_assert_eq(t_count(log, "cache scope: uid, with a new key"), 1);
}

/* The run before: A's blocks saved to NVMe under the file's key. */
static void save(const char *nvme)
{
	static char log[1 << 16];
	struct td_daemon d;

	start(&d, nvme, NULL);
	cu_publish_as(d.sock, UID_A, UID_A, hashes, NB, TAG_A, NB);
	t_assert_eq(td_stop_log(&d, log, sizeof(log)), 0);
	t_assert_eq(t_count(log, "cache: stopping: 3 blocks written to NVMe"),
		    1);
}

/* telemetry: NULL (off), or "auto", whose polls rename with the key (a
 * BPF poll on a thread of its own, joined before the key changes) */
static void join_takes_key(const char *dir, const char *away, const char *nvme,
			   const char *telemetry)
{
	static char log[1 << 16];
	struct kvmm_tier_stats_reply ts;
	struct td_daemon d;

	start_late(&d, dir, away, nvme, telemetry);
	t_ok(rename(away, dir));
	cc_wait_nvme_joined(d.sock, &ts);
	t_assert_eq(ts.recovered_blocks, NB);
	t_assert_eq(ts.tiers[2].used_blocks, NB);
	/* A's bytes from NVMe; B's name for the hashes is another */
	cu_open_as(d.sock, UID_A, UID_A, hashes, NB, NB, TAG_A, 2);
	cu_open_as(d.sock, UID_B, UID_B, hashes, NB, 0, 0, -1);
	t_assert_eq(td_stop_log(&d, log, sizeof(log)), 0);
	if (t_count(log, adopted_line) != 1 || t_count(log, format_line) ||
	    t_count(log, kept_line)) {
		fputs(log, stderr);
		t_fail("the late join did not take the file's key (`%s`)",
		       adopted_line);
	}
	printf("a late join took the file's key (telemetry %s%s): %d blocks of uid %d recovered, byte-identical\n",
	       telemetry ? telemetry : "off",
	       strstr(log, "telemetry: bpf") ? ", BPF" :
	       telemetry		     ? ", shared memory" :
					       "",
	       NB, UID_A);
}

static void join_keeps_key(const char *dir, const char *away, const char *nvme)
{
	static char log[1 << 16];
	struct kvmm_tier_stats_reply ts;
	struct td_daemon d;

	start_late(&d, dir, away, nvme, NULL);
	/* a name given out under the start's key */
	cu_publish_as(d.sock, UID_A, UID_A, &early, 1, TAG_A, 1);
	t_ok(rename(away, dir));
	cc_wait_nvme_joined(d.sock, &ts);
	t_assert_eq(ts.recovered_blocks, 0);
	cu_open_as(d.sock, UID_A, UID_A, hashes, NB, 0, 0, -1);
	cu_open_as(d.sock, UID_A, UID_A, &early, 1, 1, TAG_A, -1);
	t_assert_eq(td_stop_log(&d, log, sizeof(log)), 0);
	if (t_count(log, adopted_line) || t_count(log, kept_line) != 1 ||
	    t_count(log, format_line) != 1) {
		fputs(log, stderr);
		t_fail("a late join after a publish must keep the key and format the file (`%s`, `%s`)",
		       kept_line, format_line);
	}
	printf("a late join after a publish kept the start's key and formatted the file\n");
}

int main(void)
{
	char base[256], dir[300], away[320], nvme[320];

	if (geteuid() != 0)
		t_skip("needs root, to run processes of two uids");
	cc_nvme_path(base, sizeof(base), "scope-late-key");
	t_nvme_require(base);
	snprintf(dir, sizeof(dir), "%s.d", base);
	snprintf(away, sizeof(away), "%s.away", dir);
	snprintf(nvme, sizeof(nvme), "%s/slots", dir);
	unlink(nvme);
	rmdir(dir);
	t_ok(mkdir(dir, 0700));
	save(nvme);
	join_takes_key(dir, away, nvme, NULL);
	/* the stop saved them again under the file's key */
	join_takes_key(dir, away, nvme, "auto");
	join_keeps_key(dir, away, nvme);
	unlink(nvme);
	rmdir(dir);
	return 0;
}
