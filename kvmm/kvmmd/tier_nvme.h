/* SPDX-License-Identifier: MIT */
/*
 * NVMe tier: a preallocated file (or a block device) cut into fixed-size
 * slots, written and read with io_uring, O_DIRECT, registered buffers and
 * several requests in flight.
 *
 * On-disk format (all integers little-endian, every offset 4 KiB aligned;
 * offsets from the start of the tier's partition, the file's start when
 * it has the whole file: tier_nvme_config.part_count):
 *
 *   offset 0          superblock (4 KiB): magic "KVMMNVM1", version,
 *                     slot stride, payload bytes, slot count, a random
 *                     format id, cache scope, drop marks, the
 *                     partition (index, count, bytes, layout id,
 *                     weights: zeros for the whole file), CRC32C of the
 *                     superblock; at 1024 the tenants' drop marks
 *   4096 + i*stride   slot i: a 4 KiB header (magic "KVMMSLOT", version,
 *                     format id, slot index, block hash, payload length,
 *                     generation, layout id, CRC32C of the payload, CRC32C
 *                     of the header, tenant) followed by the payload
 *
 * A slot is FREE -> FILLING (its write is in flight; lookups do not see it)
 * -> READY (header and payload written; served) -> FREE.  Opening an
 * existing file with the same geometry rebuilds the index from the slot
 * headers of the slots the last run had (restart recovery; stale headers
 * a grown tier finds past that end are cleared): a header is kept when
 * its magic, version, format id, slot index and header CRC are right; of
 * two slots with the same hash the newer generation wins.  The payload
 * CRC is checked on every read; a slot that fails it is dropped,
 * counted, and its read returns -EBADMSG: a corrupted block is a miss,
 * never served.  A slot whose reads fail with an I/O error twice in a
 * row is dropped too (NVME_READ_FAILURES_MAX): a block the disk cannot
 * give back is a miss, not a restore that fails again on every open.
 *
 * Eviction does not write to the disk; a block evicted before a restart
 * may come back after it, which is harmless: it is still the exact block
 * its hash names (the CRC proves the bytes are the ones written), and it
 * is what makes a restart warm for a block restored to the GPU before
 * the stop.  A block an operator drops must not come back:
 * tier_nvme_invalidate_batch() zeroes its slot's header on disk before
 * the slot is free again.  So that a drop finds the copies that are not
 * in use any more too, the tier remembers, in memory, each free slot
 * whose header may still be valid (a stale copy: which hash, and which
 * tenant the caller freed it under) until the slot is written again or
 * invalidated (tier_nvme_stale_claim()).  Neither survives a crash
 * before the header writes, or a header write that failed: a drop mark
 * in the superblock does (tier_nvme_mark_drop(), below).
 *
 * Thread-safe: metadata under one mutex, the I/O engine under another.
 * Batches are synchronous for the caller, and several callers' batches run
 * at once, sharing one queue of queue_depth I/Os (the migration engine's
 * workers each run theirs); the tier's own thread reaps completions and
 * refills the queue, callers compute and check their blocks' CRC32C.
 */
#ifndef KVMM_KVMMD_TIER_NVME_H
#define KVMM_KVMMD_TIER_NVME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tier_host.h" /* enum tier_slot_state */

#define TIER_NVME_SB_MAGIC 0x314d564e4d4d564bull /* "KVMMNVM1" */
#define TIER_NVME_SLOT_MAGIC 0x544f4c534d4d564bull /* "KVMMSLOT" */
#define TIER_NVME_VERSION 1
#define TIER_NVME_HEADER_BYTES 4096
/* Partitions of one file at most, and the largest weight of one
 * (tier_nvme_config.part_weights): a weighted cut leaves less than the
 * weights' sum of 4 KiB pages unused at the file's end. */
#define TIER_NVME_PARTS_MAX 4
#define TIER_NVME_WEIGHT_MAX 1000u

