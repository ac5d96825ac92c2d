// SPDX-License-Identifier: MIT
/*
 * kvmmctl policy-state FILE: what a --policy-state file says the cache
 * policy learned, per class (asym: the block's turn in its conversation
 * plus its uses, and whether its request brought few new blocks): how many
 * block lives were counted, how many came back within the history, and
 * after how many block uses half and 90 % of those had come back; in a
 * file of several block sizes' states, each size's.  It reads the file
 * only (no daemon), so it works on a copy, and tells a damaged file from
 * another version's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvmm/kvmmd/learned_sizes.h"
#include "kvmm/policy/policy.h"
#include "tools/kvmmctl/kvmmctl.h"

static void print_text(const char *path, const struct pol_learned_summary *s)
{
	double lives = 0, back = 0;

	printf("%s: %s, version %u, %zu bytes; the counts are halved in %llu block uses\n",
	       path, pol_kind_string(s->kind), s->version, s->bytes,
	       (unsigned long long)s->decay_in);
	printf("%-18s %12s %12s %8s %12s %12s\n", "class", "lives", "came back",
	       "share", "half by", "90% by");
	for (unsigned int k = 0; k < s->nclass; k++) {
		const struct pol_learned_class *c = &s->cls[k];

		lives += c->lives;
		back += c->returns;
		printf("%-18s %12.0f %12.0f %8.3f %12llu %12llu\n", c->name,
		       c->lives, c->returns,
		       c->lives > 0 ? c->returns / c->lives : 0,
		       (unsigned long long)c->median_age,
		       (unsigned long long)c->p90_age);
	}
	printf("%-18s %12.0f %12.0f %8.3f\n", "all", lives, back,
	       lives > 0 ? back / lives : 0);
	printf("(asym's classes: the block's turn + its uses - 1, capped at 8, and whether its\n"
	       " request brought 1-8 blocks the cache did not know; ages in block uses, the\n"
	       " cache's clock; \"came back\": within the history kvmmd follows; policy.md)\n");
}

/* One state's object, without a newline (block_pages 0: a file of one
 * size's state, which does not say its size). */
static void print_json(const struct pol_learned_summary *s,
		       uint32_t block_pages)
{
	printf("{");
	if (block_pages)
		printf("\"block_pages\":%u,", block_pages);
	printf("\"policy\":\"%s\",\"version\":%u,\"bytes\":%zu,"
	       "\"halving_in\":%llu,\"classes\":[",
	       pol_kind_string(s->kind), s->version, s->bytes,
	       (unsigned long long)s->decay_in);
	for (unsigned int k = 0; k < s->nclass; k++) {
		const struct pol_learned_class *c = &s->cls[k];

		printf("%s{\"class\":", k ? "," : "");
		kvmmctl_json_str(c->name);
		printf(",\"lives\":%.0f,\"came_back\":%.0f,"
		       "\"median_age\":%llu,\"p90_age\":%llu}",
		       c->lives, c->returns, (unsigned long long)c->median_age,
		       (unsigned long long)c->p90_age);
	}
	printf("]}");
}

/* One state described: 0, or 1 with the error printed. */
static int describe(const char *path, const void *buf, size_t len,
		    struct pol_learned_summary *s)
{
	int e = pol_learned_describe(buf, len, s);

	if (e)
		fprintf(stderr, "kvmmctl: %s: %s\n", path,
			e == -ESTALE ? "written by another policy or version" :
			e == -EINVAL ? "not a policy state, or damaged" :
				       strerror(-e));
	return e ? 1 : 0;
}

/*
 * A file of several block sizes' states (kvmmd caching several sizes,
 * ABI 1.21's kvmmd): each section described, headed by its size (text),
 * or {"sizes":[...]} with each state's object and its block_pages.
 */
static int print_sized(const char *path, const void *buf, size_t len,
		       struct pol_learned_summary *s, bool json)
{
	struct kc_learned_sec secs[KVMM_TIER_STATS_SIZES];
	uint32_t nr;

	if (kc_learned_parse(buf, len, secs, KVMM_TIER_STATS_SIZES, &nr)) {
		fprintf(stderr,
			"kvmmctl: %s: a file of several block sizes' states, damaged\n",
			path);
		return 1;
	}
	if (json)
		printf("{\"sizes\":[");
	for (uint32_t i = 0; i < nr; i++) {
		if (describe(path, secs[i].buf, secs[i].len, s))
			return 1;
		if (json) {
			printf("%s", i ? "," : "");
			print_json(s, secs[i].ppb);
			continue;
		}
		printf("%sblocks of %u pages:\n", i ? "\n" : "", secs[i].ppb);
		print_text(path, s);
	}
	if (json)
		printf("]}\n");
	return 0;
}

int cmd_policy_state(int argc, char **argv, struct kvmmctl_ctx *ctx)
{
	struct pol_learned_summary *s;
	size_t len = 0;
	void *buf = NULL;
	int e;

	if (kvmmctl_args("policy-state", argc, argv, 1, 1,
			 "[--json] policy-state FILE"))
		return 2;
	e = pol_learned_read_file(argv[1], &buf, &len);
	if (e) {
		fprintf(stderr, "kvmmctl: %s: %s\n", argv[1],
			pol_learned_file_strerror(e));
		return 1;
	}
	s = malloc(sizeof(*s));
	if (!s) {
		free(buf);
		return 1;
	}
	if (kc_learned_sized(buf, len)) {
		e = print_sized(argv[1], buf, len, s, ctx->json);
	} else {
		e = describe(argv[1], buf, len, s);
		if (!e && ctx->json) {
			print_json(s, 0);
			printf("\n");
		} else if (!e) {
			print_text(argv[1], s);
		}
	}
	free(buf);
	free(s);
	return e;
}
