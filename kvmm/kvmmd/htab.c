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

/* Double the buckets past one node per bucket; a failed grow only makes
 * the chains longer. */
static void kd_htab_grow(struct kd_htab *t)
{
	uint64_t nb = (t->mask + 1) * 2;
	struct kd_hnode **b = calloc(nb, sizeof(*b));

	if (!b)
		return;
	for (uint64_t i = 0; i <= t->mask; i++) {
		while (t->b[i]) {
			struct kd_hnode *n = t->b[i];

			t->b[i] = n->next;
			n->next = b[n->key & (nb - 1)];
			b[n->key & (nb - 1)] = n;
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
