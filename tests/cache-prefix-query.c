// SPDX-License-Identifier: MIT
/*
 * timeout: 120
 * PREFIX_QUERY through libkvmm (kvmm_prefix_query(), ABI 1.19) against a
 * real kvmmd and real processes: where a chain's leading blocks are, with
 * nothing opened and nothing changed.
 *
 *   - tiers: four contents of three blocks written by writer processes,
 *     room for 3 blocks on the GPU and 6 in host memory (as
 *     cache-tiers): content 3 is reported on the GPU, 2 and 1 in host
 *     memory, 0 on NVMe, block by block; a chain is cut at its first
 *     block in no tier; a chain across contents reports each block's
 *     own tier;
 *   - no side effect: TIER_STATS is the same, byte for byte, before and
 *     after 10 queries of every content (no hit, no restore, no open
 *     counted); kvmm_tier_stats() from the querying (not admin) session
 *     reads the same bytes, or the first ones only for a caller built
 *     for ABI 1.6; and what the policy evicts next is the same with and
 *     without them: two kvmmds run the same writes, one of them queried
 *     before content 4 comes in (content 1, the next to go down, queried
 *     last, as an access would keep it), and every block ends in the
 *     same tier in both (content 1 on NVMe);
 *   - a block whose copy down is slowed is reported moving, then in
 *     host memory;
 *   - --cache-scope uid: a process of uid B, and one of root, querying
 *     what a process of uid A published see nothing; a process of A sees
 *     its 3 blocks, but not through a region of another salt;
 *   - bad input: flags or reserved words set, no such region, a length
 *     that does not match the count: errors, nothing answered.
 *
 * The cross-uid part needs root (to be two uids); it is skipped, with a
 * line, otherwise (the rest runs).
 */
#include <sys/wait.h>

#include "tests/cache-uids.h"
#include "tests/lib/daemon.h"
#include "tests/lib/nvme_cache_args.h"

#define NB 3
#define NCONTENT 5
#define UID_A 61011
#define UID_B 61012

_Static_assert(sizeof(struct kvmm_prefix_query) == 32, "kvmm_prefix_query");
_Static_assert(sizeof(struct kvmm_prefix_query_reply) == 40,
	       "kvmm_prefix_query_reply");

static const struct cc_contents contents = { .base = 0x9e0000,
					     .tag0 = 40,
					     .nb = NB };

/* A libkvmm connection and a region of cc_region()'s geometry. */
struct qc {
	struct kvmm_conn *c;
	struct kvmm_region *r;
};

static void qc_open(struct qc *q, const char *sock, uint64_t salt)
{
	struct kvmm_region_opts ro = cc_region_opts();

	ro.salt = salt;
	q->c = cc_connect_lib(sock, "prefix-query");
	t_ok(kvmm_region_create(q->c, &ro, &q->r));
}

static void qc_close(struct qc *q)
{
	kvmm_region_destroy(q->r);
	kvmm_disconnect(q->c);
}

/* ADMIN_STATUS of the kvmmd on sock. */
static void status_of(const char *sock, struct kvmm_status_reply *st)
{
	struct kvmm_conn *admin;

	t_ok(kc_connect_admin(sock, &admin));
	memset(st, 0, sizeof(*st));
	t_ok(kc_request(admin, KVMM_CMD_ADMIN_STATUS, NULL, 0, st, sizeof(*st),
			NULL));
	t_assert_eq(st->size, sizeof(*st));
	kvmm_disconnect(admin);
}

/* The query counters of ADMIN_STATUS (ABI 1.20) moved from a to b by
 * exactly: queries, hashes, and blocks found on the GPU, in host memory,
 * on NVMe, moving. */
static void expect_counted(const struct kvmm_status_reply *a,
			   const struct kvmm_status_reply *b, uint64_t queries,
			   uint64_t hashes, uint64_t gpu, uint64_t host,
			   uint64_t nvme, uint64_t moving)
{
	t_assert_eq(b->prefix_queries - a->prefix_queries, queries);
	t_assert_eq(b->prefix_query_hashes - a->prefix_query_hashes, hashes);
	t_assert_eq(b->prefix_query_gpu - a->prefix_query_gpu, gpu);
	t_assert_eq(b->prefix_query_host - a->prefix_query_host, host);
	t_assert_eq(b->prefix_query_nvme - a->prefix_query_nvme, nvme);
	t_assert_eq(b->prefix_query_moving - a->prefix_query_moving, moving);
}

/* Content k must be reported as nb blocks, every one in tier. */
static void expect_content(struct qc *q, int k, int tier)
{
	uint64_t h[NB];
	uint8_t t[NB];
	int n;

	cc_content_hashes(&contents, k, h);
	memset(t, 0xee, sizeof(t));
	n = kvmm_prefix_query(q->r, h, NB, t, 0);
	if (n != NB)
		t_fail("content %d: %d blocks, expected %d", k, n, NB);
	for (int b = 0; b < NB; b++)
		if (t[b] != tier)
			t_fail("content %d block %d: %s, expected %s", k, b,
			       kvmm_query_tier_string(t[b]),
			       kvmm_query_tier_string((uint8_t)tier));
}

