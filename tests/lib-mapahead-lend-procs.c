// SPDX-License-Identifier: MIT
/*
 * An extend short of blocks gets the blocks another process of its uid
 * maps ahead (ABI 1.19: kvmmd asks that process with a
 * KVMM_RQE_F_GIVE_AHEAD entry, its libkvmm truncates to its own lengths
 * at its next boundary, and the extend, parked meanwhile, takes the
 * pages), where it failed -EDQUOT (-ENOMEM for a full pool) before.
 *
 * Process B (a child, map-ahead 2) opens 4 sequences of 502 tokens (2
 * blocks, 2 more mapped ahead each: 16 blocks, the uid's quota or the
 * pool), grows one of them into its blocks ahead over the ring (no block
 * ahead left there), writes a pattern into every token, and then waits
 * for revocations as an engine does (poll on kvmm_poll_fd(),
 * kvmm_process_revocations()).  Process A (this one, map-ahead 2 too)
 * then extends a new sequence to 2 blocks (its first ask, with 2 blocks
 * ahead, fails at once and asks nobody: kvmmd asks only for blocks below
 * a length; libkvmm asks again for the 2 alone):
 *   - against kvmmd --quota, and against a pool of 16 blocks: it
 *     succeeds well within --lend-wait; B gave back the 2 blocks ahead of
 *     exactly one sequence (blocks_lent_on_request 2, one request posted,
 *     lend_blocks 2, lend_extends 1, no failure), its lengths and every
 *     byte of its tokens intact, the sequence it grew over the ring
 *     untouched; 300 ms later, both map-ahead threads having tried to
 *     map ahead again (short: blocks ahead are never asked for), still
 *     one request, 16 blocks held;
 *   - the same with B answering at the step boundaries of 5 ms steps
 *     (kvmm_step_begin()/_end()) instead;
 *   - the same with B doing nothing at all (no step, no poll: blocked in
 *     a read()): its map-ahead thread answers (ABI 1.20), within
 *     milliseconds, where before the extend failed after --lend-wait;
 *   - B of ABI 1.19 (KVMM_TEST_HELLO_MINOR=19: it names and acknowledges
 *     nothing, and answers at its boundaries only) answering on
 *     kvmm_poll_fd(): served as before;
 *   - B answers with too little (KVMM_TEST_GIVE_AHEAD_MAX=0: nothing, as
 *     a process whose blocks ahead kvmmd over-counted): its
 *     acknowledgement (ABI 1.20) fails the extend -EDQUOT at once, well
 *     within --lend-wait, lend_failures 1;
 *   - B stopped (SIGSTOP): the extend fails -EDQUOT after --lend-wait
 *     (not sooner, and it does not hang), lend_failures 1; a second one
 *     fails at once, B not asked again (silent: no command since it was
 *     asked); B, let go, answers late (its blocks count as given) and
 *     keeps its session and its data, and the next extend that is short
 *     asks it again and is served;
 *   - B's HELLO says ABI 1.18 (KVMM_TEST_HELLO_MINOR=18): never asked
 *     (lend_requests 0), the extend fails -EDQUOT at once, as before;
 *   - kvmmd --lend-wait 0: the same (-EDQUOT; -ENOMEM for the pool).
 * Every time, lend_blocks is exactly what B says it gave on request
 * (blocks_lent_on_request), and B's lengths and bytes are intact.
 * kvmmctl status (text and --json) and kvmmctl metrics show the
 * counters.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "tests/lib/daemon.h"
#include "tests/lib/lend.h"
#include "tests/lib/test.h"
#include "tests/lib/wait.h"

#define NSEQ 4
#define WAIT_MS 1000 /* kvmmd's --lend-wait (the default) */

/* B answers on kvmm_poll_fd(), at the step boundaries of 5 ms steps,
 * doing nothing (its map-ahead thread answers), as a libkvmm of 1.19 on
 * kvmm_poll_fd(), with nothing to give, not at all for a while
 * (stopped), or is a libkvmm of 1.18 */
enum b_mode { B_ANSWERS, B_STEPS, B_IDLE, B_19, B_SHORT, B_STOPPED, B_OLD };

static const char *const b_says[] = {
	[B_ANSWERS] = "answers",
	[B_STEPS] = "answers at its step boundaries",
	[B_IDLE] = "idle (no step, no poll)",
	[B_19] = "of ABI 1.19, answers",
	[B_SHORT] = "answers with nothing to give",
	[B_STOPPED] = "stopped",
	[B_OLD] = "of ABI 1.18",
};

