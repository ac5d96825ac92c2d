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
	struct kvmm_conn *c;
	int err;

	if ((argc != 4 && argc != 5) ||
	    kvmmctl_parse_u32(argv[1], &a.session_id) ||
	    kvmmctl_parse_u32(argv[2], &a.region_id) ||
	    kvmmctl_parse_u32(argv[3], &a.seq_id) ||
	    (argc == 5 && kvmmctl_parse_u32(argv[4], &a.first_block))) {
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
			err = -ETIMEDOUT;
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
	kvmm_disconnect(c);
	if (err == -ENOENT && pieces) {
		fprintf(stderr,
			"kvmmctl: revoke: session %u ended (cut off?) after %u piece(s)\n",
			a.session_id, pieces);
		return 1;
	}
	if (err) {
		fprintf(stderr, "kvmmctl: revoke: %s\n", kvmm_strerror(err));
		return 1;
	}
	if (pieces)
		printf("revoked in %u pieces\n", pieces + 1);
	return 0;
}
