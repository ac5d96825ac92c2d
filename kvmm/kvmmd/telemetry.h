/* SPDX-License-Identifier: MIT */
/*
 * kvmmd's telemetry (telemetry.c): the source the --telemetry options
 * choose, the sessions' shared-memory fallback, what ADMIN_STATUS says of
 * it.  kvmmd.h includes it.
 */
#ifndef KVMM_KVMMD_TELEMETRY_H
#define KVMM_KVMMD_TELEMETRY_H

#include <stdint.h>
#include <sys/types.h>

#include "kvmm/uapi.h"

struct kd_daemon;

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
/* The scope's key is about to change (kd_scope_adopt(), on the loop):
 * wait for a poll running on telemetry's thread, which renames with the
 * key, and have the next poll read every entry again; none starts before
 * the loop's next telemetry timer. */
void kd_telemetry_rename_again(struct kd_daemon *d);
/* ADMIN_STATUS: the telemetry source and its drop counters. */
void kd_telemetry_status(struct kd_daemon *d, struct kvmm_status_reply *st);

#endif
