// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * A planned stop can keep the cache: with --nvme-save-on-stop MS kvmmd
 * moves the blocks of its GPU and host tiers to NVMe before it exits (for
 * up to MS ms), so the next start finds them there.
 *
 *   - 4 contents of 2 blocks, 2 cached on the GPU and 6 in host memory,
 *     none on NVMe; SIGTERM; the log says what moved; a new kvmmd on the
 *     same file recovers all 8, and each content reads back from NVMe
 *     byte-identical;
 *   - by default nothing moves: the next start recovers nothing and
 *     every content is a miss;
 *   - an NVMe tier of 6 slots (5 for the policy) keeps 5 or 6 (the policy
 *     drops what does not fit, as it would for room; a block dropped
 *     while its write ran is still on disk);
 *   - out of time (copies slowed to 300 ms a batch, 100 ms allowed): a
 *     WARN line, the moves still running are lost, and kvmmd still
 *     stops cleanly (exit 0, every page back); a save of more than a
 *     second logs how far it is every second;
 *   - without --cache-block-pages the NVMe tier opens and recovers at
 *     start, for the block size its file held (no client's command waits
 *     for the recovery), and keeps its blocks when the first region's
 *     are that size; a region of another size has it formatted anew.
 */
#include "tests/cache-common.h"
#include "tests/lib/nvme_cache_args.h"
#include "tests/lib/nvme_probe.h"

#define NCONTENT 4
#define NB 2

static const struct cc_contents contents = { .base = 0x5a7e000,
					     .tag0 = 60,
					     .nb = NB };

/* Print the log's lines that hold needle (the test's output). */
static void show(const char *log, const char *needle)
{
	for (const char *p = log; (p = strstr(p, needle));) {
		const char *b = p, *e = strchr(p, '\n');

		while (b > log && b[-1] != '\n')
			b--;
		printf("%.*s\n", (int)(e ? e - b : (long)strlen(b)), b);
		p = e ? e : p + strlen(p);
	}
}

/* How many blocks of content k a prefix open finds (from NVMe). */
static uint32_t found(const char *sock, int k)
{
	return cc_found_on_nvme(sock, &contents, k);
}

/* A 1-layer model's region (blocks of 2 pages) publishes one block. */
static int publish_small(const char *sock)
{
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.socket_path = sock,
					.name = "small" };
	struct kvmm_region_opts ro = { .size = sizeof(ro),
				       .layers = 1,
				       .kv_heads = 2,
				       .head_dim = 64,
				       .dtype_bytes = 2,
				       .max_seqs = 2,
				       .max_tokens = 2 * CC_TPB };
	const uint64_t h = 0x5a7e5a11;
	struct kvmm_region *r;
	struct kvmm_conn *c;
	uint32_t s;
	int n;

	t_ok(kvmm_connect(&co, &c));
	t_ok(kvmm_region_create(c, &ro, &r));
	t_ok(kvmm_seq_open(r, &s));
	t_ok(kvmm_seq_extend(r, s, CC_TPB));
	n = kvmm_block_publish(r, s, 0, 1, 0, &h);
	kvmm_disconnect(c);
	return n;
}

/*
 * Write the contents into a kvmmd started with args (nca_save_args(): 2
 * cached GPU blocks, 8 host slots, 6 for the policy), stop it (its log
 * into log), start another on the same file; returns the blocks it
 * recovered and leaves it running in d.
 */
static uint64_t stop_and_restart(struct td_daemon *d, const char *const *args,
				 const char *const *args2, char *log,
				 size_t len)
{
	struct kvmm_tier_stats_reply ts;

	cc_start(d, args);
	for (int k = 0; k < NCONTENT; k++)
		cc_write_content(d->sock, &contents, k);
	cc_settled_stats(d->sock, &ts);
	t_assert_eq(ts.tiers[0].used_blocks, 2);
	t_assert_eq(ts.tiers[1].used_blocks, 6);
	t_assert_eq(ts.tiers[2].used_blocks, 0);
	/* SIGTERM: the save runs here */
	t_assert_eq(td_stop_log(d, log, len), 0);
	show(log, "cache: stopping");
	cc_start(d, args2);
	/* the tiers opened at start: the recovery is done */
	cc_settled_stats(d->sock, &ts);
	return ts.recovered_blocks;
}

