// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * A PREFIX_OPEN takes pool pages only in line: not the pages earmarked for
 * a command parked before it.  A real kvmmd whose pool (8 blocks) is full
 * of cached blocks, demotion copies slowed down to DELAY each by
 * KVMMD_TEST_DEMOTE_DELAY_MS (two copy workers), real client processes.
 *
 * Client A's 3-block extend parks for its 3 victims' copies (blocks Y, Z,
 * X, the least recently used); after DELAY Y and Z are in the host tier
 * and their 2 blocks are free, earmarked for A, while X's copy runs until
 * 2 DELAY.  Then:
 *   1. a PREFIX_OPEN of X Y Z with KVMM_PREFIX_OPEN_ACTIONS (kvmmd
 *      --restore-mode recompute: fresh pages for all three, X being the
 *      block still moving) must not take those 2 blocks: it parks behind
 *      A, A is served when X's copy ends (2 DELAY), and the open gets its
 *      3 blocks to recompute after A, from victims of its own (6
 *      pressure reclaims in all, 3 each).  Before, the recompute pages of
 *      a prefix starting with a block being demoted were not counted in
 *      the room the open made: it took A's 2 free blocks at once and
 *      answered with 2 of 3 blocks, and A, short again, took 2 more
 *      victims and waited for their copies.
 *   2. a PREFIX_OPEN of X alone, without actions (X is restored once its
 *      copy ended): X's restore must not take the pages X's copy gave
 *      back, which complete A's earmark: A is served at 2 DELAY, before
 *      the open is answered, and no victim beyond A's 3 is taken.  Before,
 *      the restore took one of them and A waited for one more victim's
 *      copy (3 DELAY).
 * Both again with --cache-scope uid: a parked PREFIX_OPEN runs again with
 * its hashes renamed once, as read (renamed a second time, it found none
 * of its blocks).
 */
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>

#include "tests/cache-common.h"
#include "tests/lib/daemon.h"

#define DELAY 800
/* A is served when X's copy ends (2 DELAY after it parked), with room for
 * a loaded machine; before the fix it needed one more copy (3 DELAY) */
#define A_LATEST (2 * DELAY + 3 * DELAY / 4)

static const uint64_t hx = 0x8400001, hy = 0x8400002, hz = 0x8400003;

static void publish_one(struct td_daemon *d, uint64_t h, uint64_t tag)
{
	t_assert_eq(cc_publish_content(d->sock, &h, 1, tag, NULL), 0);
}

/*
 * A process that extends a new sequence to nb blocks, writes its status
 * and the time of the reply (cc_now_ms()) to out_fd, keeps the pages
 * until it reads a byte from hold_fd, closes the sequence and exits.
 */
static pid_t extender(const char *sock, uint32_t nb, int out_fd, int hold_fd)
{
	pid_t p = fork();

	t_assert(p >= 0);
	if (p == 0) {
		uint32_t ids[16 * CC_PPB];
		int64_t res[2];
		uint32_t seq;
		struct cc c;
		char ch;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		cc_connect(&c, sock);
		cc_region(&c);
		seq = cc_seq_open(&c);
		res[0] = cc_try_extend(&c, seq, nb * CC_TPB, ids);
		res[1] = (int64_t)cc_now_ms();
		if (!res[0]) {
			cc_fill(&c, ids, nb, 9);
			cc_check(&c, ids, nb, 9);
		}
		t_assert_eq(write(out_fd, res, sizeof(res)), sizeof(res));
		t_assert_eq(read(hold_fd, &ch, 1), 1);
		if (!res[0])
			cc_seq_close(&c, seq, ids, nb * CC_PPB);
		cc_disconnect(&c);
		_exit(0);
	}
	return p;
}

