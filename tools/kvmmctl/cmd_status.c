// SPDX-License-Identifier: MIT
/*
 * kvmmctl status [--json]: the daemon's backend, pool pages, sessions,
 * sequences, block pins and counters (ADMIN_STATUS), and the block
 * cache's tiers (TIER_STATS: capacity, use, hits, moves, bytes per tier).
 */
#include <stdio.h>
#include <string.h>

#include "kvmm/kvmmd/metrics_text.h"
#include "tools/kvmmctl/kvmmctl.h"

/*
 * The cache's object of ts (every size summed): the counts each size's
 * object starts with too (status_cache.c), the sums' own figures, the
 * tiers as each size's, and with several block sizes cached each size's
 * object (sz[0..nr), status_sizes.c).
 */
static void tiers_json(const struct kvmm_status_reply *st,
		       const struct kvmm_tier_stats_reply *ts,
		       const struct kd_metrics_size *sz, uint32_t nr)
{
	/* the members' tables, in the order they are printed */
	const struct kvmmctl_json_u64 sums[] = {
		{ "busy_misses", ts->busy_misses },
		{ "checksum_failures", ts->checksum_failures },
		{ "recovered_blocks", ts->recovered_blocks },
		{ "migrations_failed", ts->migrations_failed },
		{ "migrations_in_flight", ts->migrations_in_flight },
		{ "slot_waits", ts->slot_waits },
		{ "nvme_admission_rejects", ts->nvme_admission_rejects },
		{ "restores_waited", ts->restores_waited },
		{ "prefix_opens_pending", ts->prefix_opens_pending },
		{ "restores_cancelled", ts->restores_cancelled },
	};
	/* former reserved words: an older daemon's 0 (absent before 1.7) */
	const struct kvmmctl_json_u64 early[] = {
		{ "early_opens", ts->early_opens },
		{ "early_reloads", ts->early_reloads },
		{ "early_reload_failures", ts->early_reload_failures },
	};
	/* ABI 1.15 */
	const struct kvmmctl_json_u64 invalidations[] = {
		{ "lower_free_refused", ts->lower_free_refused },
		{ "nvme_invalidate_jobs", ts->nvme_invalidate_jobs },
		{ "nvme_invalidated_blocks", ts->nvme_invalidated_blocks },
		{ "nvme_invalidate_failures", ts->nvme_invalidate_failures },
	};
	/* ABI 1.17 */
	const struct kvmmctl_json_u64 nvme_writes[] = {
		{ "nvme_write_returns", ts->nvme_write_returns },
		{ "nvme_write_outs", ts->nvme_write_outs },
		{ "nvme_write_error", ts->nvme_write_error },
		{ "nvme_write_retry_ms", ts->nvme_write_retry_ms },
	};

	printf(",\"cache\":{");
	kvmmctl_cache_counts_json(ts);
	KVMMCTL_JSON_U64S(sums);
	printf(",");
	/* ABI 1.7; absent from an older daemon */
	if (KVMMCTL_TS_HAS(ts, held_copies))
		printf("\"prefix_holes\":%llu,\"prefix_blocks_after_hole\":%llu,"
		       "\"plan_recomputes\":{\"host\":%llu,\"nvme\":%llu},"
		       "\"held_copies\":%llu,",
		       (unsigned long long)ts->prefix_holes,
		       (unsigned long long)ts->prefix_blocks_after_hole,
		       (unsigned long long)ts->plan_recomputes_host,
		       (unsigned long long)ts->plan_recomputes_nvme,
		       (unsigned long long)ts->held_copies);
	if (KVMMCTL_TS_HAS(ts, early_reload_failures)) {
		KVMMCTL_JSON_U64S(early);
		printf(",");
	}
	if (KVMMCTL_TS_HAS(ts, nvme_read_error_drops)) /* ABI 1.13 */
		printf("\"nvme_read_error_drops\":%llu,",
		       (unsigned long long)ts->nvme_read_error_drops);
	if (KVMMCTL_TS_HAS(ts, nvme_open_error))
		printf("\"cache_open_error\":%llu,\"nvme_open_error\":%llu,",
		       (unsigned long long)ts->cache_open_error,
		       (unsigned long long)ts->nvme_open_error);
	if (KVMMCTL_TS_HAS(ts, cache_open_retry_ms)) { /* ABI 1.14 */
		printf("\"cache_open_attempts\":%llu,\"cache_open_last_error\":%llu,\"cache_open_retry_ms\":",
		       (unsigned long long)ts->cache_open_attempts,
		       (unsigned long long)ts->cache_open_last_error);
		/* no attempt will come (a failure no wait mends) */
		if (ts->cache_open_retry_ms == UINT64_MAX)
			printf("null,");
		else
			printf("%llu,",
			       (unsigned long long)ts->cache_open_retry_ms);
	}
	if (KVMMCTL_TS_HAS(ts, nvme_invalidate_failures)) {
		KVMMCTL_JSON_U64S(invalidations);
		printf(",");
	}
	/* ABI 1.23 and 1.24, as each size's (status_cache.c) */
	kvmmctl_restamp_json(ts);
	kvmmctl_cold_json(ts);
	if (KVMMCTL_TS_HAS(ts, nvme_open_retry_ms)) { /* ABI 1.15 */
		printf("\"nvme_open_attempts\":%llu,\"nvme_open_last_error\":%llu,\"nvme_open_retry_ms\":",
		       (unsigned long long)ts->nvme_open_attempts,
		       (unsigned long long)ts->nvme_open_last_error);
		if (ts->nvme_open_retry_ms == UINT64_MAX)
			printf("null,");
		else
			printf("%llu,",
			       (unsigned long long)ts->nvme_open_retry_ms);
	}
	if (KVMMCTL_TS_HAS(ts, nvme_write_retry_ms)) {
		KVMMCTL_JSON_U64S(nvme_writes);
		printf(",");
	}
	kvmmctl_tiers_json(ts);
	kvmmctl_sizes_json(st, sz, nr);
	printf("}");
}

