// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * A stateful, randomized fuzz of a real kvmmd: small tiers (a GPU pool of
 * FZ_POOL_BLOCKS blocks with 8 kept for the cache, a host tier of a few
 * slots, an NVMe file) so demotion, restore and eviction never stop, and
 * FZ_CLIENTS libkvmm client processes at a time, each choosing its
 * operations from a PRNG seeded by KVMM_FUZZ_SEED (default 1): sequences
 * opened fresh or on a cached prefix (plain, with actions,
 * KVMM_PREFIX_OPEN_SEGMENTS, KVMM_PREFIX_OPEN_EARLY with work done before
 * kvmm_seq_wait_ready), extended, truncated, closed, published; pins
 * (plain, TTL, demotable, priority) and unpins; steps; what a router
 * asks (ABI 1.19, tests/daemon-fuzz/router.c): kvmm_prefix_query() of a
 * chain or of random hashes followed by a prefix open of it, and
 * kvmm_block_pin_many() of chain blocks, random hashes and hash 0, each
 * result checked.  A client ends with
 * BYE, exits without it, or is SIGKILLed by the parent mid-work; a new one
 * takes its place until KVMM_FUZZ_SECONDS (default 10) have passed.
 *
 * The bytes of a block are a function of its hash alone (fz_page_fill()),
 * so every block a prefix open hands out as shared or reloaded must hold
 * exactly those bytes, and so must every block of an open sequence at any
 * time (the client writes its own and RECOMPUTE blocks, as an engine
 * would, and checks them again later).  Any other byte fails the test with
 * the seed, the hash, the block and where it came from.  A plain pin must
 * still be there when its client unpins it.
 *
 * Four phases, each on a daemon of its own (main() says why each is
 * set up so): 1, --restore-mode plan, no fault, an NVMe tier that never
 * fills: no migration, reload or checksum may fail, nothing is dropped
 * from NVMe; 2, a restart on phase 1's NVMe file (at least the blocks it
 * left there are recovered), --restore-mode reload and
 * KVMMD_TEST_MIGRATE_FAIL failing one job of each kind at seed-chosen
 * points: no more migrations fail than were made to; 3, a small NVMe tier
 * that is always full: no migration, reload or checksum may fail (blocks
 * are dropped from NVMe, as the policy says), and (unless
 * KVMM_FUZZ_LIMITS=0) the parent keeps changing the clients' tenant limit meanwhile (at
 * least one block must move for it); 4, the clients' uid under --quota
 * with every client mapping 1-2 blocks ahead, so that extends and
 * prefix opens short of it ask the others for their blocks ahead
 * (ADMIN_STATUS must count lend_requests and lend_blocks), and (unless
 * KVMM_FUZZ_REVOKES=0; see main()) the parent meanwhile revokes
 * random blocks of the clients' open sequences
 * (ADMIN_REVOKE) every 20-120 ms: a publish racing one answers 0 or
 * -ESTALE (ABI 1.20), never -EINVAL, and a client takes the length
 * libkvmm gives after the revocation applied, never a longer one.
 * After each phase: kvmmd counted at least the prefix queries and
 * pin-many calls and pins the clients made (ADMIN_STATUS, ABI 1.20), no
 * tier holds more than its capacity (also checked while the clients run),
 * the daemon is idle but for its cached GPU blocks (nothing mapped,
 * revoking, quarantined or pinned, no sequence or client session), a
 * last reader finds every cached chain intact, and kvmmd
 * stops cleanly.  Odd seeds (the default 1 among them) run every phase
 * with --cache-scope uid, even ones in the shared scope: the clients are
 * one uid, so the same invariants hold, and phase 2 recovers blocks
 * named under the key phase 1's file kept.
 *
 *   KVMM_FUZZ_SEED=7 KVMM_FUZZ_SECONDS=60 build/tests/daemon-fuzz
 *
 * reruns one seed for longer (KVMM_FUZZ_TRACE=1: every client operation
 * on stderr); the operations a client does are a function of the seed
 * and its number, their interleaving is not.
 *
 * This file is the parent (the phases, the daemons, the checks between
 * and after the clients); tests/daemon-fuzz/client.c is a client process
 * (its operations and byte checks), tests/daemon-fuzz/fuzz.h what the
 * two share.
 */
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "tests/daemon-fuzz/fuzz.h"
#include "tests/lib/admin_revoke.h"
#include "tests/lib/daemon.h"
#include "tests/lib/nvme_probe.h"

