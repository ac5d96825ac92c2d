// SPDX-License-Identifier: MIT
/*
 * One writer cannot flush the others' statistics out of the shm source's
 * retired table: four processes' sessions end with 2000 real blocks
 * each, then a hostile process connects 40 times, writes 4096 made-up
 * blocks into every slot of its region (count 1, accessed now) and
 * disconnects, 163,840 blocks in all against a table of 16,384.  When
 * the table is pruned, the entries past a writer's share (an eighth of
 * the table) leave first, so all 8000 real blocks are still there with
 * their counts, the table stays bounded and the hostile process keeps
 * its latest blocks up to its share.  Before, the made-up blocks, the
 * latest accessed, pushed every real one out (an LRU by access time).
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "tests/ebpf-common.h"

#define MAX_BLOCKS 16384
#define HONEST 4
#define PER 2000
#define HOSTILE_SESSIONS 40

static uint64_t honest_hash(int p, int i)
{
	return 0x1000000000000000ull + ((uint64_t)p << 20) + (uint64_t)i + 1;
}

/* A hostile session's region: every slot a made-up block, the counters
 * bumped to account for them. */
static void forge(struct kvmm_tel_shm *s, int round)
{
	struct kvmm_tel_shm_block *b = kvmm_tel_shm_blocks(s);
	uint64_t now = kvmm_tel_now_ns();

	for (uint32_t i = 0; i < s->nr_blocks; i++) {
		b[i].hash =
			0xbad0000000000000ull + ((uint64_t)round << 20) + i + 1;
		b[i].stats.count = 1;
		b[i].stats.first_ns = now;
		b[i].stats.last_ns = now;
	}
	s->counters.events[KVMM_TEL_ACCESS] += 1;
	s->counters.accesses += s->nr_blocks;
}

int main(void)
{
	struct tel_opts o = { .size = sizeof(o),
			      .mode = TEL_MODE_SHM,
			      .quiet = true,
			      .max_blocks = MAX_BLOCKS };
	size_t len = kvmm_tel_shm_size(4096);
	static struct kvmm_access_rec recs[PER];
	struct kvmm_tel_shm *mem;
	uint64_t id = 1, kept = 0, hostile = 0;
	struct tel *t;

	mem = mmap(NULL, len, PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	t_assert(mem != MAP_FAILED);
	t_ok(tel_open(&o, &t));
	for (int p = 0; p < HONEST; p++, id++) {
		t_ok(tel_shm_add(t, id, 100 + p, mem, len));
		for (int i = 0; i < PER; i++)
			recs[i] = (struct kvmm_access_rec){ honest_hash(p, i),
							    1 };
		kvmm_tel_access(mem, 1, recs, PER);
		tel_shm_remove(t, id);
		t_ok(tel_poll(t));
	}
	for (int r = 0; r < HOSTILE_SESSIONS; r++, id++) {
		t_ok(tel_shm_add(t, id, 666, mem, len));
		forge(mem, r);
		tel_shm_remove(t, id);
		t_ok(tel_poll(t));
		t_assert(tel_block_count(t) <= MAX_BLOCKS);
	}
	for (int p = 0; p < HONEST; p++) {
		for (int i = 0; i < PER; i++) {
			struct kvmm_block_stats st;

			if (!tel_block_lookup(t, honest_hash(p, i), &st) &&
			    st.count == 1)
				kept++;
		}
	}
	for (int i = 0; i < 4096; i++) {
		uint64_t h = 0xbad0000000000000ull +
			     ((uint64_t)(HOSTILE_SESSIONS - 1) << 20) + i + 1;

		hostile += !tel_block_lookup(t, h, NULL);
	}
	printf("%llu of %d real blocks kept; %zu blocks in the table, %llu of "
	       "the last hostile session's 4096\n",
	       (unsigned long long)kept, HONEST * PER, tel_block_count(t),
	       (unsigned long long)hostile);
	t_assert_eq(kept, HONEST * PER);
	t_assert(hostile >= MAX_BLOCKS / 8);
	t_assert(tel_block_count(t) <= MAX_BLOCKS);
	tel_close(t);
	return 0;
}
