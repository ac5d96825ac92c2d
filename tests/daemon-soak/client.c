// SPDX-License-Identifier: MIT
/*
 * One client process of the soak: an engine-like loop through libkvmm,
 * as one uid, that checks every byte it reads.
 *
 * Contents are named by hash and their bytes follow from it: word w of
 * page p of the block named h holds pat(h, p, w) in its low 56 bits, and
 * in its top byte the tag (1 + uid index) of the uid that wrote it.  So a
 * reader of a cached block checks the low 56 bits of every word (the
 * cache is lossless) and the tag (under --cache-scope uid only its own
 * uid can have written it), and a fresh page (an extend's, a RECOMPUTE
 * block's) holds only zeros or words with its own uid's tag: another
 * uid's bytes there are a page that changed hands unscrubbed.
 *
 * The errors a call may return are those the documentation gives for
 * what the soak does to it (allowed() below, and Documentation/
 * performance.md, "The mixed-workload soak"); -ECONNRESET (kvmmd
 * restarted, or the admin killed the session) makes the client connect
 * again.  Any other error, or a wrong byte, is soak_fail().
 */
#include <errno.h>
#include <grp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "tests/daemon-soak/soak.h"

#define LO56 0x00ffffffffffffffULL
#define LOST 1 /* an op's return: the session is gone, connect again */

struct soak_seq {
	bool open;
	uint32_t id;
	uint32_t fam;
	uint32_t len; /* tokens, as we set it */
	uint32_t valid; /* blocks [0, valid) hold the family's contents */
	/* how each block came: 'w' written by us, 'p' a plain prefix open,
	 * else the action (kvmm_block_action) + '0' */
	char how[SOAK_MAX_BLOCKS];
};

struct client {
	unsigned int slot;
	uid_t uid;
	uint64_t tag; /* 1 + uid index, in the top byte of what we write */
	bool child; /* a forked child, with a session of its own */
	uint64_t rng;
	struct kvmm_conn *c;
	struct kvmm_region *r;
	uint64_t seed;
	uint64_t hash[SOAK_FAMILIES][SOAK_MAX_BLOCKS];
	struct soak_seq seq[SOAK_MAX_SEQS];
	/* every slot's ranges, reserved with the region; kept because a
	 * forked child's kvmm_seq_k_ptr() answers 0 */
	uint64_t base[SOAK_MAX_SEQS][SOAK_PPB];
};

struct soak_shared *soak;

/* The last ops of this process, printed when an invariant breaks. */
#define HIST 24
static char hist[HIST][120];
static unsigned int nhist;

static void __attribute__((format(printf, 1, 2))) note(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(hist[nhist++ % HIST], sizeof(hist[0]), fmt, ap);
	va_end(ap);
}

/* Has the admin revoked anything of this session? */
static bool revoked(const struct client *cl)
{
	return atomic_load(&soak->revokes[cl->slot]) != 0;
}

void soak_fail(const char *fmt, ...)
{
	va_list ap;
	int zero = 0;

	if (atomic_compare_exchange_strong(&soak->failed, &zero, 1)) {
		va_start(ap, fmt);
		vsnprintf(soak->why, sizeof(soak->why), fmt, ap);
		va_end(ap);
	}
	va_start(ap, fmt);
	fprintf(stderr, "soak: pid %d: ", (int)getpid());
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	for (unsigned int i = nhist > HIST ? nhist - HIST : 0; i < nhist; i++)
		fprintf(stderr, "  op %u: %s\n", i, hist[i % HIST]);
	_exit(1);
}

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static uint64_t pat(uint64_t h, uint32_t page, uint32_t word)
{
	return mix64(h ^ ((uint64_t)page << 40) ^ word) & LO56;
}

static uint64_t *page_at(struct client *cl, uint32_t seq, uint32_t block,
			 uint32_t page)
{
	if (seq >= SOAK_MAX_SEQS)
		soak_fail("slot %u: seq %u", cl->slot, seq);
	return (uint64_t *)(uintptr_t)(cl->base[seq][page] +
				       (uint64_t)block * SOAK_PAGE);
}

