// SPDX-License-Identifier: MIT
/*
 * kvmmd sizes RLIMIT_NOFILE for its pool.  Started under a soft limit of
 * 1024 with a pool of 3072 4-KiB pages (more fds than 1024 however they
 * are counted), it raises the soft limit to the hard one before creating
 * the pool and says so in one line, without the pool's own warning; a
 * client then fills the whole pool (every page created, sent, imported,
 * mapped and written) and the daemon holds exactly one more fd per page
 * (the host backend sends each page's memfd itself, no exported copy;
 * none was shared read-only, so no read-only fd is kept for one).
 * With a soft limit that is enough already, it says so and changes
 * nothing.  Under a hard limit below the need (2048) it raises both when
 * it may (CAP_SYS_RESOURCE), and otherwise keeps 2048 and warns with the
 * shortfall and the fix.  The client raises its own soft limit: libkvmm
 * does not.
 */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "tests/shared-fd-common.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

#define PAGES 3072 /* --gpu-mem 12M of 4K pages */
/* kvmmd's estimate: pages x 2 (host backend: the memfd, and the read-only
 * fd kept for a shared page's readers) + 1024 sessions x 6 fds + 1024
 * pidfds of quarantined processes + 256 fixed */
#define NEED (PAGES * 2 + 1024 * 6 + 1024 + 256)

static const char *const args[] = { "--page-size", "4K",   "--gpu-mem", "12M",
				    "--log-level", "info", NULL };

static void set_nofile(rlim_t soft, rlim_t hard)
{
	struct rlimit rl = { .rlim_cur = soft, .rlim_max = hard };

	if (setrlimit(RLIMIT_NOFILE, &rl))
		t_fail("setrlimit %llu:%llu: %s", (unsigned long long)soft,
		       (unsigned long long)hard, strerror(errno));
}

/* Start kvmmd with the test's limits at soft:hard; ours stay as they were
 * (a lowered hard limit would be for good, so that case runs in a child
 * process of the test). */
static void start(struct td_daemon *d, rlim_t soft)
{
	struct rlimit rl;

	t_ok(getrlimit(RLIMIT_NOFILE, &rl) ? -errno : 0);
	set_nofile(soft, rl.rlim_max);
	t_ok(td_start(d, args));
	set_nofile(rl.rlim_cur, rl.rlim_max);
}

/* Soft limit 1024, hard limit enough: raised; the pool fills. */
static void fill_under_low_soft(unsigned long long hard)
{
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.name = "fd-limit",
					.map_ahead_set = 1,
					.map_ahead_blocks = 0 };
	struct kvmm_region_opts ro = { .size = sizeof(ro),
				       .layers = 1,
				       .kv_heads = 1,
				       .head_dim = 64,
				       .dtype_bytes = 2,
				       .max_seqs = 1,
				       .max_tokens = PAGES * 32 };
	struct kvmm_status_reply st;
	unsigned long long soft_now, hard_now;
	struct kvmm_conn *c;
	struct kvmm_region *r;
	struct td_daemon d;
	char line[256];
	uint32_t s, tpb, blocks = PAGES / 2;
	int before, after, page_fds;
	struct sf_fds fds;

	start(&d, 1024);
	sf_limits(d.pid, &soft_now, &hard_now);
	t_assert_eq(soft_now, hard);
	t_assert_eq(hard_now, hard);
	snprintf(
		line, sizeof(line),
		"fds: need about %d (%d pages, 2 fds each, 1024 sessions); RLIMIT_NOFILE raised from 1024 (hard %llu) to %llu (hard %llu)",
		NEED, PAGES, hard, hard, hard);
	td_log_has(&d, line, true);
	td_log_has(&d, "vmm pool:", false);

	t_ok(kvmm_connect(&co, &c));
	t_ok(kvmm_region_create(c, &ro, &r));
	tpb = kvmm_region_tokens_per_block(r);
	t_assert_eq(tpb, 4096 / (64 * 2)); /* a block: one K + one V page */
	t_ok(kvmm_seq_open(r, &s));
	t_ok(td_status(&d, &st));
	t_assert_eq(st.pages_total, PAGES);
	t_assert_eq(st.pages_created, 0);
	fds = sf_count(d.pid);
	before = fds.total;
	t_assert_eq(fds.ro_pages + fds.rw_pages, 0);

	/* Every page of the pool at once: more fds than 1024 in both. */
	t_ok(kvmm_seq_extend(r, s, blocks * tpb));
	t_assert_eq(kvmm_seq_extend(r, s, blocks * tpb + 1), -ENOMEM);
	for (uint32_t b = 0; b < blocks; b++) {
		uint8_t *k = (uint8_t *)(uintptr_t)kvmm_seq_k_ptr(r, s, 0);
		uint8_t *v = (uint8_t *)(uintptr_t)kvmm_seq_v_ptr(r, s, 0);

		k[(size_t)b * 4096 + b % 4096] = (uint8_t)(b + 1);
		v[(size_t)b * 4096 + 4095 - b % 4096] = (uint8_t)(b + 2);
	}
	for (uint32_t b = 0; b < blocks; b++) {
		uint8_t *k = (uint8_t *)(uintptr_t)kvmm_seq_k_ptr(r, s, 0);
		uint8_t *v = (uint8_t *)(uintptr_t)kvmm_seq_v_ptr(r, s, 0);

		t_assert_eq(k[(size_t)b * 4096 + b % 4096], (uint8_t)(b + 1));
		t_assert_eq(v[(size_t)b * 4096 + 4095 - b % 4096],
			    (uint8_t)(b + 2));
	}
	t_ok(td_status(&d, &st));
	t_assert_eq(st.pages_created, PAGES);
	t_assert_eq(st.pages_allocated, PAGES);
	t_assert_eq(st.pages_mapped, PAGES);
	fds = sf_count(d.pid);
	after = fds.total;
	page_fds = fds.ro_pages + fds.rw_pages;
	/* One fd per page in the daemon: the host backend sends each page's
	 * memfd itself (an exported dup made it two per page before). */
	t_assert_eq(page_fds, PAGES);
	printf("kvmmd: %d fds with %d pages created (%d of them pages), %d before\n",
	       after, PAGES, page_fds, before);

	t_ok(kvmm_seq_close(r, s));
	t_ok(kvmm_region_destroy(r));
	kvmm_disconnect(c);
	if (td_wait_idle(&d, 5000, &st)) {
		td_dump_log(&d);
		t_fail("daemon not idle: %llu pages allocated",
		       (unsigned long long)st.pages_allocated);
	}
	t_assert_eq(td_stop(&d), 0);
}

