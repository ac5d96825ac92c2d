// SPDX-License-Identifier: MIT
/*
 * Host tier copy path against plain memcpy.
 *
 *   build/bench/host-tier [--layers L] [--blocks N] [--page-bytes N]
 *                         [--rounds N]
 *
 * Host backend: N blocks of 2L pages each are demoted GPU -> host and
 * restored host -> GPU through the migration engine (jobs, worker thread,
 * the backend's copy helpers, eventfd completions), and the same bytes are
 * copied with memcpy between the pages' mappings and the same host slots.
 * Prints the best of --rounds for each and ends with one JSON line with
 * the tier/memcpy throughput ratios (target >= 0.9).
 */
#include "kvmm/kvmmd/migrate.h"
#include "kvmm/kvmmd/tier_host.h"
#include "vmm/vmm.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int run_jobs(struct migrate *m, struct migrate_job **jobs,
		    unsigned int n)
{
	struct migrate_job *done[64];
	struct pollfd pfd = { .fd = migrate_eventfd(m), .events = POLLIN };
	unsigned int got = 0;
	int failed = 0;

	for (unsigned int i = 0; i < n; i++)
		if (migrate_submit(m, jobs[i]))
			return -1;
	while (got < n) {
		unsigned int k = migrate_reap(m, done, 64);

		for (unsigned int i = 0; i < k; i++)
			failed += done[i]->result != 0;
		got += k;
		if (!k && poll(&pfd, 1, 10000) <= 0)
			return -1;
	}
	return failed;
}

