// SPDX-License-Identifier: MIT
/*
 * kvmmd's state in the Prometheus text format (metrics_text.h).
 *
 * Metrics are rows of tables: a name, a type, the help line and where the
 * value sits in the reply struct.  Rows that continue a family (same name,
 * another label set) have no help, so HELP and TYPE are printed once per
 * family and before its first sample.  Counters end in _total; sizes and
 * what is in flight now are gauges.  Times are printed in seconds as exact
 * decimals of the integer milli- or nanoseconds the daemon keeps, so a
 * reader can compare them with `kvmmctl status --json` digit for digit.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "kvmm/kvmmd/metrics_text.h"
#include "kvmm/kvmmd/metrics_text_priv.h"
#include "vmm/vmm.h"

#define ST(f) offsetof(struct kvmm_status_reply, f)
#define TS(f) offsetof(struct kvmm_tier_stats_reply, f)
#define TI(f) offsetof(struct kvmm_tier_info, f)

static const struct kd_metric status_metrics[] = {
	{ "kvmm_page_size_bytes", KD_GAUGE, "Bytes of one pool page.", "",
	  ST(page_size) },
	{ "kvmm_pool_capacity_pages", KD_GAUGE,
	  "Pages the pool may hold (--gpu-mem / page size).", "",
	  ST(pages_total) },
	{ "kvmm_pool_created_pages", KD_GAUGE,
	  "Pages the backend has created so far (the pool grows lazily).", "",
	  ST(pages_created) },
	{ "kvmm_pool_free_pages", KD_GAUGE,
	  "Pages not owned by any block (capacity - allocated).", "",
	  ST(pages_free) },
	{ "kvmm_pool_allocated_pages", KD_GAUGE,
	  "Pages owned by blocks of sequences or cache, or being revoked.", "",
	  ST(pages_allocated) },
	{ "kvmm_pool_mapped_pages", KD_GAUGE,
	  "Pages mapped by at least one client process.", "",
	  ST(pages_mapped) },
	{ "kvmm_pool_revoking_pages", KD_GAUGE,
	  "Pages posted for revocation and not yet acknowledged.", "",
	  ST(pages_revoking) },
	{ "kvmm_pool_quarantined_pages", KD_GAUGE,
	  "Pages still mapped by cut-off processes that have not exited.", "",
	  ST(pages_quarantined) },
	{ "kvmm_pool_scrubbed_pages_total", KD_COUNTER,
	  "Pages zeroed before they went to a client of another uid.", "",
	  ST(pages_scrubbed) },
	{ "kvmm_pool_scrub_failures_total", KD_COUNTER,
	  "Page scrubs that failed (the allocation failed with them).", "",
	  ST(page_scrub_failures) },
	{ "kvmm_sessions", KD_GAUGE,
	  "Open client sessions (kvmmctl's own connections included).", "",
	  ST(sessions) },
	{ "kvmm_regions", KD_GAUGE, "Regions of all sessions.", "",
	  ST(regions) },
	{ "kvmm_sequences", KD_GAUGE, "Open sequences of all sessions.", "",
	  ST(sequences) },
	{ "kvmm_sessions_opened_total", KD_COUNTER,
	  "Sessions accepted since the daemon started.", "",
	  ST(sessions_total) },
	{ "kvmm_sessions_cut_off_total", KD_COUNTER,
	  "Sessions the daemon ended (revocation timeout, admin kill, bad input).",
	  "", ST(sessions_cut_off) },
	/* ABI 1.13's last fields: left out when the reply ends before */
	{ "kvmm_sessions_refused_total", KD_COUNTER,
	  "Connections closed at accept, by why: the uid had --max-sessions-per-uid, only the admin uids' sessions were left, kvmmd had its --max-sessions (1024), no memory for the uid's quota, the uid had its --quarantine-per-uid (256) quarantined processes.",
	  "reason=\"uid_limit\"", ST(sessions_refused_uid_limit) },
	{ "kvmm_sessions_refused_total", KD_COUNTER, NULL,
	  "reason=\"admin_reserved\"", ST(sessions_refused_admin_reserved) },
	{ "kvmm_sessions_refused_total", KD_COUNTER, NULL, "reason=\"full\"",
	  ST(sessions_refused_full) },
	{ "kvmm_sessions_refused_total", KD_COUNTER, NULL,
	  "reason=\"no_memory\"", ST(sessions_refused_no_memory) },
	{ "kvmm_sessions_refused_total", KD_COUNTER, NULL,
	  "reason=\"quarantine\"", ST(sessions_refused_quarantine) },
	{ "kvmm_sessions_hello_timeouts_total", KD_COUNTER,
	  "Connections closed for sending no HELLO within --hello-timeout.", "",
	  ST(sessions_hello_timeouts) },
	{ "kvmm_commands_total", KD_COUNTER,
	  "Commands handled, by the path they came on.", "path=\"socket\"",
	  ST(cmds_socket) },
	{ "kvmm_commands_total", KD_COUNTER, NULL, "path=\"ring\"",
	  ST(cmds_ring) },
	{ "kvmm_commands_parked_total", KD_COUNTER,
	  "SEQ_EXTENDs and PREFIX_OPENs that waited for demotions to free pool pages.",
	  "", ST(cmds_parked) },
	{ "kvmm_commands_parked", KD_GAUGE,
	  "Commands waiting for pool pages now.", "", ST(cmds_parked_now) },
	{ "kvmm_revocations_posted_total", KD_COUNTER,
	  "Revocations posted to clients.", "", ST(revocations_posted) },
	{ "kvmm_revocations_acked_total", KD_COUNTER,
	  "Revocations clients acknowledged.", "", ST(revocations_acked) },
	{ "kvmm_revocations_timed_out_total", KD_COUNTER,
	  "Revocations not acknowledged in time (the session was cut off).", "",
	  ST(revocations_timed_out) },
	/* ABI 1.13's last field: left out when the reply ends before */
	{ "kvmm_revocations_cancelled_total", KD_COUNTER,
	  "Revocations pending when their session ended (not the one that timed out).",
	  "", ST(revocations_cancelled) },
	{ "kvmm_revoke_timeout_seconds", KD_GAUGE,
	  "How long a client may take to acknowledge a revocation (--revoke-timeout).",
	  "", ST(revoke_timeout_ms), KD_MS32 },
	{ "kvmm_uptime_seconds", KD_GAUGE, "Time since the daemon started.", "",
	  ST(uptime_ms), KD_MS },
	{ "kvmm_demotions_queued", KD_GAUGE,
	  "Demotions waiting for a free host slot now.", "",
	  ST(demotions_queued) },
	{ "kvmm_pins", KD_GAUGE, "BLOCK_PIN records of all sessions.", "",
	  ST(pins) },
	{ "kvmm_pinned_bytes", KD_GAUGE,
	  "Bytes of the distinct cached blocks pin records name.", "",
	  ST(pinned_bytes) },
	/* ABI 1.14: left out when the reply ends before */
	{ "kvmm_cache_drop_blocks_total", KD_COUNTER,
	  "Cached blocks an operator dropped (ADMIN_CACHE_DROP, kvmmctl cache-drop).",
	  "", ST(cache_drop_blocks) },
	/* ABI 1.15: left out when the reply ends before */
	{ "kvmm_pool_renewed_pages_total", KD_COUNTER,
	  "Pages swapped for new ones before they went to a process of another cache scope.",
	  "", ST(pages_renewed) },
	{ "kvmm_pool_renew_failures_total", KD_COUNTER,
	  "Page swaps that failed (the allocation failed with them).", "",
	  ST(page_renew_failures) },
	/* ABI 1.18: left out when the reply ends before */
	{ "kvmm_pool_ro_fds", KD_GAUGE,
	  "Read-only page fds kept for shared pages' readers now.", "",
	  ST(page_ro_fds) },
	{ "kvmm_pool_ro_fd_cap", KD_GAUGE,
	  "The most read-only page fds kept at once (from RLIMIT_NOFILE; the capacity when it was enough).",
	  "", ST(page_ro_fd_cap) },
	{ "kvmm_pool_ro_fd_opens_total", KD_COUNTER,
	  "Read-only page fds opened to be kept.", "", ST(page_ro_fd_opens) },
	{ "kvmm_pool_ro_fd_drops_total", KD_COUNTER,
	  "Kept read-only page fds closed under an fd shortage.", "",
	  ST(page_ro_fd_drops) },
	{ "kvmm_pool_ro_fd_unkept_opens_total", KD_COUNTER,
	  "Read-only page fds opened past the cap for one reply alone.", "",
	  ST(page_ro_fd_unkept_opens) },
	/* ABI 1.19: left out when the reply ends before */
	{ "kvmm_lend_requests_total", KD_COUNTER,
	  "Requests to other processes of a uid for their blocks mapped ahead, for an extend or prefix open short of blocks.",
	  "", ST(lend_requests) },
	{ "kvmm_lend_blocks_total", KD_COUNTER,
	  "Blocks mapped ahead that processes gave back when asked.", "",
	  ST(lend_blocks) },
	{ "kvmm_lend_extends_total", KD_COUNTER,
	  "Extends and prefix opens that asked for blocks ahead and then got their blocks.",
	  "", ST(lend_extends) },
	{ "kvmm_lend_failures_total", KD_COUNTER,
	  "Extends and prefix opens that asked for blocks ahead and failed all the same.",
	  "", ST(lend_failures) },
	{ "kvmm_lend_wait_seconds", KD_GAUGE,
	  "How long an extend or prefix open waits for the blocks ahead it asked for (--lend-wait; 0: none asks).",
	  "", ST(lend_wait_ms), KD_MS },
	{ "kvmm_max_sessions", KD_GAUGE,
	  "Sessions kvmmd admits at once (--max-sessions).", "",
	  ST(max_sessions) },
	{ "kvmm_max_sessions_per_uid", KD_GAUGE,
	  "Sessions kvmmd admits at once per uid (--max-sessions-per-uid; 0: no limit but --max-sessions).",
	  "", ST(max_sessions_per_uid) },
	/* ABI 1.20: left out when the reply ends before */
	{ "kvmm_prefix_queries_total", KD_COUNTER,
	  "PREFIX_QUERYs answered (where a chain is cached, asked without an open).",
	  "", ST(prefix_queries) },
	{ "kvmm_prefix_query_hashes_total", KD_COUNTER,
	  "Hashes the answered PREFIX_QUERYs asked about.", "",
	  ST(prefix_query_hashes) },
	{ "kvmm_prefix_query_blocks_total", KD_COUNTER,
	  "Leading cached blocks the answered PREFIX_QUERYs found, by where they were.",
	  "tier=\"gpu\"", ST(prefix_query_gpu) },
	{ "kvmm_prefix_query_blocks_total", KD_COUNTER, NULL, "tier=\"host\"",
	  ST(prefix_query_host) },
	{ "kvmm_prefix_query_blocks_total", KD_COUNTER, NULL, "tier=\"nvme\"",
	  ST(prefix_query_nvme) },
	{ "kvmm_prefix_query_blocks_total", KD_COUNTER, NULL, "tier=\"moving\"",
	  ST(prefix_query_moving) },
	{ "kvmm_pin_many_total", KD_COUNTER,
	  "BLOCK_PIN_MANYs answered (many pins in one round trip).", "",
	  ST(pin_many_calls) },
	{ "kvmm_pin_many_hashes_total", KD_COUNTER,
	  "Hashes the answered BLOCK_PIN_MANYs named.", "",
	  ST(pin_many_hashes) },
	{ "kvmm_pin_many_pinned_total", KD_COUNTER,
	  "Pins the answered BLOCK_PIN_MANYs made.", "", ST(pin_many_pinned) },
	{ "kvmm_tier_stats_requests_total", KD_COUNTER,
	  "TIER_STATS requests answered (kvmm_tier_stats(), kvmmctl status).",
	  "", ST(tier_stats_calls) },
	{ "kvmm_quarantine_per_uid", KD_GAUGE,
	  "Quarantined processes of one uid past which its new processes get no session (--quarantine-per-uid).",
	  "", ST(quarantine_per_uid) },
};