/*
 * The cache's set-up when it failed: off until the next attempt (ABI
 * 1.14: when that is due, and which attempt failed), off for good, or on
 * after attempts that failed.  A 1.13 daemon's cache stays off until it
 * restarts.
 */
static void cache_open_text(const struct kvmm_tier_stats_reply *ts)
{
	unsigned long long k = ts->cache_open_attempts;
	uint64_t ms = ts->cache_open_retry_ms;

	if (!KVMMCTL_TS_HAS(ts, cache_open_retry_ms)) {
		if (KVMMCTL_TS_HAS(ts, nvme_open_error) && ts->cache_open_error)
			printf("cache        OFF: setting up the tiers failed: %s (every publish fails; see kvmmd's log, restart it)\n",
			       strerror((int)ts->cache_open_error));
		return;
	}
	if (ts->cache_open_error && ms == UINT64_MAX)
		printf("cache        OFF for good: setting up the tiers failed: %s, which no wait mends (attempt %llu; every publish fails; see kvmmd's log, restart it)\n",
		       strerror((int)ts->cache_open_error), k);
	else if (ts->cache_open_error && ms)
		printf("cache        OFF: setting up the tiers failed: %s (attempt %llu; retry in %llu s, at a publish or prefix open; every publish fails until then)\n",
		       strerror((int)ts->cache_open_error), k,
		       (unsigned long long)((ms + 999) / 1000));
	else if (ts->cache_open_error)
		printf("cache        OFF: setting up the tiers failed: %s (attempt %llu; retry at the next publish or prefix open)\n",
		       strerror((int)ts->cache_open_error), k);
	else if (ts->cache_open_last_error)
		printf("cache        set up at attempt %llu (the one before failed: %s)\n",
		       k, strerror((int)ts->cache_open_last_error));
}

/*
 * The NVMe tier when it could not open: waiting for the next attempt
 * (ABI 1.15: kvmmd's timer makes it, and the tier joins the running
 * cache), out for good, or joined after attempts that failed.  A 1.13
 * or 1.14 daemon's tier stays out until it restarts.
 */
static void nvme_open_text(const char *indent,
			   const struct kvmm_tier_stats_reply *ts)
{
	unsigned long long k = ts->nvme_open_attempts;
	uint64_t ms = ts->nvme_open_retry_ms;

	if (!KVMMCTL_TS_HAS(ts, nvme_open_retry_ms)) {
		if (KVMMCTL_TS_HAS(ts, nvme_open_error) && ts->nvme_open_error)
			printf("%stier nvme    FAILED to open: %s (the cache runs without it; see kvmmd's log)\n",
			       indent, strerror((int)ts->nvme_open_error));
		return;
	}
	if (ts->nvme_open_error && ms == UINT64_MAX)
		printf("%stier nvme    FAILED to open: %s, which no wait mends (attempt %llu; the cache runs without it; see kvmmd's log, restart it)\n",
		       indent, strerror((int)ts->nvme_open_error), k);
	else if (ts->nvme_open_error)
		printf("%stier nvme    WAITING: %s (attempt %llu; retry in %llu s; the cache runs without it until then)\n",
		       indent, strerror((int)ts->nvme_open_error), k,
		       (unsigned long long)((ms + 999) / 1000));
	else if (ts->nvme_open_last_error)
		printf("%stier nvme    joined at attempt %llu (the one before failed: %s)\n",
		       indent, k, strerror((int)ts->nvme_open_last_error));
}

/*
 * The NVMe tier's writes when they failed (ABI 1.17): out of service for
 * them (host victims dropped, its blocks still read), or back after
 * having been; failed writes whose blocks went back to the host tier.
 */
