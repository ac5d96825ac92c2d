/* SPDX-License-Identifier: MIT */
/*
 * kvmm-agentgen: synthetic agent and chat workloads in the Mooncake trace
 * format (one JSON object per line: timestamp, input_length,
 * output_length, hash_ids over 512-token blocks), plus the agent fields
 * kvmm-replay honours: "session", "ttl_ms" (the request's blocks stay
 * pinned while the agent waits on a tool call) and "priority".
 *
 * Model (deterministic for a given --seed):
 *   - sessions start as a Poisson process (--rate per second) for
 *     --duration seconds; a share --agent-share are tool-calling agents,
 *     the rest multi-turn chats;
 *   - every session starts with one of --system-prompts shared system
 *     prompts (Zipf-popular, --system-blocks blocks each), then, with
 *     probability --rag-prob, 1..3 retrieved documents drawn from a
 *     Zipf-popular pool of --rag-docs documents (--rag-blocks blocks
 *     each); these prefixes are shared between sessions;
 *   - each turn appends the previous answer and a new user message (or
 *     tool result) to the context; a session has a geometric number of
 *     turns (mean --turns);
 *   - chats come back after a think time (exponential, mean --think
 *     seconds); agents call a tool with probability --tool-prob per turn
 *     and come back after the tool's latency (log-normal, median
 *     --tool-ms), and the request before a tool call carries ttl_ms =
 *     2x that median so a cache can pin the prefix it will extend;
 *   - with --tenants N > 1 session s belongs to tenant 1000 + s % N (its
 *     requests carry "tenant", a uid as kvmmd would see it: kvmm-replay
 *     --tenant-limit holds one to a share of the cache).
 *
 * Block ids are prefix-chained: equal ids mean equal prefixes.  A full
 * block keeps its id as the context grows; a partial tail block gets a
 * new id once more tokens are appended (it is a different block).
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvmm/policy/cost_model.h"
#include "kvmm/policy/hmap.h"

#define BLOCK 512

struct opts {
	uint64_t seed;
	double rate, duration, agent_share, rag_prob, turns, think, tool_prob;
	double tool_ms;
	unsigned system_prompts, system_blocks, rag_docs, rag_blocks;
	unsigned max_tokens;
	unsigned tenants;
};

static uint64_t rng_state;

static uint64_t rnd64(void)
{
	/* xorshift64*: small, fast and the same everywhere */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static double uniform(void)
{
	return ((double)(rnd64() >> 11) + 0.5) / 9007199254740992.0;
}

static double expo(double mean)
{
	return -mean * log(uniform());
}

static double normal(void)
{
	return sqrt(-2 * log(uniform())) * cos(2 * M_PI * uniform());
}

/* Zipf(1) over n items by inverse transform on the harmonic sums. */
static unsigned zipf(unsigned n)
{
	double h = 0, u;

	for (unsigned i = 1; i <= n; i++)
		h += 1.0 / i;
	u = uniform() * h;
	for (unsigned i = 1; i <= n; i++) {
		u -= 1.0 / i;
		if (u <= 0)
			return i - 1;
	}
	return n - 1;
}

static unsigned between(unsigned lo, unsigned hi)
{
	return lo + (unsigned)(rnd64() % (hi - lo + 1));
}

/* Prefix-chained ids: (parent id, content key) -> id. */
struct idmap {
	uint64_t *keys, *vals;
	uint64_t mask, n, next_id;
};

static int idmap_grow(struct idmap *m)
{
	uint64_t size = m->mask ? 2 * (m->mask + 1) : 1 << 16;
	uint64_t *k = calloc(size, sizeof(*k)), *v = calloc(size, sizeof(*v));

	if (!k || !v) {
		free(k);
		free(v);
		return -ENOMEM;
	}
	for (uint64_t i = 0; m->mask && i <= m->mask; i++) {
		uint64_t j;

		if (!m->vals[i])
			continue;
		for (j = pol_mix64(m->keys[i]) & (size - 1); v[j];
		     j = (j + 1) & (size - 1))
			;
		k[j] = m->keys[i];
		v[j] = m->vals[i];
	}
	free(m->keys);
	free(m->vals);
	m->keys = k;
	m->vals = v;
	m->mask = size - 1;
	return 0;
}

