/* SPDX-License-Identifier: MIT */
/*
 * kvmmd internals: the objects the daemon keeps and which file owns them.
 *
 *   loop.c     epoll event loop: file events, timers, before-sleep hook
 *              with bounded adaptive spinning over the session rings
 *   daemon.c   daemon start/stop: backend, pool, listener, signals
 *   session.c  sessions: accept, SO_PEERCRED, quotas, death and cut-off;
 *              who gets one (per-uid limit, admin slots, HELLO deadline);
 *              their replies and fds in session_reply.c
 *   refuse.c   connections refused at accept: their HELLO is answered
 *              with why, in a bounded number of waiting slots
 *   zombie.c   quarantine: pages of a live cut-off process stay held, and
 *              charged to its uid's quota, until it exits (one record per
 *              process, a bounded number of pidfds)
 *   region.c   regions, sequences, blocks (a block owns 2L pool pages and
 *              is reference counted, so later sharing fits), held pages
 *   ring.c     the session memfd rings, daemon side
 *   proto.c    command validation and dispatch (socket and ring); the
 *              status and admin commands in proto_admin.c
 *   revoke.c   revocation: post, acknowledge, time out
 *   cache.c    published blocks, prefix sharing, host/NVMe tiers (cache.h;
 *              set-up, stop, demotion, restores, prefix open and the rest
 *              in cache_*.c: cache_priv.h lists them; the restore
 *              plans in cache_plan.c, cache_plan.h)
 *   pin.c      BLOCK_PIN / BLOCK_UNPIN / BLOCK_PIN_MANY: per-session pins,
 *              TTLs, priorities (pin_heap.c: the TTL records' min-heap;
 *              pin_priv.h what the two share)
 *   telemetry.c  the telemetry source the --telemetry options choose,
 *              polled from a loop timer into the policy's feed
 *   fd_closer.c  the fds clients send, closed on a thread of their own
 *
 * The other files: main.c (options, config file, daemonizing), and
 * those with a header of their own: options.c (with options_values.c,
 * the value parsers kvmmctl shares, and options_check.c, the checks
 * across options: options.h), paths.c, log_sink.c,
 * sd_notify.c, htab.c, crc32c.c, siphash.c, salt.c, scope.c, tenant.c, test_knob.c,
 * tier_host.c and tier_host_slab.c (tier_host.h), tier_nvme*.c
 * (tier_nvme_priv.h lists them), migrate*.c (migrate_priv.h),
 * metrics_text.c, metrics_gzip.c and metrics_http.c with the other
 * metrics_*.c (metrics_http_priv.h).
 *
 * Everything runs on the one event-loop thread; nothing here is locked.
 */
#ifndef KVMM_KVMMD_H
#define KVMM_KVMMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ebpf/tel_policy.h"

#define KD_DEFAULT_PROFILE "h200-llama3-8b"
#include "kvmm/kvmmd/htab.h"
#include "kvmm/kvmmd/scope.h"
#include "kvmm/kvmmd/tenant.h"
#include "kvmm/lib/wire.h"
#include "kvmm/uapi.h"
#include "vmm/vmm.h"

struct kd_loop;
struct kd_daemon;
struct kd_cache;

/* block sizes kvmmd caches at once (a model and its draft, two models
 * on one GPU): each has its own cache (cache_setup.c) */
#define KD_CACHE_SIZES 4
#define KD_CACHE_SIZES_STR "4"

/* ---- loop.c ---- */

typedef void (*kd_file_fn)(struct kd_loop *loop, int fd, uint32_t events,
			   void *data);

/* A file event; embedded in the object that owns the fd. */
struct kd_file {
	int fd;
	kd_file_fn fn;
	void *data;
};

struct kd_timer {
	uint64_t when_ns; /* CLOCK_MONOTONIC */
	void (*fn)(struct kd_loop *loop, struct kd_timer *t);
	void *data;
	bool armed;
	struct kd_timer *next;
};

struct kd_loop {
	int epfd;
	int timerfd;
	struct kd_file timer_file;
	struct kd_timer *timers; /* sorted by when_ns */
	bool stop;
	uint64_t spin_ns; /* keep polling this long after the last work */
	/* Polls for work outside epoll (rings); true if it found some. */
	bool (*poll)(void *data);
	/* Before blocking: arm = true asks peers to ring doorbells and
	 * returns true if work arrived meanwhile; arm = false after wake. */
	bool (*prepare_sleep)(void *data, bool arm);
	void *hook_data;
	uint64_t spins, sleeps;
	/* Files deleted while a batch of events is dispatched: their later
	 * events in the batch are stale (the object may be freed). */
	bool dispatching;
	unsigned int nr_dead;
	struct kd_file *dead[64];
};

int kd_loop_init(struct kd_loop *loop);
void kd_loop_fini(struct kd_loop *loop);
int kd_loop_add(struct kd_loop *loop, struct kd_file *f, int fd,
		uint32_t events, kd_file_fn fn, void *data);
/* New event mask (0: only EPOLLHUP / EPOLLERR are reported). */
int kd_loop_mod(struct kd_loop *loop, struct kd_file *f, uint32_t events);
void kd_loop_del(struct kd_loop *loop, struct kd_file *f);
void kd_timer_arm(struct kd_loop *loop, struct kd_timer *t, uint64_t when_ns);
void kd_timer_cancel(struct kd_loop *loop, struct kd_timer *t);
int kd_loop_run(struct kd_loop *loop);
uint64_t kd_now_ns(void);
/* RLIMIT_NOFILE read again, at most once a second: a changed soft limit
 * moves the pool's cap of kept read-only page fds (daemon.c). */
