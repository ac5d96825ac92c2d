// SPDX-License-Identifier: MIT
/*
 * The block cache's way down: the policy's move handler turns its
 * decisions into demotion jobs (GPU -> host -> NVMe) or drops, every
 * migration job's completion is handled here (restores are passed on to
 * cache_restore.c).  Pool pressure demoting victims on demand is
 * cache_reclaim.c's.
 */
#include "kvmm/kvmmd/cache_priv.h"

#include <errno.h>

#include "ebpf/telemetry_shm.h"
#include "kvmm/kvmmd/tier_host.h"
#include "kvmm/kvmmd/tier_nvme.h"

static void kc_slotq_append(struct kd_cache *c, struct kc_entry *e)
{
	kd_fifo_push_tail(&c->slotq, &e->slotq);
	c->demotions_queued++;
}

static void kc_slotq_del(struct kd_cache *c, struct kc_entry *e)
{
	kd_fifo_unlink(&c->slotq, &e->slotq);
	c->demotions_queued--;
}

static struct kc_entry *kc_slotq_of(struct kd_fifo_node *n)
{
	return kd_fifo_entry(n, struct kc_entry, slotq);
}

/* Does a client's pin keep e cached (a plain or live TTL record,
 * kd_pin_block_kept()): then it is never dropped for want of a slot
 * (kc_host_room(), kc_nvme_make_room()) and a failed copy of it is tried
 * again (kc_retry_kept()). */
static bool kc_kept(struct kd_cache *c, const struct kc_entry *e)
{
	return !c->closing && !e->dead && !e->drop_after && e->in_pol &&
	       kd_pin_block_kept(c->d, e->hash, e->gen);
}

/*
 * A block the policy moved down but whose copy could not be made (no slot
 * will come, the engine refused the job): it is gone, and counted as a
 * drop from the tier the move counted it into (demotions_in), so that
 * blocks in minus blocks out still adds up to what a tier holds.
 */
void kc_lose(struct kd_cache *c, struct kc_entry *e)
{
	c->st.tiers[e->tier].drops++;
	kvmm_tel_evict(c->d->tel_local, e->hash, e->tier, c->block_bytes);
	kc_kill(c, e);
}

/* Will an NVMe slot come back without the loop doing anything?  An NVMe
 * job in the engine (a write, a restore's read) ends, and frees its
 * block's slot when the block was dropped meanwhile (or the write
 * failed); a restore reaped, not yet settled, frees its block's slot when
 * it settles.  NVMe restores waiting for a staging slot do not count: they
 * wait for host slots, which writes waiting here hold. */
static bool kc_nvme_coming(struct kd_cache *c)
{
	return c->nvme_in_flight || c->nr_restored;
}

/* A free NVMe slot set aside for job's write: 0, or -ENOSPC. */
static int kc_nvme_reserve(struct kd_cache *c, struct migrate_job *job)
{
	const struct kc_entry *e = job->owner;

	if (tier_nvme_reserve(c->nvme))
		return -ENOSPC;
	job->nvme_reserved = true;
	/* stamped in the order the loop sends blocks down (the policy's,
	 * a stop's save too), not the order two workers run the writes */
	job->nvme_generation = tier_nvme_next_generation(c->nvme);
	/* in its header: a drop of that tenant's blocks covers it on disk */
	job->nvme_tenant = e->tenant;
	return 0;
}

bool kc_nvme_write_off(struct kd_cache *c, uint64_t hash)
{
	for (struct kd_fifo_node *n = kd_fifo_first(&c->nvme_off); n;
	     n = kd_fifo_next(n))
		if (kd_fifo_entry(n, struct kc_entry, nvme_off)->hash == hash)
			return true;
	return false;
}

