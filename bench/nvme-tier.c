// SPDX-License-Identifier: MIT
/*
 * NVMe tier throughput against fio on the same file.
 *
 *   build/bench/nvme-tier [--file PATH] [--block-bytes N] [--total-bytes N]
 *                         [--host-bytes N] [--qd N] [--batch N]
 *                         [--threads N] [--rounds N] [--settle-ms N]
 *                         [--fio-mem malloc|shmhuge]
 *
 * Writes and reads block-sized payloads through tier_nvme (io_uring,
 * O_DIRECT, registered buffers, headers and CRC32C included) the way
 * kvmmd's migration engine does: --threads workers (2) each calling the
 * tier with batches of --batch blocks (8, migrate's nvme_batch), each
 * with its own host-slab buffers (slots spread over a --host-bytes slab,
 * 128 MiB, which the tier backs with 2 MiB pages as in kvmmd).  Then fio
 * runs (ioengine=io_uring,
 * direct=1, fixed buffers and files, the same I/O size, depth, file,
 * region and bytes).  The tier moves each block as one I/O of its 4 KiB
 * header plus the payload, so fio's bs is that slot size; kvmm's figure
 * counts payload bytes only, fio's every byte (the header costs kvmm
 * 4096 / (4096 + block) of the ratio).  The file is written once before
 * measuring so neither side pays for converting unwritten extents.  PATH
 * may be a block device (a loop device over tmpfs shows the CPU side of
 * both without a disk's noise).
 *
 * Round 0 warms up; then kvmm and fio alternate which goes first, and
 * every run starts --settle-ms (300) after the previous one ended (fio's
 * own start-up adds about 0.3 s).  Each round gives a kvmm/fio ratio of
 * neighbouring runs; the JSON line has the medians (throughputs, ratios,
 * CPU microseconds per MB of each side, and the disk's queue depth while
 * busy, and the share of the run it was busy at all, both from
 * /sys/dev/block/MAJ:MIN/stat), the smallest and largest
 * ratio, how many I/Os and io_uring_enter calls kvmm needed per block,
 * how many I/Os the block layer merged into each disk request
 * (*_ios_per_req), how many physically contiguous pieces (DMA
 * segments) each of kvmm's I/O buffers is (kvmm_segments_per_io), and
 * the share of kvmm's runs its completion thread waited with the queue
 * full (kvmm_*_ring_full, from the tier's ring_wait_full_ns): next to
 * *_disk_busy, whether an idle disk had been left without blocks to
 * start or had them queued in io_uring.
 * fio's buffers are malloc'd 4 KiB pages, as scattered as chance makes
 * them: on a virtio disk without indirect descriptors that alone halves
 * its reads (Documentation/tiers.md).  --fio-mem shmhuge gives fio 2 MiB
 * pages too (it needs free hugetlb pages: sysctl vm.nr_hugepages=8), the
 * like-for-like comparison.  Target: ratios >= 0.9.
 */
#include "kvmm/kvmmd/tier_host.h"
#include "kvmm/kvmmd/tier_nvme.h"
#include "vmm/vmm.h"
#include "bench/bench.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/*
 * The disk under the file, from /sys/dev/block/MAJ:MIN/stat: io_ticks
 * (ms with at least one request in flight) and time_in_queue (requests x
 * ms).  Their ratio over a run is the queue depth the disk saw while it
 * was busy, whoever started the run (fio's start-up is idle time, not
 * counted): the check that kvmm keeps it as full as fio does.  Other
 * processes' I/O on the same disk shows up in it too.
 */
static char disk_stat[96];

struct disk_snap {
	double busy_ms, queue_ms;
	double reqs[2], merges[2]; /* [0] reads, [1] writes */
};

static void disk_snap(struct disk_snap *d)
{
	unsigned long long v[11] = { 0 };
	FILE *f = disk_stat[0] ? fopen(disk_stat, "r") : NULL;

	*d = (struct disk_snap){ 0 };
	if (!f)
		return;
	if (fscanf(f, "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu",
		   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7],
		   &v[8], &v[9], &v[10]) == 11) {
		d->busy_ms = (double)v[9];
		d->queue_ms = (double)v[10];
		d->reqs[0] = (double)v[0];
		d->merges[0] = (double)v[1];
		d->reqs[1] = (double)v[4];
		d->merges[1] = (double)v[5];
	}
	fclose(f);
}

