// SPDX-License-Identifier: MIT
/*
 * The cache's stop (kd_cache_fini()): the retries of the NVMe tier's
 * open ended, the blocks saved to NVMe for the next start as far as
 * --nvme-save-on-stop allows (kc_save_on_stop()), the migration engine
 * shut down and its last jobs taken in, every entry and tier freed.  It
 * runs once, after the sessions are gone and the loop has stopped, so it
 * waits for the engine itself (poll on its eventfd); its own file because
 * nothing that serves blocks runs with it.
 */
#include "kvmm/kvmmd/cache_priv.h"
#include "kvmm/kvmmd/sd_notify.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvmm/kvmmd/tier_host.h"
#include "kvmm/kvmmd/tier_nvme.h"

/* Moves that have not ended: jobs in the engine, demotions waiting for a
 * host slot, writes waiting for an NVMe slot. */
static bool kc_moves_pending(struct kd_cache *c)
{
	return c->st.migrations_in_flight || c->demotions_queued ||
	       c->nvme_in_flight || !kd_fifo_empty(&c->nvmeq);
}

/* What c's save lost on the way so far: blocks dropped from any tier
 * (kc_lose(), the policy's drops) and moves that failed. */
static uint64_t kc_save_losses(const struct kd_cache *c)
{
	uint64_t n = c->st.migrations_failed;

	for (int t = 0; t < POL_TIER_COUNT; t++)
		n += c->st.tiers[t].drops;
	return n;
}

/* Whether c's stop saves its blocks to NVMe (kc_save_on_stop()). */
static bool kc_saves(struct kd_cache *c)
{
	return c->d->cfg.nvme_save_ms && c->nvme && c->pol && c->mig;
}

/*
 * The first steps of c's save: what there is, the policy's GPU and host
 * tiers drained into the NVMe tier (pol_cache_drain(): capacity 0 each,
 * the host tier first raised to take every GPU block); false: nothing to
 * do.  Setting the GPU tier to 0 and then the host tier left a GPU block
 * behind when the full host tier refused it (asym's prefix rule, none of
 * its blocks able to make room then), and it was lost with the process:
 * a chain a tenant limit had split across the tiers (tests/policy-drain.c;
 * it fits a daemon-fuzz phase 5 that recovered 27 of 28 blocks).
 */
static bool kc_save_begin(struct kd_cache *c, uint64_t *gpu, uint64_t *host,
			  uint64_t *in0, uint64_t *lost0)
{
	*gpu = pol_cache_count(c->pol, POL_TIER_GPU);
	*host = pol_cache_count(c->pol, POL_TIER_HOST);
	if (!*gpu && !*host && !kc_moves_pending(c))
		return false;
	*in0 = c->st.tiers[POL_TIER_NVME].bytes_in;
	*lost0 = kc_save_losses(c);
	vmm_log(VMM_LOG_INFO,
		"cache: stopping: moving %llu GPU and %llu host blocks to NVMe (up to %u ms; blocks of %u pages)",
		(unsigned long long)*gpu, (unsigned long long)*host,
		c->d->cfg.nvme_save_ms, c->ppb);
	/*
	 * TTLs against now, as every path that asks the policy to move
	 * blocks does.  No pin's TTL is left by now (the sessions ended
	 * first, and their records with them: pin.c clears the TTL each
	 * held), so this changes no decision today: a TTL the policy kept
	 * from a block's history once could be here, and a clock from the
	 * last request held it past its end (policy.md, "A block that
	 * leaves the cache leaves its holds").  kc_save_left() says a TTL
	 * against this clock too.
	 */
	pol_cache_set_clock(c->pol, kd_now_ns());
	/* what stays is said at the end (kc_save_left()) */
	(void)pol_cache_drain(c->pol, POL_TIER_NVME);
	kc_reap_dead(c);
	return true;
}

/* The blocks c's save wrote so far. */
static uint64_t kc_saved(const struct kd_cache *c, uint64_t in0)
{
	return (c->st.tiers[POL_TIER_NVME].bytes_in - in0) / c->block_bytes;
}

/* The blocks left above NVMe said, one line each, at most this many. */
#define KC_SAVE_LEFT_SAID 8

static const char *kc_tier_name(unsigned int t)
{
	static const char *const names[POL_TIER_COUNT] = { "GPU", "host",
							   "NVMe" };

	return t < POL_TIER_COUNT ? names[t] : "no";
}

/*
 * The blocks c's save could not move down (the policy would not let them
 * go, or no copy was made): they go with the process.  Each is said with
 * what holds it in the policy (pins, references, a TTL against the
 * policy's clock, cached children), so that a restart that finds fewer
 * blocks than were cached explains itself.
 */
