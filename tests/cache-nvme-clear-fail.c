// SPDX-License-Identifier: MIT
/*
 * timeout: 120
 * kvmmd on an NVMe tier file that grew, with a stale valid slot header
 * past the last run's end, and the open failing on the way (tiers.md,
 * "When the scan or the retirement fails"): the zeroing of that header
 * (KVMMD_TEST_NVME_CLEAR_FAIL=S), the sync after it
 * (KVMMD_TEST_NVME_CLEAR_SYNC_FAIL=1), or the superblock write with the
 * new slot count (KVMMD_TEST_NVME_RESIZE_FAIL=1): the tier does not
 * open, the daemon says which file and why, and a start without the
 * knob loses none of the blocks before the old end and does not bring
 * the stale one back.
 *
 *   1. kvmmd with an 8-slot tier (--cache-block-pages 4, blocks of 256
 *      KiB) saves 8 contents of one block at its stop (7 fit: the
 *      policy keeps a slot spare); the slots their headers are in are
 *      read from the disk: S, the first one from 4 on, is the one to
 *      come back stale;
 *   2. a kvmmd with 4 slots (shrank: the file is cut after slot 3)
 *      recovers the blocks of slots 0-3 and saves nothing;
 *   3. three times, slot S's bytes written back where they were (as a
 *      block device keeps them past a shrunk tier's end), then kvmmd
 *      with 8 slots and one of the knobs does not start
 *      (--cache-block-pages: a tier that cannot open at start stops it),
 *      with the tier's ERR line naming the file (and slot S, or the sync
 *      of 1 stale header, or the superblock write with 8 slots where it
 *      says 4) and the cause, and the cache's naming the tier (before,
 *      the zeroing's only lines were `restart scan: clearing a stale
 *      slot header: Input/output error` and `setting up the tiers
 *      failed: Input/output error`, no file named); the superblock (4
 *      slots) and the last run's slots are the bytes of before; slot S's
 *      header is the stale one where its zeroing failed, zeros where
 *      only the sync or the superblock write did;
 *   4. slot S's bytes back again, kvmmd with 8 slots, no knob: `grew
 *      from 4 to 8 slots (1 stale slot headers past the old end
 *      cleared)`, the blocks of slots 0-3 recovered and each read back
 *      from NVMe byte-identical, the stale block's content not found;
 *      slot S's header zeroed on disk.
 * Before the knobs step 3 could not fail: kvmmd started and recovered.
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

/* Slot i's bytes as saved, written back where they were. */
static void put_back(const char *path, uint32_t i, const unsigned char *saved)
{
	const size_t slot_len = NT_SLOT_BYTES(NCA_BLOCK_BYTES);
	int fd = open(path, O_RDWR | O_CLOEXEC);

	t_assert(fd >= 0);
	t_assert_eq(pwrite(fd, saved, slot_len,
			   (off_t)NT_SLOT_OFFSET(i, NCA_BLOCK_BYTES)),
		    (ssize_t)slot_len);
	t_ok(fsync(fd));
	close(fd);
}

/*
 * kvmmd with 8 slots and, by which, the zeroing of slot s's stale header
 * failing (KVMMD_TEST_NVME_CLEAR_FAIL=s), the sync after it
 * (KVMMD_TEST_NVME_CLEAR_SYNC_FAIL=1) or the superblock write with 8
 * slots (KVMMD_TEST_NVME_RESIZE_FAIL=1): it does not start, with the
 * tier's ERR line and the cache's naming the file.  The superblock
 * (still 4 slots) and the last run's slots are the bytes of before;
 * slot s's header is the stale one where its zeroing failed, zeros where
 * it was written (only its sync, or the superblock, failed).
 */
