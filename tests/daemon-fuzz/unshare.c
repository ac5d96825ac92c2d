// SPDX-License-Identifier: MIT
/*
 * tests/daemon-fuzz: copy-on-write from a client process (ABI 1.20,
 * kvmm_seq_block_unshare(), SEQ_UNSHARE).  A read-only block of an open
 * sequence (a cached block a prefix open shared or reloaded: the cache's
 * pages, which every reader maps) is made the sequence's own, and then:
 *
 *   - the copy holds the shared block's bytes (its hash's) and is
 *     writable; before, a write into the block faulted;
 *   - bytes written into the copy stay there and show nowhere else: not
 *     in the client's other sequences, not in the cached block (a prefix
 *     open of the chain right after finds its hash's bytes, and maps
 *     the block read-only again: a write into it faults);
 *   - then the client writes the block's own bytes back, as an engine
 *     recomputing it would, so every later check and publish holds.
 *
 * Other clients' prefix opens and verifies of the same chains run
 * meanwhile: a copy that wrote into the shared pages would fail them
 * too.  A block already the sequence's own is answered 0 and left as it
 * is; one past the length (and the blocks mapped ahead) -ENODATA but
 * in phase 4.  Short of room (-ENOMEM, or -EDQUOT
 * under --quota) the block stays read-only and shared with its bytes; a
 * revocation the parent posted (phase 4) may answer -ENODATA, and is
 * applied then.
 */
#include <setjmp.h>
#include <signal.h>
#include <string.h>

#include "tests/daemon-fuzz/fuzz.h"

/* Bytes no hash's block holds: a function of the hash, its size and the
 * page, written into a copy to see where they show. */
#define FZ_PRIVATE 0x70c0ffee5eedull

static sigjmp_buf fz_probe_jmp;

static void fz_probe_handler(int sig)
{
	(void)sig;
	siglongjmp(fz_probe_jmp, 1);
}

/*
 * Does a write into addr fault?  The byte written is the one there, so a
 * write that wrongly goes through changes nothing that other readers
 * see: it is reported, not spread.
 */
static bool fz_write_faults(unsigned char *addr)
{
	volatile unsigned char *p = addr;
	struct sigaction sa = { .sa_handler = fz_probe_handler }, old_segv,
			 old_bus;
	unsigned char v = *p;
	volatile bool faulted = false;

	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, &old_segv);
	sigaction(SIGBUS, &sa, &old_bus);
	if (sigsetjmp(fz_probe_jmp, 1) == 0)
		*p = v;
	else
		faulted = true;
	sigaction(SIGSEGV, &old_segv, NULL);
	sigaction(SIGBUS, &old_bus, NULL);
	return faulted;
}

/* Block b of s is read-only (ro 1) or writable (0), as libkvmm says and
 * as a write into its first page finds. */
static void fz_expect_ro(struct fz_client *c, const struct fz_seq *s,
			 uint32_t b, int ro, const char *when)
{
	int got = kvmm_seq_block_readonly(c->r[s->sz], s->id, b);

	if (got != ro)
		fz_fail(c,
			"seq %u (chain %d) block %u %s: kvmm_seq_block_readonly() %d, %d expected",
			s->id, s->chain, b, when, got, ro);
	if (ro && !fz_write_faults(fz_page(c, s, b, 0) + b % 64))
		fz_fail(c,
			"seq %u (chain %d) block %u %s: a write into the read-only block went through",
			s->id, s->chain, b, when);
	if (ro)
		fz_add(&c->ph->cnt->ro_faults, 1);
}

static void fz_write_private(struct fz_client *c, const struct fz_seq *s,
			     uint32_t b)
{
	uint64_t h = fz_hash(s->sz, s->chain, b) ^ FZ_PRIVATE;

	for (uint32_t pg = 0; pg < fz_ppb(s->sz); pg++) {
		fz_page_fill(h, s->sz, pg, c->want);
		memcpy(fz_page(c, s, b, pg), c->want, CC_PAGE);
	}
}

static void fz_check_private(struct fz_client *c, const struct fz_seq *s,
			     uint32_t b)
{
	uint64_t h = fz_hash(s->sz, s->chain, b) ^ FZ_PRIVATE;

	for (uint32_t pg = 0; pg < fz_ppb(s->sz); pg++) {
		fz_page_fill(h, s->sz, pg, c->want);
		if (memcmp(fz_page(c, s, b, pg), c->want, CC_PAGE))
			fz_fail(c,
				"seq %u (chain %d) block %u page %u: the bytes written into its copy are gone",
				s->id, s->chain, b, pg);
	}
}

/*
 * The cached block of s's chain at b after its copy was written: a
 * prefix open of the chain's first b + 1 blocks (without actions: every
 * block with its bytes) on a free slot finds its hash's bytes, and maps
 * the shared ones read-only.  Nothing to do without a free slot or room.
 */