/* A PREFIX_OPEN with flags (cc_prefix_send() sends none). */
static void prefix_send_flags(struct cc *c, const uint64_t *hashes, uint32_t n,
			      uint32_t flags)
{
	char req[sizeof(struct kvmm_prefix_open) + 8 * 8];
	struct kvmm_prefix_open po = { .size = sizeof(po),
				       .region_id = c->region,
				       .nr_hashes = n,
				       .flags = flags };

	t_assert(n <= 8);
	memcpy(req, &po, sizeof(po));
	memcpy(req + sizeof(po), hashes, n * 8);
	cc_send(c, KVMM_CMD_PREFIX_OPEN, req, sizeof(po) + n * 8);
}

/*
 * The set-up both cases share: kvmmd started, Y Z X published in that
 * order (one block each) and 5 filler blocks after them (the pool is
 * full); A's 3-block extend parked, Y's and Z's copies done (2 blocks
 * free, earmarked for A), X's running.  Returns A's pid; t0 when A parked.
 */
static const char *scope = "shared"; /* --cache-scope */

static pid_t setup(struct td_daemon *d, int *fa, int *hold, uint64_t *t0)
{
	const char *args[] = { "--gpu-mem",
			       "2M",
			       "--cache-gpu-blocks",
			       "8",
			       "--host-mem",
			       "4M",
			       "--restore-mode",
			       "recompute",
			       "--cache-policy",
			       "lru",
			       "--cache-scope",
			       scope,
			       NULL };
	struct kvmm_tier_stats_reply ts;
	struct kvmm_status_reply st;
	uint64_t fill[5];
	pid_t a;
	int i;

	cc_start_with_delay(d, args, "KVMMD_TEST_DEMOTE_DELAY_MS", DELAY);
	publish_one(d, hy, 801);
	publish_one(d, hz, 802);
	publish_one(d, hx, 803);
	for (int b = 0; b < 5; b++)
		fill[b] = 0x8410000 + b + 1;
	t_assert_eq(cc_publish_content(d->sock, fill, 5, 804, NULL), 0);
	cc_settled_stats(d->sock, &ts);
	t_assert_eq(ts.tiers[0].used_blocks, 8);
	t_ok(td_status(d, &st));
	t_assert_eq(st.pages_free, 0);

	t_ok(pipe(fa));
	t_ok(pipe(hold));
	*t0 = cc_now_ms();
	a = extender(d->sock, 3, fa[1], hold[0]);
	cc_wait_parked(d, 1);
	/* Y's and Z's copies end (two workers), X's starts then */
	for (i = 0; i < 5000; i++) {
		t_ok(td_status(d, &st));
		if (st.pages_free >= 2 * CC_PPB)
			break;
		usleep(1000);
	}
	t_assert_eq(st.pages_free, 2 * CC_PPB);
	t_assert_eq(st.cmds_parked_now, 1);
	return a;
}

/* A's reply: its status must be 0; returns when it came (ms after t0). */
static int64_t a_served(pid_t a, int *fa, int *hold, uint64_t t0)
{
	int64_t res[2];

	t_assert_eq(read(fa[0], res, sizeof(res)), sizeof(res));
	t_assert_eq(res[0], 0);
	t_assert_eq(write(hold[1], "r", 1), 1);
	t_assert_eq(cc_wait_child(a), 0);
	close(fa[0]);
	close(fa[1]);
	close(hold[0]);
	close(hold[1]);
	return res[1] - (int64_t)t0;
}

