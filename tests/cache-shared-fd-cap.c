// SPDX-License-Identifier: MIT
/*
 * timeout: 120
 * Kept read-only page fds never crowd out kvmmd's other fds when its
 * RLIMIT_NOFILE is short.  A real kvmmd (host backend, 1024 pages of
 * 64 KiB) is started under a limit it cannot raise: soft = hard, and
 * CAP_SYS_RESOURCE dropped from the bounding set before the exec (as
 * root; without root it never had it).  Its start line names the cap.
 *
 *   A. RLIMIT_NOFILE 1000, below the pool's own fds and the reserve
 *      (--max-sessions 1024 x 6, 1024 pidfds, 256 fixed): the cap is 0.  NC
 *      writers publish NC chains of 16 blocks (640 pages, their memfds
 *      in kvmmd); a reader opens every prefix of every chain (k = 1..16
 *      blocks), as long as kvmmd's fds leave room for the next block's 4
 *      pages.  Every reply's fds are O_RDONLY; each chain's 16 blocks
 *      read their writer's bytes.  Then a new client connects, extends a
 *      sequence by 2 blocks and writes and reads them.  With fds kept
 *      for every shared page (main before the cap), the reader's opens
 *      stopped with 4 fds or fewer left (kept fds: 640 pages' worth do
 *      not fit in 1000) and the new client could not connect.  Now every
 *      open ran, kvmmd keeps none (/proc and page_ro_fds: 0), and
 *      page_ro_fd_unkept_opens counts every fd the replies brought.
 *   B. RLIMIT_NOFILE 1024 + 7424 + 253 + 40: the cap is 40.  A chain of
 *      16 blocks (64 pages) opened 3 times: 40 fds kept (the same 40 in
 *      /proc after each open, page_ro_fds 40, page_ro_fd_opens 40), the
 *      other 24 a reply opened for itself each time (72 in all); kvmmctl
 *      status says "at most 40: RLIMIT_NOFILE", --json and the metrics
 *      the same numbers; a new client connects and extends.
 *   C. --max-sessions 32 and RLIMIT_NOFILE 1024 + 1472 + 253 + 60 (the
 *      reserve for 32 sessions: 32 x 6, 1024 pidfds, 256 fixed): the cap
 *      is 60 (0 when the reserve was 1024 sessions' whatever the option
 *      said).  prlimit() lowers kvmmd's soft limit by 50 (as `prlimit
 *      --pid` does; the hard one stays: raising it needs
 *      CAP_SYS_RESOURCE): `kvmmctl --json status` says ro_fd_cap 10
 *      within 2 s, and the chain opened keeps 10; raised back: cap 60,
 *      the next open keeps 60; lowered again: cap 10, the 60 kept stay
 *      while their pages are cached (an open then keeps none more); a
 *      new client connects and extends; `cache-drop` frees the pages
 *      and their fds (0 kept), and the chain published and opened again
 *      keeps 10.  (The limit was read at start only: the cap stayed 60.)
 */
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#include "tests/cache-common.h"
#include "tests/shared-fd-common.h"

#define NC 10 /* chains of A */
#define CB 16 /* blocks a chain */
#define POOL_PAGES 1024 /* td_start()'s --gpu-mem 64M of 64 KiB pages */
#define RESERVED (1024 * 6 + 1024 + 256) /* daemon.c KD_RESERVED_FDS */
#define MSG_FDS 253 /* KVMM_MSG_MAX_FDS */
#define LIMIT_A 1000
#define CAP_B 40
#define LIMIT_B (POOL_PAGES + RESERVED + MSG_FDS + CAP_B)
#define SESSIONS_C 32
#define RESERVED_C (SESSIONS_C * 6 + 1024 + 256)
#define CAP_C 60
#define LIMIT_C (POOL_PAGES + RESERVED_C + MSG_FDS + CAP_C)
#define LOW_C 10 /* the cap with the soft limit 50 lower */

static uint64_t chain_hash(int j, uint32_t b)
{
	return 0x5fdc0000ull + (uint64_t)j * 64 + b;
}

/* kvmmd started under soft = hard = limit, without CAP_SYS_RESOURCE; 77
 * when it still has it (the bounding set could not be changed). */
static void start_limited(struct td_daemon *d, rlim_t limit,
			  const char *const *args)
{
	struct rlimit rl = { .rlim_cur = limit, .rlim_max = limit };
	unsigned long long soft, hard;

	/* root: an exec'd program's capabilities are the bounding set's */
	if (prctl(PR_CAPBSET_DROP, 24 /* CAP_SYS_RESOURCE */, 0, 0, 0) &&
	    errno != EPERM && errno != EINVAL)
		t_fail("PR_CAPBSET_DROP: %s", strerror(errno));
	if (setrlimit(RLIMIT_NOFILE, &rl))
		t_fail("setrlimit %llu: %s", (unsigned long long)limit,
		       strerror(errno));
	cc_start(d, args);
	if (sf_has_cap_sys_resource(d->pid)) {
		cc_stop(d);
		t_skip("kvmmd keeps CAP_SYS_RESOURCE (could not drop it from the bounding set): it would raise its limit");
	}
	sf_limits(d->pid, &soft, &hard);
	t_assert_eq(soft, limit);
	t_assert_eq(hard, limit);
}