static void nvme_write_text(const char *indent,
			    const struct kvmm_tier_stats_reply *ts)
{
	uint64_t ms = ts->nvme_write_retry_ms;

	if (!KVMMCTL_TS_HAS(ts, nvme_write_retry_ms))
		return;
	if (ts->nvme_write_error && ms)
		printf("%stier nvme    OUT of service for writes: %s (writes failed in a row; out %llu times; a write tries it again in %llu s; host victims are dropped, its blocks still read)\n",
		       indent, strerror((int)ts->nvme_write_error),
		       (unsigned long long)ts->nvme_write_outs,
		       (unsigned long long)((ms + 999) / 1000));
	else if (ts->nvme_write_error)
		printf("%stier nvme    OUT of service for writes: %s (writes failed in a row; out %llu times; the next move down is written to try it; host victims are dropped, its blocks still read)\n",
		       indent, strerror((int)ts->nvme_write_error),
		       (unsigned long long)ts->nvme_write_outs);
	else if (ts->nvme_write_outs || ts->nvme_write_returns)
		printf("%stier nvme    takes writes (out of service %llu times; %llu failed writes went back to the host tier)\n",
		       indent, (unsigned long long)ts->nvme_write_outs,
		       (unsigned long long)ts->nvme_write_returns);
}

void kvmmctl_nvme_text(const char *indent,
		       const struct kvmm_tier_stats_reply *ts)
{
	nvme_open_text(indent, ts);
	nvme_write_text(indent, ts);
}

static const char *policy_state_mode(uint64_t v)
{
	return v == KVMM_POLICY_STATE_OFF ? "off" :
	       v == KVMM_POLICY_STATE_ON  ? "on" :
					    "unused";
}

/* ,"policy_state":{...} (ABI 1.9) */
/* Connections closed at accept or for no HELLO (ABI 1.13's last
 * fields: only when the daemon sends them). */
static void refusals_json(const struct kvmm_status_reply *st)
{
	const struct kvmmctl_json_u64 refused[] = {
		{ "uid_limit", st->sessions_refused_uid_limit },
		{ "admin_reserved", st->sessions_refused_admin_reserved },
		{ "full", st->sessions_refused_full },
		{ "no_memory", st->sessions_refused_no_memory },
	};

	if (!KVMMCTL_ST_HAS(st, sessions_hello_timeouts))
		return;
	printf(",\"sessions_refused\":{");
	KVMMCTL_JSON_U64S(refused);
	if (KVMMCTL_ST_HAS(st, sessions_refused_quarantine))
		printf(",\"quarantine\":%llu",
		       (unsigned long long)st->sessions_refused_quarantine);
	printf("},\"sessions_hello_timeouts\":%llu",
	       (unsigned long long)st->sessions_hello_timeouts);
	if (KVMMCTL_ST_HAS(st, max_sessions_per_uid))
		printf(",\"max_sessions\":%llu,\"max_sessions_per_uid\":%llu",
		       (unsigned long long)st->max_sessions,
		       (unsigned long long)st->max_sessions_per_uid);
	if (KVMMCTL_ST_HAS(st, quarantine_per_uid))
		printf(",\"quarantine_per_uid\":%llu",
		       (unsigned long long)st->quarantine_per_uid);
}

/* ABI 1.20: what routers and schedulers asked (PREFIX_QUERY,
 * BLOCK_PIN_MANY, TIER_STATS) */
static void router_json(const struct kvmm_status_reply *st)
{
	const struct kvmmctl_json_u64 queries[] = {
		{ "prefix_queries", st->prefix_queries },
		{ "prefix_query_hashes", st->prefix_query_hashes },
	};
	const struct kvmmctl_json_u64 blocks[] = {
		{ "gpu", st->prefix_query_gpu },
		{ "host", st->prefix_query_host },
		{ "nvme", st->prefix_query_nvme },
		{ "moving", st->prefix_query_moving },
	};
	const struct kvmmctl_json_u64 calls[] = {
		{ "pin_many_calls", st->pin_many_calls },
		{ "pin_many_hashes", st->pin_many_hashes },
		{ "pin_many_pinned", st->pin_many_pinned },
		{ "tier_stats_calls", st->tier_stats_calls },
	};

	if (!KVMMCTL_ST_HAS(st, tier_stats_calls))
		return;
	printf(",\"router\":{");
	KVMMCTL_JSON_U64S(queries);
	printf(",\"prefix_query_blocks\":{");
	KVMMCTL_JSON_U64S(blocks);
	printf("},");
	KVMMCTL_JSON_U64S(calls);
	printf("}");
}

