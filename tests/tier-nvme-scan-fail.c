// SPDX-License-Identifier: MIT
/*
 * The NVMe restart scan's failure paths (tier_nvme_recover.c,
 * tier_nvme_mark.c), made to fail on purpose by the tier's test knobs
 * (tier_nvme_fault.c), on a tier opened in this process, no kvmmd:
 *   - a read that fails (KVMMD_TEST_NVME_SCAN_FAIL) in the last run's
 *     slots: the header is zeroed, its block not recovered.  The newest
 *     header unread, a drop in that run takes its mark below it: the
 *     next start does not recover the dropped block (before 7 December
 *     the header stayed and came back).  Tenant 1's one block below its
 *     mark unread: the mark retires at that start;
 *   - the sync before a retirement failing
 *     (KVMMD_TEST_NVME_RETIRE_FAIL=sync): a WARN, every mark stays, on
 *     disk and in memory (a later drop's superblock write carries it);
 *   - the superblock write without the retired marks failing
 *     (KVMMD_TEST_NVME_RETIRE_FAIL=superblock): a WARN, the open goes
 *     on, the marks stay on disk until a later superblock write, no
 *     dropped block comes back and one written in that run survives;
 *   - a slot past the last run's end (a tier that grew) whose header
 *     read fails: its header, a valid one a larger life of the file left
 *     there, is zeroed (before the fix it stayed, and the next start,
 *     whose superblock counted the slot, recovered that stale block);
 *   - the zeroing of a stale header past the last run's end failing
 *     (KVMMD_TEST_NVME_CLEAR_FAIL), a valid one and one whose read
 *     failed: the open fails with -EIO and a line naming the file, the
 *     slot and the cause, the file's bytes up to its old end unchanged
 *     and its superblock's slot count the old one; the next open without
 *     the knob recovers every block before the old end, byte-identical,
 *     clears the stale header and does not recover it (before the knob
 *     the open could not be made to fail there);
 *   - the sync after that zeroing failing (KVMMD_TEST_NVME_CLEAR_SYNC_FAIL),
 *     of a stale header past the old end or of one whose read failed in
 *     the last run's slots, and the superblock write of a grown tier
 *     failing (KVMMD_TEST_NVME_RESIZE_FAIL): the open fails with -EIO and
 *     an ERR line, the superblock keeps its slot count and its drop mark,
 *     the last run's slots are unchanged; the next open recovers every
 *     block byte-identical (not the stale one, nor the unread one) and
 *     retires the mark.  A shrunk tier's superblock write failing: the
 *     file not cut, not changed; the next open at the old size recovers
 *     all 8 (before these knobs neither path could fail in a test);
 *   - a knob value that is not one fails the open (-EINVAL).
 */
#include "kvmm/kvmmd/tier_nvme.h"
#include "tests/lib/nvme_tier.h"
#include "tests/lib/page_alloc.h"
#include "tests/lib/test.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PAYLOAD (64 * 1024)
#define NSLOTS 8

static unsigned char *buf;
static char log_buf[16384];

/* Reopen path as a tier of nslots slots, its log lines in log_buf; the
 * open's result in *err (NULL: it must work). */
static struct tier_nvme *reopen_slots(const char *path, uint32_t nslots,
				      int *err)
{
	return nt_reopen_logged(path, nslots, PAYLOAD, log_buf, sizeof(log_buf),
				err);
}

static struct tier_nvme *reopen(const char *path)
{
	return reopen_slots(path, NSLOTS, NULL);
}

/* The same, with the knob name=value set for that open alone. */
static struct tier_nvme *reopen_with(const char *path, uint32_t nslots,
				     const char *name, const char *value)
{
	struct tier_nvme *t;

	t_ok(setenv(name, value, 1));
	t = reopen_slots(path, nslots, NULL);
	t_ok(unsetenv(name));
	return t;
}

