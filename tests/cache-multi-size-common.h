/* SPDX-License-Identifier: MIT */
/*
 * What the tests of several cached block sizes share (cache-multi-size,
 * cache-multi-size-nvme, cache-multi-size-admin): a region of a model of
 * `layers` (2 x layers pages a block), each model's contents of NB
 * blocks with their own hashes and bytes, child processes that write
 * and publish one, or prefix-open one and check every byte (res: what
 * they found), and one size's TIER_STATS (ms_size_stats()).
 */
#ifndef KVMM_TESTS_CACHE_MULTI_SIZE_COMMON_H
#define KVMM_TESTS_CACHE_MULTI_SIZE_COMMON_H

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tests/cache-drop-common.h"

#define NB 2 /* blocks a content */
#define MAX_PPB 10

/* What a child found (MAP_SHARED, made before any fork). */
struct ms_result {
	int status; /* the publish's or open's -errno, or 0 */
	uint32_t published;
	uint32_t found;
	uint32_t from[3];
};

static struct ms_result *res; /* ms_res_init() */

/* A region of `layers` (2 x layers pages a block) into c->region. */
static inline void ms_region(struct cc *c, uint32_t layers)
{
	cc_region_sized(c, layers, 4, 4);
}

/* The hashes of content k of the model with `layers`. */
static inline void ms_hashes(uint32_t layers, int k, uint64_t *h)
{
	for (uint32_t b = 0; b < NB; b++)
		h[b] = 0x3500000ull * layers + 0x100ull * (k + 1) + b + 1;
}

static inline uint64_t ms_tag(uint32_t layers, int k)
{
	return 10 * layers + k;
}

/* Every byte of nb blocks of ppb pages (ids) written or checked. */
static inline void ms_bytes(struct cc *c, const uint32_t *ids, uint32_t nb,
			    uint32_t ppb, uint64_t tag, bool write)
{
	for (uint32_t b = 0; b < nb; b++)
		for (uint32_t p = 0; p < ppb; p++)
			for (uint32_t o = 0; o < CC_PAGE; o++) {
				unsigned char *m = &c->map[ids[b * ppb + p]][o];

				if (write)
					*m = cc_pat(tag, b, p, o);
				else if (*m != cc_pat(tag, b, p, o))
					t_fail("layers %u block %u page %u byte %u differs",
					       ppb / 2, b, p, o);
			}
}

/* A writer process: content k of the model with `layers` written and
 * published (res: the publish's status and count). */
static inline void ms_write(const char *sock, uint32_t layers, int k)
{
	pid_t p;

	memset(res, 0, sizeof(*res));
	p = fork();
	t_assert(p >= 0);
	if (p == 0) {
		struct kvmm_block_publish_reply rep = { 0 };
		uint32_t ids[NB * MAX_PPB];
		uint64_t h[NB];
		struct cc c;
		uint32_t seq;

		ms_hashes(layers, k, h);
		cc_connect(&c, sock);
		ms_region(&c, layers);
		seq = cc_seq_open(&c);
		cc_extend(&c, seq, NB * CC_TPB, ids);
		ms_bytes(&c, ids, NB, 2 * layers, ms_tag(layers, k), true);
		res->status = cc_publish(&c, seq, 0, h, NB, &rep);
		res->published = rep.published;
		cc_seq_close(&c, seq, ids, NB * 2 * layers);
		cc_disconnect(&c);
		_exit(0);
	}
	t_assert_eq(cc_wait_child(p), 0);
}

/* Contents 0 and 1 of the models of 2 layers and of 1 (4 and 2 pages a
 * block) written and published, each wholly. */
static inline void ms_publish_both(const char *sock)
{
	for (uint32_t layers = 2; layers >= 1; layers--)
		for (int k = 0; k < 2; k++) {
			ms_write(sock, layers, k);
			t_assert_eq(res->status, 0);
			t_assert_eq(res->published, NB);
		}
}

/* A reader process: content k of the model with `content_layers` opened
 * in a region of `layers`; what it found (res), every byte checked. */
