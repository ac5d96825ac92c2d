// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * BLOCK_PIN_MANY through libkvmm (kvmm_block_pin_many(), ABI 1.19)
 * against a real kvmmd and writer processes: many pins in one round trip,
 * each exactly as kvmm_block_pin() of it.  Room for 3 cached blocks on
 * the GPU and 6 in host memory, --pin-quota 4:
 *
 *   - content 0 in host memory, content 1 on the GPU: pinning content 1's
 *     3 blocks, content 0's first, a hash never cached, hash 0 and
 *     content 0's second answers per hash 0, 0, 0, 1, -ENOENT, -EINVAL,
 *     -EDQUOT (the quota of 4 reached), 4 pinned, 4 pins of 4;
 *   - the pins hold as single pins do: content 2 written after it does
 *     not push content 1 off the GPU (kvmm_prefix_query() says where);
 *   - pinning again replaces the records (TTL pins now: the count stays
 *     4, the expiry is the daemon's clock plus the TTL), and each is a
 *     record kvmm_block_unpin() drops;
 *   - bad flags fail the whole call and pin nothing; malformed requests
 *     on the wire are -EINVAL;
 *   - ADMIN_STATUS (ABI 1.20) counts the calls answered, the hashes they
 *     named and the pins made, and the queries: the same in kvmmctl
 *     status, --json status and metrics (counted()).
 */
#include <time.h>

#include "tests/cache-common.h"
#include "tests/lib/daemon.h"

#define NB 3

_Static_assert(sizeof(struct kvmm_block_pin_many) == 40, "kvmm_block_pin_many");
_Static_assert(sizeof(struct kvmm_block_pin_many_reply) == 48,
	       "kvmm_block_pin_many_reply");

static const struct cc_contents contents = { .base = 0x9f0000,
					     .tag0 = 60,
					     .nb = NB };

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* A writer process publishes content k, however much of it the cache
 * takes (its GPU tier may be pinned full). */
static void write_any(const char *sock, int k)
{
	pid_t p = fork();

	t_assert(p >= 0);
	if (p == 0) {
		cc_publish_any(sock, &contents, k);
		_exit(0);
	}
	t_assert_eq(cc_wait_child(p), 0);
}

/* Malformed BLOCK_PIN_MANY requests on the wire. */
static void bad_wire(const char *sock)
{
	struct {
		struct kvmm_block_pin_many m;
		uint64_t h[2];
	} r;
	char rep[256];
	struct cc c;

	cc_connect(&c, sock);
	memset(&r, 0, sizeof(r));
	r.m.size = sizeof(r.m);
	r.m.nr_hashes = 3; /* the message holds 2 */
	r.h[0] = 1;
	r.h[1] = 2;
	t_assert_eq(cc_call(&c, KVMM_CMD_BLOCK_PIN_MANY, &r, sizeof(r), rep,
			    sizeof(rep), NULL, NULL),
		    -EINVAL);
	r.m.nr_hashes = 0;
	t_assert_eq(cc_call(&c, KVMM_CMD_BLOCK_PIN_MANY, &r, sizeof(r.m), rep,
			    sizeof(rep), NULL, NULL),
		    -EINVAL);
	r.m.nr_hashes = 2;
	r.m.reserved[0] = 1;
	t_assert_eq(cc_call(&c, KVMM_CMD_BLOCK_PIN_MANY, &r, sizeof(r), rep,
			    sizeof(rep), NULL, NULL),
		    -EINVAL);
	r.m.reserved[0] = 0;
	r.m.ttl_ns = 5; /* without KVMM_PIN_F_TTL */
	t_assert_eq(cc_call(&c, KVMM_CMD_BLOCK_PIN_MANY, &r, sizeof(r), rep,
			    sizeof(rep), NULL, NULL),
		    -EINVAL);
	/* a well-formed one of hashes never cached: answered per hash */
	r.m.ttl_ns = 0;
	t_assert_eq(cc_call(&c, KVMM_CMD_BLOCK_PIN_MANY, &r, sizeof(r), rep,
			    sizeof(rep), NULL, NULL),
		    0);
	{
		struct kvmm_block_pin_many_reply pr;
		int32_t res[2];

		memcpy(&pr, rep, sizeof(pr));
		memcpy(res, rep + sizeof(pr), sizeof(res));
		t_assert_eq(pr.nr_hashes, 2);
		t_assert_eq(pr.pinned, 0);
		t_assert_eq(res[0], -ENOENT);
		t_assert_eq(res[1], -ENOENT);
	}
	cc_disconnect(&c);
}

/*
 * ADMIN_STATUS (ABI 1.20) counted the calls kvmmd answered, and only
 * those: the first (7 hashes, 4 pinned), the TTL one and the one without
 * opts (3 and 3 each), and bad_wire()'s well-formed one (2, none pinned);
 * not those libkvmm refused or kvmmd answered with an error.  kvmmctl
 * status, --json status and metrics show the same numbers.
 */
static void counted(const struct td_daemon *d)
{
	static char out[1 << 18]; /* the metrics are long */
	struct kvmm_status_reply st;

	t_ok(td_status(d, &st));
	t_assert_eq(st.size, sizeof(st));
	t_assert_eq(st.pin_many_calls, 4);
	t_assert_eq(st.pin_many_hashes, 7 + 3 + 3 + 2);
	t_assert_eq(st.pin_many_pinned, 4 + 3 + 3);
	/* the three queries of main() (content 0's 3 blocks and first, in
	 * host memory; content 1's 3, on the GPU) */
	t_assert_eq(st.prefix_queries, 3);
	t_assert_eq(st.prefix_query_hashes, NB + NB + 1);
	t_assert_eq(st.prefix_query_gpu, NB);
	t_assert_eq(st.prefix_query_host, NB + 1);
	t_assert_eq(st.prefix_query_nvme, 0);
	t_assert_eq(st.prefix_query_moving, 0);
	t_assert_eq(td_kvmmctl(d->sock, "status", out, sizeof(out)), 0);
	if (!strstr(out,
		    "\npin many     4 calls named 15 hashes, pinned 10\n") ||
	    !strstr(out,
		    "\nqueries      3 prefix queries of 7 hashes found 7 blocks (3 gpu, 4 host, 0 nvme, 0 moving); "))
		t_fail("kvmmctl status:\n%s", out);
	t_assert_eq(td_kvmmctl(d->sock, "--json status", out, sizeof(out)), 0);
	if (!strstr(out,
		    ",\"router\":{\"prefix_queries\":3,\"prefix_query_hashes\":7,"
		    "\"prefix_query_blocks\":{\"gpu\":3,\"host\":4,\"nvme\":0,"
		    "\"moving\":0},\"pin_many_calls\":4,\"pin_many_hashes\":15,"
		    "\"pin_many_pinned\":10,\"tier_stats_calls\":"))
		t_fail("kvmmctl --json status:\n%s", out);
	t_assert_eq(td_kvmmctl(d->sock, "metrics", out, sizeof(out)), 0);
	if (!strstr(out, "\nkvmm_pin_many_total 4\n") ||
	    !strstr(out, "\nkvmm_pin_many_hashes_total 15\n") ||
	    !strstr(out, "\nkvmm_pin_many_pinned_total 10\n") ||
	    !strstr(out, "\nkvmm_prefix_queries_total 3\n") ||
	    !strstr(out, "\nkvmm_prefix_query_blocks_total{tier=\"host\"} 4\n"))
		t_fail("kvmmctl metrics:\n%s", out);
}

int main(void)
{
	const char *args[] = { "--cache-gpu-blocks", "3", "--host-mem", "2M",
			       "--pin-quota",	     "4", NULL };
	struct kvmm_region_opts ro = cc_region_opts();
	struct kvmm_pin_opts po;
	struct kvmm_region *r;
	struct kvmm_conn *c;
	struct td_daemon d;
	uint64_t c0[NB], c1[NB], h[7], before;
	int32_t res[7];
	uint8_t tiers[NB];

	cc_start(&d, args);
	cc_write_content(d.sock, &contents, 0);
	cc_write_content(d.sock, &contents, 1);
	cc_content_hashes(&contents, 0, c0);
	cc_content_hashes(&contents, 1, c1);
	{
		/* content 0's copy down done: in host memory, not moving */
		struct kvmm_tier_stats_reply ts;

		cc_settled_stats(d.sock, &ts);
	}
	c = cc_connect_lib(d.sock, "pin-many");
	t_ok(kvmm_region_create(c, &ro, &r));
	t_assert_eq(kvmm_prefix_query(r, c0, NB, tiers, 0), NB);
	t_assert_eq(tiers[0], KVMM_QUERY_HOST);

	/* 1. per-hash results, the quota */
	memcpy(h, c1, sizeof(c1));
	h[3] = c0[0];
	h[4] = 0x9f0000ull * 99 + 1; /* never cached */
	h[5] = 0;
	h[6] = c0[1];
	memset(&po, 0, sizeof(po));
	po.size = sizeof(po);
	t_assert_eq(kvmm_block_pin_many(c, h, 7, &po, res), 4);
	t_assert_eq(res[0], 0);
	t_assert_eq(res[1], 0);
	t_assert_eq(res[2], 0);
	t_assert_eq(res[3], 1);
	t_assert_eq(res[4], -ENOENT);
	t_assert_eq(res[5], -EINVAL);
	t_assert_eq(res[6], -EDQUOT);
	t_assert_eq(po.pins, 4);
	t_assert_eq(po.pin_quota, 4);
	t_assert_eq(po.expires_ns, 0);
	/* one more single pin is over the quota too: the same records */
	memset(&po, 0, sizeof(po));
	po.size = sizeof(po);
	t_assert_eq(kvmm_block_pin(c, c0[2], &po), -EDQUOT);
	t_assert_eq(po.pins, 4);

	/* 2. they hold: content 2 does not push content 1 off the GPU */
	write_any(d.sock, 2);
	{
		struct kvmm_tier_stats_reply ts;

		cc_settled_stats(d.sock, &ts);
	}
	memset(tiers, 0xee, sizeof(tiers));
	t_assert_eq(kvmm_prefix_query(r, c1, NB, tiers, 0), NB);
	for (int b = 0; b < NB; b++)
		t_assert_eq(tiers[b], KVMM_QUERY_GPU);
	t_assert_eq(kvmm_prefix_query(r, c0, 1, tiers, 0), 1);
	t_assert_eq(tiers[0], KVMM_QUERY_HOST);

	/* 3. again, as TTL pins: replaced, not added */
	memset(&po, 0, sizeof(po));
	po.size = sizeof(po);
	po.flags = KVMM_PIN_F_TTL;
	po.ttl_ns = 30000000000ull;
	before = now_ns();
	t_assert_eq(kvmm_block_pin_many(c, c1, NB, &po, res), NB);
	t_assert_eq(po.pins, 4);
	t_assert(po.expires_ns >= before + po.ttl_ns);
	t_assert(po.expires_ns <= now_ns() + po.ttl_ns);
	for (int b = 0; b < NB; b++) {
		t_assert_eq(res[b], 0);
		t_ok(kvmm_block_unpin(c, c1[b]));
		t_assert_eq(kvmm_block_unpin(c, c1[b]), -ENOENT);
	}
	/* results not wanted; opts NULL: plain pins */
	t_assert_eq(kvmm_block_pin_many(c, c1, NB, NULL, NULL), NB);

	/* 4. bad flags: the whole call fails, nothing pinned */
	for (int b = 0; b < NB; b++)
		t_ok(kvmm_block_unpin(c, c1[b]));
	memset(&po, 0, sizeof(po));
	po.size = sizeof(po);
	po.flags = KVMM_PIN_F_DEMOTE; /* without TTL */
	t_assert_eq(kvmm_block_pin_many(c, c1, NB, &po, res), -EINVAL);
	memset(&po, 0, sizeof(po));
	po.size = sizeof(po);
	t_assert_eq(kvmm_block_pin(c, c1[0], &po), 0);
	t_assert_eq(po.pins, 2); /* content 0's first, and this one */
	t_assert_eq(kvmm_block_pin_many(c, c1, 0, NULL, NULL), -EINVAL);
	t_assert_eq(kvmm_block_pin_many(c, c1, KVMM_PIN_MANY_MAX + 1, NULL,
					NULL),
		    -EINVAL);

	kvmm_region_destroy(r);
	kvmm_disconnect(c);
	bad_wire(d.sock);
	counted(&d);
	cc_stop(&d);
	return 0;
}
