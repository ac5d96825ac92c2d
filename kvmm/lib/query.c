// SPDX-License-Identifier: MIT
/*
 * libkvmm's questions to the cache that change nothing: PREFIX_QUERY
 * (where a chain's leading blocks are, ABI 1.19) and TIER_STATS (the
 * daemon's cache counters, every block size summed or, from ABI 1.21,
 * one size's).  Both are one socket round trip; neither
 * maps or opens anything.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kvmm/lib/client.h"

/* A daemon that says 1.18 or older has no PREFIX_QUERY: it would answer
 * -ENOTTY.  Say -EOPNOTSUPP without asking, as for the other additions
 * (a daemon too old, not the caller's mistake). */
static bool query_supported(const struct kvmm_conn *c)
{
	return c->hello.abi_major != KVMM_ABI_MAJOR || c->hello.abi_minor >= 19;
}

int kvmm_prefix_query(struct kvmm_region *r, const uint64_t *hashes,
		      uint32_t nr_hashes, uint8_t *tiers, uint32_t flags)
{
	struct kvmm_prefix_query pq = { .size = sizeof(pq) };
	const struct kvmm_prefix_query_reply *rep;
	char *req = NULL, *buf = NULL;
	size_t rlen, len = 0;
	int err;

	if (!r || !hashes || !nr_hashes || nr_hashes > KVMM_PREFIX_MAX_BLOCKS ||
	    flags)
		return -EINVAL;
	if (!query_supported(r->conn))
		return -EOPNOTSUPP;
	rlen = sizeof(pq) + (size_t)nr_hashes * sizeof(uint64_t);
	req = malloc(rlen);
	buf = malloc(sizeof(*rep) + KVMM_PREFIX_MAX_BLOCKS);
	err = -ENOMEM;
	if (!req || !buf)
		goto out;
	pq.region_id = r->id;
	pq.nr_hashes = nr_hashes;
	memcpy(req, &pq, sizeof(pq));
	memcpy(req + sizeof(pq), hashes, nr_hashes * sizeof(uint64_t));
	err = kc_request(r->conn, KVMM_CMD_PREFIX_QUERY, req, rlen, buf,
			 sizeof(*rep) + KVMM_PREFIX_MAX_BLOCKS, &len);
	if (err == -ENOTTY)
		err = -EOPNOTSUPP; /* a 1.19 daemon of before the query */
	if (err)
		goto out;
	rep = (const struct kvmm_prefix_query_reply *)buf;
	err = -EPROTO;
	if (len < sizeof(*rep) || rep->nr_blocks > nr_hashes ||
	    len < sizeof(*rep) + rep->nr_blocks ||
	    rep->gpu + rep->host + rep->nvme + rep->moving != rep->nr_blocks)
		goto out;
	for (uint32_t i = 0; i < rep->nr_blocks; i++)
		if (((const uint8_t *)buf)[sizeof(*rep) + i] >
		    KVMM_QUERY_MOVING)
			goto out;
	if (tiers)
		memcpy(tiers, buf + sizeof(*rep), rep->nr_blocks);
	err = (int)rep->nr_blocks;
out:
	free(req);
	free(buf);
	return err;
}

const char *kvmm_query_tier_string(uint8_t tier)
{
	switch (tier) {
	case KVMM_QUERY_GPU:
		return "gpu";
	case KVMM_QUERY_HOST:
		return "host";
	case KVMM_QUERY_NVME:
		return "nvme";
	case KVMM_QUERY_MOVING:
		return "moving";
	default:
		return "unknown";
	}
}

/* A daemon before 1.21 answers TIER_STATS' request body -EINVAL. */
static bool tier_stats_size_supported(const struct kvmm_conn *c)
{
	return c->hello.abi_major != KVMM_ABI_MAJOR || c->hello.abi_minor >= 21;
}

int kvmm_tier_stats(struct kvmm_conn *c, struct kvmm_tier_stats_reply *st,
		    size_t size)
{
	return kvmm_tier_stats_size(c, 0, st, size);
}

int kvmm_tier_stats_size(struct kvmm_conn *c, uint32_t block_pages,
			 struct kvmm_tier_stats_reply *st, size_t size)
{
	struct kvmm_tier_stats_req q = { .size = sizeof(q),
					 .block_pages = block_pages };
	struct kvmm_tier_stats_reply local;
	size_t len = 0;
	int err;

	/* at least the reply of ABI 1.0-1.6 (everything up to the tiers):
	 * a size inside a field would get half of it */
	if (!c || !st ||
	    size < offsetof(struct kvmm_tier_stats_reply, prefix_holes))
		return -EINVAL;
	if (block_pages && !tier_stats_size_supported(c))
		return -EOPNOTSUPP;
	memset(&local, 0, sizeof(local));
	/* every size summed: no body, what any daemon answers */
	err = kc_request(c, KVMM_CMD_TIER_STATS, block_pages ? &q : NULL,
			 block_pages ? sizeof(q) : 0, &local, sizeof(local),
			 &len);
	if (err)
		return err;
	if (len < offsetof(struct kvmm_tier_stats_reply, prefix_holes))
		return -EPROTO;
	/* an older daemon's reply is shorter: the fields it lacks are 0,
	 * and size says where its bytes end */
	if (size > sizeof(local))
		size = sizeof(local);
	local.size = (uint32_t)(len < size ? len : size);
	memcpy(st, &local, size);
	return 0;
}
