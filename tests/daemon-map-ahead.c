// SPDX-License-Identifier: MIT
/*
 * Map-ahead and big replies.
 *
 * A sequence grown a few tokens at a time, as a decoder does, finds the
 * next block already mapped by libkvmm's background thread: out of
 * hundreds of extends only the very first waits for pages.  With map-ahead
 * off, every block boundary waits.
 *
 * A 64-layer region needs 128 pages per block; one extend of three blocks
 * returns 384 page fds, more than one message can carry (253), so the
 * reply continues in KVMM_CMD_FDS messages; all pages map and hold data.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "tests/lib/client_seq.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

static struct kvmm_region_opts ro = {
	.size = sizeof(ro),
	.layers = 2,
	.kv_heads = 2,
	.head_dim = 64,
	.dtype_bytes = 2,
	.max_seqs = 2,
	.max_tokens = 4096,
};

static uint64_t grow(uint32_t ahead, uint64_t *extends)
{
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.map_ahead_set = 1,
					.map_ahead_blocks = ahead };
	struct kvmm_stats ks = { .size = sizeof(ks) };
	struct kvmm_conn *c;
	struct kvmm_region *r;
	uint32_t s;

	cs_open(&co, &ro, &c, &r, &s);
	for (uint32_t len = 4; len <= 2048; len += 4) {
		t_ok(kvmm_seq_extend(r, s, len));
		((char *)kvmm_seq_k_ptr(r, s, 1))[(len - 1) * 256] = 1;
		usleep(50); /* a decode step */
	}
	t_ok(kvmm_get_stats(c, &ks));
	kvmm_disconnect(c);
	*extends = ks.extends;
	return ks.extend_waits;
}

/*
 * map_ahead_blocks counts blocks, not fetches: with 4 blocks ahead, an
 * extend to one token maps 5 blocks itself (it waits), and a jump to 4
 * blocks (no wait: all 4 are mapped) leaves the thread 3 to map in one
 * fetch.
 */
static void count_blocks(void)
{
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.map_ahead_set = 1,
					.map_ahead_blocks = 4 };
	struct kvmm_stats ks = { .size = sizeof(ks) };
	struct kvmm_conn *c;
	struct kvmm_region *r;
	uint32_t s;

	cs_open(&co, &ro, &c, &r, &s);
	t_ok(kvmm_seq_extend(r, s, 1));
	t_ok(kvmm_seq_extend(r, s, 4 * 256));
	for (int i = 0; i < 500; i++) {
		t_ok(kvmm_get_stats(c, &ks));
		if (ks.map_ahead_blocks >= 3)
			break;
		usleep(10000);
	}
	usleep(50000); /* nothing more may come */
	t_ok(kvmm_get_stats(c, &ks));
	t_assert_eq(ks.extend_waits, 1);
	t_assert_eq(ks.map_ahead_blocks, 3);
	t_assert_eq(ks.pages_imported, 8 * 4); /* 2 layers x K, V */
	kvmm_disconnect(c);
}

int main(void)
{
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.map_ahead_set = 1 };
	struct kvmm_region_opts big = ro;
	struct kvmm_stats ks = { .size = sizeof(ks) };
	struct kvmm_status_reply st;
	struct td_daemon d;
	struct kvmm_conn *c;
	struct kvmm_region *r;
	uint64_t waits, extends;
	uint32_t s, ids[128];
	int err;

	err = td_start(&d, NULL);
	if (err)
		t_fail("daemon: %s", strerror(-err));
	waits = grow(1, &extends);
	t_assert_eq(extends, 512);
	printf("map-ahead on: %llu of %llu extends waited\n",
	       (unsigned long long)waits, (unsigned long long)extends);
	t_assert(waits <= 2);
	waits = grow(0, &extends);
	printf("map-ahead off: %llu of %llu extends waited\n",
	       (unsigned long long)waits, (unsigned long long)extends);
	t_assert_eq(waits, 8); /* 2048 tokens = 8 blocks of 256 */
	count_blocks();

	big.layers = 64;
	cs_open(&co, &big, &c, &r, &s);
	err = kvmm_seq_extend(r, s, 3 * 256);
	if (err)
		td_dump_log(&d);
	t_ok(err);
	for (uint32_t l = 0; l < 64; l++) {
		memset((void *)kvmm_seq_k_ptr(r, s, l), l, 3 * 256 * 256);
		memset((void *)kvmm_seq_v_ptr(r, s, l), l + 64, 3 * 256 * 256);
	}
	for (uint32_t l = 0; l < 64; l++) {
		unsigned char *k = (unsigned char *)kvmm_seq_k_ptr(r, s, l);

		t_assert_eq(k[3 * 256 * 256 - 1], l);
	}
	t_assert_eq(kvmm_seq_block_pages(r, s, 2, ids, 128), 128);
	t_ok(kvmm_get_stats(c, &ks));
	t_assert(ks.pages_imported >= 384);
	t_ok(td_status(&d, &st));
	t_assert(st.pages_allocated >= 384);
	kvmm_disconnect(c);
	t_ok(td_wait_idle(&d, 2000, &st));
	t_assert_eq(td_stop(&d), 0);
	return 0;
}