static void router_text(const struct kvmm_status_reply *st)
{
	if (!KVMMCTL_ST_HAS(st, tier_stats_calls))
		return;
	printf("queries      %llu prefix queries of %llu hashes found %llu blocks (%llu gpu, %llu host, %llu nvme, %llu moving); %llu tier stats asked\n",
	       (unsigned long long)st->prefix_queries,
	       (unsigned long long)st->prefix_query_hashes,
	       (unsigned long long)(st->prefix_query_gpu +
				    st->prefix_query_host +
				    st->prefix_query_nvme +
				    st->prefix_query_moving),
	       (unsigned long long)st->prefix_query_gpu,
	       (unsigned long long)st->prefix_query_host,
	       (unsigned long long)st->prefix_query_nvme,
	       (unsigned long long)st->prefix_query_moving,
	       (unsigned long long)st->tier_stats_calls);
	printf("pin many     %llu calls named %llu hashes, pinned %llu\n",
	       (unsigned long long)st->pin_many_calls,
	       (unsigned long long)st->pin_many_hashes,
	       (unsigned long long)st->pin_many_pinned);
}

static void refusals_text(const struct kvmm_status_reply *st)
{
	uint64_t refused;

	if (!KVMMCTL_ST_HAS(st, sessions_hello_timeouts))
		return;
	refused = st->sessions_refused_uid_limit +
		  st->sessions_refused_admin_reserved +
		  st->sessions_refused_full + st->sessions_refused_no_memory;
	if (KVMMCTL_ST_HAS(st, sessions_refused_quarantine))
		refused += st->sessions_refused_quarantine;
	printf("             %llu refused at accept, %llu closed for no HELLO in time\n",
	       (unsigned long long)refused,
	       (unsigned long long)st->sessions_hello_timeouts);
	if (!refused)
		return;
	printf("refused      %llu over their uid's --max-sessions-per-uid",
	       (unsigned long long)st->sessions_refused_uid_limit);
	if (KVMMCTL_ST_HAS(st, max_sessions_per_uid) &&
	    st->max_sessions_per_uid)
		printf(" (%llu)", (unsigned long long)st->max_sessions_per_uid);
	printf(", %llu kept out of the admin uids' sessions, %llu at kvmmd's most",
	       (unsigned long long)st->sessions_refused_admin_reserved,
	       (unsigned long long)st->sessions_refused_full);
	/* a daemon before 1.19 does not say its bound: it was 1024 then */
	printf(" (--max-sessions %llu)",
	       KVMMCTL_ST_HAS(st, max_sessions) ?
		       (unsigned long long)st->max_sessions :
		       1024ull);
	printf(", %llu for want of memory",
	       (unsigned long long)st->sessions_refused_no_memory);
	/* a daemon before 1.20 does not say its bound: it was 256 then */
	if (KVMMCTL_ST_HAS(st, sessions_refused_quarantine))
		printf(", %llu over their uid's %llu quarantined processes",
		       (unsigned long long)st->sessions_refused_quarantine,
		       KVMMCTL_ST_HAS(st, quarantine_per_uid) ?
			       (unsigned long long)st->quarantine_per_uid :
			       256ull);
	printf("\n");
}

static void policy_state_json(const struct kvmm_status_reply *st)
{
	printf(",\"policy_state\":{\"mode\":\"%s\",\"loaded_lives\":%llu,"
	       "\"saves\":%llu,\"save_errors\":%llu,\"save_age_ms\":",
	       policy_state_mode(st->policy_state),
	       (unsigned long long)st->policy_state_lives,
	       (unsigned long long)st->policy_state_saves,
	       (unsigned long long)st->policy_state_save_errors);
	if (st->policy_state_save_age_ms == UINT64_MAX)
		printf("null}");
	else
		printf("%llu}",
		       (unsigned long long)st->policy_state_save_age_ms);
}

static void policy_state_text(const struct kvmm_status_reply *st)
{
	if (st->policy_state == KVMM_POLICY_STATE_OFF) {
		printf("policy state off (kvmmd --policy-state FILE keeps what the policy learned across restarts)\n");
		return;
	}
	if (st->policy_state == KVMM_POLICY_STATE_UNUSED) {
		printf("policy state unused: the policy learns nothing to keep\n");
		return;
	}
	if (st->policy_state_lives)
		printf("policy state on: loaded %llu block lives at start",
		       (unsigned long long)st->policy_state_lives);
	else
		printf("policy state on: nothing loaded (no file yet, or the policy is made with the first region)");
	printf("; %llu saves (%llu failed)",
	       (unsigned long long)st->policy_state_saves,
	       (unsigned long long)st->policy_state_save_errors);
	if (st->policy_state_save_age_ms == UINT64_MAX)
		printf(", none yet\n");
	else
		printf(", the last %.1f s ago\n",
		       (double)st->policy_state_save_age_ms / 1000.0);
}

/* ,"page_size":N,"pages":{...}: the pool's pages, with the scrubs (ABI
 * 1.13), the renewals (ABI 1.15) and the read-only fds (ABI 1.18) of a
 * daemon that has them */
