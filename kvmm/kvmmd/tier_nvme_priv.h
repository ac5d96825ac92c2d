/* SPDX-License-Identifier: MIT */
/*
 * NVMe tier internals, shared by the files that implement tier_nvme.h:
 *
 *   tier_nvme.c          open (file sizing, O_DIRECT, ring, registered
 *                        buffers) and close
 *   tier_nvme_claim.c    the file claimed at start: made if missing,
 *                        locked, O_DIRECT, its contents checked; taken
 *                        away again when a claim that made it fails
 *   tier_nvme_keep.c     the open's superblock decision: keep the blocks
 *                        (recover, grow, shrink, retire drop marks) or
 *                        format the file anew
 *   tier_nvme_format.c   the on-disk format: slot header and superblock,
 *                        their CRC32C, reading and writing the superblock
 *   tier_nvme_slots.c    slot metadata: hash index, free stack, the
 *                        FREE/FILLING/READY states, lookups and counters
 *   tier_nvme_io.c       the io_uring batch engine behind write_batch and
 *                        read_batch: the ring, its thread, a batch's run
 *   tier_nvme_batch.c    the batch calls: their checks and slots before
 *                        the I/O, a block's publish or check after it
 *   tier_nvme_recover.c  the restart scan that rebuilds the index from the
 *                        slot headers
 *   tier_nvme_mark.c     drop marks: an operator's drop kept in the
 *                        superblock, which the restart scan obeys
 *   tier_nvme_restamp.c  a block a drop kept: its header written again
 *                        above the drop's mark
 *   tier_nvme_part.c     partitions: where the tier's share of the file
 *                        lies, and whether a superblock names it
 *   tier_nvme_fault.c    test knobs that fail the restart scan's reads,
 *                        its clearing of stale headers and its sync, the
 *                        superblock write of a resized tier and the drop
 *                        marks' retirement on purpose
 *   tier_nvme_stubs.c    a build without liburing: every call answers as
 *                        a tier that cannot open
 *
 * Locking: t->lock protects slots, buckets, free stack and st; t->io_lock
 * the engine: the ring's submission side and completion side, the blocks
 * in progress, hdr_bufs and the list of batches (several batches, from
 * several threads, share one queue; see tier_nvme_io.c).  After open only
 * the tier's completion thread touches the ring, and it waits for
 * completions without io_lock.  io_lock is taken before lock when both
 * are held.  sb_lock orders the superblock writes of drop marks; lock is
 * taken inside it, only to copy the marks.  Two counters are outside both: io_sqes and io_submits (see
 * nvme_count()).
 */
#ifndef KVMM_KVMMD_TIER_NVME_PRIV_H
#define KVMM_KVMMD_TIER_NVME_PRIV_H

#include "tier_nvme.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#if HAVE_LIBURING
#include <liburing.h>
#endif

#define NVME_ALIGN 4096u /* O_DIRECT alignment of offsets, lengths, memory */
#define NVME_DATA_OFFSET 4096u /* slot 0 starts after the superblock */
#define NVME_NONE UINT32_MAX /* no slot (index chains, lookups) */
#define NVME_REG_CHUNK (1ull << 30) /* largest registered iovec */
/*
 * How long a teardown waits for I/Os the kernel took before the ring
 * failed (a failed restart scan, a tier closing after a ring failure)
 * before it leaks the header buffers they may still write, rather than
 * free memory the kernel writes into.  Header reads take well under a
 * millisecond; a request stuck longer is the device's, which the block
 * layer times out by itself (30 s for NVMe), and qd * 4 KiB is little
 * to lose.
 */
#define NVME_DRAIN_MS 5000

