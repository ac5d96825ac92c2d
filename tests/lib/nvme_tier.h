/* SPDX-License-Identifier: MIT */
/*
 * An NVMe tier opened in the test's process, as the tier-nvme-* and
 * tier-migrate-* tests open one: tier_nvme_open() with the one skip
 * rule (tests/lib/nvme_probe.h: 77 only where the file system cannot
 * do O_DIRECT io_uring I/O) and the one failure rule, sized with
 * tests/lib/nvme_layout.h; and the blocks those tests write, read back
 * and corrupt (nt_fill(), nt_write(), nt_put(), nt_read_check(),
 * nt_flip_byte()), instead of the same lines in each test.  A test whose
 * helper checks something more (a layout id, a read by slot, headroom)
 * keeps its own.
 */
#ifndef KVMM_TESTS_NVME_TIER_H
#define KVMM_TESTS_NVME_TIER_H

#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvmm/kvmmd/crc32c.h"
#include "kvmm/kvmmd/tier_nvme.h"
#include "tests/lib/nvme_layout.h"
#include "tests/lib/nvme_probe.h"
#include "tests/lib/test.h"
#include "vmm/vmm.h"

/*
 * tier_nvme_open() of cfg (its size is set here).  Skips the test where
 * the file system cannot do the tier's I/O (probed next to skip_path, or
 * cfg.path when it is NULL).  Any other error fails the test, unless err
 * is given: then *err is the result and NULL the tier on an error.
 */
static inline struct tier_nvme *nt_open(struct tier_nvme_config cfg,
					const char *skip_path, int *err)
{
	struct tier_nvme *t = NULL;
	int r;

	cfg.size = sizeof(cfg);
	r = tier_nvme_open(&cfg, &t);
	t_nvme_skip_if_unsupported(r, skip_path ? skip_path : cfg.path);
	if (err)
		*err = r;
	else
		t_ok(r);
	return r ? NULL : t;
}

/*
 * nt_open() with *err given, the log lines the open wrote (recovery,
 * formatting and why) caught into log (cap bytes, NUL-terminated) for
 * the test to check, and still going to stderr after it.
 */
static inline struct tier_nvme *nt_open_logged(struct tier_nvme_config cfg,
					       char *log, size_t cap, int *err)
{
	struct tier_nvme *t;
	FILE *f = tmpfile();
	size_t n;

	t_assert(f != NULL);
	vmm_log_to_fd(fileno(f));
	t = nt_open(cfg, NULL, err);
	vmm_log_to_fd(STDERR_FILENO);
	rewind(f);
	n = fread(log, 1, cap - 1, f);
	log[n] = '\0';
	fclose(f);
	return t;
}

/* nt_open_logged() of the tier file at path as nslots slots of payload
 * bytes (no reformat); the open's result in *err (NULL: it must work). */
static inline struct tier_nvme *nt_reopen_logged(const char *path,
						 uint32_t nslots,
						 size_t payload, char *log,
						 size_t cap, int *err)
{
	struct tier_nvme_config cfg = {
		.path = path,
		.capacity_bytes = NT_CAPACITY(nslots, payload),
		.payload_bytes = payload,
	};
	struct tier_nvme *t;
	int r;

	t = nt_open_logged(cfg, log, cap, &r);
	if (err)
		*err = r;
	else
		t_ok(r);
	return t;
}

/* nt_open() of a tier of nslots slots of payload bytes at path, with
 * queue_depth (0: the tier's default) and reformat; fails or skips the
 * test where it cannot be opened. */
static inline struct tier_nvme *nt_open_slots(const char *path, uint32_t nslots,
					      size_t payload,
					      unsigned int queue_depth,
					      bool reformat)
{
	struct tier_nvme_config cfg = {
		.path = path,
		.capacity_bytes = NT_CAPACITY(nslots, payload),
		.payload_bytes = payload,
		.queue_depth = queue_depth,
		.reformat = reformat,
	};

	return nt_open(cfg, NULL, NULL);
}

/*
 * Fill p with n bytes (a multiple of 8) of a sequence seed picks: each
 * block's own bytes, so that a block read back from another slot, or
 * another block's payload, does not compare equal.
 */
static inline void nt_fill(unsigned char *p, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i += 8) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		memcpy(p + i, &seed, 8);
	}
}

/*
 * Write one block: hash in layout layout_id for tenant, length bytes
 * from buf; the write must work.  Its slot.
 */
static inline uint32_t nt_write(struct tier_nvme *t, uint64_t hash,
				uint64_t layout_id, uint32_t tenant, void *buf,
				size_t length)
{
	struct tier_nvme_io io = { .hash = hash,
				   .layout_id = layout_id,
				   .buf = buf,
				   .length = length,
				   .tenant = tenant };

	t_assert_eq(tier_nvme_write_batch(t, &io, 1), 0);
	t_ok(io.result);
	return io.slot;
}

/*
 * Write the block hash for tenant (layout id 7): payload bytes, each
 * hash & 0xff, through buf; the write must work.  Its slot.
 */
static inline uint32_t nt_put(struct tier_nvme *t, uint64_t hash,
			      uint32_t tenant, unsigned char *buf,
			      size_t payload)
{
	memset(buf, (int)(hash & 0xff), payload);
	return nt_write(t, hash, 7, tenant, buf, payload);
}