static void kc_save_left(struct kd_cache *c)
{
	uint64_t gpu = pol_cache_count(c->pol, POL_TIER_GPU);
	uint64_t host = pol_cache_count(c->pol, POL_TIER_HOST);
	uint64_t clock = pol_cache_clock(c->pol);
	unsigned int said = 0;

	if (!gpu && !host)
		return;
	vmm_log(VMM_LOG_WARN,
		"cache: stopping: %llu GPU and %llu host blocks not moved down, lost with the process (blocks of %u pages)",
		(unsigned long long)gpu, (unsigned long long)host, c->ppb);
	for (uint64_t i = 0; i <= c->index.mask; i++) {
		for (struct kd_hnode *n = c->index.b[i]; n; n = n->next) {
			struct kc_entry *e = kc_of(n);
			struct pol_block *b;

			if (!e->in_pol || e->tier == POL_TIER_NVME ||
			    said >= KC_SAVE_LEFT_SAID)
				continue;
			said++;
			b = pol_cache_lookup(c->pol, e->hash);
			if (!b) {
				vmm_log(VMM_LOG_WARN,
					"cache: stopping: block %016llx left in the %s tier: not in the policy",
					(unsigned long long)e->hash,
					kc_tier_name(e->tier));
				continue;
			}
			vmm_log(VMM_LOG_WARN,
				"cache: stopping: block %016llx left in the %s tier (the policy's %s): pins %u, references %u, TTL %s%lld ms, children gpu %u host %u nvme %u, flags %#x%s%s",
				(unsigned long long)e->hash,
				kc_tier_name(e->tier), kc_tier_name(b->tier),
				b->pins, b->refcount,
				b->ttl_expiry ? "past the policy's clock by " :
						"none, ",
				b->ttl_expiry ?
					(long long)(b->ttl_expiry - clock) /
						1000000 :
					0ll,
				b->nchild[POL_TIER_GPU],
				b->nchild[POL_TIER_HOST],
				b->nchild[POL_TIER_NVME], b->flags,
				e->job ? ", a job in flight" : "",
				e->dead ? ", dead" : "");
		}
	}
}

/* The end of c's save: the tier synced, and what it did said. */
static void kc_save_end(struct kd_cache *c, uint64_t in0, uint64_t lost0,
			uint64_t t0)
{
	struct tier_nvme_stats ns;
	uint64_t now;
	int r;

	/* a stop is often followed by a reboot: make the saved blocks
	 * durable (the writes themselves are never synced) */
	r = tier_nvme_sync(c->nvme);
	if (r)
		vmm_log(VMM_LOG_WARN,
			"cache: stopping: syncing the NVMe tier: %s",
			strerror(-r));
	now = kd_now_ns();
	tier_nvme_get_stats(c->nvme, &ns);
	vmm_log(kc_moves_pending(c) ? VMM_LOG_WARN : VMM_LOG_INFO,
		"cache: stopping: %llu blocks written to NVMe in %llu ms, %llu blocks on it, %llu dropped or failed on the way (blocks of %u pages)%s",
		(unsigned long long)kc_saved(c, in0),
		(unsigned long long)((now - t0) / 1000000),
		(unsigned long long)ns.ready_slots,
		(unsigned long long)(kc_save_losses(c) - lost0), c->ppb,
		kc_moves_pending(c) ?
			"; out of time (--nvme-save-on-stop), the moves still running are lost" :
			"");
	kc_save_left(c);
}

/*
 * A stop keeps what it can: the blocks of the GPU and host tiers go with
 * the process, the NVMe tier's stay on disk and come back at the next
 * start.  So, the sessions gone, push every block down as far as the
 * policy takes it: with the GPU and host tiers' capacity at 0 it demotes
 * all of them through the usual copies, and the NVMe tier keeps the ones
 * it ranks highest (dropping its lowest, as it would for room).  The
 * loop no longer runs: the engine's completions are taken here, for at
 * most --nvme-save-on-stop ms; a move that has not ended by then is
 * lost, as every block was before.  Every size with an NVMe tier (each
 * its partition, with several named) saves at once, within the one
 * --nvme-save-on-stop: their engines and partitions work side by side.
 */
