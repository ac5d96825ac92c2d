// SPDX-License-Identifier: MIT
/*
 * An NVMe tier that stops kvmmd's start: with which exit code, and what
 * becomes of the file.
 *
 * The start claims --nvme-path (kd_cache_init(): opened, made if missing,
 * locked, checked) and, with --cache-block-pages, opens the tier for each
 * named size (kc_open()).  What fails there and is not waited out
 * (cache_nvme_join.c waits for a file or file system that is not there
 * yet) stops the start, and main() exits 2 for a value the operator must
 * change, 1 for anything else (admin.md, the rule for a refused start).
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
 * The start is refused: take away the NVMe file its claim made (never one
 * that was there, nor a block device), while the claim's fd still holds
 * the lock, and only if the path still names that file.  The tier may
 * have grown and formatted it: it holds no block anyone cached.
 */
void kd_cache_unmake_nvme(struct kd_daemon *d)
{
	struct kd_cache *c = d->cache;
	struct stat fst, pst;

	if (!c || !c->nvme_made || c->nvme_fd < 0)
		return;
	c->nvme_made = false;
	if (fstat(c->nvme_fd, &fst) || stat(d->cfg.nvme_path, &pst) ||
	    !S_ISREG(fst.st_mode) || fst.st_dev != pst.st_dev ||
	    fst.st_ino != pst.st_ino)
		return;
	if (unlink(d->cfg.nvme_path)) {
		vmm_log(VMM_LOG_WARN,
			"cache: the start is refused, but the NVMe file it made stays: unlink %s: %s",
			d->cfg.nvme_path, strerror(errno));
		return;
	}
	vmm_log(VMM_LOG_INFO,
		"cache: the start is refused: removed %s, which it made",
		d->cfg.nvme_path);
}