void kd_nofile_check(struct kd_daemon *d);

/* ---- daemon.c ---- */

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

/* --quota UID=SIZE, in bytes until the page size is known */
struct kd_quota_opt {
	uint32_t uid;
	uint64_t bytes;
};

#define KD_MAX_QUOTA_OPTS 64

/* --tenant-limit ID=TIER:N[,TIER:N...] or ID=none (tenant.c) */
struct kd_tenant_limit {
	uint32_t id; /* uid, or gid under --cache-scope gid */
	uint64_t blocks[3]; /* per tier; 0: no limit there */
};

#define KD_MAX_TENANT_LIMITS 64
#define KD_MAX_TELEMETRY_ATTACH 4

/* Options checked once all are read (kd_config_check(), the start):
 * where each was last set, so that a config file's is reported with its
 * FILE:LINE as a bad line while parsing is (options.c: kd_config_where) */
enum kd_origin {
	KD_ORIGIN_SOCKET,
	KD_ORIGIN_POLICY_STATE,
	KD_ORIGIN_HOST_MEM,
	KD_ORIGIN_NVME_PATH,
	KD_ORIGIN_NVME_SIZE,
	KD_ORIGIN_CACHE_BLOCK_PAGES,
	KD_ORIGIN_GPU_MEM,
	KD_ORIGIN_CPU,
	KD_ORIGIN_COUNT
};

struct kd_opt_origin {
	const char *file; /* NULL: the command line (or the default) */
	int line;
};

struct kd_config {
	char socket_path[108];
	enum vmm_backend_kind backend;
	size_t page_size; /* host backend; 0 = default */
	uint64_t gpu_mem; /* bytes; 0 = default */
	bool foreground;
	int log_level;
	uint32_t revoke_timeout_ms;
	/* --lend-wait: ms an extend short of blocks waits for the blocks
	 * ahead it asked other processes of its uid for (cache_lend.c);
	 * 0 = it asks none */
	uint32_t lend_wait_ms;
	uint32_t spin_us;
	uint32_t socket_mode;
	int cuda_device;
	char gpu_uuid[64]; /* --cuda-device GPU-...: wins over the ordinal */
	int cpu; /* pin the event loop to this CPU; -1 = no */
	char pid_file[256];
	char log_file[256]; /* --log-file, "" = stderr or syslog (log_sink.c) */
	uint32_t nr_quotas;
	struct kd_quota_opt quotas[KD_MAX_QUOTA_OPTS];
	/* telemetry (telemetry.c, ebpf/telemetry.h) */
	int telemetry; /* enum tel_mode, default auto */
	char telemetry_pin_root[128]; /* "" = /sys/fs/bpf/kvmm */
	uint32_t nr_telemetry_attach; /* 0 = libkvmm.so.1 + kvmmd */
	char telemetry_attach[KD_MAX_TELEMETRY_ATTACH][256];
	/* its own executable traced in its own process alone: set by the
	 * kvmmd program (main.c), not by a test that embeds the daemon
	 * and forks its clients from the same executable */
	bool telemetry_own_exe_self_only;
	/* cost model profile, name or path ("" = KD_DEFAULT_PROFILE) */
	char profile[256];
	char policy_state[256]; /* --policy-state, "" = none (cache_learned.c) */
	/* block cache and tiers (cache.c) */
	uint64_t host_mem; /* --host-mem bytes, 0 = no host tier */
	/* --host-numa-node: where the host tier's slab goes; -1 = the GPU's
	 * node (its PCI address), else the node of the CPU kvmmd runs on */
	int host_numa_node;
	char nvme_path[256]; /* --nvme-path, "" = no NVMe tier */
	uint64_t nvme_size; /* --nvme-size bytes */
	uint64_t cache_gpu_blocks; /* --cache-gpu-blocks, 0 = half the pool */
	/* --cache-block-pages A[,B...]: the block sizes (pages) the cache
	 * serves, each with its share of --host-mem (cache_block_sizes[],
	 * nr_cache_block_sizes of them; cache_block_pages is the first, the
	 * NVMe tier's); 0 = those of the first regions to publish or look up
	 * a prefix, KD_CACHE_SIZES at most, the first with the host and NVMe
	 * tiers */
	uint32_t cache_block_pages;
	uint32_t cache_block_sizes[KD_CACHE_SIZES];
	uint32_t nr_cache_block_sizes;
	uint32_t nvme_admit_uses; /* --nvme-admit-uses, 0 or 1 = admit all */
	/* --nvme-save-on-stop: ms a stop may spend moving the GPU and host
	 * tiers' blocks to NVMe (cache_stop.c), 0 (the default) = none */
	uint32_t nvme_save_ms;
	int cache_policy; /* --cache-policy: enum pol_kind, default asym */
	uint32_t cache_scope; /* --cache-scope: enum kd_scope_mode */
	uint32_t restore_mode; /* --restore-mode, enum kd_restore_mode */
	uint32_t pin_quota; /* --pin-quota: pin records per session, 0 =
			     * a quarter of the GPU cache (pin.c) */
	/* --max-sessions: live sessions in all, the last KD_ADMIN_SESSIONS
	 * of them for admin uids (session.c); at most KD_MAX_SESSIONS, the
	 * default.  The fds kvmmd keeps for them (daemon.c) follow it */
	uint32_t max_sessions;
	/* --max-sessions-per-uid: live sessions of one non-admin uid,
	 * 0 = no limit but max_sessions (session.c) */
	uint32_t max_sessions_per_uid;
	/* --quarantine-per-uid: quarantined processes of one non-admin uid
	 * past which its new processes get no session (zombie.c) */
	uint32_t quarantine_per_uid;
	/* --hello-timeout: ms a connection may take to send HELLO */
	uint32_t hello_timeout_ms;
	/* --max-table-entries-per-uid: block-table entries of one uid's
	 * sessions together, 0 = max(KD_SEQ_SLOTS_MIN, 2 x pool pages) */
	uint64_t max_table_entries;
	/* --metrics-listen [HOST:]PORT, "" = off (metrics_http.c) */
	char metrics_listen[80];
	uint32_t nr_tenant_limits;
	struct kd_tenant_limit tenant_limits[KD_MAX_TENANT_LIMITS];
	/* --socket-group: the socket's group, (gid_t)-1 = kvmmd's own */
	gid_t socket_group;
	/* --nvme-format: --nvme-path may be formatted though it holds
	 * something that is not a kvmm tier (its contents are lost) */
	bool nvme_format;
	/* the config file line being applied (main.c), NULL file for the
	 * command line, and where the options of enum kd_origin and each
	 * tenant limit were last set */
	struct kd_opt_origin src;
	struct kd_opt_origin origin[KD_ORIGIN_COUNT];
	struct kd_opt_origin tenant_limit_origin[KD_MAX_TENANT_LIMITS];
};