int main(int argc, char **argv)
{
	unsigned int layers = 16, nblocks = 48, rounds = 5;
	uint64_t page = 64 * 1024;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--layers") && i + 1 < argc)
			layers = (unsigned int)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--blocks") && i + 1 < argc)
			nblocks = (unsigned int)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--page-bytes") && i + 1 < argc)
			tier_parse_size(argv[++i], &page);
		else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
			rounds = (unsigned int)atoi(argv[++i]);
		else {
			fprintf(stderr,
				"usage: %s [--layers L] [--blocks N] [--page-bytes N] [--rounds N]\n",
				argv[0]);
			return 2;
		}
	}
	vmm_log_set_level(VMM_LOG_WARN);
	unsigned int npages = 2 * layers;
	size_t block = (size_t)npages * page;
	struct vmm_config vc = { .kind = VMM_BACKEND_HOST, .page_size = page };
	struct vmm_backend *b;
	struct vmm_pool *pool;
	struct tier_host *h;
	struct migrate *m;

	if (!layers || !nblocks || !rounds || vmm_backend_open(&vc, &b) ||
	    vmm_pool_create(b, (uint64_t)npages * nblocks, &pool))
		return 1;
	struct tier_host_config hc = { .size = sizeof(hc),
				       .capacity_bytes = block * nblocks,
				       .slot_bytes = block,
				       .numa_node = -1 };
	if (tier_host_open(&hc, &h))
		return 1;
	struct migrate_config mc = { .size = sizeof(mc),
				     .backend = b,
				     .host = h,
				     .map_pages = npages * nblocks };
	if (migrate_open(&mc, &m))
		return 1;

	uint32_t *ids = calloc((size_t)npages * nblocks, sizeof(*ids));
	unsigned char **maps = calloc((size_t)npages * nblocks, sizeof(*maps));
	uint32_t *slots = calloc(nblocks, sizeof(*slots));
	struct migrate_job **jobs = calloc(nblocks, sizeof(*jobs));

	for (unsigned int i = 0; i < npages * nblocks; i++) {
		if (vmm_pool_alloc(pool, &ids[i]))
			return 1;
		/* the host backend's page is a memfd: map it for memcpy */
		maps[i] = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED,
			       vmm_pool_page_fd(pool, ids[i]), 0);
		if (maps[i] == MAP_FAILED)
			return 1;
		memset(maps[i], (int)(i & 0xff), page);
	}
	for (unsigned int k = 0; k < nblocks; k++)
		if (tier_host_alloc(h, &slots[k]))
			return 1;

	double best_out = 1e9, best_in = 1e9, best_mc_out = 1e9,
	       best_mc_in = 1e9;
	int failures = 0;

	for (unsigned int round = 0; round < rounds; round++) {
		/* tier: GPU -> host, the slots start FILLING each round */
		for (unsigned int k = 0; k < nblocks; k++) {
			if (round) {
				tier_host_free(h, slots[k]);
				tier_host_alloc(h, &slots[k]);
			}
			jobs[k] = migrate_job_new(MIGRATE_GPU_TO_HOST, npages);
			jobs[k]->hash = k + 1;
			jobs[k]->length = block;
			jobs[k]->host_slot = slots[k];
			for (unsigned int p = 0; p < npages; p++) {
				uint32_t id = ids[k * npages + p];

				jobs[k]->pages[p].page_id = id;
				jobs[k]->pages[p].handle =
					vmm_pool_page_handle(pool, id);
			}
		}
		double t0 = now_s();
		failures += run_jobs(m, jobs, nblocks);
		double out = now_s() - t0;
		/* tier: host -> GPU into the same pages */
		for (unsigned int k = 0; k < nblocks; k++)
			jobs[k]->kind = MIGRATE_HOST_TO_GPU;
		t0 = now_s();
		failures += run_jobs(m, jobs, nblocks);
		double in = now_s() - t0;
		for (unsigned int k = 0; k < nblocks; k++)
			migrate_job_free(jobs[k]);

		/* memcpy baseline, same bytes, same places */
		t0 = now_s();
		for (unsigned int k = 0; k < nblocks; k++) {
			unsigned char *dst = tier_host_slot_addr(h, slots[k]);

			for (unsigned int p = 0; p < npages; p++)
				memcpy(dst + p * page, maps[k * npages + p],
				       page);
		}
		double mc_out = now_s() - t0;
		t0 = now_s();
		for (unsigned int k = 0; k < nblocks; k++) {
			unsigned char *src = tier_host_slot_addr(h, slots[k]);

			for (unsigned int p = 0; p < npages; p++)
				memcpy(maps[k * npages + p], src + p * page,
				       page);
		}
		double mc_in = now_s() - t0;
		if (out < best_out)
			best_out = out;
		if (in < best_in)
			best_in = in;
		if (mc_out < best_mc_out)
			best_mc_out = mc_out;
		if (mc_in < best_mc_in)
			best_mc_in = mc_in;
		printf("round %u: tier out %.0f MB/s in %.0f MB/s | memcpy out %.0f MB/s in %.0f MB/s\n",
		       round, block * nblocks / out / 1e6,
		       block * nblocks / in / 1e6,
		       block * nblocks / mc_out / 1e6,
		       block * nblocks / mc_in / 1e6);
	}
	double bytes = (double)block * nblocks;

	printf("{\"bench\":\"host-tier\",\"backend\":\"host\",\"block_bytes\":%zu,"
	       "\"pages_per_block\":%u,\"blocks\":%u,\"rounds\":%u,"
	       "\"tier_gpu_to_host_MBps\":%.1f,\"memcpy_gpu_to_host_MBps\":%.1f,"
	       "\"gpu_to_host_ratio\":%.3f,\"tier_host_to_gpu_MBps\":%.1f,"
	       "\"memcpy_host_to_gpu_MBps\":%.1f,\"host_to_gpu_ratio\":%.3f,"
	       "\"failures\":%d,\"target\":0.9}\n",
	       block, npages, nblocks, rounds, bytes / best_out / 1e6,
	       bytes / best_mc_out / 1e6, best_mc_out / best_out,
	       bytes / best_in / 1e6, bytes / best_mc_in / 1e6,
	       best_mc_in / best_in, failures);
	migrate_close(m);
	for (unsigned int k = 0; k < nblocks; k++)
		tier_host_free(h, slots[k]);
	tier_host_close(h);
	for (unsigned int i = 0; i < npages * nblocks; i++) {
		munmap(maps[i], page);
		vmm_pool_free(pool, ids[i]);
	}
	vmm_pool_destroy(pool);
	vmm_backend_close(b);
	free(ids);
	free(maps);
	free(slots);
	free(jobs);
	return failures ? 1 : 0;
}
