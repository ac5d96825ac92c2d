/* SPDX-License-Identifier: MIT */
/*
 * kvmm-replay: replay a Mooncake-format trace through the kvmm policy
 * code (the same library kvmmd links) and report hit ratios per tier and
 * the modelled prefill time and TTFT.  See Documentation/policy.md.
 *
 *   kvmm-replay --trace FILE --policy lru|lfu|arc|belady|asym
 *               --gpu-blocks N [--host-blocks N] [--nvme-blocks N]
 *               [--profile NAME|PATH] [--prefill-servers N]
 *               [--cache-output] [--prefix-rule on|off]
 *               [--ttl-pins demote|hold]
 *               [--sweep N1,N2,...] [--daemon SOCKET] [--max-requests N]
 *               [--model-daemon] [--per-request FILE] [--msa]
 *               [--restart-every N [--restart-forget]]
 *               [--policy-state FILE] [--tenant-limit ID=SPEC ...]
 *               [--progress] [--json]
 *
 * --daemon SOCKET replays through a running kvmmd (daemon_driver.c)
 * instead of the in-process policy code; --model-daemon makes the
 * in-process replay touch the cache as kvmmd does, and then the two give
 * the same hit counts (Documentation/policy.md).  --per-request FILE
 * writes each request's hits per tier, to find where two replays part.
 * --msa replays with Multi-Segment Attention: every cached block of a
 * request is served, only the blocks in no tier are recomputed; with
 * --daemon the prefixes are opened with KVMM_PREFIX_OPEN_SEGMENTS (kvmmd
 * serves the blocks after a hole, the driver recomputes the holes) and
 * --model-daemon --msa models those opens.  --restart-every N empties
 * the cache every N requests, as a kvmmd restart does, keeping what the
 * policy learned (kvmmd --policy-state) unless --restart-forget.
 * --policy-state FILE loads what the policy learned from FILE before the
 * first request (if FILE exists) and saves it there at the end, as kvmmd
 * does: a state learned from a trace seeds a kvmmd, or another replay.
 * --tenant-limit ID=TIER:N[,TIER:N...] holds the requests whose trace
 * "tenant" is ID to that many blocks per tier, as kvmmd's option does;
 * the output then has each tenant's hits.
 *
 * Exit status: 0 success, 1 runtime failure, 2 usage error.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvmm/policy/replay.h"

#include "daemon_driver.h"

#define MAX_SWEEP 64

static void usage(FILE *f)
{
	fprintf(f,
		"usage: kvmm-replay --trace FILE --policy lru|lfu|arc|belady|asym\n"
		"                   --gpu-blocks N [--host-blocks N] [--nvme-blocks N]\n"
		"                   [--profile NAME|PATH] [--prefill-servers N]\n"
		"                   [--cache-output] [--prefix-rule on|off]\n"
		"                   [--ttl-pins demote|hold]\n"
		"                   [--sweep N1,N2,...] [--daemon SOCKET]\n"
		"                   [--max-requests N] [--model-daemon]\n"
		"                   [--per-request FILE] [--msa]\n"
		"                   [--restart-every N [--restart-forget]]\n"
		"                   [--policy-state FILE]\n"
		"                   [--tenant-limit ID=TIER:N[,TIER:N...] ...]\n"
		"                   [--progress] [--json]\n"
		"Capacities are in 512-token blocks; 'unlimited' is accepted.\n"
		"--msa: Multi-Segment Attention: every block of a request in a\n"
		"tier is served (a gap does not end the hits), only the blocks in\n"
		"no tier are recomputed, their attention x msa(k); the prefix rule\n"
		"is off (asym: on; --model-daemon: the policy's own) unless\n"
		"--prefix-rule says.  With --daemon the prefixes are\n"
		"opened with KVMM_PREFIX_OPEN_SEGMENTS (kvmmd ABI 1.6): hits are\n"
		"the blocks kvmmd shares or reloads, misses its holes and the\n"
		"blocks its restore plan hands out to recompute; --model-daemon\n"
		"--msa models those opens (the policy's own prefix rule, as kvmmd);\n"
		"they agree when kvmmd plans as the replay does: --restore-mode\n"
		"plan (the default) and --telemetry off (the reference profile,\n"
		"not corrected online); as kvmmd's admin the replay checks the\n"
		"first (an error) and the second (a warning).\n"
		"--daemon SOCKET: kvmmd must run --policy (--cache-policy) and\n"
		"the capacities given; another is refused, naming both.\n"
		"--tenant-limit ID=SPEC (repeatable): the requests of trace tenant\n"
		"ID (kvmm-agentgen --tenants) may hold that many blocks per tier,\n"
		"as kvmmd --tenant-limit; each tenant's hits are printed (in\n"
		"process only: --daemon replays as one uid).\n"
		"--restart-every N: before every N-th request the cache restarts\n"
		"empty, as kvmmd without an NVMe tier to recover; the policy keeps\n"
		"what it learned (kvmmd --policy-state) unless --restart-forget.\n"
		"--policy-state FILE: load what the policy learned from FILE\n"
		"first (when it exists), save it there at the end, as kvmmd.\n");
}

static int die_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "kvmm-replay: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n");
	usage(stderr);
	return 2;
}

static int parse_blocks(const char *s, uint64_t *v)
{
	char *end;
	unsigned long long x;

	if (!strcmp(s, "unlimited") || !strcmp(s, "inf")) {
		*v = POL_UNLIMITED;
		return 0;
	}
	/* a digit first: strtoull skips blanks and takes a sign */
	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	x = strtoull(s, &end, 10);
	if (errno || *end || x >= POL_UNLIMITED)
		return -EINVAL;
	*v = x;
	return 0;
}

