// SPDX-License-Identifier: MIT
/*
 * Asynchronous restores: what a PREFIX_OPEN of NVMe blocks costs, and what
 * it costs everyone else, on a real kvmmd (host backend, 64 KiB pages,
 * 256 KiB blocks) with an NVMe file in $KVMM_NVME_TEST_DIR (/var/tmp).
 *
 * Contents of 16 blocks (4 MiB) each are published until ROUNDS of them
 * were pushed down to NVMe (through a --host-mem tier, default 48M);
 * then, while a second client process sends socket NOPs back to back and
 * times each, the first opens those ROUNDS contents (16 NVMe restores
 * each).  With a host tier of 64 slots or more kvmmd keeps 8 of them for
 * staging NVMe restores (8 in flight); a smaller one (--host-mem 2M)
 * shows the 2-deep staging of a full tiny tier.
 *
 * Prints the open's latency and throughput, the tier's per-block restore
 * latency (TIER_STATS restore_ns / promotions_out, queueing included),
 * and the NOP round trip during the restores against the same client's
 * NOPs outside them (the baseline, same run).  The ratio that matters is
 * nop_max_during / open_ms: about 1 if restores blocked the loop (every
 * client waited for the whole open), far below 1 when they overlap.
 * Ends with one JSON line.
 *
 *   build/bench/restore-overlap [--rounds N] [--host-mem SIZE]
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench/bench.h"
#include "tests/cache-restore-common.h"

#define NBLK 16
#define MAX_NOPS (1 << 20)

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static uint64_t hash_of(int k, int b)
{
	return 0x9100000ull * (k + 1) + b + 1;
}

static void write_content(const char *sock, int k)
{
	struct kvmm_block_publish_reply rep;
	static uint32_t ids[NBLK * CC_PPB];
	uint64_t h[NBLK];
	struct cc c;
	uint32_t seq;

	for (int b = 0; b < NBLK; b++)
		h[b] = hash_of(k, b);
	cc_connect(&c, sock);
	cc_region(&c);
	seq = cc_seq_open(&c);
	cc_extend(&c, seq, NBLK * CC_TPB, ids);
	cc_fill(&c, ids, NBLK, 300 + k);
	t_ok(cc_publish(&c, seq, 0, h, NBLK, &rep));
	t_assert_eq(rep.published, NBLK);
	cc_seq_close(&c, seq, ids, NBLK * CC_PPB);
	cc_disconnect(&c);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

struct nop_stats {
	uint64_t n, p50, p99, max;
};

static void summarize(uint64_t *v, uint64_t n, struct nop_stats *st)
{
	st->n = n;
	if (!n)
		return;
	qsort(v, n, sizeof(*v), cmp_u64);
	st->p50 = v[n / 2];
	st->p99 = v[n * 99 / 100];
	st->max = v[n - 1];
}

/*
 * The other client: NOPs back to back until told to stop (a byte on
 * ctl), then reads the restore windows from ctl and writes the NOP
 * statistics inside and outside them to out.
 */
