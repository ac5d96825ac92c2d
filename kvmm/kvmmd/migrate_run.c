// SPDX-License-Identifier: MIT
/*
 * A migration job's run, on the worker thread that took it (migrate.c),
 * without the engine's lock: the copies between the pool's pages and a
 * host slot (through the daemon's own mappings of the pages when the
 * engine keeps them, map_pages > 0, else the backend's by-handle copies),
 * a destination host slot published READY once its copy is complete, and
 * the NVMe jobs of one class run as one tier_nvme batch (an operator
 * drop's NVME_MARK alone: a superblock write; its NVME_RESTAMPs, headers
 * alone).  A job's result
 * is returned (one job) or set in it (a batch); the engine counts it and
 * hands the job back.
 */
#include "migrate_priv.h"

#include "tier_host.h"
#include "tier_nvme.h"

#include <errno.h>
#include <pthread.h>

/* ---- copies (worker threads, no lock) ---- */

/* The daemon-side address of a pool page, mapping it on first use (or
 * again when the id now names another page). */
static int page_va(struct migrate *m, const struct migrate_page *pg,
		   uint64_t *va)
{
	uint64_t a;
	int r = 0;

	if (pg->page_id >= m->map_pages)
		return -ERANGE;
	a = m->map_base + (uint64_t)pg->page_id * m->backend->page_size;
	pthread_mutex_lock(&m->map_lock);
	if (m->map_valid[pg->page_id] &&
	    m->map_handle[pg->page_id] != pg->handle) {
		m->backend->ops->unmap(m->backend, a);
		m->map_valid[pg->page_id] = false;
		m->st.pages_mapped--;
	}
	if (!m->map_valid[pg->page_id]) {
		r = vmm_map_page(m->backend, a, pg->handle, VMM_PROT_RW);
		if (!r) {
			m->map_valid[pg->page_id] = true;
			m->map_handle[pg->page_id] = pg->handle;
			m->st.pages_mapped++;
		}
	}
	pthread_mutex_unlock(&m->map_lock);
	*va = a;
	return r;
}

static int copy_mapped(struct migrate *m, struct migrate_job *job,
		       unsigned char *host, bool out)
{
	struct vmm_backend *b = m->backend;
	size_t ps = b->page_size;
	int r = 0;

	for (unsigned int i = 0; i < job->npages && !r; i++) {
		uint64_t va;

		r = page_va(m, &job->pages[i], &va);
		if (r)
			break;
		if (out)
			r = b->ops->copy_va_to_host_async(b, host + i * ps, va,
							  ps);
		else
			r = b->ops->copy_host_to_va_async(b, va, host + i * ps,
							  ps);
	}
	/* the copy is complete only once the stream drained; one that
	 * could not wait (-EINPROGRESS) says so whatever failed before */
	if (b->ops->synchronize) {
		int s = b->ops->synchronize(b);

		if (!r || s == -EINPROGRESS)
			r = s;
	}
	return r;
}

static int copy_pages_out(struct migrate *m, struct migrate_job *job,
			  unsigned char *dst)
{
	size_t ps = m->backend->page_size;

	if (m->map_pages)
		return copy_mapped(m, job, dst, true);
	for (unsigned int i = 0; i < job->npages; i++) {
		int r = m->backend->ops->copy_to_host(
			m->backend, dst + i * ps, job->pages[i].handle, 0, ps);

		if (r)
			return r;
	}
	return 0;
}

static int copy_pages_in(struct migrate *m, struct migrate_job *job,
			 const unsigned char *src)
{
	size_t ps = m->backend->page_size;

	if (m->map_pages)
		return copy_mapped(m, job, (unsigned char *)src, false);
	for (unsigned int i = 0; i < job->npages; i++) {
		int r = m->backend->ops->copy_from_host(
			m->backend, job->pages[i].handle, 0, src + i * ps, ps);

		if (r)
			return r;
	}
	return 0;
}

int migrate_run_gpu_to_host(struct migrate *m, struct migrate_job *job)
{
	unsigned char *dst;
	int r;

	if (tier_host_slot_state(m->host, job->host_slot) != TIER_SLOT_FILLING)
		return -EBUSY;
	dst = tier_host_slot_addr(m->host, job->host_slot);
	if (!dst)
		return -ENOENT;
	r = job->fault ? -EIO : copy_pages_out(m, job, dst);
	if (r)
		return r;
	return tier_host_publish(m->host, job->host_slot, job->hash,
				 job->length);
}

int migrate_run_host_to_gpu(struct migrate *m, struct migrate_job *job)
{
	const unsigned char *src =
		tier_host_read_addr(m->host, job->host_slot, job->hash);

	if (!src)
		return -ENOENT;
	return job->fault ? -EIO : copy_pages_in(m, job, src);
}

/*
 * After a batch that left the jobs the test knob fails out: job's io in
 * ios[] (*k counts the ios handed out so far), or NULL for a failed job,
 * whose result is then -EIO, as a failed I/O's would be.
 */
static struct tier_nvme_io *batch_io(struct migrate_job *job,
				     struct tier_nvme_io *ios, unsigned int *k)
{
	if (job->fault) {
		job->result = -EIO;
		return NULL;
	}
	return &ios[(*k)++];
}

/* n HOST_TO_NVME jobs as one batch (a job the test knob fails is left
 * out of it: its write fails with -EIO, as a failed I/O would). */
