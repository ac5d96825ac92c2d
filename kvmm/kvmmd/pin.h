/* SPDX-License-Identifier: MIT */
/*
 * Pins (pin.c): BLOCK_PIN, BLOCK_UNPIN and BLOCK_PIN_MANY, each session's
 * pin records, TTLs and priorities, and what the cache asks of them.
 * kvmmd.h includes it.
 */
#ifndef KVMM_KVMMD_PIN_H
#define KVMM_KVMMD_PIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvmm/uapi.h"

struct kd_daemon;
struct kd_session;

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

#endif