static void nop_client(const char *sock, int ctl, int out)
{
	uint64_t *t0 = malloc(MAX_NOPS * sizeof(*t0));
	uint64_t *lat = malloc(MAX_NOPS * sizeof(*lat));
	uint64_t *in = malloc(MAX_NOPS * sizeof(*in));
	uint64_t *outside = malloc(MAX_NOPS * sizeof(*outside));
	uint64_t n = 0, nin = 0, nout = 0, win[2 * 64], nwin;
	struct nop_stats st[2];
	struct pollfd pfd = { .fd = ctl, .events = POLLIN };
	struct cc c;
	char stop;

	t_assert(t0 && lat && in && outside);
	cc_connect(&c, sock);
	t_assert_eq(write(out, "r", 1), 1); /* ready */
	while (n < MAX_NOPS && poll(&pfd, 1, 0) == 0) {
		t0[n] = now_ns();
		t_ok(cc_call(&c, KVMM_CMD_NOP, NULL, 0, NULL, 0, NULL, NULL));
		lat[n] = now_ns() - t0[n];
		n++;
	}
	cc_disconnect(&c);
	t_assert_eq(read(ctl, &stop, 1), 1);
	t_assert_eq(read(ctl, &nwin, sizeof(nwin)), sizeof(nwin));
	t_assert(nwin <= 64);
	t_assert_eq(read(ctl, win, nwin * 16), (ssize_t)(nwin * 16));
	for (uint64_t i = 0; i < n; i++) {
		bool during = false;

		for (uint64_t w = 0; w < nwin; w++)
			during |= t0[i] + lat[i] > win[2 * w] &&
				  t0[i] < win[2 * w + 1];
		if (during)
			in[nin++] = lat[i];
		else
			outside[nout++] = lat[i];
	}
	summarize(in, nin, &st[0]);
	summarize(outside, nout, &st[1]);
	t_assert_eq(write(out, st, sizeof(st)), sizeof(st));
	_exit(0);
}

