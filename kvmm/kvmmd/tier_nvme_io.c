// SPDX-License-Identifier: MIT
/*
 * NVMe tier batch engine: the io_uring side of tier_nvme_write_batch() and
 * tier_nvme_read_batch().
 *
 * The engine keeps up to queue_depth I/Os in flight across the blocks of
 * a batch.  Each block in progress owns one 4 KiB header buffer
 * (registered, fixed buffer 0), so at most queue_depth blocks are in
 * progress; its payload goes in I/Os of at most io_bytes straight from or
 * into the caller's memory (fixed buffers 1.. when it lies in the
 * registered region, cut at the 1 GiB registration boundaries).  The
 * payload CRC of a write is computed before its I/Os are queued; the CRC
 * of a read is checked when its last I/O completes, while the other
 * blocks' I/Os are in flight.  One batch at a time (t->io_lock).
 */
#include "tier_nvme_priv.h"

#include "crc32c.h"
#include "vmm/vmm.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#if HAVE_LIBURING

#define NVME_HDR_FLAG 0x8000u /* user_data: this I/O is a separate header */

struct nvme_active {
	int io; /* index in the batch, -1 when unused */
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
	t->st.sqes++;
}

/* Set up block io of the batch in active slot ai. */
static void start_block(struct tier_nvme *t, struct nvme_active *a,
			unsigned int ai, int idx, struct tier_nvme_io *io,
			uint64_t generation, bool write)
{
	*a = (struct nvme_active){ .io = idx, .slot = io->slot };
	if (io->headroom) {
		a->mem = (unsigned char *)io->buf - TIER_NVME_HEADER_BYTES;
		a->disk_off = nvme_slot_offset(t, io->slot);
		a->total = TIER_NVME_HEADER_BYTES + io->length;
		a->hdr_issued = a->hdr_done = true; /* part of the extent */
	} else {
		a->mem = io->buf;
		a->disk_off =
			nvme_slot_offset(t, io->slot) + TIER_NVME_HEADER_BYTES;
		a->total = io->length;
		a->sep_hdr = true;
	}
	if (!write)
		return;

	uint32_t crc = nvme_header_fill(t, hdr_mem(t, a, ai), io, generation);

	/* remembered so reads can be checked against what was written */
	pthread_mutex_lock(&t->lock);
	t->slots[io->slot].payload_crc = crc;
	pthread_mutex_unlock(&t->lock);
}

static bool block_complete(const struct nvme_active *a)
{
	if (a->outstanding)
		return false;
	if (a->err)
		return true;
	return a->hdr_done && a->done == a->total;
}

/* A block's I/Os all completed: publish a write, verify a read. */
static void finish_block(struct tier_nvme *t, struct nvme_active *a,
			 const struct tier_nvme_slot_header *hdr,
			 struct tier_nvme_io *io, bool write)
{
	struct nvme_slot *s = &t->slots[a->slot];

	if (write) {
		pthread_mutex_lock(&t->lock);
		if (a->err) {
			t->st.write_errors++;
			nvme_slot_release(t, a->slot);
		} else {
			s->state = TIER_SLOT_READY;
			t->st.ready_slots++;
			t->st.writes++;
			t->st.bytes_written += io->length;
		}
		pthread_mutex_unlock(&t->lock);
		io->result = a->err;
		return;
	}

	struct tier_nvme_slot_header h;
	bool bad_crc = false, bad_hdr = false;

	memcpy(&h, hdr, sizeof(h));
	if (!a->err) {
		/* s's identity does not change while readers > 0 */
		if (!nvme_header_valid(t, &h, a->slot) || h.hash != s->hash ||
		    h.generation != s->generation || h.length != s->length)
			bad_hdr = true;
		else if (h.payload_crc != s->payload_crc ||
			 tier_crc32c(0, io->buf, h.length) != h.payload_crc)
			bad_crc = true;
	}
	pthread_mutex_lock(&t->lock);
	s->readers--;
	if (a->err) {
		t->st.read_errors++;
		io->result = a->err;
	} else if (bad_hdr || bad_crc) {
		if (bad_crc)
			t->st.checksum_failures++;
		else
			t->st.header_failures++;
		s->bad = true;
		io->result = -EBADMSG;
		vmm_log(VMM_LOG_WARN,
			"tier_nvme: slot %u (hash %016llx) failed its %s check; dropped",
			a->slot, (unsigned long long)s->hash,
			bad_crc ? "payload CRC32C" : "header");
	} else {
		t->st.reads++;
		t->st.bytes_read += h.length;
		io->layout_id = h.layout_id;
		io->result = 0;
	}
	if (s->bad && s->readers == 0)
		nvme_slot_release(t, a->slot);
	pthread_mutex_unlock(&t->lock);
}