void kd_config_defaults(struct kd_config *cfg);

struct kd_session;
struct kd_region;

/* Why a connection was closed at accept (session.c), each counted and
 * shown (ADMIN_STATUS, kvmmctl status, kvmm_sessions_refused_total). */
enum kd_refusal {
	KD_REFUSED_UID_LIMIT, /* its uid had --max-sessions-per-uid */
	KD_REFUSED_ADMIN_RESERVED, /* only the admin uids' slots were left */
	KD_REFUSED_FULL, /* KD_MAX_SESSIONS, admins too */
	KD_REFUSED_NO_MEMORY, /* no quota record for its uid */
	/* its uid had --quarantine-per-uid quarantined processes and it was
	 * none of them (zombie.c) */
	KD_REFUSED_QUARANTINE,
	KD_REFUSED_COUNT,
};

/*
 * A refused connection waiting for its first message, to answer it with
 * why (refuse.c).  At most KD_REFUSED_WAITING wait: past that the oldest
 * is closed unanswered, so a flood of refusals holds that many fds.
 */
#define KD_REFUSED_WAITING 32

struct kd_refused {
	struct kd_daemon *d;
	bool used;
	enum kd_refusal why;
	int fd;
	struct kd_file file;
	struct kd_timer timer; /* --hello-timeout after accept */
	uint64_t since_ns; /* accepted (the oldest goes first) */
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
	/* cached blocks ADMIN_CACHE_DROP dropped (cache_drop.c) */
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
	struct kd_pins *pins; /* pin.c: NULL while no session pins */
	struct kd_metrics *metrics; /* metrics_http.c: NULL when off */
};

int kd_daemon_start(struct kd_daemon *d, const struct kd_config *cfg);
int kd_daemon_run(struct kd_daemon *d);
void kd_daemon_stop(struct kd_daemon *d);
/* The quota of uid, made (unlimited) when it has none: NULL only when that
 * fails (no memory). */
struct kd_quota *kd_quota_for(struct kd_daemon *d, uint32_t uid);
/* The quota of uid if it has one (no entry made). */
struct kd_quota *kd_quota_find(const struct kd_daemon *d, uint32_t uid);
/* Free q if nothing keeps it any more (see struct kd_quota). */
void kd_quota_maybe_free(struct kd_daemon *d, struct kd_quota *q);
/* Limit uid to pages (0 = unlimited): 0 or -ENOMEM. */
int kd_quota_set(struct kd_daemon *d, uint32_t uid, uint64_t pages);

/* ---- telemetry.c ---- */
int kd_telemetry_start(struct kd_daemon *d);
void kd_telemetry_stop(struct kd_daemon *d);
/* Shared-memory fallback: room after a session's rings, registered for
 * reading; removal keeps what the session counted. */
void kd_telemetry_ring_layout(struct kd_daemon *d,
			      struct kvmm_ring_offsets *off);
/* Telemetry source id of the daemon's own region (session ids, the
 * sessions' regions' ids, are 32-bit). */
#define KD_TEL_LOCAL_ID (1ull << 32)
void kd_telemetry_session_add(struct kd_daemon *d, uint32_t id, pid_t pid,
			      void *mem, const struct kvmm_ring_offsets *off);
void kd_telemetry_session_remove(struct kd_daemon *d, uint32_t id);
/* ADMIN_STATUS: the telemetry source and its drop counters. */
void kd_telemetry_status(struct kd_daemon *d, struct kvmm_status_reply *st);

/* ---- region.c ---- */

/* A block: the pages backing one token span of a sequence in all 2L
 * ranges.  Reference counted by the sequences that use it (one now; prefix
 * sharing adds more). */
struct kd_block {
	uint32_t refcnt;
	uint32_t nr_pages;
	/* a copy into the pages may still land (the backend could not wait
	 * for it): the last put keeps them out of the pool for good */
	bool abandoned;
	/* its pages went out read-only (a prefix open's shared or reloaded
	 * block): SEQ_UNSHARE copies it even once it is no cache entry's
	 * and one sequence's alone, as no writable fd of it went out */
	bool ro_sent;
	uint64_t hash; /* 0 until published (issue #4) */
	struct kd_quota *charged; /* whose quota pays for the pages */
	uint32_t pages[];
};

