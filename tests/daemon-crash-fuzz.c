// SPDX-License-Identifier: MIT
/*
 * timeout: 180
 * kvmmd killed at random and restarted, round after round on one NVMe
 * tier file, must never serve a wrong byte nor bring back a block an
 * answered cache-drop of the NVMe tier covered (Documentation/tiers.md,
 * "Restart recovery", "Drop marks", "Not done / limits": a crash may lose
 * blocks, a cache miss, and nothing else).  Each round:
 *   1. kvmmd starts (host backend, 3 GPU blocks, 2 MiB of host memory: 6
 *      host slots, 16 NVMe slots, so blocks reach NVMe within the first
 *      100 ms) on the file the rounds before left; it must start, every
 *      time (else the test fails with its log);
 *   2. the check after the restart (below), on what every round before
 *      did;
 *   3. CF_CLIENTS client processes (as root, each of a uid of its own,
 *      CF_UID_BASE + i, with a third of the chains: tenants a --uid drop
 *      tells apart) publish and open chains of blocks whose bytes are a
 *      function of their hash alone (tests/daemon-crash-fuzz/client.c),
 *      every block they open checked word for word; an operator process
 *      drops every 30-300 ms (every tier, --tier nvme/gpu/host, --uid
 *      of a client or of nobody; over the admin call or kvmmctl) and
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
 * of the CF_HASHES hashes is opened alone, by a process of its chain's
 * uid; a block found must hold its hash's bytes, word for word.  A drop
 * of every tier (all tenants', or a client's uid: its chains) answered
 * covers each of its hashes whose every publish was answered before the
 * drop was sent: such a block comes back only if that drop kept it (in
 * use, pinned, busy), so at most the drop's kept count of them may be
 * found, of those no client held at most its busy and pinned count, and
 * none when it kept none.
 * Printed per round: the kill time, what kvmmd recovered, the blocks
 * found (all byte-identical), the covered hashes absent and back.
 *
 *   KVMM_CRASH_FUZZ_SEED=7 KVMM_CRASH_FUZZ_ROUNDS=50 build/tests/daemon-crash-fuzz
 *
 * reruns it longer (defaults: seed 1, 16 rounds).  Odd seeds run kvmmd
 * with --cache-scope uid, even ones in the shared scope.  Skips (77)
 * where the NVMe tier cannot run (no O_DIRECT there).
 */
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "tests/cache-drop-common.h"
#include "tests/daemon-crash-fuzz/crash.h"
#include "tests/lib/nvme_layout.h"
#include "tests/lib/nvme_probe.h"

#define CF_NVME_SLOTS 16
#define CF_BLOCK_BYTES (CC_PPB * CC_PAGE)

