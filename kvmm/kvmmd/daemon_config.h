/* SPDX-License-Identifier: MIT */
/*
 * kvmmd's configuration (struct kd_config): what the command line and the
 * config file set (options.c applies them, options_check.c checks them
 * together), with the limits of its tables and where each checked option
 * was last set; kd_config_defaults() is daemon.c's.  kvmmd.h includes it.
 */
#ifndef KVMM_KVMMD_DAEMON_CONFIG_H
#define KVMM_KVMMD_DAEMON_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "vmm/vmm.h"

#define KD_DEFAULT_PROFILE "h200-llama3-8b"

/* block sizes kvmmd caches at once (a model and its draft, two models
 * on one GPU): each has its own cache (cache_start.c, kc_new()) */
#define KD_CACHE_SIZES 4
#define KD_CACHE_SIZES_STR "4"

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
	/* --cache-block-pages A[:W][,B[:W]...]: the block sizes (pages) the
	 * cache serves, each with its share of --host-mem (cache_block_sizes[],
	 * nr_cache_block_sizes of them; cache_block_pages is the first, the
	 * NVMe tier's); 0 = those of the first regions to publish or look up
	 * a prefix, KD_CACHE_SIZES at most, the first with the host and NVMe
	 * tiers */
	uint32_t cache_block_pages;
	uint32_t cache_block_sizes[KD_CACHE_SIZES];
	/* each size's weight (--cache-block-pages N:W, 1 without :W): its
	 * share of --host-mem and of the NVMe file is its weight over
	 * their sum (kd_cache_host_share(), tier_nvme_part.c); kept
	 * beside its size when the list is put in the file's order
	 * (cache_nvme_order.c) */
	uint32_t cache_block_weights[KD_CACHE_SIZES];
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

#endif
