// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * The cache under pressure, with a real kvmmd and client processes:
 *   - blocks in use by an open sequence are never evicted from under it:
 *     with room for 2 cached GPU blocks, a writer that keeps 3 published
 *     blocks open gets the third copied down to the host tier (its pages
 *     stay the writer's; kvmmd used to answer "not cached" for it), and
 *     its bytes stay intact;
 *   - a stream of contents larger than every tier together never makes a
 *     tier hold more than its capacity, and the NVMe tier drops its
 *     oldest blocks once full;
 *   - clients killed with SIGKILL while demotions they triggered are in
 *     flight, and one killed while it maps shared cached pages, leave
 *     nothing behind: the pool ends with exactly the cached GPU blocks
 *     allocated, nothing mapped, and the daemon stops cleanly.
 */
#include <signal.h>
#include <sys/wait.h>

#include "tests/cache-common.h"
#include "tests/lib/daemon.h"
#include "tests/lib/nvme_layout.h"

#define NB 2

static void check_caps(const char *sock, struct kvmm_tier_stats_reply *ts,
		       bool settle)
{
	struct cc c;

	cc_connect(&c, sock);
	for (int i = 0; i < 500; i++) {
		cc_tier_stats(&c, ts);
		if (!settle || !ts->migrations_in_flight)
			break;
		usleep(10000);
	}
	cc_disconnect(&c);
	for (int t = 0; t < 3; t++)
		if (ts->tiers[t].used_blocks > ts->tiers[t].capacity_blocks)
			t_fail("tier %d holds %llu > capacity %llu", t,
			       (unsigned long long)ts->tiers[t].used_blocks,
			       (unsigned long long)ts->tiers[t].capacity_blocks);
}

/* Publish content k (NB blocks) and close, or (kill_after) stay until
 * killed. */
static pid_t writer(const char *sock, int k, int ready_fd, bool linger)
{
	pid_t p = fork();

	if (p == 0) {
		struct cc c;
		struct kvmm_block_publish_reply rep;
		uint32_t ids[NB * CC_PPB];
		uint64_t h[NB];
		uint32_t seq;

		for (int b = 0; b < NB; b++)
			h[b] = 0x5000000ull * (k + 1) + b;
		cc_connect(&c, sock);
		cc_region(&c);
		seq = cc_seq_open(&c);
		cc_extend(&c, seq, NB * CC_TPB, ids);
		cc_fill(&c, ids, NB, k);
		t_ok(cc_publish(&c, seq, 0, h, NB, &rep));
		cc_seq_close(&c, seq, ids, NB * CC_PPB);
		if (linger) {
			t_assert_eq(write(ready_fd, "r", 1), 1);
			pause();
		}
		cc_disconnect(&c);
		_exit(0);
	}
	return p;
}

int main(void)
{
	const char *dir = getenv("KVMM_NVME_TEST_DIR");
	char nvme[256], size[NT_SIZE_ARG_LEN];
	struct td_daemon d;
	struct kvmm_tier_stats_reply ts;
	struct kvmm_status_reply st;
	int r, pfd[2];

	snprintf(nvme, sizeof(nvme), "%s/kvmm-cache-pressure-%d",
		 dir ? dir : "/var/tmp", getpid());
	/* block = 4 x 64 KiB; GPU 2, host 6 slots (policy 4), NVMe 4 (3) */
	nt_size_arg(size, sizeof(size), 4, 4 * CC_PAGE);
	const char *args[] = { "--cache-gpu-blocks",
			       "2",
			       "--host-mem",
			       "1536K",
			       "--nvme-path",
			       nvme,
			       "--nvme-size",
			       size,
			       NULL };
	td_start_ok(&d, args);
	t_ok(pipe(pfd));

	/* 1. in-use blocks are not evicted: 3 published, 2 fit on the GPU,
	 * the third is copied down from the writer's pages */
	{
		struct cc c;
		struct kvmm_block_publish_reply rep;
		uint32_t ids[3 * CC_PPB];
		uint64_t h[3] = { 0xa1, 0xa2, 0xa3 };
		uint32_t seq;

		cc_connect(&c, d.sock);
		cc_region(&c);
		seq = cc_seq_open(&c);
		cc_extend(&c, seq, 3 * CC_TPB, ids);
		cc_fill(&c, ids, 3, 55);
		t_ok(cc_publish(&c, seq, 0, h, 3, &rep));
		t_assert_eq(rep.published, 3);
		t_assert_eq(rep.not_cached, 0);
		check_caps(d.sock, &ts, true);
		t_assert_eq(ts.tiers[0].used_blocks, 2);
		t_assert_eq(ts.tiers[1].used_blocks, 1);
		t_assert_eq(ts.tiers[1].demotions_in, 1);
		cc_check(&c, ids, 3, 55);
		cc_seq_close(&c, seq, ids, 3 * CC_PPB);
		cc_disconnect(&c);
	}

	/* 2. a stream of contents through every tier */
	for (int k = 0; k < 8; k++) {
		t_assert_eq(cc_wait_child(writer(d.sock, k, pfd[1], false)), 0);
		check_caps(d.sock, &ts, k % 2);
	}
	check_caps(d.sock, &ts, true);
	t_assert_eq(ts.tiers[0].used_blocks, 2);
	t_assert_eq(ts.tiers[1].used_blocks, 4);
	t_assert_eq(ts.tiers[2].capacity_blocks, 4);
	t_assert_eq(ts.tiers[2].used_blocks, 3); /* the policy keeps 1 spare */
	t_assert(ts.tiers[2].drops > 0); /* the NVMe tier was full */
	t_assert_eq(ts.tiers[0].drops + ts.tiers[1].drops, 0);

	/* 3. kill writers right after they published (demotions in
	 * flight), and a reader that maps shared cached pages */
	for (int k = 8; k < 12; k++) {
		pid_t p = writer(d.sock, k, pfd[1], true);
		char ch;

		t_assert_eq(read(pfd[0], &ch, 1), 1);
		kill(p, SIGKILL);
		t_assert_eq(cc_wait_child(p), 128 + SIGKILL);
	}
	pid_t rd = fork();
	if (rd == 0) {
		struct cc c;
		struct kvmm_prefix_open_reply rep;
		uint64_t h[NB] = { 0x5000000ull * 12, 0x5000000ull * 12 + 1 };
		uint32_t ids[NB * CC_PPB];

		cc_connect(&c, d.sock);
		cc_region(&c);
		cc_prefix(&c, h, NB, &rep, ids); /* content 11, on the GPU */
		t_assert_eq(rep.nr_blocks, NB);
		t_assert_eq(rep.from_gpu, NB);
		cc_check(&c, ids, NB, 11);
		t_assert_eq(write(pfd[1], "r", 1), 1);
		pause();
		_exit(0);
	}
	{
		char ch;

		t_assert_eq(read(pfd[0], &ch, 1), 1);
		kill(rd, SIGKILL);
		t_assert_eq(cc_wait_child(rd), 128 + SIGKILL);
	}
	check_caps(d.sock, &ts, true);
	t_assert_eq(ts.migrations_failed, 0);
	for (int i = 0; i < 200; i++) {
		t_ok(td_status(&d, &st));
		if (st.pages_mapped == 0 && st.sessions == 1 &&
		    st.pages_quarantined == 0)
			break;
		usleep(10000);
	}
	t_assert_eq(st.pages_mapped, 0);
	t_assert_eq(st.pages_quarantined, 0);
	t_assert_eq(st.sessions, 1);
	/* exactly the cached GPU blocks hold pages */
	t_assert_eq(st.pages_allocated, ts.tiers[0].used_blocks * CC_PPB);
	/* the same counters through kvmmctl status --json */
	{
		char bin[256], cmd[600], out[8192] = { 0 };
		FILE *f;

		snprintf(cmd, sizeof(cmd), "%s --socket %s status --json",
			 td_build_path("kvmmctl", bin, sizeof(bin)), d.sock);
		f = popen(cmd, "r");
		t_assert(f != NULL);
		size_t n = fread(out, 1, sizeof(out) - 1, f);
		t_assert(n > 0);
		t_assert_eq(pclose(f), 0);
		t_assert(strstr(out, "\"nvme\":{\"capacity_blocks\":4,"
				     "\"used_blocks\":3,") != NULL);
		t_assert(strstr(out, "\"checksum_failures\":0") != NULL);
	}
	r = td_stop(&d);
	if (r)
		td_dump_log(&d);
	t_assert_eq(r, 0);
	unlink(nvme);
	printf("pressure ok\n");
	return 0;
}
