// SPDX-License-Identifier: MIT
/*
 * NVMe tier: slot allocation, the hash index, the io_uring batch engine and
 * restart recovery.  See tier_nvme.h for the format and the slot states.
 *
 * The batch engine keeps up to queue_depth I/Os in flight across the
 * blocks of a batch.  Each block in progress owns one 4 KiB header buffer
 * (registered, fixed buffer 0), so at most queue_depth blocks are in
 * progress; its payload goes in I/Os of at most io_bytes straight from or
 * into the caller's memory (fixed buffers 1.. when it lies in the
 * registered region, cut at the 1 GiB registration boundaries).  The
 * payload CRC of a write is computed before its I/Os are queued; the CRC
 * of a read is checked when its last I/O completes, while the other
 * blocks' I/Os are in flight.
 */
#include "tier_nvme.h"

#include "crc32c.h"
#include "vmm/vmm.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#if HAVE_LIBURING
#include <liburing.h>
#endif

#define NVME_ALIGN 4096u
#define NVME_DATA_OFFSET 4096u
#define NVME_NONE UINT32_MAX
#define NVME_REG_CHUNK (1ull << 30) /* largest registered iovec */
#define NVME_HDR_FLAG 0x8000u

struct nvme_superblock {
	uint64_t magic;
	uint32_t version;
	uint32_t sb_bytes;
	uint64_t stride;
	uint64_t payload_bytes;
	uint64_t slot_count;
	uint64_t format_id;
	uint32_t reserved32;
	uint32_t crc; /* CRC32C of this struct with crc = 0 */
	uint64_t reserved[8];
};

struct nvme_slot {
	enum tier_slot_state state;
	uint32_t readers; /* reads in flight */
	bool bad; /* failed verification; freed when the last reader leaves */
	uint32_t next; /* hash chain */
	uint64_t hash;
	uint64_t length;
	uint64_t generation;
	uint64_t layout_id;
	uint32_t payload_crc; /* from the header written or recovered */
};

static const char *path_fs_note(int fd) __attribute__((unused));

#if HAVE_LIBURING

struct tier_nvme {
	pthread_mutex_t lock; /* slots, index, free stack, counters */
	pthread_mutex_t io_lock; /* the ring and header buffers */
	int fd;
	uint64_t stride;
	uint64_t payload_bytes;
	uint32_t nslots;
	uint64_t format_id;
	uint64_t next_generation;
	struct nvme_slot *slots;
	uint32_t *buckets;
	uint32_t bucket_mask;
	uint32_t *free_stack;
	uint32_t nfree;
	struct io_uring ring;
	unsigned int qd;
	size_t io_bytes;
	unsigned char *hdr_bufs; /* qd * 4 KiB */
	bool registered;
	unsigned char *reg_base;
	size_t reg_len;
	struct tier_nvme_stats st;
};

/* ---- index (t->lock held) ---- */

static uint32_t bucket_of(struct tier_nvme *t, uint64_t hash)
{
	hash ^= hash >> 33;
	hash *= 0xff51afd7ed558ccdull;
	hash ^= hash >> 33;
	return (uint32_t)hash & t->bucket_mask;
}

static uint32_t idx_find(struct tier_nvme *t, uint64_t hash)
{
	for (uint32_t s = t->buckets[bucket_of(t, hash)]; s != NVME_NONE;
	     s = t->slots[s].next)
		if (t->slots[s].hash == hash)
			return s;
	return NVME_NONE;
}

static void idx_insert(struct tier_nvme *t, uint32_t slot)
{
	uint32_t b = bucket_of(t, t->slots[slot].hash);

	t->slots[slot].next = t->buckets[b];
	t->buckets[b] = slot;
}

static void idx_remove(struct tier_nvme *t, uint32_t slot)
{
	uint32_t *p = &t->buckets[bucket_of(t, t->slots[slot].hash)];

	while (*p != NVME_NONE) {
		if (*p == slot) {
			*p = t->slots[slot].next;
			return;
		}
		p = &t->slots[*p].next;
	}
}