/* The slot header as stored (first bytes of the 4 KiB header block). */
struct tier_nvme_slot_header {
	uint64_t magic;
	uint32_t version;
	uint32_t header_bytes; /* TIER_NVME_HEADER_BYTES */
	uint64_t format_id; /* the superblock's; stale formats are ignored */
	uint64_t slot; /* index of this slot */
	uint64_t hash; /* block identity */
	uint64_t length; /* payload bytes */
	uint64_t generation; /* write order; newest copy of a hash wins */
	uint64_t layout_id; /* region layout the block belongs to */
	uint32_t payload_crc; /* CRC32C of the payload */
	uint32_t header_crc; /* CRC32C of this struct with header_crc = 0 */
	/* the tenant id the block was written for (tier_nvme_io.tenant),
	 * when flags has TIER_NVME_HDR_TENANT: files written before it
	 * existed have zeros, a block of unknown tenant, which every
	 * tenant's drop mark covers (tier_nvme_mark_drop()) */
	uint32_t tenant;
	uint32_t flags;
	uint64_t reserved[5];
};

#define TIER_NVME_HDR_TENANT 0x1u /* tier_nvme_slot_header.tenant is set */

/*
 * A drop an operator made while the tier could not open (kvmmd's
 * cache_drop_pending.c): when it opens, the restart scan leaves out
 * every valid header it covers, as a drop mark's (counted in
 * stats.drop_marked_slots and stats.pending_dropped_slots, the slots
 * stale copies the daemon zeroes), and the open writes the marks the
 * drop would have written, at a generation above every header on disk,
 * before it returns: a later restart leaves them out too.  all: every
 * block; else the n tenants' blocks (and those of headers that name no
 * tenant, which every tenant's mark covers).  A superblock write that
 * fails then fails the open (nothing it covered was handed out); a file
 * formatted anew holds nothing it covers.  So an open that returns 0
 * has applied it.
 */
#define TIER_NVME_PENDING_TENANTS 128 /* TIER_NVME_TENANT_MARKS */
struct tier_nvme_drop_pending {
	bool all;
	uint32_t n;
	uint32_t tenants[TIER_NVME_PENDING_TENANTS];
};

struct tier_nvme_config {
	size_t size; /* sizeof(struct tier_nvme_config) */
	const char *path; /* file (created, fallocated) or block device */
	uint64_t capacity_bytes; /* --nvme-size; 0 = whole block device */
	size_t payload_bytes; /* largest block, multiple of 4 KiB */
	unsigned int queue_depth; /* I/Os in flight, 0 = 8 */
	size_t io_bytes; /* largest single I/O, 0 = 1 MiB */
	/* Memory the payloads live in (the host slab): registered as io_uring
	 * fixed buffers so reads and writes into it skip the per-I/O page
	 * pinning.  Payloads elsewhere still work, unregistered. */
	void *reg_base;
	size_t reg_len;
	bool reformat; /* ignore what is on the disk */
	/*
	 * The cache scope whose hashes the slots are named by (kvmmd's
	 * --cache-scope, scope.h: 0 = shared, the raw client hashes) and its
	 * key.  Kept in the superblock; a file written under another scope or
	 * key is formatted anew, since its hashes name nothing in this one.
	 */
	uint32_t scope;
	uint8_t scope_key[16];
	/*
	 * The file as tier_nvme_claim() opened and locked it (fd_held): the
	 * tier uses that fd and leaves it open, so that the lock stays
	 * while the tier closes and opens again (a close of any fd of the
	 * file drops a POSIX lock).  Without it the tier opens path itself.
	 */
	bool fd_held;
	int fd;
	/*
	 * One partition of the file: kvmmd caching several named block
	 * sizes gives each its own tier in a share of the file (equal
	 * unless part_weights, below, say otherwise)
	 * (capacity_bytes, or a block device's size, cut in part_count
	 * shares of whole 4 KiB pages), partition i at i shares from the
	 * start, each with its own superblock, slots and drop marks.
	 * part_count 0 or 1: the whole file, as before the partitions
	 * (their superblock fields are zeros: files written before them
	 * open unchanged).  A partition's blocks are kept only when its
	 * superblock names the same partition of the same layout
	 * (index, count, share, and partition 0's layout id, layout_id
	 * here for the others: tier_nvme_layout_id() of partition 0 as
	 * this run opened it); else it is formatted anew.  layout_id 0
	 * for a later partition: partition 0's tier is not open in this
	 * process, and the id is read from its superblock, which is
	 * written first (no slot of partition 0 in it yet) when it does
	 * not name this cut of the file; no other tier may be open on
	 * partition 0 then.  Partition 0 formatted where its superblock
	 * names this cut keeps its layout id (and the others' blocks).
	 */
	uint32_t part_index;
	uint32_t part_count;
	uint64_t layout_id;
	/*
	 * The partitions' weights, in partition order (kvmmd's
	 * --cache-block-pages N:W, each from 1 to TIER_NVME_WEIGHT_MAX):
	 * all zeros, or all equal, is the equal cut above, byte for byte;
	 * else the file is cut in units of whole 4 KiB pages, a unit being
	 * the bytes over the weights' sum (reduced by their gcd), partition
	 * i taking weight i units after the units of those before it
	 * (tier_nvme_weights_pack(), nvme_cut_partition()).  Kept in every
	 * partition's superblock; a file cut with other weights is not the
	 * same cut (formatted anew, a new layout id).
	 */
	uint32_t part_weights[TIER_NVME_PARTS_MAX];
	/* a drop answered while the tier was out, or NULL (above) */
	const struct tier_nvme_drop_pending *pending_drop;
};

