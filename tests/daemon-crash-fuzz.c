// SPDX-License-Identifier: MIT
/*
 * timeout: 180
 * kvmmd killed at random and restarted, round after round on one NVMe
 * tier file, must never serve a wrong byte nor bring back a block an
 * answered cache-drop of the NVMe tier covered (Documentation/tiers.md,
 * "Restart recovery", "Drop marks", "Not done / limits": a crash may lose
 * blocks, a cache miss, and nothing else).  It runs twice, on a file
 * each: with one block size (4 pages) and with several
 * (--cache-block-pages of 2 or 3 of 2, 4 and 6 pages, weights 1-3 drawn
 * from the seed: the file cut in a partition a size by weight, "The NVMe
 * partitions", "Shares by weight"), and the two runs below.  Each round:
 *   1. kvmmd starts (host backend, 3 GPU blocks, 2 MiB of host memory: 6
 *      host slots, 16 NVMe slots, so blocks reach NVMe within the first
 *      100 ms; with several sizes 3 GPU blocks each, 4 MiB and a file
 *      where each partition holds 4 slots at least; --policy-state of
 *      the run's own in TMPDIR, kept with its lock and FILE.nvme-drops
 *      across the run's restarts) on the file the rounds before left;
 *      it must start, every time (else the test fails with its log).
 *      With several sizes, 3 of 8 restarts name the
 *      sizes as before and one of 8 each: the same weights in another
 *      order after a start as before (each size must recover exactly
 *      what it did), other weights (every partition formatted: 0
 *      recovered), tests/daemon-crash-fuzz/restart.c; and straight
 *      after the crash another order, a size removed, added or replaced
 *      then the list as before, or another --nvme-size, each size's
 *      count exactly what a start as before recovers from a copy of
 *      the file, or 0 where the file was formatted (the table of "The
 *      NVMe partitions"), tests/daemon-crash-fuzz/restart_change.c;
 *   2. the check after the restart (below), on what every round before
 *      did;
 *   3. CF_CLIENTS client processes (as root, each of a uid of its own,
 *      CF_UID_BASE + i, with a third of the chains: tenants a --uid drop
 *      tells apart; with a region of each size, drawing one each step)
 *      publish and open chains of blocks whose bytes are a function of
 *      their hash alone (tests/daemon-crash-fuzz/client.c), every block
 *      they open checked word for word; an operator process drops every
 *      30-300 ms (every tier, --tier nvme/gpu/host, --uid of a client or
 *      of nobody, a third of them of one size, --block-pages; over the
 *      admin call or kvmmctl; the reply's sizes exact) and
 *      records each drop answered, with the time it was sent and the
 *      hashes a client may have held meanwhile; on odd rounds every NVMe
 *      header invalidation fails
 *      (KVMMD_TEST_MIGRATE_FAIL=nvme-invalidate:1+), so the drops of
 *      those rounds are kept out of a restart by their superblock mark
 *      alone;
 *   4. 50-1500 ms in (seeded), or in half the rounds at the first drop
 *      of every block answered after that, the clients and the operator
 *      are stopped (they never see kvmmd go: any error they met was a
 *      live one's), kvmmd SIGKILLed, then they are.
 * The check, after each restart and once more after the last round: each
 * of the CF_HASHES hashes is opened alone in a region of each size (the
 * sizes share the hashes, each with bytes of its own), by a process of
 * its chain's uid; a block found must hold its hash's bytes of that size,
 * word for word, and no size have more found than its cache recovered.  A drop of every
 * tier (all tenants', or a client's uid: its chains; every size, or one)
 * answered
 * covers each of its hashes whose every publish was answered before the
 * drop was sent: such a block comes back only if that drop kept it (in
 * use, pinned, busy), so at most the drop's kept count of them may be
 * found (of each size at most its kept count of that size), of those no
 * client held at most its busy and pinned count, and none when it kept
 * none.  A drop answered while the NVMe tier was out (a late round's,
 * below) is held so too: kvmmd kept it in --policy-state's
 * FILE.nvme-drops before it answered and applies it when the tier
 * joins, in this run or after the restart.
 * Each size's found count must equal its recovered count.
 * Two more runs of several sizes: `changed`, whose restarts remove, add
 * or replace a size, change the weights or --nvme-size, and whose rounds
 * then run on the new list (restart_change.c, cf_restart_sizes_kept());
 * and `late`, whose restarts mostly start kvmmd with the NVMe file's
 * directory moved aside, put back while the clients run so that the
 * tier joins late, kvmmd killed before, during or after the join
 * (tests/daemon-crash-fuzz/late.c), one in 8 changing the list straight
 * after the crash (a drop still pending for a size the list no longer
 * names is skipped: its partition is formatted); the one-size run starts
 * late in a quarter of its restarts.  With the default seed and rounds
 * the late run must have a drop answered while the tier was out that
 * covered a hash a restart checked (else that check ran on nothing).
 * Printed per round: the kill time, what kvmmd recovered, the blocks
 * found (all byte-identical), the covered hashes absent and back.
 *
 *   KVMM_CRASH_FUZZ_SEED=7 KVMM_CRASH_FUZZ_ROUNDS=50 build/tests/daemon-crash-fuzz
 *
 * reruns it longer (defaults: seed 1, 12 rounds, split between the four
 * runs; KVMM_CRASH_FUZZ_SIZES=1, =multi, =changed or =late runs one of
 * them, all the rounds).  Odd seeds run kvmmd with --cache-scope uid, even ones in the
 * shared scope.  Skips (77) where the NVMe tier cannot run (no O_DIRECT
 * there).
 */
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "tests/cache-drop-common.h"
#include "tests/daemon-crash-fuzz/crash.h"
#include "tests/lib/nvme_layout.h"
#include "tests/lib/nvme_probe.h"