/* Where every block of contents 0 .. NCONTENT-1 is, once settled:
 * map[k * NB + b] = tier, or 0xff for a block not found. */
static void tier_map(const char *sock, struct qc *q, uint8_t *map)
{
	struct kvmm_tier_stats_reply ts;

	cc_settled_stats(sock, &ts);
	memset(map, 0xff, NCONTENT * NB);
	for (int k = 0; k < NCONTENT; k++) {
		uint64_t h[NB];

		cc_content_hashes(&contents, k, h);
		/* one block at a time: a block of a content may be gone
		 * while a later one is not */
		for (int b = 0; b < NB; b++) {
			int n = kvmm_prefix_query(q->r, &h[b], 1,
						  &map[k * NB + b], 0);

			if (n != 0 && n != 1)
				t_fail("content %d block %d: %d", k, b, n);
			if (!n)
				map[k * NB + b] = 0xff;
		}
	}
}

/* The queries of the first run: every content, then a few chains. */
static void ask_all(const char *sock, struct qc *q)
{
	struct kvmm_tier_stats_reply before, after;
	struct kvmm_status_reply st0, st1, st2;
	uint64_t h[8];
	uint8_t t[8];

	cc_settled_stats(sock, &before);
	status_of(sock, &st0);
	/* cut at the first block in no tier */
	cc_content_hashes(&contents, 0, h);
	h[3] = h[2];
	h[2] = 0x9e0000ull * 77 + 5; /* never cached */
	t_assert_eq(kvmm_prefix_query(q->r, h, 4, t, 0), 2);
	/* blocks of two tiers in one chain (blocks by hash, as an open
	 * walks them), out of a longer request */
	cc_content_hashes(&contents, 3, h);
	cc_content_hashes(&contents, 0, h + 2);
	h[5] = 0x9e0000ull * 77 + 6;
	memset(t, 0xee, sizeof(t));
	t_assert_eq(kvmm_prefix_query(q->r, h, 6, t, 0), 5);
	t_assert_eq(t[0], KVMM_QUERY_GPU);
	t_assert_eq(t[1], KVMM_QUERY_GPU);
	t_assert_eq(t[2], KVMM_QUERY_HOST);
	t_assert_eq(t[3], KVMM_QUERY_HOST);
	t_assert_eq(t[4], KVMM_QUERY_HOST);
	t_assert_eq(t[5], 0xee); /* past the prefix: untouched */
	/* tiers not wanted */
	t_assert_eq(kvmm_prefix_query(q->r, h, 3, NULL, 0), 3);
	/* bad arguments, caught by libkvmm */
	t_assert_eq(kvmm_prefix_query(q->r, h, 3, t, 1), -EINVAL);
	t_assert_eq(kvmm_prefix_query(q->r, h, 0, t, 0), -EINVAL);
	t_assert_eq(kvmm_prefix_query(q->r, h, KVMM_PREFIX_MAX_BLOCKS + 1, t,
				      0),
		    -EINVAL);
	for (int i = 0; i < 10; i++) {
		expect_content(q, 0, KVMM_QUERY_HOST);
		expect_content(q, 1, KVMM_QUERY_HOST);
		expect_content(q, 3, KVMM_QUERY_GPU);
		/* last: the least recently used GPU blocks, which the LRU
		 * policy would keep if a query were a use */
		expect_content(q, 2, KVMM_QUERY_GPU);
	}
	cc_settled_stats(sock, &after);
	/* no open, hit, restore or move of any tier counted: the same
	 * bytes */
	t_assert_eq(after.prefix_opens, before.prefix_opens);
	t_assert_eq(after.prefix_blocks_hit, before.prefix_blocks_hit);
	for (int i = 0; i < 3; i++)
		t_assert_eq(after.tiers[i].hits, before.tiers[i].hits);
	t_assert(!memcmp(&before, &after, sizeof(before)));
	/* ADMIN_STATUS counted each query kvmmd answered (not the three
	 * libkvmm refused): 2 of 4 hashes found in host memory, 5 of 6 (2
	 * GPU, 3 host), 3 of 3 (the same chain: 2 GPU, 1 host), then 40 of
	 * 3 hashes, half of them on the GPU, half in host memory */
	status_of(sock, &st1);
	expect_counted(&st0, &st1, 3 + 40, 4 + 6 + 3 + 40 * NB, 2 + 2 + 20 * NB,
		       2 + 3 + 1 + 20 * NB, 0, 0);
	/* the same counters through the public call, from this (not admin)
	 * session: whole, and as a client built for ABI 1.6 reads them;
	 * ADMIN_STATUS counts the two sent, not the one refused here */
	{
		struct kvmm_tier_stats_reply mine;
		size_t old =
			offsetof(struct kvmm_tier_stats_reply, prefix_holes);

		memset(&mine, 0xee, sizeof(mine));
		t_ok(kvmm_tier_stats(q->c, &mine, sizeof(mine)));
		t_assert_eq(mine.size, sizeof(mine));
		t_assert(!memcmp(&mine, &after, sizeof(mine)));
		memset(&mine, 0xee, sizeof(mine));
		t_ok(kvmm_tier_stats(q->c, &mine, old));
		t_assert_eq(mine.size, old);
		t_assert(!memcmp((char *)&mine + 4, (char *)&after + 4,
				 old - 4));
		t_assert_eq(((unsigned char *)&mine)[old],
			    0xee); /* untouched */
		t_assert_eq(kvmm_tier_stats(q->c, &mine, old - 1), -EINVAL);
	}
	status_of(sock, &st2);
	t_assert_eq(st2.tier_stats_calls - st1.tier_stats_calls, 2);
	expect_counted(&st1, &st2, 0, 0, 0, 0, 0, 0);
}

