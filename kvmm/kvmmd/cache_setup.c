// SPDX-License-Identifier: MIT
/*
 * The tiers and the policy of one block size: kc_open(), which sets them
 * up for the first region's block size (at start with
 * --cache-block-pages, else at the first publish or prefix open), with
 * the test knobs read then; and how the sizes share --host-mem, the
 * NVMe file and the pool by their weights (kd_cache_share()).  The
 * caches themselves are made at start by cache_start.c; a set-up that
 * failed is undone and tried again by cache_open.c; the stop is
 * cache_stop.c.  Its own file because it runs once (or once per failed
 * attempt) and shares nothing with the paths that serve blocks but the
 * structures it fills.
 */
#include "kvmm/kvmmd/cache_priv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kvmm/kvmmd/tier_host.h"
#include "kvmm/kvmmd/tier_nvme.h"
#include "kvmm/kvmmd/test_knob.h"

void kc_on_migrate(struct kd_loop *loop, int fd, uint32_t events, void *data)
{
	struct kd_cache *c = data;
	struct migrate_job *jobs[32];
	unsigned int n;

	while ((n = migrate_reap(c->mig, jobs, 32)))
		for (unsigned int i = 0; i < n; i++)
			kc_job_done(c, jobs[i]);
	kc_reap_dead(c);
	kc_settle(c);
}

/* A test knob: microseconds each batch of migrations of a kind waits
 * before it runs (Documentation/tiers.md), from kvmmd's environment. */
static uint32_t kc_test_delay(const char *name)
{
	return kd_test_delay_us(name, "cache", "migrations");
}

/*
 * An entry of KVMMD_TEST_MIGRATE_FAIL qualified by a size the operator's
 * --cache-block-pages does not name: -EINVAL after its ERR line.  That
 * list is the whole list (kc_for()), so no engine would ever fail those
 * jobs and a test relying on them would pass without its fault.  Without
 * --cache-block-pages the sizes are the regions' (a cache a size, made
 * at its first publish): any is taken, and each cache's WARN line says
 * how many entries are its.
 */
static int kc_test_fault_sizes(const struct kd_config *cfg, const char *v,
			       const struct migrate_fault *f, unsigned int n)
{
	char sizes[KD_CACHE_SIZES * 12] = "";
	size_t used = 0;

	if (!cfg->cache_block_pages)
		return 0;
	for (unsigned int i = 0; i < n; i++) {
		bool named = !f[i].block_pages;

		for (uint32_t j = 0; j < cfg->nr_cache_block_sizes; j++)
			named |= cfg->cache_block_sizes[j] == f[i].block_pages;
		if (named)
			continue;
		for (uint32_t j = 0; j < cfg->nr_cache_block_sizes; j++)
			used += (size_t)snprintf(sizes + used,
						 sizeof(sizes) - used, "%s%u",
						 j ? "," : "",
						 cfg->cache_block_sizes[j]);
		vmm_log(VMM_LOG_ERR,
			"KVMMD_TEST_MIGRATE_FAIL=%s: @%u: no cache of blocks of %u pages (--cache-block-pages %s): those jobs would never fail",
			v, f[i].block_pages, f[i].block_pages, sizes);
		return -EINVAL;
	}
	return 0;
}

/*
 * A test knob: KVMMD_TEST_MIGRATE_FAIL=KIND:N[@PAGES][,...] makes the N-th
 * migration job of a kind fail with -EIO in the engine (migrate.h,
 * Documentation/tiers.md): in every size's engine, or with @PAGES in the
 * engine of the cache of blocks of PAGES pages alone.  Checked when kvmmd
 * starts (ppb 0: a bad value, or a size --cache-block-pages does not
 * name, stops it: -EINVAL), applied when the tiers of the cache of blocks
 * of ppb pages open (mc: the entries that are its).  0 when unset.
 */
int kc_test_faults(const struct kd_config *cfg, uint32_t ppb,
		   struct migrate_config *mc, bool say)
{
	const char *v = getenv("KVMMD_TEST_MIGRATE_FAIL");
	struct migrate_fault all[MIGRATE_FAULTS_MAX];
	char err[MIGRATE_FAULT_ERR_LEN], whose[96] = "";
	unsigned int nall, sized = 0;