/* What the run found, over its rounds. */
struct cf_totals {
	uint64_t recovered, found, covered_absent, covered_back;
	uint64_t drops_checked, drops_sized, drops_exact;
	uint64_t kept_in_use, kept_busy; /* of the covering drops */
	/* of them, answered while the NVMe tier was out (late.c): all, and
	 * those a restart check found a hash covered by */
	uint64_t drops_out, drops_out_covering;
};

static uint64_t env_u64(const char *name, uint64_t dflt)
{
	const char *v = getenv(name);
	char *end;
	unsigned long long n;

	if (!v || !*v)
		return dflt;
	errno = 0;
	n = strtoull(v, &end, 10);
	if (errno || *end || v[0] == '-')
		t_fail("%s=%s: not a number", name, v);
	return n;
}

/* Whether drop d is one the check holds to: of every tier, and of
 * every tenant or of a client's; one answered while the NVMe tier was
 * out too (cf_drop.tier_out: kept in --policy-state's FILE.nvme-drops,
 * applied at a join). */
static bool drop_checked(const struct cf_shared *sh, const struct cf_drop *d)
{
	if (d->tiers)
		return false;
	if (!(d->flags & KVMM_CACHE_DROP_F_TENANT))
		return true;
	for (uint32_t k = 0; k < CF_CLIENTS; k++)
		if (d->tenant == cf_chain_uid(sh, k))
			return true;
	return false;
}

/* Whether drop d covers every block of hash i published before it:
 * of every tier, its tenant (or all) and its size (or all). */
static bool drop_covers(const struct cf_shared *sh, const struct cf_drop *d,
			uint32_t i)
{
	return drop_checked(sh, d) &&
	       (!(d->flags & KVMM_CACHE_DROP_F_TENANT) ||
		d->tenant == cf_chain_uid(sh, cf_chain_of(i))) &&
	       (!d->block_pages || d->block_pages == cf_ppb(sh, cf_size_of(i)));
}

static uint64_t drop_kept(const struct cf_drop *d)
{
	return d->rep.kept[0] + d->rep.kept[1] + d->rep.kept[2];
}

/* What drop d kept of blocks of pages a block (its reply's part of that
 * size; operator_check_sizes() saw each size asked listed). */
static uint64_t drop_kept_size(const struct cf_drop *d, uint32_t pages)
{
	for (uint32_t k = 0; k < d->rep.nr_sizes; k++)
		if (d->rep.sizes[k].block_pages == pages)
			return d->rep.sizes[k].kept[0] +
			       d->rep.sizes[k].kept[1] +
			       d->rep.sizes[k].kept[2];
	return 0;
}

