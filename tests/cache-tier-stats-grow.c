// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * TIER_STATS grew at its end in ABI 1.7: prefix_holes,
 * prefix_blocks_after_hole, plan_recomputes_host/_nvme, held_copies (the
 * holes and held copies are counted in tests/cache-prefix-segments.c and
 * tests/cache-held-demote.c).  Real kvmmd, real kvmmctl processes:
 *   - kvmmd --restore-mode recompute with contents in all three tiers
 *     (cr_fill_tiers(): content 2 has 2 blocks on NVMe and 6 on the
 *     host): a libkvmm open of content 2 with actions gets all 8 blocks as
 *     RECOMPUTE, counted as 6 host and 2 NVMe plan recomputes and still
 *     as hits of their tiers; an open of content 1 without actions
 *     reloads its 8 NVMe blocks (no plan recompute); a segmented open
 *     of [never cached, a GPU block, a host block] is a hole, a block
 *     shared after it and one more host plan recompute (not a block
 *     reused after the hole).  kvmmctl status (text and --json) and
 *     kvmmctl metrics print 7, 2, 1 hole and 1 block after it;
 *   - the reply is sizeof(struct kvmm_tier_stats_reply) bytes and its size
 *     says so; a client built for 1.6 (a buffer of the 1.6 size: the
 *     request has no body, so the client cannot choose a size, as with
 *     ADMIN_STATUS) reads the same leading fields; a request with a body
 *     too short for 1.21's struct kvmm_tier_stats_req is -EINVAL;
 *   - kvmmctl against a 1.6 daemon (a stand-in process: no such daemon
 *     runs here) that answers HELLO with ABI 1.6 and TIER_STATS with the
 *     1.6 reply (440 bytes, known values): status, status --json and
 *     metrics print the old fields with their values and none of the new
 *     ones (absent, not 0);
 *   - the same against a 1.14 daemon (its 560-byte reply): its
 *     fields shown, 1.15's (lower_free_refused, the NVMe invalidation
 *     counters, the NVMe tier's opens) absent from all three; a client built for 1.14 reads
 *     the first 560 bytes of a 1.15 daemon's 616, the same as they are;
 *   - the same against a 1.16 daemon (616 bytes): the NVMe tier's opens
 *     shown, 1.17's failed NVMe writes (nvme_write_*) absent from all
 *     three, and with its 536-byte ADMIN_STATUS the 1.18 read-only fd
 *     counters (ro_fd*, the `read-only` line, kvmm_pool_ro_fd*) and
 *     1.19's blocks ahead asked back (lend, `blocks ahead`, kvmm_lend_*)
 *     too; a client built for 1.16 reads the first 616 bytes of a
 *     1.17 daemon's 648, the same as they are, and one built for 1.19
 *     the first 648 bytes of a 1.20 daemon's 656 (blocks_unshared); a
 *     client whose HELLO says 1.20 is sent those 656 bytes alone (the
 *     680 of 1.21 end with the block size and the sizes cached), and
 *     its TIER_STATS with a body is -EINVAL, as a 1.20 daemon's was;
 *     one whose HELLO says 1.22 the 680 bytes alone (the 696 of 1.23
 *     end with the kept NVMe blocks' restamp totals), and one whose
 *     HELLO says 1.23 the 696 bytes alone (the 728 of 1.24 end with
 *     the recovered blocks' cold counts), and one whose HELLO says 1.24
 *     the 728 bytes alone (the 744 of 1.25 end with each size's
 *     weight);
 *   - an early segmented open (KVMM_PREFIX_OPEN_EARLY) of [never cached,
 *     two host blocks], restores slowed to 200 ms, the first host->GPU
 *     restore failing (KVMMD_TEST_MIGRATE_FAIL): right after the reply 1
 *     hole and no block reused after it (both still load); once they
 *     settled, 1 (the one that landed; the failed one is recomputed, no
 *     block reused after the hole), as with their hits.
 */
#include <stddef.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "kvmm/lib/client.h"
#include "tests/cache-restore-common.h"
#include "tests/lib/metrics.h"

/* The reply's size before ABI 1.7, and before 1.15. */
#define TS_SIZE_1_6 offsetof(struct kvmm_tier_stats_reply, prefix_holes)
#define TS_SIZE_1_14 offsetof(struct kvmm_tier_stats_reply, lower_free_refused)
/* ... and before 1.17 */
#define TS_SIZE_1_16 offsetof(struct kvmm_tier_stats_reply, nvme_write_returns)
/* ... and before 1.20, and before 1.21 */
#define TS_SIZE_1_19 offsetof(struct kvmm_tier_stats_reply, blocks_unshared)
#define TS_SIZE_1_20 offsetof(struct kvmm_tier_stats_reply, block_pages)
/* ... and before 1.23 */
#define TS_SIZE_1_22 offsetof(struct kvmm_tier_stats_reply, nvme_restamped)
/* ... and before 1.24, and before 1.25 */
#define TS_SIZE_1_23 offsetof(struct kvmm_tier_stats_reply, cold_blocks)
#define TS_SIZE_1_24 offsetof(struct kvmm_tier_stats_reply, weights)
/* ADMIN_STATUS's before 1.18 */
#define ST_SIZE_1_17 offsetof(struct kvmm_status_reply, page_ro_fds)

/*
 * TIER_STATS for a client of ABI 1.minor (old, connected here; the caller
 * disconnects): the reply is size bytes, the same as full's first size
 * bytes but its size field; what it did not write of r stays 0xa5.
 */
static void old_client_stats(struct cc *old, const char *sock, uint16_t minor,
			     size_t size,
			     const struct kvmm_tier_stats_reply *full,
			     struct kvmm_tier_stats_reply *r)
{
	cc_connect_minor(old, sock, minor);
	memset(r, 0xa5, sizeof(*r));
	t_ok(cc_call(old, KVMM_CMD_TIER_STATS, NULL, 0, r, sizeof(*r), NULL,
		     NULL));
	t_assert_eq(r->size, size);
	t_assert(!memcmp((char *)r + 4, (const char *)full + 4, size - 4));
}

static void plan_recomputes(void)
{
	struct kvmm_tier_stats_reply ts0, ts;
	struct kvmm_region_opts ro = cc_region_opts();
	struct kvmm_connect_opts co = { .size = sizeof(co) };
	/* 0 is no action: a block an open did not report reads as none */
	uint8_t acts[CR_NB] = { 0 };
	struct kvmm_prefix_opts po = { .size = sizeof(po), .actions = acts };
	struct kvmm_region *reg;
	struct kvmm_conn *c;
	struct cr_env env;
	uint64_t h[CR_NB];
	uint32_t seq, nb;
	char *out;

	cr_start_args(&env, 40, 0, "--restore-mode", "recompute");
	cr_fill_tiers(&env, &ts0);
	t_assert_eq(ts0.plan_recomputes_host + ts0.plan_recomputes_nvme, 0);

	co.socket_path = env.d.sock;
	co.name = "tier-stats-grow";
	t_ok(kvmm_connect(&co, &c));
	t_ok(kvmm_region_create(c, &ro, &reg));
	for (int b = 0; b < CR_NB; b++)
		h[b] = cr_hash(2, b);
	t_ok(kvmm_seq_open_prefix_opts(reg, h, CR_NB, &seq, &nb, &po));
	printf("recompute mode, content 2: %u blocks, %u shared, %u reloaded, %u to recompute\n",
	       nb, po.shared, po.reloaded_host + po.reloaded_nvme,
	       po.recompute);
	t_assert_eq(nb, CR_NB);
	t_assert_eq(po.recompute, CR_NB);
	t_ok(kvmm_seq_close(reg, seq));
	/* segmented: a hole, a GPU block shared after it, a host block
	 * recomputed (a plan recompute, not a block reused after the hole) */
	h[0] = 0x7fff0001ull; /* never cached */
	h[1] = cr_hash(3, 0);
	h[2] = cr_hash(2, 2);
	po.flags = KVMM_PREFIX_OPEN_SEGMENTS;
	memset(acts, 0, sizeof(acts)); /* not the first open's */
	t_ok(kvmm_seq_open_prefix_opts(reg, h, 3, &seq, &nb, &po));
	printf("segmented: %u blocks: %s %s %s\n", nb,
	       kvmm_block_action_string(acts[0]),
	       kvmm_block_action_string(acts[1]),
	       kvmm_block_action_string(acts[2]));
	t_assert_eq(nb, 3);
	t_assert_eq(acts[0], KVMM_BLOCK_RECOMPUTE);
	t_assert_eq(acts[1], KVMM_BLOCK_GPU_SHARED);
	t_assert_eq(acts[2], KVMM_BLOCK_RECOMPUTE);
	t_ok(kvmm_seq_close(reg, seq));
	/* without actions every block is reloaded */
	for (int b = 0; b < CR_NB; b++)
		h[b] = cr_hash(1, b);
	t_ok(kvmm_seq_open_prefix(reg, h, CR_NB, &seq, &nb));
	t_assert_eq(nb, CR_NB);
	t_ok(kvmm_seq_close(reg, seq));
	kvmm_disconnect(c);

	cc_settled_stats(env.d.sock, &ts);
	printf("plan recomputes: host %llu, nvme %llu; hits host +%llu, nvme +%llu\n",
	       (unsigned long long)ts.plan_recomputes_host,
	       (unsigned long long)ts.plan_recomputes_nvme,
	       (unsigned long long)(ts.tiers[1].hits - ts0.tiers[1].hits),
	       (unsigned long long)(ts.tiers[2].hits - ts0.tiers[2].hits));
	t_assert_eq(ts.size, sizeof(ts));
	t_assert_eq(ts.plan_recomputes_host, 6 + 1);
	t_assert_eq(ts.plan_recomputes_nvme, 2);
	t_assert_eq(ts.prefix_holes, 1);
	t_assert_eq(ts.prefix_blocks_after_hole, 1);
	/* hits all the same: content 2's 6 host + 2 NVMe, the segmented
	 * open's GPU and host blocks (not the hole), content 1's 8 */
	t_assert_eq(ts.tiers[0].hits - ts0.tiers[0].hits, 1);
	t_assert_eq(ts.tiers[1].hits - ts0.tiers[1].hits, 6 + 1);
	t_assert_eq(ts.tiers[2].hits - ts0.tiers[2].hits, 2 + CR_NB);
	t_assert_eq(ts.tiers[2].promotions_out - ts0.tiers[2].promotions_out,
		    CR_NB);
	t_assert_eq(ts.tiers[1].promotions_out - ts0.tiers[1].promotions_out,
		    0);
	t_assert_eq(ts.held_copies, 0);

	out = tm_kvmmctl(env.d.sock, "status --json");
	t_assert_has(out, "\"plan_recomputes\":{\"host\":7,\"nvme\":2}");
	t_assert_has(out, "\"prefix_holes\":1,\"prefix_blocks_after_hole\":1,");
	t_assert_has(out, "\"held_copies\":0,");
	free(out);
	out = tm_kvmmctl(env.d.sock, "status");
	t_assert_has(
		out,
		"recompute    1 holes, 1 blocks reused after one; 7 host, 2 NVMe blocks recomputed instead of reloaded\n");
	t_assert_has(out, ", 0 held blocks copied down\n");
	free(out);
	out = tm_kvmmctl(env.d.sock, "metrics");
	t_assert_has(out,
		     "\nkvmm_cache_plan_recomputes_total{tier=\"host\"} 7\n");
	t_assert_has(out,
		     "\nkvmm_cache_plan_recomputes_total{tier=\"nvme\"} 2\n");
	t_assert_has(out, "\nkvmm_cache_prefix_holes_total 1\n");
	t_assert_has(out, "\nkvmm_cache_prefix_blocks_after_hole_total 1\n");
	t_assert_has(out, "\nkvmm_cache_held_copies_total 0\n");
	free(out);

	/* the reply's length, and a 1.6 client's view of it */
	{
		struct kvmm_tier_stats_reply full;
		char old[TS_SIZE_1_6];
		struct kvmm_conn *a;
		uint32_t body = 4;
		size_t len = 0;

		t_ok(kc_connect_admin(env.d.sock, &a));
		t_ok(kc_request(a, KVMM_CMD_TIER_STATS, NULL, 0, &full,
				sizeof(full), &len));
		t_assert_eq(len, sizeof(full));
		t_assert_eq(full.size, sizeof(full));
		/* 1.21's tail: the sum (no body), one size cached */
		t_assert_eq(full.block_pages, 0);
		t_assert_eq(full.nr_sizes, 1);
		t_assert(full.sizes[0] > 0);
		t_assert_eq(full.sizes[1], 0);
		t_assert_eq(TS_SIZE_1_6, 440);
		len = 0;
		t_ok(kc_request(a, KVMM_CMD_TIER_STATS, NULL, 0, old,
				sizeof(old), &len));
		t_assert_eq(len, sizeof(full));
		/* the same counters where a 1.6 client has them (nothing
		 * moves: the daemon settled, only this session is open) */
		t_assert(!memcmp(old, &full, sizeof(old)));
		/* and a 1.14 client's: the 560 bytes before 1.15's fields */
		t_assert_eq(TS_SIZE_1_14, 560);
		t_assert_eq(TS_SIZE_1_16, TS_SIZE_1_14 + 32 + 24);
		t_assert_eq(TS_SIZE_1_16, 616);
		t_assert_eq(TS_SIZE_1_19, TS_SIZE_1_16 + 32);
		t_assert_eq(TS_SIZE_1_20, TS_SIZE_1_19 + 8);
		t_assert_eq(TS_SIZE_1_20, 656);
		t_assert_eq(TS_SIZE_1_22, TS_SIZE_1_20 + 24);
		t_assert_eq(TS_SIZE_1_23, TS_SIZE_1_22 + 16);
		t_assert_eq(TS_SIZE_1_23, 696);
		t_assert_eq(TS_SIZE_1_24, TS_SIZE_1_23 + 32);
		t_assert_eq(TS_SIZE_1_24, 728);
		t_assert_eq(sizeof(full), TS_SIZE_1_24 + 16);
		{
			char old14[TS_SIZE_1_14], old16[TS_SIZE_1_16],
				old19[TS_SIZE_1_19];

			len = 0;
			t_ok(kc_request(a, KVMM_CMD_TIER_STATS, NULL, 0, old14,
					sizeof(old14), &len));
			t_assert_eq(len, sizeof(full));
			t_assert(!memcmp(old14, &full, sizeof(old14)));
			/* a 1.16 client's: the 616 bytes before 1.17's */
			len = 0;
			t_ok(kc_request(a, KVMM_CMD_TIER_STATS, NULL, 0, old16,
					sizeof(old16), &len));
			t_assert_eq(len, sizeof(full));
			t_assert(!memcmp(old16, &full, sizeof(old16)));
			/* a 1.19 client's: the 648 bytes before 1.20's */
			len = 0;
			t_ok(kc_request(a, KVMM_CMD_TIER_STATS, NULL, 0, old19,
					sizeof(old19), &len));
			t_assert_eq(len, sizeof(full));
			t_assert(!memcmp(old19, &full, sizeof(old19)));
		}
		/* a body too short for 1.21's request: -EINVAL, as before */
		t_assert_eq(kc_request(a, KVMM_CMD_TIER_STATS, &body,
				       sizeof(body), NULL, 0, NULL),
			    -EINVAL);
		kvmm_disconnect(a);
		/* a client of 1.20 (its HELLO says so): the 656 bytes of
		 * before, the same as a 1.21 client's first 656, and a body
		 * -EINVAL, as a 1.20 daemon answered it */
		{
			struct kvmm_tier_stats_req q = { .size = sizeof(q) };
			struct kvmm_tier_stats_reply r20;
			struct cc old20;

			old_client_stats(&old20, env.d.sock, 20, TS_SIZE_1_20,
					 &full, &r20);
			t_assert_eq(r20.block_pages, 0xa5a5a5a5u);
			t_assert_eq(r20.sizes[3], 0xa5a5a5a5u);
			t_assert_eq(cc_call(&old20, KVMM_CMD_TIER_STATS, &q,
					    sizeof(q), NULL, 0, NULL, NULL),
				    -EINVAL);
			cc_disconnect(&old20);
		}
		/* a client of 1.22: the 680 bytes of before (no restamp
		 * counts), the same as a 1.23 client's first 680 */
		{
			struct kvmm_tier_stats_reply r22;
			struct cc old22;

			old_client_stats(&old22, env.d.sock, 22, TS_SIZE_1_22,
					 &full, &r22);
			t_assert_eq(r22.nvme_restamped, 0xa5a5a5a5a5a5a5a5ull);
			t_assert_eq(r22.nvme_restamp_failures,
				    0xa5a5a5a5a5a5a5a5ull);
			cc_disconnect(&old22);
		}
		/* a client of 1.23: the 696 bytes of before (no cold
		 * counts), the same as a 1.24 client's first 696 */
		{
			struct kvmm_tier_stats_reply r23;
			struct cc old23;

			old_client_stats(&old23, env.d.sock, 23, TS_SIZE_1_23,
					 &full, &r23);
			t_assert_eq(r23.cold_blocks, 0xa5a5a5a5a5a5a5a5ull);
			t_assert_eq(r23.cold_dropped, 0xa5a5a5a5a5a5a5a5ull);
			cc_disconnect(&old23);
		}
		/* a client of 1.24: the 728 bytes of before (no weights),
		 * the same as a 1.25 client's first 728 */
		{
			struct kvmm_tier_stats_reply r24;
			struct cc old24;

			old_client_stats(&old24, env.d.sock, 24, TS_SIZE_1_24,
					 &full, &r24);
			/* the size came from a region (no
			 * --cache-block-pages): weight 0, by no weight */
			t_assert_eq(full.size, sizeof(full));
			t_assert_eq(full.nr_sizes, 1);
			t_assert_eq(full.weights[0], 0);
			t_assert_eq(r24.weights[0], 0xa5a5a5a5u);
			t_assert_eq(r24.weights[3], 0xa5a5a5a5u);
			cc_disconnect(&old24);
		}
		printf("TIER_STATS: %zu bytes (1.6: %zu), a 1.6 client reads the same prefix\n",
		       sizeof(full), (size_t)TS_SIZE_1_6);
	}
	cr_stop(&env);
}

/* ---- a daemon of ABI 1.6, for kvmmctl ----------------------------------- */

static void old_reply(int s, const struct kvmm_msg_hdr *rq, int status,
		      const void *body, size_t len)
{
	char buf[4096];
	struct kvmm_msg_hdr h = { .size = sizeof(h) + len,
				  .cmd = rq->cmd,
				  .version = KVMM_ABI_MAJOR,
				  .flags = KVMM_MSG_F_REPLY,
				  .id = rq->id,
				  .status = status };

	t_assert(sizeof(h) + len <= sizeof(buf));
	memcpy(buf, &h, sizeof(h));
	if (len)
		memcpy(buf + sizeof(h), body, len);
	t_ok(kw_send(s, buf, h.size, NULL, 0, 0));
}

/* An older daemon's TIER_STATS reply of len bytes (the fields after
 * them garbage, not sent), with known values. */
static void old_stats(struct kvmm_tier_stats_reply *ts, size_t len)
{
	memset(ts, 0xa5, sizeof(*ts));
	memset(ts, 0, len);
	ts->size = len;
	if (len >= TS_SIZE_1_14)
		ts->cache_open_attempts = 1; /* 1.14's last fields */
	ts->nr_tiers = 3;
	ts->publishes = 11;
	ts->prefix_opens = 4;
	ts->prefix_blocks_asked = 9;
	ts->prefix_blocks_hit = 5;
	ts->restores_cancelled = 2;
	for (int t = 0; t < 3; t++) {
		ts->tiers[t].capacity_blocks = 8;
		ts->tiers[t].block_bytes = CC_PPB * CC_PAGE;
		ts->tiers[t].hits = 3 + t;
	}
}

/* Serve nconn connections on the listening socket l, one at a time, as
 * a daemon of ABI 1.minor whose TIER_STATS reply is ts_len bytes. */
static void old_daemon(int l, int nconn, uint16_t minor, size_t ts_len)
{
	for (int k = 0; k < nconn; k++) {
		int s = accept(l, NULL, NULL);

		t_assert(s >= 0);
		for (;;) {
			char buf[4096];
			struct kvmm_msg_hdr h;
			unsigned int nfds;
			int fds[4];
			ssize_t n =
				kw_recv(s, buf, sizeof(buf), fds, &nfds, 4, 0);

			if (n < (ssize_t)sizeof(h))
				break;
			memcpy(&h, buf, sizeof(h));
			if (h.cmd == KVMM_CMD_HELLO) {
				struct kvmm_hello_reply r = {
					.size = sizeof(r),
					.abi_major = 1,
					.abi_minor = minor,
					.session_id = 1 + k,
					.page_size = CC_PAGE,
					.pages_total = 64
				};

				old_reply(s, &h, 0, &r, sizeof(r));
			} else if (h.cmd == KVMM_CMD_ADMIN_STATUS) {
				struct kvmm_status_reply r = {
					.size = sizeof(r),
					.page_size = CC_PAGE,
					.pages_total = 64,
					.pages_free = 64,
					.sessions = 1,
					.pid = (uint32_t)getpid()
				};

				/* before 1.18: no read-only fd counters */
				if (minor < 18)
					r.size = ST_SIZE_1_17;
				snprintf(r.device, sizeof(r.device), "host");
				old_reply(s, &h, 0, &r, r.size);
			} else if (h.cmd == KVMM_CMD_TIER_STATS) {
				struct kvmm_tier_stats_reply r;

				old_stats(&r, ts_len);
				old_reply(s, &h, 0, &r, ts_len);
			} else if (h.cmd == KVMM_CMD_BYE) {
				old_reply(s, &h, 0, NULL, 0);
				break;
			} else {
				old_reply(s, &h, -ENOTTY, NULL, 0);
			}
		}
		close(s);
	}
}

/* A stand-in daemon of ABI 1.minor serving 3 connections on sa (made
 * in dir); its pid. */
static pid_t old_daemon_start(struct sockaddr_un *sa, char *dir, size_t len,
			      uint16_t minor, size_t ts_len)
{
	int l;
	pid_t p;

	char name[32];

	snprintf(name, sizeof(name), "kvmm-tsgrow-%d", (int)getpid());
	td_tmp_path(name, dir, len);
	t_ok(mkdir(dir, 0700));
	snprintf(sa->sun_path, sizeof(sa->sun_path), "%s/kvmm.sock", dir);
	l = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	t_assert(l >= 0);
	t_ok(bind(l, (struct sockaddr *)sa, sizeof(*sa)));
	t_ok(listen(l, 4));
	p = fork();
	t_assert(p >= 0);
	if (p == 0) {
		old_daemon(l, 3, minor, ts_len);
		_exit(0);
	}
	close(l);
	return p;
}

static void old_daemon_stop(pid_t p, struct sockaddr_un *sa, const char *dir)
{
	t_assert_eq(cc_wait_child(p), 0);
	unlink(sa->sun_path);
	rmdir(dir);
}

static void old_daemon_kvmmctl(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char dir[64], *out;
	pid_t p = old_daemon_start(&sa, dir, sizeof(dir), 6, TS_SIZE_1_6);

	out = tm_kvmmctl(sa.sun_path, "status --json");
	t_assert_has(out, "\"cache\":{\"publishes\":11,");
	t_assert_has(out, "\"prefix_blocks_hit\":5,");
	t_assert_has(out, "\"restores_cancelled\":2,\"tiers\":{");
	t_assert_has(out, "\"host\":{\"capacity_blocks\":8,");
	t_assert_lacks(out, "prefix_holes");
	t_assert_lacks(out, "after_hole");
	t_assert_lacks(out, "plan_recomputes");
	t_assert_lacks(out, "held_copies");
	free(out);
	out = tm_kvmmctl(sa.sun_path, "status");
	t_assert_has(
		out,
		"cache        11 published, 5 prefix blocks hit of 9 asked");
	t_assert_has(out, "demotions    0 waited for a host slot (0 now)\n");
	t_assert_lacks(out, "held blocks");
	t_assert_lacks(out, "\nrecompute ");
	free(out);
	out = tm_kvmmctl(sa.sun_path, "metrics");
	t_assert_has(out, ",abi=\"1.6\"} 1\n");
	t_assert_has(out, "\nkvmm_cache_publishes_total 11\n");
	t_assert_has(out, "\nkvmm_cache_restores_cancelled_total 2\n");
	t_assert_has(out, "\nkvmm_tier_hits_total{tier=\"nvme\"} 5\n");
	t_assert_lacks(out, "kvmm_cache_prefix_holes");
	t_assert_lacks(out, "kvmm_cache_prefix_blocks_after_hole");
	t_assert_lacks(out, "kvmm_cache_plan_recomputes");
	t_assert_lacks(out, "kvmm_cache_held_copies");
	free(out);
	old_daemon_stop(p, &sa, dir);
	printf("kvmmctl against a 1.6 daemon: the 1.7 fields absent\n");
}

/*
 * kvmmctl against a daemon newer than itself: the daemon's minor is what
 * it reports (kvmm_get_daemon_info(), metrics' abi label), not its own,
 * unless KVMM_TEST_HELLO_MINOR asks it to play an older client.  On 7
 * December libkvmm clamped the daemon's minor to its own without the
 * knob for a while: abi="1.24" against a 1.25 daemon.
 */
static void newer_daemon_kvmmctl(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char dir[64], *out, want[64];
	pid_t p = old_daemon_start(&sa, dir, sizeof(dir), KVMM_ABI_MINOR + 1,
				   sizeof(struct kvmm_tier_stats_reply));

	out = tm_kvmmctl(sa.sun_path, "metrics");
	snprintf(want, sizeof(want), ",abi=\"1.%d\"} 1\n", KVMM_ABI_MINOR + 1);
	t_assert_has(out, want);
	free(out);
	t_ok(setenv("KVMM_TEST_HELLO_MINOR", "20", 1));
	out = tm_kvmmctl(sa.sun_path, "metrics");
	t_ok(unsetenv("KVMM_TEST_HELLO_MINOR"));
	t_assert_has(out, ",abi=\"1.20\"} 1\n");
	free(out);
	out = tm_kvmmctl(sa.sun_path, "status");
	t_assert_has(
		out,
		"cache        11 published, 5 prefix blocks hit of 9 asked");
	free(out);
	old_daemon_stop(p, &sa, dir);
	printf("kvmmctl against a 1.%d daemon: its minor reported, 1.20 under the knob\n",
	       KVMM_ABI_MINOR + 1);
}

/* kvmmctl against a 1.14 daemon: its fields shown, 1.15's absent, not
 * 0. */
static void daemon_1_14_kvmmctl(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char dir[64], *out;
	pid_t p = old_daemon_start(&sa, dir, sizeof(dir), 14, TS_SIZE_1_14);

	out = tm_kvmmctl(sa.sun_path, "status --json");
	t_assert_has(out, "\"cache_open_attempts\":1,");
	t_assert_has(out, "\"held_copies\":0,");
	t_assert_lacks(out, "lower_free_refused");
	t_assert_lacks(out, "nvme_invalidate");
	t_assert_lacks(out, "nvme_invalidated");
	free(out);
	out = tm_kvmmctl(sa.sun_path, "status");
	t_assert_has(
		out,
		"cache        11 published, 5 prefix blocks hit of 9 asked");
	t_assert_lacks(out, "invalidated on disk");
	t_assert_lacks(out, "not freed by their tier");
	free(out);
	out = tm_kvmmctl(sa.sun_path, "metrics");
	t_assert_has(out, ",abi=\"1.14\"} 1\n");
	t_assert_has(out, "\nkvmm_cache_open_attempts_total 1\n");
	t_assert_lacks(out, "kvmm_cache_lower_free_refused");
	t_assert_lacks(out, "kvmm_cache_nvme_invalidate");
	free(out);
	old_daemon_stop(p, &sa, dir);
	printf("kvmmctl against a 1.14 daemon: the 1.15 fields absent\n");
}

/* kvmmctl against a 1.16 daemon: the NVMe tier's opens shown, 1.17's
 * failed writes absent (the bytes after its 616 are garbage here). */
static void daemon_1_16_kvmmctl(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char dir[64], *out;
	pid_t p = old_daemon_start(&sa, dir, sizeof(dir), 16, TS_SIZE_1_16);

	out = tm_kvmmctl(sa.sun_path, "status --json");
	t_assert_has(out, "\"nvme_open_attempts\":0,");
	t_assert_lacks(out, "nvme_write");
	t_assert_has(out, "\"renewed\":0,\"renew_failures\":0}");
	t_assert_lacks(out, "ro_fd"); /* ADMIN_STATUS's 1.18 fields */
	t_assert_lacks(out, "\"lend\""); /* ... and 1.19's */
	free(out);
	out = tm_kvmmctl(sa.sun_path, "status");
	t_assert_has(
		out,
		"cache        11 published, 5 prefix blocks hit of 9 asked");
	t_assert_lacks(out, "for writes");
	t_assert_lacks(out, "takes writes");
	t_assert_lacks(out, "read-only    ");
	t_assert_lacks(out, "blocks ahead ");
	free(out);
	out = tm_kvmmctl(sa.sun_path, "metrics");
	t_assert_has(out, ",abi=\"1.16\"} 1\n");
	t_assert_has(out, "\nkvmm_cache_nvme_open_attempts_total 0\n");
	t_assert_lacks(out, "kvmm_cache_nvme_write");
	t_assert_has(out, "\nkvmm_pool_renew_failures_total 0\n");
	t_assert_lacks(out, "kvmm_pool_ro_fd");
	t_assert_lacks(out, "kvmm_lend_");
	free(out);
	old_daemon_stop(p, &sa, dir);
	printf("kvmmctl against a 1.16 daemon: the 1.17 fields absent, and ADMIN_STATUS's 1.18 read-only fd counters\n");
}

static void early_after_hole(void)
{
	struct kvmm_tier_stats_reply ts0, ts;
	struct kvmm_region_opts ro = cc_region_opts();
	struct kvmm_connect_opts co = { .size = sizeof(co) };
	/* 0 is no action: a block the open did not report reads as none */
	uint8_t acts[3] = { 0 };
	struct kvmm_prefix_opts po = { .size = sizeof(po),
				       .flags = KVMM_PREFIX_OPEN_SEGMENTS |
						KVMM_PREFIX_OPEN_EARLY,
				       .actions = acts };
	uint32_t seq, nb, failed[3], pending = 0;
	struct kvmm_region *reg;
	struct kvmm_conn *c;
	struct cr_env env;
	uint64_t h[3];
	struct cc m;
	int nfailed;

	setenv("KVMMD_TEST_MIGRATE_FAIL", "host-gpu:1", 1);
	cr_start(&env, 40, 200);
	unsetenv("KVMMD_TEST_MIGRATE_FAIL");
	cr_fill_tiers(&env, &ts0);

	co.socket_path = env.d.sock;
	co.name = "tier-stats-grow-early";
	t_ok(kvmm_connect(&co, &c));
	t_ok(kvmm_region_create(c, &ro, &reg));
	h[0] = 0x7fff0002ull; /* never cached */
	h[1] = cr_hash(2, 2); /* content 2's blocks 2.. are on the host */
	h[2] = cr_hash(2, 3);
	t_ok(kvmm_seq_open_prefix_opts(reg, h, 3, &seq, &nb, &po));
	printf("early segmented: %u blocks: %s %s %s\n", nb,
	       kvmm_block_action_string(acts[0]),
	       kvmm_block_action_string(acts[1]),
	       kvmm_block_action_string(acts[2]));
	t_assert_eq(nb, 3);
	t_assert_eq(acts[0], KVMM_BLOCK_RECOMPUTE);
	t_assert_eq(acts[1], KVMM_BLOCK_RELOADED_HOST);
	t_assert_eq(acts[2], KVMM_BLOCK_RELOADED_HOST);
	cc_connect(&m, env.d.sock);
	cc_tier_stats(&m, &ts);
	cc_disconnect(&m);
	t_assert_eq(ts.early_reloads - ts0.early_reloads, 2);
	t_assert_eq(ts.prefix_holes - ts0.prefix_holes, 1);
	t_assert_eq(ts.prefix_blocks_after_hole - ts0.prefix_blocks_after_hole,
		    0);
	nfailed = kvmm_seq_wait_ready(reg, seq, 3, 0, failed, 3, &pending);
	printf("ready: %d failed (block %u), %u pending\n", nfailed,
	       nfailed > 0 ? failed[0] : 0, pending);
	t_assert_eq(nfailed, 1);
	t_assert_eq(pending, 0);
	t_ok(kvmm_seq_close(reg, seq));
	kvmm_disconnect(c);
	cc_settled_stats(env.d.sock, &ts);
	t_assert_eq(ts.early_reload_failures - ts0.early_reload_failures, 1);
	t_assert_eq(ts.tiers[1].hits - ts0.tiers[1].hits, 1);
	t_assert_eq(ts.prefix_blocks_after_hole - ts0.prefix_blocks_after_hole,
		    1);
	cr_stop(&env);
}

int main(void)
{
	plan_recomputes();
	early_after_hole();
	old_daemon_kvmmctl();
	newer_daemon_kvmmctl();
	daemon_1_14_kvmmctl();
	daemon_1_16_kvmmctl();
	printf("ok\n");
	return 0;
}