/* The superblock as stored at offset 0. */
struct nvme_superblock {
	uint64_t magic;
	uint32_t version;
	uint32_t sb_bytes;
	uint64_t stride;
	uint64_t payload_bytes;
	uint64_t slot_count;
	uint64_t format_id;
	/* tier_nvme_config.scope and .scope_key (0 and zeros in files
	 * written before they existed: the shared scope, as then) */
	uint32_t scope;
	uint32_t crc; /* CRC32C of this struct with crc = 0 */
	uint8_t scope_key[16];
	/* drop marks (tier_nvme_mark_drop(); zeros in files written before
	 * them: none): every slot of a smaller generation is dropped, and
	 * tenant_marks entries at NVME_MARKS_OFFSET, whose CRC32C is
	 * marks_crc */
	uint64_t drop_all;
	uint32_t tenant_marks;
	uint32_t marks_crc;
	/* the partition (tier_nvme_config.part_*; zeros in files written
	 * before the partitions, and for a tier with the whole file):
	 * which, of how many, this one part_bytes long, and partition 0's
	 * layout id, which names the layout they were cut in together;
	 * and the cut's weights (tier_nvme_weights_pack(): 0, as in files
	 * written before them, for the equal cut) */
	uint32_t part_index;
	uint32_t part_count;
	uint64_t part_bytes;
	uint64_t layout_id;
	uint64_t part_weights;
};

_Static_assert(
	sizeof(struct nvme_superblock) == 120,
	"the superblock keeps its size (sb_bytes): files of before the partitions stay valid");

/* One tenant's drop mark, as stored in the superblock's 4 KiB. */
struct nvme_tenant_mark {
	uint32_t tenant;
	uint32_t pad; /* 0 */
	uint64_t generation; /* the tenant's slots below it are dropped */
};

#define NVME_MARKS_OFFSET 1024u /* in the superblock's 4 KiB */
_Static_assert(NVME_MARKS_OFFSET + TIER_NVME_TENANT_MARKS *
					   sizeof(struct nvme_tenant_mark) <=
		       NVME_ALIGN,
	       "the tenants' drop marks fit in the superblock's 4 KiB");

/* The drop marks in memory (t->lock), as the superblock stores them. */
struct nvme_marks {
	uint64_t drop_all;
	uint32_t n;
	struct nvme_tenant_mark m[TIER_NVME_TENANT_MARKS];
};

/* Which marks the restart scan found a valid header below (t->lock):
 * the others retire (nvme_marks_retire()).  A header it could not read
 * it zeroed (tier_nvme_recover.c): that one is below none. */
struct nvme_marks_held {
	bool all; /* below drop_all */
	bool tenant[TIER_NVME_TENANT_MARKS]; /* below m[i] */
};

/* Tests only: what the open fails on purpose (tier_nvme_fault.c). */
#define NVME_FAULT_SCAN_MAX TIER_NVME_SCAN_FAIL_MAX
struct nvme_faults {
	uint32_t scan[NVME_FAULT_SCAN_MAX]; /* slots whose header read fails */
	uint32_t n_scan;
	/* slots past the last run's end whose stale header's zeroing fails */
	uint32_t clear[NVME_FAULT_SCAN_MAX];
	uint32_t n_clear;
	bool retire_sync; /* the sync before marks retire */
	bool retire_sb; /* the superblock write without them */
	bool clear_sync; /* the sync after the scan's zeroings */
	bool resize_sb; /* the superblock write of a grown or shrunk tier */
};

/*
 * Reads of one slot in a row that may fail with an I/O error (or a short
 * read) before the slot is dropped, as a slot that fails its CRC is.  An
 * error that reaches us has outlived the kernel's own retries already
 * (the NVMe driver retries a failed command, the block layer times one
 * out and resets the controller), so a second one in a row on a later
 * read is taken as persistent: kept READY, the block would be tried, and
 * cut a client's prefix short there, on every open.  One try more than
 * one, so that a one-off (a controller reset or path failover during the
 * read) does not lose the block; each further try costs a client a
 * prefix cut short, for a block that can be recomputed.
 */
#define NVME_READ_FAILURES_MAX 2

