// SPDX-License-Identifier: MIT
/*
 * The sink that connects telemetry to kvmm/policy (see tel_policy.h).
 * Everything runs in the daemon's event loop from tel_poll(), the same
 * thread that owns the pol_cache, so no locking is needed.
 */
#include <string.h>

#include "ebpf/tel_policy.h"
#include "kvmm/policy/cost_model.h"
#include "kvmm/policy/policy.h"

void tel_policy_init(struct tel_policy *tp, struct pol_cache *cache,
		     struct pol_cost_model *cost, bool monotonic_clock)
{
	memset(tp, 0, sizeof(*tp));
	tp->cache = cache;
	tp->cost = cost;
	tp->monotonic_clock = monotonic_clock;
}

static void on_block(void *arg, uint64_t hash, const struct kvmm_block_stats *s)
{
	struct tel_policy *tp = arg;
	struct pol_cache *owner = tp->cache;
	struct pol_block *b = NULL;
	uint32_t count;
	bool changed = false;

	tp->blocks_seen++;
	if (owner)
		b = pol_cache_lookup(owner, hash);
	for (int i = 0; !b && i < TEL_POLICY_MORE; i++) {
		owner = tp->more[i];
		if (owner)
			b = pol_cache_lookup(owner, hash);
	}
	if (!b)
		return;
	count = s->count > UINT32_MAX ? UINT32_MAX : (uint32_t)s->count;
	if (count > b->access_count) {
		b->access_count = count;
		changed = true;
	}
	if (tp->monotonic_clock && s->last_ns > b->last_access) {
		b->last_access = s->last_ns;
		changed = true;
	}
	if (!changed)
		return;
	/* Setting the unchanged priority is the cache's re-rank hook. */
	pol_cache_set_priority(owner, hash, b->priority);
	tp->blocks_updated++;
}

static void on_latency(void *arg, const struct kvmm_hist_key *k, uint64_t count,
		       uint64_t sum_ns, uint64_t sum_bytes)
{
	struct tel_policy *tp = arg;
	unsigned int tier;

	if (!tp->cost || !count || !sum_ns || !sum_bytes)
		return;
	/* Reloads into the GPU are restores (kvmmd fires one for every
	 * *_TO_GPU migration too), so migrate rows would count them twice. */
	if (k->kind != KVMM_TEL_RESTORE)
		return;
	tier = k->tier;
	if (tier != KVMM_TEL_TIER_HOST && tier != KVMM_TEL_TIER_NVME)
		return; /* the cost model knows gpu/host/nvme reloads only */
	/* One averaged observation: the model subtracts a per-request
	 * latency, so it must see per-transfer figures. */
	pol_cost_observe_transfer(tp->cost, tier,
				  (double)sum_bytes / (double)count,
				  (double)sum_ns / 1e9 / (double)count);
	tp->transfers++;
}

static void on_event(void *arg, const struct kvmm_tel_event_rec *ev)
{
	struct tel_policy *tp = arg;
	double flops;

	if (!tp->cost || !ev->latency_ns)
		return;
	/*
	 * Only recomputations say both where they start and how many tokens
	 * they cover (bytes = tokens, seq = position), which is what the
	 * FLOP count needs; a kernel event has one token figure only.
	 */
	if (ev->kind != KVMM_TEL_RECOMPUTE)
		return;
	flops = pol_cost_flops(tp->cost, (double)ev->seq, (double)ev->bytes);
	pol_cost_observe_compute(tp->cost, flops, (double)ev->latency_ns / 1e9);
	tp->computes++;
}

void tel_policy_sink(struct tel_policy *tp, struct tel_sink *sink)
{
	memset(sink, 0, sizeof(*sink));
	sink->block = on_block;
	sink->latency = on_latency;
	sink->event = on_event;
	sink->arg = tp;
}
