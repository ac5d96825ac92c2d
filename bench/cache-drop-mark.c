// SPDX-License-Identifier: MIT
/*
 * What an ADMIN_CACHE_DROP's NVMe drop mark costs (Documentation/tiers.md,
 * "Drop marks"): the time of `cache-drop` (every tier) against a kvmmd of
 * this build, over the same against one whose mark jobs fail at once
 * (KVMMD_TEST_MIGRATE_FAIL=nvme-mark:1+: no superblock write, no sync;
 * everything else the same, the job's round trip included).  Two drops
 * per iteration: one of 15 blocks, 6 of them on NVMe (their header
 * invalidations run beside the mark), filled anew before each (not
 * timed), and one of an empty cache (the mark alone).  The tier file is
 * in $KVMM_NVME_TEST_DIR (default /var/tmp); the daemons of a round run
 * one after the other, their order alternating.  Medians per daemon, the
 * ratio of the medians per round.
 *
 *   build/bench/cache-drop-mark [DROPS] [ROUNDS]   (default 30, 4)
 */
#include "bench/bench.h"
#include "tests/cache-drop-common.h"
#include "tests/lib/nvme_cache_args.h"
#include "tests/lib/nvme_probe.h"

#define MAX_DROPS 256

/* The tier file, removed at the exit, a failed check's included (t_fail()
 * exits), by this process alone (a child of the fill helpers that fails
 * exits too, while the daemon still uses it); until 7 December a failed
 * check left 1.8 MB behind in $KVMM_NVME_TEST_DIR. */
static char nvme[256];
static pid_t nvme_owner;

static void remove_tier_file(void)
{
	if (getpid() == nvme_owner)
		unlink(nvme);
}

static const struct cc_contents cs = { .base = 0xe1000, .tag0 = 5, .nb = 3 };

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The median µs of n drops of a full cache and of an empty one. */
static void run(const char *path, bool mark, int n, uint64_t *full,
		uint64_t *empty)
{
	struct kvmm_admin_cache_drop a = { .size = sizeof(a) };
	struct kvmm_admin_cache_drop_reply r;
	uint64_t tf[MAX_DROPS], te[MAX_DROPS];
	struct nca_args na;
	struct td_daemon d;

	unlink(path);
	if (!mark)
		setenv("KVMMD_TEST_MIGRATE_FAIL", "nvme-mark:1+", 1);
	cc_start(&d, nca_args(&na, path, 3, 0));
	unsetenv("KVMMD_TEST_MIGRATE_FAIL");
	for (int i = 0; i < n; i++) {
		uint64_t t0;

		cd_fill_to_nvme(d.sock, &cs);
		t0 = now_us();
		t_ok(cd_raw(d.sock, &a, sizeof(a), &r));
		tf[i] = now_us() - t0;
		t_assert_eq(r.dropped[2], 2 * cs.nb);
		t_assert_eq(r.nvme_invalidate_failures, mark ? 0 : 1);
		t0 = now_us();
		t_ok(cd_raw(d.sock, &a, sizeof(a), &r));
		te[i] = now_us() - t0;
	}
	cc_stop(&d);
	qsort(tf, (size_t)n, sizeof(*tf), cmp_u64);
	qsort(te, (size_t)n, sizeof(*te), cmp_u64);
	*full = tf[n / 2];
	*empty = te[n / 2];
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 30;
	int rounds = argc > 2 ? atoi(argv[2]) : 4;
	double rf[64], re[64], load0, load1;

	if (n < 1 || n > MAX_DROPS || rounds < 1 || rounds > 64) {
		fprintf(stderr,
			"usage: cache-drop-mark [DROPS 1-%d] [ROUNDS 1-64]\n",
			MAX_DROPS);
		return 2;
	}
	cc_nvme_path(nvme, sizeof(nvme), "bench-drop-mark");
	t_nvme_require(nvme);
	nvme_owner = getpid();
	atexit(remove_tier_file);
	load0 = bench_loadavg();
	for (int k = 0; k < rounds; k++) {
		uint64_t f[2], e[2]; /* [0] without the mark, [1] with */

		run(nvme, k & 1, n, &f[k & 1], &e[k & 1]);
		run(nvme, !(k & 1), n, &f[!(k & 1)], &e[!(k & 1)]);
		rf[k] = (double)f[1] / (double)f[0];
		re[k] = (double)e[1] / (double)e[0];
		printf("round %d: drop of 15 blocks (6 on NVMe): %llu us with the mark, %llu without (%.2fx); empty drop: %llu us, %llu (%.2fx)\n",
		       k, (unsigned long long)f[1], (unsigned long long)f[0],
		       rf[k], (unsigned long long)e[1],
		       (unsigned long long)e[0], re[k]);
	}
	load1 = bench_loadavg();
	printf("{\"bench\":\"cache-drop-mark\",\"baseline\":\"no mark\",\"ratio_full\":%.3f,\"ratio_empty\":%.3f,\"loadavg\":[%.2f,%.2f]}\n",
	       median(rf, (unsigned)rounds), median(re, (unsigned)rounds),
	       load0, load1);
	return 0;
}