/*
 * Hash i opened alone by the client c, whose region is of its size (ppb
 * pages a block): whether it was found; its bytes must be the hash's of
 * that size (every size has the same hashes, with bytes of its own: a
 * block of another size's partition recovered into this size's cache
 * would be wrong bytes here).
 */
static bool check_open(struct cc *c, uint32_t ppb, uint32_t i)
{
	uint64_t h = cf_hash(i);
	struct kvmm_prefix_open_reply rep;
	uint32_t ids[CF_PPB_MAX];

	cc_prefix(c, &h, 1, &rep, ids);
	t_assert_eq(rep.pages_per_block, ppb);
	for (uint32_t p = 0; p < rep.nr_blocks * ppb; p++) {
		int w = cf_first_bad(c->map[ids[p]], cf_key(i, ppb), p);

		if (w >= 0)
			t_fail("after the restart, hash %#llx (a block of %u pages) page %u word %d: not its bytes (from gpu %u host %u nvme %u)",
			       (unsigned long long)h, ppb, p, w, rep.from_gpu,
			       rep.from_host, rep.from_nvme);
	}
	cc_seq_close(c, rep.seq_id, ids, rep.nr_blocks * ppb);
	return rep.nr_blocks == 1;
}

/*
 * The restart check's readers: a process of each client's uid (one of
 * the test's when the clients share it), with a region of each size,
 * opens every hash of that uid's chains in each size's region, into
 * sh->found[].  A wrong byte fails the reader, and the test with it.
 */
static void read_all(const char *sock, struct cf_shared *sh)
{
	uint32_t readers = sh->uids ? CF_CLIENTS : 1;

	for (uint32_t r = 0; r < readers; r++) {
		pid_t p = cf_fork();

		t_assert(p >= 0);
		if (p == 0) {
			static struct cc c[CF_SIZES_MAX];

			if (sh->uids)
				cu_become(CF_UID_BASE + r, CF_UID_BASE + r);
			for (uint32_t s = 0; s < sh->nsizes; s++) {
				cc_connect(&c[s], sock);
				cc_region_sized(&c[s], sh->layers[s], 16, 16);
			}
			for (uint32_t i = 0; i < cf_nhashes(sh); i++) {
				uint32_t own = cf_size_of(i);

				if (sh->uids &&
				    cf_chain_of(i) % CF_CLIENTS != r)
					continue;
				sh->found[i] =
					check_open(&c[own], cf_ppb(sh, own), i);
			}
			for (uint32_t s = 0; s < sh->nsizes; s++)
				cc_disconnect(&c[s]);
			_exit(0);
		}
		if (cc_wait_child(p))
			t_fail("the restart check's reader %u failed", r);
	}
}

/* The covered hashes found after the restart, per drop: all of them,
 * those of each size, and those no client held while the drop ran. */
struct cf_back {
	uint32_t all[CF_MAX_DROPS], unheld[CF_MAX_DROPS];
	uint32_t size[CF_MAX_DROPS][CF_SIZES_MAX];
};

/*
 * Drop j covers hash i, found after the restart: it must have kept it.
 * A drop keeps a block a sequence maps (the clients' holds), one a pin
 * keeps (none here) or one a copy or a restore of is in flight (busy);
 * so at most its kept count of covered hashes come back, of each size
 * at most what its reply says it kept of that size, and of those no
 * client held, at most its pinned and busy ones.
 */
