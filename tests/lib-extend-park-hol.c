// SPDX-License-Identifier: MIT
/*
 * timeout: 90
 * An extend parked for pool pages does not stall the connection's other
 * threads (ABI 1.17, KVMM_SEQ_EXTEND_COLLECT, SEQ_COLLECT and the ring's
 * notify word): a real kvmmd whose pool (8 blocks) is full, of this
 * client's own blocks and of cached blocks that publisher processes left
 * behind, and whose demotion copies each wait DELAY_MS.  One libkvmm
 * connection:
 *   - engine: thread A extends a new sequence by 3 blocks with a plain,
 *     blocking kvmm_seq_extend() (map-ahead off): the reclaim demotes 3
 *     cached blocks and the extend parks for their pages (at least
 *     DELAY_MS).  Meanwhile the main thread, on a sequence of its own
 *     whose blocks it has, moves the length within them (ring extends),
 *     truncates within its last block (socket), makes socket NOPs and
 *     STATS, steps and processes revocations, round after round.  Many
 *     rounds end while the extend is parked, the first well before it
 *     returns (before, the first socket call waited for the whole park).
 *     Then A's sequence is 3 blocks long, each block mapped with its own
 *     pages, which hold what is written to them, and kvmmd and libkvmm
 *     count the same pages held; one command parked, none now;
 *   - map-ahead: the map-ahead thread's fetch of 2 blocks ahead parks
 *     the same way (the engine's extend itself takes the ring), and the
 *     main thread's rounds on another sequence go on meanwhile, until
 *     the blocks ahead are mapped;
 *   - prefix open: thread A's plain kvmm_seq_open_prefix() of 4 cached
 *     blocks, 3 of them in the host tier, parks for the room its restores
 *     need (3 more cached blocks demoted), then restores them; the main
 *     thread's rounds go on meanwhile as for the engine's extend, and the
 *     open returns the 4 blocks with their bytes (a parked
 *     KVMM_PREFIX_OPEN_COLLECT open answers at once, ABI 1.17);
 *   - all three again against a kvmmd that stands in for an older one
 *     (KVMMD_TEST_ABI_MINOR=16, HELLO says 1.16, for the extends;
 *     KVMMD_TEST_ABI_MINOR=15, 1.15 and no notify word, for the open, whose
 *     COLLECT flag is 1.16's): libkvmm falls back to a park that holds
 *     the socket, so the pages still come and are right, and the main
 *     thread's first socket call waits for most of the park (no round
 *     ends in its first half; rounds may end between the reply, when
 *     libkvmm lets go of the socket, and the call's return, which maps
 *     the blocks first: "at most one round" failed on a loaded machine
 *     in lib-prefix-restore-hol, Documentation/build.md).
 * It prints the slowest round (the figure Documentation/performance.md
 * quotes) and how many rounds ran while the extend was parked.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "kvmm/kvmm.h"
#include "tests/cache-common.h"
#include "tests/lib/daemon.h"
#include "tests/lib/page_counts.h"

#define DELAY_MS 600

struct side {
	struct kvmm_region *r;
	uint32_t seq;
	int err;
	double t_start, t_end; /* ms, of the blocking extend */
	atomic_bool done;
};

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static uint64_t hash_of(int content, int b)
{
	return 0xe7a0000ull * (content + 1) + b + 1;
}

/* kvmmd with a pool of 8 blocks and demotions of DELAY_MS each; knob: a
 * test knob set to 1 for it (NULL: none). */
/* minor: the one kvmmd plays (KVMMD_TEST_ABI_MINOR), NULL for its own */
static void start(struct td_daemon *d, const char *minor)
{
	const char *args[] = { "--gpu-mem", "2M",	  "--cache-gpu-blocks",
			       "8",	    "--host-mem", "2M",
			       NULL };

	if (minor)
		setenv("KVMMD_TEST_ABI_MINOR", minor, 1);
	cc_start_with_delay(d, args, "KVMMD_TEST_DEMOTE_DELAY_MS", DELAY_MS);
	unsetenv("KVMMD_TEST_ABI_MINOR");
}

/* nb blocks of content k (tag 700 + k) cached, by a publisher process;
 * then the GPU tier holds gpu blocks. */
static void publish(struct td_daemon *d, int k, uint32_t nb, uint32_t gpu)
{
	struct kvmm_tier_stats_reply ts;
	uint64_t h[8];

	for (uint32_t b = 0; b < nb; b++)
		h[b] = hash_of(k, b);
	t_assert_eq(cc_publish_content(d->sock, h, nb, 700 + k, NULL), 0);
	cc_settled_stats(d->sock, &ts);
	t_assert_eq(ts.tiers[0].used_blocks, gpu);
}

