// SPDX-License-Identifier: MIT
/*
 * kvmmctl revoke SESSION REGION SEQ [FIRST_BLOCK]: ask a session to give
 * back the pages of a sequence from FIRST_BLOCK on (ADMIN_REVOKE); the
 * client must acknowledge within the revoke timeout or be cut off.
 */
#include <errno.h>
#include <stdio.h>

#include "tools/kvmmctl/kvmmctl.h"

int cmd_revoke(int argc, char **argv, struct kvmmctl_ctx *ctx)
{
	struct kvmm_admin_revoke a = { .size = sizeof(a) };

	if ((argc != 4 && argc != 5) ||
	    kvmmctl_parse_u32(argv[1], &a.session_id) ||
	    kvmmctl_parse_u32(argv[2], &a.region_id) ||
	    kvmmctl_parse_u32(argv[3], &a.seq_id) ||
	    (argc == 5 && kvmmctl_parse_u32(argv[4], &a.first_block))) {
		fprintf(stderr,
			"usage: kvmmctl revoke SESSION REGION SEQ [FIRST_BLOCK]\n");
		return 2;
	}
	return kvmmctl_simple(ctx, KVMM_CMD_ADMIN_REVOKE, &a, sizeof(a));
}
