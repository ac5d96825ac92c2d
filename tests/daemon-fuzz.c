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
 * (plain, TTL, demotable, priority) and unpins; steps.  A client ends with
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
 * Three phases, each on a daemon of its own (main() says why each is
 * set up so): 1, --restore-mode plan, no fault, an NVMe tier that never
 * fills: no migration, reload or checksum may fail, nothing is dropped
 * from NVMe; 2, a restart on phase 1's NVMe file (at least the blocks it
 * left there are recovered), --restore-mode reload and
 * KVMMD_TEST_MIGRATE_FAIL failing one job of each kind at seed-chosen
 * points: no more migrations fail than were made to; 3, a small NVMe tier
 * that is always full: no migration, reload or checksum may fail (blocks
 * are dropped from NVMe, as the policy says).  After each phase: no
 * tier holds more than its capacity (also checked while the clients run),
 * the daemon is idle but for its cached GPU blocks (nothing mapped,
 * revoking, quarantined or pinned, no sequence or client session), a
 * last reader finds every cached chain intact, and kvmmd
 * stops cleanly.
 *
 *   KVMM_FUZZ_SEED=7 KVMM_FUZZ_SECONDS=60 build/tests/daemon-fuzz
 *
 * reruns one seed for longer (KVMM_FUZZ_TRACE=1: every client operation
 * on stderr); the operations a client does are a function of the seed
 * and its number, their interleaving is not.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "kvmm/kvmm.h"
#include "tests/cache-common.h"
#include "tests/lib/daemon.h"
#include "tests/lib/nvme_probe.h"

#define FZ_CLIENTS 4
#define FZ_CHAINS 12
#define FZ_CHAIN_BLOCKS 8 /* blocks per chain, and the longest sequence */
#define FZ_SEQS 3 /* open sequences per client */
#define FZ_POOL_BLOCKS 64
/* NVMe slots: more than the chains' 72 distinct blocks, or a few */
#define FZ_NVME_ALL 96
#define FZ_NVME_SMALL 24
#define FZ_SLOT (4096 + CC_PPB * CC_PAGE) /* NVMe slot stride */
#define FZ_WORDS (CC_PAGE / 8)

/* Where a block's bytes came from, besides the enum kvmm_block_action
 * values (1-4) of a prefix open with actions. */
#define FZ_FROM_CLIENT 0 /* written by this client */
#define FZ_FROM_PREFIX 5 /* a prefix open without actions */
#define FZ_FROM_COUNT 6

enum fz_op {
	OP_OPEN,
	OP_PREFIX,
	OP_PREFIX_SEGMENTS,
	OP_PREFIX_EARLY,
	OP_EXTEND,
	OP_TRUNCATE,
	OP_CLOSE,
	OP_PUBLISH,
	OP_VERIFY,
	OP_PIN,
	OP_UNPIN,
	OP_STEP,
	OP_COUNT
};

static const char *const op_names[OP_COUNT] = {
	"open",	  "prefix",   "prefix-segments", "prefix-early",
	"extend", "truncate", "close",		 "publish",
	"verify", "pin",      "unpin",		 "step",
};

/* Counters every client adds to (shared memory: they survive SIGKILL). */
struct fz_counts {
	uint64_t ops[OP_COUNT];
	/* blocks compared byte for byte, by where their bytes came from
	 * (FZ_FROM_*, or the action a prefix open gave them) */
	uint64_t checked[FZ_FROM_COUNT];
	uint64_t recomputed; /* RECOMPUTE blocks written */
	uint64_t reload_failed; /* blocks kvmm_seq_wait_ready said failed */
	uint64_t early_cut; /* early opens cut or closed before the wait */
	uint64_t enomem; /* extends and opens the full pool refused */
	uint64_t pin_missing, pin_quota;
	uint64_t clients, byes, exits, kills;
};

/* What a phase runs with. */
struct fz_phase {
	int num;
	uint64_t seed;
	const char *sock;
	uint64_t deadline_ms; /* clients stop starting new work */
	bool strict; /* no reload may fail (fz_setup) */
	struct fz_counts *cnt;
};

static void fz_add(uint64_t *counter, uint64_t n)
{
	__atomic_fetch_add(counter, n, __ATOMIC_RELAXED);
}

