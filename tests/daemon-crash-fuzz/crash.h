/* SPDX-License-Identifier: MIT */
/*
 * tests/daemon-crash-fuzz: what the parent (tests/daemon-crash-fuzz.c:
 * rounds, kvmmd started and SIGKILLed, the checks after each restart)
 * and its processes (tests/daemon-crash-fuzz/client.c: the clients that
 * publish and open, the operator that drops) share.  Everything the
 * checks need lives in shared memory, written before and after each
 * request, so a process stopped and killed at any point leaves a record
 * that errs on the safe side (a publish sent and not answered counts as
 * answered when kvmmd died).
 */
#ifndef KVMM_TESTS_DAEMON_CRASH_FUZZ_H
#define KVMM_TESTS_DAEMON_CRASH_FUZZ_H

#include <stdbool.h>
#include <stdint.h>

#include "tests/cache-common.h"
#include "tests/lib/daemon.h"

/* the block sizes a multi-size run names (--cache-block-pages), at most:
 * each size has chains of its own, CF_HASHES hashes */
#define CF_SIZES_MAX 3
#define CF_CHAINS 24
/* the chains a round's clients use: a window that moves each round, so
 * blocks of earlier rounds stay unpublished and their drops checked */
#define CF_ROUND_CHAINS 12
#define CF_CHAIN_BLOCKS 4 /* blocks per chain, the longest sequence */
#define CF_HASHES (CF_CHAINS * CF_CHAIN_BLOCKS)
#define CF_HASHES_MAX (CF_SIZES_MAX * CF_HASHES)
#define CF_PPB_MAX (2 * 3) /* pages a block: 3 layers at most */
#define CF_CLIENTS 3
/* run as root: client i is uid CF_UID_BASE + i (the chains k with
 * k % CF_CLIENTS == i are its), and a --uid drop has tenants to tell
 * apart; CF_UID_NOBODY's drops cover none of them */
#define CF_UID_BASE 61400
#define CF_UID_NOBODY (CF_UID_BASE + 99)
#define CF_MAX_DROPS 4096
#define CF_WORDS (CC_PAGE / 8)

/* One hash's publishes, over every round (times: cf_now_us()). */
struct cf_hash_rec {
	/* the newest publish of it answered, or (kept pending at the
	 * kill) the time its kvmmd was killed: a drop sent after this
	 * came after every publish of the hash */
	uint64_t last_end_us;
	uint32_t pending; /* publishes sent, their answer not read yet */
	uint32_t published; /* answered publishes (any round) */
	/* sequences that may map it: counted before the prefix open is
	 * sent, until the sequence's close is answered (0 again after a
	 * kill); the time of the last such count taken */
	uint32_t holders;
	uint64_t last_acquire_us;
};

/* A drop the operator sent and kvmmd answered. */
struct cf_drop {
	uint64_t sent_us, acked_us;
	uint32_t round;
	uint32_t tiers, flags, tenant;
	uint32_t block_pages; /* one size's cache (--block-pages), or 0 */
	bool via_kvmmctl;
	/* sent before every size's NVMe tier was seen joined (a round
	 * whose start had no tier, late.c): kvmmd kept it in the run's
	 * --policy-state FILE.nvme-drops before it answered, and applies
	 * it at the join, this run's or a later one's, so it is checked as
	 * any drop */
	bool tier_out;
	/* a restart check found a hash it covers (published before it) */
	bool covered_some;
	/* the hashes a client may have held while kvmmd ran it: the drop
	 * may have kept those as in use (its kept_in_use) */
	uint64_t held[(CF_HASHES_MAX + 63) / 64];
	struct kvmm_admin_cache_drop_reply rep;
};

