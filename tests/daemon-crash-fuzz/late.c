// SPDX-License-Identifier: MIT
/*
 * tests/daemon-crash-fuzz's late starts: kvmmd started while its
 * --nvme-path's directory is not there, so that it starts without the
 * NVMe tier and the tier joins the running cache when the directory
 * comes back (Documentation/tiers.md, "An NVMe tier that joins late").
 * The file lives in a directory of its own (DIR/slots); a late start
 * moves DIR aside (DIR.away), first starting kvmmd as before on the
 * file (what it holds, with the drops still pending for it applied;
 * its bytes put back after, cf_copy_recovered()) and hashing its bytes,
 * then starts kvmmd with every size's TIER_STATS at ENOENT, no NVMe
 * capacity and nothing recovered.  The round puts DIR back at a drawn
 * moment while the clients run (or not before the kill), and polls every
 * size's TIER_STATS until each has its NVMe capacity: the join.  Half of
 * the starts fail the first size's first open or two after the claim
 * (KVMMD_TEST_NVME_OPEN_FAIL), so that the join spans attempts (the
 * later sizes' partitions join first) and a kill lands inside it.
 *
 * After the kill the log says where the join was: no attempt after the
 * directory came back (before), the file claimed or some partitions
 * joined (during), every size joined (after).  What must hold:
 *   - a partition that had not joined (nor begun an open that applies
 *     a drop answered while the tier was out, whose marks it writes
 *     before it joins: its line says so) was never written: the next
 *     start as before recovers exactly what the late start's start as
 *     before did in that size, or at most that where a drop of the
 *     round answered while the tier was out reached it (that start
 *     applies it: pending_mask); with no partition joined the file's
 *     bytes are the same as at the late start (nothing the cache held
 *     before the join reached it);
 *   - a drop answered before every size was seen joined
 *     (cf_drop.tier_out) is held to as any drop: it dropped what the
 *     cache held, and the partitions out then apply it at their join
 *     (tiers.md, "An NVMe tier that joins late"); the fuzzer's kvmmd
 *     runs with the run's --policy-state, so kvmmd wrote the drop to
 *     FILE.nvme-drops before it answered and a kill before or during
 *     the join leaves it pending for the next start, which applies it
 *     (tests/cache-nvme-join-late-drop.c checks it deterministically).
 *     Every such drop's log line must say it was kept there; one kept
 *     in memory alone fails the round (the check would blame kvmmd for
 *     what it said it could not keep);
 *   - the rest is the restart check's (byte-identical blocks, in their
 *     own size's partition, found equal to recovered, covered drops).
 */
#include <fcntl.h>
#include <unistd.h>

#include "tests/cache-drop-common.h"
#include "tests/daemon-crash-fuzz/crash.h"

/* the attempts' first wait, doubling to 60 times it */
#define CF_LATE_RETRY_MS "3"

static const char cf_claim_fail_line[] =
	"): Input/output error; the cache runs";
static const char cf_claimed_line[] = "is claimed at attempt";
static const char cf_key_line[] =
	"its blocks were cached under another cache scope or key: formatting it anew";
static const char cf_took_key_line[] =
	"now with the key of the NVMe tier's file";
static const char cf_kept_key_line[] = "(names already given out)";
/* a drop's line when the tier was out: kept across a restart, or not */
static const char cf_drop_kept_line[] =
	"kept in --policy-state's FILE.nvme-drops across a restart";
static const char cf_drop_lost_line[] =
	"in memory alone: a restart before the join forgets it";

/* FNV-1a of the file's bytes. */
static uint64_t file_sum(const char *path)
{
	static unsigned char buf[1 << 20];
	uint64_t h = 0xcbf29ce484222325ULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		t_fail("%s: %s", path, strerror(errno));
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		for (ssize_t k = 0; k < n; k++)
			h = (h ^ buf[k]) * 0x100000001b3ULL;
	t_assert_eq(n, 0);
	close(fd);
	return h;
}

void cf_late_init(struct cf_late *l, char *nvme, size_t len, bool keyed)
{
	memset(l, 0, sizeof(*l));
	l->keyed = keyed;
	snprintf(l->dir, sizeof(l->dir), "%s.d", nvme);
	snprintf(l->away, sizeof(l->away), "%s.away", l->dir);
	snprintf(l->file, sizeof(l->file), "%s/slots", l->dir);
	cf_late_end(l); /* a run before's, killed */
	t_ok(mkdir(l->dir, 0700));
	snprintf(nvme, len, "%s", l->file);
}

