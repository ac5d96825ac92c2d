// SPDX-License-Identifier: MIT
/*
 * The daemon's policy view of a block matches telemetry: kvmmd runs in
 * this process (its event loop on a thread, so the test can look inside),
 * with --telemetry bpf attached to this binary.  A client process
 * publishes two blocks, opens them as a prefix twice (the daemon traces
 * each block found, plus the first one missing) and runs 10 steps, at
 * each of which libkvmm traces that the three open sequences read them.
 * After the loop stops, one poll feeds the policy: for each block the
 * pol_cache's access_count equals the telemetry count (3 * 10 steps + 2
 * prefix opens = 32, above the
 * cache's own count), which equals the pinned map as kvmmctl's reader
 * sees it.
 *
 * The same with --cache-scope uid: the probes carry the client's hashes,
 * the cache its own names for them (scope.c).  The kernel map keeps the
 * client's steps under its hash and uid, the daemon's opens under the
 * cache's names; the daemon's poll renames each entry by its uid, so the
 * two meet on the cache's block and the policy counts 32 there too, also
 * when the client's session has ended before the poll (as here: the
 * client is gone, its session ended if the loop had not done it yet).
 * Skips (77) without root or BPF.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ebpf/telemetry_shm.h"
#include "kvmm/kvmm.h"
#include "kvmm/kvmmd/kvmmd.h"
#include "kvmm/lib/client.h"
#include "kvmm/policy/policy.h"
#include "tests/lib/inproc_daemon.h"
#include "tests/lib/small_region.h"
#include "tests/lib/test.h"

#define STEPS 10

static const uint64_t hashes[3] = { 0x1111, 0x2222, 0x3333 };

static int client(void)
{
	struct kvmm_connect_opts co = { .size = sizeof(co), .name = "view" };
	struct kvmm_conn *c;
	struct kvmm_region *r;
	uint32_t s, s1, s2, nb;

	if (kvmm_connect(&co, &c) ||
	    kvmm_region_create(c, &tr_small_region, &r) ||
	    kvmm_seq_open(r, &s) || kvmm_seq_extend(r, s, 2 * TR_TPB + 10))
		return 1;
	if (kvmm_block_publish(r, s, 0, 2, 0, hashes) != 2)
		return 2;
	/* hashes[2] was never published: each open finds 2 of 3 */
	if (kvmm_seq_open_prefix(r, hashes, 3, &s1, &nb) || nb != 2 ||
	    kvmm_seq_open_prefix(r, hashes, 3, &s2, &nb) || nb != 2)
		return 3;
	for (int step = 0; step < STEPS; step++) {
		/* libkvmm reports s, s1 and s2's blocks at each step end */
		if (kvmm_step_begin(c) || kvmm_step_end(c))
			return 4;
	}
	kvmm_disconnect(c);
	return 0;
}

/* The cache's name for a hash this (root) client sent. */
static uint64_t cached_as(const struct kd_daemon *d, uint64_t hash)
{
	return kd_scope_hash(&d->scope, 0, hash);
}

static void view(uint32_t scope)
{
	struct kd_daemon d;
	struct kd_config cfg;
	struct tel_opts po = { .size = sizeof(po), .mode = TEL_MODE_PINNED };
	struct kvmm_block_stats ts, ms;
	struct tel *maps;
	char dir[64];

	inproc_mkdir(dir, sizeof(dir), scope ? "view-uid" : "view");
	inproc_config(&d, &cfg, dir, scope ? "view-uid" : "view", TEL_MODE_BPF);
	cfg.cache_scope = scope;
	if (kd_daemon_start(&d, &cfg)) {
		rmdir(dir);
		t_skip("kvmmd with BPF telemetry did not start");
	}
	inproc_run_client(&d, cfg.socket_path);
	/* the client is gone: its session too, before the poll below */
	while (d.sessions)
		kd_session_end(d.sessions, false, "the test's client exited");
	t_assert(d.tel_feed.cache); /* cache_setup.c plugged its policy in */
	t_ok(tel_poll(d.tel)); /* feeds the policy, as the timer would */

	po.pin_root = cfg.telemetry_pin_root;
	t_ok(tel_open(&po, &maps));
	t_ok(tel_poll(maps));
	for (int b = 0; b < 2; b++) {
		struct pol_block *pb = pol_cache_lookup(
			d.tel_feed.cache, cached_as(&d, hashes[b]));

		/* the daemon's view, by the cache's names */
		t_ok(tel_block_lookup(d.tel, cached_as(&d, hashes[b]), &ts));
		t_assert_eq(ts.count, 3 * STEPS + 2);
		t_assert(pb);
		t_assert_eq(pb->access_count, ts.count);
		t_ok(tel_block_lookup(maps, hashes[b], &ms));
		if (!scope) {
			t_assert_eq(ms.count, ts.count);
			t_assert_eq(ts.last_ns, ms.last_ns);
			continue;
		}
		/* the uid scope: the maps as kvmmctl reads them, the
		 * client's steps under its hash, the daemon's prefix opens
		 * under the cache's name */
		t_assert_eq(ms.count, 3 * STEPS);
		t_assert_eq(ts.last_ns, ms.last_ns); /* the steps came last */
		t_ok(tel_block_lookup(maps, cached_as(&d, hashes[b]), &ms));
		t_assert_eq(ms.count, 2);
		/* the client's own hash names nothing in the cache, nor in
		 * the daemon's view */
		t_assert(!pol_cache_lookup(d.tel_feed.cache, hashes[b]));
		t_assert(tel_block_lookup(d.tel, hashes[b], &ts) == -ENOENT);
	}
	/* the block every open missed: traced, not in the policy */
	t_ok(tel_block_lookup(maps, cached_as(&d, hashes[2]), &ms));
	t_assert_eq(ms.count, 2);
	t_assert_eq(ms.last_tier, KVMM_TEL_TIER_MISS);
	t_assert(!pol_cache_lookup(d.tel_feed.cache, cached_as(&d, hashes[2])));
	t_assert(d.tel_feed.blocks_updated >= 2);
	tel_close(maps);

	kd_daemon_stop(&d);
	rmdir(dir);
	printf("ok (cache scope %s): the policy's view of each block equals the maps\n",
	       kd_scope_string(scope));
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "client"))
		return client();
	if (!HAVE_BPF || !HAVE_SDT)
		t_skip("built without BPF or USDT support");
	if (geteuid() != 0)
		t_skip("BPF telemetry needs root");
	view(KD_SCOPE_SHARED);
	view(KD_SCOPE_UID);
	return 0;
}