struct kd_seq {
	bool open;
	/* a PREFIX_OPEN that opened it has not replied (or, with
	 * KVMM_PREFIX_OPEN_COLLECT, its reply is not collected): the
	 * client's commands naming it are -EBUSY (kd_seq_lookup_client()) */
	bool opening;
	/* a KVMM_SEQ_EXTEND_COLLECT extend of it is parked for pool pages or
	 * its reply not collected yet (ABI 1.17, cache_park.c): the same
	 * -EBUSY, but for the ring's SEQ_EXTEND (length only) */
	bool extending;
	/* opened by a PREFIX_OPEN whose hashes brought few blocks the cache
	 * did not know (pol_cache_few_new): its blocks' accesses say so */
	bool few_new;
	uint32_t gen; /* which opening of the slot (kvmm_rqe.seq_gen) */
	uint32_t len; /* tokens */
	/*
	 * Revocations took blocks [revoked_from, revoked_to) in this opening
	 * (revoked_gen == gen; 0: none since the last extend that gave it
	 * blocks there again): a command naming such a block is told that
	 * it was revoked, -ESTALE, where a block that never had pages is
	 * -EINVAL (kd_seq_revoked(); a client of ABI 1.20 or later only).
	 */
	uint32_t revoked_gen, revoked_from, revoked_to;
	uint32_t nr_slots; /* of blocks[] */
	/* The block table: blocks[b] for b < nr_slots (NULL = no pages);
	 * no block at or past nr_slots.  It grows as blocks get pages
	 * (kd_seq_reserve()), never past max_blocks, so opening, closing and
	 * every walk over it cost what the sequence uses, not max_tokens: a
	 * table of max_blocks entries made each open of a region of 2^24
	 * one-token blocks allocate 128 MB and each close scan 16M entries. */
	struct kd_block **blocks;
};

/* Is block b of q missing because a revocation took it (struct kd_seq's
 * revoked_from)? */
static inline bool kd_seq_revoked(const struct kd_seq *q, uint32_t b)
{
	return q->revoked_gen == q->gen && b >= q->revoked_from &&
	       b < q->revoked_to;
}

/* The errno of a command of s naming a block a revocation took:
 * -ESTALE for a client of ABI 1.20 or later, -EINVAL, as any block
 * without pages, before (abi.md, 1.20). */
#define KD_REVOKED_MINOR 20

/* Block b of q, NULL when it has no pages. */
static inline struct kd_block *kd_seq_block(const struct kd_seq *q, uint32_t b)
{
	return b < q->nr_slots ? q->blocks[b] : NULL;
}

/*
 * The entries the block tables of one uid's sessions may hold together
 * (--max-table-entries-per-uid, by default twice the pool's pages, at
 * least 2^20: 8 MB of pointers).  Its own blocks never come near (each
 * has 2 pages or more); only prefix opens sharing cached blocks into
 * very many sequences do, and without a bound they could make kvmmd
 * allocate without limit.  Per uid, not per session: a bound per session
 * was multiplied by the sessions one client opened (16 made kvmmd grow
 * by 129 MB).  Past it, what would grow a table fails with -ENOBUFS.
 */
#define KD_SEQ_SLOTS_MIN (1u << 20)

struct kd_region {
	uint32_t id;
	struct kd_session *owner;
	struct kd_region *next; /* in owner's list */
	uint32_t layers, kv_heads, head_dim, dtype_bytes;
	uint32_t max_seqs, max_tokens;
	uint64_t salt;
	uint32_t tokens_per_block, max_blocks, pages_per_block;
	uint32_t nr_open;
	uint32_t next_seq_gen;
	bool uncached_logged; /* its block size is not the cache's: said once */
	struct kd_seq *seqs; /* max_seqs */
};

/* The blocks len tokens of r take (the last one partly filled). */
static inline uint32_t kd_region_blocks_for(const struct kd_region *r,
					    uint32_t len)
{
	return (len + r->tokens_per_block - 1) / r->tokens_per_block;
}

/* REGION_CREATE answers -EMFILE past it */
#define KD_MAX_REGIONS_PER_SESSION 64

int kd_region_create(struct kd_session *s, const struct kvmm_region_create *rc,
		     struct kvmm_region_create_reply *rep);
void kd_region_destroy(struct kd_region *r, bool unhold);
/* The region with this id: -ENOENT when none, -EPERM when another
 * session's. */
int kd_region_lookup(struct kd_session *s, uint32_t id, struct kd_region **out);
int kd_seq_lookup(struct kd_region *r, uint32_t seq, struct kd_seq **out);
/* kd_seq_lookup() for a client's command: -EBUSY while a PREFIX_OPEN
 * still opens the sequence (its blocks are not the client's yet), or an
 * extend of it waits to be collected (kd_seq.extending). */
int kd_seq_lookup_client(struct kd_region *r, uint32_t seq,
			 struct kd_seq **out);
/* A sequence of r is opening or extending (kd_seq_lookup_client()'s
 * -EBUSY): REGION_DESTROY is -EBUSY too. */
bool kd_region_seqs_busy(const struct kd_region *r);
/* Opens a sequence with an empty block table. */
int kd_seq_open(struct kd_region *r, uint32_t *seq);
/* Room in seq's table for blocks [0, nr) (nr <= max_blocks): 0, -ENOBUFS
 * past its uid's budget (KD_SEQ_SLOTS_MIN), -ENOMEM. */
