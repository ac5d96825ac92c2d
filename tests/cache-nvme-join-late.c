// SPDX-License-Identifier: MIT
/*
 * timeout: 120
 * An NVMe tier that cannot open at first joins the running cache later
 * (Documentation/tiers.md, "An NVMe tier that joins late"):
 *   - --nvme-path in a directory that does not exist at start (a file
 *     system not mounted yet): kvmmd starts, TIER_STATS says ENOENT,
 *     attempts and the next retry, kvmmctl status `tier nvme
 *     WAITING`, the metrics the errno; 5 contents of 3 blocks (3 GPU
 *     blocks, 6 host) put 2 on the host tier and drop 2 (nothing below
 *     it); the directory made, kvmmd's own timer opens the tier within a
 *     few seconds, no client asking: the NVMe tier has a capacity, status
 *     says `joined at attempt N`; 2 more contents push the host tier's
 *     blocks down to NVMe (6 blocks there), and one of those contents
 *     comes back from NVMe byte-identical in another process;
 *   - kvmmd restarted on that file made immutable (root: EPERM; else mode
 *     000, EACCES): it starts without the tier, a publish sets the cache
 *     up on the GPU and host tiers; a drop of the NVMe tier (of a tenant
 *     with no block there) is remembered for the join, and its log line
 *     says so; the file made writable again, the tier joins and the
 *     blocks the file holds are recovered into the running cache: a
 *     content the last run left on NVMe comes back from NVMe
 *     byte-identical;
 *   - the same before any publish: the tier opens for the size its
 *     blocks have, which are found before the cache is set up.
 * Waits shortened with KVMMD_TEST_CACHE_RETRY_MS=100 (100 ms doubling to
 * 6 s).  Skips (77) where the NVMe tier cannot run (no O_DIRECT there).
 */
#include "tests/cache-common.h"
#include "tests/lib/daemon.h"
#include "tests/lib/nvme_cache_args.h"
#include "tests/lib/nvme_probe.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#define NB 3

static const struct cc_contents contents = { .base = 0x5a7000,
					     .tag0 = 900,
					     .nb = NB };

static void start(struct td_daemon *d, const char *nvme)
{
	struct nca_args a;

	cc_start_with_delay(d, nca_args(&a, nvme, 3, NCA_BLOCK_UNNAMED),
			    "KVMMD_TEST_CACHE_RETRY_MS", 100);
}

static void stats(const char *sock, struct kvmm_tier_stats_reply *ts)
{
	cc_settled_stats(sock, ts);
}

/* Wait (at most 15 s) for the tier to join: nvme_open_error 0. */
static uint64_t wait_joined(const char *sock, struct kvmm_tier_stats_reply *ts)
{
	uint64_t t0 = cc_now_ms();

	for (;;) {
		stats(sock, ts);
		if (!ts->nvme_open_error)
			return cc_now_ms() - t0;
		if (ts->nvme_open_retry_ms == UINT64_MAX)
			t_fail("no attempt will come (nvme_open_error %llu)",
			       (unsigned long long)ts->nvme_open_error);
		if (cc_now_ms() - t0 > 15000)
			t_fail("the NVMe tier did not join in 15 s (error %llu, attempt %llu, next in %llu ms)",
			       (unsigned long long)ts->nvme_open_error,
			       (unsigned long long)ts->nvme_open_attempts,
			       (unsigned long long)ts->nvme_open_retry_ms);
		usleep(20000);
	}
}

static void expect_waiting(const char *sock, int err)
{
	static char out[1 << 16];
	struct kvmm_tier_stats_reply ts;
	char want[160];

	stats(sock, &ts);
	t_assert_eq(ts.nvme_open_error, (uint64_t)err);
	t_assert_eq(ts.nvme_open_last_error, (uint64_t)err);
	t_assert(ts.nvme_open_attempts >= 1);
	/* the next attempt is kvmmd's, within the longest wait (6 s) */
	t_assert(ts.nvme_open_retry_ms <= 6000);
	t_assert_eq(ts.cache_open_error, 0);
	t_assert_eq(td_kvmmctl(sock, "status", out, sizeof(out)), 0);
	snprintf(want, sizeof(want), "tier nvme    WAITING: %s (attempt ",
		 strerror(err));
	if (!strstr(out, want))
		t_fail("no '%s' in:\n%s", want, out);
	t_assert(strstr(out, "the cache runs without it until then)\n"));
	t_assert_eq(td_kvmmctl(sock, "metrics", out, sizeof(out)), 0);
	snprintf(want, sizeof(want),
		 "kvmm_cache_tier_open_error{tier=\"nvme\"} %d\n", err);
	t_assert(strstr(out, want) != NULL);
	snprintf(want, sizeof(want), "kvmm_cache_nvme_open_last_error %d\n",
		 err);
	t_assert(strstr(out, want) != NULL);
	t_assert(strstr(out, "kvmm_cache_nvme_open_retry_seconds +Inf") ==
		 NULL);
}

