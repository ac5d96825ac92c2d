// SPDX-License-Identifier: MIT
/*
 * NVMe tier test knobs that make the open's restart scan, its clearing
 * of stale headers and their sync, the superblock write of a resized
 * tier and the drop marks' retirement fail on purpose, so that their
 * safety paths run in the tests (tests/tier-nvme-scan-fail.c,
 * tests/cache-nvme-clear-fail.c); never set in production.  Read
 * from the environment at each tier_nvme_open(), each one set said in a
 * WARN line:
 *
 *   KVMMD_TEST_NVME_SCAN_FAIL=N[,N...]   the scan's header read of slot N
 *       completes with -EIO: the read is submitted and completes as any
 *       other, and its completion's result is replaced before
 *       recover_header() (tier_nvme_recover.c) looks at it, so the path a
 *       failing disk takes is the one that runs;
 *   KVMMD_TEST_NVME_CLEAR_FAIL=N[,N...]  the zeroing of slot N's header,
 *       when the scan finds it past the last run's end (a tier that
 *       grew) valid or unreadable, or cannot read it in the last run's
 *       slots, fails with -EIO without writing (zero_header(): the open
 *       fails, the file as it was);
 *   KVMMD_TEST_NVME_RETIRE_FAIL=sync       the fdatasync before drop marks
 *       retire fails with -EIO (nvme_marks_retire(): every mark stays);
 *   KVMMD_TEST_NVME_RETIRE_FAIL=superblock the superblock write without
 *       the retired marks fails with -EIO (tier_nvme_open(): a WARN, the
 *       open goes on, the marks stay on disk), and so does the one with
 *       the marks of a drop answered while the tier was out
 *       (tier_nvme_config.pending_drop: an ERR, the open fails);
 *   KVMMD_TEST_NVME_CLEAR_SYNC_FAIL=1    the fdatasync after the scan
 *       zeroed stale or unreadable headers fails with -EIO, the zeros
 *       written (nvme_recover(): the open fails, the superblock as it
 *       was);
 *   KVMMD_TEST_NVME_RESIZE_FAIL=1        the superblock write with a
 *       grown or shrunk tier's slot count fails with -EIO, nothing
 *       written (nvme_open_superblock(): the open fails, the old
 *       superblock stays, a shrunk file is not cut).
 *
 * A value that is not one of those fails the open (-EINVAL) with a line
 * saying what was wrong: a test that misspells one must not pass on a
 * path that never failed.
 */
#include "tier_nvme_priv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "vmm/vmm.h"

int tier_nvme_scan_fail_parse(const char *v,
			      uint32_t slots[TIER_NVME_SCAN_FAIL_MAX],
			      uint32_t *n)
{
	const char *p = v;

	*n = 0;
	for (;;) {
		char *end;
		unsigned long slot;

		if (*p < '0' || *p > '9')
			return -EINVAL;
		errno = 0;
		slot = strtoul(p, &end, 10);
		if (errno || slot >= UINT32_MAX ||
		    *n == TIER_NVME_SCAN_FAIL_MAX)
			return -EINVAL;
		slots[(*n)++] = (uint32_t)slot;
		if (!*end)
			return 0;
		if (*end != ',')
			return -EINVAL;
		p = end + 1;
	}
}

int tier_nvme_retire_fail_parse(const char *v, bool *sync, bool *superblock)
{
	*sync = !strcmp(v, "sync");
	*superblock = !strcmp(v, "superblock");
	return *sync || *superblock ? 0 : -EINVAL;
}

int tier_nvme_flag_parse(const char *v, bool *on)
{
	*on = !strcmp(v, "1");
	return *on || !strcmp(v, "0") ? 0 : -EINVAL;
}

#if HAVE_LIBURING

/*
 * A slot list knob, name, into slots and *n: 0 (unset: none), or -EINVAL
 * after an ERR line; set, one WARN line: what, "on purpose".
 */