/* The rest of the pool (nb blocks) cached: content 0. */
static void fill_pool(struct td_daemon *d, uint32_t nb)
{
	publish(d, 0, nb, nb);
}

/* Thread A: the blocking extend of a new sequence by 3 blocks. */
static void *extender(void *arg)
{
	struct side *sd = arg;

	sd->t_start = now_ms();
	sd->err = kvmm_seq_extend(sd->r, sd->seq, 3 * CC_TPB);
	sd->t_end = now_ms();
	atomic_store(&sd->done, true);
	return NULL;
}

/*
 * One round of the main thread's calls: on its own sequence `own` (one
 * block, backed) the length moves within the block (ring) and a truncate
 * cuts it within it (socket), then a socket NOP, STATS, a step and
 * revocations.  With the map-ahead thread on, not the first two: a
 * truncated sequence has no blocks ahead, which the map-ahead thread
 * would then fetch for it (and own's calls would wait for that fetch).
 */
static void round_once(struct kvmm_conn *c, struct kvmm_region *r, uint32_t own,
		       bool seq_calls)
{
	struct kvmm_stats ks = { .size = sizeof(ks) };

	if (seq_calls) {
		t_ok(kvmm_seq_extend(r, own, CC_TPB));
		t_ok(kvmm_seq_truncate(r, own, CC_TPB / 2));
	}
	t_ok(kvmm_nop(c, 1));
	t_ok(kvmm_get_stats(c, &ks));
	t_ok(kvmm_step_begin(c));
	t_ok(kvmm_step_end(c));
	t_assert(kvmm_process_revocations(c) >= 0);
}

/*
 * Rounds until done() says the parked call is over.  Returns the rounds
 * that ended before it; *first: when the first ended, *slowest: the
 * longest round (ms).
 */
static int rounds(struct kvmm_conn *c, struct kvmm_region *r, uint32_t own,
		  bool seq_calls, bool (*done)(void *), void *arg,
		  double *first, double *slowest)
{
	double t_stop = now_ms() + 20000;
	int n = 0;

	*first = 0;
	*slowest = 0;
	while (!done(arg)) {
		double t0 = now_ms(), dt;

		if (t0 > t_stop)
			t_fail("the parked call did not end in 20 s");
		round_once(c, r, own, seq_calls);
		dt = now_ms() - t0;
		if (dt > *slowest)
			*slowest = dt;
		if (!done(arg) && !n++)
			*first = now_ms();
		usleep(2000);
	}
	return n;
}

/* Where layer l's K (kv 0) or V (kv 1) of seq starts in this process. */
static unsigned char *seq_base(struct kvmm_region *r, uint32_t seq, uint32_t l,
			       uint32_t kv)
{
	uint64_t p = kv ? kvmm_seq_v_ptr(r, seq, l) : kvmm_seq_k_ptr(r, seq, l);

	t_assert(p);
	return (unsigned char *)(uintptr_t)p;
}

/* Blocks [0, nb) of seq are mapped, each with pages of its own that hold
 * what is written to them. */
static void check_blocks(struct kvmm_region *r, uint32_t seq, uint32_t nb)
{
	uint32_t ids[8][CC_PPB];

	t_assert(nb <= 8);
	for (uint32_t b = 0; b < nb; b++) {
		t_assert_eq(kvmm_seq_block_pages(r, seq, b, ids[b], CC_PPB),
			    CC_PPB);
		for (uint32_t p = 0; p < CC_PPB; p++)
			for (uint32_t e = 0; e < b; e++)
				for (uint32_t q = 0; q < CC_PPB; q++)
					t_assert(ids[b][p] != ids[e][q]);
	}
	for (uint32_t i = 0; i < 2 * CC_L; i++)
		for (uint32_t b = 0; b < nb; b++)
			memset(seq_base(r, seq, i / 2, i % 2) +
				       (size_t)b * CC_PAGE,
			       (int)(0x40 + 8 * b + i), CC_PAGE);
	for (uint32_t i = 0; i < 2 * CC_L; i++) {
		const unsigned char *base = seq_base(r, seq, i / 2, i % 2);

		for (uint32_t b = 0; b < nb; b++)
			for (uint32_t o = 0; o < CC_PAGE; o += 509)
				if (base[(size_t)b * CC_PAGE + o] !=
				    0x40 + 8 * b + i)
					t_fail("block %u layer %u %s byte %u differs",
					       b, i / 2, i % 2 ? "V" : "K", o);
	}
}

