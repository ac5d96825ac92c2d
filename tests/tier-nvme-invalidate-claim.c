// SPDX-License-Identifier: MIT
/*
 * NVMe tier: a slot claimed for an operator drop's invalidation
 * (tier_nvme_invalidate_claim(), on kvmmd's loop thread before a worker
 * runs the job) is nothing a write deduplicates onto.  Block H is
 * written, its slot claimed; a thread writes H again (same layout and
 * length) and must still be waiting ~100 ms later; the invalidation then
 * runs, and the writer gets a fresh READY slot holding its own bytes: no
 * dedup hit, lookup finds the new slot, one slot used and ready.  A claim
 * undone (tier_nvme_invalidate_unclaim(): the job never ran) frees the
 * slot with the counts right.
 */
#include "kvmm/kvmmd/tier_nvme.h"
#include "tests/lib/nvme_tier.h"
#include "tests/lib/page_alloc.h"
#include "tests/lib/test.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PAYLOAD (64 * 1024)
#define NSLOTS 4
#define HASH 0xc1a1a000ull
#define LAYOUT 3

struct writer {
	struct tier_nvme *t;
	struct tier_nvme_io io;
	int failed;
	int done; /* __atomic: the write returned */
};

static void *write_again(void *arg)
{
	struct writer *w = arg;

	w->failed = tier_nvme_write_batch(w->t, &w->io, 1);
	__atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void assert_counts(struct tier_nvme *t, uint64_t used, uint64_t ready)
{
	struct tier_nvme_stats st;

	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.used_slots, used);
	t_assert_eq(st.ready_slots, ready);
}

int main(void)
{
	const char *dir = getenv("KVMM_NVME_TEST_DIR");
	struct timespec pause = { .tv_nsec = 100 * 1000 * 1000 };
	unsigned char *old = NULL, *new = NULL, *rd = NULL;
	struct tier_nvme_stats st;
	struct tier_nvme_io io, inv;
	struct writer w = { 0 };
	struct tier_nvme *t;
	uint64_t dedup, frees;
	uint32_t s, found;
	pthread_t thr;
	char path[256];

	if (!dir)
		dir = "/var/tmp";
	snprintf(path, sizeof(path), "%s/kvmm-tier-nvme-claim-%d", dir,
		 getpid());
	old = t_page_alloc(PAYLOAD);
	new = t_page_alloc(PAYLOAD);
	rd = t_page_alloc(PAYLOAD);
	nt_fill(old, PAYLOAD, 1);
	nt_fill(new, PAYLOAD, 2);
	struct tier_nvme_config cfg = {
		.size = sizeof(cfg),
		.path = path,
		.capacity_bytes = NT_CAPACITY(NSLOTS, PAYLOAD),
		.payload_bytes = PAYLOAD,
		.queue_depth = 4,
	};
	t = nt_open(cfg, NULL, NULL);

	io = (struct tier_nvme_io){
		.hash = HASH, .layout_id = LAYOUT, .buf = old, .length = PAYLOAD
	};
	t_assert_eq(tier_nvme_write_batch(t, &io, 1), 0);
	s = io.slot;
	assert_counts(t, 1, 1);

	/* claim, then the write of the same block: it waits, no dedup */
	t_assert_eq(tier_nvme_invalidate_claim(t, s, HASH + 1), -ENOENT);
	t_assert_eq(tier_nvme_invalidate_claim(t, NSLOTS, HASH), -EINVAL);
	t_ok(tier_nvme_invalidate_claim(t, s, HASH));
	t_assert_eq(tier_nvme_invalidate_claim(t, s, HASH), -ENOENT);
	t_assert_eq(tier_nvme_lookup(t, HASH, NULL, NULL, NULL), -ENOENT);
	t_assert_eq(tier_nvme_free(t, s), -ENOENT);
	assert_counts(t, 1, 0);
	tier_nvme_get_stats(t, &st);
	dedup = st.dedup_hits;
	w.t = t;
	w.io = (struct tier_nvme_io){ .hash = HASH,
				      .layout_id = LAYOUT,
				      .buf = new,
				      .length = PAYLOAD,
				      .result = 1 };
	t_ok(-pthread_create(&thr, NULL, write_again, &w));
	nanosleep(&pause, NULL);
	t_assert_eq(__atomic_load_n(&w.done, __ATOMIC_ACQUIRE), 0);

	inv = (struct tier_nvme_io){ .hash = HASH, .slot = s };
	t_assert_eq(tier_nvme_invalidate_batch(t, &inv, 1), 0);
	t_assert_eq(inv.result, 0);
	t_assert(inv.dropped);
	t_ok(-pthread_join(thr, NULL));
	/* freed by the invalidation: nothing to undo */
	t_assert_eq(tier_nvme_invalidate_unclaim(t, s), -ENOENT);

	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.dedup_hits, dedup);
	t_assert_eq(st.invalidations, 1);
	t_assert_eq(w.failed, 0);
	t_assert_eq(w.io.result, 0);
	t_assert_eq(tier_nvme_slot_state(t, w.io.slot), TIER_SLOT_READY);
	t_ok(tier_nvme_lookup(t, HASH, &found, NULL, NULL));
	t_assert_eq(found, w.io.slot);
	io = (struct tier_nvme_io){ .hash = HASH, .slot = found, .buf = rd };
	t_assert_eq(tier_nvme_read_batch(t, &io, 1), 0);
	t_assert(memcmp(rd, new, PAYLOAD) == 0);
	assert_counts(t, 1, 1);

	/* a claim whose invalidation never runs: undone, the slot free */
	s = found;
	frees = st.frees;
	t_ok(tier_nvme_invalidate_claim(t, s, HASH));
	assert_counts(t, 1, 0);
	t_ok(tier_nvme_invalidate_unclaim(t, s));
	t_assert_eq(tier_nvme_invalidate_unclaim(t, s), -ENOENT);
	t_assert_eq(tier_nvme_invalidate_unclaim(t, NSLOTS), -EINVAL);
	t_assert_eq(tier_nvme_slot_state(t, s), TIER_SLOT_FREE);
	t_assert_eq(tier_nvme_lookup(t, HASH, NULL, NULL, NULL), -ENOENT);
	inv = (struct tier_nvme_io){ .hash = HASH, .slot = s };
	t_assert_eq(tier_nvme_invalidate_batch(t, &inv, 1), 1);
	t_assert_eq(inv.result, -ENOENT);
	assert_counts(t, 0, 0);
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.frees, frees + 1);
	t_assert_eq(st.invalidations, 1);

	/* the slot comes back clean: written, read, freed as any other */
	io = (struct tier_nvme_io){
		.hash = HASH, .layout_id = LAYOUT, .buf = old, .length = PAYLOAD
	};
	t_assert_eq(tier_nvme_write_batch(t, &io, 1), 0);
	t_assert_eq(io.slot, s);
	assert_counts(t, 1, 1);
	t_ok(tier_nvme_free(t, s));
	assert_counts(t, 0, 0);

	tier_nvme_close(t);
	unlink(path);
	free(old);
	free(new);
	free(rd);
	printf("nvme invalidate claim ok\n");
	return 0;
}