int kd_seq_reserve(struct kd_region *r, uint32_t seq, uint32_t nr);
/* Would nr more table entries fit the budget of the session's uid? */
bool kd_seq_slots_room(const struct kd_session *s, uint32_t nr);
/* Shrink seq's table to blocks [0, keep) and those that have pages: what
 * kd_seq_reserve() took for blocks that got none. */
void kd_seq_trim(struct kd_region *r, uint32_t seq, uint32_t keep);
/* unhold: the client has unmapped the pages (not so at session end, where
 * holds are released or quarantined as a whole). */
void kd_seq_close(struct kd_region *r, uint32_t seq, bool unhold);
/* Allocate pages for blocks [from, to) that have none; on failure nothing
 * changes.  New blocks are held by the session.  -EINPROGRESS: the pool
 * is short until demotion copies in flight end, or its free pages are
 * earmarked for commands parked before (the caller parks its command,
 * kd_cache_park()).  ask: short of the uid's quota or of the pool, the
 * blocks other processes of the uid map ahead are asked back
 * (cache_lend.c: -EINPROGRESS too); not for blocks wanted ahead of the
 * length, which the client asks again without. */
int kd_seq_fill(struct kd_region *r, uint32_t seq, uint32_t from, uint32_t to,
		bool ask);
/* The same with the new pages allocated for owner (KD_OWNER_*();
 * kd_seq_fill(): the session's uid). */
int kd_seq_fill_for(struct kd_region *r, uint32_t seq, uint32_t from,
		    uint32_t to, bool ask, uint64_t owner);
/* Drop blocks [from, end): the client unmapped them already. */
void kd_seq_drop_blocks(struct kd_region *r, uint32_t seq, uint32_t from,
			bool unhold);
/* Detach block b of a sequence without releasing the session's hold (the
 * revocation path: held until acknowledged). */
struct kd_block *kd_seq_detach_block(struct kd_region *r, uint32_t seq,
				     uint32_t b);
/*
 * Who a pool page was last allocated for (vmm_pool_alloc_for()): a page
 * that goes to another owner is zeroed first.  A client's pages are its
 * uid's; a restore's are the cached block's, which every client of its
 * cache scope may map, before the copy lands too (an early open): the
 * shared scope's, or the gid's under --cache-scope gid (under uid the
 * uid's own).  Kinds in the high word, so a gid never passes for a uid.
 */
#define KD_OWNER_UID(uid) ((uint64_t)(uint32_t)(uid))
#define KD_OWNER_GID(gid) ((1ull << 32) | (uint32_t)(gid))
#define KD_OWNER_SHARED (2ull << 32)
/* The pages SEQ_UNSHARE copies a cached block into for uid (unshare.c):
 * an owner no allocation asks for, so whoever gets them next, that uid
 * too, gets them zeroed: they hold the cache scope's bytes and what the
 * sequence wrote after them. */
#define KD_OWNER_COPY(uid) ((3ull << 32) | (uint32_t)(uid))
/* The owner of the pages of a block s restores: its cache scope's.  Also
 * s's trust domain for the pool (vmm_pool_page_fd(), _alloc_for()): a
 * page whose fd went to a process of one scope reaches another scope's
 * only as a new page, since a process may keep what it says it unmapped;
 * under --cache-scope shared every client is one domain. */
uint64_t kd_cache_owner(const struct kd_session *s);

/* A fresh block of nr_pages pool pages for owner (KD_OWNER_*(); kd_block_new:
 * s's uid) in s's domain, charged to s's quota (not checked against its
 * limit: the caller does); refcnt 1.  0, -ENOMEM, -ENOSPC, or the -errno
 * of a page's scrub or renewal. */
int kd_block_new_for(struct kd_session *s, uint32_t nr_pages, uint64_t owner,
		     struct kd_block **out);
int kd_block_new(struct kd_session *s, uint32_t nr_pages,
		 struct kd_block **out);
void kd_block_put(struct kd_daemon *d, struct kd_block *blk);

/* The session's process maps (or unmaps) a page once more. */
void kd_hold_page(struct kd_session *s, uint32_t page);
void kd_unhold_page(struct kd_session *s, uint32_t page);

/* ---- session.c ---- */

struct kd_revoke {
	uint64_t cookie;
	uint64_t deadline_ns;
	struct kd_revoke *next;
	/* Runs once: 0 acknowledged, -ETIMEDOUT the session was cut off for
	 * not answering, -ECONNRESET it ended otherwise. */
	void (*done)(void *arg, int status);
	void *arg;
	uint32_t nr_pages;
	/* The mappings whose holds drop on acknowledgement: page_id and
	 * where the client maps it; page_id KD_REVOKE_GONE once the client
	 * unmapped that place itself (kd_revoke_unmapped()). */
	struct kvmm_rqe places[];
};

#define KD_REVOKE_GONE UINT32_MAX

struct kd_ring;

/* At most this many client sessions (accept refuses more; --max-sessions
 * may say fewer), the last KD_ADMIN_SESSIONS of them only for admin uids:
 * kvmmctl gets in to list and kill sessions however many other uids
 * opened. */
#define KD_MAX_SESSIONS 1024
#define KD_ADMIN_SESSIONS 16
/* --max-sessions-per-uid's default */
#define KD_SESSIONS_PER_UID (KD_MAX_SESSIONS / 4)
/* --hello-timeout's default, ms */
#define KD_HELLO_TIMEOUT_MS 5000
/* Fds a live session holds: its socket, its pidfd, the ring's memfd and
 * three eventfds (ring.c).  Sizes RLIMIT_NOFILE at start (daemon.c). */