static void progress(void *arg, size_t done, size_t total)
{
	fprintf(stderr, "kvmm-replay: %s: %zu/%zu requests\n",
		(const char *)arg, done, total);
}

/* --per-request: "request hit_blocks gpu host nvme", request from 0 */
static void request_hits(void *arg, size_t r, const uint64_t *hits)
{
	fprintf(arg, "%zu %llu %llu %llu %llu\n", r,
		(unsigned long long)(hits[POL_TIER_GPU] + hits[POL_TIER_HOST] +
				     hits[POL_TIER_NVME]),
		(unsigned long long)hits[POL_TIER_GPU],
		(unsigned long long)hits[POL_TIER_HOST],
		(unsigned long long)hits[POL_TIER_NVME]);
}

/* Each tenant's hits, under the row, when there are several or limits. */
static void print_tenants(const struct pol_replay_result *r)
{
	if (r->ntenants < 2 && !r->tenants_limited)
		return;
	for (size_t i = 0; i < r->ntenants; i++) {
		const struct pol_replay_tenant *t = &r->tenants[i];
		char id[16];

		if (t->id == POL_TENANT_OTHERS)
			snprintf(id, sizeof(id), "others");
		else
			snprintf(id, sizeof(id), "%u", t->id);
		printf("  tenant %-10s %8llu requests %10llu blocks  hit %.4f  limit gpu %llu host %llu nvme %llu  moved %llu\n",
		       id, (unsigned long long)t->requests,
		       (unsigned long long)t->blocks,
		       t->blocks ? (double)t->hit_blocks / (double)t->blocks :
				   0,
		       (unsigned long long)t->limit[0],
		       (unsigned long long)t->limit[1],
		       (unsigned long long)t->limit[2],
		       (unsigned long long)t->limit_moves);
	}
}