struct tier_nvme_stats {
	uint64_t slot_bytes; /* stride on disk, header included */
	uint64_t payload_bytes;
	uint64_t capacity_slots;
	uint64_t capacity_bytes;
	uint64_t used_slots; /* FILLING + READY */
	uint64_t reserved_slots; /* free, set aside: tier_nvme_reserve() */
	uint64_t ready_slots;
	uint64_t peak_used_slots;
	uint64_t recovered_slots; /* READY after the last open */
	uint64_t writes; /* blocks written */
	uint64_t reads; /* blocks read and verified */
	uint64_t bytes_written; /* payload bytes */
	uint64_t bytes_read;
	uint64_t dedup_hits; /* write of a hash already READY */
	uint64_t alloc_failures; /* -ENOSPC: the disk cap */
	uint64_t write_errors;
	uint64_t read_errors; /* I/O errors, short reads */
	/* slots dropped because their reads failed (read_errors) several
	 * times in a row (tier_nvme_priv.h: NVME_READ_FAILURES_MAX) */
	uint64_t read_error_drops;
	uint64_t checksum_failures; /* payload CRC mismatch: slot dropped */
	uint64_t header_failures; /* bad header on read or at recovery */
	/* valid headers the restart's scan left out: their blocks were
	 * written before a drop mark that covers them (tier_nvme_mark_drop()) */
	uint64_t drop_marked_slots;
	/* of those, the ones the open's pending drop covered (its marks
	 * written by that open: tier_nvme_config.pending_drop) */
	uint64_t pending_dropped_slots;
	uint64_t frees;
	/* headers zeroed by tier_nvme_invalidate_batch(), and those whose
	 * write (or the sync after it) failed */
	uint64_t invalidations;
	uint64_t invalidate_errors;
	/* headers written again above a drop mark by
	 * tier_nvme_restamp_batch(), and those whose write or sync failed */
	uint64_t restamps;
	uint64_t restamp_errors;
	uint64_t submits; /* io_uring_submit calls */
	uint64_t sqes; /* I/Os issued */
	/* the completion thread's time in the kernel waiting for
	 * completions, and of it the waits it began with queue_depth payload
	 * I/Os in flight: the ring full as the tier sees it, up to the
	 * thread's return (a wake-up late on a busy machine counts too);
	 * bench/nvme-tier.c compares it with the time the disk was busy */
	uint64_t ring_wait_ns;
	uint64_t ring_wait_full_ns;
	/* of the caller's registered region (reg_base): bytes in 2 MiB pages
	 * after open, so that an I/O is a few DMA segments (tier_nvme.c) */
	uint64_t reg_huge_bytes;
	bool registered_buffers;
};

/* One block in a batch. */
struct tier_nvme_io {
	uint64_t hash;
	uint64_t layout_id; /* write: stored; read: returned */
	void *buf; /* payload, 4 KiB aligned */
	uint64_t length; /* payload bytes (read: from lookup) */
	uint32_t slot; /* write: set; read: which slot to read */
	/* buf is preceded by TIER_NVME_HEADER_BYTES this call may use (the
	 * host tier's headroom): header and payload then move in one I/O.
	 * Without it the header takes an I/O of its own. */
	bool headroom;
	/* write: takes a slot tier_nvme_reserve() set aside (the reservation
	 * is used up whatever the write does: dedup, failure) */
	bool reserved;
	/* write: the header's generation, from tier_nvme_next_generation();
	 * 0: the next one when the write runs */
	uint64_t generation;
	/* write: the tenant id the header names (a drop mark of that
	 * tenant covers the block; TIER_NVME_NOBODY: no tenant's) */
	uint32_t tenant;
	int result; /* 0 or -errno: -ENOSPC full, -EBADMSG corrupt,
		     * -EEXIST already being written, -EIO */
	/* read: the tier dropped the block (it failed a check, -EBADMSG, or
	 * its reads failed with an I/O error too many times in a row): the
	 * slot no longer holds it and may soon hold another block, so the
	 * caller forgets the slot (never frees it).  Set whatever result. */
	bool dropped;
};