/* only when kvmmd keeps a --policy-state (ABI 1.9) */
static const struct kd_metric policy_state_metrics[] = {
	{ "kvmm_policy_state_loaded_lives", KD_GAUGE,
	  "Block lives the policy state loaded at start was learned from (0: none loaded).",
	  "", ST(policy_state_lives) },
	{ "kvmm_policy_state_saves_total", KD_COUNTER,
	  "Saves of the policy state since the start, by result.",
	  "result=\"ok\"", ST(policy_state_saves) },
	{ "kvmm_policy_state_saves_total", KD_COUNTER, NULL,
	  "result=\"failed\"", ST(policy_state_save_errors) },
};

/* only when the daemon runs a cost model (telemetry on) */
static const struct kd_metric cost_metrics[] = {
	{ "kvmm_cost_model_bandwidth_bytes_per_second", KD_GAUGE,
	  "Restore bandwidth into the GPU of the --profile cost model: as measured online and as the profile says.",
	  "tier=\"host\",source=\"measured\"", ST(cost_host_bw) },
	{ "kvmm_cost_model_bandwidth_bytes_per_second", KD_GAUGE, NULL,
	  "tier=\"host\",source=\"profile\"", ST(cost_host_bw_profile) },
	{ "kvmm_cost_model_bandwidth_bytes_per_second", KD_GAUGE, NULL,
	  "tier=\"nvme\",source=\"measured\"", ST(cost_nvme_bw) },
	{ "kvmm_cost_model_bandwidth_bytes_per_second", KD_GAUGE, NULL,
	  "tier=\"nvme\",source=\"profile\"", ST(cost_nvme_bw_profile) },
	{ "kvmm_cost_model_transfers_total", KD_COUNTER,
	  "Restore transfers the cost model folded in.", "",
	  ST(cost_transfers) },
};

