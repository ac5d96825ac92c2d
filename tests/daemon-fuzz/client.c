// SPDX-License-Identifier: MIT
/*
 * tests/daemon-fuzz: one client process.  It connects with libkvmm and
 * does operations chosen by a PRNG seeded from the phase's seed and its
 * own number (so they are a function of the two): sequences opened fresh
 * or on a cached prefix, extended, truncated, closed, published; pins and
 * unpins; steps.  It writes its own and RECOMPUTE blocks as an engine
 * would and compares every block it is handed or still holds, byte for
 * byte, with what its hash and size say (fz_check()); in phase 5 it has
 * a region of each of two block sizes, and each sequence, prefix open,
 * pin and query picks one; a read-only (shared) block is made a
 * sequence's own now and then (unshare.c).  Any other byte, or any
 * call that fails where it may not, ends the process with status 1 and a
 * line naming the seed, the phase and the block.  Where the parent
 * revokes (phase 4) a sequence's length is what libkvmm says once this
 * thread applied the revocation (fz_sync()); elsewhere it must never
 * differ from the client's own.  The router's calls are in router.c.
 */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "tests/daemon-fuzz/fuzz.h"

void fz_fail(const struct fz_client *c, const char *fmt, ...)
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

bool fz_tracing;

void fz_trace(const struct fz_client *c, const char *fmt, ...)
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

unsigned char *fz_page(struct fz_client *c, const struct fz_seq *s, uint32_t b,
		       uint32_t pg)
{
	struct kvmm_region *r = c->r[s->sz];
	uint64_t base = pg & 1 ? kvmm_seq_v_ptr(r, s->id, pg / 2) :
				 kvmm_seq_k_ptr(r, s->id, pg / 2);

	return (unsigned char *)(uintptr_t)(base + (uint64_t)b * CC_PAGE);
}

/* Write block b of s as an engine computing it would. */
void fz_write(struct fz_client *c, const struct fz_seq *s, uint32_t b)
{
	for (uint32_t pg = 0; pg < fz_ppb(s->sz); pg++) {
		fz_page_fill(fz_hash(s->sz, s->chain, b), s->sz, pg, c->want);
		memcpy(fz_page(c, s, b, pg), c->want, CC_PAGE);
	}
}

void fz_check(struct fz_client *c, const struct fz_seq *s, uint32_t b, int from)
{
	fz_check_as(c, s, b, b, from);
}

void fz_check_as(struct fz_client *c, const struct fz_seq *s, uint32_t hb,
		 uint32_t b, int from)
{
	uint64_t h = fz_hash(s->sz, s->chain, hb);

	for (uint32_t pg = 0; pg < fz_ppb(s->sz); pg++) {
		const unsigned char *m = fz_page(c, s, b, pg);
		const unsigned char *w = (const unsigned char *)c->want;

		fz_page_fill(h, s->sz, pg, c->want);
		if (!memcmp(m, w, CC_PAGE))
			continue;
		for (uint32_t o = 0; o < CC_PAGE; o++)
			if (m[o] != w[o])
				fz_fail(c,
					"chain %d block %u of %u pages (hash %#llx, seq %u block %u) page %u byte %u is %#x, expected %#x; the block came %s",
					s->chain, hb, fz_ppb(s->sz),
					(unsigned long long)h, s->id, b, pg, o,
					m[o], w[o],
					from == FZ_FROM_CLIENT ?
						"from this client's own writes" :
					from == FZ_FROM_PREFIX ?
						"from a prefix open without actions" :
					from == FZ_FROM_UNSHARE ?
						"from a copy kvmm_seq_block_unshare() made" :
						kvmm_block_action_string(
							(uint8_t)from));
	}
	fz_add(&c->ph->cnt->checked[from], 1);
	fz_add(&c->ph->cnt->checked_size[s->sz], 1);
}

struct fz_seq *fz_free_slot(struct fz_client *c)
{
	for (int i = 0; i < FZ_SEQS; i++)
		if (!c->seqs[i].open)
			return &c->seqs[i];
	return NULL;
}

struct fz_seq *fz_open_seq(struct fz_client *c)
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

/*
 * s's length as libkvmm has it now.  Only this thread applies
 * revocations (a step boundary, an extend that met one: the map-ahead
 * thread applies none), so the blocks below it keep their pages until
 * this thread's next such call; a revocation cuts the length to the
 * first block it took, and nothing else may change it under us.
 */
void fz_sync(struct fz_client *c, struct fz_seq *s)
{
	int64_t l = kvmm_seq_len(c->r[s->sz], s->id);

	if (l == (int64_t)s->len)
		return;
	if (l < 0 || l > (int64_t)s->len || !c->ph->revokes)
		fz_fail(c, "seq %u (chain %d): length %lld, %u expected%s",
			s->id, s->chain, (long long)l, s->len,
			c->ph->revokes ? "" : " with no revocation");
	fz_trace(c, "seq %u cut from %u to %lld tokens by a revocation", s->id,
		 s->len, (long long)l);
	s->len = (uint32_t)l;
	fz_add(&c->ph->cnt->revoked_seen, 1);
}