/*
 * Reopen path as a tier of nslots slots with the knobs set for that open
 * alone (name2, or name too, NULL: not set): it must fail with want, its
 * log lines in log_buf.
 */
static void reopen_fails(const char *path, uint32_t nslots, int want,
			 const char *name, const char *value, const char *name2,
			 const char *value2)
{
	int err = 0;

	if (name)
		t_ok(setenv(name, value, 1));
	if (name2)
		t_ok(setenv(name2, value2, 1));
	t_assert(reopen_slots(path, nslots, &err) == NULL);
	if (name2)
		t_ok(unsetenv(name2));
	if (name)
		t_ok(unsetenv(name));
	t_assert_eq(err, want);
}

static uint32_t put(struct tier_nvme *t, uint64_t hash, uint32_t tenant)
{
	return nt_put(t, hash, tenant, buf, PAYLOAD);
}

static uint32_t marks_on_disk(const char *path)
{
	struct tier_nvme_peek p;

	t_ok(tier_nvme_peek(path, &p));
	return p.tenant_marks + (p.drop_all != 0);
}

static void mark(struct tier_nvme *t, uint32_t tenant)
{
	t_ok(tier_nvme_mark_drop(t, false, tenant,
				 tier_nvme_drop_generation(t)));
}

/* Slot's header on disk: its magic (0 for a zeroed one), and whether
 * all its 4 KiB are zeros. */
static uint64_t header_magic(const char *path, uint32_t slot, bool *zeros)
{
	unsigned char hb[TIER_NVME_HEADER_BYTES];
	struct tier_nvme_slot_header h;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	t_assert(fd >= 0);
	t_assert_eq(pread(fd, hb, sizeof(hb),
			  (off_t)NT_SLOT_OFFSET(slot, PAYLOAD)),
		    (ssize_t)sizeof(hb));
	close(fd);
	*zeros = true;
	for (size_t i = 0; i < sizeof(hb); i++)
		*zeros = *zeros && !hb[i];
	memcpy(&h, hb, sizeof(h));
	return h.magic;
}

/*
 * Tenant 2's block, the newest header on disk, its read failing at the
 * next start: zeroed, not recovered.  A drop of tenant 2 in that run
 * takes its mark at the generation the run continues from, below that
 * header's; the slot is not written again.  The start after reads every
 * header fine and must not recover the dropped block: before 7 December
 * the unread header stayed (the scan only kept every mark for it) and
 * came back there.  First the zeroing fails too: the open fails, the
 * header is left as it was.
 */
static void read_fails_newest(const char *path)
{
	struct tier_nvme *t = nt_open_slots(path, NSLOTS, PAYLOAD, 0, true);
	char knob[16], line[192];
	uint32_t slot;
	bool zeros;

	put(t, 0x101, 1);
	slot = put(t, 0x201, 2); /* the newest header */
	tier_nvme_close(t);

	snprintf(knob, sizeof(knob), "%u", slot);
	/* the zeroing failing too: the open fails, the header stays for
	 * the next open to read */
	reopen_fails(path, NSLOTS, -EIO, "KVMMD_TEST_NVME_SCAN_FAIL", knob,
		     "KVMMD_TEST_NVME_CLEAR_FAIL", knob);
	snprintf(
		line, sizeof(line),
		"restart scan: reading the header of slot %u failed (Input/output error), and zeroing it too: Input/output error; the open fails",
		slot);
	nt_log_has(log_buf, line, true);
	t_assert_eq(header_magic(path, slot, &zeros), TIER_NVME_SLOT_MAGIC);

	t = reopen_with(path, NSLOTS, "KVMMD_TEST_NVME_SCAN_FAIL", knob);
	nt_log_has(log_buf, "fail on purpose (tests only)", true);
	snprintf(
		line, sizeof(line),
		"restart scan: reading the header of slot %u failed (Input/output error): zeroed",
		slot);
	nt_log_has(log_buf, line, true);
	t_assert(nt_has(t, 0x101) && !nt_has(t, 0x201));
	t_assert_eq(nt_stats(t).recovered_slots, 1);
	t_assert_eq(header_magic(path, slot, &zeros), 0);
	t_assert(zeros);
	mark(t, 2); /* below the unread header's generation */
	tier_nvme_close(t);

	t = reopen(path);
	t_assert(nt_has(t, 0x101));
	t_assert(!nt_has(t, 0x201)); /* the dropped block: gone */
	t_assert_eq(nt_stats(t).recovered_slots, 1);
	tier_nvme_close(t);
}

