/* SPDX-License-Identifier: MIT */
/*
 * Migration engine: moves blocks between the GPU page pool, the host tier
 * and the NVMe tier on worker threads, overlapped with the daemon's event
 * loop, and reports completions through an eventfd the loop watches.
 *
 * A job is one block moving along one path:
 *
 *   GPU_TO_HOST   pool pages -> a FILLING host slot (demotion)
 *   HOST_TO_NVME  a READY host slot -> a new NVMe slot (demotion)
 *   NVME_TO_HOST  an NVMe slot -> a FILLING host slot (promotion)
 *   HOST_TO_GPU   a READY host slot -> fresh pool pages (restore)
 *   NVME_TO_GPU   an NVMe slot -> a FILLING host slot (staging) -> pages
 *   NVME_INVALIDATE  a READY NVMe slot's header zeroed on disk, the slot
 *                 freed (a block an operator dropped: no restart finds
 *                 it; tier_nvme_invalidate_batch())
 *   NVME_MARK     an operator drop's mark written to the NVMe tier's
 *                 superblock and synced (tier_nvme_mark_drop()): no
 *                 block, no slot
 *   NVME_RESTAMP  the header of a READY NVMe slot a drop kept written
 *                 again above the drop's mark, and synced
 *                 (tier_nvme_restamp_batch()): a restart recovers it
 *
 * Job states: QUEUED -> RUNNING -> DONE | FAILED, or QUEUED -> CANCELLED.
 * A job is the caller's from migrate_job_new() to migrate_submit(), the
 * engine's until it is returned by migrate_reap(), then the caller's again
 * (migrate_job_free()).  Ownership of what a job touches:
 *   - sources (pages, READY slots) are read only, and must stay valid until
 *     the job is reaped; the engine never frees them;
 *   - a destination host slot is allocated FILLING by the caller; the
 *     engine publishes it READY when the copy completed (so a block is
 *     never readable in a tier before its copy is complete) and frees it
 *     when the job fails or is cancelled (host_slot becomes
 *     MIGRATE_NO_SLOT);
 *   - an NVMe destination slot is allocated by the NVMe tier and set in
 *     nvme_slot on success (from the caller's reservation when
 *     nvme_reserved);
 *   - destination pages belong to the caller throughout.
 *
 * GPU page reuse.  A page that held a demoted block may go back to the free
 * list only when its copy-out is DONE and every client that mapped it has
 * unmapped it (the revocation handshake).  The job carries that second
 * condition too: the daemon calls migrate_job_revokes_posted() when it
 * posts the revokes and migrate_job_revoke_done() for each acknowledgement
 * (or session that died), and migrate_evict_state() says where the pages
 * stand; only MIGRATE_EVICT_REUSABLE allows vmm_pool_free().
 *
 * Jobs run FIFO; consecutive NVMe jobs of the same direction are batched
 * into one tier_nvme batch so several are in flight.
 */
#ifndef KVMM_KVMMD_MIGRATE_H
#define KVMM_KVMMD_MIGRATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vmm/vmm.h"

struct tier_host;
struct tier_nvme;
struct migrate;

#define MIGRATE_NO_SLOT UINT32_MAX

enum migrate_kind {
	MIGRATE_GPU_TO_HOST = 0,
	MIGRATE_HOST_TO_NVME,
	MIGRATE_NVME_TO_HOST,
	MIGRATE_HOST_TO_GPU,
	MIGRATE_NVME_TO_GPU,
	/* from here on the kinds move no bytes (no probe, no delay) */
	MIGRATE_NVME_INVALIDATE,
	MIGRATE_NVME_MARK,
	MIGRATE_NVME_RESTAMP,
	MIGRATE_KIND_COUNT,
};

enum migrate_state {
	MIGRATE_QUEUED = 0,
	MIGRATE_RUNNING,
	MIGRATE_DONE,
	MIGRATE_FAILED,
	MIGRATE_CANCELLED,
};

enum migrate_evict_state {
	MIGRATE_EVICT_COPYING_MAPPED, /* copy running, clients still map */
	MIGRATE_EVICT_COPYING, /* copy running, every client unmapped */
	MIGRATE_EVICT_MAPPED, /* copy done, waiting for unmaps */
	MIGRATE_EVICT_REUSABLE, /* copy done, no mapper: pages may be freed */
	MIGRATE_EVICT_ABORTED, /* copy failed: the block stays on the GPU */
};

const char *migrate_kind_string(enum migrate_kind kind);

