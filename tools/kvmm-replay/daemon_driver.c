// SPDX-License-Identifier: MIT
/*
 * kvmm-replay --daemon SOCKET: the same replay, driven through libkvmm
 * against a running kvmmd, so the daemon's block cache (its pol_cache,
 * move handler, tiers and migrations) is what decides the hits.
 *
 * One trace block is one kvmm block: the region is 1 layer with tiny
 * heads, so a block is two of the daemon's pages whatever the page size;
 * the trace's 512 tokens per block only matter to the cost model.  Each
 * request, in trace order:
 *
 *   kvmm_seq_open_prefix(hash_ids)   the daemon's prefix lookup; the tier
 *                                    of every hit comes from the
 *                                    TIER_STATS hit counters
 *   kvmm_seq_extend(all blocks)      the missing blocks get fresh pages
 *   kvmm_block_publish(the rest)     hash_ids + 1 are the block hashes
 *                                    (0 is not a valid kvmm hash: a
 *                                    trace with id 2^64 - 1 is refused)
 *   kvmm_seq_close
 *   TIER_STATS until no migration is in flight, so the next request sees
 *   the cache settled (the in-process replay has no copies in flight)
 *
 * With --msa the prefix is opened with KVMM_PREFIX_OPEN_ACTIONS |
 * KVMM_PREFIX_OPEN_SEGMENTS (kvmm_seq_open_prefix_opts): kvmmd matches up
 * to the last block it has in some tier and says per block what it did:
 * shared from the GPU or reloaded from the host or NVMe tier (a hit of
 * that tier), or RECOMPUTE (a hole, or a cached block its restore plan
 * would rather have recomputed: a miss).  The driver recomputes those as
 * an engine would: like the request's new blocks (the driver writes no
 * bytes into either), published with them from the first RECOMPUTE block
 * on, in one BLOCK_PUBLISH (the blocks shared or reloaded among them are
 * duplicates kvmmd skips).  The tiers come from the actions, the
 * TIER_STATS counters only check them (kvmmd counts a planned recompute
 * as a hit of its tier).
 *
 * The prefill model, reuse overhead and TTFT queue are computed from the
 * hit pattern exactly as kvmm/policy/replay.c does (with --msa by the
 * same function, pol_replay_msa_request()).  Capacities and policy are
 * the daemon's: they are read from TIER_STATS and ADMIN_STATUS and must
 * match the command line (see Documentation/policy.md for how to start
 * kvmmd).  A reply's
 * new pages arrive as fds, imported one message (253) at a time:
 * raise_nofile() sizes the limit for one message.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "kvmm/lib/client.h"
#include "kvmm/policy/hmap.h"
#include "kvmm/policy/replay.h"
#include "kvmm/uapi.h"

#include "daemon_driver.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int tier_stats(struct kvmm_conn *c, struct kvmm_tier_stats_reply *st)
{
	size_t len = 0;
	int e;

	memset(st, 0, sizeof(*st));
	e = kc_request(c, KVMM_CMD_TIER_STATS, NULL, 0, st, sizeof(*st), &len);
	/* a 1.6 daemon's reply ends before prefix_holes (left 0): the
	 * driver reads none of the 1.7 fields */
	if (!e && len < offsetof(struct kvmm_tier_stats_reply, prefix_holes))
		e = -EPROTO;
	return e;
}

/* TIER_STATS once no demotion is in flight (waits are short: one copy). */
static int settled_stats(struct kvmm_conn *c, struct kvmm_tier_stats_reply *st)
{
	for (int tries = 0; tries < 100000; tries++) {
		int e = tier_stats(c, st);

		if (e || !st->migrations_in_flight)
			return e;
		usleep(100);
	}
	return -ETIMEDOUT;
}

/*
 * The policy capacities kvmmd's cache_setup.c derives from its options: GPU =
 * --cache-gpu-blocks; host = slots - 2 and NVMe = slots - 1 (slots kept
 * for blocks moving on), host 8 fewer again with an NVMe tier when it
 * has at least 64 slots (staging for NVMe restores); TIER_STATS reports
 * the slots.
 */