/* id of a block: vals store id + 1 so 0 means empty */
static int64_t block_id(struct idmap *m, uint64_t parent, uint64_t kind,
			uint64_t a, uint64_t b)
{
	uint64_t key = pol_mix64(
			       pol_mix64(pol_mix64(parent ^ 0x1234567) ^ kind) ^
			       a) ^
		       pol_mix64(b + 0x9e3779b97f4a7c15ull),
		 i;

	if (2 * (m->n + 1) > m->mask + 1 && idmap_grow(m))
		return -ENOMEM;
	for (i = pol_mix64(key) & m->mask; m->vals[i]; i = (i + 1) & m->mask)
		if (m->keys[i] == key)
			return (int64_t)m->vals[i] - 1;
	m->keys[i] = key;
	m->vals[i] = ++m->next_id; /* ids start at 0 */
	m->n++;
	return (int64_t)m->next_id - 1;
}

struct req {
	double t;
	uint64_t order;
	uint64_t session;
	unsigned input, output, ttl_ms;
	int priority;
	uint64_t *ids;
	unsigned nids;
};

static int cmp_req(const void *x, const void *y)
{
	const struct req *a = x, *b = y;

	if (a->t != b->t)
		return a->t < b->t ? -1 : 1;
	return a->order < b->order ? -1 : a->order > b->order;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: kvmm-agentgen [--seed N] [--duration S] [--rate R]\n"
		"         [--agent-share P] [--system-prompts N] [--system-blocks N]\n"
		"         [--rag-docs N] [--rag-blocks N] [--rag-prob P]\n"
		"         [--turns MEAN] [--think S] [--tool-prob P] [--tool-ms MS]\n"
		"         [--max-tokens N] [--tenants N]\n"
		"         (writes the trace to stdout)\n");
}

/* The options, all numbers: where each goes in struct opts, its range. */
static const struct num_opt {
	const char *name;
	size_t off;
	char type; /* 'd' double, 'u' unsigned, 's' the 64-bit seed (any) */
	double lo, hi;
} num_opts[] = {
	{ "seed", offsetof(struct opts, seed), 's', 0, 0 },
	{ "duration", offsetof(struct opts, duration), 'd', 1, 1e6 },
	{ "rate", offsetof(struct opts, rate), 'd', 1e-3, 1e4 },
	{ "agent-share", offsetof(struct opts, agent_share), 'd', 0, 1 },
	{ "system-prompts", offsetof(struct opts, system_prompts), 'u', 1,
	  1e6 },
	{ "system-blocks", offsetof(struct opts, system_blocks), 'u', 1, 1024 },
	{ "rag-docs", offsetof(struct opts, rag_docs), 'u', 1, 1e6 },
	{ "rag-blocks", offsetof(struct opts, rag_blocks), 'u', 1, 1024 },
	{ "rag-prob", offsetof(struct opts, rag_prob), 'd', 0, 1 },
	{ "turns", offsetof(struct opts, turns), 'd', 1, 1000 },
	{ "think", offsetof(struct opts, think), 'd', 0, 1e5 },
	{ "tool-prob", offsetof(struct opts, tool_prob), 'd', 0, 0.99 },
	{ "tool-ms", offsetof(struct opts, tool_ms), 'd', 1, 1e7 },
	{ "max-tokens", offsetof(struct opts, max_tokens), 'u', 2048, 1 << 22 },
	{ "tenants", offsetof(struct opts, tenants), 'u', 1, 1e6 },
};
#define NUM_OPTS (sizeof(num_opts) / sizeof(num_opts[0]))
#define OPT_NUM 0x100 /* getopt value of num_opts[i]: OPT_NUM + i */

