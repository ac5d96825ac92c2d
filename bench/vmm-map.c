/* SPDX-License-Identifier: MIT */
/*
 * vmm-map: pages mapped + unmapped per second on the host backend, against
 * the same number of plain anonymous mmap/munmap pairs of the same size
 * (the baseline: the cheapest way to get and drop a page-sized mapping).
 *
 * The host backend's map is mmap(MAP_FIXED|MAP_SHARED) of a memfd over a
 * PROT_NONE reservation and its unmap an anonymous PROT_NONE mmap over the
 * slot, plus range/handle validation; "with access" adds the mprotect that
 * makes the page usable (cuMemSetAccess's counterpart).  Nothing is
 * touched, so neither side pays for page faults.
 *
 *   build/bench/vmm-map [--pages N] [--page-size BYTES] [--seconds S]
 *
 * Prints a table, the ratios, and one JSON line last.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "vmm/vmm.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what, int err)
{
	fprintf(stderr, "vmm-map: %s: %s\n", what, strerror(-err));
	exit(1);
}

struct setup {
	struct vmm_backend *b;
	vmm_handle_t *pages;
	size_t n;
	uint64_t va;
};

/* One round: map every page into its slot (and open it), unmap them all. */
static void vmm_round(struct setup *s, bool access)
{
	struct vmm_backend *b = s->b;
	size_t ps = b->page_size;
	int err;

	for (size_t i = 0; i < s->n; i++) {
		err = b->ops->map(b, s->va + i * ps, s->pages[i]);
		if (err)
			die("map", err);
		if (access) {
			err = b->ops->set_access(b, s->va + i * ps, ps,
						 VMM_PROT_RW);
			if (err)
				die("set_access", err);
		}
	}
	for (size_t i = 0; i < s->n; i++) {
		err = b->ops->unmap(b, s->va + i * ps);
		if (err)
			die("unmap", err);
	}
}

static void baseline_round(void **ptrs, size_t n, size_t ps)
{
	for (size_t i = 0; i < n; i++) {
		ptrs[i] = mmap(NULL, ps, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (ptrs[i] == MAP_FAILED)
			die("mmap", -errno);
	}
	for (size_t i = 0; i < n; i++)
		munmap(ptrs[i], ps);
}

/* Pages per second of one trial: rounds for about `seconds`. */
#define TRIAL(rate, seconds, n, round_expr)       \
	do {                                      \
		double _t0 = now(), _t1, _r;      \
		unsigned long _rounds = 0;        \
		do {                              \
			round_expr;               \
			_rounds++;                \
			_t1 = now();              \
		} while (_t1 - _t0 < (seconds));  \
		_r = _rounds * (n) / (_t1 - _t0); \
		if (_r > (rate))                  \
			(rate) = _r;              \
	} while (0)

/* Trials of the three paths are interleaved and the best of each kept, so
 * a burst of load from elsewhere on the machine hits all three alike. */
#define TRIALS 5

int main(int argc, char **argv)
{
	struct vmm_config cfg = { .kind = VMM_BACKEND_HOST };
	double seconds = 3, vmm_rate, vmm_acc_rate, base_rate;
	struct setup s = { .n = 256 };
	void **ptrs;
	int err;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--pages") && i + 1 < argc)
			s.n = strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--page-size") && i + 1 < argc)
			cfg.page_size = strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = strtod(argv[++i], NULL);
		else {
			fprintf(stderr,
				"usage: %s [--pages N] [--page-size BYTES] [--seconds S]\n",
				argv[0]);
			return 2;
		}
	}
	if (!s.n || seconds <= 0)
		die("arguments", -EINVAL);
	err = vmm_backend_open(&cfg, &s.b);
	if (err)
		die("open host backend", err);
	s.pages = calloc(s.n, sizeof(*s.pages));
	ptrs = calloc(s.n, sizeof(*ptrs));
	if (!s.pages || !ptrs)
		die("calloc", -ENOMEM);
	for (size_t i = 0; i < s.n; i++) {
		err = s.b->ops->page_create(s.b, &s.pages[i]);
		if (err)
			die("page_create", err);
	}
	err = s.b->ops->reserve(s.b, s.n * s.b->page_size, &s.va);
	if (err)
		die("reserve", err);

	/* Warm up both paths once (page tables, VMA slab caches). */
	vmm_round(&s, true);
	baseline_round(ptrs, s.n, s.b->page_size);

	base_rate = vmm_rate = vmm_acc_rate = 0;
	for (int t = 0; t < TRIALS; t++) {
		TRIAL(base_rate, seconds / (3 * TRIALS), s.n,
		      baseline_round(ptrs, s.n, s.b->page_size));
		TRIAL(vmm_rate, seconds / (3 * TRIALS), s.n,
		      vmm_round(&s, false));
		TRIAL(vmm_acc_rate, seconds / (3 * TRIALS), s.n,
		      vmm_round(&s, true));
	}

	printf("vmm-map: host backend, %zu pages of %zu bytes\n", s.n,
	       s.b->page_size);
	printf("  %-36s %12.0f pages/s  %7.2f us/page\n",
	       "baseline mmap+munmap (anonymous)", base_rate, 1e6 / base_rate);
	printf("  %-36s %12.0f pages/s  %7.2f us/page\n", "vmm map+unmap",
	       vmm_rate, 1e6 / vmm_rate);
	printf("  %-36s %12.0f pages/s  %7.2f us/page\n",
	       "vmm map+set_access+unmap", vmm_acc_rate, 1e6 / vmm_acc_rate);
	printf("  ratio vmm/baseline: %.2f (map+unmap), %.2f (with access)\n",
	       vmm_rate / base_rate, vmm_acc_rate / base_rate);
	printf("{\"bench\":\"vmm-map\",\"backend\":\"host\",\"page_size\":%zu,"
	       "\"pages\":%zu,\"baseline\":\"anonymous mmap+munmap\","
	       "\"baseline_pages_per_s\":%.0f,\"vmm_map_unmap_pages_per_s\":%.0f,"
	       "\"vmm_map_access_unmap_pages_per_s\":%.0f,\"ratio\":%.3f,"
	       "\"ratio_with_access\":%.3f}\n",
	       s.b->page_size, s.n, base_rate, vmm_rate, vmm_acc_rate,
	       vmm_rate / base_rate, vmm_acc_rate / base_rate);

	s.b->ops->free_range(s.b, s.va, s.n * s.b->page_size);
	for (size_t i = 0; i < s.n; i++)
		s.b->ops->page_release(s.b, s.pages[i]);
	vmm_backend_close(s.b);
	free(s.pages);
	free(ptrs);
	return 0;
}