static uint64_t policy_cap(unsigned tier, uint64_t reported, bool nvme)
{
	if (tier == POL_TIER_HOST && reported) {
		uint64_t cap = reported > 4 ? reported - 2 : 1;

		return nvme && reported >= 64 ? cap - 8 : cap;
	}
	if (tier == POL_TIER_NVME && reported)
		return reported > 1 ? reported - 1 : 1;
	return reported;
}

static int check_caps(const struct kvmm_tier_stats_reply *st,
		      const struct pol_replay_opts *o)
{
	static const char *const name[] = { "gpu", "host", "nvme" };
	static const unsigned extra[] = { 0, 2, 1 };
	int bad = 0;

	for (unsigned t = 0; t < POL_TIER_COUNT; t++) {
		uint64_t have = policy_cap(
			t, st->tiers[t].capacity_blocks,
			st->tiers[POL_TIER_NVME].capacity_blocks > 0);

		if (have == o->capacity[t])
			continue;
		fprintf(stderr,
			"kvmm-replay: --%s-blocks %llu but kvmmd's cache has "
			"%llu %s blocks\n",
			name[t], (unsigned long long)o->capacity[t],
			(unsigned long long)have, name[t]);
		bad = 1;
	}
	if (!bad)
		return 0;
	fprintf(stderr,
		"kvmm-replay: start kvmmd with --cache-policy P "
		"--cache-gpu-blocks G [--host-mem (H+%u)*B, 8 more with "
		"NVMe when that is 64 or more] "
		"[--nvme-path F --nvme-size for N+%u slots], B = %llu bytes "
		"per block (two pages), and --gpu-mem holding G plus the "
		"longest request's blocks\n",
		extra[1], extra[2],
		(unsigned long long)st->tiers[0].block_bytes);
	return -EINVAL;
}

/*
 * Each reply brings the pages it maps new as fds, and libkvmm imports and
 * closes each message's fds (at most KVMM_MSG_MAX_FDS, 253) before it
 * receives the next (an imported page keeps no fd on either backend;
 * Documentation/admin.md): what must fit is one message of the longest
 * request's reply, two pages per block, plus the fds the process holds
 * anyway (256 is plenty).  That is 509 at most, under the usual soft limit
 * of 1024, so this normally changes nothing; when the limit is lower,
 * raise our own RLIMIT_NOFILE before connecting, soft to hard and hard too
 * when privileged (libkvmm leaves a program's limits alone).
 */
static void raise_nofile(uint32_t maxblocks)
{
	uint64_t per_msg = 2ull * maxblocks < KVMM_MSG_MAX_FDS ?
				   2ull * maxblocks :
				   KVMM_MSG_MAX_FDS;
	uint64_t need = per_msg + 256;
	struct vmm_nofile r;

	if (vmm_nofile_raise(need, &r) == -EMFILE)
		fprintf(stderr,
			"kvmm-replay: --daemon: a reply brings up to %llu "
			"page fds at a time, about %llu fds with ours, but "
			"RLIMIT_NOFILE is %llu (hard %llu): run ulimit -n "
			"%llu first\n",
			(unsigned long long)per_msg, (unsigned long long)need,
			(unsigned long long)r.soft, (unsigned long long)r.hard,
			(unsigned long long)need);
}

/*
 * Account one request that hit its first k blocks, from[] of them from
 * each tier, as pol_replay_run() does; returns its modelled prefill.
 * The daemon does not say which hit came from where, only how many: the
 * cost needs only the counts (a reload costs the same at every
 * position).
 */
static double prefix_request(const struct pol_cost_model *m,
			     struct pol_replay_result *res,
			     const struct pol_trace_req *q, const uint64_t *h,
			     uint32_t k, const uint64_t *from, const double *rc,
			     struct pol_hmap *seen)
{
	double cost = 0, nocache = 0;