/* only when telemetry is on (ABI 1.13: a source in the reply) */
static const struct kd_metric telemetry_metrics[] = {
	{ "kvmm_telemetry_dropped_total", KD_COUNTER,
	  "What telemetry could not count, by kind: access records over a probe's cap, block statistics and histogram rows with no room, events the ring had no room for.",
	  "kind=\"access\"", ST(tel_access_dropped) },
	{ "kvmm_telemetry_dropped_total", KD_COUNTER, NULL, "kind=\"blocks\"",
	  ST(tel_blocks_dropped) },
	{ "kvmm_telemetry_dropped_total", KD_COUNTER, NULL, "kind=\"hist\"",
	  ST(tel_hist_dropped) },
	{ "kvmm_telemetry_dropped_total", KD_COUNTER, NULL, "kind=\"events\"",
	  ST(tel_events_dropped) },
};

static const struct kd_metric cache_metrics[] = {
	{ "kvmm_cache_publishes_total", KD_COUNTER,
	  "Blocks BLOCK_PUBLISH named: published, duplicates or not cached.",
	  "", TS(publishes) },
	{ "kvmm_cache_duplicates_total", KD_COUNTER,
	  "Published blocks whose content was cached already.", "",
	  TS(duplicates) },
	{ "kvmm_cache_not_cached_total", KD_COUNTER,
	  "Published blocks the cache did not take.", "", TS(not_cached) },
	{ "kvmm_cache_prefix_opens_total", KD_COUNTER, "PREFIX_OPEN commands.",
	  "", TS(prefix_opens) },
	{ "kvmm_cache_prefix_blocks_asked_total", KD_COUNTER,
	  "Block hashes PREFIX_OPENs asked for.", "", TS(prefix_blocks_asked) },
	{ "kvmm_cache_prefix_blocks_hit_total", KD_COUNTER,
	  "Prefix blocks found in some tier (an early open's reloads when they land).",
	  "", TS(prefix_blocks_hit) },
	{ "kvmm_cache_misses_total", KD_COUNTER,
	  "Prefix lookups that stopped at a missing block.", "", TS(misses) },
	{ "kvmm_cache_busy_misses_total", KD_COUNTER,
	  "Prefix lookups that stopped at a block dropped while being demoted.",
	  "", TS(busy_misses) },
	{ "kvmm_cache_checksum_failures_total", KD_COUNTER,
	  "NVMe slots dropped on a bad CRC32C.", "", TS(checksum_failures) },
	{ "kvmm_cache_nvme_read_error_drops_total", KD_COUNTER,
	  "NVMe slots dropped after reads that failed twice in a row.", "",
	  TS(nvme_read_error_drops) },
	{ "kvmm_cache_recovered_blocks_total", KD_COUNTER,
	  "NVMe slots found valid at start-up.", "", TS(recovered_blocks) },
	{ "kvmm_cache_tier_open_error", KD_GAUGE,
	  "Errno of a tier setting-up that failed (0: none): cache, the cache is off until a set-up works; nvme, it runs without the NVMe tier.",
	  "tier=\"cache\"", TS(cache_open_error) },
	{ "kvmm_cache_tier_open_error", KD_GAUGE, NULL, "tier=\"nvme\"",
	  TS(nvme_open_error) },
	/* ABI 1.14: left out when the daemon's reply ends before them */
	{ "kvmm_cache_open_attempts_total", KD_COUNTER,
	  "Set-ups of the cache's tiers and policy tried (the one that worked included).",
	  "", TS(cache_open_attempts) },
	{ "kvmm_cache_open_last_error", KD_GAUGE,
	  "Errno of the last set-up of the cache that failed, kept once one works (0: none failed).",
	  "", TS(cache_open_last_error) },
	{ "kvmm_cache_open_retry_seconds", KD_GAUGE,
	  "While the cache is off: seconds until a publish or prefix open tries to set it up again (0: the next one; +Inf: none will, a failure no wait mends).",
	  "", TS(cache_open_retry_ms), KD_MS_INF },
	/* ABI 1.15: left out when the daemon's reply ends before them */
	{ "kvmm_cache_lower_free_refused_total", KD_COUNTER,
	  "Host and NVMe slots the cache let go of that their tier refused to free (0 unless kvmmd has a bug; a refused NVMe slot stays taken until a restart).",
	  "", TS(lower_free_refused) },
	{ "kvmm_cache_nvme_invalidate_jobs_total", KD_COUNTER,
	  "NVMe header invalidations kvmmctl cache-drop queued, one per dropped NVMe block or stale NVMe copy.",
	  "", TS(nvme_invalidate_jobs) },
	{ "kvmm_cache_nvme_invalidated_blocks_total", KD_COUNTER,
	  "Dropped NVMe blocks and stale NVMe copies whose header was zeroed on disk and synced.",
	  "", TS(nvme_invalidated_blocks) },
	{ "kvmm_cache_nvme_invalidate_failures_total", KD_COUNTER,
	  "Dropped NVMe blocks and stale NVMe copies whose header was not zeroed (a restart may find them again).",
	  "", TS(nvme_invalidate_failures) },
	/* ABI 1.15 too: left out when the reply ends before them */
	{ "kvmm_cache_nvme_open_attempts_total", KD_COUNTER,
	  "Opens of the NVMe tier tried (a failed claim at start and the one that worked included).",
	  "", TS(nvme_open_attempts) },
	{ "kvmm_cache_nvme_open_last_error", KD_GAUGE,
	  "Errno of the last open of the NVMe tier that failed, kept once one works (0: none failed).",
	  "", TS(nvme_open_last_error) },
	{ "kvmm_cache_nvme_open_retry_seconds", KD_GAUGE,
	  "While the NVMe tier is out: seconds until kvmmd tries to open it again (+Inf: it will not, a failure no wait mends).",
	  "", TS(nvme_open_retry_ms), KD_MS_INF },
	/* ABI 1.17: left out when the reply ends before them */
	{ "kvmm_cache_nvme_write_returns_total", KD_COUNTER,
	  "Blocks whose host -> NVMe write failed that went back to the host tier with their host copy.",
	  "", TS(nvme_write_returns) },
	{ "kvmm_cache_nvme_write_outs_total", KD_COUNTER,
	  "Times the NVMe tier was taken out of service for writes (writes failed in a row).",
	  "", TS(nvme_write_outs) },
	{ "kvmm_cache_nvme_write_error", KD_GAUGE,
	  "While the NVMe tier is out of service for writes: the errno of the last one (0: it takes writes).",
	  "", TS(nvme_write_error) },
	{ "kvmm_cache_nvme_write_retry_seconds", KD_GAUGE,
	  "While the NVMe tier is out of service for writes: seconds until a move down is written to try it again (0: the next one).",
	  "", TS(nvme_write_retry_ms), KD_MS },
	{ "kvmm_cache_migrations_failed_total", KD_COUNTER,
	  "Block copies between tiers that failed.", "",
	  TS(migrations_failed) },
	{ "kvmm_cache_migrations_in_flight", KD_GAUGE,
	  "Block copies between tiers in progress now.", "",
	  TS(migrations_in_flight) },
	{ "kvmm_cache_slot_waits_total", KD_COUNTER,
	  "Demotions that waited for a free host slot.", "", TS(slot_waits) },
	{ "kvmm_cache_nvme_admission_rejects_total", KD_COUNTER,
	  "Blocks dropped instead of written to NVMe (--nvme-admit-uses).", "",
	  TS(nvme_admission_rejects) },
	{ "kvmm_cache_pressure_reclaims_total", KD_COUNTER,
	  "Cached GPU blocks demoted or dropped to free pages for a full pool.",
	  "", TS(pressure_reclaims) },
	{ "kvmm_cache_quota_reclaims_total", KD_COUNTER,
	  "Cached GPU blocks demoted or dropped to make room in their uid's quota.",
	  "", TS(quota_reclaims) },
	{ "kvmm_cache_restores_waited_total", KD_COUNTER,
	  "Prefix blocks found being restored for another PREFIX_OPEN and waited for.",
	  "", TS(restores_waited) },
	{ "kvmm_cache_prefix_opens_pending", KD_GAUGE,
	  "PREFIX_OPENs whose reply waits for restores now.", "",
	  TS(prefix_opens_pending) },
	{ "kvmm_cache_restores_cancelled_total", KD_COUNTER,
	  "Restores cancelled before they started (every waiter went away).",
	  "", TS(restores_cancelled) },
	/* ABI 1.7: left out when the daemon's reply ends before them */
	{ "kvmm_cache_prefix_holes_total", KD_COUNTER,
	  "Blocks of segmented PREFIX_OPENs in no tier, handed out to recompute (holes).",
	  "", TS(prefix_holes) },
	{ "kvmm_cache_prefix_blocks_after_hole_total", KD_COUNTER,
	  "Blocks of segmented PREFIX_OPENs shared or reloaded after a hole.",
	  "", TS(prefix_blocks_after_hole) },
	{ "kvmm_cache_plan_recomputes_total", KD_COUNTER,
	  "Host and NVMe prefix blocks handed out to recompute instead of reloaded (restore plan or mode).",
	  "tier=\"host\"", TS(plan_recomputes_host) },
	{ "kvmm_cache_plan_recomputes_total", KD_COUNTER, NULL, "tier=\"nvme\"",
	  TS(plan_recomputes_nvme) },
	{ "kvmm_cache_held_copies_total", KD_COUNTER,
	  "GPU victims a sequence held, copied down to the host tier instead of freed.",
	  "", TS(held_copies) },
	/* former reserved words: 0 from an older daemon */
	{ "kvmm_cache_early_opens_total", KD_COUNTER,
	  "Early PREFIX_OPENs (KVMM_PREFIX_OPEN_EARLY) that replied while some of their blocks were still being reloaded.",
	  "", TS(early_opens) },
	{ "kvmm_cache_early_reloads_total", KD_COUNTER,
	  "Prefix blocks early replies handed out while still being reloaded.",
	  "", TS(early_reloads) },
	{ "kvmm_cache_early_reload_failures_total", KD_COUNTER,
	  "Reloads that failed after an early reply (the client recomputed the block; not a hit).",
	  "", TS(early_reload_failures) },
	/* ABI 1.20: left out when the reply ends before it */
	{ "kvmm_cache_blocks_unshared_total", KD_COUNTER,
	  "Shared cached blocks copied into a sequence's own pages (SEQ_UNSHARE: copy-on-write, an extend from inside a read-only block).",
	  "", TS(blocks_unshared) },
	/* ABI 1.23: left out when the reply ends before them */
	{ "kvmm_cache_nvme_restamped_total", KD_COUNTER,
	  "NVMe blocks kvmmctl cache-drop kept (in use) whose header was written again above the drop's mark: the next start finds them.",
	  "", TS(nvme_restamped) },
	{ "kvmm_cache_nvme_restamp_failures_total", KD_COUNTER,
	  "NVMe blocks kvmmctl cache-drop kept (in use) whose header could not be written above the drop's mark: served in this run, lost at the next start.",
	  "", TS(nvme_restamp_failures) },
	/* ABI 1.24: left out when the reply ends before them; with
	 * kvmm_cache_recovered_blocks_total = cold + admitted + evicted +
	 * dropped */
	{ "kvmm_cache_cold_blocks", KD_GAUGE,
	  "Blocks recovered from NVMe at start that are still cold: served by a prefix open, but neither used by one nor pinned yet.",
	  "", TS(cold_blocks) },
	{ "kvmm_cache_cold_admitted_total", KD_COUNTER,
	  "Recovered NVMe blocks the cache took in, an open's restore or a client's pin.",
	  "", TS(cold_admitted) },
	{ "kvmm_cache_cold_evicted_total", KD_COUNTER,
	  "Recovered NVMe blocks evicted unused, for NVMe room or by their tenant's NVMe limit.",
	  "", TS(cold_evicted) },
	{ "kvmm_cache_cold_dropped_total", KD_COUNTER,
	  "Recovered NVMe blocks that left the cache unused any other way (kvmmctl cache-drop, a read that failed).",
	  "", TS(cold_dropped) },
};