/*
 * An NVMe slot for e's write (job, HOST_TO_NVME), decided here on the loop
 * where the line is: 0 with a slot reserved in the tier (the write cannot
 * find the tier full when a worker runs it), 1 when the write waits in
 * line (c->nvmeq, e->job set, not submitted), or -ENOSPC.
 *
 * The policy counts one slot less than the tier has: a block it dropped
 * while an NVMe I/O of it runs (its write, or a restore's read) holds its
 * slot until the I/O ends.  Under churn several such I/Os are in flight,
 * and a write found no free slot: it failed (-ENOSPC, migrations_failed)
 * and its block was lost with nothing wrong.  Now it waits for one of
 * those slots, with its bytes in its host slot, and kc_nvme_pump() starts
 * it.  It fails only when no slot is free and none will come back
 * (kc_nvme_coming()) with nothing in line before it; behind writes
 * already in line it always waits, for the pump to decide.
 *
 * A write of a hash whose old write a publish called off still runs
 * (kc_nvme_write_off()) waits in line too, whatever the slots: the tier
 * dedups by hash, so it would land on the slot the old write fills,
 * which kc_job_done() frees when that write ends (a block on NVMe with
 * no slot).  The old write is in flight (kc_nvme_coming()): its end runs
 * the pump, after its slot was freed.
 */
static int kc_nvme_slot(struct kd_cache *c, struct kc_entry *e,
			struct migrate_job *job)
{
	bool off = kc_nvme_write_off(c, e->hash);

	if (!off && kd_fifo_empty(&c->nvmeq) && !kc_nvme_reserve(c, job))
		return 0;
	/* a kept block waits: the pump makes room for it (we may be in a
	 * policy call here, which must not be entered again); so does any
	 * while a cold block is left, which the pump may evict for room
	 * once the policy's call made its own (kc_pol_nvme_full()) */
	if (!off && kd_fifo_empty(&c->nvmeq) && !kc_nvme_coming(c) &&
	    !kc_kept(c, e) && kd_fifo_empty(&c->cold))
		return -ENOSPC;
	e->job = job;
	kd_fifo_push_tail(&c->nvmeq, &e->nvmeq);
	if (!kc_nvme_coming(c) && !c->settle_timer.armed)
		kd_timer_arm(&c->d->loop, &c->settle_timer, 0);
	return 1;
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
		/*
		 * A block moving on to NVMe keeps its host slot until its
		 * write completes, so a burst of demotions can briefly need
		 * more slots than the policy counts.  Then the demotion
		 * waits in line for a slot (kc_demote_pump()) while the loop
		 * goes on; its bytes stay in its GPU pages meanwhile.  It
		 * fails only when no slot is free and none will come back:
		 * nothing in line before it, no migration in flight and no
		 * reaped restore left to settle (a host one frees its slot
		 * then).  Behind demotions already in line it always waits:
		 * a restore settled (kc_settle()) between the reap of the
		 * copies that freed slots and the pump (a loaded loop reaps
		 * them in one batch) sees the line with no migration in
		 * flight, yet slots free; failing there lost the block,
		 * counted nowhere.  The pump decides for the line, soon:
		 * with nothing in flight to run it, the settle timer does.
		 */
		if (!kd_fifo_empty(&c->slotq) ||
		    tier_host_alloc(c->host, &job->host_slot)) {
			bool coming = c->st.migrations_in_flight ||
				      c->nr_restored;

			/* a kept block waits: the pump makes room for it
			 * (kc_host_room(); this may run in a policy call) */
			if (kd_fifo_empty(&c->slotq) && !coming &&
			    !kc_kept(c, e)) {
				r = -ENOSPC;
				goto err_free;
			}
			job->host_slot = MIGRATE_NO_SLOT;
			e->job = job;
			kc_slotq_append(c, e);
			c->st.slot_waits++;
			if (!c->st.migrations_in_flight &&
			    !c->settle_timer.armed)
				kd_timer_arm(&c->d->loop, &c->settle_timer, 0);
			return 0;
		}
		e->host_slot = job->host_slot;
	} else {
		job->host_slot = e->host_slot;
		r = kc_nvme_slot(c, e, job);
		if (r < 0)
			goto err_free;
		if (r > 0)
			return 0; /* waits in line */
	}
	r = migrate_submit(c->mig, job);
	if (r) {
		if (kind == MIGRATE_GPU_TO_HOST) {
			tier_host_free(c->host, job->host_slot);
			e->host_slot = MIGRATE_NO_SLOT;
		} else {
			tier_nvme_unreserve(c->nvme);
		}
		goto err_free;
	}
	e->job = job;
	c->st.migrations_in_flight++;
	if (kind == MIGRATE_HOST_TO_NVME)
		c->nvme_in_flight++;
	return 0;

