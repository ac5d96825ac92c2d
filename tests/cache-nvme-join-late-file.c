// SPDX-License-Identifier: MIT
/*
 * timeout: 120
 * --policy-state's FILE.nvme-drops as the next start reads it
 * (Documentation/tiers.md, "An NVMe tier that joins late"): 6 blocks of
 * the test's uid (its tenant, T) on the file from a run before, then a
 * start with a FILE.nvme-drops written here:
 *   - "part 0 tenant T" and "part 0 tenant T+1": the tier's open applies
 *     them as written (none back, 6 back: the checks below could fail);
 *   - damaged, read as every block (none back, the line saying so):
 *     "tenant 2^32+T+1" and "tenant -1" (sscanf's %u read T+1 and
 *     2^32-1), "tenant T+1 7" (trailing words), a last line cut short
 *     (no newline: T+1 may have been T+10), a file cut after its path
 *     line (no drop at all: every save writes one);
 *   - a FIFO there (no writer): read as damaged, the start goes on
 *     (until 7 December fopen() waited for a writer: no start);
 *   - another --nvme-path's file (a start on another path left it): the
 *     tier out, a drop of every block answered, the join: the file is
 *     left as it was (the drop's line says it was not written there),
 *     none of this file's blocks back.  Until 7 December the drop
 *     overwrote the file with this path's, and the join removed it: the
 *     other path's drops were lost.
 * Skips (77) where the NVMe tier cannot run (no O_DIRECT there).
 */
#include "tests/cache-drop-common.h"
#include "tests/lib/nvme_cache_args.h"
#include "tests/lib/nvme_probe.h"

#include <errno.h>
#include <sys/stat.h>

#define NB 3

static const struct cc_contents contents = { .base = 0xe76000,
					     .tag0 = 160,
					     .nb = NB };

static char dir[300], aside[320], nvme[340], state[300], drops[320];

static void start(struct td_daemon *d)
{
	const char *argv[24];
	struct nca_args a;
	int n = 0;

	for (const char *const *p = nca_args(&a, nvme, 3, 0); *p; p++)
		argv[n++] = *p;
	argv[n++] = "--policy-state";
	argv[n++] = state;
	argv[n] = NULL;
	cc_start_with_delay(d, argv, "KVMMD_TEST_CACHE_RETRY_MS", 100);
}

/* A run that leaves contents 0 and 1 on a new file (6 blocks). */
static void fill(void)
{
	struct td_daemon d;

	unlink(nvme);
	unlink(drops);
	start(&d);
	cd_fill_to_nvme(d.sock, &contents);
	cc_stop(&d);
}

static void write_drops(const char *path, const char *lines)
{
	FILE *f = fopen(drops, "w");

	t_assert(f != NULL);
	fprintf(f, "kvmm-nvme-pending-drops 1\npath %s\n%s", path, lines);
	t_ok(fclose(f));
}

/* A start on lines for this file: how many of its 6 blocks are back,
 * whether the file was read as damaged. */
static void expect_read(const char *lines, uint64_t back, bool damaged)
{
	struct td_daemon d;
	struct stat st;

	fill();
	write_drops(nvme, lines);
	start(&d);
	if (cd_recovered(d.sock) != back)
		t_fail("FILE.nvme-drops of \"%s\": %llu blocks back, expected %llu",
		       lines, (unsigned long long)cd_recovered(d.sock),
		       (unsigned long long)back);
	td_log_has(&d, " is damaged (not a list of NVMe drops)", damaged);
	cd_open_expect(d.sock, &contents, 0, back ? NB : 0, 0, 0,
		       back ? NB : 0);
	cc_stop(&d);
	/* applied: nothing left in it */
	t_assert(stat(drops, &st) && errno == ENOENT);
}