	mc->nfaults = 0;
	if (!v)
		return 0;
	if (migrate_fault_parse(v, all, &nall, err, sizeof(err))) {
		vmm_log(VMM_LOG_ERR, "KVMMD_TEST_MIGRATE_FAIL=%s: %s", v, err);
		return -EINVAL;
	}
	if (!ppb)
		return kc_test_fault_sizes(cfg, v, all, nall);
	for (unsigned int i = 0; i < nall; i++) {
		sized += all[i].block_pages != 0;
		if (!all[i].block_pages || all[i].block_pages == ppb)
			mc->faults[mc->nfaults++] = all[i];
	}
	/* with sizes named in it, each size's line says which are its */
	if (sized)
		snprintf(whose, sizeof(whose),
			 " in blocks of %u pages: %u of its %u entries", ppb,
			 mc->nfaults, nall);
	if (say)
		vmm_log(VMM_LOG_WARN,
			"cache: KVMMD_TEST_MIGRATE_FAIL=%s: migrations fail on purpose (tests only)%s",
			v, whose);
	return 0;
}

/*
 * Test knobs: KVMMD_TEST_HOST_SLOTS_HELD=N and KVMMD_TEST_NVME_SLOTS_HELD=N
 * take N host slots (N NVMe slots set aside) when the tiers open, outside
 * the policy's count, and keep them until the stop: slots that no move in
 * flight will give back, as when moves waiting in line hold them, so a
 * test can make a demotion find no slot with nothing in flight
 * (tests/cache-pin-slot-wait.c).  At most KC_HELD_MAX each.
 */
static uint32_t kc_test_held(const char *name)
{
	uint64_t n;

	/* at most KC_HELD_MAX: the start-time check's range */
	if (kd_test_knob_number(name, &n) || !n)
		return 0;
	vmm_log(VMM_LOG_WARN, "cache: %s=%llu: slots held back (tests only)",
		name, (unsigned long long)n);
	return (uint32_t)n;
}

void kc_hold_slots(struct kd_cache *c)
{
	uint32_t host = kc_test_held("KVMMD_TEST_HOST_SLOTS_HELD");
	uint32_t nvme = kc_test_held("KVMMD_TEST_NVME_SLOTS_HELD");

	while (c->host && c->nheld_host < host &&
	       !tier_host_alloc(c->host, &c->held_host[c->nheld_host]))
		c->nheld_host++;
	while (c->nvme && c->nheld_nvme < nvme && !tier_nvme_reserve(c->nvme))
		c->nheld_nvme++;
}

void kc_unhold_slots(struct kd_cache *c)
{
	while (c->nheld_host)
		tier_host_free(c->host, c->held_host[--c->nheld_host]);
	for (; c->nheld_nvme; c->nheld_nvme--)
		tier_nvme_unreserve(c->nvme);
}

/* Physical slots of a lower tier (0: none). */
static uint64_t kc_slots(struct kd_cache *c, int tier)
{
	if (tier == POL_TIER_HOST && c->host) {
		struct tier_host_stats hs;

		tier_host_get_stats(c->host, &hs);
		return hs.capacity_slots;
	}
	if (tier == POL_TIER_NVME && c->nvme) {
		struct tier_nvme_stats ns;

		tier_nvme_get_stats(c->nvme, &ns);
		return ns.capacity_slots;
	}
	return 0;
}

/*
 * The first region's blocks are larger than --host-mem: no host tier, and
 * so no NVMe tier either, whose I/O goes through host slots.  The start
 * refuses a --host-mem below the smallest block with --nvme-path
 * (daemon.c, check_block_size()); a larger one is only found wanting
 * here, when the block size is known: say so, naming the NVMe tier, and
 * take away the empty file the start's claim made for it.
 */
static void kc_no_host_tier(struct kd_cache *c)
{
	const struct kd_config *cfg = &c->d->cfg;
	char nvme[sizeof(cfg->nvme_path) + 128] = "";
	struct stat st;

	if (kc_has_nvme(c))
		snprintf(
			nvme, sizeof(nvme),
			", so no NVMe tier either (--nvme-path %s: blocks reach it through the host tier)",
			cfg->nvme_path);
	vmm_log(VMM_LOG_WARN,
		"cache: --host-mem %llu%s holds no block of the first region's size (%zu bytes): no host tier%s; the cache keeps blocks on the GPU only",
		(unsigned long long)c->host_budget,
		cfg->nr_cache_block_sizes > 1 ? " (this size's share)" : "",
		c->block_bytes, nvme);
	/* the file is every size's with several named: kept */
	if (c->nvme_made && cfg->nr_cache_block_sizes < 2 && c->nvme_fd >= 0 &&
	    !fstat(c->nvme_fd, &st) && S_ISREG(st.st_mode) && !st.st_size &&
	    !unlink(cfg->nvme_path))
		c->nvme_made = false;
}

