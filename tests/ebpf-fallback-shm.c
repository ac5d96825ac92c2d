// SPDX-License-Identifier: MIT
/*
 * The shared-memory fallback gives the same statistics as BPF: telemetry
 * opened in SHM mode registers a region in a MAP_SHARED mapping, a forked
 * client process runs the same workload as tests/ebpf-maps.c through the
 * same recorders, and the snapshot holds exactly the same counts and
 * buckets.  Two clients' regions merge (counts add), a removed session's
 * statistics stay in the totals, a region whose header a client scribbled
 * on is still read with the daemon's own layout, and a region whose
 * `enabled` flag is off (BPF source) receives nothing.  No BPF needed.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/ebpf-common.h"

int main(void)
{
	size_t size = kvmm_tel_shm_size(4096);
	struct tel_opts o = { .size = sizeof(o), .mode = TEL_MODE_SHM };
	struct ebpf_sink_counts sc = { 0 };
	struct tel_sink sink = { .block = ebpf_sink_block,
				 .latency = ebpf_sink_latency,
				 .event = ebpf_sink_event,
				 .arg = &sc };
	struct kvmm_block_stats s;
	struct kvmm_counters c;
	struct kvmm_tel_shm *a, *b;
	uint64_t t0, t1;
	struct tel *t;

	a = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		 -1, 0);
	b = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		 -1, 0);
	t_assert(a != MAP_FAILED && b != MAP_FAILED);
	t_assert_eq(kvmm_tel_shm_nr_slots(size), 4096);
	t_assert(kvmm_tel_shm_check(a, size) == -EINVAL); /* not laid out */

	t_ok(tel_open(&o, &t));
	t_assert_eq(tel_source(t), TEL_SOURCE_SHM);
	t_assert(!strcmp(tel_pin_dir(t), ""));
	tel_set_sink(t, &sink);
	t_ok(tel_shm_add(t, 1, 0, a, size));
	t_assert(tel_shm_add(t, 1, 0, a, size) == -EEXIST);
	t_ok(kvmm_tel_shm_check(a, size));
	t_assert(kvmm_tel_shm_enabled(a));

	t0 = kvmm_tel_now_ns();
	ebpf_drive_process(a, size);
	t1 = kvmm_tel_now_ns();
	/* shm: tel_poll_begin() polls at once (regions are the caller's) */
	t_ok(tel_poll_begin(t));
	t_assert_eq(tel_poll_end(t), 1);
	ebpf_check(t, t0, t1);
	t_assert_eq(sc.blocks, 3 + NBULK);
	t_assert_eq(sc.h1_count, 5);
	t_assert_eq(sc.latency_events, EBPF_NR_LATENCY_EVENTS);
	t_assert_eq(sc.ring_events, 0); /* no event ring without BPF */
	memset(&sc, 0, sizeof(sc));
	t_ok(tel_poll(t));
	t_assert_eq(sc.blocks + sc.latency_events, 0);

	/* A second session doing the same: counts add, rates add. */
	t_ok(tel_shm_add(t, 2, 0, b, size));
	ebpf_drive_process(b, size);
	t_ok(tel_poll(t));
	t_ok(tel_block_lookup(t, H1, &s));
	t_assert_eq(s.count, 10);
	t_assert(s.ewma_gap_ns >= 1000000); /* ~half of each one's gap */
	tel_counters(t, &c);
	t_assert_eq(c.accesses, 2 * (9 + NBULK));
	t_assert_eq(tel_block_count(t), 3 + NBULK);

	/* Session 1 ends: what it measured stays. */
	tel_shm_remove(t, 1);
	memset(a, 0xff, size); /* its memory is gone or garbage now */
	t_ok(tel_poll(t));
	t_ok(tel_block_lookup(t, H2, &s));
	t_assert_eq(s.count, 6);

	/* A client scribbling on the header does not change what we read. */
	b->nr_blocks = 1u << 30;
	b->blocks_off = 1ull << 40;
	t_ok(tel_poll(t));
	t_ok(tel_block_lookup(t, H2, &s));
	t_assert_eq(s.count, 6);
	t_assert(kvmm_tel_shm_check(b, size) == -EINVAL); /* client refuses */
	tel_shm_remove(t, 2);
	tel_close(t);

	/* Unless the source is shm the flag stays off: clients write nothing. */
	o.mode = TEL_MODE_OFF;
	t_ok(tel_open(&o, &t));
	t_assert_eq(tel_source(t), TEL_SOURCE_OFF);
	t_ok(tel_shm_add(t, 3, 0, a, size));
	t_assert(!kvmm_tel_shm_enabled(a));
	ebpf_drive_process(a, size);
	t_assert_eq(a->counters.accesses, 0);
	t_ok(tel_poll(t));
	t_assert_eq(tel_block_count(t), 0);
	tel_close(t);
	printf("ok: shm fallback matches the BPF numbers\n");
	return 0;
}