static void check_back(const struct cf_shared *sh, struct cf_back *bk,
		       uint32_t j, uint32_t i, uint32_t round)
{
	const struct cf_drop *d = &sh->drops[j];
	bool held = cf_drop_held(d, i);
	uint32_t s = cf_size_of(i);
	uint64_t kept = drop_kept(d);

	bk->all[j]++;
	bk->unheld[j] += !held;
	bk->size[j][s]++;
	if (bk->all[j] <= kept &&
	    bk->size[j][s] <= drop_kept_size(d, cf_ppb(sh, s)) &&
	    bk->unheld[j] <= d->rep.kept_busy + d->rep.kept_pinned)
		return;
	t_fail("after round %u: hash %#llx (%u pages a block) is back (%s while the drop ran), published (last answered at %llu us) before a drop of every block (of %u pages a block; 0: every size) sent at %llu us in round %u and answered %llu us later, which kept %llu, %llu of that size (in use %llu, pinned %llu, busy %llu; dropped %llu/%llu/%llu, %llu invalidations failed): %u covered hashes back, %u of that size, %u of them not held",
	       round, (unsigned long long)cf_hash(i), cf_ppb(sh, s),
	       held ? "held by a client" : "no client held it",
	       (unsigned long long)sh->h[i].last_end_us, d->block_pages,
	       (unsigned long long)d->sent_us, d->round,
	       (unsigned long long)(d->acked_us - d->sent_us),
	       (unsigned long long)kept,
	       (unsigned long long)drop_kept_size(d, cf_ppb(sh, s)),
	       (unsigned long long)d->rep.kept_in_use,
	       (unsigned long long)d->rep.kept_pinned,
	       (unsigned long long)d->rep.kept_busy,
	       (unsigned long long)d->rep.dropped[0],
	       (unsigned long long)d->rep.dropped[1],
	       (unsigned long long)d->rep.dropped[2],
	       (unsigned long long)d->rep.nvme_invalidate_failures, bk->all[j],
	       bk->size[j][s], bk->unheld[j]);
}

/*
 * The check after a restart: every hash opened (byte-identical when
 * found, in its own size's region alone), no size with more found than
 * its cache recovered (rc: nothing else holds a block after a start),
 * none of a size whose partition the restart formatted (lost: other
 * weights, sizes or --nvme-size),
 * and no covering drop with more of its covered hashes back than it kept
 * (check_back()).  Adds to t and z; prints the line of the round that
 * ended in the crash (round - 1).
 */
static void check_restart(const char *sock, struct cf_shared *sh,
			  struct cf_sizes *z, const struct cf_restart *rc,
			  uint32_t lost, uint32_t round, struct cf_totals *t)
{
	static struct cf_back bk;
	uint64_t recovered = 0, found = 0, absent = 0, back_any = 0;
	uint64_t found_size[CF_SIZES_MAX] = { 0 };
	uint32_t nd = sh->ndrops, checked = 0;

	for (uint32_t j = 0; j < nd; j++)
		checked += drop_checked(sh, &sh->drops[j]);
	memset(&bk, 0, sizeof(bk));
	memset(sh->found, 0, sizeof(sh->found));
	read_all(sock, sh);
	for (uint32_t i = 0; i < cf_nhashes(sh); i++) {
		const struct cf_hash_rec *rec = &sh->h[i];
		bool is = sh->found[i], covered = false;

		found += is;
		found_size[cf_size_of(i)] += is;
		for (uint32_t j = 0; j < nd; j++) {
			const struct cf_drop *d = &sh->drops[j];

			if (!drop_covers(sh, d, i) || !rec->last_end_us ||
			    rec->last_end_us >= d->sent_us)
				continue;
			covered = true;
			sh->drops[j].covered_some = true;
			if (is)
				check_back(sh, &bk, j, i, round - 1);
		}
		absent += covered && !is;
		back_any += covered && is;
	}
	for (uint32_t s = 0; s < z->n; s++) {
		recovered += rc->recovered[s];
		z->recovered[z->pages[s] / 2 - 1] += rc->recovered[s];
		z->found[z->pages[s] / 2 - 1] += found_size[s];
		/* every block recovered is one of the hashes opened, of its
		 * tenant, in its size; nothing drops it before the readers
		 * come (every tier has room for it) */
		if (found_size[s] != rc->recovered[s] ||
		    ((lost >> s & 1) && found_size[s]))
			t_fail("after round %u: %llu blocks of %u pages found, where that size's cache recovered %llu%s",
			       round - 1, (unsigned long long)found_size[s],
			       z->pages[s],
			       (unsigned long long)rc->recovered[s],
			       lost >> s & 1 ?
				       " and its partition was formatted" :
				       "");
	}
	printf("round %u, the restart: recovered %llu, found %llu (byte-identical); covered by %u drops: %llu absent, %llu back (kept)\n",
	       round - 1, (unsigned long long)recovered,
	       (unsigned long long)found, checked, (unsigned long long)absent,
	       (unsigned long long)back_any);
	if (z->n > 1) {
		printf("  by size:");
		for (uint32_t s = 0; s < z->n; s++)
			printf(" %u pages %llu recovered %llu found;",
			       z->pages[s],
			       (unsigned long long)rc->recovered[s],
			       (unsigned long long)found_size[s]);
		printf("\n");
	}
	t->recovered += recovered;
	t->found += found;
	t->covered_absent += absent;
	t->covered_back += back_any;
}