/* The ring failed: fail every block still in the batch so no slot stays
 * FILLING or read-pinned.  Buffers of I/Os the kernel may still complete
 * are the caller's and outlive the ring's teardown. */
static void abort_batch(struct tier_nvme *t, struct nvme_active *act,
			struct tier_nvme_io *ios, unsigned int n,
			const bool *pending, unsigned int next, int err,
			bool write)
{
	for (unsigned int i = 0; i < t->qd; i++) {
		if (act[i].io < 0)
			continue;
		struct tier_nvme_slot_header h = { 0 };

		act[i].err = err;
		act[i].outstanding = 0;
		finish_block(t, &act[i], &h, &ios[act[i].io], write);
		act[i].io = -1;
	}
	pthread_mutex_lock(&t->lock);
	for (; next < n; next++) {
		if (!pending[next])
			continue;
		ios[next].result = err;
		if (write) {
			nvme_slot_release(t, ios[next].slot);
		} else if (--t->slots[ios[next].slot].readers == 0 &&
			   t->slots[ios[next].slot].bad) {
			nvme_slot_release(t, ios[next].slot);
		}
	}
	pthread_mutex_unlock(&t->lock);
}

struct batch {
	struct tier_nvme *t;
	struct tier_nvme_io *ios;
	unsigned int n;
	const bool *pending;
	const uint64_t *generations;
	bool write;
	struct nvme_active *act; /* qd entries */
	unsigned int next, inflight, active, unsubmitted;
};

/* Queue as many I/Os as the depth allows, starting blocks as needed. */
static void fill_queue(struct batch *bt)
{
	struct tier_nvme *t = bt->t;

	while (bt->inflight < t->qd) {
		int pick = -1;

		for (unsigned int i = 0; i < t->qd; i++) {
			if (bt->act[i].io >= 0 && has_more(&bt->act[i])) {
				pick = (int)i;
				break;
			}
		}
		if (pick < 0) {
			unsigned int free_a = 0;

			while (bt->next < bt->n && !bt->pending[bt->next])
				bt->next++;
			if (bt->next >= bt->n || bt->active == t->qd)
				break;
			while (bt->act[free_a].io >= 0)
				free_a++;
			/* let the kernel start on what is queued while
			 * this block's CRC is computed */
			if (bt->unsubmitted && bt->write) {
				int r = io_uring_submit(&t->ring);

				t->st.submits++;
				if (r > 0)
					bt->unsubmitted -= (unsigned int)r;
			}
			start_block(
				t, &bt->act[free_a], free_a, (int)bt->next,
				&bt->ios[bt->next],
				bt->generations ? bt->generations[bt->next] : 0,
				bt->write);
			bt->active++;
			bt->next++;
			continue;
		}
		struct io_uring_sqe *sqe = io_uring_get_sqe(&t->ring);

		if (!sqe)
			break;
		bool hdr_op = bt->act[pick].sep_hdr &&
			      !bt->act[pick].hdr_issued;
		queue_op(t, sqe, &bt->act[pick], (unsigned int)pick, bt->write);
		if (!hdr_op)
			bt->inflight++;
		bt->unsubmitted++;
	}
}

/*
 * Run the I/O of every io whose pending[i] is set; generations[i] is what
 * a write stamps.  Up to queue_depth payload I/Os are in flight (the
 * same depth fio would use); a block without headroom adds its 4 KiB
 * header I/O on top.  Completed blocks leave the window before their CRC
 * is checked, so the next I/Os are already queued while the CPU works.
 */
