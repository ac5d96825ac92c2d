// SPDX-License-Identifier: MIT
/*
 * One client process of the soak (client.c, client.h): its ops.  Each
 * picks its sequence and sizes from the client's seed, checks what it
 * reads (client-check.c) and returns 0, or LOST when the session is gone
 * (kvmmd restarted, the admin killed it); an error the docs do not allow
 * for the call fails the soak.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "tests/daemon-soak/client.h"
#include "tests/daemon-soak/soak.h"
#include "tests/lib/wait.h"

struct soak_seq *pick_open(struct client *cl)
{
	uint32_t n = 0, idx[SOAK_MAX_SEQS];

	for (uint32_t i = 0; i < SOAK_MAX_SEQS; i++)
		if (cl->seq[i].open)
			idx[n++] = i;
	/* cppcheck-suppress uninitvar ; idx[0..n) are set, and
	 * soak_below(n) is below n */
	return n ? &cl->seq[idx[soak_below(&cl->rng, n)]] : NULL;
}

int op_close(struct client *cl, struct soak_seq *s)
{
	int err;

	verify_seq(cl, s);
	err = kvmm_seq_close(cl->r, s->id);
	note("close seq %u: %d", s->id, err);
	memset(s, 0, sizeof(*s));
	return allowed(cl, err, "seq_close", "") == LOST ? LOST : 0;
}

static int publish(struct client *cl, struct soak_seq *s, uint32_t first,
		   uint32_t n)
{
	int ret;

	if (!n)
		return 0;
	ret = kvmm_block_publish(cl->r, s->id, first, n,
				 first ? cl->hash[s->fam][first - 1] : 0,
				 &cl->hash[s->fam][first]);
	note("publish seq %u blocks %u..%u: %d", s->id, first, first + n - 1,
	     ret);
	if (ret > (int)n)
		soak_fail("publish of %u blocks returned %d", n, ret);
	if (ret > 0)
		soak_count(SC_PUBLISHED, (unsigned)ret);
	if (ret < 0 && ret != -ECONNRESET && revoked(cl)) {
		/* the admin may have taken the blocks meanwhile */
		soak_count(SC_OTHER_ALLOWED, 1);
		return 0;
	}
	return allowed(cl, ret, "block_publish", "") == LOST ? LOST : 0;
}

/*
 * Extend s to new_len: the blocks past its backed ones are fresh (zero
 * or ours); each that continues the family's contents gets them, the
 * others our own scratch words.  From a length inside a read-only block
 * the extend first makes that block ours (copy-on-write, ABI 1.20: the
 * same bytes, writable now; before, -EROFS).  0, LOST, or the allowed
 * -errno.
 */
static int extend(struct client *cl, struct soak_seq *s, uint32_t new_len)
{
	uint32_t old_blocks = (s->len + SOAK_TPB - 1) / SOAK_TPB;
	uint32_t new_blocks = (new_len + SOAK_TPB - 1) / SOAK_TPB;
	int64_t got;
	bool rofs = s->len % SOAK_TPB &&
		    kvmm_seq_block_readonly(cl->r, s->id, s->len / SOAK_TPB) ==
			    1;
	int err = kvmm_seq_extend(cl->r, s->id, new_len), a;

	note("extend seq %u from %u to %u (valid %u): %d", s->id, s->len,
	     new_len, s->valid, err);
	if (rofs && !err && !revoked(cl) &&
	    kvmm_seq_block_readonly(cl->r, s->id, s->len / SOAK_TPB) != 0)
		soak_fail("slot %u: extend from %u (inside a read-only block) "
			  "to %u left that block read-only",
			  cl->slot, s->len, new_len);
	a = allowed(cl, err, "seq_extend", "ENOMEM EDQUOT ENOBUFS");
	if (a) {
		if (a != LOST)
			sync_lengths(cl);
		return a == LOST ? LOST : err;
	}
	/* a revocation applied by this extend leaves it shorter: backed
	 * below the first revoked block (lifecycle.md, ordering 5) */
	got = kvmm_seq_len(cl->r, s->id);
	if (got != new_len) {
		if (!revoked(cl) || got > new_len || got % SOAK_TPB)
			soak_fail(
				"slot %u: extend of seq %u to %u left it %lld "
				"tokens long",
				cl->slot, s->id, new_len, (long long)got);
		new_blocks = (uint32_t)got / SOAK_TPB;
		if (s->valid > new_blocks)
			s->valid = new_blocks;
		new_len = (uint32_t)got;
		soak_count(SC_REVOKED, 1);
	}
	for (uint32_t b = old_blocks; b < new_blocks; b++) {
		check_fresh(cl, s->id, b, "extended");
		if (b == s->valid && b < SOAK_MAX_BLOCKS) {
			write_block(cl, s->id, b, cl->hash[s->fam][b]);
			s->how[b] = 'w';
			s->valid++;
		} else {
			write_block(cl, s->id, b,
				    soak_rand(&cl->rng) | 1ULL << 63);
		}
	}
	s->len = new_len;
	sync_lengths(cl);
	return 0;
}

