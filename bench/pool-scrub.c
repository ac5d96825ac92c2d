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
 * A third run alternates two trust domains (each page's fd given to its
 * owner's domain, vmm_pool_page_fd()), so every allocation swaps the page
 * for a new one instead (vmm_ops.page_create and page_release: a new
 * memfd).  Rounds alternate the order; the figures are the medians of the
 * per-round ratios (alternating / one owner), with the scrub call and the
 * swap alone in µs.
 *
 *   build/bench/pool-scrub [--page-size BYTES] [--pages N] [--rounds R]
 *                          [--backend host|cuda]
 *
 * --backend cuda (bench/gpu-check.sh runs it; exits 77 without a GPU)
 * times the same on the GPU: the scrub is a cuMemsetD8Async, waited for,
 * the renewal a cuMemCreate, an export and a cuMemRelease, and the
 * client's write a host-to-device copy of the page (device memory is not
 * writable from the CPU), so the cycles compare the two per page as
 * kvmmd's loop pays them.  KVMM_LIBCUDA overrides the libcuda path.
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
	void *src; /* cuda: what the client writes, copied to the device */
};

enum mode { ONE_OWNER, TWO_OWNERS, TWO_DOMAINS };

/* n cycles; owners alternate between 1 and 2 unless ONE_OWNER, in one
 * domain (0) unless TWO_DOMAINS, where each is its own.  Returns seconds. */
static double trial(struct setup *s, enum mode mode)
{
	struct vmm_backend *b = s->b;
	size_t ps = b->page_size;
	double t0 = now_s();
	uint32_t id;
	int err;

	for (size_t i = 0; i < s->n; i++) {
		uint32_t owner = mode != ONE_OWNER ? 1 + (uint32_t)(i & 1) : 1;
		uint64_t domain = mode == TWO_DOMAINS ? owner : 0;

		err = vmm_pool_alloc_for(s->pool, owner, domain, &id);
		if (err)
			die("alloc", err);
		/* what kvmmd does as it sends the fd */
		err = vmm_pool_page_fd(s->pool, id, domain);
		if (err < 0)
			die("page fd", err);
		err = vmm_map_page(b, s->va, vmm_pool_page_handle(s->pool, id),
				   VMM_PROT_RW);
		if (err)
			die("map", err);
		if (s->src)
			err = b->ops->copy_from_host(
				b, vmm_pool_page_handle(s->pool, id), 0, s->src,
				ps);
		else
			memset((void *)(uintptr_t)s->va, (int)(i & 0xff) | 1,
			       ps);
		if (err)
			die("write", err);
		err = b->ops->unmap(b, s->va);
		if (err)
			die("unmap", err);
		err = vmm_pool_free(s->pool, id);
		if (err)
			die("free", err);
	}
	return now_s() - t0;
}

/* One allocation alone, in µs: a page owner 1 of domain 0 freed, taken by
 * owner 2 (a scrub), or one whose fd domain 1 got, taken in domain 2 (a
 * renewal), which must then count once more. */
static double probe(struct setup *s, int renewal)
{
	struct vmm_pool_stats st;
	uint64_t before;
	uint32_t id;
	double t0, us;
	int err;

	err = vmm_pool_alloc_for(s->pool, 1, renewal ? 1 : 0, &id);
	if (!err && vmm_pool_page_fd(s->pool, id, renewal ? 1 : 0) < 0)
		err = -EBADF;
	if (!err)
		err = vmm_pool_free(s->pool, id);
	vmm_pool_get_stats(s->pool, &st);
	before = renewal ? st.renewed : st.scrubbed;
	t0 = now_s();
	if (!err)
		err = vmm_pool_alloc_for(s->pool, 2, renewal ? 2 : 0, &id);
	us = (now_s() - t0) * 1e6;
	if (!err)
		err = vmm_pool_free(s->pool, id);
	if (err)
		die("probe", err);
	vmm_pool_get_stats(s->pool, &st);
	if ((renewal ? st.renewed : st.scrubbed) != before + 1)
		die("probe did not scrub or renew", -EPROTO);
	return us;
}

