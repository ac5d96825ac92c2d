// SPDX-License-Identifier: MIT
/*
 * kvmmctl cache-drop [--tier gpu|host|nvme[,...]] [--uid ID]: drop cached
 * blocks, those of the tiers named (all without --tier) and of one
 * tenant (a uid, a gid under --cache-scope gid; all without --uid)
 * (ADMIN_CACHE_DROP, ABI 1.14).  Prints how many went per tier, and how
 * many stayed because they are in use (a live sequence, a client's pin,
 * a copy in flight); dropped NVMe blocks, and the older NVMe copies of
 * what was dropped (stale copies: slots freed earlier whose header still
 * names the block), are invalidated on disk before kvmmd answers, so a
 * restart does not bring them back.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tools/kvmmctl/kvmmctl.h"

#define CACHE_DROP_USAGE \
	"cache-drop [--tier gpu|host|nvme[,...]] [--uid ID] [--json]"

/* After a line that says what was wrong: the usage, and exit status 2
 * (as kvmmctl_args() ends). */
static int usage_error(void)
{
	fprintf(stderr, "usage: kvmmctl %s\n", CACHE_DROP_USAGE);
	return 2;
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
				"kvmmctl: cache-drop: --tier '%s': unknown tier '%.*s' (gpu, host or nvme)\n",
				spec, (int)len, p);
			return -EINVAL;
		}
		if (*mask & (1u << t)) {
			fprintf(stderr,
				"kvmmctl: cache-drop: --tier '%s': tier %s named twice\n",
				spec, kvmmctl_tier_names[t]);
			return -EINVAL;
		}
		*mask |= 1u << t;
		if (!p[len])
			return 0;
		p += len + 1;
	}
}

/* --uid's value: a uid or gid, not the others' row; -EINVAL with a
 * message naming it. */
static int parse_uid(const char *s, uint32_t *id)
{
	int err = kvmmctl_parse_u32(s, id);

	if (!err && *id == KVMM_TENANT_OTHERS)
		err = -EINVAL;
	if (err)
		fprintf(stderr,
			"kvmmctl: cache-drop: --uid '%s': not a uid or gid (0 to %u)\n",
			s, KVMM_TENANT_OTHERS - 1);
	return err;
}

/*
 * The command line into *a: 0, or 2 (the exit status) after a line that
 * names the word at fault.  The words that are not --tier, --uid or
 * their values go to kvmmctl_args(), which names an unknown option or an
 * extra word as every kvmmctl command does.
 */
static int parse_args(int argc, char **argv, struct kvmm_admin_cache_drop *a)
{
	char *rest[argc + 1];
	bool tiers_set = false;
	int n = 0;

	rest[n++] = argv[0];
	for (int i = 1; i < argc; i++) {
		const char *opt = argv[i];
		bool tier = !strcmp(opt, "--tier");

		if (!tier && strcmp(opt, "--uid")) {
			rest[n++] = argv[i];
			continue;
		}
		if (i + 1 == argc) {
			fprintf(stderr,
				"kvmmctl: cache-drop: %s needs a value\n", opt);
			return usage_error();
		}
		if (tier ? tiers_set :
			   !!(a->flags & KVMM_CACHE_DROP_F_TENANT)) {
			fprintf(stderr, "kvmmctl: cache-drop: %s given twice\n",
				opt);
			return usage_error();
		}
		if (tier ? parse_tiers(argv[++i], &a->tiers) :
			   parse_uid(argv[++i], &a->tenant))
			return usage_error();
		if (tier)
			tiers_set = true;
		else
			a->flags |= KVMM_CACHE_DROP_F_TENANT;
	}
	rest[n] = NULL;
	return kvmmctl_args("cache-drop", n, rest, 0, 0, CACHE_DROP_USAGE);
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
	       "\"kept_busy\":%llu,\"nvme_invalidate_failures\":%llu,"
	       "\"nvme_stale_invalidated\":%llu}\n",
	       (unsigned long long)r->kept_in_use,
	       (unsigned long long)r->kept_pinned,
	       (unsigned long long)r->kept_busy,
	       (unsigned long long)r->nvme_invalidate_failures,
	       (unsigned long long)r->nvme_stale_invalidated);
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
	/* older copies on NVMe of what was dropped (ABI 1.15; 0 before) */
	if (r->nvme_stale_invalidated)
		printf("invalidated  %llu stale NVMe copies (slots freed earlier whose header still named a dropped block)\n",
		       (unsigned long long)r->nvme_stale_invalidated);
	if (r->nvme_invalidate_failures)
		printf("WARNING      %llu dropped NVMe blocks or stale copies could not be invalidated on disk: a restart of kvmmd may find them again (see its log)\n",
		       (unsigned long long)r->nvme_invalidate_failures);
}

int cmd_cache_drop(int argc, char **argv, struct kvmmctl_ctx *ctx)
{
	struct kvmm_admin_cache_drop a = { .size = sizeof(a) };
	struct kvmm_admin_cache_drop_reply r = { 0 };
	struct kvmm_conn *c;
	int err;

	err = parse_args(argc, argv, &a);
	if (err)
		return err;
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
	default:
		/* -EPERM: who may (kvmmctl_strerror()), as every command says */
		fprintf(stderr, "kvmmctl: cache-drop: %s\n",
			kvmmctl_strerror(ctx, err));
		return 1;
	}
	if (ctx->json)
		print_json(&r);
	else
		print_text(&r);
	return 0;
}