/*
 * kvmmd under limit (start_limited()), its log saying it keeps cap
 * read-only fds, one content of CB blocks (chain 0) published, and c
 * connected with a region: where cases B and C start.
 */
static void start_published(struct td_daemon *d, rlim_t limit, int cap,
			    const char *const *args, uint64_t *h, struct cc *c)
{
	char want[128];

	start_limited(d, limit, args);
	snprintf(want, sizeof(want),
		 " (read-only fds kept for %d of them: RLIMIT_NOFILE)", cap);
	td_log_has(d, want, true);
	for (uint32_t b = 0; b < CB; b++)
		h[b] = chain_hash(0, b);
	t_assert_eq(cc_publish_content(d->sock, h, CB, 100, NULL), 0);
	cc_connect(c, d->sock);
	cc_region(c);
}

/* A prefix open of chain j's first k blocks: every fd O_RDONLY, the pages
 * mapped; ids gets them, the sequence is returned. */
static uint32_t open_chain(struct cc *c, int j, uint32_t k, uint32_t *ids)
{
	static char buf[KVMM_MSG_MAX];
	struct kvmm_prefix_open_reply *rep = (void *)buf;
	int fds[CB * CC_PPB];
	uint64_t h[CB];
	unsigned int nfds;

	for (uint32_t b = 0; b < k; b++)
		h[b] = chain_hash(j, b);
	cc_prefix_send(c, h, k);
	t_ok(cc_recv(c, buf, sizeof(buf), fds, &nfds));
	t_assert_eq(rep->nr_blocks, k);
	t_assert_eq(nfds, k * CC_PPB);
	for (unsigned int i = 0; i < nfds; i++)
		if ((fcntl(fds[i], F_GETFL) & O_ACCMODE) != O_RDONLY)
			t_fail("chain %d, %u blocks: fd %u is not read-only", j,
			       k, i);
	cc_map(c, rep->page_ids, k * CC_PPB, fds, nfds);
	for (uint32_t i = 0; i < k * CC_PPB; i++)
		ids[i] = rep->page_ids[i] & ~KVMM_PAGE_HELD;
	return rep->seq_id;
}

/* A new client connects, extends a sequence by 2 blocks, writes and
 * reads them: 0, or the -errno of the step that failed (named in what). */
static int new_client(const char *sock, const char **what)
{
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.socket_path = sock,
					.name = "late",
					.map_ahead_set = 1 };
	struct kvmm_region_opts ro = cc_region_opts();
	struct kvmm_region *r;
	struct kvmm_conn *c;
	uint32_t s;
	int err;

	*what = "connect";
	err = kvmm_connect(&co, &c);
	if (err)
		return err;
	*what = "region";
	err = kvmm_region_create(c, &ro, &r);
	if (!err) {
		*what = "extend";
		err = kvmm_seq_open(r, &s);
		if (!err)
			err = kvmm_seq_extend(r, s, 2 * CC_TPB);
		if (!err) {
			uint8_t *k =
				(uint8_t *)(uintptr_t)kvmm_seq_k_ptr(r, s, 0);

			k[0] = 0x3c;
			k[2 * CC_PAGE - 1] = 0xc3;
			if (k[0] != 0x3c || k[2 * CC_PAGE - 1] != 0xc3)
				err = -EIO;
			kvmm_seq_close(r, s);
		}
		kvmm_region_destroy(r);
	}
	kvmm_disconnect(c);
	return err;
}

static void check_status(const struct td_daemon *d, uint64_t kept, uint64_t cap,
			 uint64_t opens, uint64_t unkept)
{
	struct kvmm_status_reply st;

	t_ok(td_status(d, &st));
	t_assert_eq(st.page_ro_fds, kept);
	t_assert_eq(st.page_ro_fds, (uint64_t)sf_count(d->pid).ro_pages);
	t_assert_eq(st.page_ro_fd_cap, cap);
	t_assert_eq(st.page_ro_fd_opens, opens);
	t_assert_eq(st.page_ro_fd_drops, 0);
	t_assert_eq(st.page_ro_fd_unkept_opens, unkept);
}