static void write_block(struct client *cl, uint32_t seq, uint32_t block,
			uint64_t h)
{
	for (uint32_t p = 0; p < SOAK_PPB; p++) {
		uint64_t *w = page_at(cl, seq, block, p);

		for (uint32_t i = 0; i < SOAK_WORDS; i++)
			w[i] = pat(h, p, i) | cl->tag << 56;
	}
}

/* How block b of the open sequence id came (struct soak_seq.how). */
static char seq_how(const struct client *cl, uint32_t id, uint32_t b)
{
	for (uint32_t i = 0; i < SOAK_MAX_SEQS; i++)
		if (cl->seq[i].open && cl->seq[i].id == id &&
		    b < SOAK_MAX_BLOCKS)
			return cl->seq[i].how[b] ? cl->seq[i].how[b] : '-';
	return '?';
}

/* A block we hold whose bytes are the contents named h: every word's
 * low 56 bits, and a tag of a uid that may have written it. */
static void verify_block(struct client *cl, uint32_t seq, uint32_t block,
			 uint64_t h, const char *how)
{
	for (uint32_t p = 0; p < SOAK_PPB; p++) {
		const uint64_t *w = page_at(cl, seq, block, p);

		for (uint32_t i = 0; i < SOAK_WORDS; i++) {
			uint64_t v = w[i], tag = v >> 56;
			bool tag_ok = soak->scope_uid ?
					      tag == cl->tag :
					      tag >= 1 && tag <= SOAK_UIDS;

			if ((v & LO56) == pat(h, p, i) && tag_ok)
				continue;
			{
				uint32_t ids[SOAK_PPB] = { 0 };
				uint32_t zero = 0;

				for (uint32_t j = 0; j < SOAK_WORDS; j++)
					zero += !w[j];
				kvmm_seq_block_pages(cl->r, seq, block, ids,
						     SOAK_PPB);
				soak_fail("uid %u (slot %u%s): %s block %u of "
					  "seq %u (hash %016llx, came as "
					  "'%c', read-only %d, pages %u %u %u "
					  "%u, len %lld): page %u word %u "
					  "is %016llx, expected %014llx "
					  "under a tag %s; %u words of the "
					  "page are 0",
					  (unsigned)cl->uid, cl->slot,
					  revoked(cl) ? ", revoked" : "", how,
					  block, seq, (unsigned long long)h,
					  seq_how(cl, seq, block),
					  kvmm_seq_block_readonly(cl->r, seq,
								  block),
					  ids[0], ids[1], ids[2], ids[3],
					  (long long)kvmm_seq_len(cl->r, seq),
					  p, i, (unsigned long long)v,
					  (unsigned long long)pat(h, p, i),
					  soak->scope_uid ? "of ours" : "1..3",
					  zero);
			}
		}
	}
	soak_count(SC_BLOCKS_VERIFIED, 1);
}

/* A page just given to us: zeros, or what our uid wrote. */
static void check_fresh(struct client *cl, uint32_t seq, uint32_t block,
			const char *how)
{
	for (uint32_t p = 0; p < SOAK_PPB; p++) {
		const uint64_t *w = page_at(cl, seq, block, p);

		for (uint32_t i = 0; i < SOAK_WORDS; i++)
			if (w[i] && w[i] >> 56 != cl->tag)
				soak_fail("uid %u (slot %u): fresh page of %s "
					  "block %u of seq %u: word %u of page "
					  "%u is %016llx, written by tag %llu",
					  (unsigned)cl->uid, cl->slot, how,
					  block, seq, i, p,
					  (unsigned long long)w[i],
					  (unsigned long long)(w[i] >> 56));
	}
	soak_count(SC_FRESH_CHECKED, 1);
}

/*
 * err from `what`: 0 or an error the docs allow for it (counted),
 * LOST when the session is gone; anything else fails the soak.  The
 * allowed set per call is in `ok`, a string of errno names.
 */