/*
 * Read the block hash back into buf (payload bytes): the tier must have
 * it, in slot when slot >= 0, and what the read gives must be want's
 * payload bytes.  0, or the read's error (-EBADMSG: a payload that
 * failed its CRC, the block dropped) for the test to check.
 */
static inline int nt_read_check(struct tier_nvme *t, uint64_t hash,
				int64_t slot, unsigned char *buf,
				const unsigned char *want, size_t payload)
{
	struct tier_nvme_io io = { .hash = hash, .buf = buf };

	t_ok(tier_nvme_lookup(t, hash, &io.slot, NULL, NULL));
	if (slot >= 0)
		t_assert_eq(io.slot, slot);
	memset(buf, 0, payload);
	if (tier_nvme_read_batch(t, &io, 1))
		return io.result;
	t_assert(memcmp(buf, want, payload) == 0);
	return 0;
}

/*
 * n blocks of partition part of a partitioned file: hashes base + 0x100
 * x part + i, layout id 5, len bytes each, byte o of block i pat(part, i,
 * o).  write: written from data; else looked up (its length len), read
 * back into back and compared byte for byte, naming the first that
 * differs.
 */
static inline void
nt_part_blocks(struct tier_nvme *t, uint64_t base, int part, int n, size_t len,
	       bool write, unsigned char *data, unsigned char *back,
	       unsigned char (*pat)(int part, int i, size_t o))
{
	for (int i = 0; i < n; i++) {
		struct tier_nvme_io io = {
			.hash = base + 0x100 * (uint64_t)part + (uint64_t)i,
			.layout_id = 5,
			.buf = write ? data : back,
			.length = len
		};

		for (size_t o = 0; write && o < len; o++)
			data[o] = pat(part, i, o);
		if (write) {
			t_assert_eq(tier_nvme_write_batch(t, &io, 1), 0);
			continue;
		}
		t_ok(tier_nvme_lookup(t, io.hash, &io.slot, &io.length, NULL));
		t_assert_eq(io.length, len);
		t_assert_eq(tier_nvme_read_batch(t, &io, 1), 0);
		for (size_t o = 0; o < len; o++)
			if (back[o] != pat(part, i, o))
				t_fail("partition %d block %d byte %zu differs",
				       part, i, o);
	}
}

/* Flip a bit of the byte at off of the file at path, on the disk: a
 * payload or header the tier must find corrupted. */
static inline void nt_flip_byte(const char *path, uint64_t off)
{
	int fd = open(path, O_RDWR | O_CLOEXEC);
	unsigned char c;

	t_assert(fd >= 0);
	t_assert_eq(pread(fd, &c, 1, (off_t)off), 1);
	c ^= 0x40;
	t_assert_eq(pwrite(fd, &c, 1, (off_t)off), 1);
	t_ok(fsync(fd));
	close(fd);
}

/* Whether the tier holds hash. */
static inline bool nt_has(struct tier_nvme *t, uint64_t hash)
{
	uint32_t slot;

	return tier_nvme_lookup(t, hash, &slot, NULL, NULL) == 0;
}

static inline struct tier_nvme_stats nt_stats(struct tier_nvme *t)
{
	struct tier_nvme_stats st;

	tier_nvme_get_stats(t, &st);
	return st;
}

/* An open's log (nt_open_logged()) says what, or not (has). */
static inline void nt_log_has(const char *log, const char *what, bool has)
{
	if (!strstr(log, what) != !has)
		t_fail("the open's log %s \"%s\":\n%s", has ? "lacks" : "has",
		       what, log);
}

/*
 * Make slot's header (a block written for a tenant, payload bytes a
 * block) one of before the tenants: no tenant and no flag, its CRC made
 * again, synced.
 */
static inline void nt_make_old(const char *path, uint32_t slot, size_t payload)
{
	struct tier_nvme_slot_header h;
	off_t off = (off_t)NT_SLOT_OFFSET(slot, payload);
	int fd = open(path, O_RDWR | O_CLOEXEC);

	t_assert(fd >= 0);
	t_assert_eq(pread(fd, &h, sizeof(h), off), (ssize_t)sizeof(h));
	t_assert_eq(h.magic, TIER_NVME_SLOT_MAGIC);
	t_assert_eq(h.flags, TIER_NVME_HDR_TENANT);
	h.tenant = 0;
	h.flags = 0;
	h.header_crc = 0;
	h.header_crc = tier_crc32c(0, &h, sizeof(h));
	t_assert_eq(pwrite(fd, &h, sizeof(h), off), (ssize_t)sizeof(h));
	t_ok(fsync(fd));
	close(fd);
}

/*
 * The headers the open left out under a mark (want of them): zeroed, as
 * kvmmd's jobs do (cache_nvme_marked.c), or given back unzeroed, as one
 * that failed or was cancelled does.
 */
static inline void nt_clear_marked(struct tier_nvme *t, uint32_t want,
				   bool zero)
{
	struct tier_nvme_stale *v;
	uint32_t n, left;

	t_ok(tier_nvme_marked_claim(t, &v, &n, &left));
	t_assert_eq(n, want);
	t_assert_eq(left, 0);
	for (uint32_t i = 0; i < n; i++) {
		struct tier_nvme_io io = { .hash = v[i].hash,
					   .slot = v[i].slot };

		if (!zero) {
			t_ok(tier_nvme_invalidate_unclaim(t, v[i].slot));
			continue;
		}
		t_assert_eq(tier_nvme_invalidate_batch(t, &io, 1), 0);
		t_assert(io.dropped);
	}
	free(v);
}

#endif
