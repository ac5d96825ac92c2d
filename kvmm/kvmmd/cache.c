// SPDX-License-Identifier: MIT
/*
 * kvmmd's block cache: publish, prefix open with zero-copy sharing and
 * restores, demotion through the policy's move handler and the migration
 * engine, tier counters.  See cache.h for the model.
 *
 * Everything here runs on the event-loop thread; the migration workers
 * only touch job memory and tier slots, and hand jobs back through the
 * engine's eventfd.
 */
#include "kvmm/kvmmd/cache.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/epoll.h>

#include "ebpf/telemetry_shm.h"
#include "kvmm/kvmmd/migrate.h"
#include "kvmm/kvmmd/tier_host.h"
#include "kvmm/kvmmd/tier_nvme.h"
#include "kvmm/policy/policy.h"
#include "kvmm/policy/restore_plan.h"
#include "kvmm/kvmmd/cache_plan.h"

#define KC_BUCKETS 4096u
/* host slots kept for staging NVMe restores (one tier_nvme batch) */
#define KC_STAGING_SLOTS 8u

struct kc_entry {
	uint64_t hash;
	uint64_t parent;
	uint32_t position;
	uint32_t uses; /* publish + duplicates + prefix hits (NVMe admission) */
	uint64_t gen; /* tells pins (pin.c) this entry from a later one */
	uint8_t tier; /* enum pol_tier: where the bytes are (or go) */
	bool in_pol; /* tracked by the policy (cold NVMe blocks are not) */
	bool dead; /* to be removed from the policy after its call */
	bool then_nvme; /* moved on to NVMe while its host copy ran */
	bool drop_after; /* dropped while a job ran */
	bool restore_pinned; /* pinned in the policy for its restore */
	struct kd_block *blk; /* GPU: the cache's reference */
	uint32_t host_slot, nvme_slot;
	struct migrate_job *job; /* migration in flight */
	/* restore in flight (job is HOST_TO_GPU or NVME_TO_GPU): the fresh
	 * pages it fills, the cache's reference until it is settled */
	struct kd_block *rblk;
	struct kc_entry *next; /* hash chain */
	struct kc_entry *dead_next;
	struct kc_entry *restored_next; /* restore done, not yet settled */
	struct kc_entry *staging_next; /* NVMe restore waiting for a slot */
};

/*
 * A PREFIX_OPEN whose reply waits for restores.  Blocks [0, lim) of its
 * sequence are each READY (attached to the sequence: shared GPU pages,
 * fresh pages to recompute, or restored pages), WAIT (a restore in flight,
 * its own or another open's), BUSY (a demotion in flight, to be restored
 * when it ends) or FAILED.  The reply goes when no block before the first
 * FAILED one waits.
 */
enum kc_slot {
	KC_SLOT_WAIT = 0,
	KC_SLOT_READY,
	KC_SLOT_FAILED,
	KC_SLOT_BUSY, /* a demotion in flight: restored once it ended */
	KC_SLOT_BUSY_FAILED, /* ... it ended in a drop (a busy miss) */
};

/* Why the walk of the prefix stopped at lim < n. */
enum kc_stop {
	KC_STOP_NONE = 0,
	KC_STOP_MISS, /* no such block, or it could not be restored */
};

struct kc_pending {
	struct kc_pending *next; /* in kd_cache.pending */
	struct kd_session *s;
	struct kvmm_msg_hdr h; /* the request: the reply echoes its id */
	uint32_t region_id, seq;
	uint32_t n; /* hashes asked (after the clamps) */
	uint32_t lim; /* blocks [0, lim) are READY, WAIT or FAILED */
	uint32_t nwait; /* blocks WAIT */
	uint8_t stop; /* enum kc_stop */
	bool want_acts;
	bool deferred; /* the session is deferred: reply from the loop */
	uint64_t open_id; /* telemetry: the prefix_opens count at arrival */
	uint64_t *hashes;
	uint8_t *state; /* enum kc_slot per block */
	uint8_t *from; /* tier each READY block came from */
	uint8_t *acts; /* enum kvmm_block_action per block (n + 4) */
};

struct kd_cache {
	struct kd_daemon *d;
	struct kc_entry *buckets[KC_BUCKETS];
	uint64_t nentries;
	uint64_t next_gen;
	struct kc_entry *dead; /* removed from the policy after its call */
	bool opened; /* tiers and policy set up */
	bool closing; /* kd_cache_fini(): nothing new is submitted */
	bool open_failed;
	uint32_t ppb; /* pages per block of the tiers */
	size_t block_bytes;
	struct pol_cache *pol;
	struct tier_host *host;
	struct tier_nvme *nvme;
	struct migrate *mig;
	struct kd_file mig_file;
	struct kc_entry *restored; /* restores done, to settle */
	uint64_t nr_restored; /* on that list (in flight for TIER_STATS) */
	/* NVMe restores waiting for a free host slot to stage in (FIFO) */
	struct kc_entry *staging_head, *staging_tail;
	struct kd_timer settle_timer; /* settles those from the loop */
	struct kc_pending *pending; /* PREFIX_OPENs waiting for restores */
	struct kvmm_tier_stats_reply st;
};

static struct kc_entry *kc_find(struct kd_cache *c, uint64_t hash)
{
	struct kc_entry *e = c->buckets[hash % KC_BUCKETS];

	while (e && e->hash != hash)
		e = e->next;
	return e;
}

static struct kc_entry *kc_add(struct kd_cache *c, uint64_t hash)
{
	struct kc_entry *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	e->hash = hash;
	e->gen = ++c->next_gen;
	e->host_slot = e->nvme_slot = MIGRATE_NO_SLOT;
	e->next = c->buckets[hash % KC_BUCKETS];
	c->buckets[hash % KC_BUCKETS] = e;
	c->nentries++;
	return e;
}

static void kc_free(struct kd_cache *c, struct kc_entry *e)
{
	struct kc_entry **pp = &c->buckets[e->hash % KC_BUCKETS];

	while (*pp && *pp != e)
		pp = &(*pp)->next;
	if (*pp)
		*pp = e->next;
	c->nentries--;
	free(e);
}

/* Drop the cache's reference on a GPU block (no policy callback: the
 * hash is cleared first when no sequence uses it any more). */
static void kc_put_block(struct kd_cache *c, struct kc_entry *e)
{
	struct kd_block *blk = e->blk;

	if (!blk)
		return;
	e->blk = NULL; /* so the unref hook does not count it */
	blk->hash = 0; /* no longer the cache's copy */
	kd_block_put(c->d, blk);
}

/* Free whatever bytes the entry holds in every tier. */
static void kc_release(struct kd_cache *c, struct kc_entry *e)
{
	kc_put_block(c, e);
	if (e->host_slot != MIGRATE_NO_SLOT) {
		tier_host_free(c->host, e->host_slot);
		e->host_slot = MIGRATE_NO_SLOT;
	}
	if (e->nvme_slot != MIGRATE_NO_SLOT) {
		tier_nvme_free(c->nvme, e->nvme_slot);
		e->nvme_slot = MIGRATE_NO_SLOT;
	}
}

/* An entry that lost its bytes: forget it after the policy call. */
static void kc_kill(struct kd_cache *c, struct kc_entry *e)
{
	if (e->dead)
		return;
	e->dead = true;
	e->dead_next = c->dead;
	c->dead = e;
}

static void kc_reap_dead(struct kd_cache *c)
{
	while (c->dead) {
		struct kc_entry *e = c->dead;

		c->dead = e->dead_next;
		if (e->in_pol) {
			e->in_pol = false;
			pol_cache_remove(c->pol, e->hash);
		}
		if (e->job) {
			/* a job reads or fills these bytes: released and freed
			 * when it ends */
			e->drop_after = true;
			e->dead = false;
			continue;
		}
		kc_release(c, e);
		kc_free(c, e);
	}
}