/* 1. Recompute pages are taken in line. */
static void recompute_in_line(void)
{
	static char buf[KVMM_MSG_MAX];
	static int fds[CC_MAX_PAGES];
	struct kvmm_prefix_open_reply *rep = (void *)buf;
	const uint64_t h[3] = { hx, hy, hz };
	struct kvmm_tier_stats_reply ts;
	struct kvmm_status_reply st;
	uint64_t parked_at_reply;
	int fa[2], hold[2];
	int64_t t_a, t_open;
	unsigned int nfds;
	struct td_daemon d;
	uint64_t t0;
	const uint8_t *acts;
	struct cc c;
	pid_t a;

	a = setup(&d, fa, hold, &t0);
	cc_connect(&c, d.sock);
	cc_region(&c);
	prefix_send_flags(&c, h, 3, KVMM_PREFIX_OPEN_ACTIONS);
	t_ok(cc_recv(&c, buf, sizeof(buf), fds, &nfds));
	t_open = (int64_t)(cc_now_ms() - t0);
	/* A parked first: it is no longer parked when the open is answered */
	t_ok(td_status(&d, &st));
	parked_at_reply = st.cmds_parked_now;
	t_a = a_served(a, fa, hold, t0);
	printf("recompute: A (3 blocks, parked first) served after %lld ms, the open after %lld ms: %u blocks, %u to recompute\n",
	       (long long)t_a, (long long)t_open, rep->nr_blocks,
	       rep->nr_recompute);
	if (rep->nr_blocks != 3 || rep->nr_recompute != 3)
		t_fail("the open got %u blocks (%u to recompute), expected 3 to recompute",
		       rep->nr_blocks, rep->nr_recompute);
	acts = (const uint8_t *)(rep->page_ids + 3 * CC_PPB);
	for (int b = 0; b < 3; b++)
		t_assert_eq(acts[b], KVMM_BLOCK_RECOMPUTE);
	t_assert_eq(nfds, 3 * CC_PPB);
	for (unsigned int i = 0; i < nfds; i++)
		close(fds[i]);
	if (parked_at_reply)
		t_fail("the open was answered while A, parked before it, still waited");
	/* A needs X's copy, not more: served when it ends */
	if (t_a > A_LATEST)
		t_fail("A took %lld ms; its copies end after %d ms",
		       (long long)t_a, 2 * DELAY);
	cc_settled_stats(d.sock, &ts);
	/* 3 victims for A, 3 for the open: none taken twice */
	t_assert_eq(ts.pressure_reclaims, 6);
	t_ok(td_status(&d, &st));
	t_assert_eq(st.cmds_parked, 2);
	t_assert_eq(st.cmds_parked_now, 0);
	cc_disconnect(&c);
	t_assert_eq(td_stop(&d), 0);
}

/* 2. The restore of a block whose demotion just ended is in line too. */
static void busy_restore_in_line(void)
{
	struct kvmm_prefix_open_reply prep;
	struct kvmm_tier_stats_reply ts;
	struct kvmm_status_reply st;
	uint32_t ids[CC_PPB];
	int fa[2], hold[2];
	int64_t t_a, t_open;
	struct td_daemon d;
	uint64_t t0;
	struct cc c;
	pid_t a;

	a = setup(&d, fa, hold, &t0);
	cc_connect(&c, d.sock);
	cc_region(&c);
	cc_prefix(&c, &hx, 1, &prep, ids);
	t_open = (int64_t)(cc_now_ms() - t0);
	t_ok(td_status(&d, &st));
	t_a = a_served(a, fa, hold, t0);
	printf("busy restore: A served after %lld ms, the open after %lld ms: %u blocks (host %u)\n",
	       (long long)t_a, (long long)t_open, prep.nr_blocks,
	       prep.from_host);
	if (st.cmds_parked_now)
		t_fail("the open was answered while A, parked before it, still waited");
	if (t_a > A_LATEST)
		t_fail("A took %lld ms; its copies end after %d ms",
		       (long long)t_a, 2 * DELAY);
	/* what the open got is right: X restored, or a busy miss (the pool
	 * was A's when X's copy ended; a restore takes no victims) */
	t_assert(prep.nr_blocks <= 1);
	if (prep.nr_blocks)
		cc_check(&c, ids, 1, 803);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.pressure_reclaims, 3);
	t_assert_eq(ts.busy_misses, 1 - prep.nr_blocks);
	cc_disconnect(&c);
	t_assert_eq(td_stop(&d), 0);
}

int main(void)
{
	recompute_in_line();
	busy_restore_in_line();
	scope = "uid";
	recompute_in_line();
	busy_restore_in_line();
	printf("prefix opens take pages in line ok (shared and uid scopes)\n");
	return 0;
}