int main(int argc, char **argv)
{
	struct vmm_config cfg = { .kind = VMM_BACKEND_HOST,
				  .page_size = 2u << 20 };
	double ratio[MAX_ROUNDS], dom_ratio[MAX_ROUNDS], zero_us[MAX_ROUNDS];
	double renew_us[MAX_ROUNDS], one_s = 0, two_s = 0, dom_s = 0;
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
		else if (!strcmp(argv[i], "--backend") && i + 1 < argc &&
			 (!strcmp(argv[i + 1], "host") ||
			  !strcmp(argv[i + 1], "cuda")))
			cfg.kind = !strcmp(argv[++i], "cuda") ?
					   VMM_BACKEND_CUDA :
					   VMM_BACKEND_HOST;
		else {
			fprintf(stderr,
				"usage: pool-scrub [--page-size BYTES] [--pages N] [--rounds R] [--backend host|cuda]\n");
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
	if (cfg.kind == VMM_BACKEND_CUDA) {
		cfg.libcuda_path = getenv("KVMM_LIBCUDA");
		cfg.page_size = 0; /* the device's granularity */
	}
	err = vmm_backend_open(&cfg, &s.b);
	if (err && cfg.kind == VMM_BACKEND_CUDA) {
		printf("skip: no GPU (the cuda backend did not open: %s)\n",
		       strerror(-err));
		return 77;
	}
	if (err)
		die("backend", err);
	if (cfg.kind == VMM_BACKEND_CUDA) {
		s.src = malloc(s.b->page_size);
		if (!s.src)
			die("buffer", -ENOMEM);
		memset(s.src, 0x5a, s.b->page_size);
	}
	err = vmm_pool_create(s.b, 4, &s.pool);
	if (err)
		die("pool", err);
	err = s.b->ops->reserve(s.b, s.b->page_size, &s.va);
	if (err)
		die("reserve", err);
	(void)trial(&s, ONE_OWNER); /* warm: the page exists, resident */
	for (unsigned int r = 0; r < rounds; r++) {
		double one, two, dom;

		/* the order rotates, so no run always follows the same one */
		switch (r % 3) {
		case 0:
			one = trial(&s, ONE_OWNER);
			two = trial(&s, TWO_OWNERS);
			dom = trial(&s, TWO_DOMAINS);
			break;
		case 1:
			two = trial(&s, TWO_OWNERS);
			dom = trial(&s, TWO_DOMAINS);
			one = trial(&s, ONE_OWNER);
			break;
		default:
			dom = trial(&s, TWO_DOMAINS);
			one = trial(&s, ONE_OWNER);
			two = trial(&s, TWO_OWNERS);
			break;
		}
		one_s += one;
		two_s += two;
		dom_s += dom;
		ratio[r] = two / one;
		dom_ratio[r] = dom / one;
		/* the scrub alone: a page of owner 1 taken for owner 2; the
		 * swap alone: one whose fd domain 1 got, taken in domain 2 */
		zero_us[r] = probe(&s, 0);
		renew_us[r] = probe(&s, 1);
	}
	vmm_pool_get_stats(s.pool, &st);
	{
		double per_one = one_s / (rounds * s.n) * 1e6;
		double per_two = two_s / (rounds * s.n) * 1e6;
		double per_dom = dom_s / (rounds * s.n) * 1e6;
		double lo = ratio[0], hi = ratio[0], med, zmed, rmed;
		double dlo = dom_ratio[0], dhi = dom_ratio[0], dmed;

		for (unsigned int r = 1; r < rounds; r++) {
			lo = ratio[r] < lo ? ratio[r] : lo;
			hi = ratio[r] > hi ? ratio[r] : hi;
			dlo = dom_ratio[r] < dlo ? dom_ratio[r] : dlo;
			dhi = dom_ratio[r] > dhi ? dom_ratio[r] : dhi;
		}
		med = median(ratio, rounds);
		dmed = median(dom_ratio, rounds);
		zmed = median(zero_us, rounds);
		rmed = median(renew_us, rounds);
		printf("%s backend, page %zu bytes, %zu cycles a trial, %u rounds\n",
		       vmm_backend_kind_string(s.b->kind), s.b->page_size, s.n,
		       rounds);
		printf("%-46s %10.1f us a cycle\n",
		       "one owner (baseline: never scrubbed)", per_one);
		printf("%-46s %10.1f us a cycle\n",
		       "two owners alternating (scrubbed each time)", per_two);
		printf("%-46s %10.1f us a cycle\n",
		       "two domains alternating (renewed each time)", per_dom);
		printf("%-46s %10.1f us\n", "the scrub alone (median)", zmed);
		printf("%-46s %10.1f us\n", "the renewal alone (median)", rmed);
		printf("ratio two owners / one owner: median %.2f (%.2f-%.2f)\n",
		       med, lo, hi);
		printf("ratio two domains / one owner: median %.2f (%.2f-%.2f)\n",
		       dmed, dlo, dhi);
		printf("{\"bench\":\"pool-scrub\",\"backend\":\"%s\","
		       "\"page_size\":%zu,\"cycles\":%zu,"
		       "\"rounds\":%u,\"one_owner_us\":%.1f,\"two_owners_us\":%.1f,"
		       "\"two_domains_us\":%.1f,"
		       "\"scrub_us\":%.1f,\"renew_us\":%.1f,\"ratio\":%.3f,"
		       "\"ratio_min\":%.3f,\"ratio_max\":%.3f,"
		       "\"renew_ratio\":%.3f,\"renew_ratio_min\":%.3f,"
		       "\"renew_ratio_max\":%.3f,\"scrubbed\":%llu,"
		       "\"renewed\":%llu}\n",
		       vmm_backend_kind_string(s.b->kind), s.b->page_size, s.n,
		       rounds, per_one, per_two, per_dom, zmed, rmed, med, lo,
		       hi, dmed, dlo, dhi, (unsigned long long)st.scrubbed,
		       (unsigned long long)st.renewed);
	}
	s.b->ops->free_range(s.b, s.va, s.b->page_size);
	vmm_pool_destroy(s.pool);
	vmm_backend_close(s.b);
	free(s.src);
	return 0;
}