/*
 * Tenant 1's one block below its mark, its header's read failing: zeroed
 * at that start, so nothing lies below the mark and it retires there and
 * then (before 7 December no mark retired at a start with a failed read,
 * and the header stayed to be read and left out by the next).
 */
static void read_fails(const char *path)
{
	struct tier_nvme *t = nt_open_slots(path, NSLOTS, PAYLOAD, 0, true);
	char knob[16];
	uint32_t slot;
	bool zeros;

	slot = put(t, 0x101, 1); /* the one header below 1's mark */
	put(t, 0x201, 2);
	mark(t, 1);
	tier_nvme_close(t);
	t_assert_eq(marks_on_disk(path), 1);

	snprintf(knob, sizeof(knob), "%u", slot);
	t = reopen_with(path, NSLOTS, "KVMMD_TEST_NVME_SCAN_FAIL", knob);
	nt_log_has(log_buf, "KVMMD_TEST_NVME_SCAN_FAIL=", true);
	nt_log_has(log_buf, "fail on purpose (tests only)", true);
	nt_log_has(
		log_buf,
		"1 drop marks retired: no header below them left on disk (0 kept)",
		true);
	t_assert_eq(marks_on_disk(path), 0);
	t_assert(!nt_has(t, 0x101) && nt_has(t, 0x201));
	t_assert_eq(nt_stats(t).recovered_slots, 1);
	t_assert_eq(nt_stats(t).drop_marked_slots, 0);
	tier_nvme_close(t);
	t_assert_eq(header_magic(path, slot, &zeros), 0);
	t_assert(zeros);

	/* read fine: nothing there */
	t = reopen(path);
	t_assert(!nt_has(t, 0x101) && nt_has(t, 0x201));
	t_assert_eq(nt_stats(t).recovered_slots, 1);
	tier_nvme_close(t);
}

/*
 * Tenant 4's block under its mark, zeroed, and tenant 5's mark over
 * nothing: tenant 4's mark is left over no header on disk, due to retire
 * at the next start.  Tenant 3's block is kept.
 */
static void retire_ready(const char *path)
{
	struct tier_nvme *t = nt_open_slots(path, NSLOTS, PAYLOAD, 0, true);

	put(t, 0x401, 4);
	put(t, 0x301, 3);
	mark(t, 4);
	mark(t, 5);
	tier_nvme_close(t);
	t = reopen(path);
	nt_log_has(
		log_buf,
		"1 drop marks retired: no header below them left on disk (1 kept)",
		true);
	t_assert_eq(nt_stats(t).drop_marked_slots, 1);
	nt_clear_marked(t, 1, true);
	tier_nvme_close(t);
	t_assert_eq(marks_on_disk(path), 1);
}

static void sync_fails(const char *path)
{
	struct tier_nvme *t;

	retire_ready(path);
	t = reopen_with(path, NSLOTS, "KVMMD_TEST_NVME_RETIRE_FAIL", "sync");
	nt_log_has(
		log_buf,
		"KVMMD_TEST_NVME_RETIRE_FAIL=sync: the sync before drop marks retire fails on purpose (tests only)",
		true);
	nt_log_has(
		log_buf,
		"syncing before retiring 1 drop marks: Input/output error (they stay)",
		true);
	nt_log_has(log_buf, "drop marks retired", false);
	t_assert_eq(marks_on_disk(path), 1);
	t_assert(!nt_has(t, 0x401) && nt_has(t, 0x301));
	/* kept in memory too: the next superblock write carries it */
	mark(t, 9);
	t_assert_eq(marks_on_disk(path), 2);
	tier_nvme_close(t);

	t = reopen(path);
	nt_log_has(
		log_buf,
		"2 drop marks retired: no header below them left on disk (0 kept)",
		true);
	t_assert_eq(marks_on_disk(path), 0);
	t_assert(!nt_has(t, 0x401) && nt_has(t, 0x301));
	tier_nvme_close(t);
}

