// SPDX-License-Identifier: MIT
/*
 * kvmmctl log-level LEVEL: change the daemon's log level at run time.
 */
#include <errno.h>
#include <stdio.h>
#include "kvmm/kvmmd/options.h"

#include "tools/kvmmctl/kvmmctl.h"

static const char *const log_names[] = { "err", "warn", "info", "debug" };

int cmd_log_level(int argc, char **argv, struct kvmmctl_ctx *ctx)
{
	struct kvmm_admin_log_level a = { .size = sizeof(a) };
	int l;

	/* a missing or extra word is named as other commands' are (a bare
	 * usage line said nothing of what was wrong) */
	if (kvmmctl_args("log-level", argc, argv, 1, 1,
			 "log-level err|warn|info|debug"))
		return 2;
	l = kd_parse_log_level(argv[1]);
	if (l < 0) {
		fprintf(stderr,
			"kvmmctl: log-level: '%s' is not err, warn, info or debug\n"
			"usage: kvmmctl log-level err|warn|info|debug\n",
			argv[1]);
		return 2;
	}
	a.level = l;
	if (kvmmctl_simple(ctx, KVMM_CMD_ADMIN_SET_LOG_LEVEL, &a, sizeof(a)))
		return 1;
	/* it printed nothing: say what kvmmd logs now (in JSON too under
	 * --json, which it ignored, printing this text) */
	if (ctx->json)
		printf("{\"log_level\":\"%s\"}\n", log_names[l]);
	else
		printf("kvmmd's log level: %s\n", log_names[l]);
	return 0;
}
