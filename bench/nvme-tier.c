// SPDX-License-Identifier: MIT
/*
 * NVMe tier throughput against fio on the same file.
 *
 *   build/bench/nvme-tier [--file PATH] [--block-bytes N] [--total-bytes N]
 *                         [--qd N] [--batch N] [--rounds N]
 *
 * Writes and reads block-sized payloads through tier_nvme (io_uring,
 * O_DIRECT, registered buffers, headers and CRC32C included), then runs
 * fio (ioengine=io_uring, direct=1, fixed buffers and files, the same I/O
 * size, depth, file, region and bytes).  The tier moves each block as one
 * I/O of its 4 KiB header plus the payload, so fio's bs is that slot
 * size; kvmm's figure counts payload bytes only, fio's every byte (the
 * header costs kvmm 4096 / (4096 + block) of the ratio).  The file is
 * written once before measuring so neither side pays for converting
 * unwritten extents.  PATH may be a block device (a loop device over
 * tmpfs shows the CPU side of both without a disk's noise).
 *
 * Round 0 warms up; then kvmm and fio alternate which goes first.  Each
 * round gives a kvmm/fio ratio of neighbouring runs; the JSON line has
 * the medians (throughputs, ratios, and CPU microseconds per MB of each
 * side, which a shared machine disturbs much less than wall time), the
 * smallest and largest ratio, and how many I/Os and io_uring_enter calls
 * kvmm needed per block.  Target: ratios >= 0.9.
 */
#include "kvmm/kvmmd/tier_host.h"
#include "kvmm/kvmmd/tier_nvme.h"
#include "vmm/vmm.h"
#include "bench/bench.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * One fio job: its bandwidth in bytes/s (or -1) and the CPU seconds its
 * job thread used (user + system, from the terse line's percentages of
 * its runtime).
 */
static double run_fio(const char *file, const char *rw, size_t bs,
		      unsigned int qd, uint64_t offset, uint64_t size,
		      double *cpu)
{
	bool rd = strcmp(rw, "read") == 0;
	char cmd[1024], line[8192];
	FILE *p;
	double bw = -1;

	*cpu = 0;
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
		/* terse v3 fields (1-based): 7/48 read/write KiB/s, 9/50
		 * read/write runtime ms, 88/89 user/system CPU % */
		double v[90] = { 0 };
		char *f = line;

		if (strncmp(line, "3;", 2))
			continue;
		for (int field = 1; f && field < 90; field++) {
			v[field] = strtod(f, NULL);
			f = strchr(f, ';');
			if (f)
				f++;
		}
		bw = v[rd ? 7 : 48] * 1024.0;
		*cpu = (v[88] + v[89]) / 100.0 * v[rd ? 9 : 50] / 1000.0;
	}
	if (pclose(p) != 0)
		return -1;
	return bw;
}

/*
 * One kvmm round: every slot written then read, in batches of the host
 * slab's size.  Payload bytes per second in *wbw and *rbw.  The slots of
 * the previous round are freed highest first so the free stack hands them
 * out lowest first again: each round walks the file front to back, as
 * fio's sequential job does.
 */
