// SPDX-License-Identifier: MIT
/*
 * kvmmctl --timeout and the commands that wait by design, and the
 * library's timed-out connection (Documentation/admin.md, "kvmmctl
 * --timeout").  First a kvmmd of the default shape and a raw client whose
 * revocation ring has 16 entries (as tests/daemon-revoke-pieces.c's):
 *   - `--timeout 1 revoke` of a sequence of 32 pages, which goes in two
 *     pieces, while the client waits 2.5 s before it takes the first
 *     piece's entries off its ring: revoked in 2 pieces, exit 0 (kvmmd
 *     answers each ask at once; the wait for the client is kvmmctl's own,
 *     bounded at 120 s, not --timeout's);
 *   - a request of an admin connection of 1 s (kc_connect_admin_timed())
 *     to a SIGSTOPped kvmmd fails with -ETIMEDOUT within seconds; after
 *     SIGCONT, with kvmmd's late answer on its way, the next request on
 *     it fails with -ETIMEDOUT too (never reads that answer as its
 *     own), and a new connection is answered.
 * Then kvmmd as tests/lib/nvme_cache_args.h sets it up, its NVMe header
 * invalidations held 2.5 s each batch (KVMMD_TEST_NVME_INVALIDATE_DELAY_MS),
 * contents 0 and 1 on NVMe:
 *   - `--timeout 1 cache-drop --tier nvme` fails after 1 s with the line
 *     naming the command, the socket and the wait, exit 1; the drop goes
 *     on in kvmmd, which answers a connection hung up (and lives on);
 *   - a plain `cache-drop --tier nvme` (cache-drop's default, 600 s)
 *     waits the 2.5 s and prints the drop: 6 NVMe blocks.
 * The NVMe part skips (77) where the NVMe tier cannot run (no O_DIRECT
 * there), after the rest passed.
 */
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "tests/cache-drop-common.h"
#include "tests/lib/nvme_cache_args.h"
#include "tests/lib/nvme_probe.h"
#include "tests/lib/raw_ring.h"

#define NB 3
#define DELAY_MS 2500

static const struct cc_contents first = { .base = 0xe1000,
					  .tag0 = 20,
					  .nb = NB };
static const struct cc_contents second = { .base = 0xe2000,
					   .tag0 = 60,
					   .nb = NB };

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Wait (20 s at most) until n NVMe headers were zeroed since the start. */
static void wait_invalidated(const char *sock, uint64_t n)
{
	struct kvmm_tier_stats_reply ts;

	for (int i = 0; i < 2000; i++) {
		cc_settled_stats(sock, &ts);
		if (ts.nvme_invalidated_blocks >= n)
			return;
		usleep(10000);
	}
	t_fail("%llu NVMe headers zeroed, expected %llu",
	       (unsigned long long)ts.nvme_invalidated_blocks,
	       (unsigned long long)n);
}

static void drops(struct td_daemon *d)
{
	struct kvmm_admin_cache_drop_reply r;
	char out[4096], want[256];
	uint64_t t0, ms;
	int rc;

	cd_fill_to_nvme(d->sock, &first);
	t0 = now_ms();
	rc = td_kvmmctl(d->sock, "--timeout 1 cache-drop --tier nvme 2>&1", out,
			sizeof(out));
	ms = now_ms() - t0;
	printf("--timeout 1 cache-drop: exit %d in %llu ms: %s", rc,
	       (unsigned long long)ms, out);
	t_assert_eq(rc, 1);
	snprintf(
		want, sizeof(want),
		"kvmmctl: cache-drop: no answer from %s in 1 s (kvmmd stopped or busy?; --timeout)\n",
		d->sock);
	t_assert_has(out, want);
	t_assert(ms >= 1000);

	/* the drop goes on in kvmmd, its answer to nobody: NVMe empty once
	 * its invalidations ran (the writes a new fill sends down wait for
	 * their slots meanwhile) */
	wait_invalidated(d->sock, 2 * NB);
	cd_fill_to_nvme(d->sock, &second);
	t0 = now_ms();
	r = cd_kvmmctl(d->sock, "--tier nvme");
	ms = now_ms() - t0;
	printf("cache-drop (its default timeout): %llu ms\n",
	       (unsigned long long)ms);
	cd_expect(&r, 0, 0, 2 * NB, 0, 0, 0);
	t_assert(ms >= DELAY_MS);
}