/*
 * Parse arg for num_opts[i] into o; 0 or -EINVAL (said).  Counts and the
 * seed are integers, read as such: --tenants 2.9 was 2, and a seed past
 * 2^53 lost its low bits through a double.
 */
static int set_num(struct opts *o, size_t i, const char *arg)
{
	const struct num_opt *n = &num_opts[i];
	char *field = (char *)o + n->off;
	unsigned long long u;
	double v;

	errno = 0;
	if (n->type != 'd') {
		if (!pol_decimal_syntax(arg, true))
			goto bad;
		u = strtoull(arg, NULL, 10);
		if (errno || (n->type == 'u' && (u < n->lo || u > n->hi)))
			goto bad;
		if (n->type == 's')
			*(uint64_t *)field = u;
		else
			*(unsigned *)field = (unsigned)u;
		return 0;
	}
	if (!pol_decimal_syntax(arg, false))
		goto bad;
	v = strtod(arg, NULL);
	if (errno || !isfinite(v) || v < n->lo || v > n->hi)
		goto bad;
	/* cppcheck-suppress invalidPointerCast ; field is a double of
	 * struct opts (num_opts[]'s offsetof and type 'd') */
	*(double *)field = v;
	return 0;
bad:
	if (n->type == 's')
		fprintf(stderr,
			"kvmm-agentgen: bad --%s '%s' (an integer, 0..%llu)\n",
			n->name, arg, (unsigned long long)UINT64_MAX);
	else
		fprintf(stderr,
			"kvmm-agentgen: bad --%s '%s' (%s, %.15g..%.15g)\n",
			n->name, arg,
			n->type == 'u' ? "an integer" : "a decimal number",
			n->lo, n->hi);
	return -EINVAL;
}

