// SPDX-License-Identifier: MIT
/*
 * Migration engine, host backend: a block in pool pages moves GPU -> host
 * -> NVMe -> host -> new GPU pages and NVMe -> new GPU pages directly, and
 * every copy is byte-identical to the original; a destination is not
 * readable until its job is DONE; completions wake the eventfd; the
 * eviction gate only allows page reuse when the copy is done and every
 * revoke was acknowledged; per-path counters add up.  Both copy paths:
 * the backend's by-handle helpers and the daemon-side mapping cache.
 */
#include "kvmm/kvmmd/migrate.h"
#include "kvmm/kvmmd/tier_host.h"
#include "kvmm/kvmmd/tier_nvme.h"
#include "tests/lib/nvme_tier.h"
#include "tests/lib/test.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PAGE (64 * 1024)
#define NPAGES 4 /* 2L with L = 2 */
#define BLOCK (PAGE * NPAGES)

static struct migrate *m;

static struct migrate_job *wait_one(void)
{
	struct migrate_job *job;
	struct pollfd pfd = { .fd = migrate_eventfd(m), .events = POLLIN };

	for (int i = 0; i < 500; i++) {
		if (migrate_reap(m, &job, 1) == 1)
			return job;
		t_assert(poll(&pfd, 1, 20) >= 0);
	}
	t_fail("no completion within 10 s");
	return NULL;
}

static void fill_pages(struct vmm_backend *b, struct vmm_pool *pool,
		       uint32_t *ids, unsigned char *expect)
{
	for (int i = 0; i < NPAGES; i++) {
		for (size_t j = 0; j < PAGE; j++)
			expect[i * PAGE + j] =
				(unsigned char)(i * 31 + j * 7 + (j >> 12));
		t_ok(b->ops->copy_from_host(b,
					    vmm_pool_page_handle(pool, ids[i]),
					    0, expect + i * PAGE, PAGE));
	}
}

static void check_pages(struct vmm_backend *b, struct vmm_pool *pool,
			uint32_t *ids, const unsigned char *expect)
{
	unsigned char *got = malloc(PAGE);

	for (int i = 0; i < NPAGES; i++) {
		t_ok(b->ops->copy_to_host(
			b, got, vmm_pool_page_handle(pool, ids[i]), 0, PAGE));
		t_assert(memcmp(got, expect + i * PAGE, PAGE) == 0);
	}
	free(got);
}

static struct migrate_job *job_for(enum migrate_kind k, struct vmm_pool *pool,
				   uint32_t *ids)
{
	struct migrate_job *job = migrate_job_new(k, ids ? NPAGES : 0);

	t_assert(job);
	job->hash = 0xfeedface;
	job->layout_id = 3;
	job->length = BLOCK;
	for (int i = 0; ids && i < NPAGES; i++) {
		job->pages[i].page_id = ids[i];
		job->pages[i].handle = vmm_pool_page_handle(pool, ids[i]);
	}
	return job;
}