static void superblock_fails(const char *path)
{
	struct tier_nvme *t;

	retire_ready(path);
	t = reopen_with(path, NSLOTS, "KVMMD_TEST_NVME_RETIRE_FAIL",
			"superblock");
	nt_log_has(
		log_buf,
		"writing the superblock without 1 retired drop marks: Input/output error",
		true);
	nt_log_has(log_buf, "drop marks retired", false);
	t_assert_eq(marks_on_disk(path), 1); /* on disk, covering nothing */
	t_assert(!nt_has(t, 0x401) && nt_has(t, 0x301));
	t_assert_eq(nt_stats(t).recovered_slots, 1);
	put(t, 0x402, 4); /* above the mark */
	tier_nvme_close(t);
	t_assert_eq(marks_on_disk(path), 1);

	t = reopen(path);
	nt_log_has(
		log_buf,
		"1 drop marks retired: no header below them left on disk (0 kept)",
		true);
	t_assert_eq(marks_on_disk(path), 0);
	t_assert(!nt_has(t, 0x401) && nt_has(t, 0x402) && nt_has(t, 0x301));
	t_assert_eq(nt_stats(t).recovered_slots, 2);

	/* the same failure, then a drop's superblock write: it writes the
	 * marks memory has, the retired one no more */
	mark(t, 6);
	tier_nvme_close(t);
	t = reopen_with(path, NSLOTS, "KVMMD_TEST_NVME_RETIRE_FAIL",
			"superblock");
	nt_log_has(log_buf,
		   "writing the superblock without 1 retired drop marks", true);
	t_assert_eq(marks_on_disk(path), 1);
	mark(t, 7);
	t_assert_eq(marks_on_disk(path), 1); /* 7's, not 6's */
	t_assert(nt_has(t, 0x402) && nt_has(t, 0x301) && !nt_has(t, 0x401));
	tier_nvme_close(t);
}

/*
 * A tier of NSLOTS slots, every one written with hashes from base (slots
 * 0-3's into kept[], when not NULL); cut to 4 slots; the bytes of slot 6
 * written back where they were, as a block device keeps them past a
 * shrunk tier's end (a file is cut); mark_tenant's mark taken on the 4
 * slots first, when not 0.  Returns the hash slot 6 held.
 */
static uint64_t stale_past_end(const char *path, uint64_t base,
			       uint64_t kept[4], uint32_t mark_tenant)
{
	struct tier_nvme *t = nt_open_slots(path, NSLOTS, PAYLOAD, 0, true);
	size_t len = NT_SLOT_BYTES(PAYLOAD);
	off_t off = (off_t)NT_SLOT_OFFSET(6, PAYLOAD);
	unsigned char *saved = malloc(len);
	uint64_t stale = 0;
	uint32_t slot;
	bool zeros;
	int fd;

	t_assert(saved != NULL);
	for (uint64_t h = base; h < base + NSLOTS; h++) {
		slot = put(t, h, 1);
		if (slot == 6)
			stale = h;
		else if (slot < 4 && kept)
			kept[slot] = h;
	}
	t_assert(stale != 0);
	tier_nvme_close(t);
	fd = open(path, O_RDWR | O_CLOEXEC);
	t_assert(fd >= 0);
	t_assert_eq(pread(fd, saved, len, off), (ssize_t)len);
	close(fd);

	t = reopen_slots(path, 4, NULL);
	nt_log_has(log_buf, "shrank from 8 to 4 slots", true);
	t_assert_eq(nt_stats(t).recovered_slots, 4);
	t_assert(!nt_has(t, stale));
	if (mark_tenant)
		mark(t, mark_tenant);
	tier_nvme_close(t);

	fd = open(path, O_RDWR | O_CLOEXEC);
	t_assert(fd >= 0);
	t_assert_eq(pwrite(fd, saved, len, off), (ssize_t)len);
	t_ok(fsync(fd));
	close(fd);
	t_assert_eq(header_magic(path, 6, &zeros), TIER_NVME_SLOT_MAGIC);
	free(saved);
	return stale;
}

