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

/*
 * kvmmd refuses a limit on a tier it lacks (-EINVAL): name that tier and
 * what makes one, from TIER_STATS (capacity 0: no such tier).  A tier
 * needs room for one block, so a --host-mem or --nvme-size smaller than
 * that makes none: "needs --host-mem" alone misled when it was given.
 * True when it said so.
 */
static bool no_tier(struct kvmm_conn *c,
		    const struct kvmm_admin_tenant_limit *a)
{
	static const char *const opt[3] = { "--cache-gpu-blocks", "--host-mem",
					    "--nvme-size" };
	struct kvmm_tier_stats_reply ts = { 0 };

	if (kc_request(c, KVMM_CMD_TIER_STATS, NULL, 0, &ts, sizeof(ts), NULL))
		return false;
	if (!ts.tiers[0].capacity_blocks) {
		/*
		 * No cache yet (no region has opened it, no
		 * --cache-block-pages; or its set-up failed): every tier
		 * reads 0, and kvmmd refused a host or NVMe limit for want
		 * of --host-mem or --nvme-path, never a GPU one.  Which of
		 * the two, when both were named, TIER_STATS cannot tell.
		 * (This named the first tier asked, "gpu" for gpu:1,nvme:1,
		 * and "one block, 0 bytes".)
		 */
		bool host = a->limit_blocks[1], nvme = a->limit_blocks[2];

		if (!host && !nvme)
			return false;
		fprintf(stderr,
			"kvmmctl: tenant-limit: refused: kvmmd has no %s (it was started without %s)\n",
			host && nvme ? "host tier or no NVMe tier" :
			host	     ? "host tier" :
				       "NVMe tier",
			host && nvme ? "--host-mem or without --nvme-path" :
			host	     ? "--host-mem" :
				       "--nvme-path");
		return true;
	}
	for (unsigned t = 0; t < 3; t++) {
		if (!a->limit_blocks[t] || ts.tiers[t].capacity_blocks)
			continue;
		fprintf(stderr,
			"kvmmctl: tenant-limit: refused: kvmmd has no such tier: %s (%s%s must hold at least one block, %llu bytes)\n",
			kvmmctl_tier_names[t],
			t == 2 ? "--nvme-path with " : "", opt[t],
			(unsigned long long)ts.tiers[0].block_bytes);
		return true;
	}
	return false;
}

#define USAGE \
	"tenant-limit ID TIER:N[,TIER:N...] | none (TIER gpu, host or nvme)"

/* After a line saying what was wrong: the usage, exit status 2. */
static int usage(void)
{
	fprintf(stderr, "usage: kvmmctl " USAGE "\n");
	return 2;
}

int cmd_tenant_limit(int argc, char **argv, struct kvmmctl_ctx *ctx)
{
	struct kvmm_admin_tenant_limit a = { .size = sizeof(a) };
	struct kvmm_conn *c;
	int err;

	if (kvmmctl_args("tenant-limit", argc, argv, 2, 2, USAGE))
		return 2;
	/* parsed once: a second parse printed its error line twice */
	if (kvmmctl_parse_u32("tenant-limit", "ID", argv[1], &a.id))
		return usage();
	if (a.id == KVMM_TENANT_OTHERS) {
		fprintf(stderr,
			"kvmmctl: tenant-limit: %u is no tenant (the row of those past the first 255 seen; ids go up to %u)\n",
			a.id, KVMM_TENANT_OTHERS - 1);
		return 2;
	}
	if (kd_parse_tenant_limit("kvmmctl: tenant-limit: ", argv[2],
				  a.limit_blocks))
		return usage();
	if (kvmmctl_connect(ctx, &c))
		return 1;
	if (c->hello.abi_major == KVMM_ABI_MAJOR && c->hello.abi_minor < 11)
		err = -ENOTTY;
	else
		err = kc_request(c, KVMM_CMD_ADMIN_SET_TENANT_LIMIT, &a,
				 sizeof(a), NULL, 0, NULL);
	if (err == -EINVAL && no_tier(c, &a)) {
		kvmm_disconnect(c);
		return 1;
	}
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
			kvmmctl_strerror(ctx, err));
	}
	return 1;
}