#define KD_SESSION_FDS 6

struct kd_session {
	struct kd_daemon *d;
	struct kd_session *prev, *next;
	uint32_t id;
	pid_t pid;
	uid_t uid;
	gid_t gid;
	char name[32];
	int fd;
	struct kd_file file;
	int pidfd; /* -1 when unsupported */
	/* its process's start time at accept (kd_pid_start_time), 0 unknown:
	 * without a pidfd, what tells it from a later process with its pid */
	uint64_t start_time;
	bool hello_done;
	/* the client's abi_minor in its HELLO: what its library does with
	 * what it is sent (KD_RO_FDS_MINOR) */
	uint16_t client_minor;
	bool admin; /* may run admin commands */
	bool admin_only; /* no rings (kvmmctl) */
	bool said_bye; /* unmapped everything before closing */
	bool in_step;
	bool doomed; /* end at the next safe point (hostile input) */
	bool revoke_timed_out;
	/* A command's reply is deferred (a PREFIX_OPEN waiting for its
	 * restores, cache_pending.c): the socket is not read until it is sent, so
	 * replies stay in request order. */
	bool reply_deferred;
	uint64_t deferred_ns; /* when it was deferred */
	const char *doom_why;
	struct kd_ring *ring;
	struct kd_region *regions;
	uint32_t nr_regions;
	uint64_t nr_sequences;
	uint64_t seq_slots; /* entries of its sequences' block tables */
	/* Per pool page: how many places this process maps it (both sides
	 * count the same way, see region.c). */
	uint32_t *held;
	uint64_t pages_held; /* pages with held[] > 0 */
	uint64_t pages_owned; /* pages of this session's blocks */
	struct kd_quota *quota;
	struct kd_revoke *revokes; /* pending, oldest first */
	struct kd_pin *pins; /* pin.c: this session's pin records */
	uint32_t nr_pins;
	uint64_t pinned_bytes; /* its records' blocks, each its size */
	struct kd_timer revoke_timer;
	struct kd_timer hello_timer; /* armed until HELLO is answered */
	/* time in sendmsg of replies since the command now served began
	 * (KVMMD_SLOW_CMD_US) */
	uint64_t reply_send_ns;
	uint64_t cmds_socket, cmds_ring;
	uint64_t revocations_posted, revocations_acked;
	/*
	 * cache_lend.c, the last request for its blocks ahead: when its
	 * wait ends (CLOCK_MONOTONIC ns, 0: none waits), its cookie (ABI
	 * 1.20: the client answers it; 0 before), when the client answered
	 * it (0: not yet), and its commands (cmds_socket + cmds_ring) when
	 * asked.  silent: a wait ran out with no answer and no command
	 * since it was asked (stopped, hung): not waited for again until
	 * its commands move.
	 */
	uint64_t lend_asked_until;
	uint64_t lend_cookie;
	uint64_t lend_answered_ns;
	uint64_t lend_cmds;
	bool lend_silent;
};

int kd_session_listen(struct kd_daemon *d);
/* What is at --socket PATH may be replaced (a socket): 0, -ENOENT when
 * nothing is there, -EEXIST when something else is (callers say so). */
int kd_socket_path_check(const char *path);
/* Tear down a session.  cut_off: the daemon ends it (timeout, admin);
 * pages its process may still map are quarantined until it exits. */
void kd_session_end(struct kd_session *s, bool cut_off, const char *why);
void kd_session_free_all(struct kd_daemon *d);
/* Mark the session to be cut off at the next safe point. */
void kd_session_doom(struct kd_session *s, const char *why);

/* ---- refuse.c ---- */

/* The errno a refused connection's HELLO is answered with (abi.md). */
int kd_refusal_errno(enum kd_refusal why);
/* Tell the connection fd (kvmmd's now) why it is refused, and close it. */
void kd_refuse_conn(struct kd_daemon *d, int fd, enum kd_refusal why);
/* The daemon stops: every refused connection still waiting is closed. */
void kd_refused_free_all(struct kd_daemon *d);

/* ---- zombie.c ---- */

/* Zombies of one uid that wait on a pidfd; the uid's others are polled. */
#define KD_ZOMBIE_PIDFDS_PER_UID 64
/* Zombies of all uids that wait on a pidfd: in kvmmd's fd budget. */
#define KD_MAX_ZOMBIE_PIDFDS 1024
/*
 * --quarantine-per-uid's default: quarantined processes (zombies) of one
 * non-admin uid past which a new process of that uid gets no session
 * (KD_REFUSED_QUARANTINE): what bounds the records a uid makes, which
 * otherwise grew with the processes it ran (those past the pidfd caps
 * cost a poll each every KD_ZOMBIE_POLL_MS).  Its sessions that live may
 * still add one each, so a uid has at most this + its
 * --max-sessions-per-uid.  256, as many as the default of the latter: a
 * uid with that many live processes cut off is broken.
 */
#define KD_ZOMBIES_PER_UID KD_SESSIONS_PER_UID
/* --quarantine-per-uid's most: a uid's records past its pidfds are
 * polled, a kill(2) and a read of /proc/PID/stat each every
 * KD_ZOMBIE_POLL_MS (about 20000 a second at this many) */
#define KD_ZOMBIES_PER_UID_MAX 4096
/* How often the zombies without a pidfd are looked at (kd_pid_exited). */
#define KD_ZOMBIE_POLL_MS 200
#define KD_ZPAGE_CHARGED 0x80000000u

/* When process pid started (/proc/PID/stat field 22, clock ticks since
 * boot), 0 when unknown: a pid and its start time name one process. */
