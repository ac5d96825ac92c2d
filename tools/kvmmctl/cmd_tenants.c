// SPDX-License-Identifier: MIT
/*
 * kvmmctl tenants [--block-pages N] [--json]: per tenant (uid, or gid
 * under --cache-scope gid), the blocks the cache holds for it in each
 * tier and what its sessions got: prefix opens, blocks found per tier,
 * blocks published (ADMIN_TENANTS, ABI 1.10), and its limits (ABI 1.11).
 * The blocks are every size's summed; with several block sizes cached
 * each size's table follows (ABI 1.22), and --block-pages N shows the
 * cache of blocks of N pages alone (the sessions' counts, limits and
 * quotas are the daemon's, the same in every table).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/kvmmctl/kvmmctl.h"

/* Entries shorter than ours (an older daemon's) copied into ours, the
 * fields they lack zero. */
static int widen(struct kvmm_tenants_reply **rep)
{
	struct kvmm_tenants_reply *old = *rep, *r;
	size_t n = sizeof(r->tenants[0]);

	r = calloc(1, sizeof(*r) + (size_t)old->nr * n);
	if (!r)
		return -ENOMEM;
	*r = *old;
	for (uint32_t i = 0; i < old->nr; i++)
		memcpy(&r->tenants[i],
		       (const char *)old->tenants + (size_t)i * old->entry_size,
		       old->entry_size);
	r->entry_size = (uint32_t)n;
	free(old);
	*rep = r;
	return 0;
}

int kvmmctl_fetch_tenants(struct kvmm_conn *c, uint32_t block_pages,
			  struct kvmm_tenants_reply **out)
{
	struct kvmm_admin_tenants_req q = { .size = sizeof(q),
					    .block_pages = block_pages };
	size_t cap = KVMM_MSG_MAX, len = 0;
	struct kvmm_tenants_reply *rep;
	int err;

	if (c->hello.abi_major == KVMM_ABI_MAJOR && c->hello.abi_minor < 10)
		return -ENOTTY; /* before ADMIN_TENANTS */
	/* a 1.21 daemon answers a body -EINVAL: not sent */
	if (block_pages && c->hello.abi_major == KVMM_ABI_MAJOR &&
	    c->hello.abi_minor < 22)
		return -EOPNOTSUPP;
	rep = calloc(1, cap);
	if (!rep)
		return -ENOMEM;
	/* no body for every size: what any daemon takes */
	err = kc_request(c, KVMM_CMD_ADMIN_TENANTS, block_pages ? &q : NULL,
			 block_pages ? sizeof(q) : 0, rep, cap, &len);
	/* a later daemon's entries may be longer: read the fields we know;
	 * a 1.10 daemon's end before the limits */
	if (!err && (len < sizeof(*rep) ||
		     rep->entry_size < KVMM_TENANT_INFO_SIZE_1_10 ||
		     len < sizeof(*rep) + (size_t)rep->nr * rep->entry_size))
		err = -EPROTO;
	if (!err && rep->entry_size < sizeof(rep->tenants[0]))
		err = widen(&rep);
	if (err) {
		free(rep);
		return err;
	}
	*out = rep;
	return 0;
}

/* Entry i of rep, entry_size bytes apart. */
static const struct kvmm_tenant_info *
tenant_at(const struct kvmm_tenants_reply *rep, uint32_t i)
{
	return (const struct kvmm_tenant_info *)((const char *)rep->tenants +
						 (size_t)i * rep->entry_size);
}

static const char *kind_name(uint32_t kind)
{
	return kind == KVMM_TENANT_GID ? "gid" : "uid";
}

/* [{"id":..},...]: rep's entries */
static void print_json_entries(const struct kvmm_tenants_reply *rep)
{
	putchar('[');
	for (uint32_t i = 0; i < rep->nr; i++) {
		const struct kvmm_tenant_info *t = tenant_at(rep, i);

		if (t->id == KVMM_TENANT_OTHERS)
			printf("%s{\"id\":\"others\"", i ? "," : "");
		else
			printf("%s{\"id\":%u", i ? "," : "", t->id);
		printf(",\"sessions\":%u,\"cached_blocks\":", t->sessions);
		kvmmctl_json_tiers(t->cached_blocks);
		printf(",\"admitted_blocks\":%llu,\"prefix_opens\":%llu,"
		       "\"hit_blocks\":",
		       (unsigned long long)t->admitted_blocks,
		       (unsigned long long)t->prefix_opens);
		kvmmctl_json_tiers(t->hit_blocks);
		printf(",\"published_blocks\":%llu,\"dropped_blocks\":%llu,"
		       "\"limit_blocks\":",
		       (unsigned long long)t->published_blocks,
		       (unsigned long long)t->dropped_blocks);
		kvmmctl_json_tiers(t->limit_blocks);
		printf(",\"limit_moves\":%llu",
		       (unsigned long long)t->limit_moves);
		/* a uid's quota (ABI 1.13; 0 before, and under gid) */
		if (rep->kind == KVMM_TENANT_UID)
			printf(",\"quota_pages\":%llu,\"quota_used_pages\":%llu,"
			       "\"quota_cached_pages\":%llu",
			       (unsigned long long)t->quota_pages,
			       (unsigned long long)t->quota_used_pages,
			       (unsigned long long)t->quota_cached_pages);
		putchar('}');
	}
	putchar(']');
}