err_free:
	migrate_job_free(job);
	return r;
}

/*
 * A demotion waiting for a host slot, or a host -> NVMe write waiting for
 * an NVMe slot, is called off (its block is dropped or removed): the copy
 * never started, the bytes are still only in the GPU pages or the host
 * slot, which the caller releases.  False when e has no queued demotion.
 */
bool kc_demote_unqueue(struct kd_cache *c, struct kc_entry *e)
{
	if (kd_fifo_linked(&c->nvmeq, &e->nvmeq))
		kd_fifo_unlink(&c->nvmeq, &e->nvmeq);
	else if (kd_fifo_linked(&c->slotq, &e->slotq))
		kc_slotq_del(c, e);
	else
		return false;
	migrate_job_free(e->job);
	e->job = NULL;
	return true;
}

/*
 * A host slot for the job at the head of a queue (demotions waiting for a
 * slot, NVMe restores waiting for staging): 0 with job->host_slot set;
 * -EAGAIN when none is free but migrations in flight will give one back
 * (the job stays queued); -ENOSPC when none will come back, -ESHUTDOWN
 * at shutdown (fail_all): the job fails.
 */
int kc_queued_slot(struct kd_cache *c, struct migrate_job *job, bool fail_all)
{
	if (fail_all)
		return -ESHUTDOWN;
	if (tier_host_alloc(c->host, &job->host_slot) == 0)
		return 0;
	job->host_slot = MIGRATE_NO_SLOT;
	return c->st.migrations_in_flight ? -EAGAIN : -ENOSPC;
}

/*
 * A queued move that will never run (no slot will come, or shutdown): its
 * block goes, as when kc_submit() failed; a drop_after one was counted
 * when the policy dropped it.
 */
static void kc_unrun(struct kd_cache *c, struct kc_entry *e,
		     struct migrate_job *job)
{
	migrate_job_free(job);
	e->job = NULL;
	e->then_nvme = false;
	if (e->drop_after) {
		kc_release(c, e);
		kc_free(c, e);
	} else {
		kc_lose(c, e);
	}
}

/* What kc_host_room() or kc_nvme_make_room() did for kept block e: the
 * victims are counted as any (demotions_in below, drops), the log says
 * why they went.  Returns ok. */
static bool kc_say_room(struct kd_cache *c, const struct kc_entry *e,
			const char *tier, uint64_t moved, bool ok)
{
	if (ok)
		vmm_log(VMM_LOG_INFO,
			"cache: pinned block %016llx waits for a %s slot no move gives back: %llu %s blocks moved down for it",
			(unsigned long long)e->hash, tier,
			(unsigned long long)moved, tier);
	else
		vmm_log(VMM_LOG_WARN,
			"cache: pinned block %016llx dropped: no %s slot, and nothing in the %s tier may go to make one",
			(unsigned long long)e->hash, tier, tier);
	return ok;
}

/* A host slot is free, or a move in flight will give one back. */
static bool kc_host_slot_near(struct kd_cache *c)
{
	struct tier_host_stats hs;

	tier_host_get_stats(c->host, &hs);
	return hs.used_slots < hs.capacity_slots || c->st.migrations_in_flight;
}

