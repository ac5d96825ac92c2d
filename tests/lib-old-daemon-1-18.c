// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * libkvmm against a kvmmd that plays a daemon of ABI 1.18
 * (KVMMD_TEST_ABI_MINOR=18, a kvmmd test knob): its HELLO says 1.18, the
 * commands of 1.19 (PREFIX_QUERY, BLOCK_PIN_MANY) are unknown to it
 * (-ENOTTY), its ADMIN_STATUS is the 576 bytes of 1.18 and its
 * TIER_STATS the 648 of 1.17-1.19, and each client is served as one of
 * at most 1.18.
 *
 *   - kvmm_prefix_query() and kvmm_block_pin_many() answer -EOPNOTSUPP
 *     without sending anything (the session's socket commands, as kvmmd
 *     counts them, do not move); the same requests sent raw are -ENOTTY;
 *   - what 1.18 had still works: a content published by a writer process
 *     is found by a prefix open (shared from the GPU), pinned one block a
 *     call, counted by kvmm_tier_stats(); a revoked publish is -EINVAL
 *     (not 1.20's -ESTALE);
 *   - kvmmctl status and --json status leave out what 1.19 and 1.20 added
 *     (the blocks ahead line, the router counters; `lend`, `router`,
 *     `max_sessions`, `quarantine_per_uid`), and name the bounds of
 *     before (--max-sessions 1024, 256 quarantined processes).
 *
 * tests/python-old-daemon.sh does the same for the Python binding.
 */
#include "tests/cache-common.h"
#include "tests/lib/admin_revoke.h"
#include "tests/lib/daemon.h"

#define NB 3

static const struct cc_contents contents = { .base = 0x7d0000,
					     .tag0 = 20,
					     .nb = NB };

/* The socket commands kvmmd counted for c's session (STATS itself is
 * one of them). */
static uint64_t sent(struct kvmm_conn *c)
{
	struct kvmm_stats ks = { .size = sizeof(ks) };

	t_ok(kvmm_get_stats(c, &ks));
	return ks.cmds_socket;
}

static void not_sent(struct kvmm_conn *c, struct kvmm_region *r)
{
	struct kvmm_daemon_info di = { .size = sizeof(di) };
	struct kvmm_pin_opts po = { .size = sizeof(po) };
	uint64_t h[NB], before;
	int32_t res[NB];
	uint8_t tiers[NB];

	t_ok(kvmm_get_daemon_info(c, &di));
	t_assert_eq(di.abi_minor, 18);
	cc_content_hashes(&contents, 0, h);
	before = sent(c);
	t_assert_eq(sent(c), before + 1); /* STATS is counted */
	before = sent(c);
	t_assert_eq(kvmm_prefix_query(r, h, NB, tiers, 0), -EOPNOTSUPP);
	t_assert_eq(kvmm_block_pin_many(c, h, NB, &po, res), -EOPNOTSUPP);
	t_assert_eq(kvmm_block_pin_many(c, h, NB, NULL, NULL), -EOPNOTSUPP);
	t_assert_eq(sent(c), before + 1);
}

/* The 1.19 commands sent raw anyway: unknown to a 1.18 daemon. */
static void raw_unknown(const char *sock)
{
	struct {
		struct kvmm_prefix_query q;
		uint64_t h[1];
	} pq;
	struct {
		struct kvmm_block_pin_many m;
		uint64_t h[1];
	} pm;
	char rep[256];
	struct cc c;

	cc_connect(&c, sock);
	cc_region(&c);
	memset(&pq, 0, sizeof(pq));
	pq.q.size = sizeof(pq.q);
	pq.q.region_id = c.region;
	pq.q.nr_hashes = 1;
	pq.h[0] = 1;
	t_assert_eq(cc_call(&c, KVMM_CMD_PREFIX_QUERY, &pq, sizeof(pq), rep,
			    sizeof(rep), NULL, NULL),
		    -ENOTTY);
	memset(&pm, 0, sizeof(pm));
	pm.m.size = sizeof(pm.m);
	pm.m.nr_hashes = 1;
	pm.h[0] = 1;
	t_assert_eq(cc_call(&c, KVMM_CMD_BLOCK_PIN_MANY, &pm, sizeof(pm), rep,
			    sizeof(rep), NULL, NULL),
		    -ENOTTY);
	cc_disconnect(&c);
}

/* What 1.18 had: a shared prefix, single pins, the cache counters. */
static void still_works(struct kvmm_conn *c, struct kvmm_region *r)
{
	struct kvmm_prefix_opts o = { .size = sizeof(o) };
	struct kvmm_pin_opts po = { .size = sizeof(po) };
	struct kvmm_tier_stats_reply ts;
	/* 0 is no action: a block the open did not report reads as none */
	uint8_t acts[NB] = { 0 };
	uint32_t seq, n;
	uint64_t h[NB];

	cc_content_hashes(&contents, 0, h);
	o.actions = acts;
	t_ok(kvmm_seq_open_prefix_opts(r, h, NB, &seq, &n, &o));
	t_assert_eq(n, NB);
	t_assert_eq(o.shared, NB);
	for (int b = 0; b < NB; b++)
		t_assert_eq(acts[b], KVMM_BLOCK_GPU_SHARED);
	t_assert(cc_seq_content_ok(r, seq, NB, contents.tag0, 4096));
	t_ok(kvmm_seq_close(r, seq));
	for (int b = 0; b < NB; b++) {
		t_ok(kvmm_block_pin(c, h[b], &po));
		t_assert_eq(po.tier, 0);
		t_assert_eq(po.pins, (uint32_t)b + 1);
	}
	t_ok(kvmm_tier_stats(c, &ts, sizeof(ts)));
	/* the 648 bytes of 1.17 to 1.19 (1.20 appended blocks_unshared) */
	t_assert_eq(ts.size,
		    offsetof(struct kvmm_tier_stats_reply, blocks_unshared));
	t_assert_eq(ts.blocks_unshared, 0);
	t_assert_eq(ts.publishes, NB);
	t_assert_eq(ts.prefix_blocks_hit, NB);
	for (int b = 0; b < NB; b++)
		t_ok(kvmm_block_unpin(c, h[b]));
}

/* A publish of blocks an admin revoked: -EINVAL, as a 1.18 daemon said. */
static void revoked_publish(const char *sock, struct kvmm_conn *c,
			    struct kvmm_region *r)
{
	struct kvmm_stats ks = { .size = sizeof(ks) };
	uint64_t h[2] = { 0x7d9001, 0x7d9002 };
	uint32_t seq;

	t_ok(kvmm_seq_open(r, &seq));
	t_ok(kvmm_seq_extend(r, seq, 2 * CC_TPB));
	t_ok(kvmm_get_stats(c, &ks));
	t_ok(ar_revoke(sock, ks.session_id, r->id, seq, 1));
	t_assert_eq(kvmm_block_publish(r, seq, 0, 2, 0, h), -EINVAL);
	t_assert(kvmm_process_revocations(c) >= CC_PPB);
	t_ok(kvmm_seq_close(r, seq));
}

static void tools(const struct td_daemon *d)
{
	static char out[1 << 16];
	struct kvmm_status_reply st;

	t_ok(td_status(d, &st));
	t_assert_eq(st.size, offsetof(struct kvmm_status_reply, lend_requests));
	t_assert_eq(st.size, 576);
	t_assert_eq(st.max_sessions, 0); /* not sent: read as 0 */
	t_assert_eq(td_kvmmctl(d->sock, "status", out, sizeof(out)), 0);
	if (strstr(out, "\nqueries ") || strstr(out, "\npin many ") ||
	    strstr(out, "\nblocks ahead "))
		t_fail("kvmmctl status shows what 1.18 did not send:\n%s", out);
	t_assert_eq(td_kvmmctl(d->sock, "--json status", out, sizeof(out)), 0);
	if (strstr(out, "\"router\"") || strstr(out, "\"lend\"") ||
	    strstr(out, "\"max_sessions\"") ||
	    strstr(out, "\"quarantine_per_uid\"") ||
	    !strstr(out, "\"ro_fd_unkept_opens\""))
		t_fail("kvmmctl --json status against 1.18:\n%s", out);
	t_assert_eq(td_kvmmctl(d->sock, "metrics", out, sizeof(out)), 0);
	if (strstr(out, "kvmm_prefix_queries_total") ||
	    strstr(out, "kvmm_lend_requests_total") ||
	    !strstr(out, "kvmm_pool_ro_fds ") || !strstr(out, "abi=\"1.18\""))
		t_fail("kvmmctl metrics against 1.18:\n%s", out);
}

int main(void)
{
	struct kvmm_region_opts ro = cc_region_opts();
	struct kvmm_region *r;
	struct kvmm_conn *c;
	struct td_daemon d;

	cc_start_with_delay(&d, NULL, "KVMMD_TEST_ABI_MINOR", 18);
	cc_write_content(d.sock, &contents, 0);
	c = cc_connect_lib(d.sock, "old-daemon");
	t_ok(kvmm_region_create(c, &ro, &r));
	not_sent(c, r);
	raw_unknown(d.sock);
	still_works(c, r);
	revoked_publish(d.sock, c, r);
	kvmm_region_destroy(r);
	kvmm_disconnect(c);
	tools(&d);
	cc_stop(&d);
	return 0;
}
