// SPDX-License-Identifier: MIT
/*
 * kvmmctl cache-drop [--tier gpu|host|nvme[,...]] [--uid ID]
 * [--block-pages N]: drop cached blocks, those of the tiers named (all
 * without --tier), of one tenant (a uid, a gid under --cache-scope gid;
 * all without --uid) and of one block size's cache (blocks of N pages,
 * one model's: ABI 1.22; every size without --block-pages)
 * (ADMIN_CACHE_DROP, ABI 1.14).  Prints how many went per tier (and per
 * size, with several sizes cached), and how
 * many stayed because they are in use (a live sequence, a client's pin,
 * a copy in flight); dropped NVMe blocks, and the older NVMe copies of
 * what was dropped (stale copies: slots freed earlier whose header still
 * names the block), are invalidated on disk before kvmmd answers, so a
 * restart does not bring them back; the blocks kept on NVMe have their
 * header written again above the drop's mark, and those that could not
 * be are a WARNING line (ABI 1.23: a restart will not find them).  A
 * drop that includes NVMe while the NVMe tier is out (waiting to join,
 * TIER_STATS' nvme_open_error asked after the drop) cannot reach what
 * its file holds: kvmmd remembers it and drops those blocks when the
 * tier joins, before they are recovered.  A NOTE line says so (JSON:
 * "nvme_tier_out":true,"nvme_drop_pending":true), as the reply has no
 * word for it; whether the drop is kept across a restart of kvmmd
 * before the join (--policy-state) is in kvmmd's log line.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "tools/kvmmctl/kvmmctl.h"

#define CACHE_DROP_USAGE                                      \
	"cache-drop [--tier gpu|host|nvme[,...]] [--uid ID] " \
	"[--block-pages N] [--json]"

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
	int err = kvmmctl_u32(s, id);

	if (!err && *id == KVMM_TENANT_OTHERS)
		err = -EINVAL;
	if (err)
		fprintf(stderr,
			"kvmmctl: cache-drop: --uid '%s': not a uid or gid (0 to %u)\n",
			s, KVMM_TENANT_OTHERS - 1);
	return err;
}

/* The options that take a value. */
enum drop_opt { OPT_TIER, OPT_UID, OPT_BLOCK_PAGES, OPT_COUNT };

static const char *const drop_opt_names[OPT_COUNT] = {
	"--tier",
	"--uid",
	"--block-pages",
};

/*
 * The command line into *a: 0, or 2 (the exit status) after a line that
 * names the word at fault.  The words that are not --tier, --uid,
 * --block-pages or their values go to kvmmctl_args(), which names an
 * unknown option or an extra word as every kvmmctl command does.
 */
static int parse_args(int argc, char **argv, struct kvmm_admin_cache_drop *a)
{
	bool given[OPT_COUNT] = { false };
	char *rest[argc + 1];
	int n = 0;

	rest[n++] = argv[0];
	for (int i = 1; i < argc; i++) {
		const char *opt = argv[i];
		int o, err;

		for (o = 0; o < OPT_COUNT; o++)
			if (!strcmp(opt, drop_opt_names[o]))
				break;
		if (o == OPT_COUNT) {
			rest[n++] = argv[i];
			continue;
		}
		if (i + 1 == argc) {
			fprintf(stderr,
				"kvmmctl: cache-drop: %s needs a value\n", opt);
			return usage_error();
		}
		if (given[o]) {
			fprintf(stderr, "kvmmctl: cache-drop: %s given twice\n",
				opt);
			return usage_error();
		}
		given[o] = true;
		i++;
		if (o == OPT_TIER)
			err = parse_tiers(argv[i], &a->tiers);
		else if (o == OPT_UID)
			err = parse_uid(argv[i], &a->tenant);
		else
			err = kvmmctl_parse_block_pages("cache-drop", argv[i],
							&a->block_pages);
		if (err)
			return usage_error();
		if (o == OPT_UID)
			a->flags |= KVMM_CACHE_DROP_F_TENANT;
	}
	rest[n] = NULL;
	return kvmmctl_args("cache-drop", n, rest, 0, 0, CACHE_DROP_USAGE);
}