struct cf_shared {
	bool uids; /* clients of CF_UID_BASE + i, or all of uid */
	uid_t uid; /* the test's */
	/* kvmmd's --policy-state: one file a run, in the test's TMPDIR,
	 * kept (with its FILE.lock and FILE.nvme-drops) across the run's
	 * restarts, removed at its end (cf_state_remove()) */
	char state[256];
	/* the block sizes: size s has 2 x layers[s] pages a block and the
	 * hashes [s x CF_HASHES, (s + 1) x CF_HASHES); one size (4 pages)
	 * unless the run is of several */
	uint32_t nsizes;
	uint32_t layers[CF_SIZES_MAX];
	struct cf_hash_rec h[CF_HASHES_MAX];
	uint32_t ndrops; /* entries of drops[] written */
	struct cf_drop drops[CF_MAX_DROPS];
	/* what the clients did (all rounds) */
	uint64_t opens, blocks_checked, publishes, blocks_published;
	/* the check after a restart: whether hash i was found (its
	 * readers are processes of the hashes' uids) */
	uint8_t found[CF_HASHES_MAX];
	/* a wrong byte a client saw: the first one's description */
	uint32_t bad;
	char bad_msg[256];
};

/* What a client or the operator runs with. */
struct cf_proc {
	const char *sock;
	struct cf_shared *sh;
	uint64_t seed;
	uint32_t round;
};

/* Microseconds on the monotonic clock (one clock for every process). */
static inline uint64_t cf_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* splitmix64 */
static inline uint64_t cf_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Hash i's index: size s's block b of chain k, and back. */
static inline uint32_t cf_index(uint32_t s, uint32_t k, uint32_t b)
{
	return s * CF_HASHES + k * CF_CHAIN_BLOCKS + b;
}

static inline uint32_t cf_size_of(uint32_t i)
{
	return i / CF_HASHES;
}

static inline uint32_t cf_chain_of(uint32_t i)
{
	return i % CF_HASHES / CF_CHAIN_BLOCKS;
}

/* The hash of hash index i (never 0): one for every size, since the
 * sizes' hashes never meet (their layouts seed them, "Several block
 * sizes" in Documentation/tiers.md), so each size publishes the same
 * hashes, with bytes of its own (cf_key()). */
static inline uint64_t cf_hash(uint32_t i)
{
	return 0xc5a50000000ULL + (uint64_t)cf_chain_of(i) * 16 +
	       i % CF_CHAIN_BLOCKS + 1;
}

/* What the bytes of hash index i's block (ppb pages a block) are a
 * function of: its hash and its size's pages (2 pages: the hash alone),
 * so that a block of one size served under the hash in another size's
 * region is wrong bytes.  Of the pages, not of the size's index, which
 * a changed run's list moves (adopt_list()). */
static inline uint64_t cf_key(uint32_t i, uint32_t ppb)
{
	return cf_hash(i) + (uint64_t)(ppb - 2) * 0x800;
}

/* The hashes of the run's sizes. */
static inline uint32_t cf_nhashes(const struct cf_shared *sh)
{
	return sh->nsizes * CF_HASHES;
}

/* Pages a block of size s. */
static inline uint32_t cf_ppb(const struct cf_shared *sh, uint32_t s)
{
	return 2 * sh->layers[s];
}

/* The uid whose client publishes chain k: its blocks' tenant. */
static inline uid_t cf_chain_uid(const struct cf_shared *sh, uint32_t k)
{
	return sh->uids ? (uid_t)(CF_UID_BASE + k % CF_CLIENTS) : sh->uid;
}

/* Word w of page p of the block of key (cf_key()): its bytes are a
 * function of its hash and size alone, so every copy of it, in any
 * tier, any round, is one content. */
static inline uint64_t cf_word(uint64_t key, uint32_t p, uint32_t w)
{
	uint64_t s = key * 0x100000001b3ULL + (uint64_t)p * 0x10001 + w;

	return cf_rand(&s);
}

static inline void cf_fill(unsigned char *page, uint64_t key, uint32_t p)
{
	uint64_t *q = (uint64_t *)page;

	for (uint32_t w = 0; w < CF_WORDS; w++)
		q[w] = cf_word(key, p, w);
}

/* The first word of page p that is not the block's: its index, or -1. */
static inline int cf_first_bad(const unsigned char *page, uint64_t key,
			       uint32_t p)
{
	const uint64_t *q = (const uint64_t *)page;

	for (uint32_t w = 0; w < CF_WORDS; w++)
		if (q[w] != cf_word(key, p, w))
			return (int)w;
	return -1;
}