static int allowed(struct client *cl, int err, const char *what, const char *ok)
{
	const char *name;

	if (err >= 0)
		return 0;
	if (err == -ECONNRESET)
		return LOST;
	switch (-err) {
	case ENOMEM:
		name = "ENOMEM";
		break;
	case EDQUOT:
		name = "EDQUOT";
		break;
	case ENOBUFS:
		name = "ENOBUFS";
		break;
	case ENOENT:
		name = "ENOENT";
		break;
	case EROFS:
		name = "EROFS";
		break;
	default:
		name = NULL;
	}
	if (!name || !strstr(ok, name))
		soak_fail("uid %u (slot %u%s): %s returned %d (%s), allowed: "
			  "%s",
			  (unsigned)cl->uid, cl->slot,
			  revoked(cl) ? ", revoked" : "", what, err,
			  kvmm_strerror(err), ok);
	soak_count(err == -ENOMEM ? SC_ENOMEM :
		   err == -EDQUOT ? SC_EDQUOT :
				    SC_OTHER_ALLOWED,
		   1);
	return -1;
}

static void family_tokens(uint32_t fam, uint32_t *tok)
{
	for (uint32_t b = 0; b < SOAK_MAX_BLOCKS; b++) {
		uint32_t src = b < 1 + fam % 3 ? fam % 4 : fam;

		for (uint32_t t = 0; t < SOAK_TPB; t++)
			tok[b * SOAK_TPB + t] = (uint32_t)mix64(
				((uint64_t)src << 32) | (b * SOAK_TPB + t));
	}
}

static void disconnect(struct client *cl)
{
	if (cl->c)
		kvmm_disconnect(cl->c);
	cl->c = NULL;
	cl->r = NULL;
	memset(cl->seq, 0, sizeof(cl->seq));
}

/* Connect and create the region; waits out a kvmmd restart. */
static void connect_region(struct client *cl)
{
	struct kvmm_connect_opts co = { .size = sizeof(co) };
	struct kvmm_region_opts ro = { .size = sizeof(ro),
				       .layers = SOAK_LAYERS,
				       .kv_heads = 1,
				       .head_dim = 32,
				       .dtype_bytes = 2,
				       .max_seqs = SOAK_MAX_SEQS,
				       .max_tokens =
					       SOAK_MAX_BLOCKS * SOAK_TPB };
	static uint32_t tok[SOAK_MAX_BLOCKS * SOAK_TPB];
	char name[32];
	int err;

	snprintf(name, sizeof(name), "soak-%u", cl->slot);
	co.socket_path = soak->sock;
	co.name = name;
	/* sometimes no map-ahead, sometimes more than the default */
	co.map_ahead_set = 1;
	co.map_ahead_blocks = soak_below(&cl->rng, 3);
	if (!cl->child) /* a new session: no revocation yet */
		atomic_store(&soak->revokes[cl->slot], 0);
	for (int tries = 0;; tries++) {
		if (atomic_load(&soak->stop))
			_exit(0);
		err = kvmm_connect(&co, &cl->c);
		if (!err) {
			err = kvmm_region_create(cl->c, &ro, &cl->r);
			if (!err)
				break;
			kvmm_disconnect(cl->c);
			cl->c = NULL;
		}
		/* kvmmd restarting (no socket, refused, reset), or the
		 * admin killed us between connect and region */
		if (err != -ENOENT && err != -ECONNREFUSED &&
		    err != -ECONNRESET && err != -EAGAIN)
			soak_fail("uid %u (slot %u): connect: %d (%s)",
				  (unsigned)cl->uid, cl->slot, err,
				  kvmm_strerror(err));
		if (tries > 3000)
			soak_fail("slot %u: no kvmmd for 30 s", cl->slot);
		usleep(10000);
	}
	if (kvmm_region_tokens_per_block(cl->r) != SOAK_TPB)
		soak_fail("tokens per block %u",
			  kvmm_region_tokens_per_block(cl->r));
	for (uint32_t q = 0; q < SOAK_MAX_SEQS; q++) {
		for (uint32_t p = 0; p < SOAK_PPB; p++) {
			cl->base[q][p] =
				p % 2 ? kvmm_seq_v_ptr(cl->r, q, p / 2) :
					kvmm_seq_k_ptr(cl->r, q, p / 2);
			if (!cl->base[q][p])
				soak_fail("slot %u: no address for seq %u",
					  cl->slot, q);
		}
	}
	if (kvmm_region_hash_seed(cl->r, "soak", &cl->seed))
		soak_fail("hash seed");
	for (uint32_t f = 0; f < SOAK_FAMILIES; f++) {
		family_tokens(f, tok);
		if (kvmm_hash_chain(cl->seed, 0, tok,
				    SOAK_MAX_BLOCKS * SOAK_TPB, SOAK_TPB,
				    cl->hash[f],
				    SOAK_MAX_BLOCKS) != SOAK_MAX_BLOCKS)
			soak_fail("hash chain");
	}
}

