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
 * Then imported against created pages: the same pages, exported and
 * imported into a second host backend in this process (a client's side),
 * so map is mremap of the page's PROT_NONE anchor instead of mmap of its
 * memfd.  Both run the full map + set_access + unmap cycle in --rounds
 * rounds, one trial each per round, the order alternating; the figure is
 * the median of the per-round ratios imported/created, with its range.
 *
 *   build/bench/vmm-map [--pages N] [--page-size BYTES] [--seconds S]
 *                       [--rounds R]
 *
 * Prints a table, the ratios, and one JSON line last.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

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

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The median of v[0..n) (sorts v). */
static double median(double *v, int n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Trials of the three paths are interleaved and the best of each kept, so
 * a burst of load from elsewhere on the machine hits all three alike. */
#define TRIALS 5
#define MAX_ROUNDS 99

int main(int argc, char **argv)
{
	struct vmm_config cfg = { .kind = VMM_BACKEND_HOST };
	double seconds = 3, vmm_rate, vmm_acc_rate, base_rate;
	double created[MAX_ROUNDS], imported[MAX_ROUNDS], ratio[MAX_ROUNDS];
	double created_med, imported_med, ratio_med, ratio_min, ratio_max;
	struct setup s = { .n = 256 }, imp = { 0 };
	int rounds = 7;
	void **ptrs;
	int err, fd;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--pages") && i + 1 < argc)
			s.n = strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--page-size") && i + 1 < argc)
			cfg.page_size = strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = strtod(argv[++i], NULL);
		else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else {
			fprintf(stderr,
				"usage: %s [--pages N] [--page-size BYTES] [--seconds S] [--rounds R (1..%d)]\n",
				argv[0], MAX_ROUNDS);
			return 2;
		}
	}
	if (!s.n || seconds <= 0 || rounds < 1 || rounds > MAX_ROUNDS)
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

	/* The importer: a second backend, as a client's libkvmm is to kvmmd;
	 * each page crosses as an fd that the import does not keep. */
	err = vmm_backend_open(&cfg, &imp.b);
	if (err)
		die("open importing host backend", err);
	imp.n = s.n;
	imp.pages = calloc(imp.n, sizeof(*imp.pages));
	if (!imp.pages)
		die("calloc", -ENOMEM);
	for (size_t i = 0; i < imp.n; i++) {
		err = s.b->ops->page_export(s.b, s.pages[i], &fd);
		if (err)
			die("page_export", err);
		err = imp.b->ops->page_import(imp.b, fd, &imp.pages[i]);
		if (err)
			die("page_import", err);
		close(fd);
	}
	err = imp.b->ops->reserve(imp.b, imp.n * imp.b->page_size, &imp.va);
	if (err)
		die("reserve (importer)", err);

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

	/* Imported vs created: one trial of each per round, of the same
	 * length as above, the order alternating so that neither always
	 * runs second (after the other warmed the caches, or in its load). */
	vmm_round(&imp, true);
	for (int r = 0; r < rounds; r++) {
		created[r] = imported[r] = 0;
		for (int k = 0; k < 2; k++) {
			if ((k == 0) == (r % 2 == 0))
				TRIAL(created[r], seconds / (3 * TRIALS), s.n,
				      vmm_round(&s, true));
			else
				TRIAL(imported[r], seconds / (3 * TRIALS),
				      imp.n, vmm_round(&imp, true));
		}
		ratio[r] = imported[r] / created[r];
	}
	ratio_min = ratio_max = ratio[0];
	for (int r = 1; r < rounds; r++) {
		if (ratio[r] < ratio_min)
			ratio_min = ratio[r];
		if (ratio[r] > ratio_max)
			ratio_max = ratio[r];
	}
	created_med = median(created, rounds);
	imported_med = median(imported, rounds);
	ratio_med = median(ratio, rounds);

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
	printf("imported vs created pages, map+set_access+unmap, median of %d rounds:\n",
	       rounds);
	printf("  %-36s %12.0f pages/s  %7.2f us/page\n",
	       "created (mmap of the memfd)", created_med, 1e6 / created_med);
	printf("  %-36s %12.0f pages/s  %7.2f us/page\n",
	       "imported (mremap of the anchor)", imported_med,
	       1e6 / imported_med);
	printf("  ratio imported/created: %.2f (median of per-round ratios; range %.2f-%.2f)\n",
	       ratio_med, ratio_min, ratio_max);
	printf("{\"bench\":\"vmm-map\",\"backend\":\"host\",\"page_size\":%zu,"
	       "\"pages\":%zu,\"baseline\":\"anonymous mmap+munmap\","
	       "\"baseline_pages_per_s\":%.0f,\"vmm_map_unmap_pages_per_s\":%.0f,"
	       "\"vmm_map_access_unmap_pages_per_s\":%.0f,\"ratio\":%.3f,"
	       "\"ratio_with_access\":%.3f,\"import_rounds\":%d,"
	       "\"created_map_access_unmap_pages_per_s\":%.0f,"
	       "\"imported_map_access_unmap_pages_per_s\":%.0f,"
	       "\"ratio_imported_vs_created\":%.3f,"
	       "\"ratio_imported_vs_created_min\":%.3f,"
	       "\"ratio_imported_vs_created_max\":%.3f}\n",
	       s.b->page_size, s.n, base_rate, vmm_rate, vmm_acc_rate,
	       vmm_rate / base_rate, vmm_acc_rate / base_rate, rounds,
	       created_med, imported_med, ratio_med, ratio_min, ratio_max);

	imp.b->ops->free_range(imp.b, imp.va, imp.n * imp.b->page_size);
	for (size_t i = 0; i < imp.n; i++)
		imp.b->ops->page_release(imp.b, imp.pages[i]);
	vmm_backend_close(imp.b);
	free(imp.pages);
	s.b->ops->free_range(s.b, s.va, s.n * s.b->page_size);
	for (size_t i = 0; i < s.n; i++)
		s.b->ops->page_release(s.b, s.pages[i]);
	vmm_backend_close(s.b);
	free(s.pages);
	free(ptrs);
	return 0;
}
