/* SPDX-License-Identifier: MIT */
/*
 * The pages a session holds, as kvmmd counts them and as libkvmm does:
 * the revocation tests check that the two agree at every step (ordering
 * guarantee 3, Documentation/lifecycle.md).  The libkvmm side reads the
 * library's private state (kvmm/lib/client.h) under its lock.
 */
#ifndef KVMM_TESTS_PAGE_COUNTS_H
#define KVMM_TESTS_PAGE_COUNTS_H

#include <pthread.h>
#include <stdint.h>

#include "kvmm/kvmm.h"
#include "kvmm/lib/client.h"
#include "tests/lib/test.h"

/* The distinct pages kvmmd counts this session holding: mapped, or
 * revoked and not acknowledged yet. */
static inline uint64_t pc_held(struct kvmm_conn *c)
{
	struct kvmm_stats ks = { .size = sizeof(ks) };

	t_ok(kvmm_get_stats(c, &ks));
	return ks.pages_held;
}

/* The distinct pages libkvmm holds a ref of (mapped, or kept). */
static inline uint64_t pc_client_pages(struct kvmm_conn *c)
{
	uint64_t n = 0;

	pthread_mutex_lock(&c->lock);
	for (uint64_t i = 0; i < c->nr_pages; i++)
		n += c->pages[i].refs != 0;
	pthread_mutex_unlock(&c->lock);
	return n;
}

/* The blocks libkvmm has mapped from seq's start on (the map-ahead
 * thread's included). */
static inline uint32_t pc_backed(struct kvmm_region *r, uint32_t seq)
{
	uint32_t b;

	pthread_mutex_lock(&r->conn->lock);
	b = r->seqs[seq].backed;
	pthread_mutex_unlock(&r->conn->lock);
	return b;
}

/* libkvmm's refs of page id: one per mapping, and one while kept. */
static inline uint32_t pc_refs(struct kvmm_conn *c, uint32_t id)
{
	uint32_t n;

	pthread_mutex_lock(&c->lock);
	n = c->pages[id].refs;
	pthread_mutex_unlock(&c->lock);
	return n;
}

#endif