/* A prefix open of a family, plain, with actions or early; then the
 * blocks it lacks are computed and published. */
int op_prefix(struct client *cl)
{
	struct soak_seq *s = NULL;
	struct kvmm_prefix_opts po = { .size = sizeof(po) };
	uint8_t act[SOAK_MAX_BLOCKS] = { 0 };
	uint32_t failed[SOAK_MAX_BLOCKS], nf = 0, nr = 0, id;
	uint32_t fam = soak_below(&cl->rng, SOAK_FAMILIES);
	uint32_t n = 1 + soak_below(&cl->rng, SOAK_MAX_BLOCKS);
	uint32_t mode = soak_below(&cl->rng, 4), full;
	bool recomputed = false;
	int err, a;

	for (uint32_t i = 0; i < SOAK_MAX_SEQS && !s; i++)
		if (!cl->seq[i].open)
			s = &cl->seq[i];
	if (!s) {
		s = pick_open(cl);
		if (op_close(cl, s))
			return LOST;
	}
	po.actions = act;
	po.flags = mode == 3 ? KVMM_PREFIX_OPEN_EARLY : 0;
	err = mode == 0 ?
		      kvmm_seq_open_prefix(cl->r, cl->hash[fam], n, &id, &nr) :
		      kvmm_seq_open_prefix_opts(cl->r, cl->hash[fam], n, &id,
						&nr, &po);
	a = allowed(cl, err, "seq_open_prefix", "ENOMEM EDQUOT ENOBUFS");
	if (a)
		return a;
	soak_count(SC_PREFIX_OPENS, 1);
	note("prefix open fam %u n %u mode %u: seq %u, %u blocks", fam, n, mode,
	     id, nr);
	if (nr > n)
		soak_fail("prefix open of %u hashes gave %u blocks", n, nr);
	*s = (struct soak_seq){
		.open = true, .id = id, .fam = fam, .len = nr * SOAK_TPB
	};
	if (kvmm_seq_len(cl->r, id) != nr * SOAK_TPB)
		soak_fail("prefix open of %u blocks: length %lld", nr,
			  (long long)kvmm_seq_len(cl->r, id));
	if (mode == 3) {
		soak_count(SC_EARLY_OPENS, 1);
		if (soak_below(&cl->rng, 5) == 0) {
			/* closed while its reloads may still run */
			err = kvmm_seq_close(cl->r, id);
			memset(s, 0, sizeof(*s));
			return allowed(cl, err, "seq_close", "") == LOST ?
				       LOST :
				       0;
		}
		if (soak_below(&cl->rng, 2)) {
			err = kvmm_seq_wait_ready(cl->r, id, nr, 0, failed,
						  SOAK_MAX_BLOCKS, NULL);
		} else {
			unsigned long long end = t_now_ms() + 10000;
			uint32_t pending = 1;

			/* 10 s of the clock, not 20000 tries of 500 us */
			while (pending && t_now_ms() <= end) {
				err = kvmm_seq_wait_ready(
					cl->r, id, nr, KVMM_WAIT_READY_POLL,
					failed, SOAK_MAX_BLOCKS, &pending);
				if (err < 0)
					break;
				if (pending)
					usleep(500);
			}
			if (err >= 0 && pending)
				soak_fail("early open: %u blocks still loading "
					  "after 10 s",
					  pending);
		}
		if ((err == -ESTALE || err == -ERANGE) && revoked(cl)) {
			/* revoked while it loaded (abi.md, PREFIX_OPEN): the
			 * next step boundary shortens the sequence; -ESTALE
			 * since ABI 1.20, -ERANGE to a 1.19 client */
			soak_count(SC_OTHER_ALLOWED, 1);
			s->valid = 0;
			return 0;
		}
		a = allowed(cl, err, "seq_wait_ready", "");
		if (a)
			return a;
		nf = (uint32_t)err;
	}
	for (uint32_t b = 0, f = 0; b < nr; b++) {
		bool was_failed = f < nf && failed[f] == b;

		if (was_failed)
			f++;
		if (mode && act[b] == KVMM_BLOCK_RECOMPUTE)
			check_fresh(cl, id, b, "recompute");
		s->how[b] = mode ? (char)('0' + act[b]) : 'p';
		if (was_failed || (mode && act[b] == KVMM_BLOCK_RECOMPUTE)) {
			if (was_failed)
				s->how[b] = 'f';
			write_block(cl, id, b, cl->hash[fam][b]);
			recomputed = true;
			soak_count(SC_RECOMPUTES, 1);
		} else {
			verify_block(cl, id, b, cl->hash[fam][b],
				     mode ? kvmm_block_action_string(act[b]) :
					    "prefix");
		}
	}
	s->valid = nr;
	if (nr < n && soak_below(&cl->rng, 10) < 7) {
		uint32_t len = n * SOAK_TPB;

		if (soak_below(&cl->rng, 3) == 0 && n < SOAK_MAX_BLOCKS)
			len += 1 + soak_below(&cl->rng, SOAK_TPB - 1);
		if (extend(cl, s, len) == LOST)
			return LOST;
	}
	full = s->len / SOAK_TPB < s->valid ? s->len / SOAK_TPB : s->valid;
	if (recomputed || soak_below(&cl->rng, 4) == 0)
		return publish(cl, s, 0, full);
	return publish(cl, s, nr, full > nr ? full - nr : 0);
}