static void expect_joined(const char *sock, int err,
			  const struct kvmm_tier_stats_reply *ts)
{
	static char out[1 << 16];
	char want[160];

	t_assert_eq(ts->nvme_open_error, 0);
	t_assert_eq(ts->nvme_open_last_error, (uint64_t)err);
	t_assert_eq(ts->nvme_open_retry_ms, 0);
	t_assert(ts->nvme_open_attempts >= 2);
	t_assert(ts->tiers[2].capacity_blocks >= 2 * NB);
	t_assert_eq(td_kvmmctl(sock, "status", out, sizeof(out)), 0);
	snprintf(
		want, sizeof(want),
		"tier nvme    joined at attempt %llu (the one before failed: %s)\n",
		(unsigned long long)ts->nvme_open_attempts, strerror(err));
	if (!strstr(out, want))
		t_fail("no '%s' in:\n%s", want, out);
	t_assert(strstr(out, "WAITING") == NULL);
	t_assert_eq(td_kvmmctl(sock, "metrics", out, sizeof(out)), 0);
	t_assert(strstr(out, "kvmm_cache_tier_open_error{tier=\"nvme\"} 0\n"));
	snprintf(want, sizeof(want),
		 "kvmm_cache_nvme_open_attempts_total %llu\n",
		 (unsigned long long)ts->nvme_open_attempts);
	t_assert(strstr(out, want) != NULL);
}

/* Part 1: the directory comes later. */
static void directory_later(const char *dir, const char *nvme)
{
	struct kvmm_tier_stats_reply ts;
	struct td_daemon d;
	static char log[1 << 17];
	uint64_t ms;

	start(&d, nvme);
	expect_waiting(d.sock, ENOENT);
	/* GPU 3 blocks, host 6: contents 0 and 1 have nowhere to go */
	for (int k = 0; k < 5; k++)
		cc_write_content(d.sock, &contents, k);
	stats(d.sock, &ts);
	t_assert_eq(ts.publishes, 5 * NB);
	t_assert_eq(ts.tiers[0].used_blocks, NB);
	t_assert_eq(ts.tiers[1].used_blocks, 2 * NB);
	t_assert_eq(ts.tiers[2].used_blocks, 0);
	t_assert_eq(ts.tiers[2].capacity_blocks, 0);
	t_assert_eq(ts.tiers[2].demotions_in, 0);
	expect_waiting(d.sock, ENOENT);
	cc_read_content(d.sock, &contents, 0, 0, -1); /* dropped */

	/* kvmmd tries again by itself, waits doubling: 100, 200 ms */
	ms = cc_now_ms();
	do {
		stats(d.sock, &ts);
		t_assert_eq(ts.nvme_open_error, ENOENT);
		t_assert(cc_now_ms() - ms < 5000);
		usleep(10000);
	} while (ts.nvme_open_attempts < 3);
	t_assert(ts.nvme_open_retry_ms > 200 && ts.nvme_open_retry_ms <= 400);
	t_assert_eq(mkdir(dir, 0700), 0);
	ms = wait_joined(d.sock, &ts);
	printf("the NVMe tier joined %llu ms after its directory was made (attempt %llu)\n",
	       (unsigned long long)ms,
	       (unsigned long long)ts.nvme_open_attempts);
	fflush(stdout); /* before the readers fork */
	expect_joined(d.sock, ENOENT, &ts);
	t_assert_eq(ts.tiers[2].used_blocks, 0);

	/* host victims go down to NVMe now: contents 2 and 3 */
	for (int k = 5; k < 7; k++)
		cc_write_content(d.sock, &contents, k);
	stats(d.sock, &ts);
	t_assert_eq(ts.tiers[2].used_blocks, 2 * NB);
	t_assert_eq(ts.tiers[2].demotions_in, 2 * NB);
	/* content 2 comes back (content 4 goes down in its place); 3 and
	 * 4 stay there for the restart */
	cc_read_content(d.sock, &contents, 2, NB, 2);
	t_ok(td_stop_log(&d, log, sizeof(log)));
	if (!strstr(log, "cache: the NVMe tier ") ||
	    !strstr(log, " joined the cache: "))
		t_fail("no line about the tier joining in:\n%s", log);
	for (char *l = strtok(log, "\n"); l; l = strtok(NULL, "\n"))
		if (strstr(l, "NVMe tier"))
			printf("kvmmd: %s\n", l);
}