/*
 * The demotion of a kept block (kc_kept()) waits at the head of the line,
 * no host slot is free and none will come back: it must not be dropped
 * (the pin promised it stays cached, and its bytes are intact in its GPU
 * pages).  The host slots are taken by blocks the policy counts in the
 * host tier and by moves waiting in line below it, so the policy makes
 * room as it would for one more block: one host block at a time moves
 * down (kc_tier_shed(): on to NVMe, whose write gives its host slot back
 * when done, or out) until a slot is free or on its way.  A victim that
 * frees none (a demotion waiting in line itself) does not stop the
 * search; at most every host block is asked once.  False when nothing
 * there may go: the block is dropped then, as before.
 */
static bool kc_host_room(struct kd_cache *c, const struct kc_entry *e)
{
	uint64_t n = pol_cache_count(c->pol, POL_TIER_HOST), moved = 0;

	while (!kc_host_slot_near(c) && n-- &&
	       kc_tier_shed(c, POL_TIER_HOST, 1)) {
		moved++;
		kc_reap_dead(c); /* a victim lost frees its slot */
	}
	return kc_say_room(c, e, "host", moved, kc_host_slot_near(c));
}

/* An NVMe slot is free (neither used nor set aside), or an NVMe job or a
 * restore to settle may give one back. */
static bool kc_nvme_slot_near(struct kd_cache *c)
{
	struct tier_nvme_stats ns;

	tier_nvme_get_stats(c->nvme, &ns);
	return ns.used_slots + ns.reserved_slots < ns.capacity_slots ||
	       kc_nvme_coming(c);
}

/* kc_host_room() for the write of a kept block at the head of the NVMe
 * line: the NVMe tier's victims are dropped (it is the last tier), a
 * written one's slot freed at once. */
static bool kc_nvme_make_room(struct kd_cache *c, const struct kc_entry *e)
{
	uint64_t n = pol_cache_count(c->pol, POL_TIER_NVME), moved = 0;

	while (!kc_nvme_slot_near(c) && n-- &&
	       kc_tier_shed(c, POL_TIER_NVME, 1)) {
		moved++;
		kc_reap_dead(c);
	}
	return kc_say_room(c, e, "NVMe", moved, kc_nvme_slot_near(c));
}

/*
 * Start queued demotions while host slots are free.  When none is free and
 * no migration is in flight, none will come back: the queued demotions
 * fail and their blocks are dropped, as a demotion that found no slot
 * always was.  At shutdown (fail_all) every queued one fails.
 */
void kc_demote_pump(struct kd_cache *c, bool fail_all)
{
	while (!kd_fifo_empty(&c->slotq)) {
		struct kc_entry *e = kc_slotq_of(kd_fifo_first(&c->slotq));
		struct migrate_job *job = e->job;
		int err = kc_queued_slot(c, job, fail_all);

		/* a slot is free now, or on its way (once: no loop on a
		 * tier whose counts and free list disagreed) */
		if (err == -ENOSPC && kc_kept(c, e) && kc_host_room(c, e))
			err = kc_queued_slot(c, job, fail_all);
		if (err == -EAGAIN)
			return;
		kc_slotq_del(c, e);
		if (!err) {
			e->host_slot = job->host_slot;
			err = migrate_submit(c->mig, job);
			if (!err) {
				c->st.migrations_in_flight++;
				continue;
			}
			tier_host_free(c->host, job->host_slot);
			e->host_slot = MIGRATE_NO_SLOT;
		}
		kc_unrun(c, e, job); /* never copied */
	}
}