struct tier_nvme;

/* -EOPNOTSUPP when O_DIRECT is impossible there (tmpfs); -ENOTSUP when
 * built without liburing. */
int tier_nvme_open(const struct tier_nvme_config *cfg, struct tier_nvme **out);
/* Whether the tier cfg would open has a slot (0), or -EINVAL with
 * tier_nvme_open()'s line; reads the held fd's size, writes nothing
 * (cfg->fd_held required). */
int tier_nvme_check_size(const struct tier_nvme_config *cfg);
/*
 * At kvmmd's start, before the block size is known: open path (created
 * if missing), take the lock the tier keeps (another kvmmd's tier on it:
 * -EBUSY), check that it takes O_DIRECT (-EOPNOTSUPP), and that it holds
 * nothing but a kvmm tier: a file or device whose first 4 KiB are not
 * zeros nor a kvmm superblock is refused (-ENOTEMPTY) unless format_any.
 * 0 with *fd, for tier_nvme_config.fd; each failure logs one line.
 */
int tier_nvme_claim(const char *path, bool format_any, int *fd);
/*
 * Remove the regular file fd is open on, which path names (through
 * symbolic links: the file they lead to goes, the links stay, as they
 * were before the file was made); call it while fd holds the lock.  0,
 * -ESTALE when path no longer leads to that file (nothing removed), or
 * -errno.
 */
int tier_nvme_unmake(int fd, const char *path);
/* What a tier file's superblock says (tier_nvme_peek). */
struct tier_nvme_peek {
	uint64_t payload_bytes; /* the size of the blocks it holds */
	uint32_t scope; /* tier_nvme_config.scope it was written under */
	uint8_t scope_key[16];
	/* its drop marks (tier_nvme_mark_drop()): every block of a smaller
	 * generation is dropped (0: none), and tenants with a mark */
	uint64_t drop_all;
	uint32_t tenant_marks;
	/* the partitions it is cut in (tier_nvme_config.part_count; 0 or
	 * 1: one, the whole file), the bytes of each, which one this
	 * superblock is and the layout id of the cut (0: none) */
	uint32_t part_count;
	uint64_t part_bytes;
	uint32_t part_index;
	uint64_t layout_id;
	/* the cut's weights, tier_nvme_weights_pack()'s (0: equal) */
	uint64_t part_weights;
};

/*
 * The partitions' weights as a superblock keeps them: 0 when there are
 * fewer than 2, or all are equal (the equal cut, as files written before
 * the weights say); else each divided by their greatest common divisor,
 * 16 bits a partition, partition 0's lowest.  -EINVAL (as a u64 never
 * is: UINT64_MAX) for a weight 0 or above TIER_NVME_WEIGHT_MAX among
 * nonzero ones, or more than TIER_NVME_PARTS_MAX partitions.
 */
uint64_t tier_nvme_weights_pack(const uint32_t *weights, uint32_t n);
/* Partition i's weight in a packed cut (1 for the equal cut). */
uint32_t tier_nvme_weight_of(uint64_t packed, uint32_t i);
/* Whether a superblock's packed weights are a cut of n partitions
 * (tier_nvme_weights_pack()'s, 0 included): check before
 * tier_nvme_part_base() on weights read from disk. */
bool tier_nvme_weights_valid(uint64_t packed, uint32_t n);
/* Where partition i of the cut partition 0's superblock names (peek of
 * the file's start: its part_bytes, part_count, part_weights) starts;
 * its weights tier_nvme_weights_valid(). */
uint64_t tier_nvme_part_base(const struct tier_nvme_peek *part0, uint32_t i);

/*
 * Read a tier file's superblock (no O_DIRECT, nothing written): 0,
 * -ENOENT (no file), -ENODATA (no valid superblock).  Call it before this
 * process opens the tier: the close of its own fd would drop the open
 * tier's lock.
 */
int tier_nvme_peek(const char *path, struct tier_nvme_peek *out);
/* tier_nvme_peek() on a claimed fd (peek's own close would drop the
 * lock): 0, -ENODATA. */