static int case_a(void)
{
	const char *args[] = { "--cache-gpu-blocks", "200", NULL };
	static uint32_t ids[CB * CC_PPB];
	uint64_t handed = 0;
	struct td_daemon d;
	const char *what;
	int opened = 0, peak = 0, err;
	struct cc c;

	start_limited(&d, LIMIT_A, args);
	td_log_has(&d, " (read-only fds kept for 0 of them: RLIMIT_NOFILE)",
		   true);
	for (int j = 0; j < NC; j++) {
		uint64_t h[CB];

		for (uint32_t b = 0; b < CB; b++)
			h[b] = chain_hash(j, b);
		t_assert_eq(cc_publish_content(d.sock, h, CB, 100 + j, NULL),
			    0);
	}
	cc_connect(&c, d.sock);
	cc_region(&c);
	for (int j = 0; j < NC; j++) {
		for (uint32_t k = 1; k <= CB; k++) {
			int now = sf_count(d.pid).total;
			uint32_t seq;

			if (now > peak)
				peak = now;
			/* room for this block's 4 pages kept, or stop */
			if (now + CC_PPB > LIMIT_A - 1)
				goto stopped;
			seq = open_chain(&c, j, k, ids);
			handed += k * CC_PPB;
			opened++;
			if (k == CB)
				cc_check(&c, ids, CB, 100 + j);
			cc_seq_close(&c, seq, ids, k * CC_PPB);
		}
	}
stopped:
	err = new_client(d.sock, &what);
	printf("A: RLIMIT_NOFILE %d: %d of %d prefix opens, %llu read-only fds handed out, kvmmd at most %d fds; a new client: %s%s%s\n",
	       LIMIT_A, opened, NC * CB, (unsigned long long)handed, peak,
	       err ? what : "connected and extended", err ? ": " : "",
	       err ? strerror(-err) : "");
	fflush(stdout);
	t_assert_eq(opened, NC * CB);
	if (err) {
		td_dump_log(&d);
		t_fail("new client: %s: %s", what, strerror(-err));
	}
	check_status(&d, 0, 0, 0, handed);
	cc_disconnect(&c);
	cc_stop(&d);
	return 0;
}

static int case_b(void)
{
	const char *args[] = { NULL };
	static char out[1 << 16];
	static uint32_t ids[CB * CC_PPB];
	uint64_t h[CB];
	struct td_daemon d;
	const char *what;
	char want[256];
	struct cc c;
	int err;

	start_published(&d, LIMIT_B, CAP_B, args, h, &c);
	for (int i = 1; i <= 3; i++) {
		uint32_t seq = open_chain(&c, 0, CB, ids);

		cc_check(&c, ids, CB, 100);
		cc_seq_close(&c, seq, ids, CB * CC_PPB);
		check_status(&d, CAP_B, CAP_B, CAP_B,
			     (uint64_t)i * (CB * CC_PPB - CAP_B));
	}
	t_assert_eq(td_kvmmctl(d.sock, "status", out, sizeof(out)), 0);
	snprintf(
		want, sizeof(want),
		"read-only    %d page fds kept (at most %d: RLIMIT_NOFILE), %d opened, 0 closed short of fds, %d opened for one reply alone\n",
		CAP_B, CAP_B, CAP_B, 3 * (CB * CC_PPB - CAP_B));
	if (!strstr(out, want))
		t_fail("status lacks '%s': %s", want, out);
	t_assert_eq(td_kvmmctl(d.sock, "status --json", out, sizeof(out)), 0);
	snprintf(
		want, sizeof(want),
		"\"ro_fds\":%d,\"ro_fd_cap\":%d,\"ro_fd_opens\":%d,\"ro_fd_drops\":0,\"ro_fd_unkept_opens\":%d}",
		CAP_B, CAP_B, CAP_B, 3 * (CB * CC_PPB - CAP_B));
	if (!strstr(out, want))
		t_fail("status --json lacks '%s': %s", want, out);
	t_assert_eq(td_kvmmctl(d.sock, "metrics", out, sizeof(out)), 0);
	snprintf(want, sizeof(want),
		 "\nkvmm_pool_ro_fd_unkept_opens_total %d\n",
		 3 * (CB * CC_PPB - CAP_B));
	t_assert(strstr(out, want));
	snprintf(want, sizeof(want), "\nkvmm_pool_ro_fd_cap %d\n", CAP_B);
	t_assert(strstr(out, want));
	err = new_client(d.sock, &what);
	if (err)
		t_fail("new client: %s: %s", what, strerror(-err));
	printf("B: RLIMIT_NOFILE %d: cap %d; 3 opens of %d pages: %d kept, %d opened for their reply\n",
	       LIMIT_B, CAP_B, CB * CC_PPB, CAP_B, 3 * (CB * CC_PPB - CAP_B));
	cc_disconnect(&c);
	cc_stop(&d);
	return 0;
}

