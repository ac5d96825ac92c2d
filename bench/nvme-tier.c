// SPDX-License-Identifier: MIT
/*
 * NVMe tier throughput against fio on the same file.
 *
 *   build/bench/nvme-tier [--file PATH] [--block-bytes N] [--total-bytes N]
 *                         [--qd N] [--rounds N]
 *
 * Writes and reads block-sized payloads through tier_nvme (io_uring,
 * O_DIRECT, registered buffers, headers and CRC32C included), then runs
 * fio (ioengine=io_uring, direct=1, fixed buffers, the same I/O size, depth,
 * file and region).  The tier moves each block as one I/O of its 4 KiB
 * header plus the payload, so fio's bs is that slot size; kvmm's figure
 * counts payload bytes only, fio's every byte (the header costs kvmm
 * 4096 / (4096 + block) of the ratio).  The file is written once before measuring so neither
 * side pays for converting unwritten extents.  Rounds alternate kvmm and
 * fio; the JSON has each side's best round and the median of the
 * per-round ratios (a shared or virtual disk is noisy: look at both).  Ends with one JSON
 * line: both throughputs and kvmm/fio ratios (target >= 0.9).
 */
#include "kvmm/kvmmd/tier_host.h"
#include "kvmm/kvmmd/tier_nvme.h"
#include "vmm/vmm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* fio's bandwidth in bytes/s for one job, or -1. */
static double run_fio(const char *file, const char *rw, size_t bs,
		      unsigned int qd, uint64_t offset, uint64_t size)
{
	char cmd[1024], line[8192];
	FILE *p;
	double bw = -1;

	snprintf(cmd, sizeof(cmd),
		 "fio --name=kvmm --filename=%s --rw=%s --bs=%zu --iodepth=%u "
		 "--ioengine=io_uring --direct=1 --offset=%llu --size=%llu "
		 "--fixedbufs=1 --registerfiles=1 --output-format=terse "
		 "--terse-version=3 2>/dev/null",
		 file, rw, bs, qd, (unsigned long long)offset,
		 (unsigned long long)size);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	while (fgets(line, sizeof(line), p)) {
		char *f = line;
		int field = 1, want = strcmp(rw, "read") == 0 ? 7 : 48;

		if (strncmp(line, "3;", 2))
			continue;
		while (f && field < want) {
			f = strchr(f, ';');
			if (f)
				f++;
			field++;
		}
		if (f)
			bw = strtod(f, NULL) * 1024.0;
	}
	if (pclose(p) != 0)
		return -1;
	return bw;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	const char *file = "/var/tmp/kvmm-nvme-bench";
	uint64_t block = 256 * 1024, total = 512ull << 20;
	unsigned int qd = 8, rounds = 3, batch = 256;
	struct tier_nvme *t;
	struct tier_host *h;
	int r;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--file") && i + 1 < argc)
			file = argv[++i];
		else if (!strcmp(argv[i], "--block-bytes") && i + 1 < argc)
			r = tier_parse_size(argv[++i], &block);
		else if (!strcmp(argv[i], "--total-bytes") && i + 1 < argc)
			r = tier_parse_size(argv[++i], &total);
		else if (!strcmp(argv[i], "--qd") && i + 1 < argc)
			qd = (unsigned int)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
			rounds = (unsigned int)atoi(argv[++i]);
		else {
			fprintf(stderr,
				"usage: %s [--file PATH] [--block-bytes N] [--total-bytes N] [--qd N] [--rounds N]\n",
				argv[0]);
			return 2;
		}
	}
	vmm_log_set_level(VMM_LOG_WARN);
	if (block % 4096 || !block || !qd || !rounds) {
		fprintf(stderr, "nvme-tier: bad parameters\n");
		return 2;
	}
	uint64_t nblocks = total / block;
	uint64_t stride = 4096 + block;
	if (batch > nblocks)
		batch = (unsigned int)nblocks;

	/* source/destination payloads: a host-tier slab, registered */
	struct tier_host_config hc = { .size = sizeof(hc),
				       .capacity_bytes = batch * block,
				       .slot_bytes = block,
				       .numa_node = -1 };
	r = tier_host_open(&hc, &h);
	if (r) {
		fprintf(stderr, "nvme-tier: host slab: %s\n", strerror(-r));
		return 1;
	}
	size_t reg_len;
	unsigned char *reg = tier_host_base(h, &reg_len);
	for (unsigned int i = 0; i < batch; i++) {
		uint32_t s;

		if (tier_host_alloc(h, &s))
			return 1;
	}
	for (size_t i = 0; i < reg_len; i++)
		reg[i] = (unsigned char)(i * 131 + (i >> 13));

	struct tier_nvme_config nc = { .size = sizeof(nc),
				       .path = file,
				       .capacity_bytes =
					       4096 + nblocks * stride,
				       .payload_bytes = block,
				       .queue_depth = qd,
				       .io_bytes = block,
				       .reg_base = reg,
				       .reg_len = reg_len,
				       .reformat = true };
	r = tier_nvme_open(&nc, &t);
	if (r) {
		printf("nvme-tier: cannot open %s: %s\n", file, strerror(-r));
		printf("{\"bench\":\"nvme-tier\",\"skipped\":\"%s\"}\n",
		       r == -EOPNOTSUPP ? "no O_DIRECT on this file system" :
					  strerror(-r));
		tier_host_close(h);
		return r == -EOPNOTSUPP ? 0 : 1;
	}
	struct tier_nvme_io *ios = calloc(batch, sizeof(*ios));
	uint32_t *slots = calloc(nblocks, sizeof(*slots));
	uint64_t gen = 1;
	double best_w = 0, best_r = 0, fio_w = 0, fio_r = 0;
	double wratio[64], rratio[64];
	unsigned int nratio = 0;
	int failures = 0;

	/* Warm the file: write every byte once (fio and us both overwrite
	 * allocated, written extents afterwards). */
	(void)run_fio(file, "write", stride, qd, 0, 4096 + nblocks * stride);

	for (unsigned int round = 0; round <= rounds; round++) {
		/* free everything so this round writes every slot again */
		for (uint64_t i = 0; round && i < nblocks; i++)
			if (tier_nvme_free(t, slots[i]))
				failures++;
		double t0 = now_s();
		for (uint64_t i = 0; i < nblocks; i += batch) {
			unsigned int n = (unsigned int)(nblocks - i < batch ?
								nblocks - i :
								batch);

			for (unsigned int j = 0; j < n; j++)
				ios[j] = (struct tier_nvme_io){
					.hash = gen++,
					.buf = tier_host_slot_addr(h, j),
					.length = block,
					.headroom = true,
				};
			failures += tier_nvme_write_batch(t, ios, n);
			for (unsigned int j = 0; j < n; j++)
				slots[i + j] = ios[j].slot;
		}
		double wt = now_s() - t0;
		t0 = now_s();
		for (uint64_t i = 0; i < nblocks; i += batch) {
			unsigned int n = (unsigned int)(nblocks - i < batch ?
								nblocks - i :
								batch);

			for (unsigned int j = 0; j < n; j++)
				ios[j] = (struct tier_nvme_io){
					.hash = gen - nblocks + i + j,
					.slot = slots[i + j],
					.buf = tier_host_slot_addr(h, j),
					.headroom = true,
				};
			failures += tier_nvme_read_batch(t, ios, n);
		}
		double rt = now_s() - t0;
		if (round == 0)
			continue; /* the first round warms caches and the ring */
		double wbw = (double)(nblocks * block) / wt;
		double rbw = (double)(nblocks * block) / rt;
		if (wbw > best_w)
			best_w = wbw;
		if (rbw > best_r)
			best_r = rbw;
		/* fio: one I/O per slot (4 KiB header + payload), as the
		 * tier does from the host slab; same depth, file, region */
		double fw = run_fio(file, "write", stride, qd, 4096,
				    nblocks * stride);
		double fr = run_fio(file, "read", stride, qd, 4096,
				    nblocks * stride);
		if (fw > fio_w)
			fio_w = fw;
		if (fr > fio_r)
			fio_r = fr;
		if (fw > 0 && fr > 0 && nratio < 64) {
			wratio[nratio] = wbw / fw;
			rratio[nratio++] = rbw / fr;
		}
		printf("round %u: kvmm write %.0f MB/s read %.0f MB/s | fio write %.0f MB/s read %.0f MB/s\n",
		       round, wbw / 1e6, rbw / 1e6, fw / 1e6, fr / 1e6);
	}
	struct tier_nvme_stats st;
	tier_nvme_get_stats(t, &st);
	tier_nvme_close(t);
	for (unsigned int i = 0; i < batch; i++)
		tier_host_free(h, i);
	tier_host_close(h);
	qsort(wratio, nratio, sizeof(double), cmp_double);
	qsort(rratio, nratio, sizeof(double), cmp_double);
	free(ios);
	free(slots);

	printf("{\"bench\":\"nvme-tier\",\"file\":\"%s\",\"block_bytes\":%llu,"
	       "\"io_bytes\":%llu,\"qd\":%u,\"total_bytes\":%llu,"
	       "\"rounds\":%u,\"kvmm_write_MBps\":%.1f,\"fio_write_MBps\":%.1f,"
	       "\"write_ratio\":%.3f,\"kvmm_read_MBps\":%.1f,"
	       "\"fio_read_MBps\":%.1f,\"read_ratio\":%.3f,"
	       "\"median_round_write_ratio\":%.3f,"
	       "\"median_round_read_ratio\":%.3f,\"checksum_failures\":%llu,\"failures\":%d,"
	       "\"registered_buffers\":%s,\"target\":0.9}\n",
	       file, (unsigned long long)block, (unsigned long long)stride, qd,
	       (unsigned long long)(nblocks * block), rounds, best_w / 1e6,
	       fio_w / 1e6, fio_w > 0 ? best_w / fio_w : 0, best_r / 1e6,
	       fio_r / 1e6, fio_r > 0 ? best_r / fio_r : 0,
	       nratio ? wratio[nratio / 2] : 0, nratio ? rratio[nratio / 2] : 0,
	       (unsigned long long)st.checksum_failures, failures,
	       st.registered_buffers ? "true" : "false");
	unlink(file);
	return failures ? 1 : 0;
}