static void kc_job_done(struct kd_cache *c, struct migrate_job *job);

/*
 * A host slot, waiting for migrations in flight when the tier is full: a
 * block moving on to NVMe keeps its host slot until its write completes,
 * so a burst of demotions can briefly need more slots than the policy
 * counts.  Waits are short (one NVMe write) and counted.
 */
static int kc_host_slot(struct kd_cache *c, uint32_t *slot)
{
	for (int tries = 0; tries < 1000; tries++) {
		struct migrate_job *jobs[32];
		struct pollfd pfd = { .fd = migrate_eventfd(c->mig),
				      .events = POLLIN };
		unsigned int n;

		if (tier_host_alloc(c->host, slot) == 0)
			return 0;
		if (!c->st.migrations_in_flight)
			return -ENOSPC;
		c->st.slot_waits++;
		(void)poll(&pfd, 1, 10);
		while ((n = migrate_reap(c->mig, jobs, 32)))
			for (unsigned int i = 0; i < n; i++)
				kc_job_done(c, jobs[i]);
	}
	return -ENOSPC;
}

static int kc_submit(struct kd_cache *c, struct kc_entry *e,
		     enum migrate_kind kind)
{
	struct migrate_job *job;
	int r;

	job = migrate_job_new(kind, kind == MIGRATE_GPU_TO_HOST ? c->ppb : 0);
	if (!job)
		return -ENOMEM;
	job->hash = e->hash;
	job->layout_id = c->ppb;
	job->length = c->block_bytes;
	job->owner = e;
	if (kind == MIGRATE_GPU_TO_HOST) {
		for (uint32_t i = 0; i < c->ppb; i++) {
			job->pages[i].page_id = e->blk->pages[i];
			job->pages[i].handle = vmm_pool_page_handle(
				c->d->pool, e->blk->pages[i]);
		}
		r = kc_host_slot(c, &job->host_slot);
		if (r)
			goto err_free;
		e->host_slot = job->host_slot;
	} else {
		job->host_slot = e->host_slot;
	}
	r = migrate_submit(c->mig, job);
	if (r) {
		if (kind == MIGRATE_GPU_TO_HOST) {
			tier_host_free(c->host, job->host_slot);
			e->host_slot = MIGRATE_NO_SLOT;
		}
		goto err_free;
	}
	e->job = job;
	c->st.migrations_in_flight++;
	return 0;

err_free:
	migrate_job_free(job);
	return r;
}

/* Room on the NVMe tier for one more block: evict a cold block. */
static void kc_nvme_room(struct kd_cache *c)
{
	struct tier_nvme_stats ns;

	tier_nvme_get_stats(c->nvme, &ns);
	if (ns.used_slots < ns.capacity_slots)
		return;
	for (uint32_t b = 0; b < KC_BUCKETS; b++) {
		for (struct kc_entry *e = c->buckets[b]; e; e = e->next) {
			if (!e->in_pol && !e->job && !e->rblk &&
			    e->tier == POL_TIER_NVME) {
				c->st.tiers[POL_TIER_NVME].drops++;
				kvmm_tel_evict(c->d->tel_local, e->hash,
					       KVMM_TEL_TIER_NVME,
					       c->block_bytes);
				kc_release(c, e);
				kc_free(c, e);
				return;
			}
		}
	}
}

/* The policy decided a move; make it happen (or note that it failed). */
static void kc_move(void *arg, const struct pol_block *b, unsigned from,
		    unsigned to)
{
	struct kd_cache *c = arg;
	struct kc_entry *e = kc_find(c, b->hash);

	if (!e || e->dead)
		return; /* being removed by kc_reap_dead() */
	if (to == POL_TIER_NONE) {
		c->st.tiers[from].drops++;
		kvmm_tel_evict(c->d->tel_local, b->hash, from, c->block_bytes);
		e->in_pol = false;
		if (e->job) {
			e->drop_after = true;
			return;
		}
		/* the slots go now (the next demotion needs one), the entry
		 * after the policy call (kc_reap_dead): the victim may be
		 * the block being admitted, which its caller still holds
		 * (lfu and asym do pick it) */
		kc_release(c, e);
		kc_kill(c, e);
		return;
	}
	if (to == POL_TIER_GPU)
		return; /* a promotion: the restore code does the copy */
	if (from == POL_TIER_HOST && to == POL_TIER_NVME &&
	    e->uses < c->d->cfg.nvme_admit_uses) {
		/* not used often enough to be worth a disk write (and a slot
		 * another block could use): dropped from the host tier */
		c->st.nvme_admission_rejects++;
		c->st.tiers[from].drops++;
		kvmm_tel_evict(c->d->tel_local, b->hash, from, c->block_bytes);
		if (!e->job && e->host_slot != MIGRATE_NO_SLOT) {
			/* free the slot now: the demotion that made this
			 * move (same policy call) may need it */
			tier_host_free(c->host, e->host_slot);
			e->host_slot = MIGRATE_NO_SLOT;
		}
		kc_kill(c, e);
		return;
	}
	if (from == POL_TIER_GPU && e->blk && e->blk->refcnt > 1) {
		/* the policy picked a block a sequence is using: only the
		 * block just admitted can be (refcount 0 until its ref is
		 * taken); it is not cached, not moved */
		kc_kill(c, e);
		return;
	}
	e->tier = (uint8_t)to;
	c->st.tiers[to].demotions_in++;
	if (from == POL_TIER_GPU && to == POL_TIER_HOST) {
		if (!c->host || kc_submit(c, e, MIGRATE_GPU_TO_HOST))
			kc_kill(c, e);
		return;
	}
	if (from == POL_TIER_HOST && to == POL_TIER_NVME) {
		if (e->job) {
			e->then_nvme = true;
			return;
		}
		kc_nvme_room(c);
		if (!c->nvme || kc_submit(c, e, MIGRATE_HOST_TO_NVME))
			kc_kill(c, e);
		return;
	}
	kc_kill(c, e); /* GPU -> NVMe directly: not a path we take */
}

static void kc_restore_done(struct kd_cache *c, struct migrate_job *job);

static bool kc_restore_kind(enum migrate_kind kind)
{
	return kind == MIGRATE_HOST_TO_GPU || kind == MIGRATE_NVME_TO_GPU;
}

static void kc_job_done(struct kd_cache *c, struct migrate_job *job)
{
	struct kc_entry *e = job->owner;
	bool ok = job->state == MIGRATE_DONE;

	if (kc_restore_kind(job->kind)) {
		c->st.migrations_in_flight--;
		kc_restore_done(c, job);
		return;
	}
	/* an open may wait for this block's move (kc_busy_retry()); reaped
	 * inside a wait, the settle comes from the loop */
	if (c->pending && !c->settle_timer.armed)
		kd_timer_arm(&c->d->loop, &c->settle_timer, 0);
	c->st.migrations_in_flight--;
	e->job = NULL;
	if (!ok)
		c->st.migrations_failed++;
	if (job->kind == MIGRATE_GPU_TO_HOST) {
		/* the copy is out (or failed): the pages may go back */
		kc_put_block(c, e);
		if (ok)
			c->st.tiers[POL_TIER_HOST].bytes_in += job->length;
		else
			e->host_slot =
				MIGRATE_NO_SLOT; /* freed by the engine */
	} else if (job->kind == MIGRATE_HOST_TO_NVME) {
		if (e->host_slot != MIGRATE_NO_SLOT)
			tier_host_free(c->host, e->host_slot);
		e->host_slot = MIGRATE_NO_SLOT;
		if (ok) {
			e->nvme_slot = job->nvme_slot;
			c->st.tiers[POL_TIER_NVME].bytes_in += job->length;
		}
	}
	migrate_job_free(job);
	if (e->drop_after) {
		kc_release(c, e);
		kc_free(c, e);
		return;
	}
	if (!ok) {
		kc_kill(c, e);
		return;
	}
	if (e->then_nvme) {
		e->then_nvme = false;
		kc_nvme_room(c);
		if (!c->nvme || kc_submit(c, e, MIGRATE_HOST_TO_NVME))
			kc_kill(c, e);
	}
}