/*
 * Tests only (kvmmd: KVMMD_TEST_MIGRATE_FAIL, Documentation/tiers.md): the
 * nth job of a kind a worker takes (1 for the first, counted from
 * migrate_open(); a job cancelled before it ran is not counted) ends
 * FAILED with -EIO where that kind's copy would have failed (the GPU copy,
 * the NVMe write or read), copying nothing; the rest of the job's path
 * (freeing a destination host slot, the reap) runs as for a real error.
 */
#define MIGRATE_FAULTS_MAX 8

struct migrate_fault {
	enum migrate_kind kind;
	uint64_t nth; /* >= 1 */
	uint64_t last; /* >= nth: jobs nth..last fail (UINT64_MAX: all on) */
	/* 0: every engine's jobs; else those of the cache of blocks of
	 * this many pages alone.  The engine does not read it: kvmmd gives
	 * each size's engine the entries that are its (kc_test_faults()) */
	uint32_t block_pages;
};

/*
 * Parse "KIND:N[@PAGES][,KIND:N[@PAGES]...]" (KIND: gpu-host, host-nvme,
 * nvme-host, host-gpu, nvme-gpu, nvme-invalidate, nvme-mark,
 * nvme-restamp; N >= 1; at most MIGRATE_FAULTS_MAX entries) into
 * f[] and *n.  N-M fails the N-th to the M-th job of the kind (M >= N),
 * N+ every one from the N-th on (a device that keeps failing).  @PAGES
 * (an even number >= 2) fails them in the engine of the cache of blocks
 * of PAGES pages alone (block_pages), where an entry without it fails
 * them in each size's engine.  -EINVAL with a message in err (errlen
 * bytes) for anything else, an empty string included.
 */
int migrate_fault_parse(const char *spec, struct migrate_fault *f,
			unsigned int *n, char *err, size_t errlen);
/* The KIND names the knob takes, comma-separated, into buf (truncated to
 * len; MIGRATE_FAULT_KINDS_LEN holds them all). */
#define MIGRATE_FAULT_KINDS_LEN 160
void migrate_fault_kinds(char *buf, size_t len);
/* err's size that holds every message of migrate_fault_parse(): the kinds
 * and the entry named (its first 200 bytes) */
#define MIGRATE_FAULT_ERR_LEN 512
const char *migrate_state_string(enum migrate_state state);
const char *migrate_evict_state_string(enum migrate_evict_state state);

struct migrate_page {
	uint32_t page_id; /* the pool's id (the engine does not use it) */
	vmm_handle_t handle; /* what the copy uses */
};

struct migrate_job {
	/* set by the caller */
	enum migrate_kind kind;
	uint64_t hash;
	uint64_t layout_id;
	uint64_t length; /* bytes: npages * page size */
	uint32_t host_slot; /* source or destination (staging for NVME_TO_GPU) */
	uint32_t nvme_slot; /* source; destination set on success */
	/* HOST_TO_NVME: the caller reserved the destination slot
	 * (tier_nvme_reserve()); the engine's write uses it up and clears
	 * this.  Still set when reaped: the job never wrote (failed before,
	 * cancelled): the caller gives the reservation back. */
	bool nvme_reserved;
	/* HOST_TO_NVME: the header's generation (tier_nvme_next_generation()
	 * when the caller queued it; 0: when the write runs).  NVME_MARK:
	 * the mark's.  NVME_RESTAMP: the header's new one, taken when the
	 * caller queued it */
	uint64_t nvme_generation;
	/* HOST_TO_NVME: the block's tenant id, which its header names.
	 * NVME_MARK: the tenant whose blocks below nvme_generation are
	 * dropped, TIER_NVME_NOBODY: every block */
	uint32_t nvme_tenant;
	/* NVME_INVALIDATE: the slot is a stale copy (tier_nvme_stale_claim()),
	 * not a dropped block's own slot (the engine does not look) */
	bool nvme_stale;
	void *owner; /* the caller's cookie */
	/* set by the engine (read after reap, or under no lock when DONE) */
	enum migrate_state state;
	int result; /* 0 or -errno */
	/* NVME_TO_*: the NVMe tier dropped the source block while reading
	 * it (tier_nvme_io.dropped: a failed check, -EBADMSG, or reads that
	 * kept failing): nvme_slot names nothing now; never free it.
	 * NVME_INVALIDATE: the tier took the slot (free now, whatever the
	 * result); when false, the slot is as it was (the caller frees it) */
	bool nvme_dropped;
	uint64_t submit_ns, start_ns, end_ns;
	/* revocation gate (loop thread only) */
	unsigned int revokes_pending;
	bool revokes_posted;
	/* engine internal */
	struct migrate_job *next;
	bool fault; /* tests: fails with -EIO, nothing copied */
	unsigned int npages;
	struct migrate_page pages[];
};