static double disk_depth(const struct disk_snap *a, const struct disk_snap *b)
{
	double busy = b->busy_ms - a->busy_ms;

	return busy > 0 ? (b->queue_ms - a->queue_ms) / busy : 0;
}

/*
 * The share of a run's time [a, b] the disk had a request in flight
 * (io_ticks over the run's ms): below 1 when the queue ran dry between
 * I/Os, which the busy depth (disk_depth()) does not show, since it
 * counts busy time only.  A submitter that waits for a core on a loaded
 * machine leaves the disk idle meanwhile.  Other processes' I/O on the
 * same disk counts too.
 */
static double disk_busy(const struct disk_snap *a, const struct disk_snap *b,
			double ms)
{
	return ms > 0 ? (b->busy_ms - a->busy_ms) / ms : 0;
}

/*
 * I/Os per disk request over a run, reads or writes: above 1 when the
 * block layer merged neighbouring I/Os into one request (in a plug, or
 * while they waited in the I/O scheduler), so that the disk saw fewer,
 * larger requests than the program submitted.
 */
static double disk_ios_per_req(const struct disk_snap *a,
			       const struct disk_snap *b, bool write)
{
	double reqs = b->reqs[write] - a->reqs[write];

	return reqs > 0 ? (reqs + b->merges[write] - a->merges[write]) / reqs :
			  0;
}

/* fio's --mem (its I/O buffers): NULL for fio's default, malloc. */
static const char *fio_mem;

/*
 * One fio job: its bandwidth in bytes/s (or -1) and the CPU seconds its
 * job thread used (user + system, from the terse line's percentages of
 * its runtime).
 */
static double run_fio(const char *file, const char *rw, size_t bs,
		      unsigned int qd, uint64_t offset, uint64_t size,
		      double *cpu, double disk[4])
{
	bool rd = strcmp(rw, "read") == 0;
	struct disk_snap d0, d1;
	char cmd[1024], line[8192];
	FILE *p;
	double bw = -1, runtime_ms = 0;

	*cpu = 0;
	snprintf(cmd, sizeof(cmd),
		 "fio --name=kvmm --filename=%s --rw=%s --bs=%zu --iodepth=%u "
		 "--ioengine=io_uring --direct=1 --offset=%llu --size=%llu "
		 "--fixedbufs=1 --registerfiles=1 --output-format=terse "
		 "--terse-version=3 %s%s 2>/dev/null",
		 file, rw, bs, qd, (unsigned long long)offset,
		 (unsigned long long)size, fio_mem ? "--mem=" : "",
		 fio_mem ? fio_mem : "");
	disk_snap(&d0);
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
		runtime_ms = v[rd ? 9 : 50];
		*cpu = (v[88] + v[89]) / 100.0 * runtime_ms / 1000.0;
	}
	if (pclose(p) != 0)
		return -1;
	disk_snap(&d1);
	disk[0] = disk_depth(&d0, &d1);
	disk[1] = disk_ios_per_req(&d0, &d1, !rd);
	/* over fio's own runtime: its start-up and exit are not I/O time */
	disk[2] = disk_busy(&d0, &d1, runtime_ms);
	disk[3] = 0; /* the tier's own figure (kvmm_phase()) */
	return bw;
}

/*
 * How many physically contiguous pieces [p, p + len) is made of, from
 * /proc/self/pagemap (page frame numbers need CAP_SYS_ADMIN; -1 when they
 * cannot be read): the scatter-gather segments one I/O into it needs.
 * A virtio disk without indirect descriptors spends a ring descriptor per
 * segment, so this bounds how many such I/Os it can hold at once.
 */
static int phys_segments(const void *p, size_t len)
{
	long pg = sysconf(_SC_PAGESIZE);
	uintptr_t a = (uintptr_t)p & ~((uintptr_t)pg - 1);
	uintptr_t end = (uintptr_t)p + len;
	uint64_t prev = 0;
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	int segs = 0;

	if (fd < 0)
		return -1;
	for (; a < end; a += (uintptr_t)pg) {
		uint64_t e, pfn;

		if (pread(fd, &e, sizeof(e), (off_t)(a / (uintptr_t)pg * 8)) !=
			    sizeof(e) ||
		    !(e & (1ull << 63)) || !(pfn = e & ((1ull << 55) - 1))) {
			segs = -1;
			break;
		}
		if (!segs || pfn != prev + 1)
			segs++;
		prev = pfn;
	}
	close(fd);
	return segs;
}

