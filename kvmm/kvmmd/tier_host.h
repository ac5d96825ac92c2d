/* SPDX-License-Identifier: MIT */
/*
 * Host tier: one slab of host memory on the GPU's NUMA node, cut into
 * fixed-size slots, each holding one block (its 2L page payloads stored
 * contiguously, page i at offset i * page_size).
 *
 * Each slot is preceded by TIER_HOST_HEADROOM bytes the NVMe tier uses for
 * the slot header, so that header and payload go to disk and back in one
 * I/O straight from the slab.
 *
 * A slot goes FREE -> FILLING (tier_host_alloc: a copy into it is running,
 * nobody may read it) -> READY (tier_host_publish: the copy completed, the
 * block can be served from here) -> FREE (tier_host_free).  Keeping FILLING
 * apart from READY is what makes "a block is never readable in a tier
 * before its copy is complete" checkable: tier_host_read_addr() refuses a
 * slot that is not READY.
 *
 * The slab is allocated with numa_alloc_onnode() and first touched by a
 * thread bound to that node, so every page is placed there regardless of
 * where the daemon's threads run.  On the cuda backend the caller supplies
 * a pin hook (cuMemHostRegister through the vmm backend) so the GPU can DMA
 * into it; the host backend needs none.
 *
 * Thread-safe: slot state changes take a mutex (the daemon's loop
 * allocates and publishes, the migration worker copies into the memory).
 */
#ifndef KVMM_KVMMD_TIER_HOST_H
#define KVMM_KVMMD_TIER_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tier_host;

/* Bytes in front of every slot's payload, free for the NVMe slot header. */
#define TIER_HOST_HEADROOM 4096

enum tier_slot_state {
	TIER_SLOT_FREE = 0,
	TIER_SLOT_FILLING, /* allocated, a copy into it is in flight */
	TIER_SLOT_READY, /* holds a complete block; readable */
};

const char *tier_slot_state_string(enum tier_slot_state state);

/*
 * The slab: host memory placed on a NUMA node, touched and pinned.  It is
 * made apart from the slots so that the daemon can pay for it at start,
 * before it knows the block size (the first region to use the cache
 * names it): touching and pinning take about 0.1-0.3 s per GiB, which a
 * client's first publish would otherwise wait for with the loop held.
 */
struct tier_host_slab;

struct tier_host_slab_config {
	size_t size; /* sizeof(struct tier_host_slab_config) */
	size_t len; /* bytes; rounded up to 4 KiB */
	/* NUMA placement: node >= 0 wins; else the node of the PCI device
	 * pci_addr ("0000:3b:00.0") when given; else the node of the CPU the
	 * caller runs on (also when sysfs says -1: no affinity). */
	int numa_node;
	const char *pci_addr;
	/* Optional DMA pinning (cuMemHostRegister on the cuda backend).
	 * Without it the part of the slab the slots do not use goes back
	 * to the kernel when the tier opens. */
	int (*pin)(void *arg, void *addr, size_t len);
	int (*unpin)(void *arg, void *addr);
	void *pin_arg;
	/* Optional: called every progress_ms while the slab is touched,
	 * and before a pin of 1 GiB or more ("touching", "pinning"; bytes
	 * done of total), for the log and the service manager. */
	void (*progress)(void *arg, const char *what, uint64_t done,
			 uint64_t total);
	void *progress_arg;
	unsigned int progress_ms; /* between touch reports; 0: 1000 */
};

struct tier_host_slab_info {
	void *base;
	size_t len;
	int node; /* -1: libnuma unavailable */
	bool pinned;
	char why[64]; /* whose node: "asked for", "the GPU's, ...", ... */
};

int tier_host_slab_open(const struct tier_host_slab_config *cfg,
			struct tier_host_slab **out);
/* Unpins and frees it (a tier that took it closes it itself). */
void tier_host_slab_close(struct tier_host_slab *s);
void tier_host_slab_get_info(const struct tier_host_slab *s,
			     struct tier_host_slab_info *info);
/* Give bytes from off to the end back to the kernel (an unpinned slab
 * only; the address range stays, reads of it see zeros). */
