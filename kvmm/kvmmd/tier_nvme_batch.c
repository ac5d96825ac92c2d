// SPDX-License-Identifier: MIT
/*
 * The NVMe tier's batches on their caller's side: what
 * tier_nvme_write_batch(), tier_nvme_read_batch() and
 * tier_nvme_invalidate_batch() check and take under t->lock before their
 * I/O runs (a slot per block, the dedup of a hash already written, a
 * read's pin on a READY slot, an invalidation's claimed slot), and what a
 * block whose I/O is over does to its slot (nvme_finish_block()): a write
 * is published READY, a read's header and payload CRC32C are verified
 * before it counts as read, an invalidated slot is freed.
 *
 * The I/O itself is the engine's (tier_nvme_io.c: the ring, its thread
 * and nvme_run_batch(), all under t->io_lock); this file takes only
 * t->lock, which is the seam between the two (io_lock is taken before
 * lock when both are held, and nothing here holds both).
 */
#include "tier_nvme_priv.h"

#include "crc32c.h"
#include "vmm/vmm.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if HAVE_LIBURING

/*
 * A block's I/O is over (owner, without io_lock): publish a write; verify
 * a read's header and payload CRC before it counts as read.  ring_failed:
 * the ring had failed when the block was handed over, so an error may be
 * the ring's (fail_all()), not the disk's: it does not count against the
 * slot.
 */
void nvme_finish_block(struct tier_nvme *t, struct nvme_batch *b,
		       unsigned int idx, bool ring_failed)
{
	struct tier_nvme_io *io = &b->ios[idx];
	struct nvme_slot *s = &t->slots[io->slot];
	int err = b->errs[idx];

	if (b->restamp) {
		pthread_mutex_lock(&t->lock);
		io->result = err;
		nvme_restamp_finish(t, b, idx);
		pthread_mutex_unlock(&t->lock);
		return;
	}
	if (b->invalidate) {
		/* free whatever the write did: an old header left on disk
		 * is only a block that may come back after a restart, so
		 * the slot stays a stale copy a later drop tries again */
		pthread_mutex_lock(&t->lock);
		if (err) {
			t->st.invalidate_errors++;
			nvme_slot_release_stale(t, io->slot, TIER_NVME_NOBODY);
		} else {
			t->st.invalidations++;
			nvme_slot_release(t, io->slot);
		}
		if (t->slot_waiters)
			pthread_cond_broadcast(&t->slot_cond);
		pthread_mutex_unlock(&t->lock);
		io->result = err;
		return;
	}
	if (b->write) {
		pthread_mutex_lock(&t->lock);
		if (err) {
			t->st.write_errors++;
			/* the header may have reached the disk */
			nvme_slot_release_stale(t, io->slot, TIER_NVME_NOBODY);
		} else {
			/* remembered so reads are checked against it */
			s->payload_crc = b->crcs[idx];
			s->state = TIER_SLOT_READY;
			t->st.ready_slots++;
			t->st.writes++;
			t->st.bytes_written += io->length;
		}
		if (t->slot_waiters)
			pthread_cond_broadcast(&t->slot_cond);
		pthread_mutex_unlock(&t->lock);
		io->result = err;
		return;
	}

	const struct tier_nvme_slot_header *h = &b->hdrs[idx];
	bool bad_crc = false, bad_hdr = false;

	if (!err) {
		/* s's identity does not change while readers > 0 (nor its
		 * generations: a restamp waits for them) */
		if (!nvme_header_valid(t, h, io->slot) || h->hash != s->hash ||
		    (h->generation != s->generation &&
		     (!s->alt_generation ||
		      h->generation != s->alt_generation)) ||
		    h->length != s->length)
			bad_hdr = true;
		else if (h->payload_crc != s->payload_crc ||
			 tier_crc32c(0, io->buf, h->length) != h->payload_crc)
			bad_crc = true;
	}
	pthread_mutex_lock(&t->lock);
	s->readers--;
	if (err) {
		t->st.read_errors++;
		io->result = err;
		if (!ring_failed && !s->bad &&
		    ++s->read_failures >= NVME_READ_FAILURES_MAX) {
			/* persistent: a miss from now on, not a failed
			 * restore on every open (tier_nvme_priv.h) */
			s->bad = true;
			t->st.read_error_drops++;
			vmm_log(VMM_LOG_WARN,
				"tier_nvme: slot %u (hash %016llx): %u reads in a row failed (last: %s); dropped",
				io->slot, (unsigned long long)s->hash,
				(unsigned int)s->read_failures, strerror(-err));
		}
	} else if (bad_hdr || bad_crc) {
		if (bad_crc)
			t->st.checksum_failures++;
		else
			t->st.header_failures++;
		s->bad = true;
		io->result = -EBADMSG;
		vmm_log(VMM_LOG_WARN,
			"tier_nvme: slot %u (hash %016llx) failed its %s check; dropped",
			io->slot, (unsigned long long)s->hash,
			bad_crc ? "payload CRC32C" : "header");
	} else {
		s->read_failures = 0; /* "in a row" */
		t->st.reads++;
		t->st.bytes_read += h->length;
		io->layout_id = h->layout_id;
		io->result = 0;
	}
	/* a restamp waits for the last read of its slot */
	if (s->restamping && !s->readers && t->slot_waiters)
		pthread_cond_broadcast(&t->slot_cond);
	/* this read's caller too must forget the slot, whichever reader
	 * found it bad: it goes when the last one leaves */
	io->dropped = s->bad;
	if (s->bad && s->readers == 0 && !s->restamping) {
		/* its header may still pass a restart's scan (a restamp
		 * waiting for this read frees it: nvme_restamp_settle()) */
		nvme_slot_release_stale(t, io->slot, TIER_NVME_NOBODY);
		if (t->slot_waiters)
			pthread_cond_broadcast(&t->slot_cond);
	}
	pthread_mutex_unlock(&t->lock);
}

