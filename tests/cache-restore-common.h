/* SPDX-License-Identifier: MIT */
/*
 * Shared by the tests of asynchronous restores (tests/cache-restore-*.c):
 * a kvmmd with small GPU and host tiers and an NVMe file, whose restore
 * jobs are slowed down by KVMMD_TEST_RESTORE_DELAY_MS so a PREFIX_OPEN
 * stays pending long enough for other clients to act meanwhile; contents
 * written by writer processes and pushed down to NVMe.
 */
#ifndef KVMM_TESTS_CACHE_RESTORE_COMMON_H
#define KVMM_TESTS_CACHE_RESTORE_COMMON_H

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>

#include "tests/cache-common.h"
#include "tests/lib/daemon.h"
#include "tests/lib/nvme_layout.h"
#include "tests/lib/nvme_probe.h"

#define CR_NB 8 /* blocks per content */

struct cr_env {
	struct td_daemon d;
	char nvme[256];
	char nvme_size[NT_SIZE_ARG_LEN];
	char delay[16];
};

/* Blocks cached over all tiers, and dropped from any. */
static inline uint64_t cr_cached(const struct kvmm_tier_stats_reply *ts)
{
	return ts->tiers[0].used_blocks + ts->tiers[1].used_blocks +
	       ts->tiers[2].used_blocks;
}

static inline uint64_t cr_drops(const struct kvmm_tier_stats_reply *ts)
{
	return ts->tiers[0].drops + ts->tiers[1].drops + ts->tiers[2].drops;
}

static inline uint64_t cr_hash(int content, int b)
{
	return 0x7100000ull * (content + 1) + b + 1;
}

/*
 * Start kvmmd (lru: the placements below are its; asym's prefix rule
 * evicts a chain from its end): 8 cached GPU blocks (one content), a host tier of 8 slots (6 for the
 * policy), an NVMe file of nvme_slots slots, every restore delayed by
 * delay_ms, plus one option extra1 with its value extra2 (NULL: none).
 * Skips (77) when O_DIRECT io_uring is impossible where the file goes.
 */
static inline void cr_start_args(struct cr_env *env, int nvme_slots,
				 int delay_ms, const char *extra1,
				 const char *extra2)
{
	cc_nvme_path(env->nvme, sizeof(env->nvme), "restore");
	t_nvme_require(env->nvme);
	nt_size_arg(env->nvme_size, sizeof(env->nvme_size), nvme_slots,
		    CC_PPB * CC_PAGE);
	snprintf(env->delay, sizeof(env->delay), "%d", delay_ms);
	setenv("KVMMD_TEST_RESTORE_DELAY_MS", env->delay, 1);
	const char *args[] = { extra1 ? extra1 : "--log-level",
			       extra1 ? extra2 : "info",
			       "--cache-gpu-blocks",
			       "8",
			       "--cache-policy",
			       "lru",
			       "--host-mem",
			       "2M",
			       "--nvme-path",
			       env->nvme,
			       "--nvme-size",
			       env->nvme_size,
			       NULL };
	int r = td_start(&env->d, args);

	unsetenv("KVMMD_TEST_RESTORE_DELAY_MS");
	if (r)
		t_fail("kvmmd did not start: %d", r);
}

static inline void cr_start(struct cr_env *env, int nvme_slots, int delay_ms)
{
	cr_start_args(env, nvme_slots, delay_ms, NULL, NULL);
}

static inline void cr_stop(struct cr_env *env)
{
	int r = td_stop(&env->d);

	if (r)
		td_dump_log(&env->d);
	t_assert_eq(r, 0);
	unlink(env->nvme);
}

/* Content k's first nb blocks published by a writer process (it replies
 * while the copies down it caused still run). */
static inline void cr_write_blocks(const char *sock, int k, uint32_t nb)
{
	uint64_t h[CR_NB];

	for (uint32_t b = 0; b < nb; b++)
		h[b] = cr_hash(k, (int)b);
	t_assert_eq(cc_publish_content(sock, h, nb, 200 + k, NULL), 0);
}

