// SPDX-License-Identifier: MIT
/*
 * NVMe tier: opening and closing.  Open sizes the file (or measures the
 * block device), switches it to O_DIRECT, cuts it into slots, sets up the
 * ring and registers the header buffers and the caller's payload region
 * as fixed buffers, then lets tier_nvme_keep.c either recover the slots
 * of a matching superblock or format.  The rest lives in
 * tier_nvme_claim.c (the file claimed at start: locked, O_DIRECT, its
 * contents checked), tier_nvme_format.c (on-disk format),
 * tier_nvme_slots.c (slot metadata and lookups), tier_nvme_io.c (the
 * batch engine), tier_nvme_batch.c (the batch calls),
 * tier_nvme_recover.c (restart scan) and tier_nvme_stubs.c (a build
 * without liburing); tier_nvme_priv.h says who owns what.
 */
#include "tier_nvme_priv.h"
#include "test_knob.h"

#include "vmm/vmm.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if HAVE_LIBURING

/*
 * The tier's size: --nvme-size, else a block device whole and a file at
 * its own size (a tier a run before made; an empty one has none).  A file
 * grows only once open has found a slot in the size (grow_file()), so a
 * size that holds none leaves the file as it was; one that shrinks is
 * cut only once open has counted the blocks past its new end (*trim), so
 * that the line can say what was lost.
 */
static int size_file(struct tier_nvme *t, const struct tier_nvme_config *cfg,
		     uint64_t *bytes, bool *trim)
{
	struct stat st;

	if (fstat(t->fd, &st))
		return -errno;
	if (S_ISBLK(st.st_mode)) {
		uint64_t dev;

		if (ioctl(t->fd, BLKGETSIZE64, &dev))
			return -errno;
		*bytes = cfg->capacity_bytes && cfg->capacity_bytes < dev ?
				 cfg->capacity_bytes :
				 dev;
		return 0;
	}
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	if (!cfg->capacity_bytes && !st.st_size)
		return -EINVAL;
	*bytes = cfg->capacity_bytes ? cfg->capacity_bytes :
				       (uint64_t)st.st_size;
	*trim = (uint64_t)st.st_size > *bytes;
	return 0;
}

/*
 * Preallocate a file smaller than the tier's size (a device has its own).
 * A preallocation that fails (a full disk) may have grown the file part
 * of the way (ext4 and xfs keep what they allocated): it is cut back to
 * the size it had, so that a failed open leaves a file that was there as
 * it was, and a new one empty, whether the start stops or waits.
 */
static int grow_file(struct tier_nvme *t, const char *path, uint64_t bytes)
{
	struct stat st;
	int r;

	if (fstat(t->fd, &st))
		return -errno;
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size >= bytes)
		return 0;
	r = posix_fallocate(t->fd, 0, (off_t)bytes);
	if (r == EOPNOTSUPP || r == EINVAL)
		return ftruncate(t->fd, (off_t)bytes) ? -errno : 0;
	if (r && ftruncate(t->fd, st.st_size))
		vmm_log(VMM_LOG_WARN,
			"tier_nvme: cutting %s back to its %lld bytes after a failed preallocation: %s",
			path, (long long)st.st_size, strerror(errno));
	return -r;
}

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25 /* Linux 6.1 */
#endif
#define NVME_HUGE (2ull << 20)

/*
 * Back the caller's region with 2 MiB pages where the kernel can, before
 * registering it (registration pins the pages: khugepaged cannot collapse
 * them afterwards).  A block's I/O into 4 KiB pages scattered in physical
 * memory is one DMA segment per page, 65 for a 256 KiB payload and its
 * header, and a virtio disk without indirect descriptors spends a ring
 * descriptor on each: its 256-entry ring then holds 3 such reads at once
 * whatever the queue depth, the other I/Os wait in the I/O scheduler
 * (where neighbours merge into bigger requests, which hold even fewer).
 * In huge pages a block is 1-2 segments and the whole depth reaches the
 * disk.  Best effort: the memory stays as it is where the kernel has no
 * huge page to give (or predates MADV_COLLAPSE); reg_huge_bytes says how
 * much was collapsed.  The contents do not change.
 */