/* per tier, with a tier label (their size is fixed in metrics_text_priv.h) */
const struct kd_metric kd_mt_tier_metrics[] = {
	{ "kvmm_tier_capacity_blocks", KD_GAUGE,
	  "Blocks the tier may hold (0: no such tier).", "",
	  TI(capacity_blocks) },
	{ "kvmm_tier_used_blocks", KD_GAUGE,
	  "Blocks in the tier now (still being written included).", "",
	  TI(used_blocks) },
	{ "kvmm_tier_block_bytes", KD_GAUGE, "Bytes of one block in the tier.",
	  "", TI(block_bytes) },
	{ "kvmm_tier_hits_total", KD_COUNTER,
	  "Prefix blocks found in the tier.", "", TI(hits) },
	{ "kvmm_tier_demotions_in_total", KD_COUNTER,
	  "Blocks moved down into the tier.", "", TI(demotions_in) },
	{ "kvmm_tier_promotions_out_total", KD_COUNTER,
	  "Blocks restored from the tier to the GPU.", "", TI(promotions_out) },
	{ "kvmm_tier_promotions_by_publish_total", KD_COUNTER,
	  "Blocks of the tier a publish of the same content moved to the GPU.",
	  "", TI(promotions_by_publish) },
	{ "kvmm_tier_drops_total", KD_COUNTER, "Blocks dropped from the tier.",
	  "", TI(drops) },
	{ "kvmm_tier_bytes_in_total", KD_COUNTER, "Bytes copied into the tier.",
	  "", TI(bytes_in) },
	{ "kvmm_tier_bytes_out_total", KD_COUNTER,
	  "Bytes copied out of the tier.", "", TI(bytes_out) },
	{ "kvmm_tier_restore_seconds_total", KD_COUNTER,
	  "Time restores from the tier took, submission to completion, summed.",
	  "", TI(restore_ns), KD_NS },
	{ "kvmm_tier_restore_max_seconds", KD_GAUGE,
	  "Longest restore from the tier since start.", "", TI(restore_max_ns),
	  KD_NS },
};

