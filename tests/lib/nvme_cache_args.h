/* SPDX-License-Identifier: MIT */
/*
 * kvmmd's options for the small three-tier cache the NVMe cache tests
 * run: lru, blocks of 4 pages of 64 KiB, a few GPU blocks, 2 MiB of host
 * memory (8 slots, 6 for the policy), an NVMe tier file of 1867776 bytes
 * (7 slots, 6 for the policy) and nothing saved at the stop, so what a
 * restart on the same file recovers is what the tier held then.
 */
#ifndef KVMM_TESTS_NVME_CACHE_ARGS_H
#define KVMM_TESTS_NVME_CACHE_ARGS_H

#include <stdio.h>

/* The tier file's size: a 4 KiB header and 7 slots of a 4 KiB header and
 * a 256 KiB block. */
#define NCA_NVME_SIZE "1867776"

enum {
	/* --socket-mode 0666: clients of other uids reach the socket */
	NCA_ANY_UID = 1 << 0,
	/* no --cache-block-pages: the first region sets the tiers up */
	NCA_BLOCK_UNNAMED = 1 << 1,
};

struct nca_args {
	const char *argv[20];
	char gpu[16];
};

/* The options, NULL-terminated in a->argv (td_start()'s extra), for the
 * tier file at nvme and gpu_blocks GPU blocks. */
static inline const char *const *nca_args(struct nca_args *a, const char *nvme,
					  unsigned int gpu_blocks,
					  unsigned int flags)
{
	const char **p = a->argv;

	snprintf(a->gpu, sizeof(a->gpu), "%u", gpu_blocks);
	if (flags & NCA_ANY_UID) {
		*p++ = "--socket-mode";
		*p++ = "0666";
	}
	*p++ = "--cache-policy";
	*p++ = "lru";
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
	*p++ = NCA_NVME_SIZE;
	*p++ = "--nvme-save-on-stop";
	*p++ = "0";
	*p = NULL;
	return a->argv;
}

#endif