void cf_late_end(struct cf_late *l)
{
	char path[400];

	if (rename(l->away, l->dir) && errno != ENOENT)
		t_fail("%s: %s", l->away, strerror(errno));
	unlink(l->file);
	snprintf(path, sizeof(path), "%s.copy", l->file);
	unlink(path);
	rmdir(l->dir);
}

/* TIER_STATS of size s (of every size when z names one). */
static void size_stats(struct kvmm_conn *c, const struct cf_sizes *z,
		       uint32_t s, struct kvmm_tier_stats_reply *ts)
{
	if (z->n == 1)
		t_ok(kvmm_tier_stats(c, ts, sizeof(*ts)));
	else
		t_ok(kvmm_tier_stats_size(c, z->pages[s], ts, sizeof(*ts)));
}

void cf_late_expect(struct cf_late *l, const struct cf_sizes *z,
		    const uint64_t *got, uint32_t round)
{
	for (uint32_t s = 0; s < z->n; s++) {
		bool pending = l->pending_mask >> s & 1;

		if (!(l->expect_mask >> s & 1))
			continue;
		/* a drop answered while it was out is applied by this
		 * start's open: fewer, never more */
		if (got[s] != l->expect[s] &&
		    (!pending || got[s] > l->expect[s]))
			t_fail("round %u: blocks of %u pages: a start as before recovered %llu, where it recovered %llu before the late round %u, whose partition never joined (nothing was to write there%s)",
			       round, z->pages[s], (unsigned long long)got[s],
			       (unsigned long long)l->expect[s], round - 1,
			       pending ?
				       "; a drop answered while the tier was out may leave some out, none come in" :
				       "");
		if (got[s] == l->expect[s])
			l->exact_blocks += got[s];
		else
			l->pending_left_out += l->expect[s] - got[s];
	}
	l->expect_mask = 0;
	l->pending_mask = 0;
}

void cf_restart_late(struct td_daemon *d, const struct cf_shared *sh,
		     struct cf_sizes *z, const char *nvme, uint64_t seed,
		     uint32_t round, uint64_t *rs, uint32_t *lost)
{
	struct cf_late *l = z->late;
	struct kvmm_tier_stats_reply ts;
	char away_file[400], fails[16];
	struct kvmm_conn *c;
	uint64_t sum;

	snprintf(away_file, sizeof(away_file), "%s/slots", l->away);
	/* on the file's own path, whose drops kept while the tier was out
	 * it applies as a start as before does (its bytes put back) */
	sum = cf_copy_recovered(sh, z, l->file, seed, round, l->before);
	t_ok(rename(l->dir, l->away));
	l->file_sum = file_sum(away_file);
	l->open_fails = cf_rand(rs) & 1 ? 1 + (uint32_t)(cf_rand(rs) % 2) : 0;
	setenv("KVMMD_TEST_CACHE_RETRY_MS", CF_LATE_RETRY_MS, 1);
	if (l->open_fails) {
		snprintf(fails, sizeof(fails), "%u", l->open_fails);
		setenv("KVMMD_TEST_NVME_OPEN_FAIL", fails, 1);
	}
	cf_start_daemon(d, sh, z, nvme, seed, round, true);
	unsetenv("KVMMD_TEST_CACHE_RETRY_MS");
	unsetenv("KVMMD_TEST_NVME_OPEN_FAIL");
	/* no tier: ENOENT in every size, no capacity, nothing recovered */
	t_ok(kc_connect_admin(d->sock, &c));
	for (uint32_t s = 0; s < z->n; s++) {
		size_stats(c, z, s, &ts);
		if (ts.nvme_open_error != ENOENT ||
		    ts.tiers[2].capacity_blocks || ts.recovered_blocks) {
			td_dump_log(d);
			t_fail("round %u: a start without %s: size %u's TIER_STATS says open error %llu, NVMe capacity %llu, %llu recovered (expected ENOENT, 0, 0)",
			       round, l->dir, z->pages[s],
			       (unsigned long long)ts.nvme_open_error,
			       (unsigned long long)ts.tiers[2].capacity_blocks,
			       (unsigned long long)ts.recovered_blocks);
		}
	}
	kvmm_disconnect(c);
	l->out = true;
	l->starts++;
	l->starts_failing += l->open_fails != 0;
	*lost = 0;
	printf("round %u, the restart: without %s (moved aside; %llu blocks a start as before recovered from a copy of the file; the first size's first %u opens after the claim failing)\n",
	       round - 1, l->dir, (unsigned long long)sum, l->open_fails);
}

