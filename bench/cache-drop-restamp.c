// SPDX-License-Identifier: MIT
/*
 * What the restamp of the blocks an ADMIN_CACHE_DROP keeps on NVMe costs
 * the drop (Documentation/tiers.md, "Drop marks": each kept block's
 * header written again above the mark, a 4 KiB O_DIRECT write and an
 * fdatasync on a migration worker, before the reply).  The time of
 * `cache-drop` (every tier) keeping K pinned NVMe blocks, against a kvmmd
 * of this build, over the same drop against one whose restamp jobs fail
 * at once (KVMMD_TEST_MIGRATE_FAIL=nvme-restamp:1+: the job's round trip
 * through a worker, no header write, no sync; the mark and the
 * invalidations the same).  kvmmd as tests/lib/nvme_cache_args.h sets
 * it up (3 GPU blocks, 6 host, 6 NVMe; contents 0 and 1 of 3 blocks end
 * on NVMe) with room for 6 pins a session: K = 1 (content 1's first
 * block; 5 NVMe headers invalidated beside it) and K = 6 (every NVMe
 * block: nothing invalidated, the mark and 6 restamps).  Each drop is
 * of a cache filled anew and pinned (not timed), and its reply must
 * say the K restamped (nvme_restamped K) on this build and failed
 * (nvme_restamp_failures K) on the baseline, so the figure cannot
 * measure a drop that restamped nothing; an untimed drop after the
 * unpins empties the cache again.  Both daemons of a round run at once,
 * each on its own tier file (in $KVMM_NVME_TEST_DIR, default /var/tmp),
 * and take the drops in turn, which one goes first alternating (one
 * after the other, a daemon a round as bench/cache-drop-mark.c does,
 * the load's drift between them moved single rounds from 0.6 to 3.0);
 * medians per daemon, the ratio of the medians per round, the median of
 * those, and the load average at the start and the end.
 *
 *   build/bench/cache-drop-restamp [DROPS] [ROUNDS]   (default 30, 6)
 */
#include "bench/bench.h"
#include "tests/cache-drop-common.h"
#include "tests/lib/nvme_cache_args.h"
#include "tests/lib/nvme_probe.h"

#define MAX_DROPS 256
#define MAX_ROUNDS 64
#define NB 3 /* blocks a content; contents 0 and 1 end on NVMe */
#define NR_K 2

static const char usage[] =
	"usage: cache-drop-restamp [DROPS 1-256] [ROUNDS 1-64]\n"
	"  DROPS   timed drops per daemon, round and K (default 30)\n"
	"  ROUNDS  rounds, the daemons' order alternating (default 6)\n";

/* The kept NVMe blocks a timed drop holds: 1, and every one the set-up's
 * NVMe tier keeps (the policy's 6 slots). */
static const uint32_t kept_k[NR_K] = { 1, 2 * NB };

static const struct cc_contents cs = { .base = 0xe2000, .tag0 = 9, .nb = NB };

/* The two daemons' tier files, removed at the exit, a failed check's
 * included (t_fail() exits), by this process alone: a writer process
 * it forked that fails exits too, while the daemons still use them. */
static char nvme[2][256];
static pid_t nvme_owner;

static void remove_tier_files(void)
{
	if (getpid() != nvme_owner)
		return;
	unlink(nvme[0]);
	unlink(nvme[1]);
}

/* The NVMe blocks of contents 0 and 1, the first k of which get pinned. */
static void nvme_hashes(uint64_t h[2 * NB])
{
	cc_content_hashes(&cs, 1, h);
	cc_content_hashes(&cs, 0, h + NB);
}

/*
 * One timed drop of every tier keeping k pinned NVMe blocks: the cache
 * filled and pinned first, the reply checked, the pins ended and the
 * cache emptied after.  The drop's µs.
 */
static double timed_drop(const char *sock, uint32_t k, bool restamp)
{
	struct kvmm_admin_cache_drop a = { .size = sizeof(a) };
	struct kvmm_admin_cache_drop_reply r;
	uint64_t h[2 * NB];
	struct kvmm_conn *pin;
	double t0, us;

	cd_fill_to_nvme(sock, &cs);
	nvme_hashes(h);
	pin = cc_connect_lib(sock, "bench-pinner");
	for (uint32_t i = 0; i < k; i++) {
		struct kvmm_pin_opts po;

		t_ok(cc_pin(pin, h[i], 0, 0, 0, &po));
		t_assert_eq(po.tier, 2);
	}

	t0 = now_s();
	t_ok(cd_raw(sock, &a, sizeof(a), &r));
	us = (now_s() - t0) * 1e6;

	cd_expect(&r, NB, 2 * NB, 2 * NB - k, 0, 0, k);
	t_assert_eq(r.kept_pinned, k);
	t_assert_eq(r.nvme_invalidate_failures, 0);
	t_assert_eq(r.nvme_restamped, restamp ? k : 0);
	t_assert_eq(r.nvme_restamp_failures, restamp ? 0 : k);
	t_assert_eq(r.nvme_restamp_gone, 0);

	/* unpinned one by one (a round trip each), so the next drop finds
	 * them unpinned: a disconnect's unpins could still be on their way */
	for (uint32_t i = 0; i < k; i++)
		t_ok(kvmm_block_unpin(pin, h[i]));
	kvmm_disconnect(pin);
	t_ok(cd_raw(sock, &a, sizeof(a), &r));
	cd_expect(&r, 0, 0, k, 0, 0, 0);
	return us;
}