static void fz_check_cached(struct fz_client *c, const struct fz_seq *s,
			    uint32_t b)
{
	struct fz_seq *t = fz_free_slot(c);
	uint64_t h[FZ_CHAIN_BLOCKS];
	uint32_t nr = 0;
	int err;

	if (!t)
		return;
	t->sz = s->sz;
	t->chain = s->chain;
	fz_chain(t->sz, t->chain, h);
	err = kvmm_seq_open_prefix(c->r[t->sz], h, b + 1, &t->id, &nr);
	fz_trace(
		c,
		"prefix open of chain %d size %d, %u blocks, after a copy: %d, seq %u, %u blocks",
		t->chain, t->sz, b + 1, err, t->id, nr);
	if (fz_short(c, err))
		return;
	if (err || nr > b + 1)
		fz_fail(c,
			"prefix open of %u blocks of chain %d after a copy: %d, %u blocks",
			b + 1, t->chain, err, nr);
	t->open = true;
	t->len = nr * CC_TPB;
	fz_sync(c, t);
	for (uint32_t k = 0; k < fz_blocks(t->len); k++)
		fz_check(c, t, k, FZ_FROM_PREFIX);
	if (fz_blocks(t->len) > b &&
	    kvmm_seq_block_readonly(c->r[t->sz], t->id, b) == 1)
		fz_expect_ro(c, t, b, 1, "opened after a copy of it");
	fz_close(c, t);
}

/* A block past s's length and past the blocks the map-ahead thread
 * may have backed after it (at most 2): none there, -ENODATA. */
static void fz_unshare_past(struct fz_client *c, struct fz_seq *s)
{
	uint32_t first = fz_blocks(s->len) + 3;
	uint32_t max = fz_region_opts(s->sz).max_tokens / CC_TPB;
	uint32_t b = first + fz_below(&c->rng, max - first);
	int err = kvmm_seq_block_unshare(c->r[s->sz], s->id, b);

	fz_trace(c, "unshare seq %u block %u past its %u tokens: %d", s->id, b,
		 s->len, err);
	if (err != -ENODATA)
		fz_fail(c, "unshare of seq %u block %u past its %u tokens: %d",
			s->id, b, s->len, err);
	fz_add(&c->ph->cnt->unshare_nodata, 1);
}

void op_unshare(struct fz_client *c)
{
	struct fz_seq *s = fz_open_seq(c);
	uint32_t nb, b, k;
	int ro = 0, err;

	if (!s)
		return;
	fz_sync(c, s);
	nb = fz_blocks(s->len);
	/* not where the parent revokes: a revocation applied cuts the
	 * length before the block it took, and the blocks after it stay
	 * mapped until the sequence is cut or grows over them */
	if (!fz_below(&c->rng, 8) && !c->ph->revokes) {
		fz_unshare_past(c, s);
		return;
	}
	if (!nb)
		return;
	/* a read-only block from a random start, else a random own one */
	b = fz_below(&c->rng, nb);
	for (k = 0; k < nb; k++) {
		ro = kvmm_seq_block_readonly(c->r[s->sz], s->id, (b + k) % nb);
		if (ro < 0)
			fz_fail(c,
				"seq %u block %u below its %u tokens: readonly %d",
				s->id, (b + k) % nb, s->len, ro);
		if (ro)
			break;
	}
	if (ro)
		b = (b + k) % nb;
	fz_check(c, s, b, FZ_FROM_PREFIX);
	fz_expect_ro(c, s, b, ro, "before its unshare");
	err = kvmm_seq_block_unshare(c->r[s->sz], s->id, b);
	fz_trace(
		c,
		"unshare seq %u (chain %d size %d) block %u (read-only %d): %d",
		s->id, s->chain, s->sz, b, ro, err);
	if (!ro) {
		/* the sequence's own: nothing asked, nothing changed */
		if (err)
			fz_fail(c, "unshare of seq %u's own block %u: %d",
				s->id, b, err);
		fz_expect_ro(c, s, b, 0, "after an unshare of its own");
		fz_check(c, s, b, FZ_FROM_CLIENT);
		fz_add(&c->ph->cnt->unshare_own, 1);
		return;
	}
	fz_add(&c->ph->cnt->ops[OP_UNSHARE], 1);
	if (err == -ENODATA && c->ph->revokes) {
		/* revoked meanwhile: the revocation waits in our ring */
		if (kvmm_process_revocations(c->conn) < 0)
			fz_fail(c, "revocations after unshare's -ENODATA");
		fz_sync(c, s);
		if (b < fz_blocks(s->len))
			fz_fail(c,
				"unshare of seq %u block %u: -ENODATA, and the revocations left %u tokens",
				s->id, b, s->len);
		return;
	}
	if (fz_short(c, err)) {
		fz_add(&c->ph->cnt->unshare_short, 1);
		fz_sync(c, s);
		if (b < fz_blocks(s->len)) {
			fz_expect_ro(c, s, b, 1, "after a refused unshare");
			fz_check(c, s, b, FZ_FROM_PREFIX);
		}
		return;
	}
	if (err)
		fz_fail(c, "unshare of seq %u (chain %d) block %u: %d", s->id,
			s->chain, b, err);
	fz_add(&c->ph->cnt->unshared, 1);
	/* only this thread applies revocations, and it applied none: the
	 * block is still there, now the sequence's own */
	fz_expect_ro(c, s, b, 0, "after its unshare");
	fz_check(c, s, b, FZ_FROM_UNSHARE);
	fz_write_private(c, s, b);
	for (int i = 0; i < FZ_SEQS; i++)
		if (c->seqs[i].open && &c->seqs[i] != s)
			fz_verify(c, &c->seqs[i]);
	fz_check_cached(c, s, b);
	fz_sync(c, s);
	if (b >= fz_blocks(s->len))
		return; /* revoked since (applied by the prefix open) */
	fz_check_private(c, s, b);
	fz_write(c, s, b);
	fz_check(c, s, b, FZ_FROM_CLIENT);
}