static void kc_settle(struct kd_cache *c);

static void kc_on_migrate(struct kd_loop *loop, int fd, uint32_t events,
			  void *data)
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

static void kc_on_settle_timer(struct kd_loop *loop, struct kd_timer *t)
{
	kc_settle(t->data);
}

static int kc_recovered(void *arg, uint32_t slot, uint64_t hash,
			uint64_t length, uint64_t layout_id)
{
	struct kd_cache *c = arg;
	struct kc_entry *e;

	if (length != c->block_bytes || layout_id != c->ppb || kc_find(c, hash))
		return 0;
	e = kc_add(c, hash);
	if (!e)
		return -ENOMEM;
	e->tier = POL_TIER_NVME;
	e->nvme_slot = slot;
	c->st.recovered_blocks++;
	return 0;
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

/* A test knob: microseconds each batch of migrations of a kind waits
 * before it runs (Documentation/tiers.md), from kvmmd's environment. */
static uint32_t kc_test_delay(const char *name)
{
	const char *v = getenv(name);
	int ms = v ? atoi(v) : 0;

	if (ms <= 0)
		return 0;
	vmm_log(VMM_LOG_WARN, "cache: %s=%d: migrations delayed (tests only)",
		name, ms);
	return (uint32_t)ms * 1000u;
}

/* Set up tiers and policy for blocks of ppb pages (first use). */
static int kc_open(struct kd_cache *c, uint32_t ppb)
{
	struct kd_daemon *d = c->d;
	const struct kd_config *cfg = &d->cfg;
	struct pol_cache_opts po = { .size = sizeof(po),
				     .kind = (enum pol_kind)cfg->cache_policy };
	int r;

	if (c->opened)
		return c->ppb == ppb ? 0 : -EXDEV;
	if (c->open_failed)
		return -EIO;
	c->ppb = ppb;
	c->block_bytes = (size_t)ppb * d->page_size;
	po.capacity[POL_TIER_GPU] = cfg->cache_gpu_blocks ?
					    cfg->cache_gpu_blocks :
					    d->capacity / ppb / 2;
	if (!po.capacity[POL_TIER_GPU])
		po.capacity[POL_TIER_GPU] = 1;
	po.prefix_rule = -1; /* the policy's default (off for lru) */
	po.block_bytes = c->block_bytes;
	if (cfg->host_mem >= c->block_bytes) {
		struct tier_host_config hc = { .size = sizeof(hc),
					       .capacity_bytes = cfg->host_mem,
					       .slot_bytes = c->block_bytes,
					       .numa_node = -1,
					       .pin = kc_pin,
					       .unpin = kc_unpin,
					       .pin_arg = d->backend };
		struct tier_host_stats hs;

		r = tier_host_open(&hc, &c->host);
		if (r)
			goto err;
		tier_host_get_stats(c->host, &hs);
		/* a few slots stay out of the policy's count: a block moving
		 * on to NVMe keeps its host slot until the write is done; and
		 * with an NVMe tier, in a tier that can spare them, a batch
		 * of NVMe restores stages there (kc_staging_pump()) */
		po.capacity[POL_TIER_HOST] =
			hs.capacity_slots > 4 ? hs.capacity_slots - 2 : 1;
		if (cfg->nvme_path[0] &&
		    hs.capacity_slots >= 8 * KC_STAGING_SLOTS)
			po.capacity[POL_TIER_HOST] -= KC_STAGING_SLOTS;
	}
	if (c->host && cfg->nvme_path[0]) {
		size_t reg_len;
		void *reg = tier_host_base(c->host, &reg_len);
		struct tier_nvme_config nc = { .size = sizeof(nc),
					       .path = cfg->nvme_path,
					       .capacity_bytes = cfg->nvme_size,
					       .payload_bytes = c->block_bytes,
					       .reg_base = reg,
					       .reg_len = reg_len };
		struct tier_nvme_stats ns;

		r = tier_nvme_open(&nc, &c->nvme);
		if (r)
			goto err;
		tier_nvme_get_stats(c->nvme, &ns);
		/* one slot spare: a block the policy dropped while its
		 * write was in flight holds a slot until the write ends */
		po.capacity[POL_TIER_NVME] =
			ns.capacity_slots > 1 ? ns.capacity_slots - 1 : 1;
		r = tier_nvme_foreach(c->nvme, kc_recovered, c);
		if (r)
			goto err;
	}
	r = pol_cache_create(&po, &c->pol);
	if (r)
		goto err;
	pol_cache_set_move_handler(c->pol, kc_move, c);
	d->tel_feed.cache = c->pol; /* telemetry raises reuse counts */
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

		r = migrate_open(&mc, &c->mig);
		if (r)
			goto err;
		r = kd_loop_add(&d->loop, &c->mig_file, migrate_eventfd(c->mig),
				EPOLLIN, kc_on_migrate, c);
		if (r)
			goto err;
	}
	c->opened = true;
	for (int t = 0; t < POL_TIER_COUNT; t++) {
		c->st.tiers[t].capacity_blocks = po.capacity[t];
		c->st.tiers[t].block_bytes = c->block_bytes;
	}
	vmm_log(VMM_LOG_INFO,
		"cache: blocks of %u pages; GPU %llu, host %llu, NVMe %llu blocks (%llu recovered)",
		ppb, (unsigned long long)po.capacity[POL_TIER_GPU],
		(unsigned long long)po.capacity[POL_TIER_HOST],
		(unsigned long long)po.capacity[POL_TIER_NVME],
		(unsigned long long)c->st.recovered_blocks);
	return 0;

err:
	vmm_log(VMM_LOG_ERR, "cache: setting up the tiers failed: %s",
		strerror(-r));
	c->open_failed = true;
	return r;
}

int kd_cache_init(struct kd_daemon *d)
{
	struct kd_cache *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->d = d;
	c->st.size = sizeof(c->st);
	c->st.nr_tiers = POL_TIER_COUNT;
	c->settle_timer.fn = kc_on_settle_timer;
	c->settle_timer.data = c;
	d->cache = c;
	return 0;
}

void kd_cache_fini(struct kd_daemon *d)
{
	struct kd_cache *c = d->cache;

	if (!c)
		return;
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
	for (uint32_t b = 0; b < KC_BUCKETS; b++) {
		while (c->buckets[b]) {
			struct kc_entry *e = c->buckets[b];

			/* NVMe blocks stay on disk for the next start */
			e->nvme_slot = MIGRATE_NO_SLOT;
			kc_release(c, e);
			kc_free(c, e);
		}
	}
	migrate_close(c->mig);
	d->tel_feed.cache = NULL;
	pol_cache_destroy(c->pol);
	tier_nvme_close(c->nvme);
	tier_host_close(c->host);
	free(c);
	d->cache = NULL;
}

void kd_cache_block_unref(struct kd_daemon *d, struct kd_block *blk)
{
	struct kd_cache *c = d->cache;
	struct kc_entry *e;

	if (!c || !c->pol || !blk->hash)
		return;
	e = kc_find(c, blk->hash);
	if (e && e->blk == blk && e->in_pol)
		pol_cache_unref(c->pol, blk->hash);
}

int kd_cache_pin_target(struct kd_daemon *d, uint64_t hash,
			struct pol_cache **pol, unsigned *tier, uint64_t *gen)
{
	struct kd_cache *c = d->cache;
	struct kc_entry *e = c && c->pol ? kc_find(c, hash) : NULL;