static void run_batch(struct tier_nvme *t, struct tier_nvme_io *ios,
		      unsigned int n, const bool *pending,
		      const uint64_t *generations, bool write)
{
	struct nvme_active act[t->qd], done[t->qd];
	struct tier_nvme_slot_header hdrs[t->qd];
	struct batch bt = { .t = t,
			    .ios = ios,
			    .n = n,
			    .pending = pending,
			    .generations = generations,
			    .write = write,
			    .act = act };

	for (unsigned int i = 0; i < t->qd; i++)
		act[i].io = -1;
	for (;;) {
		fill_queue(&bt);
		if (!bt.unsubmitted && !bt.inflight && bt.active == 0)
			break;
		int r = io_uring_submit_and_wait(&t->ring, 1);

		t->st.submits++;
		if (r >= 0) {
			bt.unsubmitted = 0;
		} else if (r != -EINTR && r != -EAGAIN && r != -EBUSY) {
			vmm_log(VMM_LOG_ERR, "tier_nvme: io_uring_submit: %s",
				strerror(-r));
			abort_batch(t, act, ios, n, pending, bt.next, r, write);
			return;
		}

		struct io_uring_cqe *cqe;
		unsigned int head, seen = 0, ndone = 0;

		io_uring_for_each_cqe(&t->ring, head, cqe)
		{
			uint64_t ud = io_uring_cqe_get_data64(cqe);
			unsigned int ai = ud & 0x7fff;
			bool hdr = ud & NVME_HDR_FLAG;
			int64_t want = (int64_t)(ud >> 16);
			struct nvme_active *a = &act[ai];

			seen++;
			if (!hdr)
				bt.inflight--;
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
		/* completed blocks leave the window (headers copied out) */
		for (unsigned int i = 0; i < t->qd; i++) {
			struct nvme_active *a = &act[i];

			if (a->io < 0 || !block_complete(a))
				continue;
			memcpy(&hdrs[ndone], hdr_mem(t, a, i), sizeof(hdrs[0]));
			done[ndone++] = *a;
			a->io = -1;
			bt.active--;
		}
		if (ndone && bt.next < n) {
			fill_queue(&bt);
			if (bt.unsubmitted) {
				int s2 = io_uring_submit(&t->ring);

				t->st.submits++;
				if (s2 > 0)
					bt.unsubmitted -= (unsigned int)s2;
			}
		}
		for (unsigned int k = 0; k < ndone; k++)
			finish_block(t, &done[k], &hdrs[k], &ios[done[k].io],
				     write);
	}
}

int tier_nvme_write_batch(struct tier_nvme *t, struct tier_nvme_io *ios,
			  unsigned int n)
{
	bool *pending;
	uint64_t *gens;
	int failed = 0;

	if (n == 0)
		return 0;
	pending = calloc(n, sizeof(*pending));
	gens = calloc(n, sizeof(*gens));
	if (!pending || !gens) {
		free(pending);
		free(gens);
		for (unsigned int i = 0; i < n; i++)
			ios[i].result = -ENOMEM;
		return (int)n;
	}
	pthread_mutex_lock(&t->io_lock);
	pthread_mutex_lock(&t->lock);
	for (unsigned int i = 0; i < n; i++) {
		struct tier_nvme_io *io = &ios[i];
		uint32_t slot = nvme_idx_find(t, io->hash);

		if (!io->buf || (uintptr_t)io->buf % NVME_ALIGN ||
		    io->length == 0 || io->length % NVME_ALIGN ||
		    io->length > t->payload_bytes) {
			io->result = -EINVAL;
			continue;
		}
		if (slot != NVME_NONE) {
			io->slot = slot;
			if (t->slots[slot].state == TIER_SLOT_READY &&
			    !t->slots[slot].bad) {
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
			.generation = t->next_generation++,
			.layout_id = io->layout_id,
		};
		nvme_idx_insert(t, io->slot);
		gens[i] = t->slots[io->slot].generation;
		pending[i] = true;
	}
	pthread_mutex_unlock(&t->lock);
	run_batch(t, ios, n, pending, gens, true);
	pthread_mutex_unlock(&t->io_lock);
	for (unsigned int i = 0; i < n; i++)
		if (ios[i].result)
			failed++;
	free(pending);
	free(gens);
	return failed;
}

int tier_nvme_read_batch(struct tier_nvme *t, struct tier_nvme_io *ios,
			 unsigned int n)
{
	bool *pending;
	int failed = 0;

	if (n == 0)
		return 0;
	pending = calloc(n, sizeof(*pending));
	if (!pending) {
		for (unsigned int i = 0; i < n; i++)
			ios[i].result = -ENOMEM;
		return (int)n;
	}
	pthread_mutex_lock(&t->io_lock);
	pthread_mutex_lock(&t->lock);
	for (unsigned int i = 0; i < n; i++) {
		struct tier_nvme_io *io = &ios[i];
		struct nvme_slot *s;

		if (io->slot >= t->nslots) {
			io->result = -EINVAL;
			continue;
		}
		s = &t->slots[io->slot];
		if (s->state != TIER_SLOT_READY || s->bad ||
		    s->hash != io->hash) {
			io->result = -ENOENT;
			continue;
		}
		if (!io->buf || (uintptr_t)io->buf % NVME_ALIGN) {
			io->result = -EINVAL;
			continue;
		}
		io->length = s->length;
		s->readers++;
		pending[i] = true;
	}
	pthread_mutex_unlock(&t->lock);
	run_batch(t, ios, n, pending, NULL, false);
	pthread_mutex_unlock(&t->io_lock);
	for (unsigned int i = 0; i < n; i++)
		if (ios[i].result)
			failed++;
	free(pending);
	return failed;
}

#endif /* HAVE_LIBURING */