int main(int argc, char **argv)
{
	struct kvmm_tier_stats_reply ts0, ts;
	struct kvmm_prefix_open_reply rep;
	static uint32_t ids[NBLK * CC_PPB];
	uint64_t win[2 * 64], nwin = 0, open_ns = 0, open_max = 0;
	int rounds = 4, ctl[2], res[2], contents = 0;
	const char *host_mem = "48M";
	struct nop_stats st[2];
	const char *dir = getenv("KVMM_NVME_TEST_DIR");
	char nvme[256], size[32], ch;
	struct td_daemon d;
	struct cc a;
	pid_t p;
	int fd;

	static const char usage[] =
		"usage: restore-overlap [--rounds 1..4] [--host-mem SIZE]\n";

	if (bench_help(argc, argv, usage))
		return 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--host-mem") && i + 1 < argc)
			host_mem = argv[++i];
		else
			return bench_usage_error("restore-overlap", argv[i],
						 usage);
	}
	if (rounds < 1 || rounds > 4)
		rounds = 4;
	snprintf(nvme, sizeof(nvme), "%s/kvmm-restore-bench-%d",
		 dir ? dir : "/var/tmp", getpid());
	fd = open(nvme, O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0600);
	if (fd < 0) {
		printf("skip: O_DIRECT not possible for %s; set KVMM_NVME_TEST_DIR\n",
		       nvme);
		return 77;
	}
	close(fd);
	unlink(nvme);
	nt_size_arg(size, sizeof(size), 100, CC_PPB * CC_PAGE);
	const char *args[] = {
		"--cache-gpu-blocks", "16",   "--host-mem",  host_mem,
		"--nvme-path",	      nvme,   "--nvme-size", size,
		"--log-level",	      "warn", NULL
	};
	if (td_start(&d, args))
		t_fail("kvmmd did not start");
	/* oldest first down the tiers: once NVMe holds rounds contents,
	 * contents 0 .. rounds-1 are there */
	do {
		t_assert(contents < 64);
		write_content(d.sock, contents++);
		cc_settled_stats(d.sock, &ts0);
	} while (ts0.tiers[2].used_blocks < (uint64_t)rounds * NBLK);

	t_ok(pipe(ctl));
	t_ok(pipe(res));
	p = fork();
	t_assert(p >= 0);
	if (p == 0) {
		close(ctl[1]);
		close(res[0]);
		nop_client(d.sock, ctl[0], res[1]);
	}
	close(ctl[0]);
	close(res[1]);
	t_assert_eq(read(res[0], &ch, 1), 1);
	usleep(200000); /* baseline NOPs, nothing else running */
	cc_connect(&a, d.sock);
	cc_region(&a);
	for (int k = 0; k < rounds; k++) {
		uint64_t h[NBLK], t;

		for (int b = 0; b < NBLK; b++)
			h[b] = hash_of(k, b);
		t = now_ns();
		win[2 * nwin] = t;
		cc_prefix(&a, h, NBLK, &rep, ids);
		win[2 * nwin + 1] = now_ns();
		t = win[2 * nwin + 1] - t;
		nwin++;
		open_ns += t;
		if (t > open_max)
			open_max = t;
		t_assert_eq(rep.nr_blocks, NBLK);
		t_assert_eq(rep.from_nvme, NBLK);
		cc_check(&a, ids, NBLK, 300 + k);
		cc_seq_close(&a, rep.seq_id, ids, NBLK * CC_PPB);
		usleep(100000); /* NOPs outside the restores too */
	}
	cc_disconnect(&a);
	t_assert_eq(write(ctl[1], "s", 1), 1);
	t_assert_eq(write(ctl[1], &nwin, sizeof(nwin)), sizeof(nwin));
	t_assert_eq(write(ctl[1], win, nwin * 16), (ssize_t)(nwin * 16));
	t_assert_eq(read(res[0], st, sizeof(st)), sizeof(st));
	t_assert_eq(cc_wait_child(p), 0);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(td_stop(&d), 0);
	unlink(nvme);

	uint64_t restored =
		ts.tiers[2].promotions_out - ts0.tiers[2].promotions_out;
	double blk_ms = (ts.tiers[2].restore_ns - ts0.tiers[2].restore_ns) /
			1e6 / (restored ? restored : 1);
	double open_ms = open_ns / 1e6 / rounds;
	double mbps = (double)rounds * NBLK * CC_PPB * CC_PAGE / 1e6 /
		      (open_ns / 1e9);
	double ratio = st[0].max / 1e6 / (open_max / 1e6);

	printf("host tier %s (%llu slots): prefix open of %d NVMe blocks (%d MiB): %.2f ms mean, %.2f ms max, %.0f MB/s; per-block restore %.2f ms (submit to done), %llu restores\n",
	       host_mem, (unsigned long long)ts.tiers[1].capacity_blocks, NBLK,
	       NBLK * CC_PPB * CC_PAGE >> 20, open_ms, open_max / 1e6, mbps,
	       blk_ms, (unsigned long long)restored);
	printf("other client's socket NOP: during restores p50 %.1f us p99 %.1f us max %.3f ms (%llu NOPs); outside p50 %.1f us p99 %.1f us max %.3f ms (%llu NOPs)\n",
	       st[0].p50 / 1e3, st[0].p99 / 1e3, st[0].max / 1e6,
	       (unsigned long long)st[0].n, st[1].p50 / 1e3, st[1].p99 / 1e3,
	       st[1].max / 1e6, (unsigned long long)st[1].n);
	printf("nop max during / longest open: %.3f (about 1 if restores blocked the loop)\n",
	       ratio);
	printf("{\"bench\":\"restore-overlap\",\"baseline\":\"nops_outside_restores\","
	       "\"host_slots\":%llu,\"blocks\":%d,\"open_ms\":%.3f,\"open_mb_per_s\":%.1f,"
	       "\"restore_block_ms\":%.3f,\"nop_during_p50_us\":%.1f,"
	       "\"nop_during_p99_us\":%.1f,\"nop_during_max_ms\":%.3f,"
	       "\"nop_outside_p50_us\":%.1f,\"nop_outside_p99_us\":%.1f,"
	       "\"nop_p99_during_over_outside\":%.2f,"
	       "\"nop_max_during_over_open\":%.3f}\n",
	       (unsigned long long)ts.tiers[1].capacity_blocks, NBLK, open_ms,
	       mbps, blk_ms, st[0].p50 / 1e3, st[0].p99 / 1e3, st[0].max / 1e6,
	       st[1].p50 / 1e3, st[1].p99 / 1e3,
	       st[1].p99 ? (double)st[0].p99 / st[1].p99 : 0.0, ratio);
	return 0;
}