/* "gpu:2,host:5", or "-" without a limit */
static void limit_text(const struct kvmm_tenant_info *t, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (int k = 0; k < 3 && n < len; k++)
		if (t->limit_blocks[k])
			n += snprintf(buf + n, len - n, "%s%s:%llu",
				      n ? "," : "", kvmmctl_tier_names[k],
				      (unsigned long long)t->limit_blocks[k]);
	if (!n)
		snprintf(buf, len, "-");
}

/* a uid's quota in pages, "-" for none (or a gid) */
static void quota_text(const struct kvmm_tenants_reply *rep,
		       const struct kvmm_tenant_info *t, char *buf, size_t len)
{
	if (rep->kind != KVMM_TENANT_UID || !t->quota_pages)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%llu", (unsigned long long)t->quota_pages);
}

/* TENANT's text for t: "uid 1000", "gid others" */
static void tenant_name(const struct kvmm_tenants_reply *rep,
			const struct kvmm_tenant_info *t, char *buf, size_t len)
{
	if (t->id == KVMM_TENANT_OTHERS)
		snprintf(buf, len, "%s others", kind_name(rep->kind));
	else
		snprintf(buf, len, "%s %u", kind_name(rep->kind), t->id);
}

/*
 * TENANT's width: its widest name in rep, or w if wider.  It was 12
 * ("%-12s") whatever the names, and "uid 4294967294" (14) pushed its
 * line's other columns 2 right of the header's.  12 stays the least
 * (TENANT_MIN_COLS), so a table of uids below 100000000 reads as it
 * always did, the samples in admin.md included.
 */
#define TENANT_MIN_COLS 12

static int tenant_cols(const struct kvmm_tenants_reply *rep, int w)
{
	char name[24];

	for (uint32_t i = 0; i < rep->nr; i++) {
		tenant_name(rep, tenant_at(rep, i), name, sizeof(name));
		if ((int)strlen(name) > w)
			w = (int)strlen(name);
	}
	return w;
}

/* rep's table, TENANT cols wide (tenant_cols()) */
static void print_text(const struct kvmm_tenants_reply *rep, int cols)
{
	printf("%-*s %8s %8s %8s %8s %9s %8s %8s %8s %8s %9s %8s %9s %8s %8s %8s  %s\n",
	       cols, "TENANT", "SESSIONS", "GPU", "HOST", "NVME", "ADMITTED",
	       "OPENS", "HIT-GPU", "HIT-HOST", "HIT-NVME", "PUBLISHED",
	       "DROPPED", "LIM-MOVED", "QUOTA", "Q-USED", "Q-CACHED", "LIMIT");
	for (uint32_t i = 0; i < rep->nr; i++) {
		const struct kvmm_tenant_info *t = tenant_at(rep, i);
		char name[24], limit[96], quota[24];

		tenant_name(rep, t, name, sizeof(name));
		limit_text(t, limit, sizeof(limit));
		quota_text(rep, t, quota, sizeof(quota));
		printf("%-*s %8u %8llu %8llu %8llu %9llu %8llu %8llu %8llu %8llu %9llu %8llu %9llu %8s %8llu %8llu  %s\n",
		       cols, name, t->sessions,
		       (unsigned long long)t->cached_blocks[0],
		       (unsigned long long)t->cached_blocks[1],
		       (unsigned long long)t->cached_blocks[2],
		       (unsigned long long)t->admitted_blocks,
		       (unsigned long long)t->prefix_opens,
		       (unsigned long long)t->hit_blocks[0],
		       (unsigned long long)t->hit_blocks[1],
		       (unsigned long long)t->hit_blocks[2],
		       (unsigned long long)t->published_blocks,
		       (unsigned long long)t->dropped_blocks,
		       (unsigned long long)t->limit_moves, quota,
		       (unsigned long long)t->quota_used_pages,
		       (unsigned long long)t->quota_cached_pages, limit);
	}
}

#define TENANTS_USAGE "tenants [--block-pages N] [--json]"

/* Each block size's table when several are cached (ABI 1.22). */
struct tenants_sizes {
	uint32_t nr;
	uint32_t pages[KVMM_TIER_STATS_SIZES];
	struct kvmm_tenants_reply *rep[KVMM_TIER_STATS_SIZES];
};

/*
 * With no --block-pages and two or more sizes cached (TIER_STATS lists
 * them, ABI 1.21), each size's ADMIN_TENANTS too, from a daemon of 1.22
 * or later; nothing otherwise (the sums are the one size's).  0 or the
 * first failure's -errno.
 */