/* A process stopped, then SIGKILLed and reaped: it must not have ended
 * by itself before (a client or the operator that failed). */
static void stop_proc(pid_t pid, const char *what, const struct cf_shared *sh)
{
	int st;

	kill(pid, SIGKILL);
	if (!strcmp(what, "operator"))
		kill(-pid, SIGKILL); /* a kvmmctl it ran */
	t_assert_eq(waitpid(pid, &st, 0), pid);
	if (sh->bad)
		t_fail("%s", sh->bad_msg);
	if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL)
		t_fail("the %s ended by itself (status %#x) before the kill",
		       what, st);
}

/*
 * Wait (2 s at most) until the operator records an answered drop of every
 * block after the n it had: the kill then comes within a few hundred
 * microseconds of its answer, before the clients wrote much over the
 * slots it dropped (in the rounds whose invalidations fail, the mark
 * alone keeps those out of the restart).  Whether one came.
 */
static bool wait_covering_drop(struct cf_shared *sh, uint32_t n)
{
	uint64_t end = cf_now_us() + 2000000;

	while (cf_now_us() < end) {
		uint32_t now = __atomic_load_n(&sh->ndrops, __ATOMIC_ACQUIRE);

		for (; n < now; n++)
			if (drop_checked(sh, &sh->drops[n]))
				return true;
		usleep(100);
	}
	return false;
}

/* One round's work on a started kvmmd, then the crash: its kill time
 * (ms after the clients started).  After a late start (z->late) the
 * NVMe tier's directory comes back while the clients run (late.c). */
static uint64_t round_run(struct td_daemon *d, struct cf_shared *sh,
			  const struct cf_sizes *z, uint64_t seed,
			  uint32_t round, uint64_t *rs)
{
	struct cf_proc p = {
		.sock = d->sock, .sh = sh, .seed = seed, .round = round
	};
	uint64_t kill_ms = 50 + cf_rand(rs) % 1451, start_us, kill_us;
	bool after_drop = cf_rand(rs) & 1, came = false;
	uint32_t ndrops = sh->ndrops;
	pid_t pids[CF_CLIENTS + 1];
	int st;

	start_us = cf_now_us();
	for (int i = 0; i < CF_CLIENTS; i++)
		pids[i] = cf_client_start(&p, i);
	pids[CF_CLIENTS] = cf_operator_start(&p);
	cf_late_sleep(z->late, d->sock, z, kill_ms, rs);
	if (after_drop)
		came = wait_covering_drop(sh, sh->ndrops);
	/* they never see kvmmd go: any error they met was a live one's */
	for (int i = 0; i < CF_CLIENTS; i++)
		kill(pids[i], SIGSTOP);
	kill(-pids[CF_CLIENTS], SIGSTOP); /* the operator and its kvmmctl */
	if (sh->bad)
		t_fail("%s", sh->bad_msg);
	t_ok(kill(d->pid, SIGKILL));
	t_assert_eq(waitpid(d->pid, &st, 0), d->pid);
	kill_us = cf_now_us();
	kill_ms = (kill_us - start_us) / 1000;
	printf("round %u: %u drops answered (%s), killed at %llu ms (%s)\n",
	       round, sh->ndrops - ndrops,
	       round & 1 ? "every header invalidation failing" :
			   "invalidations working",
	       (unsigned long long)kill_ms,
	       !after_drop ? "at random" :
	       came	   ? "right after a drop of every block answered" :
			     "no drop of every block answered in 2 s");
	if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL) {
		td_dump_log(d);
		t_fail("round %u: kvmmd ended by itself (status %#x)", round,
		       st);
	}
	d->pid = 0; /* reaped: td_stop() only removes its directory */
	for (int i = 0; i <= CF_CLIENTS; i++)
		stop_proc(pids[i], i < CF_CLIENTS ? "client" : "operator", sh);
	/* the log, before it goes: where the late join was */
	cf_late_killed(z->late, d, sh, z, ndrops, round);
	td_stop(d);
	/* a publish whose answer was not read may have been done by the
	 * killed kvmmd at any time before it died */
	for (uint32_t i = 0; i < cf_nhashes(sh); i++) {
		if (sh->h[i].pending) {
			sh->h[i].last_end_us = kill_us;
			sh->h[i].pending = 0;
		}
		sh->h[i].holders = 0;
	}
	return kill_ms;
}

