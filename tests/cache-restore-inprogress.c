// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * A reload whose copy kvmmd could not wait for (cuda: synchronize cannot
 * enter the context, -EINPROGRESS) after an early open
 * (KVMM_PREFIX_OPEN_EARLY) handed its pages out: a real kvmmd on the
 * cuda backend over the mock libcuda, which holds copies to the device
 * back until the stream is synchronized and, with KVMM_MOCK_STALL_HTOD=4,
 * makes the worker that queued the 4th one unable to enter the context
 * for its wait (that copy lands at the next synchronize, late).  Content
 * X (2 blocks) and Y are published, X goes down to host, a plain open of
 * X's first block brings it back (copies 1-2), then an early open of
 * both blocks shares block 0 and reloads block 1 (copies 3-4: stalled):
 *   - SEQ_WAIT_READY over both blocks is -ESTALE (ABI 1.20: revoked;
 *     -ERANGE before) and the client gets a
 *     revocation of block 1's pages (before, it was told block 1 failed
 *     and recomputed it in the pages the copy was still to land in);
 *   - the client extends onto fresh pages (none of the stalled copy's)
 *     and recomputes block 1 there; another open reloads block 1 again
 *     (copies 5-6), whose wait lands the stalled copy: the recomputed
 *     bytes stay (before, the late copy overwrote them), the reload is
 *     byte-identical;
 *   - a client killed right after its early open of Y's block 0, whose
 *     reload (copies 7-8, every restore slowed by 300 ms) then stalls:
 *     its pages stay out of use as well;
 *   - the stalled copies' pages never come back: with every sequence
 *     closed they stay allocated, a sequence that takes the whole pool
 *     gets every page but those four, kvmmd says so at ERR, and stops
 *     cleanly (the mock finds no misuse or leak).
 * Runs on the mock only (tests/vmm-cuda-mock.sh); skips (77) elsewhere.
 */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "kvmm/uapi.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"
#include "vmm/vmm.h"

#define PAGE (2u << 20) /* the mock's granularity */
#define TPB 1024 /* 2 MiB / (8 heads * 128 dim * 2 bytes) */
#define PPB 2 /* one layer: K and V */
#define MAX_BLOCKS 16

static const uint64_t hx[2] = { 0x6b766d6d58000001ull, 0x6b766d6d58000002ull };
static const uint64_t hy[2] = { 0x6b766d6d59000001ull, 0x6b766d6d59000002ull };

static unsigned char pat(int tag, uint32_t b, uint32_t pg, size_t o)
{
	return (unsigned char)(tag * 37 + b * 11 + pg * 5 + o * 13 + (o >> 11));
}

/* Block b's page pg (0 K, 1 V) in this process: the mock's device
 * memory is mapped at its device address. */
static unsigned char *page_ptr(struct kvmm_region *r, uint32_t seq, uint32_t b,
			       uint32_t pg)
{
	uint64_t base = pg ? kvmm_seq_v_ptr(r, seq, 0) :
			     kvmm_seq_k_ptr(r, seq, 0);

	return (unsigned char *)(uintptr_t)(base + (uint64_t)b * PAGE);
}

static void fill(struct kvmm_region *r, uint32_t seq, uint32_t b, int tag)
{
	for (uint32_t pg = 0; pg < PPB; pg++) {
		unsigned char *p = page_ptr(r, seq, b, pg);

		for (size_t o = 0; o < PAGE; o++)
			p[o] = pat(tag, b, pg, o);
	}
}

/* The first byte of block b that differs from tag's pattern, or -1. */
static long differs(struct kvmm_region *r, uint32_t seq, uint32_t b, int tag)
{
	for (uint32_t pg = 0; pg < PPB; pg++) {
		const unsigned char *p = page_ptr(r, seq, b, pg);

		for (size_t o = 0; o < PAGE; o++)
			if (p[o] != pat(tag, b, pg, o))
				return (long)(pg * PAGE + o);
	}
	return -1;
}

/* A sequence of 2 blocks filled with tag's pattern, published as h. */
static void publish(struct kvmm_region *r, const uint64_t *h, int tag)
{
	uint32_t seq;

	t_ok(kvmm_seq_open(r, &seq));
	t_ok(kvmm_seq_extend(r, seq, 2 * TPB));
	fill(r, seq, 0, tag);
	fill(r, seq, 1, tag);
	t_assert_eq(kvmm_block_publish(r, seq, 0, 2, 0, h), 2);
	t_ok(kvmm_seq_close(r, seq));
}

static uint32_t open_prefix(struct kvmm_region *r, const uint64_t *h,
			    uint32_t n, uint32_t flags, uint8_t *acts)
{
	struct kvmm_prefix_opts o = { .size = sizeof(o),
				      .flags = flags,
				      .actions = acts };
	uint32_t seq, nb;

	/* 0 is no action: an action this open did not write is not taken
	 * for the one an earlier open wrote there */
	memset(acts, 0, n);
	t_ok(kvmm_seq_open_prefix_opts(r, h, n, &seq, &nb, &o));
	t_assert_eq(nb, n);
	return seq;
}

static const struct kvmm_region_opts region_opts = {
	.size = sizeof(region_opts),
	.layers = 1,
	.kv_heads = 8,
	.head_dim = 128,
	.dtype_bytes = 2,
	.max_seqs = 8,
	.max_tokens = MAX_BLOCKS * TPB
};

/*
 * The client that dies: forked before the parent loads anything, it
 * waits for kvmmd's socket path on go, opens Y's block 0 early, writes its action and the
 * reload's page ids to wr, and waits to be killed.
 */
static int dying_client(int go, int wr)
{
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.map_ahead_set = 1 };
	struct kvmm_region *r;
	struct kvmm_conn *c;
	uint32_t msg[1 + PPB], seq;
	char sock[sizeof(((struct td_daemon *)0)->sock)];
	uint8_t act = 0;

	if (read(go, sock, sizeof(sock)) != sizeof(sock))
		return 1;
	co.socket_path = sock;
	if (kvmm_connect(&co, &c) || kvmm_region_create(c, &region_opts, &r))
		return 2;
	seq = open_prefix(r, hy, 1, KVMM_PREFIX_OPEN_EARLY, &act);
	msg[0] = act;
	if (kvmm_seq_block_pages(r, seq, 0, msg + 1, PPB) != PPB)
		return 3;
	/* the parent kills this process once a worker has taken the
	 * reload (restore_taken()) */
	if (write(wr, msg, sizeof(msg)) != sizeof(msg))
		return 4;
	/* killed here, or the parent failed (end of file): exit */
	while (read(go, sock, 1) > 0)
		;
	return 5;
}

