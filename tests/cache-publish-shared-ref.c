// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * A block whose pages several sequences share while uncached, published
 * by one of them, stays referenced for every sequence using it.  A real
 * kvmmd (1 cached GPU block, lru, restores 300 ms): X is on the host
 * tier and G pinned on the GPU, so the restore of X for two openers (A,
 * then B waiting for the same restore) stays below: both get the same
 * uncached pages.  A publishes X from them (a promotion) and closes its
 * sequence; B still uses them.  Y is then published: X, in use, is not
 * the GPU's victim, and a new open of X shares B's pages from the GPU.
 * Before, the publish took one policy reference for the two users, A's
 * close dropped it, and X was evicted (copied down while B kept the
 * pages; the new open reloaded it from the host tier: found by a review).
 */
#include "tests/cache-restore-common.h"

static const uint64_t X = 0x7700001, G = 0x7800001, Y = 0x7900001;

static void publish1(const char *sock, uint64_t h, uint64_t tag)
{
	t_assert_eq(cc_publish_content(sock, &h, 1, tag, NULL), 0);
}

/* An opener of [X]; A (publisher) publishes it from its own sequence
 * when told. */
static int opener(const char *sock, int wr, int rd, bool publisher)
{
	struct kvmm_prefix_open_reply rep;
	struct kvmm_block_publish_reply pr;
	uint32_t ids[CC_PPB];
	uint64_t h = X;
	struct cc c;
	char go;

	cc_connect(&c, sock);
	cc_region(&c);
	cc_prefix(&c, &h, 1, &rep, ids);
	t_assert_eq(rep.nr_blocks, 1);
	t_assert_eq(rep.from_host, 1);
	if (write(wr, "r", 1) != 1 || read(rd, &go, 1) != 1)
		return 1;
	if (publisher) {
		t_ok(cc_publish(&c, rep.seq_id, 0, &h, 1, &pr));
		t_assert_eq(pr.promoted, 1);
		cc_seq_close(&c, rep.seq_id, ids, CC_PPB);
		if (write(wr, "d", 1) != 1 || read(rd, &go, 1) != 1)
			return 2;
		cc_disconnect(&c);
		return 0;
	}
	cc_check(&c, ids, 1, 500);
	cc_seq_close(&c, rep.seq_id, ids, CC_PPB);
	cc_disconnect(&c);
	return 0;
}

int main(void)
{
	const char *args[] = { "--gpu-mem",
			       "4M",
			       "--cache-gpu-blocks",
			       "1",
			       "--host-mem",
			       "2M",
			       "--cache-policy",
			       "lru",
			       "--pin-quota",
			       "8",
			       NULL };
	int pa[2], ca[2], pb[2], cb[2];
	struct kvmm_tier_stats_reply ts;
	struct kvmm_pin_opts o;
	struct kvmm_conn *pc;
	struct td_daemon d;
	struct cc m;
	pid_t a, b;
	char x;

	setenv("KVMMD_TEST_RESTORE_DELAY_MS", "300", 1);
	cc_start(&d, args);
	unsetenv("KVMMD_TEST_RESTORE_DELAY_MS");
	publish1(d.sock, X, 500); /* GPU: X */
	publish1(d.sock, G, 501); /* GPU: G, host: X */
	pc = cc_connect_lib(d.sock, "pinner");
	t_ok(cc_pin(pc, G, KVMM_PIN_F_TTL, 60000000000ull, 0, &o));
	t_ok(cc_pin(pc, X, 0, 0, 0, &o));
	t_assert_eq(o.tier, 1); /* X on the host tier */

	t_ok(pipe(pa));
	t_ok(pipe(ca));
	t_ok(pipe(pb));
	t_ok(pipe(cb));
	fflush(NULL);
	a = fork();
	if (!a) {
		/* only the parent writes these: a parent that fails ends
		 * the children's reads */
		close(ca[1]);
		close(cb[1]);
		_exit(opener(d.sock, pa[1], ca[0], true));
	}
	cc_connect(&m, d.sock);
	cr_wait_pending(&m, 1);
	b = fork();
	if (!b) {
		close(ca[1]);
		close(cb[1]);
		_exit(opener(d.sock, pb[1], cb[0], false));
	}
	t_assert_eq(read(pa[0], &x, 1), 1);
	t_assert_eq(read(pb[0], &x, 1), 1);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.restores_waited, 1); /* B joined A's restore */
	t_assert_eq(ts.tiers[0].used_blocks, 1); /* G: X stayed below */
	t_ok(kvmm_block_unpin(pc, G));
	t_ok(kvmm_block_unpin(pc, X));
	t_assert_eq(write(ca[1], "p", 1), 1);
	t_assert_eq(read(pa[0], &x, 1), 1);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.held_copies, 0);
	/* Y comes: the GPU tier (capacity 1) needs a victim; X is in use by B */
	publish1(d.sock, Y, 502);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[0].used_blocks, 1); /* X, in use */
	{
		struct kvmm_prefix_open_reply rep;
		uint32_t ids[CC_PPB];
		uint64_t h = X;
		struct cc c;

		cc_connect(&c, d.sock);
		cc_region(&c);
		cc_prefix(&c, &h, 1, &rep, ids);
		t_assert_eq(rep.from_gpu, 1); /* shared, not reloaded */
		t_assert_eq(rep.from_host, 0);
		cc_check(&c, ids, 1, 500);
		cc_seq_close(&c, rep.seq_id, ids, rep.nr_blocks * CC_PPB);
		cc_disconnect(&c);
	}
	t_assert_eq(write(ca[1], "c", 1), 1);
	t_assert_eq(write(cb[1], "c", 1), 1);
	t_assert_eq(cc_wait_child(a), 0);
	t_assert_eq(cc_wait_child(b), 0);
	cc_disconnect(&m);
	kvmm_disconnect(pc);
	cc_stop(&d);
	printf("ok\n");
	return 0;
}