/*
 * Room on the NVMe tier for e's write: evict a cold block, the oldest
 * written (c->cold, kc_order_cold()).
 *
 * Not while the tier's last write failed (c->nvme_write_fails, failures
 * in a row, out of service or not yet): the write will likely fail too,
 * and a failed write's block goes back to the host tier anyway
 * (cache_nvme_write.c), so a recovered block, good and readable, would
 * be thrown away for nothing.  The write takes a free slot then, or one
 * a write in flight gives back (it waits in line, kc_nvme_slot()), or is
 * not made: its block is dropped, as a host victim is while the tier is
 * out of service.  Until 7 December such writes each evicted a cold
 * block (tests/cache-cold-write-fail.c).  Two may still evict one: the
 * try of a tier out of service (e->nvme_probe), at most one per try (a
 * tier whose slots are all cold blocks' would never be tried again), and
 * the write of a block a client's pin keeps (kc_kept()), whose promise
 * a recovered block nothing used does not outrank (else it is dropped
 * when the NVMe tier has no victim for it, kc_nvme_make_room()).
 */
static void kc_nvme_room(struct kd_cache *c, const struct kc_entry *e)
{
	struct kd_fifo_node *n, *next;
	struct tier_nvme_stats ns;

	if (c->nvme_write_fails && !e->nvme_probe && !kc_kept(c, e))
		return;
	tier_nvme_get_stats(c->nvme, &ns);
	/* slots set aside for writes in flight are not free */
	if (ns.used_slots + ns.reserved_slots < ns.capacity_slots)
		return;
	for (n = c->cold.head; n; n = next) {
		struct kc_entry *e = kd_fifo_entry(n, struct kc_entry, cold);

		next = n->next;
		/* a prefix used it: the policy's now (or on its way) */
		/* cppcheck-suppress nullPointer ; n is not NULL here, nor
		 * then e (kd_fifo_entry() maps a NULL node to NULL) */
		if (e->in_pol || e->tier != POL_TIER_NVME ||
		    e->nvme_slot == MIGRATE_NO_SLOT) {
			kd_fifo_unlink(&c->cold, n);
			continue;
		}
		if (kc_cold_evict(c, e))
			return;
	}
}

/*
 * Will the policy drop one of its NVMe blocks in this call, right after
 * it reports a move down to NVMe (kc_move())?  It reports the move
 * before it makes room in the tier below (demote(), kvmm/policy/cache.c),
 * so when its count there is at its capacity its victim's slot comes back
 * a moment later, in the same call.  A cold block evicted for room then
 * (kc_nvme_room()) was evicted for nothing: the write took one of the two
 * slots and the other stayed free.  It happened when the block's copy to
 * host had ended before the move, not when it still ran (then the room
 * is made at its end, after the call: e->then_nvme), so the recovered
 * blocks a restart kept, and TIER_STATS' cold_evicted, depended on the
 * copy engine's timing (tests/cache-pin-cold.c step 2: 4 or 5 drops).
 * The write waits in line instead (kc_nvme_slot()), and the pump, after
 * the call, takes the victim's slot, or a cold block's when none came
 * back (a victim with no slot, or none that may go: the tier stays over).
 */
static bool kc_pol_nvme_full(struct kd_cache *c)
{
	return c->pol && pol_cache_count(c->pol, POL_TIER_NVME) >=
				 pol_cache_capacity(c->pol, POL_TIER_NVME);
}

/*
 * Start the writes waiting for an NVMe slot (kc_nvme_slot()), in line
 * order, while slots are free.  When none is free and none will come back
 * (kc_nvme_coming()), a cold block may still give its slot
 * (kc_nvme_room()); else the writes in line fail and their blocks are
 * dropped, as a write that found no slot always was.  A write whose
 * hash's called-off write still runs waits for it at the head of the
 * line (kc_nvme_slot()): that write's end runs the pump again.  At
 * shutdown (fail_all) every one in line fails.
 */
