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
 *              publish, counters, set-up, stop, demotion, restores, prefix
 *              open and the rest in cache_*.c: cache_priv.h lists them;
 *              the restore plans in cache_plan.c, cache_plan.h)
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
 * Each file's declarations are in a header named after it, which this one
 * includes, so a .c file includes kvmmd.h for all of them: loop.h,
 * daemon.h (with daemon_config.h, struct kd_config, and refuse.h),
 * telemetry.h, region.h, session.h (session.c, session_reply.c,
 * fd_closer.c), zombie.h, ring.h, proto.h (proto.c, proto_admin.c),
 * pin.h and revoke.h; the cache's are cache.h.
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
#include "kvmm/kvmmd/daemon.h"
#include "kvmm/kvmmd/daemon_config.h"
#include "kvmm/kvmmd/htab.h"
#include "kvmm/kvmmd/loop.h"
#include "kvmm/kvmmd/pin.h"
#include "kvmm/kvmmd/proto.h"
#include "kvmm/kvmmd/refuse.h"
#include "kvmm/kvmmd/region.h"
#include "kvmm/kvmmd/revoke.h"
#include "kvmm/kvmmd/ring.h"
#include "kvmm/kvmmd/scope.h"
#include "kvmm/kvmmd/session.h"
#include "kvmm/kvmmd/telemetry.h"
#include "kvmm/kvmmd/tenant.h"
#include "kvmm/kvmmd/zombie.h"
#include "kvmm/lib/wire.h"
#include "kvmm/uapi.h"
#include "vmm/vmm.h"

struct kd_loop;
struct kd_daemon;
struct kd_cache;

#endif