int op_extend(struct client *cl)
{
	struct soak_seq *s = pick_open(cl);
	uint32_t max = SOAK_MAX_BLOCKS * SOAK_TPB, len;
	int err;

	if (!s || s->len >= max)
		return 0;
	len = s->len + 1 + soak_below(&cl->rng, 3 * SOAK_TPB);
	if (len > max)
		len = max;
	err = extend(cl, s, len);
	return err == LOST ? LOST : 0;
}

int op_truncate(struct client *cl)
{
	struct soak_seq *s = pick_open(cl);
	uint32_t len;
	int a;

	if (!s)
		return 0;
	len = soak_below(&cl->rng, s->len + 1);
	if (soak_below(&cl->rng, 2))
		len -= len % SOAK_TPB;
	a = kvmm_seq_truncate(cl->r, s->id, len);
	note("truncate seq %u from %u to %u: %d", s->id, s->len, len, a);
	a = allowed(cl, a, "seq_truncate", "");
	if (a)
		return a;
	s->len = len;
	if (s->valid > len / SOAK_TPB)
		s->valid = len / SOAK_TPB;
	verify_seq(cl, s);
	return 0;
}

int op_pin(struct client *cl)
{
	uint64_t h = cl->hash[soak_below(&cl->rng, SOAK_FAMILIES)]
			     [soak_below(&cl->rng, SOAK_MAX_BLOCKS)];
	struct kvmm_pin_opts o = { .size = sizeof(o) };
	uint32_t k = soak_below(&cl->rng, 10);

	if (k == 0)
		return allowed(cl, kvmm_block_unpin(cl->c, h), "block_unpin",
			       "ENOENT") == LOST ?
			       LOST :
			       0;
	if (k < 8) {
		o.flags = KVMM_PIN_F_TTL;
		o.ttl_ns = (5 + soak_below(&cl->rng, 300)) * 1000000ULL;
		if (k < 3)
			o.flags |= KVMM_PIN_F_DEMOTE;
	}
	if (k == 9) {
		o.flags |= KVMM_PIN_F_PRIORITY;
		o.priority = (int32_t)soak_below(&cl->rng, 256) - 128;
	}
	soak_count(SC_PINS, 1);
	return allowed(cl, kvmm_block_pin(cl->c, h, &o), "block_pin",
		       "ENOENT EDQUOT") == LOST ?
		       LOST :
		       0;
}