	if (!e || !e->in_pol || e->dead || e->drop_after)
		return -ENOENT;
	*pol = c->pol;
	*tier = e->tier;
	*gen = e->gen;
	return 0;
}

struct pol_cache *kd_cache_pin_policy(struct kd_daemon *d, uint64_t hash,
				      uint64_t gen)
{
	struct kd_cache *c = d->cache;
	struct kc_entry *e = c && c->pol ? kc_find(c, hash) : NULL;

	return e && e->gen == gen && e->in_pol ? c->pol : NULL;
}

uint64_t kd_cache_gpu_capacity(struct kd_daemon *d)
{
	struct kd_cache *c = d->cache;

	return c && c->pol ? pol_cache_capacity(c->pol, POL_TIER_GPU) : 0;
}

static uint64_t kc_pool_free(struct kd_daemon *d)
{
	struct vmm_pool_stats ps;

	vmm_pool_get_stats(d->pool, &ps);
	return ps.capacity > ps.allocated ? ps.capacity - ps.allocated : 0;
}

/* One round of kd_cache_reclaim(): demote enough victims for `pages`
 * (if none of them is still mapped somewhere) and wait for their copies;
 * returns how many blocks it took. */
static uint64_t kc_reclaim_round(struct kd_cache *c, uint64_t pages)
{
	struct kd_daemon *d = c->d;
	uint64_t avail = kc_pool_free(d), gpu, cap, want, taken;

	gpu = pol_cache_count(c->pol, POL_TIER_GPU);
	if (!gpu)
		return 0;
	want = (pages - avail + c->ppb - 1) / c->ppb;
	cap = pol_cache_capacity(c->pol, POL_TIER_GPU);
	/* the policy picks the victims (LRU, never a block a sequence
	 * uses or a pinned one) and moves them down through kc_move(), as
	 * an over-full GPU tier would; then the capacity comes back */
	(void)pol_cache_set_capacity(c->pol, POL_TIER_GPU,
				     gpu > want ? gpu - want : 0);
	(void)pol_cache_set_capacity(c->pol, POL_TIER_GPU, cap);
	taken = gpu - pol_cache_count(c->pol, POL_TIER_GPU);
	c->st.pressure_reclaims += taken;
	kc_reap_dead(c);
	/* a demoted block's pages come back when its copy to host memory
	 * is done: wait for the copies (a block copy each, bounded) */
	for (int tries = 0; tries < 500 && c->mig && kc_pool_free(d) < pages &&
			    c->st.migrations_in_flight;
	     tries++) {
		struct migrate_job *jobs[32];
		struct pollfd pfd = { .fd = migrate_eventfd(c->mig),
				      .events = POLLIN };
		unsigned int n;

		(void)poll(&pfd, 1, 10);
		while ((n = migrate_reap(c->mig, jobs, 32)))
			for (unsigned int i = 0; i < n; i++)
				kc_job_done(c, jobs[i]);
		kc_reap_dead(c);
	}
	return taken;
}

int kd_cache_reclaim(struct kd_daemon *d, uint64_t pages)
{
	struct kd_cache *c = d->cache;

	if (kc_pool_free(d) >= pages)
		return 0;
	if (!c || !c->pol || !c->ppb)
		return -ENOSPC;
	pol_cache_set_clock(c->pol, kd_now_ns()); /* TTL pins end on time */
	/* A victim whose pages a client still maps (its revocation is not
	 * acknowledged yet) frees nothing now: they stay REVOKING.  Then
	 * take more victims, while the policy has any, rather than fail
	 * with evictable blocks left (every round takes at least one). */
	while (kc_pool_free(d) < pages && kc_reclaim_round(c, pages))
		;
	return kc_pool_free(d) >= pages ? 0 : -ENOSPC;
}

/*
 * Before a prefix open restores blocks: make room in a full pool for the
 * restores, with the prefix's own blocks pinned so the reclaim does not
 * demote (or push on, or drop) what the prefix is about to use.  Entries the reclaim's
 * cascade moves or drops are found (or not) again by the hit loop.
 */
static void kc_prefix_room(struct kd_cache *c, const uint64_t *hashes,
			   uint32_t n)
{
	bool *pinned = calloc(n, sizeof(*pinned));
	uint64_t need = 0;

	if (!pinned)
		return; /* no reclaim: a restore may miss */
	for (uint32_t i = 0; i < n; i++) {
		struct kc_entry *e = kc_find(c, hashes[i]);

		if (!e || e->dead || e->drop_after)
			break;
		if (e->rblk)
			continue; /* being restored: pages taken, pinned */
		if (e->job)
			break;
		if (e->tier != POL_TIER_GPU)
			need += c->ppb;
		/* host blocks too: the cascade from the demotions must not
		 * push them on (or drop them) */
		if (e->in_pol)
			pinned[i] = pol_cache_pin(c->pol, hashes[i]) == 0;
	}
	if (need)
		(void)kd_cache_reclaim(c->d, need);
	for (uint32_t i = 0; i < n; i++)
		if (pinned[i])
			(void)pol_cache_unpin(c->pol, hashes[i]);
	free(pinned);
}

/* A variable-length command: the struct, then n u64 (copied into a new
 * array the caller frees: the message buffer need not be aligned). */
static int copy_var(void *out, size_t known, const void *p, size_t len,
		    uint32_t n_off, uint64_t **tail, uint32_t *n)
{
	uint32_t size, count;

	if (len < known)
		return -EINVAL;
	memcpy(&size, p, sizeof(size));
	if (size != known)
		return -EINVAL;
	memcpy(&count, (const char *)p + n_off, sizeof(count));
	if (count > KVMM_PREFIX_MAX_BLOCKS || len != known + count * 8ull)
		return -EINVAL;
	memcpy(out, p, known);
	*tail = malloc(count * sizeof(uint64_t) + 1);
	if (!*tail)
		return -ENOMEM;
	memcpy(*tail, (const char *)p + known, count * sizeof(uint64_t));
	*n = count;
	return 0;
}