	for (unsigned ti = 0; ti < POL_TIER_COUNT; ti++) {
		res->hits[ti] += from[ti];
		if (ti != POL_TIER_GPU)
			cost += (double)from[ti] *
				pol_cost_reload_block_s(m, ti);
	}
	/* every hit had been seen: its reload is reuse overhead */
	res->reuse_overhead_s += cost;
	for (uint32_t i = 0; i < q->nblocks; i++) {
		uint32_t *s = pol_hmap_slot(seen, h[i]);
		bool was = *s != UINT32_MAX;

		*s = 1;
		nocache += rc[i];
		if (i >= k) {
			cost += rc[i];
			if (was)
				res->reuse_overhead_s += rc[i];
		}
	}
	pol_replay_count(res, q, k, cost, nocache);
	return cost;
}

/* Where kvmmd served each block of an --msa open from: the tier of a
 * shared or reloaded block, none for RECOMPUTE and past the prefix. */
static void msa_where(const uint8_t *acts, uint32_t k, uint32_t n,
		      uint8_t *where)
{
	for (uint32_t i = 0; i < n; i++)
		where[i] = i >= k			       ? POL_TIER_NONE :
			   acts[i] == KVMM_BLOCK_GPU_SHARED    ? POL_TIER_GPU :
			   acts[i] == KVMM_BLOCK_RELOADED_HOST ? POL_TIER_HOST :
			   acts[i] == KVMM_BLOCK_RELOADED_NVME ? POL_TIER_NVME :
								 POL_TIER_NONE;
}

/*
 * The TIER_STATS hits of an --msa open (from[]) against its actions:
 * every GPU hit shared, at least the reloads of each tier counted there
 * (the rest of a tier's hits are blocks the plan recomputes), and no
 * more hits than blocks the prefix has besides its holes.
 */
static bool msa_stats_agree(const uint64_t *from,
			    const struct kvmm_prefix_opts *po, uint32_t k)
{
	uint64_t served =
		(uint64_t)po->shared + po->reloaded_host + po->reloaded_nvme;
	uint64_t all =
		from[POL_TIER_GPU] + from[POL_TIER_HOST] + from[POL_TIER_NVME];

	return from[POL_TIER_GPU] == po->shared &&
	       from[POL_TIER_HOST] >= po->reloaded_host &&
	       from[POL_TIER_NVME] >= po->reloaded_nvme &&
	       all - served <= po->recompute && all <= k;
}

/*
 * The replay is labelled with --policy: kvmmd must run that policy, or the
 * figures are another policy's under this one's name.  --msa agrees with
 * the in-process replay only when kvmmd plans as the replay does too:
 * --restore-mode plan, and the profile's rates as they are (--telemetry
 * off: with telemetry it corrects them from the copies it times).  Ask
 * ADMIN_STATUS where this process may (root, or kvmmd's admin uid): a
 * policy or forced mode that differs is an error here rather than a
 * mismatch request after request; telemetry gets a warning, since the
 * plans only move once a correction changes a choice.  Not allowed to
 * ask, or a daemon before ABI 1.5 (no names in the reply): say so and go
 * on.  A refusal is -ECANCELED, its reason printed here (main's "replay
 * failed: Invalid argument" after it only confused).
 */
