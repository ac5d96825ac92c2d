// SPDX-License-Identifier: MIT
/*
 * A libkvmm client of the host backend holds no fd per page it maps.  A
 * client process lowers its own soft RLIMIT_NOFILE to 64, then maps 512
 * distinct pages of a real kvmmd (4 KiB pages, 4 per block) in three
 * sequences, extending 8 blocks (32 new pages, 32 fds in one reply) at a
 * time: A grows to 64 blocks and publishes its first 8, B opens that
 * prefix (the same 32 pages mapped a second time, nothing imported) and
 * grows to 64 blocks, C grows to 8.  Every page is filled and read back,
 * bytes written through B's prefix appear in A's, and between extends
 * the process holds exactly the fds it held once connected (the fds of
 * one reply are in flight only until imported).  The maps show what it
 * costs instead: one anchor per imported page plus one mapping per mapped
 * page.  When an imported page
 * kept its fd, A's second extend failed: with 9 + 32 fds held, the next
 * reply's 32 did not fit under 64 (recvmsg truncated them: -EMSGSIZE).
 */
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>

#include "kvmm/kvmm.h"
#include "tests/lib/client_fds.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

#define LIMIT 64
#define BLOCKS 64 /* per long sequence */
#define STEP 8 /* blocks per extend: 32 fds in flight */
#define PREFIX 8
#define IMPORTED ((BLOCKS + (BLOCKS - PREFIX) + STEP) * CF_PPB) /* 512 */
#define MAPPED ((2 * BLOCKS + STEP) * CF_PPB) /* 544 */

static const char *const args[] = { "--page-size", "4K", "--gpu-mem", "4M",
				    NULL };

static struct kvmm_region_opts ro = CF_REGION(BLOCKS, 11);

static struct td_daemon d;
static int max_fds;

/* The fds held now; records the most seen in max_fds. */
static int count_fds(void)
{
	int n = cf_count_fds();

	if (n > max_fds)
		max_fds = n;
	return n;
}

/* Extend s from block `from` to `to`, STEP blocks per request. */
static void grow(struct kvmm_region *r, uint32_t s, uint32_t from, uint32_t to)
{
	for (uint32_t b = from; b < to; b += STEP) {
		uint32_t n = b + STEP < to ? b + STEP : to;
		int err = kvmm_seq_extend(r, s, n * 32);

		if (err)
			t_fail("extend to block %u under %d fds (%d open): %s",
			       n, LIMIT, count_fds(), strerror(-err));
		count_fds();
	}
}

static int client(void)
{
	struct kvmm_connect_opts co = CF_CONNECT("nofile");
	struct kvmm_stats ks = { .size = sizeof(ks) };
	struct kvmm_status_reply st;
	uint64_t hashes[PREFIX];
	struct rlimit rl;
	struct kvmm_conn *c;
	struct kvmm_region *r;
	uint32_t a, b, cs, n;
	int before, connected, after, maps0, maps, pages;

	cf_set_nofile(LIMIT, &rl);
	before = count_fds();
	maps0 = cf_count_maps(&pages);
	t_assert_eq(pages, 0);

	t_ok(kvmm_connect(&co, &c));
	t_ok(kvmm_region_create(c, &ro, &r));
	t_assert_eq(kvmm_region_tokens_per_block(r), 32);
	connected = count_fds();

	t_ok(kvmm_seq_open(r, &a));
	grow(r, a, 0, BLOCKS);
	cf_fill(r, a, 0, BLOCKS, a);
	cf_hashes(hashes, PREFIX, 0x5100);
	t_assert_eq(kvmm_block_publish(r, a, 0, PREFIX, 0, hashes), PREFIX);

	/* B: A's prefix, mapped here a second time, then its own blocks. */
	t_ok(kvmm_seq_open_prefix(r, hashes, PREFIX, &b, &n));
	t_assert_eq(n, PREFIX);
	count_fds();
	cf_check(r, b, 0, PREFIX, a);
	grow(r, b, PREFIX, BLOCKS);
	cf_fill(r, b, PREFIX, BLOCKS, b);
	t_ok(kvmm_seq_open(r, &cs));
	grow(r, cs, 0, STEP);
	cf_fill(r, cs, 0, STEP, cs);

	cf_check(r, a, 0, BLOCKS, a);
	cf_check(r, b, 0, PREFIX, a);
	cf_check(r, b, PREFIX, BLOCKS, b);
	cf_check(r, cs, 0, STEP, cs);
	/* One physical page behind A's and B's prefix slots (written by A,
	 * the publisher: B's mapping of a shared block is read-only). */
	memcpy(cf_page(r, a, 3, 5) + 100, "via A", 6);
	t_assert(!strcmp((const char *)cf_page(r, b, 3, 5) + 100, "via A"));

	t_ok(kvmm_get_stats(c, &ks));
	t_assert_eq(ks.pages_imported, IMPORTED);
	t_assert_eq(ks.pages_mapped, MAPPED);
	t_ok(td_status(&d, &st));
	t_assert_eq(st.pages_allocated, IMPORTED);
	t_assert_eq(st.pages_mapped, IMPORTED);
	after = count_fds();
	maps = cf_count_maps(&pages);
	/* No fd per page: what connect opened, nothing per page. */
	t_assert_eq(after, connected);
	t_assert_eq(max_fds, connected);
	/* A VMA per imported page (its anchor) and one per mapping. */
	t_assert_eq(pages, IMPORTED + MAPPED);
	printf("client under RLIMIT_NOFILE %d: %d pages imported, %d mapped; fds %d before connect, %d connected, %d after, at most %d; %d VMAs (%d before), %d of them kvmm pages\n",
	       LIMIT, IMPORTED, MAPPED, before, connected, after, max_fds, maps,
	       maps0, pages);

	t_ok(kvmm_seq_close(r, b));
	t_assert(!strcmp((const char *)cf_page(r, a, 3, 5) + 100, "via A"));
	t_ok(kvmm_seq_close(r, a));
	t_ok(kvmm_seq_close(r, cs));
	cf_count_maps(&pages);
	t_assert_eq(pages, 0);
	t_ok(kvmm_region_destroy(r));
	kvmm_disconnect(c);
	t_assert_eq(count_fds(), before);
	return 0;
}

int main(void)
{
	cf_run_daemon(&d, args, NULL, client);
	printf("ok\n");
	return 0;
}
