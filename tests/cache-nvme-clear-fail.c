// SPDX-License-Identifier: MIT
/*
 * timeout: 120
 * kvmmd on an NVMe tier file that grew, with a stale valid slot header
 * past the last run's end, and the zeroing of that header failing
 * (KVMMD_TEST_NVME_CLEAR_FAIL=S; tiers.md, "When the scan or the
 * retirement fails"): the tier does not open, the daemon says which file
 * and why, and a start without the knob loses none of the blocks before
 * the old end and does not bring the stale one back.
 *
 *   1. kvmmd with an 8-slot tier (--cache-block-pages 4, blocks of 256
 *      KiB) saves 8 contents of one block at its stop (7 fit: the
 *      policy keeps a slot spare); the slots their headers are in are
 *      read from the disk: S, the first one from 4 on, is the one to
 *      come back stale;
 *   2. a kvmmd with 4 slots (shrank: the file is cut after slot 3)
 *      recovers the blocks of slots 0-3 and saves nothing; then slot S's
 *      bytes are written back where they were (as a block device keeps
 *      them past a shrunk tier's end);
 *   3. kvmmd with 8 slots and KVMMD_TEST_NVME_CLEAR_FAIL=S does not
 *      start (--cache-block-pages: a tier that cannot open at start
 *      stops it), with the tier's ERR line naming the file, slot S and
 *      the cause, and the cache's naming the tier (before, the only
 *      lines were `restart scan: clearing a stale slot header:
 *      Input/output error` and `setting up the tiers failed:
 *      Input/output error`, no file named); the file's bytes up to its
 *      old end are unchanged and its superblock still says 4 slots;
 *   4. kvmmd with 8 slots, no knob: `grew from 4 to 8 slots (1 stale
 *      slot headers past the old end cleared)`, the blocks of slots 0-3
 *      recovered and each read back from NVMe byte-identical, the stale
 *      block's content not found; slot S's header zeroed on disk.
 * Before the knob step 3 could not fail: kvmmd started and recovered.
 * Skips (77) where the NVMe tier cannot run (no O_DIRECT there).
 */
#include <errno.h>
#include <fcntl.h>

#include "kvmm/kvmmd/tier_nvme.h"
#include "tests/cache-common.h"
#include "tests/lib/daemon.h"
#include "tests/lib/nvme_cache_args.h"
#include "tests/lib/nvme_probe.h"

#define NCONTENTS 8
#define NVME_SLOTS 8
#define OLD_SLOTS 4

static const struct cc_contents contents = { .base = 0xc1ea500,
					     .tag0 = 40,
					     .nb = 1 };

/* The content whose block the valid header of slot i names, or -1 when
 * the header is not a valid one of these contents. */
static int content_in(const char *path, uint32_t i)
{
	struct tier_nvme_slot_header hd;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	uint64_t h;

	t_assert(fd >= 0);
	t_assert_eq(pread(fd, &hd, sizeof(hd),
			  (off_t)NT_SLOT_OFFSET(i, NCA_BLOCK_BYTES)),
		    (ssize_t)sizeof(hd));
	close(fd);
	if (hd.magic != TIER_NVME_SLOT_MAGIC)
		return -1;
	for (int k = 0; k < NCONTENTS; k++) {
		cc_content_hashes(&contents, k, &h);
		if (hd.hash == h)
			return k;
	}
	return -1;
}

/* The file's first len bytes into a new buffer; the superblock's slot
 * count into *slots. */
static unsigned char *file_bytes(const char *path, size_t len, uint64_t *slots)
{
	struct nvme_superblock sb;
	unsigned char *b = malloc(len);
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	t_assert(b != NULL && fd >= 0);
	t_assert_eq(pread(fd, b, len, 0), (ssize_t)len);
	close(fd);
	memcpy(&sb, b, sizeof(sb));
	t_assert_eq(sb.magic, TIER_NVME_SB_MAGIC);
	*slots = sb.slot_count;
	return b;
}

static char log_buf[1 << 16];

/* The refused start's log (log_buf) has an ERR line with what. */
static void log_has(const char *what)
{
	const char *l = strstr(log_buf, what);
	const char *bol = l;

	while (bol && bol > log_buf && bol[-1] != '\n')
		bol--;
	if (!l || !strstr(bol, " ERR ") || strstr(bol, " ERR ") > l)
		t_fail("no ERR line with \"%s\" in:\n%s", what, log_buf);
}

