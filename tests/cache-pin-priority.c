// SPDX-License-Identifier: MIT
/*
 * timeout: 30
 * A block's priority (BLOCK_PIN with KVMM_PIN_F_PRIORITY_ONLY: a priority,
 * no pin) changes which block kvmmd's cost-aware policy (--cache-policy
 * asym) evicts under pool pressure.  Two one-block contents X and Y are
 * published; X is then used again through a prefix open, so it is the
 * more recent (asym has no return statistics yet: every value is 0 and
 * ties go to the lower priority, then the least recent).  Another
 * client's extend then needs exactly one cached block's pages.  Without a
 * priority the victim is Y; with X at priority -128 the victim is X.
 * The victim's pages are the ones the extend gets.
 *
 * Several sessions' priorities on one block: the highest counts.  A
 * second session giving X priority 0 keeps it (the victim is Y again);
 * when that session ends, X's priority falls back to the first
 * session's -128 and X is the victim (kvmmd keeps the block's highest
 * priority per block and recomputes it when its holder goes).
 */
#include <sys/wait.h>

#include "kvmm/kvmm.h"
#include "tests/cache-common.h"
#include "tests/lib/daemon.h"

static uint64_t hash_of(int content)
{
	return 0x900000ull * (content + 1) + 1;
}

/* A publisher process writes one block of content k; ids gets its pages. */
static void publish(const char *sock, int k, uint32_t *ids)
{
	uint64_t h = hash_of(k);

	t_assert_eq(cc_publish_content(sock, &h, 1, 40 + k, ids), 0);
}

enum prio_mode {
	NO_PRIO, /* no priority */
	LOW, /* X at -128 */
	LOW_AND_ZERO, /* X at -128 from one session, 0 from another */
	LOW_ZERO_GONE, /* ... and the other session ended */
};

static void set_prio(struct kvmm_conn *c, uint64_t hash, int prio)
{
	struct kvmm_pin_opts o = { .size = sizeof(o),
				   .flags = KVMM_PIN_F_PRIORITY |
					    KVMM_PIN_F_PRIORITY_ONLY,
				   .priority = prio };

	t_ok(kvmm_block_pin(c, hash, &o));
	t_assert_eq(o.pins, 1);
}

/* 1: X was the victim, 2: Y. */
static int victim(enum prio_mode mode)
{
	const char *args[] = {
		"--gpu-mem", "2M", "--cache-gpu-blocks", "8", "--cache-policy",
		"asym",	     NULL
	};
	uint32_t x[CC_PPB], y[CC_PPB], ids[7 * CC_PPB];
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.name = "prio",
					.map_ahead_set = 1 };
	struct kvmm_prefix_open_reply rep;
	struct kvmm_tier_stats_reply ts;
	struct kvmm_conn *p, *q = NULL;
	struct td_daemon d;
	uint64_t hx = hash_of(0);
	uint32_t seq, got[CC_PPB];
	struct cc b;
	int v;

	td_start_ok(&d, args);
	publish(d.sock, 0, x);
	publish(d.sock, 1, y);
	co.socket_path = d.sock;
	t_ok(kvmm_connect(&co, &p));
	if (mode != NO_PRIO)
		set_prio(p, hx, -128);
	if (mode == LOW_AND_ZERO || mode == LOW_ZERO_GONE) {
		t_ok(kvmm_connect(&co, &q));
		set_prio(q, hx, 0);
		if (mode == LOW_ZERO_GONE) {
			struct kvmm_status_reply st;

			kvmm_disconnect(q);
			q = NULL;
			/* the session's end has run once it is not counted */
			for (int i = 0; i < 500; i++) {
				t_ok(td_status(&d, &st));
				if (st.pins == 1)
					break;
				usleep(10000);
			}
			t_assert_eq(st.pins, 1);
		}
	}
	/* X's second use */
	cc_connect(&b, d.sock);
	cc_region(&b);
	cc_prefix(&b, &hx, 1, &rep, got);
	t_assert_eq(rep.from_gpu, 1);
	cc_check(&b, got, 1, 40);
	cc_seq_close(&b, rep.seq_id, got, CC_PPB);
	/* 24 pages free, 28 wanted: one cached block goes */
	seq = cc_seq_open(&b);
	cc_extend(&b, seq, 7 * CC_TPB, ids);
	cc_tier_stats(&b, &ts);
	t_assert_eq(ts.pressure_reclaims, 1);
	t_assert_eq(ts.tiers[0].used_blocks, 1);
	if (cc_overlap(ids, 7 * CC_PPB, x, CC_PPB) == CC_PPB) {
		t_assert_eq(cc_overlap(ids, 7 * CC_PPB, y, CC_PPB), 0);
		v = 1;
	} else {
		t_assert_eq(cc_overlap(ids, 7 * CC_PPB, y, CC_PPB), CC_PPB);
		t_assert_eq(cc_overlap(ids, 7 * CC_PPB, x, CC_PPB), 0);
		v = 2;
	}
	cc_seq_close(&b, seq, ids, 7 * CC_PPB);
	cc_disconnect(&b);
	if (q)
		kvmm_disconnect(q);
	kvmm_disconnect(p);
	td_stop_ok(&d);
	return v;
}

int main(void)
{
	t_assert_eq(victim(NO_PRIO), 2); /* X, used twice, is kept */
	t_assert_eq(victim(LOW), 1); /* unless its priority is -128 */
	t_assert_eq(victim(LOW_AND_ZERO), 2); /* the highest counts */
	t_assert_eq(victim(LOW_ZERO_GONE), 1); /* ... while it is held */
	return T_PASS;
}