/* A full pool (-ENOMEM) or, with --quota, the uid's quota (-EDQUOT):
 * counted; any other error is not. */
bool fz_short(struct fz_client *c, int err)
{
	if (err == -ENOMEM) {
		fz_add(&c->ph->cnt->enomem, 1);
		return true;
	}
	if (err == -EDQUOT && c->ph->quota) {
		fz_add(&c->ph->cnt->dquot, 1);
		return true;
	}
	return false;
}

/* Publish some of s's full blocks: [first, full).  A revocation the
 * parent posted and this client has not applied yet races it: kvmmd
 * answers -ESTALE (ABI 1.20) when it took a block named, never
 * -EINVAL for this well-formed request. */
static void fz_publish(struct fz_client *c, struct fz_seq *s)
{
	uint32_t full, first;
	uint64_t h[FZ_CHAIN_BLOCKS];
	int n;

	fz_sync(c, s);
	full = s->len / CC_TPB;
	if (!full)
		return;
	first = fz_below(&c->rng, full);
	fz_chain(s->sz, s->chain, h);
	n = kvmm_block_publish(c->r[s->sz], s->id, first, full - first,
			       first ? h[first - 1] : 0, h + first);
	fz_trace(c, "publish seq %u chain %d size %d blocks %u..%u: %d", s->id,
		 s->chain, s->sz, first, full - 1, n);
	if (n == -ESTALE && c->ph->revokes)
		fz_add(&c->ph->cnt->publish_stale, 1);
	else if (n < 0 || n > (int)(full - first))
		fz_fail(c, "publish of blocks %u..%u of chain %d: %d", first,
			full - 1, s->chain, n);
	fz_add(&c->ph->cnt->ops[OP_PUBLISH], 1);
}

/* Grow s to len tokens (> s->len) and write the new blocks; false when
 * the pool had no room (-ENOMEM: s unchanged). */
static bool fz_extend(struct fz_client *c, struct fz_seq *s, uint32_t len)
{
	uint32_t from = fz_blocks(s->len);
	int err = kvmm_seq_extend(c->r[s->sz], s->id, len);

	fz_trace(c, "extend seq %u chain %d size %d %u -> %u tokens: %d", s->id,
		 s->chain, s->sz, s->len, len, err);
	if (err == -EROFS) {
		/* the length ends inside a shared block, which is read-only
		 * here: an engine truncates to its start and computes it
		 * again on pages of its own */
		uint32_t cut = s->len - s->len % CC_TPB;

		if (s->len == cut || kvmm_seq_block_readonly(c->r[s->sz], s->id,
							     cut / CC_TPB) != 1)
			fz_fail(c, "extend of seq %u from %u tokens: -EROFS",
				s->id, s->len);
		fz_ok(c, kvmm_seq_truncate(c->r[s->sz], s->id, cut));
		s->len = cut;
		from = fz_blocks(cut);
		err = kvmm_seq_extend(c->r[s->sz], s->id, len);
		fz_trace(
			c,
			"extend seq %u from its read-only block's start %u -> %u tokens: %d",
			s->id, cut, len, err);
	}
	if (fz_short(c, err)) {
		fz_sync(c, s); /* unchanged, but for a revocation */
		return false;
	}
	if (err)
		fz_fail(c, "extend of seq %u from %u to %u tokens: %d", s->id,
			s->len, len, err);
	/* a revocation it applied or met leaves the length shorter: the
	 * KV from there on is gone, and the blocks below were ours */
	s->len = len;
	fz_sync(c, s);
	for (uint32_t b = from; b < fz_blocks(s->len); b++)
		fz_write(c, s, b);
	return true;
}

/* Cut s to len tokens (< s->len). */
static void fz_truncate(struct fz_client *c, struct fz_seq *s, uint32_t len)
{
	int err = kvmm_seq_truncate(c->r[s->sz], s->id, len);

	fz_trace(c, "truncate seq %u to %u tokens: %d", s->id, len, err);
	fz_ok(c, err);
	s->len = len;
}

void fz_close(struct fz_client *c, struct fz_seq *s)
{
	fz_trace(c, "close seq %u", s->id);
	fz_ok(c, kvmm_seq_close(c->r[s->sz], s->id));
	s->open = false;
}

