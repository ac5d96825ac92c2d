// SPDX-License-Identifier: MIT
/*
 * kvmmctl tenant-limit ID TIER:N[,TIER:N...] | none: the most cached
 * blocks a tenant (a uid, a gid under --cache-scope gid) may hold in each
 * tier (ADMIN_SET_TENANT_LIMIT, ABI 1.11); kvmmd applies it at once.
 */
#include <errno.h>
#include <stdio.h>

#include "kvmm/kvmmd/options.h"
#include "tools/kvmmctl/kvmmctl.h"

int cmd_tenant_limit(int argc, char **argv, struct kvmmctl_ctx *ctx)
{
	struct kvmm_admin_tenant_limit a = { .size = sizeof(a) };
	struct kvmm_conn *c;
	int err;

	if (argc != 3 || kvmmctl_parse_u32(argv[1], &a.id) ||
	    a.id == KVMM_TENANT_OTHERS ||
	    kd_parse_tenant_limit("kvmmctl: tenant-limit: ", argv[2],
				  a.limit_blocks)) {
		fprintf(stderr,
			"usage: kvmmctl tenant-limit ID TIER:N[,TIER:N...] | none (TIER gpu, host or nvme)\n");
		return 2;
	}
	if (kvmmctl_connect(ctx, &c))
		return 1;
	if (c->hello.abi_major == KVMM_ABI_MAJOR && c->hello.abi_minor < 11)
		err = -ENOTTY;
	else
		err = kc_request(c, KVMM_CMD_ADMIN_SET_TENANT_LIMIT, &a,
				 sizeof(a), NULL, 0, NULL);
	kvmm_disconnect(c);
	switch (err) {
	case 0:
		return 0;
	case -ENOTTY:
		fprintf(stderr,
			"kvmmctl: tenant-limit: kvmmd is older than ABI 1.11 (no tenant limits)\n");
		break;
	case -EINVAL:
		fprintf(stderr,
			"kvmmctl: tenant-limit: refused: kvmmd has no such tier (host needs --host-mem, nvme --nvme-path)\n");
		break;
	case -ENOSPC:
		fprintf(stderr,
			"kvmmctl: tenant-limit: 255 tenants have a row already and %u is not one of them (kvmmctl tenants)\n",
			a.id);
		break;
	default:
		fprintf(stderr, "kvmmctl: tenant-limit: %s\n",
			kvmm_strerror(err));
	}
	return 1;
}
