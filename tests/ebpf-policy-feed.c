// SPDX-License-Identifier: MIT
/*
 * Telemetry feeds the policy: after a client process ran the known
 * workload, one tel_poll() with the tel_policy sink raises the resident
 * blocks' reuse counts to the traced counts (the policy's view of a block
 * matches telemetry), moves their last access to the traced time, in
 * each cache the sink feeds (kvmmd: one a block size) the blocks it
 * holds, leaves non-resident blocks alone, corrects the host reload bandwidth from the
 * measured restores, and (BPF only, from the event ring) the compute
 * efficiency from the measured recomputation.  Runs the shm
 * source always and the BPF source when root and BPF are available.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ebpf/tel_policy.h"
#include "kvmm/policy/cost_model.h"
#include "kvmm/policy/policy.h"
#include "tests/ebpf-common.h"
#include "tests/lib/bpf_pins.h"

static struct pol_cache *make_cache(struct pol_cost_model *cost)
{
	struct pol_cache_opts o = { .size = sizeof(o), .kind = POL_ASYM };
	struct pol_block_desc d = { 0 };
	struct pol_cache *c;

	o.capacity[POL_TIER_GPU] = 16;
	o.capacity[POL_TIER_HOST] = 16;
	o.cost = cost;
	o.prefix_rule = 0;
	t_ok(pol_cache_create(&o, &c));
	pol_cache_set_clock(c, 1);
	d.hash = H1;
	t_ok(pol_cache_access(c, &d, NULL));
	d.hash = H2;
	d.position = 1;
	t_ok(pol_cache_access(c, &d, NULL));
	return c;
}

/* A cache holding one block, hash. */
static struct pol_cache *make_cache_of(struct pol_cost_model *cost,
				       uint64_t hash)
{
	struct pol_cache_opts o = { .size = sizeof(o), .kind = POL_ASYM };
	struct pol_block_desc d = { .hash = hash };
	struct pol_cache *c;

	o.capacity[POL_TIER_GPU] = 16;
	o.capacity[POL_TIER_HOST] = 16;
	o.cost = cost;
	o.prefix_rule = 0;
	t_ok(pol_cache_create(&o, &c));
	pol_cache_set_clock(c, 1);
	t_ok(pol_cache_access(c, &d, NULL));
	return c;
}

/* Feed one poll into fresh caches and model; check the policy's view. */
static void check_feed(struct tel *t, bool bpf)
{
	struct pol_cost_model cost;
	struct tel_policy tp;
	struct tel_sink sink;
	struct kvmm_block_stats s;
	struct pol_cache *c, *c3;
	struct pol_block *b;
	double bw0, eff0;

	pol_cost_reference(&cost);
	bw0 = cost.bandwidth[POL_TIER_HOST];
	eff0 = cost.efficiency;
	c = make_cache(&cost);
	/* another block size's cache (kvmmd: one a size) holds H3 */
	c3 = make_cache_of(&cost, H3);
	tel_policy_init(&tp, c, &cost, true);
	tp.more[1] = c3; /* more[0] NULL: skipped */
	tel_policy_sink(&tp, &sink);
	tel_set_sink(t, &sink);
	t_ok(tel_poll(t));

	t_assert_eq(tp.blocks_seen, 3 + NBULK);
	/* only H1, H2 are resident in c, H3 in c3 */
	t_assert_eq(tp.blocks_updated, 3);
	b = pol_cache_lookup(c3, H3);
	t_assert(b);
	t_ok(tel_block_lookup(t, H3, &s));
	t_assert_eq(b->access_count, 1);
	t_assert_eq(b->last_access, s.last_ns); /* moved up from 1 */
	t_assert(!pol_cache_lookup(c3, H1));
	b = pol_cache_lookup(c, H1);
	t_assert(b);
	t_ok(tel_block_lookup(t, H1, &s));
	t_assert_eq(b->access_count, s.count);
	t_assert_eq(b->access_count, 5);
	t_assert_eq(b->last_access, s.last_ns);
	b = pol_cache_lookup(c, H2);
	t_assert(b);
	t_assert_eq(b->access_count, 3);
	t_assert(!pol_cache_lookup(c, H3));

	/* 64 KiB restores from host at 20 us: 3.3 GB/s, well under the
	 * reference profile's host bandwidth, so the estimate drops. */
	t_assert_eq(tp.transfers, 1);
	t_assert(cost.bandwidth[POL_TIER_HOST] < bw0);
	t_assert(cost.bandwidth[POL_TIER_HOST] >= bw0 / 8);
	if (bpf) {
		t_assert_eq(tp.computes, 1); /* the recompute event */
		t_assert(cost.efficiency != eff0);
	} else {
		t_assert_eq(tp.computes, 0);
		t_assert(cost.efficiency == eff0);
	}

	/* A second poll with nothing new changes nothing. */
	tp.blocks_seen = tp.transfers = 0;
	t_ok(tel_poll(t));
	t_assert_eq(tp.blocks_seen + tp.transfers, 0);
	tel_set_sink(t, NULL);
	pol_cache_destroy(c3);
	pol_cache_destroy(c);
}

int main(void)
{
	size_t size = kvmm_tel_shm_size(4096);
	struct tel_opts o = { .size = sizeof(o), .mode = TEL_MODE_SHM };
	char self[4096], pin[128];
	const char *targets[2] = { self, NULL };
	struct kvmm_tel_shm *shm;
	struct tel *t;
	ssize_t n;
	int err;

	shm = mmap(NULL, size, PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	t_assert(shm != MAP_FAILED);
	t_ok(tel_open(&o, &t));
	t_ok(tel_shm_add(t, 1, 0, shm, size));
	ebpf_drive_process(shm, 0);
	check_feed(t, false);
	tel_close(t);
	printf("ok: shm source feeds the policy\n");

	if (!HAVE_BPF || !HAVE_SDT || geteuid() != 0) {
		printf("BPF part skipped: needs root and BPF\n");
		return 0;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	t_assert(n > 0);
	self[n] = 0;
	snprintf(pin, sizeof(pin), "/sys/fs/bpf/kvmm-feed-%d", (int)getpid());
	bpf_pins_own(pin);
	o.mode = TEL_MODE_BPF;
	o.pin_root = pin;
	o.targets = targets;
	o.quiet = true;
	err = tel_open(&o, &t);
	if (err) {
		printf("BPF part skipped: %s\n", strerror(-err));
		return 0;
	}
	ebpf_drive_process(NULL, 0);
	check_feed(t, true);
	tel_close(t);
	printf("ok: BPF source feeds the policy\n");
	return 0;
}
