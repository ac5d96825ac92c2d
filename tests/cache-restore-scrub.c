// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * A restore's fresh pages are zeroed against the cache scope, not only
 * against the uid whose open started it: an early open of another uid
 * maps them before the copy lands.  kvmmd (shared scope, restores slowed
 * to DELAY_MS) holds content X on its host tier.  A process of uid B
 * writes a secret into two blocks and closes them (its pages go back to
 * the pool, B's), then opens X without KVMM_PREFIX_OPEN_EARLY: the
 * restore's pages come from the pool.  While the copy is delayed a
 * process of uid C early-opens X (once kvmmd logs that a worker took B's
 * restore) and reads the pages it is given at once: it must have
 * attached to that restore (X from the host tier, some page not copied
 * yet: else the test tested nothing and fails), and each page must be
 * all zero or already X's bytes, never B's secret
 * (before the fix the restore's pages were B's own, unscrubbed, and C
 * read B's bytes); then its reloads land and it reads X.  ADMIN_STATUS
 * counts the pages scrubbed for the restore.  Needs root (processes of
 * other uids).
 */
#include <poll.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/cache-uids.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"
#include "tests/lib/wait.h"

#define NB 2
/* long enough that C's early open, started once a worker took B's
 * restore, comes before the copy under load */
#define DELAY_MS 2000
#define UID_A 63301
#define UID_B 63302
#define UID_C 63303
#define TAG_X 0x5c0
#define TAG_Y 0x5c1
#define TAG_SECRET 0xb5ec
/* kvmmd's line when a worker takes a restore under the delay knob */
/* the taken line alone: the worker also logs "... N jobs done" */
#define RESTORE_TAKEN " jobs taken, waiting "

static void hashes(int content, uint64_t *h)
{
	for (int b = 0; b < NB; b++)
		h[b] = 0x5c00000ull * (content + 1) + b + 1;
}

/* Is page p of block b all zero (1), X's bytes (2), or neither (0)? */
static int page_kind(struct cc *c, uint32_t id, uint32_t b, uint32_t p)
{
	const unsigned char *m = c->map[id];
	bool zero = true, x = true;

	for (size_t o = 0; o < CC_PAGE && (zero || x); o++) {
		zero = zero && !m[o];
		x = x && m[o] == cc_pat(TAG_X, b, p, o);
	}
	return zero ? 1 : x ? 2 : 0;
}

/* How many pages of the open's blocks hold X's bytes. */
static int count_x(struct cc *c, const uint32_t *ids)
{
	int x = 0;

	for (uint32_t b = 0; b < NB; b++)
		for (uint32_t p = 0; p < CC_PPB; p++)
			x += page_kind(c, ids[b * CC_PPB + p], b, p) == 2;
	return x;
}

/* B: secret written and freed, then a plain open of X; says when sent. */
static void uid_b(const char *sock, int ready_fd)
{
	struct kvmm_prefix_open_reply rep;
	uint32_t pages[NB * CC_PPB], ids[NB * CC_PPB];
	uint64_t h[NB];
	struct cc c;
	uint32_t seq;

	cu_become(UID_B, UID_B);
	cc_connect(&c, sock);
	cc_region(&c);
	seq = cc_seq_open(&c);
	cc_extend(&c, seq, NB * CC_TPB, pages);
	cc_fill(&c, pages, NB, TAG_SECRET);
	cc_seq_close(&c, seq, pages, NB * CC_PPB);
	hashes(0, h);
	cc_prefix_send(&c, h, NB);
	t_assert_eq(write(ready_fd, "b", 1), 1);
	cc_prefix_recv(&c, &rep, ids);
	t_assert_eq(rep.nr_blocks, NB);
	cc_check(&c, ids, NB, TAG_X);
	cc_seq_close(&c, rep.seq_id, ids, NB * CC_PPB);
	cc_disconnect(&c);
	_exit(0);
}

/* C: an early open of X, its pages read at once, then once loaded. */
static void uid_c(const char *sock)
{
	struct kvmm_prefix_open_reply rep;
	uint32_t ids[NB * CC_PPB];
	int kinds[3] = { 0 }, x;
	uint64_t h[NB];
	struct cc c;

	cu_become(UID_C, UID_C);
	cc_connect(&c, sock);
	cc_region(&c);
	hashes(0, h);
	cc_prefix_send_flags(&c, h, NB,
			     KVMM_PREFIX_OPEN_ACTIONS | KVMM_PREFIX_OPEN_EARLY);
	cc_prefix_recv(&c, &rep, ids);
	t_assert_eq(rep.nr_blocks, NB);
	for (uint32_t b = 0; b < NB; b++)
		for (uint32_t p = 0; p < CC_PPB; p++)
			kinds[page_kind(&c, ids[b * CC_PPB + p], b, p)]++;
	printf("uid %d: pages at the early reply: %d zero, %d X, %d other (from gpu %u, host %u)\n",
	       UID_C, kinds[1], kinds[2], kinds[0], rep.from_gpu,
	       rep.from_host);
	fflush(stdout);
	if (kinds[0])
		_exit(3); /* someone else's bytes */
	/*
	 * Not vacuous: C attached to B's restore before its copies landed
	 * (X not on the GPU yet, and some page still as the restore found
	 * it), or it read nothing a scrub decides.
	 */
	if (rep.from_host != NB || !kinds[1]) {
		printf("uid %d: the early reply came after B's restore landed: nothing tested (DELAY_MS %d too short for this machine?)\n",
		       UID_C, DELAY_MS);
		fflush(stdout);
		_exit(4);
	}
	/* the reloads land: X's bytes (SEQ_WAIT_READY's job; polled here) */
	t_wait_until(30000, x = count_x(&c, ids), x == NB * CC_PPB,
		     "C's reloads of X never landed (%d of %d pages X)", x,
		     NB * CC_PPB);
	cc_check(&c, ids, NB, TAG_X);
	cc_seq_close(&c, rep.seq_id, ids, NB * CC_PPB);
	cc_disconnect(&c);
	_exit(0);
}

int main(void)
{
	const char *args[] = { "--cache-block-pages",
			       "4",
			       "--cache-gpu-blocks",
			       "2",
			       "--host-mem",
			       "4M",
			       NULL };
	struct kvmm_tier_stats_reply ts;
	struct kvmm_status_reply st0, st;
	struct td_daemon d;
	uint64_t h[NB];
	pid_t pb, pc;
	int pipefd[2];
	char ch;

	if (geteuid() != 0)
		t_skip("needs root: processes of other uids");
	cc_start_with_delay(&d, args, "KVMMD_TEST_RESTORE_DELAY_MS", DELAY_MS);
	t_ok(chmod(d.dir, 0755));
	t_ok(chmod(d.sock, 0777));
	/* X then Y from uid A: X goes down to the host tier */
	hashes(0, h);
	cu_publish_as(d.sock, UID_A, UID_A, h, NB, TAG_X, NB);
	hashes(1, h);
	cu_publish_as(d.sock, UID_A, UID_A, h, NB, TAG_Y, NB);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[1].used_blocks, NB);

	t_ok(td_status(&d, &st0));
	td_log_has(&d, RESTORE_TAKEN, false); /* X's first restore is B's */
	t_ok(pipe(pipefd));
	pb = fork();
	t_assert(pb >= 0);
	if (pb == 0)
		uid_b(d.sock, pipefd[1]);
	t_assert_eq(read(pipefd[0], &ch, 1), 1);
	/* B's open has started the (slowed) restore: a worker took it */
	td_wait_log(&d, RESTORE_TAKEN, 30000);
	pc = fork();
	t_assert(pc >= 0);
	if (pc == 0)
		uid_c(d.sock);
	t_assert_eq(cc_wait_child(pc), 0);
	t_assert_eq(cc_wait_child(pb), 0);
	t_ok(td_status(&d, &st));
	printf("pages scrubbed: %llu before B's open, %llu after\n",
	       (unsigned long long)st0.pages_scrubbed,
	       (unsigned long long)st.pages_scrubbed);
	/* B's secret pages went to the restore (the shared scope's) */
	t_assert(st.pages_scrubbed >= st0.pages_scrubbed + NB * CC_PPB);
	cc_stop(&d);
	printf("a restore's pages reach another uid only zeroed\n");
	return 0;
}
