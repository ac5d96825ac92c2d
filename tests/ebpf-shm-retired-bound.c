// SPDX-License-Identifier: MIT
/*
 * The shm source's retired table (what ended sessions measured) is
 * bounded like the BPF map's LRU and is not merged again at each poll:
 * 300 sessions of 3000 distinct blocks each end, one poll after each (as
 * kvmmd polls every 250 ms).  The snapshot holds at most 65,536 blocks,
 * the latest sessions' (the first session's are gone), the sink heard of
 * each ended session's blocks once, and a poll with nothing new takes
 * well under a millisecond.  Before, every ended session's blocks stayed
 * (900,000 here) and each poll merged all of them again: 100-300 ms a
 * poll on kvmmd's loop at 300-500 ended sessions.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "tests/ebpf-common.h"

#define SESSIONS 300
#define PER 3000

static uint64_t sunk;

static void on_block(void *arg, uint64_t hash, const struct kvmm_block_stats *s)
{
	sunk++;
}

static uint64_t hash_of(int s, int i)
{
	return ((uint64_t)s << 20) + (uint64_t)i + 1;
}

int main(void)
{
	struct tel_opts o = { .size = sizeof(o),
			      .mode = TEL_MODE_SHM,
			      .quiet = true };
	size_t len = kvmm_tel_shm_size(4096);
	static struct kvmm_access_rec recs[PER];
	struct kvmm_block_stats st;
	struct kvmm_tel_shm *mem;
	struct tel *t;
	uint64_t t0, idle_ns;

	mem = mmap(NULL, len, PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	t_assert(mem != MAP_FAILED);
	t_ok(tel_open(&o, &t));
	tel_set_sink(t, &(struct tel_sink){ .block = on_block });
	for (int s = 1; s <= SESSIONS; s++) {
		t_ok(tel_shm_add(t, s, 100, mem, len));
		for (int i = 0; i < PER; i++)
			recs[i] = (struct kvmm_access_rec){ hash_of(s, i), 1 };
		kvmm_tel_access(mem, 1, recs, PER);
		tel_shm_remove(t, s);
		t_ok(tel_poll(t));
		t_assert(tel_block_count(t) <= 65536);
	}
	t_assert(tel_block_count(t) >= 65536 - 65536 / 8);
	/* each block reached the sink once, when its session ended */
	t_assert_eq(sunk, (uint64_t)SESSIONS * PER);
	/* the latest session's blocks are there, the first's are not */
	t_ok(tel_block_lookup(t, hash_of(SESSIONS, 0), &st));
	t_assert_eq(st.count, 1);
	t_assert_eq(st.last_pid, 100);
	t_assert(tel_block_lookup(t, hash_of(1, 0), &st) == -ENOENT);
	t0 = kvmm_tel_now_ns();
	t_ok(tel_poll(t));
	idle_ns = kvmm_tel_now_ns() - t0;
	t_assert_eq(sunk, (uint64_t)SESSIONS * PER);
	printf("ok: %d ended sessions: %zu blocks kept, a poll %.3f ms\n",
	       SESSIONS, tel_block_count(t), idle_ns / 1e6);
	t_assert(idle_ns < 20000000ull); /* generous on a busy machine */
	tel_close(t);
	return 0;
}
