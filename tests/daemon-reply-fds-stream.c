// SPDX-License-Identifier: MIT
/*
 * A libkvmm client needs room for one message's fds (253), not for a whole
 * reply's: each SEQ_EXTEND or PREFIX_OPEN message's fds are imported and
 * closed before the next message is received.  A real kvmmd (4 KiB host
 * pages, 4 per block); a publisher process fills and publishes a prefix of
 * 80 blocks (320 pages) and exits (the cache keeps the blocks); a client
 * process lowers its soft RLIMIT_NOFILE to 280, below either reply:
 *   - ONE extend of a fresh sequence to 160 blocks: 640 new pages, 640
 *     fds in three messages (253 + 253 + 134);
 *   - ONE prefix open of the published prefix: 320 new pages (it holds
 *     none of them), 320 fds in two messages;
 * every page is written and read back (the prefix shows the publisher's
 * bytes), and after each call the process holds exactly the fds it held
 * once connected.  While a call runs it may hold those plus one
 * message's 253, which the limit of 280 allows and the kernel enforces.
 * When libkvmm received a whole reply before importing any page, both
 * calls failed here (-EPROTO: recvmsg() cut the second message's fds
 * short, MSG_CTRUNC).  Under a limit below its own fds + 253 no message
 * of 253 fds fits at all, however it is handled (the kernel delivers a
 * message's fds in one go): tests/daemon-reply-fds-error.c shows that
 * extend failing -EMFILE and leaving the client as it was.
 */
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>

#include "kvmm/kvmm.h"
#include "tests/lib/client_fds.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

#define LIMIT 280
#define BLOCKS 160 /* one extend: 640 pages */
#define HASH0 0x7700 /* the prefix's first block hash */
#define PREFIX 80 /* one prefix open: 320 pages */

static const char *const args[] = { "--page-size", "4K", "--gpu-mem", "8M",
				    NULL };

static struct kvmm_region_opts ro = CF_REGION(BLOCKS, 23);

static const struct kvmm_connect_opts co = CF_CONNECT("fd-stream");

static struct td_daemon d;

/* Fills PREFIX blocks with its bytes and publishes them. */
static int publisher(void)
{
	cf_publish(&co, &ro, HASH0, PREFIX, 1);
	return 0;
}

static int client(void)
{
	struct kvmm_stats ks = { .size = sizeof(ks) };
	uint64_t hashes[PREFIX];
	struct kvmm_conn *c;
	struct kvmm_region *r;
	struct rlimit rl;
	uint32_t a, p, n;
	int before, connected, err;

	cf_set_nofile(LIMIT, &rl);
	before = cf_count_fds();
	t_ok(kvmm_connect(&co, &c));
	t_ok(kvmm_region_create(c, &ro, &r));
	connected = cf_count_fds();
	/* room for its own fds and one message's, not for either reply */
	t_assert(connected + KVMM_MSG_MAX_FDS <= LIMIT);
	t_assert(BLOCKS * CF_PPB > LIMIT && PREFIX * CF_PPB > LIMIT);

	t_ok(kvmm_seq_open(r, &a));
	err = kvmm_seq_extend(r, a, BLOCKS * 32);
	if (err)
		t_fail("one extend of %d pages under RLIMIT_NOFILE %d: %s",
		       BLOCKS * CF_PPB, LIMIT, strerror(-err));
	t_assert_eq(cf_count_fds(), connected);
	t_assert_eq(kvmm_seq_len(r, a), BLOCKS * 32);
	cf_fill(r, a, 0, BLOCKS, 2);
	cf_check(r, a, 0, BLOCKS, 2);

	cf_hashes(hashes, PREFIX, HASH0);
	err = kvmm_seq_open_prefix(r, hashes, PREFIX, &p, &n);
	if (err)
		t_fail("one prefix open of %d pages under RLIMIT_NOFILE %d: %s",
		       PREFIX * CF_PPB, LIMIT, strerror(-err));
	t_assert_eq(n, PREFIX);
	t_assert_eq(cf_count_fds(), connected);
	cf_check(r, p, 0, PREFIX, 1); /* the publisher's bytes */
	cf_check(r, a, 0, BLOCKS, 2);
	/* the prefix is the cache's, mapped read-only (it wrote 0x5a into
	 * the shared block here until 5 December) */
	t_assert_eq(kvmm_seq_block_readonly(r, p, PREFIX - 1), 1);

	t_ok(kvmm_get_stats(c, &ks));
	t_assert_eq(ks.pages_imported, (BLOCKS + PREFIX) * CF_PPB);
	t_assert_eq(ks.pages_mapped, (BLOCKS + PREFIX) * CF_PPB);
	printf("client under RLIMIT_NOFILE %d: one extend of %d new pages, one prefix open of %d; fds %d before connect, %d connected, %d after each\n",
	       LIMIT, BLOCKS * CF_PPB, PREFIX * CF_PPB, before, connected,
	       cf_count_fds());
	t_ok(kvmm_seq_close(r, p));
	t_ok(kvmm_seq_close(r, a));
	t_ok(kvmm_region_destroy(r));
	kvmm_disconnect(c);
	t_assert_eq(cf_count_fds(), before);
	return 0;
}

int main(void)
{
	cf_run_daemon(&d, args, publisher, client);
	printf("ok\n");
	return 0;
}