/*
 * A reader process: content k's blocks [first, first + n) open as a
 * prefix of want blocks, each holding content k's bytes; the sequence
 * closed again.
 */
static inline void cr_open_from(const char *sock, int k, uint32_t first,
				uint32_t n, uint32_t want)
{
	pid_t p = fork();

	t_assert(p >= 0);
	if (p == 0) {
		static uint32_t ids[CR_NB * CC_PPB];
		struct kvmm_prefix_open_reply rep;
		uint64_t h[CR_NB];
		struct cc c;

		for (uint32_t b = 0; b < n; b++)
			h[b] = cr_hash(k, (int)(first + b));
		cc_connect(&c, sock);
		cc_region(&c);
		cc_prefix(&c, h, n, &rep, ids);
		if (rep.nr_blocks != want)
			t_fail("content %d from block %u: %u blocks, expected %u",
			       k, first, rep.nr_blocks, want);
		for (uint32_t b = 0; b < want; b++)
			for (uint32_t pg = 0; pg < CC_PPB; pg++)
				for (uint32_t o = 0; o < CC_PAGE; o++)
					if (c.map[ids[b * CC_PPB + pg]][o] !=
					    cc_pat(200 + k, first + b, pg, o))
						t_fail("content %d block %u page %u byte %u differs",
						       k, first + b, pg, o);
		if (want)
			cc_seq_close(&c, rep.seq_id, ids, want * CC_PPB);
		cc_disconnect(&c);
		_exit(0);
	}
	t_assert_eq(cc_wait_child(p), 0);
}

/* A writer process: content k (CR_NB blocks) published, then closed. */
static inline void cr_write_content(const char *sock, int k)
{
	cr_write_blocks(sock, k, CR_NB);
}

/* Content k is cached whole (all CR_NB blocks open as a prefix) and its
 * bytes are intact. */
static inline void cr_check_content(const char *sock, int k)
{
	struct kvmm_prefix_open_reply rep;
	uint32_t ids[CR_NB * CC_PPB];
	uint64_t h[CR_NB];
	struct cc c;

	for (int b = 0; b < CR_NB; b++)
		h[b] = cr_hash(k, b);
	cc_connect(&c, sock);
	cc_region(&c);
	cc_prefix(&c, h, CR_NB, &rep, ids);
	t_assert_eq(rep.nr_blocks, CR_NB);
	cc_check(&c, ids, CR_NB, 200 + k);
	cc_seq_close(&c, rep.seq_id, ids, CR_NB * CC_PPB);
	cc_disconnect(&c);
}

/* Wait (up to 10 s) until pending PREFIX_OPENs reach n. */
static inline void cr_wait_pending(struct cc *c, uint64_t n)
{
	struct kvmm_tier_stats_reply ts;

	for (int i = 0; i < 10000; i++) {
		cc_tier_stats(c, &ts);
		if (ts.prefix_opens_pending == n)
			return;
		usleep(1000);
	}
	t_fail("prefix_opens_pending never reached %llu (is %llu)",
	       (unsigned long long)n,
	       (unsigned long long)ts.prefix_opens_pending);
}

/*
 * Write contents 0..3: with 8 GPU blocks and 6 host blocks, contents 0
 * and 1 and the first 2 blocks of content 2 end on NVMe, nothing dropped.
 */
static inline void cr_fill_tiers(struct cr_env *env,
				 struct kvmm_tier_stats_reply *ts)
{
	for (int k = 0; k < 4; k++)
		cr_write_content(env->d.sock, k);
	cc_settled_stats(env->d.sock, ts);
	t_assert_eq(ts->tiers[0].used_blocks, 8);
	t_assert_eq(ts->tiers[1].used_blocks, 6);
	t_assert_eq(ts->tiers[2].used_blocks, 4 * CR_NB - 14);
	t_assert_eq(ts->tiers[0].drops + ts->tiers[1].drops +
			    ts->tiers[2].drops,
		    0);
}

#endif