static inline bool cf_drop_held(const struct cf_drop *d, uint32_t i)
{
	return d->held[i / 64] >> (i % 64) & 1;
}

/* fork() with nothing left in this process's stdio buffers: a child
 * that flushes its copy (exit(), freopen()) would print the parent's
 * lines again. */
static inline pid_t cf_fork(void)
{
	fflush(stdout);
	fflush(stderr);
	return fork();
}

/* A client process (client.c), which loops until it is killed: a
 * connection and a region of each size, a chain of one drawn each step. */
pid_t cf_client_start(const struct cf_proc *p, int num);
/* The operator process (client.c): a drop every 30-300 ms (with several
 * sizes, a third of them of one size's cache, --block-pages); the leader
 * of a process group (its kvmmctl runs in it). */
pid_t cf_operator_start(const struct cf_proc *p);

/*
 * The parent's (tests/daemon-crash-fuzz/restart.c): the sizes kvmmd
 * names and how each restart names them.  One size: 4 pages, no weight.
 * Several (a multi-size run): each size's pages and weight, listed in
 * order[] (indexes of pages[]); the NVMe file is cut in that list's
 * partitions at the first start and keeps that partition order (part[])
 * whatever order later starts name, since kvmmd puts each size on the
 * partition that holds its blocks (Documentation/tiers.md, "The NVMe
 * partitions").
 */
struct cf_sizes {
	uint32_t n;
	uint32_t pages[CF_SIZES_MAX], weight[CF_SIZES_MAX];
	uint32_t order[CF_SIZES_MAX]; /* the list as kvmmd is given it */
	uint32_t part[CF_SIZES_MAX]; /* the file's partitions' sizes */
	/* --nvme-size: the run's, and the one kvmmd is given now (the
	 * run's, or 1 MiB more after a restart that grew it) */
	uint64_t nvme_base, nvme_bytes, host_bytes;
	/* what the restarts did: the same list, the same weights in
	 * another order (after a start as before, or straight after the
	 * crash), other weights, a size removed, added or replaced and
	 * put back, another --nvme-size (every partition formatted but
	 * for a replace's kept size) */
	uint64_t same, swaps, reweights, swaps_first;
	uint64_t removes, adds, replaces, resizes;
	/* blocks recovered then: again in another order, lost to other
	 * weights, a changed list or --nvme-size, kept through a replace
	 * (both starts) */
	uint64_t swapped_back, reweight_lost, swapped_first_back;
	uint64_t change_lost, replace_kept, resize_lost;
	/* changed lists whose first start read drops answered while the
	 * tier was out in FILE.nvme-drops (a late run's) */
	uint64_t change_pending;
	/* the changes the rounds then ran on (a changed run, below):
	 * removes, adds and replaces, and the other weights' */
	uint64_t ran_removed, ran_added, ran_replaced, ran_reweighed;
	/* of the blocks of 2, 4 and 6 pages (by pages / 2 - 1) */
	uint64_t recovered[CF_SIZES_MAX], found[CF_SIZES_MAX];
	/* what the restarts do (run_rounds()'s runs): CF_RUN_ONE and
	 * CF_RUN_MULTI as above, CF_RUN_CHANGED: every restart of several
	 * sizes changes the list (a size removed, added or replaced, other
	 * weights, another --nvme-size) and the rounds run on it;
	 * CF_RUN_LATE: most restarts start without the NVMe tier, which
	 * joins during the round (late.c) */
	enum cf_run {
		CF_RUN_ONE,
		CF_RUN_MULTI,
		CF_RUN_CHANGED,
		CF_RUN_LATE
	} run;
	struct cf_late *late; /* the late starts' state, or NULL */
};

/* What the restart check counted (its found[] by size). */
struct cf_restart {
	uint64_t recovered[CF_SIZES_MAX];
};

/* A kvmmd that just started SIGKILLed: nothing of it left but the
 * file (restart.c); one that had ended by itself fails the test. */
void cf_kill_daemon(struct td_daemon *d);

/* The run's sizes: one (4 pages) or, of several (every run but
 * CF_RUN_ONE), 2 or 3 of 2, 4 and 6 pages (a third of the seeds 3),
 * each of weight 1-3, drawn from *rs; sh's nsizes and layers[] set (in
 * the order of pages[]).  A changed run's file holds CF_MIN_SLOTS a
 * partition for any list of 2, 4 and 6 pages, the others' for theirs. */
