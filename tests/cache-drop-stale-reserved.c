// SPDX-License-Identifier: MIT
/*
 * timeout: 180
 * A drop's stale NVMe copies that it cannot claim because their free
 * slots are set aside for host -> NVMe writes in flight
 * (tier_nvme_stale_claim()'s left, Documentation/tiers.md, "Stale
 * copies"): counted in the reply's nvme_invalidate_failures, and the
 * drop's log line says how many of those failures they are and what a
 * restart makes of them.  kvmmd as tests/lib/nvme_cache_args.h sets it up
 * (lru, 3 GPU blocks, 6 host, 7 NVMe slots, nothing saved at the stop),
 * host -> NVMe writes held 3 s (KVMMD_TEST_NVME_WRITE_DELAY_MS):
 *   - contents 0-4 published (0 and 1 on NVMe, slots 0-5), `--tier gpu`
 *     drops content 4, content 0 opened: its 3 blocks restored to the
 *     GPU, its 3 slots free with their headers (stale copies): 4 free
 *     slots;
 *   - content 5 published: content 0 down to the host, content 2 from
 *     the host to NVMe, 3 writes in flight, each with a free slot set
 *     aside: of the 4 free slots 3 are set aside;
 *   - `cache-drop` (every tier): the mark, content 1's 3 dropped, content
 *     2's 3 kept busy; of content 0's 3 stale copies 1 is claimed and
 *     invalidated, 2 are left: the reply counts 1 stale invalidated and
 *     2 failures, and kvmmd's log line says `2 of those not written:
 *     stale NVMe copies left in free slots set aside for writes in
 *     flight, below the drop mark: a restart does not recover them`
 *     (without the change: the 2 failures alone);
 *   - the writes land, the drop's invalidations held 5 s
 *     (KVMMD_TEST_NVME_INVALIDATE_DELAY_MS) so that no slot is freed
 *     before: they take the 3 free slots on top, the 2 left among them,
 *     so no header of content 0 is on disk at the stop; the restart
 *     recovers content 2's 3 (written above the mark once they landed),
 *     content 0 misses;
 *   - the same with the writes failing (KVMMD_TEST_MIGRATE_FAIL=
 *     host-nvme:7-9, before the tier: no slot taken): the 2 stale copies
 *     are still on disk at the stop, valid headers of content 0, and the
 *     restart recovers neither (the drop's mark covers them) nor
 *     anything else: content 0 misses;
 *   - `--tier gpu`, no mark: content 0 on the GPU as above, content 2
 *     sent down by `kvmmctl tenant-limit UID host:3`, its 3 writes held
 *     and failing, and every write after them (host-nvme:7+: no retry
 *     takes a slot); the drop takes content 0's 3, claims 1 stale copy and
 *     leaves 2 (reply 1 and 2), the line says `no drop mark on disk: a
 *     restart may recover them, unless a write took their slot first
 *     ...`, and the restart recovers 5: content 1's 3 and the 2 copies
 *     of content 0's blocks that drop dropped (the limit the line names).
 * Skips (77) where the NVMe tier cannot run (no O_DIRECT there).
 */
#include "tests/cache-drop-common.h"
#include "tests/lib/nvme_cache_args.h"
#include "tests/lib/nvme_probe.h"

#define NB 3

static const struct cc_contents contents = { .base = 0xe5000,
					     .tag0 = 70,
					     .nb = NB };

/* What a run holds back or fails on purpose. */
enum {
	HOLD_WRITES = 1 << 0, /* host -> NVMe writes held 3 s */
	HOLD_INVALIDATIONS = 1 << 1, /* a drop's header zeroing held 5 s */
	FAIL_WRITES = 1 << 2, /* the 7th to 9th host -> NVMe writes fail */
	/* every host -> NVMe write from the 7th on fails: where a block
	 * whose write failed comes back to a host over its limit, the next
	 * block sent down, if its write landed, would take the free slot on
	 * top, a stale copy's */
	FAIL_WRITES_ON = 1 << 3,
};

