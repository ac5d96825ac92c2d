// SPDX-License-Identifier: MIT
/*
 * timeout: 90
 * A restoring prefix open does not stall the connection's other threads
 * (ABI 1.16, KVMM_PREFIX_OPEN_COLLECT and the ring's notify word): a real
 * kvmmd (--restore-mode reload, the default for opens without options)
 * whose restores each wait DELAY_MS, contents of 8 blocks pushed down to
 * its host and NVMe tiers by writer processes.  One libkvmm connection
 * (map-ahead thread on):
 *   - thread A makes a plain, blocking kvmm_seq_open_prefix() of content
 *     0 (every block restored: about a second); meanwhile the main thread
 *     grows and shrinks a sequence of its own through the socket
 *     (extends past the mapped blocks, truncates), makes socket NOPs and
 *     STATS, steps and processes revocations, round after round.  Many
 *     rounds end while the open is still out, the first well before it
 *     returns (before, the first socket call waited for the whole open);
 *     the open returns all 8 blocks with content 0's bytes;
 *   - thread A makes an early open of content 1 and then a blocking
 *     kvmm_seq_wait_ready() for its 8 blocks; the main thread's rounds go
 *     on meanwhile as above; the wait returns no failed block, nothing
 *     pending, and the bytes are content 1's;
 *   - both again against a kvmmd that stands in for one before ABI 1.16
 *     (KVMMD_TEST_ABI_1_15=1: HELLO says 1.15, no notify word): libkvmm
 *     falls back to waiting with the socket, so the calls still return
 *     the right blocks and bytes, and the main thread's first extend
 *     waits for most of each call (at most one round ends before it
 *     returns).
 * It prints the slowest round (the figure Documentation/performance.md
 * quotes) and how many rounds ran while each call was out.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "kvmm/kvmm.h"
#include "tests/cache-restore-common.h"

#define DELAY_MS 500

struct side {
	struct kvmm_region *r;
	bool fallback; /* a daemon before 1.16: the calls hold the socket */
	int content;
	bool early;
	uint32_t seq, nb;
	int err;
	double t_start, t_end; /* ms, of the blocking call */
	atomic_bool done;
};

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Thread A: the blocking call (the plain open, or the early open and a
 * blocking wait for its blocks). */
static void *opener(void *arg)
{
	struct side *sd = arg;
	uint64_t h[CR_NB];

	for (int b = 0; b < CR_NB; b++)
		h[b] = cr_hash(sd->content, b);
	if (!sd->early) {
		sd->t_start = now_ms();
		sd->err = kvmm_seq_open_prefix(sd->r, h, CR_NB, &sd->seq,
					       &sd->nb);
	} else {
		struct kvmm_prefix_opts o = { .size = sizeof(o),
					      .flags = KVMM_PREFIX_OPEN_EARLY };
		uint32_t pending = 99;

		sd->err = kvmm_seq_open_prefix_opts(sd->r, h, CR_NB, &sd->seq,
						    &sd->nb, &o);
		sd->t_start = now_ms();
		if (!sd->err)
			sd->err = kvmm_seq_wait_ready(sd->r, sd->seq, CR_NB, 0,
						      NULL, 0, &pending);
		if (!sd->err && pending)
			sd->err = -EPROTO;
	}
	sd->t_end = now_ms();
	atomic_store(&sd->done, true);
	return NULL;
}

/* The sequence's blocks hold content k's bytes (cc_fill()'s pattern;
 * pages of a block: layer 0 K, layer 0 V, layer 1 K, ...). */
static void check_bytes(struct kvmm_region *r, uint32_t seq, int k)
{
	for (uint32_t l = 0; l < CC_L; l++)
		for (uint32_t kv = 0; kv < 2; kv++) {
			const unsigned char *base =
				(const void *)(uintptr_t)(kv ? kvmm_seq_v_ptr(
								       r, seq,
								       l) :
							       kvmm_seq_k_ptr(
								       r, seq,
								       l));

			t_assert(base);
			for (uint32_t b = 0; b < CR_NB; b++)
				for (uint32_t o = 0; o < CC_PAGE; o++)
					if (base[(size_t)b * CC_PAGE + o] !=
					    cc_pat(200 + k, b, 2 * l + kv, o))
						t_fail("content %d block %u layer %u %s byte %u differs",
						       k, b, l, kv ? "V" : "K",
						       o);
		}
}

/*
 * The main thread's socket calls while sd's call is out: rounds of an
 * extend past the mapped blocks, a truncate, a socket NOP, STATS, a step
 * and kvmm_process_revocations().  Returns the rounds that ended before
 * the call returned; *first: when the first ended, *slowest: the longest
 * extend (ms).
 */
