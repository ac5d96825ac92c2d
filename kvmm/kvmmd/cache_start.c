// SPDX-License-Identifier: MIT
/*
 * The caches made at kvmmd's start: kd_cache_init() (the first size's
 * cache with its index and the loop's callbacks, the NVMe file claimed,
 * the host slab made, the caches of the other sizes --cache-block-pages
 * names, the NVMe tier opened early for the size its blocks had, and
 * with --cache-block-pages each size's tiers opened by kc_open(),
 * cache_setup.c).  Its own file because it runs once, before the socket
 * accepts, and shares nothing with the paths that serve blocks but the
 * structures it fills.
 */
#include "kvmm/kvmmd/cache_priv.h"
#include "kvmm/kvmmd/sd_notify.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kvmm/kvmmd/tier_host.h"
#include "kvmm/kvmmd/tier_nvme.h"
#include "kvmm/kvmmd/test_knob.h"

static void kc_on_settle_timer(struct kd_loop *loop, struct kd_timer *t)
{
	kc_settle(t->data);
}

static void kc_on_park_timer(struct kd_loop *loop, struct kd_timer *t)
{
	kc_park_run(t->data);
}

/* DMA pinning of the host slab through the backend (cuda:
 * cuMemHostRegister; host: a no-op). */
static int kc_pin(void *arg, void *addr, size_t len)
{
	struct vmm_backend *b = arg;

	return b->ops->host_register ? b->ops->host_register(b, addr, len) : 0;
}

static int kc_unpin(void *arg, void *addr)
{
	struct vmm_backend *b = arg;

	return b->ops->host_unregister ? b->ops->host_unregister(b, addr) : 0;
}

/* The NVMe tier names its slots by the cache's hashes: it keeps their
 * scope and key, and a file of another scope is formatted anew. */
static void kc_nvme_scope(const struct kd_daemon *d,
			  struct tier_nvme_config *nc)
{
	nc->scope = d->scope.mode;
	memcpy(nc->scope_key, d->scope.key, sizeof(nc->scope_key));
}

/* Making a large host tier takes seconds: say how far it is, in the log
 * and to systemd, whose start timeout it would otherwise run into. */
static void kc_slab_progress(void *arg, const char *what, uint64_t done,
			     uint64_t total)
{
	const double gib = (double)(1ull << 30);
	/* a pin is one call: allow a second per GiB, a touch reports again
	 * within a second */
	uint64_t extend_us =
		30000000ull +
		(done == 0 ? total / (1ull << 30) * 1000000ull : 0);
	char state[192];

	(void)arg;
	vmm_log(VMM_LOG_INFO, "host tier: %s %.1f of %.1f GiB", what,
		(double)done / gib, (double)total / gib);
	snprintf(
		state, sizeof(state),
		"STATUS=host tier: %s %.1f of %.1f GiB\nEXTEND_TIMEOUT_USEC=%llu",
		what, (double)done / gib, (double)total / gib,
		(unsigned long long)extend_us);
	(void)kd_sd_notify(state);
}

/*
 * The host tier's memory, placed, touched and pinned at start, before the
 * block size is known (unless --cache-block-pages names it): done inside
 * the first client's publish, it held the loop for 0.3-0.6 s per GiB
 * (9 s for the first 4 GiB this VM had ever touched).  Made for the
 * smallest block a region can have (2 pages: one layer's K and V); the
 * tier gives back what its slots leave unused when it opens, unless the
 * slab is pinned (cuda: at most 4 KiB per 4 MiB, 0.1 %).
 */