int kd_cache_publish(struct kd_session *s, const struct kvmm_msg_hdr *h,
		     const void *p, size_t len)
{
	struct kd_cache *c = s->d->cache;
	struct kvmm_block_publish bp;
	struct kvmm_block_publish_reply rep = { .size = sizeof(rep) };
	uint64_t *hashes = NULL;
	struct kd_region *r;
	struct kd_seq *q;
	uint32_t n;
	int err;

	err = copy_var(&bp, sizeof(bp), p, len,
		       offsetof(struct kvmm_block_publish, nr_blocks), &hashes,
		       &n);
	if (err)
		return err;
	err = -EINVAL;
	if (bp.flags || !kw_all_zero(bp.reserved, sizeof(bp.reserved)))
		goto out;
	err = kd_region_lookup(s, bp.region_id, &r);
	if (err)
		goto out;
	err = kd_seq_lookup(r, bp.seq_id, &q);
	if (err)
		goto out;
	err = -EINVAL;
	if (!n || bp.first_block >= r->max_blocks ||
	    n > r->max_blocks - bp.first_block)
		goto out;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t b = bp.first_block + i;

		if (!hashes[i] || !q->blocks[b] ||
		    (uint64_t)(b + 1) * r->tokens_per_block > q->len)
			goto out;
		if (q->blocks[b]->hash && q->blocks[b]->hash != hashes[i])
			goto out;
	}
	err = kc_open(c, r->pages_per_block);
	if (err == -EXDEV)
		err = -EOPNOTSUPP; /* another block size owns the cache */
	if (err)
		goto out;
	uint64_t parent = bp.parent_hash;

	pol_cache_set_clock(c->pol, kd_now_ns()); /* tie-breaks by age */
	for (uint32_t i = 0; i < n; i++, parent = hashes[i - 1]) {
		uint32_t b = bp.first_block + i;
		struct kd_block *blk = q->blocks[b];
		struct pol_block_desc desc = { .hash = hashes[i],
					       .parent_hash = parent,
					       .position = b };
		struct kc_entry *e;

		if (parent)
			desc.flags = POL_BLOCK_HAS_PARENT;
		c->st.publishes++;
		if (blk->hash) { /* published before: the same block */
			rep.duplicates++;
			continue;
		}
		e = kc_find(c, hashes[i]);
		if (e && !e->in_pol && (e->dead || e->drop_after))
			e = NULL; /* dropped (freed after this call): gone */
		if (e) {
			/* same content cached already: keep that copy */
			e->uses++;
			rep.duplicates++;
			c->st.duplicates++;
			continue;
		}
		e = kc_add(c, hashes[i]);
		if (!e) {
			err = -ENOMEM;
			break;
		}
		e->parent = parent;
		e->position = b;
		e->uses = 1;
		e->tier = POL_TIER_GPU;
		e->in_pol = true;
		e->blk = blk;
		blk->refcnt++; /* the cache's reference */
		blk->hash = hashes[i];
		err = pol_cache_access(c->pol, &desc, NULL);
		if (!err && !e->dead)
			err = pol_cache_ref(c->pol, hashes[i]);
		if (err || e->dead) {
			/* no room: every cached GPU block is in use */
			if (!e->dead) {
				e->in_pol = false;
				kc_put_block(c, e);
				kc_free(c, e);
			} /* else removed by kc_reap_dead() below */
			rep.not_cached++;
			c->st.not_cached++;
			err = 0;
			continue;
		}
		rep.published++;
	}
	kc_reap_dead(c);
	if (!err)
		kd_session_reply(s, h, 0, &rep, sizeof(rep), NULL, 0);
out:
	free(hashes);
	return err;
}

/* A fresh block of ppb pool pages charged to s. */
static int kc_block_new(struct kd_session *s, uint32_t ppb,
			struct kd_block **out)
{
	struct kd_block *blk = calloc(1, sizeof(*blk) + ppb * sizeof(uint32_t));
	uint32_t i;
	int err = 0;

	if (!blk)
		return -ENOMEM;
	if (s->quota && s->quota->limit_pages &&
	    s->quota->used_pages + ppb > s->quota->limit_pages) {
		free(blk);
		return -EDQUOT;
	}
	for (i = 0; i < ppb; i++) {
		err = vmm_pool_alloc(s->d->pool, &blk->pages[i]);
		if (err)
			goto err_free;
	}
	blk->refcnt = 1;
	blk->nr_pages = ppb;
	blk->charged = s->quota;
	if (blk->charged)
		blk->charged->used_pages += ppb;
	*out = blk;
	return 0;

err_free:
	while (i--)
		vmm_pool_free(s->d->pool, blk->pages[i]);
	free(blk);
	return err;
}

/*
 * Start bringing e's bytes from the host or NVMe tier into fresh pages
 * charged to s: a HOST_TO_GPU job (the host slot is the source) or an
 * NVME_TO_GPU job (read into a host staging slot, CRC checked, copied).
 * Until kc_restore_settle() the entry owns the pages (rblk), is pinned in
 * the policy and counts as busy for everything that would move or free
 * its lower copy.
 */
static int kc_restore_submit(struct kd_cache *c, struct kd_session *s,
			     struct kc_entry *e)
{
	bool nvme = e->tier == POL_TIER_NVME;
	struct migrate_job *job;
	struct kd_block *blk;
	int err;

	if (!c->mig || (nvme ? e->nvme_slot : e->host_slot) == MIGRATE_NO_SLOT)
		return -ENOENT;
	err = kc_block_new(s, c->ppb, &blk);
	if (err)
		return err;
	job = migrate_job_new(nvme ? MIGRATE_NVME_TO_GPU : MIGRATE_HOST_TO_GPU,
			      c->ppb);
	if (!job) {
		err = -ENOMEM;
		goto err_put;
	}
	job->hash = e->hash;
	job->layout_id = c->ppb;
	job->length = c->block_bytes;
	job->owner = e;
	for (uint32_t i = 0; i < c->ppb; i++) {
		job->pages[i].page_id = blk->pages[i];
		job->pages[i].handle =
			vmm_pool_page_handle(c->d->pool, blk->pages[i]);
	}
	job->nvme_slot = e->nvme_slot;
	job->host_slot = nvme ? MIGRATE_NO_SLOT : e->host_slot;
	if (nvme &&
	    (c->staging_head || tier_host_alloc(c->host, &job->host_slot))) {
		/* no host slot to stage in now: queued, submitted by
		 * kc_staging_pump() when a migration gives one back (the
		 * loop does not wait) */
		job->host_slot = MIGRATE_NO_SLOT;
		e->staging_next = NULL;
		if (c->staging_tail)
			c->staging_tail->staging_next = e;
		else
			c->staging_head = e;
		c->staging_tail = e;
	} else {
		err = migrate_submit(c->mig, job);
		if (err) {
			if (nvme)
				tier_host_free(c->host, job->host_slot);
			migrate_job_free(job);
			goto err_put;
		}
		c->st.migrations_in_flight++;
	}
	e->job = job;
	e->rblk = blk;
	if (e->in_pol)
		e->restore_pinned = pol_cache_pin(c->pol, e->hash) == 0;
	return 0;

err_put:
	kd_block_put(c->d, blk);
	return err;
}

/*
 * Submit queued NVMe restores while host slots are free to stage them.
 * When none is free and no migration is in flight, none will come back:
 * the queued restores fail (misses), as a blocking wait would have.
 * At shutdown (fail_all) every queued restore fails.
 */
static void kc_staging_pump(struct kd_cache *c, bool fail_all)
{
	while (c->staging_head) {
		struct kc_entry *e = c->staging_head;
		struct migrate_job *job = e->job;
		int err = 0;

		if (fail_all) {
			err = -ESHUTDOWN;
		} else if (tier_host_alloc(c->host, &job->host_slot)) {
			job->host_slot = MIGRATE_NO_SLOT;
			if (c->st.migrations_in_flight)
				return;
			err = -ENOSPC;
		}
		c->staging_head = e->staging_next;
		if (!c->staging_head)
			c->staging_tail = NULL;
		e->staging_next = NULL;
		if (!err)
			err = migrate_submit(c->mig, job);
		if (!err) {
			c->st.migrations_in_flight++;
			continue;
		}
		if (job->host_slot != MIGRATE_NO_SLOT)
			tier_host_free(c->host, job->host_slot);
		job->host_slot = MIGRATE_NO_SLOT;
		job->state = MIGRATE_CANCELLED; /* never ran */
		job->result = err;
		kc_restore_done(c, job);
	}
}

/*
 * A restore job ended; called wherever jobs are reaped, even inside a
 * wait for a host slot.  The staging slot goes back at once (a burst of
 * NVMe restores needs the slots), the rest waits for kc_settle() on the
 * loop, where the waiting PREFIX_OPENs get the block.
 */
static void kc_restore_done(struct kd_cache *c, struct migrate_job *job)
{
	struct kc_entry *e = job->owner;

	/* DONE: the staging copy is READY, the pages have the bytes; failed
	 * or cancelled: the engine freed it already */
	if (job->kind == MIGRATE_NVME_TO_GPU &&
	    job->host_slot != MIGRATE_NO_SLOT) {
		tier_host_free(c->host, job->host_slot);
		job->host_slot = MIGRATE_NO_SLOT;
	}
	e->restored_next = c->restored;
	c->restored = e;
	c->nr_restored++;
	if (!c->settle_timer.armed)
		kd_timer_arm(&c->d->loop, &c->settle_timer, 0);
}