int main(void)
{
	const size_t slot_len = NT_SLOT_BYTES(NCA_BLOCK_BYTES);
	const char *const *big, *const *small;
	struct nca_args a8, a4;
	struct kvmm_tier_stats_reply ts;
	struct td_daemon d;
	int in_slot[NVME_SLOTS], kept = 0, stale = -1, nsaved = 0;
	unsigned char *saved, *before, *after;
	uint32_t s = 0, found;
	uint64_t slots;
	char nvme[256], knob[16], line[512];
	size_t old_len;
	int fd;

	cc_nvme_path(nvme, sizeof(nvme), "cache-nvme-clear-fail");
	t_nvme_require(nvme);
	unsetenv("KVMMD_TEST_NVME_CLEAR_FAIL");
	big = nca_save_args(&a8, nvme, NCONTENTS, NVME_SLOTS, "10000", 0);
	small = nca_save_args(&a4, nvme, NCONTENTS, OLD_SLOTS, "0", 0);

	/* 1. the 8 contents saved to the 8-slot tier at the stop */
	cc_start(&d, big);
	for (int k = 0; k < NCONTENTS; k++)
		cc_write_content(d.sock, &contents, k);
	cc_stop(&d);
	for (uint32_t i = 0; i < NVME_SLOTS; i++) {
		in_slot[i] = content_in(nvme, i);
		nsaved += in_slot[i] >= 0;
		kept += i < OLD_SLOTS && in_slot[i] >= 0;
		if (i >= OLD_SLOTS && in_slot[i] >= 0 && stale < 0) {
			stale = in_slot[i];
			s = i;
		}
	}
	t_assert(stale >= 0);
	t_assert(kept > 0);
	printf("saved: %d blocks, %d in slots 0-3, content %d's in slot %u\n",
	       nsaved, kept, stale, s);
	saved = malloc(slot_len);
	t_assert(saved != NULL);
	fd = open(nvme, O_RDONLY | O_CLOEXEC);
	t_assert(fd >= 0);
	t_assert_eq(pread(fd, saved, slot_len,
			  (off_t)NT_SLOT_OFFSET(s, NCA_BLOCK_BYTES)),
		    (ssize_t)slot_len);
	close(fd);

	/* 2. shrunk to 4 slots; slot S's bytes back past the new end */
	cc_start(&d, small);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.recovered_blocks, (uint64_t)kept);
	td_log_has(&d, "shrank from 8 to 4 slots", true);
	cc_stop(&d);
	fd = open(nvme, O_RDWR | O_CLOEXEC);
	t_assert(fd >= 0);
	t_assert_eq(pwrite(fd, saved, slot_len,
			   (off_t)NT_SLOT_OFFSET(s, NCA_BLOCK_BYTES)),
		    (ssize_t)slot_len);
	t_ok(fsync(fd));
	close(fd);
	old_len = NT_SLOT_OFFSET(s + 1, NCA_BLOCK_BYTES);
	before = file_bytes(nvme, old_len, &slots);
	t_assert_eq(slots, OLD_SLOTS);

	/* 3. the zeroing of slot S's header fails: no start */
	snprintf(knob, sizeof(knob), "%u", s);
	td_start_refused(big, "KVMMD_TEST_NVME_CLEAR_FAIL", knob, log_buf,
			 sizeof(log_buf));
	snprintf(
		line, sizeof(line),
		"tier_nvme: %s: zeroing the stale header of slot %u, past the last run's end (4 slots, now 8; a valid header an earlier life of the file left): Input/output error; the open fails, the superblock still says 4 slots and the next open clears it again",
		nvme, s);
	log_has(line);
	snprintf(
		line, sizeof(line),
		"cache: the NVMe tier %s cannot open at start: Input/output error (the tier_nvme lines before this one say why); kvmmd does not start",
		nvme);
	log_has(line);
	if (!strstr(log_buf, "kvmmd: cannot start: Input/output error") ||
	    strstr(log_buf, "grew from"))
		t_fail("not 'cannot start', or the tier grew:\n%s", log_buf);
	after = file_bytes(nvme, old_len, &slots);
	t_assert_eq(slots, OLD_SLOTS);
	t_assert(memcmp(before, after, old_len) == 0);
	t_assert_eq(content_in(nvme, s), stale);

	/* 4. no knob: the blocks before the old end back, slot S cleared */
	cc_start(&d, big);
	td_log_has(
		&d,
		"grew from 4 to 8 slots (1 stale slot headers past the old end cleared)",
		true);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.recovered_blocks, (uint64_t)kept);
	found = 0;
	for (uint32_t i = 0; i < OLD_SLOTS; i++)
		if (in_slot[i] >= 0) {
			/* byte-identical, from NVMe (cc_found_on_nvme()) */
			t_assert_eq(cc_found_on_nvme(d.sock, &contents,
						     in_slot[i]),
				    1);
			found++;
		}
	t_assert_eq(found, (uint32_t)kept);
	t_assert_eq(cc_found_on_nvme(d.sock, &contents, stale), 0);
	cc_stop(&d);
	free(after);
	after = file_bytes(nvme, NT_SLOT_OFFSET(NVME_SLOTS, NCA_BLOCK_BYTES),
			   &slots);
	t_assert_eq(slots, NVME_SLOTS);
	for (size_t i = 0; i < TIER_NVME_HEADER_BYTES; i++)
		t_assert_eq(after[NT_SLOT_OFFSET(s, NCA_BLOCK_BYTES) + i], 0);

	free(after);
	free(before);
	free(saved);
	unlink(nvme);
	printf("a failed zeroing of a stale header: no start, an ERR line naming %s slot %u; the next start recovers %d blocks and clears it\n",
	       nvme, s, kept);
	return 0;
}