static void late_reply(struct td_daemon *d)
{
	struct kvmm_status_reply st;
	struct kvmm_conn *c, *c2;
	uint64_t t0, ms;
	int err;

	t_ok(kc_connect_admin_timed(d->sock, 1000, &c));
	t_ok(kc_request(c, KVMM_CMD_ADMIN_STATUS, NULL, 0, &st, sizeof(st),
			NULL));
	t_ok(kill(d->pid, SIGSTOP));
	t0 = now_ms();
	err = kc_request(c, KVMM_CMD_ADMIN_STATUS, NULL, 0, &st, sizeof(st),
			 NULL);
	ms = now_ms() - t0;
	t_ok(kill(d->pid, SIGCONT));
	printf("request to a stopped kvmmd: %d in %llu ms\n", err,
	       (unsigned long long)ms);
	t_assert_eq(err, -ETIMEDOUT);
	t_assert(ms >= 1000 && ms < 15000);
	/* kvmmd runs again and answers the request it had read (or sees
	 * the hang-up first): nothing of it is read on c */
	usleep(300000);
	t_assert_eq(kc_request(c, KVMM_CMD_ADMIN_STATUS, NULL, 0, &st,
			       sizeof(st), NULL),
		    -ETIMEDOUT);
	kvmm_disconnect(c);
	t_ok(kc_connect_admin_timed(d->sock, 1000, &c2));
	t_ok(kc_request(c2, KVMM_CMD_ADMIN_STATUS, NULL, 0, &st, sizeof(st),
			NULL));
	kvmm_disconnect(c2);
	printf("a timed-out connection stays timed out; a new one is answered\n");
}

#define RQ 16

static void slow_client_revoke(void)
{
	struct kvmm_stats_reply ks;
	static uint32_t ids[8 * CC_PPB];
	uint32_t seq, taken = 0;
	struct td_daemon d;
	struct raw_ring r;
	uint64_t t0, ms;
	int status;
	pid_t pid;

	t_ok(td_start(&d,
		      (const char *[]){ "--revoke-timeout", "60000", NULL }));
	raw_ring_connect(&r, d.sock, 0, RQ);
	cc_region(&r.c);
	t_ok(cc_call(&r.c, KVMM_CMD_STATS, NULL, 0, &ks, sizeof(ks), NULL,
		     NULL));
	seq = cc_seq_open(&r.c);
	t_ok(cc_try_extend(&r.c, seq, 8 * CC_TPB, ids)); /* 32 pages */
	t0 = now_ms();
	pid = fork();
	t_assert(pid >= 0);
	if (pid == 0) {
		static char out[4096];
		char args[128];

		snprintf(args, sizeof(args), "--timeout 1 revoke %u %u %u",
			 ks.session_id, r.c.region, seq);
		if (td_kvmmctl(d.sock, args, out, sizeof(out)) != 0 ||
		    strcmp(out, "revoked in 2 pieces\n")) {
			fprintf(stderr, "kvmmctl %s failed: %s\n", args, out);
			_exit(1);
		}
		_exit(0);
	}
	/* the first piece stays on the ring past --timeout */
	usleep(DELAY_MS * 1000);
	while (waitpid(pid, &status, WNOHANG) == 0) {
		taken += raw_ring_take_entries(&r);
		usleep(1000);
	}
	ms = now_ms() - t0;
	taken += raw_ring_take_entries(&r);
	printf("--timeout 1 revoke, the client 2.5 s late: exit %d in %llu ms\n",
	       WIFEXITED(status) ? WEXITSTATUS(status) : -1,
	       (unsigned long long)ms);
	t_assert(WIFEXITED(status));
	t_assert_eq(WEXITSTATUS(status), 0);
	t_assert_eq(taken, 8 * CC_PPB);
	t_assert(ms >= DELAY_MS);
	close(r.c.sock);
	late_reply(&d);
	t_ok(td_stop(&d));
}

int main(void)
{
	struct td_daemon d;
	struct nca_args a;
	char nvme[256], v[16];

	slow_client_revoke();
	cc_nvme_path(nvme, sizeof(nvme), "kvmmctl-timeout-waits");
	t_nvme_require(nvme);
	snprintf(v, sizeof(v), "%d", DELAY_MS);
	setenv("KVMMD_TEST_NVME_INVALIDATE_DELAY_MS", v, 1);
	cc_start(&d, nca_args(&a, nvme, 3, 0));
	unsetenv("KVMMD_TEST_NVME_INVALIDATE_DELAY_MS");
	drops(&d);
	cc_stop(&d);
	unlink(nvme);
	return 0;
}