/* kvmmd's soft limit set to soft from outside (as `prlimit --pid` does),
 * its hard one LIMIT_C; `kvmmctl --json status` must show ro_fd_cap cap
 * within 2 s: the ms it took. */
static uint64_t move_limit(const struct td_daemon *d, rlim_t soft, uint64_t cap)
{
	struct rlimit rl = { .rlim_cur = soft, .rlim_max = LIMIT_C };
	static char out[1 << 16];
	uint64_t t0 = cc_now_ms(), took;
	char want[64];

	if (prlimit(d->pid, RLIMIT_NOFILE, &rl, NULL))
		t_fail("prlimit %llu: %s", (unsigned long long)soft,
		       strerror(errno));
	snprintf(want, sizeof(want), "\"ro_fd_cap\":%llu,",
		 (unsigned long long)cap);
	for (;;) {
		t_assert_eq(td_kvmmctl(d->sock, "--json status", out,
				       sizeof(out)),
			    0);
		took = cc_now_ms() - t0;
		if (strstr(out, want))
			return took;
		if (took > 2000)
			t_fail("RLIMIT_NOFILE %llu: no '%s' after %llu ms: %s",
			       (unsigned long long)soft, want,
			       (unsigned long long)took, out);
		usleep(100000);
	}
}

/* The chain's 16 blocks opened, checked and closed. */
static void open_all(struct cc *c)
{
	static uint32_t ids[CB * CC_PPB];
	uint32_t seq = open_chain(c, 0, CB, ids);

	cc_check(c, ids, CB, 100);
	cc_seq_close(c, seq, ids, CB * CC_PPB);
}

static int case_c(void)
{
	const char *args[] = { "--max-sessions", "32", NULL };
	const int pages = CB * CC_PPB;
	uint64_t h[CB], down, up, again, unkept = 0;
	struct td_daemon d;
	const char *what;
	char want[256];
	struct cc c;
	int err;

	start_published(&d, LIMIT_C, CAP_C, args, h, &c);

	down = move_limit(&d, LIMIT_C - 50, LOW_C);
	open_all(&c);
	unkept += pages - LOW_C;
	check_status(&d, LOW_C, LOW_C, LOW_C, unkept);

	/* raised: 50 more kept at the next open */
	up = move_limit(&d, LIMIT_C, CAP_C);
	open_all(&c);
	unkept += pages - CAP_C;
	check_status(&d, CAP_C, CAP_C, CAP_C, unkept);

	/* lowered below what is kept: those stay with their pages */
	again = move_limit(&d, LIMIT_C - 50, LOW_C);
	open_all(&c);
	unkept += pages - CAP_C;
	check_status(&d, CAP_C, LOW_C, CAP_C, unkept);
	err = new_client(d.sock, &what);
	if (err)
		t_fail("new client: %s: %s", what, strerror(-err));

	/* the pages freed: their fds closed; then LOW_C kept */
	t_assert_eq(td_kvmmctl(d.sock, "cache-drop", want, sizeof(want)), 0);
	check_status(&d, 0, LOW_C, CAP_C, unkept);
	t_assert_eq(cc_publish_content(d.sock, h, CB, 100, NULL), 0);
	open_all(&c);
	unkept += pages - LOW_C;
	check_status(&d, LOW_C, LOW_C, CAP_C + LOW_C, unkept);
	printf("C: --max-sessions %d, RLIMIT_NOFILE %d: cap %d (0 with the reserve of 1024 sessions); soft limit 50 lower: cap %d in %llu ms; back up: cap %d in %llu ms; lower again: cap %d in %llu ms, %d kept until their pages were freed, then %d\n",
	       SESSIONS_C, LIMIT_C, CAP_C, LOW_C, (unsigned long long)down,
	       CAP_C, (unsigned long long)up, LOW_C, (unsigned long long)again,
	       CAP_C, LOW_C);
	cc_disconnect(&c);
	cc_stop(&d);
	return 0;
}

/* Each case in a child: the limit and the bounding set stay lowered. */
static void run(int (*fn)(void))
{
	pid_t pid;
	int st;

	fflush(stdout);
	pid = fork();
	t_assert(pid >= 0);
	if (pid == 0)
		exit(fn());
	st = cc_wait_child(pid);
	if (st == 77)
		exit(77);
	t_assert_eq(st, 0);
}

int main(void)
{
	struct rlimit rl;

	t_ok(getrlimit(RLIMIT_NOFILE, &rl) ? -errno : 0);
	if (rl.rlim_max < LIMIT_B)
		t_skip("hard RLIMIT_NOFILE %llu is below the %d this test starts kvmmd with",
		       (unsigned long long)rl.rlim_max, LIMIT_B);
	run(case_a);
	run(case_b);
	run(case_c);
	printf("ok\n");
	return 0;
}