static void start(struct td_daemon *d, const char *nvme, unsigned int knobs)
{
	struct nca_args a;

	if (knobs & HOLD_WRITES)
		setenv("KVMMD_TEST_NVME_WRITE_DELAY_MS", "3000", 1);
	if (knobs & HOLD_INVALIDATIONS)
		setenv("KVMMD_TEST_NVME_INVALIDATE_DELAY_MS", "5000", 1);
	/* contents 0 and 1 were the first 6 */
	if (knobs & FAIL_WRITES)
		setenv("KVMMD_TEST_MIGRATE_FAIL", "host-nvme:7-9", 1);
	if (knobs & FAIL_WRITES_ON)
		setenv("KVMMD_TEST_MIGRATE_FAIL", "host-nvme:7+", 1);
	cu_start(d, nca_args(&a, nvme, 3, 0));
	unsetenv("KVMMD_TEST_NVME_WRITE_DELAY_MS");
	unsetenv("KVMMD_TEST_NVME_INVALIDATE_DELAY_MS");
	unsetenv("KVMMD_TEST_MIGRATE_FAIL");
}

/* Wait (10 s at most) until the n writes kept busy by the drop landed
 * and had their headers written above its mark. */
static void wait_restamped(const char *sock, uint64_t n)
{
	struct kvmm_tier_stats_reply ts;

	for (int i = 0; i < 1000; i++) {
		cc_settled_stats(sock, &ts);
		if (ts.nvme_restamped == n)
			return;
		usleep(10000);
	}
	t_fail("TIER_STATS: %llu restamped, expected %llu",
	       (unsigned long long)ts.nvme_restamped, (unsigned long long)n);
}

/* Valid slot headers in the tier file that name one of content k's
 * blocks. */
static int content_headers(const char *path, int k)
{
	struct tier_nvme_slot_header h;
	uint64_t hashes[NB];
	int n = 0, fd = open(path, O_RDONLY | O_CLOEXEC);

	cc_content_hashes(&contents, k, hashes);
	t_assert(fd >= 0);
	for (int i = 0; i < NCA_NVME_SLOTS; i++) {
		off_t off = (off_t)NT_SLOT_OFFSET(i, NCA_BLOCK_BYTES);

		t_assert_eq(pread(fd, &h, sizeof(h), off), (ssize_t)sizeof(h));
		for (int b = 0; b < NB && h.magic == TIER_NVME_SLOT_MAGIC; b++)
			n += h.hash == hashes[b];
	}
	close(fd);
	return n;
}

/*
 * Contents 0-4 published, `--tier gpu` drops content 4, content 0 opened
 * back to the GPU: content 1 on NVMe (slots 3-5), content 0's 3 slots
 * stale copies, 4 slots free.
 */
static void stale_content0(const char *sock)
{
	struct kvmm_admin_cache_drop_reply r;

	cd_fill_to_nvme(sock, &contents);
	r = cd_kvmmctl(sock, "--tier gpu");
	cd_expect(&r, NB, 0, 0, 0, 0, 0);
	cd_open_expect(sock, &contents, 0, NB, 0, 0, NB);
}

/* kvmmd's log holds the drop's line with 1 stale copy invalidated and
 * 2 left, and what follows from the mark (or none). */
static void expect_left_line(const struct td_daemon *d, bool mark)
{
	static char log[1 << 16];
	char want[512];

	snprintf(
		want, sizeof(want),
		"; 1 stale NVMe copies invalidated; 2 NVMe headers or marks not written; 2 of those not written: stale NVMe copies left in free slots set aside for writes in flight, %s",
		mark ? "below the drop mark: a restart does not recover them; NVMe slots below generation " :
		       "no drop mark on disk: a restart may recover them, unless a write took their slot first (a write takes the free slot on top, not the one it reserved)\n");
	t_assert(td_read_log(d, log, sizeof(log)) > 0);
	if (!strstr(log, want))
		t_fail("no \"%s\" in kvmmd's log:\n%s", want, log);
}

/*
 * A drop of every tier with content 2's writes in flight.  fail: they
 * fail before the tier, so no write takes a slot and the 2 stale copies
 * stay on disk; else they land, the drop's invalidations held until
 * after (their zeroing frees slots on top of the stack first, which the
 * writes would take instead), into the 3 free slots on top: the 2 left
 * and slot 6.
 */
