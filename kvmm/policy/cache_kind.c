/* SPDX-License-Identifier: MIT */
/*
 * The tiered cache's policy kinds: their names, their pol_ops, and the
 * state a kind's GPU instance has learned, saved with a checked header
 * and loaded back (pol_cache_learned_save(), _load(), pol_learned_describe()).
 * Apart from cache.c: nothing here runs on an access.
 */
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "kvmm/policy/pol_cache_priv.h"

static const char *const kind_names[POL_KIND_COUNT] = {
	[POL_LRU] = "lru",	 [POL_LFU] = "lfu",   [POL_ARC] = "arc",
	[POL_BELADY] = "belady", [POL_ASYM] = "asym",
};

const char *pol_kind_string(enum pol_kind kind)
{
	return (unsigned)kind < POL_KIND_COUNT ? kind_names[kind] : "?";
}

int pol_kind_parse(const char *name, enum pol_kind *kind)
{
	for (int k = 0; k < POL_KIND_COUNT; k++)
		if (name && !strcmp(name, kind_names[k])) {
			*kind = (enum pol_kind)k;
			return 0;
		}
	return -EINVAL;
}

extern const struct pol_ops pol_lru_ops, pol_lfu_ops, pol_arc_ops,
	pol_belady_ops, pol_asym_ops;

const struct pol_ops *pol_ops_get(enum pol_kind kind)
{
	switch (kind) {
	case POL_LRU:
		return &pol_lru_ops;
	case POL_LFU:
		return &pol_lfu_ops;
	case POL_ARC:
		return &pol_arc_ops;
	case POL_BELADY:
		return &pol_belady_ops;
	case POL_ASYM:
		return &pol_asym_ops;
	default:
		return NULL;
	}
}

/* pol_cache_learned_save()'s header, little-endian. */
struct pol_learned_hdr {
	char magic[8]; /* "KVMMLRN1" */
	uint32_t version; /* 1 */
	uint32_t kind; /* enum pol_kind */
	uint64_t payload_bytes; /* the policy's bytes after the header */
	uint64_t checksum; /* FNV-1a 64 of those bytes */
};

static const char learned_magic[8] = "KVMMLRN1";

/* FNV-1a 64: catches a torn or damaged file, not a forged one (the file
 * is the daemon's own, like its NVMe tier). */
static uint64_t fnv1a64(const void *buf, size_t len)
{
	const unsigned char *p = buf;
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

size_t pol_cache_learned_save(struct pol_cache *c, void *buf, size_t len)
{
	struct pol_learned_hdr h = { .version = 1, .kind = c->kind };
	size_t n;

	if (!c->ops->learned_save)
		return 0;
	n = c->ops->learned_save(c->priv[POL_TIER_GPU], NULL, 0);
	if (!n || len < sizeof(h) + n)
		return n ? sizeof(h) + n : 0;
	c->ops->learned_save(c->priv[POL_TIER_GPU], (char *)buf + sizeof(h), n);
	memcpy(h.magic, learned_magic, sizeof(h.magic));
	h.version = htole32(h.version);
	h.kind = htole32(h.kind);
	h.payload_bytes = htole64(n);
	h.checksum = htole64(fnv1a64((char *)buf + sizeof(h), n));
	memcpy(buf, &h, sizeof(h));
	return sizeof(h) + n;
}

/* The header of saved bytes, checked: 0, -EINVAL, -ESTALE (version). */
static int learned_header(const void *buf, size_t len,
			  struct pol_learned_hdr *h)
{
	if (!buf || len < sizeof(*h))
		return -EINVAL;
	memcpy(h, buf, sizeof(*h));
	h->version = le32toh(h->version);
	h->kind = le32toh(h->kind);
	h->payload_bytes = le64toh(h->payload_bytes);
	h->checksum = le64toh(h->checksum);
	if (memcmp(h->magic, learned_magic, sizeof(h->magic)) ||
	    h->payload_bytes != len - sizeof(*h) ||
	    h->checksum !=
		    fnv1a64((const char *)buf + sizeof(*h), len - sizeof(*h)))
		return -EINVAL;
	return h->version != 1 ? -ESTALE : 0;
}

int pol_cache_learned_load(struct pol_cache *c, const void *buf, size_t len,
			   uint64_t *lives)
{
	struct pol_learned_hdr h;
	int e;

	if (!c->ops->learned_load)
		return -EOPNOTSUPP;
	e = learned_header(buf, len, &h);
	if (e)
		return e;
	if (h.kind != (uint32_t)c->kind)
		return -ESTALE;
	return c->ops->learned_load(c->priv[POL_TIER_GPU],
				    (const char *)buf + sizeof(h),
				    len - sizeof(h), lives);
}

int pol_learned_describe(const void *buf, size_t len,
			 struct pol_learned_summary *out)
{
	const struct pol_ops *ops;
	struct pol_learned_hdr h;
	int e = learned_header(buf, len, &h);

	if (e)
		return e;
	memset(out, 0, sizeof(*out));
	out->kind = (enum pol_kind)h.kind;
	out->version = h.version;
	out->bytes = len;
	ops = h.kind < POL_KIND_COUNT ? pol_ops_get((enum pol_kind)h.kind) :
					NULL;
	if (!ops || !ops->learned_describe)
		return -ESTALE;
	return ops->learned_describe((const char *)buf + sizeof(h),
				     len - sizeof(h), out);
}