static int kc_make_slab(struct kd_cache *c)
{
	struct kd_daemon *d = c->d;
	const struct kd_config *cfg = &d->cfg;
	uint64_t budget = c->host_budget;
	size_t min_block = 2 * d->page_size;
	struct tier_host_slab_config sc = {
		.size = sizeof(sc),
		.numa_node = cfg->host_numa_node,
		.pci_addr = d->backend->pci_bus_id,
		.progress = kc_slab_progress,
	};
	uint64_t progress_ms;
	struct tier_host_slab_info si;
	struct timespec t0, t1;
	int r;

	if (c->named_ppb)
		min_block = (size_t)c->named_ppb * d->page_size;
	if (!budget || budget < min_block)
		return 0; /* no slot would fit: no host tier */
	sc.len = c->named_ppb ? tier_host_slab_len(budget, min_block) :
				tier_host_slab_len_max(budget, min_block);
	/* the host backend's registration is a no-op: nothing is pinned,
	 * and the unused part can go back */
	if (d->backend->kind == VMM_BACKEND_CUDA) {
		sc.pin = kc_pin;
		sc.unpin = kc_unpin;
		sc.pin_arg = d->backend;
	}
	/* a test knob: report progress this often (a small slab is
	 * touched in well under the second between reports) */
	if (!kd_test_knob_number("KVMMD_TEST_SLAB_PROGRESS_MS", &progress_ms)) {
		sc.progress_ms = (unsigned int)progress_ms;
		vmm_log(VMM_LOG_WARN,
			"host tier: KVMMD_TEST_SLAB_PROGRESS_MS=%u (tests only)",
			sc.progress_ms);
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	r = tier_host_slab_open(&sc, &c->slab);
	if (r) {
		vmm_log(VMM_LOG_ERR,
			"host tier: making %zu MiB of host memory failed: %s",
			sc.len >> 20, strerror(-r));
		return r;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	tier_host_slab_get_info(c->slab, &si);
	vmm_log(VMM_LOG_INFO,
		"host tier: %zu MiB on NUMA node %d (%s)%s, made in %.2f s",
		si.len >> 20, si.node, si.node < 0 ? "no libnuma" : si.why,
		si.pinned ? ", pinned" : "",
		(double)(t1.tv_sec - t0.tv_sec) +
			(double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	return 0;
}

/*
 * Without --cache-block-pages the tiers open with the first region that
 * uses the cache, and the NVMe tier's recovery (a header read per slot)
 * would run inside that client's command, holding up the loop.  The
 * file's superblock says what size its blocks had: open the tier for that
 * size now, and keep it if the first region's blocks are the same (a
 * restart with the same model, whose blocks a stop saved there); else it
 * is formatted anew then.
 */
int kc_open_nvme_early(struct kd_cache *c)
{
	const struct kd_config *cfg = &c->d->cfg;
	struct tier_host_slab_info si;
	struct tier_nvme_config nc = { .size = sizeof(nc),
				       .path = cfg->nvme_path,
				       .capacity_bytes = cfg->nvme_size,
				       .fd_held = c->nvme_fd >= 0,
				       .fd = c->nvme_fd };
	struct tier_nvme_peek pk;
	uint64_t payload;
	int r;

	if (cfg->cache_block_pages || c->nvme_fd < 0 || !c->slab ||
	    tier_nvme_peek_fd(c->nvme_fd, &pk))
		return 0; /* nothing saved there: formatted at first use */
	payload = pk.payload_bytes;
	kc_nvme_scope(c->d, &nc);
	if (!payload || payload % c->d->page_size || payload > c->host_budget)
		return 0;
	tier_host_slab_get_info(c->slab, &si);
	/* the host tier's slots for blocks of this size: the same region
	 * its own open would register */
	nc.payload_bytes = payload;
	nc.reg_base = si.base;
	nc.reg_len = tier_host_slab_len(c->host_budget, payload);
	if (nc.reg_len > si.len)
		return 0;
	nc.pending_drop = kc_drop_pending_get(c);
	if (nc.pending_drop)
		kc_drop_pending_opening(c, cfg->nvme_path);
	r = tier_nvme_open(&nc, &c->nvme);
	if (r) {
		vmm_log(VMM_LOG_WARN,
			"cache: opening the NVMe tier at start: %s (again when the block size is known)",
			strerror(-r));
		c->nvme = NULL;
		return 0;
	}
	if (nc.pending_drop)
		kc_drop_pending_opened(c, cfg->nvme_path);
	vmm_log(VMM_LOG_INFO,
		"cache: NVMe tier opened at start for blocks of %llu pages, the size it held",
		(unsigned long long)(payload / c->d->page_size));
	return 0;
}

struct kd_cache *kc_new(struct kd_daemon *d)
{
	struct kd_cache *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	if (kd_htab_init(&c->index, KC_BUCKETS_MIN)) {
		free(c);
		return NULL;
	}
	c->d = d;
	kd_fifo_init(&c->parked);
	kd_fifo_init(&c->slotq);
	kd_fifo_init(&c->nvmeq);
	kd_fifo_init(&c->cold);
	kd_fifo_init(&c->gpu);
	for (int t = 0; t < POL_TIER_COUNT; t++)
		kd_fifo_init(&c->below[t]);
	kd_fifo_init(&c->staging);
	c->st.size = sizeof(c->st);
	c->st.nr_tiers = POL_TIER_COUNT;
	c->settle_timer.fn = kc_on_settle_timer;
	c->settle_timer.data = c;
	c->park_timer.fn = kc_on_park_timer;
	c->park_timer.data = c;
	c->nvme_fd = -1;
	c->learned_lock_fd = -1;
	return c;
}

/*
 * The caches of the sizes --cache-block-pages names after the first, at
 * start: each with its share of --host-mem by its weight made now (the
 * first's slab is made by kd_cache_init()), opened below with the first.
 */
static int kc_named_sizes(struct kd_daemon *d)
{
	const struct kd_config *cfg = &d->cfg;
	int r;

	if (cfg->nr_cache_block_sizes < 2)
		return 0;
	for (uint32_t i = 1; i < cfg->nr_cache_block_sizes; i++) {
		struct kd_cache *c = kc_new(d);

		if (!c)
			return -ENOMEM;
		c->idx = i;
		c->named_ppb = cfg->cache_block_sizes[i];
		c->host_budget = kd_cache_host_share(cfg, i);
		d->caches[d->nr_caches++] = c;
		r = kc_open_test_init(c);
		if (r)
			return r;
		r = kc_make_slab(c);
		if (r)
			return r;
	}
	return 0;
}

int kd_cache_init(struct kd_daemon *d)
{
	struct migrate_config mc = { .size = sizeof(mc) };
	struct kd_cache *c;
	int r;

	if (kc_test_faults(&d->cfg, 0, &mc, false)) {
		d->bad_option = true; /* exit 2, as for a bad option */
		return -EINVAL; /* refuse to start rather than ignore it */
	}
	c = kc_new(d);
	if (!c)
		return -ENOMEM;
	d->cache = c;
	d->caches[0] = c;
	d->nr_caches = 1;
	c->named_ppb = d->cfg.cache_block_pages;
	/* named sizes share --host-mem by their weights (equally unless
	 * given); unnamed, the first size takes it all, as when one model
	 * ran.  Set again once the list is in the NVMe file's order. */
	c->host_budget = kd_cache_host_share(&d->cfg, 0);
	r = kc_open_test_init(c);
	if (r)
		return r; /* refuse to start rather than ignore it */
	r = kc_learned_lock(c); /* before the slab: fail fast */
	if (r)
		return r;
	/*
	 * The NVMe file is locked (the lock the tier keeps), checked and
	 * made here, before the socket accepts, whatever the block size:
	 * opened at the first publish, a file another kvmmd held or a
	 * missing directory failed that client with EBUSY or ENOENT and left
	 * the cache off for good, while a second kvmmd started on a file the
	 * first had not locked yet.  A --nvme-path without a host tier is
	 * locked too: it is this daemon's.
	 */
	if (d->cfg.nvme_path[0]) {
		/* a file, or the file system under it, that is not there
		 * yet: kvmmd starts without the tier, which joins the cache
		 * when a later attempt claims and opens it
		 * (cache_nvme_join.c) */
		r = kc_nvme_claim_at_start(c);
		if (kc_nvme_start_refusal(r))
			d->bad_option =
				true; /* exit 2: the operator's to mend */
		if (r)
			return r;
		kc_nvme_order_sizes(c); /* cache_nvme_order.c */
		c->host_budget = kd_cache_host_share(&d->cfg, 0);
	}
	r = kc_make_slab(c);
	if (r)
		return r;
	r = kc_named_sizes(d);
	if (r)
		return r;
	/* drops a run before answered while the tier was out, before any
	 * size's tier opens (cache_drop_pending.c) */
	r = kc_drop_pending_load(d);
	if (r)
		vmm_log(VMM_LOG_WARN,
			"cache: reading the NVMe drops kept by a run before: %s (not applied)",
			strerror(-r));
	r = kc_open_nvme_early(c);
	if (r)
		return r;
	/*
	 * The operator named the block size: open the tiers now (cut the
	 * host tier's slots, open the NVMe file and recover its blocks)
	 * rather than inside the first client's publish or prefix open,
	 * where the NVMe recovery holds up the loop; and a tier that cannot
	 * open stops the start, with its reason, instead of leaving a daemon
	 * that caches nothing.
	 */
	r = kc_nvme_check_at_start(d); /* nothing written if one fails */
	if (r)
		return r;
	for (uint32_t i = 0; d->cfg.cache_block_pages && i < d->nr_caches;
	     i++) {
		c = d->caches[i];
		c->opening_at_start = true;
		r = kc_open(c, c->named_ppb);
		c->opening_at_start = false;
		if (r)
			return r;
	}
	return 0;
}
