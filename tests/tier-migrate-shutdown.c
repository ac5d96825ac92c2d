// SPDX-License-Identifier: MIT
/*
 * Migration engine teardown and failures leak nothing: a queued job can
 * be cancelled while another runs; a copy that fails frees its destination
 * host slot and leaves the pages with their owner (evict state ABORTED);
 * shutting down with jobs queued and running cancels the queued ones,
 * lets the running one finish, and after the owner has released what the
 * reaped jobs report, every host slot, NVMe slot and pool page is free;
 * closing without reaping releases the destinations itself.
 */
#include "kvmm/kvmmd/migrate.h"
#include "kvmm/kvmmd/tier_host.h"
#include "kvmm/kvmmd/tier_nvme.h"
#include "tests/lib/nvme_tier.h"
#include "tests/lib/test.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PAGE (16 * 1024)
#define NPAGES 2
#define BLOCK (PAGE * NPAGES)
#define NJOBS 24

/* A backend whose copy-out waits for a go from the test when gated. */
static struct vmm_backend gated;
static struct vmm_ops gated_ops;
static struct vmm_backend *inner;
static sem_t go;
static sem_t entered;
static bool gate_on;

static int gated_copy_to_host(struct vmm_backend *b, void *dst,
			      vmm_handle_t page, size_t off, size_t len)
{
	if (__atomic_load_n(&gate_on, __ATOMIC_ACQUIRE)) {
		sem_post(&entered);
		sem_wait(&go);
	}
	return inner->ops->copy_to_host(inner, dst, page, off, len);
}

static struct migrate_job *gpu_job(struct vmm_pool *pool, uint32_t *ids,
				   struct tier_host *host, uint64_t hash)
{
	struct migrate_job *job = migrate_job_new(MIGRATE_GPU_TO_HOST, NPAGES);

	job->hash = hash;
	job->length = BLOCK;
	for (int i = 0; i < NPAGES; i++) {
		job->pages[i].page_id = ids[i];
		job->pages[i].handle = vmm_pool_page_handle(pool, ids[i]);
	}
	t_ok(tier_host_alloc(host, &job->host_slot));
	return job;
}

static void *shutdown_thread(void *arg)
{
	migrate_shutdown(arg);
	return NULL;
}

static void reap_all(struct migrate *m, struct tier_host *host,
		     struct tier_nvme *nvme, unsigned int *n)
{
	struct migrate_job *jobs[64];
	unsigned int got;

	while ((got = migrate_reap(m, jobs, 64))) {
		for (unsigned int i = 0; i < got; i++) {
			struct migrate_job *job = jobs[i];

			/* the owner's side: keep nothing it does not index */
			if (job->state == MIGRATE_DONE &&
			    job->kind == MIGRATE_GPU_TO_HOST)
				t_ok(tier_host_free(host, job->host_slot));
			if (job->state == MIGRATE_DONE &&
			    job->kind == MIGRATE_HOST_TO_NVME)
				t_ok(tier_nvme_free(nvme, job->nvme_slot));
			if (job->state != MIGRATE_DONE &&
			    job->kind == MIGRATE_GPU_TO_HOST)
				t_assert_eq(job->host_slot, MIGRATE_NO_SLOT);
			migrate_job_free(job);
			(*n)++;
		}
	}
}