static void drop_left(const char *nvme, bool fail)
{
	struct kvmm_admin_cache_drop_reply r;
	struct kvmm_tier_stats_reply ts;
	struct td_daemon d;
	uint64_t landed = fail ? 0 : NB;

	start(&d, nvme,
	      HOLD_WRITES | (fail ? FAIL_WRITES : HOLD_INVALIDATIONS));
	stale_content0(d.sock);
	/* content 0 down to the host, content 2 from the host to NVMe */
	cc_write_content(d.sock, &contents, 5);
	cd_wait_writes_held(d.sock, NB);
	r = cd_kvmmctl(d.sock, "");
	/* content 5 from the GPU, content 0's 2 landed from the host and
	 * content 3's 3; content 1 from NVMe; kept busy: content 0's third
	 * (waiting for a host slot) and content 2's 3 (written) */
	cd_expect(&r, NB, 2 + NB, NB, 0, 1, NB);
	t_assert_eq(r.kept_busy, 1 + NB);
	t_assert_eq(r.nvme_stale_invalidated, 1);
	t_assert_eq(r.nvme_invalidate_failures, 2);
	expect_left_line(&d, true);
	if (landed)
		wait_restamped(d.sock, landed);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.nvme_restamped, landed);
	cc_stop(&d);
	t_assert_eq(content_headers(nvme, 0), fail ? 2 : 0);
	t_assert_eq(content_headers(nvme, 2), landed);

	start(&d, nvme, 0);
	t_assert_eq(cd_recovered(d.sock), landed);
	cd_open_expect(d.sock, &contents, 0, 0, 0, 0, 0);
	cd_open_expect(d.sock, &contents, 2, landed, 0, 0, landed);
	cc_stop(&d);
	unlink(nvme);
	printf("writes %s: 2 stale copies left for them, said in the log; %s\n",
	       fail ? "failed" : "landed",
	       fail ? "on disk, not recovered under the mark" :
		      "overwritten by the writes");
}

/*
 * `--tier gpu`, no mark: content 0 on the GPU (its 3 stale copies on
 * NVMe), content 2 sent down by a host limit of 3 blocks, its writes
 * held and failing: the drop takes content 0, claims 1 of its stale
 * copies and leaves 2, which stay on disk and come back at the restart
 * (with content 1's 3, which no drop took).  Every later write fails
 * too: a failed write's block goes back to the host, over the limit,
 * which sends another block down; such a write that landed before the
 * stop took a stale copy's slot (1 or 0 of them on disk in about one
 * run in five with host-nvme:7-9; the file of such a run held content
 * 3's blocks at generations 10 and 11 in slots 0 and 2).
 */
static void gpu_drop_left(const char *nvme)
{
	struct kvmm_admin_cache_drop_reply r;
	struct td_daemon d;
	char cmd[64], out[4096];

	start(&d, nvme, HOLD_WRITES | FAIL_WRITES_ON);
	stale_content0(d.sock);
	/* the host's least recently used 3 (content 2) down to NVMe */
	snprintf(cmd, sizeof(cmd), "tenant-limit %u host:%d",
		 (unsigned)getuid(), NB);
	t_assert_eq(td_kvmmctl(d.sock, cmd, out, sizeof(out)), 0);
	cd_wait_writes_held(d.sock, NB);
	r = cd_kvmmctl(d.sock, "--tier gpu");
	cd_expect(&r, NB, 0, 0, 0, 0, 0);
	t_assert_eq(r.nvme_stale_invalidated, 1);
	t_assert_eq(r.nvme_invalidate_failures, 2);
	expect_left_line(&d, false);
	cc_stop(&d);
	t_assert_eq(content_headers(nvme, 0), 2);
	t_assert_eq(content_headers(nvme, 1), NB);

	start(&d, nvme, 0);
	t_assert_eq(cd_recovered(d.sock), NB + 2);
	cd_open_expect(d.sock, &contents, 1, NB, 0, 0, NB);
	cc_stop(&d);
	unlink(nvme);
	printf("--tier gpu: 2 stale copies left, no mark: the restart recovers them\n");
}

int main(void)
{
	char nvme[256];

	cc_nvme_path(nvme, sizeof(nvme), "cache-drop-stale-reserved");
	t_nvme_require(nvme);
	unlink(nvme);
	drop_left(nvme, false);
	drop_left(nvme, true);
	gpu_drop_left(nvme);
	return 0;
}
