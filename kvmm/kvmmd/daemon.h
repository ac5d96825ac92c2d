/* SPDX-License-Identifier: MIT */
/*
 * The daemon object (struct kd_daemon, daemon.c): its start, run and
 * stop, the uids' quotas, the counters ADMIN_STATUS reports.  kvmmd.h
 * includes it.
 */
#ifndef KVMM_KVMMD_DAEMON_H
#define KVMM_KVMMD_DAEMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ebpf/tel_policy.h"
#include "kvmm/kvmmd/daemon_config.h"
#include "kvmm/kvmmd/htab.h"
#include "kvmm/kvmmd/loop.h"
#include "kvmm/kvmmd/refuse.h"
#include "kvmm/kvmmd/scope.h"
#include "kvmm/kvmmd/tenant.h"
#include "kvmm/uapi.h"

struct kd_cache;
struct kd_session;

/*
 * A uid's quota: made when one of its sessions connects or a limit is set
 * for it, freed once nothing keeps it (no session of the uid, no zombie
 * of its processes, no page charged to it, no limit), so the table holds the
 * uids in use, not every uid ever seen.  Every session has one: a
 * connection that cannot get it is refused, never served uncounted.
 */
struct kd_quota {
	struct kd_hnode node; /* in kd_daemon.quotas */
	uint32_t uid;
	uint32_t sessions; /* its live sessions */
	/* its quarantine records (zombie.c), and those with a pidfd */
	uint32_t zombies, zombie_pidfds;
	uint32_t connected; /* its live sessions (--max-sessions-per-uid) */
	/* entries of its live sessions' block tables together
	 * (--max-table-entries-per-uid, region.c) */
	uint64_t seq_slots;
	uint64_t limit_pages; /* 0 = unlimited */
	/* pages owned by this uid's blocks, and those no block owns that
	 * its zombies hold (their process may still map them: zombie.c) */
	uint64_t used_pages;
	/* of used_pages: those of blocks the cache keeps as GPU copies
	 * (cache.c), which a check over the limit reclaims first
	 * (cache_quota.c) */
	uint64_t cached_pages;
};

struct kd_counters {
	uint64_t sessions_total, sessions_cut_off;
	/* connections closed at accept, by enum kd_refusal, or for no
	 * HELLO in time */
	uint64_t sessions_refused[KD_REFUSED_COUNT];
	uint64_t sessions_hello_timeout;
	uint64_t cmds_socket, cmds_ring;
	uint64_t revocations_posted, revocations_acked, revocations_timed_out;
	/* pending when their session ended, the one that timed out aside
	 * (kd_revoke_free_all()) */
	uint64_t revocations_cancelled;
	/* cached blocks ADMIN_CACHE_DROP dropped (cache_drop_walk.c) */
	uint64_t cache_drop_blocks;
	/* cache_lend.c: give-ahead requests posted, blocks given back while
	 * asked, extends that got their pages after asking, and those that
	 * failed once their wait was over */
	uint64_t lend_requests, lend_blocks, lend_extends, lend_failures;
	/* answered PREFIX_QUERYs (cache_query.c), the hashes they asked
	 * and the blocks found, by the reply's tier (KVMM_QUERY_*);
	 * answered BLOCK_PIN_MANYs (pin.c), their hashes and pins; and
	 * answered TIER_STATS: ADMIN_STATUS's ABI 1.20 fields */
	uint64_t prefix_queries, prefix_query_hashes;
	uint64_t prefix_query_found[4];
	uint64_t pin_many_calls, pin_many_hashes, pin_many_pinned;
	uint64_t tier_stats_calls;
};

