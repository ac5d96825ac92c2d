// SPDX-License-Identifier: MIT
/*
 * NVMe tier batch engine: the io_uring side of tier_nvme_write_batch() and
 * tier_nvme_read_batch().  The calls themselves, what they check and take
 * before the I/O and what a finished block does to its slot, are in
 * tier_nvme_batch.c.
 *
 * One queue for the whole tier.  Every batch in progress, from any thread
 * (kvmmd's migration engine runs two workers), adds its blocks to
 * t->batches, and up to queue_depth payload I/Os are in flight across all
 * of them, blocks starting in the order their batches came.  A completion
 * frees a place that the next block, of this batch or of the next one,
 * takes at once: the queue does not drain at batch boundaries.
 *
 * Each block in progress owns one entry of t->act and, when it has no
 * headroom, that entry's 4 KiB header buffer (registered, fixed buffer 0);
 * its payload goes in I/Os of at most io_bytes straight from or into the
 * caller's memory (fixed buffers 1.. when it lies in the registered
 * region, cut at the 1 GiB registration boundaries).
 *
 * The CPU work is done by the thread that owns the batch, outside io_lock,
 * while the device works on what is queued:
 *   - a write's payload CRC32C is computed up to queue_depth blocks ahead
 *     of its I/O (a block starts only once its CRC is known);
 *   - a read's header and payload CRC are checked once the block left the
 *     queue (its place already refilled); only then is it counted as read
 *     and its result 0, so nothing is served unverified.
 * The ring belongs to the tier's own thread (io_thread), which does
 * nothing else: it submits and waits for completions in one call, without
 * io_lock (callers queue blocks meanwhile and wake it through an eventfd
 * it polls), hands completed blocks to their batches and refills the
 * queue at once.  Using little CPU, it is woken promptly even on a busy
 * machine, where a thread that also spent its time on checksums would wait
 * for a core while the disk's queue ran dry; and as the only submitter it
 * gets every completion directly (io_uring posts a read's completion from
 * the submitting task).
 */
#include "tier_nvme_priv.h"

#include "crc32c.h"
#include "vmm/vmm.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>

#if HAVE_LIBURING

#define NVME_HDR_FLAG 0x8000u /* user_data: this I/O is a separate header */
#define NVME_WAKE_UD 0x7fffull /* user_data: the poll on wake_fd */

/* A block in progress (t->act[i], io_lock). */
struct nvme_active {
	struct nvme_batch *b; /* NULL when the entry is unused */
	unsigned int io; /* index in b */
	uint32_t slot;
	unsigned char *mem; /* where the extent starts in memory */
	uint64_t disk_off; /* where it starts on disk */
	uint64_t total; /* extent bytes: header (when in line) + payload */
	uint64_t issued; /* extent bytes queued */
	uint64_t done; /* extent bytes completed */
	bool sep_hdr; /* header moves in its own I/O (no headroom) */
	bool hdr_issued;
	bool hdr_done;
	unsigned int outstanding;
	int err;
};

int nvme_engine_init(struct tier_nvme *t)
{
	t->wake_fd = -1;
	t->act = calloc(t->qd, sizeof(*t->act));
	return t->act ? 0 : -ENOMEM;
}

/* The first io at or after i that takes part in the batch. */
static unsigned int skip_idle(const struct nvme_batch *b, unsigned int i)
{
	while (i < b->n && !b->pending[i])
		i++;
	return i;
}

/* The header of a block: in its headroom, or in its own buffer. */
static unsigned char *hdr_mem(struct tier_nvme *t, struct nvme_active *a,
			      unsigned int ai)
{
	return a->sep_hdr ? t->hdr_bufs + (size_t)ai * NVME_ALIGN : a->mem;
}

static bool has_more(const struct nvme_active *a)
{
	return !a->err &&
	       ((a->sep_hdr && !a->hdr_issued) || a->issued < a->total);
}

/* Queue the next I/O of a block: a separate header first, then the
 * extent in pieces of at most io_bytes. */
