// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * An extend that needs pages coming back from demotion copies is parked,
 * not waited for on the loop: a real kvmmd whose pool (8 blocks) is full
 * of cached blocks and whose demotion jobs each wait DELAY_MS, and real
 * client processes.
 *   1. Client A extends a new sequence by 3 blocks: the reclaim demotes 3
 *      cached blocks, A's reply waits for their copies (at least
 *      MEANWHILE_DELAY_MS).  Meanwhile client B (another process)
 *      connects, opens the other cached content as a prefix (shared GPU
 *      pages, bytes checked), asks for the tier counters and closes, all
 *      within half of it, while A's extend is still parked
 *      (cmds_parked_now 1).
 *      Then A gets its 3 blocks; counters: one command parked, none now.
 *      Two clients parked at once both get their pages.
 *   2. A client killed while its extend is parked leaves nothing: the
 *      parked command goes with its session at once, the copies end in
 *      the host tier, the pool holds exactly the cached GPU blocks, and
 *      a new client's extend then finds its pages without parking.
 *      kvmmd stopped while an extend is parked exits cleanly.
 *   3. A PREFIX_OPEN whose restores need room in the full pool parks the
 *      same way (the victims' copies), then waits for its restores, and
 *      gets its prefix (3 blocks from the host tier, 1 shared),
 *      byte-identical.
 *   4. A parked extend whose copies take longer than KD_PARK_MAX_MS (5 s)
 *      fails after 5 s with -ENOMEM (the pool is full), as after the
 *      blocking wait.
 */
#include <signal.h>
#include <stdio.h>
#include <time.h>

#include "tests/cache-common.h"
#include "tests/lib/daemon.h"

#define NB 4
#define DELAY_MS 400
/* served_meanwhile()'s copies: B's round trips, 2-37 ms here, are bounded
 * by half of it, which leaves a loaded machine's stalls of a few hundred
 * ms room (it was DELAY_MS, a bound of 200 ms) */
#define MEANWHILE_DELAY_MS 1200

static uint64_t hash_of(int content, int b)
{
	return 0x8100000ull * (content + 1) + b + 1;
}

/* kvmmd with a pool of 8 blocks, all cached (contents 0 and 1). */
static void start(struct td_daemon *d, int delay_ms)
{
	const char *args[] = { "--gpu-mem", "2M",	  "--cache-gpu-blocks",
			       "8",	    "--host-mem", "2M",
			       NULL };
	struct kvmm_tier_stats_reply ts;

	cc_start_with_delay(d, args, "KVMMD_TEST_DEMOTE_DELAY_MS", delay_ms);
	cc_publish_contents(d->sock, 2, NB, hash_of, 700);
	cc_settled_stats(d->sock, &ts);
	t_assert_eq(ts.tiers[0].used_blocks, 2 * NB); /* the whole pool */
}

/*
 * Client A: a new sequence extended by nb blocks; writes the extend's
 * status and how long it took (ms) to the pipe, then exits (or, linger,
 * waits to be killed without reading the reply).
 */
static pid_t extender(const char *sock, uint32_t nb, int out_fd, bool linger)
{
	pid_t p = fork();

	t_assert(p >= 0);
	if (p == 0) {
		uint32_t ids[16 * CC_PPB];
		struct kvmm_seq_extend ex = { .size = sizeof(ex),
					      .new_len = nb * CC_TPB };
		int64_t res[2];
		uint64_t t0;
		struct cc c;

		cc_connect(&c, sock);
		cc_region(&c);
		ex.region_id = c.region;
		ex.seq_id = cc_seq_open(&c);
		if (linger) {
			cc_send(&c, KVMM_CMD_SEQ_EXTEND, &ex, sizeof(ex));
			t_assert_eq(write(out_fd, "x", 1), 1);
			for (;;)
				pause();
		}
		t0 = cc_now_ms();
		res[0] = cc_try_extend(&c, ex.seq_id, nb * CC_TPB, ids);
		res[1] = (int64_t)(cc_now_ms() - t0);
		if (!res[0]) {
			cc_fill(&c, ids, nb, 9);
			cc_check(&c, ids, nb, 9);
			cc_seq_close(&c, ex.seq_id, ids, nb * CC_PPB);
		}
		cc_disconnect(&c);
		t_assert_eq(write(out_fd, res, sizeof(res)), sizeof(res));
		_exit(0);
	}
	return p;
}

/* Client B: connect, open content k as a prefix (all on the GPU, shared),
 * check its bytes, tier counters, close; returns how long it took. */
static uint64_t other_client(const char *sock, int k)
{
	int fd[2];
	uint64_t ms;
	pid_t p;

	t_ok(pipe(fd));
	p = fork();
	t_assert(p >= 0);
	if (p == 0) {
		struct kvmm_prefix_open_reply rep;
		struct kvmm_tier_stats_reply ts;
		uint32_t ids[NB * CC_PPB];
		uint64_t h[NB], t0 = cc_now_ms(), dt;
		struct cc c;

		for (int b = 0; b < NB; b++)
			h[b] = hash_of(k, b);
		cc_connect(&c, sock);
		cc_region(&c);
		cc_prefix(&c, h, NB, &rep, ids);
		t_assert_eq(rep.nr_blocks, NB);
		t_assert_eq(rep.from_gpu, NB);
		cc_check(&c, ids, NB, 700 + k);
		cc_tier_stats(&c, &ts);
		cc_seq_close(&c, rep.seq_id, ids, NB * CC_PPB);
		cc_disconnect(&c);
		dt = cc_now_ms() - t0;
		t_assert_eq(write(fd[1], &dt, sizeof(dt)), sizeof(dt));
		_exit(0);
	}
	t_assert_eq(cc_wait_child(p), 0);
	t_assert_eq(read(fd[0], &ms, sizeof(ms)), sizeof(ms));
	close(fd[0]);
	close(fd[1]);
	return ms;
}

static void served_meanwhile(void)
{
	struct kvmm_tier_stats_reply ts;
	struct kvmm_status_reply st;
	struct td_daemon d;
	int64_t res[2];
	uint64_t b_ms;
	int fd[2];
	pid_t a;

	start(&d, MEANWHILE_DELAY_MS);
	t_ok(pipe(fd));
	a = extender(d.sock, 3, fd[1], false);
	cc_wait_parked(&d, 1);
	b_ms = other_client(d.sock, 1);
	/* A still waits for its copies: B was served meanwhile */
	t_ok(td_status(&d, &st));
	t_assert_eq(st.cmds_parked_now, 1);
	t_assert_eq(st.cmds_parked, 1);
	if (b_ms >= MEANWHILE_DELAY_MS / 2)
		t_fail("the other client took %llu ms (demotions take %d ms)",
		       (unsigned long long)b_ms, MEANWHILE_DELAY_MS);
	t_assert_eq(cc_wait_child(a), 0);
	t_assert_eq(read(fd[0], res, sizeof(res)), sizeof(res));
	t_assert_eq(res[0], 0);
	if (res[1] < MEANWHILE_DELAY_MS)
		t_fail("the extend took %lld ms, its copies %d ms",
		       (long long)res[1], MEANWHILE_DELAY_MS);
	t_ok(td_status(&d, &st));
	t_assert_eq(st.cmds_parked, 1);
	t_assert_eq(st.cmds_parked_now, 0);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.pressure_reclaims, 3);
	t_assert_eq(ts.tiers[1].demotions_in, 3);
	t_assert_eq(ts.tiers[1].used_blocks, 3);
	t_assert_eq(ts.tiers[0].used_blocks, 2 * NB - 3);
	printf("extend parked %lld ms, other client served in %llu ms\n",
	       (long long)res[1], (unsigned long long)b_ms);
	close(fd[0]);
	close(fd[1]);
	t_assert_eq(td_stop(&d), 0);
}