static void op_open(struct fz_client *c)
{
	struct fz_seq *s = fz_free_slot(c);
	uint32_t len;

	if (!s)
		return;
	s->sz = fz_pick_size(c->ph, &c->rng);
	fz_ok(c, kvmm_seq_open(c->r[s->sz], &s->id));
	s->open = true;
	s->chain = (int)fz_below(&c->rng, FZ_CHAINS);
	fz_trace(c, "open seq %u chain %d size %d", s->id, s->chain, s->sz);
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

			fz_truncate(c, s, len);
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
	for (;;) {
		fz_sync(c, s);
		upto = fz_blocks(s->len) < nr_blocks ? fz_blocks(s->len) :
						       nr_blocks;
		n = kvmm_seq_wait_ready(c->r[s->sz], s->id, upto, 0, failed,
					FZ_CHAIN_BLOCKS, NULL);
		fz_trace(c, "wait_ready seq %u upto %u: %d", s->id, upto, n);
		if (n != -ESTALE || !c->ph->revokes)
			break;
		/* a revocation took a block below upto (ABI 1.20): apply
		 * it, then wait for what is left below the cut */
		if (kvmm_process_revocations(c->conn) < 0)
			fz_fail(c, "revocations after wait_ready's -ESTALE");
	}
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
	s->sz = fz_pick_size(c->ph, &c->rng);
	s->chain = (int)fz_below(&c->rng, FZ_CHAINS);
	n = 1 + fz_below(&c->rng, FZ_CHAIN_BLOCKS);
	fz_chain(s->sz, s->chain, h);
	memset(acts, KVMM_BLOCK_RELOADED_HOST, sizeof(acts));
	o.actions = acts;
	err = kvmm_seq_open_prefix_opts(c->r[s->sz], h, n, &s->id, &nr,
					mode ? &o : NULL);
	fz_trace(
		c,
		"prefix open (mode %d) chain %d size %d of %u blocks: %d, seq %u, %u blocks, actions %u%u%u%u%u%u%u%u",
		mode, s->chain, s->sz, n, err, s->id, nr, acts[0], acts[1],
		acts[2], acts[3], acts[4], acts[5], acts[6], acts[7]);
	if (fz_short(c, err))
		return;
	if (err)
		fz_fail(c, "prefix open (mode %d) of %u blocks of chain %d: %d",
			mode, n, s->chain, err);
	if (nr > n)
		fz_fail(c, "prefix open of %u blocks gave %u", n, nr);
	s->open = true;
	s->len = nr * CC_TPB;
	if (kvmm_seq_len(c->r[s->sz], s->id) != s->len)
		fz_fail(c, "prefix open: seq %u has length %lld, %u blocks",
			s->id, (long long)kvmm_seq_len(c->r[s->sz], s->id), nr);
	if (!mode)
		memset(acts, KVMM_BLOCK_RELOADED_HOST, sizeof(acts));
	if (mode >= 3 && !fz_early_wait(c, s, nr, acts))
		goto done;
	fz_sync(c, s);
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

	if (!s)
		return;
	fz_sync(c, s);
	if (s->len >= max)
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

	if (!s)
		return;
	fz_sync(c, s);
	if (!s->len)
		return;
	len = fz_below(&c->rng, s->len);
	fz_truncate(c, s, len);
	fz_add(&c->ph->cnt->ops[OP_TRUNCATE], 1);
}

/* Every block of an open sequence still holds its bytes. */
void fz_verify(struct fz_client *c, struct fz_seq *s)
{
	fz_sync(c, s);
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
	int sz = fz_pick_size(c->ph, &c->rng);
	uint64_t h = fz_hash(sz, (int)fz_below(&c->rng, FZ_CHAINS),
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
	/* 100 and up: ABI 1.20's copy-on-write, added after the others
	 * (so every seed's draws changed with it) */
	uint32_t x = fz_below(&c->rng, 105);

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
	else if (x < 92)
		op_unpin(c);
	else if (x < 95)
		op_step(c);
	else if (x < 98)
		op_query(c);
	else if (x < 100)
		op_pin_many(c);
	else
		op_unshare(c);
}

void fz_client_run(const struct fz_phase *ph, int num, uint32_t ops, int end)
{
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.socket_path = ph->sock,
					.name = "fuzz",
					.map_ahead_set = 1 };
	struct fz_client c = { .ph = ph, .num = num };

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	c.rng = ph->seed * 0x100000001b3ull + ((uint64_t)ph->num << 40) +
		(uint64_t)num;
	fz_next(&c.rng);
	co.map_ahead_blocks = fz_below(&c.rng, 3);
	if (ph->quota) /* blocks ahead for the others to borrow */
		co.map_ahead_blocks = 1 + fz_below(&c.rng, 2);
	fz_ok(&c, kvmm_connect(&co, &c.conn));
	for (int sz = 0; sz < ph->nr_sizes; sz++) {
		struct kvmm_region_opts ro = fz_region_opts(sz);

		fz_ok(&c, kvmm_region_create(c.conn, &ro, &c.r[sz]));
	}
	if (fz_tracing) {
		struct kvmm_stats ks = { .size = sizeof(ks) };

		fz_ok(&c, kvmm_get_stats(c.conn, &ks));
		fz_trace(&c, "session %u, map-ahead %u blocks", ks.session_id,
			 co.map_ahead_blocks);
	}
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
