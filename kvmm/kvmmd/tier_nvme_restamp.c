// SPDX-License-Identifier: MIT
/*
 * Restamps: the header of a block an operator's drop kept, written again
 * with a newer generation, so that the drop's mark (tier_nvme_mark.c:
 * every header below generation G is dropped at the next start) does
 * not cover it.  The drop keeps a block that is in use (a sequence holds
 * it, a client pinned it), and that promise used to end at the restart:
 * its header was written before the mark.
 *
 * The slot is the same and so are the payload and its CRC32C; only the
 * 4 KiB header moves, through the batch engine's queue as an
 * invalidation's zeroed header does (a block whose extent is empty),
 * then an fsync.  The caller takes the generation when it queues the
 * restamp (tier_nvme_next_generation()), after the drop's mark was
 * taken, so it is above that mark and below any later drop's: a later
 * drop that drops the block covers the restamped header too.
 *
 * While its header is on its way the slot is "restamping" (t->lock):
 *   - no read starts on it (tier_nvme_read_batch() waits before it takes
 *     any slot), and the restamp waits for the reads in flight before it
 *     writes: a read checks the header it gets against the slot's
 *     generation, and must not find the other one, or half of each;
 *   - it is never handed to another block: a free meanwhile leaves it
 *     FILLING and is done when the write ended (restamp_free), an
 *     invalidation's claim is taken and its batch waits for the write,
 *     so its zeros land after the restamped header, not before;
 *   - one restamp of a slot at a time (a later drop's waits).
 * A write that fails may have left the old header, the new one or a
 * torn one (which fails its CRC at a restart: the block is lost there,
 * never served wrong): the slot stays READY for the run, and its reads
 * accept either generation (alt_generation).
 */
#include "tier_nvme_priv.h"

#include <errno.h>
#include <unistd.h>

#if HAVE_LIBURING

static bool any_restamping(const struct tier_nvme *t,
			   const struct tier_nvme_io *ios, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		if (ios[i].slot < t->nslots && t->slots[ios[i].slot].restamping)
			return true;
	return false;
}

/*
 * Every batch on written slots (a read, an invalidation, a restamp)
 * starts so, before it takes any of them: waiting with none taken, no
 * two batches wait for each other in a cycle.  What each waits for is
 * its own: a read must not get a header half rewritten, an invalidation's
 * zeros go after the restamped header, one restamp of a slot at a time.
 */
void nvme_batch_start(struct tier_nvme *t, struct tier_nvme_io *ios,
		      unsigned int n)
{
	while (any_restamping(t, ios, n))
		nvme_slot_wait(t);
	/* set again only where the batch drops the block */
	for (unsigned int i = 0; i < n; i++)
		ios[i].dropped = false;
}

void nvme_restamp_settle(struct tier_nvme *t, uint32_t slot)
{
	struct nvme_slot *s = &t->slots[slot];

	s->restamping = false;
	if (s->restamp_free)
		/* freed while it wrote; its header (either) names it */
		nvme_slot_release_stale(t, slot, s->restamp_tenant);
	else if (s->bad && !s->readers)
		/* a read found it bad while the restamp waited for it */
		nvme_slot_release_stale(t, slot, TIER_NVME_NOBODY);
	if (t->slot_waiters)
		pthread_cond_broadcast(&t->slot_cond);
}

void nvme_restamp_finish(struct tier_nvme *t, struct nvme_batch *b,
			 unsigned int idx)
{
	const struct tier_nvme_io *io = &b->ios[idx];
	struct nvme_slot *s = &t->slots[io->slot];

	if (io->result) {
		t->st.restamp_errors++;
		s->alt_generation = b->gens[idx];
	} else {
		t->st.restamps++;
		s->generation = b->gens[idx];
		s->alt_generation = 0;
	}
	nvme_restamp_settle(t, io->slot);
}

/* Whether a read of one of the n ios' restamping slots is in flight. */
static bool restamp_reads_left(const struct tier_nvme *t,
			       const struct nvme_batch *b)
{
	for (unsigned int i = 0; i < b->n; i++)
		if (b->pending[i] && t->slots[b->ios[i].slot].readers)
			return true;
	return false;
}

/* Take the n ios' slots for their restamps (t->lock held): pending,
 * restamping, once no read of them runs. */
static void restamp_take(struct tier_nvme *t, struct nvme_batch *b)
{
	struct tier_nvme_io *ios = b->ios;
	unsigned int n = b->n;

	nvme_batch_start(t, ios, n);
	for (unsigned int i = 0; i < n; i++) {
		struct tier_nvme_io *io = &ios[i];
		struct nvme_slot *s = nvme_ready_slot(t, io);

		if (!s)
			continue;
		if (s->restamping) { /* twice in this batch */
			io->result = -EBUSY;
			continue;
		}
		if (!io->generation)
			io->generation = t->next_generation++;
		if (s->generation >= io->generation) {
			io->result = 0; /* written since: above already */
			continue;
		}
		s->restamping = true; /* no read starts from now on */
		b->pending[i] = true;
	}
	/* the reads that started before: they check the old header */
	while (restamp_reads_left(t, b))
		nvme_slot_wait(t);
	for (unsigned int i = 0; i < n; i++) {
		struct tier_nvme_io *io = &ios[i];
		struct nvme_slot *s = &t->slots[io->slot];

		if (!b->pending[i])
			continue;
		if (s->state != TIER_SLOT_READY || s->bad) {
			/* freed, claimed or found bad while it waited */
			b->pending[i] = false;
			io->result = -ENOENT;
			nvme_restamp_settle(t, io->slot);
			continue;
		}
		b->gens[i] = io->generation;
		b->crcs[i] = s->payload_crc;
		io->length = s->length;
		io->layout_id = s->layout_id;
		io->tenant = s->tenant;
		io->buf = NULL;
		io->headroom = false;
	}
}

int tier_nvme_restamp_batch(struct tier_nvme *t, struct tier_nvme_io *ios,
			    unsigned int n)
{
	struct nvme_batch b;
	bool any = false;

	if (n == 0)
		return 0;
	if (nvme_batch_alloc(&b, ios, n, true, false))
		return (int)n;
	b.restamp = true;
	pthread_mutex_lock(&t->lock);
	restamp_take(t, &b);
	for (unsigned int i = 0; i < n; i++)
		any |= b.pending[i];
	pthread_mutex_unlock(&t->lock);
	/* tests only (tier_nvme.c): the slots taken, their headers not
	 * written yet (a crash then; a read or free meanwhile) */
	if (any && t->restamp_delay_us)
		usleep(t->restamp_delay_us);
	/* durable before the caller says the block is kept past a restart */
	nvme_run_batch_synced(t, &b, any, &t->st.restamps,
			      &t->st.restamp_errors);
	return nvme_batch_end(&b, ios, n);
}

#endif /* HAVE_LIBURING */
