// SPDX-License-Identifier: MIT
/*
 * PREFIX_QUERY (ABI 1.19): where the leading blocks of a chain are, for a
 * client that routes or schedules requests by what is cached and must not
 * change it by asking.  The walk is a prefix open's first look
 * (kc_prefix_tiers() without segments) and touches nothing but the index:
 * no policy call (an access would reorder what the policy evicts), no
 * restore, no pin, no TIER_STATS or telemetry count (ADMIN_STATUS counts
 * the queries, ABI 1.20), no kc_open() (a
 * query before the cache's first use does not set its block size).  The
 * hashes arrive renamed as a PREFIX_OPEN's are (salt, scope: scope.c).
 */
#include "kvmm/kvmmd/cache_priv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Whether e's bytes are being copied, or wait to be, between tiers: an
 * open of it would wait for the move. */
static bool kc_query_moving(struct kd_cache *c, struct kc_entry *e)
{
	return e->job || e->rblk || kd_fifo_linked(&c->slotq, &e->slotq) ||
	       kd_fifo_linked(&c->nvmeq, &e->nvmeq) ||
	       kd_fifo_linked(&c->staging, &e->staging);
}

/* The tiers of the leading cached blocks of hashes[0..n) into tiers[];
 * returns how many.  The reply's counts go into rep. */
static uint32_t kc_query_walk(struct kd_cache *c, const uint64_t *hashes,
			      uint32_t n, uint8_t *tiers,
			      struct kvmm_prefix_query_reply *rep)
{
	uint32_t i;

	for (i = 0; i < n; i++) {
		struct kc_entry *e = kc_find(c, hashes[i]);

		if (!e || e->dead || e->drop_after)
			break;
		if (kc_query_moving(c, e)) {
			tiers[i] = KVMM_QUERY_MOVING;
			rep->moving++;
		} else if (e->tier == POL_TIER_GPU) {
			tiers[i] = KVMM_QUERY_GPU;
			rep->gpu++;
		} else if (e->tier == POL_TIER_HOST) {
			tiers[i] = KVMM_QUERY_HOST;
			rep->host++;
		} else if (e->tier == POL_TIER_NVME) {
			tiers[i] = KVMM_QUERY_NVME;
			rep->nvme++;
		} else {
			break; /* in no tier: the open would stop here too */
		}
	}
	return i;
}

int kd_cache_prefix_query(struct kd_session *s, const struct kvmm_msg_hdr *h,
			  const void *p, size_t len)
{
	struct kd_cache *c;
	struct kvmm_prefix_query_reply rep = { .size = sizeof(rep) };
	struct kvmm_prefix_query pq;
	uint64_t *hashes = NULL;
	struct kd_region *r;
	uint8_t *out = NULL;
	size_t out_len;
	uint32_t n;
	int err;

	err = kc_copy_var(&pq, sizeof(pq), p, len,
			  offsetof(struct kvmm_prefix_query, nr_hashes),
			  &hashes, &n);
	if (err)
		return err;
	err = -EINVAL;
	if (pq.flags || !kw_all_zero(pq.reserved, sizeof(pq.reserved)))
		goto out;
	err = kd_region_lookup(s, pq.region_id, &r);
	if (err)
		goto out;
	n = kc_prefix_bound(r, n); /* the bounds of a prefix open */
	/* the cache of the region's block size, opened at its first use */
	c = kc_of_region(s->d, r);
	if (!c)
		n = 0;
	err = -ENOMEM;
	out = calloc(1, sizeof(rep) + n + 4);
	if (!out)
		goto out;
	rep.nr_blocks = kc_query_walk(c, hashes, n, out + sizeof(rep), &rep);
	out_len = sizeof(rep) + ((rep.nr_blocks + 3u) & ~3u);
	memcpy(out, &rep, sizeof(rep));
	kd_session_reply(s, h, 0, out, out_len, NULL, 0);
	/* ADMIN_STATUS's (ABI 1.20), not TIER_STATS's: a query is no use of
	 * the cache, but an operator sees the routers asking */
	s->d->ctr.prefix_queries++;
	s->d->ctr.prefix_query_hashes += pq.nr_hashes;
	s->d->ctr.prefix_query_found[KVMM_QUERY_GPU] += rep.gpu;
	s->d->ctr.prefix_query_found[KVMM_QUERY_HOST] += rep.host;
	s->d->ctr.prefix_query_found[KVMM_QUERY_NVME] += rep.nvme;
	s->d->ctr.prefix_query_found[KVMM_QUERY_MOVING] += rep.moving;
	err = 0;
out:
	free(out);
	free(hashes);
	return err;
}
