// SPDX-License-Identifier: MIT
/*
 * kvmmctl cache-drop [--tier gpu|host|nvme[,...]] [--uid ID]: drop cached
 * blocks, those of the tiers named (all without --tier) and of one
 * tenant (a uid, a gid under --cache-scope gid; all without --uid)
 * (ADMIN_CACHE_DROP, ABI 1.14).  Prints how many went per tier, and how
 * many stayed because they are in use (a live sequence, a client's pin,
 * a copy in flight); dropped NVMe blocks are invalidated on disk before
 * kvmmd answers, so a restart does not bring them back.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tools/kvmmctl/kvmmctl.h"

static void usage(void)
{
	fprintf(stderr,
		"usage: kvmmctl cache-drop [--tier gpu|host|nvme[,...]] [--uid ID] [--json]\n");
}

/* "host,nvme" into a KVMM_CACHE_DROP_* mask; -EINVAL with a message. */
static int parse_tiers(const char *spec, uint32_t *mask)
{
	const char *p = spec;

	*mask = 0;
	for (;;) {
		size_t len = strcspn(p, ",");
		int t;

		for (t = 0; t < KVMMCTL_TIERS; t++)
			if (strlen(kvmmctl_tier_names[t]) == len &&
			    !strncmp(p, kvmmctl_tier_names[t], len))
				break;
		if (t == KVMMCTL_TIERS) {
			fprintf(stderr,
				"kvmmctl: cache-drop: unknown tier '%.*s' in '%s' (gpu, host or nvme)\n",
				(int)len, p, spec);
			return -EINVAL;
		}
		if (*mask & (1u << t)) {
			fprintf(stderr,
				"kvmmctl: cache-drop: tier %s named twice in '%s'\n",
				kvmmctl_tier_names[t], spec);
			return -EINVAL;
		}
		*mask |= 1u << t;
		if (!p[len])
			return 0;
		p += len + 1;
	}
}

static void print_json(const struct kvmm_admin_cache_drop_reply *r)
{
	printf("{\"dropped\":{");
	for (int t = 0; t < 3; t++)
		printf("%s\"%s\":%llu", t ? "," : "", kvmmctl_tier_names[t],
		       (unsigned long long)r->dropped[t]);
	printf("},\"kept\":{");
	for (int t = 0; t < 3; t++)
		printf("%s\"%s\":%llu", t ? "," : "", kvmmctl_tier_names[t],
		       (unsigned long long)r->kept[t]);
	printf("},\"kept_in_use\":%llu,\"kept_pinned\":%llu,"
	       "\"kept_busy\":%llu,\"nvme_invalidate_failures\":%llu}\n",
	       (unsigned long long)r->kept_in_use,
	       (unsigned long long)r->kept_pinned,
	       (unsigned long long)r->kept_busy,
	       (unsigned long long)r->nvme_invalidate_failures);
}

static void print_text(const struct kvmm_admin_cache_drop_reply *r)
{
	printf("dropped      gpu %llu, host %llu, nvme %llu blocks\n",
	       (unsigned long long)r->dropped[0],
	       (unsigned long long)r->dropped[1],
	       (unsigned long long)r->dropped[2]);
	printf("kept         gpu %llu, host %llu, nvme %llu blocks in use: %llu by a sequence or step, %llu pinned, %llu with a copy in flight\n",
	       (unsigned long long)r->kept[0], (unsigned long long)r->kept[1],
	       (unsigned long long)r->kept[2],
	       (unsigned long long)r->kept_in_use,
	       (unsigned long long)r->kept_pinned,
	       (unsigned long long)r->kept_busy);
	if (r->nvme_invalidate_failures)
		printf("WARNING      %llu dropped NVMe blocks could not be invalidated on disk: a restart of kvmmd may find them again (see its log)\n",
		       (unsigned long long)r->nvme_invalidate_failures);
}

int cmd_cache_drop(int argc, char **argv, struct kvmmctl_ctx *ctx)
{
	struct kvmm_admin_cache_drop a = { .size = sizeof(a) };
	struct kvmm_admin_cache_drop_reply r = { 0 };
	struct kvmm_conn *c;
	bool tiers_set = false;
	int err;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--tier") && i + 1 < argc && !tiers_set) {
			if (parse_tiers(argv[++i], &a.tiers))
				return 2;
			tiers_set = true;
		} else if (!strcmp(argv[i], "--uid") && i + 1 < argc &&
			   !(a.flags & KVMM_CACHE_DROP_F_TENANT)) {
			if (kvmmctl_parse_u32(argv[++i], &a.tenant))
				return 2;
			if (a.tenant == KVMM_TENANT_OTHERS) {
				fprintf(stderr,
					"kvmmctl: cache-drop: %u is not a uid or gid\n",
					a.tenant);
				return 2;
			}
			a.flags |= KVMM_CACHE_DROP_F_TENANT;
		} else {
			usage();
			return 2;
		}
	}
	if (kvmmctl_connect(ctx, &c))
		return 1;
	if (c->hello.abi_major == KVMM_ABI_MAJOR && c->hello.abi_minor < 14)
		err = -ENOTTY;
	else
		err = kc_request(c, KVMM_CMD_ADMIN_CACHE_DROP, &a, sizeof(a),
				 &r, sizeof(r), NULL);
	kvmm_disconnect(c);
	switch (err) {
	case 0:
		break;
	case -ENOTTY:
		fprintf(stderr,
			"kvmmctl: cache-drop: kvmmd is older than ABI 1.14 (no cache drop)\n");
		return 1;
	case -EPERM:
		fprintf(stderr,
			"kvmmctl: cache-drop: %s: only root or kvmmd's own uid may drop cached blocks\n",
			kvmm_strerror(err));
		return 1;
	default:
		fprintf(stderr, "kvmmctl: cache-drop: %s\n",
			kvmm_strerror(err));
		return 1;
	}
	if (ctx->json)
		print_json(&r);
	else
		print_text(&r);
	return 0;
}