static void batch_free(struct nvme_batch *b)
{
	free(b->pending);
	free(b->gens);
	free(b->crcs);
	free(b->hdrs);
	free(b->errs);
	free(b->ready);
	pthread_cond_destroy(&b->done);
}

/*
 * Run header-only batch b (invalidations, restamps) and make it durable
 * (any: it wrote something): a header is promised to a restart only
 * once synced, so when the fsync fails each write that had succeeded
 * fails with -EIO, moved from the tier's counter of its kind (*done) to
 * that kind's failures (*failed).
 */
void nvme_run_batch_synced(struct tier_nvme *t, struct nvme_batch *b, bool any,
			   uint64_t *done, uint64_t *failed)
{
	nvme_run_batch(t, b);
	if (!any || !tier_nvme_sync(t))
		return;
	pthread_mutex_lock(&t->lock);
	for (unsigned int i = 0; i < b->n; i++) {
		if (!b->pending[i] || b->ios[i].result)
			continue;
		b->ios[i].result = -EIO;
		(*done)--;
		(*failed)++;
	}
	pthread_mutex_unlock(&t->lock);
}

/* The batch is over: how many of its ios failed (each io's result says
 * which), its memory freed. */
int nvme_batch_end(struct nvme_batch *b, const struct tier_nvme_io *ios,
		   unsigned int n)
{
	int failed = 0;

	for (unsigned int i = 0; i < n; i++)
		if (ios[i].result)
			failed++;
	batch_free(b);
	return failed;
}

