/* SPDX-License-Identifier: MIT */
/*
 * Every injected backend failure unwinds with nothing leaked.  A scenario
 * that uses every vmm operation the way the daemon and a client do (pool
 * prefill and alloc, a scrub and a renewal, reserve, map + set_access, export + import of a page,
 * copies, a page-to-page copy, unmap, free) runs once to count its calls per operation; then,
 * for every operation and every call number N up to that count, it runs
 * again on a fresh backend whose Nth call of that operation fails.  Each
 * run must report the injected error, leave the pool with nothing
 * allocated or mapped, the backend with no pages, ranges or mappings, and
 * the process with the fds it started with.  Under `make SANITIZE=1 check`
 * ASan also checks that no heap memory leaked.
 *
 * KVMM_FAULT_BACKEND=cuda runs the same over the cuda backend (used by
 * tests/vmm-cuda-mock.sh with the mock libcuda, or on a GPU).
 */
#include "tests/vmm-util.h"
#include "vmm/vmm.h"

#define PAGE 4096
#define NPAGES 3
#define INJECTED (-EHOSTDOWN) /* an errno nothing else here returns */

/* Teardown calls are retried once: the injector fails a single call, and
 * callers of vmm retry a failed unmap/release/free the same way. */
#define RETRY(call) ((call) == 0 || (call) == 0 ? 0 : -1)

static int scenario(struct vmm_backend *b)
{
	struct vmm_pool_stats st;
	struct vmm_pool *pool;
	uint32_t ids[NPAGES];
	vmm_handle_t imported;
	int nids = 0, mapped = 0, fd = -1, err, ret = 0;
	bool imported_mapped = false;
	size_t ps;
	uint64_t va;
	char buf[16];

	err = b->ops->granularity(b, &ps);
	if (err)
		return err;
	if (ps != b->page_size)
		t_fail("granularity %zu, page size %zu", ps, b->page_size);
	err = vmm_pool_create(b, NPAGES + 1, &pool);
	if (err)
		return err;
	err = vmm_pool_prefill(pool, 2);
	if (err)
		goto err_pool;
	for (nids = 0; nids < NPAGES; nids++) {
		err = vmm_pool_alloc_for(pool, 1, 0, &ids[nids]);
		if (err)
			goto err_free_ids;
	}
	/* the last page, given back and taken by another owner, is zeroed
	 * first (page_zero) */
	if (vmm_pool_free(pool, ids[--nids]))
		t_fail("free of page %u", ids[nids]);
	err = vmm_pool_alloc_for(pool, 2, 0, &ids[nids]);
	if (err)
		goto err_free_ids;
	nids++;
	/* and once more, now that a process of another domain (7) got its
	 * fd: swapped for a new page (page_create, page_fd or an export,
	 * the old one's page_release) */
	if (vmm_pool_page_fd(pool, ids[nids - 1], 7) < 0)
		t_fail("fd of page %u", ids[nids - 1]);
	if (vmm_pool_free(pool, ids[--nids]))
		t_fail("free of page %u", ids[nids]);
	err = vmm_pool_alloc_for(pool, 2, 0, &ids[nids]);
	if (err)
		goto err_free_ids;
	nids++;
	err = b->ops->reserve(b, (NPAGES + 1) * ps, &va);
	if (err)
		goto err_free_ids;
	for (mapped = 0; mapped < NPAGES; mapped++) {
		err = vmm_map_page(b, va + mapped * ps,
				   vmm_pool_page_handle(pool, ids[mapped]),
				   VMM_PROT_RW);
		if (err)
			goto err_unmap;
		err = vmm_pool_mapped(pool, ids[mapped]);
		if (err) {
			RETRY(b->ops->unmap(b, va + mapped * ps));
			goto err_unmap;
		}
	}
	/* What a process that may only read page 0 gets (kvmmd: a shared
	 * block's page); cuda has none */
	err = vmm_pool_page_fd_readonly(pool, ids[0], 0, &fd);
	if (err == -EOPNOTSUPP)
		err = 0;
	fd = -1; /* the pool's (kept while page 0 is allocated) */
	vmm_pool_readonly_sent(pool);
	if (err)
		goto err_unmap;
	/* A client's view of page 0: export, import, map at the last slot. */
	err = b->ops->page_export(b, vmm_pool_page_handle(pool, ids[0]), &fd);
	if (err)
		goto err_unmap;
	err = b->ops->page_import(b, fd, &imported);
	close(fd);
	if (err)
		goto err_unmap;
	err = b->ops->map(b, va + NPAGES * ps, imported);
	if (err)
		goto err_release_imported;
	imported_mapped = true;
	err = b->ops->set_access(b, va + NPAGES * ps, ps, VMM_PROT_READ);
	if (err)
		goto err_release_imported;
	err = b->ops->copy_from_host(b, vmm_pool_page_handle(pool, ids[0]), 8,
				     "unwind", 7);
	if (err)
		goto err_release_imported;
	err = b->ops->copy_to_host(b, buf, imported, 8, 7);
	if (err)
		goto err_release_imported;
	if (strcmp(buf, "unwind"))
		t_fail("copy did not reach the imported page");
	/* Device memory is not readable from the CPU; host pages are. */
	if (b->kind == VMM_BACKEND_HOST &&
	    strcmp((char *)(uintptr_t)(va + NPAGES * ps + 8), "unwind"))
		t_fail("copy did not reach the shared mapping");
	/* page 0 into page 1, page to page (kvmmd: SEQ_UNSHARE's copy) */
	err = vmm_page_copy(b, vmm_pool_page_handle(pool, ids[1]),
			    vmm_pool_page_handle(pool, ids[0]));
	if (err)
		goto err_release_imported;
	memset(buf, 0, sizeof(buf));
	err = b->ops->copy_to_host(b, buf, vmm_pool_page_handle(pool, ids[1]),
				   8, 7);
	if (err)
		goto err_release_imported;
	if (strcmp(buf, "unwind"))
		t_fail("page copy did not reach page 1");
	/* The success path tears down through the same labels. */
	ret = 0;

err_release_imported:
	if (imported_mapped && RETRY(b->ops->unmap(b, va + NPAGES * ps)))
		ret = -1;
	if (RETRY(b->ops->page_release(b, imported)))
		ret = -1;
err_unmap:
	while (mapped-- > 0) {
		if (RETRY(b->ops->unmap(b, va + mapped * ps)))
			ret = -1;
		if (vmm_pool_unmapped(pool, ids[mapped]))
			ret = -1;
	}
	if (RETRY(b->ops->free_range(b, va, (NPAGES + 1) * ps)))
		ret = -1;
err_free_ids:
	while (nids-- > 0)
		if (vmm_pool_free(pool, ids[nids]))
			ret = -1;
	vmm_pool_get_stats(pool, &st);
	if (st.allocated || st.mapped || st.free != st.created)
		t_fail("pool not back to idle: allocated %llu mapped %llu",
		       (unsigned long long)st.allocated,
		       (unsigned long long)st.mapped);
err_pool:
	vmm_pool_destroy(pool);
	if (ret)
		t_fail("teardown failed after error %d", err);
	return err;
}