static void region_huge_pages(struct tier_nvme *t)
{
	uintptr_t a = ((uintptr_t)t->reg_base + NVME_HUGE - 1) &
		      ~(uintptr_t)(NVME_HUGE - 1);
	uintptr_t end = ((uintptr_t)t->reg_base + t->reg_len) &
			~(uintptr_t)(NVME_HUGE - 1);

	if (!t->reg_base || end <= a)
		return;
	/* later faults of this range (none for a touched slab) and
	 * khugepaged get huge pages too; MADV_COLLAPSE works without it */
	(void)madvise((void *)a, end - a, MADV_HUGEPAGE);
	for (; a < end; a += NVME_HUGE) {
		/* per 2 MiB, so that one page the kernel cannot give does
		 * not stop the rest, and the count is exact */
		if (madvise((void *)a, NVME_HUGE, MADV_COLLAPSE) == 0)
			t->st.reg_huge_bytes += NVME_HUGE;
		else if (errno == EINVAL)
			break; /* kernel without MADV_COLLAPSE */
	}
	if (t->st.reg_huge_bytes < t->reg_len / 2)
		vmm_log(VMM_LOG_INFO,
			"tier_nvme: %llu of %zu registered bytes in huge pages; NVMe I/O into the rest needs a DMA segment per 4 KiB page",
			(unsigned long long)t->st.reg_huge_bytes, t->reg_len);
}

static int register_buffers(struct tier_nvme *t)
{
	unsigned int nreg = 1;
	struct iovec *iov;
	int r;

	if (t->reg_base)
		nreg += (unsigned int)((t->reg_len + NVME_REG_CHUNK - 1) /
				       NVME_REG_CHUNK);
	iov = calloc(nreg, sizeof(*iov));
	if (!iov)
		return -ENOMEM;
	iov[0].iov_base = t->hdr_bufs;
	iov[0].iov_len = (size_t)t->qd * NVME_ALIGN;
	for (unsigned int i = 1; i < nreg; i++) {
		size_t off = (size_t)(i - 1) * NVME_REG_CHUNK;
		size_t len = t->reg_len - off;

		iov[i].iov_base = t->reg_base + off;
		iov[i].iov_len = len < NVME_REG_CHUNK ? len : NVME_REG_CHUNK;
	}
	r = io_uring_register_buffers(&t->ring, iov, nreg);
	free(iov);
	if (r) {
		vmm_log(VMM_LOG_WARN,
			"tier_nvme: registering buffers failed (%s; RLIMIT_MEMLOCK?); using unregistered I/O",
			strerror(-r));
		return r;
	}
	t->registered = true;
	return 0;
}

/*
 * The header buffers go back, unless I/Os the kernel took may still
 * write them (hdr_bufs_busy: a ring failure or a failed restart scan
 * that could not wait for them): closing the ring does not wait for its
 * requests, and memory malloc hands out again would take their bytes.
 * Then they stay allocated, qd * 4 KiB, with a line saying so.
 */
static void free_hdr_bufs(struct tier_nvme *t)
{
	if (t->hdr_bufs_busy) {
		vmm_log(VMM_LOG_WARN,
			"tier_nvme: leaving %zu bytes of header buffers allocated: I/Os the failed ring took may still write them",
			(size_t)t->qd * NVME_ALIGN);
		return;
	}
	free(t->hdr_bufs);
}

/*
 * The last of a tier, closed or failing to open (its ring, file and
 * header buffers gone already): its slots, its locks and itself.  One
 * place, so a lock or table the tier gains is freed on both ways out.
 */