/* The rounds' figures against the parked call's time (took, ms). */
static void judge(const char *what, bool old, int n, double first_before,
		  double slowest, double took)
{
	printf("%s: parked %.0f ms; %d rounds of socket calls ended meanwhile, the first %.0f ms before it returned; slowest round %.1f ms\n",
	       what, took, n, n ? first_before : 0.0, slowest);
	/* the demotions took time: the park had something to wait for */
	t_assert(took > DELAY_MS * 0.8);
	if (old) {
		/* before ABI 1.17 the first socket call waited for the
		 * whole park: no round ended in its first half */
		if (n && first_before > took / 2)
			t_fail("a round ended %.0f ms before the end of a park of %.0f ms that held the socket",
			       first_before, took);
		t_assert(slowest > took / 2);
	} else {
		t_assert(n >= 10);
		t_assert(first_before > took / 2);
		t_assert(slowest < took / 2);
	}
}

static bool side_done(void *arg)
{
	return atomic_load(&((struct side *)arg)->done);
}

/* The engine's own extend parks. */
static void engine_extend(bool old)
{
	struct kvmm_region_opts ro = cc_region_opts();
	struct kvmm_daemon_info di = { .size = sizeof(di) };
	struct kvmm_status_reply st;
	struct kvmm_region *r;
	struct kvmm_conn *c;
	struct td_daemon d;
	struct side sd = { 0 };
	double first, slowest;
	uint32_t own;
	pthread_t t;
	int n;

	start(&d, old ? "16" : NULL);
	c = cc_connect_lib(d.sock, "extend-park-hol");
	t_ok(kvmm_get_daemon_info(c, &di));
	t_assert_eq(di.abi_minor, old ? 16 : KVMM_ABI_MINOR);
	t_ok(kvmm_region_create(c, &ro, &r));
	t_ok(kvmm_seq_open(r, &own));
	t_ok(kvmm_seq_extend(r, own, CC_TPB / 2));
	fill_pool(&d, 7); /* 1 block ours, 7 cached: full */
	t_ok(kvmm_seq_open(r, &sd.seq));
	sd.r = r;
	t_assert_eq(pthread_create(&t, NULL, extender, &sd), 0);
	cc_wait_parked(&d, 1);
	n = rounds(c, r, own, true, side_done, &sd, &first, &slowest);
	t_assert_eq(pthread_join(t, NULL), 0);
	t_ok(sd.err);
	judge(old ? "engine extend, ABI 1.16 kvmmd" : "engine extend", old, n,
	      n ? sd.t_end - first : 0, slowest, sd.t_end - sd.t_start);
	/* its pages are right, and both sides count the same */
	t_assert_eq(kvmm_seq_len(r, sd.seq), 3 * CC_TPB);
	check_blocks(r, sd.seq, 3);
	check_blocks(r, own, 1);
	t_assert_eq(pc_held(c), 4 * CC_PPB);
	t_assert_eq(pc_client_pages(c), 4 * CC_PPB);
	t_ok(td_status(&d, &st));
	t_assert_eq(st.cmds_parked, 1);
	t_assert_eq(st.cmds_parked_now, 0);
	/* the sequence is the client's again: truncate and close it */
	t_ok(kvmm_seq_truncate(r, sd.seq, CC_TPB));
	t_ok(kvmm_seq_close(r, sd.seq));
	t_ok(kvmm_seq_close(r, own));
	kvmm_disconnect(c);
	cc_stop(&d);
}

struct ahead {
	struct kvmm_region *r;
	uint32_t seq, block;
};

static bool ahead_done(void *arg)
{
	struct ahead *a = arg;
	uint32_t ids[CC_PPB];

	return kvmm_seq_block_pages(a->r, a->seq, a->block, ids, CC_PPB) ==
	       CC_PPB;
}