int tier_nvme_peek_fd(int fd, struct tier_nvme_peek *out);
/* The same for the superblock at offset (a partition's start, a
 * multiple of 4 KiB): 0, -ENODATA, -EINVAL (offset not aligned). */
int tier_nvme_peek_at(int fd, uint64_t offset, struct tier_nvme_peek *out);
void tier_nvme_close(struct tier_nvme *t);

/*
 * Write n blocks.  Each gets a slot (a hash already READY with the same
 * layout_id and length is not written again: its slot is returned and
 * dedup_hits counted; one still being written by another batch, or READY
 * in another layout or length, fails with -EEXIST), its header and payload
 * are written with up to queue_depth I/Os in flight across this and the
 * other batches in progress, and it becomes READY when both completed.  Returns how many
 * blocks failed; each io's result says why.
 */
int tier_nvme_write_batch(struct tier_nvme *t, struct tier_nvme_io *ios,
			  unsigned int n);
/*
 * Read n READY blocks (io.slot, io.hash set; io.length from lookup) into
 * io.buf and verify header and payload CRC.  A block that fails is
 * dropped from the tier (-EBADMSG).  A read that fails with an I/O error
 * (-EIO, a short read, any -errno of the device) leaves the block READY
 * for another try, unless its reads failed NVME_READ_FAILURES_MAX times
 * in a row: then it is dropped too (the read's result is still its
 * -errno).  io.dropped says when a block was.  Returns how many blocks
 * failed.
 */
int tier_nvme_read_batch(struct tier_nvme *t, struct tier_nvme_io *ios,
			 unsigned int n);

/*
 * Forget n blocks for good whose slots tier_nvme_invalidate_claim()
 * claimed (io.slot, io.hash set; out of use since the claim: lookups miss
 * them, a write of their hash waits for them): each 4 KiB header is
 * written as zeros through the same queue as every other I/O, and the
 * slot is FREE when that write ended, whatever its result: a restart's
 * scan (tier_nvme_recover.c) takes a zeroed header for a slot never
 * written.  io.result: 0; -ENOENT (not claimed with that hash), -EINVAL:
 * nothing written, the slot as it was; or the write's -errno: the slot is free, but its old
 * header may still be on disk (a stale copy, tier_nvme_stale_claim()).  io.dropped: the slot was taken (free
 * now).  Fsyncs the file after the writes (the device's cache), so a
 * dropped block stays dropped across a power loss too; a failed sync
 * fails every io of the batch.  Returns how many failed.
 */
int tier_nvme_invalidate_batch(struct tier_nvme *t, struct tier_nvme_io *ios,
			       unsigned int n);
/*
 * Write the header of each io's READY slot (io.slot, io.hash set) again,
 * the same block with io.generation (from tier_nvme_next_generation(),
 * taken when the caller queued it; 0: the next one now): a block an
 * operator's drop kept, whose header was written below the drop's mark
 * (tier_nvme_mark_drop()), so that a restart's scan recovers it.  Only
 * the 4 KiB header moves (the payload and its CRC stay); reads of the
 * slot wait for it, and a free or an invalidation's claim of it
 * meanwhile is carried out once it ended.  A header of no known tenant
 * stays so (every tenant's mark covers it).  Fsyncs the file after the
 * writes; a failed sync fails every io that wrote.  io.result: 0 (also
 * when the slot's generation is io.generation or above already: written
 * since, nothing to do); -ENOENT (not READY with that hash: freed,
 * dropped, claimed), -EINVAL: nothing written; or the write's -errno:
 * the header on disk may be the old one, the new one, or neither (a torn
 * write fails its CRC at a restart: the block is lost there, never
 * another served); the slot stays READY for the run whatever it was, its
 * reads accepting either generation.  Returns how many failed.
 */
int tier_nvme_restamp_batch(struct tier_nvme *t, struct tier_nvme_io *ios,
			    unsigned int n);
/*
 * Take READY slot (holding hash) out of use now for an invalidation to
 * come (an operator drop, whose job a worker runs later): FILLING, so a
 * lookup or read misses it and a write of its hash waits for it instead
 * of deduplicating onto a slot about to be zeroed and freed.
 * tier_nvme_invalidate_batch() takes only slots claimed so.
 * 0; -EINVAL (no such slot), -ENOENT (not READY with that hash), -EBUSY
 * (a read of it in flight): the slot as it was.
 */
