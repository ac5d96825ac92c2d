/* SPDX-License-Identifier: MIT */
/*
 * A FIFO queue of intrusive nodes, for kvmmd's waiting lines (the block
 * cache's parked commands, demotions waiting for a host slot, NVMe
 * restores waiting for a staging slot).
 *
 * Intrusive (the node is a member of the queued object, the queue
 * allocates nothing) because every one of those objects exists before it
 * queues and is found by other means when it leaves early: queueing
 * cannot fail (no -ENOMEM path on the event loop where a command, a
 * demotion or a restore would then have to be undone), a node is
 * unlinked in O(1) given the object (a demotion called off, a restore
 * cancelled, a session that ends), and kd_fifo_linked() tells whether an
 * object waits without a flag beside it.  Doubly linked for that O(1)
 * unlink; NULL-terminated rather than circular, so an all-zero queue (a
 * calloc'ed owner) is a valid empty one.  Not thread-safe: the owner
 * locks, or (kvmmd) only the loop thread touches it.
 */
#ifndef KVMM_KVMMD_FIFO_H
#define KVMM_KVMMD_FIFO_H

#include <stdbool.h>
#include <stddef.h>

struct kd_fifo_node {
	struct kd_fifo_node *next, *prev;
};

struct kd_fifo {
	struct kd_fifo_node *head, *tail;
};

/* The object of type `type` whose member `member` is node n (NULL when n
 * is NULL, so it composes with kd_fifo_first() / kd_fifo_next()). */
#define kd_fifo_entry(n, type, member) \
	((n) ? (type *)(void *)((char *)(n)-offsetof(type, member)) : NULL)

static inline void kd_fifo_init(struct kd_fifo *q)
{
	q->head = q->tail = NULL;
}

static inline bool kd_fifo_empty(const struct kd_fifo *q)
{
	return !q->head;
}

/* Whether n is in q (n is in q or in no queue). */
static inline bool kd_fifo_linked(const struct kd_fifo *q,
				  const struct kd_fifo_node *n)
{
	return n->prev || q->head == n;
}

static inline void kd_fifo_push_tail(struct kd_fifo *q, struct kd_fifo_node *n)
{
	n->next = NULL;
	n->prev = q->tail;
	if (q->tail)
		q->tail->next = n;
	else
		q->head = n;
	q->tail = n;
}

/* n must be in q; it is in no queue afterwards. */
static inline void kd_fifo_unlink(struct kd_fifo *q, struct kd_fifo_node *n)
{
	if (n->prev)
		n->prev->next = n->next;
	else
		q->head = n->next;
	if (n->next)
		n->next->prev = n->prev;
	else
		q->tail = n->prev;
	n->next = n->prev = NULL;
}

/* The oldest node, unlinked; NULL when q is empty. */
static inline struct kd_fifo_node *kd_fifo_pop_head(struct kd_fifo *q)
{
	struct kd_fifo_node *n = q->head;

	if (n)
		kd_fifo_unlink(q, n);
	return n;
}

/* Iteration, oldest first: for (n = kd_fifo_first(q); n; n =
 * kd_fifo_next(n)).  Take the next node before unlinking the current. */
static inline struct kd_fifo_node *kd_fifo_first(const struct kd_fifo *q)
{
	return q->head;
}

static inline struct kd_fifo_node *kd_fifo_next(const struct kd_fifo_node *n)
{
	return n->next;
}

#endif