static int rounds(struct kvmm_conn *c, struct kvmm_region *r, uint32_t own,
		  struct side *sd, double *first, double *slowest)
{
	struct kvmm_stats ks = { .size = sizeof(ks) };
	int n = 0;

	*first = 0;
	*slowest = 0;
	while (!atomic_load(&sd->done)) {
		double t0 = now_ms(), dt;

		/* 4 blocks: past the one mapped ahead, so through the socket */
		t_ok(kvmm_seq_extend(r, own, 4 * CC_TPB));
		dt = now_ms() - t0;
		if (dt > *slowest)
			*slowest = dt;
		t_ok(kvmm_seq_truncate(r, own, CC_TPB));
		t_ok(kvmm_nop(c, 1));
		t_ok(kvmm_get_stats(c, &ks));
		t_ok(kvmm_step_begin(c));
		t_ok(kvmm_step_end(c));
		t_assert(kvmm_process_revocations(c) >= 0);
		if (!atomic_load(&sd->done)) {
			if (!n++)
				*first = now_ms();
		}
		usleep(2000);
	}
	return n;
}

static void run(struct kvmm_conn *c, struct kvmm_region *r, uint32_t own,
		int content, bool early, bool fallback)
{
	struct side sd = {
		.r = r, .fallback = fallback, .content = content, .early = early
	};
	double first, slowest, took;
	pthread_t t;
	int n;

	t_assert_eq(pthread_create(&t, NULL, opener, &sd), 0);
	/* the blocking call is out (the early open returns at once, the
	 * wait after it starts then) */
	usleep(100 * 1000);
	n = rounds(c, r, own, &sd, &first, &slowest);
	t_assert_eq(pthread_join(t, NULL), 0);
	t_ok(sd.err);
	t_assert_eq(sd.nb, CR_NB);
	took = sd.t_end - sd.t_start;
	printf("%s%s: the blocking call took %.0f ms; %d rounds of socket calls ended while it was out, the first %.0f ms before it returned; slowest extend %.1f ms\n",
	       fallback ? "ABI 1.15: " : "",
	       early ? "early open + blocking wait_ready" : "plain prefix open",
	       took, n, n ? sd.t_end - first : 0.0, slowest);
	/* the restores took time: the calls had something to wait behind */
	t_assert(took > 2 * DELAY_MS * 0.8);
	if (fallback) {
		/* before ABI 1.16 the first socket call waited for the
		 * whole call (the round it ended may beat `done`) */
		t_assert(n <= 1);
		t_assert(slowest > took / 2);
	} else {
		t_assert(n >= 10);
		t_assert(sd.t_end - first > took / 2);
	}
	check_bytes(r, sd.seq, content);
	t_ok(kvmm_seq_close(r, sd.seq));
}

int main(void)
{
	struct kvmm_region_opts ro = { .size = sizeof(ro),
				       .layers = CC_L,
				       .kv_heads = 2,
				       .head_dim = 64,
				       .dtype_bytes = 2,
				       .max_seqs = 4,
				       .max_tokens = 16 * CC_TPB };
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.name = "prefix-restore-hol",
					.map_ahead_blocks = 1,
					.map_ahead_set = 1 };
	struct kvmm_daemon_info di = { .size = sizeof(di) };
	struct kvmm_tier_stats_reply ts;
	struct kvmm_region *r;
	struct kvmm_conn *c;
	struct cr_env env;
	uint32_t own;
	struct cc m;

	for (int old = 0; old < 2; old++) {
		if (old)
			setenv("KVMMD_TEST_ABI_1_15", "1", 1);
		cr_start_args(&env, 40, DELAY_MS, "--restore-mode", "reload");
		unsetenv("KVMMD_TEST_ABI_1_15");
		cr_fill_tiers(&env, &ts);
		co.socket_path = env.d.sock;
		t_ok(kvmm_connect(&co, &c));
		t_ok(kvmm_get_daemon_info(c, &di));
		printf("kvmmd ABI %u.%u\n", di.abi_major, di.abi_minor);
		/* (the first pass fails against a kvmmd before 1.16, which
		 * is what it is for; the second knows what it talks to) */
		if (old)
			t_assert_eq(di.abi_minor, 15);
		t_ok(kvmm_region_create(c, &ro, &r));
		t_ok(kvmm_seq_open(r, &own));
		t_ok(kvmm_seq_extend(r, own, CC_TPB));

		run(c, r, own, 0, false, old);
		run(c, r, own, 1, true, old);

		t_ok(kvmm_seq_close(r, own));
		kvmm_disconnect(c);
		/* nothing leaked: no prefix open left pending */
		cc_connect(&m, env.d.sock);
		cc_tier_stats(&m, &ts);
		t_assert_eq(ts.prefix_opens_pending, 0);
		cc_disconnect(&m);
		cr_stop(&env);
	}
	return 0;
}