struct b_proc {
	pid_t pid;
	int cmd; /* A -> B: a byte says "check and exit" */
	int ans; /* B -> A: 'r' when ready, then its stats */
};

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The block that holds token len - 1. */
static uint32_t last_block(uint32_t len)
{
	return (len - 1) / LD_TPB;
}

/* Process B: hold blocks ahead, answer kvmmd at boundaries, check. */
static void b_main(enum b_mode mode, int cmd, int ans)
{
	uint32_t s[NSEQ], len[NSEQ], kept = 0;
	struct kvmm_stats st;
	struct kvmm_conn *c;
	struct kvmm_region *r;
	char x = 'r';

	ld_connect(2, &c, &r);
	for (int i = 0; i < NSEQ; i++) {
		t_ok(kvmm_seq_open(r, &s[i]));
		len[i] = 2 * LD_TPB - 10;
		t_ok(kvmm_seq_extend(r, s[i], len[i]));
		ld_fill(r, s[i], 0, len[i], i);
		t_assert(ld_mapped(r, s[i], 3) && !ld_mapped(r, s[i], 4));
	}
	/* over the ring, into its blocks ahead: none ahead left there */
	t_ok(kvmm_seq_extend(r, s[1], 4 * LD_TPB - 10));
	ld_fill(r, s[1], len[1], 4 * LD_TPB - 10, 1);
	len[1] = 4 * LD_TPB - 10;
	t_assert_eq(write(ans, &x, 1), 1);
	for (;;) {
		struct pollfd p[2] = { { .fd = kvmm_poll_fd(c),
					 .events = POLLIN },
				       { .fd = cmd, .events = POLLIN } };

		if (mode == B_IDLE) {
			/* no boundary, no poll: only libkvmm's thread */
			t_assert_eq(read(cmd, &x, 1), 1);
			break;
		}
		if (mode == B_STEPS) {
			/* an engine's steps: the boundaries answer */
			t_ok(kvmm_step_begin(c));
			usleep(5000);
			t_ok(kvmm_step_end(c));
			if (poll(&p[1], 1, 0) > 0)
				break;
			continue;
		}
		if (poll(p, 2, 100) < 0 && errno != EINTR)
			t_fail("poll: %s", strerror(errno));
		t_assert(kvmm_process_revocations(c) >= 0);
		if (p[1].revents)
			break;
	}
	for (int i = 0; i < NSEQ; i++) {
		t_assert_eq(kvmm_seq_len(r, s[i]), len[i]);
		t_assert_eq(ld_intact(r, s[i], len[i], i), len[i]);
		t_assert(ld_mapped(r, s[i], last_block(len[i])));
		kept += ld_mapped(r, s[i], last_block(len[i]) + 1);
	}
	t_assert(ld_mapped(r, s[1], 3));
	st = ld_stats(c);
	t_assert_eq(write(ans, &st.blocks_lent_on_request,
			  sizeof(st.blocks_lent_on_request)),
		    (ssize_t)sizeof(st.blocks_lent_on_request));
	t_assert_eq(write(ans, &kept, sizeof(kept)), (ssize_t)sizeof(kept));
	for (int i = 0; i < NSEQ; i++)
		t_ok(kvmm_seq_close(r, s[i]));
	kvmm_disconnect(c);
	exit(0);
}

static struct b_proc b_start(enum b_mode mode)
{
	int cmd[2], ans[2];
	struct b_proc b;
	char x;

	t_assert(!pipe(cmd) && !pipe(ans));
	fflush(stdout); /* not printed again by the child */
	b.pid = fork();
	t_assert(b.pid >= 0);
	if (!b.pid) {
		close(cmd[1]);
		close(ans[0]);
		if (mode == B_OLD)
			setenv("KVMM_TEST_HELLO_MINOR", "18", 1);
		if (mode == B_19)
			setenv("KVMM_TEST_HELLO_MINOR", "19", 1);
		if (mode == B_SHORT)
			setenv("KVMM_TEST_GIVE_AHEAD_MAX", "0", 1);
		b_main(mode, cmd[0], ans[1]);
	}
	close(cmd[0]);
	close(ans[1]);
	b.cmd = cmd[1];
	b.ans = ans[0];
	t_assert_eq(read(b.ans, &x, 1), 1);
	t_assert_eq(x, 'r');
	return b;
}