/* Does the reply r (got bytes) have each size's part (ABI 1.22)? */
static bool has_sizes(const struct kvmm_admin_cache_drop_reply *r, size_t got)
{
	return got >= offsetof(struct kvmm_admin_cache_drop_reply,
			       nvme_restamped) &&
	       r->nr_sizes <= KVMM_TIER_STATS_SIZES;
}

/* Does the reply r (got bytes) have the kept NVMe blocks' restamps
 * (ABI 1.23)? */
static bool has_restamps(size_t got)
{
	return got >=
	       offsetof(struct kvmm_admin_cache_drop_reply, nvme_restamp_gone) +
		       sizeof(uint64_t);
}

/* ,"block_pages":N,"sizes":[{"block_pages":N,"dropped":{..},"kept":{..}}] */
static void print_sizes_json(const struct kvmm_admin_cache_drop_reply *r)
{
	printf(",\"block_pages\":%u,\"sizes\":[", r->block_pages);
	for (uint32_t k = 0; k < r->nr_sizes; k++) {
		const struct kvmm_cache_drop_size *z = &r->sizes[k];

		printf("%s{\"block_pages\":%u,\"dropped\":", k ? "," : "",
		       z->block_pages);
		kvmmctl_json_tiers(z->dropped);
		printf(",\"kept\":");
		kvmmctl_json_tiers(z->kept);
		printf("}");
	}
	printf("]");
}

static void print_json(const struct kvmm_admin_cache_drop_reply *r, size_t got,
		       bool nvme_out)
{
	const struct kvmmctl_json_u64 kept_why[] = {
		{ "kept_in_use", r->kept_in_use },
		{ "kept_pinned", r->kept_pinned },
		{ "kept_busy", r->kept_busy },
		{ "nvme_invalidate_failures", r->nvme_invalidate_failures },
		{ "nvme_stale_invalidated", r->nvme_stale_invalidated },
	};
	/* the kept NVMe blocks' restamps (ABI 1.23): absent from an older
	 * kvmmd, whose reply ends before them (no zeros it did not send) */
	const struct kvmmctl_json_u64 restamps[] = {
		{ "nvme_restamped", r->nvme_restamped },
		{ "nvme_restamp_failures", r->nvme_restamp_failures },
		{ "nvme_restamp_gone", r->nvme_restamp_gone },
	};

	printf("{\"dropped\":");
	kvmmctl_json_tiers(r->dropped);
	printf(",\"kept\":");
	kvmmctl_json_tiers(r->kept);
	printf(",");
	KVMMCTL_JSON_U64S(kept_why);
	if (has_sizes(r, got))
		print_sizes_json(r);
	if (has_restamps(got)) {
		printf(",");
		KVMMCTL_JSON_U64S(restamps);
	}
	if (nvme_out)
		printf(",\"nvme_tier_out\":true,\"nvme_drop_pending\":true");
	printf("}\n");
}

static void print_text(const struct kvmm_admin_cache_drop_reply *r, size_t got,
		       bool nvme_out)
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
	/* each size's part, when one was asked or several were walked (one
	 * size alone: the lines above are it) */
	for (uint32_t k = 0;
	     has_sizes(r, got) && (r->block_pages || r->nr_sizes > 1) &&
	     k < r->nr_sizes;
	     k++) {
		const struct kvmm_cache_drop_size *z = &r->sizes[k];

		printf("size %-7u dropped gpu %llu, host %llu, nvme %llu blocks; kept gpu %llu, host %llu, nvme %llu\n",
		       z->block_pages, (unsigned long long)z->dropped[0],
		       (unsigned long long)z->dropped[1],
		       (unsigned long long)z->dropped[2],
		       (unsigned long long)z->kept[0],
		       (unsigned long long)z->kept[1],
		       (unsigned long long)z->kept[2]);
	}
	/* older copies on NVMe of what was dropped (ABI 1.15; 0 before) */
	if (r->nvme_stale_invalidated)
		printf("invalidated  %llu stale NVMe copies (slots freed earlier whose header still named a dropped block)\n",
		       (unsigned long long)r->nvme_stale_invalidated);
	if (r->nvme_invalidate_failures)
		printf("WARNING      %llu dropped NVMe blocks or stale copies could not be invalidated on disk: a restart of kvmmd may find them again (see its log)\n",
		       (unsigned long long)r->nvme_invalidate_failures);
	/* the NVMe blocks kept, each one's header written again above the
	 * drop's mark or not (ABI 1.23; 0 before) */
	if (r->nvme_restamped || r->nvme_restamp_gone)
		printf("restamped    %llu kept NVMe blocks' headers written above the drop mark (a restart finds them), %llu left NVMe first\n",
		       (unsigned long long)r->nvme_restamped,
		       (unsigned long long)r->nvme_restamp_gone);
	if (r->nvme_restamp_failures)
		printf("WARNING      %llu kept NVMe blocks' headers could not be written above the drop mark: served until kvmmd stops, a restart will not find them (see its log)\n",
		       (unsigned long long)r->nvme_restamp_failures);
	if (nvme_out)
		printf("NOTE         the NVMe tier is out (kvmmctl status): the blocks of its file this drop covers are dropped when it joins, before they are recovered (kvmmd's log says whether a restart before then keeps the drop)\n");
}

