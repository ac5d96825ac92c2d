// SPDX-License-Identifier: MIT
/*
 * timeout: 120
 *
 * A loader's BPF poll reads the kvmm_blocks entries that changed (the
 * kvmm_dirty ring names them), not the whole map, and its snapshot stays
 * what a walk of the map gives: a pin reader of the same maps (which
 * walks the map at each poll, as every poll did before) is the
 * reference, block by block.
 *
 *  1. 4096 blocks: the first poll walks the map; then 3 entries change
 *     and the next poll looks up those 3 (tel_poll_stats()), feeds the
 *     sink those 3, and a poll with nothing new reads nothing.  An
 *     access queued while a poll runs (after its epoch bump) and one
 *     after it in the same epoch, which queues nothing: the next poll
 *     reads the entry again and counts both.
 *  2. A rename hook that gives two hashes one name: setting it makes the
 *     next poll walk; an access to one of the two then updates the
 *     merged block from both entries.
 *  3. Four threads step 64 blocks 2000 times while the loop polls (in
 *     halves and whole): after they end, two polls leave every count at
 *     exactly 4 * 2000 (accesses counted while a poll ran are read at a
 *     later one).
 *  4. A map of 256 entries (its ring 64 KiB, 2048 records): one step of
 *     5000 blocks fills the ring, the records it lost are counted, and
 *     that poll and the next walk the map; entries the LRU dropped
 *     without a record leave at the walk that follows once they may
 *     be an eighth of the map (256 + 32 in the snapshot); a ring that names more than a fifth of
 *     the map makes the poll walk it too.
 *
 * Skips (77) without root or BPF.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ebpf/probes.h"
#include "ebpf/telemetry.h"
#include "ebpf/telemetry_int.h" /* tel_delta_after_bump */
#include "tests/lib/bpf_test.h"

#define BASE 0x6d00000000000000ull
#define NBLOCKS 4096
#define STRESS 0x6e00000000000000ull
#define STRESS_BLOCKS 64
#define STRESS_THREADS 4
#define STRESS_ROUNDS 2000
#define SMALL 0x6f00000000000000ull

static struct bpf_test b;
static unsigned int fed; /* blocks the sink was told of */

static void on_block(void *arg, uint64_t hash,
		     const struct kvmm_block_stats *st)
{
	(void)arg;
	(void)hash;
	(void)st;
	fed++;
}

/* One step: n records of hashes first, first + 1, ... */
static void step(uint64_t first, unsigned int n)
{
	struct kvmm_access_rec *r = calloc(n, sizeof(*r));

	t_assert(r);
	for (unsigned int i = 0; i < n; i++)
		r[i] = (struct kvmm_access_rec){ .hash = first + i,
						 .seq = i,
						 .tier = KVMM_TEL_TIER_GPU };
	kvmm_probe_access(1, r, n);
	free(r);
}

/* Fired from inside a poll (tel_delta_after_bump). */
static void access_block_5(void)
{
	step(BASE + 5, 1);
}

static struct tel *open_loader(uint32_t max_blocks)
{
	const char *targets[2] = { b.self, NULL };
	struct tel_opts o = { .size = sizeof(o),
			      .mode = TEL_MODE_BPF,
			      .pin_root = b.pin,
			      .targets = targets,
			      .max_blocks = max_blocks,
			      .quiet = true };
	struct tel *t;
	int err = tel_open(&o, &t);

	if (err)
		t_skip("BPF unavailable: %s", strerror(-err));
	tel_set_sink(t, &(struct tel_sink){ .block = on_block });
	return t;
}

static struct tel *open_reader(void)
{
	struct tel_opts o = { .size = sizeof(o),
			      .mode = TEL_MODE_PINNED,
			      .pin_root = b.pin };
	struct tel *t;

	t_ok(tel_open(&o, &t));
	return t;
}

struct same {
	struct tel *ref;
	/* names of several entries, merged in another order: which one's
	 * latest access and EWMA come first differs */
	bool merged;
	size_t n;
};