/* B checks its sequences and exits: what it gave on request, and how many
 * of its sequences still have a block mapped past their last one. */
static void b_end(struct b_proc *b, uint64_t *given, uint32_t *kept)
{
	int status;

	t_assert_eq(write(b->cmd, "c", 1), 1);
	t_assert_eq(read(b->ans, given, sizeof(*given)),
		    (ssize_t)sizeof(*given));
	t_assert_eq(read(b->ans, kept, sizeof(*kept)), (ssize_t)sizeof(*kept));
	t_assert_eq(waitpid(b->pid, &status, 0), b->pid);
	t_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(b->cmd);
	close(b->ans);
}

/* Admin status until its lend_blocks reaches `blocks` (B's late answer),
 * within 5 s. */
static void wait_given(struct td_daemon *d, uint64_t blocks)
{
	struct kvmm_status_reply ds;

	for (int i = 0; i < 5000; i++) {
		t_ok(td_status(d, &ds));
		if (ds.lend_blocks >= blocks)
			return;
		usleep(1000);
	}
	t_fail("lend_blocks %llu, never %llu",
	       (unsigned long long)ds.lend_blocks, (unsigned long long)blocks);
}

/* A's extend of s to len: its error, its time in ms (printed). */
static int timed_extend(struct kvmm_region *r, uint32_t s, uint32_t len,
			const char *what, enum b_mode mode, double *ms)
{
	uint64_t t0 = now_us();
	int err = kvmm_seq_extend(r, s, len);

	*ms = (now_us() - t0) / 1000.0;
	printf("%s, B %s: %s: %d (%s) after %.3f ms\n", what, b_says[mode],
	       len > 2 * LD_TPB ? "the extend to 4 blocks" :
				  "the extend by 2 blocks",
	       err, err ? strerror(-err) : "ok", *ms);
	return err;
}

/*
 * B stopped: the first extend waited the whole --lend-wait.  A second one
 * fails at once (B is silent: not asked, not waited for); B, let go,
 * answers late, and the next extend that is short (to 4 blocks: 2 more
 * than B's late answer freed) asks it again and is served.
 */
static void stopped_more(struct td_daemon *d, const struct b_proc *b,
			 struct kvmm_region *r, uint32_t s, const char *what)
{
	struct kvmm_status_reply ds;
	double ms;

	t_assert_eq(timed_extend(r, s, 2 * LD_TPB - 5, what, B_STOPPED, &ms),
		    -EDQUOT);
	t_assert(ms < WAIT_MS / 2);
	t_ok(td_status(d, &ds));
	/* nobody asked: no extend that asked and failed */
	t_assert_eq(ds.lend_requests, 1);
	t_assert_eq(ds.lend_failures, 1);
	t_ok(kill(b->pid, SIGCONT));
	wait_given(d, 2);
	t_ok(timed_extend(r, s, 4 * LD_TPB - 5, what, B_STOPPED, &ms));
	t_assert(ms < WAIT_MS / 2);
	ld_fill(r, s, 0, 4 * LD_TPB - 5, 9);
	t_assert_eq(ld_intact(r, s, 4 * LD_TPB - 5, 9), 4 * LD_TPB - 5);
	t_ok(td_status(d, &ds));
	t_assert_eq(ds.lend_requests, 2);
	t_assert_eq(ds.lend_extends, 1);
	t_assert_eq(ds.lend_failures, 1);
}