static void death_while_parked(void)
{
	struct kvmm_tier_stats_reply ts;
	struct kvmm_status_reply st;
	struct td_daemon d;
	int64_t res[2];
	int fd[2];
	char ch;
	pid_t a;

	start(&d, DELAY_MS);
	t_ok(pipe(fd));
	a = extender(d.sock, 3, fd[1], true);
	t_assert_eq(read(fd[0], &ch, 1), 1);
	cc_wait_parked(&d, 1);
	t_ok(kill(a, SIGKILL));
	t_assert_eq(cc_wait_child(a), 128 + SIGKILL);
	cc_wait_parked(&d, 0);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[1].used_blocks, 3); /* the copies ended there */
	t_assert_eq(ts.tiers[0].used_blocks, 2 * NB - 3);
	t_ok(td_status(&d, &st));
	t_assert_eq(st.pages_allocated, ts.tiers[0].used_blocks * CC_PPB);
	t_assert_eq(st.pages_mapped, 0);
	t_assert_eq(st.pages_quarantined, 0);
	t_assert_eq(st.sequences, 0);
	t_assert_eq(st.cmds_parked, 1);
	/* the pages are there now: no parking */
	a = extender(d.sock, 3, fd[1], false);
	t_assert_eq(cc_wait_child(a), 0);
	t_assert_eq(read(fd[0], res, sizeof(res)), sizeof(res));
	t_assert_eq(res[0], 0);
	t_ok(td_status(&d, &st));
	t_assert_eq(st.cmds_parked, 1);
	close(fd[0]);
	close(fd[1]);
	t_assert_eq(td_stop(&d), 0);
}

