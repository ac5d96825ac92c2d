// SPDX-License-Identifier: MIT
/*
 * kvmmctl kill SESSION_ID: cut a session off (ADMIN_KILL_SESSION); its
 * pages stay quarantined until its process exits.  The daemon's
 * -ENOENT is said as "no session N", not a bare strerror.
 */
#include <errno.h>
#include <stdio.h>

#include "tools/kvmmctl/kvmmctl.h"

int cmd_kill(int argc, char **argv, struct kvmmctl_ctx *ctx)
{
	struct kvmm_admin_session a = { .size = sizeof(a) };
	struct kvmm_conn *c;
	int err;

	if (kvmmctl_args("kill", argc, argv, 1, 1, "kill SESSION_ID"))
		return 2;
	if (kvmmctl_parse_u32("kill", "SESSION_ID", argv[1], &a.session_id)) {
		fprintf(stderr, "usage: kvmmctl kill SESSION_ID\n");
		return 2;
	}
	if (kvmmctl_connect(ctx, &c))
		return 1;
	err = kc_request(c, KVMM_CMD_ADMIN_KILL_SESSION, &a, sizeof(a), NULL, 0,
			 NULL);
	if (err == -EINVAL && a.session_id == c->hello.session_id)
		fprintf(stderr,
			"kvmmctl: kill: session %u is kvmmctl's own connection\n",
			a.session_id);
	else if (err == -ENOENT)
		fprintf(stderr,
			"kvmmctl: kill: no session %u (kvmmctl sessions lists them)\n",
			a.session_id);
	else if (err)
		fprintf(stderr, "kvmmctl: kill: session %u: %s\n", a.session_id,
			kvmmctl_strerror(ctx, err));
	kvmm_disconnect(c);
	return err ? 1 : 0;
}