/* Set up tiers and policy for blocks of ppb pages (first use). */
int kc_open(struct kd_cache *c, uint32_t ppb)
{
	struct kd_daemon *d = c->d;
	const struct kd_config *cfg = &d->cfg;
	struct pol_cache_opts po = { .size = sizeof(po),
				     .kind = (enum pol_kind)cfg->cache_policy };
	char share[96] = "";
	int r;

	if (c->opened)
		return c->ppb == ppb ? 0 : -EXDEV;
	/* the operator named the size: no other region may claim the tiers */
	if (c->named_ppb && ppb != c->named_ppb)
		return -EXDEV;
	/*
	 * After a failed set-up the cache is off (-EIO) until the next
	 * attempt is due, or for good after a failure no wait mends
	 * (cache_open.c).  What can still fail here after the start is a
	 * shortage of memory, fds, threads, epoll watches or GPU address
	 * space (the NVMe file is claimed at start, and its open, the one
	 * step that fails for the operator's values, lets the cache run
	 * without it), or a backend without async copies.
	 */
	r = kc_open_begin(c);
	if (r)
		return r;
	c->ppb = ppb;
	c->block_bytes = (size_t)ppb * d->page_size;
	/* half the pool, shared by the sizes named by their weights, as
	 * --host-mem is (cached GPU blocks are pool pages: an extend short
	 * of them takes victims of every size, cache_reclaim.c); sizes no
	 * one named take half each, as the first does */
	po.capacity[POL_TIER_GPU] =
		cfg->cache_gpu_blocks ?
			cfg->cache_gpu_blocks :
			kd_cache_share(cfg, c->idx, d->capacity) / ppb / 2;
	if (!po.capacity[POL_TIER_GPU])
		po.capacity[POL_TIER_GPU] = 1;
	po.prefix_rule = -1; /* the policy's default (off for lru) */
	po.block_bytes = c->block_bytes;
	if (c->host_budget && c->host_budget < c->block_bytes)
		kc_no_host_tier(c);
	if (c->host_budget && c->host_budget >= c->block_bytes) {
		struct tier_host_config hc = { .size = sizeof(hc),
					       .capacity_bytes = c->host_budget,
					       .slot_bytes = c->block_bytes,
					       .numa_node = cfg->host_numa_node,
					       .pci_addr =
						       d->backend->pci_bus_id,
					       .slab = c->slab };
		struct tier_host_stats hs;

		r = tier_host_open(&hc, &c->host);
		if (r)
			goto err; /* the slab is still ours */
		/* the tier's now (kc_open_undo() takes it back) */
		c->slab = NULL;
		tier_host_get_stats(c->host, &hs);
		/* a few slots stay out of the policy's count: a block moving
		 * on to NVMe keeps its host slot until the write is done; and
		 * with an NVMe tier, in a tier that can spare them, a batch
		 * of NVMe restores stages there (kc_staging_pump()) */
		po.capacity[POL_TIER_HOST] =
			hs.capacity_slots > 4 ? hs.capacity_slots - 2 : 1;
		if (kc_has_nvme(c) && hs.capacity_slots >= 8 * KC_STAGING_SLOTS)
			po.capacity[POL_TIER_HOST] -= KC_STAGING_SLOTS;
	}
	/* one NVMe file: the first size's, or with several sizes named
	 * each size's partition of it (tiers.md, "Several block sizes") */
	if (c->host && kc_has_nvme(c)) {
		struct tier_nvme_stats ns;

		if (c->nvme) {
			/* opened at start for the size its blocks had */
			tier_nvme_get_stats(c->nvme, &ns);
			if (ns.payload_bytes != c->block_bytes) {
				vmm_log(VMM_LOG_INFO,
					"cache: the NVMe tier's blocks from the last run have %llu bytes, the cache's %zu: formatting it anew",
					(unsigned long long)ns.payload_bytes,
					c->block_bytes);
				tier_nvme_close(c->nvme);
				c->nvme = NULL;
			}
		}
		/* opened here for the cache's block size; a file not
		 * claimed yet is left to the retries' timer, which opens it
		 * and joins it to the cache (cache_nvme_join.c) */
		if (!c->nvme && kc_nvme_fd(c) >= 0 && !c->nvme_for_good) {
			c->nvme_attempts++;
			r = kc_nvme_open_tier(c);
			/* a full disk at start waits, as at the claim: the
			 * cache starts without the tier, which joins when a
			 * later attempt opens it (cache_nvme_start.c) */
			if (r && c->opening_at_start &&
			    !kc_nvme_start_waits(r)) {
				/* the start stops: which tier, for the line
				 * after this one names only the errno */
				vmm_log(VMM_LOG_ERR,
					"cache: the NVMe tier %s%s cannot open at start: %s (the tier_nvme lines before this one say why); kvmmd does not start",
					cfg->nvme_path,
					cfg->nr_cache_block_sizes > 1 ?
						" (a partition; the lines before name it)" :
						"",
					strerror(-r));
				/* exit 2 for a value the operator must change
				 * (a size that holds no slot), 1 for an I/O
				 * error (cache_nvme_start.c) */
				if (kc_nvme_start_refusal(r))
					d->bad_option = true;
				goto err;
			}
			if (r) {
				/* what the start could not check (the file too
				 * small for a block of this size, a full disk,
				 * io_uring): the cache runs without it, says
				 * so, and tries again unless no wait mends it */
				kc_nvme_failed(c, r);
			} else {
				/* an attempt before this one went on without
				 * it */
				kd_timer_cancel(&d->loop, &c->nvme_timer);
				c->nvme_error = 0;
				c->nvme_retry_ns = 0;
			}
		}
		if (!c->nvme && kc_nvme_fd(c) < 0 && c != d->cache &&
		    !c->nvme_for_good) {
			/* the first size's claim failed: its retries open
			 * this size's partition too (kc_nvme_retry()); its
			 * reason is this size's */
			c->nvme_error = c->nvme_last_error =
				d->cache->nvme_last_error;
			c->nvme_retry_ns = d->cache->nvme_retry_ns;
		}
		if (!c->nvme) {
			/* the policy's NVMe tier waits at capacity 0 for the
			 * tier to join (kc_nvme_join()) */
			if (!c->nvme_for_good)
				po.joins_later = 1u << POL_TIER_NVME;
			goto no_nvme;
		}
		tier_nvme_get_stats(c->nvme, &ns);
		/* one slot spare: a block the policy dropped while its
		 * write (or a restore's read) was in flight holds a slot
		 * until the I/O ends; when more do, writes wait for them
		 * (kc_nvme_slot()) */
		po.capacity[POL_TIER_NVME] =
			ns.capacity_slots > 1 ? ns.capacity_slots - 1 : 1;
		r = kc_recover(c, &ns);
		if (r)
			goto err;
		r = kc_order_cold(c);
		if (r)
			goto err;
	}
no_nvme:
	r = pol_cache_create(&po, &c->pol);
	if (r)
		goto err;
	pol_cache_set_move_handler(c->pol, kc_move, c);
	if (c->host) {
		struct migrate_config mc = { .size = sizeof(mc),
					     .backend = d->backend,
					     .host = c->host,
					     .nvme = c->nvme,
					     /* two: one batch's copies into
					      * the pages overlap the next
					      * batch's NVMe reads (1.4x for a
					      * 16-block NVMe prefix here) */
					     .workers = 2,
					     .map_pages =
						     (uint32_t)d->capacity };

		mc.restore_delay_us =
			kc_test_delay("KVMMD_TEST_RESTORE_DELAY_MS");
		mc.demote_delay_us =
			kc_test_delay("KVMMD_TEST_DEMOTE_DELAY_MS");
		r = kc_test_faults(cfg, ppb, &mc, true);
		if (r)
			goto err;

		r = migrate_open(&mc, &c->mig);
		if (r)
			goto err;
		r = kd_loop_add(&d->loop, &c->mig_file, migrate_eventfd(c->mig),
				EPOLLIN, kc_on_migrate, c);
		if (r)
			goto err;
	}
	/* KVMMD_TEST_CACHE_OPEN_FAIL: everything above built, undone */
	r = kc_open_test_fault(c);
	if (r)
		goto err;
	/* nothing fails from here on: what points at the policy from
	 * outside the cache comes last, so kc_open_undo() need not undo it
	 * (a save of the learned state, a tenant's limit dropped, a timer) */
	/* one --policy-state file, each size's state in it */
	kc_learned_load(c); /* before its first block */
	/* telemetry raises reuse counts, each size's in its policy */
	if (c == d->cache)
		d->tel_feed.cache = c->pol;
	else if (c->idx - 1 < TEL_POLICY_MORE)
		d->tel_feed.more[c->idx - 1] = c->pol;
	if (c == d->cache)
		kd_tenant_limits_apply(d, c->pol);
	else
		kd_tenant_limits_apply_more(d, c->pol);
	kc_hold_slots(c);
	c->opened = true;
	kc_open_done(c);
	kc_nvme_clear_marked(c); /* the engine's jobs: nothing to undo */
	kc_cold_limits(c); /* the limits count the recovered blocks too */
	for (int t = 0; t < POL_TIER_COUNT; t++) {
		c->st.tiers[t].capacity_blocks = po.capacity[t];
		c->st.tiers[t].block_bytes = c->block_bytes;
	}
	/* the weighted share of --host-mem and the NVMe file (and of the
	 * pool's half, without --cache-gpu-blocks), when the operator gave
	 * one (the equal cut's line stays as it was) */
	if (cfg->nr_cache_block_sizes > 1 &&
	    tier_nvme_weights_pack(cfg->cache_block_weights,
				   cfg->nr_cache_block_sizes))
		snprintf(share, sizeof(share),
			 ", a share of %u/%u of --host-mem%s the NVMe file%s",
			 kd_cache_weight(cfg, c->idx),
			 kd_cache_weights_sum(cfg),
			 cfg->cache_gpu_blocks ? " and" : ",",
			 cfg->cache_gpu_blocks ? "" : " and half the GPU pool");
	/* the policy's counts, and the slots they leave for moves in
	 * flight and staging (what TIER_STATS reports as capacity) */
	vmm_log(VMM_LOG_INFO,
		"cache: blocks of %u pages (%s%s); GPU %llu, host %llu of %llu slots, NVMe %llu of %llu slots (%llu recovered)",
		ppb,
		cfg->cache_block_pages ? "--cache-block-pages" :
		c->idx		       ? "the first region of a new size" :
					 "the first region to use the cache",
		share, (unsigned long long)po.capacity[POL_TIER_GPU],
		(unsigned long long)po.capacity[POL_TIER_HOST],
		(unsigned long long)kc_slots(c, POL_TIER_HOST),
		(unsigned long long)po.capacity[POL_TIER_NVME],
		(unsigned long long)kc_slots(c, POL_TIER_NVME),
		(unsigned long long)c->st.recovered_blocks);
	return 0;

err:
	kc_open_undo(c);
	kc_open_failed(c, r);
	/* at start the start fails with the reason; after it every publish
	 * is told the same while the cache is off, also the one whose
	 * attempt failed (TIER_STATS says why) */
	return c->opening_at_start ? r : -EIO;
}

