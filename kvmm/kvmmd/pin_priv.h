/* SPDX-License-Identifier: MIT */
/*
 * What pin.c (the records and the commands) and pin_heap.c (the TTL
 * records' min-heap) share: the records, the blocks they are on, the
 * daemon's set of them.
 */
#ifndef KVMM_KVMMD_PIN_PRIV_H
#define KVMM_KVMMD_PIN_PRIV_H

#include <stdbool.h>
#include <stdint.h>

#include "kvmm/kvmmd/htab.h"
#include "kvmm/kvmmd/kvmmd.h"

struct pin_block;

struct kd_pin {
	struct kd_hnode node; /* kd_pins.recs: key (session, hash) */
	struct kd_session *s;
	struct kd_pin *s_prev, *s_next; /* the session's records */
	struct kd_pin *b_prev, *b_next; /* the block's records */
	struct pin_block *blk;
	uint64_t hash;
	uint64_t expires; /* TTL pins: kd_now_ns() deadline, else 0 */
	uint32_t flags; /* KVMM_PIN_F_* as asked */
	int32_t priority;
	uint32_t heap; /* index in kd_pins.heap, PIN_NO_HEAP if not TTL */
};

/* The records on one cache entry, and what they told the policy. */
struct pin_block {
	struct kd_hnode node; /* kd_pins.blocks: key (hash, gen) */
	uint64_t hash, gen;
	uint64_t bytes; /* the block's size: its cache's */
	struct kd_pin *recs;
	uint32_t nr_prio; /* records with KVMM_PIN_F_PRIORITY */
	uint32_t nr_hold; /* TTL records without KVMM_PIN_F_DEMOTE */
	uint64_t ttl; /* latest expiry of its TTL records, 0 none */
	int prio; /* highest priority of those with one, 0 none */
	bool demote; /* told the policy: its TTL may move it down a tier */
};

/* The daemon's pins (d->pins); freed when a session ends and none is
 * left. */
struct kd_pins {
	struct kd_daemon *d;
	struct kd_htab recs, blocks;
	struct kd_pin **heap; /* TTL records, earliest expiry at [0] */
	uint32_t heap_n, heap_cap;
	uint64_t nr_recs;
	uint64_t pinned_bytes; /* sum of blocks[].bytes */
	struct kd_timer timer; /* at heap[0]'s expiry */
};

#define PIN_NO_HEAP UINT32_MAX

/* pin_heap.c: the TTL records on their expiry, earliest at heap[0].
 * pin_heap_add() only after pin_heap_reserve() (it cannot fail then). */
int pin_heap_reserve(struct kd_pins *ps);
void pin_heap_add(struct kd_pins *ps, struct kd_pin *p);
void pin_heap_del(struct kd_pins *ps, struct kd_pin *p);

#endif