void kc_nvme_pump(struct kd_cache *c, bool fail_all)
{
	while (!kd_fifo_empty(&c->nvmeq)) {
		struct kc_entry *e = kd_fifo_entry(kd_fifo_first(&c->nvmeq),
						   struct kc_entry, nvmeq);
		struct migrate_job *job = e->job;
		int err = -ESHUTDOWN;

		if (!fail_all) {
			if (kc_nvme_write_off(c, e->hash))
				return;
			err = kc_nvme_reserve(c, job);
			if (err && kc_nvme_coming(c))
				return;
			if (err) {
				kc_nvme_room(c, e);
				err = kc_nvme_reserve(c, job);
			}
			/* a slot is free now, or on its way (once) */
			if (err && kc_kept(c, e) && kc_nvme_make_room(c, e)) {
				err = kc_nvme_reserve(c, job);
				if (err && kc_nvme_coming(c))
					return;
			}
		}
		kd_fifo_unlink(&c->nvmeq, &e->nvmeq);
		if (!err) {
			err = migrate_submit(c->mig, job);
			if (!err) {
				c->st.migrations_in_flight++;
				c->nvme_in_flight++;
				continue;
			}
			tier_nvme_unreserve(c->nvme);
		}
		/* never written; the host slot goes with the block
		 * (kc_reap_dead()) */
		kc_unrun(c, e, job);
	}
}

/* An NVMe slot came back on the loop (a block dropped or moved up): the
 * writes waiting for one take it from the settle, soon, not at the next
 * migration's end. */
void kc_nvme_kick(struct kd_cache *c)
{
	if (!kd_fifo_empty(&c->nvmeq) && !c->settle_timer.armed)
		kd_timer_arm(&c->d->loop, &c->settle_timer, 0);
}

