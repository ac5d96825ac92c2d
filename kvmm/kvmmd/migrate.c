// SPDX-License-Identifier: MIT
/*
 * Migration engine: a FIFO of jobs under one mutex, worker threads that
 * take a job (or a run of NVMe jobs of one direction, done as one batch),
 * and a completion list signalled through an eventfd.  See migrate.h for
 * the job life cycle and who owns what.  What a job does once a worker
 * has taken it (the copies, the NVMe batches) is in migrate_run.c; the
 * names of kinds and states, and the test knob's parse, in
 * migrate_names.c.
 *
 * job->state is written by workers and read by the loop thread (through
 * migrate_evict_state()) with atomics; everything else in a job is only
 * touched by whoever owns the job at the time.
 */
#include "migrate_priv.h"

#include "tier_host.h"
#include "tier_nvme.h"
#include "test_knob.h"
#include "ebpf/probes.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

/* Whether the job a worker just took is one the test knob fails. */
static bool fault_take(struct migrate *m, struct migrate_job *job)
{
	uint64_t nth = ++m->taken[job->kind];

	for (unsigned int i = 0; i < m->nfaults; i++)
		if (m->faults[i].kind == job->kind && m->faults[i].nth <= nth &&
		    nth <= m->faults[i].last)
			return true;
	return false;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void set_state(struct migrate_job *job, enum migrate_state s)
{
	__atomic_store_n(&job->state, s, __ATOMIC_RELEASE);
}

static enum migrate_state get_state(const struct migrate_job *job)
{
	return __atomic_load_n(&job->state, __ATOMIC_ACQUIRE);
}

struct migrate_job *migrate_job_new(enum migrate_kind kind, unsigned int npages)
{
	struct migrate_job *job;

	job = calloc(1, sizeof(*job) + (size_t)npages * sizeof(job->pages[0]));
	if (!job)
		return NULL;
	job->kind = kind;
	job->npages = npages;
	job->host_slot = MIGRATE_NO_SLOT;
	job->nvme_slot = MIGRATE_NO_SLOT;
	return job;
}

void migrate_job_free(struct migrate_job *job)
{
	free(job);
}

void migrate_job_revokes_posted(struct migrate_job *job, unsigned int n)
{
	job->revokes_posted = true;
	job->revokes_pending += n;
}

void migrate_job_revoke_done(struct migrate_job *job)
{
	if (job->revokes_pending)
		job->revokes_pending--;
}

enum migrate_evict_state migrate_evict_state(const struct migrate_job *job)
{
	enum migrate_state s = get_state(job);
	bool mapped = !job->revokes_posted || job->revokes_pending;

	if (s == MIGRATE_FAILED || s == MIGRATE_CANCELLED)
		return MIGRATE_EVICT_ABORTED;
	if (s != MIGRATE_DONE)
		return mapped ? MIGRATE_EVICT_COPYING_MAPPED :
				MIGRATE_EVICT_COPYING;
	return mapped ? MIGRATE_EVICT_MAPPED : MIGRATE_EVICT_REUSABLE;
}

static bool host_is_dest(enum migrate_kind k)
{
	return k == MIGRATE_GPU_TO_HOST || k == MIGRATE_NVME_TO_HOST ||
	       k == MIGRATE_NVME_TO_GPU;
}

static bool uses_pages(enum migrate_kind k)
{
	return k == MIGRATE_GPU_TO_HOST || k == MIGRATE_HOST_TO_GPU ||
	       k == MIGRATE_NVME_TO_GPU;
}

/* NVMe jobs of one class run as one tier batch: writes, reads (to host
 * or GPU: the same read), invalidations; 0 for the others. */
static int nvme_class(enum migrate_kind k)
{
	switch (k) {
	case MIGRATE_HOST_TO_NVME:
		return 1;
	case MIGRATE_NVME_TO_HOST:
	case MIGRATE_NVME_TO_GPU:
		return 2;
	case MIGRATE_NVME_INVALIDATE:
		return 3;
	case MIGRATE_NVME_RESTAMP:
		return 4;
	default:
		return 0;
	}
}

static bool uses_nvme(enum migrate_kind k)
{
	return nvme_class(k) != 0;
}

/* USDT (ebpf/probes.h): every completed move, and each reload into the
 * GPU as a restore from its source tier (what the cost model learns). */
static void trace_done(const struct migrate_job *job)
{
	/* the arrays below: moves of bytes only (not NVME_INVALIDATE) */
	static const uint8_t from[MIGRATE_KIND_COUNT] = {
		KVMM_TEL_TIER_GPU, KVMM_TEL_TIER_HOST, KVMM_TEL_TIER_NVME,
		KVMM_TEL_TIER_HOST, KVMM_TEL_TIER_NVME
	};
	static const uint8_t to[MIGRATE_KIND_COUNT] = {
		KVMM_TEL_TIER_HOST, KVMM_TEL_TIER_NVME, KVMM_TEL_TIER_HOST,
		KVMM_TEL_TIER_GPU, KVMM_TEL_TIER_GPU
	};
	uint64_t ns = job->end_ns - job->start_ns;

	kvmm_probe_migrate(job->hash, from[job->kind], to[job->kind],
			   job->length, ns);
	if (to[job->kind] == KVMM_TEL_TIER_GPU)
		kvmm_probe_restore(job->hash, from[job->kind], job->length, ns);
}

/* A finished job: release what a failure leaves, count, hand back. */
static void complete_locked(struct migrate *m, struct migrate_job *job,
			    enum migrate_state s)
{
	struct migrate_path_stats *p = &m->st.path[job->kind];

	if (s != MIGRATE_DONE && host_is_dest(job->kind) &&
	    job->host_slot != MIGRATE_NO_SLOT) {
		/* a backend that could not wait for its copies: they may
		 * still land in the slot (GPU to host), or still read it
		 * (an NVMe read's staging slot, READY by then, on its way
		 * to the GPU), so it is never handed out again: out of
		 * use for good, whatever its state */
		if (job->result == -EINPROGRESS)
			vmm_log(VMM_LOG_ERR,
				"migrate: host slot %u kept out of use: copies into it may still be in flight",
				job->host_slot);
		else
			tier_host_free(m->host, job->host_slot);
		job->host_slot = MIGRATE_NO_SLOT;
	}
	job->end_ns = now_ns();
	if (s == MIGRATE_DONE) {
		p->jobs++;
		p->bytes += job->length;
		p->busy_ns += job->end_ns - job->start_ns;
		if (job->kind < MIGRATE_NVME_INVALIDATE)
			trace_done(job);
	} else if (s == MIGRATE_FAILED) {
		p->failed++;
	} else {
		p->cancelled++;
	}
	job->next = NULL;
	if (m->done_tail)
		m->done_tail->next = job;
	else
		m->done_head = job;
	m->done_tail = job;
	m->st.completed_unreaped++;
	set_state(job, s);
}

static void signal_done(struct migrate *m)
{
	uint64_t one = 1;

	if (write(m->efd, &one, sizeof(one)) < 0) {
		/* the counter is saturated: the loop is reading anyway */
	}
}

static void *worker(void *arg)
{
	struct migrate *m = arg;
	struct migrate_job *batch[64];

	pthread_mutex_lock(&m->lock);
	for (;;) {
		unsigned int n = 0;
		bool restore;

		while (!m->stopping && !m->queue_head)
			pthread_cond_wait(&m->wake, &m->lock);
		if (!m->queue_head)
			break; /* stopping and nothing left */
		/* one job, or a run of NVMe jobs going the same way */
		do {
			struct migrate_job *job = m->queue_head;

			m->queue_head = job->next;
			if (!m->queue_head)
				m->queue_tail = NULL;
			job->next = NULL;
			job->start_ns = now_ns();
			job->fault = m->nfaults && fault_take(m, job);
			set_state(job, MIGRATE_RUNNING);
			batch[n++] = job;
		} while (nvme_class(batch[0]->kind) && m->queue_head &&
			 n < m->nvme_batch &&
			 nvme_class(m->queue_head->kind) ==
				 nvme_class(batch[0]->kind));
		m->st.queued -= n;
		m->st.running += n;
		if (n > 1 || uses_nvme(batch[0]->kind))
			m->st.nvme_batches++;
		pthread_mutex_unlock(&m->lock);

		if (batch[0]->kind == MIGRATE_HOST_TO_GPU ||
		    batch[0]->kind == MIGRATE_NVME_TO_GPU) {
			/* the line tells a test that a worker has taken
			 * the restore (it can no longer be called off),
			 * where it had to guess with a sleep */
			if (m->restore_delay_us) {
				vmm_log(VMM_LOG_INFO,
					"migrate: test knob: a restore of %u jobs taken, waiting %u ms (KVMMD_TEST_RESTORE_DELAY_MS)",
					n, m->restore_delay_us / 1000);
				usleep(m->restore_delay_us);
			}
		} else if (batch[0]->kind == MIGRATE_HOST_TO_NVME &&
			   m->nvme_write_delay_us) {
			usleep(m->nvme_write_delay_us);
		} else if (batch[0]->kind < MIGRATE_NVME_INVALIDATE &&
			   batch[0]->kind != MIGRATE_NVME_TO_HOST &&
			   m->demote_delay_us) {
			usleep(m->demote_delay_us);
		}
		switch (batch[0]->kind) {
		case MIGRATE_GPU_TO_HOST:
			batch[0]->result = migrate_run_gpu_to_host(m, batch[0]);
			break;
		case MIGRATE_HOST_TO_GPU:
			batch[0]->result = migrate_run_host_to_gpu(m, batch[0]);
			break;
		case MIGRATE_HOST_TO_NVME:
			migrate_run_nvme_writes(m, batch, n);
			break;
		case MIGRATE_NVME_TO_HOST:
		case MIGRATE_NVME_TO_GPU:
			migrate_run_nvme_reads(m, batch, n);
			break;
		case MIGRATE_NVME_INVALIDATE:
			migrate_run_nvme_invalidations(m, batch, n);
			break;
		case MIGRATE_NVME_MARK:
			batch[0]->result = migrate_run_nvme_mark(m, batch[0]);
			break;
		case MIGRATE_NVME_RESTAMP:
			migrate_run_nvme_restamps(m, batch, n);
			break;
		default:
			batch[0]->result = -EINVAL;
			break;
		}

		restore = batch[0]->kind == MIGRATE_HOST_TO_GPU ||
			  batch[0]->kind == MIGRATE_NVME_TO_GPU;
		pthread_mutex_lock(&m->lock);
		for (unsigned int i = 0; i < n; i++)
			complete_locked(m, batch[i],
					batch[i]->result ? MIGRATE_FAILED :
							   MIGRATE_DONE);
		m->st.running -= n;
		pthread_cond_broadcast(&m->idle);
		signal_done(m);
		/* and once it ended, which a test that stopped the loop
		 * reads where nothing answers on the socket (the jobs are
		 * the loop's to free once completed: restore says what
		 * they were) */
		if (restore && m->restore_delay_us)
			vmm_log(VMM_LOG_INFO,
				"migrate: test knob: a restore of %u jobs done (KVMMD_TEST_RESTORE_DELAY_MS)",
				n);
	}
	pthread_mutex_unlock(&m->lock);
	return NULL;
}

int migrate_open(const struct migrate_config *cfg, struct migrate **out)
{
	struct migrate *m;
	int r;

	if (!cfg || cfg->size < sizeof(*cfg) || !cfg->host)
		return -EINVAL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	pthread_mutex_init(&m->lock, NULL);
	pthread_cond_init(&m->wake, NULL);
	pthread_cond_init(&m->idle, NULL);
	m->backend = cfg->backend;
	m->host = cfg->host;
	m->nvme = cfg->nvme;
	m->nvme_batch = cfg->nvme_batch ? cfg->nvme_batch : 8;
	m->restore_delay_us = cfg->restore_delay_us;
	m->demote_delay_us = cfg->demote_delay_us;
	m->nvme_write_delay_us = kd_test_delay_us(
		"KVMMD_TEST_NVME_WRITE_DELAY_MS", "migrate", "migrations");
	m->nfaults = cfg->nfaults < MIGRATE_FAULTS_MAX ? cfg->nfaults :
							 MIGRATE_FAULTS_MAX;
	memcpy(m->faults, cfg->faults, sizeof(m->faults));
	if (m->nvme_batch > 64)
		m->nvme_batch = 64;
	pthread_mutex_init(&m->map_lock, NULL);
	if (cfg->map_pages) {
		struct vmm_backend *b = cfg->backend;

		if (!b || !b->ops->copy_va_to_host_async ||
		    !b->ops->copy_host_to_va_async) {
			r = -ENOTSUP;
			goto err_free;
		}
		m->map_handle = calloc(cfg->map_pages, sizeof(*m->map_handle));
		m->map_valid = calloc(cfg->map_pages, sizeof(*m->map_valid));
		if (!m->map_handle || !m->map_valid) {
			r = -ENOMEM;
			goto err_free;
		}
		r = b->ops->reserve(b, (size_t)cfg->map_pages * b->page_size,
				    &m->map_base);
		if (r)
			goto err_free;
		m->map_pages = cfg->map_pages;
	}
	m->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (m->efd < 0) {
		r = -errno;
		goto err_unreserve;
	}
	unsigned int nw = cfg->workers ? cfg->workers : 1;
	if (nw > MIGRATE_MAX_WORKERS)
		nw = MIGRATE_MAX_WORKERS;
	for (m->nworkers = 0; m->nworkers < nw; m->nworkers++) {
		r = -pthread_create(&m->workers[m->nworkers], NULL, worker, m);
		if (r)
			goto err_stop;
	}
	*out = m;
	return 0;

err_stop:
	pthread_mutex_lock(&m->lock);
	m->stopping = true;
	pthread_cond_broadcast(&m->wake);
	pthread_mutex_unlock(&m->lock);
	for (unsigned int i = 0; i < m->nworkers; i++)
		pthread_join(m->workers[i], NULL);
	close(m->efd);
err_unreserve:
	if (m->map_pages)
		cfg->backend->ops->free_range(cfg->backend, m->map_base,
					      (size_t)m->map_pages *
						      cfg->backend->page_size);
err_free:
	free(m->map_handle);
	free(m->map_valid);
	pthread_mutex_destroy(&m->map_lock);
	pthread_cond_destroy(&m->idle);
	pthread_cond_destroy(&m->wake);
	pthread_mutex_destroy(&m->lock);
	free(m);
	return r;
}

int migrate_eventfd(struct migrate *m)
{
	return m->efd;
}

int migrate_set_nvme(struct migrate *m, struct tier_nvme *nvme)
{
	int r = 0;

	pthread_mutex_lock(&m->lock);
	if (m->nvme)
		r = -EEXIST;
	else
		m->nvme = nvme;
	pthread_mutex_unlock(&m->lock);
	return r;
}

int migrate_submit(struct migrate *m, struct migrate_job *job)
{
	if (!job || job->kind >= MIGRATE_KIND_COUNT)
		return -EINVAL;
	if (uses_pages(job->kind)) {
		if (!m->backend || !job->npages ||
		    job->length !=
			    (uint64_t)job->npages * m->backend->page_size)
			return -EINVAL;
	}
	if (uses_nvme(job->kind) && !m->nvme)
		return -ENODEV;
	if (job->kind == MIGRATE_NVME_INVALIDATE ||
	    job->kind == MIGRATE_NVME_RESTAMP) {
		/* no host slot, no length: a slot and its hash */
		if (job->nvme_slot == MIGRATE_NO_SLOT)
			return -EINVAL;
	} else if (job->kind == MIGRATE_NVME_MARK) {
		if (!m->nvme) /* a generation and a tenant */
			return -ENODEV;
	} else if (job->host_slot == MIGRATE_NO_SLOT) {
		return -EINVAL;
	}
	if (job->kind < MIGRATE_NVME_INVALIDATE &&
	    job->kind != MIGRATE_NVME_TO_HOST &&
	    job->kind != MIGRATE_NVME_TO_GPU && !job->length)
		return -EINVAL;
	if ((job->kind == MIGRATE_NVME_TO_HOST ||
	     job->kind == MIGRATE_NVME_TO_GPU) &&
	    job->nvme_slot == MIGRATE_NO_SLOT)
		return -EINVAL;
	pthread_mutex_lock(&m->lock);
	if (m->stopping) {
		pthread_mutex_unlock(&m->lock);
		return -ESHUTDOWN;
	}
	job->result = 0;
	job->nvme_dropped = false;
	job->next = NULL;
	job->submit_ns = now_ns();
	set_state(job, MIGRATE_QUEUED);
	if (m->queue_tail)
		m->queue_tail->next = job;
	else
		m->queue_head = job;
	m->queue_tail = job;
	m->st.queued++;
	pthread_cond_signal(&m->wake);
	pthread_mutex_unlock(&m->lock);
	return 0;
}

unsigned int migrate_reap(struct migrate *m, struct migrate_job **jobs,
			  unsigned int max)
{
	unsigned int n = 0;
	uint64_t v;

	/* clear the eventfd first: a completion after this sets it again */
	if (read(m->efd, &v, sizeof(v)) < 0) {
		/* EAGAIN: nothing signalled, the list may still hold jobs */
	}
	pthread_mutex_lock(&m->lock);
	while (n < max && m->done_head) {
		struct migrate_job *job = m->done_head;

		m->done_head = job->next;
		if (!m->done_head)
			m->done_tail = NULL;
		job->next = NULL;
		jobs[n++] = job;
		m->st.completed_unreaped--;
	}
	if (m->done_head)
		signal_done(m); /* more than max waiting: stay readable */
	pthread_mutex_unlock(&m->lock);
	return n;
}

int migrate_cancel(struct migrate *m, struct migrate_job *job)
{
	struct migrate_job **p;
	int r = -ENOENT;

	pthread_mutex_lock(&m->lock);
	if (get_state(job) == MIGRATE_RUNNING) {
		r = -EBUSY;
		goto out;
	}
	for (p = &m->queue_head; *p; p = &(*p)->next) {
		if (*p != job)
			continue;
		*p = job->next;
		if (m->queue_tail == job) {
			m->queue_tail = NULL;
			for (struct migrate_job *q = m->queue_head; q;
			     q = q->next)
				m->queue_tail = q;
		}
		m->st.queued--;
		job->result = -ECANCELED;
		complete_locked(m, job, MIGRATE_CANCELLED);
		signal_done(m);
		r = 0;
		break;
	}
out:
	pthread_mutex_unlock(&m->lock);
	return r;
}

void migrate_shutdown(struct migrate *m)
{
	bool join;

	pthread_mutex_lock(&m->lock);
	join = !m->stopping;
	m->stopping = true;
	while (m->queue_head) {
		struct migrate_job *job = m->queue_head;

		m->queue_head = job->next;
		m->st.queued--;
		job->result = -ECANCELED;
		complete_locked(m, job, MIGRATE_CANCELLED);
	}
	m->queue_tail = NULL;
	signal_done(m);
	pthread_cond_broadcast(&m->wake);
	pthread_mutex_unlock(&m->lock);
	if (!join)
		return;
	for (unsigned int i = 0; i < m->nworkers; i++)
		pthread_join(m->workers[i], NULL);
}

void migrate_close(struct migrate *m)
{
	struct migrate_job *job;

	if (!m)
		return;
	migrate_shutdown(m);
	/* Jobs nobody reaped: a DONE destination host slot is known to no
	 * index, so it goes back too. */
	while ((job = m->done_head)) {
		m->done_head = job->next;
		if (host_is_dest(job->kind) &&
		    job->host_slot != MIGRATE_NO_SLOT)
			tier_host_free(m->host, job->host_slot);
		if (job->kind == MIGRATE_HOST_TO_NVME &&
		    job->nvme_slot != MIGRATE_NO_SLOT && m->nvme)
			tier_nvme_free(m->nvme, job->nvme_slot);
		if (job->nvme_reserved && m->nvme)
			tier_nvme_unreserve(m->nvme);
		free(job);
	}
	if (m->map_pages) {
		struct vmm_backend *b = m->backend;

		for (uint32_t i = 0; i < m->map_pages; i++)
			if (m->map_valid[i])
				b->ops->unmap(b, m->map_base +
							 (uint64_t)i *
								 b->page_size);
		b->ops->free_range(b, m->map_base,
				   (size_t)m->map_pages * b->page_size);
	}
	free(m->map_handle);
	free(m->map_valid);
	pthread_mutex_destroy(&m->map_lock);
	close(m->efd);
	pthread_cond_destroy(&m->idle);
	pthread_cond_destroy(&m->wake);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

void migrate_get_stats(struct migrate *m, struct migrate_stats *st)
{
	pthread_mutex_lock(&m->lock);
	*st = m->st;
	pthread_mutex_unlock(&m->lock);
}