static void queue_op(struct tier_nvme *t, struct io_uring_sqe *sqe,
		     struct nvme_active *a, unsigned int ai, bool write)
{
	uint64_t off;
	unsigned char *buf;
	size_t len;
	int fixed = -1;
	uint64_t ud;

	if (a->sep_hdr && !a->hdr_issued) {
		buf = t->hdr_bufs + (size_t)ai * NVME_ALIGN;
		len = NVME_ALIGN;
		off = nvme_slot_offset(t, a->slot);
		if (t->registered)
			fixed = 0;
		a->hdr_issued = true;
		ud = ai | NVME_HDR_FLAG | ((uint64_t)len << 16);
	} else {
		buf = a->mem + a->issued;
		len = a->total - a->issued;
		if (len > t->io_bytes + (a->sep_hdr ? 0 : NVME_ALIGN))
			len = t->io_bytes;
		off = a->disk_off + a->issued;
		if (t->registered && buf >= t->reg_base &&
		    buf + len <= t->reg_base + t->reg_len) {
			size_t roff = (size_t)(buf - t->reg_base);
			size_t chunk_end =
				(roff / NVME_REG_CHUNK + 1) * NVME_REG_CHUNK;

			if (roff + len > chunk_end)
				len = chunk_end - roff;
			fixed = 1 + (int)(roff / NVME_REG_CHUNK);
		}
		a->issued += len;
		ud = ai | ((uint64_t)len << 16);
	}
	if (write) {
		if (fixed >= 0)
			io_uring_prep_write_fixed(sqe, nvme_sqe_fd(t), buf,
						  (unsigned)len, off, fixed);
		else
			io_uring_prep_write(sqe, nvme_sqe_fd(t), buf,
					    (unsigned)len, off);
	} else {
		if (fixed >= 0)
			io_uring_prep_read_fixed(sqe, nvme_sqe_fd(t), buf,
						 (unsigned)len, off, fixed);
		else
			io_uring_prep_read(sqe, nvme_sqe_fd(t), buf,
					   (unsigned)len, off);
	}
	nvme_sqe_file(t, sqe);
	io_uring_sqe_set_data64(sqe, ud);
	a->outstanding++;
	nvme_count(&t->io_sqes);
}

/* Start io idx of b in the free entry ai (a write's CRC is known). */
static void start_block(struct tier_nvme *t, unsigned int ai,
			struct nvme_batch *b, unsigned int idx)
{
	struct nvme_active *a = &t->act[ai];
	struct tier_nvme_io *io = &b->ios[idx];

	*a = (struct nvme_active){ .b = b, .io = idx, .slot = io->slot };
	if (io->headroom) {
		a->mem = (unsigned char *)io->buf - TIER_NVME_HEADER_BYTES;
		a->disk_off = nvme_slot_offset(t, io->slot);
		a->total = TIER_NVME_HEADER_BYTES + io->length;
		a->hdr_issued = a->hdr_done = true; /* part of the extent */
	} else {
		a->mem = io->buf;
		a->disk_off =
			nvme_slot_offset(t, io->slot) + TIER_NVME_HEADER_BYTES;
		/* a restamp's length is its header's: no payload moves */
		a->total = b->restamp ? 0 : io->length;
		a->sep_hdr = true;
	}
	if (b->invalidate)
		memset(hdr_mem(t, a, ai), 0, NVME_ALIGN);
	else if (b->write)
		/* a restamp of a block whose tenant is not known (a header
		 * from before the tenants) keeps it unknown: every tenant's
		 * mark covers it, as before */
		nvme_header_fill(t, hdr_mem(t, a, ai), io, b->gens[idx],
				 b->crcs[idx],
				 !b->restamp || io->tenant != TIER_NVME_NOBODY);
	t->active++;
}

static void unlink_batch(struct tier_nvme *t, struct nvme_batch *b)
{
	struct nvme_batch **p = &t->batches;

	while (*p && *p != b)
		p = &(*p)->link;
	if (*p)
		*p = b->link;
	b->link = NULL;
}

