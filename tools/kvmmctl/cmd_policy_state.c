// SPDX-License-Identifier: MIT
/*
 * kvmmctl policy-state FILE: what a --policy-state file says the cache
 * policy learned, per class (asym: the block's turn in its conversation
 * plus its uses, and whether its request brought few new blocks): how many
 * block lives were counted, how many came back within the history, and
 * after how many block uses half and 90 % of those had come back.  It
 * reads the file only (no daemon), so it works on a copy, and tells a
 * damaged file from another version's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static void print_json(const struct pol_learned_summary *s)
{
	printf("{\"policy\":\"%s\",\"version\":%u,\"bytes\":%zu,"
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
	printf("]}\n");
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
	e = pol_learned_describe(buf, len, s);
	free(buf);
	if (e) {
		fprintf(stderr, "kvmmctl: %s: %s\n", argv[1],
			e == -ESTALE ? "written by another policy or version" :
			e == -EINVAL ? "not a policy state, or damaged" :
				       strerror(-e));
		free(s);
		return 1;
	}
	if (ctx->json)
		print_json(s);
	else
		print_text(argv[1], s);
	free(s);
	return 0;
}