static void lines(void)
{
	unsigned long long t = getuid();
	char l[128];

	snprintf(l, sizeof(l), "part 0 tenant %llu\n", t);
	expect_read(l, 0, false);
	snprintf(l, sizeof(l), "part 0 tenant %llu\n", t + 1);
	expect_read(l, 2 * NB, false);
	snprintf(l, sizeof(l), "part 0 tenant %llu\n", (1ull << 32) + t + 1);
	expect_read(l, 0, true);
	expect_read("part 0 tenant -1\n", 0, true);
	snprintf(l, sizeof(l), "part 0 tenant %llu 7\n", t + 1);
	expect_read(l, 0, true);
	snprintf(l, sizeof(l), "part 0 tenant %llu", t + 1);
	expect_read(l, 0, true);
	expect_read("", 0, true);
	printf("FILE.nvme-drops: its lines applied as written, a damaged one as every block\n");
}

/* A FIFO at FILE.nvme-drops (no writer): the start reads no list from
 * it, so every block is dropped, and the save after the open replaces
 * it.  Until 7 December fopen() waited for a writer: kvmmd never came
 * up. */
static void fifo(void)
{
	struct td_daemon d;
	struct stat st;

	fill();
	t_ok(mkfifo(drops, 0600));
	start(&d);
	td_log_has(&d, " is damaged (not a list of NVMe drops)", true);
	t_assert_eq(cd_recovered(d.sock), 0);
	cd_open_expect(d.sock, &contents, 0, 0, 0, 0, 0);
	cc_stop(&d);
	t_assert(stat(drops, &st) && errno == ENOENT);
	printf("a FIFO at FILE.nvme-drops: the start goes on, every block dropped\n");
}

static void another_path(void)
{
	static const char theirs[] =
		"kvmm-nvme-pending-drops 1\npath /var/kvmm/other-nvme\npart 0 tenant 4242\n";
	static char buf[512];
	struct td_daemon d;
	FILE *f;
	size_t n;

	fill();
	f = fopen(drops, "w");
	t_assert(f != NULL);
	t_assert_eq(fputs(theirs, f) >= 0, 1);
	t_ok(fclose(f));
	t_ok(rename(dir, aside));
	start(&d);
	td_log_has(&d, "this run's --nvme-path is " /* then ours */, true);
	(void)cd_kvmmctl(d.sock, "--tier nvme");
	td_log_has(
		&d,
		".nvme-drops holds the NVMe drops of another --nvme-path: left as it is",
		true);
	td_log_has(
		&d,
		"in memory alone: a restart before the join forgets it, writing --policy-state's FILE.nvme-drops failed: File exists",
		true);
	t_ok(rename(aside, dir));
	td_wait_log(
		&d,
		"the drop of every block answered while it was out is applied: 6 blocks of its file left out before the recovery",
		15000);
	t_assert_eq(cd_recovered(d.sock), 0);
	cc_stop(&d);
	f = fopen(drops, "r");
	if (!f)
		t_fail("%s: %s (the other path's drops are gone)", drops,
		       strerror(errno));
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	if (strcmp(buf, theirs))
		t_fail("%s changed:\n%s", drops, buf);
	printf("another --nvme-path's FILE.nvme-drops: left as it was\n");
}

int main(void)
{
	char base[256];

	cc_nvme_path(base, sizeof(base), "join-late-file");
	t_nvme_require(base);
	snprintf(dir, sizeof(dir), "%s.d", base);
	snprintf(aside, sizeof(aside), "%s.aside", base);
	snprintf(nvme, sizeof(nvme), "%s/slots", dir);
	td_tmp_path("kvmm-join-late-file.state", state, sizeof(state));
	snprintf(drops, sizeof(drops), "%s.nvme-drops", state);
	t_ok(mkdir(dir, 0700));
	lines();
	fifo();
	another_path();
	unlink(nvme);
	rmdir(dir);
	unlink(state);
	unlink(drops);
	snprintf(drops, sizeof(drops), "%s.lock", state);
	unlink(drops);
	printf("FILE.nvme-drops read and kept as written\n");
	return 0;
}