/* The oldest batch with a block that may start, or NULL. */
static struct nvme_batch *startable(struct tier_nvme *t)
{
	for (struct nvme_batch *b = t->batches; b; b = b->link)
		if (b->next < b->prepared)
			return b;
	return NULL;
}

/*
 * Queue the next I/O if the depth allows, starting a block as needed.
 * Returns whether it queued one.  One at a time: io_thread submits each
 * in its own io_uring_enter (see there).
 */
static bool queue_one(struct tier_nvme *t)
{
	while (!t->ring_err && t->inflight < t->qd) {
		int pick = -1;

		for (unsigned int i = 0; i < t->qd; i++) {
			if (t->act[i].b && has_more(&t->act[i])) {
				pick = (int)i;
				break;
			}
		}
		if (pick < 0) {
			struct nvme_batch *b;
			unsigned int ai = 0;

			if (t->active == t->qd)
				return false;
			b = startable(t);
			if (!b)
				return false;
			while (t->act[ai].b)
				ai++;
			start_block(t, ai, b, b->next);
			b->next = skip_idle(b, b->next + 1);
			if (b->next >= b->n)
				unlink_batch(t, b);
			continue;
		}
		struct nvme_active *a = &t->act[pick];
		struct io_uring_sqe *sqe = io_uring_get_sqe(&t->ring);

		if (!sqe)
			return false;
		bool hdr_op = a->sep_hdr && !a->hdr_issued;

		queue_op(t, sqe, a, (unsigned int)pick, a->b->write);
		if (!hdr_op)
			t->inflight++;
		t->queued++;
		t->unsubmitted++;
		return true;
	}
	return false;
}

static void fail_all(struct tier_nvme *t, int err);

/* The ring's answer to io_uring_enter: r SQEs of n taken, or an error. */
static void submitted(struct tier_nvme *t, int r, unsigned int n)
{
	nvme_count(&t->io_submits); /* io_uring_enter calls */
	if (r > 0)
		t->unsubmitted -= (unsigned int)r < n ? (unsigned int)r : n;
	if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY && r != -ETIME)
		fail_all(t, r);
}

/* Hand completed io idx (I/O result err) to its batch's owner. */
static void hand_over(struct nvme_batch *b, unsigned int idx, int err)
{
	b->errs[idx] = err;
	b->ready[b->ready_tail++] = idx;
	if (b->sleeping)
		pthread_cond_signal(&b->done);
}

/* A block's I/Os are over: hand it to its batch's owner. */
static void complete_block(struct tier_nvme *t, unsigned int ai)
{
	struct nvme_active *a = &t->act[ai];
	struct nvme_batch *b = a->b;

	if (!b->write && !a->err)
		memcpy(&b->hdrs[a->io], hdr_mem(t, a, ai), sizeof(b->hdrs[0]));
	hand_over(b, a->io, a->err);
	a->b = NULL;
	t->active--;
}

static bool block_complete(const struct nvme_active *a)
{
	if (a->outstanding)
		return false;
	if (a->err)
		return true;
	return a->hdr_done && a->done == a->total;
}

/*
 * The ring failed: forget the SQEs the kernel has not taken (nothing
 * submits them any more), so no block waits for them.  The kernel's head
 * says which are left: positions [khead, sqe_tail) of the SQ, whose SQE
 * is sqes[position & mask] (liburing maps SQ array entry i to SQE i, and
 * the tier does not use 128-byte SQEs).
 */
static void drop_untaken(struct tier_nvme *t)
{
	struct io_uring_sq *sq = &t->ring.sq;

	for (unsigned int pos = io_uring_smp_load_acquire(sq->khead);
	     pos != sq->sqe_tail; pos++) {
		uint64_t ud = sq->sqes[pos & sq->ring_mask].user_data;
		struct nvme_active *a;

		if (ud == NVME_WAKE_UD) {
			t->wake_armed = false;
			continue;
		}
		a = &t->act[ud & 0x7fff];
		if (!(ud & NVME_HDR_FLAG))
			t->inflight--;
		t->queued--;
		a->outstanding--;
	}
	t->unsubmitted = 0;
}