#define FZ_CLIENTS 4
#define FZ_POOL_BLOCKS 64
/* NVMe slots: more than the chains' 72 distinct blocks, or a few */
#define FZ_NVME_ALL 96
#define FZ_NVME_SMALL 24
#define FZ_SLOT (4096 + CC_PPB * CC_PAGE) /* NVMe slot stride */
/* phase 4's --quota: the 4 clients' 3 sequences of up to 8 blocks and
 * their blocks ahead would take more than 3 times as many */
#define FZ_QUOTA_BLOCKS 28

static const char *const op_names[OP_COUNT] = {
	"open",	    "prefix", "prefix-segments", "prefix-early", "extend",
	"truncate", "close",  "publish",	 "verify",	 "pin",
	"unpin",    "step",   "query",		 "pin-many",
};

/* ---- the parent ----------------------------------------------------- */

struct fz_child {
	pid_t pid;
	uint64_t kill_at; /* 0: let it end */
};

/* No tier above its capacity, no more pool pages than the pool has. */
static void fz_check_caps(const struct fz_phase *ph,
			  const struct kvmm_tier_stats_reply *ts,
			  const struct kvmm_status_reply *st)
{
	for (int t = 0; t < 3; t++)
		if (ts->tiers[t].used_blocks > ts->tiers[t].capacity_blocks)
			t_fail("seed %llu phase %d: tier %d holds %llu blocks, capacity %llu",
			       (unsigned long long)ph->seed, ph->num, t,
			       (unsigned long long)ts->tiers[t].used_blocks,
			       (unsigned long long)ts->tiers[t].capacity_blocks);
	if (st->pages_allocated > st->pages_total)
		t_fail("seed %llu phase %d: %llu pages allocated of %llu",
		       (unsigned long long)ph->seed, ph->num,
		       (unsigned long long)st->pages_allocated,
		       (unsigned long long)st->pages_total);
}

/* A child's end: 0 from a client that ended by itself, SIGKILL from one
 * the parent killed; anything else fails the phase. */
static void fz_reap(const struct fz_phase *ph, struct fz_child *ch, int st,
		    struct td_daemon *d)
{
	bool ok = WIFEXITED(st) ? !WEXITSTATUS(st) :
				  ch->kill_at && WIFSIGNALED(st) &&
					  WTERMSIG(st) == SIGKILL;

