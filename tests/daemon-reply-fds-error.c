// SPDX-License-Identifier: MIT
/*
 * A SEQ_EXTEND or PREFIX_OPEN reply that fails in the middle (its fds are
 * imported message by message) leaves nothing behind in the client: no
 * page imported and unmapped, no fd open, and the socket in step with the
 * daemon (the reply's remaining KVMM_CMD_FDS messages are read).  A real
 * kvmmd (4 KiB host pages, 4 per block); a publisher process publishes an
 * 80-block prefix (320 pages) and exits; a client process then:
 *   A. under a soft RLIMIT_NOFILE of 64, extends a sequence by 128 blocks
 *      (512 fds in messages of 253, 253 and 6): no message's fds fit, the
 *      kernel cuts each short (MSG_CTRUNC) and the extend fails -EMFILE;
 *   B. with room for fds, extends another sequence by 128 blocks while
 *      the backend's 300th page import fails (-EIO, by the vmm fault
 *      injector wrapped around the connection's backend): 299 pages of
 *      the first two messages were imported, the third is still drained;
 *   C. opens the published prefix (320 new pages, two messages) while the
 *      260th import fails: -EIO, and the sequence the daemon opened for
 *      it is closed again.
 * After each failure: the page table holds no staged page and exactly
 * the mappings made before, each page imported by the failed reply was
 * released (the fault injector counts page_release calls; the maps show
 * no anchor left), the process holds the fds it held before, a NOP over
 * the socket answers, and the daemon's accounting agrees.  The blocks a
 * failed extend was given stay with the daemon's sequence: extending it
 * again fails -ENODATA until it is truncated to its length; then the
 * same extend (A: 8 blocks under the limit of 64) maps and holds bytes.
 * Then the pages' read-write access, set in one call per run of pages:
 *   D. the call for one run fails once: that run's pages are opened one
 *      by one and the extend succeeds with every byte in place;
 *   E. the run and its first page fail: -EIO, none of the extend's pages
 *      stays mapped, and the sequence is repaired as in A.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>

#include "kvmm/kvmm.h"
#include "kvmm/lib/client.h"
#include "tests/lib/client_fds.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"
#include "vmm/vmm.h"

#define BLOCKS 128 /* one extend: 512 pages */
#define HASH0 0x8800 /* the prefix's first block hash */
#define PREFIX 80 /* 320 pages */

static const char *const args[] = { "--page-size", "4K", "--gpu-mem", "8M",
				    NULL };

static struct kvmm_region_opts ro = CF_REGION(BLOCKS, 29);

static const struct kvmm_connect_opts co = CF_CONNECT("fd-error");

static struct td_daemon d;

/* The client's page table: pages mapped (sum of refs) and staged. */
static void table(struct kvmm_conn *c, uint64_t *imported, uint64_t *refs,
		  uint64_t *staged)
{
	*imported = *refs = *staged = 0;
	pthread_mutex_lock(&c->lock);
	for (uint64_t i = 0; i < c->nr_pages; i++) {
		*imported += c->pages[i].refs || c->pages[i].staged;
		*refs += c->pages[i].refs;
		*staged += c->pages[i].staged;
	}
	pthread_mutex_unlock(&c->lock);
}

/* Nothing left of a failed reply: only the `mapped` pages of earlier
 * calls, each imported and mapped once, their VMAs, and the fds. */
static void clean(struct kvmm_conn *c, uint64_t mapped, int fds,
		  const char *what)
{
	struct kvmm_status_reply st;
	uint64_t imported, refs, staged;

	table(c, &imported, &refs, &staged);
	printf("%s: page table %llu imported, %llu mappings, %llu staged; %d fds (%d expected), %d page VMAs\n",
	       what, (unsigned long long)imported, (unsigned long long)refs,
	       (unsigned long long)staged, cf_count_fds(), fds, cf_page_vmas());
	t_assert_eq(staged, 0);
	t_assert_eq(imported, mapped);
	t_assert_eq(refs, mapped);
	t_assert_eq(cf_page_vmas(), 2 * mapped);
	t_assert_eq(cf_count_fds(), fds);
	/* the socket is in step: the next request reads its own reply */
	t_ok(kvmm_nop(c, 1));
	t_ok(kvmm_nop(c, 0));
	t_ok(td_status(&d, &st));
	t_assert_eq(cf_count_fds(), fds);
}