int main(void)
{
	static char log[1 << 16];
	char nvme[256];
	struct td_daemon d;
	uint32_t hits;

	cc_nvme_path(nvme, sizeof(nvme), "cache-save-on-stop");
	t_nvme_require(nvme);
	{
		struct nca_args a;
		const char *const *args =
			nca_save_args(&a, nvme, 2, 16, "10000", 0);

		t_assert_eq(stop_and_restart(&d, args, args, log, sizeof(log)),
			    NCONTENT * NB);
		t_assert_eq(
			t_count(log,
				"cache: stopping: moving 2 GPU and 6 host blocks to NVMe"),
			1);
		t_assert_eq(
			t_count(log,
				"cache: stopping: 8 blocks written to NVMe in"),
			1);
		for (int k = 0; k < NCONTENT; k++)
			t_assert_eq(found(d.sock, k), NB);
		cc_stop(&d);
		unlink(nvme);
	}
	{
		struct nca_args a;
		const char *const *args =
			nca_save_args(&a, nvme, 2, 16, NULL, 0);

		t_assert_eq(stop_and_restart(&d, args, args, log, sizeof(log)),
			    0);
		t_assert_eq(t_count(log, "cache: stopping"), 0);
		for (int k = 0; k < NCONTENT; k++)
			t_assert_eq(found(d.sock, k), 0);
		cc_stop(&d);
		unlink(nvme);
	}
	{
		struct nca_args a;
		const char *const *args = nca_save_args(&a, nvme, 2, 6, "10000",
							0); /* policy: 5 */

		uint64_t r = stop_and_restart(&d, args, args, log, sizeof(log));

		/* the policy keeps 5; a block it dropped while its write ran
		 * stays on disk in the sixth slot (eviction writes nothing) */
		t_assert(r >= 5 && r <= 6);
		hits = 0;
		for (int k = 0; k < NCONTENT; k++)
			hits += found(d.sock, k);
		t_assert(hits >= 1 && hits <= r); /* a prefix stops at a miss */
		cc_stop(&d);
		unlink(nvme);
	}
	{
		struct nca_args a;
		const char *const *args =
			nca_save_args(&a, nvme, 2, 16, "100", 0);
		struct kvmm_tier_stats_reply ts;

		/* its copies slowed down: 300 ms a batch */
		cc_start_with_delay(&d, args, "KVMMD_TEST_DEMOTE_DELAY_MS",
				    300);
		for (int k = 0; k < NCONTENT; k++)
			cc_write_content(d.sock, &contents, k);
		cc_settled_stats(d.sock, &ts);
		t_assert_eq(td_stop_log(&d, log, sizeof(log)), 0);
		show(log, "cache: stopping");
		t_assert_eq(
			t_count(log,
				"out of time (--nvme-save-on-stop), the moves still running are lost"),
			1);
		/* every page went back to the pool all the same */
		t_assert_eq(t_count(log, "stopped: 0 pages allocated at exit"),
			    1);
		unlink(nvme);
	}
	/* a save longer than a second says how far it is (copies slowed
	 * to 600 ms a batch, 5 s allowed) and still ends complete */
	{
		struct nca_args a;
		const char *const *args =
			nca_save_args(&a, nvme, 2, 16, "5000", 0);
		struct kvmm_tier_stats_reply ts;

		cc_start_with_delay(&d, args, "KVMMD_TEST_DEMOTE_DELAY_MS",
				    600);
		for (int k = 0; k < NCONTENT; k++)
			cc_write_content(d.sock, &contents, k);
		cc_settled_stats(d.sock, &ts);
		t_assert_eq(td_stop_log(&d, log, sizeof(log)), 0);
		show(log, "cache: stopping");
		t_assert(t_count(log, " of 8 blocks written to NVMe") >= 1);
		t_assert_eq(
			t_count(log,
				"cache: stopping: 8 blocks written to NVMe in"),
			1);
		unlink(nvme);
	}
	/*
	 * Without --cache-block-pages: the tier file says its blocks had 4
	 * pages, so the NVMe tier opens (and recovers) at start, before any
	 * client; the first region's blocks have 4 pages too, and they are
	 * all there.  Then one of 2 pages: the tier is formatted anew.
	 */
	{
		struct nca_args a;
		const char *const *args =
			nca_save_args(&a, nvme, 2, 16, "10000", 0);
		struct nca_args b;
		const char *const *unnamed =
			nca_save_args(&b, nvme, 2, 16, NULL, NCA_BLOCK_UNNAMED);
		struct kvmm_tier_stats_reply ts;

		/* the recovered blocks join the index at the first use;
		 * before it TIER_STATS reports what the tier recovered (it
		 * said 0, while the log said 8) */
		t_assert_eq(stop_and_restart(&d, args, unnamed, log,
					     sizeof(log)),
			    NCONTENT * NB);
		t_assert(td_read_log(&d, log, sizeof(log)) >= 0);
		t_assert_eq(
			t_count(log,
				"cache: NVMe tier opened at start for blocks of 4 pages"),
			1);
		t_assert_eq(t_count(log, "recovered 8 of 16 slots"), 1);
		t_assert_eq(t_count(log, "cache: blocks of"),
			    0); /* no client yet */
		for (int k = 0; k < NCONTENT; k++)
			t_assert_eq(found(d.sock, k), NB);
		t_assert(td_read_log(&d, log, sizeof(log)) >= 0);
		t_assert_eq(
			t_count(log,
				"cache: blocks of 4 pages (the first region to use the cache)"),
			1);
		t_assert_eq(t_count(log, "formatting it anew"), 0);
		cc_settled_stats(d.sock, &ts);
		t_assert_eq(ts.recovered_blocks, NCONTENT * NB);
		cc_stop(&d);

		cc_start(&d, unnamed);
		t_assert_eq(publish_small(d.sock), 1);
		t_assert(td_read_log(&d, log, sizeof(log)) >= 0);
		t_assert_eq(
			t_count(log,
				"the NVMe tier's blocks from the last run have 262144 bytes, the cache's 131072: formatting it anew"),
			1);
		t_assert_eq(t_count(log, "cache: blocks of 2 pages"), 1);
		cc_stop(&d);
		unlink(nvme);
	}
	return 0;
}