	if (!ok) {
		td_dump_log(d);
		t_fail("seed %llu phase %d: client pid %d ended with %s %d (see above)",
		       (unsigned long long)ph->seed, ph->num, (int)ch->pid,
		       WIFEXITED(st) ? "status" : "signal",
		       WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	}
	ch->pid = 0;
}

/* Run clients until the deadline, FZ_CLIENTS at a time; check the tiers'
 * capacities while they run. */
/*
 * A random limit for the clients' tenant (their uid; 0 in a tier: none
 * there): blocks move down for it while the clients work, and every
 * invariant of the phase must still hold.
 */
static void fz_churn_limit(struct fz_phase *ph, uint64_t *rng)
{
	struct kvmm_admin_tenant_limit a = {
		.size = sizeof(a),
		.id = (uint32_t)getuid(),
		.limit_blocks = { fz_below(rng, 9), fz_below(rng, 7),
				  fz_below(rng, FZ_NVME_SMALL + 1) },
	};
	struct kvmm_conn *c;

	t_ok(kc_connect_admin(ph->sock, &c));
	t_ok(kc_request(c, KVMM_CMD_ADMIN_SET_TENANT_LIMIT, &a, sizeof(a), NULL,
			0, NULL));
	kvmm_disconnect(c);
	ph->limit_sets++;
}

/* The clients' tenant's blocks moved for its limits so far. */
static uint64_t fz_limit_moves(const struct fz_phase *ph)
{
	struct kvmm_tenants_reply *r = calloc(1, KVMM_MSG_MAX);
	struct kvmm_conn *c;
	uint64_t moves = 0;
	size_t len = 0;

	t_assert(r);
	t_ok(kc_connect_admin(ph->sock, &c));
	t_ok(kc_request(c, KVMM_CMD_ADMIN_TENANTS, NULL, 0, r, KVMM_MSG_MAX,
			&len));
	kvmm_disconnect(c);
	for (uint32_t i = 0; i < r->nr; i++)
		if (r->tenants[i].id == (uint32_t)getuid())
			moves = r->tenants[i].limit_moves;
	free(r);
	return moves;
}

/*
 * Revoke blocks of one open sequence of the clients (ADMIN_SESSIONS
 * lists them), from a random block on (ADMIN_REVOKE, as kvmmctl revoke
 * sends it; -EAGAIN while it posts a long one in pieces).  The
 * sequence may close or its client end meanwhile, and a block past its
 * length has nothing to take: kvmmd's refusals are counted, not
 * asserted on; the phase asserts that some were taken.
 */
static void fz_revoke(struct fz_phase *ph, uint64_t *rng)
{
	static char buf[KVMM_MSG_MAX];
	struct kvmm_sessions_reply *rep = (void *)buf;
	const struct kvmm_sessions_regions *h;
	uint32_t ids[64][3], n = 0, pick, first;
	struct kvmm_conn *admin;
	const char *p;
	size_t len = 0;
	int err, tries = 0;

	t_ok(kc_connect_admin(ph->sock, &admin));
	t_ok(kc_request(admin, KVMM_CMD_ADMIN_SESSIONS, NULL, 0, buf,
			sizeof(buf), &len));
	h = (const void *)(buf + sizeof(*rep) + rep->nr * rep->entry_size);
	p = (const char *)(h + 1);
	for (uint32_t i = 0; i < h->nr; i++) {
		const struct kvmm_region_info *e = (const void *)p;
		const uint32_t *seqs = (const void *)(p + h->entry_size);

		for (uint32_t k = 0; k < e->nr_listed && n < 64; k++, n++) {
			ids[n][0] = e->session_id;
			ids[n][1] = e->region_id;
			ids[n][2] = seqs[k];
		}
		p += KVMM_REGION_INFO_STRIDE(h->entry_size, e->nr_listed);
	}
	if (!n)
		goto out;
	pick = fz_below(rng, n);
	first = fz_below(rng, FZ_CHAIN_BLOCKS);
	do
		err = ar_revoke_on(admin, ids[pick][0], ids[pick][1],
				   ids[pick][2], first);
	while (err == -EAGAIN && ++tries < 100);
	if (fz_tracing)
		fprintf(stderr,
			"[%llu parent] revoke session %u region %u seq %u from block %u: %d\n",
			(unsigned long long)cc_now_ms(), ids[pick][0],
			ids[pick][1], ids[pick][2], first, err);
	fz_add(err ? &ph->cnt->revokes_refused : &ph->cnt->revokes, 1);
out:
	kvmm_disconnect(admin);
}

static void fz_run_clients(struct fz_phase *ph, struct td_daemon *d)
{
	struct fz_child kids[FZ_CLIENTS] = { 0 };
	uint64_t rng = ph->seed ^ ((uint64_t)ph->num << 56) ^ 0x5eedull;
	uint64_t next_check = 0, next_limit = 0, next_revoke = 0;
	int num = 0, alive;
	struct cc cc;

	cc_connect(&cc, ph->sock);
	do {
		uint64_t now = cc_now_ms();

		alive = 0;
		for (int i = 0; i < FZ_CLIENTS; i++) {
			struct fz_child *ch = &kids[i];
			int st;

			if (ch->pid &&
			    waitpid(ch->pid, &st, WNOHANG) == ch->pid)
				fz_reap(ph, ch, st, d);
			if (ch->pid && ch->kill_at && now >= ch->kill_at) {
				kill(ch->pid, SIGKILL);
				t_assert_eq(waitpid(ch->pid, &st, 0), ch->pid);
				if (WIFSIGNALED(st))
					fz_add(&ph->cnt->kills, 1);
				fz_reap(ph, ch, st, d);
			}
			if (!ch->pid && now < ph->deadline_ms) {
				uint32_t ops = 20 + fz_below(&rng, 300);
				int end = (int)fz_below(&rng, 5);

				/* 0-2: BYE, 3: exit without it, 4: killed */
				end = end < 3 ? 0 : end - 2;
				ch->kill_at =
					end == 2 ?
						now + 5 + fz_below(&rng, 400) :
						0;
				fz_add(&ph->cnt->clients, 1);
				if (end < 2)
					fz_add(end ? &ph->cnt->exits :
						     &ph->cnt->byes,
					       1);
				fflush(NULL);
				ch->pid = fork();
				t_assert(ch->pid >= 0);
				if (!ch->pid)
					fz_client_run(ph, num, ops, end);
				num++;
			}
			alive += ch->pid != 0;
		}
		if (now >= next_check) {
			struct kvmm_tier_stats_reply ts;
			struct kvmm_status_reply st;

			cc_tier_stats(&cc, &ts);
			t_ok(td_status(d, &st));
			fz_check_caps(ph, &ts, &st);
			next_check = now + 100;
		}
		if (ph->limit_churn && now >= next_limit &&
		    now < ph->deadline_ms) {
			fz_churn_limit(ph, &rng);
			next_limit = now + 50 + fz_below(&rng, 200);
		}
		if (ph->revokes && now >= next_revoke &&
		    now < ph->deadline_ms) {
			fz_revoke(ph, &rng);
			next_revoke = now + 20 + fz_below(&rng, 100);
		}
		usleep(2000);
	} while (alive);
	cc_disconnect(&cc);
}

/*
 * Once every client is gone: nothing in transit, no tier above capacity,
 * and within 10 s the daemon is idle but for the cached GPU blocks'
 * pages (td_wait_idle() would also want those gone).
 */
static void fz_settle(const struct fz_phase *ph, struct td_daemon *d,
		      struct kvmm_tier_stats_reply *ts)
{
	struct kvmm_status_reply st;
	int i;

