// SPDX-License-Identifier: MIT
/* The chained hash table of kvmmd's indexes (htab.h). */
#include "kvmm/kvmmd/htab.h"

#include <errno.h>
#include <stdlib.h>

int kd_htab_init(struct kd_htab *t, uint64_t min_buckets)
{
	t->b = calloc(min_buckets, sizeof(*t->b));
	if (!t->b)
		return -ENOMEM;
	t->mask = min_buckets - 1;
	t->n = 0;
	return 0;
}

void kd_htab_fini(struct kd_htab *t)
{
	free(t->b);
	t->b = NULL;
}

/*
 * Double the buckets past one node per bucket; a failed grow only makes
 * the chains longer.  Bucket i splits into i and i + the old count, each
 * keeping its nodes in their order: a key may be in the table twice (the
 * cache adds a new entry for a hash whose dying one waits for the end of
 * the call, cache_publish.c), and a lookup must still find the newer,
 * which was added in front.
 */
static void kd_htab_grow(struct kd_htab *t)
{
	uint64_t old = t->mask + 1, nb = old * 2;
	struct kd_hnode **b = calloc(nb, sizeof(*b));

	if (!b)
		return;
	for (uint64_t i = 0; i < old; i++) {
		struct kd_hnode **tail[2] = { &b[i], &b[i + old] };

		while (t->b[i]) {
			struct kd_hnode *n = t->b[i];
			unsigned int hi = (n->key & old) != 0;

			t->b[i] = n->next;
			n->next = NULL;
			*tail[hi] = n;
			tail[hi] = &n->next;
		}
	}
	free(t->b);
	t->b = b;
	t->mask = nb - 1;
}

void kd_htab_add(struct kd_htab *t, struct kd_hnode *n)
{
	if (t->n > t->mask)
		kd_htab_grow(t);
	n->next = t->b[n->key & t->mask];
	t->b[n->key & t->mask] = n;
	t->n++;
}

void kd_htab_del(struct kd_htab *t, struct kd_hnode *n)
{
	struct kd_hnode **pp = &t->b[n->key & t->mask];

	while (*pp != n)
		pp = &(*pp)->next;
	*pp = n->next;
	t->n--;
}