/*
 * stale_past_end(), then grown to NSLOTS again with slot 6's header read
 * failing.
 */
static void past_end(const char *path)
{
	uint64_t stale = stale_past_end(path, 0x800, NULL, 0);
	struct tier_nvme *t;
	bool zeros;

	t = reopen_with(path, NSLOTS, "KVMMD_TEST_NVME_SCAN_FAIL", "6");
	nt_log_has(
		log_buf,
		"grew from 4 to 8 slots (1 stale slot headers past the old end cleared)",
		true);
	t_assert(!nt_has(t, stale));
	t_assert_eq(nt_stats(t).recovered_slots, 4);
	tier_nvme_close(t);
	/* zeroed, whatever it held: the next scan finds nothing there */
	t_assert_eq(header_magic(path, 6, &zeros), 0);
	t_assert(zeros);

	t = reopen(path);
	t_assert(!nt_has(t, stale));
	t_assert_eq(nt_stats(t).recovered_slots, 4);
	tier_nvme_close(t);
}

/* The slot count the superblock on disk says. */
static uint64_t sb_slots(const char *path)
{
	struct nvme_superblock sb;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	t_assert(fd >= 0);
	t_assert_eq(pread(fd, &sb, sizeof(sb), 0), (ssize_t)sizeof(sb));
	close(fd);
	t_assert_eq(sb.magic, TIER_NVME_SB_MAGIC);
	return sb.slot_count;
}

/* The file's first len bytes into a new buffer. */
static unsigned char *file_bytes(const char *path, size_t len)
{
	unsigned char *b = malloc(len);
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	t_assert(b != NULL && fd >= 0);
	t_assert_eq(pread(fd, b, len, 0), (ssize_t)len);
	close(fd);
	return b;
}

/* The 4 blocks of slots 0-3 (kept[]) back in t, byte-identical. */
static void kept_read(struct tier_nvme *t, const uint64_t kept[4])
{
	unsigned char *want = malloc(PAYLOAD);

	t_assert(want != NULL);
	for (uint32_t i = 0; i < 4; i++) {
		t_assert(kept[i] != 0);
		memset(want, (int)(kept[i] & 0xff), PAYLOAD);
		t_ok(nt_read_check(t, kept[i], i, buf, want, PAYLOAD));
	}
	free(want);
}

/*
 * stale_past_end() (slots 0-3's blocks into kept[]), grown to NSLOTS
 * again with the zeroing of slot 6's header failing; read_fails: its header's read fails first.  The open fails
 * and changes nothing a block lives in; the next one, the knobs unset,
 * recovers the 4 and clears slot 6.
 */