int main(int argc, char **argv)
{
	struct option lo[NUM_OPTS + 2] = { { 0 } };
	struct opts o = { .seed = 1,
			  .rate = 2,
			  .duration = 600,
			  .agent_share = 0.5,
			  .rag_prob = 0.3,
			  .turns = 4,
			  .think = 30,
			  .tool_prob = 0.6,
			  .tool_ms = 2000,
			  .system_prompts = 8,
			  .system_blocks = 4,
			  .rag_docs = 200,
			  .rag_blocks = 2,
			  .max_tokens = 64 * 1024,
			  .tenants = 1 };
	struct idmap ids = { 0 };
	struct req *reqs = NULL;
	size_t nreq = 0, cap = 0;
	uint64_t order = 0;
	int c;

	for (size_t i = 0; i < NUM_OPTS; i++)
		lo[i] = (struct option){ num_opts[i].name, required_argument,
					 NULL, OPT_NUM + (int)i };
	lo[NUM_OPTS] = (struct option){ "help", no_argument, NULL, 'h' };
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		if (c == 'h') {
			usage(stdout);
			return 0;
		}
		if (c < OPT_NUM || c >= OPT_NUM + (int)NUM_OPTS) {
			usage(stderr);
			return 2;
		}
		if (set_num(&o, (size_t)(c - OPT_NUM), optarg))
			return 2;
	}
	if (optind < argc) {
		fprintf(stderr, "kvmm-agentgen: unexpected argument '%s'\n",
			argv[optind]);
		return 2;
	}
	rng_state = pol_mix64(o.seed + 1) | 1;

	uint64_t session = 0;
	for (double start = expo(1 / o.rate); start < o.duration;
	     start += expo(1 / o.rate), session++) {
		bool agent = uniform() < o.agent_share;
		unsigned sys = zipf(o.system_prompts), ctx = 0, nfull = 0;
		uint64_t chain[1 << 13], parent = UINT64_MAX;
		unsigned nchain = 0, turn = 0;
		double t = start;
		int64_t id;

		/* Shared prefix: system prompt, then retrieved documents. */
		for (unsigned j = 0; j < o.system_blocks; j++) {
			id = block_id(&ids, parent, 1, sys, j);
			if (id < 0)
				return 1;
			chain[nchain++] = parent = (uint64_t)id;
		}
		if (uniform() < o.rag_prob) {
			unsigned ndocs = between(1, 3);

			for (unsigned d = 0; d < ndocs; d++) {
				unsigned doc = zipf(o.rag_docs);

				for (unsigned j = 0; j < o.rag_blocks; j++) {
					id = block_id(&ids, parent, 2, doc, j);
					if (id < 0)
						return 1;
					chain[nchain++] = parent = (uint64_t)id;
				}
			}
		}
		nfull = nchain;
		ctx = nchain * BLOCK;
		for (;;) {
			unsigned add = agent && turn ? between(200, 2000) :
						       between(50, 800);
			unsigned out = agent ? between(20, 300) :
					       between(50, 600);
			bool tool = agent && uniform() < o.tool_prob;
			unsigned n;

			ctx += add;
			if (ctx + out > o.max_tokens ||
			    nchain + 2 >= sizeof(chain) / sizeof(chain[0]))
				break;
			/* Full blocks of the session keep their ids. */
			while ((nfull + 1) * BLOCK <= ctx) {
				id = block_id(&ids,
					      nfull ? chain[nfull - 1] :
						      UINT64_MAX,
					      3, session, nfull);
				if (id < 0)
					return 1;
				chain[nfull++] = (uint64_t)id;
			}
			n = nfull;
			if (ctx % BLOCK) {
				/* the partial tail: a block of its own */
				id = block_id(&ids,
					      n ? chain[n - 1] : UINT64_MAX, 4,
					      session, ctx);
				if (id < 0)
					return 1;
				chain[n++] = (uint64_t)id;
			}
			if (nreq == cap) {
				cap = cap ? 2 * cap : 4096;
				/* cppcheck-suppress memleakOnRealloc ; main()
				 * returns at once, the exit frees it */
				reqs = realloc(reqs, cap * sizeof(*reqs));
				if (!reqs)
					return 1;
			}
			struct req *r = &reqs[nreq++];
			r->t = t;
			r->order = order++;
			r->session = session;
			r->input = ctx;
			r->output = out;
			r->ttl_ms = tool ? (unsigned)(2 * o.tool_ms) : 0;
			r->priority = agent ? 1 : 0;
			r->nids = n;
			r->ids = malloc(n * sizeof(uint64_t));
			if (!r->ids)
				return 1;
			memcpy(r->ids, chain, n * sizeof(uint64_t));
			ctx += out;
			turn++;
			if (!tool && uniform() > 1 - 1 / o.turns)
				break; /* the user is done */
			t += tool ? o.tool_ms / 1000 * exp(0.5 * normal()) :
				    expo(o.think);
			if (t >= o.duration)
				break;
		}
	}
	qsort(reqs, nreq, sizeof(*reqs), cmp_req);
	for (size_t i = 0; i < nreq; i++) {
		struct req *r = &reqs[i];

		printf("{\"timestamp\": %llu, \"input_length\": %u, "
		       "\"output_length\": %u, \"session\": %llu, ",
		       (unsigned long long)(r->t * 1000), r->input, r->output,
		       (unsigned long long)r->session);
		if (o.tenants > 1)
			printf("\"tenant\": %llu, ",
			       1000ull + r->session % o.tenants);
		if (r->ttl_ms)
			printf("\"ttl_ms\": %u, ", r->ttl_ms);
		if (r->priority)
			printf("\"priority\": %d, ", r->priority);
		printf("\"hash_ids\": [");
		for (unsigned j = 0; j < r->nids; j++)
			printf(j ? ", %llu" : "%llu",
			       (unsigned long long)r->ids[j]);
		printf("]}\n");
		free(r->ids);
	}
	free(reqs);
	free(ids.keys);
	free(ids.vals);
	fprintf(stderr,
		"kvmm-agentgen: %zu requests, %llu sessions, %llu blocks\n",
		nreq, (unsigned long long)session,
		(unsigned long long)ids.next_id);
	return 0;
}
