// SPDX-License-Identifier: MIT
/*
 * timeout: 30
 * The engine's extend that races the map-ahead thread's: the thread's
 * SEQ_EXTEND reaches kvmmd after a revocation and gets fresh pages for
 * the revoked blocks, but the engine's extend looked for kept pages
 * (apply_kept(), kvmm/lib/extend.c) before the thread had kept them.
 * tests/daemon-revoke-map-ahead-extend.c covers an extend that starts
 * after the thread kept them; here it started before:
 *   - the ring's extend (within the blocks mapped), sent while the
 *     thread's reply was on its way, reached kvmmd after the thread's
 *     extend: kvmmd found the revoked blocks backed again and answered
 *     0, growing its length over them, so libkvmm's length grew over the
 *     old pages and a publish cached kvmmd's fresh pages, not what the
 *     engine had written.  It must answer -ENODATA, as for a block with
 *     no pages, and the publish -ESTALE;
 *   - the socket's extend (past the blocks mapped) waited for the
 *     socket while the thread fetched, then sent only the blocks above
 *     the fresh ones: the length grew to new_len over the old pages.  It
 *     must apply the revocation first: length 0, the kept pages mapped.
 *   - the socket's extend took the socket and found nothing kept, but
 *     the thread's extend was parked for pool pages (KVMM_SEQ_EXTEND_
 *     COLLECT), and kc_fetch() let go of the socket to wait for the
 *     thread's collect, whose reply kept the fresh pages: the extend
 *     then sent only the blocks above them, and the length grew to
 *     new_len over the old pages.  It must wait for the collect before
 *     it looks for kept pages, and apply them.
 * All were tests/daemon-fuzz phase 4's blocks reloaded with other bytes
 * (seed 1, about 1 run in 4; the last one a block shared from host).
 *
 * The client maps nothing ahead and the test is the thread: it calls
 * kc_fetch() for blocks ahead as the thread does, under the socket
 * lock, at the point of the race the interleaving needs.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "kvmm/lib/client.h"
#include "tests/lib/admin_revoke.h"
#include "tests/lib/daemon.h"
#include "tests/lib/page_counts.h"
#include "tests/lib/small_region.h"
#include "tests/lib/test.h"
#include "tests/lib/wait.h"

#define TPB TR_TPB
#define PPB 4 /* 2 layers, K and V */
#define PAGE 65536

static struct td_daemon d;

/* The map-ahead thread's fetch of blocks ahead up to want (new_len 0);
 * the caller holds the socket lock when held.  kc_fetch() caps a
 * thread's want at the length's blocks and the connection's map-ahead
 * window when it sends (the engine may have cut the sequence since the
 * thread chose it), and this client's window is 0 (no thread runs): it
 * is want for the call.  An engine thread of the round computed its own
 * want before it waited for the socket. */
static void thread_fetch(struct kvmm_region *r, uint32_t seq, uint32_t want,
			 bool held)
{
	struct kvmm_conn *c = r->conn;

	if (!held)
		pthread_mutex_lock(&c->sock_lock);
	pthread_mutex_lock(&c->lock);
	c->map_ahead = want;
	pthread_mutex_unlock(&c->lock);
	t_ok(kc_fetch(r, seq, 0, want, true));
	pthread_mutex_lock(&c->lock);
	c->map_ahead = 0;
	pthread_mutex_unlock(&c->lock);
	if (!held)
		pthread_mutex_unlock(&c->sock_lock);
}

/* A sequence of 2 blocks written with 0x5a, revoked from block 0 on
 * (the entries wait in the ring); its block 0's pages in old. */
static uint32_t written_revoked(struct kvmm_conn *c, struct kvmm_region *r,
				uint32_t *old)
{
	struct kvmm_stats ks = { .size = sizeof(ks) };
	unsigned char *k0;
	uint32_t seq;

	t_ok(kvmm_get_stats(c, &ks));
	t_ok(kvmm_seq_open(r, &seq));
	t_ok(kvmm_seq_extend(r, seq, 2 * TPB));
	t_assert_eq(pc_backed(r, seq), 2);
	k0 = (unsigned char *)(uintptr_t)kvmm_seq_k_ptr(r, seq, 0);
	memset(k0, 0x5a, 2 * PAGE);
	t_assert_eq(kvmm_seq_block_pages(r, seq, 0, old, PPB), PPB);
	t_ok(ar_revoke(d.sock, ks.session_id, r->id, seq, 0));
	return seq;
}