static void clear_fails(const char *path, bool read_fails)
{
	size_t len = NT_SLOT_BYTES(PAYLOAD), old_len;
	off_t off = (off_t)NT_SLOT_OFFSET(6, PAYLOAD);
	uint64_t stale, kept[4] = { 0 };
	unsigned char *before, *after;
	struct tier_nvme *t;
	char line[512];
	bool zeros;

	stale = stale_past_end(path, 0x900, kept, 0);
	old_len = (size_t)off + len;
	before = file_bytes(path, old_len);

	reopen_fails(path, NSLOTS, -EIO,
		     read_fails ? "KVMMD_TEST_NVME_SCAN_FAIL" : NULL, "6",
		     "KVMMD_TEST_NVME_CLEAR_FAIL", "6");
	nt_log_has(
		log_buf,
		"KVMMD_TEST_NVME_CLEAR_FAIL=6: the restart scan's zeroing of these slots' headers (stale ones past the last run's end, unreadable ones) fails on purpose (tests only)",
		true);
	snprintf(
		line, sizeof(line),
		"%s: zeroing the stale header of slot 6, past the last run's end (4 slots, now 8; %s): Input/output error; the open fails, the superblock still says 4 slots and the next open clears it again",
		path,
		read_fails ? "its header's read failed" :
			     "a valid header an earlier life of the file left");
	nt_log_has(log_buf, line, true);
	snprintf(
		line, sizeof(line),
		"%s: restart scan: clearing a stale slot header: Input/output error",
		path);
	nt_log_has(log_buf, line, true);
	nt_log_has(log_buf, "grew from", false);
	/* nothing written where the blocks live, nor to the superblock: the
	 * failed open only grew the file (zeros past its old end) */
	after = file_bytes(path, old_len);
	t_assert(memcmp(before, after, old_len) == 0);
	t_assert_eq(sb_slots(path), 4);
	t_assert_eq(header_magic(path, 6, &zeros), TIER_NVME_SLOT_MAGIC);
	free(after);

	/* the knob unset: the 4 blocks back, byte-identical, slot 6 cleared */
	t = reopen(path);
	nt_log_has(
		log_buf,
		"grew from 4 to 8 slots (1 stale slot headers past the old end cleared)",
		true);
	t_assert_eq(nt_stats(t).recovered_slots, 4);
	t_assert(!nt_has(t, stale));
	kept_read(t, kept);
	tier_nvme_close(t);
	t_assert_eq(sb_slots(path), NSLOTS);
	t_assert_eq(header_magic(path, 6, &zeros), 0);
	t_assert(zeros);

	t = reopen(path);
	t_assert_eq(nt_stats(t).recovered_slots, 4);
	t_assert(!nt_has(t, stale));
	tier_nvme_close(t);
	free(before);
}

/*
 * stale_past_end(), tenant 5's mark over no block (due to retire), then
 * grown to NSLOTS again with the sync after the zeroing of slot 6's
 * stale header failing (KVMMD_TEST_NVME_CLEAR_SYNC_FAIL), or the
 * superblock write with the new slot count (KVMMD_TEST_NVME_RESIZE_FAIL,
 * the zeroing synced before it).  The open fails with -EIO and an ERR
 * line; the superblock still says 4 slots and holds the mark, the last
 * run's slots are as they were, slot 6's header is zeros (written, only
 * its sync or the superblock failed).  The next open, the knob unset,
 * grows the tier (the header already zeros: none to clear), recovers the
 * 4 byte-identical, not the stale block, and retires the mark.  Before
 * the knobs neither failure could be made in a test.
 */
