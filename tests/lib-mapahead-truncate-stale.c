// SPDX-License-Identifier: MIT
/*
 * The map-ahead thread maps what is ahead of a sequence's length when
 * it fetches, not what was ahead when it chose the sequence: an engine
 * that truncates the sequence meanwhile, or closes it and opens another
 * in its slot, is left with map_ahead blocks past the length, no more.
 *
 * With 2 blocks ahead, a sequence of 1 block has 3 mapped; an extend to
 * 3 blocks within them kicks the thread, which chooses the sequence for
 * 5 and (KVMM_TEST_MAPAHEAD_DELAY_MS) waits 1 s before it fetches.
 * 150 ms in (the thread has chosen by then, even under ASan on a loaded
 * machine, where it chose after the truncate otherwise), the engine
 * truncates the sequence to 0 tokens.  The thread then fetches blocks
 * 0 and 1 of it, and kvmmd's pool holds those alone (8 pages); it used
 * to fetch 0-4 (20 pages, and quota, held past the length until the
 * sequence grew over them or closed: tests/daemon-fuzz seed 7 found a
 * sequence of 0 tokens with its block 5 backed).  The same with a
 * close and an open of a new sequence in the slot during the wait.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "tests/lib/daemon.h"
#include "tests/lib/lend.h"
#include "tests/lib/test.h"

#define AHEAD 2u

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static uint64_t ahead_mapped(struct kvmm_conn *c)
{
	struct kvmm_stats ks = { .size = sizeof(ks) };

	t_ok(kvmm_get_stats(c, &ks));
	return ks.map_ahead_blocks;
}

/* s of 1 block grown to 3 within its mapped blocks: the thread is
 * kicked and chooses it for 5, then waits before it fetches. */
static void kick_for_five(struct kvmm_region *r, uint32_t s)
{
	t_ok(kvmm_seq_extend(r, s, LD_TPB));
	for (uint32_t b = 0; b < 1 + AHEAD; b++)
		t_assert(ld_mapped(r, s, b));
	t_ok(kvmm_seq_extend(r, s, 3 * LD_TPB));
	/* the thread wakes and chooses within this, then waits 1 s */
	usleep(150000);
}

/*
 * Once the thread's delayed fetch is done: kvmmd's pool holds pages for
 * the process's sequences' blocks ahead alone (nseq of them; the fetch
 * of more would be there by the time it holds those), the thread
 * counted no more than AHEAD (from before, its count then: it counts
 * what it maps now, not what it keeps aside for a sequence cut under
 * it), and after a boundary (which maps what it kept aside) no block of
 * s past them is mapped.
 */
static void expect_ahead_only(struct td_daemon *d, struct kvmm_conn *c,
			      struct kvmm_region *r, uint32_t s,
			      uint64_t before, uint32_t nseq)
{
	const uint64_t pages = (uint64_t)nseq * AHEAD * LD_PPB;
	struct kvmm_status_reply st;
	double t0 = now_ms();

	for (;;) {
		t_ok(td_status(d, &st));
		if (st.pages_allocated >= pages)
			break;
		if (now_ms() - t0 > 10000)
			t_fail("kvmmd holds %llu pages after 10 s, %llu expected: the thread fetched nothing ahead of seq %u",
			       (unsigned long long)st.pages_allocated,
			       (unsigned long long)pages, s);
		usleep(10000);
	}
	usleep(300000); /* a fetch of more is done by now */
	t_ok(td_status(d, &st));
	t_assert_eq(st.pages_allocated, pages);
	t_assert(ahead_mapped(c) - before <= AHEAD);
	t_assert(kvmm_process_revocations(c) >= 0);
	for (uint32_t b = AHEAD; b < 6; b++)
		if (ld_mapped(r, s, b))
			t_fail("seq %u of %lld tokens has block %u mapped (%u ahead)",
			       s, (long long)kvmm_seq_len(r, s), b, AHEAD);
}

int main(void)
{
	struct td_daemon d;
	struct kvmm_conn *c;
	struct kvmm_region *r;
	uint32_t s, s2, s3;
	uint64_t before;

	setenv("KVMM_TEST_MAPAHEAD_DELAY_MS", "1000", 1);
	td_start_ok(&d, NULL);
	ld_connect(AHEAD, &c, &r);

	/* a truncate while the thread waits */
	t_ok(kvmm_seq_open(r, &s));
	kick_for_five(r, s);
	before = ahead_mapped(c);
	t_ok(kvmm_seq_truncate(r, s, 0));
	expect_ahead_only(&d, c, r, s, before, 1);

	/* a close, and another sequence opened in the slot */
	t_ok(kvmm_seq_open(r, &s2));
	kick_for_five(r, s2);
	before = ahead_mapped(c);
	t_ok(kvmm_seq_close(r, s2));
	t_ok(kvmm_seq_open(r, &s3));
	t_assert_eq(s3, s2);
	expect_ahead_only(&d, c, r, s3, before, 2);
	kvmm_disconnect(c);
	t_assert_eq(td_stop(&d), 0);
	return 0;
}