static void run_mode(uint32_t map_pages)
{
	const char *dir = getenv("KVMM_NVME_TEST_DIR");
	struct vmm_config vc = { .kind = VMM_BACKEND_HOST, .page_size = PAGE };
	struct vmm_backend *b;
	struct vmm_pool *pool;
	struct tier_host *host;
	struct tier_nvme *nvme;
	struct migrate_job *job;
	struct migrate_stats ms;
	uint32_t src[NPAGES], dst[NPAGES], dst2[NPAGES];
	unsigned char *expect = malloc(BLOCK);
	char path[256];

	t_assert(expect);
	t_ok(vmm_backend_open(&vc, &b));
	t_ok(vmm_pool_create(b, 64, &pool));
	struct tier_host_config hc = { .size = sizeof(hc),
				       .capacity_bytes = 4 * BLOCK,
				       .slot_bytes = BLOCK,
				       .numa_node = -1 };
	t_ok(tier_host_open(&hc, &host));
	size_t reg_len;
	void *reg = tier_host_base(host, &reg_len);
	snprintf(path, sizeof(path), "%s/kvmm-tier-migrate-%d",
		 dir ? dir : "/var/tmp", getpid());
	struct tier_nvme_config nc = { .size = sizeof(nc),
				       .path = path,
				       .capacity_bytes = NT_CAPACITY(4, BLOCK),
				       .payload_bytes = BLOCK,
				       .reg_base = reg,
				       .reg_len = reg_len };
	nvme = nt_open(nc, NULL, NULL);
	struct migrate_config mc = { .size = sizeof(mc),
				     .backend = b,
				     .host = host,
				     .nvme = nvme,
				     .map_pages = map_pages };
	t_ok(migrate_open(&mc, &m));

	for (int i = 0; i < NPAGES; i++)
		t_ok(vmm_pool_alloc(pool, &src[i]));
	fill_pages(b, pool, src, expect);
	/* a client maps the pages (the daemon's view) */
	for (int i = 0; i < NPAGES; i++)
		t_ok(vmm_pool_mapped(pool, src[i]));

	/* 1. GPU -> host, with the revocation gate */
	job = job_for(MIGRATE_GPU_TO_HOST, pool, src);
	t_ok(tier_host_alloc(host, &job->host_slot));
	uint32_t hslot = job->host_slot;
	t_assert(tier_host_read_addr(host, hslot, 0) == NULL);
	t_assert_eq(migrate_evict_state(job), MIGRATE_EVICT_COPYING_MAPPED);
	t_ok(migrate_submit(m, job));
	migrate_job_revokes_posted(job, 1);
	struct migrate_job *got = wait_one();
	t_assert(got == job);
	t_assert_eq(job->state, MIGRATE_DONE);
	t_assert_eq(job->result, 0);
	t_assert_eq(migrate_evict_state(job), MIGRATE_EVICT_MAPPED);
	t_assert(memcmp(tier_host_read_addr(host, hslot, 0xfeedface), expect,
			BLOCK) == 0);
	/* the client acknowledges the revoke and unmaps */
	migrate_job_revoke_done(job);
	t_assert_eq(migrate_evict_state(job), MIGRATE_EVICT_REUSABLE);
	for (int i = 0; i < NPAGES; i++) {
		t_ok(vmm_pool_unmapped(pool, src[i]));
		t_ok(vmm_pool_free(pool, src[i]));
		t_assert_eq(vmm_pool_page_state(pool, src[i]), VMM_PAGE_FREE);
	}
	migrate_job_free(job);

	/* 2. host -> NVMe, then the host copy goes */
	job = job_for(MIGRATE_HOST_TO_NVME, NULL, NULL);
	job->host_slot = hslot;
	t_ok(migrate_submit(m, job));
	t_assert(wait_one() == job);
	t_assert_eq(job->result, 0);
	t_assert(job->nvme_slot != MIGRATE_NO_SLOT);
	uint32_t nslot = job->nvme_slot, s2;
	t_ok(tier_nvme_lookup(nvme, 0xfeedface, &s2, NULL, NULL));
	t_assert_eq(s2, nslot);
	migrate_job_free(job);
	t_ok(tier_host_free(host, hslot));

	/* 3. NVMe -> host */
	job = job_for(MIGRATE_NVME_TO_HOST, NULL, NULL);
	job->nvme_slot = nslot;
	job->length = 0; /* learnt from the tier */
	t_ok(tier_host_alloc(host, &job->host_slot));
	hslot = job->host_slot;
	t_ok(migrate_submit(m, job));
	t_assert(wait_one() == job);
	t_assert_eq(job->result, 0);
	t_assert_eq(job->length, BLOCK);
	t_assert_eq(job->layout_id, 3);
	t_assert(memcmp(tier_host_read_addr(host, hslot, 0xfeedface), expect,
			BLOCK) == 0);
	migrate_job_free(job);

	/* 4. host -> new GPU pages */
	for (int i = 0; i < NPAGES; i++)
		t_ok(vmm_pool_alloc(pool, &dst[i]));
	job = job_for(MIGRATE_HOST_TO_GPU, pool, dst);
	job->host_slot = hslot;
	t_ok(migrate_submit(m, job));
	t_assert(wait_one() == job);
	t_assert_eq(job->result, 0);
	check_pages(b, pool, dst, expect);
	migrate_job_free(job);
	t_ok(tier_host_free(host, hslot));

	/* 5. NVMe -> GPU through a staging slot */
	for (int i = 0; i < NPAGES; i++)
		t_ok(vmm_pool_alloc(pool, &dst2[i]));
	job = job_for(MIGRATE_NVME_TO_GPU, pool, dst2);
	job->nvme_slot = nslot;
	t_ok(tier_host_alloc(host, &job->host_slot));
	t_ok(migrate_submit(m, job));
	t_assert(wait_one() == job);
	t_assert_eq(job->result, 0);
	check_pages(b, pool, dst2, expect);
	t_ok(tier_host_free(host, job->host_slot));
	migrate_job_free(job);

	/* 6. bad submissions */
	job = job_for(MIGRATE_HOST_TO_GPU, pool, dst);
	t_assert_eq(migrate_submit(m, job), -EINVAL); /* no host slot */
	job->host_slot = 0;
	job->length = BLOCK - 1;
	t_assert_eq(migrate_submit(m, job), -EINVAL);
	job->length = BLOCK;
	/* a source that is not READY fails the job, nothing else */
	t_ok(migrate_submit(m, job));
	t_assert(wait_one() == job);
	t_assert_eq(job->state, MIGRATE_FAILED);
	t_assert_eq(job->result, -ENOENT);
	migrate_job_free(job);

	migrate_get_stats(m, &ms);
	t_assert_eq(ms.path[MIGRATE_GPU_TO_HOST].jobs, 1);
	t_assert_eq(ms.path[MIGRATE_GPU_TO_HOST].bytes, BLOCK);
	t_assert_eq(ms.path[MIGRATE_HOST_TO_NVME].jobs, 1);
	t_assert_eq(ms.path[MIGRATE_NVME_TO_HOST].jobs, 1);
	t_assert_eq(ms.path[MIGRATE_HOST_TO_GPU].jobs, 1);
	t_assert_eq(ms.path[MIGRATE_HOST_TO_GPU].failed, 1);
	t_assert_eq(ms.path[MIGRATE_NVME_TO_GPU].jobs, 1);
	t_assert_eq(ms.queued + ms.running + ms.completed_unreaped, 0);
	/* mapped copies: src's pages were freed and came back as dst, so
	 * two distinct page sets were mapped, each once */
	t_assert_eq(ms.pages_mapped, map_pages ? 2 * NPAGES : 0);

	migrate_close(m);
	struct tier_host_stats hs;
	tier_host_get_stats(host, &hs);
	t_assert_eq(hs.used_slots, 0);
	for (int i = 0; i < NPAGES; i++) {
		t_ok(vmm_pool_free(pool, dst[i]));
		t_ok(vmm_pool_free(pool, dst2[i]));
	}
	tier_nvme_close(nvme);
	tier_host_close(host);
	vmm_pool_destroy(pool);
	vmm_backend_close(b);
	unlink(path);
	free(expect);
	printf("migration round trip ok (%s copies)\n",
	       map_pages ? "mapped" : "by-handle");
}

int main(void)
{
	run_mode(0);
	run_mode(64);
	return 0;
}
