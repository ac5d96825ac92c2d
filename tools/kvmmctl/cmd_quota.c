// SPDX-License-Identifier: MIT
/*
 * kvmmctl quota UID SIZE: set a uid's memory quota (ADMIN_SET_QUOTA);
 * 0 removes it.
 */
#include <errno.h>
#include <stdio.h>
#include "kvmm/kvmmd/options.h"

#include "tools/kvmmctl/kvmmctl.h"

int cmd_quota(int argc, char **argv, struct kvmmctl_ctx *ctx)
{
	struct kvmm_admin_quota a = { .size = sizeof(a) };
	uint64_t bytes;

	if (argc != 3 || kvmmctl_parse_u32(argv[1], &a.uid) ||
	    kd_parse_size("kvmmctl: quota", argv[2], &bytes)) {
		fprintf(stderr,
			"usage: kvmmctl quota UID SIZE (0 = unlimited)\n");
		return 2;
	}
	a.bytes = bytes;
	return kvmmctl_simple(ctx, KVMM_CMD_ADMIN_SET_QUOTA, &a, sizeof(a));
}