/* Writes contents 0..3, (queries), then content 4; the tiers after. */
static void run(bool queries, uint8_t *map)
{
	struct td_daemon d;
	struct nca_args a;
	char nvme[256];
	struct qc q;

	cc_nvme_path(nvme, sizeof(nvme), queries ? "pq-asked" : "pq-plain");
	/* block = 4 pages of 64 KiB; GPU 6 blocks; host 8 slots (policy:
	 * 6); NVMe 7 (6), nothing saved at a stop; LRU: a use would change
	 * the victim; the block size is the first region's */
	cc_start(&d, nca_args(&a, nvme, 6, NCA_BLOCK_UNNAMED));
	for (int k = 0; k < 4; k++)
		cc_write_content(d.sock, &contents, k);
	/* the same connection and region in both runs: only the queries
	 * differ */
	qc_open(&q, d.sock, 0);
	if (queries)
		ask_all(d.sock, &q);
	cc_write_content(d.sock, &contents, 4);
	{
		struct kvmm_status_reply a, b;

		status_of(d.sock, &a);
		tier_map(d.sock, &q, map);
		status_of(d.sock, &b);
		/* one query a block, all found but content 0's, on NVMe
		 * (eviction_order() checks where each is) */
		expect_counted(&a, &b, NCONTENT * NB, NCONTENT * NB, 2 * NB,
			       2 * NB, NB, 0);
	}
	qc_close(&q);
	cc_stop(&d);
	unlink(nvme);
}

static void eviction_order(void)
{
	uint8_t plain[NCONTENT * NB], asked[NCONTENT * NB];

	run(false, plain);
	run(true, asked);
	for (int i = 0; i < NCONTENT * NB; i++)
		if (plain[i] != asked[i])
			t_fail("content %d block %d: tier %d without queries, %d with them",
			       i / NB, i % NB, plain[i], asked[i]);
	/* what the comparison rests on: content 2, the least recently
	 * used on the GPU, went down to host memory when content 4 came in
	 * (a query that counted as a use would have sent content 3 down
	 * instead), content 0 on to NVMe */
	for (int b = 0; b < NB; b++) {
		t_assert_eq(plain[0 * NB + b], KVMM_QUERY_NVME);
		t_assert_eq(plain[1 * NB + b], KVMM_QUERY_HOST);
		t_assert_eq(plain[2 * NB + b], KVMM_QUERY_HOST);
		t_assert_eq(plain[3 * NB + b], KVMM_QUERY_GPU);
		t_assert_eq(plain[4 * NB + b], KVMM_QUERY_GPU);
	}
}

/* A block whose copy down is slowed (2 s) is reported moving, then in
 * host memory once the copy is done. */
static void moving(void)
{
	const char *args[] = { "--cache-gpu-blocks", "3", "--host-mem", "2M",
			       NULL };
	struct kvmm_tier_stats_reply ts;
	struct td_daemon d;
	struct qc q;

	cc_start_with_delay(&d, args, "KVMMD_TEST_DEMOTE_DELAY_MS", 2000);
	cc_write_content(d.sock, &contents, 0);
	qc_open(&q, d.sock, 0);
	expect_content(&q, 0, KVMM_QUERY_GPU);
	/* content 1 takes the GPU's room: content 0 is copied down */
	cc_write_content(d.sock, &contents, 1);
	expect_content(&q, 0, KVMM_QUERY_MOVING);
	expect_content(&q, 1, KVMM_QUERY_GPU);
	cc_settled_stats(d.sock, &ts);
	expect_content(&q, 0, KVMM_QUERY_HOST);
	{
		struct kvmm_status_reply zero = { 0 }, st;

		/* ADMIN_STATUS (ABI 1.20): the four queries by where */
		status_of(d.sock, &st);
		expect_counted(&zero, &st, 4, 4 * NB, 2 * NB, NB, 0, NB);
	}
	qc_close(&q);
	cc_stop(&d);
}

