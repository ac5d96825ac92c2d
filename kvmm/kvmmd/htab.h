/* SPDX-License-Identifier: MIT */
/*
 * A chained hash table of intrusive nodes for kvmmd's indexes (the block
 * cache's entries, the pin records and pinned blocks).  The caller picks
 * each node's 64-bit key (well mixed: the low bits choose the bucket) and
 * compares whatever it stores beside it; equal keys may coexist, the one
 * added last found first along its chain (also after a doubling).  The
 * table doubles once it holds more nodes than buckets, so chains stay
 * about one node long however much it holds; a failed doubling only makes
 * them longer.
 */
#ifndef KVMM_KVMMD_HTAB_H
#define KVMM_KVMMD_HTAB_H

#include <stdint.h>

struct kd_hnode {
	struct kd_hnode *next;
	uint64_t key;
};

struct kd_htab {
	struct kd_hnode **b;
	uint64_t mask; /* buckets - 1 */
	uint64_t n;
};

/* min_buckets: a power of two.  0 or -ENOMEM. */
int kd_htab_init(struct kd_htab *t, uint64_t min_buckets);
void kd_htab_fini(struct kd_htab *t);
void kd_htab_add(struct kd_htab *t, struct kd_hnode *n);
/* n must be in t. */
void kd_htab_del(struct kd_htab *t, struct kd_hnode *n);

/* The chain that holds the nodes with this key (and others). */
static inline struct kd_hnode *kd_htab_first(const struct kd_htab *t,
					     uint64_t key)
{
	return t->b[key & t->mask];
}

#endif