static int same_block(void *arg, uint64_t hash,
		      const struct kvmm_block_stats *s)
{
	struct same *c = arg;
	struct kvmm_block_stats r;

	if (tel_block_lookup(c->ref, hash, &r))
		t_fail("block %#llx: not in the walk's snapshot",
		       (unsigned long long)hash);
	if (r.count != s->count)
		t_fail("block %#llx: count %llu, the walk's %llu",
		       (unsigned long long)hash, s->count, r.count);
	t_assert_eq(s->first_ns, r.first_ns);
	t_assert_eq(s->last_ns, r.last_ns);
	if (c->merged) /* entries accessed in one step tie on last_ns */
		goto out;
	t_assert_eq(s->last_seq, r.last_seq);
	t_assert_eq(s->last_tier, r.last_tier);
	t_assert_eq(s->last_pid, r.last_pid);
	t_assert_eq(s->ewma_gap_ns, r.ewma_gap_ns);
out:
	c->n++;
	return 0;
}

/* The loader's snapshot is the reader's, block by block (polls both). */
static void same_as_walk(struct tel *t, struct tel *ref, bool merged)
{
	struct same c = { .ref = ref, .merged = merged };

	t_ok(tel_poll(ref));
	t_ok(tel_block_foreach(t, same_block, &c));
	t_assert_eq(c.n, tel_block_count(ref));
	t_assert_eq(tel_block_count(t), tel_block_count(ref));
}

static struct tel_poll_stats poll_stats(struct tel *t)
{
	struct tel_poll_stats ps;

	tel_poll_stats(t, &ps);
	return ps;
}

/* Pairs of hashes, one name: the even one's. */
static bool pair_name(void *arg, const struct tel_origin *o, uint64_t *hash)
{
	(void)arg;
	(void)o;
	*hash &= ~1ull;
	return true;
}

static int stress_ended; /* threads done */