int tier_nvme_invalidate_claim(struct tier_nvme *t, uint32_t slot,
			       uint64_t hash);
/* A claimed slot whose invalidation never ran (its job failed before the
 * tier took it, was cancelled, or never submitted): free it, in memory
 * only, as tier_nvme_free() does (a stale copy again, of the tenant it
 * had if it was one).  0; -EINVAL (no such slot), -ENOENT
 * (not claimed, or taken by an invalidation already): nothing done. */
int tier_nvme_invalidate_unclaim(struct tier_nvme *t, uint32_t slot);

/*
 * Set a free slot aside for a write to come (tier_nvme_io.reserved), so
 * the caller decides when the write is queued whether it will find a
 * slot: 0, or -ENOSPC when every free slot is taken or set aside.  A
 * write without a reservation never takes a slot set aside.  A
 * reservation no write used goes back with tier_nvme_unreserve().
 */
int tier_nvme_reserve(struct tier_nvme *t);
void tier_nvme_unreserve(struct tier_nvme *t);
/*
 * Take the next write generation now (tier_nvme_io.generation): writes
 * then carry the order their caller queued them in, not the order
 * worker threads happened to run them, so the oldest written is what
 * the caller sent down first (restarts evict recovered blocks oldest
 * first).
 */
uint64_t tier_nvme_next_generation(struct tier_nvme *t);
/* READY slot holding hash: 0, or -ENOENT. */
int tier_nvme_lookup(struct tier_nvme *t, uint64_t hash, uint32_t *slot,
		     uint64_t *length, uint64_t *layout_id);
/* READY -> FREE, in memory only (its header stays on disk: a stale
 * copy, nobody's); -EBUSY while a read of the slot is in flight. */
int tier_nvme_free(struct tier_nvme *t, uint32_t slot);
/* No tenant (struct tier_nvme_stale.tenant): a tenant id never matches
 * it (the value of KVMM_TENANT_OTHERS, which names no tenant). */
#define TIER_NVME_NOBODY UINT32_MAX
/* tier_nvme_free(), the stale copy remembered as tenant's (a uid or gid,
 * the caller's ids; TIER_NVME_NOBODY: none). */
int tier_nvme_free_tenant(struct tier_nvme *t, uint32_t slot, uint32_t tenant);

/* A stale copy claimed by tier_nvme_stale_claim(). */
struct tier_nvme_stale {
	uint64_t hash; /* the block its header names */
	uint32_t slot;
	uint32_t tenant; /* tier_nvme_free_tenant()'s, or TIER_NVME_NOBODY */
};

/*
 * Claim for invalidation every stale copy match() accepts (called under
 * the tier's lock, once or twice per stale slot: no tier call from it):
 * free slots whose header on disk may still name a block (freed in
 * memory only: tier_nvme_free(), a failed write or invalidation, a read
 * the tier dropped, the older of two copies a restart found), which a
 * restart would recover.  Each is taken off the free stack, FILLING and
 * claimed as tier_nvme_invalidate_claim() claims one (no write takes it
 * until tier_nvme_invalidate_batch() with its slot and hash, or
 * tier_nvme_invalidate_unclaim(), frees it; a write of its hash takes
 * another slot, whose newer generation wins at a restart anyway).  The
 * free slots set aside for reserved writes are left: *left counts the
 * matching copies not claimed for that.  *out (malloc'ed, NULL when *n
 * is 0) gets the *n claimed.  0, or -ENOMEM (nothing claimed).
 */
int tier_nvme_stale_claim(struct tier_nvme *t,
			  bool (*match)(void *arg, uint64_t hash,
					uint32_t tenant),
			  void *arg, struct tier_nvme_stale **out, uint32_t *n,
			  uint32_t *left);
/*
 * tier_nvme_stale_claim() of the slots the restart's scan left out under
 * a drop mark (stats.drop_marked_slots) and that are still free, not
 * written again: their headers stay valid on disk, and each later
 * restart read and counted them again.  The caller zeroes them with
 * tier_nvme_invalidate_batch() (or gives a slot back with
 * tier_nvme_invalidate_unclaim(): marked still, for the next start).
 * A drop's claim may take them too (they are stale copies, nobody's).
 */
int tier_nvme_marked_claim(struct tier_nvme *t, struct tier_nvme_stale **out,
			   uint32_t *n, uint32_t *left);