/* Take a specific slot off the free stack (recovery). */
static void slot_claim(struct tier_nvme *t, uint32_t slot)
{
	for (uint32_t i = 0; i < t->nfree; i++) {
		if (t->free_stack[i] == slot) {
			t->free_stack[i] = t->free_stack[--t->nfree];
			return;
		}
	}
}

static int slot_alloc(struct tier_nvme *t, uint32_t *slot)
{
	if (t->nfree == 0) {
		t->st.alloc_failures++;
		return -ENOSPC;
	}
	*slot = t->free_stack[--t->nfree];
	t->st.used_slots++;
	if (t->st.used_slots > t->st.peak_used_slots)
		t->st.peak_used_slots = t->st.used_slots;
	return 0;
}

/* Any state -> FREE, out of the index. */
static void slot_release(struct tier_nvme *t, uint32_t slot)
{
	struct nvme_slot *s = &t->slots[slot];

	if (s->state == TIER_SLOT_FREE)
		return;
	idx_remove(t, slot);
	if (s->state == TIER_SLOT_READY)
		t->st.ready_slots--;
	*s = (struct nvme_slot){ .state = TIER_SLOT_FREE, .next = NVME_NONE };
	t->free_stack[t->nfree++] = slot;
	t->st.used_slots--;
	t->st.frees++;
}

static uint64_t slot_offset(struct tier_nvme *t, uint32_t slot)
{
	return NVME_DATA_OFFSET + (uint64_t)slot * t->stride;
}

static uint32_t header_crc(const struct tier_nvme_slot_header *h)
{
	struct tier_nvme_slot_header c = *h;

	c.header_crc = 0;
	return tier_crc32c(0, &c, sizeof(c));
}

/* Header checks that need no payload: everything but payload_crc. */
static bool header_valid(struct tier_nvme *t,
			 const struct tier_nvme_slot_header *h, uint32_t slot)
{
	return h->magic == TIER_NVME_SLOT_MAGIC &&
	       h->version == TIER_NVME_VERSION &&
	       h->header_bytes == TIER_NVME_HEADER_BYTES &&
	       h->format_id == t->format_id && h->slot == slot &&
	       h->length <= t->payload_bytes && h->header_crc == header_crc(h);
}

