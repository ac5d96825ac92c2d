// SPDX-License-Identifier: MIT
/*
 * The block cache serves the block sizes (pages per block, 2 x the model's
 * layers) --cache-block-pages names, or those of the first regions to use
 * it.  Two models on one kvmmd, as a draft model next to its target: a
 * 1-layer region (2 pages a block) and a 2-layer one (4).
 *
 *   - with --cache-block-pages 4 the tiers open at start (the log says so
 *     before any client; a tier that cannot open stops the start, its
 *     reason logged); the small model's publish, even the very
 *     first, is refused (-EOPNOTSUPP) and cannot claim the tiers; the big
 *     model's blocks are cached and shared with another process' prefix
 *     open; the small model's prefix open finds nothing; one WARN line
 *     names the region, both sizes and the option, however often;
 *   - without the option the first region to publish sets the first size
 *     (the log says so), and the other model's first publish a second
 *     (tests/cache-multi-size.c has the rest of several sizes).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

#define TPB 256

static const uint64_t small_h[2] = { 0x5100, 0x5101 };
static const uint64_t big_h[2] = { 0xb100, 0xb101 };

struct model {
	struct kvmm_conn *c;
	struct kvmm_region *r;
	uint32_t s;
};

static void model_open(struct model *m, const char *sock, const char *name,
		       uint32_t layers)
{
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.socket_path = sock,
					.name = name };
	struct kvmm_region_opts ro = { .size = sizeof(ro),
				       .layers = layers,
				       .kv_heads = 2,
				       .head_dim = 64,
				       .dtype_bytes = 2,
				       .max_seqs = 4,
				       .max_tokens = 2048 };

	t_ok(kvmm_connect(&co, &m->c));
	t_ok(kvmm_region_create(m->c, &ro, &m->r));
	t_assert_eq(kvmm_region_tokens_per_block(m->r), TPB);
	t_ok(kvmm_seq_open(m->r, &m->s));
	t_ok(kvmm_seq_extend(m->r, m->s, 2 * TPB + 1));
}

/* Publish the model's two full blocks: what kvmm_block_publish says. */
static int publish(struct model *m, const uint64_t *h)
{
	return kvmm_block_publish(m->r, m->s, 0, 2, 0, h);
}

/* In another process: a prefix open of h in a region of `layers`; exits
 * with the number of blocks found. */
static int prefix_blocks(const char *sock, uint32_t layers, const uint64_t *h)
{
	int st;
	pid_t p = fork();

	t_assert(p >= 0);
	if (p == 0) {
		struct model m;
		uint32_t s, n = 0;

		model_open(&m, sock, "reader", layers);
		if (kvmm_seq_open_prefix(m.r, h, 2, &s, &n))
			_exit(100);
		_exit((int)n);
	}
	t_assert_eq(waitpid(p, &st, 0), p);
	t_assert(WIFEXITED(st));
	return WEXITSTATUS(st);
}

static void read_log(const struct td_daemon *d, char *buf, size_t len)
{
	t_assert(td_read_log(d, buf, len) >= 0);
}

int main(void)
{
	const char *named[] = { "--cache-block-pages", "4", NULL };
	static char log[1 << 16];
	struct td_daemon d;
	struct model small, big;
	int err;

	/* the operator names the size: the tiers open at start, before any
	 * client (not in the first publish) */
	err = td_start(&d, named);
	if (err)
		t_fail("daemon: %s", strerror(-err));
	read_log(&d, log, sizeof(log));
	t_assert_eq(t_count(log,
			    "cache: blocks of 4 pages (--cache-block-pages)"),
		    1);
	model_open(&small, d.sock, "draft", 1);
	model_open(&big, d.sock, "target", 2);
	t_assert_eq(publish(&small, small_h), -EOPNOTSUPP);
	t_assert_eq(publish(&small, small_h), -EOPNOTSUPP);
	t_assert_eq(publish(&big, big_h), 2);
	t_assert_eq(prefix_blocks(d.sock, 2, big_h), 2);
	t_assert_eq(prefix_blocks(d.sock, 1, small_h), 0);
	read_log(&d, log, sizeof(log));
	t_assert_eq(t_count(log,
			    "cache: blocks of 4 pages (--cache-block-pages)"),
		    1);
	t_assert_eq(
		t_count(log,
			"has blocks of 2 pages, the cache's have 4 (--cache-block-pages): its blocks are not cached"),
		2); /* draft's region, and the reader's */
	t_assert_eq(t_count(log, "(draft) has blocks of 2 pages"), 1);
	kvmm_disconnect(small.c);
	kvmm_disconnect(big.c);
	t_assert_eq(td_stop(&d), 0);

	/* ... so a tier that cannot open stops the start, with its reason
	 * (a missing directory is refused with the options now: a file too
	 * small for one block of 4 pages is what only the tier finds) */
	{
		char nvme[256];
		const char *bad[] = { "--cache-block-pages",
				      "4",
				      "--host-mem",
				      "1M",
				      "--nvme-path",
				      nvme,
				      "--nvme-size",
				      "64K",
				      NULL };

		snprintf(nvme, sizeof(nvme), "%s/kvmm-block-size-%d",
			 getenv("KVMM_NVME_TEST_DIR") ?
				 getenv("KVMM_NVME_TEST_DIR") :
				 "/var/tmp",
			 (int)getpid());
		t_assert_eq(td_start(&d, bad), -ECHILD);
		read_log(&d, log, sizeof(log));
		t_assert_eq(t_count(log, "cache: setting up the tiers failed"),
			    1);
		unlink(d.log);
		rmdir(d.dir);
		unlink(nvme);
	}

	/* by default the first region to publish sets the first size, the
	 * other model's the second: both cached */
	err = td_start(&d, NULL);
	if (err)
		t_fail("daemon: %s", strerror(-err));
	model_open(&small, d.sock, "draft", 1);
	model_open(&big, d.sock, "target", 2);
	t_assert_eq(publish(&small, small_h), 2);
	t_assert_eq(publish(&big, big_h), 2);
	t_assert_eq(prefix_blocks(d.sock, 1, small_h), 2);
	t_assert_eq(prefix_blocks(d.sock, 2, big_h), 2);
	/* hashes of one size are not looked up in the other's cache */
	t_assert_eq(prefix_blocks(d.sock, 2, small_h), 0);
	read_log(&d, log, sizeof(log));
	t_assert_eq(
		t_count(log,
			"cache: blocks of 2 pages (the first region to use the cache)"),
		1);
	t_assert_eq(
		t_count(log,
			"cache: blocks of 4 pages (the first region of a new size)"),
		1);
	t_assert_eq(t_count(log, "its blocks are not cached"), 0);
	kvmm_disconnect(small.c);
	kvmm_disconnect(big.c);
	t_assert_eq(td_stop(&d), 0);
	return 0;
}
