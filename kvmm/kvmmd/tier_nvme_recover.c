// SPDX-License-Identifier: MIT
/*
 * NVMe tier restart recovery: when tier_nvme_open() finds a superblock of
 * the same geometry, every slot header is read (queue_depth at a time,
 * through the ring, into the header buffers) and each valid one makes its
 * slot READY again.  A header is valid when magic, version, format id,
 * slot index, length and header CRC are right; of two slots with one hash
 * the newer generation wins.  A valid header below a drop mark
 * (tier_nvme_mark.c) names a block an operator dropped: left out, its
 * slot free, a stale copy flagged marked that the daemon zeroes once the
 * tier is the cache's (tier_nvme_marked_claim()); the marks it found no
 * such header below retire (nvme_marks_retire()).  Payloads are not read
 * here: their CRC is checked on every read, so a damaged payload is found
 * when it is used.
 *
 * Only the slots the superblock says the last run had (known_slots) are
 * recovered.  A tier that grew (a larger --nvme-size on a block device,
 * or a device grown) finds past that end what a run before a shrink left
 * there: headers of this format, of blocks that shrink evicted, whose
 * generations are larger than the ones written since (the generation
 * only continued after the slots the smaller tier kept).  Recovered,
 * such a stale copy would win over the block's newer one and take its
 * place in the eviction order.  Their headers are cleared (zeroed, and
 * synced before the superblock takes the new size), so that a later
 * open, whose superblock then counts them, does not find them either;
 * so is the header of such a slot whose read failed, whatever it held.
 */
#include "tier_nvme_priv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vmm/vmm.h"

#if HAVE_LIBURING

/* The tenant a valid header names: TIER_NVME_NOBODY for one written
 * before headers said (its tenant word zero and no flag). */
static uint32_t header_tenant(const struct tier_nvme_slot_header *h)
{
	return h->flags & TIER_NVME_HDR_TENANT ? h->tenant : TIER_NVME_NOBODY;
}

/* Keep a recovered header: newest generation of each hash wins. */
static void recover_one(struct tier_nvme *t, uint32_t slot,
			const struct tier_nvme_slot_header *h)
{
	uint32_t old = nvme_idx_find(t, h->hash);

	if (old != NVME_NONE) {
		/* the loser's header stays valid on disk: a stale copy of
		 * its header's tenant, which a drop of its block (or a
		 * --uid drop of that tenant) must find (the winner's
		 * invalidation would let it win at the next restart) */
		if (t->slots[old].generation >= h->generation) {
			nvme_slot_mark_stale(t, slot, h->hash, false,
					     header_tenant(h));
			return;
		}
		nvme_slot_release_recovered(t, old);
		t->st.recovered_slots--;
	}
	/* off the free stack when the scan is over (nvme_recover()): the
	 * stack holds duplicates meanwhile, nothing allocates */
	t->st.used_slots++;
	t->slots[slot] = (struct nvme_slot){
		.state = TIER_SLOT_READY,
		.hash = h->hash,
		.length = h->length,
		.generation = h->generation,
		.layout_id = h->layout_id,
		.payload_crc = h->payload_crc,
		.tenant = header_tenant(h),
	};
	nvme_idx_insert(t, slot);
	t->st.ready_slots++;
	t->st.recovered_slots++;
	if (h->generation >= t->next_generation)
		t->next_generation = h->generation + 1;
}

/* What the scan carries from one header to the next: the tier's name
 * for its lines, the zeros it writes over stale headers and over those
 * of the last run's slots it could not read, their counts. */
struct nvme_scan {
	const char *path, *part;
	const void *zero; /* NVME_ALIGN zero bytes, aligned for O_DIRECT */
	uint32_t cleared; /* past the last run's end */
	uint32_t unread; /* in the last run's slots */
};

/* Zero slot's header: 0 or -errno. */
static int zero_header(struct tier_nvme *t, struct nvme_scan *sc, uint32_t slot)
{
	ssize_t n;

	/* tests: KVMMD_TEST_NVME_CLEAR_FAIL (tier_nvme_fault.c), a write
	 * the disk failed, nothing written */
	if (nvme_fault_clear(t, slot))
		return -EIO;
	n = pwrite(t->fd, sc->zero, NVME_ALIGN,
		   (off_t)nvme_slot_offset(t, slot));
	if (n == NVME_ALIGN)
		return 0;
	return n < 0 ? -errno : -EIO;
}