/* Two clients parked at once: both get their pages. */
static void two_parked(void)
{
	struct kvmm_tier_stats_reply ts;
	struct kvmm_status_reply st;
	struct td_daemon d;
	int64_t res[2];
	int fd[2];
	pid_t a, b;

	start(&d, DELAY_MS);
	t_ok(pipe(fd));
	a = extender(d.sock, 3, fd[1], false);
	cc_wait_parked(&d, 1);
	b = extender(d.sock, 3, fd[1], false);
	cc_wait_parked(&d, 2);
	t_assert_eq(cc_wait_child(a), 0);
	t_assert_eq(cc_wait_child(b), 0);
	for (int i = 0; i < 2; i++) {
		t_assert_eq(read(fd[0], res, sizeof(res)), sizeof(res));
		t_assert_eq(res[0], 0);
	}
	t_ok(td_status(&d, &st));
	t_assert_eq(st.cmds_parked, 2);
	t_assert_eq(st.cmds_parked_now, 0);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.pressure_reclaims, 6);
	t_assert_eq(ts.tiers[1].used_blocks, 6);
	t_assert_eq(ts.tiers[0].used_blocks, 2 * NB - 6);
	close(fd[0]);
	close(fd[1]);
	t_assert_eq(td_stop(&d), 0);
}

/* kvmmd stopped while an extend is parked exits cleanly (under ASan: no
 * leak of the parked request). */
static void shutdown_while_parked(void)
{
	struct td_daemon d;
	int fd[2];
	char ch;
	pid_t a;

	start(&d, DELAY_MS);
	t_ok(pipe(fd));
	a = extender(d.sock, 2, fd[1], true);
	t_assert_eq(read(fd[0], &ch, 1), 1);
	cc_wait_parked(&d, 1);
	t_assert_eq(td_stop(&d), 0);
	t_ok(kill(a, SIGKILL));
	t_assert_eq(cc_wait_child(a), 128 + SIGKILL);
	close(fd[0]);
	close(fd[1]);
}

/* A PREFIX_OPEN that must make room for its restores parks the same
 * way, then waits for its restores, and gets the prefix. */
static void prefix_open_parked(void)
{
	struct kvmm_prefix_open_reply rep;
	struct kvmm_tier_stats_reply ts;
	struct kvmm_status_reply st;
	uint32_t mine[3 * CC_PPB];
	struct td_daemon d;
	uint32_t seq;
	struct cc a;
	int fd[2];
	pid_t p;

	start(&d, DELAY_MS);
	/* content 0's first 3 blocks go to the host tier to make room for
	 * this sequence, which keeps the pool full */
	cc_connect(&a, d.sock);
	cc_region(&a);
	seq = cc_seq_open(&a);
	cc_extend(&a, seq, 3 * CC_TPB, mine);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[1].used_blocks, 3);
	t_ok(pipe(fd));
	p = fork();
	t_assert(p >= 0);
	if (p == 0) {
		uint32_t ids[NB * CC_PPB];
		uint64_t h[NB], t0 = cc_now_ms(), dt;
		struct cc c;

		for (int b = 0; b < NB; b++)
			h[b] = hash_of(0, b);
		cc_connect(&c, d.sock);
		cc_region(&c);
		cc_prefix(&c, h, NB, &rep, ids);
		dt = cc_now_ms() - t0;
		t_assert_eq(rep.nr_blocks, NB);
		t_assert_eq(rep.from_host, 3);
		t_assert_eq(rep.from_gpu, 1);
		cc_check(&c, ids, NB, 700);
		cc_seq_close(&c, rep.seq_id, ids, NB * CC_PPB);
		cc_disconnect(&c);
		t_assert_eq(write(fd[1], &dt, sizeof(dt)), sizeof(dt));
		_exit(0);
	}
	cc_wait_parked(&d, 1);
	t_assert_eq(cc_wait_child(p), 0);
	t_ok(td_status(&d, &st));
	t_assert_eq(st.cmds_parked, 2); /* the extend, then the open */
	t_assert_eq(st.cmds_parked_now, 0);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.pressure_reclaims, 6);
	t_assert_eq(ts.tiers[1].promotions_out, 3);
	t_assert_eq(ts.prefix_opens_pending, 0);
	cc_seq_close(&a, seq, mine, 3 * CC_PPB);
	cc_disconnect(&a);
	close(fd[0]);
	close(fd[1]);
	t_assert_eq(td_stop(&d), 0);
}

static void parked_too_long(void)
{
	struct kvmm_status_reply st;
	struct td_daemon d;
	int64_t res[2];
	int fd[2];
	pid_t a;

	/* one demotion batch takes longer than a command may park */
	start(&d, 5600);
	t_ok(pipe(fd));
	a = extender(d.sock, 1, fd[1], false);
	t_assert_eq(cc_wait_child(a), 0);
	t_assert_eq(read(fd[0], res, sizeof(res)), sizeof(res));
	t_assert_eq(res[0], -ENOMEM);
	if (res[1] < 5000 || res[1] > 5500)
		t_fail("the extend failed after %lld ms, not 5 s",
		       (long long)res[1]);
	t_ok(td_status(&d, &st));
	t_assert_eq(st.cmds_parked, 1);
	t_assert_eq(st.cmds_parked_now, 0);
	close(fd[0]);
	close(fd[1]);
	t_assert_eq(td_stop(&d), 0);
}

int main(void)
{
	served_meanwhile();
	two_parked();
	death_while_parked();
	shutdown_while_parked();
	prefix_open_parked();
	parked_too_long();
	printf("extends parked for demotions ok\n");
	return 0;
}