/*
 * The ring failed: fail every block in progress and every block not yet
 * started, of every batch, so no slot stays FILLING or read-pinned, and
 * every later batch.  A block goes back to its caller only when no I/O
 * of it is left in the kernel: the I/Os the ring took still complete,
 * into the caller's buffer (which the caller reuses as soon as it has
 * the block back: kvmmd frees a failed restore's staging host slot at
 * once) and into the tier's header buffers.  io_thread reaps those
 * completions (drain()), the others fail now.
 */
static void fail_all(struct tier_nvme *t, int err)
{
	vmm_log(VMM_LOG_ERR, "tier_nvme: io_uring: %s", strerror(-err));
	t->ring_err = err;
	drop_untaken(t);
	for (unsigned int i = 0; i < t->qd; i++) {
		if (!t->act[i].b)
			continue;
		if (!t->act[i].err)
			t->act[i].err = err;
		if (!t->act[i].outstanding)
			complete_block(t, i);
	}
	while (t->batches) {
		struct nvme_batch *b = t->batches;

		for (unsigned int i = b->next; i < b->n;
		     i = skip_idle(b, i + 1))
			hand_over(b, i, err);
		b->next = b->n;
		unlink_batch(t, b);
	}
	if (t->queued) {
		t->drain_start_ms = nvme_now_ms();
		vmm_log(VMM_LOG_WARN,
			"tier_nvme: waiting for the %u I/Os the ring took before their blocks fail",
			t->queued);
	}
}

/* Take the completions in the CQ; completed blocks go to their batches. */
static void reap(struct tier_nvme *t)
{
	struct io_uring_cqe *cqe;
	unsigned int head, seen = 0;

	io_uring_for_each_cqe(&t->ring, head, cqe)
	{
		uint64_t ud = io_uring_cqe_get_data64(cqe);
		bool hdr = ud & NVME_HDR_FLAG;
		int64_t want = (int64_t)(ud >> 16);
		struct nvme_active *a;

		seen++;
		if (ud == NVME_WAKE_UD) {
			uint64_t v;

			t->wake_armed = false;
			(void)!read(t->wake_fd, &v, sizeof(v));
			continue;
		}
		a = &t->act[ud & 0x7fff];
		if (!a->b)
			continue; /* none: a block waits for all its I/Os */
		if (!hdr)
			t->inflight--;
		t->queued--;
		a->outstanding--;
		if (cqe->res != want) {
			if (!a->err)
				a->err = cqe->res < 0 ? cqe->res : -EIO;
		} else if (hdr) {
			a->hdr_done = true;
		} else {
			a->done += (uint64_t)want;
		}
	}
	io_uring_cq_advance(&t->ring, seen);
	for (unsigned int i = 0; i < t->qd; i++)
		if (t->act[i].b && block_complete(&t->act[i]))
			complete_block(t, i);
}

/* Arm a poll on wake_fd, so that a caller's kick() ends the thread's wait
 * in the kernel (io_lock held). */
static void arm_wake(struct tier_nvme *t)
{
	struct io_uring_sqe *sqe;

	if (t->wake_armed || t->wake_fd < 0)
		return;
	sqe = io_uring_get_sqe(&t->ring);
	if (!sqe)
		return;
	io_uring_prep_poll_add(sqe, t->wake_fd, POLLIN);
	io_uring_sqe_set_data64(sqe, NVME_WAKE_UD);
	t->wake_armed = true;
	t->unsubmitted++;
}

/*
 * Callers (io_lock held): blocks may start.  Only the completion thread
 * submits, so that every completion is posted in its context (io_uring
 * completes a read through task work of the task that submitted it: a
 * caller busy with checksums, or asleep, would delay it).  Wake the thread
 * from its condition variable, or from its wait in the kernel.
 */