static void grow_fails(const char *path, const char *knob)
{
	size_t first = NT_SLOT_OFFSET(4, PAYLOAD);
	uint64_t stale, kept[4] = { 0 };
	unsigned char *before, *after;
	struct tier_nvme *t;
	char line[512];
	bool zeros;

	stale = stale_past_end(path, 0xa00, kept, 5);
	t_assert_eq(marks_on_disk(path), 1);
	before = file_bytes(path, first);

	reopen_fails(path, NSLOTS, -EIO, knob, "1", NULL, NULL);
	snprintf(line, sizeof(line), "%s: %s=1: ", path, knob);
	nt_log_has(log_buf, line, true);
	nt_log_has(log_buf, "on purpose (tests only)", true);
	if (strstr(knob, "SYNC"))
		snprintf(
			line, sizeof(line),
			"%s: restart scan: syncing 1 stale slot headers cleared past the last run's end and 0 unreadable ones zeroed: Input/output error; the open fails, the superblock still says 4 slots",
			path);
	else
		snprintf(
			line, sizeof(line),
			"%s: writing the superblock with 8 slots (it says 4): Input/output error; the open fails",
			path);
	nt_log_has(log_buf, line, true);
	nt_log_has(log_buf, "grew from", false);
	after = file_bytes(path, first);
	t_assert(memcmp(before, after, first) == 0);
	t_assert_eq(sb_slots(path), 4);
	t_assert_eq(marks_on_disk(path), 1);
	t_assert_eq(header_magic(path, 6, &zeros), 0);
	t_assert(zeros);

	t = reopen(path);
	nt_log_has(
		log_buf,
		"grew from 4 to 8 slots (0 stale slot headers past the old end cleared)",
		true);
	nt_log_has(
		log_buf,
		"1 drop marks retired: no header below them left on disk (0 kept)",
		true);
	t_assert_eq(nt_stats(t).recovered_slots, 4);
	t_assert(!nt_has(t, stale));
	kept_read(t, kept);
	tier_nvme_close(t);
	t_assert_eq(sb_slots(path), NSLOTS);
	t_assert_eq(marks_on_disk(path), 0);
	free(after);
	free(before);
}

/*
 * A header read failing in the last run's slots (slot 2) and the sync
 * after its zeroing failing: the open fails, the superblock as it was;
 * the next open finds the zeroed header (the block is lost, as it is for
 * the run whose read failed) and recovers the other 7.
 */
static void unread_sync_fails(const char *path)
{
	struct tier_nvme *t = nt_open_slots(path, NSLOTS, PAYLOAD, 0, true);
	uint64_t in2 = 0;

	for (uint64_t h = 0xb00; h < 0xb00 + NSLOTS; h++)
		if (put(t, h, 1) == 2)
			in2 = h;
	tier_nvme_close(t);
	t_assert(in2 != 0);

	reopen_fails(path, NSLOTS, -EIO, "KVMMD_TEST_NVME_SCAN_FAIL", "2",
		     "KVMMD_TEST_NVME_CLEAR_SYNC_FAIL", "1");
	nt_log_has(
		log_buf,
		"restart scan: syncing 0 stale slot headers cleared past the last run's end and 1 unreadable ones zeroed: Input/output error; the open fails, the superblock still says 8 slots",
		true);

	t = reopen(path);
	t_assert_eq(nt_stats(t).recovered_slots, NSLOTS - 1);
	t_assert(!nt_has(t, in2));
	tier_nvme_close(t);
}

/*
 * Every slot written, then shrunk to 4 with the superblock write failing
 * (KVMMD_TEST_NVME_RESIZE_FAIL): the open fails with -EIO, the file not
 * cut and not changed (its superblock still says 8 slots); the next open
 * at 8 recovers all 8, byte-identical, and one at 4 shrinks it as ever.
 */
static void shrink_fails(const char *path)
{
	struct tier_nvme *t = nt_open_slots(path, NSLOTS, PAYLOAD, 0, true);
	size_t len = NT_SLOT_OFFSET(NSLOTS, PAYLOAD);
	unsigned char *before, *after, *want;
	uint64_t in[NSLOTS] = { 0 };
	struct stat st;

	for (uint64_t h = 0xc00; h < 0xc00 + NSLOTS; h++)
		in[put(t, h, 1)] = h;
	tier_nvme_close(t);
	before = file_bytes(path, len);

	reopen_fails(path, 4, -EIO, "KVMMD_TEST_NVME_RESIZE_FAIL", "1", NULL,
		     NULL);
	nt_log_has(
		log_buf,
		"writing the superblock with 4 slots (it says 8): Input/output error; the open fails",
		true);
	nt_log_has(log_buf, "shrank from", false);
	t_ok(stat(path, &st));
	t_assert_eq((uint64_t)st.st_size, (uint64_t)len);
	after = file_bytes(path, len);
	t_assert(memcmp(before, after, len) == 0);
	t_assert_eq(sb_slots(path), NSLOTS);

	t = reopen(path);
	t_assert_eq(nt_stats(t).recovered_slots, NSLOTS);
	want = malloc(PAYLOAD);
	t_assert(want != NULL);
	for (uint32_t i = 0; i < NSLOTS; i++) {
		memset(want, (int)(in[i] & 0xff), PAYLOAD);
		t_ok(nt_read_check(t, in[i], i, buf, want, PAYLOAD));
	}
	tier_nvme_close(t);
	t = reopen_slots(path, 4, NULL);
	nt_log_has(
		log_buf,
		"shrank from 8 to 4 slots: 4 cached blocks past the new end are lost",
		true);
	t_assert_eq(nt_stats(t).recovered_slots, 4);
	tier_nvme_close(t);
	t_assert_eq(sb_slots(path), 4);
	free(want);
	free(after);
	free(before);
}