static void *stress_thread(void *arg)
{
	(void)arg;
	for (int r = 0; r < STRESS_ROUNDS; r++)
		step(STRESS, STRESS_BLOCKS);
	__atomic_add_fetch(&stress_ended, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void changed_only(void)
{
	struct tel *t = open_loader(0), *ref = open_reader();
	struct kvmm_block_stats s;
	struct tel_poll_stats ps;

	t_assert(KVMM_PROBE_ENABLED(access));
	for (unsigned int i = 0; i < NBLOCKS; i += 1024)
		step(BASE + i, 1024);
	fed = 0;
	t_ok(tel_poll(t));
	ps = poll_stats(t);
	t_assert_eq(ps.polls, 1);
	t_assert_eq(ps.full_walks, 1); /* the first poll reads it all */
	t_assert_eq(fed, NBLOCKS);
	same_as_walk(t, ref, false);

	/* 3 entries change: 2 accesses of one, one of another, a new one */
	step(BASE + 1, 2);
	step(BASE + 1, 1);
	step(BASE + NBLOCKS, 1);
	fed = 0;
	t_ok(tel_poll(t));
	ps = poll_stats(t);
	t_assert_eq(ps.full_walks, 1);
	t_assert_eq(ps.keys_read, 3);
	t_assert_eq(fed, 3);
	t_ok(tel_block_lookup(t, BASE + 1, &s));
	t_assert_eq(s.count, 3);
	t_ok(tel_block_lookup(t, BASE + 2, &s));
	t_assert_eq(s.count, 2);
	same_as_walk(t, ref, false);
	/* nothing new: nothing read, nothing fed */
	fed = 0;
	t_ok(tel_poll(t));
	t_assert_eq(poll_stats(t).keys_read, 3);
	t_assert_eq(fed, 0);

	/* an access queued after a poll's epoch bump, read by that poll;
	 * another one in the same epoch, after the poll, queues nothing
	 * (the entry is marked): the next poll reads the entry again */
	tel_delta_after_bump = access_block_5;
	t_ok(tel_poll(t));
	tel_delta_after_bump = NULL;
	t_ok(tel_block_lookup(t, BASE + 5, &s));
	t_assert_eq(s.count, 2);
	step(BASE + 5, 1);
	t_ok(tel_poll(t));
	t_ok(tel_block_lookup(t, BASE + 5, &s));
	t_assert_eq(s.count, 3);
	t_assert_eq(poll_stats(t).keys_read, 3 + 2);
	same_as_walk(t, ref, false);

	/* 2. one name for BASE + 2 and BASE + 3 */
	tel_set_rename(t, pair_name, NULL);
	tel_set_rename(ref, pair_name, NULL);
	t_ok(tel_poll(t));
	t_assert_eq(poll_stats(t).full_walks, 2);
	same_as_walk(t, ref, true);
	t_ok(tel_block_lookup(t, BASE + 2, &s));
	t_assert_eq(s.count, 2 + 1);
	t_assert_eq(tel_block_lookup(t, BASE + 3, &s), -ENOENT);
	step(BASE + 3, 1);
	fed = 0;
	t_ok(tel_poll(t));
	t_assert_eq(poll_stats(t).full_walks, 2);
	t_assert_eq(poll_stats(t).keys_read, 5 + 1);
	t_assert_eq(fed, 1);
	t_ok(tel_block_lookup(t, BASE + 2, &s));
	t_assert_eq(s.count, 2 + 2);
	same_as_walk(t, ref, true);
	tel_set_rename(t, NULL, NULL);
	tel_set_rename(ref, NULL, NULL);
	t_ok(tel_poll(t));

	/* 3. accesses while polls run */
	pthread_t th[STRESS_THREADS];
	unsigned int polls = 0;
	int r;

	for (int i = 0; i < STRESS_THREADS; i++)
		t_assert(!pthread_create(&th[i], NULL, stress_thread, NULL));
	while (__atomic_load_n(&stress_ended, __ATOMIC_ACQUIRE) <
	       STRESS_THREADS) {
		if (polls++ & 1) {
			t_ok(tel_poll(t));
		} else {
			t_ok(tel_poll_begin(t));
			while ((r = tel_poll_end(t)) == 0)
				;
			t_assert_eq(r, 1);
		}
	}
	for (int i = 0; i < STRESS_THREADS; i++)
		t_assert(!pthread_join(th[i], NULL));
	t_ok(tel_poll(t));
	t_ok(tel_poll(t));
	for (unsigned int i = 0; i < STRESS_BLOCKS; i++) {
		t_ok(tel_block_lookup(t, STRESS + i, &s));
		t_assert_eq(s.count, STRESS_THREADS * STRESS_ROUNDS);
	}
	same_as_walk(t, ref, false);
	ps = poll_stats(t);
	t_assert_eq(ps.ring_full, 0);
	printf("ok: %llu polls (%u during the steps), %llu walks, %llu entries read by key\n",
	       (unsigned long long)ps.polls, polls,
	       (unsigned long long)ps.full_walks,
	       (unsigned long long)ps.keys_read);
	tel_close(ref);
	tel_close(t);
}

static void ring_full(void)
{
	struct tel *t = open_loader(256), *ref = open_reader();
	struct tel_poll_stats ps;

	t_ok(tel_poll(t)); /* the first walk, of nothing */
	step(SMALL, 5000);
	t_ok(tel_poll(t));
	ps = poll_stats(t);
	t_assert_eq(ps.ring_full, 1);
	t_assert(ps.dirty_dropped >= 5000 - 2048);
	t_assert_eq(ps.full_walks, 2);
	same_as_walk(t, ref, false);
	t_ok(tel_poll(t)); /* the second walk after the ring was full */
	t_assert_eq(poll_stats(t).full_walks, 3);
	t_ok(tel_poll(t));
	t_assert_eq(poll_stats(t).full_walks, 3);
	same_as_walk(t, ref, false);

	/* new entries (45 a poll, under a fifth of the map: read by key)
	 * push as many others out of the LRU (which keeps about 200 of its
	 * 256 here): each poll reads the new ones and keeps the ones gone,
	 * until they may be an eighth of the map (over 256 + 32 kept); the
	 * next poll walks to drop them */
	for (unsigned int i = 0; tel_block_count(t) <= 256 + 256 / 8; i++) {
		t_assert(i < 8);
		step(SMALL + 10000 + 45 * i, 45);
		t_ok(tel_poll(t));
		ps = poll_stats(t);
		t_assert_eq(ps.full_walks, 3);
	}
	t_ok(tel_poll(t));
	t_assert_eq(poll_stats(t).full_walks, 4);
	same_as_walk(t, ref, false);
	/* 60 entries accessed again, over a fifth of the map: a walk */
	step(SMALL + 10000, 60);
	t_ok(tel_poll(t));
	t_assert_eq(poll_stats(t).full_walks, 5);
	same_as_walk(t, ref, false);
	printf("ok: ring full: %llu records lost, %llu walks\n",
	       (unsigned long long)ps.dirty_dropped,
	       (unsigned long long)poll_stats(t).full_walks);
	tel_close(ref);
	tel_close(t);
}

int main(void)
{
	bpf_test_init(&b, "poll-delta");
	changed_only();
	ring_full();
	printf("ok: the poll reads what changed and agrees with a walk\n");
	return 0;
}