/* The policy decided a move; make it happen (or note that it failed). */
void kc_move(void *arg, const struct pol_block *b, unsigned from, unsigned to)
{
	struct kd_cache *c = arg;
	struct kc_entry *e = kc_find(c, b->hash);

	if (!e)
		return;
	/* a cold block's first move is its admission: the policy counts it
	 * from here (charged to the tenant its header named) */
	kc_cold_end(c, e, KC_COLD_ADMITTED);
	/*
	 * The tenant the policy charges b to, kept on the entry for its
	 * NVMe header (kc_nvme_reserve()) and the stale copy its freed
	 * slot leaves (kc_release_lower()).  The policy reports a move
	 * between taking b out of its tier and putting it into the next
	 * one, so during this call pol_cache_lookup() does not find b
	 * (it answers NULL for a block in no tier): asking the policy
	 * here named nobody.  b is the one place that knows; every block
	 * the policy holds came in through here (its admission, from
	 * POL_TIER_NONE), and its tenant never changes while it is held.
	 */
	e->tenant = pol_cache_tenant_id(c->pol, b->tenant);
	if (e->dead)
		return; /* being removed by kc_reap_dead() */
	if (to == POL_TIER_NONE) {
		c->st.tiers[from].drops++;
		kvmm_tel_evict(c->d->tel_local, b->hash, from, c->block_bytes);
		e->in_pol = false;
		kd_pin_block_gone(c->d, e->hash, e->gen);
		/* a demotion still waiting for a host slot is called off */
		if (e->job && !kc_demote_unqueue(c, e)) {
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
	/* A live KVMM_PIN_F_DEMOTE pin promises the block stays cached
	 * until its TTL: it goes down whatever its uses (it was dropped,
	 * and its pin with it). */
	bool demote_pinned = (b->flags & POL_BLOCK_TTL_DEMOTE) &&
			     b->ttl_expiry > pol_cache_clock(c->pol);

	bool rejected = from == POL_TIER_HOST && to == POL_TIER_NVME &&
			!demote_pinned && e->uses < c->d->cfg.nvme_admit_uses;
	/* asked only for a block that would be written: a write let
	 * through to try the tier must be one (with its copy to host
	 * still running too, the block is dropped the same) */
	bool refused = from == POL_TIER_HOST && to == POL_TIER_NVME &&
		       !rejected && kc_nvme_write_refused(c, e);

	if (rejected || refused) {
		/* not used often enough to be worth a disk write (and a slot
		 * another block could use), or the tier is out of service
		 * for writes (cache_nvme_write.c): dropped from the host
		 * tier, the policy's victim there */
		if (rejected)
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
		/*
		 * The policy picked a block a sequence is using: only the
		 * block just admitted (published, or restored and handed
		 * out) can be, its policy reference is taken after the
		 * call.  A cached block is immutable, so its pages are
		 * copied down while the sequence keeps them: the entry
		 * moves to the host tier (the tiers stay exclusive), the
		 * pages become the sequence's own when the copy is done
		 * (kc_job_done()), freed when it lets them go.  This makes
		 * no GPU room, but the block is not lost.  Without a host
		 * tier it is not cached, not moved.
		 */
		if (to != POL_TIER_HOST || !c->host) {
			kc_kill(c, e);
			return;
		}
		e->held_copy = true;
		c->st.held_copies++;
	}
	kc_set_tier(c, e, to);
	c->st.tiers[to].demotions_in++;
	if (from == POL_TIER_GPU && to == POL_TIER_HOST) {
		if (!c->host || kc_submit(c, e, MIGRATE_GPU_TO_HOST))
			kc_lose(c, e);
		return;
	}
	if (from == POL_TIER_HOST && to == POL_TIER_NVME) {
		if (e->job) {
			e->then_nvme = true;
			return;
		}
		/* its tenant's cold blocks count against its NVMe limit
		 * (the policy counts b there once this call is over) */
		kc_cold_limit(c, e->tenant, 1);
		if (!kc_pol_nvme_full(c))
			kc_nvme_room(c, e);
		if (!c->nvme || kc_submit(c, e, MIGRATE_HOST_TO_NVME))
			kc_lose(c, e);
		return;
	}
	kc_lose(c, e); /* GPU -> NVMe directly: not a path we take */
}

/*
 * A failed copy down (GPU -> host, host -> NVMe) of a block a client's
 * pin keeps cached is tried again: the bytes are still where the copy
 * read them (the GPU pages, the host slot) and the pin promised the
 * block stays cached (it may have come while the copy already ran: a
 * pin does not stop a move the policy made before it).  Dropping it lost
 * the block and its records, and the client's BLOCK_UNPIN answered
 * -ENOENT (tests/cache-pin-migrate-fault.c).  A few tries in a row at
 * most: a device that keeps failing must not keep the loop busy, and
 * the block then goes as any other whose copy failed.
 */
#define KC_KEPT_RETRIES 2

static bool kc_retry_kept(struct kd_cache *c, struct kc_entry *e,
			  const struct migrate_job *job)
{
	if (job->state != MIGRATE_FAILED || job->result == -EINPROGRESS ||
	    e->kept_retries >= KC_KEPT_RETRIES || !kc_kept(c, e))
		return false;
	e->kept_retries++;
	return true;
}

static bool kc_restore_kind(enum migrate_kind kind)
{
	return kind == MIGRATE_HOST_TO_GPU || kind == MIGRATE_NVME_TO_GPU;
}

void kc_job_done(struct kd_cache *c, struct migrate_job *job)
{
	struct kc_entry *e = job->owner;
	bool ok = job->state == MIGRATE_DONE, retry, back = false;
	enum migrate_kind kind;

	if (job->kind == MIGRATE_NVME_INVALIDATE ||
	    job->kind == MIGRATE_NVME_MARK ||
	    job->kind == MIGRATE_NVME_RESTAMP) {
		kc_drop_job_done(c, job); /* a drop's, or none: no entry */
		return;
	}
	if (job->kind == MIGRATE_HOST_TO_NVME ||
	    job->kind == MIGRATE_NVME_TO_GPU)
		c->nvme_in_flight--; /* kc_nvme_pump() runs after the reap */
	if (kc_restore_kind(job->kind)) {
		c->st.migrations_in_flight--;
		kc_restore_done(c, job);
		return;
	}
	/* an open may wait for this block's move (kc_busy_retry()): the
	 * settle runs after the reap (kc_on_migrate()), or from the loop
	 * when reaped elsewhere (shutdown) */
	if (c->pending && !c->settle_timer.armed)
		kd_timer_arm(&c->d->loop, &c->settle_timer, 0);
	c->st.migrations_in_flight--;
	e->job = NULL;
	/* a write a publish called off: its slot is freed below (a write
	 * of its hash waiting in line goes at the pump after this reap) */
	if (kd_fifo_linked(&c->nvme_off, &e->nvme_off))
		kd_fifo_unlink(&c->nvme_off, &e->nvme_off);
	if (job->nvme_reserved) {
		/* never written (failed before, cancelled): unused */
		tier_nvme_unreserve(c->nvme);
		job->nvme_reserved = false;
	}
	retry = !ok && kc_retry_kept(c, e, job);
	if (job->kind == MIGRATE_HOST_TO_NVME) {
		/* before the block goes back: its host victim is dropped
		 * when this failure took the tier out of service */
		kc_nvme_write_end(c, e, job);
		back = !ok && !retry && kc_nvme_write_keeps(c, e);
	}
	if (!ok) {
		c->st.migrations_failed++;
		vmm_log(VMM_LOG_WARN,
			"cache: %s move of block %016llx failed: %s%s",
			migrate_kind_string(job->kind),
			(unsigned long long)job->hash, strerror(-job->result),
			retry ? "; pinned: tried again" :
			back  ? "; back to the host tier, its copy there kept" :
				"");
	} else {
		e->kept_retries = 0;
	}
	if (job->kind == MIGRATE_GPU_TO_HOST) {
		/* the copy is out (or failed): the pages may go back; held
		 * ones stay with their sequences, which keep the hash (a
		 * publish of them again is a duplicate) unless the block
		 * is gone from the cache; a retry copies them again */
		if (!retry) {
			if (e->held_copy && ok && !e->drop_after)
				kc_leave_block(c, e);
			else
				kc_put_block(c, e);
			e->held_copy = false;
		}
		if (ok)
			c->st.tiers[POL_TIER_HOST].bytes_in += job->length;
		else
			e->host_slot =
				MIGRATE_NO_SLOT; /* freed by the engine */
	} else if (job->kind == MIGRATE_HOST_TO_NVME) {
		/* a retry writes the host copy again; a block back in the
		 * host tier keeps it */
		if (e->host_slot != MIGRATE_NO_SLOT && !retry && !back) {
			tier_host_free(c->host, e->host_slot);
			e->host_slot = MIGRATE_NO_SLOT;
		}
		if (ok) {
			e->nvme_slot = job->nvme_slot;
			c->st.tiers[POL_TIER_NVME].bytes_in += job->length;
		}
	}
	kind = job->kind;
	migrate_job_free(job);
	if (e->drop_after) {
		kc_release(c, e);
		kc_free(c, e);
		return;
	}
	if (retry) {
		if (kind == MIGRATE_HOST_TO_NVME)
			kc_nvme_room(c, e);
		if (kc_submit(c, e, kind))
			kc_lose(c, e);
		return;
	}
	if (back) {
		kc_nvme_write_return(c, e);
		return;
	}
	if (!ok) {
		kc_lose(c, e); /* and in migrations_failed */
		return;
	}
	if (kind == MIGRATE_HOST_TO_NVME)
		kc_nvme_restamp_landed(c, e);
	if (e->then_nvme) {
		e->then_nvme = false;
		/* a tier out of service for writes: dropped, as a host
		 * victim then is (kc_move()), before any cold block gives
		 * its slot for the write */
		if (!c->nvme || kc_nvme_write_refused(c, e)) {
			kc_lose(c, e);
			return;
		}
		kc_nvme_room(c, e);
		if (kc_submit(c, e, MIGRATE_HOST_TO_NVME))
			kc_lose(c, e);
	}
}