/* HugePages_Free from /proc/meminfo (-1: unknown). */
static long long hugetlb_free(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	long long n = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "HugePages_Free: %lld", &n) == 1)
			break;
	fclose(f);
	return n;
}

/* The four runs of a round. */
enum { K_WRITE, K_READ, F_WRITE, F_READ, NRUNS };

/* One thread's share of a kvmm phase: batches tid, tid + nthreads, ... */
struct kvmm_worker {
	pthread_t thread;
	struct tier_nvme *t;
	struct tier_host *h;
	void **bufs; /* host slots: batch per thread */
	struct tier_nvme_io *ios; /* batch entries */
	uint32_t *slots; /* every block's slot (shared, disjoint entries) */
	uint64_t nblocks, block, hash0;
	unsigned int batch, tid, nthreads;
	bool write;
	int failures;
};

static void *kvmm_worker_run(void *arg)
{
	struct kvmm_worker *w = arg;
	uint64_t step = (uint64_t)w->batch * w->nthreads;

	for (uint64_t i = (uint64_t)w->batch * w->tid; i < w->nblocks;
	     i += step) {
		unsigned int n = (unsigned int)(w->nblocks - i < w->batch ?
							w->nblocks - i :
							w->batch);

		for (unsigned int j = 0; j < n; j++)
			w->ios[j] = (struct tier_nvme_io){
				.hash = w->hash0 + i + j,
				.slot = w->write ? 0 : w->slots[i + j],
				.buf = w->bufs[w->tid * w->batch + j],
				.length = w->write ? w->block : 0,
				.headroom = true,
			};
		if (w->write)
			w->failures += tier_nvme_write_batch(w->t, w->ios, n);
		else
			w->failures += tier_nvme_read_batch(w->t, w->ios, n);
		for (unsigned int j = 0; w->write && j < n; j++)
			w->slots[i + j] = w->ios[j].slot;
	}
	return NULL;
}

/*
 * One phase (every block written, or read) on nthreads threads, as
 * kvmmd's migration workers call the tier; its wall and CPU seconds, the
 * disk's figures, and disk[3], the share of the phase the tier's
 * completion thread waited in the kernel with queue_depth I/Os in flight
 * (ring_wait_full_ns): the queue full as the tier sees it.  Well above
 * the disk's busy share, the queue runs dry below io_uring, not for lack
 * of blocks to start.
 */
static int kvmm_phase(struct kvmm_worker *w, unsigned int nthreads, bool write,
		      double *wall, double *cpu, double disk[4])
{
	int failures = 0;
	struct disk_snap d0, d1;
	struct tier_nvme_stats s0, s1;

	tier_nvme_get_stats(w[0].t, &s0);
	disk_snap(&d0);
	double t0 = now_s(), c0 = cpu_s();

	for (unsigned int k = 0; k < nthreads; k++) {
		w[k].write = write;
		w[k].failures = 0;
		if (pthread_create(&w[k].thread, NULL, kvmm_worker_run,
				   &w[k])) {
			fprintf(stderr, "nvme-tier: pthread_create failed\n");
			exit(1);
		}
	}
	for (unsigned int k = 0; k < nthreads; k++) {
		pthread_join(w[k].thread, NULL);
		failures += w[k].failures;
	}
	*wall = now_s() - t0;
	*cpu = cpu_s() - c0;
	disk_snap(&d1);
	disk[0] = disk_depth(&d0, &d1);
	disk[1] = disk_ios_per_req(&d0, &d1, write);
	disk[2] = disk_busy(&d0, &d1, *wall * 1000.0);
	tier_nvme_get_stats(w[0].t, &s1);
	disk[3] = (double)(s1.ring_wait_full_ns - s0.ring_wait_full_ns) /
		  (*wall * 1e9);
	return failures;
}

/* Let the previous run's writes leave the disk's cache before the next
 * run starts, as fio's own start-up does for it. */