static void prefix_attach(struct kd_region *r, struct kd_seq *q, uint32_t b,
			  struct kd_block *blk)
{
	struct kd_session *s = r->owner;

	q->blocks[b] = blk;
	blk->refcnt++;
	s->pages_owned += blk->nr_pages;
}

/*
 * Give a restored block (blk) to every pending open waiting for e, or
 * fail their waits (blk NULL).  Returns how many sequences took it and
 * the position of the first (for the policy).
 */
static uint32_t kc_restore_hand_out(struct kd_cache *c, struct kc_entry *e,
				    struct kd_block *blk, unsigned int from,
				    uint32_t *pos)
{
	uint32_t taken = 0;

	for (struct kc_pending *pr = c->pending; pr; pr = pr->next) {
		struct kd_region *r = NULL;

		if (blk && kd_region_lookup(pr->s, pr->region_id, &r))
			r = NULL; /* cannot happen: the session is paused */
		for (uint32_t i = 0; i < pr->lim; i++) {
			if (pr->state[i] != KC_SLOT_WAIT ||
			    pr->hashes[i] != e->hash)
				continue;
			pr->nwait--;
			if (!r) {
				pr->state[i] = KC_SLOT_FAILED;
				continue;
			}
			prefix_attach(r, &r->seqs[pr->seq], i, blk);
			pr->state[i] = KC_SLOT_READY;
			pr->from[i] = (uint8_t)from;
			pr->acts[i] = from == POL_TIER_HOST ?
					      KVMM_BLOCK_RELOADED_HOST :
					      KVMM_BLOCK_RELOADED_NVME;
			e->uses++;
			if (!taken++)
				*pos = i;
		}
	}
	return taken;
}

/* A restore job reaped: the block goes to the waiting opens and into the
 * cache's GPU tier, or the waits fail (a miss for them). */
static void kc_restore_settle(struct kd_cache *c, struct kc_entry *e)
{
	struct migrate_job *job = e->job;
	struct kd_block *blk = e->rblk;
	unsigned int from = e->tier;
	uint32_t pos = e->position, taken;
	uint64_t waited;
	bool was_in_pol;

	e->job = NULL;
	e->rblk = NULL;
	if (e->restore_pinned) {
		e->restore_pinned = false;
		if (e->in_pol)
			(void)pol_cache_unpin(c->pol, e->hash);
	}
	if (job->state != MIGRATE_DONE) {
		if (job->result == -EBADMSG)
			e->nvme_slot =
				MIGRATE_NO_SLOT; /* the tier dropped it */
		else if (job->state == MIGRATE_FAILED)
			c->st.migrations_failed++;
		migrate_job_free(job);
		kd_block_put(c->d, blk); /* never mapped by anyone */
		kc_restore_hand_out(c, e, NULL, from, &pos);
		if (e->dead)
			return; /* kc_reap_dead() frees it */
		if (e->drop_after || (e->nvme_slot == MIGRATE_NO_SLOT &&
				      e->host_slot == MIGRATE_NO_SLOT)) {
			if (e->in_pol) {
				kc_kill(c, e);
			} else {
				kc_release(c, e);
				kc_free(c, e);
			}
		}
		return;
	}
	waited = job->end_ns - job->submit_ns;
	c->st.tiers[from].promotions_out++;
	c->st.tiers[from].bytes_out += c->block_bytes;
	c->st.tiers[from].restore_ns += waited;
	if (waited > c->st.tiers[from].restore_max_ns)
		c->st.tiers[from].restore_max_ns = waited;
	/* the shm fallback's restore record (the engine fired the USDT
	 * probe when the job completed: not twice) */
	kvmm_tel_shm_event(c->d->tel_local, KVMM_TEL_RESTORE, from,
			   KVMM_TEL_TIER_GPU, 0, job->end_ns - job->start_ns,
			   c->block_bytes, 1);
	migrate_job_free(job);
	/* the block is on the GPU now; the lower copy goes (exclusive) */
	if (e->host_slot != MIGRATE_NO_SLOT)
		tier_host_free(c->host, e->host_slot);
	if (e->nvme_slot != MIGRATE_NO_SLOT)
		tier_nvme_free(c->nvme, e->nvme_slot);
	e->host_slot = e->nvme_slot = MIGRATE_NO_SLOT;
	/* the sequences take the block first, so the policy cannot pick it
	 * as its own victim while they hold it */
	taken = kc_restore_hand_out(c, e, blk, from, &pos);
	if (e->dead || e->drop_after) {
		/* dropped while it was restored: the sequences keep their
		 * pages, the cache does not */
		kd_block_put(c->d, blk);
		if (e->drop_after) {
			kc_release(c, e);
			kc_free(c, e);
		}
		return;
	}
	e->blk = blk;
	blk->hash = e->hash;
	e->tier = POL_TIER_GPU;
	/* the policy: a promotion (an admission for a recovered block), and
	 * a reference per sequence that took it */
	struct pol_block_desc desc = { .hash = e->hash,
				       .parent_hash = e->parent,
				       .position = pos };

	if (e->parent)
		desc.flags = POL_BLOCK_HAS_PARENT;
	was_in_pol = e->in_pol;
	if (pol_cache_access(c->pol, &desc, NULL) == 0 && !e->dead) {
		e->in_pol = true;
		for (uint32_t i = 0; i < taken; i++)
			(void)pol_cache_ref(c->pol, e->hash);
	} else if (!was_in_pol && !e->dead) {
		/* no room to cache it: the sequences own it */
		e->in_pol = false;
		kc_put_block(c, e);
		kc_free(c, e);
	}
}

/* Block i of an open is a cached GPU block: shared as it is. */
static void kc_prefix_share(struct kd_cache *c, struct kc_pending *pr,
			    struct kd_region *r, uint32_t i, struct kc_entry *e)
{
	struct pol_block_desc desc = { .hash = e->hash,
				       .parent_hash = e->parent,
				       .position = i };
	bool was_in_pol = e->in_pol;

	/* the sequence takes the block first, so the policy cannot pick it
	 * as its own victim */
	prefix_attach(r, &r->seqs[pr->seq], i, e->blk);
	e->uses++;
	pr->state[i] = KC_SLOT_READY;
	pr->from[i] = POL_TIER_GPU;
	pr->acts[i] = KVMM_BLOCK_GPU_SHARED;
	if (e->parent)
		desc.flags = POL_BLOCK_HAS_PARENT;
	if (pol_cache_access(c->pol, &desc, NULL) == 0 && !e->dead &&
	    pol_cache_ref(c->pol, e->hash) == 0) {
		e->in_pol = true;
	} else if (!was_in_pol && !e->dead) {
		/* no room to cache it: the sequence owns it */
		e->in_pol = false;
		kc_put_block(c, e);
		kc_free(c, e);
	}
}

/*
 * Blocks pending opens found being demoted: once the move ended, share
 * the block (a failed copy left it on the GPU), restore it from where it
 * landed, join a restore another open started meanwhile, or give up when
 * it was dropped.
 */
static void kc_busy_retry(struct kd_cache *c)
{
	for (struct kc_pending *pr = c->pending; pr; pr = pr->next) {
		struct kd_region *r;

		if (kd_region_lookup(pr->s, pr->region_id, &r))
			r = NULL; /* cannot happen: the session is paused */
		for (uint32_t i = 0; i < pr->lim; i++) {
			struct kc_entry *e;

			if (pr->state[i] != KC_SLOT_BUSY)
				continue;
			e = kc_find(c, pr->hashes[i]);
			if (r && e && !e->dead && !e->drop_after && e->job &&
			    !e->rblk)
				continue; /* still moving */
			if (r && e && !e->dead && !e->drop_after) {
				if (e->rblk) {
					pr->state[i] = KC_SLOT_WAIT;
					c->st.restores_waited++;
					continue;
				}
				if (e->tier == POL_TIER_GPU) {
					kc_prefix_share(c, pr, r, i, e);
					pr->nwait--;
					continue;
				}
				if (kc_restore_submit(c, pr->s, e) == 0) {
					pr->state[i] = KC_SLOT_WAIT;
					continue;
				}
			}
			pr->state[i] = KC_SLOT_BUSY_FAILED;
			pr->nwait--;
		}
	}
}

