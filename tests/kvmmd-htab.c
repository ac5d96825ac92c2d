// SPDX-License-Identifier: MIT
/*
 * kvmmd's chained hash table (kvmm/kvmmd/htab.c): 100,000 nodes added
 * through 15 doublings are all found and deleted; and of nodes that share
 * a key, the one added last is found first along its chain before and
 * after every doubling.  The block cache relies on that: a hash
 * published again in the call that dropped it gets a new entry while the
 * dying one waits for the end of the call, and kc_find() must return the
 * new one (doublings used to reverse each chain, so after one the dying
 * entry was found and the policy's moves of the new one were lost).
 */
#include <stdio.h>
#include <stdlib.h>

#include "kvmm/kvmmd/htab.h"
#include "tests/lib/test.h"

#define N 100000
#define DUPS 3

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

/* The first node with key along its chain. */
static struct kd_hnode *find(const struct kd_htab *t, uint64_t key)
{
	for (struct kd_hnode *n = kd_htab_first(t, key); n; n = n->next)
		if (n->key == key)
			return n;
	return NULL;
}

int main(void)
{
	struct kd_hnode *nodes = calloc(N, sizeof(*nodes));
	struct kd_hnode dup[DUPS][16];
	struct kd_htab t;

	t_assert(nodes);
	t_ok(kd_htab_init(&t, 4));
	/* keys 1..16 three times each, spread among the others so that
	 * every doubling finds them; the last added must come first */
	for (uint64_t i = 0; i < N; i++) {
		nodes[i].key = mix(i + 1000);
		kd_htab_add(&t, &nodes[i]);
		if (i % 2000 == 0 && i / 2000 < DUPS * 16) {
			unsigned int d = (unsigned int)(i / 2000) / 16;
			unsigned int k = (unsigned int)(i / 2000) % 16;

			dup[d][k].key = mix(k);
			kd_htab_add(&t, &dup[d][k]);
		}
		if ((i & (i - 1)) == 0 || i == N - 1) /* around doublings */
			for (unsigned int k = 0; k < 16; k++) {
				int last = -1;

				for (int d = DUPS - 1; d >= 0 && last < 0; d--)
					if ((uint64_t)d * 16 + k <= i / 2000)
						last = d;
				if (last >= 0 &&
				    find(&t, mix(k)) != &dup[last][k])
					t_fail("after %llu adds: key %u finds an older node",
					       (unsigned long long)i + 1, k);
			}
	}
	t_assert_eq(t.n, N + DUPS * 16);
	t_assert_eq(t.mask + 1, 1u << 17);
	for (uint64_t i = 0; i < N; i++)
		if (find(&t, nodes[i].key) != &nodes[i])
			t_fail("node %llu not found", (unsigned long long)i);
	/* deleting the newest of a key uncovers the one before it */
	for (int d = DUPS - 1; d >= 0; d--)
		for (unsigned int k = 0; k < 16; k++) {
			t_assert(find(&t, mix(k)) == &dup[d][k]);
			kd_htab_del(&t, &dup[d][k]);
		}
	for (uint64_t i = 0; i < N; i++)
		kd_htab_del(&t, &nodes[i]);
	t_assert_eq(t.n, 0);
	for (uint64_t i = 0; i <= t.mask; i++)
		t_assert(!t.b[i]);
	kd_htab_fini(&t);
	free(nodes);
	printf("htab: %d nodes through 15 doublings, equal keys newest first\n",
	       N);
	return 0;
}
