// SPDX-License-Identifier: MIT
/*
 * kvmmd's migration engine fires the kvmm:migrate probe for every
 * completed move and kvmm:restore for every reload into the GPU, with the
 * job's bytes and its measured copy time: with the loader attached to this
 * binary (which links the engine like kvmmd does), a GPU -> host demotion
 * and a host -> GPU restore on the host backend show up in the histograms
 * with exactly the jobs' lengths and durations.  A failed job fires
 * nothing.  Skips (77) without root or BPF.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ebpf/telemetry.h"
#include "kvmm/kvmmd/migrate.h"
#include "kvmm/kvmmd/tier_host.h"
#include "tests/lib/bpf_test.h"
#include "tests/lib/test.h"

#define PAGE (64 * 1024)
#define NPAGES 4
#define BLOCK (PAGE * NPAGES)

static struct migrate *m;

static struct migrate_job *run_job(struct migrate_job *job)
{
	struct pollfd pfd = { .fd = migrate_eventfd(m), .events = POLLIN };
	struct migrate_job *got;

	t_ok(migrate_submit(m, job));
	for (int i = 0; i < 500; i++) {
		if (migrate_reap(m, &got, 1) == 1) {
			t_assert(got == job);
			return job;
		}
		t_assert(poll(&pfd, 1, 20) >= 0);
	}
	t_fail("no completion within 10 s");
	return NULL;
}

/* A job moving block `hash` (BLOCK bytes) through pages ids of pool. */
static struct migrate_job *new_job(enum migrate_kind kind, uint64_t hash,
				   struct vmm_pool *pool, const uint32_t *ids)
{
	struct migrate_job *job = migrate_job_new(kind, NPAGES);

	t_assert(job);
	job->hash = hash;
	job->length = BLOCK;
	for (int i = 0; i < NPAGES; i++) {
		job->pages[i].page_id = ids[i];
		job->pages[i].handle = vmm_pool_page_handle(pool, ids[i]);
	}
	return job;
}

static void check_row(struct tel *t, uint32_t kind, uint32_t from, uint32_t to,
		      uint64_t bytes, uint64_t ns)
{
	struct kvmm_hist_key k = { .kind = (uint16_t)kind,
				   .tier = (uint8_t)from,
				   .dst_tier = (uint8_t)to };
	struct kvmm_hist h;

	if (tel_hist_lookup(t, &k, &h))
		t_fail("no %s row %s -> %s", tel_event_string(kind),
		       tel_tier_string(from), tel_tier_string(to));
	t_assert_eq(h.count, 1);
	t_assert_eq(h.sum_bytes, bytes);
	t_assert_eq(h.sum_ns, ns);
	t_assert_eq(h.buckets[kvmm_tel_log2_bucket(ns)], 1);
}

int main(void)
{
	struct vmm_config vc = { .kind = VMM_BACKEND_HOST, .page_size = PAGE };
	struct tier_host_config hc = { .size = sizeof(hc),
				       .capacity_bytes = 4 * BLOCK,
				       .slot_bytes = BLOCK,
				       .numa_node = -1 };
	struct migrate_config mc = { .size = sizeof(mc) };
	struct bpf_test bt;
	struct vmm_backend *b;
	struct vmm_pool *pool;
	struct tier_host *host;
	struct migrate_job *job;
	struct kvmm_counters c;
	uint32_t src[NPAGES], dst[NPAGES], hslot;
	uint64_t down_ns, up_ns;
	struct tel *t;
	int i;

	bpf_test_init(&bt, "migr");
	t = bpf_test_open(&bt);
	t_assert(tel_attachments(t) >= 2); /* migrate and restore sites */

	t_ok(vmm_backend_open(&vc, &b));
	t_ok(vmm_pool_create(b, 16, &pool));
	t_ok(tier_host_open(&hc, &host));
	mc.backend = b;
	mc.host = host;
	t_ok(migrate_open(&mc, &m));
	for (i = 0; i < NPAGES; i++) {
		t_ok(vmm_pool_alloc(pool, &src[i]));
		t_ok(vmm_pool_alloc(pool, &dst[i]));
	}

	/* GPU -> host (a demotion) */
	job = new_job(MIGRATE_GPU_TO_HOST, 0xabc, pool, src);
	t_ok(tier_host_alloc(host, &job->host_slot));
	hslot = job->host_slot;
	run_job(job);
	t_assert_eq(job->state, MIGRATE_DONE);
	down_ns = job->end_ns - job->start_ns;
	migrate_job_free(job);

	/* host -> GPU (a restore) */
	job = new_job(MIGRATE_HOST_TO_GPU, 0xabc, pool, dst);
	job->host_slot = hslot;
	run_job(job);
	t_assert_eq(job->state, MIGRATE_DONE);
	up_ns = job->end_ns - job->start_ns;
	migrate_job_free(job);

	/* A job that fails (no such host slot) fires nothing. */
	job = new_job(MIGRATE_HOST_TO_GPU, 0xdef, pool, dst);
	job->host_slot = 3; /* never filled */
	run_job(job);
	t_assert(job->state != MIGRATE_DONE);
	migrate_job_free(job);

	t_ok(tel_poll(t));
	check_row(t, KVMM_TEL_MIGRATE, KVMM_TEL_TIER_GPU, KVMM_TEL_TIER_HOST,
		  BLOCK, down_ns);
	check_row(t, KVMM_TEL_MIGRATE, KVMM_TEL_TIER_HOST, KVMM_TEL_TIER_GPU,
		  BLOCK, up_ns);
	check_row(t, KVMM_TEL_RESTORE, KVMM_TEL_TIER_HOST, KVMM_TEL_TIER_GPU,
		  BLOCK, up_ns);
	tel_counters(t, &c);
	t_assert_eq(c.events[KVMM_TEL_MIGRATE], 2);
	t_assert_eq(c.events[KVMM_TEL_RESTORE], 1);

	migrate_close(m);
	t_ok(tier_host_free(host, hslot));
	for (i = 0; i < NPAGES; i++) {
		t_ok(vmm_pool_free(pool, src[i]));
		t_ok(vmm_pool_free(pool, dst[i]));
	}
	tier_host_close(host);
	vmm_pool_destroy(pool);
	vmm_backend_close(b);
	tel_close(t);
	printf("ok: migrations traced with their bytes and times\n");
	return 0;
}