static inline void ms_read(const char *sock, uint32_t layers,
			   uint32_t content_layers, int k)
{
	pid_t p;

	memset(res, 0, sizeof(*res));
	p = fork();
	t_assert(p >= 0);
	if (p == 0) {
		struct kvmm_prefix_open_reply rep;
		uint32_t ids[NB * MAX_PPB];
		uint64_t h[NB];
		struct cc c;

		ms_hashes(content_layers, k, h);
		cc_connect(&c, sock);
		ms_region(&c, layers);
		cc_prefix(&c, h, NB, &rep, ids);
		res->found = rep.nr_blocks;
		res->from[0] = rep.from_gpu;
		res->from[1] = rep.from_host;
		res->from[2] = rep.from_nvme;
		ms_bytes(&c, ids, rep.nr_blocks, 2 * layers,
			 ms_tag(content_layers, k), false);
		cc_seq_close(&c, rep.seq_id, ids, rep.nr_blocks * 2 * layers);
		cc_disconnect(&c);
		_exit(0);
	}
	t_assert_eq(cc_wait_child(p), 0);
}

/* Content k of `layers` found whole, all from tier. */
static inline void ms_expect_read(const char *sock, uint32_t layers, int k,
				  int tier)
{
	ms_read(sock, layers, layers, k);
	if (res->found != NB || res->from[tier] != NB)
		t_fail("layers %u content %d: %u found (gpu %u host %u nvme %u), expected %d from tier %d",
		       layers, k, res->found, res->from[0], res->from[1],
		       res->from[2], NB, tier);
}

/* res, shared with the children: before the first ms_write(). */
static inline void ms_res_init(void)
{
	res = mmap(NULL, sizeof(*res), PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	t_assert(res != MAP_FAILED);
}

/*
 * TIER_STATS of the cache of blocks of `pages` alone (ABI 1.21,
 * kvmm_tier_stats_size()), settled first (cc_settled_stats()).
 */
static inline void ms_size_stats(const char *sock, uint32_t pages,
				 struct kvmm_tier_stats_reply *ts)
{
	struct kvmm_tier_stats_reply sum;
	struct kvmm_conn *c;

	cc_settled_stats(sock, &sum);
	t_ok(kc_connect_admin(sock, &c));
	t_ok(kvmm_tier_stats_size(c, pages, ts, sizeof(*ts)));
	kvmm_disconnect(c);
	t_assert_eq(ts->size, sizeof(*ts));
	t_assert_eq(ts->block_pages, pages);
}

/* How often needle stands in kvmmd's log so far. */
static inline int ms_log_count(struct td_daemon *d, const char *needle)
{
	static char log[1 << 17];

	t_assert(td_read_log(d, log, sizeof(log)) >= 0);
	return t_count(log, needle);
}

/* How often tier_nvme logged what for partition i of n of file (its
 * format, its recovery). */
static inline int ms_part_line(struct td_daemon *d, const char *file,
			       unsigned int i, unsigned int n, const char *what)
{
	char line[512];

	snprintf(line, sizeof(line), "tier_nvme: %s (partition %u of %u): %s",
		 file, i, n, what);
	return ms_log_count(d, line);
}

/* kvmmd of --cache-block-pages 4,2 (in that order) formatted file anew:
 * partition 0 in slots4 slots of the 4-page size's (a 4 KiB header and
 * the payload), partition 1 in slots2 of the 2-page size's, one line
 * each. */
static inline void ms_expect_formatted(struct td_daemon *d, const char *file,
				       uint32_t slots4, uint32_t slots2)
{
	char what[64];

	snprintf(what, sizeof(what), "formatted %u slots of %u bytes", slots4,
		 4u * CC_PAGE + 4096u);
	t_assert_eq(ms_part_line(d, file, 0, 2, what), 1);
	snprintf(what, sizeof(what), "formatted %u slots of %u bytes", slots2,
		 2u * CC_PAGE + 4096u);
	t_assert_eq(ms_part_line(d, file, 1, 2, what), 1);
}

#endif