const char *const kd_mt_tier_names[3] = { "gpu", "host", "nvme" };

static const char *type_string(enum kd_mtype t)
{
	return t == KD_COUNTER ? "counter" : "gauge";
}

static void value(FILE *f, uint64_t v, enum kd_munit unit)
{
	switch (unit) {
	case KD_MS_INF:
		if (v == UINT64_MAX) {
			fputs("+Inf", f);
			break;
		}
		/* fall through */
	case KD_MS:
	case KD_MS32:
		fprintf(f, "%llu.%03llu", (unsigned long long)(v / 1000),
			(unsigned long long)(v % 1000));
		break;
	case KD_NS:
		fprintf(f, "%llu.%09llu", (unsigned long long)(v / 1000000000),
			(unsigned long long)(v % 1000000000));
		break;
	default:
		fprintf(f, "%llu", (unsigned long long)v);
	}
}

void kd_mt_family(FILE *f, const char *name, enum kd_mtype type,
		  const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name,
		type_string(type));
}

/* labels (may be NULL or "") and an extra pair (may be NULL) */
void kd_mt_sample(FILE *f, const char *name, const char *labels,
		  const char *extra, uint64_t v, enum kd_munit unit)
{
	bool l = labels && *labels;

	fputs(name, f);
	if (l || extra)
		fprintf(f, "{%s%s%s}", l ? labels : "", l && extra ? "," : "",
			extra ? extra : "");
	fputc(' ', f);
	value(f, v, unit);
	fputc('\n', f);
}