/* In-memory metadata of one slot (t->lock). */
struct nvme_slot {
	enum tier_slot_state state;
	uint32_t readers; /* reads in flight */
	bool bad; /* failed verification, or its reads kept failing
		   * (NVME_READ_FAILURES_MAX); freed when the last reader
		   * leaves */
	uint8_t read_failures; /* reads in a row that failed (I/O error) */
	/* FILLING for an operator drop's invalidation, claimed on the loop
	 * thread before its job runs (tier_nvme_invalidate_claim()); cleared
	 * with the rest of the slot when it is freed */
	bool dropping;
	/*
	 * A stale copy: the slot is FREE in memory (an eviction, a
	 * restore's source, the loser of two copies found at restart, a
	 * failed write or invalidation), but its header on disk may still
	 * name a block, hash below, which a restart's scan would recover.
	 * stale_tenant: the tenant the cache freed it under
	 * (tier_nvme_free_tenant()), TIER_NVME_NOBODY when none said.  An
	 * operator drop finds these (tier_nvme_stale_claim()); a write or
	 * an invalidation of the slot forgets it.  While such a slot is
	 * claimed (FILLING, dropping) it stays set, so that it is counted
	 * and freed as what it is (slot_free()).
	 */
	bool stale;
	/* a stale copy the restart's scan found below a drop mark
	 * (tier_nvme_mark.c): never recovered, whatever becomes of it, and
	 * claimed apart (tier_nvme_marked_claim()) so that its header is
	 * zeroed and later restarts stop reading and counting it */
	bool marked;
	uint32_t stale_tenant;
	/* the tenant its header names (tier_nvme_io.tenant of the write,
	 * or the header the restart read), TIER_NVME_NOBODY when none:
	 * tier_nvme_foreach() gives it to the cache, and a copy freed by
	 * the tier itself stays a stale copy of that tenant */
	uint32_t tenant;
	/*
	 * Its header is being written again with a newer generation
	 * (tier_nvme_restamp_batch(): a block an operator's drop kept, so
	 * that the drop's mark does not cover it): no read starts meanwhile
	 * (a read would check the header against one generation while the
	 * disk holds the other, or catch it half written), and the slot is
	 * not handed to another block.  A free meanwhile is done when the
	 * write ended (restamp_free, as restamp_tenant's stale copy); an
	 * invalidation's claim is taken, and its batch waits.
	 */
	bool restamping;
	bool restamp_free;
	uint32_t restamp_tenant;
	uint32_t next; /* hash chain */
	uint64_t hash;
	uint64_t length;
	uint64_t generation;
	/* a restamp that failed: its header on disk may carry this
	 * generation instead of generation (0: none), which a read accepts */
	uint64_t alt_generation;
	uint64_t layout_id;
	uint32_t payload_crc; /* from the header written or recovered */
};

#if HAVE_LIBURING

struct nvme_active;
struct nvme_batch;

