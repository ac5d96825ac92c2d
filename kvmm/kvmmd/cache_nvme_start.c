// SPDX-License-Identifier: MIT
/*
 * An NVMe tier that stops kvmmd's start: with which exit code, and what
 * becomes of the file.
 *
 * The start claims --nvme-path (kd_cache_init(): opened, made if missing,
 * locked, checked) and, with --cache-block-pages, opens the tier for each
 * named size (kc_open()).  What fails there and is not waited out
 * (cache_nvme_join.c waits for a file or file system that is not there
 * yet, a full disk) stops the start, and main() exits 2 for a value the
 * operator must change, 1 for anything else (admin.md, the rule for a
 * refused start).
 * Both were 1 until 7 December, and a start refused after the claim made
 * the file left it behind, preallocated to --nvme-size: the next start
 * found a file nobody asked for (or a full disk).
 */
#include "kvmm/kvmmd/cache_priv.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kvmm/kvmmd/tier_nvme.h"

/*
 * A failure of the NVMe tier at start that only the operator mends, by
 * changing --nvme-path, --nvme-size or the sizes' weights: a size or
 * partition that holds no slot (-EINVAL, also a path that names neither
 * a file nor a block device), a file system without O_DIRECT
 * (-EOPNOTSUPP), a file that is no kvmm tier (-ENOTEMPTY), a path that can
 * name no file.  Not another kvmmd's lock (-EBUSY: it passes when that
 * kvmmd stops), an I/O error, a full disk or a shortage of memory: a
 * later start, unchanged, may work.
 */
bool kc_nvme_start_refusal(int err)
{
	switch (err) {
	case -EINVAL:
	case -EOPNOTSUPP: /* ENOTSUP */
	case -ENOTEMPTY:
	case -ENOTDIR:
	case -EISDIR:
	case -ELOOP:
	case -ENAMETOOLONG:
		return true;
	}
	return false;
}

/*
 * A full disk when the tier's open grows the file (--cache-block-pages:
 * the open runs at start) or a quota: the claim waits them out
 * (cache_nvme_join.c), and so does the open, rather than stop the start
 * with exit 1 (until 7 December) when the same disk at the claim, or at
 * the first publish without named sizes, let kvmmd start and the tier
 * join later.  A full disk may clear (logs rotated, another file
 * deleted); an I/O error or io_uring's refusal still stops the start.
 */
bool kc_nvme_start_waits(int err)
{
	return err == -ENOSPC || err == -EDQUOT;
}

/*
 * Take away the NVMe file a claim of this run made (never one that was
 * there, nor a block device), while the claim's fd still holds the lock,
 * and only if the path still names that file; a symbolic link on the way
 * stays (tier_nvme_unmake()).  why: the line's words.
 */
static void kc_unmake_nvme(struct kd_daemon *d, const char *why)
{
	struct kd_cache *c = d->cache;
	int r;

	if (!c || !c->nvme_made || c->nvme_fd < 0)
		return;
	c->nvme_made = false;
	r = tier_nvme_unmake(c->nvme_fd, d->cfg.nvme_path);
	if (r == -ESTALE || r == -ENOENT)
		return; /* the path names another file now, or none */
	if (r) {
		vmm_log(VMM_LOG_WARN,
			"cache: %s, but the NVMe file it made stays: unlink %s: %s",
			why, d->cfg.nvme_path, strerror(-r));
		return;
	}
	vmm_log(VMM_LOG_INFO, "cache: %s: removed %s, which it made", why,
		d->cfg.nvme_path);
}

/* The start is refused: the file its claim made goes, even once the tier
 * grew and formatted it: it holds no block anyone cached. */
void kd_cache_unmake_nvme(struct kd_daemon *d)
{
	kc_unmake_nvme(d, "the start is refused");
}

/*
 * A normal stop, before the tiers close (the claim's fd holds the lock):
 * the file a claim of this run made goes when no tier was ever written
 * into it (no kvmm superblock at its start: no block size came, the
 * tier's open failed, or it waited for a full disk), as a refused start's
 * does.  Until 7 December it stayed, empty, whenever no block size was
 * named and no client published (the next start without --nvme-size then
 * refused the empty file), while with named sizes the tier was written
 * at start.  A file with a superblock keeps the blocks for the next start;
 * a file that was there is never touched.
 */
void kd_cache_stop_nvme(struct kd_daemon *d)
{
	struct tier_nvme_peek pk;

	if (!d->cache || !d->cache->nvme_made || d->cache->nvme_fd < 0 ||
	    tier_nvme_peek_fd(d->cache->nvme_fd, &pk) != -ENODATA)
		return;
	kc_unmake_nvme(d, "no NVMe tier was written this run");
}

/*
 * With several sizes named, each opens its partition of the file in turn
 * at start, and the first formats its partition when the blocks there
 * have another size: a later partition that held no slot refused the
 * start after a file that was there had changed.  Every partition is
 * checked for a slot first (tier_nvme_check_size() writes nothing).
 */
int kc_nvme_check_at_start(struct kd_daemon *d)
{
	const struct kd_config *cfg = &d->cfg;
	int r;

	if (!cfg->cache_block_pages || cfg->nr_cache_block_sizes < 2 ||
	    kc_nvme_fd(d->cache) < 0)
		return 0;
	for (uint32_t i = 0; i < d->nr_caches; i++) {
		struct kd_cache *c = d->caches[i];
		struct tier_nvme_config nc = {
			.size = sizeof(nc),
			.path = cfg->nvme_path,
			.capacity_bytes = cfg->nvme_size,
			.payload_bytes = (uint64_t)c->named_ppb * d->page_size,
			.fd_held = true,
			.fd = kc_nvme_fd(c),
		};

		/* kc_open() opens the tier only over a host tier */
		if (!kc_has_nvme(c) || c->host_budget < nc.payload_bytes)
			continue;
		kc_nvme_partition(c, &nc);
		r = tier_nvme_check_size(&nc);
		if (!r)
			continue;
		vmm_log(VMM_LOG_ERR,
			"cache: the NVMe tier %s (a partition; the line before names it) cannot open at start: %s; kvmmd does not start",
			cfg->nvme_path, strerror(-r));
		if (kc_nvme_start_refusal(r))
			d->bad_option = true;
		return r;
	}
	return 0;
}