static int slot_knob_read(const char *name, const char *what, const char *path,
			  const char *part, uint32_t slots[NVME_FAULT_SCAN_MAX],
			  uint32_t *n)
{
	const char *v = getenv(name);

	if (!v)
		return 0;
	if (tier_nvme_scan_fail_parse(v, slots, n)) {
		vmm_log(VMM_LOG_ERR,
			"tier_nvme: %s=%s: want slot numbers N[,N...] (at most %u)",
			name, v, NVME_FAULT_SCAN_MAX);
		return -EINVAL;
	}
	vmm_log(VMM_LOG_WARN,
		"tier_nvme: %s%s: %s=%s: %s on purpose (tests only)", path,
		part, name, v, what);
	return 0;
}

/*
 * A flag knob, name, into *on: 0 (unset or "0": off), or -EINVAL after an
 * ERR line; "1", one WARN line: what, "on purpose".
 */
static int flag_knob_read(const char *name, const char *what, const char *path,
			  const char *part, bool *on)
{
	const char *v = getenv(name);

	*on = false;
	if (!v)
		return 0;
	if (tier_nvme_flag_parse(v, on)) {
		vmm_log(VMM_LOG_ERR, "tier_nvme: %s=%s: want 1 (on) or 0 (off)",
			name, v);
		return -EINVAL;
	}
	if (*on)
		vmm_log(VMM_LOG_WARN,
			"tier_nvme: %s%s: %s=%s: %s on purpose (tests only)",
			path, part, name, v, what);
	return 0;
}

int nvme_faults_read(struct tier_nvme *t, const char *path, const char *part)
{
	const char *retire = getenv("KVMMD_TEST_NVME_RETIRE_FAIL");
	struct nvme_faults *f = &t->faults;

	memset(f, 0, sizeof(*f));
	if (slot_knob_read("KVMMD_TEST_NVME_SCAN_FAIL",
			   "the restart scan's header reads of these slots fail",
			   path, part, f->scan, &f->n_scan) ||
	    slot_knob_read(
		    "KVMMD_TEST_NVME_CLEAR_FAIL",
		    "the restart scan's zeroing of these slots' headers (stale ones past the last run's end, unreadable ones) fails",
		    path, part, f->clear, &f->n_clear) ||
	    flag_knob_read(
		    "KVMMD_TEST_NVME_CLEAR_SYNC_FAIL",
		    "the restart scan's sync of the headers it zeroed (stale ones past the last run's end, unreadable ones) fails",
		    path, part, &f->clear_sync) ||
	    flag_knob_read(
		    "KVMMD_TEST_NVME_RESIZE_FAIL",
		    "the superblock write with a grown or shrunk tier's slot count fails",
		    path, part, &f->resize_sb))
		return -EINVAL;
	if (!retire)
		return 0;
	if (tier_nvme_retire_fail_parse(retire, &f->retire_sync,
					&f->retire_sb)) {
		vmm_log(VMM_LOG_ERR,
			"tier_nvme: KVMMD_TEST_NVME_RETIRE_FAIL=%s: want sync or superblock",
			retire);
		return -EINVAL;
	}
	vmm_log(VMM_LOG_WARN,
		"tier_nvme: %s%s: KVMMD_TEST_NVME_RETIRE_FAIL=%s: %s fails on purpose (tests only)",
		path, part, retire,
		f->retire_sync ?
			"the sync before drop marks retire" :
			"the superblock write without the retired drop marks");
	return 0;
}

static bool slot_listed(const uint32_t *slots, uint32_t n, uint32_t slot)
{
	for (uint32_t i = 0; i < n; i++)
		if (slots[i] == slot)
			return true;
	return false;
}

bool nvme_fault_scan(const struct tier_nvme *t, uint32_t slot)
{
	return slot_listed(t->faults.scan, t->faults.n_scan, slot);
}

bool nvme_fault_clear(const struct tier_nvme *t, uint32_t slot)
{
	return slot_listed(t->faults.clear, t->faults.n_clear, slot);
}

#endif /* HAVE_LIBURING */
