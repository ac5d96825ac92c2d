// SPDX-License-Identifier: MIT
/*
 * NVMe tier built without liburing (HAVE_LIBURING=0): every call of
 * tier_nvme.h answers as a tier that cannot open (-ENOTSUP, a lookup
 * -ENOENT, nothing stale, no stats), so kvmmd runs without the tier and
 * says why when --nvme-path asks for one.
 */
#include "tier_nvme_priv.h"

#include "vmm/vmm.h"

#include <errno.h>
#include <string.h>

#if !HAVE_LIBURING

struct tier_nvme {
	int unused;
};

int tier_nvme_open(const struct tier_nvme_config *cfg, struct tier_nvme **out)
{
	vmm_log(VMM_LOG_ERR, "tier_nvme: built without liburing");
	return -ENOTSUP;
}

void tier_nvme_close(struct tier_nvme *t)
{
}

int tier_nvme_write_batch(struct tier_nvme *t, struct tier_nvme_io *ios,
			  unsigned int n)
{
	return -ENOTSUP;
}

int tier_nvme_invalidate_batch(struct tier_nvme *t, struct tier_nvme_io *ios,
			       unsigned int n)
{
	return -ENOTSUP;
}

int tier_nvme_restamp_batch(struct tier_nvme *t, struct tier_nvme_io *ios,
			    unsigned int n)
{
	return -ENOTSUP;
}

int tier_nvme_invalidate_claim(struct tier_nvme *t, uint32_t slot,
			       uint64_t hash)
{
	return -ENOTSUP;
}

int tier_nvme_invalidate_unclaim(struct tier_nvme *t, uint32_t slot)
{
	return -ENOTSUP;
}

int tier_nvme_sync(struct tier_nvme *t)
{
	return -ENOTSUP;
}

int tier_nvme_peek(const char *path, struct tier_nvme_peek *out)
{
	return -ENOTSUP;
}

int tier_nvme_peek_fd(int fd, struct tier_nvme_peek *out)
{
	return -ENOTSUP;
}

int tier_nvme_peek_at(int fd, uint64_t offset, struct tier_nvme_peek *out)
{
	return -ENOTSUP;
}

int tier_nvme_claim(const char *path, bool format_any, int *fd)
{
	vmm_log(VMM_LOG_ERR, "tier_nvme: built without liburing");
	return -ENOTSUP;
}

int tier_nvme_check_size(const struct tier_nvme_config *cfg)
{
	return -ENOTSUP;
}

int tier_nvme_read_batch(struct tier_nvme *t, struct tier_nvme_io *ios,
			 unsigned int n)
{
	return -ENOTSUP;
}

int tier_nvme_lookup(struct tier_nvme *t, uint64_t hash, uint32_t *slot,
		     uint64_t *length, uint64_t *layout_id)
{
	return -ENOENT;
}

int tier_nvme_reserve(struct tier_nvme *t)
{
	return -ENOSPC;
}

void tier_nvme_unreserve(struct tier_nvme *t)
{
}

uint64_t tier_nvme_next_generation(struct tier_nvme *t)
{
	return 0;
}

uint64_t tier_nvme_drop_generation(struct tier_nvme *t)
{
	return 0;
}

int tier_nvme_mark_drop(struct tier_nvme *t, bool all, uint32_t tenant,
			uint64_t generation)
{
	return -ENOTSUP;
}

int tier_nvme_free(struct tier_nvme *t, uint32_t slot)
{
	return -ENOTSUP;
}

int tier_nvme_free_tenant(struct tier_nvme *t, uint32_t slot, uint32_t tenant)
{
	return -ENOTSUP;
}

int tier_nvme_stale_claim(struct tier_nvme *t,
			  bool (*match)(void *arg, uint64_t hash,
					uint32_t tenant),
			  void *arg, struct tier_nvme_stale **out, uint32_t *n,
			  uint32_t *left)
{
	*out = NULL;
	*n = 0;
	*left = 0;
	return 0;
}

enum tier_slot_state tier_nvme_slot_state(struct tier_nvme *t, uint32_t slot)
{
	return TIER_SLOT_FREE;
}

uint64_t tier_nvme_slot_generation(struct tier_nvme *t, uint32_t slot)
{
	return 0;
}

int tier_nvme_foreach(struct tier_nvme *t,
		      int (*fn)(void *arg, uint32_t slot, uint64_t hash,
				uint64_t length, uint64_t layout_id,
				uint32_t tenant),
		      void *arg)
{
	return 0;
}

uint64_t tier_nvme_slot_offset(struct tier_nvme *t, uint32_t slot)
{
	return 0;
}

void tier_nvme_get_stats(struct tier_nvme *t, struct tier_nvme_stats *st)
{
	memset(st, 0, sizeof(*st));
}

#endif /* !HAVE_LIBURING */