static int publisher(void)
{
	cf_publish(&co, &ro, HASH0, PREFIX, 1);
	return 0;
}

/* Truncate s to its length (both sides drop the blocks beyond), then
 * extend it to `blocks` and check the bytes. */
static void repair(struct kvmm_region *r, uint32_t s, uint32_t blocks,
		   uint32_t who)
{
	t_assert_eq(kvmm_seq_extend(r, s, blocks * 32), -ENODATA);
	t_ok(kvmm_seq_truncate(r, s, (uint32_t)kvmm_seq_len(r, s)));
	t_ok(kvmm_seq_extend(r, s, blocks * 32));
	cf_fill(r, s, 0, blocks, who);
	cf_check(r, s, 0, blocks, who);
}

static int client(void)
{
	struct kvmm_stats ks = { .size = sizeof(ks) };
	struct kvmm_status_reply st;
	uint64_t hashes[PREFIX];
	struct vmm_backend *w;
	struct kvmm_conn *c;
	struct kvmm_region *r;
	struct rlimit rl;
	uint32_t a, b, p, e, n;
	uint64_t mapped = 0;
	int fds, err;

	t_ok(kvmm_connect(&co, &c));
	/* the fault injector between libkvmm and its host backend */
	t_ok(vmm_fault_wrap(c->backend, &w));
	c->backend = w;
	t_ok(kvmm_region_create(c, &ro, &r));
	fds = cf_count_fds();

	/* A: no message's fds fit under 64. */
	cf_set_nofile(64, &rl);
	t_ok(kvmm_seq_open(r, &a));
	err = kvmm_seq_extend(r, a, BLOCKS * 32);
	printf("A: extend by %d pages under RLIMIT_NOFILE 64: %s\n",
	       BLOCKS * CF_PPB, kvmm_strerror(err));
	t_assert_eq(err, -EMFILE);
	t_assert_eq(vmm_fault_calls(w, VMM_OP_PAGE_IMPORT), 0);
	clean(c, 0, fds, "A");
	repair(r, a, 8, 2); /* 32 fds fit under 64 */
	mapped += 8 * CF_PPB;
	clean(c, mapped, fds, "A repaired");
	t_ok(setrlimit(RLIMIT_NOFILE, &rl) ? -errno : 0);

	/* B: the 300th import fails, in the second message. */
	t_ok(kvmm_seq_open(r, &b));
	vmm_fault_arm(w, VMM_OP_PAGE_RELEASE, 0, 0);
	vmm_fault_arm(w, VMM_OP_PAGE_IMPORT, 300, -EIO);
	err = kvmm_seq_extend(r, b, BLOCKS * 32);
	printf("B: extend by %d pages, import 300 failing: %s; %u imports, %u releases\n",
	       BLOCKS * CF_PPB, kvmm_strerror(err),
	       vmm_fault_calls(w, VMM_OP_PAGE_IMPORT),
	       vmm_fault_calls(w, VMM_OP_PAGE_RELEASE));
	t_assert_eq(err, -EIO);
	t_assert_eq(vmm_fault_calls(w, VMM_OP_PAGE_IMPORT), 300);
	t_assert_eq(vmm_fault_calls(w, VMM_OP_PAGE_RELEASE), 299);
	clean(c, mapped, fds, "B");
	vmm_fault_arm(w, VMM_OP_PAGE_IMPORT, 0, 0);
	repair(r, b, 16, 3);
	mapped += 16 * CF_PPB;
	clean(c, mapped, fds, "B repaired");
	cf_check(r, a, 0, 8, 2);

	/* C: a prefix open whose 260th import fails. */
	cf_hashes(hashes, PREFIX, HASH0);
	vmm_fault_arm(w, VMM_OP_PAGE_RELEASE, 0, 0);
	vmm_fault_arm(w, VMM_OP_PAGE_IMPORT, 260, -EIO);
	err = kvmm_seq_open_prefix(r, hashes, PREFIX, &p, &n);
	printf("C: prefix open of %d pages, import 260 failing: %s; %u imports, %u releases\n",
	       PREFIX * CF_PPB, kvmm_strerror(err),
	       vmm_fault_calls(w, VMM_OP_PAGE_IMPORT),
	       vmm_fault_calls(w, VMM_OP_PAGE_RELEASE));
	t_assert_eq(err, -EIO);
	t_assert_eq(vmm_fault_calls(w, VMM_OP_PAGE_RELEASE), 259);
	clean(c, mapped, fds, "C");
	t_ok(td_status(&d, &st));
	t_assert_eq(st.sequences, 2); /* a and b: the prefix's was closed */
	vmm_fault_arm(w, VMM_OP_PAGE_IMPORT, 0, 0);
	t_ok(kvmm_seq_open_prefix(r, hashes, PREFIX, &p, &n));
	t_assert_eq(n, PREFIX);
	cf_check(r, p, 0, PREFIX, 1);
	mapped += PREFIX * CF_PPB;
	clean(c, mapped, fds, "C again");

	/* D: the one read-write call over a run of pages fails: its pages
	 * are opened one by one and the extend succeeds. */
	t_ok(kvmm_seq_open(r, &e));
	vmm_fault_arm(w, VMM_OP_SET_ACCESS, 1, -EIO);
	t_ok(kvmm_seq_extend(r, e, 16 * 32));
	printf("D: extend by 16 blocks, the first run's access failing: %u set_access calls\n",
	       vmm_fault_calls(w, VMM_OP_SET_ACCESS));
	/* one call per slot's run of 16 pages, then 16 for the failed run */
	t_assert_eq(vmm_fault_calls(w, VMM_OP_SET_ACCESS), CF_PPB + 16);
	cf_fill(r, e, 0, 16, 4);
	cf_check(r, e, 0, 16, 4);
	clean(c, mapped + 16 * CF_PPB, fds, "D");
	t_ok(kvmm_seq_close(r, e));
	clean(c, mapped, fds, "D closed");

	/* E: the first page of that run fails on its own too: no page of
	 * the extend stays mapped, and the sequence is repaired as in A. */
	t_ok(kvmm_seq_open(r, &e));
	vmm_fault_arm_count(w, VMM_OP_SET_ACCESS, 1, 2, -EIO);
	err = kvmm_seq_extend(r, e, 16 * 32);
	printf("E: extend by 16 blocks, a run and its first page failing: %s\n",
	       kvmm_strerror(err));
	t_assert_eq(err, -EIO);
	t_assert_eq(kvmm_seq_len(r, e), 0);
	clean(c, mapped, fds, "E");
	vmm_fault_arm(w, VMM_OP_SET_ACCESS, 0, 0);
	repair(r, e, 16, 5);
	mapped += 16 * CF_PPB;
	clean(c, mapped, fds, "E repaired");

	t_ok(kvmm_get_stats(c, &ks));
	/* mappings made: D's count, though closed since */
	t_assert_eq(ks.pages_mapped, mapped + 16 * CF_PPB);
	t_ok(td_status(&d, &st));
	t_assert_eq(st.pages_mapped, mapped);
	t_ok(kvmm_seq_close(r, e));
	t_ok(kvmm_seq_close(r, p));
	t_ok(kvmm_seq_close(r, b));
	t_ok(kvmm_seq_close(r, a));
	t_assert_eq(cf_page_vmas(), 0);
	t_ok(kvmm_region_destroy(r));
	kvmm_disconnect(c);
	return 0;
}

int main(void)
{
	cf_run_daemon(&d, args, publisher, client);
	printf("ok\n");
	return 0;
}