static struct kc_pending *kc_pending_new(uint32_t n)
{
	struct kc_pending *pr = calloc(1, sizeof(*pr));

	if (!pr)
		return NULL;
	pr->state = calloc(1, n + 1);
	pr->from = calloc(1, n + 1);
	pr->acts = calloc(1, n + 4);
	if (!pr->state || !pr->from || !pr->acts) {
		free(pr->state);
		free(pr->from);
		free(pr->acts);
		free(pr);
		return NULL;
	}
	return pr;
}

static void kc_pending_free(struct kc_pending *pr)
{
	free(pr->hashes);
	free(pr->state);
	free(pr->from);
	free(pr->acts);
	free(pr);
}

/* The reply can go: no block before the first failed one still waits. */
static bool kc_pending_ready(const struct kc_pending *pr)
{
	if (!pr->nwait)
		return true;
	for (uint32_t i = 0; i < pr->lim; i++) {
		if (pr->state[i] == KC_SLOT_WAIT ||
		    pr->state[i] == KC_SLOT_BUSY)
			return false;
		if (pr->state[i] != KC_SLOT_READY)
			return true;
	}
	return true;
}

/*
 * Answer a PREFIX_OPEN: the prefix is the leading READY blocks; what the
 * sequence holds beyond it (blocks shared or restored after a failed one)
 * goes back.  Frees pr; a deferred session reads its socket again (and
 * may end, when the reply could not be sent).
 */
static void kc_pending_finish(struct kd_cache *c, struct kc_pending *pr)
{
	struct kd_session *s = pr->s;
	struct kd_daemon *d = c->d;
	uint32_t from_tier[POL_TIER_COUNT] = { 0 };
	struct kvmm_prefix_open_reply *rep = NULL;
	uint32_t hit = 0, nrecompute = 0, nfds = 0, npages;
	struct kd_region *r;
	struct kd_seq *q;
	size_t rep_len, acts_len = 0;
	int *fds = NULL, err = -ENOENT;

	if (pr->deferred)
		c->st.prefix_opens_pending--;
	if (kd_region_lookup(s, pr->region_id, &r))
		goto err_reply; /* cannot happen: the session was paused */
	q = &r->seqs[pr->seq];
	while (hit < pr->lim && pr->state[hit] == KC_SLOT_READY &&
	       q->blocks[hit])
		hit++;
	kd_seq_drop_blocks(r, pr->seq, hit, false);
	for (uint32_t b = 0; b < hit; b++) {
		c->st.tiers[pr->from[b]].hits++;
		if (pr->acts[b] == KVMM_BLOCK_RECOMPUTE)
			nrecompute++;
		else
			from_tier[pr->from[b]]++;
	}
	if (hit < pr->lim && pr->state[hit] == KC_SLOT_BUSY_FAILED)
		c->st.busy_misses++;
	else if (hit < pr->lim || pr->stop == KC_STOP_MISS)
		c->st.misses++;
	/* kvmm:access: each block the prefix found, and where, then the
	 * first one it did not (to be recomputed) */
	if (pr->n && kvmm_tel_want(d->tel_local, access)) {
		struct kvmm_access_rec *recs = calloc(hit + 1, sizeof(*recs));
		uint64_t who = (uint64_t)s->id << 32 | pr->seq;
		uint32_t nrec = 0;

		for (uint32_t b = 0; recs && b < hit; b++)
			recs[nrec++] =
				(struct kvmm_access_rec){ pr->hashes[b], who,
							  pr->from[b], 0 };
		if (recs && hit < pr->n)
			recs[nrec++] = (struct kvmm_access_rec){
				pr->hashes[hit], who, KVMM_TEL_TIER_MISS, 0
			};
		if (recs)
			kvmm_tel_access(d->tel_local, pr->open_id, recs, nrec);
		free(recs);
	}
	c->st.prefix_blocks_hit += hit;
	q->len = hit * r->tokens_per_block;

	npages = hit * r->pages_per_block;
	if (pr->want_acts)
		acts_len = (hit + 3) & ~3u;
	rep_len = sizeof(*rep) + npages * sizeof(uint32_t) + acts_len;
	rep = calloc(1, rep_len);
	fds = calloc(npages + 1, sizeof(*fds));
	if (!rep || !fds) {
		kd_seq_close(r, pr->seq, false);
		err = -ENOMEM;
		goto err_reply;
	}
	rep->size = rep_len;
	rep->seq_id = pr->seq;
	rep->seq_gen = q->gen;
	rep->nr_blocks = hit;
	rep->pages_per_block = r->pages_per_block;
	rep->len = q->len;
	rep->from_gpu = from_tier[POL_TIER_GPU];
	rep->from_host = from_tier[POL_TIER_HOST];
	rep->from_nvme = from_tier[POL_TIER_NVME];
	rep->nr_recompute = nrecompute;
	if (acts_len)
		memcpy(rep->page_ids + npages, pr->acts, acts_len);
	for (uint32_t b = 0, k = 0; b < hit; b++) {
		struct kd_block *blk = q->blocks[b];

		for (uint32_t i = 0; i < blk->nr_pages; i++, k++) {
			rep->page_ids[k] = blk->pages[i];
			if (s->held[blk->pages[i]])
				rep->page_ids[k] |= KVMM_PAGE_HELD;
			else
				fds[nfds++] = vmm_pool_page_fd(d->pool,
							       blk->pages[i]);
			kd_hold_page(s, blk->pages[i]);
		}
	}
	rep->nr_fds = nfds;
	kd_session_reply(s, &pr->h, 0, rep, rep_len, fds, nfds);
	goto out;

err_reply:
	kd_session_reply(s, &pr->h, err, NULL, 0, NULL, 0);
out:
	free(fds);
	free(rep);
	if (pr->deferred)
		kd_session_resume(s); /* last: it may end the session */
	kc_pending_free(pr);
}

/*
 * On the loop: settle the restores that ended, then answer the opens that
 * no longer wait.  Replies go after every list walk (a reply that fails
 * ends its session, which drops that session's pending open).
 */
static void kc_settle(struct kd_cache *c)
{
	struct kc_pending *done = NULL, **pp;

	if (c->restored && c->pol)
		pol_cache_set_clock(c->pol, kd_now_ns());
	do {
		while (c->restored) {
			struct kc_entry *e = c->restored;

			c->restored = e->restored_next;
			e->restored_next = NULL;
			c->nr_restored--;
			kc_restore_settle(c, e);
		}
		kc_busy_retry(c);
		/* settled restores and ended demotions gave slots back */
		kc_staging_pump(c, !c->opened || c->closing);
	} while (c->restored);
	kc_reap_dead(c);
	for (pp = &c->pending; *pp;) {
		struct kc_pending *pr = *pp;

		if (!kc_pending_ready(pr)) {
			pp = &pr->next;
			continue;
		}
		*pp = pr->next;
		pr->next = done;
		done = pr;
	}
	while (done) {
		struct kc_pending *pr = done;

		done = pr->next;
		kc_pending_finish(c, pr);
	}
}

void kd_cache_session_end(struct kd_session *s)
{
	struct kd_cache *c = s->d->cache;
	struct kc_pending **pp;

	if (!c)
		return;
	for (pp = &c->pending; *pp;) {
		struct kc_pending *pr = *pp;

		if (pr->s != s) {
			pp = &pr->next;
			continue;
		}
		/* its sequence goes with the session's regions; restores
		 * still in flight end in the cache (kc_restore_settle()) */
		*pp = pr->next;
		c->st.prefix_opens_pending--;
		kc_pending_free(pr);
	}
}