/* Whether every size's NVMe tier has joined (its capacity given). */
static bool all_joined(struct kvmm_conn *c, const struct cf_sizes *z)
{
	struct kvmm_tier_stats_reply ts;

	for (uint32_t s = 0; s < z->n; s++) {
		size_stats(c, z, s, &ts);
		if (!ts.tiers[2].capacity_blocks)
			return false;
	}
	return true;
}

void cf_late_sleep(struct cf_late *l, const char *sock,
		   const struct cf_sizes *z, uint64_t kill_ms, uint64_t *rs)
{
	uint64_t start = cf_now_us(), now;
	struct kvmm_conn *c = NULL;

	if (!l || !l->out) {
		usleep((useconds_t)(kill_ms * 1000));
		return;
	}
	/* a quarter of the rounds end with the directory still aside, a
	 * quarter put it back in the last 60 ms (the kill then lands
	 * before an attempt or inside the join), the others at random */
	switch (cf_rand(rs) % 4) {
	case 0:
		l->appear_ms = UINT64_MAX;
		break;
	case 1:
		l->appear_ms =
			kill_ms - cf_rand(rs) % (kill_ms < 60 ? kill_ms : 60);
		break;
	default:
		l->appear_ms = cf_rand(rs) % (kill_ms * 3 / 4 + 1);
	}
	l->appear_us = l->joined_us = 0;
	l->start_us = start;
	while ((now = cf_now_us()) - start < kill_ms * 1000) {
		if (!l->appear_us && now - start >= l->appear_ms * 1000) {
			t_ok(rename(l->away, l->dir));
			l->appear_us = cf_now_us();
			t_ok(kc_connect_admin(sock, &c));
		}
		if (c && !l->joined_us && all_joined(c, z))
			l->joined_us = cf_now_us();
		usleep(2000);
	}
	if (c)
		kvmm_disconnect(c);
}

/* The blocks the joins' lines in log say they recovered. */
static uint64_t joins_recovered(const char *log)
{
	const char *p = log;
	uint64_t sum = 0;

	while ((p = strstr(p, "and joined the cache: "))) {
		unsigned long long slots, cap, n;

		p += strlen("and joined the cache: ");
		if (sscanf(p, "%llu of %llu slots, %llu blocks recovered",
			   &slots, &cap, &n) == 3)
			sum += n;
	}
	return sum;
}