struct tier_nvme {
	pthread_mutex_t lock; /* slots, index, free stack, counters */
	pthread_cond_t slot_cond; /* a FILLING slot finished, a bad one left */
	unsigned int slot_waiters; /* writers waiting on slot_cond (lock) */
	pthread_mutex_t io_lock; /* the engine (below), ring, header buffers */
	pthread_cond_t io_wake; /* io_thread: work queued, or stop */
	int fd;
	bool fd_held; /* the caller's (tier_nvme_claim()): not closed here */
	uint64_t stride;
	uint64_t payload_bytes;
	/* the partition the tier has (tier_nvme_config.part_*): every
	 * offset below is from part_base; part_count 0: the whole file */
	uint64_t part_base;
	uint64_t part_bytes;
	uint32_t part_index;
	uint32_t part_count;
	uint64_t layout_id;
	uint64_t part_weights; /* tier_nvme_weights_pack()'s, 0: equal */
	uint32_t nslots;
	/* of the nslots, those the superblock found at open counted (the
	 * last run's); recovery takes no slot past them (recover.c) */
	uint32_t known_slots;
	uint64_t format_id;
	uint32_t scope; /* the superblock's scope and key (cfg) */
	uint8_t scope_key[16];
	uint64_t next_generation;
	/* lock; written to the superblock under sb_lock, which orders the
	 * superblock writes of several drops (tier_nvme_mark.c) */
	struct nvme_marks marks;
	struct nvme_marks_held held; /* the open's scan alone */
	/* the open's pending drop (tier_nvme_config.pending_drop), NULL
	 * outside the open; read by the scan */
	const struct tier_nvme_drop_pending *pending;
	pthread_mutex_t sb_lock;
	/* tests: KVMMD_TEST_NVME_INVALIDATE_DELAY_MS, a sleep before each
	 * invalidation batch's writes (a crash while they wait) */
	uint32_t invalidate_delay_us;
	/* tests: KVMMD_TEST_NVME_RESTAMP_DELAY_MS, the same before each
	 * restamp batch's writes (a crash between a drop's mark and the
	 * header writes of the blocks it kept) */
	uint32_t restamp_delay_us;
	struct nvme_faults faults; /* tests: the open's knobs */
	struct nvme_slot *slots;
	uint32_t *buckets;
	uint32_t bucket_mask;
	uint32_t *free_stack;
	uint32_t nfree;
	/* of the nfree, set aside for reserved writes (never more) */
	uint32_t reserved;
	struct io_uring ring;
	unsigned int qd;
	size_t io_bytes;
	unsigned char *hdr_bufs; /* qd * 4 KiB */
	bool registered; /* fixed buffers: 0 headers, 1.. the payload region */
	bool fixed_file; /* fd registered as file 0 of the ring */
	unsigned char *reg_base;
	size_t reg_len;
	struct tier_nvme_stats st; /* lock; sqes and submits unused (io_*) */
	/* the batch engine (io_lock) */
	struct nvme_active *act; /* qd blocks in progress */
	struct nvme_batch *batches; /* batches with blocks not yet started */
	unsigned int active; /* entries of act in use */
	unsigned int inflight; /* payload I/Os queued, not completed */
	unsigned int queued; /* SQEs queued, not completed (headers too) */
	unsigned int unsubmitted; /* SQEs queued, not yet submitted */
	pthread_t io_thread; /* owns the ring after open (tier_nvme_io.c) */
	bool io_started;
	bool io_stop;
	bool io_sleeping; /* io_thread waits on io_wake */
	bool io_in_kernel; /* io_thread waits in io_uring_enter */
	bool kicked; /* wake_fd written during this wait */
	int wake_fd; /* eventfd io_thread polls through the ring */
	bool wake_armed; /* that poll is queued */
	int ring_err; /* the ring failed: every later I/O fails with it */
	uint64_t drain_start_ms; /* when it failed (drain()) */
	bool drain_warned;
	/* I/Os the kernel took may still write hdr_bufs (a failed ring or
	 * restart scan that could not wait for them): close leaks them */
	bool hdr_bufs_busy;
	/* stats.sqes and stats.submits: written by io_thread alone, read by
	 * tier_nvme_get_stats() (nvme_count()) */
	uint64_t io_sqes;
	uint64_t io_submits;
	/* stats.ring_wait_ns and ring_wait_full_ns: io_thread's time in the
	 * kernel waiting for completions, and of it the waits begun with
	 * queue_depth payload I/Os in flight (io_thread alone, nvme_count()) */
	uint64_t io_wait_ns;
	uint64_t io_wait_full_ns;
};

/*
 * One more (or n more) on a counter of the engine's (io_sqes, io_submits,
 * io_wait_ns, io_wait_full_ns).  They change on io_thread's fast path,
 * once per I/O or wait, and tier_nvme_get_stats()
 * reads them without io_lock: relaxed atomics, not a lock.  Taking
 * io_lock in tier_nvme_get_stats() would make every reader (kvmmd asks
 * for the stats before each HOST_TO_NVME demotion, and on TIER_STATS)
 * wait for, and delay, the completion thread's work under io_lock; they
 * used to be part of st and were read under lock while io_thread wrote
 * them under io_lock: a data race (ThreadSanitizer).  Their only writer
 * is io_thread, so a relaxed load and store is a plain increment (no
 * locked instruction); a reader sees each counter whole and never going
 * back, with no ordering against the other counters (none is needed:
 * st's own fields are a snapshot under lock, these may be a few I/Os
 * ahead of or behind it).
 */
static inline void nvme_count_add(uint64_t *counter, uint64_t n)
{
	__atomic_store_n(counter,
			 __atomic_load_n(counter, __ATOMIC_RELAXED) + n,
			 __ATOMIC_RELAXED);
}

static inline void nvme_count(uint64_t *counter)
{
	nvme_count_add(counter, 1);
}