uint64_t kd_mt_field(const void *base, const struct kd_metric *m)
{
	const char *p = (const char *)base + m->off;
	uint64_t v;
	uint32_t v32;

	if (m->unit == KD_MS32) {
		memcpy(&v32, p, sizeof(v32));
		return v32;
	}
	memcpy(&v, p, sizeof(v));
	return v;
}

/* The rows of m whose field lies within the reply's first len bytes (a
 * shorter reply is an older daemon's: what it lacks is left out). */
static void table(FILE *f, const struct kd_metric *m, size_t n,
		  const void *base, size_t len)
{
	for (size_t i = 0; i < n; i++) {
		if (m[i].off + sizeof(uint64_t) > len)
			continue;
		if (m[i].help)
			kd_mt_family(f, m[i].name, m[i].type, m[i].help);
		kd_mt_sample(f, m[i].name, m[i].labels, NULL,
			     kd_mt_field(base, &m[i]), m[i].unit);
	}
}

/* A label value: backslash, double quote and newline escaped. */
static void label_value(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			fprintf(f, "\\%c", *s);
		else if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
}

/* A label value from a NUL-padded field of len bytes (a full one has no
 * NUL: what the wire ABI's names are). */
static void padded_value(FILE *f, const char *p, size_t len)
{
	char v[sizeof(((struct kvmm_status_reply *)0)->device) + 1];
	size_t n = len < sizeof(v) - 1 ? len : sizeof(v) - 1;

	memcpy(v, p, n);
	v[n] = '\0';
	label_value(f, v);
}