static void print_row(const struct pol_replay_result *r)
{
	char cap[32];

	if (r->capacity[POL_TIER_GPU] >= POL_UNLIMITED)
		snprintf(cap, sizeof(cap), "unlimited");
	else
		snprintf(cap, sizeof(cap), "%llu",
			 (unsigned long long)r->capacity[POL_TIER_GPU]);
	printf("%-8s %10s %8.4f %8.4f %10.1f %10.1f %8.3f %8.3f\n",
	       pol_kind_string(r->kind), cap, pol_replay_hit_ratio(r),
	       pol_replay_token_ratio(r), r->modeled_prefill_s,
	       r->reuse_overhead_s, r->ttft_mean_s, r->ttft_p99_s);
}

/*
 * --policy-state FILE: lock it, read it when it exists and check that it
 * is a state of this policy, all before the first line of output (a
 * damaged file failed the replay after the table's header).  The lock's
 * fd, or -1 with the reason on stderr.
 */
static int load_state(const char *state, enum pol_kind kind, void **buf,
		      size_t *len)
{
	struct pol_learned_summary *s;
	char why[4096 + 200];
	int lock, r;

	/* a FIFO there blocked the read; a link there the save replaces */
	r = pol_learned_check_path(state, why, sizeof(why));
	if (r) {
		fprintf(stderr, "kvmm-replay: --policy-state: %s\n", why);
		return -1;
	}
	/* as kvmmd does: one program per state file */
	lock = pol_learned_lock_file(state);
	if (lock < 0) {
		fprintf(stderr, "kvmm-replay: --policy-state %s: %s\n", state,
			lock == -EBUSY ?
				"in use (a kvmmd or another replay holds its .lock)" :
				strerror(-lock));
		return -1;
	}
	r = pol_learned_read_file(state, buf, len);
	if (r == -ENOENT)
		return lock; /* none yet: the policy learns from the start */
	if (r) {
		fprintf(stderr, "kvmm-replay: --policy-state %s: %s\n", state,
			pol_learned_file_strerror(r));
		close(lock);
		return -1;
	}
	s = malloc(sizeof(*s));
	r = s ? pol_learned_describe(*buf, *len, s) : -ENOMEM;
	if (!r && s->kind != kind) {
		fprintf(stderr,
			"kvmm-replay: --policy-state %s: learned by %s, not %s\n",
			state, pol_kind_string(s->kind), pol_kind_string(kind));
		r = -ESTALE;
	} else if (r) {
		fprintf(stderr, "kvmm-replay: --policy-state %s: %s\n", state,
			r == -EINVAL ? "not a policy state, or damaged" :
			r == -ESTALE ? "written by another policy or version" :
				       strerror(-r));
	}
	free(s);
	if (r) {
		free(*buf);
		*buf = NULL;
		close(lock);
		return -1;
	}
	return lock;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "trace", required_argument, NULL, 't' },
		{ "policy", required_argument, NULL, 'p' },
		{ "gpu-blocks", required_argument, NULL, 'g' },
		{ "host-blocks", required_argument, NULL, 'H' },
		{ "nvme-blocks", required_argument, NULL, 'n' },
		{ "profile", required_argument, NULL, 'P' },
		{ "prefill-servers", required_argument, NULL, 's' },
		{ "cache-output", no_argument, NULL, 'o' },
		{ "prefix-rule", required_argument, NULL, 'r' },
		{ "ttl-pins", required_argument, NULL, 'T' },
		{ "sweep", required_argument, NULL, 'S' },
		{ "daemon", required_argument, NULL, 'd' },
		{ "progress", no_argument, NULL, 'q' },
		{ "max-requests", required_argument, NULL, 'm' },
		{ "model-daemon", no_argument, NULL, 'M' },
		{ "per-request", required_argument, NULL, 'R' },
		{ "msa", no_argument, NULL, 'A' },
		{ "restart-every", required_argument, NULL, 'E' },
		{ "restart-forget", no_argument, NULL, 'F' },
		{ "policy-state", required_argument, NULL, 'L' },
		{ "tenant-limit", required_argument, NULL, 'U' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct pol_replay_opts o = { .size = sizeof(o), .prefix_rule = -1 };
	struct pol_replay_limit limits[POL_REPLAY_TENANTS];
	const char *trace = NULL, *policy = NULL, *profile = NULL,
		   *daemon = NULL, *per_request = NULL, *state = NULL;
	void *state_in = NULL, *state_out = NULL;
	int state_lock = -1;
	size_t state_out_len = 0;
	FILE *per_request_f = NULL;
	uint64_t sweep[MAX_SWEEP], max_requests = 0;
	size_t nsweep = 0;
	bool json = false, have_gpu = false, want_progress = false;
	struct pol_cost_model model;
	struct pol_trace t;
	char err[512];
	int c, e;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			trace = optarg;
			break;
		case 'p':
			policy = optarg;
			break;
		case 'g':
			if (parse_blocks(optarg, &o.capacity[POL_TIER_GPU]) ||
			    !o.capacity[POL_TIER_GPU])
				return die_usage("bad --gpu-blocks '%s' "
						 "(a positive block count)",
						 optarg);
			have_gpu = true;
			break;
		case 'H':
			if (parse_blocks(optarg, &o.capacity[POL_TIER_HOST]))
				return die_usage("bad --host-blocks '%s'",
						 optarg);
			break;
		case 'n':
			if (parse_blocks(optarg, &o.capacity[POL_TIER_NVME]))
				return die_usage("bad --nvme-blocks '%s'",
						 optarg);
			break;
		case 'P':
			profile = optarg;
			break;
		case 's': {
			char *end;
			long v = strtol(optarg, &end, 10);

			if (!isdigit((unsigned char)*optarg) || *end || v < 1 ||
			    v > 4096)
				return die_usage("bad --prefill-servers '%s' "
						 "(1..4096)",
						 optarg);
			o.prefill_servers = (unsigned)v;
			break;
		}
		case 'o':
			o.cache_output = true;
			break;
		case 'r':
			if (!strcmp(optarg, "on"))
				o.prefix_rule = 1;
			else if (!strcmp(optarg, "off"))
				o.prefix_rule = 0;
			else
				return die_usage("bad --prefix-rule '%s' "
						 "(on or off)",
						 optarg);
			break;
		case 'T':
			if (!strcmp(optarg, "hold"))
				o.ttl_hold = true;
			else if (!strcmp(optarg, "demote"))
				o.ttl_hold = false;
			else
				return die_usage("bad --ttl-pins '%s' "
						 "(demote or hold)",
						 optarg);
			break;
		case 'S': {
			char *dup = strdup(optarg), *tok = dup, *comma;

			if (!dup)
				return 1;
			/* every word between commas, empty ones too:
			 * strtok_r skipped them and took "1,,2" and "5," */
			for (; tok; tok = comma ? comma + 1 : NULL) {
				comma = strchr(tok, ',');
				if (comma)
					*comma = '\0';
				if (nsweep == MAX_SWEEP || !*tok ||
				    parse_blocks(tok, &sweep[nsweep]) ||
				    !sweep[nsweep]) {
					free(dup);
					return die_usage("bad --sweep '%s' "
							 "(up to 64 positive "
							 "counts, comma-"
							 "separated)",
							 optarg);
				}
				nsweep++;
			}
			free(dup);
			break;
		}
		case 'd':
			daemon = optarg;
			break;
		case 'm':
			if (parse_blocks(optarg, &max_requests) ||
			    !max_requests)
				return die_usage("bad --max-requests '%s'",
						 optarg);
			break;
		case 'M':
			o.daemon_model = true;
			break;
		case 'R':
			per_request = optarg;
			break;
		case 'A':
			o.msa = true;
			break;
		case 'E':
			if (parse_blocks(optarg, &o.restart_every) ||
			    !o.restart_every)
				return die_usage("bad --restart-every '%s' "
						 "(a positive request count)",
						 optarg);
			break;
		case 'F':
			o.restart_forget = true;
			break;
		case 'L':
			state = optarg;
			break;
		case 'U': {
			const char *eq = strchr(optarg, '=');
			struct pol_replay_limit *l = &limits[o.ntenant_limits];
			char *end;
			unsigned long id;

			if (o.ntenant_limits == POL_REPLAY_TENANTS - 1)
				return die_usage("more than 15 --tenant-limit "
						 "('%s')",
						 optarg);
			errno = 0;
			id = strtoul(optarg, &end, 10);
			if (!eq || end != eq ||
			    !isdigit((unsigned char)*optarg) || errno ||
			    id >= POL_TENANT_OTHERS ||
			    pol_tenant_limit_parse(eq + 1, l->blocks))
				return die_usage(
					"bad --tenant-limit '%s' "
					"(ID=TIER:N[,TIER:N...]: a "
					"trace tenant; TIER gpu, host "
					"or nvme, any order, each at "
					"most once, N > 0; or ID=none)",
					optarg);
			l->id = (uint32_t)id;
			for (size_t i = 0; i < o.ntenant_limits; i++)
				if (limits[i].id == l->id)
					return die_usage("--tenant-limit '%s': "
							 "that tenant twice",
							 optarg);
			/* "none": as if not given */
			if (l->blocks[0] || l->blocks[1] || l->blocks[2])
				o.ntenant_limits++;
			o.tenant_limits = limits;
			break;
		}
		case 'q':
			want_progress = true;
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc)
		return die_usage("unexpected argument '%s'", argv[optind]);
	if (!trace)
		return die_usage("%s", "--trace FILE is required");
	if (!policy)
		return die_usage("%s", "--policy NAME is required");
	if (pol_kind_parse(policy, &o.kind))
		return die_usage("unknown policy '%s' "
				 "(lru, lfu, arc, belady or asym)",
				 policy);
	if (!have_gpu && !nsweep)
		return die_usage("%s",
				 "--gpu-blocks N (or --sweep) is required");
	if (daemon && (o.kind == POL_BELADY || nsweep > 1)) {
		fprintf(stderr, "kvmm-replay: --daemon replays one capacity "
				"of an online policy (lru, lfu, arc or asym), "
				"as kvmmd was started\n");
		return 2;
	}
	if (daemon && o.ntenant_limits)
		return die_usage("%s",
				 "--tenant-limit replays in process: "
				 "--daemon sends every request as one uid "
				 "(start kvmmd with --tenant-limit)");
	for (size_t i = 0; i < o.ntenant_limits; i++)
		for (unsigned tier = 0; tier < POL_TIER_COUNT; tier++)
			if (limits[i].blocks[tier] && !o.capacity[tier] &&
			    tier != POL_TIER_GPU)
				/* the option that is missing, not
				 * both (one may have been given) */
				return die_usage(
					"--tenant-limit on the %s",
					tier == POL_TIER_HOST ?
						"host tier, which has no "
						"capacity "
						"(give --host-blocks)" :
						"nvme tier, which has no "
						"capacity (give --nvme-blocks)");
	if (o.restart_forget && !o.restart_every)
		return die_usage("%s",
				 "--restart-forget needs --restart-every");
	if (o.restart_every && (daemon || o.kind == POL_BELADY))
		return die_usage("%s", "--restart-every replays in process an "
				       "online policy (not --daemon, not "
				       "belady)");
	if (state && (daemon || nsweep > 1))
		return die_usage("%s", "--policy-state replays one capacity in "
				       "process (kvmmd keeps its own)");
	if (state) {
		state_lock =
			load_state(state, o.kind, &state_in, &o.learned_in_len);
		if (state_lock < 0)
			return 1;
		o.learned_in = state_in;
		o.learned_out = &state_out;
		o.learned_out_len = &state_out_len;
	}
	if (per_request && nsweep > 1)
		return die_usage("%s", "--per-request takes one capacity, "
				       "not a --sweep");
	if (profile) {
		e = pol_cost_load(profile, &model, err, sizeof(err));
		if (e) {
			fprintf(stderr, "kvmm-replay: --profile: %s\n", err);
			return 2;
		}
	} else {
		pol_cost_reference(&model);
	}
	o.cost = &model;
	e = pol_trace_load(trace, &t, err, sizeof(err));
	if (e) {
		fprintf(stderr, "kvmm-replay: %s: %s\n", trace, err);
		return 1;
	}
	if (max_requests && max_requests < t.nreqs)
		t.nreqs = max_requests; /* the first N in timestamp order */
	if (o.daemon_model && !daemon) {
		const struct pol_trace_req *q;

		if (pol_trace_has_ttl(&t, &q)) {
			/* a model that dropped them gave figures of
			 * another trace, silently */
			fprintf(stderr,
				"kvmm-replay: --model-daemon: %s line %u "
				"has %s, which kvmmd's prefix opens never "
				"set (--daemon refuses such a trace too); "
				"replay without --model-daemon, or without "
				"the trace's \"ttl_ms\" and \"priority\"\n",
				trace, q->line,
				q->ttl_ms ? "a \"ttl_ms\"" : "a \"priority\"");
			pol_trace_free(&t);
			return 1;
		}
	}
	if (o.cache_output && pol_trace_infer_outputs(&t)) {
		fprintf(stderr, "kvmm-replay: out of memory\n");
		pol_trace_free(&t);
		return 1;
	}
	if (per_request) {
		per_request_f = fopen(per_request, "w");
		if (!per_request_f) {
			fprintf(stderr, "kvmm-replay: --per-request %s: %s\n",
				per_request, strerror(errno));
			pol_trace_free(&t);
			return 1;
		}
		o.request_hits = request_hits;
		o.request_hits_arg = per_request_f;
	}
	if (want_progress || isatty(STDERR_FILENO)) {
		o.progress = progress;
		o.progress_arg = (void *)policy;
	}
	if (!nsweep)
		sweep[nsweep++] = o.capacity[POL_TIER_GPU];
	for (size_t i = 0; i < nsweep; i++) {
		struct pol_replay_result r;

		o.capacity[POL_TIER_GPU] = sweep[i];
		e = daemon ? kr_daemon_run(daemon, &t, &o, &r) :
			     pol_replay_run(&t, &o, &r);
		if (e) {
			/* -ECANCELED: a kvmmd whose set-up differs, said */
			if (e != -ECANCELED)
				fprintf(stderr,
					"kvmm-replay: replay failed: %s%s\n",
					strerror(-e),
					state && (e == -EINVAL ||
						  e == -ESTALE) ?
						" (--policy-state: damaged, or of another policy or version)" :
						"");
			if (per_request_f)
				fclose(per_request_f);
			pol_trace_free(&t);
			return 1;
		}
		if (json) {
			pol_replay_json(&r, stdout);
			putchar('\n');
		} else {
			/* after the first replay worked: a refused --daemon
			 * (or state) printed a header of an empty table */
			if (!i)
				printf("%-8s %10s %8s %8s %10s %10s %8s %8s\n",
				       "policy", "gpu", "hit_blk", "hit_tok",
				       "prefill_s", "reuse_s", "ttft_s",
				       "p99_s");
			print_row(&r);
			print_tenants(&r);
		}
		fflush(stdout);
	}
	pol_trace_free(&t);
	free(state_in);
	if (state && state_out) {
		e = pol_learned_write_file(state, state_out, state_out_len);
		free(state_out);
		if (e) {
			fprintf(stderr, "kvmm-replay: --policy-state %s: %s\n",
				state, strerror(-e));
			return 1;
		}
	}
	if (per_request_f && fclose(per_request_f)) {
		fprintf(stderr, "kvmm-replay: --per-request %s: %s\n",
			per_request, strerror(errno));
		return 1;
	}
	return 0;
}