/* splitmix64: the PRNG of the clients and of the block contents. */
static uint64_t fz_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint32_t fz_below(uint64_t *s, uint32_t n)
{
	return (uint32_t)(fz_next(s) % n);
}

/*
 * Block b of chain k.  Chains 4-7 share their first 2 blocks with chain
 * k % 4, chains 8-11 their first 4, so prefix opens share blocks across
 * chains; a hash names one prefix (equal hashes, equal blocks before).
 */
static uint64_t fz_hash(int k, uint32_t b)
{
	uint32_t share = (uint32_t)(k / 4) * 2;
	uint64_t owner = b < share ? (uint64_t)(k % 4) : (uint64_t)k;
	uint64_t s = 0xf022000000ull + (owner << 8) + b;
	uint64_t h = fz_next(&s);

	return h ? h : 1;
}

static void fz_chain(int k, uint64_t *h)
{
	for (uint32_t b = 0; b < FZ_CHAIN_BLOCKS; b++)
		h[b] = fz_hash(k, b);
}

/* Page pg of the block named hash: a function of the two alone. */
static void fz_page_fill(uint64_t hash, uint32_t pg, uint64_t *out)
{
	uint64_t s = hash ^ (0x2545f4914f6cdd1dull * (pg + 1));

	for (uint32_t i = 0; i < FZ_WORDS; i++)
		out[i] = fz_next(&s);
}

static uint32_t fz_blocks(uint32_t len)
{
	return (len + CC_TPB - 1) / CC_TPB;
}

/* ---- a client process ---------------------------------------------- */

struct fz_seq {
	bool open;
	uint32_t id;
	int chain;
	uint32_t len; /* tokens; every block below fz_blocks(len) is valid */
};

struct fz_client {
	const struct fz_phase *ph;
	int num;
	uint64_t rng;
	struct kvmm_conn *conn;
	struct kvmm_region *r;
	struct fz_seq seqs[FZ_SEQS];
	uint64_t pinned; /* a plain pin of ours (0: none) */
	uint64_t want[FZ_WORDS];
};

static void __attribute__((format(printf, 2, 3), noreturn))
fz_fail(const struct fz_client *c, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr,
		"daemon-fuzz: FAIL seed %llu phase %d client %d (pid %d): ",
		(unsigned long long)c->ph->seed, c->ph->num, c->num,
		(int)getpid());
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	_exit(1);
}

/* With KVMM_FUZZ_TRACE set, every operation of every client on stderr. */
static bool fz_tracing;

static void __attribute__((format(printf, 2, 3)))
fz_trace(const struct fz_client *c, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	int n;

	if (!fz_tracing)
		return;
	/* one write per line: the clients' lines do not interleave */
	n = snprintf(line, sizeof(line), "[%llu client %d] ",
		     (unsigned long long)cc_now_ms(), c->num);
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	if (write(2, line, n) < 0)
		return;
}

