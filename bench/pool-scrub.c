/* SPDX-License-Identifier: MIT */
/*
 * pool-scrub: what zeroing a page before it changes owner costs
 * (vmm_pool_alloc_for(), vmm_ops.page_zero) on the host backend.
 *
 * One cycle is what a client's block costs the pool and the client: a
 * page allocated for an owner, mapped and opened (map + set_access), every
 * byte written (the client fills its KV), unmapped and freed.  The
 * baseline runs the cycles for one owner (never a scrub: the page comes
 * back as it was left); the measured run alternates two owners, so every
 * allocation zeroes the page first (the host backend punches a hole over
 * the memfd, and the client's write then faults fresh zeroed memory in).
 * Rounds alternate the order; the figure is the median of the per-round
 * ratios (alternating / one owner), with the scrub call alone in µs.
 *
 *   build/bench/pool-scrub [--page-size BYTES] [--pages N] [--rounds R]
 *
 * Prints a table and one JSON line last.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "vmm/vmm.h"

#define MAX_ROUNDS 64

static void die(const char *what, int err)
{
	fprintf(stderr, "pool-scrub: %s: %s\n", what, strerror(-err));
	exit(1);
}

struct setup {
	struct vmm_backend *b;
	struct vmm_pool *pool;
	uint64_t va;
	size_t n; /* pages per trial */
};

/* n cycles; owners alternate between 1 and 2 when two, else all 1.
 * Returns seconds. */
static double trial(struct setup *s, bool two)
{
	struct vmm_backend *b = s->b;
	size_t ps = b->page_size;
	double t0 = now_s();
	uint32_t id;
	int err;

	for (size_t i = 0; i < s->n; i++) {
		uint32_t owner = two ? 1 + (uint32_t)(i & 1) : 1;

		err = vmm_pool_alloc_for(s->pool, owner, 0, &id);
		if (err)
			die("alloc", err);
		err = vmm_map_page(b, s->va, vmm_pool_page_handle(s->pool, id),
				   VMM_PROT_RW);
		if (err)
			die("map", err);
		memset((void *)(uintptr_t)s->va, (int)(i & 0xff) | 1, ps);
		err = b->ops->unmap(b, s->va);
		if (err)
			die("unmap", err);
		err = vmm_pool_free(s->pool, id);
		if (err)
			die("free", err);
	}
	return now_s() - t0;
}

int main(int argc, char **argv)
{
	struct vmm_config cfg = { .kind = VMM_BACKEND_HOST,
				  .page_size = 2u << 20 };
	double ratio[MAX_ROUNDS], one_s = 0, two_s = 0, zero_us[MAX_ROUNDS];
	struct vmm_pool_stats st;
	unsigned int rounds = 9;
	struct setup s = { .n = 256 };
	int err;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--page-size") && i + 1 < argc)
			cfg.page_size = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--pages") && i + 1 < argc)
			s.n = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
			rounds = (unsigned int)strtoul(argv[++i], NULL, 0);
		else {
			fprintf(stderr,
				"usage: pool-scrub [--page-size BYTES] [--pages N] [--rounds R]\n");
			return 2;
		}
	}
	if (!rounds || rounds > MAX_ROUNDS || !s.n || !cfg.page_size ||
	    cfg.page_size % 4096) {
		fprintf(stderr,
			"pool-scrub: --rounds 1..%d, --pages > 0, --page-size a multiple of 4096\n",
			MAX_ROUNDS);
		return 2;
	}
	err = vmm_backend_open(&cfg, &s.b);
	if (err)
		die("backend", err);
	err = vmm_pool_create(s.b, 4, &s.pool);
	if (err)
		die("pool", err);
	err = s.b->ops->reserve(s.b, s.b->page_size, &s.va);
	if (err)
		die("reserve", err);
	(void)trial(&s, false); /* warm: the page exists and is resident */
	for (unsigned int r = 0; r < rounds; r++) {
		double one, two;
		uint64_t before;

		if (r & 1) {
			two = trial(&s, true);
			one = trial(&s, false);
		} else {
			one = trial(&s, false);
			two = trial(&s, true);
		}
		one_s += one;
		two_s += two;
		ratio[r] = two / one;
		/* the scrub alone: a page of owner 1 taken for owner 2 */
		{
			uint32_t id;
			double t0;

			err = vmm_pool_alloc_for(s.pool, 1, 0, &id);
			if (!err)
				err = vmm_pool_free(s.pool, id);
			vmm_pool_get_stats(s.pool, &st);
			before = st.scrubbed;
			t0 = now_s();
			if (!err)
				err = vmm_pool_alloc_for(s.pool, 2, 0, &id);
			zero_us[r] = (now_s() - t0) * 1e6;
			if (!err)
				err = vmm_pool_free(s.pool, id);
			if (err)
				die("scrub probe", err);
			vmm_pool_get_stats(s.pool, &st);
			if (st.scrubbed != before + 1)
				die("scrub probe did not scrub", -EPROTO);
		}
	}
	vmm_pool_get_stats(s.pool, &st);
	{
		double per_one = one_s / (rounds * s.n) * 1e6;
		double per_two = two_s / (rounds * s.n) * 1e6;
		double lo = ratio[0], hi = ratio[0], med, zmed;

		for (unsigned int r = 1; r < rounds; r++) {
			lo = ratio[r] < lo ? ratio[r] : lo;
			hi = ratio[r] > hi ? ratio[r] : hi;
		}
		med = median(ratio, rounds);
		zmed = median(zero_us, rounds);
		printf("page %zu bytes, %zu cycles a trial, %u rounds\n",
		       s.b->page_size, s.n, rounds);
		printf("%-44s %10.1f us a cycle\n",
		       "one owner (baseline: never scrubbed)", per_one);
		printf("%-44s %10.1f us a cycle\n",
		       "two owners alternating (scrubbed each time)", per_two);
		printf("%-44s %10.1f us\n", "the scrub alone (median)", zmed);
		printf("ratio two owners / one owner: median %.2f (%.2f-%.2f)\n",
		       med, lo, hi);
		printf("{\"bench\":\"pool-scrub\",\"page_size\":%zu,\"cycles\":%zu,"
		       "\"rounds\":%u,\"one_owner_us\":%.1f,\"two_owners_us\":%.1f,"
		       "\"scrub_us\":%.1f,\"ratio\":%.3f,\"ratio_min\":%.3f,"
		       "\"ratio_max\":%.3f,\"scrubbed\":%llu}\n",
		       s.b->page_size, s.n, rounds, per_one, per_two, zmed, med,
		       lo, hi, (unsigned long long)st.scrubbed);
	}
	s.b->ops->free_range(s.b, s.va, s.b->page_size);
	vmm_pool_destroy(s.pool);
	vmm_backend_close(s.b);
	return 0;
}