void cf_sizes_init(struct cf_sizes *z, struct cf_shared *sh, enum cf_run run,
		   uint64_t *rs);
/* kvmmd started on nvme as z lists the sizes (odd rounds with every
 * NVMe header invalidation failing), with the run's --policy-state
 * (sh->state); fails with its log if it does not start. */
void cf_start_daemon(struct td_daemon *d, const struct cf_shared *sh,
		     const struct cf_sizes *z, const char *nvme, uint64_t seed,
		     uint32_t round, bool failing);
/* The same with --policy-state state. */
void cf_start_daemon_state(struct td_daemon *d, const struct cf_shared *sh,
			   const struct cf_sizes *z, const char *nvme,
			   uint64_t seed, uint32_t round, bool failing,
			   const char *state);
/* A --policy-state file and what kvmmd keeps beside it removed. */
void cf_state_remove(const char *state);
/* The blocks the restart recovered in size s's cache (TIER_STATS of
 * that size), or in all when z has one size. */
uint64_t cf_recovered(const char *sock, const struct cf_sizes *z, uint32_t s);
/*
 * The start of round `round` after a crash: kvmmd started as z lists the
 * sizes or, multi, in 3 of 8 restarts so, and in one of 8 each: the same
 * weights in another order, after a start as before (its per-size
 * recovered counts, then SIGKILL) that it must match exactly; other
 * weights after such a start, which must lose every block (0 in every
 * partition); another order straight after the crash, a size removed,
 * added or replaced (then the list as before), or another --nvme-size,
 * each checked against what a start as before recovers from a copy of
 * the file (restart_change.c).  rc gets each size's recovered count;
 * *lost has bit s set where size s's partition was formatted (the
 * restart must find none of it).
 */
void cf_restart(struct td_daemon *d, struct cf_shared *sh, struct cf_sizes *z,
		const char *nvme, uint64_t seed, uint32_t round, uint64_t *rs,
		struct cf_restart *rc, uint32_t *lost);

/* restart_change.c: the restarts straight after the crash, each after
 * a start as before on the file's bytes (before[]: its counts; the sum
 * returned), put back after it, so that the start checked is the
 * file's first; that start applies the drops kvmmd kept for the file
 * (the run's FILE.nvme-drops, copied to a state of its own) as the
 * start checked will, and a late round's unjoined sizes are checked
 * against it (cf_late_expect()). */
uint64_t cf_copy_recovered(const struct cf_shared *sh, const struct cf_sizes *z,
			   const char *nvme, uint64_t seed, uint32_t round,
			   uint64_t *before);
/* Size s's recovered count at the start d (of the list z) must be want,
 * else the test fails with the log, naming the list of before (was). */
void cf_expect_recovered(const struct td_daemon *d, const struct cf_sizes *z,
			 uint32_t s, uint64_t want, uint32_t round,
			 const char *was, uint64_t had);
/* --cache-block-pages as z lists the sizes: "4", or "4:3,2:1". */
const char *cf_sizes_arg(const struct cf_sizes *z, char *buf, size_t len);
/* Another order of the list (never the one it has). */
void cf_reorder(struct cf_sizes *z, uint64_t *rs);
/* The three kinds: another order, the sizes changed then put back,
 * another --nvme-size; each sets *lost. */
void cf_restart_order_first(struct td_daemon *d, const struct cf_shared *sh,
			    struct cf_sizes *z, const char *nvme, uint64_t seed,
			    uint32_t round, uint64_t *rs, uint32_t *lost);
void cf_restart_sizes_changed(struct td_daemon *d, const struct cf_shared *sh,
			      struct cf_sizes *z, const char *nvme,
			      uint64_t seed, uint32_t round, uint64_t *rs,
			      uint32_t *lost);
void cf_restart_nvme_resized(struct td_daemon *d, const struct cf_shared *sh,
			     struct cf_sizes *z, const char *nvme,
			     uint64_t seed, uint32_t round, uint32_t *lost);