static void kc_save_on_stop(struct kd_daemon *d)
{
	uint32_t ms = d->cfg.nvme_save_ms;
	uint64_t in0[KD_CACHE_SIZES], lost0[KD_CACHE_SIZES], gpu, host;
	bool saving[KD_CACHE_SIZES] = { false };
	uint64_t t0 = kd_now_ns(), now, next = t0 + 1000000000ull;
	uint64_t all = 0;
	struct kd_cache *c;
	uint32_t i;
	bool any = false;

	kc_for_each(d, c, i) {
		if (!kc_saves(c))
			continue;
		saving[i] = kc_save_begin(c, &gpu, &host, &in0[i], &lost0[i]);
		any = any || saving[i];
		if (saving[i])
			all += gpu + host;
	}
	if (!any)
		return;
	for (;;) {
		struct pollfd p[KD_CACHE_SIZES];
		uint64_t done = 0;
		nfds_t n = 0;

		kc_for_each(d, c, i)
			if (saving[i] && kc_moves_pending(c))
				p[n++] = (struct pollfd){ .fd = migrate_eventfd(
								  c->mig),
							  .events = POLLIN };
		now = kd_now_ns();
		if (!n || now - t0 >= (uint64_t)ms * 1000000ull)
			break;
		if (now >= next) {
			/* a long save says how far it is, to systemd too */
			char state[128];

			kc_for_each(d, c, i)
				if (saving[i])
					done += kc_saved(c, in0[i]);
			vmm_log(VMM_LOG_INFO,
				"cache: stopping: %llu of %llu blocks written to NVMe",
				(unsigned long long)done,
				(unsigned long long)all);
			snprintf(
				state, sizeof(state),
				"STATUS=saving the cache: %llu of %llu blocks written to NVMe",
				(unsigned long long)done,
				(unsigned long long)all);
			(void)kd_sd_notify(state);
			next = now + 1000000000ull;
		}
		(void)poll(p, n, 100);
		kc_for_each(d, c, i)
			if (saving[i])
				kc_on_migrate(NULL, migrate_eventfd(c->mig),
					      POLLIN, c);
	}
	kc_for_each(d, c, i)
		if (saving[i])
			kc_save_end(c, in0[i], lost0[i], t0);
}

/* One size's cache stopped and freed (the first's last: the others'
 * settles look at its park line). */
static void kc_fini_one(struct kd_cache *c)
{
	struct kd_daemon *d = c->d;

	if (c->mig) {
		struct migrate_job *jobs[32];
		unsigned int n;

		kd_loop_del(&d->loop, &c->mig_file);
		c->closing = true;
		migrate_shutdown(c->mig);
		while ((n = migrate_reap(c->mig, jobs, 32)))
			for (unsigned int i = 0; i < n; i++)
				kc_job_done(c, jobs[i]);
		/* the sessions are gone: restores end in the cache (or are
		 * freed when they were cancelled) */
		kc_settle(c);
	}
	kd_timer_cancel(&d->loop, &c->settle_timer);
	kc_park_fini(c); /* the sessions are gone: nothing is parked */
	for (uint64_t b = 0; b <= c->index.mask; b++) {
		while (c->index.b[b]) {
			struct kc_entry *e = kc_of(c->index.b[b]);

			/* NVMe blocks stay on disk for the next start */
			e->nvme_slot = MIGRATE_NO_SLOT;
			kc_release(c, e);
			kc_free(c, e);
		}
	}
	migrate_close(c->mig);
	kc_unhold_slots(c);
	if (c == d->cache) {
		d->tel_feed.cache = NULL;
		kc_learned_fini(c);
	} else if (c->idx - 1 < TEL_POLICY_MORE) {
		d->tel_feed.more[c->idx - 1] = NULL;
	}
	pol_cache_destroy(c->pol);
	tier_nvme_close(c->nvme);
	if (c->nvme_fd >= 0)
		close(c->nvme_fd); /* the lock goes with it */
	tier_host_close(c->host);
	tier_host_slab_close(c->slab); /* no tier took it */
	kd_htab_fini(&c->index);
	free(c);
}

void kd_cache_fini(struct kd_daemon *d)
{
	struct kd_cache *c;
	uint32_t i;

	if (!d->cache)
		return;
	kc_for_each(d, c, i) {
		kd_timer_cancel(&d->loop, &c->nvme_timer);
		c->nvme_for_good = true; /* no attempt from here on */
	}
	kc_save_on_stop(d); /* every size's at once */
	/* the stop's --policy-state save holds every size's policy: made
	 * after the saves' moves and before the later sizes' caches go
	 * (one size: in kc_fini_one(), after its engine's last jobs) */
	if (d->nr_caches > 1)
		kc_learned_fini(d->cache);
	while (d->nr_caches > 1) {
		kc_fini_one(d->caches[--d->nr_caches]);
		d->caches[d->nr_caches] = NULL;
	}
	kc_fini_one(d->cache);
	d->cache = NULL;
	d->caches[0] = NULL;
	d->nr_caches = 0;
}