static void kick(struct tier_nvme *t)
{
	if (t->io_sleeping) {
		pthread_cond_signal(&t->io_wake);
	} else if (t->io_in_kernel && !t->kicked && t->wake_fd >= 0) {
		uint64_t one = 1;

		t->kicked = true;
		(void)!write(t->wake_fd, &one, sizeof(one));
	}
	/* else the thread is between waits and fills the queue next */
}

static uint64_t nvme_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t nvme_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void nvme_nap(void)
{
	struct timespec ts = { .tv_nsec = 1000000 };

	nanosleep(&ts, NULL);
}

/*
 * After a ring failure (io_lock held): wait a moment for the I/Os the
 * ring took, and reap them.  Not with io_uring_enter, which is what
 * failed: the CQ is in shared memory, and a completion is posted by task
 * work the kernel runs on this thread's way back from the nap (the same
 * way as for any other system call).  Their blocks' callers wait as they
 * would for a slow I/O, without a bound: their buffers are not theirs
 * until the kernel is done (the block layer times out a stuck request by
 * itself).  Only a tier that is closing (no caller left) gives up after
 * NVME_DRAIN_MS; tier_nvme_close() then leaks the header buffers.
 * Returns false when io_thread should stop.
 */
static bool drain(struct tier_nvme *t)
{
	uint64_t waited;

	pthread_mutex_unlock(&t->io_lock);
	nvme_nap();
	pthread_mutex_lock(&t->io_lock);
	reap(t);
	if (!t->queued)
		return true;
	waited = nvme_now_ms() - t->drain_start_ms;
	if (waited < NVME_DRAIN_MS)
		return true;
	if (!t->drain_warned) {
		t->drain_warned = true;
		vmm_log(VMM_LOG_WARN,
			"tier_nvme: %u I/Os the failed ring took still not completed after %llu ms",
			t->queued, (unsigned long long)waited);
	}
	return !t->io_stop;
}

/*
 * The completion thread, the only one that touches the ring after open:
 * queue what may start, submit it, wait for a completion (without
 * io_lock: callers queue and check meanwhile), reap, repeat; sleep on
 * io_wake when nothing is in flight.
 *
 * Each I/O goes to the kernel in its own io_uring_enter, as fio's do
 * (iodepth_batch_submit=1), the last one together with the wait.  Three
 * or more SQEs in one call are submitted under a block plug, and slots
 * that lie next to each other on disk (the blocks of a batch, refilled
 * together when their completions arrive together) then merge into one
 * request of up to max_sectors_kb: measured on the virtio disk here, the
 * queue of 8 I/Os went to the disk as about one 2 MiB request (7.9 I/Os
 * per request, busy depth 1.0) where fio's went as 8 (1.0, depth 7.8),
 * and every later refill came as a burst again.  One I/O per call costs
 * about one io_uring_enter per block instead of 0.13-0.44.
 */
static void *io_thread(void *arg)
{
	struct tier_nvme *t = arg;

	pthread_mutex_lock(&t->io_lock);
	for (;;) {
		bool more = queue_one(t);

		if (more && !t->ring_err && t->inflight < t->qd) {
			unsigned int n = t->unsubmitted;
			int r;

			/* room for another: submit this one alone first */
			pthread_mutex_unlock(&t->io_lock);
			r = io_uring_submit(&t->ring);
			pthread_mutex_lock(&t->io_lock);
			submitted(t, r, n);
			continue;
		}
		if (!t->ring_err && (t->queued || t->unsubmitted)) {
			uint64_t start, waited;
			unsigned int n;
			bool full;
			int r;

			arm_wake(t);
			n = t->unsubmitted;
			/* the wait's time: see tier_nvme_stats.ring_wait_ns */
			full = t->inflight >= t->qd;
			t->io_in_kernel = true;
			t->kicked = false;
			pthread_mutex_unlock(&t->io_lock);
			start = nvme_now_ns();
			r = io_uring_submit_and_wait(&t->ring, 1);
			waited = nvme_now_ns() - start;
			pthread_mutex_lock(&t->io_lock);
			t->io_in_kernel = false;
			nvme_count_add(&t->io_wait_ns, waited);
			if (full)
				nvme_count_add(&t->io_wait_full_ns, waited);
			submitted(t, r, n);
			reap(t);
			continue;
		}
		if (t->ring_err && t->queued) {
			if (!drain(t))
				break;
			continue;
		}
		if (t->io_stop)
			break;
		t->io_sleeping = true;
		pthread_cond_wait(&t->io_wake, &t->io_lock);
		t->io_sleeping = false;
	}
	pthread_mutex_unlock(&t->io_lock);
	return NULL;
}