static void settle(unsigned int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000,
			       .tv_nsec = (long)(ms % 1000) * 1000000 };

	while (ms && nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/*
 * One kvmm round: every block written then read, each phase on the
 * worker threads; v[K_WRITE] and v[K_READ] get payload bytes per second,
 * CPU seconds and the disk's busy depth.  The slots
 * of the previous round are freed highest first so the free stack hands
 * them out lowest first again: each round walks the file front to back,
 * as fio's sequential job does.
 */
static int kvmm_round(struct kvmm_worker *w, unsigned int nthreads,
		      uint32_t *slots, uint64_t nblocks, uint64_t block,
		      unsigned int round, unsigned int settle_ms,
		      double v[NRUNS][6])
{
	static uint64_t gen = 1;
	int failures = 0;

	for (uint64_t i = nblocks; round && i-- > 0;)
		if (tier_nvme_free(w[0].t, slots[i]))
			failures++;
	for (unsigned int k = 0; k < nthreads; k++)
		w[k].hash0 = gen;
	gen += nblocks;
	for (int r = K_WRITE; r <= K_READ; r++) {
		double wall;

		settle(settle_ms);
		failures += kvmm_phase(w, nthreads, r == K_WRITE, &wall,
				       &v[r][1], &v[r][2]);
		v[r][0] = (double)(nblocks * block) / wall;
	}
	return failures;
}

/* A size option's value (tier_parse_size()'s forms: 4096, 256K, 1.5G);
 * -EINVAL, said with the option and the value, for anything else. */
static int size_arg(const char *opt, const char *val, uint64_t *size)
{
	int r = tier_parse_size(val, size);

	if (r)
		fprintf(stderr, "nvme-tier: %s: '%s' is not a size (%s)\n", opt,
			val, strerror(-r));
	return r;
}

int main(int argc, char **argv)
{
	const char *file = "/var/tmp/kvmm-nvme-bench";
	uint64_t block = 256 * 1024, total = 512ull << 20,
		 host_bytes = 128ull << 20;
	unsigned int qd = 8, rounds = 3, batch = 8, nthreads = 2,
		     settle_ms = 300;
	struct tier_nvme *t;
	struct tier_host *h;
	int r = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--file") && i + 1 < argc)
			file = argv[++i];
		else if (!strcmp(argv[i], "--block-bytes") && i + 1 < argc)
			r = size_arg("--block-bytes", argv[++i], &block);
		else if (!strcmp(argv[i], "--total-bytes") && i + 1 < argc)
			r = size_arg("--total-bytes", argv[++i], &total);
		else if (!strcmp(argv[i], "--host-bytes") && i + 1 < argc)
			r = size_arg("--host-bytes", argv[++i], &host_bytes);
		else if (!strcmp(argv[i], "--qd") && i + 1 < argc)
			qd = (unsigned int)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
			batch = (unsigned int)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
			rounds = (unsigned int)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			nthreads = (unsigned int)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--fio-mem") && i + 1 < argc)
			fio_mem = argv[++i];
		else if (!strcmp(argv[i], "--settle-ms") && i + 1 < argc)
			settle_ms = (unsigned int)atoi(argv[++i]);
		else {
			fprintf(stderr,
				"usage: %s [--file PATH] [--block-bytes N] [--total-bytes N] [--host-bytes N] [--qd N] [--batch N] [--threads N] [--rounds N] [--settle-ms N] [--fio-mem malloc|shmhuge]\n",
				argv[0]);
			return 2;
		}
		if (r)
			return 2;
	}
	vmm_log_set_level(VMM_LOG_WARN);
	if (block % 4096 || !block || !qd || !rounds || !batch || !nthreads ||
	    nthreads > 64) {
		fprintf(stderr, "nvme-tier: bad parameters\n");
		return 2;
	}
	if (fio_mem && strcmp(fio_mem, "malloc") &&
	    strcmp(fio_mem, "shmhuge")) {
		fprintf(stderr, "nvme-tier: --fio-mem is malloc or shmhuge\n");
		return 2;
	}
	if (fio_mem && !strcmp(fio_mem, "shmhuge")) {
		/* fio's buffers: qd slots, in 2 MiB hugetlb pages */
		uint64_t need = (qd * (4096 + block) + (2u << 20) - 1) >> 21;
		long long free_pages = hugetlb_free();

		if (free_pages < (long long)need + 1) {
			fprintf(stderr,
				"nvme-tier: --fio-mem shmhuge needs %llu free 2 MiB hugetlb pages, there are %lld (sysctl vm.nr_hugepages)\n",
				(unsigned long long)need + 1, free_pages);
			return 2;
		}
	}
	uint64_t nblocks = total / block;
	uint64_t stride = 4096 + block;
	if (!nblocks) {
		fprintf(stderr,
			"nvme-tier: --total-bytes %llu is less than a block (--block-bytes %llu)\n",
			(unsigned long long)total, (unsigned long long)block);
		return 2;
	}
	if (batch > nblocks)
		batch = (unsigned int)nblocks;
	unsigned int hslots = batch * nthreads; /* each thread its own */

	/*
	 * Source/destination payloads: host-tier slots, registered, as in
	 * kvmmd.  The slab is --host-bytes (128 MiB), much more than the
	 * slots used, and these are spread over it like the slots kvmmd's
	 * policy hands out: a slab's first and last 2 MiB cannot be huge
	 * pages (tier_nvme.c) and should weigh no more than in a real one.
	 */
	if (host_bytes < (uint64_t)hslots * block)
		host_bytes = (uint64_t)hslots * block;
	struct tier_host_config hc = { .size = sizeof(hc),
				       .capacity_bytes = host_bytes,
				       .slot_bytes = block,
				       .numa_node = -1 };
	r = tier_host_open(&hc, &h);
	if (r) {
		fprintf(stderr, "nvme-tier: host slab: %s\n", strerror(-r));
		return 1;
	}
	size_t reg_len;
	unsigned char *reg = tier_host_base(h, &reg_len);
	uint32_t host_slots = 0, s;
	void **bufs = calloc(hslots, sizeof(*bufs));

	while (tier_host_alloc(h, &s) == 0)
		host_slots++;
	if (!bufs || host_slots < hslots)
		return 1;
	for (unsigned int i = 0; i < hslots; i++)
		bufs[i] = tier_host_slot_addr(
			h,
			(uint32_t)((2ull * i + 1) * host_slots / (2 * hslots)));
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
	/* what the disk gets per I/O, after the tier asked for huge pages */
	double segs = 0;

	for (unsigned int i = 0; i < hslots && segs >= 0; i++) {
		int n = phys_segments((unsigned char *)bufs[i] -
					      TIER_NVME_HEADER_BYTES,
				      stride);

		segs = n < 0 ? -1 : segs + n;
	}
	if (segs > 0)
		segs /= hslots;
	struct tier_nvme_io *ios = calloc(hslots, sizeof(*ios));
	struct kvmm_worker w[64];
	uint32_t *slots = calloc(nblocks, sizeof(*slots));
	/* per counted round, for each run (kvmm write, kvmm read, fio
	 * write, fio read): MB/s, CPU us per MB, the disk's busy depth */
	double *bw[NRUNS], *cpu[NRUNS], *depth[NRUNS], *ioreq[NRUNS],
		*busy[NRUNS], *full[NRUNS], *ratio[2];
	double dummy_cpu, dummy_disk[4];
	struct tier_nvme_stats st0, st;
	struct stat fst;
	unsigned int nratio = 0;
	int failures = 0;

	if (!ios || !slots)
		return 1;
	if (!stat(file, &fst)) {
		dev_t dev = S_ISBLK(fst.st_mode) ? fst.st_rdev : fst.st_dev;

		snprintf(disk_stat, sizeof(disk_stat),
			 "/sys/dev/block/%u:%u/stat", major(dev), minor(dev));
	}
	for (int i = 0; i < NRUNS; i++) {
		bw[i] = calloc(rounds, sizeof(double));
		cpu[i] = calloc(rounds, sizeof(double));
		depth[i] = calloc(rounds, sizeof(double));
		ioreq[i] = calloc(rounds, sizeof(double));
		busy[i] = calloc(rounds, sizeof(double));
		full[i] = calloc(rounds, sizeof(double));
		if (!bw[i] || !cpu[i] || !depth[i] || !ioreq[i] || !busy[i] ||
		    !full[i])
			return 1;
	}
	for (int i = 0; i < 2; i++) {
		ratio[i] = calloc(rounds, sizeof(double));
		if (!ratio[i])
			return 1;
	}
	for (unsigned int k = 0; k < nthreads; k++)
		w[k] = (struct kvmm_worker){ .t = t,
					     .h = h,
					     .bufs = bufs,
					     .ios = ios + (size_t)k * batch,
					     .slots = slots,
					     .nblocks = nblocks,
					     .block = block,
					     .batch = batch,
					     .tid = k,
					     .nthreads = nthreads };
	/* Warm the file: write every byte once (fio and us both overwrite
	 * allocated, written extents afterwards). */
	(void)run_fio(file, "write", stride, qd, 0, 4096 + nblocks * stride,
		      &dummy_cpu, dummy_disk);

	/* Round 0 warms caches and the ring and is not counted.  Then the
	 * order alternates, kvmm first in odd rounds and fio first in even
	 * ones, so a drift of the shared disk over time weighs on both
	 * sides alike; the ratios are per round (neighbouring runs) and the
	 * JSON has their medians.  Every run starts settle_ms after the
	 * previous one ended (fio's start-up adds about 0.3 s more). */
	for (unsigned int round = 0; round <= rounds; round++) {
		/* bytes/s, CPU s, depth, I/Os per disk request, busy share,
		 * the tier's ring full (kvmm only) */
		double v[NRUNS][6] = { { 0 } };
		bool fio_first = round && round % 2 == 0;

		if (round == 1)
			tier_nvme_get_stats(t, &st0);
		for (int side = 0; side < 2; side++) {
			if ((side == 1) == fio_first) {
				failures += kvmm_round(w, nthreads, slots,
						       nblocks, block, round,
						       settle_ms, v);
				continue;
			}
			if (!round)
				continue;
			for (int r = F_WRITE; r <= F_READ; r++) {
				settle(settle_ms);
				v[r][0] = run_fio(
					file, r == F_WRITE ? "write" : "read",
					stride, qd, 4096, nblocks * stride,
					&v[r][1], &v[r][2]);
			}
		}
		if (round == 0)
			continue;
		for (int r = 0; r < NRUNS; r++) {
			/* fio's bytes are slot bytes, ours payload bytes:
			 * both per MB of their own */
			double bytes = (double)(nblocks *
						(r < F_WRITE ? block : stride));

			bw[r][nratio] = v[r][0];
			cpu[r][nratio] = v[r][1] * 1e12 / bytes;
			depth[r][nratio] = v[r][2];
			ioreq[r][nratio] = v[r][3];
			busy[r][nratio] = v[r][4];
			full[r][nratio] = v[r][5];
		}
		for (int i = 0; i < 2; i++)
			ratio[i][nratio] =
				v[F_WRITE + i][0] > 0 ?
					v[K_WRITE + i][0] / v[F_WRITE + i][0] :
					0;
		printf("round %u (%s first): kvmm write %.0f MB/s read %.0f MB/s | fio write %.0f MB/s read %.0f MB/s | ratio write %.3f read %.3f | cpu us/MB kvmm %.0f/%.0f fio %.0f/%.0f | disk depth kvmm %.1f/%.1f fio %.1f/%.1f | I/Os per request kvmm %.2f/%.2f fio %.2f/%.2f | disk busy kvmm %.2f/%.2f fio %.2f/%.2f | ring full kvmm %.2f/%.2f\n",
		       round, fio_first ? "fio" : "kvmm", v[K_WRITE][0] / 1e6,
		       v[K_READ][0] / 1e6, v[F_WRITE][0] / 1e6,
		       v[F_READ][0] / 1e6, ratio[0][nratio], ratio[1][nratio],
		       cpu[K_WRITE][nratio], cpu[K_READ][nratio],
		       cpu[F_WRITE][nratio], cpu[F_READ][nratio], v[K_WRITE][2],
		       v[K_READ][2], v[F_WRITE][2], v[F_READ][2], v[K_WRITE][3],
		       v[K_READ][3], v[F_WRITE][3], v[F_READ][3], v[K_WRITE][4],
		       v[K_READ][4], v[F_WRITE][4], v[F_READ][4], v[K_WRITE][5],
		       v[K_READ][5]);
		fflush(stdout);
		nratio++;
	}
	tier_nvme_get_stats(t, &st);
	tier_nvme_close(t);
	for (uint32_t i = 0; i < host_slots; i++)
		tier_host_free(h, i);
	tier_host_close(h);

	/* I/Os and io_uring_enter calls per block over the counted rounds:
	 * 1 SQE per block means header and payload moved as one I/O */
	double blocks_moved = 2.0 * (double)nblocks * nratio;
	double mb[NRUNS], mc[NRUNS], md[NRUNS], mq[NRUNS], mu[NRUNS], mf[NRUNS],
		mr[2];

	for (int r = 0; r < NRUNS; r++) {
		mb[r] = median(bw[r], nratio);
		mc[r] = median(cpu[r], nratio);
		md[r] = median(depth[r], nratio);
		mq[r] = median(ioreq[r], nratio);
		mu[r] = median(busy[r], nratio);
		mf[r] = median(full[r], nratio);
	}
	for (int i = 0; i < 2; i++)
		mr[i] = median(ratio[i],
			       nratio); /* sorts: [0] min, [n-1] max */
	printf("{\"bench\":\"nvme-tier\",\"file\":\"%s\",\"block_bytes\":%llu,"
	       "\"io_bytes\":%llu,\"qd\":%u,\"batch\":%u,\"threads\":%u,"
	       "\"total_bytes\":%llu,\"rounds\":%u,\"settle_ms\":%u,"
	       "\"kvmm_write_MBps\":%.1f,\"fio_write_MBps\":%.1f,"
	       "\"write_ratio\":%.3f,\"kvmm_read_MBps\":%.1f,"
	       "\"fio_read_MBps\":%.1f,\"read_ratio\":%.3f,"
	       "\"write_ratio_min\":%.3f,\"write_ratio_max\":%.3f,"
	       "\"read_ratio_min\":%.3f,\"read_ratio_max\":%.3f,"
	       "\"kvmm_write_cpu_us_per_MB\":%.0f,\"fio_write_cpu_us_per_MB\":%.0f,"
	       "\"kvmm_read_cpu_us_per_MB\":%.0f,\"fio_read_cpu_us_per_MB\":%.0f,"
	       "\"kvmm_write_disk_depth\":%.2f,\"fio_write_disk_depth\":%.2f,"
	       "\"kvmm_read_disk_depth\":%.2f,\"fio_read_disk_depth\":%.2f,"
	       "\"kvmm_write_ios_per_req\":%.2f,\"fio_write_ios_per_req\":%.2f,"
	       "\"kvmm_read_ios_per_req\":%.2f,\"fio_read_ios_per_req\":%.2f,"
	       "\"kvmm_write_disk_busy\":%.2f,\"fio_write_disk_busy\":%.2f,"
	       "\"kvmm_read_disk_busy\":%.2f,\"fio_read_disk_busy\":%.2f,"
	       "\"kvmm_write_ring_full\":%.2f,\"kvmm_read_ring_full\":%.2f,"
	       "\"sqes_per_block\":%.2f,\"enters_per_block\":%.2f,"
	       "\"checksum_failures\":%llu,\"failures\":%d,"
	       "\"registered_buffers\":%s,\"reg_huge_bytes\":%llu,"
	       "\"kvmm_segments_per_io\":%.1f,\"fio_mem\":\"%s\","
	       "\"target\":0.9}\n",
	       file, (unsigned long long)block, (unsigned long long)stride, qd,
	       batch, nthreads, (unsigned long long)(nblocks * block), rounds,
	       settle_ms, mb[K_WRITE] / 1e6, mb[F_WRITE] / 1e6, mr[0],
	       mb[K_READ] / 1e6, mb[F_READ] / 1e6, mr[1], ratio[0][0],
	       ratio[0][nratio - 1], ratio[1][0], ratio[1][nratio - 1],
	       mc[K_WRITE], mc[F_WRITE], mc[K_READ], mc[F_READ], md[K_WRITE],
	       md[F_WRITE], md[K_READ], md[F_READ], mq[K_WRITE], mq[F_WRITE],
	       mq[K_READ], mq[F_READ], mu[K_WRITE], mu[F_WRITE], mu[K_READ],
	       mu[F_READ], mf[K_WRITE], mf[K_READ],
	       (double)(st.sqes - st0.sqes) / blocks_moved,
	       (double)(st.submits - st0.submits) / blocks_moved,
	       (unsigned long long)st.checksum_failures, failures,
	       st.registered_buffers ? "true" : "false",
	       (unsigned long long)st.reg_huge_bytes, segs,
	       fio_mem ? fio_mem : "malloc");
	free(ios);
	free(slots);
	free(bufs);
	for (int i = 0; i < NRUNS; i++) {
		free(bw[i]);
		free(cpu[i]);
		free(depth[i]);
		free(ioreq[i]);
		free(busy[i]);
		free(full[i]);
	}
	for (int i = 0; i < 2; i++)
		free(ratio[i]);
	/* a regular file is ours (created for the run); a block device is
	 * not to be removed */
	if (!stat(file, &fst) && S_ISREG(fst.st_mode))
		unlink(file);
	return failures ? 1 : 0;
}