static void pages_json(const struct kvmm_status_reply *st)
{
	const struct kvmmctl_json_u64 pages[] = {
		{ "total", st->pages_total },
		{ "created", st->pages_created },
		{ "free", st->pages_free },
		{ "allocated", st->pages_allocated },
		{ "mapped", st->pages_mapped },
		{ "revoking", st->pages_revoking },
		{ "quarantined", st->pages_quarantined },
	};
	/* ABI 1.13 */
	const struct kvmmctl_json_u64 scrubs[] = {
		{ "scrubbed", st->pages_scrubbed },
		{ "scrub_failures", st->page_scrub_failures },
	};
	const struct kvmmctl_json_u64 renewals[] = {
		{ "renewed", st->pages_renewed },
		{ "renew_failures", st->page_renew_failures },
	};
	const struct kvmmctl_json_u64 ro_fds[] = {
		{ "ro_fds", st->page_ro_fds },
		{ "ro_fd_cap", st->page_ro_fd_cap },
		{ "ro_fd_opens", st->page_ro_fd_opens },
		{ "ro_fd_drops", st->page_ro_fd_drops },
		{ "ro_fd_unkept_opens", st->page_ro_fd_unkept_opens },
	};

	printf(",\"page_size\":%llu,\"pages\":{",
	       (unsigned long long)st->page_size);
	KVMMCTL_JSON_U64S(pages);
	if (KVMMCTL_ST_HAS(st, page_scrub_failures)) {
		printf(",");
		KVMMCTL_JSON_U64S(scrubs);
	}
	if (KVMMCTL_ST_HAS(st, page_renew_failures)) {
		printf(",");
		KVMMCTL_JSON_U64S(renewals);
	}
	if (KVMMCTL_ST_HAS(st, page_ro_fd_unkept_opens)) {
		printf(",");
		KVMMCTL_JSON_U64S(ro_fds);
	}
	printf("}");
}

/* ,"sessions":N ... "pinned_bytes":N: sessions, commands, revocations
 * (their cancelled ones from ABI 1.13), the daemon's own, pins (ABI 1.2) */
static void sessions_json(const struct kvmm_status_reply *st)
{
	const struct kvmmctl_json_u64 sessions[] = {
		{ "sessions", st->sessions },
		{ "regions", st->regions },
		{ "sequences", st->sequences },
		{ "sessions_total", st->sessions_total },
		{ "sessions_cut_off", st->sessions_cut_off },
		{ "cmds_socket", st->cmds_socket },
		{ "cmds_ring", st->cmds_ring },
	};
	const struct kvmmctl_json_u64 revocations[] = {
		{ "posted", st->revocations_posted },
		{ "acked", st->revocations_acked },
		{ "timed_out", st->revocations_timed_out },
	};
	const struct kvmmctl_json_u64 daemon[] = {
		{ "revoke_timeout_ms", st->revoke_timeout_ms },
		{ "pid", st->pid },
		{ "uptime_ms", st->uptime_ms },
		{ "cmds_parked", st->cmds_parked },
		{ "cmds_parked_now", st->cmds_parked_now },
		{ "demotions_queued", st->demotions_queued },
	};
	/* ABI 1.2: absent from an older daemon */
	const struct kvmmctl_json_u64 pins[] = {
		{ "pins", st->pins },
		{ "pinned_bytes", st->pinned_bytes },
	};

	printf(",");
	KVMMCTL_JSON_U64S(sessions);
	printf(",\"revocations\":{");
	KVMMCTL_JSON_U64S(revocations);
	if (KVMMCTL_ST_HAS(st, revocations_cancelled))
		printf(",\"cancelled\":%llu",
		       (unsigned long long)st->revocations_cancelled);
	printf("},");
	KVMMCTL_JSON_U64S(daemon);
	if (KVMMCTL_ST_HAS(st, pinned_bytes)) {
		printf(",");
		KVMMCTL_JSON_U64S(pins);
	}
}

/* ,"lend":{...}: blocks ahead asked back of the uid's other processes
 * (ABI 1.19) */
static void lend_json(const struct kvmm_status_reply *st)
{
	const struct kvmmctl_json_u64 lend[] = {
		{ "asked", st->lend_requests },
		{ "blocks_given", st->lend_blocks },
		{ "extends_served", st->lend_extends },
		{ "extends_failed", st->lend_failures },
		{ "wait_ms", st->lend_wait_ms },
	};

	printf(",\"lend\":{");
	KVMMCTL_JSON_U64S(lend);
	printf("}");
}

/* ,"cost_model":{...}: the bandwidths the policy's cost model uses */
static void cost_model_json(const struct kvmm_status_reply *st)
{
	const struct kvmmctl_json_u64 cost[] = {
		{ "host_bw", st->cost_host_bw },
		{ "host_bw_profile", st->cost_host_bw_profile },
		{ "nvme_bw", st->cost_nvme_bw },
		{ "nvme_bw_profile", st->cost_nvme_bw_profile },
		{ "transfers", st->cost_transfers },
	};

	printf(",\"cost_model\":{");
	KVMMCTL_JSON_U64S(cost);
	printf("}");
}