/* A process of uid (root: 0) whose region has salt sees n of h. */
static void query_as(const char *sock, uid_t uid, uint64_t salt,
		     const uint64_t *h, int want)
{
	pid_t p = fork();

	t_assert(p >= 0);
	if (p == 0) {
		struct qc q;
		uint8_t t[NB];
		int n;

		if (uid)
			cu_become(uid, uid);
		qc_open(&q, sock, salt);
		n = kvmm_prefix_query(q.r, h, NB, t, 0);
		if (n != want)
			t_fail("uid %u salt %llu: %d blocks, expected %d",
			       (unsigned)uid, (unsigned long long)salt, n,
			       want);
		for (int b = 0; b < n; b++)
			t_assert_eq(t[b], KVMM_QUERY_GPU);
		qc_close(&q);
		_exit(0);
	}
	t_assert_eq(cc_wait_child(p), 0);
}

static void scope_uid(void)
{
	const char *args[] = { "--socket-mode", "0666", "--cache-scope", "uid",
			       NULL };
	uint64_t h[NB] = { 0x9e5c0001, 0x9e5c0002, 0x9e5c0003 };
	struct td_daemon d;

	if (geteuid() != 0) {
		printf("skipping the --cache-scope uid part: not root\n");
		return;
	}
	cu_start(&d, args);
	cu_publish_as(d.sock, UID_A, UID_A, h, NB, 5, NB);
	query_as(d.sock, UID_A, 0, h, NB);
	query_as(d.sock, UID_B, 0, h, 0);
	query_as(d.sock, 0, 0, h, 0);
	query_as(d.sock, UID_A, 1234, h, 0); /* another salt */
	cc_stop(&d);
}

/* Bad requests on the wire: an error, no reply body. */
static void bad_input(void)
{
	struct td_daemon d;
	const char *args[] = { NULL };
	struct {
		struct kvmm_prefix_query q;
		uint64_t h[2];
	} m;
	char rep[256];
	struct cc c;

	cc_start(&d, args);
	cc_connect(&c, d.sock);
	cc_region(&c);
	memset(&m, 0, sizeof(m));
	m.q.size = sizeof(m.q);
	m.q.region_id = c.region;
	m.q.nr_hashes = 2;
	m.h[0] = 1;
	m.h[1] = 2;
	/* the cache not used yet: 0 blocks, and nothing set up by asking */
	t_assert_eq(cc_call(&c, KVMM_CMD_PREFIX_QUERY, &m, sizeof(m), rep,
			    sizeof(rep), NULL, NULL),
		    0);
	t_assert_eq(((struct kvmm_prefix_query_reply *)rep)->nr_blocks, 0);
	m.q.flags = 1;
	t_assert_eq(cc_call(&c, KVMM_CMD_PREFIX_QUERY, &m, sizeof(m), rep,
			    sizeof(rep), NULL, NULL),
		    -EINVAL);
	m.q.flags = 0;
	m.q.reserved[1] = 1;
	t_assert_eq(cc_call(&c, KVMM_CMD_PREFIX_QUERY, &m, sizeof(m), rep,
			    sizeof(rep), NULL, NULL),
		    -EINVAL);
	m.q.reserved[1] = 0;
	m.q.nr_hashes = 3; /* more than the message holds */
	t_assert_eq(cc_call(&c, KVMM_CMD_PREFIX_QUERY, &m, sizeof(m), rep,
			    sizeof(rep), NULL, NULL),
		    -EINVAL);
	m.q.nr_hashes = KVMM_PREFIX_MAX_BLOCKS + 1;
	t_assert_eq(cc_call(&c, KVMM_CMD_PREFIX_QUERY, &m, sizeof(m), rep,
			    sizeof(rep), NULL, NULL),
		    -EINVAL);
	m.q.nr_hashes = 2;
	m.q.region_id = c.region + 100;
	t_assert_eq(cc_call(&c, KVMM_CMD_PREFIX_QUERY, &m, sizeof(m), rep,
			    sizeof(rep), NULL, NULL),
		    -ENOENT);
	{
		struct kvmm_status_reply zero = { 0 }, st;

		/* only the one answered is counted (ABI 1.20) */
		status_of(d.sock, &st);
		expect_counted(&zero, &st, 1, 2, 0, 0, 0, 0);
	}
	cc_disconnect(&c);
	cc_stop(&d);
}

int main(void)
{
	bad_input();
	eviction_order();
	moving();
	scope_uid();
	return 0;
}