/* A changed run's restart (restart_change.c): the list changed as
 * cf_restart_sizes_changed() does it (from one size: one added), and
 * kept: sh's hashes and the drops' held hashes moved to the new list's
 * indexes (a size no longer named loses its records: its partition is
 * formatted before it is named again). */
void cf_restart_sizes_kept(struct td_daemon *d, struct cf_shared *sh,
			   struct cf_sizes *z, const char *nvme, uint64_t seed,
			   uint32_t round, uint64_t *rs, uint32_t *lost);

/*
 * late.c: starts without the NVMe tier.  The file lives in a directory
 * of its own (dir/slots), moved aside (dir.away) for a late start:
 * kvmmd starts without the tier (ENOENT in every size's TIER_STATS),
 * the round puts the directory back at a drawn moment, and the tier
 * joins at kvmmd's next attempt (KVMMD_TEST_CACHE_RETRY_MS=10; half of
 * the starts with the first size's first open or two after the claim
 * failing, KVMMD_TEST_NVME_OPEN_FAIL, so the join spans attempts).
 */
struct cf_late {
	char dir[300], away[310], file[320];
	/* --cache-scope uid: a late start names hashes under a new key,
	 * so the file's blocks, named under its key, are formatted at the
	 * join unless the claim took the file's key, nothing named yet
	 * (tiers.md, "An NVMe tier that joins late") */
	bool keyed;
	/* the run's last restart, whose check ends it: never late (a late
	 * start recovers nothing to check) */
	bool last;
	/* this start's: the tier out, the file's bytes (FNV-1a) then and
	 * what a start as before recovered from a copy of it */
	bool out;
	uint32_t open_fails;
	uint64_t file_sum, before[CF_SIZES_MAX];
	/* the round's: the directory put back (ms after the clients
	 * started; UINT64_MAX: not before the kill), when every size was
	 * seen joined (cf_now_us(), 0: not seen) */
	uint64_t appear_ms, start_us, appear_us, joined_us;
	/* from the kill to the next start: the sizes whose partition had
	 * not joined, which must recover exactly before[] again; of those,
	 * the ones a drop of the round answered while the tier was out
	 * reached (pending_mask), which that start applies: at most
	 * before[] then */
	uint32_t expect_mask, pending_mask;
	uint64_t expect[CF_SIZES_MAX];
	/* what the run did */
	uint64_t starts, starts_failing, kills_away, kills_before;
	uint64_t kills_during, kills_after, untouched, exact_blocks;
	uint64_t drops_out, join_recovered, keyed_formats;
	/* the drops kvmmd said it kept in FILE.nvme-drops; the blocks of
	 * unjoined partitions such drops left out at the next start */
	uint64_t drops_kept, pending_left_out;
};

/* The run's file in a directory of its own: nvme's path plus ".d",
 * the file in it, written back into nvme. */
void cf_late_init(struct cf_late *l, char *nvme, size_t len, bool keyed);
/* The late start: the directory moved aside, kvmmd started without the
 * tier; rc 0 in every size, *lost 0. */
void cf_restart_late(struct td_daemon *d, const struct cf_shared *sh,
		     struct cf_sizes *z, const char *nvme, uint64_t seed,
		     uint32_t round, uint64_t *rs, uint32_t *lost);
/* At any start as before: the sizes a late round left unjoined must
 * recover what they did before it (rc: this start's counts). */
void cf_late_expect(struct cf_late *l, const struct cf_sizes *z,
		    const uint64_t *got, uint32_t round);
/* The round's sleep until kill_ms, the directory put back on the way
 * at its drawn moment (a late start's round), every size's join seen. */
void cf_late_sleep(struct cf_late *l, const char *sock,
		   const struct cf_sizes *z, uint64_t kill_ms, uint64_t *rs);
/* After the kill, before the log goes: where the join was, what the
 * file must hold, the round's drops before the join (from ndrops on)
 * marked tier_out. */
void cf_late_killed(struct cf_late *l, const struct td_daemon *d,
		    struct cf_shared *sh, const struct cf_sizes *z,
		    uint32_t ndrops, uint32_t round);
/* The run's end: the file and its directory removed. */
void cf_late_end(struct cf_late *l);

#endif