static inline uint64_t nvme_slot_offset(const struct tier_nvme *t,
					uint32_t slot)
{
	return t->part_base + NVME_DATA_OFFSET + (uint64_t)slot * t->stride;
}

/* The fd to put in an SQE: index 0 when the file is registered (the
 * kernel then skips the per-I/O file reference); see nvme_sqe_file(). */
static inline int nvme_sqe_fd(const struct tier_nvme *t)
{
	return t->fixed_file ? 0 : t->fd;
}

static inline void nvme_sqe_file(const struct tier_nvme *t,
				 struct io_uring_sqe *sqe)
{
	if (t->fixed_file)
		sqe->flags |= IOSQE_FIXED_FILE;
}

/* tier_nvme_slots.c (t->lock held, except init/fini) */
int nvme_slots_init(struct tier_nvme *t, uint32_t nslots);
void nvme_slots_fini(struct tier_nvme *t);
uint32_t nvme_idx_find(struct tier_nvme *t, uint64_t hash);
void nvme_idx_insert(struct tier_nvme *t, uint32_t slot);
int nvme_slot_alloc(struct tier_nvme *t, uint32_t *slot);
/* during the restart scan: release without the free stack (a stale
 * copy: its header is valid, a newer copy of its block won) */
void nvme_slot_release_recovered(struct tier_nvme *t, uint32_t slot);
/* during the restart scan: FREE slot holds a valid header of hash that
 * lost to a newer copy, or (marked) that a drop mark covers: remembered
 * as a stale copy of the tenant its header names (TIER_NVME_NOBODY: none) */
void nvme_slot_mark_stale(struct tier_nvme *t, uint32_t slot, uint64_t hash,
			  bool marked, uint32_t tenant);
/* after the restart scan: free stack from the slots' states */
void nvme_free_stack_rebuild(struct tier_nvme *t);
void nvme_slot_release(struct tier_nvme *t, uint32_t slot);
/* Release a slot whose header on disk may still name its block (any
 * free but a successful invalidation's): remembered as a stale copy of
 * tenant (TIER_NVME_NOBODY: none; a claimed stale copy keeps its own). */
void nvme_slot_release_stale(struct tier_nvme *t, uint32_t slot,
			     uint32_t tenant);

/* tier_nvme_format.c */
uint32_t nvme_header_crc(const struct tier_nvme_slot_header *h);
bool nvme_header_valid(const struct tier_nvme *t,
		       const struct tier_nvme_slot_header *h, uint32_t slot);
/* Fill the 4 KiB header block at hb for a write of io whose payload has
 * CRC32C payload_crc (computed by the caller, outside the engine's lock);
 * !tenant_known: a header that names no tenant (flags 0), as those of
 * before the tenants. */
void nvme_header_fill(const struct tier_nvme *t, void *hb,
		      const struct tier_nvme_io *io, uint64_t generation,
		      uint32_t payload_crc, bool tenant_known);
/* The superblock, and the tenants' drop marks when marks is not NULL
 * (-EBADMSG: their CRC is wrong). */
int nvme_sb_read(struct tier_nvme *t, struct nvme_superblock *sb,
		 struct nvme_marks *marks);
/* Write the superblock with t's geometry and drop marks (a snapshot
 * under t->lock), then fdatasync. */
int nvme_sb_write(struct tier_nvme *t);
/* One superblock's NVME_ALIGN bytes (buf, aligned for O_DIRECT) at off,
 * then fdatasync: 0 or -errno (-EIO: a short write). */
int nvme_sb_block_write(int fd, const void *buf, off_t off);
bool nvme_sb_valid(const struct nvme_superblock *sb);

/* tier_nvme_mark.c (t->lock held): whether a valid header's block is
 * dropped by a mark; after the restart scan, next_generation above every
 * mark. */
bool nvme_header_marked(const struct tier_nvme *t,
			const struct tier_nvme_slot_header *h);
void nvme_marks_raise_generation(struct tier_nvme *t);
/* Whether the open's pending drop (t->pending) covers a valid header
 * (t->lock held). */
bool nvme_header_pending(const struct tier_nvme *t,
			 const struct tier_nvme_slot_header *h);
