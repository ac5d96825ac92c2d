/* SPDX-License-Identifier: MIT */
/*
 * The pool keeps at most its cap of read-only page fds
 * (vmm_pool_set_ro_fd_cap(); host backend, fds counted in /proc/self/fd):
 *
 *   - by default the cap is the capacity; set above it, it is clamped
 *     there;
 *   - with a cap of 2 and 5 allocated pages handed out read-only in one
 *     batch: the first 2 pages' fds are kept (ro_fds 2, ro_fd_opens 2),
 *     the other 3 come opened for the batch alone (ro_fd_unkept_opens 3),
 *     O_RDONLY, each reading its own page's bytes; the process holds 5
 *     fds more until vmm_pool_readonly_sent(), 2 more after it;
 *   - the next batch gets the same kept fds again (no open) and 3 new
 *     unkept ones (ro_fd_unkept_opens 6);
 *   - a kept page freed makes room: the next other page's fd is kept
 *     (ro_fd_opens 3), nothing left open past its batch;
 *   - a cap of 0: every hand-out is unkept, none stays;
 *   - the pool destroyed in the middle of a batch closes its unkept fds.
 * With the cap at the capacity this is what vmm-pool-page-fd-readonly
 * checks: one fd kept per page, none per call.
 */
#include <fcntl.h>
#include <sys/mman.h>

#include "tests/vmm-util.h"
#include "vmm/vmm.h"

#define PAGES 8
#define N 5
#define PAGE (64 * 1024)

static struct vmm_pool_stats stats(struct vmm_pool *pool)
{
	struct vmm_pool_stats st;

	vmm_pool_get_stats(pool, &st);
	return st;
}

/* fd maps read-only and shows page byte tag */
static void check_fd(int fd, unsigned char tag)
{
	unsigned char *m;

	t_assert_eq(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDONLY);
	m = mmap(NULL, PAGE, PROT_READ, MAP_SHARED, fd, 0);
	t_assert(m != MAP_FAILED);
	t_assert_eq(m[7], tag);
	munmap(m, PAGE);
}

/* Hand out ids[0..N) read-only in one batch; fds gets them. */
static void hand_out(struct vmm_pool *pool, const uint32_t *ids, int *fds)
{
	for (int i = 0; i < N; i++) {
		t_ok(vmm_pool_page_fd_readonly(pool, ids[i], 1, &fds[i]));
		check_fd(fds[i], (unsigned char)(0x10 + i));
	}
}

int main(void)
{
	struct vmm_backend *b = vt_open_host(PAGE);
	struct vmm_pool *pool;
	uint32_t ids[N], extra;
	int fds[N], start = vt_count_fds(), base, kept0, kept1;

	t_ok(vmm_pool_create(b, PAGES, &pool));
	t_assert_eq(stats(pool).ro_fd_cap, PAGES);
	vmm_pool_set_ro_fd_cap(pool, PAGES * 10);
	t_assert_eq(stats(pool).ro_fd_cap, PAGES);
	for (int i = 0; i < N; i++) {
		unsigned char buf[8] = { 0 };

		t_ok(vmm_pool_alloc_for(pool, 1, 1, &ids[i]));
		buf[7] = (unsigned char)(0x10 + i);
		t_ok(b->ops->copy_from_host(b,
					    vmm_pool_page_handle(pool, ids[i]),
					    0, buf, sizeof(buf)));
	}
	t_ok(vmm_pool_alloc_for(pool, 1, 1, &extra));
	base = vt_count_fds();

	/* cap 2: two kept, three for the batch alone */
	vmm_pool_set_ro_fd_cap(pool, 2);
	t_assert_eq(stats(pool).ro_fd_cap, 2);
	hand_out(pool, ids, fds);
	kept0 = fds[0];
	kept1 = fds[1];
	t_assert_eq(stats(pool).ro_fds, 2);
	t_assert_eq(stats(pool).ro_fd_opens, 2);
	t_assert_eq(stats(pool).ro_fd_unkept_opens, N - 2);
	t_assert_eq(vt_count_fds(), base + N);
	vmm_pool_readonly_sent(pool);
	t_assert_eq(vt_count_fds(), base + 2);

	/* the next batch: the same kept fds, three new unkept ones */
	hand_out(pool, ids, fds);
	t_assert_eq(fds[0], kept0);
	t_assert_eq(fds[1], kept1);
	t_assert_eq(stats(pool).ro_fd_opens, 2);
	t_assert_eq(stats(pool).ro_fd_unkept_opens, 2 * (N - 2));
	vmm_pool_readonly_sent(pool);
	t_assert_eq(vt_count_fds(), base + 2);

	/* a kept page freed: its room goes to the next page handed out */
	t_ok(vmm_pool_free(pool, ids[0]));
	t_assert_eq(stats(pool).ro_fds, 1);
	t_ok(vmm_pool_page_fd_readonly(pool, ids[2], 1, &fds[2]));
	check_fd(fds[2], 0x12);
	vmm_pool_readonly_sent(pool);
	t_assert_eq(stats(pool).ro_fds, 2);
	t_assert_eq(stats(pool).ro_fd_opens, 3);
	t_assert_eq(stats(pool).ro_fd_unkept_opens, 2 * (N - 2));
	t_assert_eq(vt_count_fds(), base + 2);

	/* cap 0: none kept for a new page (those kept stay with theirs) */
	vmm_pool_set_ro_fd_cap(pool, 0);
	t_ok(vmm_pool_page_fd_readonly(pool, extra, 1, &fds[0]));
	t_assert_eq(stats(pool).ro_fd_unkept_opens, 2 * (N - 2) + 1);
	t_assert_eq(vt_count_fds(), base + 3);
	vmm_pool_readonly_sent(pool);
	t_assert_eq(vt_count_fds(), base + 2);
	t_assert_eq(stats(pool).ro_fds, 2);
	t_assert_eq(stats(pool).ro_fd_drops, 0);

	/* destroyed with an unkept fd of an unsent batch: closed too */
	t_ok(vmm_pool_page_fd_readonly(pool, ids[3], 1, &fds[3]));
	t_assert_eq(vt_count_fds(), base + 3);
	vmm_pool_destroy(pool);
	t_assert_eq(vt_count_fds(), start); /* pages, kept and unkept fds */
	vmm_backend_close(b);
	printf("cap 2 of 5 pages: 2 kept, 3 a batch, closed once sent; cap 0: none kept\n");
	return 0;
}