static void free_tier(struct tier_nvme *t)
{
	nvme_slots_fini(t);
	pthread_cond_destroy(&t->io_wake);
	pthread_cond_destroy(&t->slot_cond);
	pthread_mutex_destroy(&t->sb_lock);
	pthread_mutex_destroy(&t->io_lock);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

/* Tests only: KVMMD_TEST_NVME_INVALIDATE_DELAY_MS holds every invalidation
 * batch back this long, so that a test can stop kvmmd (SIGKILL) while a
 * drop's header writes wait (tests/cache-drop-mark-crash.c). */
static void test_invalidate_delay(struct tier_nvme *t)
{
	t->invalidate_delay_us =
		kd_test_delay_us("KVMMD_TEST_NVME_INVALIDATE_DELAY_MS",
				 "tier_nvme", "invalidations");
	/* the same for the header writes of the blocks a drop kept: a
	 * crash after the drop's mark, before them
	 * (tests/cache-drop-kept-nvme.c) */
	t->restamp_delay_us =
		kd_test_delay_us("KVMMD_TEST_NVME_RESTAMP_DELAY_MS",
				 "tier_nvme", "kept blocks' header writes");
}

/*
 * The slots of t's partition of a file of bytes (t's stride and partition
 * set), or -EINVAL with its line for none or more than the tier counts:
 * a setting, not a full disk, which no wait mends (-ENOSPC until 1.15,
 * which the cache now waits out).
 */
static int count_slots(struct tier_nvme *t, const char *path, const char *part,
		       uint64_t bytes, uint64_t *nslots)
{
	char share[256];

	nvme_cut_partition(t, bytes);
	*nslots = t->part_bytes > NVME_DATA_OFFSET ?
			  (t->part_bytes - NVME_DATA_OFFSET) / t->stride :
			  0;
	if (*nslots == 0) {
		nvme_part_share_text(t, bytes, share, sizeof(share));
		vmm_log(VMM_LOG_ERR,
			"tier_nvme: %s%s: %llu bytes hold no slot of %llu bytes%s",
			path, part, (unsigned long long)t->part_bytes,
			(unsigned long long)t->stride, share);
		return -EINVAL;
	}
	if (*nslots >= NVME_NONE) {
		vmm_log(VMM_LOG_ERR,
			"tier_nvme: %s%s: %llu bytes hold %llu slots of %llu bytes, more than the tier counts (at most %u)",
			path, part, (unsigned long long)t->part_bytes,
			(unsigned long long)*nslots,
			(unsigned long long)t->stride, NVME_NONE - 1);
		return -EINVAL;
	}
	return 0;
}

/* A partition of several names an index among them and weights the
 * tier can pack (tier_nvme_part.c). */
static bool partition_valid(const struct tier_nvme_config *cfg)
{
	return cfg->part_count <= 1 ||
	       (cfg->part_index < cfg->part_count &&
		tier_nvme_weights_pack(cfg->part_weights, cfg->part_count) !=
			UINT64_MAX);
}

/* t's partition from cfg (partition_valid()), and its name for every
 * line that names the file in part ("" for a file of one). */
static void set_partition(struct tier_nvme *t,
			  const struct tier_nvme_config *cfg, char *part,
			  size_t len)
{
	if (cfg->part_count <= 1)
		return;
	t->part_count = cfg->part_count;
	t->part_index = cfg->part_index;
	t->part_weights =
		tier_nvme_weights_pack(cfg->part_weights, cfg->part_count);
	snprintf(part, len, " (partition %u of %u)", t->part_index,
		 t->part_count);
}

/*
 * tier_nvme_open()'s size checks alone, on the claimed fd, writing
 * nothing: kvmmd's start checks every named size's partition before it
 * opens the first, which formats its partition when the file's blocks
 * there have another size; a later partition that holds no slot then
 * refused the start after the file had changed.
 */
int tier_nvme_check_size(const struct tier_nvme_config *cfg)
{
	struct tier_nvme *t;
	uint64_t bytes = 0, nslots;
	bool trim;
	char part[64] = "";
	int r;

	if (!cfg || cfg->size < sizeof(*cfg) || !cfg->path || !cfg->fd_held ||
	    !cfg->payload_bytes || cfg->payload_bytes % NVME_ALIGN)
		return -EINVAL;
	if (!partition_valid(cfg))
		return -EINVAL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->fd = cfg->fd;
	t->stride = TIER_NVME_HEADER_BYTES + cfg->payload_bytes;
	set_partition(t, cfg, part, sizeof(part));
	r = size_file(t, cfg, &bytes, &trim);
	if (!r)
		r = count_slots(t, cfg->path, part, bytes, &nslots);
	free(t);
	return r;
}

int tier_nvme_open(const struct tier_nvme_config *cfg, struct tier_nvme **out)
{
	struct tier_nvme *t;
	uint64_t bytes = 0, nslots;
	bool trim = false;
	char part[64] = "";
	int r;

	if (!cfg || cfg->size < sizeof(*cfg) || !cfg->path ||
	    !cfg->payload_bytes || cfg->payload_bytes % NVME_ALIGN)
		return -EINVAL;
	if (!partition_valid(cfg))
		return -EINVAL;
	if (cfg->reg_base && ((uintptr_t)cfg->reg_base % NVME_ALIGN))
		return -EINVAL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	pthread_mutex_init(&t->lock, NULL);
	pthread_mutex_init(&t->io_lock, NULL);
	pthread_mutex_init(&t->sb_lock, NULL);
	pthread_cond_init(&t->io_wake, NULL);
	pthread_cond_init(&t->slot_cond, NULL);
	t->qd = cfg->queue_depth ? cfg->queue_depth : 8;
	if (t->qd > 1024)
		t->qd = 1024;
	t->io_bytes = cfg->io_bytes ? cfg->io_bytes : (1u << 20);
	t->io_bytes = (t->io_bytes + NVME_ALIGN - 1) / NVME_ALIGN * NVME_ALIGN;
	if (t->io_bytes > (64u << 20))
		t->io_bytes = 64u << 20;
	t->payload_bytes = cfg->payload_bytes;
	t->scope = cfg->scope;
	memcpy(t->scope_key, cfg->scope_key, sizeof(t->scope_key));
	t->stride = TIER_NVME_HEADER_BYTES + cfg->payload_bytes;
	t->reg_base = cfg->reg_base;
	t->reg_len = cfg->reg_len;
	set_partition(t, cfg, part, sizeof(part));
	test_invalidate_delay(t);
	/* tests: failures of the restart scan (tier_nvme_fault.c) */
	r = nvme_faults_read(t, cfg->path, part);
	if (r)
		goto err_free;

	if (cfg->fd_held) {
		t->fd = cfg->fd;
		t->fd_held = true;
	} else {
		t->fd = open(cfg->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (t->fd < 0) {
			r = -errno;
			vmm_log(VMM_LOG_ERR, "tier_nvme: open %s: %s",
				cfg->path, strerror(-r));
			goto err_free;
		}
		r = nvme_lock_file(t->fd, cfg->path);
		if (r)
			goto err_close;
	}
	r = nvme_enable_direct(t->fd, cfg->path);
	if (r)
		goto err_close;
	r = size_file(t, cfg, &bytes, &trim);
	if (r) {
		vmm_log(VMM_LOG_ERR, "tier_nvme: sizing %s: %s", cfg->path,
			strerror(-r));
		goto err_close;
	}
	r = count_slots(t, cfg->path, part, bytes, &nslots);
	if (r)
		goto err_close;
	r = grow_file(t, cfg->path, bytes);
	if (r) {
		vmm_log(VMM_LOG_ERR, "tier_nvme: sizing %s: %s", cfg->path,
			strerror(-r));
		goto err_close;
	}
	r = nvme_slots_init(t, (uint32_t)nslots);
	if (r)
		goto err_close;
	if (posix_memalign((void **)&t->hdr_bufs, NVME_ALIGN,
			   (size_t)t->qd * NVME_ALIGN)) {
		r = -ENOMEM;
		goto err_close;
	}
	memset(t->hdr_bufs, 0, (size_t)t->qd * NVME_ALIGN);
	r = nvme_engine_init(t);
	if (r)
		goto err_close;
	r = io_uring_queue_init(2 * t->qd, &t->ring, 0);
	if (r) {
		vmm_log(VMM_LOG_ERR, "tier_nvme: io_uring_queue_init: %s",
			strerror(-r));
		goto err_close;
	}
	region_huge_pages(t);
	(void)register_buffers(t);
	/* as fio's registerfiles: no file reference taken per I/O */
	t->fixed_file = io_uring_register_files(&t->ring, &t->fd, 1) == 0;

	t->st.slot_bytes = t->stride;
	t->st.payload_bytes = t->payload_bytes;
	t->st.capacity_slots = t->nslots;
	t->st.capacity_bytes = (uint64_t)t->nslots * t->stride;
	t->st.registered_buffers = t->registered;

	/* keep the file's blocks, or format it (tier_nvme_keep.c) */
	t->pending = cfg->pending_drop;
	r = nvme_open_superblock(t, cfg, part);
	t->pending = NULL;
	if (r)
		goto err_ring;
	/* the blocks past the new end counted (nvme_open_superblock()):
	 * now the file may lose its tail */
	if (trim && ftruncate(t->fd, (off_t)bytes)) {
		r = -errno;
		vmm_log(VMM_LOG_ERR, "tier_nvme: sizing %s: %s", cfg->path,
			strerror(-r));
		goto err_ring;
	}
	r = nvme_engine_start(t);
	if (r) {
		vmm_log(VMM_LOG_ERR, "tier_nvme: completion thread: %s",
			strerror(-r));
		goto err_ring;
	}
	*out = t;
	return 0;

err_ring:
	io_uring_queue_exit(&t->ring);
err_close:
	if (!t->fd_held)
		close(t->fd);
err_free:
	free_hdr_bufs(t);
	nvme_engine_fini(t);
	free_tier(t);
	return r;
}

int tier_nvme_sync(struct tier_nvme *t)
{
	return fdatasync(t->fd) ? -errno : 0;
}

void tier_nvme_close(struct tier_nvme *t)
{
	if (!t)
		return;
	nvme_engine_fini(t); /* stops the completion thread first */
	io_uring_queue_exit(&t->ring);
	if (!t->fd_held)
		close(t->fd);
	free_hdr_bufs(t);
	free_tier(t);
}

#endif /* HAVE_LIBURING */