int nvme_engine_start(struct tier_nvme *t)
{
	int r;

	/* without it a caller's new blocks wait for the next completion */
	t->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	r = pthread_create(&t->io_thread, NULL, io_thread, t);
	if (r) {
		if (t->wake_fd >= 0)
			close(t->wake_fd);
		t->wake_fd = -1;
		return -r;
	}
	t->io_started = true;
	return 0;
}

/* Stops the thread once nothing is in flight (no batch may be in progress
 * when the tier closes). */
void nvme_engine_fini(struct tier_nvme *t)
{
	if (t->io_started) {
		pthread_mutex_lock(&t->io_lock);
		t->io_stop = true;
		pthread_cond_signal(&t->io_wake);
		pthread_mutex_unlock(&t->io_lock);
		pthread_join(t->io_thread, NULL);
		t->io_started = false;
		/* only after a ring failure, and NVME_DRAIN_MS (drain()) */
		if (t->queued)
			t->hdr_bufs_busy = true;
		if (t->wake_fd >= 0)
			close(t->wake_fd);
		t->wake_fd = -1;
	}
	free(t->act);
	t->act = NULL;
}

/*
 * Run the I/O of every pending io of b, sharing the queue with the other
 * batches in progress: up to queue_depth payload I/Os in flight (the same
 * depth fio would use; a block without headroom adds its 4 KiB header I/O
 * on top).  Returns when every pending io is finished.
 */
void nvme_run_batch(struct tier_nvme *t, struct nvme_batch *b)
{
	pthread_mutex_lock(&t->io_lock);
	for (unsigned int i = 0; i < b->n; i++)
		b->left += b->pending[i];
	b->next = skip_idle(b, 0);
	b->prepared = b->write && !b->invalidate && !b->restamp ? b->next :
								  b->n;
	if (t->ring_err) {
		for (unsigned int i = b->next; i < b->n;
		     i = skip_idle(b, i + 1))
			hand_over(b, i, t->ring_err);
		b->next = b->n;
	} else if (b->next < b->n) {
		struct nvme_batch **p = &t->batches;

		while (*p)
			p = &(*p)->link;
		*p = b;
		if (t->inflight < t->qd)
			kick(t);
	}
	for (;;) {
		if (b->ready_head < b->ready_tail) {
			unsigned int from = b->ready_head, to = b->ready_tail;
			bool ring_failed = t->ring_err != 0;

			b->ready_head = to;
			pthread_mutex_unlock(&t->io_lock);
			for (unsigned int k = from; k < to; k++)
				nvme_finish_block(t, b, b->ready[k],
						  ring_failed);
			pthread_mutex_lock(&t->io_lock);
			b->left -= to - from;
			continue;
		}
		if (!b->left)
			break;
		/* a write's CRC, while the queued I/Os run */
		if (b->next < b->n && b->prepared < b->n &&
		    b->prepared < b->next + t->qd) {
			unsigned int i = b->prepared;
			struct tier_nvme_io *io = &b->ios[i];

			pthread_mutex_unlock(&t->io_lock);
			b->crcs[i] = tier_crc32c(0, io->buf, io->length);
			pthread_mutex_lock(&t->io_lock);
			b->prepared = skip_idle(b, i + 1);
			if (t->inflight < t->qd)
				kick(t);
			continue;
		}
		b->sleeping = true;
		pthread_cond_wait(&b->done, &t->io_lock);
		b->sleeping = false;
	}
	pthread_mutex_unlock(&t->io_lock);
}

#endif /* HAVE_LIBURING */