uint32_t kd_cache_weight(const struct kd_config *cfg, uint32_t i)
{
	if (cfg->nr_cache_block_sizes < 2 || i >= cfg->nr_cache_block_sizes)
		return 1;
	return cfg->cache_block_weights[i] ? cfg->cache_block_weights[i] : 1;
}

uint32_t kd_cache_weights_sum(const struct kd_config *cfg)
{
	uint32_t sum = 0;

	if (cfg->nr_cache_block_sizes < 2)
		return 1;
	for (uint32_t i = 0; i < cfg->nr_cache_block_sizes; i++)
		sum += kd_cache_weight(cfg, i);
	return sum;
}

/*
 * total x weight / sum, rounded down, without overflow: the remainder
 * times a weight stays below sum x TIER_NVME_WEIGHT_MAX.  With equal
 * weights it is total / sizes, the equal cut's share to the byte (and
 * to the page for the pool's).
 */
uint64_t kd_cache_share(const struct kd_config *cfg, uint32_t i, uint64_t total)
{
	uint64_t sum = kd_cache_weights_sum(cfg), w;

	if (cfg->nr_cache_block_sizes < 2 || i >= cfg->nr_cache_block_sizes)
		return total;
	w = kd_cache_weight(cfg, i);
	return total / sum * w + total % sum * w / sum;
}

uint64_t kd_cache_host_share(const struct kd_config *cfg, uint32_t i)
{
	return kd_cache_share(cfg, i, cfg->host_mem);
}