/* After the revocation applied: length 0, block 0 on kvmmd's fresh
 * pages (not old), nothing kept, nothing revoking, the counts agree. */
static void check_applied(struct kvmm_conn *c, struct kvmm_region *r,
			  uint32_t seq, const uint32_t *old, uint32_t blocks)
{
	struct kvmm_status_reply st;
	uint32_t now[PPB];

	t_assert_eq(kvmm_seq_len(r, seq), 0);
	t_assert_eq(c->nr_deferred, 0);
	t_assert(pc_backed(r, seq) >= blocks);
	t_assert_eq(kvmm_seq_block_pages(r, seq, 0, now, PPB), PPB);
	for (int i = 0; i < PPB; i++)
		t_assert(now[i] != old[i]);
	t_ok(td_status(&d, &st));
	t_assert_eq(st.pages_revoking, 0);
	t_assert_eq(pc_client_pages(c), pc_held(c));
}

/* Grown again from 0 and written: a publish caches these bytes. */
static void rewrite_publish(struct kvmm_region *r, uint32_t seq,
			    const uint64_t *h)
{
	unsigned char *k0 =
		(unsigned char *)(uintptr_t)kvmm_seq_k_ptr(r, seq, 0);
	uint32_t pseq, nb = 0;

	t_ok(kvmm_seq_extend(r, seq, 2 * TPB));
	t_assert_eq(kvmm_seq_len(r, seq), 2 * TPB);
	memset(k0, 0x33, 2 * PAGE);
	t_assert_eq(kvmm_block_publish(r, seq, 0, 1, 0, h), 1);
	t_ok(kvmm_seq_open_prefix(r, h, 1, &pseq, &nb));
	t_assert_eq(nb, 1);
	k0 = (unsigned char *)(uintptr_t)kvmm_seq_k_ptr(r, pseq, 0);
	for (size_t off = 0; off < PAGE; off += 4093)
		t_assert_eq(k0[off], 0x33);
	t_ok(kvmm_seq_close(r, pseq));
}

/* A round's end: the revocation applied (blocks backed), the sequence
 * grown again and written publishes its new bytes, and closes. */
static void check_republish_close(struct kvmm_conn *c, struct kvmm_region *r,
				  uint32_t seq, const uint32_t *old,
				  uint32_t blocks, const uint64_t *h)
{
	check_applied(c, r, seq, old, blocks);
	rewrite_publish(r, seq, h);
	t_ok(kvmm_seq_close(r, seq));
}

/* The ring's extend reaches kvmmd after the thread's fetch. */
static void ring_round(struct kvmm_conn *c, struct kvmm_region *r)
{
	const uint64_t h[1] = { 0x5eed0a01 };
	uint32_t old[PPB], seq, pseq, nb = 5;
	uint64_t v = 0;

	seq = written_revoked(c, r, old);
	thread_fetch(r, seq, 3, false);
	t_assert_eq(c->nr_deferred, 2);
	t_assert_eq(kvmm_seq_len(r, seq), 2 * TPB);
	/* what seq_extend() sends within block 2, once apply_kept() had
	 * found nothing kept */
	t_assert_eq(kc_ring_cmd(c, KVMM_CMD_SEQ_EXTEND, r->id, seq, 2 * TPB + 1,
				&v),
		    -ENODATA);
	/* kvmmd's length stayed where the revocation cut it */
	t_assert_eq(kvmm_block_publish(r, seq, 0, 1, 0, h), -ESTALE);
	/* nor are the blocks ready: the old pages are no longer the
	 * sequence's (an early open's reload may not have landed) */
	t_assert_eq(kvmm_seq_wait_ready(r, seq, 2, 0, NULL, 0, NULL), -ESTALE);
	t_ok(kvmm_seq_open_prefix(r, h, 1, &pseq, &nb));
	t_assert_eq(nb, 0); /* nothing cached under h */
	t_ok(kvmm_seq_close(r, pseq));
	/* libkvmm's extend: the revocation applied, the kept pages mapped */
	t_ok(kvmm_seq_extend(r, seq, 2 * TPB + 1));
	check_republish_close(c, r, seq, old, 3, h);
}

/* The engine of the socket and collect rounds: its kvmm_seq_extend() of
 * a written_revoked() sequence, in a thread of its own, races the
 * map-ahead thread's fetch (the test). */