static void info(FILE *f, const struct kd_metrics_src *src)
{
	const struct kvmm_status_reply *st = src->st;

	kd_mt_family(
		f, "kvmm_up", KD_GAUGE,
		"1 when the daemon answered (kvmmctl metrics prints nothing and fails when it does not).");
	fputs("kvmm_up 1\n", f);
	kd_mt_family(
		f, "kvmm_build_info", KD_GAUGE,
		"Always 1; the exporter's version and the daemon's wire ABI as labels.");
	fprintf(f, "kvmm_build_info{version=\"");
	label_value(f, KVMM_VERSION);
	fprintf(f, "\",abi=\"%u.%u\"} 1\n", src->abi_major, src->abi_minor);
	kd_mt_family(f, "kvmm_backend_info", KD_GAUGE,
		     "Always 1; the memory backend and its device as labels.");
	fprintf(f, "kvmm_backend_info{backend=\"%s\",device=\"",
		vmm_backend_kind_string((enum vmm_backend_kind)st->backend));
	padded_value(f, st->device, sizeof(st->device));
	fputs("\"} 1\n", f);
	/* a daemon before ABI 1.5 does not say (the fields read "") */
	if (st->cache_policy[0] && st->restore_mode[0]) {
		kd_mt_family(
			f, "kvmm_cache_policy_info", KD_GAUGE,
			"Always 1; --cache-policy and --restore-mode as labels.");
		fputs("kvmm_cache_policy_info{policy=\"", f);
		padded_value(f, st->cache_policy, sizeof(st->cache_policy));
		fputs("\",restore_mode=\"", f);
		padded_value(f, st->restore_mode, sizeof(st->restore_mode));
		fputs("\"} 1\n", f);
	}
	/* ABI 1.9 */
	if (st->cache_scope[0]) {
		kd_mt_family(f, "kvmm_cache_scope_info", KD_GAUGE,
			     "Always 1; --cache-scope as a label.");
		fputs("kvmm_cache_scope_info{scope=\"", f);
		padded_value(f, st->cache_scope, sizeof(st->cache_scope));
		fputs("\"} 1\n", f);
	}
}

static void tiers(FILE *f, const struct kvmm_tier_stats_reply *ts)
{
	const size_t n =
		sizeof(kd_mt_tier_metrics) / sizeof(kd_mt_tier_metrics[0]);
	char label[32];

	for (size_t i = 0; i < n; i++) {
		const struct kd_metric *m = &kd_mt_tier_metrics[i];

		kd_mt_family(f, m->name, m->type, m->help);
		for (int t = 0; t < 3; t++) {
			snprintf(label, sizeof(label), "tier=\"%s\"",
				 kd_mt_tier_names[t]);
			kd_mt_sample(f, m->name, NULL, label,
				     kd_mt_field(&ts->tiers[t], m), m->unit);
		}
	}
}

/* One tenant's labels: kind="uid"|"gid",id="N"|"others". */
void kd_mt_tenant_labels(char *buf, size_t len, uint32_t kind, uint32_t id,
			 const char *tier)
{
	char idbuf[16];

	if (id == KVMM_TENANT_OTHERS)
		snprintf(idbuf, sizeof(idbuf), "others");
	else
		snprintf(idbuf, sizeof(idbuf), "%u", id);
	snprintf(buf, len, "kind=\"%s\",id=\"%s\"%s%s%s",
		 kind == KVMM_TENANT_GID ? "gid" : "uid", idbuf,
		 tier ? ",tier=\"" : "", tier ? tier : "", tier ? "\"" : "");
}

/* A tenant entry's field: a u64, or sessions, the one u32. */
#define TENANT_U64(f) offsetof(struct kvmm_tenant_info, f)
#define TENANT_SESSIONS SIZE_MAX