/*
 * Zero the header of slot, a stale one past the last run's end (why: its
 * header read as valid, or its read failed): 0 or -errno, with an ERR
 * line naming the file, the slot and the cause.  Nothing is lost when it
 * fails: the open fails before the superblock is written, so it still
 * counts the last run's slots alone, and the next open reads this one
 * past that end again and clears it again.
 */
static int clear_stale(struct tier_nvme *t, struct nvme_scan *sc, uint32_t slot,
		       const char *why)
{
	int r;

	sc->cleared++;
	r = zero_header(t, sc, slot);
	if (r)
		vmm_log(VMM_LOG_ERR,
			"tier_nvme: %s%s: zeroing the stale header of slot %u, past the last run's end (%u slots, now %u; %s): %s; the open fails, the superblock still says %u slots and the next open clears it again",
			sc->path, sc->part, slot, t->known_slots, t->nslots,
			why, strerror(-r), t->known_slots);
	return r;
}

/*
 * The header of slot, one of the last run's, could not be read (res): zero
 * it, so that no later scan finds what it held.  0 or -errno.
 *
 * What it held is not known: a block of the last run maybe, whose
 * generation may be the largest on disk.  The generation this run
 * continues from is the largest the scan read, so a drop in this run
 * would take a mark below that unread header's, and a later scan that
 * read it (the error a one-off) would recover a block the drop covered,
 * had this run not written the slot again.  Zeroed, it holds nothing: the
 * block, if there was one, is a miss, as it is already for this run (the
 * slot is free), and no mark needs to stay for it.  Keeping it instead
 * would take the largest generation ever written kept where a failed
 * read cannot hide it, which the superblock does not hold.  A zeroing
 * that fails too fails the open, as a stale header's past the last run's
 * end does: the next open reads the slot again.
 */
static int clear_unread(struct tier_nvme *t, struct nvme_scan *sc,
			uint32_t slot, int res)
{
	int r = zero_header(t, sc, slot);

	sc->unread++;
	if (r)
		vmm_log(VMM_LOG_ERR,
			"tier_nvme: %s%s: restart scan: reading the header of slot %u failed (%s), and zeroing it too: %s; the open fails and the next open reads it again",
			sc->path, sc->part, slot, strerror(-res), strerror(-r));
	else
		vmm_log(VMM_LOG_WARN,
			"tier_nvme: %s%s: restart scan: reading the header of slot %u failed (%s): zeroed, its block (if it held one) not recovered",
			sc->path, sc->part, slot, strerror(-res));
	return r;
}

/* One completed header read of slot, in buf: 0, or -errno when a stale
 * header could not be cleared. */
static int recover_header(struct tier_nvme *t, struct nvme_scan *sc,
			  uint32_t slot, int res, const unsigned char *buf)
{
	struct tier_nvme_slot_header h;

	if (res < 0 && slot >= t->known_slots) {
		/*
		 * Past the last run's end, what it holds is not known: it may
		 * be a valid header an earlier, larger life of the file left
		 * (above).  Taken as never written, the slot would be this
		 * run's, the superblock written after the scan would count
		 * it, and a later scan whose read works would recover that
		 * stale block (one a mark that retired since had covered,
		 * maybe).  So it is zeroed whatever it held, and synced with
		 * the others before that superblock.  A zeroing that fails
		 * too fails the open, as one of a header read as valid does:
		 * keeping the slot out of use for this run would not keep it
		 * out of the next superblock's count, nor out of the next
		 * scan.  Zeroed, it holds nothing a mark covers: no reason to
		 * keep the marks.
		 */
		return clear_stale(t, sc, slot, "its header's read failed");
	}
	if (res < 0)
		return clear_unread(t, sc, slot, res);
	if (res != NVME_ALIGN)
		return 0; /* unwritten tail of a sparse file */
	memcpy(&h, buf, sizeof(h));
	if (h.magic == 0 && h.header_crc == 0)
		return 0; /* never written */
	if (slot >= t->known_slots) {
		/* past the last run's end: not this tier's (above) */
		if (!nvme_header_valid(t, &h, slot))
			return 0;
		return clear_stale(
			t, sc, slot,
			"a valid header an earlier life of the file left");
	}
	if (!nvme_header_valid(t, &h, slot)) {
		/* a slot of this format whose header is damaged; a stale
		 * format is just empty */
		if (h.magic == TIER_NVME_SLOT_MAGIC &&
		    h.format_id == t->format_id)
			t->st.header_failures++;
		return 0;
	}
	pthread_mutex_lock(&t->lock);
	/* an operator dropped it, whether or not its header's invalidation
	 * ran: free, never recovered (the mark covers it for good), and a
	 * stale copy the daemon has zeroed (tier_nvme_marked_claim()), so
	 * that the next restart does not read and count it again */
	if (nvme_header_marked(t, &h)) {
		t->st.drop_marked_slots++;
		nvme_marks_hold(t, &h); /* its marks stay, for now */
		nvme_slot_mark_stale(t, slot, h.hash, true, header_tenant(&h));
	} else if (nvme_header_pending(t, &h)) {
		/* a drop answered while the tier was out covers it: left
		 * out as a marked one, its mark written after the scan
		 * (nvme_marks_add_pending()), above this generation */
		t->st.drop_marked_slots++;
		t->st.pending_dropped_slots++;
		nvme_slot_mark_stale(t, slot, h.hash, true, header_tenant(&h));
		if (h.generation >= t->next_generation)
			t->next_generation = h.generation + 1;
	} else {
		recover_one(t, slot, &h);
	}
	pthread_mutex_unlock(&t->lock);
	return 0;
}

