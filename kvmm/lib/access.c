// SPDX-License-Identifier: MIT
/*
 * The step-level access probe fired by libkvmm itself.
 *
 * Every decode or prefill step reads the whole context of each running
 * sequence, so a step is one access to each block a sequence holds.
 * libkvmm learns the content hashes of a sequence's blocks where the
 * engine hands them over anyway (kvmm_seq_open_prefix(): the cached
 * prefix; kvmm_block_publish(): blocks the engine filled) and keeps them
 * with the sequence.  kvmm_step_end() then builds one batch of
 * struct kvmm_access_rec for all open sequences with known hashes and
 * fires kvmm:access once (chunks of KVMM_TEL_MAX_ACCESS_RECORDS), also
 * writing the shared-memory fallback counters when the daemon reads those.
 * Nothing is built unless the probe's semaphore says a tracer is attached
 * or the fallback is enabled, so an untraced step pays two loads.
 *
 * A block at or past the sequence's mapped prefix (revoked, not mapped
 * again yet) is reported with tier "miss", the others with tier "gpu".
 * Blocks never published or opened by hash (private tails) are not
 * reported: they have no name the daemon's policy could use.  A block of
 * a region with a salt is reported under the salted name kvmmd gives it
 * (kvmm/kvmmd/salt.h; a report carries no region to salt it by), which
 * kvmmd then renames by the cache scope as any client's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ebpf/telemetry_shm.h"
#include "kvmm/kvmmd/salt.h"
#include "kvmm/lib/client.h"

void kc_seq_hashes_set(struct kvmm_region *r, struct kc_seq *q, uint32_t first,
		       uint32_t n, const uint64_t *hashes)
{
	if (first >= r->max_blocks || !n)
		return;
	if (n > r->max_blocks - first)
		n = r->max_blocks - first;
	if (!q->hashes) {
		q->hashes = calloc(r->max_blocks, sizeof(*q->hashes));
		if (!q->hashes)
			return;
	}
	for (uint32_t i = 0; i < n; i++)
		q->hashes[first + i] = kd_salt_hash(r->salt, hashes[i]);
	if (q->nr_hashes < first + n)
		q->nr_hashes = first + n;
}

void kc_seq_hashes_trim(struct kc_seq *q, uint32_t from)
{
	if (!q->hashes || q->nr_hashes <= from)
		return;
	memset(q->hashes + from, 0, (q->nr_hashes - from) * sizeof(*q->hashes));
	q->nr_hashes = from;
}

void kc_seq_end_before(struct kvmm_region *r, struct kc_seq *q, uint32_t b)
{
	if (q->backed > b)
		q->backed = b;
	if (q->len > b * r->tokens_per_block) {
		q->len = b * r->tokens_per_block;
		kc_seq_hashes_trim(q, b);
	}
}

static int recs_reserve(struct kvmm_conn *c, uint64_t n)
{
	struct kvmm_access_rec *nr;
	uint64_t cap = c->tel_recs_cap ? c->tel_recs_cap : 256;

	if (n <= c->tel_recs_cap)
		return 0;
	while (cap < n)
		cap *= 2;
	if (cap > UINT32_MAX)
		return -E2BIG;
	nr = realloc(c->tel_recs, cap * sizeof(*nr));
	if (!nr)
		return -ENOMEM;
	c->tel_recs = nr;
	c->tel_recs_cap = (uint32_t)cap;
	return 0;
}

void kc_step_access(struct kvmm_conn *c)
{
	struct kvmm_region *r;
	uint64_t n = 0, step;

	pthread_mutex_lock(&c->lock);
	step = __atomic_load_n(&c->tel_step, __ATOMIC_RELAXED);
	for (r = c->regions; r; r = r->next)
		for (uint32_t s = 0; s < r->max_seqs; s++)
			if (r->seqs[s].open)
				n += r->seqs[s].nr_hashes;
	if (!n || recs_reserve(c, n)) {
		pthread_mutex_unlock(&c->lock);
		return;
	}
	n = 0;
	for (r = c->regions; r; r = r->next) {
		for (uint32_t s = 0; s < r->max_seqs; s++) {
			struct kc_seq *q = &r->seqs[s];

			if (!q->open)
				continue;
			for (uint32_t b = 0; b < q->nr_hashes; b++) {
				if (!q->hashes[b])
					continue;
				c->tel_recs[n++] = (struct kvmm_access_rec){
					.hash = q->hashes[b],
					.seq = (uint64_t)r->id << 32 | s,
					.tier = b < q->backed ?
							KVMM_TEL_TIER_GPU :
							KVMM_TEL_TIER_MISS,
				};
			}
		}
	}
	for (uint64_t i = 0; i < n; i += KVMM_TEL_MAX_ACCESS_RECORDS) {
		uint64_t k = n - i;

		if (k > KVMM_TEL_MAX_ACCESS_RECORDS)
			k = KVMM_TEL_MAX_ACCESS_RECORDS;
		kvmm_tel_access(c->tel, step, c->tel_recs + i, (uint32_t)k);
	}
	pthread_mutex_unlock(&c->lock);
}
