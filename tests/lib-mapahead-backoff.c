// SPDX-License-Identifier: MIT
/*
 * After a shortage the map-ahead thread holds off instead of asking
 * kvmmd again on every kick, and maps ahead again once the process
 * closes a sequence.
 *
 * Four sequences of 502 tokens with 2 blocks mapped ahead each hold the
 * uid's quota of 16 blocks; the first grows by 2 blocks past its own,
 * which another sequence's blocks ahead make room for (lend.c).  Then
 * for 300 ms the sequence that lent is extended again and again within
 * its blocks, each extend kicking the thread (it has none ahead): kvmmd
 * would answer every fetch -EDQUOT, and a thread that kept trying sent
 * one socket command a sequence a kick (hundreds); holding off 100 ms,
 * then 200, it sends a few.  A close of a third sequence gives 4 blocks
 * back: the thread maps the 2 ahead of the first and of the one that
 * lent, and the uid holds its 16 blocks again.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "tests/lib/daemon.h"
#include "tests/lib/lend.h"
#include "tests/lib/test.h"

#define NSEQ 4

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static bool mapped(struct kvmm_region *r, uint32_t s, uint32_t b)
{
	uint32_t ids[LD_PPB];

	return kvmm_seq_block_pages(r, s, b, ids, LD_PPB) == LD_PPB;
}

int main(void)
{
	char quota[64];
	const char *qargs[] = { "--quota", quota, NULL };
	uint32_t s[NSEQ], lender = 0, closed = 0, kicks = 0;
	struct kvmm_status_reply ds;
	struct kvmm_stats st0, st;
	struct td_daemon d;
	struct kvmm_conn *c;
	struct kvmm_region *r;
	double t0, t;

	snprintf(quota, sizeof(quota), "%u=4M", (unsigned)getuid());
	td_start_ok(&d, qargs);
	ld_connect(2, &c, &r);
	for (int i = 0; i < NSEQ; i++) {
		t_ok(kvmm_seq_open(r, &s[i]));
		t_ok(kvmm_seq_extend(r, s[i], 2 * LD_TPB - 10));
	}
	t_ok(kvmm_seq_extend(r, s[0], 6 * LD_TPB - 20));
	for (int i = 1; i < NSEQ; i++)
		if (!mapped(r, s[i], 2))
			lender = s[i];
	st0 = ld_stats(c);
	t_assert_eq(st0.blocks_lent, 2);
	t_assert_eq(st0.map_ahead_backoffs, 1);

	/* kicks while short: a few tries at most */
	t0 = now_ms();
	while (now_ms() - t0 < 300) {
		t_ok(kvmm_seq_extend(r, lender, 2 * LD_TPB - 10));
		kicks++;
		usleep(500);
	}
	st = ld_stats(c);
	t = now_ms() - t0;
	printf("%u kicks in %.0f ms: %llu socket commands, %llu backoffs\n",
	       kicks, t, (unsigned long long)(st.cmds_socket - st0.cmds_socket),
	       (unsigned long long)st.map_ahead_backoffs);
	t_assert(kicks >= 50);
	/* STATS, and a fetch each time a hold ran out (100, 300, 700 ms...) */
	t_assert(st.cmds_socket - st0.cmds_socket <= 1 + (t > 700 ? 4 : 3));
	t_assert_eq(st.map_ahead_blocks, 0);
	t_assert(st.map_ahead_backoffs >= 2);
	t_assert(!mapped(r, lender, 2));

	/* room: the thread maps ahead again at once */
	for (int i = 1; i < NSEQ; i++)
		if (s[i] != lender)
			closed = s[i];
	t0 = now_ms();
	t_ok(kvmm_seq_close(r, closed));
	do {
		st = ld_stats(c);
		if (st.map_ahead_blocks == 4)
			break;
		usleep(1000);
	} while (now_ms() - t0 < 5000);
	printf("mapped ahead again %.1f ms after the close\n", now_ms() - t0);
	t_assert_eq(st.map_ahead_blocks, 4);
	t_assert(mapped(r, lender, 3) && mapped(r, s[0], 7));
	t_ok(td_status(&d, &ds));
	t_assert_eq(ds.pages_allocated, 16 * LD_PPB);

	kvmm_disconnect(c);
	t_ok(td_wait_idle(&d, 5000, NULL));
	td_stop_ok(&d);
	return 0;
}