int nvme_batch_alloc(struct nvme_batch *b, struct tier_nvme_io *ios,
		     unsigned int n, bool write, bool invalidate)
{
	*b = (struct nvme_batch){
		.ios = ios, .n = n, .write = write, .invalidate = invalidate
	};
	pthread_cond_init(&b->done, NULL);
	b->pending = calloc(n, sizeof(*b->pending));
	b->errs = calloc(n, sizeof(*b->errs));
	b->ready = calloc(n, sizeof(*b->ready));
	if (invalidate) {
		/* nothing more: no generation, no CRC, nothing read */
	} else if (write) {
		b->gens = calloc(n, sizeof(*b->gens));
		b->crcs = calloc(n, sizeof(*b->crcs));
	} else {
		b->hdrs = calloc(n, sizeof(*b->hdrs));
	}
	if (!b->pending || !b->errs || !b->ready ||
	    (!invalidate && (write ? !b->gens || !b->crcs : !b->hdrs))) {
		batch_free(b);
		for (unsigned int i = 0; i < n; i++)
			ios[i].result = -ENOMEM;
		return -ENOMEM;
	}
	return 0;
}

void nvme_slot_wait(struct tier_nvme *t)
{
	t->slot_waiters++;
	pthread_cond_wait(&t->slot_cond, &t->lock);
	t->slot_waiters--;
}

/*
 * Wait (t->lock held, no slot of this batch taken yet, so batches cannot
 * wait for each other in a cycle) until none of the batch's hashes is
 * being written by another batch or dropped after a failed check: its
 * outcome decides (dedup, or a fresh slot), as when batches ran one at a
 * time.
 */
static void wait_hashes_settled(struct tier_nvme *t,
				const struct tier_nvme_io *ios, unsigned int n)
{
	bool busy;

	do {
		busy = false;
		for (unsigned int i = 0; i < n && !busy; i++) {
			uint32_t slot = nvme_idx_find(t, ios[i].hash);

			busy = slot != NVME_NONE &&
			       (t->slots[slot].state == TIER_SLOT_FILLING ||
				t->slots[slot].bad);
		}
		if (busy)
			nvme_slot_wait(t);
	} while (busy);
}

int tier_nvme_write_batch(struct tier_nvme *t, struct tier_nvme_io *ios,
			  unsigned int n)
{
	struct nvme_batch b;

	if (n == 0)
		return 0;
	if (nvme_batch_alloc(&b, ios, n, true, false)) {
		/* a reservation is used up whatever the write does, also when
		 * it cannot start: give it back, or its slot stays set aside
		 * for good (the caller forgot it when it handed it over) */
		for (unsigned int i = 0; i < n; i++)
			if (ios[i].reserved)
				tier_nvme_unreserve(t);
		return (int)n;
	}
	pthread_mutex_lock(&t->lock);
	wait_hashes_settled(t, ios, n);
	for (unsigned int i = 0; i < n; i++) {
		struct tier_nvme_io *io = &ios[i];
		uint32_t slot = nvme_idx_find(t, io->hash);

		/* used up whatever happens below: its slot is free now for
		 * nvme_slot_alloc() (nfree > reserved) */
		if (io->reserved && t->reserved)
			t->reserved--;
		if (!io->buf || (uintptr_t)io->buf % NVME_ALIGN ||
		    io->length == 0 || io->length % NVME_ALIGN ||
		    io->length > t->payload_bytes) {
			io->result = -EINVAL;
			continue;
		}
		if (slot != NVME_NONE) {
			io->slot = slot;
			/* the same block only: a slot of that hash in
			 * another layout or length holds other bytes */
			if (t->slots[slot].state == TIER_SLOT_READY &&
			    !t->slots[slot].bad &&
			    t->slots[slot].layout_id == io->layout_id &&
			    t->slots[slot].length == io->length) {
				t->st.dedup_hits++;
				io->result = 0;
			} else {
				io->result = -EEXIST;
			}
			continue;
		}
		io->result = nvme_slot_alloc(t, &io->slot);
		if (io->result)
			continue;
		t->slots[io->slot] = (struct nvme_slot){
			.state = TIER_SLOT_FILLING,
			.hash = io->hash,
			.length = io->length,
			.generation = io->generation ? io->generation :
						       t->next_generation++,
			.layout_id = io->layout_id,
			.tenant = io->tenant,
		};
		nvme_idx_insert(t, io->slot);
		b.gens[i] = t->slots[io->slot].generation;
		b.pending[i] = true;
	}
	pthread_mutex_unlock(&t->lock);
	nvme_run_batch(t, &b);
	return nvme_batch_end(&b, ios, n);
}