/* ---- batch engine (t->io_lock held) ---- */

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
		off = slot_offset(t, a->slot);
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
			io_uring_prep_write_fixed(sqe, t->fd, buf,
						  (unsigned)len, off, fixed);
		else
			io_uring_prep_write(sqe, t->fd, buf, (unsigned)len,
					    off);
	} else {
		if (fixed >= 0)
			io_uring_prep_read_fixed(sqe, t->fd, buf, (unsigned)len,
						 off, fixed);
		else
			io_uring_prep_read(sqe, t->fd, buf, (unsigned)len, off);
	}
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
		a->disk_off = slot_offset(t, io->slot);
		a->total = TIER_NVME_HEADER_BYTES + io->length;
		a->hdr_issued = a->hdr_done = true; /* part of the extent */
	} else {
		a->mem = io->buf;
		a->disk_off = slot_offset(t, io->slot) + TIER_NVME_HEADER_BYTES;
		a->total = io->length;
		a->sep_hdr = true;
	}
	if (!write)
		return;

	struct tier_nvme_slot_header h = {
		.magic = TIER_NVME_SLOT_MAGIC,
		.version = TIER_NVME_VERSION,
		.header_bytes = TIER_NVME_HEADER_BYTES,
		.format_id = t->format_id,
		.slot = io->slot,
		.hash = io->hash,
		.length = io->length,
		.generation = generation,
		.layout_id = io->layout_id,
		.payload_crc = tier_crc32c(0, io->buf, io->length),
	};
	unsigned char *hb = hdr_mem(t, a, ai);

	h.header_crc = header_crc(&h);
	memset(hb, 0, NVME_ALIGN);
	memcpy(hb, &h, sizeof(h));
	/* remembered so reads can be checked against what was written */
	pthread_mutex_lock(&t->lock);
	t->slots[io->slot].payload_crc = h.payload_crc;
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
			slot_release(t, a->slot);
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
		if (!header_valid(t, &h, a->slot) || h.hash != s->hash ||
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
		slot_release(t, a->slot);
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
			slot_release(t, ios[next].slot);
		} else if (--t->slots[ios[next].slot].readers == 0 &&
			   t->slots[ios[next].slot].bad) {
			slot_release(t, ios[next].slot);
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
		uint32_t slot = idx_find(t, io->hash);

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
		io->result = slot_alloc(t, &io->slot);
		if (io->result)
			continue;
		t->slots[io->slot] = (struct nvme_slot){
			.state = TIER_SLOT_FILLING,
			.hash = io->hash,
			.length = io->length,
			.generation = t->next_generation++,
			.layout_id = io->layout_id,
		};
		idx_insert(t, io->slot);
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

int tier_nvme_lookup(struct tier_nvme *t, uint64_t hash, uint32_t *slot,
		     uint64_t *length, uint64_t *layout_id)
{
	uint32_t s;
	int r = -ENOENT;

	pthread_mutex_lock(&t->lock);
	s = idx_find(t, hash);
	if (s != NVME_NONE && t->slots[s].state == TIER_SLOT_READY &&
	    !t->slots[s].bad) {
		if (slot)
			*slot = s;
		if (length)
			*length = t->slots[s].length;
		if (layout_id)
			*layout_id = t->slots[s].layout_id;
		r = 0;
	}
	pthread_mutex_unlock(&t->lock);
	return r;
}

int tier_nvme_free(struct tier_nvme *t, uint32_t slot)
{
	int r = 0;

	if (slot >= t->nslots)
		return -EINVAL;
	pthread_mutex_lock(&t->lock);
	if (t->slots[slot].state != TIER_SLOT_READY)
		r = -ENOENT;
	else if (t->slots[slot].readers)
		r = -EBUSY;
	else
		slot_release(t, slot);
	pthread_mutex_unlock(&t->lock);
	return r;
}

enum tier_slot_state tier_nvme_slot_state(struct tier_nvme *t, uint32_t slot)
{
	enum tier_slot_state s;

	if (slot >= t->nslots)
		return TIER_SLOT_FREE;
	pthread_mutex_lock(&t->lock);
	s = t->slots[slot].state;
	pthread_mutex_unlock(&t->lock);
	return s;
}

int tier_nvme_foreach(struct tier_nvme *t,
		      int (*fn)(void *arg, uint32_t slot, uint64_t hash,
				uint64_t length, uint64_t layout_id),
		      void *arg)
{
	int r = 0;

	pthread_mutex_lock(&t->lock);
	for (uint32_t i = 0; i < t->nslots && !r; i++) {
		struct nvme_slot s = t->slots[i];

		if (s.state != TIER_SLOT_READY || s.bad)
			continue;
		r = fn(arg, i, s.hash, s.length, s.layout_id);
	}
	pthread_mutex_unlock(&t->lock);
	return r;
}

uint64_t tier_nvme_slot_offset(struct tier_nvme *t, uint32_t slot)
{
	return slot_offset(t, slot);
}

void tier_nvme_get_stats(struct tier_nvme *t, struct tier_nvme_stats *st)
{
	pthread_mutex_lock(&t->lock);
	*st = t->st;
	pthread_mutex_unlock(&t->lock);
}

/* ---- open, recovery, close ---- */

static int sb_read(struct tier_nvme *t, struct nvme_superblock *sb)
{
	void *buf;
	ssize_t n;
	int r = 0;

	if (posix_memalign(&buf, NVME_ALIGN, NVME_ALIGN))
		return -ENOMEM;
	n = pread(t->fd, buf, NVME_ALIGN, 0);
	if (n < 0)
		r = -errno;
	else if (n != NVME_ALIGN)
		r = -ENODATA;
	else
		memcpy(sb, buf, sizeof(*sb));
	free(buf);
	return r;
}

static int sb_write(struct tier_nvme *t)
{
	struct nvme_superblock sb = {
		.magic = TIER_NVME_SB_MAGIC,
		.version = TIER_NVME_VERSION,
		.sb_bytes = sizeof(sb),
		.stride = t->stride,
		.payload_bytes = t->payload_bytes,
		.slot_count = t->nslots,
		.format_id = t->format_id,
	};
	void *buf;
	ssize_t n;
	int r = 0;

	sb.crc = tier_crc32c(0, &sb, sizeof(sb));
	if (posix_memalign(&buf, NVME_ALIGN, NVME_ALIGN))
		return -ENOMEM;
	memset(buf, 0, NVME_ALIGN);
	memcpy(buf, &sb, sizeof(sb));
	n = pwrite(t->fd, buf, NVME_ALIGN, 0);
	if (n < 0)
		r = -errno;
	else if (n != NVME_ALIGN)
		r = -EIO;
	else if (fdatasync(t->fd))
		r = -errno;
	free(buf);
	return r;
}

static bool sb_valid(const struct nvme_superblock *sb)
{
	struct nvme_superblock c = *sb;

	c.crc = 0;
	return sb->magic == TIER_NVME_SB_MAGIC &&
	       sb->version == TIER_NVME_VERSION &&
	       sb->sb_bytes == sizeof(*sb) &&
	       tier_crc32c(0, &c, sizeof(c)) == sb->crc;
}

/* Keep a recovered header: newest generation of each hash wins. */
static void recover_one(struct tier_nvme *t, uint32_t slot,
			const struct tier_nvme_slot_header *h)
{
	uint32_t old = idx_find(t, h->hash);

	if (old != NVME_NONE) {
		if (t->slots[old].generation >= h->generation)
			return;
		slot_release(t, old);
		t->st.recovered_slots--;
	}
	slot_claim(t, slot);
	t->st.used_slots++;
	t->slots[slot] = (struct nvme_slot){
		.state = TIER_SLOT_READY,
		.hash = h->hash,
		.length = h->length,
		.generation = h->generation,
		.layout_id = h->layout_id,
		.payload_crc = h->payload_crc,
	};
	idx_insert(t, slot);
	t->st.ready_slots++;
	t->st.recovered_slots++;
	if (h->generation >= t->next_generation)
		t->next_generation = h->generation + 1;
}

/* Read every slot header, queue_depth at a time, through the ring. */
static int recover(struct tier_nvme *t)
{
	uint32_t next = 0, done = 0;
	unsigned int inflight = 0;

	while (done < t->nslots) {
		while (inflight < t->qd && next < t->nslots) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&t->ring);
			unsigned int bi = next % t->qd;

			if (!sqe)
				break;
			if (t->registered)
				io_uring_prep_read_fixed(
					sqe, t->fd,
					t->hdr_bufs + bi * NVME_ALIGN,
					NVME_ALIGN, slot_offset(t, next), 0);
			else
				io_uring_prep_read(
					sqe, t->fd,
					t->hdr_bufs + bi * NVME_ALIGN,
					NVME_ALIGN, slot_offset(t, next));
			io_uring_sqe_set_data64(sqe, next);
			next++;
			inflight++;
		}
		int r = io_uring_submit_and_wait(&t->ring, 1);

		if (r < 0 && r != -EINTR)
			return r;
		struct io_uring_cqe *cqe;
		unsigned int head, seen = 0;

		io_uring_for_each_cqe(&t->ring, head, cqe)
		{
			uint32_t slot = (uint32_t)io_uring_cqe_get_data64(cqe);
			struct tier_nvme_slot_header h;

			seen++;
			inflight--;
			done++;
			if (cqe->res != NVME_ALIGN)
				continue; /* unwritten tail of a sparse file */
			memcpy(&h, t->hdr_bufs + (slot % t->qd) * NVME_ALIGN,
			       sizeof(h));
			if (h.magic == 0 && h.header_crc == 0)
				continue; /* never written */
			if (!header_valid(t, &h, slot)) {
				/* a slot of this format whose header is
				 * damaged; a stale format is just empty */
				if (h.magic == TIER_NVME_SLOT_MAGIC &&
				    h.format_id == t->format_id)
					t->st.header_failures++;
				continue;
			}
			pthread_mutex_lock(&t->lock);
			recover_one(t, slot, &h);
			pthread_mutex_unlock(&t->lock);
		}
		io_uring_cq_advance(&t->ring, seen);
	}
	return 0;
}

