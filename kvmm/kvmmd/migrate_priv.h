/* SPDX-License-Identifier: MIT */
/*
 * Migration engine internals, shared by the files that implement
 * migrate.h:
 *
 *   migrate.c        the engine: the job queue, the worker threads that
 *                    take jobs and complete them, submit, reap, cancel,
 *                    shutdown, close and the stats
 *   migrate_run.c    a job's run on its worker: GPU <-> host copies and
 *                    the NVMe batches
 *   migrate_names.c  kind and state strings, the test knob's parse
 */
#ifndef KVMM_KVMMD_MIGRATE_PRIV_H
#define KVMM_KVMMD_MIGRATE_PRIV_H

#include "migrate.h"

#include <pthread.h>

#define MIGRATE_MAX_WORKERS 16

struct migrate {
	pthread_mutex_t lock; /* queue, done list, stats, stopping */
	pthread_cond_t wake; /* queue not empty or stopping */
	pthread_cond_t idle; /* running dropped */
	struct migrate_job *queue_head, *queue_tail;
	struct migrate_job *done_head, *done_tail;
	bool stopping;
	int efd;
	struct vmm_backend *backend;
	struct tier_host *host;
	struct tier_nvme *nvme;
	unsigned int nvme_batch;
	uint32_t restore_delay_us, demote_delay_us; /* tests: see .h */
	uint32_t nvme_write_delay_us; /* KVMMD_TEST_NVME_WRITE_DELAY_MS */
	struct migrate_fault faults[MIGRATE_FAULTS_MAX]; /* tests: see .h */
	unsigned int nfaults;
	uint64_t taken[MIGRATE_KIND_COUNT]; /* jobs workers took, per kind */
	unsigned int nworkers;
	pthread_t workers[MIGRATE_MAX_WORKERS];
	struct migrate_stats st;
	/* mapping cache (map_pages > 0) */
	pthread_mutex_t map_lock; /* map_handle, map_valid */
	uint32_t map_pages;
	uint64_t map_base;
	vmm_handle_t *map_handle; /* what is mapped at each page id's va */
	bool *map_valid;
};

/* migrate_run.c, on a worker without m->lock: one job (the result
 * returned), or n NVMe jobs of one class as one batch (each job's result
 * set). */
int migrate_run_gpu_to_host(struct migrate *m, struct migrate_job *job);
int migrate_run_host_to_gpu(struct migrate *m, struct migrate_job *job);
void migrate_run_nvme_writes(struct migrate *m, struct migrate_job **jobs,
			     unsigned int n);
void migrate_run_nvme_reads(struct migrate *m, struct migrate_job **jobs,
			    unsigned int n);
void migrate_run_nvme_invalidations(struct migrate *m,
				    struct migrate_job **jobs, unsigned int n);
void migrate_run_nvme_restamps(struct migrate *m, struct migrate_job **jobs,
			       unsigned int n);
/* An NVME_MARK job: its result */
int migrate_run_nvme_mark(struct migrate *m, struct migrate_job *job);

#endif
