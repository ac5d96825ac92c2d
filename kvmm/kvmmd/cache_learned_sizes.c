// SPDX-License-Identifier: MIT
/*
 * --policy-state with several block sizes cached: one file, each size's
 * policy state in a section tagged with its pages a block, so that a
 * restart gives each size its own learning back whatever order the sizes
 * open in (a draft model's blocks and its target's age differently).
 *
 *   "KVMMPSZ1", u32 nr, u32 0, then nr times:
 *   u32 block_pages, u32 0, u64 len, len bytes (pol_cache_learned_save()'s),
 *   padded with zeros to 8 bytes.
 *
 * A file of one size is what pol_cache_learned_save() wrote alone, as
 * before several sizes were cached: kvmmd still writes that with one size
 * (a file that older kvmmds read), and loads it into the first size.  The
 * sections' own bytes say which policy and version wrote them
 * (pol_cache_learned_load()'s -ESTALE), so the wrapper has no more than
 * the sizes and lengths to check.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kvmm/kvmmd/learned_sizes.h"

#define KC_SIZED_MAGIC "KVMMPSZ1"

struct kc_sized_hdr {
	char magic[8];
	uint32_t nr;
	uint32_t reserved;
};

struct kc_sized_sec_hdr {
	uint32_t block_pages;
	uint32_t reserved;
	uint64_t len;
};

static size_t pad8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

bool kc_learned_sized(const void *buf, size_t len)
{
	return len >= sizeof(struct kc_sized_hdr) &&
	       !memcmp(buf, KC_SIZED_MAGIC, 8);
}

int kc_learned_parse(const void *buf, size_t len, struct kc_learned_sec *secs,
		     uint32_t max, uint32_t *nr)
{
	const char *p = buf;
	struct kc_sized_hdr h;
	size_t off = sizeof(h);

	*nr = 0;
	if (!kc_learned_sized(buf, len))
		return -EINVAL;
	memcpy(&h, p, sizeof(h));
	if (h.reserved || h.nr > max)
		return -EINVAL;
	for (uint32_t i = 0; i < h.nr; i++) {
		struct kc_sized_sec_hdr s;

		if (len - off < sizeof(s))
			return -EINVAL;
		memcpy(&s, p + off, sizeof(s));
		off += sizeof(s);
		if (s.reserved || !s.block_pages || s.len > len - off)
			return -EINVAL;
		for (uint32_t k = 0; k < i; k++)
			if (secs[k].ppb == s.block_pages)
				return -EINVAL; /* one section a size */
		secs[i].ppb = s.block_pages;
		secs[i].buf = p + off;
		secs[i].len = (size_t)s.len;
		off += (size_t)s.len;
		off = pad8(off) < len ? pad8(off) : len;
	}
	if (off != len)
		return -EINVAL;
	*nr = h.nr;
	return 0;
}

size_t kc_learned_pack(const struct kc_learned_sec *secs, uint32_t nr,
		       void *buf, size_t len)
{
	struct kc_sized_hdr h = { .nr = nr };
	size_t need = sizeof(h);
	char *p = buf;

	for (uint32_t i = 0; i < nr; i++)
		need += sizeof(struct kc_sized_sec_hdr) + pad8(secs[i].len);
	if (!buf || len < need)
		return need;
	memset(buf, 0, need);
	memcpy(h.magic, KC_SIZED_MAGIC, 8);
	memcpy(p, &h, sizeof(h));
	p += sizeof(h);
	for (uint32_t i = 0; i < nr; i++) {
		struct kc_sized_sec_hdr s = { .block_pages = secs[i].ppb,
					      .len = secs[i].len };

		memcpy(p, &s, sizeof(s));
		p += sizeof(s);
		memcpy(p, secs[i].buf, secs[i].len);
		p += pad8(secs[i].len);
	}
	return need;
}