/* O_DIRECT on fd, or -EOPNOTSUPP with a line saying why. */
static int enable_direct(int fd, const char *path)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return -errno;
	if (fcntl(fd, F_SETFL, fl | O_DIRECT) == 0)
		return 0;
	vmm_log(VMM_LOG_ERR,
		"tier_nvme: %s does not support O_DIRECT%s; put the NVMe tier on a disk-backed file system or a block device",
		path, path_fs_note(fd));
	return -EOPNOTSUPP;
}

static int size_file(struct tier_nvme *t, const struct tier_nvme_config *cfg,
		     uint64_t *bytes)
{
	struct stat st;

	if (fstat(t->fd, &st))
		return -errno;
	if (S_ISBLK(st.st_mode)) {
		uint64_t dev;

		if (ioctl(t->fd, BLKGETSIZE64, &dev))
			return -errno;
		*bytes = cfg->capacity_bytes && cfg->capacity_bytes < dev ?
				 cfg->capacity_bytes :
				 dev;
		return 0;
	}
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	if (!cfg->capacity_bytes)
		return -EINVAL;
	*bytes = cfg->capacity_bytes;
	if ((uint64_t)st.st_size > *bytes && ftruncate(t->fd, (off_t)*bytes))
		return -errno;
	if ((uint64_t)st.st_size < *bytes) {
		int r = posix_fallocate(t->fd, 0, (off_t)*bytes);

		if (r == EOPNOTSUPP || r == EINVAL) {
			if (ftruncate(t->fd, (off_t)*bytes))
				return -errno;
		} else if (r) {
			return -r;
		}
	}
	return 0;
}