static struct soak_seq *pick_open(struct client *cl)
{
	uint32_t n = 0, idx[SOAK_MAX_SEQS];

	for (uint32_t i = 0; i < SOAK_MAX_SEQS; i++)
		if (cl->seq[i].open)
			idx[n++] = i;
	return n ? &cl->seq[idx[soak_below(&cl->rng, n)]] : NULL;
}

static void verify_seq(struct client *cl, struct soak_seq *s)
{
	for (uint32_t b = 0; b < s->valid; b++)
		verify_block(cl, s->id, b, cl->hash[s->fam][b], "held");
}

/*
 * An admin revocation shortens a sequence where libkvmm applies it (an
 * extend, a step boundary): its length drops to the first revoked block
 * (lifecycle.md, "Revocation handshake").  Only then, and never longer.
 */
static void sync_lengths(struct client *cl)
{
	for (uint32_t i = 0; i < SOAK_MAX_SEQS; i++) {
		struct soak_seq *s = &cl->seq[i];
		int64_t len;

		if (!s->open)
			continue;
		len = kvmm_seq_len(cl->r, s->id);
		if (len < 0 || len > s->len)
			soak_fail("slot %u: seq %u is %lld tokens long, we set "
				  "%u",
				  cl->slot, s->id, (long long)len, s->len);
		if (len == s->len)
			continue;
		if (!revoked(cl) || len % SOAK_TPB)
			soak_fail("slot %u: seq %u cut to %lld tokens, %s",
				  cl->slot, s->id, (long long)len,
				  revoked(cl) ? "inside a block" :
						"never revoked");
		note("seq %u revoked: %u -> %lld", s->id, s->len,
		     (long long)len);
		s->len = (uint32_t)len;
		if (s->valid > s->len / SOAK_TPB)
			s->valid = s->len / SOAK_TPB;
		soak_count(SC_REVOKED, 1);
	}
}

static int op_close(struct client *cl, struct soak_seq *s)
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
static int op_prefix(struct client *cl)
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
			uint32_t pending = 1;

			for (int i = 0; i < 20000 && pending; i++) {
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

static int op_extend(struct client *cl)
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

static int op_truncate(struct client *cl)
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

static int op_pin(struct client *cl)
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
static int op_fork(struct client *cl)
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

static int op_step(struct client *cl)
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

void soak_client(unsigned int slot, uint64_t seed)
{
	static struct client cl;
	uid_t uid = SOAK_UID0 + slot % SOAK_UIDS;

	cl.slot = slot;
	cl.uid = uid;
	cl.tag = 1 + slot % SOAK_UIDS;
	cl.rng = seed | 1;
	if (setgroups(0, NULL) || setresgid(uid, uid, uid) ||
	    setresuid(uid, uid, uid))
		soak_fail("slot %u: cannot become uid %u: %s", slot,
			  (unsigned)uid, strerror(errno));
	connect_region(&cl);
	while (!atomic_load(&soak->stop)) {
		uint32_t k = soak_below(&cl.rng, 100);
		int ret;

		soak_count(SC_OPS, 1);
		if (k < 35) {
			ret = op_prefix(&cl);
		} else if (k < 50) {
			ret = op_extend(&cl);
		} else if (k < 58) {
			ret = op_truncate(&cl);
		} else if (k < 70) {
			struct soak_seq *s = pick_open(&cl);

			ret = s ? op_close(&cl, s) : 0;
		} else if (k < 80) {
			ret = op_pin(&cl);
		} else if (k < 82) {
			ret = op_fork(&cl);
		} else if (k < 97) {
			ret = op_step(&cl);
		} else {
			/* a clean goodbye, and back */
			disconnect(&cl);
			connect_region(&cl);
			ret = 0;
		}
		if (ret == LOST) {
			note("lost the session");
			soak_count(SC_RECONNECTS, 1);
			disconnect(&cl);
			connect_region(&cl);
		}
	}
	disconnect(&cl);
	_exit(0);
}