/*
 * The file lock_out() keeps out, while it does, and the process that
 * did (a forked reader's exit() must not let it in).  An immutable file
 * is one rm -rf cannot remove, nor its directory: a run that fails (a
 * t_fail() is an exit()) or is stopped by the runner's SIGTERM before it
 * let the file in again lets it in on the way out.
 */
static char locked_path[320];
static pid_t locked_by;

/* Immutable flag cleared, mode 0600: only system calls, as in a signal
 * handler. */
static void let_in(const char *nvme)
{
	int fd = open(nvme, O_RDONLY | O_CLOEXEC);
	int flags;

	if (fd >= 0) {
		if (!ioctl(fd, FS_IOC_GETFLAGS, &flags) &&
		    (flags & FS_IMMUTABLE_FL)) {
			flags &= ~FS_IMMUTABLE_FL;
			ioctl(fd, FS_IOC_SETFLAGS, &flags);
		}
		close(fd);
	}
	chmod(nvme, 0600);
}

static void let_in_at_exit(void)
{
	if (locked_path[0] && getpid() == locked_by)
		let_in(locked_path);
}

static void let_in_on_signal(int sig)
{
	let_in_at_exit();
	signal(sig, SIG_DFL);
	raise(sig);
}

/*
 * Make the file unopenable for writing: immutable where this process may
 * (root on ext4, xfs, btrfs: EPERM), else mode 000 (EACCES, not for
 * root).  0 and *err, or -1 when neither works here.
 */
static int lock_out(const char *nvme, int *err, bool undo)
{
	int fd = open(nvme, O_RDONLY | O_CLOEXEC);
	int flags, r = -1;

	t_assert(fd >= 0);
	if (!undo) {
		/* set before the lock, so that no exit comes between */
		snprintf(locked_path, sizeof(locked_path), "%s", nvme);
		locked_by = getpid();
	}
	if (!ioctl(fd, FS_IOC_GETFLAGS, &flags)) {
		if (undo)
			flags &= ~FS_IMMUTABLE_FL;
		else
			flags |= FS_IMMUTABLE_FL;
		if (!ioctl(fd, FS_IOC_SETFLAGS, &flags)) {
			*err = EPERM;
			r = 0;
		}
	}
	close(fd);
	if (r && geteuid() != 0 && !chmod(nvme, undo ? 0600 : 0)) {
		*err = EACCES;
		r = 0;
	}
	if (undo ? !r : r)
		locked_path[0] = 0; /* let in, or never kept out */
	return r;
}

/* Drops of the NVMe tier while it is out, of a tenant with no block on
 * the file (so that its blocks come back at the join: a drop of them is
 * cache-nvme-join-late-drop's): remembered for the join, and kvmmctl's
 * text and JSON and the log say so; a host drop does not. */