static const char *const cf_run_names[] = {
	[CF_RUN_ONE] = "1",
	[CF_RUN_MULTI] = "multi",
	[CF_RUN_CHANGED] = "changed",
	[CF_RUN_LATE] = "late",
};

/* What a run of several sizes did to the sizes and the late starts. */
static void print_run(const struct cf_sizes *z, uint64_t seed)
{
	const struct cf_late *l = z->late;

	if (z->run != CF_RUN_ONE) {
		printf("seed %llu, sizes: %llu restarts as before, %llu in another order after a start as before (%llu blocks recovered again, each on its size), %llu with other weights (%llu blocks a start as before recovered, none after); straight after the crash: %llu in another order (%llu recovered again), %llu with a size removed, %llu added, %llu replaced (%llu lost, %llu kept; %llu of the changes read drops answered while the NVMe tier was out), %llu with another --nvme-size (%llu lost); the rounds ran on %llu removes, %llu adds, %llu replaces and %llu other weights;",
		       (unsigned long long)seed, (unsigned long long)z->same,
		       (unsigned long long)z->swaps,
		       (unsigned long long)z->swapped_back,
		       (unsigned long long)z->reweights,
		       (unsigned long long)z->reweight_lost,
		       (unsigned long long)z->swaps_first,
		       (unsigned long long)z->swapped_first_back,
		       (unsigned long long)z->removes,
		       (unsigned long long)z->adds,
		       (unsigned long long)z->replaces,
		       (unsigned long long)z->change_lost,
		       (unsigned long long)z->replace_kept,
		       (unsigned long long)z->change_pending,
		       (unsigned long long)z->resizes,
		       (unsigned long long)z->resize_lost,
		       (unsigned long long)z->ran_removed,
		       (unsigned long long)z->ran_added,
		       (unsigned long long)z->ran_replaced,
		       (unsigned long long)z->ran_reweighed);
		for (uint32_t c = 0; c < CF_SIZES_MAX; c++)
			printf(" %u pages: %llu recovered, %llu found;",
			       2 * (c + 1), (unsigned long long)z->recovered[c],
			       (unsigned long long)z->found[c]);
		printf("\n");
	}
	if (l)
		printf("seed %llu, late starts: %llu (%llu with the first size's opens failing after the claim); killed %llu times before the directory came back, %llu after it before an attempt, %llu during the join, %llu after it; %llu files untouched, %llu blocks of unjoined partitions recovered exactly again; the joins recovered %llu blocks (%llu joins formatted the file: another key); %llu drops answered before every size was seen joined (%llu kept in FILE.nvme-drops by kvmmd's word; %llu blocks of unjoined partitions left out by them at the next start)\n",
		       (unsigned long long)seed, (unsigned long long)l->starts,
		       (unsigned long long)l->starts_failing,
		       (unsigned long long)l->kills_away,
		       (unsigned long long)l->kills_before,
		       (unsigned long long)l->kills_during,
		       (unsigned long long)l->kills_after,
		       (unsigned long long)l->untouched,
		       (unsigned long long)l->exact_blocks,
		       (unsigned long long)l->join_recovered,
		       (unsigned long long)l->keyed_formats,
		       (unsigned long long)l->drops_out,
		       (unsigned long long)l->drops_kept,
		       (unsigned long long)l->pending_left_out);
}