/* A kvmmd of this build on the tier file path, its restamps written
 * (restamp) or failed at once. */
static void start(struct td_daemon *d, const char *path, bool restamp)
{
	const char *argv[24];
	struct nca_args na;
	int i = 0;

	/* the set-up's options, and room for every NVMe block's pin (the
	 * default quota is a quarter of the 3 GPU blocks: 1) */
	for (const char *const *p = nca_args(&na, path, 3, 0); *p; p++)
		argv[i++] = *p;
	argv[i++] = "--pin-quota";
	argv[i++] = "6";
	argv[i] = NULL;

	unlink(path);
	if (!restamp)
		setenv("KVMMD_TEST_MIGRATE_FAIL", "nvme-restamp:1+", 1);
	cc_start(d, argv);
	unsetenv("KVMMD_TEST_MIGRATE_FAIL");
}

/*
 * One round: both daemons running (side 0 the restamps failed, side 1
 * written, each on its own tier file), n timed drops of each for each K,
 * drop by drop, which side goes first alternating, so a change of the
 * machine's load falls on both: med[side][j], the median µs of K
 * kept_k[j]'s.
 */
static void round_pair(int n, double med[2][NR_K])
{
	static double t[2][NR_K][MAX_DROPS];
	struct td_daemon d[2];

	for (int side = 0; side < 2; side++)
		start(&d[side], nvme[side], side);
	for (int s = 0; s < n; s++)
		for (int j = 0; j < NR_K; j++)
			for (int o = 0; o < 2; o++) {
				int side = (s + j + o) & 1;

				t[side][j][s] = timed_drop(d[side].sock,
							   kept_k[j], side);
			}
	for (int side = 0; side < 2; side++) {
		cc_stop(&d[side]);
		unlink(nvme[side]);
		for (int j = 0; j < NR_K; j++)
			med[side][j] = median(t[side][j], (unsigned int)n);
	}
}

int main(int argc, char **argv)
{
	static double ratio[NR_K][MAX_ROUNDS], with[NR_K][MAX_ROUNDS],
		without[NR_K][MAX_ROUNDS];
	int n = 30, rounds = 6;
	double load0, load1;

	if (bench_help(argc, argv, usage))
		return 0;
	if (argc > 3)
		return bench_usage_error("cache-drop-restamp", argv[3], usage);
	if (argc > 1)
		n = atoi(argv[1]);
	if (argc > 2)
		rounds = atoi(argv[2]);
	if (n < 1 || n > MAX_DROPS || rounds < 1 || rounds > MAX_ROUNDS) {
		fprintf(stderr, "cache-drop-restamp: DROPS %s, ROUNDS %s\n%s",
			argc > 1 ? argv[1] : "30", argc > 2 ? argv[2] : "6",
			usage);
		return 2;
	}
	cc_nvme_path(nvme[0], sizeof(nvme[0]), "bench-drop-restamp-failed");
	cc_nvme_path(nvme[1], sizeof(nvme[1]), "bench-drop-restamp");
	t_nvme_require(nvme[1]);
	nvme_owner = getpid();
	atexit(remove_tier_files);
	load0 = bench_loadavg();
	for (int r = 0; r < rounds; r++) {
		double m[2][NR_K]; /* [0] restamps failed, [1] written */

		round_pair(n, m);
		printf("round %d:", r);
		for (int j = 0; j < NR_K; j++) {
			with[j][r] = m[1][j];
			without[j][r] = m[0][j];
			ratio[j][r] = m[1][j] / m[0][j];
			printf("%s %u kept NVMe blocks: %.0f us restamped, %.0f failed at once (%.2fx)",
			       j ? ";" : "", kept_k[j], m[1][j], m[0][j],
			       ratio[j][r]);
		}
		printf("\n");
		fflush(stdout);
	}
	load1 = bench_loadavg();
	for (int j = 0; j < NR_K; j++) {
		double rs[MAX_ROUNDS], mr, mw, mo;

		/* median() sorts: the rounds' lowest and highest after it */
		memcpy(rs, ratio[j], sizeof(rs));
		mr = median(rs, (unsigned int)rounds);
		mw = median(with[j], (unsigned int)rounds);
		mo = median(without[j], (unsigned int)rounds);
		printf("%u kept NVMe blocks: ratio %.2f (rounds %.2f-%.2f), medians %.0f us restamped against %.0f us (%+.2f ms)\n",
		       kept_k[j], mr, rs[0], rs[rounds - 1], mw, mo,
		       (mw - mo) / 1000);
	}
	printf("load average %.2f at the start, %.2f at the end\n", load0,
	       load1);
	printf("{\"bench\":\"cache-drop-restamp\",\"baseline\":\"restamps failed at once\",\"ratio_k1\":%.3f,\"ratio_k6\":%.3f,\"k1_us\":%.0f,\"k1_baseline_us\":%.0f,\"k6_us\":%.0f,\"k6_baseline_us\":%.0f,\"loadavg\":[%.2f,%.2f]}\n",
	       median(ratio[0], (unsigned int)rounds),
	       median(ratio[1], (unsigned int)rounds),
	       median(with[0], (unsigned int)rounds),
	       median(without[0], (unsigned int)rounds),
	       median(with[1], (unsigned int)rounds),
	       median(without[1], (unsigned int)rounds), load0, load1);
	return 0;
}