static void drop_while_out(struct td_daemon *d)
{
	static char log[1 << 17];
	char out[4096];

	t_assert_eq(td_kvmmctl(d->sock, "cache-drop --tier nvme --uid 12345",
			       out, sizeof(out)),
		    0);
	t_assert(strstr(out, "dropped      gpu 0, host 0, nvme 0 blocks\n"));
	if (!strstr(out,
		    "NOTE         the NVMe tier is out (kvmmctl status): the blocks of its file this drop covers are dropped when it joins, before they are recovered (kvmmd's log says whether a restart before then keeps the drop)\n"))
		t_fail("no NOTE in kvmmctl cache-drop's output:\n%s", out);
	t_assert_eq(td_kvmmctl(d->sock, "cache-drop --tier host --json", out,
			       sizeof(out)),
		    0);
	t_assert(strstr(out, "nvme_tier_out") == NULL);
	t_assert_eq(td_kvmmctl(d->sock,
			       "cache-drop --tier nvme --uid 12345 --json", out,
			       sizeof(out)),
		    0);
	t_assert(
		strstr(out,
		       ",\"nvme_tier_out\":true,\"nvme_drop_pending\":true}\n") !=
		NULL);
	t_assert(td_read_log(d, log, sizeof(log)) > 0);
	if (t_count(log,
		    "gpu 0, host 0, nvme 0; 0 stale NVMe copies invalidated; 0 NVMe headers or marks not written; the NVMe tier is out (1 size): the blocks of its file the drop covers (tenant 12345's) are dropped when it joins, before they are recovered (in memory alone: a restart before the join forgets it, no --policy-state to keep it in)") !=
	    2) {
		fputs(log, stderr);
		t_fail("the drop's log line does not say it waits for the join");
	}
}

/* Part 2: the file is there, with blocks, but cannot be opened at first. */
static void file_later(const char *nvme)
{
	struct kvmm_tier_stats_reply ts;
	struct td_daemon d;
	int err = 0;

	if (lock_out(nvme, &err, false)) {
		printf("skip part 2: neither FS_IMMUTABLE_FL nor mode 000 keeps kvmmd out of %s here\n",
		       nvme);
		return;
	}
	printf("the file kept out with %s\n", strerror(err));
	fflush(stdout);
	start(&d, nvme);
	expect_waiting(d.sock, err);
	/* the cache set up without the tier */
	cc_write_content(d.sock, &contents, 7);
	stats(d.sock, &ts);
	t_assert_eq(ts.tiers[2].capacity_blocks, 0);
	t_assert_eq(ts.recovered_blocks, 0);
	cc_read_content(d.sock, &contents, 3, 0, -1); /* not found yet */
	expect_waiting(d.sock, err);
	drop_while_out(&d);

	t_assert_eq(lock_out(nvme, &err, true), 0);
	wait_joined(d.sock, &ts);
	expect_joined(d.sock, err, &ts);
	/* the last run's NVMe blocks: contents 3 and 4 */
	t_assert_eq(ts.recovered_blocks, 2 * NB);
	t_assert_eq(ts.tiers[2].used_blocks, 2 * NB);
	/* content 7, on the GPU since before the tier joined, still is */
	cc_read_content(d.sock, &contents, 7, NB, 0);
	cc_read_content(d.sock, &contents, 3, NB, 2);
	cc_stop(&d);
}

/*
 * Part 3: the file kept out again, and let in before any publish: the
 * tier opens for the size its blocks have at once (as at a start), and
 * its blocks are found before the cache is set up.
 */
static void file_before_setup(const char *nvme)
{
	struct kvmm_tier_stats_reply ts;
	struct td_daemon d;
	int err = 0;

	if (lock_out(nvme, &err, false))
		return; /* part 2 said why */
	start(&d, nvme);
	expect_waiting(d.sock, err);
	t_assert_eq(lock_out(nvme, &err, true), 0);
	wait_joined(d.sock, &ts);
	t_assert_eq(ts.nvme_open_last_error, (uint64_t)err);
	t_assert_eq(ts.recovered_blocks, 2 * NB);
	t_assert_eq(ts.tiers[2].used_blocks, 2 * NB);
	t_assert_eq(ts.tiers[2].block_bytes, (uint64_t)CC_PPB * CC_PAGE);
	cc_read_content(d.sock, &contents, 4, NB, 2);
	cc_stop(&d);
}

int main(void)
{
	char base[256], dir[300], nvme[320];

	cc_nvme_path(base, sizeof(base), "join-late");
	t_nvme_require(base);
	atexit(let_in_at_exit);
	signal(SIGTERM, let_in_on_signal);
	signal(SIGINT, let_in_on_signal);
	snprintf(dir, sizeof(dir), "%s.d", base);
	snprintf(nvme, sizeof(nvme), "%s/slots", dir);
	directory_later(dir, nvme);
	file_later(nvme);
	file_before_setup(nvme);
	unlink(nvme);
	rmdir(dir);
	printf("the NVMe tier joined late, twice\n");
	return 0;
}