/* A call that must succeed. */
#define fz_ok(c, call)                                                       \
	do {                                                                 \
		int _e = (call);                                             \
		if (_e)                                                      \
			fz_fail(c, "%s: %d (%s)", #call, _e, strerror(-_e)); \
	} while (0)

static unsigned char *fz_page(struct fz_client *c, uint32_t seq, uint32_t b,
			      uint32_t pg)
{
	uint64_t base = pg & 1 ? kvmm_seq_v_ptr(c->r, seq, pg / 2) :
				 kvmm_seq_k_ptr(c->r, seq, pg / 2);

	return (unsigned char *)(uintptr_t)(base + (uint64_t)b * CC_PAGE);
}

/* Write block b of s as an engine computing it would. */
static void fz_write(struct fz_client *c, const struct fz_seq *s, uint32_t b)
{
	for (uint32_t pg = 0; pg < CC_PPB; pg++) {
		fz_page_fill(fz_hash(s->chain, b), pg, c->want);
		memcpy(fz_page(c, s->id, b, pg), c->want, CC_PAGE);
	}
}

/* Block b of s must hold its hash's bytes; from says where they came
 * from (FZ_FROM_*, or a prefix open's action). */
static void fz_check(struct fz_client *c, const struct fz_seq *s, uint32_t b,
		     int from)
{
	uint64_t h = fz_hash(s->chain, b);

	for (uint32_t pg = 0; pg < CC_PPB; pg++) {
		const unsigned char *m = fz_page(c, s->id, b, pg);
		const unsigned char *w = (const unsigned char *)c->want;

		fz_page_fill(h, pg, c->want);
		if (!memcmp(m, w, CC_PAGE))
			continue;
		for (uint32_t o = 0; o < CC_PAGE; o++)
			if (m[o] != w[o])
				fz_fail(c,
					"chain %d block %u (hash %#llx, seq %u) page %u byte %u is %#x, expected %#x; the block came %s",
					s->chain, b, (unsigned long long)h,
					s->id, pg, o, m[o], w[o],
					from == FZ_FROM_CLIENT ?
						"from this client's own writes" :
					from == FZ_FROM_PREFIX ?
						"from a prefix open without actions" :
						kvmm_block_action_string(
							(uint8_t)from));
	}
	fz_add(&c->ph->cnt->checked[from], 1);
}

static struct fz_seq *fz_free_slot(struct fz_client *c)
{
	for (int i = 0; i < FZ_SEQS; i++)
		if (!c->seqs[i].open)
			return &c->seqs[i];
	return NULL;
}

static struct fz_seq *fz_open_seq(struct fz_client *c)
{
	int i = (int)fz_below(&c->rng, FZ_SEQS);

	for (int n = 0; n < FZ_SEQS; n++, i = (i + 1) % FZ_SEQS)
		if (c->seqs[i].open)
			return &c->seqs[i];
	return NULL;
}

/* A length for a sequence of chain blocks: whole blocks, or sometimes a
 * partial tail block (never published). */
static uint32_t fz_len(struct fz_client *c, uint32_t min_blocks)
{
	uint32_t nb = min_blocks +
		      fz_below(&c->rng, FZ_CHAIN_BLOCKS - min_blocks + 1);
	uint32_t len = nb * CC_TPB;

	if (len && !fz_below(&c->rng, 4))
		len -= fz_below(&c->rng, CC_TPB);
	return len;
}

/* Publish some of s's full blocks: [first, full). */
static void fz_publish(struct fz_client *c, struct fz_seq *s)
{
	uint32_t full = s->len / CC_TPB, first;
	uint64_t h[FZ_CHAIN_BLOCKS];
	int n;

	if (!full)
		return;
	first = fz_below(&c->rng, full);
	fz_chain(s->chain, h);
	n = kvmm_block_publish(c->r, s->id, first, full - first,
			       first ? h[first - 1] : 0, h + first);
	fz_trace(c, "publish seq %u chain %d blocks %u..%u: %d", s->id,
		 s->chain, first, full - 1, n);
	if (n < 0 || n > (int)(full - first))
		fz_fail(c, "publish of blocks %u..%u of chain %d: %d", first,
			full - 1, s->chain, n);
	fz_add(&c->ph->cnt->ops[OP_PUBLISH], 1);
}

/* Grow s to len tokens (> s->len) and write the new blocks; false when
 * the pool had no room (-ENOMEM: s unchanged). */
static bool fz_extend(struct fz_client *c, struct fz_seq *s, uint32_t len)
{
	uint32_t from = fz_blocks(s->len);
	int err = kvmm_seq_extend(c->r, s->id, len);

	fz_trace(c, "extend seq %u chain %d %u -> %u tokens: %d", s->id,
		 s->chain, s->len, len, err);
	if (err == -ENOMEM) {
		fz_add(&c->ph->cnt->enomem, 1);
		if (kvmm_seq_len(c->r, s->id) != s->len)
			fz_fail(c,
				"seq %u: length %lld after a refused extend, was %u",
				s->id, (long long)kvmm_seq_len(c->r, s->id),
				s->len);
		return false;
	}
	if (err)
		fz_fail(c, "extend of seq %u from %u to %u tokens: %d", s->id,
			s->len, len, err);
	s->len = len;
	for (uint32_t b = from; b < fz_blocks(len); b++)
		fz_write(c, s, b);
	return true;
}

static void fz_close(struct fz_client *c, struct fz_seq *s)
{
	fz_trace(c, "close seq %u", s->id);
	fz_ok(c, kvmm_seq_close(c->r, s->id));
	s->open = false;
}

static void op_open(struct fz_client *c)
{
	struct fz_seq *s = fz_free_slot(c);
	uint32_t len;

	if (!s)
		return;
	fz_ok(c, kvmm_seq_open(c->r, &s->id));
	s->open = true;
	s->chain = (int)fz_below(&c->rng, FZ_CHAINS);
	fz_trace(c, "open seq %u chain %d", s->id, s->chain);
	s->len = 0;
	len = fz_len(c, 1);
	if (!fz_extend(c, s, len)) {
		fz_close(c, s);
		return;
	}
	if (fz_below(&c->rng, 4))
		fz_publish(c, s);
	fz_add(&c->ph->cnt->ops[OP_OPEN], 1);
}

/*
 * An early open's reloads: maybe work on the sequence first (extend, cut,
 * close: the daemon calls off what nobody waits for), then wait and
 * recompute what failed.  False when the sequence was closed.
 */
static bool fz_early_wait(struct fz_client *c, struct fz_seq *s,
			  uint32_t nr_blocks, uint8_t *acts)
{
	uint32_t failed[FZ_CHAIN_BLOCKS], upto;
	int n;

	switch (fz_below(&c->rng, 6)) {
	case 0:
		fz_close(c, s);
		fz_add(&c->ph->cnt->early_cut, 1);
		return false;
	case 1:
		if (s->len) {
			uint32_t len = fz_below(&c->rng, s->len);

			fz_trace(c, "truncate seq %u to %u tokens", s->id, len);
			fz_ok(c, kvmm_seq_truncate(c->r, s->id, len));
			s->len = len;
			fz_add(&c->ph->cnt->early_cut, 1);
		}
		break;
	case 2:
		if (s->len < FZ_CHAIN_BLOCKS * CC_TPB)
			fz_extend(c, s,
				  s->len + 1 +
					  fz_below(&c->rng,
						   FZ_CHAIN_BLOCKS * CC_TPB -
							   s->len));
		break;
	}
	upto = fz_blocks(s->len) < nr_blocks ? fz_blocks(s->len) : nr_blocks;
	n = kvmm_seq_wait_ready(c->r, s->id, upto, 0, failed, FZ_CHAIN_BLOCKS,
				NULL);
	fz_trace(c, "wait_ready seq %u upto %u: %d", s->id, upto, n);
	if (n < 0 || (uint32_t)n > upto)
		fz_fail(c, "wait_ready of seq %u upto %u: %d", s->id, upto, n);
	if (n && c->ph->strict)
		fz_fail(c,
			"wait_ready of seq %u (chain %d): %d reloads failed, block %u first, with no fault injected",
			s->id, s->chain, n, failed[0]);
	for (int i = 0; i < n; i++) {
		if (failed[i] >= upto ||
		    (acts[failed[i]] != KVMM_BLOCK_RELOADED_HOST &&
		     acts[failed[i]] != KVMM_BLOCK_RELOADED_NVME))
			fz_fail(c,
				"wait_ready of seq %u: block %u failed, its action %s",
				s->id, failed[i],
				failed[i] < upto ? kvmm_block_action_string(
							   acts[failed[i]]) :
						   "(past upto)");
		acts[failed[i]] = KVMM_BLOCK_RECOMPUTE;
		fz_add(&c->ph->cnt->reload_failed, 1);
	}
	return true;
}

/*
 * Open a sequence on a prefix of a chain: mode 0 without actions (every
 * block comes with its bytes), 1 with actions, 2 SEGMENTS, 3 EARLY, 4 both.
 * Shared and reloaded blocks are checked, RECOMPUTE ones written (in
 * ascending order, before anything after them is read).
 */
static void op_prefix(struct fz_client *c, int mode)
{
	static const uint32_t flags[5] = { 0, 0, KVMM_PREFIX_OPEN_SEGMENTS,
					   KVMM_PREFIX_OPEN_EARLY,
					   KVMM_PREFIX_OPEN_EARLY |
						   KVMM_PREFIX_OPEN_SEGMENTS };
	struct kvmm_prefix_opts o = { .size = sizeof(o), .flags = flags[mode] };
	struct fz_seq *s = fz_free_slot(c);
	uint8_t acts[FZ_CHAIN_BLOCKS];
	uint64_t h[FZ_CHAIN_BLOCKS];
	uint32_t n, nr = 0;
	int err;

	if (!s)
		return;
	s->chain = (int)fz_below(&c->rng, FZ_CHAINS);
	n = 1 + fz_below(&c->rng, FZ_CHAIN_BLOCKS);
	fz_chain(s->chain, h);
	memset(acts, KVMM_BLOCK_RELOADED_HOST, sizeof(acts));
	o.actions = acts;
	err = kvmm_seq_open_prefix_opts(c->r, h, n, &s->id, &nr,
					mode ? &o : NULL);
	fz_trace(
		c,
		"prefix open (mode %d) chain %d of %u blocks: %d, seq %u, %u blocks, actions %u%u%u%u%u%u%u%u",
		mode, s->chain, n, err, s->id, nr, acts[0], acts[1], acts[2],
		acts[3], acts[4], acts[5], acts[6], acts[7]);
	if (err == -ENOMEM) {
		fz_add(&c->ph->cnt->enomem, 1);
		return;
	}
	if (err)
		fz_fail(c, "prefix open (mode %d) of %u blocks of chain %d: %d",
			mode, n, s->chain, err);
	if (nr > n)
		fz_fail(c, "prefix open of %u blocks gave %u", n, nr);
	s->open = true;
	s->len = nr * CC_TPB;
	if (kvmm_seq_len(c->r, s->id) != s->len)
		fz_fail(c, "prefix open: seq %u has length %lld, %u blocks",
			s->id, (long long)kvmm_seq_len(c->r, s->id), nr);
	if (!mode)
		memset(acts, KVMM_BLOCK_RELOADED_HOST, sizeof(acts));
	if (mode >= 3 && !fz_early_wait(c, s, nr, acts))
		goto done;
	for (uint32_t b = 0; b < fz_blocks(s->len) && b < nr; b++) {
		if (acts[b] == KVMM_BLOCK_RECOMPUTE) {
			fz_write(c, s, b);
			fz_add(&c->ph->cnt->recomputed, 1);
		} else {
			fz_check(c, s, b, mode ? acts[b] : FZ_FROM_PREFIX);
		}
	}
	if (fz_below(&c->rng, 2))
		fz_publish(c, s);
done:
	fz_add(&c->ph->cnt->ops[mode < 2  ? OP_PREFIX :
				mode == 2 ? OP_PREFIX_SEGMENTS :
					    OP_PREFIX_EARLY],
	       1);
}

static void op_extend(struct fz_client *c)
{
	struct fz_seq *s = fz_open_seq(c);
	uint32_t max = FZ_CHAIN_BLOCKS * CC_TPB;

	if (!s || s->len >= max)
		return;
	if (fz_extend(c, s, s->len + 1 + fz_below(&c->rng, max - s->len)) &&
	    fz_below(&c->rng, 2))
		fz_publish(c, s);
	fz_add(&c->ph->cnt->ops[OP_EXTEND], 1);
}

static void op_truncate(struct fz_client *c)
{
	struct fz_seq *s = fz_open_seq(c);
	uint32_t len;

	if (!s || !s->len)
		return;
	len = fz_below(&c->rng, s->len);
	fz_trace(c, "truncate seq %u to %u tokens", s->id, len);
	fz_ok(c, kvmm_seq_truncate(c->r, s->id, len));
	s->len = len;
	fz_add(&c->ph->cnt->ops[OP_TRUNCATE], 1);
}

/* Every block of an open sequence still holds its bytes. */
static void fz_verify(struct fz_client *c, struct fz_seq *s)
{
	for (uint32_t b = 0; b < fz_blocks(s->len); b++)
		fz_check(c, s, b, FZ_FROM_CLIENT);
}

static void op_verify(struct fz_client *c)
{
	struct fz_seq *s = fz_open_seq(c);

	if (!s)
		return;
	fz_verify(c, s);
	fz_add(&c->ph->cnt->ops[OP_VERIFY], 1);
}

/* A step over every open sequence, reading them as its kernels would. */
static void op_step(struct fz_client *c)
{
	fz_ok(c, kvmm_step_begin(c->conn));
	for (int i = 0; i < FZ_SEQS; i++)
		if (c->seqs[i].open)
			fz_verify(c, &c->seqs[i]);
	fz_ok(c, kvmm_step_end(c->conn));
	fz_add(&c->ph->cnt->ops[OP_STEP], 1);
}

/*
 * Pin a block of some chain: plain (kept until unpinned; one at a time,
 * so the GPU tier is not pinned full), TTL, TTL that may demote,
 * priority only, TTL with priority.  The block need not be cached.
 */
static void op_pin(struct fz_client *c)
{
	static const uint32_t kinds[5] = {
		0, KVMM_PIN_F_TTL, KVMM_PIN_F_TTL | KVMM_PIN_F_DEMOTE,
		KVMM_PIN_F_PRIORITY | KVMM_PIN_F_PRIORITY_ONLY,
		KVMM_PIN_F_TTL | KVMM_PIN_F_PRIORITY
	};
	uint32_t flags = kinds[fz_below(&c->rng, 5)];
	uint64_t h = fz_hash((int)fz_below(&c->rng, FZ_CHAINS),
			     fz_below(&c->rng, FZ_CHAIN_BLOCKS));
	struct kvmm_pin_opts o;
	int err;

	if (!flags && c->pinned)
		return;
	err = cc_pin(c->conn, h, flags,
		     flags & KVMM_PIN_F_TTL ?
			     (1 + fz_below(&c->rng, 50)) * 1000000ull :
			     0,
		     flags & KVMM_PIN_F_PRIORITY ?
			     (int)fz_below(&c->rng, 256) - 128 :
			     0,
		     &o);
	fz_trace(c, "pin %#llx flags %#x: %d, tier %u", (unsigned long long)h,
		 flags, err, o.tier);
	if (err == -ENOENT) {
		fz_add(&c->ph->cnt->pin_missing, 1);
	} else if (err == -EDQUOT) {
		fz_add(&c->ph->cnt->pin_quota, 1);
	} else if (err) {
		fz_fail(c, "pin of %#llx (flags %#x): %d",
			(unsigned long long)h, flags, err);
	} else {
		if (o.tier > 2)
			fz_fail(c, "pin of %#llx: tier %u",
				(unsigned long long)h, o.tier);
		if (h == c->pinned)
			c->pinned = 0; /* replaced by this record */
		if (!flags)
			c->pinned = h;
	}
	fz_add(&c->ph->cnt->ops[OP_PIN], 1);
}

/* A plain pin lasts until unpinned: the record must be there. */
static void op_unpin(struct fz_client *c)
{
	if (!c->pinned)
		return;
	fz_trace(c, "unpin %#llx", (unsigned long long)c->pinned);
	fz_ok(c, kvmm_block_unpin(c->conn, c->pinned));
	c->pinned = 0;
	fz_add(&c->ph->cnt->ops[OP_UNPIN], 1);
}

static void fz_step_once(struct fz_client *c)
{
	uint32_t x = fz_below(&c->rng, 100);

	if (x < 12)
		op_open(c);
	else if (x < 24)
		op_prefix(c, (int)fz_below(&c->rng, 2));
	else if (x < 32)
		op_prefix(c, 2);
	else if (x < 42)
		op_prefix(c, 3 + (int)fz_below(&c->rng, 2));
	else if (x < 52)
		op_extend(c);
	else if (x < 58)
		op_truncate(c);
	else if (x < 70) {
		struct fz_seq *s = fz_open_seq(c);

		if (s) {
			fz_close(c, s);
			fz_add(&c->ph->cnt->ops[OP_CLOSE], 1);
		}
	} else if (x < 76) {
		struct fz_seq *s = fz_open_seq(c);

		if (s)
			fz_publish(c, s);
	} else if (x < 82)
		op_verify(c);
	else if (x < 90)
		op_pin(c);
	else if (x < 94)
		op_unpin(c);
	else
		op_step(c);
}

/*
 * Client number num of a phase: ops operations (or until the deadline),
 * then BYE (end 0) or an exit without it (1); with end 2 the parent kills
 * it at a time of its own choosing.
 */
static void __attribute__((noreturn))
fz_client_run(const struct fz_phase *ph, int num, uint32_t ops, int end)
{
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.socket_path = ph->sock,
					.name = "fuzz",
					.map_ahead_set = 1 };
	struct kvmm_region_opts ro = cc_region_opts();
	struct fz_client c = { .ph = ph, .num = num };

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	c.rng = ph->seed * 0x100000001b3ull + ((uint64_t)ph->num << 40) +
		(uint64_t)num;
	fz_next(&c.rng);
	co.map_ahead_blocks = fz_below(&c.rng, 3);
	fz_ok(&c, kvmm_connect(&co, &c.conn));
	fz_ok(&c, kvmm_region_create(c.conn, &ro, &c.r));
	for (uint32_t i = 0; i < ops && cc_now_ms() < ph->deadline_ms; i++)
		fz_step_once(&c);
	if (end == 1)
		_exit(0);
	if (fz_below(&c.rng, 2))
		for (int i = 0; i < FZ_SEQS; i++)
			if (c.seqs[i].open)
				fz_close(&c, &c.seqs[i]);
	kvmm_disconnect(c.conn);
	_exit(0);
}

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
static void fz_run_clients(struct fz_phase *ph, struct td_daemon *d)
{
	struct fz_child kids[FZ_CLIENTS] = { 0 };
	uint64_t rng = ph->seed ^ ((uint64_t)ph->num << 56) ^ 0x5eedull;
	uint64_t next_check = 0;
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
	uint64_t ms;
};