struct engine {
	struct kvmm_conn *c;
	struct kvmm_region *r;
	uint32_t seq, new_len;
	uint32_t old[PPB]; /* block 0's pages before the revocation */
	pthread_t thread;
	atomic_int tid; /* the engine thread's, for /proc */
	int err;
};

static void *engine_extend(void *arg)
{
	struct engine *e = arg;

	atomic_store(&e->tid, (int)syscall(SYS_gettid));
	e->err = kvmm_seq_extend(e->r, e->seq, e->new_len);
	return NULL;
}

/* Wait for the engine's extend to count its wait for the socket: past
 * apply_kept(), which found nothing kept (the caller holds the socket
 * lock, so it waits there). */
static void wait_extend_waits(struct kvmm_conn *c, uint64_t waits)
{
	uint64_t now;

	t_wait_until(20000,
		     (pthread_mutex_lock(&c->lock), now = c->st.extend_waits,
		      pthread_mutex_unlock(&c->lock)),
		     now > waits, "the engine's extend counted no wait (%llu)",
		     (unsigned long long)now);
}

/* Whether thread tid of ours sleeps in futex() on a word of
 * [obj, obj + len): what /proc says of its system call. */
static bool futex_waits_on(int tid, const void *obj, size_t len)
{
	unsigned long long arg0 = 0;
	char path[64], line[256];
	bool on = false;
	long nr = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", tid);
	f = fopen(path, "r");
	if (!f)
		return false;
	if (fgets(line, sizeof(line), f) &&
	    sscanf(line, "%ld %llx", &nr, &arg0) == 2)
		on = nr == SYS_futex && arg0 >= (uintptr_t)obj &&
		     arg0 < (uintptr_t)obj + len;
	fclose(f);
	return on;
}

/*
 * Wait for the engine's extend to sleep in kc_seq_wait_collect() on the
 * collect's condition, having let go of the socket: its futex word is in
 * c->collect_cond (where a wait for a mutex would name the mutex's).  A
 * fixed 50 ms stood for it, which a loaded machine outlasts: the test
 * then took the socket first and the engine found the collect over.
 */
static void wait_engine_collects(struct kvmm_conn *c, const struct engine *e)
{
	int tid = atomic_load(&e->tid);

	t_wait_until(20000, (void)0,
		     futex_waits_on(tid, &c->collect_cond,
				    sizeof(c->collect_cond)),
		     "the engine's extend (thread %d) never waited for the "
		     "collect",
		     tid);
}

/*
 * Start e's extend past the blocks mapped (to 4 blocks and a token) of a
 * written_revoked() sequence while holding the socket lock, and return
 * once it waits for the socket, past apply_kept(); the socket lock is
 * still held.  collecting marks the sequence as the map-ahead thread's
 * parked extend does before the engine starts.
 */
static void engine_start(struct engine *e, struct kvmm_conn *c,
			 struct kvmm_region *r, bool collecting)
{
	uint64_t waits;

	*e = (struct engine){ .c = c, .r = r, .new_len = 4 * TPB + 1 };
	e->seq = written_revoked(c, r, e->old);
	pthread_mutex_lock(&c->sock_lock);
	pthread_mutex_lock(&c->lock);
	waits = c->st.extend_waits;
	if (collecting)
		r->seqs[e->seq].collecting = true;
	pthread_mutex_unlock(&c->lock);
	t_ok(pthread_create(&e->thread, NULL, engine_extend, e));
	wait_extend_waits(c, waits);
}

/* Let go of the socket; the engine's extend succeeds with the revocation
 * applied (its 5 blocks backed), and the round ends as every round. */
static void engine_finish(struct engine *e, const uint64_t *h)
{
	pthread_mutex_unlock(&e->c->sock_lock);
	t_ok(pthread_join(e->thread, NULL));
	t_ok(e->err);
	check_republish_close(e->c, e->r, e->seq, e->old, 5, h);
}

/*
 * The socket's extend takes the socket while the thread's parked extend
 * waits for its reply without it (extend_collect(), q->collecting), then
 * waits for the collect in kc_fetch(); the thread's reply keeps fresh
 * pages for the revoked blocks meanwhile.
 */