void migrate_run_nvme_writes(struct migrate *m, struct migrate_job **jobs,
			     unsigned int n)
{
	struct tier_nvme_io ios[n];
	unsigned int k = 0;

	for (unsigned int i = 0; i < n; i++) {
		const void *src = tier_host_read_addr(
			m->host, jobs[i]->host_slot, jobs[i]->hash);

		if (jobs[i]->fault)
			continue;
		ios[k++] = (struct tier_nvme_io){
			.hash = jobs[i]->hash,
			.layout_id = jobs[i]->layout_id,
			.buf = (void *)src,
			.length = jobs[i]->length,
			.headroom = true, /* host slots have it */
			.reserved = jobs[i]->nvme_reserved,
			.generation = jobs[i]->nvme_generation,
			.tenant = jobs[i]->nvme_tenant,
		};
		jobs[i]->nvme_reserved = false; /* the write uses it up */
	}
	/* a NULL buf (source not READY) fails that io with -EINVAL */
	if (k)
		(void)tier_nvme_write_batch(m->nvme, ios, k);
	k = 0;
	for (unsigned int i = 0; i < n; i++) {
		struct tier_nvme_io *io = batch_io(jobs[i], ios, &k);

		if (!io)
			continue;
		jobs[i]->result = io->buf ? io->result : -ENOENT;
		if (!jobs[i]->result)
			jobs[i]->nvme_slot = io->slot;
	}
}

/* n NVME_TO_HOST or NVME_TO_GPU jobs as one batch (a job the test knob
 * fails is left out of it: its read fails with -EIO). */
void migrate_run_nvme_reads(struct migrate *m, struct migrate_job **jobs,
			    unsigned int n)
{
	struct tier_nvme_io ios[n];
	unsigned int k = 0;

	for (unsigned int i = 0; i < n; i++) {
		void *dst = NULL;

		if (jobs[i]->fault)
			continue;
		if (tier_host_slot_state(m->host, jobs[i]->host_slot) ==
		    TIER_SLOT_FILLING)
			dst = tier_host_slot_addr(m->host, jobs[i]->host_slot);
		ios[k++] = (struct tier_nvme_io){
			.hash = jobs[i]->hash,
			.slot = jobs[i]->nvme_slot,
			.buf = dst,
			.headroom = true,
		};
	}
	if (k)
		(void)tier_nvme_read_batch(m->nvme, ios, k);
	k = 0;
	for (unsigned int i = 0; i < n; i++) {
		struct migrate_job *job = jobs[i];
		struct tier_nvme_io *io = batch_io(job, ios, &k);
		int r;

		if (!io)
			continue;
		job->nvme_dropped = io->dropped;
		r = io->buf ? io->result : -EBUSY;
		if (!r && job->length && io->length != job->length)
			r = -EIO;
		if (!r) {
			job->length = io->length;
			job->layout_id = io->layout_id;
			r = tier_host_publish(m->host, job->host_slot,
					      job->hash, job->length);
		}
		if (!r && job->kind == MIGRATE_NVME_TO_GPU)
			r = migrate_run_host_to_gpu(m, job);
		job->result = r;
	}
}

/* n NVME_INVALIDATE jobs as one batch (a job the test knob fails is left
 * out of it: -EIO, its slot untouched, as when its write cannot start). */
void migrate_run_nvme_invalidations(struct migrate *m,
				    struct migrate_job **jobs, unsigned int n)
{
	struct tier_nvme_io ios[n];
	unsigned int k = 0;

	for (unsigned int i = 0; i < n; i++)
		if (!jobs[i]->fault)
			ios[k++] = (struct tier_nvme_io){
				.hash = jobs[i]->hash,
				.slot = jobs[i]->nvme_slot,
			};
	if (k)
		(void)tier_nvme_invalidate_batch(m->nvme, ios, k);
	k = 0;
	for (unsigned int i = 0; i < n; i++) {
		struct tier_nvme_io *io = batch_io(jobs[i], ios, &k);

		if (!io)
			continue;
		jobs[i]->result = io->result;
		jobs[i]->nvme_dropped = io->dropped;
	}
}

/* n NVME_RESTAMP jobs as one batch (a job the test knob fails is left
 * out: -EIO, its header untouched). */
void migrate_run_nvme_restamps(struct migrate *m, struct migrate_job **jobs,
			       unsigned int n)
{
	struct tier_nvme_io ios[n];
	unsigned int k = 0;

	for (unsigned int i = 0; i < n; i++)
		if (!jobs[i]->fault)
			ios[k++] = (struct tier_nvme_io){
				.hash = jobs[i]->hash,
				.slot = jobs[i]->nvme_slot,
				.generation = jobs[i]->nvme_generation,
			};
	if (k)
		(void)tier_nvme_restamp_batch(m->nvme, ios, k);
	k = 0;
	for (unsigned int i = 0; i < n; i++)
		jobs[i]->result = jobs[i]->fault ? -EIO : ios[k++].result;
}

/* An operator drop's mark into the NVMe tier's superblock: the tenant's,
 * or every block's (TIER_NVME_NOBODY); m->nvme was checked at submit. */
int migrate_run_nvme_mark(struct migrate *m, struct migrate_job *job)
{
	bool all = job->nvme_tenant == TIER_NVME_NOBODY;

	if (job->fault)
		return -EIO;
	return tier_nvme_mark_drop(m->nvme, all, job->nvme_tenant,
				   job->nvme_generation);
}