static void tenants(FILE *f, const struct kvmm_tenants_reply *tn)
{
	static const struct {
		const char *name, *help;
		enum kd_mtype type;
		size_t off; /* TENANT_U64(), or TENANT_SESSIONS */
		int tiers; /* 3: one u64 per tier from off on, 0: one */
		bool uid; /* a uid's (its quota): not under the gid scope */
	} fams[] = {
		{ "kvmm_tenant_sessions", "Live sessions of the tenant.",
		  KD_GAUGE, TENANT_SESSIONS, 0 },
		{ "kvmm_tenant_cached_blocks",
		  "Cached blocks charged to the tenant (it admitted them), by tier.",
		  KD_GAUGE, TENANT_U64(cached_blocks), 3 },
		{ "kvmm_tenant_admitted_blocks_total",
		  "Blocks the tenant's accesses brought into the cache.",
		  KD_COUNTER, TENANT_U64(admitted_blocks), 0 },
		{ "kvmm_tenant_prefix_opens_total",
		  "PREFIX_OPENs the tenant's sessions ran.", KD_COUNTER,
		  TENANT_U64(prefix_opens), 0 },
		{ "kvmm_tenant_hit_blocks_total",
		  "Blocks the tenant's prefix opens found, by the tier they were in.",
		  KD_COUNTER, TENANT_U64(hit_blocks), 3 },
		{ "kvmm_tenant_published_blocks_total",
		  "Blocks the tenant's publishes cached.", KD_COUNTER,
		  TENANT_U64(published_blocks), 0 },
		{ "kvmm_tenant_dropped_blocks_total",
		  "Blocks charged to the tenant that the cache dropped (from its last tier, or lost on the way down).",
		  KD_COUNTER, TENANT_U64(dropped_blocks), 0 },
		{ "kvmm_tenant_limit_blocks",
		  "Most cached blocks the tenant may hold, by tier (0: no limit).",
		  KD_GAUGE, TENANT_U64(limit_blocks), 3 },
		{ "kvmm_tenant_limit_moves_total",
		  "The tenant's blocks moved down a tier (or dropped) because it was over its limit there.",
		  KD_COUNTER, TENANT_U64(limit_moves), 0 },
		{ "kvmm_tenant_quota_pages",
		  "The uid's quota in pool pages (0: unlimited).", KD_GAUGE,
		  TENANT_U64(quota_pages), 0, true },
		{ "kvmm_tenant_quota_used_pages",
		  "Pool pages charged to the uid's quota: its blocks, cached ones too, and its quarantined pages.",
		  KD_GAUGE, TENANT_U64(quota_used_pages), 0, true },
		{ "kvmm_tenant_quota_cached_pages",
		  "Of those, pages of cached GPU blocks, which the uid gets back when it needs them.",
		  KD_GAUGE, TENANT_U64(quota_cached_pages), 0, true },
	};
	char labels[96];

	for (size_t k = 0; k < sizeof(fams) / sizeof(fams[0]); k++) {
		if (fams[k].uid && tn->kind != KVMM_TENANT_UID)
			continue;
		kd_mt_family(f, fams[k].name, fams[k].type, fams[k].help);
		for (uint32_t i = 0; i < tn->nr; i++) {
			const struct kvmm_tenant_info *t =
				(const void *)((const char *)tn->tenants +
					       (size_t)i * tn->entry_size);
			int n = fams[k].tiers ? fams[k].tiers : 1;

			for (int j = 0; j < n; j++) {
				uint64_t v = t->sessions;

				if (fams[k].off != TENANT_SESSIONS)
					memcpy(&v,
					       (const char *)t + fams[k].off +
						       j * sizeof(v),
					       sizeof(v));
				kd_mt_tenant_labels(
					labels, sizeof(labels), tn->kind, t->id,
					fams[k].tiers ? kd_mt_tier_names[j] :
							NULL);
				kd_mt_sample(f, fams[k].name, NULL, labels, v,
					     KD_AS_IS);
			}
		}
	}
}

int kd_metrics_write(FILE *f, const struct kd_metrics_src *src)
{
	const struct kvmm_status_reply *st = src->st;

	info(f, src);
	/* an older daemon's reply (kvmmctl metrics) ends before its newest
	 * fields: those families are left out */
	table(f, status_metrics,
	      sizeof(status_metrics) / sizeof(status_metrics[0]), st,
	      st->size && st->size < sizeof(*st) ? st->size : sizeof(*st));
	if (st->policy_state == KVMM_POLICY_STATE_ON) {
		table(f, policy_state_metrics,
		      sizeof(policy_state_metrics) /
			      sizeof(policy_state_metrics[0]),
		      st, sizeof(*st));
		if (st->policy_state_save_age_ms != UINT64_MAX) {
			kd_mt_family(
				f, "kvmm_policy_state_last_save_age_seconds",
				KD_GAUGE,
				"Time since the last save of the policy state that worked.");
			kd_mt_sample(f,
				     "kvmm_policy_state_last_save_age_seconds",
				     NULL, NULL, st->policy_state_save_age_ms,
				     KD_MS);
		}
	}
	if (st->cost_host_bw)
		table(f, cost_metrics,
		      sizeof(cost_metrics) / sizeof(cost_metrics[0]), st,
		      sizeof(*st));
	if (st->telemetry[0])
		table(f, telemetry_metrics,
		      sizeof(telemetry_metrics) / sizeof(telemetry_metrics[0]),
		      st, sizeof(*st));
	if (src->ts) {
		table(f, cache_metrics,
		      sizeof(cache_metrics) / sizeof(cache_metrics[0]), src->ts,
		      src->ts->size);
		tiers(f, src->ts);
	}
	kd_mt_sizes(f, src);
	if (src->tn)
		tenants(f, src->tn);
	kd_mt_size_tenants(f, src);
	if (fflush(f) || ferror(f))
		return -EIO;
	return 0;
}