/* ,"telemetry":{"source":"..","dropped":{...}}: the source and what it
 * lost */
static void telemetry_json(const struct kvmm_status_reply *st)
{
	const struct kvmmctl_json_u64 dropped[] = {
		{ "access", st->tel_access_dropped },
		{ "blocks", st->tel_blocks_dropped },
		{ "hist", st->tel_hist_dropped },
		{ "events", st->tel_events_dropped },
	};

	printf(",\"telemetry\":{\"source\":\"%.*s\",\"dropped\":{",
	       (int)strnlen(st->telemetry, sizeof(st->telemetry)),
	       st->telemetry);
	KVMMCTL_JSON_U64S(dropped);
	printf("}}");
}

int cmd_status(int argc, char **argv, struct kvmmctl_ctx *ctx)
{
	struct kvmm_tier_stats_reply ts = { 0 };
	struct kd_metrics_size sz[KVMM_TIER_STATS_SIZES];
	uint32_t nr_sizes = 0;
	int ts_err;
	struct kvmm_status_reply st = { 0 };
	char policy[sizeof(st.cache_policy) + 1] = "";
	char mode[sizeof(st.restore_mode) + 1] = "";
	char scope[sizeof(st.cache_scope) + 1] = "";
	struct kvmm_conn *c;
	int err;

	if (kvmmctl_args("status", argc, argv, 0, 0, "status [--json]"))
		return 2;
	if (kvmmctl_connect(ctx, &c))
		return 1;
	err = kvmmctl_fetch_status(c, &st, &ts, &ts_err);
	/* each block size's alone, when there are several (ABI 1.21) */
	if (!err && !ts_err)
		err = kvmmctl_fetch_sizes(c, &ts, sz, &nr_sizes);
	kvmm_disconnect(c);
	if (err) {
		fprintf(stderr, "kvmmctl: status: %s\n",
			kvmmctl_strerror(ctx, err));
		return 1;
	}
	st.device[sizeof(st.device) - 1] = '\0';
	/* NUL padded, not terminated when full; "" from a daemon < ABI 1.5 */
	memcpy(policy, st.cache_policy, sizeof(st.cache_policy));
	memcpy(mode, st.restore_mode, sizeof(st.restore_mode));
	/* "" from a daemon < ABI 1.9 */
	memcpy(scope, st.cache_scope, sizeof(st.cache_scope));
	if (ctx->json) {
		printf("{\"backend\":\"%s\",\"device\":",
		       vmm_backend_kind_string(
			       (enum vmm_backend_kind)st.backend));
		kvmmctl_json_str(st.device);
		pages_json(&st);
		sessions_json(&st);
		/* ABI 1.14: absent from an older daemon */
		if (KVMMCTL_ST_HAS(&st, cache_drop_blocks))
			printf(",\"cache_drop_blocks\":%llu",
			       (unsigned long long)st.cache_drop_blocks);
		/* ABI 1.19: absent from an older daemon */
		if (KVMMCTL_ST_HAS(&st, lend_wait_ms))
			lend_json(&st);
		refusals_json(&st);
		router_json(&st);
		if (st.cache_policy[0]) {
			printf(",\"cache_policy\":");
			kvmmctl_json_str(policy);
			printf(",\"restore_mode\":");
			kvmmctl_json_str(mode);
		}
		if (st.cache_scope[0]) {
			printf(",\"cache_scope\":");
			kvmmctl_json_str(scope);
			policy_state_json(&st);
		}
		if (!ts_err)
			tiers_json(&st, &ts, sz, nr_sizes);
		if (st.cost_host_bw)
			cost_model_json(&st);
		if (st.telemetry[0])
			telemetry_json(&st);
		printf("}\n");
		return 0;
	}
	printf("backend      %s (%s)\n",
	       vmm_backend_kind_string((enum vmm_backend_kind)st.backend),
	       st.device);
	printf("page size    %llu bytes\n", (unsigned long long)st.page_size);
	printf("pages        %llu total, %llu free, %llu allocated, %llu mapped, %llu revoking, %llu quarantined (%llu created)\n",
	       (unsigned long long)st.pages_total,
	       (unsigned long long)st.pages_free,
	       (unsigned long long)st.pages_allocated,
	       (unsigned long long)st.pages_mapped,
	       (unsigned long long)st.pages_revoking,
	       (unsigned long long)st.pages_quarantined,
	       (unsigned long long)st.pages_created);
	if (st.pages_scrubbed || st.page_scrub_failures)
		printf("             %llu zeroed for a new owner (uid), %llu scrubs failed\n",
		       (unsigned long long)st.pages_scrubbed,
		       (unsigned long long)st.page_scrub_failures);
	if (st.pages_renewed || st.page_renew_failures)
		printf("             %llu renewed for another cache scope, %llu renewals failed\n",
		       (unsigned long long)st.pages_renewed,
		       (unsigned long long)st.page_renew_failures);
	/* ABI 1.18; a backend without read-only fds (cuda) makes none */
	if (KVMMCTL_ST_HAS(&st, page_ro_fd_unkept_opens) &&
	    (st.page_ro_fd_cap || st.page_ro_fd_unkept_opens ||
	     st.backend == KVMM_BACKEND_HOST))
		printf("read-only    %llu page fds kept (at most %llu%s), %llu opened, %llu closed short of fds, %llu opened for one reply alone\n",
		       (unsigned long long)st.page_ro_fds,
		       (unsigned long long)st.page_ro_fd_cap,
		       st.page_ro_fd_cap < st.pages_total ? ": RLIMIT_NOFILE" :
							    "",
		       (unsigned long long)st.page_ro_fd_opens,
		       (unsigned long long)st.page_ro_fd_drops,
		       (unsigned long long)st.page_ro_fd_unkept_opens);
	printf("sessions     %llu (%llu since start, %llu cut off)\n",
	       (unsigned long long)st.sessions,
	       (unsigned long long)st.sessions_total,
	       (unsigned long long)st.sessions_cut_off);
	refusals_text(&st);
	printf("regions      %llu\nsequences    %llu\n",
	       (unsigned long long)st.regions,
	       (unsigned long long)st.sequences);
	printf("commands     %llu socket, %llu ring, %llu parked for pages (%llu now)\n",
	       (unsigned long long)st.cmds_socket,
	       (unsigned long long)st.cmds_ring,
	       (unsigned long long)st.cmds_parked,
	       (unsigned long long)st.cmds_parked_now);
	printf("revocations  %llu posted, %llu acked, %llu timed out",
	       (unsigned long long)st.revocations_posted,
	       (unsigned long long)st.revocations_acked,
	       (unsigned long long)st.revocations_timed_out);
	if (KVMMCTL_ST_HAS(&st, revocations_cancelled))
		printf(", %llu cancelled with their session",
		       (unsigned long long)st.revocations_cancelled);
	printf(" (timeout %u ms)\n", st.revoke_timeout_ms);
	/* ABI 1.19 */
	if (KVMMCTL_ST_HAS(&st, lend_wait_ms) && st.lend_wait_ms)
		printf("blocks ahead %llu asked of the uid's other processes, %llu blocks given back, %llu extends served, %llu failed all the same (wait %llu ms)\n",
		       (unsigned long long)st.lend_requests,
		       (unsigned long long)st.lend_blocks,
		       (unsigned long long)st.lend_extends,
		       (unsigned long long)st.lend_failures,
		       (unsigned long long)st.lend_wait_ms);
	else if (KVMMCTL_ST_HAS(&st, lend_wait_ms))
		printf("blocks ahead not asked back (--lend-wait 0)\n");
	printf("pid          %u, up %llu ms\n", st.pid,
	       (unsigned long long)st.uptime_ms);
	if (KVMMCTL_ST_HAS(&st, pinned_bytes)) /* ABI 1.2 */
		printf("pins         %llu records, %llu bytes of blocks pinned\n",
		       (unsigned long long)st.pins,
		       (unsigned long long)st.pinned_bytes);
	router_text(&st);
	if (KVMMCTL_ST_HAS(&st, cache_drop_blocks) && st.cache_drop_blocks)
		printf("cache drops  %llu blocks dropped by kvmmctl cache-drop\n",
		       (unsigned long long)st.cache_drop_blocks);
	if (st.cache_policy[0])
		printf("policy       %s, restore mode %s%s%s\n", policy, mode,
		       scope[0] ? ", cache scope " : "", scope);
	if (scope[0]) /* a daemon of ABI 1.9 or later */
		policy_state_text(&st);
	if (st.telemetry[0]) /* ABI 1.13, telemetry on */
		printf("telemetry    %.*s, dropped %llu access records, %llu block stats, %llu histogram rows, %llu events\n",
		       (int)strnlen(st.telemetry, sizeof(st.telemetry)),
		       st.telemetry, (unsigned long long)st.tel_access_dropped,
		       (unsigned long long)st.tel_blocks_dropped,
		       (unsigned long long)st.tel_hist_dropped,
		       (unsigned long long)st.tel_events_dropped);
	if (ts_err)
		return 0;
	printf("cache        ");
	kvmmctl_cache_counts_text(&ts);
	printf(", %llu checksum failures, %llu recovered\n",
	       (unsigned long long)ts.checksum_failures,
	       (unsigned long long)ts.recovered_blocks);
	if (KVMMCTL_TS_HAS(&ts, nvme_read_error_drops) &&
	    ts.nvme_read_error_drops)
		printf("             %llu NVMe blocks dropped after reads that kept failing\n",
		       (unsigned long long)ts.nvme_read_error_drops);
	kvmmctl_cold_text("", &ts); /* ABI 1.24, when a start recovered any */
	if (KVMMCTL_TS_HAS(&ts, blocks_unshared) && ts.blocks_unshared)
		printf("             %llu shared blocks copied for a sequence (copy-on-write)\n",
		       (unsigned long long)ts.blocks_unshared);
	/* a tier that could not be set up: the cache is off, or runs
	 * without its NVMe tier (ABI 1.13) */
	cache_open_text(&ts);
	kvmmctl_nvme_text("", &ts);
	/* ABI 1.15: cache-drop's NVMe headers, and slots a tier kept */
	if (KVMMCTL_TS_HAS(&ts, nvme_invalidate_failures) &&
	    ts.nvme_invalidate_jobs + ts.nvme_invalidate_failures)
		printf("             %llu dropped NVMe blocks invalidated on disk (%llu jobs), %llu not (a restart may find them again)\n",
		       (unsigned long long)ts.nvme_invalidated_blocks,
		       (unsigned long long)ts.nvme_invalidate_jobs,
		       (unsigned long long)ts.nvme_invalidate_failures);
	kvmmctl_restamp_text("", &ts); /* ABI 1.23, once a drop kept any */
	if (KVMMCTL_TS_HAS(&ts, lower_free_refused) && ts.lower_free_refused)
		printf("WARNING      %llu host or NVMe slots the cache let go of were not freed by their tier (a kvmmd bug; see its log)\n",
		       (unsigned long long)ts.lower_free_refused);
	if (KVMMCTL_TS_HAS(&ts, quota_reclaims) && ts.quota_reclaims)
		printf("             %llu GPU blocks moved down to make room in their uids' quotas\n",
		       (unsigned long long)ts.quota_reclaims);
	/* the tiers are sized in blocks once the block size is known */
	if (!ts.tiers[0].block_bytes && ts.tiers[2].block_bytes && st.page_size)
		printf("block size   not known yet: the first region to publish or open a prefix sets it; the NVMe tier holds %llu blocks of %llu pages from the last run\n",
		       (unsigned long long)ts.tiers[2].used_blocks,
		       (unsigned long long)(ts.tiers[2].block_bytes /
					    st.page_size));
	else if (!ts.tiers[0].block_bytes)
		printf("block size   not known yet: the first region to publish or open a prefix sets it (kvmmd --cache-block-pages names it at start)\n");
	else if (st.page_size)
		printf("block size   %llu bytes (%llu pages)\n",
		       (unsigned long long)ts.tiers[0].block_bytes,
		       (unsigned long long)(ts.tiers[0].block_bytes /
					    st.page_size));
	kvmmctl_tier_text("", &ts);
	printf("demotions    %llu waited for a host slot (%llu now)",
	       (unsigned long long)ts.slot_waits,
	       (unsigned long long)st.demotions_queued);
	/* ABI 1.7: not from an older daemon */
	if (KVMMCTL_TS_HAS(&ts, held_copies))
		printf(", %llu held blocks copied down",
		       (unsigned long long)ts.held_copies);
	printf("\n");
	if (KVMMCTL_TS_HAS(&ts, held_copies))
		printf("recompute    %llu holes, %llu blocks reused after one; %llu host, %llu NVMe blocks recomputed instead of reloaded\n",
		       (unsigned long long)ts.prefix_holes,
		       (unsigned long long)ts.prefix_blocks_after_hole,
		       (unsigned long long)ts.plan_recomputes_host,
		       (unsigned long long)ts.plan_recomputes_nvme);
	printf("restores     %llu waited on, %llu opens pending, %llu cancelled",
	       (unsigned long long)ts.restores_waited,
	       (unsigned long long)ts.prefix_opens_pending,
	       (unsigned long long)ts.restores_cancelled);
	for (int t = 1; t < 3; t++)
		if (ts.tiers[t].promotions_out)
			printf(", %s mean %.3f ms max %.3f ms",
			       kvmmctl_tier_names[t],
			       ts.tiers[t].restore_ns / 1e6 /
				       ts.tiers[t].promotions_out,
			       ts.tiers[t].restore_max_ns / 1e6);
	printf("\n");
	if (KVMMCTL_TS_HAS(&ts, early_reload_failures))
		printf("early opens  %llu replied while reloading, %llu blocks handed out loading, %llu reloads failed after the reply\n",
		       (unsigned long long)ts.early_opens,
		       (unsigned long long)ts.early_reloads,
		       (unsigned long long)ts.early_reload_failures);
	kvmmctl_sizes_text(&st, sz, nr_sizes);
	return 0;
}
