/* SPDX-License-Identifier: MIT */
/*
 * kvmmd's options for the small three-tier cache the NVMe cache tests
 * run: blocks of 4 pages of 64 KiB, a few GPU blocks, 2 MiB of host
 * memory (8 slots, 6 for the policy) and an NVMe tier file.  nca_args():
 * lru, 7 slots (6 for the policy: 1867776 bytes) and nothing saved at
 * the stop, so what a restart on the same file recovers is what the tier
 * held then; nca_save_args(): the default policy, the test's number of
 * slots and its --nvme-save-on-stop.
 */
#ifndef KVMM_TESTS_NVME_CACHE_ARGS_H
#define KVMM_TESTS_NVME_CACHE_ARGS_H

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "kvmm/kvmmd/tier_nvme.h"
#include "tests/lib/nvme_layout.h"
#include "tests/lib/test.h"

/* The tier file: 7 slots of a 256 KiB block (4 pages of 64 KiB). */
#define NCA_NVME_SLOTS 7
#define NCA_BLOCK_BYTES (4 * 65536)

enum {
	/* --socket-mode 0666: clients of other uids reach the socket */
	NCA_ANY_UID = 1 << 0,
	/* no --cache-block-pages: the first region sets the tiers up */
	NCA_BLOCK_UNNAMED = 1 << 1,
};

struct nca_args {
	const char *argv[20];
	char gpu[16];
	char nvme_size[NT_SIZE_ARG_LEN];
};

/*
 * The options, NULL-terminated in a->argv (td_start()'s extra): policy
 * (NULL: kvmmd's default), 4-page blocks, gpu_blocks GPU blocks, 2 MiB
 * of host memory, a tier file of nvme_slots slots at nvme and
 * --nvme-save-on-stop save (NULL: left out, kvmmd's default).
 */
static inline const char *const *nca_build(struct nca_args *a,
					   const char *policy, const char *nvme,
					   unsigned int gpu_blocks,
					   unsigned int nvme_slots,
					   const char *save, unsigned int flags)
{
	const char **p = a->argv;

	snprintf(a->gpu, sizeof(a->gpu), "%u", gpu_blocks);
	if (flags & NCA_ANY_UID) {
		*p++ = "--socket-mode";
		*p++ = "0666";
	}
	if (policy) {
		*p++ = "--cache-policy";
		*p++ = policy;
	}
	if (!(flags & NCA_BLOCK_UNNAMED)) {
		*p++ = "--cache-block-pages";
		*p++ = "4";
	}
	*p++ = "--cache-gpu-blocks";
	*p++ = a->gpu;
	*p++ = "--host-mem";
	*p++ = "2M";
	*p++ = "--nvme-path";
	*p++ = nvme;
	*p++ = "--nvme-size";
	*p++ = nt_size_arg(a->nvme_size, sizeof(a->nvme_size), nvme_slots,
			   NCA_BLOCK_BYTES);
	if (save) {
		*p++ = "--nvme-save-on-stop";
		*p++ = save;
	}
	*p = NULL;
	return a->argv;
}

/* The options above (lru, NCA_NVME_SLOTS slots, nothing saved at the
 * stop) for the tier file at nvme and gpu_blocks GPU blocks. */
static inline const char *const *nca_args(struct nca_args *a, const char *nvme,
					  unsigned int gpu_blocks,
					  unsigned int flags)
{
	return nca_build(a, "lru", nvme, gpu_blocks, NCA_NVME_SLOTS, "0",
			 flags);
}

/*
 * The options of the tests that restart on what a stop saved to the
 * tier (cache-save-on-stop and the tests like it): kvmmd's default
 * policy, a tier file of nvme_slots slots, and --nvme-save-on-stop save
 * (NULL: left out; kvmmd saves nothing then).
 */
static inline const char *const *
nca_save_args(struct nca_args *a, const char *nvme, unsigned int gpu_blocks,
	      unsigned int nvme_slots, const char *save, unsigned int flags)
{
	return nca_build(a, NULL, nvme, gpu_blocks, nvme_slots, save, flags);
}

/* The valid slot headers (the magic) in the NCA_NVME_SLOTS slots of the
 * tier file at path, read from the disk. */
static inline int nca_headers(const char *path)
{
	struct tier_nvme_slot_header h;
	int n = 0, fd = open(path, O_RDONLY | O_CLOEXEC);

	t_assert(fd >= 0);
	for (int i = 0; i < NCA_NVME_SLOTS; i++) {
		off_t off = (off_t)NT_SLOT_OFFSET(i, NCA_BLOCK_BYTES);

		t_assert_eq(pread(fd, &h, sizeof(h), off), (ssize_t)sizeof(h));
		n += h.magic == TIER_NVME_SLOT_MAGIC;
	}
	close(fd);
	return n;
}

#endif