int main(void)
{
	const char *dir = getenv("KVMM_NVME_TEST_DIR");
	struct vmm_config vc = { .kind = VMM_BACKEND_HOST, .page_size = PAGE };
	struct vmm_pool *pool;
	struct tier_host *host;
	struct tier_nvme *nvme;
	struct migrate *m;
	struct tier_host_stats hs;
	struct tier_nvme_stats ns;
	struct migrate_stats ms;
	uint32_t ids[NPAGES];
	char path[256];
	unsigned int reaped = 0;

	sem_init(&go, 0, 0);
	sem_init(&entered, 0, 0);
	t_ok(vmm_backend_open(&vc, &inner));
	gated_ops = *inner->ops;
	gated_ops.copy_to_host = gated_copy_to_host;
	gated_ops.destroy = NULL;
	gated = *inner;
	gated.ops = &gated_ops;
	t_ok(vmm_pool_create(inner, 16, &pool));
	for (int i = 0; i < NPAGES; i++)
		t_ok(vmm_pool_alloc(pool, &ids[i]));

	struct tier_host_config hc = { .size = sizeof(hc),
				       .capacity_bytes = 2 * NJOBS * BLOCK,
				       .slot_bytes = BLOCK,
				       .numa_node = -1 };
	t_ok(tier_host_open(&hc, &host));
	snprintf(path, sizeof(path), "%s/kvmm-tier-migrate-shut-%d",
		 dir ? dir : "/var/tmp", getpid());
	struct tier_nvme_config nc = { .size = sizeof(nc),
				       .path = path,
				       .capacity_bytes =
					       NT_CAPACITY(NJOBS, BLOCK),
				       .payload_bytes = BLOCK };
	nvme = nt_open(nc, NULL, NULL);
	struct migrate_config mc = { .size = sizeof(mc),
				     .backend = &gated,
				     .host = host,
				     .nvme = nvme };

	/* 1. cancel a queued job while the worker is stuck in a copy */
	t_ok(migrate_open(&mc, &m));
	__atomic_store_n(&gate_on, true, __ATOMIC_RELEASE);
	struct migrate_job *a = gpu_job(pool, ids, host, 1);
	struct migrate_job *c = gpu_job(pool, ids, host, 2);
	t_ok(migrate_submit(m, a));
	t_ok(migrate_submit(m, c));
	sem_wait(&entered); /* a is running */
	t_assert_eq(migrate_cancel(m, a), -EBUSY);
	t_ok(migrate_cancel(m, c));
	t_assert_eq(migrate_cancel(m, c), -ENOENT);
	t_assert_eq(c->state, MIGRATE_CANCELLED);
	t_assert_eq(migrate_evict_state(c), MIGRATE_EVICT_ABORTED);
	t_assert_eq(c->host_slot, MIGRATE_NO_SLOT); /* freed by the engine */
	__atomic_store_n(&gate_on, false, __ATOMIC_RELEASE);
	sem_post(&go);
	{
		struct pollfd pfd = { .fd = migrate_eventfd(m),
				      .events = POLLIN };

		while (reaped < 2) {
			t_assert(poll(&pfd, 1, 10000) == 1);
			reap_all(m, host, nvme, &reaped);
		}
	}

	/* 2. shutdown while a copy is stuck and a long queue of GPU -> host
	 * -> NVMe chains waits behind it */
	__atomic_store_n(&gate_on, true, __ATOMIC_RELEASE);
	struct migrate_job *first = gpu_job(pool, ids, host, 100);
	t_ok(migrate_submit(m, first));
	for (int i = 1; i < NJOBS; i++) {
		struct migrate_job *g = gpu_job(pool, ids, host, 100 + i);
		struct migrate_job *w =
			migrate_job_new(MIGRATE_HOST_TO_NVME, 0);

		w->hash = g->hash;
		w->length = BLOCK;
		w->host_slot = g->host_slot;
		t_ok(migrate_submit(m, g));
		t_ok(migrate_submit(m, w));
	}
	sem_wait(&entered); /* first is running */
	pthread_t th;
	t_ok(pthread_create(&th, NULL, shutdown_thread, m));
	do {
		migrate_get_stats(m, &ms);
		usleep(1000);
	} while (ms.queued);
	/* the queue is cancelled; the running copy finishes now */
	__atomic_store_n(&gate_on, false, __ATOMIC_RELEASE);
	sem_post(&go);
	t_ok(pthread_join(th, NULL));
	struct migrate_job *late = gpu_job(pool, ids, host, 999);
	t_assert_eq(migrate_submit(m, late), -ESHUTDOWN);
	t_ok(tier_host_free(host, late->host_slot));
	migrate_job_free(late);
	migrate_get_stats(m, &ms);
	t_assert_eq(ms.queued, 0);
	t_assert_eq(ms.running, 0);
	t_assert_eq(ms.path[MIGRATE_GPU_TO_HOST].cancelled, 1 + NJOBS - 1);
	t_assert_eq(ms.path[MIGRATE_HOST_TO_NVME].cancelled, NJOBS - 1);
	t_assert_eq(ms.path[MIGRATE_GPU_TO_HOST].jobs, 2);
	reaped = 0;
	reap_all(m, host, nvme, &reaped);
	t_assert_eq(reaped, 1 + 2 * (NJOBS - 1));
	migrate_close(m);
	tier_host_get_stats(host, &hs);
	t_assert_eq(hs.used_slots, 0);

	/* 3. a failing copy: destination freed, pages untouched */
	struct vmm_backend *fw;
	struct vmm_backend *inner2;
	t_ok(vmm_backend_open(&vc, &inner2));
	t_ok(vmm_fault_wrap(inner2, &fw));
	struct vmm_pool *pool2;
	uint32_t ids2[NPAGES];
	t_ok(vmm_pool_create(fw, 4, &pool2));
	for (int i = 0; i < NPAGES; i++)
		t_ok(vmm_pool_alloc(pool2, &ids2[i]));
	mc.backend = fw;
	t_ok(migrate_open(&mc, &m));
	vmm_fault_arm(fw, VMM_OP_COPY_TO_HOST, 2, -EIO);
	struct migrate_job *f = gpu_job(pool2, ids2, host, 7);
	t_ok(migrate_submit(m, f));
	struct pollfd pfd = { .fd = migrate_eventfd(m), .events = POLLIN };
	t_assert_eq(poll(&pfd, 1, 10000), 1);
	struct migrate_job *got;
	t_assert_eq(migrate_reap(m, &got, 1), 1);
	t_assert(got == f);
	t_assert_eq(f->state, MIGRATE_FAILED);
	t_assert_eq(f->result, -EIO);
	t_assert_eq(f->host_slot, MIGRATE_NO_SLOT);
	t_assert_eq(migrate_evict_state(f), MIGRATE_EVICT_ABORTED);
	migrate_job_free(f);

	/* 4. close without reaping: DONE destinations are released too */
	for (int i = 0; i < 4; i++)
		t_ok(migrate_submit(m, gpu_job(pool2, ids2, host, 50 + i)));
	migrate_close(m);

	tier_host_get_stats(host, &hs);
	tier_nvme_get_stats(nvme, &ns);
	t_assert_eq(ns.used_slots, 0);
	t_assert_eq(hs.used_slots, 0);
	for (int i = 0; i < NPAGES; i++) {
		t_ok(vmm_pool_free(pool, ids[i]));
		t_ok(vmm_pool_free(pool2, ids2[i]));
	}
	struct vmm_pool_stats ps;
	vmm_pool_get_stats(pool, &ps);
	t_assert_eq(ps.allocated, 0);
	vmm_pool_destroy(pool);
	vmm_pool_destroy(pool2);
	vmm_backend_close(fw);
	vmm_backend_close(inner);
	tier_nvme_close(nvme);
	tier_host_close(host);
	unlink(path);
	printf("migration shutdown ok\n");
	return 0;
}