static int check_daemon_config(const char *socket_path,
			       const struct pol_replay_opts *o)
{
	const char *want = pol_kind_string(o->kind);
	struct kvmm_status_reply st = { 0 };
	struct kvmm_conn *admin;
	size_t len = 0;
	int e;

	e = kc_connect_admin(socket_path, &admin);
	if (e && e != -EPERM) {
		fprintf(stderr,
			"kvmm-replay: --daemon %s: cannot reach kvmmd: %s\n",
			socket_path, kvmm_strerror(e));
		return e;
	}
	if (e) {
		fprintf(stderr,
			"kvmm-replay: --daemon: cannot ask kvmmd its policy "
			"(not its admin); start it with --cache-policy %s%s\n",
			want,
			o->msa ? ", --restore-mode plan and --telemetry off" :
				 "");
		return 0;
	}
	e = kc_request(admin, KVMM_CMD_ADMIN_STATUS, NULL, 0, &st, sizeof(st),
		       &len);
	kvmm_disconnect(admin);
	if (e || len < offsetof(struct kvmm_status_reply, restore_mode) +
				 sizeof(st.restore_mode)) {
		fprintf(stderr,
			"kvmm-replay: --daemon: kvmmd does not say its policy "
			"(before ABI 1.5); start it with --cache-policy %s\n",
			want);
		return 0;
	}
	st.cache_policy[sizeof(st.cache_policy) - 1] = 0;
	st.restore_mode[sizeof(st.restore_mode) - 1] = 0;
	if (strcmp(st.cache_policy, want)) {
		fprintf(stderr,
			"kvmm-replay: --policy %s but kvmmd runs --cache-policy "
			"%s: start it with --cache-policy %s, or replay --policy "
			"%s\n",
			want, st.cache_policy, want, st.cache_policy);
		return -ECANCELED;
	}
	if (!o->msa)
		return 0;
	if (strcmp(st.restore_mode, "plan")) {
		fprintf(stderr,
			"kvmm-replay: --daemon --msa: kvmmd runs with "
			"--restore-mode %s; the replay models its plans "
			"(--restore-mode plan)\n",
			st.restore_mode);
		return -ECANCELED;
	}
	if (st.cost_host_bw || st.cost_nvme_bw)
		fprintf(stderr, "kvmm-replay: --daemon --msa: kvmmd corrects "
				"its cost model from telemetry; its plans may "
				"leave the replay's (start it with "
				"--telemetry off)\n");
	return 0;
}