/* After the scan and nvme_marks_retire(): the pending drop's marks at
 * next_generation, in memory (the caller writes the superblock); false
 * when there is none. */
bool nvme_marks_add_pending(struct tier_nvme *t);
/* The scan found h, a valid header nvme_header_marked() says is dropped:
 * every mark that covers it stays (t->held). */
void nvme_marks_hold(struct tier_nvme *t,
		     const struct tier_nvme_slot_header *h);
/* After the scan and nvme_marks_raise_generation() (t->lock not held):
 * the file synced, then the marks nothing on disk is below forgotten in
 * memory; how many (drop_all counts one), 0 when the sync failed.  The
 * caller writes the superblock. */
uint32_t nvme_marks_retire(struct tier_nvme *t, const char *path,
			   const char *part);
/* Whether sb was written under this scope and key. */
bool nvme_sb_same_scope(const struct nvme_superblock *sb, uint32_t scope,
			const uint8_t key[16]);

/* tier_nvme_io.c: the engine's state, set up with the ring (open); its
 * completion thread, started once recovery no longer uses the ring */
int nvme_engine_init(struct tier_nvme *t);
int nvme_engine_start(struct tier_nvme *t);
void nvme_engine_fini(struct tier_nvme *t);
/* CLOCK_MONOTONIC in ms; a 1 ms sleep (waiting for completions without
 * io_uring_enter after it failed) */
uint64_t nvme_now_ms(void);
void nvme_nap(void);

/*
 * One caller's batch, on its stack.  Fields below "io_lock" are shared with
 * the completion thread and other callers; crcs[i] for i >= prepared and
 * the blocks it took from ready belong to the owner alone.
 */
struct nvme_batch {
	struct tier_nvme_io *ios;
	unsigned int n;
	bool write;
	/* a write of zeroed headers alone (tier_nvme_invalidate_batch()):
	 * no payload, no CRC to compute first */
	bool invalidate;
	/* a write of headers alone, each its READY slot's with a newer
	 * generation (tier_nvme_restamp_batch()): no payload, no CRC */
	bool restamp;
	bool *pending; /* io i takes part */
	uint64_t *gens; /* write: generation stamped */
	uint32_t *crcs; /* write: payload CRC32C, known below prepared */
	struct tier_nvme_slot_header *hdrs; /* read: header as read */
	int *errs; /* I/O result of each completed io */
	unsigned int *ready; /* completed, not finished: [ready_head, tail) */
	pthread_cond_t done; /* the owner: an io of this batch completed */
	/* io_lock */
	bool sleeping; /* the owner waits on done */
	unsigned int ready_head, ready_tail;
	unsigned int next; /* first pending io not started (n: none) */
	unsigned int prepared; /* pending ios below it may start */
	unsigned int left; /* pending ios not finished */
	struct nvme_batch *link; /* t->batches while next < n */
};
/* Run the I/O of every pending io of b (tier_nvme_io.c); the owner
 * finishes each block whose I/O is over (tier_nvme_batch.c). */
void nvme_run_batch(struct tier_nvme *t, struct nvme_batch *b);
void nvme_finish_block(struct tier_nvme *t, struct nvme_batch *b,
		       unsigned int idx, bool ring_failed);
/* tier_nvme_batch.c: a batch's memory (write: generations and CRCs) and
 * its release; how many of its ios failed */
int nvme_batch_alloc(struct nvme_batch *b, struct tier_nvme_io *ios,
		     unsigned int n, bool write, bool invalidate);
int nvme_batch_end(struct nvme_batch *b, const struct tier_nvme_io *ios,
		   unsigned int n);
/* tier_nvme_batch.c: run a header-only batch, then fsync; a failed sync
 * fails the writes that had succeeded (*done -> *failed) */
void nvme_run_batch_synced(struct tier_nvme *t, struct nvme_batch *b, bool any,
			   uint64_t *done, uint64_t *failed);
/* Wait on slot_cond (t->lock held) */
void nvme_slot_wait(struct tier_nvme *t);
/* tier_nvme_restamp.c (t->lock held): a restamp's header write of io
 * idx ended; slot's restamp is over (restamping cleared, a free or a bad
 * slot's release done that waited for it) */