static void refused(const char *const *big, const char *nvme, uint32_t s,
		    int which, int stale, const unsigned char *before)
{
	static const char *const knob[] = { "KVMMD_TEST_NVME_CLEAR_FAIL",
					    "KVMMD_TEST_NVME_CLEAR_SYNC_FAIL",
					    "KVMMD_TEST_NVME_RESIZE_FAIL" };
	const size_t kept_len = NT_SLOT_OFFSET(OLD_SLOTS, NCA_BLOCK_BYTES);
	char value[16], line[512];
	unsigned char *after;
	uint64_t slots;

	snprintf(value, sizeof(value), "%u", which ? 1 : s);
	td_start_refused(big, knob[which], value, log_buf, sizeof(log_buf));
	if (which == 0)
		snprintf(
			line, sizeof(line),
			"tier_nvme: %s: zeroing the stale header of slot %u, past the last run's end (4 slots, now 8; a valid header an earlier life of the file left): Input/output error; the open fails, the superblock still says 4 slots and the next open clears it again",
			nvme, s);
	else if (which == 1)
		snprintf(
			line, sizeof(line),
			"tier_nvme: %s: restart scan: syncing 1 stale slot headers cleared past the last run's end and 0 unreadable ones zeroed: Input/output error; the open fails, the superblock still says 4 slots",
			nvme);
	else
		snprintf(
			line, sizeof(line),
			"tier_nvme: %s: writing the superblock with 8 slots (it says 4): Input/output error; the open fails",
			nvme);
	log_has(line);
	snprintf(
		line, sizeof(line),
		"cache: the NVMe tier %s cannot open at start: Input/output error (the tier_nvme lines before this one say why); kvmmd does not start",
		nvme);
	log_has(line);
	if (!strstr(log_buf, "kvmmd: cannot start: Input/output error") ||
	    strstr(log_buf, "grew from"))
		t_fail("not 'cannot start', or the tier grew:\n%s", log_buf);
	after = file_bytes(nvme, kept_len, &slots);
	t_assert_eq(slots, OLD_SLOTS);
	t_assert(memcmp(before, after, kept_len) == 0);
	t_assert_eq(content_in(nvme, s), which ? -1 : stale);
	printf("%s=%s: no start, the superblock and the last run's slots unchanged\n",
	       knob[which], value);
	free(after);
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
	char nvme[256];
	int fd;

	cc_nvme_path(nvme, sizeof(nvme), "cache-nvme-clear-fail");
	t_nvme_require(nvme);
	unsetenv("KVMMD_TEST_NVME_CLEAR_FAIL");
	unsetenv("KVMMD_TEST_NVME_CLEAR_SYNC_FAIL");
	unsetenv("KVMMD_TEST_NVME_RESIZE_FAIL");
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

	/* 2. shrunk to 4 slots */
	cc_start(&d, small);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.recovered_blocks, (uint64_t)kept);
	td_log_has(&d, "shrank from 8 to 4 slots", true);
	cc_stop(&d);
	before = file_bytes(nvme, NT_SLOT_OFFSET(OLD_SLOTS, NCA_BLOCK_BYTES),
			    &slots);
	t_assert_eq(slots, OLD_SLOTS);

	/* 3. the zeroing of slot S's header, its sync, or the superblock
	 * write with the new slot count fails: no start, nothing lost (slot
	 * S's bytes back past the new end before each) */
	for (int i = 0; i < 3; i++) {
		put_back(nvme, s, saved);
		refused(big, nvme, s, i, stale, before);
	}
	put_back(nvme, s, saved);

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
	after = file_bytes(nvme, NT_SLOT_OFFSET(NVME_SLOTS, NCA_BLOCK_BYTES),
			   &slots);
	t_assert_eq(slots, NVME_SLOTS);
	for (size_t i = 0; i < TIER_NVME_HEADER_BYTES; i++)
		t_assert_eq(after[NT_SLOT_OFFSET(s, NCA_BLOCK_BYTES) + i], 0);

	free(after);
	free(before);
	free(saved);
	unlink(nvme);
	printf("a failed zeroing of a stale header, its sync, or the grown tier's superblock write: no start, an ERR line naming %s (slot %u); the next start recovers %d blocks and clears it\n",
	       nvme, s, kept);
	return 0;
}