/*
 * The scan failed with reads the kernel took and did not complete yet:
 * wait for them (at most NVME_DRAIN_MS), so that open's error path frees
 * header buffers nothing writes any more.  Not with io_uring_enter, which
 * is what failed: the completions land in the shared CQ (nvme_nap()).
 * Returns how many are left; then the buffers are leaked (hdr_bufs_busy).
 */
static unsigned int drain(struct tier_nvme *t, unsigned int pending)
{
	uint64_t start = nvme_now_ms();

	for (;;) {
		struct io_uring_cqe *cqe;
		unsigned int head, seen = 0;

		io_uring_for_each_cqe(&t->ring, head, cqe)
		{
			seen++;
		}
		io_uring_cq_advance(&t->ring, seen);
		pending -= seen < pending ? seen : pending;
		if (!pending || nvme_now_ms() - start >= NVME_DRAIN_MS)
			return pending;
		nvme_nap();
	}
}

/*
 * Read every slot header, queue_depth at a time, through the ring.
 * Reads complete in any order (one of a never-written slot at once, one
 * that goes to the disk later), so each takes a header buffer that no
 * read in flight uses and gives it back when it completes; its user data
 * names both.  A buffer picked by slot number could be one a read still
 * in flight fills: two headers in one buffer, a written slot parsed from
 * another slot's bytes (lost as never written, or counted as damaged).
 */
/*
 * The scan stops on err with `submitted - reaped` reads given to the ring:
 * those the kernel took still write their header buffers, so wait for
 * them, or keep the buffers (hdr_bufs_busy).  The SQEs it left in the SQ
 * (sq_ready) never run.
 */
static void scan_stop(struct tier_nvme *t, const struct nvme_scan *sc,
		      const char *what, int err, unsigned int unreaped)
{
	unsigned int pending = unreaped - io_uring_sq_ready(&t->ring);

	vmm_log(VMM_LOG_ERR,
		"tier_nvme: %s%s: restart scan: %s: %s (%u header reads in flight)",
		sc->path, sc->part, what, strerror(-err), pending);
	if (pending && drain(t, pending))
		t->hdr_bufs_busy = true;
}