static void collect_round(struct kvmm_conn *c, struct kvmm_region *r)
{
	const uint64_t h[1] = { 0x5eed0c01 };
	struct engine e;

	/* the thread's extend answered KVMM_EXTEND_REPLY_PENDING: it marks
	 * the sequence collecting and lets go of the socket to wait */
	engine_start(&e, c, r, true);
	pthread_mutex_unlock(&c->sock_lock);
	/* the engine takes the socket, finds nothing kept and waits for the
	 * collect, letting go of the socket again */
	wait_engine_collects(c, &e);
	pthread_mutex_lock(&c->sock_lock);
	/* the thread's reply comes: kept for the revoked blocks, then the
	 * collect ends (kc_fetch() clears collecting once it mapped) */
	pthread_mutex_lock(&c->lock);
	r->seqs[e.seq].collecting = false;
	pthread_mutex_unlock(&c->lock);
	thread_fetch(r, e.seq, 3, true);
	t_assert_eq(c->nr_deferred, 2);
	pthread_mutex_lock(&c->lock);
	pthread_cond_broadcast(&c->collect_cond);
	pthread_mutex_unlock(&c->lock);
	engine_finish(&e, h);
}

/* An unshare of a read-only block (a prefix open's) after the thread's
 * fetch backed it again: the block is revoked, not the sequence's own. */
static void unshare_round(struct kvmm_conn *c, struct kvmm_region *r)
{
	const uint64_t h[1] = { 0x5eed0d01 };
	struct kvmm_stats ks = { .size = sizeof(ks) };
	uint32_t old[PPB], wseq, seq, nb = 0;
	unsigned char *k0;

	t_ok(kvmm_get_stats(c, &ks));
	t_ok(kvmm_seq_open(r, &wseq));
	t_ok(kvmm_seq_extend(r, wseq, TPB));
	k0 = (unsigned char *)(uintptr_t)kvmm_seq_k_ptr(r, wseq, 0);
	memset(k0, 0x44, PAGE);
	t_assert_eq(kvmm_block_publish(r, wseq, 0, 1, 0, h), 1);
	t_ok(kvmm_seq_open_prefix(r, h, 1, &seq, &nb));
	t_assert_eq(nb, 1);
	t_ok(kvmm_seq_truncate(r, seq, 13)); /* into the shared block */
	t_assert_eq(kvmm_seq_block_readonly(r, seq, 0), 1);
	t_assert_eq(kvmm_seq_block_pages(r, seq, 0, old, PPB), PPB);
	t_ok(ar_revoke(d.sock, ks.session_id, r->id, seq, 0));
	thread_fetch(r, seq, 2, false);
	t_assert_eq(c->nr_deferred, 1);
	t_assert_eq(kvmm_seq_block_unshare(r, seq, 0), -ENODATA);
	t_assert_eq(kvmm_seq_block_readonly(r, seq, 0), 1);
	/* the cached block's bytes are untouched */
	k0 = (unsigned char *)(uintptr_t)kvmm_seq_k_ptr(r, seq, 0);
	t_assert_eq(k0[0], 0x44);
	/* libkvmm's extend: the revocation applied, the kept pages mapped */
	t_ok(kvmm_seq_extend(r, seq, TPB + 1));
	check_applied(c, r, seq, old, 2);
	t_assert_eq(kvmm_seq_block_readonly(r, seq, 0), 0);
	t_ok(kvmm_seq_close(r, seq));
	t_ok(kvmm_seq_close(r, wseq));
}

/* The socket's extend waits for the socket while the thread fetches. */
static void socket_round(struct kvmm_conn *c, struct kvmm_region *r)
{
	const uint64_t h[1] = { 0x5eed0b01 };
	struct engine e;

	engine_start(&e, c, r, false);
	thread_fetch(r, e.seq, 3, true);
	t_assert_eq(c->nr_deferred, 2);
	engine_finish(&e, h);
}

int main(void)
{
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.name = "revmaprace",
					.map_ahead_set = 1,
					.map_ahead_blocks = 0 };
	struct kvmm_region_opts ro = tr_small_region;
	struct kvmm_status_reply st;
	struct kvmm_conn *c;
	struct kvmm_region *r;

	td_start_ok(&d, NULL);
	co.socket_path = d.sock;
	t_ok(kvmm_connect(&co, &c));
	t_ok(kvmm_region_create(c, &ro, &r));
	ring_round(c, r);
	socket_round(c, r);
	collect_round(c, r);
	unshare_round(c, r);
	t_assert_eq(pc_held(c), 0);
	kvmm_disconnect(c);
	/* the 2 cached blocks keep their pages; nothing else is held */
	t_ok(td_wait_sessions(&d, 1, 5000, &st));
	t_assert_eq(st.pages_revoking, 0);
	t_assert_eq(st.pages_mapped, 0);
	td_stop_ok(&d);
	return T_PASS;
}