static struct vmm_backend *fresh(void)
{
	return vt_open_fault(PAGE);
}

static void check_clean(struct vmm_backend *b, int fds_before, const char *what)
{
	struct vmm_backend_usage u;

	vmm_backend_get_usage(b, &u);
	if (u.pages || u.ranges || u.mappings)
		t_fail("%s: leaked %llu pages, %llu ranges, %llu mappings",
		       what, (unsigned long long)u.pages,
		       (unsigned long long)u.ranges,
		       (unsigned long long)u.mappings);
	vmm_backend_close(b);
	if (vt_count_fds() != fds_before)
		t_fail("%s: %d fds open, %d before", what, vt_count_fds(),
		       fds_before);
}

int main(void)
{
	unsigned int calls[VMM_OP_COUNT];
	int fds_before, runs = 0;
	struct vmm_backend *b;

	vmm_log_set_level(VMM_LOG_ERR);
	/* The CUDA driver keeps its device files open from the first cuInit
	 * to the end of the process, whatever is released: count from after
	 * one open and close, so that only what the backend holds counts. */
	b = fresh();
	vmm_backend_close(b);
	fds_before = vt_count_fds();
	b = fresh();
	t_ok(scenario(b));
	for (int op = 0; op < VMM_OP_COUNT; op++)
		calls[op] = vmm_fault_calls(b, op);
	check_clean(b, fds_before, "clean run");
	/* The scenario must reach every operation, or some unwind path
	 * would go untested. */
	for (int op = 0; op < VMM_OP_COUNT; op++)
		if (!calls[op])
			t_fail("scenario never calls %s", vmm_op_string(op));

	for (int op = 0; op < VMM_OP_COUNT; op++) {
		for (unsigned int n = 1; n <= calls[op]; n++) {
			char what[64];
			int err;

			snprintf(what, sizeof(what), "%s call %u",
				 vmm_op_string(op), n);
			b = fresh();
			vmm_fault_arm(b, op, n, INJECTED);
			err = scenario(b);
			if (vmm_fault_calls(b, op) < n)
				t_fail("%s: never reached", what);
			/* A failure in a teardown call is absorbed by the
			 * retry; everywhere else the scenario fails with
			 * exactly the injected error. */
			if (op == VMM_OP_UNMAP || op == VMM_OP_PAGE_RELEASE ||
			    op == VMM_OP_FREE_RANGE) {
				if (err != 0 && err != INJECTED)
					t_fail("%s: returned %d", what, err);
			} else if (err != INJECTED) {
				t_fail("%s: returned %d, expected %d", what,
				       err, INJECTED);
			}
			check_clean(b, fds_before, what);
			runs++;
		}
	}
	printf("%d injected failures unwound cleanly\n", runs);
	return 0;
}