static void run(const char *const *args, enum b_mode mode, int want_err)
{
	struct kvmm_status_reply ds;
	struct td_daemon d;
	struct b_proc b;
	struct kvmm_conn *c;
	struct kvmm_region *r;
	uint64_t given;
	uint32_t s, kept;
	bool off = want_err && mode <= B_IDLE;
	bool asked = mode != B_OLD && !off;
	char out[65536], want[256];
	const char *what = args[1][0] == '4' ? "pool of 16 blocks" :
					       "quota of 16 blocks";
	double ms;
	int err;

	td_start_ok(&d, args);
	b = b_start(mode);
	t_ok(td_status(&d, &ds));
	t_assert_eq(ds.pages_allocated, 16 * LD_PPB);
	if (mode == B_STOPPED) {
		int st;

		t_ok(kill(b.pid, SIGSTOP));
		/* stopped, every thread of it: kill() returns before */
		t_assert_eq(waitpid(b.pid, &st, WUNTRACED), b.pid);
		t_assert(WIFSTOPPED(st));
	}

	ld_connect(2, &c, &r);
	t_ok(kvmm_seq_open(r, &s));
	err = timed_extend(r, s, 2 * LD_TPB - 5, off ? "--lend-wait 0" : what,
			   mode, &ms);
	t_assert_eq(err, want_err);
	if (!err) {
		ld_fill(r, s, 0, 2 * LD_TPB - 5, 9);
		t_assert_eq(ld_intact(r, s, 2 * LD_TPB - 5, 9), 2 * LD_TPB - 5);
		t_assert(ms < WAIT_MS / 2);
	} else if (mode == B_STOPPED) {
		t_assert(ms >= WAIT_MS - 50 && ms < WAIT_MS + 3000);
	} else if (mode == B_SHORT) {
		/* answered: not the wait, well within it */
		t_assert(ms < WAIT_MS / 2);
	} else {
		t_assert(ms < WAIT_MS / 2); /* never asked: at once */
	}

	/* the map-ahead threads' holds end: the pool back to B's 14 blocks
	 * and A's 2 (where a 300 ms sleep guessed how long that takes) */
	if (!err)
		t_wait_until(
			20000, t_ok(td_status(&d, &ds)),
			ds.pages_allocated == 16 * LD_PPB,
			"the map-ahead threads' holds never ended (%llu pages allocated, want %d)",
			(unsigned long long)ds.pages_allocated, 16 * LD_PPB);
	t_ok(td_status(&d, &ds));
	t_assert_eq(ds.size, sizeof(ds));
	t_assert_eq(ds.lend_wait_ms, off ? 0 : WAIT_MS);
	t_assert_eq(ds.lend_requests, asked ? 1 : 0);
	t_assert_eq(ds.lend_extends, err ? 0 : 1);
	t_assert_eq(ds.lend_failures,
		    mode == B_STOPPED || mode == B_SHORT ? 1 : 0);
	if (!err) {
		t_assert_eq(ds.lend_blocks, 2);
		/* 14 of B's, 2 of A's */
		t_assert_eq(ds.pages_allocated, 16 * LD_PPB);
	} else {
		t_assert_eq(ds.lend_blocks, 0);
	}
	t_assert_eq(td_kvmmctl(d.sock, "status --json", out, sizeof(out)), 0);
	snprintf(
		want, sizeof(want),
		"\"lend\":{\"asked\":%llu,\"blocks_given\":%llu,\"extends_served\":%llu,\"extends_failed\":%llu,\"wait_ms\":%llu}",
		(unsigned long long)ds.lend_requests,
		(unsigned long long)ds.lend_blocks,
		(unsigned long long)ds.lend_extends,
		(unsigned long long)ds.lend_failures,
		(unsigned long long)ds.lend_wait_ms);
	t_assert(strstr(out, want));
	t_assert_eq(td_kvmmctl(d.sock, "status", out, sizeof(out)), 0);
	if (off)
		snprintf(want, sizeof(want),
			 "\nblocks ahead not asked back (--lend-wait 0)\n");
	else
		snprintf(
			want, sizeof(want),
			"\nblocks ahead %llu asked of the uid's other processes, %llu blocks given back, %llu extends served, %llu failed all the same (wait %d ms)\n",
			(unsigned long long)ds.lend_requests,
			(unsigned long long)ds.lend_blocks,
			(unsigned long long)ds.lend_extends,
			(unsigned long long)ds.lend_failures, WAIT_MS);
	t_assert(strstr(out, want));
	t_assert_eq(td_kvmmctl(d.sock, "metrics", out, sizeof(out)), 0);
	snprintf(want, sizeof(want), "\nkvmm_lend_requests_total %llu\n",
		 (unsigned long long)ds.lend_requests);
	t_assert(strstr(out, want));
	snprintf(want, sizeof(want), "\nkvmm_lend_failures_total %llu\n",
		 (unsigned long long)ds.lend_failures);
	t_assert(strstr(out, want));

	if (mode == B_STOPPED)
		stopped_more(&d, &b, r, s, what);
	t_ok(td_status(&d, &ds));
	b_end(&b, &given, &kept);
	/* what B gave on request is what kvmmd counted: B of 1.18, kvmmd
	 * not asking, or B giving nothing: 0; else the 2 blocks ahead of
	 * one sequence (stopped: at least 4, its late answer and the one
	 * after) */
	t_assert_eq(given, ds.lend_blocks);
	if (mode == B_STOPPED)
		t_assert(given >= 4);
	else
		t_assert_eq(given, asked && mode != B_SHORT ? 2 : 0);
	if (mode <= B_19 && !off)
		t_assert_eq(kept, 2); /* s[1] has none ahead, one gave */
	t_ok(kvmm_seq_close(r, s));
	kvmm_disconnect(c);
	t_ok(td_wait_idle(&d, 5000, NULL));
	td_stop_ok(&d);
}

