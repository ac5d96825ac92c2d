/* SPDX-License-Identifier: MIT */
/*
 * An NVMe tier opened in the test's process, as the tier-nvme-* and
 * tier-migrate-* tests open one: tier_nvme_open() with the one skip
 * rule (tests/lib/nvme_probe.h: 77 only where the file system cannot
 * do O_DIRECT io_uring I/O) and the one failure rule, sized with
 * tests/lib/nvme_layout.h, instead of the same lines in each test.
 */
#ifndef KVMM_TESTS_NVME_TIER_H
#define KVMM_TESTS_NVME_TIER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kvmm/kvmmd/tier_nvme.h"
#include "tests/lib/nvme_layout.h" /* NT_CAPACITY() */
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
 * Write the block hash for tenant (layout id 7): payload bytes, each
 * hash & 0xff, through buf; the write must work.  Its slot.
 */
static inline uint32_t nt_put(struct tier_nvme *t, uint64_t hash,
			      uint32_t tenant, unsigned char *buf,
			      size_t payload)
{
	struct tier_nvme_io io = { .hash = hash,
				   .layout_id = 7,
				   .buf = buf,
				   .length = payload,
				   .tenant = tenant };

	memset(buf, (int)(hash & 0xff), payload);
	t_assert_eq(tier_nvme_write_batch(t, &io, 1), 0);
	t_ok(io.result);
	return io.slot;
}

#endif