void nvme_restamp_finish(struct tier_nvme *t, struct nvme_batch *b,
			 unsigned int idx);
void nvme_restamp_settle(struct tier_nvme *t, uint32_t slot);
/* tier_nvme_batch.c (t->lock held): the slot io names if it is READY
 * and holds io's block (a read's, a restamp's); else NULL, io->result
 * -EINVAL (no such slot) or -ENOENT (another block, bad, not ready) */
struct nvme_slot *nvme_ready_slot(struct tier_nvme *t, struct tier_nvme_io *io);
/* tier_nvme_restamp.c (t->lock held): the start of a batch on written
 * slots: wait until none of ios' slots is being restamped, then clear
 * each io's dropped */
void nvme_batch_start(struct tier_nvme *t, struct tier_nvme_io *ios,
		      unsigned int n);

/* tier_nvme_part.c: the partition of a file of bytes (part_base,
 * part_bytes; the whole file without partitions); whether sb names this
 * partition of the layout layout_id (*why: what differs); a new layout
 * id, never 0 */
void nvme_cut_partition(struct tier_nvme *t, uint64_t bytes);
bool nvme_same_partition(const struct tier_nvme *t,
			 const struct nvme_superblock *sb, uint64_t layout_id,
			 const char **why);
uint64_t nvme_new_layout_id(void);
/* Why t's partition of a file of bytes is as small as it is, for the
 * line that says it holds no slot: "" without partitions, else its
 * share of the cut (its units of how many, a unit's bytes). */
void nvme_part_share_text(const struct tier_nvme *t, uint64_t bytes, char *buf,
			  size_t len);
/*
 * A later partition opened while partition 0's tier is not
 * (tier_nvme_config.layout_id 0): *layout_id is the one partition 0's
 * superblock names for this cut of the file, written there first when
 * it names none (or another cache scope); 0, or the read's or write's
 * -errno.  path and part name the tier in the log lines.
 */
int nvme_part0_layout(struct tier_nvme *t, const char *path, const char *part,
		      uint64_t *layout_id);
/* The layout id partition 0 is formatted with: sb's (the superblock it
 * had; NULL for none) when it names this cut, else a new one. */
uint64_t nvme_part0_format_layout(const struct tier_nvme *t,
				  const struct nvme_superblock *sb);

/* tier_nvme_recover.c (t->io_lock not needed: runs before open returns):
 * *cleared is how many stale headers past known_slots it zeroed; path
 * and part name the tier in its ERR lines */
int nvme_recover(struct tier_nvme *t, const char *path, const char *part,
		 uint32_t *cleared);
/* After nvme_recover() of a tier that shrank from old_slots: how many
 * valid blocks lie past the new end with no copy in the kept slots (they
 * are lost; read one header at a time, before the file is cut). */
uint32_t nvme_count_past_end(struct tier_nvme *t, uint32_t old_slots);

/*
 * tier_nvme_keep.c: the second half of tier_nvme_open(), the tier set up
 * (slots, ring, buffers): keep the file's blocks when its superblock
 * names this geometry, scope and partition (the restart scan, then the
 * grown or shrunk slot count and the retired drop marks written), else
 * format it.  0 or -errno, said; part names the partition in the lines.
 */
int nvme_open_superblock(struct tier_nvme *t,
			 const struct tier_nvme_config *cfg, const char *part);

/* tier_nvme_claim.c, for tier_nvme_open() too: fd locked against another
 * tier (-EBUSY, said, when another process holds it); fd switched to
 * O_DIRECT (-EOPNOTSUPP, said with the file system that refuses it) */
int nvme_lock_file(int fd, const char *path);
int nvme_enable_direct(int fd, const char *path);

/* tier_nvme_fault.c: the test knobs into t->faults (0, or -EINVAL for a
 * bad value, said), and whether the scan's read of slot fails */
int nvme_faults_read(struct tier_nvme *t, const char *path, const char *part);
bool nvme_fault_scan(const struct tier_nvme *t, uint32_t slot);
bool nvme_fault_clear(const struct tier_nvme *t, uint32_t slot);

#endif /* HAVE_LIBURING */
#endif
