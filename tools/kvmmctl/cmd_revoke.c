// SPDX-License-Identifier: MIT
/*
 * kvmmctl revoke SESSION REGION SEQ [FIRST_BLOCK]: ask a session to give
 * back the pages of a sequence from FIRST_BLOCK on (ADMIN_REVOKE); the
 * client must acknowledge within the revoke timeout or be cut off.
 *
 * A sequence of more pages than the client's revocation ring has room for
 * is taken back in pieces: the daemon revokes the last blocks that fit and
 * answers -EAGAIN; kvmmctl asks again as the client takes the entries off
 * its ring (-EBUSY meanwhile), until the whole range is revoked.
 *
 * The daemon answers a bad id -ENOENT, -EPERM or -EINVAL whichever
 * argument it was; a refusal is explained from ADMIN_SESSIONS (the
 * sessions, and since ABI 1.13 their regions and open sequences), so
 * the message names the argument that was wrong.
 */
#include <errno.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "kvmm/lib/client.h"
#include "tools/kvmmctl/kvmmctl.h"

/* How long a piecewise revocation waits for the client to make room
 * (longer than any sane --revoke-timeout: the daemon cuts a client off
 * that does not take its entries). */
#define REVOKE_PIECES_MS 120000

/* The ids of session sid's regions, ", "-separated; "none" if none. */
static void print_region_ids(const struct kvmmctl_sessions *ss, uint32_t sid)
{
	const struct kvmm_region_info *e = NULL;
	const char *sep = "";
	uint32_t i;

	while ((e = kvmmctl_region_next(ss, e, &i))) {
		if (e->session_id != sid)
			continue;
		fprintf(stderr, "%s%u", sep, e->region_id);
		sep = ", ";
	}
	if (!*sep)
		fprintf(stderr, "none");
}

/*
 * Say which of a's ids kvmmd did not take (err its answer), looked up
 * in ADMIN_SESSIONS over c.  True when it printed a message; false
 * leaves the caller's generic one (the lookup failed, or the ids are
 * all there and the answer had another cause).
 */