/*
 * One run of rounds on a file of its own: one block size (with late
 * starts), several (multi), several changed and run on (changed), or
 * several with late starts (late).  Returns after the check of the last
 * restart and a clean stop; prints what it did.
 */
static void run_rounds(struct cf_shared *sh, enum cf_run run, uint64_t seed,
		       uint64_t rounds, bool guard_out)
{
	static const char *const files[] = {
		[CF_RUN_ONE] = "crash-fuzz",
		[CF_RUN_MULTI] = "crash-fuzz-sizes",
		[CF_RUN_CHANGED] = "crash-fuzz-changed",
		[CF_RUN_LATE] = "crash-fuzz-late",
	};
	static const char *const what[] = {
		[CF_RUN_ONE] = "one block size",
		[CF_RUN_MULTI] = "several block sizes",
		[CF_RUN_CHANGED] = "several block sizes, changed and run on",
		[CF_RUN_LATE] = "several block sizes, late NVMe tiers",
	};
	/* the sizes' draws apart from the kills', so that one-size runs
	 * kill where they did before the sizes */
	uint64_t rs = seed, zs = seed * 0x9e37 + 0x51e;
	struct cf_totals t = { 0 };
	struct cf_late late;
	struct cf_restart rc;
	struct cf_sizes z;
	struct td_daemon d;
	char nvme[400];
	uint32_t lost;

	memset(sh, 0, sizeof(*sh));
	sh->uid = geteuid();
	/* a state of the run's own, kept across its restarts */
	snprintf(nvme, sizeof(nvme), "kvmm-crash-fuzz-%s-%d.state",
		 cf_run_names[run], (int)getpid());
	td_tmp_path(nvme, sh->state, sizeof(sh->state));
	cf_state_remove(sh->state);
	/* tenants to tell apart: clients of their own uids */
	sh->uids = sh->uid == 0;
	cf_sizes_init(&z, sh, run, &zs);
	cc_nvme_path(nvme, sizeof(nvme), files[run]);
	unlink(nvme);
	if (run == CF_RUN_ONE || run == CF_RUN_LATE) {
		cf_late_init(&late, nvme, sizeof(nvme), seed & 1);
		z.late = &late;
	}
	printf("%s: seed %llu, %llu rounds; clients: %s\n", what[run],
	       (unsigned long long)seed, (unsigned long long)rounds,
	       sh->uids ? "uids 61400-61402, a chain set each" :
			  "all of the test's uid (not root)");
	if (run != CF_RUN_ONE) {
		printf("sizes (pages:weight, the file's partition order):");
		for (uint32_t k = 0; k < z.n; k++)
			printf(" %u:%u", z.pages[z.part[k]],
			       z.weight[z.part[k]]);
		printf("; --nvme-size %llu, --host-mem %llu\n",
		       (unsigned long long)z.nvme_bytes,
		       (unsigned long long)z.host_bytes);
	}
	for (uint32_t r = 0; r <= rounds; r++) {
		if (!r) {
			cf_start_daemon(&d, sh, &z, nvme, seed, r, true);
		} else {
			if (z.late)
				z.late->last = r == rounds;
			cf_restart(&d, sh, &z, nvme, seed, r, &zs, &rc, &lost);
			check_restart(d.sock, sh, &z, &rc, lost, r, &t);
		}
		if (r == rounds)
			break;
		round_run(&d, sh, &z, seed, r, &rs);
	}
	for (uint32_t j = 0; j < sh->ndrops; j++) {
		if (!drop_checked(sh, &sh->drops[j]))
			continue;
		t.drops_checked++;
		t.drops_sized += sh->drops[j].block_pages != 0;
		t.drops_exact += !drop_kept(&sh->drops[j]);
		t.kept_in_use += sh->drops[j].rep.kept_in_use;
		t.kept_busy += sh->drops[j].rep.kept_busy;
		t.drops_out += sh->drops[j].tier_out;
		t.drops_out_covering += sh->drops[j].tier_out &&
					sh->drops[j].covered_some;
	}
	cc_stop(&d);
	if (z.late)
		cf_late_end(z.late);
	else
		unlink(nvme);
	cf_state_remove(sh->state);
	printf("seed %llu (%s): %llu rounds; %llu opens, %llu blocks checked, %llu publishes (%llu blocks new); %u drops answered, %llu covering every block (%llu of one size; %llu kept none; kept in use %llu, busy %llu; %llu answered while the NVMe tier was out, %llu of them covering a hash a restart checked); after the restarts %llu recovered, %llu found byte-identical, %llu covered and absent, %llu covered and back (kept)\n",
	       (unsigned long long)seed, cf_run_names[run],
	       (unsigned long long)rounds, (unsigned long long)sh->opens,
	       (unsigned long long)sh->blocks_checked,
	       (unsigned long long)sh->publishes,
	       (unsigned long long)sh->blocks_published, sh->ndrops,
	       (unsigned long long)t.drops_checked,
	       (unsigned long long)t.drops_sized,
	       (unsigned long long)t.drops_exact,
	       (unsigned long long)t.kept_in_use,
	       (unsigned long long)t.kept_busy, (unsigned long long)t.drops_out,
	       (unsigned long long)t.drops_out_covering,
	       (unsigned long long)t.recovered, (unsigned long long)t.found,
	       (unsigned long long)t.covered_absent,
	       (unsigned long long)t.covered_back);
	print_run(&z, seed);
	/* a run that checked nothing is no test: a block found; blocks a
	 * copy's start as before recovered that a changed list was held
	 * to format (a short changed run may draw only such restarts
	 * after a kill that followed a drop of every block); or a late
	 * round's file or unjoined partitions held to what they had (a
	 * short late run may end on joins that formatted the file) */
	t_assert(t.found > 0 || z.change_lost > 0 ||
		 (z.late && (z.late->untouched || z.late->exact_blocks)));
	/* the late run's drops answered while the tier was out are held
	 * to: with the default seed and rounds some must have covered a
	 * hash a restart checked (else that check ran on nothing) */
	if (run == CF_RUN_LATE && guard_out && !t.drops_out_covering)
		t_fail("seed %llu (late): none of the %llu drops answered while the NVMe tier was out covered a hash a restart checked",
		       (unsigned long long)seed,
		       (unsigned long long)t.drops_out);
}