struct migrate_config {
	size_t size; /* sizeof(struct migrate_config) */
	struct vmm_backend *backend; /* the pool's backend (GPU copies) */
	struct tier_host *host;
	struct tier_nvme *nvme; /* NULL: no NVMe tier */
	unsigned int workers; /* 0 = 1 */
	unsigned int nvme_batch; /* NVMe jobs per batch, 0 = 8 */
	/* > 0: copy through mappings of the pool's pages in the daemon's
	 * own address space (one reservation of map_pages pages, indexed by
	 * page id, each page mapped on first use and kept), with the
	 * backend's VA copies (cuda: its stream; host: memcpy).  0: the
	 * backend's by-handle copy helpers (no mapping; host: pread/pwrite
	 * on the memfd, several times slower). */
	uint32_t map_pages;
	/* Tests only: each batch of restores (HOST_TO_GPU, NVME_TO_GPU),
	 * or of demotions (GPU_TO_HOST, HOST_TO_NVME), sleeps this long
	 * before it runs, so a test can hold one in flight (kvmmd:
	 * KVMMD_TEST_RESTORE_DELAY_MS, KVMMD_TEST_DEMOTE_DELAY_MS).  0 in
	 * production.  KVMMD_TEST_NVME_WRITE_DELAY_MS, which migrate_open()
	 * reads itself (the tiers' set-up is left alone), gives HOST_TO_NVME
	 * batches a delay of their own instead, so a test can hold a write
	 * in flight across a block's whole way back down. */
	uint32_t restore_delay_us;
	uint32_t demote_delay_us;
	/* Tests only: jobs made to fail (see migrate_fault_parse()). */
	struct migrate_fault faults[MIGRATE_FAULTS_MAX];
	unsigned int nfaults;
};

struct migrate_path_stats {
	uint64_t jobs; /* completed DONE */
	uint64_t failed;
	uint64_t cancelled;
	uint64_t bytes;
	uint64_t busy_ns; /* sum of run times */
};

struct migrate_stats {
	struct migrate_path_stats path[MIGRATE_KIND_COUNT];
	uint64_t queued; /* now */
	uint64_t running; /* now */
	uint64_t completed_unreaped; /* now */
	uint64_t nvme_batches;
	uint64_t pages_mapped; /* mapping cache: pages mapped now */
};

int migrate_open(const struct migrate_config *cfg, struct migrate **out);
/*
 * Stop: queued jobs are cancelled, running ones finish, workers exit.
 * Jobs not yet reaped are released (their destination host slots freed as
 * for a failure) and freed.  Call migrate_reap() first to see them.
 */
void migrate_close(struct migrate *m);
/* Cancel everything queued and wait for running jobs; completions stay
 * reapable.  Submissions afterwards get -ESHUTDOWN. */
void migrate_shutdown(struct migrate *m);

/*
 * Give an engine opened without an NVMe tier (migrate_config.nvme NULL)
 * the one that opened since (the cache's NVMe tier joining late):
 * -EEXIST when it has one.  Jobs that use it may be submitted from then
 * on; the workers see it through the lock a submission takes.
 */
int migrate_set_nvme(struct migrate *m, struct tier_nvme *nvme);

/* Readable (EFD_NONBLOCK, EFD_CLOEXEC) while completions wait. */
int migrate_eventfd(struct migrate *m);

struct migrate_job *migrate_job_new(enum migrate_kind kind,
				    unsigned int npages);
void migrate_job_free(struct migrate_job *job);

/* Checks the job against the engine's tiers; -EINVAL, -ENODEV (no NVMe
 * tier), -ESHUTDOWN. */
int migrate_submit(struct migrate *m, struct migrate_job *job);
/* Up to max finished jobs (DONE, FAILED, CANCELLED); returns how many. */
unsigned int migrate_reap(struct migrate *m, struct migrate_job **jobs,
			  unsigned int max);
/* A QUEUED job becomes CANCELLED (reaped like any other); -EBUSY when it
 * already runs, -ENOENT when it is not queued. */
int migrate_cancel(struct migrate *m, struct migrate_job *job);

/* The revocation gate of a GPU_TO_HOST job. */
void migrate_job_revokes_posted(struct migrate_job *job, unsigned int n);
void migrate_job_revoke_done(struct migrate_job *job);
enum migrate_evict_state migrate_evict_state(const struct migrate_job *job);

void migrate_get_stats(struct migrate *m, struct migrate_stats *st);

#endif