/* What the run found, over its rounds. */
struct cf_totals {
	uint64_t recovered, found, covered_absent, covered_back;
	uint64_t drops_checked, drops_exact;
	uint64_t kept_in_use, kept_busy; /* of the covering drops */
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

static void start_daemon(struct td_daemon *d, const struct cf_shared *sh,
			 const char *nvme, uint64_t seed, uint32_t round)
{
	char nvme_size[NT_SIZE_ARG_LEN];
	const char *argv[] = { "--cache-block-pages", "4", "--cache-gpu-blocks",
			       "3", "--host-mem", "2M", "--nvme-path", nvme,
			       "--nvme-size",
			       nt_size_arg(nvme_size, sizeof(nvme_size),
					   CF_NVME_SLOTS, CF_BLOCK_BYTES),
			       "--nvme-save-on-stop", "0", "--cache-scope",
			       seed & 1 ? "uid" : "shared",
			       /* the clients' uids reach the socket */
			       sh->uids ? "--socket-mode" : NULL, "0666",
			       NULL };

	if (round & 1)
		setenv("KVMMD_TEST_MIGRATE_FAIL", "nvme-invalidate:1+", 1);
	td_start_ok(d, argv);
	unsetenv("KVMMD_TEST_MIGRATE_FAIL");
	/* mkdtemp made it 0700 */
	if (sh->uids)
		t_ok(chmod(d->dir, 0711));
}

/* Whether drop d is one the check holds to: of every tier, and of
 * every tenant or of a client's. */
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

/* Whether drop d covers every block of hash i published before it. */
static bool drop_covers(const struct cf_shared *sh, const struct cf_drop *d,
			uint32_t i)
{
	return drop_checked(sh, d) &&
	       (!(d->flags & KVMM_CACHE_DROP_F_TENANT) ||
		d->tenant == cf_chain_uid(sh, i / CF_CHAIN_BLOCKS));
}

static uint64_t drop_kept(const struct cf_drop *d)
{
	return d->rep.kept[0] + d->rep.kept[1] + d->rep.kept[2];
}

/* Hash i opened alone by the client c: whether it was found; its bytes
 * must be the hash's. */
static bool check_open(struct cc *c, uint32_t i)
{
	uint64_t h = cf_hash(i / CF_CHAIN_BLOCKS, i % CF_CHAIN_BLOCKS);
	struct kvmm_prefix_open_reply rep;
	uint32_t ids[CC_PPB];

	cc_prefix(c, &h, 1, &rep, ids);
	for (uint32_t p = 0; p < rep.nr_blocks * CC_PPB; p++) {
		int w = cf_first_bad(c->map[ids[p]], h, p);

		if (w >= 0)
			t_fail("after the restart, hash %#llx page %u word %d: not its bytes (from gpu %u host %u nvme %u)",
			       (unsigned long long)h, p, w, rep.from_gpu,
			       rep.from_host, rep.from_nvme);
	}
	cc_seq_close(c, rep.seq_id, ids, rep.nr_blocks * CC_PPB);
	return rep.nr_blocks == 1;
}

/*
 * The restart check's readers: a process of each client's uid (one of
 * the test's when the clients share it) opens every hash of that uid's
 * chains, into sh->found[].  A wrong byte fails the reader, and the
 * test with it.
 */
static void read_all(const char *sock, struct cf_shared *sh)
{
	uint32_t readers = sh->uids ? CF_CLIENTS : 1;

	for (uint32_t r = 0; r < readers; r++) {
		pid_t p = cf_fork();

		t_assert(p >= 0);
		if (p == 0) {
			struct cc c;

			if (sh->uids)
				cu_become(CF_UID_BASE + r, CF_UID_BASE + r);
			cc_connect(&c, sock);
			cc_region(&c);
			for (uint32_t i = 0; i < CF_HASHES; i++)
				if (!sh->uids ||
				    i / CF_CHAIN_BLOCKS % CF_CLIENTS == r)
					sh->found[i] = check_open(&c, i);
			cc_disconnect(&c);
			_exit(0);
		}
		if (cc_wait_child(p))
			t_fail("the restart check's reader %u failed", r);
	}
}

/* The covered hashes found after the restart, per drop: all of them,
 * and those no client held while the drop ran. */
struct cf_back {
	uint32_t all[CF_MAX_DROPS], unheld[CF_MAX_DROPS];
};

/*
 * Drop j covers hash i, found after the restart: it must have kept it.
 * A drop keeps a block a sequence maps (the clients' holds), one a pin
 * keeps (none here) or one a copy or a restore of is in flight (busy);
 * so at most its kept count of covered hashes come back, and of those
 * no client held, at most its pinned and busy ones.
 */
static void check_back(const struct cf_shared *sh, struct cf_back *bk,
		       uint32_t j, uint32_t i, uint32_t round)
{
	const struct cf_drop *d = &sh->drops[j];
	bool held = cf_drop_held(d, i);
	uint64_t kept = drop_kept(d);

	bk->all[j]++;
	bk->unheld[j] += !held;
	if (bk->all[j] <= kept &&
	    bk->unheld[j] <= d->rep.kept_busy + d->rep.kept_pinned)
		return;
	t_fail("after round %u: hash %#llx is back (%s while the drop ran), published (last answered at %llu us) before a drop of every block sent at %llu us in round %u and answered %llu us later, which kept %llu (in use %llu, pinned %llu, busy %llu; dropped %llu/%llu/%llu, %llu invalidations failed): %u covered hashes back, %u of them not held",
	       round,
	       (unsigned long long)cf_hash(i / CF_CHAIN_BLOCKS,
					   i % CF_CHAIN_BLOCKS),
	       held ? "held by a client" : "no client held it",
	       (unsigned long long)sh->h[i].last_end_us,
	       (unsigned long long)d->sent_us, d->round,
	       (unsigned long long)(d->acked_us - d->sent_us),
	       (unsigned long long)kept, (unsigned long long)d->rep.kept_in_use,
	       (unsigned long long)d->rep.kept_pinned,
	       (unsigned long long)d->rep.kept_busy,
	       (unsigned long long)d->rep.dropped[0],
	       (unsigned long long)d->rep.dropped[1],
	       (unsigned long long)d->rep.dropped[2],
	       (unsigned long long)d->rep.nvme_invalidate_failures, bk->all[j],
	       bk->unheld[j]);
}

/*
 * The check after a restart: every hash opened (byte-identical when
 * found), and no covering drop with more of its covered hashes back than
 * it kept (check_back()).  Adds to t; prints the line of the round that
 * ended in the crash (round - 1).
 */
static void check_restart(const char *sock, struct cf_shared *sh,
			  uint32_t round, struct cf_totals *t)
{
	static struct cf_back bk;
	uint64_t recovered, found = 0, absent = 0, back_any = 0;
	uint32_t nd = sh->ndrops, checked = 0;

	for (uint32_t j = 0; j < nd; j++)
		checked += drop_checked(sh, &sh->drops[j]);
	recovered = cd_recovered(sock);
	memset(&bk, 0, sizeof(bk));
	read_all(sock, sh);
	for (uint32_t i = 0; i < CF_HASHES; i++) {
		const struct cf_hash_rec *rec = &sh->h[i];
		bool is = sh->found[i], covered = false;

		found += is;
		for (uint32_t j = 0; j < nd; j++) {
			const struct cf_drop *d = &sh->drops[j];

			if (!drop_covers(sh, d, i) || !rec->last_end_us ||
			    rec->last_end_us >= d->sent_us)
				continue;
			covered = true;
			if (is)
				check_back(sh, &bk, j, i, round - 1);
		}
		absent += covered && !is;
		back_any += covered && is;
	}
	printf("round %u, the restart: recovered %llu, found %llu (byte-identical); covered by %u drops: %llu absent, %llu back (kept)\n",
	       round - 1, (unsigned long long)recovered,
	       (unsigned long long)found, checked, (unsigned long long)absent,
	       (unsigned long long)back_any);
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
 * (ms after the clients started). */
static uint64_t round_run(struct td_daemon *d, struct cf_shared *sh,
			  uint64_t seed, uint32_t round, uint64_t *rs)
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
	usleep((useconds_t)(kill_ms * 1000));
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
	td_stop(d);
	/* a publish whose answer was not read may have been done by the
	 * killed kvmmd at any time before it died */
	for (uint32_t i = 0; i < CF_HASHES; i++) {
		if (sh->h[i].pending) {
			sh->h[i].last_end_us = kill_us;
			sh->h[i].pending = 0;
		}
		sh->h[i].holders = 0;
	}
	return kill_ms;
}

int main(void)
{
	uint64_t seed = env_u64("KVMM_CRASH_FUZZ_SEED", 1);
	uint64_t rounds = env_u64("KVMM_CRASH_FUZZ_ROUNDS", 16);
	uint64_t rs = seed;
	struct cf_totals t = { 0 };
	struct cf_shared *sh;
	struct td_daemon d;
	char nvme[256];

	printf("seed %llu, %llu rounds\n", (unsigned long long)seed,
	       (unsigned long long)rounds);
	if (!rounds)
		t_fail("KVMM_CRASH_FUZZ_ROUNDS=0: no round to run");
	cc_nvme_path(nvme, sizeof(nvme), "crash-fuzz");
	t_nvme_require(nvme);
	unlink(nvme);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	t_assert(sh != MAP_FAILED);
	memset(sh, 0, sizeof(*sh));
	sh->uid = geteuid();
	/* tenants to tell apart: clients of their own uids */
	sh->uids = sh->uid == 0;
	printf("clients: %s\n", sh->uids ?
					"uids 61400-61402, a chain set each" :
					"all of the test's uid (not root)");
	for (uint32_t r = 0; r <= rounds; r++) {
		start_daemon(&d, sh, nvme, seed, r);
		if (r)
			check_restart(d.sock, sh, r, &t);
		if (r == rounds)
			break;
		round_run(&d, sh, seed, r, &rs);
	}
	for (uint32_t j = 0; j < sh->ndrops; j++) {
		if (!drop_checked(sh, &sh->drops[j]))
			continue;
		t.drops_checked++;
		t.drops_exact += !drop_kept(&sh->drops[j]);
		t.kept_in_use += sh->drops[j].rep.kept_in_use;
		t.kept_busy += sh->drops[j].rep.kept_busy;
	}
	cc_stop(&d);
	unlink(nvme);
	printf("seed %llu: %llu rounds; %llu opens, %llu blocks checked, %llu publishes (%llu blocks new); %u drops answered, %llu covering every block (%llu kept none; kept in use %llu, busy %llu); after the restarts %llu recovered, %llu found byte-identical, %llu covered and absent, %llu covered and back (kept)\n",
	       (unsigned long long)seed, (unsigned long long)rounds,
	       (unsigned long long)sh->opens,
	       (unsigned long long)sh->blocks_checked,
	       (unsigned long long)sh->publishes,
	       (unsigned long long)sh->blocks_published, sh->ndrops,
	       (unsigned long long)t.drops_checked,
	       (unsigned long long)t.drops_exact,
	       (unsigned long long)t.kept_in_use,
	       (unsigned long long)t.kept_busy, (unsigned long long)t.recovered,
	       (unsigned long long)t.found,
	       (unsigned long long)t.covered_absent,
	       (unsigned long long)t.covered_back);
	/* a run that checked nothing is no test */
	t_assert(t.found > 0);
	return 0;
}