/* A soft limit that is just enough: nothing changes. */
static void enough_already(unsigned long long hard)
{
	unsigned long long soft = NEED;
	unsigned long long soft_now, hard_now;
	struct td_daemon d;
	char line[256];

	start(&d, soft);
	sf_limits(d.pid, &soft_now, &hard_now);
	t_assert_eq(soft_now, soft);
	t_assert_eq(hard_now, hard);
	snprintf(
		line, sizeof(line),
		"fds: need about %d (%d pages, 2 fds each, 1024 sessions); RLIMIT_NOFILE %llu (hard %llu) is enough",
		NEED, PAGES, soft, hard);
	td_log_has(&d, line, true);
	t_assert_eq(td_stop(&d), 0);
}

/* Hard limit 2048: raised with CAP_SYS_RESOURCE, else a warning. */
static int low_hard_child(void)
{
	unsigned long long soft_now, hard_now;
	struct td_daemon d;
	char line[512];

	set_nofile(1024, 2048);
	t_ok(td_start(&d, args));
	sf_limits(d.pid, &soft_now, &hard_now);
	if (sf_has_cap_sys_resource(d.pid)) {
		t_assert_eq(soft_now, NEED);
		t_assert_eq(hard_now, NEED);
		snprintf(
			line, sizeof(line),
			"RLIMIT_NOFILE raised from 1024 (hard 2048) to %d (hard %d)",
			NEED, NEED);
		td_log_has(&d, line, true);
		td_log_has(&d, "vmm pool:", false);
		printf("hard limit raised to %d (CAP_SYS_RESOURCE)\n", NEED);
	} else {
		t_assert_eq(soft_now, 2048);
		t_assert_eq(hard_now, 2048);
		snprintf(
			line, sizeof(line),
			"WARN  kvmmd[%d]: fds: need about %d (%d pages, 2 fds each, 1024 sessions) but RLIMIT_NOFILE is 2048 (hard 2048; was 1024), %d short; raising the hard limit: %s (needs CAP_SYS_RESOURCE): start kvmmd with LimitNOFILE=%d (systemd) or after ulimit -n %d",
			(int)d.pid, NEED, PAGES, NEED - 2048, strerror(EPERM),
			NEED, NEED);
		td_log_has(&d, line, true);
		printf("no CAP_SYS_RESOURCE: soft limit raised to 2048, warned\n");
	}
	t_assert_eq(td_stop(&d), 0);
	return 0;
}

int main(void)
{
	struct rlimit rl;
	pid_t pid;
	int st;

	t_ok(getrlimit(RLIMIT_NOFILE, &rl) ? -errno : 0);
	/* the client imports every page too, and kvmmd takes the hard limit */
	if (rl.rlim_max < NEED)
		t_skip("hard RLIMIT_NOFILE %llu is below the %d fds kvmmd asks for here (ulimit -Hn %d)",
		       (unsigned long long)rl.rlim_max, NEED, NEED);
	if (rl.rlim_cur < PAGES + 256)
		set_nofile(rl.rlim_max, rl.rlim_max);
	t_ok(getrlimit(RLIMIT_NOFILE, &rl) ? -errno : 0);

	fill_under_low_soft(rl.rlim_max);
	enough_already(rl.rlim_max);

	fflush(stdout);
	pid = fork();
	t_assert(pid >= 0);
	if (pid == 0)
		exit(low_hard_child());
	t_assert_eq(waitpid(pid, &st, 0), pid);
	t_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	printf("ok\n");
	return 0;
}