/*
 * Drop marks: what makes an operator's drop stick on disk, whatever
 * becomes of the header writes of tier_nvme_invalidate_batch() (a crash
 * before they ran, an I/O error).  The superblock says "every slot
 * written with a generation below G is dropped", for every block or for
 * one tenant's (the tenant the header names; a header of no known
 * tenant, from a file written before, is every tenant's), and a restart's
 * scan leaves those slots free (stats.drop_marked_slots).  Within a run
 * a mark only rises; the generations of later writes start above every
 * mark, in this run and after a restart.  A start whose scan finds no
 * valid header below a mark retires it (tier_nvme_mark.c).
 *
 * tier_nvme_drop_generation(): the G for a drop now: every block written
 * or being written has a smaller generation.  tier_nvme_mark_drop():
 * record it (of tenant, or of every block when all) and write the
 * superblock (O_DIRECT, then fdatasync): 0 once it is durable, or the
 * write's -errno (the mark stays in memory, and the next superblock
 * write carries it).  Blocking: not for the daemon's loop thread.  At
 * most TIER_NVME_TENANT_MARKS tenants have a mark of their own; one more
 * raises the mark of every block to the lowest of theirs (more dropped,
 * never fewer).
 */
#define TIER_NVME_TENANT_MARKS 128
uint64_t tier_nvme_drop_generation(struct tier_nvme *t);
int tier_nvme_mark_drop(struct tier_nvme *t, bool all, uint32_t tenant,
			uint64_t generation);
enum tier_slot_state tier_nvme_slot_state(struct tier_nvme *t, uint32_t slot);
/* The write order of a READY slot's block (its header's generation,
 * recovered at open; later writes have larger ones), 0 otherwise. */
uint64_t tier_nvme_slot_generation(struct tier_nvme *t, uint32_t slot);
/* Call fn for every READY slot (the daemon rebuilds its block index from
 * this after a restart), with the tenant its header names
 * (TIER_NVME_NOBODY: a header from before the tenants); stops early when
 * fn returns non-zero. */
int tier_nvme_foreach(struct tier_nvme *t,
		      int (*fn)(void *arg, uint32_t slot, uint64_t hash,
				uint64_t length, uint64_t layout_id,
				uint32_t tenant),
		      void *arg);
/* Make what was written durable (fdatasync: the device's write cache, and
 * the file's extents that O_DIRECT writes turned from preallocated to
 * written): writes are not synced one by one; a daemon's stop is. */
int tier_nvme_sync(struct tier_nvme *t);
/* Byte offset of a slot's header in the file (tests corrupt it). */
uint64_t tier_nvme_slot_offset(struct tier_nvme *t, uint32_t slot);
/* Where the tier's partition starts in the file, and its bytes. */
void tier_nvme_partition(struct tier_nvme *t, uint64_t *base, uint64_t *bytes);
/* The file's layout id, which partition 0 keeps in its superblock
 * (tier_nvme_config.layout_id of the other partitions); 0 for a tier
 * that has the whole file. */
uint64_t tier_nvme_layout_id(struct tier_nvme *t);
void tier_nvme_get_stats(struct tier_nvme *t, struct tier_nvme_stats *st);

/*
 * The tier's test knobs' values (tier_nvme_fault.c), parsed by the tier
 * at each open and by kvmmd's check at start (test_knob.c) with the one
 * grammar: KVMMD_TEST_NVME_SCAN_FAIL=N[,N...] and
 * KVMMD_TEST_NVME_CLEAR_FAIL=N[,N...], slot numbers below UINT32_MAX, at
 * most TIER_NVME_SCAN_FAIL_MAX, into slots[] (*n of them);
 * KVMMD_TEST_NVME_RETIRE_FAIL=sync|superblock.  0, or -EINVAL.
 * KVMMD_TEST_NVME_CLEAR_SYNC_FAIL and KVMMD_TEST_NVME_RESIZE_FAIL are
 * flags, "1" (on) or "0" (off, as unset): the table's own grammar
 * (KD_KNOB_FLAG), read by the tier with tier_nvme_flag_parse().
 */
#define TIER_NVME_SCAN_FAIL_MAX 16
int tier_nvme_scan_fail_parse(const char *v,
			      uint32_t slots[TIER_NVME_SCAN_FAIL_MAX],
			      uint32_t *n);
int tier_nvme_retire_fail_parse(const char *v, bool *sync, bool *superblock);
int tier_nvme_flag_parse(const char *v, bool *on);

#endif