int kr_daemon_run(const char *socket_path, const struct pol_trace *t,
		  const struct pol_replay_opts *o,
		  struct pol_replay_result *res)
{
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.socket_path = socket_path,
					.name = "kvmm-replay",
					.map_ahead_set = 1 };
	struct kvmm_region_opts ro = { .size = sizeof(ro),
				       .layers = 1,
				       .kv_heads = 1,
				       .head_dim = 64,
				       .dtype_bytes = 2,
				       .max_seqs = 1 };
	struct pol_cost_model refm;
	const struct pol_cost_model *m;
	struct kvmm_tier_stats_reply st0, st1;
	struct kvmm_conn *conn = NULL;
	struct kvmm_region *reg = NULL;
	uint32_t maxblocks = 1, tpb, seq, k;
	uint64_t *hashes = NULL, probe = ~0ull;
	double *prefill = NULL, *ttft = NULL, *rc = NULL, *free_at = NULL;
	double *attn = NULL, *bcost = NULL, lin = 0;
	uint8_t *acts = NULL, *where = NULL, probe_act;
	struct kvmm_prefix_opts po = { .size = sizeof(po),
				       .flags = KVMM_PREFIX_OPEN_SEGMENTS };
	double t0 = now_s(), last_progress = t0;
	unsigned servers = o->prefill_servers ? o->prefill_servers : 2;
	struct pol_hmap seen = { 0 };
	size_t cur = 0;
	int e;

	if (o->cache_output) {
		fprintf(stderr, "kvmm-replay: --cache-output is not supported "
				"with --daemon\n");
		return -EOPNOTSUPP;
	}
	if (o->prefix_rule >= 0)
		fprintf(stderr, "kvmm-replay: --prefix-rule is ignored with "
				"--daemon (kvmmd uses the policy's default)\n");
	m = pol_replay_begin(o, servers, &refm, res);
	for (size_t r = 0; r < t->nreqs; r++) {
		if (t->reqs[r].nblocks > maxblocks)
			maxblocks = t->reqs[r].nblocks;
		if (t->reqs[r].ttl_ms || t->reqs[r].priority) {
			fprintf(stderr, "kvmm-replay: --daemon: the trace has "
					"TTLs or priorities, which libkvmm "
					"cannot set\n");
			return -EOPNOTSUPP;
		}
		/* hash_ids go to kvmmd as id + 1 (0 is no kvmm hash): the
		 * largest id would become 0 */
		for (uint32_t i = 0; i < t->reqs[r].nblocks; i++)
			if (pol_trace_blocks(t, &t->reqs[r])[i] == UINT64_MAX) {
				fprintf(stderr,
					"kvmm-replay: --daemon: line %u: hash_id "
					"%llu has no kvmm hash (an id goes to "
					"kvmmd as id + 1, and 0 is none)\n",
					t->reqs[r].line,
					(unsigned long long)UINT64_MAX);
				return -ERANGE;
			}
	}
	if (maxblocks > KVMM_PREFIX_MAX_BLOCKS)
		return -E2BIG;

	e = check_daemon_config(socket_path, o);
	if (e)
		return e;
	raise_nofile(maxblocks);
	e = kvmm_connect(&co, &conn);
	if (e) {
		fprintf(stderr,
			"kvmm-replay: --daemon %s: cannot reach kvmmd: %s\n",
			socket_path, kvmm_strerror(e));
		return e;
	}
	/* tokens per block depend on the daemon's page size: ask */
	ro.max_tokens = 1;
	e = kvmm_region_create(conn, &ro, &reg);
	if (e)
		goto out;
	tpb = kvmm_region_tokens_per_block(reg);
	kvmm_region_destroy(reg);
	reg = NULL;
	ro.max_tokens = maxblocks * tpb;
	e = kvmm_region_create(conn, &ro, &reg);
	if (e) {
		fprintf(stderr, "kvmm-replay: region of %u blocks: %s\n",
			maxblocks, kvmm_strerror(e));
		goto out;
	}
	/* a lookup opens the cache's tiers; then its capacities are known
	 * (with --msa it is one with segments: a daemon before ABI 1.6
	 * says so here) */
	po.actions = &probe_act;
	e = o->msa ? kvmm_seq_open_prefix_opts(reg, &probe, 1, &seq, &k, &po) :
		     kvmm_seq_open_prefix(reg, &probe, 1, &seq, &k);
	if (e == -EOPNOTSUPP && o->msa) {
		fprintf(stderr, "kvmm-replay: --daemon --msa: kvmmd has no "
				"KVMM_PREFIX_OPEN_SEGMENTS (ABI 1.6 or later "
				"needed)\n");
		goto out;
	}
	if (!e)
		e = kvmm_seq_close(reg, seq);
	if (!e)
		e = settled_stats(conn, &st0);
	if (e)
		goto out;
	e = check_caps(&st0, o);
	if (e)
		goto out;

	e = -ENOMEM;
	hashes = malloc(maxblocks * sizeof(*hashes));
	prefill = malloc((t->nreqs + 1) * sizeof(*prefill));
	ttft = malloc((t->nreqs + 1) * sizeof(*ttft));
	rc = malloc((maxblocks + 1) * sizeof(*rc));
	free_at = calloc(servers, sizeof(*free_at));
	attn = malloc((maxblocks + 1) * sizeof(*attn));
	bcost = malloc((maxblocks + 1) * sizeof(*bcost));
	acts = malloc(maxblocks + 1);
	where = malloc(maxblocks + 1);
	if (!hashes || !prefill || !ttft || !rc || !free_at || !attn ||
	    !bcost || !acts || !where || pol_hmap_init(&seen, t->nhashes))
		goto out;
	lin = pol_replay_msa_terms(m, maxblocks, rc, attn);
	po.actions = acts;

	for (size_t r = 0; r < t->nreqs; r++) {
		const struct pol_trace_req *q = &t->reqs[r];
		const uint64_t *h = pol_trace_blocks(t, q);
		uint32_t n = q->nblocks;
		uint64_t from[POL_TIER_COUNT], nfrom = 0;
		uint32_t p0;

		cur = r;
		if (!n) {
			uint64_t none[POL_TIER_COUNT] = { 0 };

			prefill[r] = 0;
			/* counted as in process (its tenant too) */
			pol_replay_count(res, q, 0, 0, 0);
			if (o->request_hits)
				o->request_hits(o->request_hits_arg, r, none);
			continue;
		}
		for (uint32_t i = 0; i < n; i++)
			hashes[i] = h[i] + 1;
		e = o->msa ? kvmm_seq_open_prefix_opts(reg, hashes, n, &seq, &k,
						       &po) :
			     kvmm_seq_open_prefix(reg, hashes, n, &seq, &k);
		if (e)
			goto err_req;
		/* the client fills the blocks from the first one to
		 * recompute on (a hole, with --msa) and publishes them */
		for (p0 = 0; o->msa && p0 < k; p0++)
			if (acts[p0] == KVMM_BLOCK_RECOMPUTE)
				break;
		if (!o->msa)
			p0 = k;
		e = kvmm_seq_extend(reg, seq, n * tpb);
		if (!e && p0 < n) {
			int p = kvmm_block_publish(reg, seq, p0, n - p0,
						   p0 ? hashes[p0 - 1] : 0,
						   hashes + p0);
			e = p < 0 ? p : 0;
		}
		if (!e)
			e = kvmm_seq_close(reg, seq);
		if (!e)
			e = settled_stats(conn, &st1);
		if (e)
			goto err_req;
		for (unsigned ti = 0; ti < POL_TIER_COUNT; ti++) {
			from[ti] = st1.tiers[ti].hits - st0.tiers[ti].hits;
			nfrom += from[ti];
		}
		if (o->msa && !msa_stats_agree(from, &po, k)) {
			fprintf(stderr,
				"kvmm-replay: request %zu: %u blocks, %u "
				"shared, %u + %u reloaded, %u to recompute, "
				"but the tiers count %llu + %llu + %llu hits "
				"(another client?)\n",
				r, k, po.shared, po.reloaded_host,
				po.reloaded_nvme, po.recompute,
				(unsigned long long)from[POL_TIER_GPU],
				(unsigned long long)from[POL_TIER_HOST],
				(unsigned long long)from[POL_TIER_NVME]);
			e = -EPROTO;
			goto out;
		}
		if (!o->msa && nfrom != k) {
			fprintf(stderr,
				"kvmm-replay: request %zu: %u blocks hit but "
				"the tiers count %llu (another client?)\n",
				r, k, (unsigned long long)nfrom);
			e = -EPROTO;
			goto out;
		}
		st0 = st1;
		if (o->msa) {
			msa_where(acts, k, n, where);
			from[POL_TIER_GPU] = po.shared;
			from[POL_TIER_HOST] = po.reloaded_host;
			from[POL_TIER_NVME] = po.reloaded_nvme;
		}
		if (o->request_hits)
			o->request_hits(o->request_hits_arg, r, from);
		prefill[r] = o->msa ?
				     pol_replay_msa_request(m, res, q, h, where,
							    lin, rc, attn,
							    &seen, bcost) :
				     prefix_request(m, res, q, h, k, from, rc,
						    &seen);
		if (o->progress &&
		    (now_s() - last_progress >= 2 || r + 1 == t->nreqs)) {
			last_progress = now_s();
			o->progress(o->progress_arg, r + 1, t->nreqs);
		}
	}

	pol_replay_queue(t, prefill, servers, free_at, ttft, res);
	res->demotions[POL_TIER_GPU] = st0.tiers[POL_TIER_HOST].demotions_in;
	res->demotions[POL_TIER_HOST] = st0.tiers[POL_TIER_NVME].demotions_in;
	res->drops =
		st0.tiers[0].drops + st0.tiers[1].drops + st0.tiers[2].drops;
	res->wall_s = now_s() - t0;
	e = 0;
	goto out;

err_req:
	fprintf(stderr,
		"kvmm-replay: --daemon: request %zu (line %u, %u blocks): %s\n",
		cur, t->reqs[cur].line, t->reqs[cur].nblocks, kvmm_strerror(e));
out:
	pol_hmap_fini(&seen);
	free(hashes);
	free(prefill);
	free(ttft);
	free(rc);
	free(free_at);
	free(attn);
	free(bcost);
	free(acts);
	free(where);
	if (reg)
		kvmm_region_destroy(reg);
	kvmm_disconnect(conn);
	return e;
}