/* kvmmd's line when a worker takes a restore (KVMMD_TEST_RESTORE_DELAY_MS) */
/* the taken line alone: the worker also logs "... N jobs done" */
#define RESTORE_TAKEN " jobs taken, waiting "

/* How often kvmmd has logged needle so far. */
static int log_count(const struct td_daemon *d, const char *needle)
{
	static char log[1 << 16];

	t_assert(td_read_log(d, log, sizeof(log)) > 0);
	return t_count(log, needle);
}

static bool is_mock(void)
{
	void *dl = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	bool mock = dl && dlsym(dl, "kvmm_mock_fail_ctx_push");

	if (dl)
		dlclose(dl);
	return mock;
}

int main(void)
{
	const char *args[] = { "--backend",
			       "cuda",
			       "--page-size",
			       "2097152",
			       "--gpu-mem",
			       "64M",
			       "--host-mem",
			       "32M",
			       "--cache-gpu-blocks",
			       "2",
			       "--restore-mode",
			       "reload",
			       NULL };
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.map_ahead_set = 1 };
	uint32_t lost[2 * PPB], fresh[PPB], failed[4], seq, seq2, got = 0;
	uint32_t child_msg[1 + PPB];
	struct kvmm_status_reply st;
	struct kvmm_stats ks = { .size = sizeof(ks) };
	struct kvmm_region *r;
	struct kvmm_conn *c;
	struct td_daemon d;
	int go[2], back[2], ws;
	uint8_t acts[2];
	pid_t child;
	long bad;
	int n, err;

	if (!is_mock())
		t_skip("needs the mock libcuda on LD_LIBRARY_PATH (tests/vmm-cuda-mock.sh)");
	t_assert(pipe(go) == 0 && pipe(back) == 0);
	child = fork();
	t_assert(child >= 0);
	if (child == 0) {
		close(go[1]);
		close(back[0]);
		_exit(dying_client(go[0], back[1]));
	}
	close(go[0]);
	close(back[1]);
	/* kvmmd's 4th and 8th copies to the GPU stall; this process's do
	 * not; every restore waits 300 ms before its copies (the client
	 * dies meanwhile, SEQ_WAIT_READY waits) */
	setenv("KVMM_MOCK_STALL_HTOD", "4,8", 1);
	setenv("KVMMD_TEST_RESTORE_DELAY_MS", "300", 1);
	err = td_start(&d, args);
	unsetenv("KVMM_MOCK_STALL_HTOD");
	unsetenv("KVMMD_TEST_RESTORE_DELAY_MS");
	if (err)
		t_fail("kvmmd did not start: %s", strerror(-err));
	t_ok(td_status(&d, &st));
	t_assert_eq(st.backend, VMM_BACKEND_CUDA);
	t_assert_eq(st.page_size, PAGE);

	t_ok(kvmm_connect(&co, &c));
	t_ok(kvmm_region_create(c, &region_opts, &r));
	t_assert_eq(kvmm_region_tokens_per_block(r), TPB);
	publish(r, hx, 1);
	publish(r, hy, 2); /* X goes down to host (2 GPU blocks cached) */

	/* copies 1-2: X's block 0 back on the GPU */
	seq = open_prefix(r, hx, 1, 0, acts);
	t_assert_eq(acts[0], KVMM_BLOCK_RELOADED_HOST);
	t_assert_eq(differs(r, seq, 0, 1), -1);
	t_ok(kvmm_seq_close(r, seq));

	/* copies 3-4: block 1 reloads into pages handed out at once, and
	 * its wait gives up */
	seq = open_prefix(r, hx, 2, KVMM_PREFIX_OPEN_EARLY, acts);
	t_assert_eq(acts[0], KVMM_BLOCK_GPU_SHARED);
	t_assert_eq(acts[1], KVMM_BLOCK_RELOADED_HOST);
	t_assert_eq(kvmm_seq_block_pages(r, seq, 1, lost, PPB), PPB);
	n = kvmm_seq_wait_ready(r, seq, 2, 0, failed, 4, NULL);
	printf("SEQ_WAIT_READY after the stalled reload: %d (%s)\n", n,
	       n < 0 ? strerror(-n) : "blocks failed");
	if (n == 1 && failed[0] == 1) {
		/* the old answer: block 1 failed, recompute it in place (what
		 * a client does with it, to show where that goes) */
		fill(r, seq, 1, 3);
	} else {
		t_assert_eq(n, -ESTALE); /* revoked (-ERANGE before 1.20) */
		t_assert_eq(kvmm_process_revocations(c), PPB);
		t_assert_eq(kvmm_seq_len(r, seq), TPB);
		t_ok(kvmm_seq_extend(r, seq, 2 * TPB));
		t_assert_eq(kvmm_seq_block_pages(r, seq, 1, fresh, PPB), PPB);
		for (int i = 0; i < PPB; i++)
			for (int j = 0; j < PPB; j++)
				t_assert(fresh[i] != lost[j]);
		t_assert_eq(differs(r, seq, 0, 1), -1); /* block 0 kept */
		fill(r, seq, 1, 3); /* the recompute */
	}

	/* copies 5-6: block 1 reloads again, and this wait lands the
	 * stalled copy (the mock runs the stream's copies in order) */
	seq2 = open_prefix(r, hx, 2, 0, acts);
	t_assert_eq(acts[1], KVMM_BLOCK_RELOADED_HOST);
	t_assert_eq(differs(r, seq2, 1, 1), -1);
	t_ok(kvmm_seq_close(r, seq2));
	bad = differs(r, seq, 1, 3);
	if (bad >= 0)
		t_fail("the recomputed block 1 was overwritten (byte %ld) by the copy that landed late",
		       bad);
	t_assert_eq(n, -ESTALE);
	t_ok(kvmm_get_stats(c, &ks));
	t_assert_eq(ks.pages_revoked, PPB);
	t_ok(kvmm_seq_close(r, seq));

	/* copies 7-8: the client that opened Y's block 0 early is gone
	 * (SIGKILL) before its reload stalls */
	t_assert_eq(write(go[1], d.sock, sizeof(d.sock)), sizeof(d.sock));
	t_assert_eq(read(back[0], child_msg, sizeof(child_msg)),
		    sizeof(child_msg));
	/* The reload is queued when the early open replies, and a worker
	 * takes it and sleeps its 300 ms there.  Killed before a worker took
	 * it, the reload would be called off (restores_cancelled), nothing
	 * would stall and the test would wait for a second "kept out of
	 * use" in vain (once under ASan on a loaded machine, when the child
	 * slept 100 ms for the worker instead): kill it once kvmmd's log
	 * says the fourth restore was taken.  Dying later in the sleep, or
	 * after it, ends the same way. */
	for (int i = 0; i < 3000 && log_count(&d, RESTORE_TAKEN) < 4; i++)
		usleep(10000);
	t_assert_eq(log_count(&d, RESTORE_TAKEN), 4);
	t_ok(kill(child, SIGKILL));
	t_assert(waitpid(child, &ws, 0) == child && WIFSIGNALED(ws));
	t_assert_eq(child_msg[0], KVMM_BLOCK_RELOADED_HOST);
	memcpy(lost + PPB, child_msg + 1, sizeof(uint32_t) * PPB);
	/* up to 30 s: under ASan on a loaded 2-core machine the session's
	 * end and the stalled wait took more than the 5 s this gave once */
	for (int i = 0; i < 3000 && log_count(&d, "kept out of use") < 2; i++)
		usleep(10000);
	t_assert_eq(log_count(&d, "pool pages kept out of use"), 2);

	/* the stalled copy's pages stay out of use: allocated with nothing
	 * else but the cached GPU blocks, and a sequence taking the whole
	 * pool (the cache gives its blocks up) never gets them */
	t_ok(td_status(&d, &st));
	printf("pool: %llu pages, %llu allocated with every sequence closed\n",
	       (unsigned long long)st.pages_total,
	       (unsigned long long)st.pages_allocated);
	t_assert_eq(st.pages_allocated, 2 * PPB + 2 * PPB);
	t_ok(kvmm_seq_open(r, &seq));
	for (uint32_t b = 0; b < MAX_BLOCKS; b++) {
		uint32_t ids[PPB];

		err = kvmm_seq_extend(r, seq, (b + 1) * TPB);
		if (err)
			break;
		t_assert_eq(kvmm_seq_block_pages(r, seq, b, ids, PPB), PPB);
		for (int i = 0; i < PPB; i++)
			for (int j = 0; j < 2 * PPB; j++)
				t_assert(ids[i] != lost[j]);
		got += PPB;
	}
	printf("a sequence taking the pool got %u pages (then %s)\n", got,
	       strerror(-err));
	t_assert_eq(got, st.pages_total - 2 * PPB);
	t_ok(kvmm_seq_close(r, seq));
	t_ok(kvmm_region_destroy(r));
	kvmm_disconnect(c);

	t_assert_eq(log_count(&d, "revoked from there"), 1);
	t_assert_eq(log_count(&d, "2 pool pages kept out of use"), 2);
	err = td_stop(&d);
	if (err)
		td_dump_log(&d);
	t_assert_eq(err, 0);
	printf("stalled reloads: revoked from the early open, recomputed in fresh pages; theirs and the dead client's pages kept out of use\n");
	return 0;
}