struct kd_daemon {
	struct kd_config cfg;
	/* kd_daemon_start() failed on an option's value (one the start
	 * could judge only with the backend's page size, say): exit 2 */
	bool bad_option;
	struct kd_loop loop;
	struct vmm_backend *backend;
	struct vmm_pool *pool;
	uint64_t capacity; /* pages */
	/* the soft RLIMIT_NOFILE the pool's cap of kept read-only fds was
	 * sized for, and when kd_nofile_check() last read it (daemon.c) */
	uint64_t nofile_soft;
	uint64_t nofile_checked_ns;
	size_t page_size;
	int listen_fd;
	struct kd_file listen_file;
	int signal_fd;
	struct kd_file signal_file;
	struct kd_session *sessions; /* live, doubly linked */
	struct kd_zombie *zombies; /* zombie.c: quarantine, one per process */
	uint32_t nr_zombies, nr_zombie_pidfds;
	/* per pool page: how many zombies hold it, KD_ZPAGE_CHARGED when one
	 * of them pays for it (NULL until the first quarantine) */
	uint32_t *zombie_holds;
	struct kd_timer zombie_poll; /* the zombies without a pidfd */
	uint32_t nr_sessions;
	uint32_t next_session_id;
	uint32_t next_region_id;
	uint64_t next_cookie;
	uint64_t pages_quarantined; /* distinct pages zombies hold */
	/* refusals since the last WARN about them (session.c: one a second) */
	uint64_t refused_unlogged;
	uint64_t refused_log_ns;
	struct kd_refused refused[KD_REFUSED_WAITING]; /* refuse.c */
	struct kd_htab quotas; /* struct kd_quota by uid (daemon.c) */
	struct kd_counters ctr;
	/* cache.c: one cache a block size (caches[0..nr_caches)); cache is
	 * caches[0], which also keeps what the sizes share (the line of
	 * commands parked for pool pages, the NVMe tier, --policy-state) */
	struct kd_cache *cache;
	struct kd_cache *caches[KD_CACHE_SIZES];
	uint32_t nr_caches;
	struct kd_scope scope; /* scope.c: whose hashes meet in the cache */
	struct kd_tenants tenants; /* tenant.c: what each tenant got */
	uint64_t start_ns;
	uid_t uid; /* the daemon's own uid: admin rights */
	struct tel *tel; /* NULL when telemetry is off */
	/* the daemon's own fallback counters (kvmm_tel_*() recorders of
	 * ebpf/telemetry_shm.h), NULL unless the source is shm */
	struct kvmm_tel_shm *tel_local;
	struct tel_policy tel_feed; /* set .cache/.cost to feed the policy */
	/* --profile, corrected online by telemetry (tel_feed.cost) */
	struct pol_cost_model *cost;
	struct kd_timer tel_timer;
	/* telemetry's drop counters as last logged, and when (telemetry.c:
	 * growth is logged at most every KD_TEL_DROP_LOG_MS) */
	struct kvmm_counters tel_drops_logged;
	uint64_t tel_drops_log_ns;
	/* KVMMD_TEST_TEL_POLL_LOG=1: each tick that fed says so, counted */
	bool tel_poll_log;
	uint64_t tel_ticks_fed;
	struct kd_pins *pins; /* pin.c: NULL while no session pins */
	struct kd_metrics *metrics; /* metrics_http.c: NULL when off */
};

int kd_daemon_start(struct kd_daemon *d, const struct kd_config *cfg);
int kd_daemon_run(struct kd_daemon *d);
void kd_daemon_stop(struct kd_daemon *d);
/* A started daemon whose start is refused after all (its --pid-file):
 * stopped, the NVMe file this start made removed. */
void kd_daemon_stop_refused(struct kd_daemon *d);
/* The quota of uid, made (unlimited) when it has none: NULL only when that
 * fails (no memory). */
struct kd_quota *kd_quota_for(struct kd_daemon *d, uint32_t uid);
/* The quota of uid if it has one (no entry made). */
struct kd_quota *kd_quota_find(const struct kd_daemon *d, uint32_t uid);
/* Free q if nothing keeps it any more (see struct kd_quota). */
void kd_quota_maybe_free(struct kd_daemon *d, struct kd_quota *q);
/* Limit uid to pages (0 = unlimited): 0 or -ENOMEM. */
int kd_quota_set(struct kd_daemon *d, uint32_t uid, uint64_t pages);

/* RLIMIT_NOFILE read again, at most once a second: a changed soft limit
 * moves the pool's cap of kept read-only page fds (daemon.c). */
void kd_nofile_check(struct kd_daemon *d);

#endif