/*
 * A prefix open short of the quota asks too (ABI 1.20).  Before B
 * starts, A publishes 2 blocks (tag 7) and closes its sequence; B's 16
 * blocks then push them down to the host tier (the uid's idle cached
 * blocks make room first).  A's open of that prefix needs 2 blocks of
 * fresh pages for their restores, the uid's quota has none: kvmmd asks
 * idle B, which gives the 2 blocks ahead of one sequence, and the open
 * reloads both blocks, byte for byte.  Before, the walk stopped at the
 * quota: an open of 0 blocks, the prefix to recompute.
 */
static void prefix_run(const char *const *args)
{
	static const uint64_t h[2] = { 0x1e7d0001ull, 0x1e7d0002ull };
	struct kvmm_prefix_opts po = { .size = sizeof(po) };
	struct kvmm_status_reply ds;
	struct td_daemon d;
	struct b_proc b;
	struct kvmm_conn *c;
	struct kvmm_region *r;
	uint32_t s, nb = 9, kept;
	uint64_t t0, given;
	double ms;

	td_start_ok(&d, args);
	ld_connect(0, &c, &r);
	t_ok(kvmm_seq_open(r, &s));
	t_ok(kvmm_seq_extend(r, s, 2 * LD_TPB));
	ld_fill(r, s, 0, 2 * LD_TPB, 7);
	t_assert_eq(kvmm_block_publish(r, s, 0, 2, 0, h), 2);
	t_ok(kvmm_seq_close(r, s));
	b = b_start(B_IDLE);
	t_ok(td_status(&d, &ds));
	t_assert_eq(ds.lend_requests, 0);

	t0 = now_us();
	t_ok(kvmm_seq_open_prefix_opts(r, h, 2, &s, &nb, &po));
	ms = (now_us() - t0) / 1000.0;
	printf("quota of 16 blocks, B idle: a prefix open of 2 blocks in the host tier: %u blocks (%u reloaded) after %.3f ms\n",
	       nb, po.reloaded_host, ms);
	t_assert_eq(nb, 2);
	t_assert_eq(po.reloaded_host, 2);
	t_assert(ms < WAIT_MS / 2);
	t_assert_eq(ld_intact(r, s, 2 * LD_TPB, 7), 2 * LD_TPB);
	t_ok(td_status(&d, &ds));
	t_assert_eq(ds.lend_requests, 1);
	t_assert_eq(ds.lend_extends, 1);
	t_assert_eq(ds.lend_failures, 0);
	t_assert_eq(ds.lend_blocks, 2);
	b_end(&b, &given, &kept);
	t_assert_eq(given, 2);
	t_ok(kvmm_seq_close(r, s));
	kvmm_disconnect(c);
	/* its 2 blocks stay cached */
	t_ok(td_wait_sessions(&d, 1, 5000, &ds));
	td_stop_ok(&d);
}

int main(void)
{
	char quota[64];
	const char *q[] = { "--quota", quota, NULL };
	const char *q_off[] = { "--quota", quota, "--lend-wait", "0", NULL };
	const char *q_host[] = { "--quota", quota, "--host-mem", "4M", NULL };
	/* 64 pages of 64 KiB: 16 blocks */
	const char *pool[] = { "--gpu-mem", "4M", NULL };
	const char *pool_off[] = { "--gpu-mem", "4M", "--lend-wait", "0",
				   NULL };

	snprintf(quota, sizeof(quota), "%u=4M", (unsigned)getuid());
	run(q, B_ANSWERS, 0);
	run(pool, B_ANSWERS, 0);
	run(q, B_STEPS, 0);
	run(q, B_IDLE, 0);
	run(pool, B_IDLE, 0);
	run(q, B_19, 0);
	run(q, B_SHORT, -EDQUOT);
	run(q, B_STOPPED, -EDQUOT);
	run(q, B_OLD, -EDQUOT);
	prefix_run(q_host);
	run(q_off, B_ANSWERS, -EDQUOT);
	run(pool_off, B_ANSWERS, -ENOMEM);
	return 0;
}
