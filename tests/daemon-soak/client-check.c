// SPDX-License-Identifier: MIT
/*
 * One client process of the soak (client.c, client.h): the contents
 * every block's bytes follow from (pat(): word w of page p of the block
 * named h, under the writer's uid tag), the checks of a held block, of a
 * fresh page and of the sequences' lengths after revocations, the errors
 * each call may return (allowed()), and soak_fail() with the last ops
 * (note()) of this process.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "tests/daemon-soak/client.h"
#include "tests/daemon-soak/soak.h"

/* The last ops of this process, printed when an invariant breaks. */
#define HIST 24
static char hist[HIST][120];
static unsigned int nhist;

void __attribute__((format(printf, 1, 2))) note(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(hist[nhist++ % HIST], sizeof(hist[0]), fmt, ap);
	va_end(ap);
}

/* Has the admin revoked anything of this session? */
bool revoked(const struct client *cl)
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

void write_block(struct client *cl, uint32_t seq, uint32_t block, uint64_t h)
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
void verify_block(struct client *cl, uint32_t seq, uint32_t block, uint64_t h,
		  const char *how)
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
void check_fresh(struct client *cl, uint32_t seq, uint32_t block,
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
int allowed(struct client *cl, int err, const char *what, const char *ok)
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

void verify_seq(struct client *cl, struct soak_seq *s)
{
	for (uint32_t b = 0; b < s->valid; b++)
		verify_block(cl, s->id, b, cl->hash[s->fam][b], "held");
}

/*
 * An admin revocation shortens a sequence where libkvmm applies it (an
 * extend, a step boundary): its length drops to the first revoked block
 * (lifecycle.md, "Revocation handshake").  Only then, and never longer.
 */
void sync_lengths(struct client *cl)
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
