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
 * Round 0 warms up (the engine maps the pages on first use); then the two
 * alternate which goes first.  Ends with one JSON line: median
 * throughputs, the median and range of the per-round tier/memcpy ratios
 * (target >= 0.9), and the ratio of CPU seconds (memcpy / tier; 1.0 means
 * the tier's path costs no CPU beyond the copy).
 */
#include "kvmm/kvmmd/migrate.h"
#include "kvmm/kvmmd/tier_host.h"
#include "vmm/vmm.h"
#include "bench/bench.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

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

/*
 * One tier round: every block demoted GPU -> host through the migration
 * engine into a freshly allocated (FILLING) slot, then restored host ->
 * GPU into the same pages.  Wall and CPU seconds in w[0..1], c[0..1].
 */
static int tier_round(struct migrate *m, struct tier_host *h,
		      struct vmm_pool *pool, const uint32_t *ids,
		      uint32_t *slots, struct migrate_job **jobs,
		      unsigned int nblocks, unsigned int npages, size_t block,
		      unsigned int round, double *w, double *c)
{
	int failures = 0;

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
	double t0 = now_s(), c0 = cpu_s();
	failures += run_jobs(m, jobs, nblocks);
	w[0] = now_s() - t0;
	c[0] = cpu_s() - c0;
	for (unsigned int k = 0; k < nblocks; k++)
		jobs[k]->kind = MIGRATE_HOST_TO_GPU;
	t0 = now_s();
	c0 = cpu_s();
	failures += run_jobs(m, jobs, nblocks);
	w[1] = now_s() - t0;
	c[1] = cpu_s() - c0;
	for (unsigned int k = 0; k < nblocks; k++)
		migrate_job_free(jobs[k]);
	return failures;
}

/* The baseline: memcpy of the same bytes between the same places, page
 * by page from the pages' own mappings.  Results in w[2..3], c[2..3]. */
static void memcpy_round(struct tier_host *h, const uint32_t *slots,
			 unsigned char **maps, unsigned int nblocks,
			 unsigned int npages, size_t page, double *w, double *c)
{
	double t0 = now_s(), c0 = cpu_s();

	for (unsigned int k = 0; k < nblocks; k++) {
		unsigned char *dst = tier_host_slot_addr(h, slots[k]);

		for (unsigned int p = 0; p < npages; p++)
			memcpy(dst + p * page, maps[k * npages + p], page);
	}
	w[2] = now_s() - t0;
	c[2] = cpu_s() - c0;
	t0 = now_s();
	c0 = cpu_s();
	for (unsigned int k = 0; k < nblocks; k++) {
		const unsigned char *src = tier_host_slot_addr(h, slots[k]);

		for (unsigned int p = 0; p < npages; p++)
			memcpy(maps[k * npages + p], src + p * page, page);
	}
	w[3] = now_s() - t0;
	c[3] = cpu_s() - c0;
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

	if (!ids || !maps || !slots || !jobs)
		return 1;
	for (unsigned int i = 0; i < npages * nblocks; i++) {
		if (vmm_pool_alloc(pool, &ids[i]))
			return 1;
		/* the host backend's page is a memfd: map it for memcpy */
		maps[i] = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED,
			       vmm_pool_page_fd(pool, ids[i], 0), 0);
		if (maps[i] == MAP_FAILED)
			return 1;
		memset(maps[i], (int)(i & 0xff), page);
	}
	for (unsigned int k = 0; k < nblocks; k++)
		if (tier_host_alloc(h, &slots[k]))
			return 1;

	double *ratio_out = calloc(rounds, sizeof(double));
	double *ratio_in = calloc(rounds, sizeof(double));
	double *bw[4], *cpu[4]; /* tier out, tier in, memcpy out, memcpy in */
	double bytes = (double)block * nblocks;
	unsigned int nr = 0;
	int failures = 0;

	for (int i = 0; i < 4; i++) {
		bw[i] = calloc(rounds, sizeof(double));
		cpu[i] = calloc(rounds, sizeof(double));
		if (!bw[i] || !cpu[i])
			return 1;
	}
	if (!ratio_out || !ratio_in)
		return 1;
	/* Round 0 maps the pages into the engine's window (first-touch
	 * faults) and is not counted.  Then tier and memcpy alternate which
	 * goes first, so drift on the shared machine weighs on both; each
	 * round gives a ratio of neighbouring runs, the JSON their median.
	 * CPU seconds (this process, all threads) are measured too: under
	 * load they are steadier than wall time and show the tier's own
	 * overhead apart from scheduling. */
	for (unsigned int round = 0; round <= rounds; round++) {
		double w[4], c[4];
		bool memcpy_first = round % 2 == 0;

		if (memcpy_first)
			memcpy_round(h, slots, maps, nblocks, npages, page, w,
				     c);
		failures += tier_round(m, h, pool, ids, slots, jobs, nblocks,
				       npages, block, round, w, c);
		if (!memcpy_first)
			memcpy_round(h, slots, maps, nblocks, npages, page, w,
				     c);
		if (round == 0)
			continue;
		for (int i = 0; i < 4; i++) {
			bw[i][nr] = bytes / w[i];
			cpu[i][nr] = c[i];
		}
		ratio_out[nr] = w[2] / w[0];
		ratio_in[nr] = w[3] / w[1];
		printf("round %u (%s first): tier out %.0f MB/s in %.0f MB/s | memcpy out %.0f MB/s in %.0f MB/s | ratio out %.3f in %.3f | cpu ms tier %.1f/%.1f memcpy %.1f/%.1f\n",
		       round, memcpy_first ? "memcpy" : "tier",
		       bytes / w[0] / 1e6, bytes / w[1] / 1e6,
		       bytes / w[2] / 1e6, bytes / w[3] / 1e6, ratio_out[nr],
		       ratio_in[nr], c[0] * 1e3, c[1] * 1e3, c[2] * 1e3,
		       c[3] * 1e3);
		nr++;
	}
	double med_bw[4], med_cpu[4];

	for (int i = 0; i < 4; i++) {
		med_bw[i] = median(bw[i], nr);
		med_cpu[i] = median(cpu[i], nr);
	}
	double med_out = median(ratio_out, nr), med_in = median(ratio_in, nr);

	printf("{\"bench\":\"host-tier\",\"backend\":\"host\",\"block_bytes\":%zu,"
	       "\"pages_per_block\":%u,\"blocks\":%u,\"rounds\":%u,"
	       "\"tier_gpu_to_host_MBps\":%.1f,\"memcpy_gpu_to_host_MBps\":%.1f,"
	       "\"gpu_to_host_ratio\":%.3f,\"gpu_to_host_ratio_min\":%.3f,"
	       "\"gpu_to_host_ratio_max\":%.3f,\"tier_host_to_gpu_MBps\":%.1f,"
	       "\"memcpy_host_to_gpu_MBps\":%.1f,\"host_to_gpu_ratio\":%.3f,"
	       "\"host_to_gpu_ratio_min\":%.3f,\"host_to_gpu_ratio_max\":%.3f,"
	       "\"cpu_ratio_gpu_to_host\":%.3f,\"cpu_ratio_host_to_gpu\":%.3f,"
	       "\"failures\":%d,\"target\":0.9}\n",
	       block, npages, nblocks, rounds, med_bw[0] / 1e6, med_bw[2] / 1e6,
	       med_out, ratio_out[0], ratio_out[nr - 1], med_bw[1] / 1e6,
	       med_bw[3] / 1e6, med_in, ratio_in[0], ratio_in[nr - 1],
	       med_cpu[0] > 0 ? med_cpu[2] / med_cpu[0] : 0,
	       med_cpu[1] > 0 ? med_cpu[3] / med_cpu[1] : 0, failures);
	for (int i = 0; i < 4; i++) {
		free(bw[i]);
		free(cpu[i]);
	}
	free(ratio_out);
	free(ratio_in);
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