static bool revoke_explain(struct kvmm_conn *c,
			   const struct kvmm_admin_revoke *a, int err)
{
	const struct kvmm_session_info *s;
	const struct kvmm_region_info *r;
	struct kvmmctl_sessions ss;
	bool said = true;

	if (kvmmctl_sessions_fetch(c, &ss))
		return false;
	s = kvmmctl_session_by_id(&ss, a->session_id);
	r = kvmmctl_region_by_id(&ss, a->region_id);
	if (!s && ss.rep->total <= ss.rep->nr) {
		fprintf(stderr,
			"kvmmctl: revoke: no session %u (kvmmctl sessions lists them)\n",
			a->session_id);
	} else if (!s || !ss.regions || ss.regions->total > ss.regions->nr) {
		said = false; /* an older kvmmd, or a list cut short */
	} else if (!r || r->session_id != a->session_id) {
		fprintf(stderr, "kvmmctl: revoke: session %u has no region %u",
			a->session_id, a->region_id);
		if (r)
			fprintf(stderr, " (it is session %u's)", r->session_id);
		fprintf(stderr, "; its regions: ");
		print_region_ids(&ss, a->session_id);
		fputc('\n', stderr);
	} else if (a->seq_id >= r->max_seqs) {
		fprintf(stderr,
			"kvmmctl: revoke: region %u has sequences 0 to %u, not %u\n",
			a->region_id, r->max_seqs - 1, a->seq_id);
	} else if (err == -ENOENT) {
		fprintf(stderr,
			"kvmmctl: revoke: sequence %u of region %u is not open (kvmmctl sessions lists the open ones)\n",
			a->seq_id, a->region_id);
	} else if (err == -EINVAL && a->first_block >= r->max_blocks) {
		fprintf(stderr,
			"kvmmctl: revoke: FIRST_BLOCK %u is past the end of region %u's sequences (%u blocks: 0 to %u)\n",
			a->first_block, a->region_id, r->max_blocks,
			r->max_blocks - 1);
	} else {
		said = false;
	}
	kvmmctl_sessions_free(&ss);
	return said;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int cmd_revoke(int argc, char **argv, struct kvmmctl_ctx *ctx)
{
	struct kvmm_admin_revoke a = { .size = sizeof(a) };
	unsigned int pieces = 0;
	uint64_t deadline, said = 0;
	bool client_slow = false;
	struct kvmm_conn *c;
	int err;

	if (kvmmctl_args("revoke", argc, argv, 3, 4,
			 "revoke SESSION REGION SEQ [FIRST_BLOCK]"))
		return 2;
	if (kvmmctl_parse_u32("revoke", "SESSION", argv[1], &a.session_id) ||
	    kvmmctl_parse_u32("revoke", "REGION", argv[2], &a.region_id) ||
	    kvmmctl_parse_u32("revoke", "SEQ", argv[3], &a.seq_id) ||
	    (argc == 5 && kvmmctl_parse_u32("revoke", "FIRST_BLOCK", argv[4],
					    &a.first_block))) {
		fprintf(stderr,
			"usage: kvmmctl revoke SESSION REGION SEQ [FIRST_BLOCK]\n");
		return 2;
	}
	if (kvmmctl_connect(ctx, &c))
		return 1;
	deadline = now_ms() + REVOKE_PIECES_MS;
	for (;;) {
		err = kc_request(c, KVMM_CMD_ADMIN_REVOKE, &a, sizeof(a), NULL,
				 0, NULL);
		if (err == -EAGAIN)
			pieces++;
		else if (err != -EBUSY || !pieces)
			break; /* done, or an error of the first request */
		if (now_ms() > deadline) {
			/* kvmmd answers each ask at once: it is the client
			 * that did not make room (not --timeout's) */
			client_slow = true;
			break;
		}
		if (now_ms() - said >= 1000) {
			said = now_ms();
			fprintf(stderr,
				"kvmmctl: revoke: %u piece%s posted, waiting for session %u to take %s off its ring\n",
				pieces, pieces == 1 ? "" : "s", a.session_id,
				pieces == 1 ? "it" : "them");
		}
		usleep(10000);
	}
	if (client_slow) {
		fprintf(stderr,
			"kvmmctl: revoke: session %u region %u sequence %u: %u piece%s posted, the rest not taken within %d s (the client does not take its entries off its ring)\n",
			a.session_id, a.region_id, a.seq_id, pieces,
			pieces == 1 ? "" : "s", REVOKE_PIECES_MS / 1000);
		err = -ETIMEDOUT;
	} else if (err == -ENOENT && pieces) {
		fprintf(stderr,
			"kvmmctl: revoke: session %u ended (cut off?) after %u piece(s)\n",
			a.session_id, pieces);
	} else if (err == -ENODATA) {
		fprintf(stderr,
			"kvmmctl: revoke: sequence %u of region %u has no pages from block %u on\n",
			a.seq_id, a.region_id, a.first_block);
	} else if (err &&
		   ((err != -ENOENT && err != -EPERM && err != -EINVAL) ||
		    !revoke_explain(c, &a, err))) {
		fprintf(stderr,
			"kvmmctl: revoke: session %u region %u sequence %u: %s\n",
			a.session_id, a.region_id, a.seq_id,
			kvmmctl_strerror(ctx, err));
	}
	kvmm_disconnect(c);
	if (err)
		return 1;
	/* --json: always one object, where the text says nothing for a
	 * revocation of one piece */
	if (ctx->json)
		printf("{\"session\":%u,\"region\":%u,\"seq\":%u,\"first_block\":%u,\"pieces\":%u}\n",
		       a.session_id, a.region_id, a.seq_id, a.first_block,
		       pieces + 1);
	else if (pieces)
		printf("revoked in %u pieces\n", pieces + 1);
	return 0;
}