uint64_t kd_pid_start_time(pid_t pid);
/* Whether the process with pid that started at start_time (0: whichever
 * has it) exited: no process has the pid, or a later process has it.
 * What cannot be read counts as living. */
bool kd_pid_exited(pid_t pid, uint64_t start_time);

/*
 * A quarantine record: the page holds of every session of one process
 * that ended while the process may still map their pages, until it exits.
 */
struct kd_zombie {
	struct kd_daemon *d;
	struct kd_zombie *prev, *next;
	uint32_t id; /* the first session quarantined into it */
	pid_t pid;
	uid_t uid;
	gid_t gid;
	char name[32]; /* that session's HELLO name */
	int pidfd; /* -1: over the pidfd caps or none, polled (kd_pid_exited) */
	uint64_t start_time; /* its process's, 0 unknown (kd_pid_start_time) */
	struct kd_file pid_file;
	struct kd_quota *quota; /* its uid's */
	uint32_t sessions; /* sessions quarantined into it */
	uint64_t nr_pages;
	uint32_t *pages; /* the pages it holds, ascending */
	bool *charged; /* per entry of pages[]: charged to its quota */
	uint64_t nr_charged;
};

/* The session ends without BYE while its process lives: its holds pass to
 * its process's zombie (made if it has none) until the process exits. */
void kd_zombie_quarantine(struct kd_session *s, bool cut_off);
/* Pages of a block just freed that a quarantined process still maps are
 * charged to that process's uid until it exits (the block's owner was
 * charged until now), one zombie's for each page. */
void kd_zombies_charge(struct kd_daemon *d, const uint32_t *pages, uint32_t n);
/* Whether a new session of process pid of q's uid may come: the uid has
 * fewer than --quarantine-per-uid zombies, or one of them is pid's process
 * (its sessions add to that one, no new record). */
bool kd_zombie_room(struct kd_daemon *d, const struct kd_quota *q, pid_t pid);
/* ADMIN_SESSIONS's entry for z (KVMM_SESSION_F_QUARANTINED). */
void kd_zombie_info(const struct kd_zombie *z, struct kvmm_session_info *i);
/* Every zombie goes (the daemon stops). */
void kd_zombies_free_all(struct kd_daemon *d);
/* Release every page hold of the session (its process unmapped them). */
void kd_session_release_holds(struct kd_session *s);
/* Stop reading the session's socket until kd_session_resume(): the
 * current command is answered later.  The session may still end (EOF,
 * admin kill) meanwhile; its revocation deadlines stop, since the client
 * cannot acknowledge while it waits (kd_revoke_resume()). */
void kd_session_defer(struct kd_session *s);
/* The deferred reply was sent: read the socket again.  Ends the session
 * when the reply doomed it (call only outside its socket handler). */
void kd_session_resume(struct kd_session *s);
/* Handle a deferred session's command msg again (a command parked for
 * pool pages, cache_park.c) as if just read.  The session stays deferred:
 * true when the command deferred it again (parked again, or waiting for
 * restores), false when it replied (then the caller resumes it). */
bool kd_session_rerun(struct kd_session *s, void *msg, size_t len);
struct kd_session *kd_session_by_id(struct kd_daemon *d, uint32_t id);
/* KVMMD_SLOW_CMD_US in ns (0: not set): the commands session.c times and
 * the sendmsg of their replies (session_reply.c) */
uint64_t kd_slow_cmd_ns(void);

/* ---- session_reply.c ---- */

int kd_session_reply(struct kd_session *s, const struct kvmm_msg_hdr *req,
		     int status, const void *body, size_t len, const int *fds,
		     unsigned int nfds);
/*
 * The same for a reply that hands out pages: fds[i] is the pool's fd of a
 * page (vmm_pool_page_fd()), sent as is, unless ro (NULL: none) names the
 * page there (ro[i] != KD_PAGE_AS_IS): that page is for a process that
 * may only read it (a cached block a prefix open shares), and goes as a
 * read-only fd (vmm_pool_page_fd_readonly(): the pool's, kept while the
 * page is allocated, or past the pool's cap of kept fds one opened for
 * the message alone), or as fds[i] where the backend cannot make one
 * (cuda) or the client's library may map the page writable (a HELLO
 * below KD_RO_FDS_MINOR).  One that cannot be opened fails the reply,
 * which dooms the session (its body announced the fd).
 */
#define KD_PAGE_AS_IS UINT32_MAX
/*
 * libkvmm has mapped shared blocks read-only since ABI 1.15; before it
 * (ABI 1.14 and older) it mapped them read-write, which a read-only fd
 * refuses (EACCES): a client that says it speaks an older minor keeps
 * getting the read-write fd, as abi.md's compatibility rule asks.  The
 * read-only fd guards against accidents (an engine's stray write into the
 * cache's copy), not against a client that means harm, which can claim
 * an old minor, or publish wrong bytes under hashes others use.
 */
#define KD_RO_FDS_MINOR 15
int kd_session_reply_pages(struct kd_session *s, const struct kvmm_msg_hdr *req,
			   int status, const void *body, size_t len,
			   const int *fds, const uint32_t *ro,
			   unsigned int nfds);

/* ---- ring.c ---- */

/* Sets up the rings; fds[4] = memfd, sq doorbell, cq doorbell, revoke
 * eventfd (dups the caller sends and closes). */
int kd_ring_create(struct kd_session *s, const struct kvmm_hello *h,
		   struct kvmm_ring_offsets *off, int fds[4]);