static int register_buffers(struct tier_nvme *t)
{
	unsigned int nreg = 1;
	struct iovec *iov;
	int r;

	if (t->reg_base)
		nreg += (unsigned int)((t->reg_len + NVME_REG_CHUNK - 1) /
				       NVME_REG_CHUNK);
	iov = calloc(nreg, sizeof(*iov));
	if (!iov)
		return -ENOMEM;
	iov[0].iov_base = t->hdr_bufs;
	iov[0].iov_len = (size_t)t->qd * NVME_ALIGN;
	for (unsigned int i = 1; i < nreg; i++) {
		size_t off = (size_t)(i - 1) * NVME_REG_CHUNK;
		size_t len = t->reg_len - off;

		iov[i].iov_base = t->reg_base + off;
		iov[i].iov_len = len < NVME_REG_CHUNK ? len : NVME_REG_CHUNK;
	}
	r = io_uring_register_buffers(&t->ring, iov, nreg);
	free(iov);
	if (r) {
		vmm_log(VMM_LOG_WARN,
			"tier_nvme: registering buffers failed (%s; RLIMIT_MEMLOCK?); using unregistered I/O",
			strerror(-r));
		return r;
	}
	t->registered = true;
	return 0;
}

int tier_nvme_open(const struct tier_nvme_config *cfg, struct tier_nvme **out)
{
	struct tier_nvme *t;
	struct nvme_superblock sb;
	uint64_t bytes = 0, nslots;
	int r;

	if (!cfg || cfg->size < sizeof(*cfg) || !cfg->path ||
	    !cfg->payload_bytes || cfg->payload_bytes % NVME_ALIGN)
		return -EINVAL;
	if (cfg->reg_base && ((uintptr_t)cfg->reg_base % NVME_ALIGN))
		return -EINVAL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	pthread_mutex_init(&t->lock, NULL);
	pthread_mutex_init(&t->io_lock, NULL);
	t->qd = cfg->queue_depth ? cfg->queue_depth : 8;
	if (t->qd > 1024)
		t->qd = 1024;
	t->io_bytes = cfg->io_bytes ? cfg->io_bytes : (1u << 20);
	t->io_bytes = (t->io_bytes + NVME_ALIGN - 1) / NVME_ALIGN * NVME_ALIGN;
	if (t->io_bytes > (64u << 20))
		t->io_bytes = 64u << 20;
	t->payload_bytes = cfg->payload_bytes;
	t->stride = TIER_NVME_HEADER_BYTES + cfg->payload_bytes;
	t->reg_base = cfg->reg_base;
	t->reg_len = cfg->reg_len;

	t->fd = open(cfg->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (t->fd < 0) {
		r = -errno;
		vmm_log(VMM_LOG_ERR, "tier_nvme: open %s: %s", cfg->path,
			strerror(-r));
		goto err_free;
	}
	r = enable_direct(t->fd, cfg->path);
	if (r)
		goto err_close;
	r = size_file(t, cfg, &bytes);
	if (r) {
		vmm_log(VMM_LOG_ERR, "tier_nvme: sizing %s: %s", cfg->path,
			strerror(-r));
		goto err_close;
	}
	nslots = bytes > NVME_DATA_OFFSET ?
			 (bytes - NVME_DATA_OFFSET) / t->stride :
			 0;
	if (nslots == 0 || nslots >= NVME_NONE) {
		r = -ENOSPC;
		vmm_log(VMM_LOG_ERR,
			"tier_nvme: %s: %llu bytes hold no slot of %llu bytes",
			cfg->path, (unsigned long long)bytes,
			(unsigned long long)t->stride);
		goto err_close;
	}
	t->nslots = (uint32_t)nslots;
	t->slots = calloc(nslots, sizeof(*t->slots));
	t->free_stack = calloc(nslots, sizeof(*t->free_stack));
	uint32_t nb = 1;
	while (nb < 2 * nslots)
		nb <<= 1;
	t->buckets = malloc(nb * sizeof(*t->buckets));
	if (!t->slots || !t->free_stack || !t->buckets) {
		r = -ENOMEM;
		goto err_close;
	}
	t->bucket_mask = nb - 1;
	memset(t->buckets, 0xff, nb * sizeof(*t->buckets));
	for (uint32_t i = 0; i < t->nslots; i++) {
		t->slots[i].next = NVME_NONE;
		t->free_stack[i] = t->nslots - 1 - i;
	}
	t->nfree = t->nslots;
	t->next_generation = 1;
	if (posix_memalign((void **)&t->hdr_bufs, NVME_ALIGN,
			   (size_t)t->qd * NVME_ALIGN)) {
		r = -ENOMEM;
		goto err_close;
	}
	memset(t->hdr_bufs, 0, (size_t)t->qd * NVME_ALIGN);
	r = io_uring_queue_init(2 * t->qd, &t->ring, 0);
	if (r) {
		vmm_log(VMM_LOG_ERR, "tier_nvme: io_uring_queue_init: %s",
			strerror(-r));
		goto err_close;
	}
	(void)register_buffers(t);

	t->st.slot_bytes = t->stride;
	t->st.payload_bytes = t->payload_bytes;
	t->st.capacity_slots = t->nslots;
	t->st.capacity_bytes = (uint64_t)t->nslots * t->stride;
	t->st.registered_buffers = t->registered;

	r = cfg->reformat ? -ENODATA : sb_read(t, &sb);
	if (r == 0 && sb_valid(&sb) && sb.stride == t->stride &&
	    sb.payload_bytes == t->payload_bytes) {
		t->format_id = sb.format_id;
		r = recover(t);
		if (r)
			goto err_ring;
		if (sb.slot_count != t->nslots) {
			r = sb_write(t);
			if (r)
				goto err_ring;
		}
		vmm_log(VMM_LOG_INFO,
			"tier_nvme: %s: recovered %llu of %u slots (%llu damaged headers)",
			cfg->path, (unsigned long long)t->st.recovered_slots,
			t->nslots, (unsigned long long)t->st.header_failures);
	} else {
		if (getrandom(&t->format_id, sizeof(t->format_id), 0) !=
		    sizeof(t->format_id))
			t->format_id = (uint64_t)time(NULL) ^
				       ((uint64_t)getpid() << 32);
		r = sb_write(t);
		if (r) {
			vmm_log(VMM_LOG_ERR,
				"tier_nvme: writing the superblock of %s: %s",
				cfg->path, strerror(-r));
			goto err_ring;
		}
		vmm_log(VMM_LOG_INFO,
			"tier_nvme: %s: formatted %u slots of %llu bytes",
			cfg->path, t->nslots, (unsigned long long)t->stride);
	}
	*out = t;
	return 0;

err_ring:
	io_uring_queue_exit(&t->ring);
err_close:
	close(t->fd);
err_free:
	free(t->hdr_bufs);
	free(t->buckets);
	free(t->free_stack);
	free(t->slots);
	pthread_mutex_destroy(&t->io_lock);
	pthread_mutex_destroy(&t->lock);
	free(t);
	return r;
}

void tier_nvme_close(struct tier_nvme *t)
{
	if (!t)
		return;
	io_uring_queue_exit(&t->ring);
	close(t->fd);
	free(t->hdr_bufs);
	free(t->buckets);
	free(t->free_stack);
	free(t->slots);
	pthread_mutex_destroy(&t->io_lock);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

#else /* !HAVE_LIBURING */

struct tier_nvme {
	int unused;
};

int tier_nvme_open(const struct tier_nvme_config *cfg, struct tier_nvme **out)
{
	vmm_log(VMM_LOG_ERR, "tier_nvme: built without liburing");
	return -ENOTSUP;
}

void tier_nvme_close(struct tier_nvme *t)
{
}

int tier_nvme_write_batch(struct tier_nvme *t, struct tier_nvme_io *ios,
			  unsigned int n)
{
	return -ENOTSUP;
}

int tier_nvme_read_batch(struct tier_nvme *t, struct tier_nvme_io *ios,
			 unsigned int n)
{
	return -ENOTSUP;
}

int tier_nvme_lookup(struct tier_nvme *t, uint64_t hash, uint32_t *slot,
		     uint64_t *length, uint64_t *layout_id)
{
	return -ENOENT;
}

int tier_nvme_free(struct tier_nvme *t, uint32_t slot)
{
	return -ENOTSUP;
}

enum tier_slot_state tier_nvme_slot_state(struct tier_nvme *t, uint32_t slot)
{
	return TIER_SLOT_FREE;
}

int tier_nvme_foreach(struct tier_nvme *t,
		      int (*fn)(void *arg, uint32_t slot, uint64_t hash,
				uint64_t length, uint64_t layout_id),
		      void *arg)
{
	return 0;
}

uint64_t tier_nvme_slot_offset(struct tier_nvme *t, uint32_t slot)
{
	return 0;
}

void tier_nvme_get_stats(struct tier_nvme *t, struct tier_nvme_stats *st)
{
	memset(st, 0, sizeof(*st));
}

#endif /* HAVE_LIBURING */

/* ", a tmpfs file system" etc. for the O_DIRECT error message. */
static const char *path_fs_note(int fd)
{
	struct statfs sfs;

	if (fstatfs(fd, &sfs))
		return "";
	switch ((unsigned long)sfs.f_type) {
	case TMPFS_MAGIC:
		return " (it is on tmpfs, which has no O_DIRECT)";
	case RAMFS_MAGIC:
		return " (it is on ramfs, which has no O_DIRECT)";
	case OVERLAYFS_SUPER_MAGIC:
		return " (it is on overlayfs)";
	default:
		return "";
	}
}
