// SPDX-License-Identifier: MIT
/*
 * kvmmctl kill SESSION_ID: cut a session off (ADMIN_KILL_SESSION); its
 * pages stay quarantined until its process exits.
 */
#include <errno.h>
#include <stdio.h>

#include "tools/kvmmctl/kvmmctl.h"

int cmd_kill(int argc, char **argv, struct kvmmctl_ctx *ctx)
{
	struct kvmm_admin_session a = { .size = sizeof(a) };

	if (argc != 2 || kvmmctl_parse_u32(argv[1], &a.session_id)) {
		fprintf(stderr, "usage: kvmmctl kill SESSION_ID\n");
		return 2;
	}
	return kvmmctl_simple(ctx, KVMM_CMD_ADMIN_KILL_SESSION, &a, sizeof(a));
}
