// SPDX-License-Identifier: MIT
/*
 * A client cannot make blocks look hot by writing counts into its
 * region: a forked client process makes one real access, then writes
 * count 2^40 on its block, claims another slot for a hash it never
 * accessed with count 2^40, and UINT64_MAX on a third; it also sets its
 * accesses counter to 2^62.  The daemon credits only what the session's
 * accesses account for (one access probe: at most
 * KVMM_TEL_MAX_ACCESS_RECORDS records, the blocks together no more than
 * the accesses), a count never wraps when sessions merge, and a real
 * access after the forgery still counts (a probe's worth at most).  Before, the counts were
 * copied as written (2^40 and 2^64 - 1 reached the policy) and merging
 * wrapped.
 */
#include <stdio.h>
#include <sys/mman.h>

#include "tests/ebpf-common.h"

#define HA 0xaaaa000000000001ull
#define HB 0xbbbb000000000002ull
#define HC 0xcccc000000000003ull

static uint64_t max_count;

static void on_block(void *arg, uint64_t hash, const struct kvmm_block_stats *s)
{
	if (s->count > max_count)
		max_count = s->count;
}

static struct kvmm_tel_shm_block *slot_of_hash(struct kvmm_tel_shm *s,
					       uint64_t h)
{
	struct kvmm_tel_shm_block *b = kvmm_tel_shm_blocks(s);

	for (uint32_t i = 0; i < s->nr_blocks; i++)
		if (b[i].hash == h)
			return &b[i];
	return NULL;
}

static void forge(struct kvmm_tel_shm *s)
{
	struct kvmm_access_rec r = { HA, 1, KVMM_TEL_TIER_GPU, 0 };
	struct kvmm_tel_shm_block *b = kvmm_tel_shm_blocks(s), *a;
	uint32_t free1 = 0, free2;

	kvmm_tel_access(s, 1, &r, 1);
	a = slot_of_hash(s, HA);
	if (!a)
		_exit(2);
	a->stats.count = 1ull << 40;
	while (b[free1].hash)
		free1++;
	for (free2 = free1 + 1; b[free2].hash; free2++)
		;
	b[free1].hash = HB;
	b[free1].stats.count = 1ull << 40;
	b[free2].hash = HC;
	b[free2].stats.count = UINT64_MAX;
	s->counters.accesses = 1ull << 62;
	_exit(0);
}

int main(void)
{
	struct tel_opts o = { .size = sizeof(o),
			      .mode = TEL_MODE_SHM,
			      .quiet = true };
	size_t len = kvmm_tel_shm_size(4096);
	struct kvmm_tel_shm *a, *b;
	struct kvmm_block_stats st, sb, sc;
	struct kvmm_counters c;
	struct tel *t;
	pid_t pid;
	int ws;

	a = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		 -1, 0);
	b = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		 -1, 0);
	t_assert(a != MAP_FAILED && b != MAP_FAILED);
	t_ok(tel_open(&o, &t));
	tel_set_sink(t, &(struct tel_sink){ .block = on_block });
	t_ok(tel_shm_add(t, 1, 0, a, len));
	pid = fork();
	t_assert(pid >= 0);
	if (pid == 0)
		forge(a);
	t_assert(waitpid(pid, &ws, 0) == pid && WIFEXITED(ws) &&
		 !WEXITSTATUS(ws));
	t_ok(tel_poll(t));
	tel_counters(t, &c);
	/* one access probe: its records' cap, not 2^62 */
	t_assert_eq(c.events[KVMM_TEL_ACCESS], 1);
	t_assert(c.accesses <= KVMM_TEL_MAX_ACCESS_RECORDS);
	/* the blocks together: no more than those accesses */
	st.count = sb.count = sc.count = 0;
	tel_block_lookup(t, HA, &st);
	tel_block_lookup(t, HB, &sb);
	tel_block_lookup(t, HC, &sc);
	t_assert(st.count + sb.count + sc.count <= c.accesses);
	t_assert_eq(sc.count, 0); /* UINT64_MAX reads as a scribble */
	t_assert(max_count <= KVMM_TEL_MAX_ACCESS_RECORDS);

	/* a second session with the same forgeries: merged, no wrap */
	t_ok(tel_shm_add(t, 2, 0, b, len));
	pid = fork();
	t_assert(pid >= 0);
	if (pid == 0)
		forge(b);
	t_assert(waitpid(pid, &ws, 0) == pid && WIFEXITED(ws) &&
		 !WEXITSTATUS(ws));
	t_ok(tel_poll(t));
	tel_counters(t, &c);
	t_assert(c.accesses <= 2 * KVMM_TEL_MAX_ACCESS_RECORDS);
	t_assert(max_count <= 2 * KVMM_TEL_MAX_ACCESS_RECORDS);

	/* what was credited stays; a real access probe counts, at most
	 * what a probe may carry (the forged accesses are a backlog that
	 * each probe unlocks a probe's worth of, as a probe of that many
	 * records of one hash would with BPF) */
	{
		struct kvmm_access_rec r = { HA, 1, KVMM_TEL_TIER_GPU, 0 };
		uint64_t before, after;

		st.count = sb.count = 0;
		tel_block_lookup(t, HA, &st);
		tel_block_lookup(t, HB, &sb);
		before = st.count + sb.count;
		kvmm_tel_access(a, 2, &r, 1);
		t_ok(tel_poll(t));
		st.count = sb.count = 0;
		tel_block_lookup(t, HA, &st);
		tel_block_lookup(t, HB, &sb);
		after = st.count + sb.count;
		t_assert(after >= before + 1);
		t_assert(after <= before + KVMM_TEL_MAX_ACCESS_RECORDS);
	}
	tel_close(t);
	printf("ok: forged counts credited at most %llu (the accesses' cap)\n",
	       (unsigned long long)max_count);
	return 0;
}