static void bad_values(const char *path)
{
	struct tier_nvme *t = nt_open_slots(path, NSLOTS, PAYLOAD, 0, true);
	static const char *const bad[][2] = {
		{ "KVMMD_TEST_NVME_SCAN_FAIL", "x" },
		{ "KVMMD_TEST_NVME_SCAN_FAIL", "3," },
		{ "KVMMD_TEST_NVME_SCAN_FAIL", "-1" },
		{ "KVMMD_TEST_NVME_RETIRE_FAIL", "fsync" },
		{ "KVMMD_TEST_NVME_CLEAR_FAIL", "6,x" },
		{ "KVMMD_TEST_NVME_CLEAR_SYNC_FAIL", "yes" },
		{ "KVMMD_TEST_NVME_RESIZE_FAIL", "01" },
	};

	tier_nvme_close(t);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		reopen_fails(path, NSLOTS, -EINVAL, bad[i][0], bad[i][1], NULL,
			     NULL);
		nt_log_has(log_buf, bad[i][0], true);
		nt_log_has(log_buf,
			   strstr(bad[i][0], "RETIRE") ?
				   "want sync or superblock" :
			   strstr(bad[i][0], "SYNC") ||
					   strstr(bad[i][0], "RESIZE") ?
				   "want 1 (on) or 0 (off)" :
				   "want slot numbers",
			   true);
	}
}

int main(void)
{
	const char *dir = getenv("KVMM_NVME_TEST_DIR");
	char path[256];

	unsetenv("KVMMD_TEST_NVME_SCAN_FAIL");
	unsetenv("KVMMD_TEST_NVME_RETIRE_FAIL");
	unsetenv("KVMMD_TEST_NVME_CLEAR_FAIL");
	unsetenv("KVMMD_TEST_NVME_CLEAR_SYNC_FAIL");
	unsetenv("KVMMD_TEST_NVME_RESIZE_FAIL");
	snprintf(path, sizeof(path), "%s/kvmm-tier-scan-fail-%d",
		 dir ? dir : "/var/tmp", (int)getpid());
	buf = t_page_alloc(PAYLOAD);
	read_fails_newest(path);
	unlink(path);
	read_fails(path);
	unlink(path);
	sync_fails(path);
	unlink(path);
	superblock_fails(path);
	unlink(path);
	past_end(path);
	unlink(path);
	clear_fails(path, false);
	unlink(path);
	clear_fails(path, true);
	unlink(path);
	grow_fails(path, "KVMMD_TEST_NVME_CLEAR_SYNC_FAIL");
	unlink(path);
	grow_fails(path, "KVMMD_TEST_NVME_RESIZE_FAIL");
	unlink(path);
	unread_sync_fails(path);
	unlink(path);
	shrink_fails(path);
	unlink(path);
	bad_values(path);
	unlink(path);
	free(buf);
	printf("the restart scan's failure paths: a failed header read zeroes the header (a dropped block does not come back), a failed sync or superblock write keeps them on disk, a failed read past the old end is zeroed, a failed zeroing, its sync or a resized tier's superblock write fails the open and loses nothing\n");
	return 0;
}