/*
 * One phase on a daemon of its own, on the NVMe file nvme.  Returns the
 * blocks left on the NVMe tier when it stopped.
 */
static uint64_t fz_phase(struct fz_phase *ph, const struct fz_setup *su,
			 const char *nvme)
{
	char pool[32], nvme_size[32];
	const char *args[] = { "--gpu-mem",
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
			       NULL };
	struct kvmm_tier_stats_reply ts;
	struct td_daemon d;
	uint64_t found;
	int r;

	snprintf(pool, sizeof(pool), "%uK", FZ_POOL_BLOCKS * CC_PPB * 64);
	snprintf(nvme_size, sizeof(nvme_size), "%llu",
		 4096ull + (unsigned long long)su->nvme_slots * FZ_SLOT);
	printf("phase %d: %u NVMe slots, --restore-mode %s, KVMMD_TEST_MIGRATE_FAIL=%s\n",
	       ph->num, su->nvme_slots, su->restore_mode,
	       su->fail_spec ? su->fail_spec : "(unset)");
	ph->strict = su->strict || su->no_fail;
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
	if ((int64_t)ts.recovered_blocks < su->min_recovered)
		t_fail("seed %llu phase %d: %llu blocks recovered from NVMe, %lld were there at the stop",
		       (unsigned long long)ph->seed, ph->num,
		       (unsigned long long)ts.recovered_blocks,
		       (long long)su->min_recovered);
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
	uint64_t ms = (secs_env ? strtoull(secs_env, NULL, 0) : 10) * 1000;
	struct fz_phase ph = { .seed = seed };
	struct fz_setup su;
	char nvme[256], spec[256];
	struct fz_counts *cnt;
	uint64_t rng = seed, on_nvme;

	setvbuf(stdout, NULL, _IOLBF, 0);
	fz_tracing = getenv("KVMM_FUZZ_TRACE") != NULL;
	printf("daemon-fuzz: seed %llu, %llu s (KVMM_FUZZ_SEED, KVMM_FUZZ_SECONDS)\n",
	       (unsigned long long)seed, (unsigned long long)ms / 1000);
	cc_nvme_path(nvme, sizeof(nvme), "fuzz");
	t_nvme_require(nvme);
	cnt = mmap(NULL, 3 * sizeof(*cnt), PROT_READ | PROT_WRITE,
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
				.ms = ms * 4 / 10 };
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
				.ms = ms * 3 / 10 };
	ph.num = 2;
	ph.cnt = &cnt[1];
	fz_phase(&ph, &su, nvme);
	unlink(nvme);

	/*
	 * 3: a fresh NVMe tier of FZ_NVME_SMALL slots, so blocks are dropped
	 * from it all the time, many while their NVMe I/O runs (holding
	 * their slots until it ends).  No fault is injected, so nothing may
	 * fail: a host -> NVMe write that finds every slot held waits for
	 * one to come back (it used to fail with -ENOSPC).
	 */
	su = (struct fz_setup){ .nvme_slots = FZ_NVME_SMALL,
				.restore_mode = "plan",
				.no_fail = true,
				.min_recovered = -1,
				.ms = ms - ms * 7 / 10 };
	ph.num = 3;
	ph.cnt = &cnt[2];
	fz_phase(&ph, &su, nvme);
	unlink(nvme);
	printf("daemon-fuzz: seed %llu ok\n", (unsigned long long)seed);
	return 0;
}