struct nvme_slot *nvme_ready_slot(struct tier_nvme *t, struct tier_nvme_io *io)
{
	struct nvme_slot *s;

	if (io->slot >= t->nslots) {
		io->result = -EINVAL;
		return NULL;
	}
	s = &t->slots[io->slot];
	if (s->state != TIER_SLOT_READY || s->bad || s->hash != io->hash) {
		io->result = -ENOENT;
		return NULL;
	}
	return s;
}

int tier_nvme_read_batch(struct tier_nvme *t, struct tier_nvme_io *ios,
			 unsigned int n)
{
	struct nvme_batch b;

	if (n == 0)
		return 0;
	if (nvme_batch_alloc(&b, ios, n, false, false))
		return (int)n;
	pthread_mutex_lock(&t->lock);
	/* before any read is taken, so that a restamp waiting for the reads
	 * of its slots never waits for this batch */
	nvme_batch_start(t, ios, n);
	for (unsigned int i = 0; i < n; i++) {
		struct tier_nvme_io *io = &ios[i];
		struct nvme_slot *s = nvme_ready_slot(t, io);

		if (!s)
			continue;
		if (!io->buf || (uintptr_t)io->buf % NVME_ALIGN) {
			io->result = -EINVAL;
			continue;
		}
		io->length = s->length;
		s->readers++;
		b.pending[i] = true;
	}
	pthread_mutex_unlock(&t->lock);
	nvme_run_batch(t, &b);
	return nvme_batch_end(&b, ios, n);
}

/*
 * Each io's slot was taken out of use when it was claimed
 * (tier_nvme_invalidate_claim(): FILLING, so lookups and reads miss it and
 * a write of its hash waits in wait_hashes_settled()), so nothing reads
 * or reuses it while its zeroed header is on its way; the header goes as a block of the
 * write engine's with no payload (a separate-header block whose extent
 * is empty), in the queue the other
 * batches share.  nvme_finish_block() frees the slot when the write ended.
 */
int tier_nvme_invalidate_batch(struct tier_nvme *t, struct tier_nvme_io *ios,
			       unsigned int n)
{
	struct nvme_batch b;
	bool any = false;

	if (n == 0)
		return 0;
	if (t->invalidate_delay_us) /* tests only (tier_nvme.c) */
		usleep(t->invalidate_delay_us);
	if (nvme_batch_alloc(&b, ios, n, true, true))
		return (int)n;
	pthread_mutex_lock(&t->lock);
	/* a slot claimed while its restamp wrote: the zeros go after */
	nvme_batch_start(t, ios, n);
	for (unsigned int i = 0; i < n; i++) {
		struct tier_nvme_io *io = &ios[i];
		struct nvme_slot *s;

		if (io->slot >= t->nslots) {
			io->result = -EINVAL;
			continue;
		}
		s = &t->slots[io->slot];
		/* claimed (a bad slot too: its header may still pass at a
		 * restart), so out of ready_slots already and with no reader
		 * (reads take READY slots only) */
		if (s->state != TIER_SLOT_FILLING || !s->dropping ||
		    s->hash != io->hash) {
			io->result = -ENOENT;
			continue;
		}
		/* taken: no longer claimed, so neither another batch nor
		 * tier_nvme_invalidate_unclaim() takes it again */
		s->dropping = false;
		io->buf = NULL;
		io->length = 0;
		io->headroom = false;
		io->dropped = true;
		b.pending[i] = true;
		any = true;
	}
	pthread_mutex_unlock(&t->lock);
	nvme_run_batch_synced(t, &b, any, &t->st.invalidations,
			      &t->st.invalidate_errors);
	return nvme_batch_end(&b, ios, n);
}

#endif /* HAVE_LIBURING */