int nvme_recover(struct tier_nvme *t, const char *path, const char *part,
		 uint32_t *cleared)
{
	struct nvme_scan sc = { .path = path, .part = part };
	uint32_t next = 0, done = 0, *free_bufs;
	unsigned int nfree = 0, busy_tries = 0;
	void *zero = NULL;
	int err = 0;

	*cleared = 0;
	free_bufs = malloc(t->qd * sizeof(*free_bufs));
	if (!free_bufs)
		return -ENOMEM;
	/* for stale headers past the last run's end, and unreadable ones */
	if (posix_memalign(&zero, NVME_ALIGN, NVME_ALIGN)) {
		free(free_bufs);
		return -ENOMEM;
	}
	memset(zero, 0, NVME_ALIGN);
	sc.zero = zero;
	while (nfree < t->qd) {
		free_bufs[nfree] = nfree;
		nfree++;
	}
	while (done < t->nslots && !err) {
		while (nfree && next < t->nslots) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&t->ring);
			uint32_t bi;
			unsigned char *buf;

			if (!sqe)
				break;
			bi = free_bufs[--nfree];
			buf = t->hdr_bufs + (size_t)bi * NVME_ALIGN;
			if (t->registered)
				io_uring_prep_read_fixed(
					sqe, nvme_sqe_fd(t), buf, NVME_ALIGN,
					nvme_slot_offset(t, next), 0);
			else
				io_uring_prep_read(sqe, nvme_sqe_fd(t), buf,
						   NVME_ALIGN,
						   nvme_slot_offset(t, next));
			nvme_sqe_file(t, sqe);
			io_uring_sqe_set_data64(sqe, (uint64_t)bi << 32 | next);
			next++;
		}
		int r = io_uring_submit_and_wait(&t->ring, 1);

		/* the kernel short of memory or of CQ room for now: reap
		 * what completed and try again, as the I/O engine does, for
		 * a second at most (it failed the open at once) */
		if ((r == -EAGAIN || r == -EBUSY) && busy_tries++ < 1000) {
			usleep(1000);
			r = -EINTR;
		} else if (r >= 0) {
			busy_tries = 0;
		}
		if (r < 0 && r != -EINTR) {
			scan_stop(t, &sc, "io_uring", r, next - done);
			err = r;
			break;
		}
		struct io_uring_cqe *cqe;
		unsigned int head, seen = 0;

		io_uring_for_each_cqe(&t->ring, head, cqe)
		{
			uint64_t data = io_uring_cqe_get_data64(cqe);
			uint32_t slot = (uint32_t)data, bi = data >> 32;

			seen++;
			done++;
			r = cqe->res;
			/* tests: KVMMD_TEST_NVME_SCAN_FAIL (tier_nvme_fault.c),
			 * the completion of a read the disk failed */
			if (nvme_fault_scan(t, slot))
				r = -EIO;
			r = recover_header(t, &sc, slot, r,
					   t->hdr_bufs +
						   (size_t)bi * NVME_ALIGN);
			if (r && !err)
				err = r;
			free_bufs[nfree++] = bi;
		}
		io_uring_cq_advance(&t->ring, seen);
		if (err)
			scan_stop(t, &sc, "clearing a stale slot header", err,
				  next - done);
	}
	/* cleared for good before the superblock counts those slots (or
	 * retires a mark); a sync that fails fails the open as a zeroing
	 * does (the superblock still says the last run's slots: the next
	 * open reads those headers again, zeros where the writes reached
	 * the disk, and clears again what they did not) */
	if (!err && (sc.cleared || sc.unread)) {
		/* tests: KVMMD_TEST_NVME_CLEAR_SYNC_FAIL (tier_nvme_fault.c),
		 * a sync the disk failed, the zeros written */
		err = t->faults.clear_sync ? -EIO : 0;
		if (!err && fdatasync(t->fd))
			err = -errno;
		if (err)
			vmm_log(VMM_LOG_ERR,
				"tier_nvme: %s%s: restart scan: syncing %u stale slot headers cleared past the last run's end and %u unreadable ones zeroed: %s; the open fails, the superblock still says %u slots",
				path, part, sc.cleared, sc.unread,
				strerror(-err), t->known_slots);
	}
	*cleared = sc.cleared;
	free(zero);
	free(free_bufs);
	return err;
}

uint32_t nvme_count_past_end(struct tier_nvme *t, uint32_t old_slots)
{
	struct tier_nvme_slot_header h;
	uint32_t lost = 0;
	void *buf;

	if (posix_memalign(&buf, NVME_ALIGN, NVME_ALIGN))
		return 0;
	for (uint32_t slot = t->nslots; slot < old_slots; slot++) {
		if (pread(t->fd, buf, NVME_ALIGN,
			  (off_t)nvme_slot_offset(t, slot)) != NVME_ALIGN)
			break; /* a file cut before, or an unwritten tail */
		memcpy(&h, buf, sizeof(h));
		if (!nvme_header_valid(t, &h, slot))
			continue;
		pthread_mutex_lock(&t->lock);
		lost += nvme_idx_find(t, h.hash) == NVME_NONE &&
			!nvme_header_marked(t, &h) &&
			!nvme_header_pending(t, &h);
		pthread_mutex_unlock(&t->lock);
	}
	free(buf);
	return lost;
}

#endif /* HAVE_LIBURING */