void kd_ring_destroy(struct kd_session *s);
/* Consume submissions; true if any were handled. */
bool kd_ring_poll(struct kd_session *s);
void kd_ring_need_wakeup(struct kd_session *s, bool on);
/* Bump the ring's notify word and wake the client's threads waiting on it
 * (a PREFIX_COLLECT or SEQ_COLLECT reply is ready, an early open's block
 * settled). */
void kd_ring_notify(struct kd_session *s);
bool kd_ring_pending(struct kd_session *s);
/* Free revocation entries (and the ring's size); -ECONNRESET when the
 * client corrupted the ring's head (the session is doomed). */
int kd_ring_rq_room(struct kd_session *s, uint32_t *room, uint32_t *entries);
/* Post n revocation entries; -EBUSY when they do not fit. */
int kd_ring_post_revokes(struct kd_session *s, const struct kvmm_rqe *e,
			 uint32_t n);
/* The furthest length the ring SEQ_EXTENDs of (region_id, seq) the
 * client submitted and kvmmd has not read yet ask for (0: none): a hint
 * read from client memory, never trusted beyond that (cache_lend.c). */
uint32_t kd_ring_extend_unread(struct kd_session *s, uint32_t region_id,
			       uint32_t seq);

/* ---- fd_closer.c ---- */

/* Close fds a client sent, on a thread of their own: the last close of a
 * socket with SO_LINGER set blocks for as long as its sender chose. */
void kd_close_client_fds(const int *fds, unsigned int n);

/* ---- proto.c ---- */

/* Handle one socket message; fds that came with it (nfds: none is used,
 * they make it -EINVAL) are the caller's to close. */
void kd_proto_socket(struct kd_session *s, void *buf, size_t len, int *fds,
		     unsigned int nfds);
/* Handle one submission; fills the completion's res and value. */
void kd_proto_ring(struct kd_session *s, const struct kvmm_sqe *sqe,
		   struct kvmm_cqe *cqe);
/* proto_admin.c: ADMIN_STATUS's reply (also the metrics' snapshot) */
int kd_status(struct kd_daemon *d, struct kvmm_status_reply *st);

/* ---- pin.c ---- */

struct kd_pin;
struct kd_pins;
/* BLOCK_PIN / BLOCK_UNPIN (socket); 1 when replied, else the status. */
int kd_pin_cmd(struct kd_session *s, const struct kvmm_msg_hdr *h,
	       const void *p, size_t len);
/* BLOCK_PIN_MANY (ABI 1.19): a pin per hash, one reply (pin.c) */
int kd_pin_many_cmd(struct kd_session *s, const struct kvmm_msg_hdr *h,
		    const void *buf, size_t len);
int kd_unpin_cmd(struct kd_session *s, const void *p, size_t len);
/* Session end: release every pin record of the session. */
void kd_pin_release_all(struct kd_session *s);
/* The cache entry (hash, gen) left the policy (dropped, failed copy): its
 * pin records go with it (cache.c, cache_demote.c). */
void kd_pin_block_gone(struct kd_daemon *d, uint64_t hash, uint64_t gen);
/* Whether a record keeps the entry (hash, gen) cached: a plain pin or a
 * live TTL one (DEMOTE too), not a priority-only one (cache_demote.c: a
 * failed copy down of such a block is tried again). */
bool kd_pin_block_kept(struct kd_daemon *d, uint64_t hash, uint64_t gen);
/* ADMIN_SESSIONS, ADMIN_STATUS: the pin fields. */
void kd_pin_session_info(struct kd_session *s, struct kvmm_session_info *i);
void kd_pin_status(struct kd_daemon *d, struct kvmm_status_reply *st);

/* ---- revoke.c ---- */

/*
 * Take back blocks [first, end) of a sequence: post the pages, keep the
 * holds until the client acknowledges or the timeout cuts it off.  When
 * the revocation ring has room for only the last blocks' pages, those are
 * taken back (from *from on) and -EAGAIN says to ask again for the rest;
 * on 0, *from is the first block taken.
 */
int kd_revoke_seq(struct kd_session *s, struct kd_region *r, uint32_t seq,
		  uint32_t first_block, uint32_t *from);
/*
 * The generic form: take back pages from one session's process.  The
 * caller has already detached them from their owners (blocks), so the pool
 * holds them REVOKING; hints[] are the RQ entries to post (page_id and the
 * region/seq/block where the client mapped it; cookie and flags are filled
 * in).  The session's holds drop on acknowledgement; done (may be NULL)
 * reports how it ended.  -EBUSY when the RQ has no room (nothing posted).
 */
int kd_revoke_pages(struct kd_session *s, const struct kvmm_rqe *hints,
		    uint32_t n, void (*done)(void *arg, int status), void *arg,
		    uint64_t *cookie);
int kd_revoke_ack(struct kd_session *s, uint64_t cookie);
/* The client closed (truncated from first_block, destroyed: seq
 * UINT32_MAX) places that pending revocations name; their holds drop
 * now (revoke.c). */
void kd_revoke_unmapped(struct kd_session *s, uint32_t region_id, uint32_t seq,
			uint32_t gen, uint32_t first_block);
/* A deferred reply was sent: the revocations' deadlines move by the time
 * the client waited for it since since_ns (it could not acknowledge). */
void kd_revoke_resume(struct kd_session *s, uint64_t since_ns);
/* Session end: drop pending revocations, calling done(status); each
 * counts as cancelled but the one whose timeout ended the session. */
void kd_revoke_free_all(struct kd_session *s, bool release_holds, int status);

#endif