/* The map-ahead thread's fetch parks. */
static void map_ahead(bool old)
{
	struct kvmm_region_opts ro = cc_region_opts();
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.name = "extend-park-hol-ahead",
					.map_ahead_blocks = 2,
					.map_ahead_set = 1 };
	struct kvmm_status_reply st;
	struct kvmm_region *r;
	struct kvmm_conn *c;
	struct td_daemon d;
	struct ahead a;
	double first, slowest, t0;
	uint32_t own, seq;
	int n;

	start(&d, old ? "16" : NULL);
	co.socket_path = d.sock;
	t_ok(kvmm_connect(&co, &c));
	t_ok(kvmm_region_create(c, &ro, &r));
	/* each takes its block and 2 ahead: 6 blocks ours, 2 cached */
	t_ok(kvmm_seq_open(r, &own));
	t_ok(kvmm_seq_extend(r, own, CC_TPB / 2));
	t_ok(kvmm_seq_open(r, &seq));
	t_ok(kvmm_seq_extend(r, seq, CC_TPB / 2));
	fill_pool(&d, 2);
	/* into its third block, through the ring; the map-ahead thread is
	 * kicked for blocks 3 and 4, which need the cached blocks' pages */
	a = (struct ahead){ r, seq, 4 };
	t0 = now_ms();
	t_ok(kvmm_seq_extend(r, seq, 2 * CC_TPB + 1));
	cc_wait_parked(&d, 1);
	n = rounds(c, r, own, false, ahead_done, &a, &first, &slowest);
	judge(old ? "map-ahead fetch, ABI 1.16 kvmmd" : "map-ahead fetch", old,
	      n, n ? now_ms() - first : 0, slowest, now_ms() - t0);
	check_blocks(r, seq, 5);
	check_blocks(r, own, 3);
	t_assert_eq(pc_held(c), 8 * CC_PPB);
	t_assert_eq(pc_client_pages(c), 8 * CC_PPB);
	t_ok(td_status(&d, &st));
	t_assert_eq(st.cmds_parked, 1);
	t_assert_eq(st.cmds_parked_now, 0);
	t_ok(kvmm_seq_close(r, seq));
	t_ok(kvmm_seq_close(r, own));
	kvmm_disconnect(c);
	cc_stop(&d);
}

/* Thread A: a plain, blocking prefix open of content 0's 4 blocks. */
static void *opener(void *arg)
{
	struct side *sd = arg;
	uint64_t h[4];
	uint32_t nb = 0;

	for (int b = 0; b < 4; b++)
		h[b] = hash_of(0, b);
	sd->t_start = now_ms();
	sd->err = kvmm_seq_open_prefix(sd->r, h, 4, &sd->seq, &nb);
	if (!sd->err && nb != 4)
		sd->err = -EPROTO;
	sd->t_end = now_ms();
	atomic_store(&sd->done, true);
	return NULL;
}

/* A prefix open whose restores need room in the full pool parks. */
static void prefix_open(bool old)
{
	struct kvmm_region_opts ro = cc_region_opts();
	struct kvmm_tier_stats_reply ts;
	struct kvmm_status_reply st;
	struct kvmm_region *r;
	struct kvmm_conn *c;
	struct td_daemon d;
	struct side sd = { 0 };
	double first, slowest;
	uint32_t own, z;
	pthread_t t;
	int n;

	/* before 1.16 libkvmm sent no KVMM_PREFIX_OPEN_COLLECT */
	start(&d, old ? "15" : NULL);
	c = cc_connect_lib(d.sock, "extend-park-hol-prefix");
	t_ok(kvmm_region_create(c, &ro, &r));
	t_ok(kvmm_seq_open(r, &own));
	t_ok(kvmm_seq_extend(r, own, CC_TPB / 2));
	publish(&d, 0, 4, 4);
	publish(&d, 1, 3, 7);
	/* content 0's first 3 blocks go down to the host tier to make room
	 * for z, which keeps the pool full */
	t_ok(kvmm_seq_open(r, &z));
	t_ok(kvmm_seq_extend(r, z, 3 * CC_TPB));
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[1].used_blocks, 3);
	/* the open restores them: content 1's 3 blocks make room */
	sd.r = r;
	t_assert_eq(pthread_create(&t, NULL, opener, &sd), 0);
	cc_wait_parked(&d, 1);
	n = rounds(c, r, own, true, side_done, &sd, &first, &slowest);
	t_assert_eq(pthread_join(t, NULL), 0);
	t_ok(sd.err);
	judge(old ? "prefix open, ABI 1.15 kvmmd" : "prefix open", old, n,
	      n ? sd.t_end - first : 0, slowest, sd.t_end - sd.t_start);
	t_assert(cc_seq_content_ok(r, sd.seq, 4, 700, 509));
	check_blocks(r, z, 3);
	t_assert_eq(pc_held(c), 8 * CC_PPB);
	t_assert_eq(pc_client_pages(c), 8 * CC_PPB);
	t_ok(td_status(&d, &st));
	t_assert_eq(st.cmds_parked, 2); /* z's extend, then the open */
	t_assert_eq(st.cmds_parked_now, 0);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.prefix_opens_pending, 0);
	t_assert_eq(ts.tiers[1].promotions_out, 3);
	t_ok(kvmm_seq_close(r, sd.seq));
	t_ok(kvmm_seq_close(r, z));
	t_ok(kvmm_seq_close(r, own));
	kvmm_disconnect(c);
	cc_stop(&d);
}

int main(void)
{
	for (int old = 0; old < 2; old++) {
		engine_extend(old);
		map_ahead(old);
		prefix_open(old);
	}
	return 0;
}
