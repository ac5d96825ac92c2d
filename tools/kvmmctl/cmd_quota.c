// SPDX-License-Identifier: MIT
/*
 * kvmmctl quota UID SIZE: set a uid's memory quota (ADMIN_SET_QUOTA);
 * 0 removes it.  kvmmctl quota UID: the uid's quota and what is charged
 * to it, from ADMIN_TENANTS (which lists every uid that has a quota).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include "kvmm/kvmmd/options.h"

#include "tools/kvmmctl/kvmmctl.h"

#define QUOTA_USAGE "quota UID [SIZE] (SIZE 0 = unlimited; no SIZE: show it)"

static void print_quota(struct kvmmctl_ctx *ctx, uint32_t uid, uint64_t limit,
			uint64_t used, uint64_t cached, uint64_t page)
{
	const struct kvmmctl_json_u64 quota[] = {
		{ "uid", uid },
		{ "quota_pages", limit },
		{ "quota_bytes", limit * page },
		{ "used_pages", used },
		{ "cached_pages", cached },
		{ "page_size", page },
	};

	if (ctx->json) {
		printf("{");
		KVMMCTL_JSON_U64S(quota);
		printf("}\n");
		return;
	}
	if (limit)
		printf("uid %u: quota %llu pages (%llu bytes)", uid,
		       (unsigned long long)limit,
		       (unsigned long long)(limit * page));
	else
		printf("uid %u: no quota (unlimited)", uid);
	printf(", %llu pages charged (%llu of them cached blocks it gets back when it needs them)\n",
	       (unsigned long long)used, (unsigned long long)cached);
}

/* The uid's row of ADMIN_TENANTS, printed; none: no quota, nothing
 * charged. */
static int show(struct kvmmctl_ctx *ctx, struct kvmm_conn *c, uint32_t uid)
{
	struct kvmm_tenants_reply *rep = NULL;
	uint64_t page = c->hello.page_size;
	int err = kvmmctl_fetch_tenants(c, 0, &rep);

	if (err == -ENOTTY || (!err && c->hello.abi_minor < 13)) {
		fprintf(stderr,
			"kvmmctl: quota: kvmmd is older than ABI 1.13 (ADMIN_TENANTS has no quotas)\n");
		free(rep);
		return 1;
	}
	if (err) {
		fprintf(stderr, "kvmmctl: quota: %s\n",
			kvmmctl_strerror(ctx, err));
		return 1;
	}
	if (rep->kind != KVMM_TENANT_UID) {
		fprintf(stderr,
			"kvmmctl: quota: kvmmd runs with --cache-scope gid: its tenants are gids, and their rows carry no quota\n");
		free(rep);
		return 1;
	}
	for (uint32_t i = 0; i < rep->nr; i++) {
		/* entry_size apart: a later daemon's may be longer */
		const struct kvmm_tenant_info *t =
			(const void *)((const char *)rep->tenants +
				       (size_t)i * rep->entry_size);

		if (t->id != uid)
			continue;
		print_quota(ctx, uid, t->quota_pages, t->quota_used_pages,
			    t->quota_cached_pages, page);
		free(rep);
		return 0;
	}
	free(rep);
	print_quota(ctx, uid, 0, 0, 0, page);
	return 0;
}

int cmd_quota(int argc, char **argv, struct kvmmctl_ctx *ctx)
{
	struct kvmm_admin_quota a = { .size = sizeof(a) };
	struct kvmm_conn *c;
	uint64_t bytes = 0;
	int err;

	if (kvmmctl_args("quota", argc, argv, 1, 2, QUOTA_USAGE))
		return 2;
	if (kvmmctl_parse_u32("quota", "UID", argv[1], &a.uid) ||
	    (argc == 3 && kd_parse_size("kvmmctl: quota", argv[2], &bytes))) {
		fprintf(stderr, "usage: kvmmctl " QUOTA_USAGE "\n");
		return 2;
	}
	a.bytes = bytes;
	if (kvmmctl_connect(ctx, &c))
		return 1;
	if (argc == 2) {
		err = show(ctx, c, a.uid);
		kvmm_disconnect(c);
		return err;
	}
	err = kc_request(c, KVMM_CMD_ADMIN_SET_QUOTA, &a, sizeof(a), NULL, 0,
			 NULL);
	if (err) {
		fprintf(stderr, "kvmmctl: quota: %s\n",
			kvmmctl_strerror(ctx, err));
		kvmm_disconnect(c);
		return 1;
	}
	/* what it is now, as kvmmd rounded it up to pages (it printed
	 * nothing); an older daemon's rows carry no quota */
	if (c->hello.abi_minor >= 13)
		err = show(ctx, c, a.uid);
	else
		printf("uid %u: quota set to %llu bytes\n", a.uid,
		       (unsigned long long)bytes);
	kvmm_disconnect(c);
	return err;
}
