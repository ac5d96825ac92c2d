/* SPDX-License-Identifier: MIT */
/*
 * The host backend can be shared between threads: four threads create,
 * map, write, unmap and release pages in their own slots of one shared
 * reservation at the same time; every thread reads back its own bytes and
 * the backend ends with no page or mapping held.
 */
#include <pthread.h>

#include "tests/vmm-util.h"
#include "vmm/vmm.h"

#define THREADS 4
#define SLOTS 8 /* per thread */
#define ROUNDS 200
#define PAGE 4096

static struct vmm_backend *b;
static uint64_t base;

static void *worker(void *arg)
{
	long t = (long)arg;

	for (int r = 0; r < ROUNDS; r++) {
		vmm_handle_t pages[SLOTS];

		for (int s = 0; s < SLOTS; s++) {
			uint64_t va = base + (t * SLOTS + s) * PAGE;

			if (b->ops->page_create(b, &pages[s]) ||
			    vmm_map_page(b, va, pages[s], VMM_PROT_RW))
				return (void *)1;
			*(volatile long *)(uintptr_t)va = t * 1000000 + r;
		}
		for (int s = 0; s < SLOTS; s++) {
			uint64_t va = base + (t * SLOTS + s) * PAGE;
			long got = 0;

			if (*(volatile long *)(uintptr_t)va != t * 1000000 + r)
				return (void *)2;
			if (b->ops->unmap(b, va) ||
			    b->ops->copy_to_host(b, &got, pages[s], 0,
						 sizeof(got)) ||
			    got != t * 1000000 + r ||
			    b->ops->page_release(b, pages[s]))
				return (void *)3;
		}
	}
	return NULL;
}

int main(void)
{
	struct vmm_backend_usage u;
	pthread_t th[THREADS];

	b = vt_open_host(PAGE);
	t_ok(b->ops->reserve(b, THREADS * SLOTS * PAGE, &base));
	for (long t = 0; t < THREADS; t++)
		t_ok(pthread_create(&th[t], NULL, worker, (void *)t));
	for (int t = 0; t < THREADS; t++) {
		void *ret;

		t_ok(pthread_join(th[t], &ret));
		t_assert_eq((long)ret, 0);
	}
	vmm_backend_get_usage(b, &u);
	t_assert_eq(u.pages, 0);
	t_assert_eq(u.mappings, 0);
	t_ok(b->ops->free_range(b, base, THREADS * SLOTS * PAGE));
	vmm_backend_close(b);
	return 0;
}