/*
 * The synchronous part of a PREFIX_OPEN: walk the prefix once, sharing
 * GPU blocks, handing out fresh pages for blocks the plan recomputes, and
 * submitting a restore for every lower-tier block (all of them in flight
 * together) or joining the restore another open started; a block being
 * demoted is waited for.  Stops at the first block in no tier or whose
 * restore cannot start.
 */
static void kc_prefix_walk(struct kd_cache *c, struct kc_pending *pr,
			   struct kd_region *r, uint8_t *tiers, uint8_t *plan)
{
	struct kd_daemon *d = c->d;
	struct kd_session *s = pr->s;
	struct kd_seq *q = &r->seqs[pr->seq];
	const uint64_t *hashes = pr->hashes;
	uint32_t n = pr->n, npin = 0, nplan = 0, hit;

	pol_cache_set_clock(c->pol, kd_now_ns());
	kc_prefix_room(c, hashes, n);
	/* pin the prefix first: restoring one of its blocks must not demote
	 * or drop a later one (it would be a busy miss) */
	for (; npin < n; npin++) {
		struct kc_entry *pe = kc_find(c, hashes[npin]);

		if (!pe || pe->dead || pe->drop_after ||
		    (pe->job && !pe->rblk) || !pe->in_pol ||
		    pol_cache_ref(c->pol, hashes[npin]))
			break;
	}
	/* the restore plan, for the blocks matched now; the loop below
	 * looks each block up again (an unpinned one may have moved) */
	for (; nplan < n; nplan++) {
		struct kc_entry *e = kc_find(c, hashes[nplan]);

		if (!e || e->dead || e->drop_after)
			break;
		tiers[nplan] = e->tier; /* where a demotion goes to */
	}
	kd_cache_plan(pr->want_acts ? d->cfg.restore_mode : KD_RESTORE_RELOAD,
		      d->cost, tiers, nplan, plan);
	for (hit = 0; hit < n; hit++) {
		struct kc_entry *e = kc_find(c, hashes[hit]);

		if (hit < nplan && plan[hit] == POL_RESTORE_RECOMPUTE) {
			struct kd_block *blk;

			/* fresh pages the client fills; the cached copy
			 * stays where it is */
			if (kc_block_new(s, r->pages_per_block, &blk)) {
				pr->stop = KC_STOP_MISS;
				break;
			}
			q->blocks[hit] = blk;
			s->pages_owned += blk->nr_pages;
			pr->state[hit] = KC_SLOT_READY;
			pr->acts[hit] = KVMM_BLOCK_RECOMPUTE;
			pr->from[hit] = tiers[hit];
			if (e)
				e->uses++;
			continue;
		}
		if (!e || e->dead || e->drop_after) {
			pr->stop = KC_STOP_MISS;
			break;
		}
		if (e->rblk) {
			/* being restored (for another open, or for this
			 * one's duplicate hash): wait for it, share it */
			pr->state[hit] = KC_SLOT_WAIT;
			pr->nwait++;
			c->st.restores_waited++;
			continue;
		}
		if (e->job) {
			/* being demoted: its bytes are in two places and
			 * neither is final; restored once the move ended
			 * (kc_busy_retry()) */
			pr->state[hit] = KC_SLOT_BUSY;
			pr->nwait++;
			continue;
		}
		if (e->tier != POL_TIER_GPU) {
			if (kc_restore_submit(c, s, e)) {
				pr->stop = KC_STOP_MISS;
				break;
			}
			pr->state[hit] = KC_SLOT_WAIT;
			pr->nwait++;
			continue;
		}
		kc_prefix_share(c, pr, r, hit, e);
	}
	pr->lim = hit;
	kc_staging_pump(c, false);
	for (uint32_t i = 0; i < npin; i++)
		pol_cache_unref(c->pol, hashes[i]);
	kc_reap_dead(c);
}

int kd_cache_prefix_open(struct kd_session *s, const struct kvmm_msg_hdr *h,
			 const void *p, size_t len)
{
	struct kd_daemon *d = s->d;
	struct kd_cache *c = d->cache;
	struct kvmm_prefix_open po;
	struct kc_pending *pr = NULL;
	uint8_t *tiers = NULL, *plan = NULL;
	uint64_t *hashes = NULL;
	struct kd_region *r;
	uint32_t n, seq;
	int err;

	err = copy_var(&po, sizeof(po), p, len,
		       offsetof(struct kvmm_prefix_open, nr_hashes), &hashes,
		       &n);
	if (err)
		return err;
	err = -EINVAL;
	if ((po.flags & ~KVMM_PREFIX_OPEN_ACTIONS) ||
	    !kw_all_zero(po.reserved, sizeof(po.reserved)))
		goto out;
	err = kd_region_lookup(s, po.region_id, &r);
	if (err)
		goto out;
	if (n > r->max_blocks)
		n = r->max_blocks;
	if ((uint64_t)n * r->pages_per_block > KVMM_EXTEND_MAX_PAGES)
		n = KVMM_EXTEND_MAX_PAGES / r->pages_per_block;
	err = -ENOMEM;
	pr = kc_pending_new(n);
	tiers = malloc(n + 1);
	plan = malloc(n + 1);
	if (!pr || !tiers || !plan)
		goto out;
	err = kd_seq_open(r, &seq);
	if (err)
		goto out;
	pr->s = s;
	pr->h = *h;
	pr->region_id = po.region_id;
	pr->seq = seq;
	pr->n = n;
	pr->want_acts = po.flags & KVMM_PREFIX_OPEN_ACTIONS;
	pr->hashes = hashes;
	hashes = NULL;
	c->st.prefix_opens++;
	c->st.prefix_blocks_asked += n;
	pr->open_id = c->st.prefix_opens;
	if (n && kc_open(c, r->pages_per_block) == 0)
		kc_prefix_walk(c, pr, r, tiers, plan);
	free(tiers);
	free(plan);
	if (!pr->nwait) {
		kc_pending_finish(c, pr); /* replies, frees pr */
		return 0;
	}
	/* the reply waits for the restores: kc_settle() sends it */
	pr->deferred = true;
	pr->next = c->pending;
	c->pending = pr;
	c->st.prefix_opens_pending++;
	kd_session_defer(s);
	return 0;

out:
	if (pr)
		kc_pending_free(pr);
	free(tiers);
	free(plan);
	free(hashes);
	return err;
}

int kd_cache_tier_stats(struct kd_daemon *d, struct kvmm_tier_stats_reply *st)
{
	struct kd_cache *c = d->cache;

	if (!c)
		return -ENODEV;
	*st = c->st;
	/* reaped, not yet settled: still in flight for whoever waits */
	st->migrations_in_flight += c->nr_restored;
	if (c->pol)
		for (int t = 0; t < POL_TIER_COUNT; t++)
			st->tiers[t].used_blocks = pol_cache_count(c->pol, t);
	if (c->nvme) {
		struct tier_nvme_stats ns;

		tier_nvme_get_stats(c->nvme, &ns);
		st->checksum_failures = ns.checksum_failures;
		/* what the disk holds against what --nvme-size allows */
		st->tiers[POL_TIER_NVME].used_blocks = ns.used_slots;
		st->tiers[POL_TIER_NVME].capacity_blocks = ns.capacity_slots;
	}
	if (c->host) {
		struct tier_host_stats hs;

		tier_host_get_stats(c->host, &hs);
		st->tiers[POL_TIER_HOST].used_blocks = hs.used_slots;
		st->tiers[POL_TIER_HOST].capacity_blocks = hs.capacity_slots;
	}
	return 0;
}