void cf_late_killed(struct cf_late *l, const struct td_daemon *d,
		    struct cf_shared *sh, const struct cf_sizes *z,
		    uint32_t ndrops, uint32_t round)
{
	static char log[1 << 20];
	uint32_t joined = 0, all = (1u << z->n) - 1, out = 0, marking = 0;
	const char *where;
	bool claimed;

	if (!l || !l->out)
		return;
	l->out = false;
	if (td_read_log(d, log, sizeof(log)) < 0)
		t_fail("round %u: kvmmd's log: %s", round, strerror(errno));
	for (uint32_t s = 0; s < z->n; s++) {
		char line[512];

		if (z->n == 1)
			snprintf(line, sizeof(line),
				 "cache: the NVMe tier %s opened at attempt",
				 l->file);
		else
			snprintf(
				line, sizeof(line),
				"cache: the NVMe tier %s (the partition of blocks of %u pages) opened at attempt",
				l->file, z->pages[s]);
		if (strstr(log, line))
			joined |= 1u << s;
		/* an open that applies a drop answered while the tier was
		 * out writes its marks before the line above: a kill in
		 * between leaves the partition changed, not joined */
		if (z->n == 1)
			snprintf(
				line, sizeof(line),
				"cache: the NVMe tier %s: opening it with the drop of",
				l->file);
		else
			snprintf(
				line, sizeof(line),
				"cache: the NVMe tier %s (the partition of blocks of %u pages): opening it with the drop of",
				l->file, z->pages[s]);
		if (strstr(log, line))
			marking |= 1u << s;
	}
	claimed = joined || strstr(log, cf_claim_fail_line) ||
		  strstr(log, cf_claimed_line);
	if (!l->appear_us) {
		t_ok(rename(l->away, l->dir));
		if (claimed) {
			td_dump_log(d);
			t_fail("round %u: the NVMe tier joined while %s was aside",
			       round, l->dir);
		}
		l->kills_away++;
		where = "before the directory came back";
	} else if (!claimed) {
		l->kills_before++;
		where = "after the directory came back, before an attempt";
	} else if (joined != all) {
		l->kills_during++;
		where = "during the join (the file claimed, not every partition joined)";
	} else {
		l->kills_after++;
		where = "after the join";
	}
	/* nothing the cache held before the join reached the file */
	if (!joined && !marking) {
		if (file_sum(l->file) != l->file_sum) {
			td_dump_log(d);
			t_fail("round %u: kvmmd killed %s: the file's bytes changed though no partition joined",
			       round, where);
		}
		l->untouched++;
	}
	l->expect_mask = all & ~(joined | marking);
	memcpy(l->expect, l->before, sizeof(l->expect));
	/*
	 * Under a key of its own (--cache-scope uid) a late start made a
	 * new key.  At the claim, before any partition opens, kvmmd takes
	 * the file's key when nothing was named under the start's yet (no
	 * client's hash renamed, nothing cached): the file's blocks then
	 * come back as in the shared scope, nothing formatted.  Else it
	 * keeps its key, saying why, and a partition that joined formatted
	 * the blocks the file's key named (one that opened while partition
	 * 0 was not wrote partition 0's superblock anew: another key is
	 * another cut's start): nothing before the late start comes back.
	 */
	if (l->keyed && joined && strstr(log, cf_took_key_line)) {
		if (strstr(log, cf_key_line) || strstr(log, cf_kept_key_line)) {
			td_dump_log(d);
			t_fail("round %u: a late join under --cache-scope uid took the file's key, yet formatted a partition (the log's `%s`)",
			       round, cf_key_line);
		}
	} else if (l->keyed && joined) {
		if (!strstr(log, cf_key_line) ||
		    !strstr(log, cf_kept_key_line) || joins_recovered(log)) {
			td_dump_log(d);
			t_fail("round %u: a late join under --cache-scope uid after names were given out: the file's blocks, named under its key, must be formatted (the log's `%s` and `%s`), none recovered",
			       round, cf_kept_key_line, cf_key_line);
		}
		memset(l->expect, 0, sizeof(l->expect));
		l->keyed_formats++;
	}
	/*
	 * Every drop kvmmd answered while a size's tier was out is kept
	 * in the run's --policy-state FILE.nvme-drops before its reply;
	 * one that was not (a write that failed) is not held to by
	 * kvmmd, and the checks below would blame it for what it says.
	 */
	if (strstr(log, cf_drop_lost_line)) {
		td_dump_log(d);
		t_fail("round %u: kvmmd runs with --policy-state %s, yet kept a drop answered while the NVMe tier was out in memory alone (the log's `%s`)",
		       round, sh->state, cf_drop_lost_line);
	}
	for (const char *p = log; (p = strstr(p, cf_drop_kept_line));
	     p += sizeof(cf_drop_kept_line) - 1)
		l->drops_kept++;
	for (uint32_t j = ndrops; j < sh->ndrops; j++) {
		struct cf_drop *dr = &sh->drops[j];

		if (l->joined_us && dr->sent_us > l->joined_us)
			continue;
		dr->tier_out = true;
		out++;
		/* the sizes whose partition it reached: pending there when
		 * it had not joined, applied at the next start's open */
		if (dr->tiers && !(dr->tiers & KVMM_CACHE_DROP_NVME))
			continue;
		for (uint32_t s = 0; s < z->n; s++)
			if (!dr->block_pages || dr->block_pages == z->pages[s])
				l->pending_mask |= 1u << s;
	}
	l->drops_out += out;
	l->join_recovered += joins_recovered(log);
	printf("round %u: killed %s (the directory %s at %llu ms, every size seen joined at %llu ms; %u of %u partitions joined, %u drops before every size was seen joined)\n",
	       round, where, l->appear_us ? "back" : "still aside",
	       l->appear_us ? (unsigned long long)l->appear_ms : 0ULL,
	       l->joined_us ?
		       (unsigned long long)(l->joined_us - l->start_us) / 1000 :
		       0ULL,
	       __builtin_popcount(joined), z->n, out);
}