int main(void)
{
	uint64_t seed = env_u64("KVMM_CRASH_FUZZ_SEED", 1);
	uint64_t rounds = env_u64("KVMM_CRASH_FUZZ_ROUNDS", 12);
	/* the late run's guard holds at the defaults (checked there) */
	bool guard_out = seed == 1 && rounds == 12;
	const char *sizes = getenv("KVMM_CRASH_FUZZ_SIZES");
	uint32_t runs = 0, nruns = 0;
	struct cf_shared *sh;
	char nvme[256];

	for (uint32_t k = 0; k <= CF_RUN_LATE; k++)
		if (sizes && !strcmp(sizes, cf_run_names[k]))
			runs = 1u << k;
	if (sizes && *sizes && !runs)
		t_fail("KVMM_CRASH_FUZZ_SIZES=%s: 1 (one block size), multi (several), changed (several, changed and run on) or late (several, the NVMe tier joining late), or unset for all four",
		       sizes);
	if (!runs)
		runs = (1u << (CF_RUN_LATE + 1)) - 1;
	if (!rounds)
		t_fail("KVMM_CRASH_FUZZ_ROUNDS=0: no round to run");
	/* all: the rounds split between them (at least 1 each) */
	nruns = (uint32_t)__builtin_popcount(runs);
	rounds = rounds / nruns ? rounds / nruns : 1;
	cc_nvme_path(nvme, sizeof(nvme), "crash-fuzz");
	t_nvme_require(nvme);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	t_assert(sh != MAP_FAILED);
	for (uint32_t k = 0; k <= CF_RUN_LATE; k++)
		if (runs >> k & 1)
			run_rounds(sh, (enum cf_run)k, seed, rounds, guard_out);
	return 0;
}