/* A forked child: the inherited connection answers -ECHILD and its
 * mappings still hold our bytes; then it drops it, and half the time
 * connects on its own and reads a prefix. */
int op_fork(struct client *cl)
{
	pid_t p;
	int st;

	soak_count(SC_FORKS, 1);
	note("fork");
	p = fork();
	if (p < 0)
		soak_fail("fork: %s", strerror(errno));
	if (p == 0) {
		struct soak_seq *s = pick_open(cl);
		uint32_t k = soak_below(&cl->rng, 3);

		cl->child = true;
#ifdef __SANITIZE_ADDRESS__
		/*
		 * gcc 12's ASan runtime takes no allocator lock around
		 * fork() (LLVM added that in December 2023, pull 75290): a
		 * child that mallocs may wait for good on a lock the
		 * parent's map-ahead thread held (a hang the soak found).
		 * glibc's malloc is fork-safe; under ASan the child only
		 * reads and asks.
		 */
		if (k == 1)
			k = 0;
#endif
		if (k == 2)
			_exit(0); /* dies holding the inherited connection */
		if (kvmm_nop(cl->c, 0) != -ECHILD ||
		    (s && kvmm_seq_extend(cl->r, s->id, s->len + 1) != -ECHILD))
			soak_fail("slot %u: a forked child's call on the "
				  "inherited connection was not -ECHILD",
				  cl->slot);
		if (s)
			verify_seq(cl, s);
#ifdef __SANITIZE_ADDRESS__
		_exit(0); /* kvmm_disconnect() frees (above) */
#endif
		kvmm_disconnect(cl->c);
		cl->c = NULL;
		cl->r = NULL;
		memset(cl->seq, 0, sizeof(cl->seq));
		if (k == 1) {
			connect_region(cl);
			for (int i = 0; i < 3; i++)
				if (op_prefix(cl) == LOST)
					break;
			disconnect(cl);
		}
		_exit(0);
	}
	if (waitpid(p, &st, 0) != p)
		soak_fail("waitpid: %s", strerror(errno));
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		soak_fail("slot %u: forked child exit status %#x", cl->slot,
			  st);
	return 0;
}

int op_step(struct client *cl)
{
	int a = allowed(cl, kvmm_step_begin(cl->c), "step_begin", "");

	note("step");
	if (!a)
		a = allowed(cl, kvmm_nop(cl->c, soak_below(&cl->rng, 2)), "nop",
			    "");
	if (!a)
		a = allowed(cl, kvmm_step_end(cl->c), "step_end", "");
	if (!a && soak_below(&cl->rng, 2)) {
		int n = kvmm_process_revocations(cl->c);

		a = allowed(cl, n < 0 ? n : 0, "process_revocations", "");
	}
	if (!a)
		sync_lengths(cl);
	for (uint32_t i = 0; !a && i < SOAK_MAX_SEQS; i++)
		if (cl->seq[i].open)
			verify_seq(cl, &cl->seq[i]);
	return a == LOST ? LOST : 0;
}