/*
 * Whether the NVMe tier is out after a drop that includes it (so it was
 * during the drop: a tier that joined stays in; one that joins between
 * the two is missed): the reply cannot say it
 * without a new word, TIER_STATS' nvme_open_error (ABI 1.15; 0 from an
 * older kvmmd) can.  The first size's: the others' wait for its claim.
 */
static bool nvme_tier_out(struct kvmm_conn *c,
			  const struct kvmm_admin_cache_drop *a)
{
	struct kvmm_tier_stats_reply ts = { 0 };

	if (a->tiers && !(a->tiers & KVMM_CACHE_DROP_NVME))
		return false;
	if (kc_request(c, KVMM_CMD_TIER_STATS, NULL, 0, &ts, sizeof(ts), NULL))
		return false;
	return ts.nvme_open_error != 0;
}

int cmd_cache_drop(int argc, char **argv, struct kvmmctl_ctx *ctx)
{
	struct kvmm_admin_cache_drop a = { .size = sizeof(a) };
	struct kvmm_admin_cache_drop_reply r = { 0 };
	struct kvmm_conn *c;
	bool nvme_out = false;
	size_t got = 0;
	int err;

	err = parse_args(argc, argv, &a);
	if (err)
		return err;
	if (kvmmctl_connect(ctx, &c))
		return 1;
	if (c->hello.abi_major == KVMM_ABI_MAJOR && c->hello.abi_minor < 14)
		err = -ENOTTY;
	else if (a.block_pages && c->hello.abi_major == KVMM_ABI_MAJOR &&
		 c->hello.abi_minor < 22)
		err = -EOPNOTSUPP; /* a 1.21 daemon: a reserved word */
	else
		err = kc_request(c, KVMM_CMD_ADMIN_CACHE_DROP, &a, sizeof(a),
				 &r, sizeof(r), &got);
	if (!err)
		nvme_out = nvme_tier_out(c, &a);
	kvmm_disconnect(c);
	switch (err) {
	case 0:
		break;
	case -ENOTTY:
		fprintf(stderr,
			"kvmmctl: cache-drop: kvmmd is older than ABI 1.14 (no cache drop)\n");
		return 1;
	case -EOPNOTSUPP:
		fprintf(stderr,
			"kvmmctl: cache-drop: --block-pages: kvmmd is older than ABI 1.22 (no drop of one block size)\n");
		return 1;
	case -ENOENT:
		fprintf(stderr,
			"kvmmctl: cache-drop: --block-pages %u: kvmmd caches no blocks of %u pages (kvmmctl status lists the sizes)\n",
			a.block_pages, a.block_pages);
		return 1;
	default:
		/* -EPERM: who may (kvmmctl_strerror()), as every command says */
		fprintf(stderr, "kvmmctl: cache-drop: %s\n",
			kvmmctl_strerror(ctx, err));
		return 1;
	}
	if (ctx->json)
		print_json(&r, got, nvme_out);
	else
		print_text(&r, got, nvme_out);
	return 0;
}