void tier_host_slab_trim(struct tier_host_slab *s, size_t off);
/* The bytes a tier of capacity_bytes in slots of slot_bytes uses: what to
 * make the slab when the block size is known.  0 when no slot fits. */
size_t tier_host_slab_len(uint64_t capacity_bytes, size_t slot_bytes);
/* Enough for any slot size of at least min_slot_bytes (the headroom
 * per slot is what varies): the slab to make before the size is known. */
size_t tier_host_slab_len_max(uint64_t capacity_bytes, size_t min_slot_bytes);

struct tier_host_config {
	size_t size; /* sizeof(struct tier_host_config) */
	uint64_t capacity_bytes; /* --host-mem; rounded down to slots */
	size_t slot_bytes; /* one block: 2L * page size, multiple of 4 KiB */
	/* Where a slab is made here: as in tier_host_slab_config. */
	int numa_node;
	const char *pci_addr;
	int (*pin)(void *arg, void *addr, size_t len);
	int (*unpin)(void *arg, void *addr);
	void *pin_arg;
	/* A slab made beforehand (tier_host_slab_open()), at least
	 * tier_host_slab_len() long: the tier takes it when the open works
	 * (the placement and pin fields above are not used then); when the
	 * open fails the caller keeps it, to try again with or to close. */
	struct tier_host_slab *slab;
};

struct tier_host_stats {
	uint64_t slot_bytes;
	uint64_t capacity_slots;
	uint64_t capacity_bytes; /* payload bytes (headroom not counted) */
	uint64_t used_slots; /* FILLING + READY */
	uint64_t ready_slots;
	uint64_t peak_used_slots;
	uint64_t allocs;
	uint64_t alloc_failures; /* -ENOSPC: tier full */
	uint64_t frees;
	int numa_node; /* where the slab lives (-1: libnuma unavailable) */
	bool pinned;
};

int tier_host_open(const struct tier_host_config *cfg, struct tier_host **out);
/* The highest NUMA node of this machine (0 without libnuma). */
int tier_host_max_node(void);
/* Frees the slab; slots still in use are logged as leaks. */
void tier_host_close(struct tier_host *h);
/* Closes the tier but hands its slab back, to open a tier again from (a
 * set-up that failed after the tier opened, cache_open.c): the bytes the tier
 * gave back stay given back until used.  NULL for a NULL tier. */
struct tier_host_slab *tier_host_close_keep_slab(struct tier_host *h);

/* A FREE slot becomes FILLING; -ENOSPC when every slot is in use. */
int tier_host_alloc(struct tier_host *h, uint32_t *slot);
/* FILLING -> READY, tagging the slot with the block's hash and length. */
int tier_host_publish(struct tier_host *h, uint32_t slot, uint64_t hash,
		      uint64_t length);
/* Any state -> FREE (a failed copy frees a FILLING slot). */
int tier_host_free(struct tier_host *h, uint32_t slot);

/* The slot's memory, for the copy that fills it (any state but FREE). */
void *tier_host_slot_addr(struct tier_host *h, uint32_t slot);
/* The slot's memory for reading: NULL unless READY (and, when hash != 0,
 * tagged with that hash). */
const void *tier_host_read_addr(struct tier_host *h, uint32_t slot,
				uint64_t hash);
enum tier_slot_state tier_host_slot_state(struct tier_host *h, uint32_t slot);
uint64_t tier_host_slot_hash(struct tier_host *h, uint32_t slot);

/* The whole slab, headroom included (registered as io_uring fixed
 * buffers). */
void *tier_host_base(struct tier_host *h, size_t *len);
void tier_host_get_stats(struct tier_host *h, struct tier_host_stats *st);

/*
 * The NUMA node of a PCI device from sysfs
 * (/sys/bus/pci/devices/<addr>/numa_node, read under sysfs_root when it is
 * not NULL, for tests).  -1 in sysfs (no affinity) gives -ENODATA.  -ENOENT when
 * the device is unknown, -EINVAL for a malformed address.
 */
int tier_host_pci_numa_node(const char *sysfs_root, const char *pci_addr,
			    int *node);

/* Parse "64M", "2G", "4096", "1.5G" into bytes; -EINVAL when malformed. */
int tier_parse_size(const char *s, uint64_t *bytes);

#endif