static int fetch_sizes(struct kvmm_conn *c, struct tenants_sizes *z)
{
	struct kvmm_tier_stats_reply ts = { 0 };
	uint32_t n;
	int err;

	z->nr = 0;
	if (c->hello.abi_major != KVMM_ABI_MAJOR || c->hello.abi_minor < 22)
		return 0;
	/* a daemon without the block cache refuses TIER_STATS: no sizes;
	 * one that stopped answering is no such daemon */
	err = kvmm_tier_stats(c, &ts, sizeof(ts));
	if (kvmmctl_conn_lost(err))
		return err;
	if (err || !KVMMCTL_TS_HAS(&ts, sizes) || ts.nr_sizes < 2)
		return 0;
	n = ts.nr_sizes < KVMM_TIER_STATS_SIZES ? ts.nr_sizes :
						  KVMM_TIER_STATS_SIZES;
	for (uint32_t i = 0; i < n; i++) {
		err = kvmmctl_fetch_tenants(c, ts.sizes[i], &z->rep[i]);
		if (err)
			return err;
		z->pages[i] = ts.sizes[i];
		z->nr++;
	}
	return 0;
}

static void print_json(const struct kvmm_tenants_reply *rep,
		       uint32_t block_pages, const struct tenants_sizes *z)
{
	printf("{\"kind\":\"%s\",", kind_name(rep->kind));
	if (block_pages)
		printf("\"block_pages\":%u,", block_pages);
	printf("\"tenants\":");
	print_json_entries(rep);
	if (z->nr) {
		printf(",\"sizes\":[");
		for (uint32_t i = 0; i < z->nr; i++) {
			printf("%s{\"block_pages\":%u,\"tenants\":",
			       i ? "," : "", z->pages[i]);
			print_json_entries(z->rep[i]);
			putchar('}');
		}
		putchar(']');
	}
	printf("}\n");
}

/* --block-pages N into *block_pages, the rest to kvmmctl_args(): 0, or 2
 * (the exit status) after a line naming what was wrong. */
static int parse_args(int argc, char **argv, uint32_t *block_pages)
{
	char *rest[argc + 1];
	bool given = false;
	int n = 0;

	rest[n++] = argv[0];
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--block-pages")) {
			rest[n++] = argv[i];
			continue;
		}
		if (i + 1 == argc || given) {
			fprintf(stderr, "kvmmctl: tenants: --block-pages %s\n",
				given ? "given twice" : "needs a value");
			fprintf(stderr, "usage: kvmmctl %s\n", TENANTS_USAGE);
			return 2;
		}
		given = true;
		if (kvmmctl_parse_block_pages("tenants", argv[++i],
					      block_pages)) {
			fprintf(stderr, "usage: kvmmctl %s\n", TENANTS_USAGE);
			return 2;
		}
	}
	rest[n] = NULL;
	return kvmmctl_args("tenants", n, rest, 0, 0, TENANTS_USAGE);
}

int cmd_tenants(int argc, char **argv, struct kvmmctl_ctx *ctx)
{
	struct kvmm_tenants_reply *rep = NULL;
	struct tenants_sizes z = { 0 };
	uint32_t block_pages = 0;
	struct kvmm_conn *c;
	int err;

	err = parse_args(argc, argv, &block_pages);
	if (err)
		return err;
	if (kvmmctl_connect(ctx, &c))
		return 1;
	err = kvmmctl_fetch_tenants(c, block_pages, &rep);
	if (!err && !block_pages)
		err = fetch_sizes(c, &z);
	kvmm_disconnect(c);
	if (err == -ENOTTY) {
		fprintf(stderr,
			"kvmmctl: tenants: kvmmd is older than ABI 1.10 (no ADMIN_TENANTS)\n");
	} else if (err == -EOPNOTSUPP) {
		fprintf(stderr,
			"kvmmctl: tenants: --block-pages: kvmmd is older than ABI 1.22 (no tenants of one block size)\n");
	} else if (err == -ENOENT) {
		fprintf(stderr,
			"kvmmctl: tenants: --block-pages %u: kvmmd caches no blocks of %u pages (kvmmctl status lists the sizes)\n",
			block_pages, block_pages);
	} else if (err) {
		fprintf(stderr, "kvmmctl: tenants: %s\n",
			kvmmctl_strerror(ctx, err));
	} else if (ctx->json) {
		print_json(rep, block_pages, &z);
	} else {
		/* one width for every table: each size's lines up with
		 * the sums' */
		int cols = tenant_cols(rep, TENANT_MIN_COLS);

		for (uint32_t i = 0; i < z.nr; i++)
			cols = tenant_cols(z.rep[i], cols);
		if (block_pages)
			printf("blocks of %u pages alone:\n", block_pages);
		print_text(rep, cols);
		for (uint32_t i = 0; i < z.nr; i++) {
			printf("\nblocks of %u pages alone (of the sums above):\n",
			       z.pages[i]);
			print_text(z.rep[i], cols);
		}
	}
	for (uint32_t i = 0; i < z.nr; i++)
		free(z.rep[i]);
	free(rep);
	return err ? 1 : 0;
}