static int kvmm_round(struct tier_nvme *t, struct tier_host *h,
		      struct tier_nvme_io *ios, uint32_t *slots,
		      uint64_t nblocks, unsigned int batch, uint64_t block,
		      unsigned int round, double *wbw, double *rbw,
		      double *wcpu, double *rcpu)
{
	static uint64_t gen = 1;
	int failures = 0;

	for (uint64_t i = nblocks; round && i-- > 0;)
		if (tier_nvme_free(t, slots[i]))
			failures++;
	double t0 = now_s(), c0 = cpu_s();
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
	*wcpu = cpu_s() - c0;
	t0 = now_s();
	c0 = cpu_s();
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
	*rcpu = cpu_s() - c0;
	*wbw = (double)(nblocks * block) / wt;
	*rbw = (double)(nblocks * block) / rt;
	return failures;
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
		else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
			batch = (unsigned int)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
			rounds = (unsigned int)atoi(argv[++i]);
		else {
			fprintf(stderr,
				"usage: %s [--file PATH] [--block-bytes N] [--total-bytes N] [--qd N] [--batch N] [--rounds N]\n",
				argv[0]);
			return 2;
		}
	}
	vmm_log_set_level(VMM_LOG_WARN);
	if (block % 4096 || !block || !qd || !rounds || !batch) {
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
	double *wr = calloc(rounds, sizeof(*wr)),
	       *rr = calloc(rounds, sizeof(*rr));
	double *kw = calloc(rounds, sizeof(*kw)),
	       *kr = calloc(rounds, sizeof(*kr));
	double *fw = calloc(rounds, sizeof(*fw)),
	       *fr = calloc(rounds, sizeof(*fr));
	double *cw[2], *cr[2]; /* CPU us/MB, kvmm and fio */
	double fio_cw;
	struct tier_nvme_stats st0, st;
	struct stat fst;
	unsigned int nratio = 0;
	int failures = 0;

	for (int i = 0; i < 2; i++) {
		cw[i] = calloc(rounds, sizeof(double));
		cr[i] = calloc(rounds, sizeof(double));
		if (!cw[i] || !cr[i])
			return 1;
	}
	if (!ios || !slots || !wr || !rr || !kw || !kr || !fw || !fr)
		return 1;
	/* Warm the file: write every byte once (fio and us both overwrite
	 * allocated, written extents afterwards). */
	(void)run_fio(file, "write", stride, qd, 0, 4096 + nblocks * stride,
		      &fio_cw);

	/* Round 0 warms caches and the ring and is not counted.  Then the
	 * order alternates, kvmm first in odd rounds and fio first in even
	 * ones, so a drift of the shared disk over time weighs on both
	 * sides alike; the ratios are per round (neighbouring runs) and the
	 * JSON has their medians. */
	for (unsigned int round = 0; round <= rounds; round++) {
		double kvmm_w, kvmm_r, fio_w = 0, fio_r = 0;
		double kvmm_cw, kvmm_cr, fio_cw = 0, fio_cr = 0;
		bool fio_first = round && round % 2 == 0;

		if (round == 1)
			tier_nvme_get_stats(t, &st0);
		if (fio_first) {
			fio_w = run_fio(file, "write", stride, qd, 4096,
					nblocks * stride, &fio_cw);
			fio_r = run_fio(file, "read", stride, qd, 4096,
					nblocks * stride, &fio_cr);
		}
		failures += kvmm_round(t, h, ios, slots, nblocks, batch, block,
				       round, &kvmm_w, &kvmm_r, &kvmm_cw,
				       &kvmm_cr);
		if (!fio_first && round) {
			fio_w = run_fio(file, "write", stride, qd, 4096,
					nblocks * stride, &fio_cw);
			fio_r = run_fio(file, "read", stride, qd, 4096,
					nblocks * stride, &fio_cr);
		}
		if (round == 0)
			continue;
		kw[nratio] = kvmm_w;
		kr[nratio] = kvmm_r;
		fw[nratio] = fio_w;
		fr[nratio] = fio_r;
		wr[nratio] = fio_w > 0 ? kvmm_w / fio_w : 0;
		rr[nratio] = fio_r > 0 ? kvmm_r / fio_r : 0;
		/* CPU microseconds per MB moved (fio's bytes are slot
		 * bytes, ours payload bytes: both per MB of their own) */
		cw[0][nratio] = kvmm_cw * 1e12 / (double)(nblocks * block);
		cr[0][nratio] = kvmm_cr * 1e12 / (double)(nblocks * block);
		cw[1][nratio] = fio_cw * 1e12 / (double)(nblocks * stride);
		cr[1][nratio] = fio_cr * 1e12 / (double)(nblocks * stride);
		nratio++;
		printf("round %u (%s first): kvmm write %.0f MB/s read %.0f MB/s | fio write %.0f MB/s read %.0f MB/s | ratio write %.3f read %.3f | cpu us/MB kvmm %.0f/%.0f fio %.0f/%.0f\n",
		       round, fio_first ? "fio" : "kvmm", kvmm_w / 1e6,
		       kvmm_r / 1e6, fio_w / 1e6, fio_r / 1e6, wr[nratio - 1],
		       rr[nratio - 1], cw[0][nratio - 1], cr[0][nratio - 1],
		       cw[1][nratio - 1], cr[1][nratio - 1]);
		fflush(stdout);
	}
	tier_nvme_get_stats(t, &st);
	tier_nvme_close(t);
	for (unsigned int i = 0; i < batch; i++)
		tier_host_free(h, i);
	tier_host_close(h);

	/* I/Os and io_uring_enter calls per block over the counted rounds:
	 * 1 SQE per block means header and payload moved as one I/O */
	double blocks_moved = 2.0 * (double)nblocks * nratio;
	double med_kw = median(kw, nratio), med_fw = median(fw, nratio);
	double med_kr = median(kr, nratio), med_fr = median(fr, nratio);
	double med_wr = median(wr, nratio), med_rr = median(rr, nratio);
	double med_cw[2], med_cr[2];

	for (int i = 0; i < 2; i++) {
		med_cw[i] = median(cw[i], nratio);
		med_cr[i] = median(cr[i], nratio);
	}
	printf("{\"bench\":\"nvme-tier\",\"file\":\"%s\",\"block_bytes\":%llu,"
	       "\"io_bytes\":%llu,\"qd\":%u,\"total_bytes\":%llu,"
	       "\"rounds\":%u,\"kvmm_write_MBps\":%.1f,\"fio_write_MBps\":%.1f,"
	       "\"write_ratio\":%.3f,\"kvmm_read_MBps\":%.1f,"
	       "\"fio_read_MBps\":%.1f,\"read_ratio\":%.3f,"
	       "\"write_ratio_min\":%.3f,\"write_ratio_max\":%.3f,"
	       "\"read_ratio_min\":%.3f,\"read_ratio_max\":%.3f,"
	       "\"kvmm_write_cpu_us_per_MB\":%.0f,\"fio_write_cpu_us_per_MB\":%.0f,"
	       "\"kvmm_read_cpu_us_per_MB\":%.0f,\"fio_read_cpu_us_per_MB\":%.0f,"
	       "\"sqes_per_block\":%.2f,\"enters_per_block\":%.2f,"
	       "\"checksum_failures\":%llu,\"failures\":%d,"
	       "\"registered_buffers\":%s,\"target\":0.9}\n",
	       file, (unsigned long long)block, (unsigned long long)stride, qd,
	       (unsigned long long)(nblocks * block), rounds, med_kw / 1e6,
	       med_fw / 1e6, med_wr, med_kr / 1e6, med_fr / 1e6, med_rr, wr[0],
	       wr[nratio - 1], rr[0], rr[nratio - 1], med_cw[0], med_cw[1],
	       med_cr[0], med_cr[1],
	       (double)(st.sqes - st0.sqes) / blocks_moved,
	       (double)(st.submits - st0.submits) / blocks_moved,
	       (unsigned long long)st.checksum_failures, failures,
	       st.registered_buffers ? "true" : "false");
	free(ios);
	free(slots);
	free(wr);
	free(rr);
	free(kw);
	free(kr);
	free(fw);
	free(fr);
	for (int i = 0; i < 2; i++) {
		free(cw[i]);
		free(cr[i]);
	}
	/* a regular file is ours (created for the run); a block device is
	 * not to be removed */
	if (!stat(file, &fst) && S_ISREG(fst.st_mode))
		unlink(file);
	return failures ? 1 : 0;
}