	for (i = 0; i < 1000; i++) {
		cc_settled_stats(ph->sock, ts);
		t_ok(td_status(d, &st));
		fz_check_caps(ph, ts, &st);
		if (st.sessions <= 1 && !st.sequences && !st.pages_mapped &&
		    !st.pages_revoking && !st.pages_quarantined && !st.pins &&
		    st.pages_allocated == ts->tiers[0].used_blocks * CC_PPB)
			break;
		usleep(10000);
	}
	if (i == 1000) {
		td_dump_log(d);
		t_fail("seed %llu phase %d: not idle after 10 s: %llu sessions, %llu sequences, pages %llu allocated (cached GPU blocks %llu), %llu mapped, %llu revoking, %llu quarantined, %llu pins",
		       (unsigned long long)ph->seed, ph->num,
		       (unsigned long long)st.sessions,
		       (unsigned long long)st.sequences,
		       (unsigned long long)st.pages_allocated,
		       (unsigned long long)ts->tiers[0].used_blocks,
		       (unsigned long long)st.pages_mapped,
		       (unsigned long long)st.pages_revoking,
		       (unsigned long long)st.pages_quarantined,
		       (unsigned long long)st.pins);
	}
}

/* A last reader: every chain opened whole without actions (every block
 * comes with its bytes) and checked; the cached blocks it found. */
static uint64_t fz_read_all(struct fz_phase *ph)
{
	int fd[2];
	uint64_t found = 0;
	pid_t p;

	t_ok(pipe(fd));
	fflush(NULL);
	p = fork();
	t_assert(p >= 0);
	if (!p) {
		struct kvmm_region_opts ro = cc_region_opts();
		struct fz_client c = { .ph = ph, .num = -1 };
		uint64_t h[FZ_CHAIN_BLOCKS];
		struct fz_seq s = { 0 };
		uint32_t nr;
		uint64_t n = 0;

		c.conn = cc_connect_lib(ph->sock, "fuzz-reader");
		fz_ok(&c, kvmm_region_create(c.conn, &ro, &c.r));
		for (s.chain = 0; s.chain < FZ_CHAINS; s.chain++) {
			fz_chain(s.chain, h);
			fz_ok(&c, kvmm_seq_open_prefix(c.r, h, FZ_CHAIN_BLOCKS,
						       &s.id, &nr));
			s.len = nr * CC_TPB;
			for (uint32_t b = 0; b < nr; b++)
				fz_check(&c, &s, b, FZ_FROM_PREFIX);
			n += nr;
			fz_ok(&c, kvmm_seq_close(c.r, s.id));
		}
		kvmm_disconnect(c.conn);
		t_assert_eq(write(fd[1], &n, sizeof(n)), sizeof(n));
		_exit(0);
	}
	t_assert_eq(cc_wait_child(p), 0);
	t_assert_eq(read(fd[0], &found, sizeof(found)), sizeof(found));
	close(fd[0]);
	close(fd[1]);
	return found;
}

static void fz_print(const struct fz_phase *ph,
		     const struct kvmm_tier_stats_reply *ts, uint64_t found)
{
	const struct fz_counts *n = ph->cnt;

	printf("phase %d: %llu clients (%llu BYE, %llu exit, %llu killed);",
	       ph->num, (unsigned long long)n->clients,
	       (unsigned long long)n->byes, (unsigned long long)n->exits,
	       (unsigned long long)n->kills);
	for (int i = 0; i < OP_COUNT; i++)
		printf(" %s %llu", op_names[i], (unsigned long long)n->ops[i]);
	printf("\n  blocks checked: written %llu, prefix (no actions) %llu, gpu-shared %llu, reloaded-host %llu, reloaded-nvme %llu; recomputed %llu, reloads failed %llu, early opens cut %llu, -ENOMEM %llu, pins missing %llu, over quota %llu\n",
	       (unsigned long long)n->checked[FZ_FROM_CLIENT],
	       (unsigned long long)n->checked[FZ_FROM_PREFIX],
	       (unsigned long long)n->checked[KVMM_BLOCK_GPU_SHARED],
	       (unsigned long long)n->checked[KVMM_BLOCK_RELOADED_HOST],
	       (unsigned long long)n->checked[KVMM_BLOCK_RELOADED_NVME],
	       (unsigned long long)n->recomputed,
	       (unsigned long long)n->reload_failed,
	       (unsigned long long)n->early_cut, (unsigned long long)n->enomem,
	       (unsigned long long)n->pin_missing,
	       (unsigned long long)n->pin_quota);
	printf("  router: queries %llu (random %llu) found %llu blocks, opens after them that found fewer %llu; pin-many %llu pinned %llu; -EDQUOT %llu; revocations %llu (refused %llu), sequences cut %llu, publishes -ESTALE %llu\n",
	       (unsigned long long)n->queries,
	       (unsigned long long)n->query_random,
	       (unsigned long long)n->query_blocks,
	       (unsigned long long)n->query_open_less,
	       (unsigned long long)n->pin_many_calls,
	       (unsigned long long)n->pin_many_pinned,
	       (unsigned long long)n->dquot, (unsigned long long)n->revokes,
	       (unsigned long long)n->revokes_refused,
	       (unsigned long long)n->revoked_seen,
	       (unsigned long long)n->publish_stale);
	printf("  daemon: demotions host %llu nvme %llu, restores host %llu nvme %llu, drops %llu/%llu/%llu, pressure reclaims %llu, held copies %llu, migrations failed %llu, checksum failures %llu, early reload failures %llu, holes %llu, plan recomputes %llu, recovered %llu; the last reader found %llu blocks\n",
	       (unsigned long long)ts->tiers[1].demotions_in,
	       (unsigned long long)ts->tiers[2].demotions_in,
	       (unsigned long long)ts->tiers[1].promotions_out,
	       (unsigned long long)ts->tiers[2].promotions_out,
	       (unsigned long long)ts->tiers[0].drops,
	       (unsigned long long)ts->tiers[1].drops,
	       (unsigned long long)ts->tiers[2].drops,
	       (unsigned long long)ts->pressure_reclaims,
	       (unsigned long long)ts->held_copies,
	       (unsigned long long)ts->migrations_failed,
	       (unsigned long long)ts->checksum_failures,
	       (unsigned long long)ts->early_reload_failures,
	       (unsigned long long)ts->prefix_holes,
	       (unsigned long long)(ts->plan_recomputes_host +
				    ts->plan_recomputes_nvme),
	       (unsigned long long)ts->recovered_blocks,
	       (unsigned long long)found);
	fflush(stdout);
}

/* How a phase's daemon runs, and what the phase may assert. */
struct fz_setup {
	uint32_t nvme_slots;
	const char *restore_mode;
	const char *fail_spec; /* KVMMD_TEST_MIGRATE_FAIL, or NULL */
	unsigned int nfaults; /* entries in it */
	/* no migration, reload or checksum may fail (no fault injected) */
	bool no_fail;
	/* ... and nothing is dropped from NVMe (the tier never fills: see
	 * main()) */
	bool strict;
	/* blocks found on NVMe at start, at least (-1: any; more come back
	 * when freed slots still hold their last block's header) */
	int64_t min_recovered;
	bool limit_churn; /* fz_phase.limit_churn */
	bool revokes; /* fz_phase.revokes */
	/* kvmmd --quota on the clients' uid, in blocks (0: none), and
	 * --revoke-timeout (ms; 0: the default) */
	uint32_t quota_blocks;
	uint32_t revoke_timeout_ms;
	uint64_t ms;
};

/*
 * What kvmmd counted of the clients' router calls (ABI 1.20's
 * ADMIN_STATUS) is at least what they counted (a client killed in a
 * call may have been answered uncounted); with --quota, that the uid's
 * processes lent blocks mapped ahead to each other.
 */
static void fz_check_status(const struct fz_phase *ph,
			    const struct fz_setup *su, struct td_daemon *d)
{
	const struct fz_counts *n = ph->cnt;
	struct kvmm_status_reply st;

	t_ok(td_status(d, &st));
	printf("  kvmmd: prefix queries %llu (%llu hashes, %llu gpu %llu host %llu nvme %llu moving), pin-many %llu (%llu hashes, %llu pins); lend requests %llu, blocks %llu, extends %llu, failures %llu\n",
	       (unsigned long long)st.prefix_queries,
	       (unsigned long long)st.prefix_query_hashes,
	       (unsigned long long)st.prefix_query_gpu,
	       (unsigned long long)st.prefix_query_host,
	       (unsigned long long)st.prefix_query_nvme,
	       (unsigned long long)st.prefix_query_moving,
	       (unsigned long long)st.pin_many_calls,
	       (unsigned long long)st.pin_many_hashes,
	       (unsigned long long)st.pin_many_pinned,
	       (unsigned long long)st.lend_requests,
	       (unsigned long long)st.lend_blocks,
	       (unsigned long long)st.lend_extends,
	       (unsigned long long)st.lend_failures);
	if (st.prefix_queries < n->queries ||
	    st.prefix_query_gpu + st.prefix_query_host + st.prefix_query_nvme +
			    st.prefix_query_moving <
		    n->query_blocks ||
	    st.pin_many_calls < n->pin_many_calls ||
	    st.pin_many_pinned < n->pin_many_pinned)
		t_fail("seed %llu phase %d: kvmmd counted fewer router calls than the clients made (queries %llu < %llu, blocks < %llu, pin-many %llu < %llu, pins %llu < %llu?)",
		       (unsigned long long)ph->seed, ph->num,
		       (unsigned long long)st.prefix_queries,
		       (unsigned long long)n->queries,
		       (unsigned long long)n->query_blocks,
		       (unsigned long long)st.pin_many_calls,
		       (unsigned long long)n->pin_many_calls,
		       (unsigned long long)st.pin_many_pinned,
		       (unsigned long long)n->pin_many_pinned);
	if (su->quota_blocks && (!st.lend_requests || !st.lend_blocks))
		t_fail("seed %llu phase %d: no lending under --quota (%llu requests, %llu blocks)",
		       (unsigned long long)ph->seed, ph->num,
		       (unsigned long long)st.lend_requests,
		       (unsigned long long)st.lend_blocks);
	if (su->revokes && !n->revokes)
		t_fail("seed %llu phase %d: no revocation was taken (%llu refused)",
		       (unsigned long long)ph->seed, ph->num,
		       (unsigned long long)n->revokes_refused);
}

/*
 * One phase on a daemon of its own, on the NVMe file nvme.  Returns the
 * blocks left on the NVMe tier when it stopped.
 */
static uint64_t fz_phase(struct fz_phase *ph, const struct fz_setup *su,
			 const char *nvme)
{
	char pool[32], nvme_size[32], quota[64], rto[32];
	const char *args[20] = { "--gpu-mem",
				 pool,
				 "--cache-gpu-blocks",
				 "8",
				 "--host-mem",
				 "3M",
				 "--nvme-path",
				 nvme,
				 "--nvme-size",
				 nvme_size,
				 "--restore-mode",
				 su->restore_mode,
				 "--cache-scope",
				 ph->scope,
				 NULL };
	int na = 14;
	struct kvmm_tier_stats_reply ts;
	struct td_daemon d;
	uint64_t found;
	int r;

	snprintf(pool, sizeof(pool), "%uK", FZ_POOL_BLOCKS * CC_PPB * 64);
	snprintf(nvme_size, sizeof(nvme_size), "%llu",
		 4096ull + (unsigned long long)su->nvme_slots * FZ_SLOT);
	printf("phase %d: %u NVMe slots, --restore-mode %s, --cache-scope %s, KVMMD_TEST_MIGRATE_FAIL=%s\n",
	       ph->num, su->nvme_slots, su->restore_mode, ph->scope,
	       su->fail_spec ? su->fail_spec : "(unset)");
	ph->strict = su->strict || su->no_fail;
	ph->limit_churn = su->limit_churn;
	ph->revokes = su->revokes;
	ph->quota = su->quota_blocks != 0;
	if (su->quota_blocks) {
		snprintf(quota, sizeof(quota), "%u=%lluK", (unsigned)getuid(),
			 (unsigned long long)su->quota_blocks * CC_PPB *
				 (CC_PAGE / 1024));
		args[na++] = "--quota";
		args[na++] = quota;
		printf("  --quota %s (%u blocks), map-ahead 1-2 blocks a client\n",
		       quota, su->quota_blocks);
	}
	if (su->revoke_timeout_ms) {
		snprintf(rto, sizeof(rto), "%u", su->revoke_timeout_ms);
		args[na++] = "--revoke-timeout";
		args[na++] = rto;
	}
	if (su->revokes)
		printf("  the parent revokes blocks of the clients' sequences every 20-120 ms\n");
	ph->limit_sets = 0;
	if (su->fail_spec)
		setenv("KVMMD_TEST_MIGRATE_FAIL", su->fail_spec, 1);
	r = td_start(&d, args);
	unsetenv("KVMMD_TEST_MIGRATE_FAIL");
	if (r)
		t_fail("kvmmd did not start: %d", r);
	ph->sock = d.sock;
	ph->deadline_ms = cc_now_ms() + su->ms;
	fz_run_clients(ph, &d);
	fz_settle(ph, &d, &ts);
	found = fz_read_all(ph);
	fz_settle(ph, &d, &ts);
	fz_print(ph, &ts, found);
	fz_check_status(ph, su, &d);
	if (ph->limit_churn) {
		uint64_t moves = fz_limit_moves(ph);

		printf("  tenant limits: %llu set while the clients ran, %llu blocks moved for them\n",
		       (unsigned long long)ph->limit_sets,
		       (unsigned long long)moves);
		if (!ph->limit_sets || !moves)
			t_fail("seed %llu phase %d: the limits did nothing (%llu set, %llu moves)",
			       (unsigned long long)ph->seed, ph->num,
			       (unsigned long long)ph->limit_sets,
			       (unsigned long long)moves);
	}
	if ((int64_t)ts.recovered_blocks < su->min_recovered)
		t_fail("seed %llu phase %d: %llu blocks recovered from NVMe, %lld were there at the stop",
		       (unsigned long long)ph->seed, ph->num,
		       (unsigned long long)ts.recovered_blocks,
		       (long long)su->min_recovered);
	if ((su->strict || su->no_fail) &&
	    (ts.migrations_failed || ts.checksum_failures ||
	     ts.early_reload_failures || (su->strict && ts.tiers[2].drops)))
		td_dump_log(&d); /* what failed, and why, before the assert */
	if (su->strict || su->no_fail) {
		t_assert_eq(ts.migrations_failed, 0);
		t_assert_eq(ts.checksum_failures, 0);
		t_assert_eq(ts.early_reload_failures, 0);
		if (su->strict)
			t_assert_eq(ts.tiers[2].drops, 0);
	} else if (su->fail_spec && ts.migrations_failed > su->nfaults) {
		t_fail("seed %llu phase %d: %llu migrations failed, %u made to",
		       (unsigned long long)ph->seed, ph->num,
		       (unsigned long long)ts.migrations_failed, su->nfaults);
	}
	r = td_stop(&d);
	if (r)
		td_dump_log(&d);
	t_assert_eq(r, 0);
	return ts.tiers[2].used_blocks;
}

int main(void)
{
	const char *seed_env = getenv("KVMM_FUZZ_SEED");
	const char *secs_env = getenv("KVMM_FUZZ_SECONDS");
	uint64_t seed = seed_env ? strtoull(seed_env, NULL, 0) : 1;
	/*
	 * Tenant-limit churn in phase 3 (KVMM_FUZZ_LIMITS=0 turns it off):
	 * it found a publish that made a second entry for a hash whose
	 * dropped one was still being written to NVMe (2 runs in about 64
	 * had a restore fail with -ENOENT; fixed in kd_cache_publish()), and
	 * is on by default since 192 runs after the fix passed.
	 */
	const char *limits_env = getenv("KVMM_FUZZ_LIMITS");
	bool limits = !limits_env || strcmp(limits_env, "0");
	/*
	 * Phase 4's revocations (KVMM_FUZZ_REVOKES=0 turns them off): with
	 * them seed 12 at 60 s failed about 1 run in 2 (an extend answered
	 * -ENODATA, cached blocks with other bytes than their hash's) until
	 * libkvmm's extends applied the revocations of blocks the map-ahead
	 * thread kept fresh pages for; since, one run of seed 1 in 6 still
	 * had a block reloaded from NVMe with other bytes.  Stale
	 * revocation entries after a truncate (-ENODATA) and three more
	 * places where kvmmd took a revoked block the thread had backed
	 * again for the client's were fixed on 6 December, but 1 run of
	 * seed 1 in 4 still cached a block with other bytes: an extend
	 * through the socket that waited for the collect of the thread's
	 * parked extend after it had looked for kept pages, fixed the same
	 * day (Documentation/build.md, "daemon-fuzz").  On by default since
	 * seeds 1-5 then passed 15 runs in 15 at 60 s.
	 */
	const char *revokes_env = getenv("KVMM_FUZZ_REVOKES");
	bool revokes = !revokes_env || strcmp(revokes_env, "0");
	uint64_t ms = (secs_env ? strtoull(secs_env, NULL, 0) : 10) * 1000;
	struct fz_phase ph = { .seed = seed,
			       .scope = seed & 1 ? "uid" : "shared" };
	struct fz_setup su;
	char nvme[256], spec[256];
	struct fz_counts *cnt;
	uint64_t rng = seed, on_nvme;

	setvbuf(stdout, NULL, _IOLBF, 0);
	fz_tracing = getenv("KVMM_FUZZ_TRACE") != NULL;
	printf("daemon-fuzz: seed %llu, %llu s (KVMM_FUZZ_SEED, KVMM_FUZZ_SECONDS)%s\n",
	       (unsigned long long)seed, (unsigned long long)ms / 1000,
	       limits ? ", tenant limits changing (KVMM_FUZZ_LIMITS)" : "");
	cc_nvme_path(nvme, sizeof(nvme), "fuzz");
	t_nvme_require(nvme);
	cnt = mmap(NULL, 4 * sizeof(*cnt), PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	t_assert(cnt != MAP_FAILED);

	/*
	 * 1: no fault, an NVMe tier that holds every block of every chain
	 * (it never fills): nothing may fail.
	 */
	su = (struct fz_setup){ .nvme_slots = FZ_NVME_ALL,
				.restore_mode = "plan",
				.strict = true,
				.min_recovered = -1,
				.ms = ms * 3 / 10 };
	ph.num = 1;
	ph.cnt = &cnt[0];
	on_nvme = fz_phase(&ph, &su, nvme);

	/*
	 * 2: restart on phase 1's file (every block it left there is
	 * recovered), every reload a reload, and one job of each kind fails
	 * early on, three kinds once more later.
	 */
	snprintf(
		spec, sizeof(spec),
		"gpu-host:%u,host-nvme:%u,nvme-host:%u,host-gpu:%u,nvme-gpu:%u,gpu-host:%u,host-gpu:%u,nvme-gpu:%u",
		1 + fz_below(&rng, 10), 1 + fz_below(&rng, 10),
		1 + fz_below(&rng, 3), 1 + fz_below(&rng, 10),
		1 + fz_below(&rng, 10), 11 + fz_below(&rng, 50),
		11 + fz_below(&rng, 50), 11 + fz_below(&rng, 50));
	su = (struct fz_setup){ .nvme_slots = FZ_NVME_ALL,
				.restore_mode = "reload",
				.fail_spec = spec,
				.nfaults = 8,
				.min_recovered = (int64_t)on_nvme,
				.ms = ms * 2 / 10 };
	ph.num = 2;
	ph.cnt = &cnt[1];
	fz_phase(&ph, &su, nvme);
	unlink(nvme);

	/*
	 * 3: a fresh NVMe tier of FZ_NVME_SMALL slots, so blocks are dropped
	 * from it all the time, many while their NVMe I/O runs (holding
	 * their slots until it ends).  No fault is injected, so nothing may
	 * fail: a host -> NVMe write that finds every slot held waits for
	 * one to come back (it used to fail with -ENOSPC).  Unless
	 * KVMM_FUZZ_LIMITS=0, the parent meanwhile sets a random tenant limit
	 * on the clients' uid every 50-250 ms (ADMIN_SET_TENANT_LIMIT):
	 * blocks move down for it at once and at every access, under the
	 * same invariants.
	 */
	su = (struct fz_setup){ .nvme_slots = FZ_NVME_SMALL,
				.restore_mode = "plan",
				.no_fail = true,
				.min_recovered = -1,
				/* KVMM_FUZZ_LIMITS (see main()) */
				.limit_churn = limits,
				.ms = ms * 2 / 10 };
	ph.num = 3;
	ph.cnt = &cnt[2];
	fz_phase(&ph, &su, nvme);
	unlink(nvme);

	/*
	 * 4: the uid's --quota of FZ_QUOTA_BLOCKS, below what the clients
	 * open, with every client mapping 1-2 blocks ahead: an extend or a
	 * prefix open short of the quota asks the uid's other processes
	 * for their blocks ahead (KVMM_RQE_F_GIVE_AHEAD, answered by their
	 * map-ahead threads) and the phase fails unless some were lent,
	 * while every byte check holds (a lent block is never one below a
	 * length).  Meanwhile (unless KVMM_FUZZ_REVOKES=0) the parent revokes
	 * random blocks of the clients' sequences: their publishes race it
	 * (-ESTALE, never -EINVAL), their lengths shrink at their
	 * boundaries.  No fault is injected, so no migration may fail.
	 */
	su = (struct fz_setup){ .nvme_slots = FZ_NVME_ALL,
				.restore_mode = "plan",
				.no_fail = true,
				.min_recovered = -1,
				.revokes = revokes,
				.quota_blocks = FZ_QUOTA_BLOCKS,
				.revoke_timeout_ms = 5000,
				.ms = ms - ms * 7 / 10 };
	ph.num = 4;
	ph.cnt = &cnt[3];
	fz_phase(&ph, &su, nvme);
	unlink(nvme);
	printf("daemon-fuzz: seed %llu ok\n", (unsigned long long)seed);
	return 0;
}
