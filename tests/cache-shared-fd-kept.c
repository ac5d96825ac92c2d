// SPDX-License-Identifier: MIT
/*
 * kvmmd keeps one read-only fd per shared page, not one per prefix open,
 * and closes it with the page (host backend; a real kvmmd, its fds read
 * through /proc/PID/fd and /proc/PID/fdinfo).
 *
 *   1. A writer publishes NB blocks and goes.  kvmmd holds no read-only
 *      page fd yet.
 *   2. A reader opens and closes the cached prefix OPENS times.  Every
 *      reply's fds are O_RDONLY and refuse mmap(PROT_WRITE, MAP_SHARED)
 *      (EACCES), the first open's as the last's; after the first open
 *      and after the last, kvmmd holds exactly NB * CC_PPB more fds than
 *      before, each a kvmm page opened O_RDONLY (one per page, kept: not
 *      one per open, not one leaked per reply), and its read-write page
 *      fds are as many as before.
 *   3. kvmmctl cache-drop frees the pages: kvmmd's read-only page fds are
 *      gone and its fds are back to where they were before the opens.
 *   4. The same blocks published again (the pages reused, scrubbed for the
 *      new writer) and opened: read-only fds again, NB * CC_PPB of them
 *      kept, the bytes the new writer's.
 *
 * The pool's counters on the wire (ADMIN_STATUS, ABI 1.18) say the same
 * at each step: page_ro_fds what /proc shows kept, page_ro_fd_opens
 * NB * CC_PPB after step 2 and twice that after step 4, no drop, nothing
 * opened past the cap, which is the pool's capacity (RLIMIT_NOFILE is
 * enough here); kvmmctl status (human and --json) and the metrics show
 * them.
 *
 * Before 6 December kvmmd opened a read-only fd per page per reply and
 * closed it once sent (no fd kept: step 2's count was before + 0); with a
 * kept fd that were writable, step 2's mmap and kvmmd's fdinfo flags say
 * so; with one not closed at free, step 3's count.
 */
#include <sys/mman.h>

#include "tests/cache-common.h"
#include "tests/shared-fd-common.h"

#define NB 4
#define OPENS 64
#define TAG 3
#define TAG_AGAIN 7

static const uint64_t hx[NB] = { 0x7e0f001, 0x7e0f002, 0x7e0f003, 0x7e0f004 };

/* ADMIN_STATUS's read-only fd counters are kept (and /proc's count) and
 * opens; none dropped, none opened past the cap (the capacity) */
static void check_counters(const struct td_daemon *d, uint64_t kept,
			   uint64_t opens)
{
	struct kvmm_status_reply st;

	t_ok(td_status(d, &st));
	t_assert_eq(st.size, sizeof(st));
	t_assert_eq(st.page_ro_fds, kept);
	t_assert_eq(st.page_ro_fds, (uint64_t)sf_count(d->pid).ro_pages);
	t_assert_eq(st.page_ro_fd_opens, opens);
	t_assert_eq(st.page_ro_fd_drops, 0);
	t_assert_eq(st.page_ro_fd_unkept_opens, 0);
	t_assert_eq(st.page_ro_fd_cap, st.pages_total);
}

/* kvmmctl status, --json and metrics show the counters */
static void check_kvmmctl(const struct td_daemon *d, uint64_t kept,
			  uint64_t opens, uint64_t cap)
{
	static char out[1 << 16];
	char want[256];

	t_assert_eq(td_kvmmctl(d->sock, "status --json", out, sizeof(out)), 0);
	snprintf(
		want, sizeof(want),
		"\"ro_fds\":%llu,\"ro_fd_cap\":%llu,\"ro_fd_opens\":%llu,\"ro_fd_drops\":0,\"ro_fd_unkept_opens\":0}",
		(unsigned long long)kept, (unsigned long long)cap,
		(unsigned long long)opens);
	if (!strstr(out, want))
		t_fail("status --json lacks %s: %s", want, out);
	t_assert_eq(td_kvmmctl(d->sock, "status", out, sizeof(out)), 0);
	snprintf(
		want, sizeof(want),
		"read-only    %llu page fds kept (at most %llu), %llu opened, 0 closed short of fds, 0 opened for one reply alone\n",
		(unsigned long long)kept, (unsigned long long)cap,
		(unsigned long long)opens);
	if (!strstr(out, want))
		t_fail("status lacks %s: %s", want, out);
	t_assert_eq(td_kvmmctl(d->sock, "metrics", out, sizeof(out)), 0);
	snprintf(want, sizeof(want), "\nkvmm_pool_ro_fds %llu\n",
		 (unsigned long long)kept);
	t_assert(strstr(out, want));
	snprintf(want, sizeof(want), "\nkvmm_pool_ro_fd_cap %llu\n",
		 (unsigned long long)cap);
	t_assert(strstr(out, want));
	snprintf(want, sizeof(want), "\nkvmm_pool_ro_fd_opens_total %llu\n",
		 (unsigned long long)opens);
	t_assert(strstr(out, want));
	t_assert(strstr(out, "\nkvmm_pool_ro_fd_drops_total 0\n"));
	t_assert(strstr(out, "\nkvmm_pool_ro_fd_unkept_opens_total 0\n"));
}

/* kvmmd's fds once they are total, ro_pages read-only page fds among
 * them (a finished kvmmctl's connection may still be closing: 5 s). */
static struct sf_fds wait_fds(pid_t pid, int total, int ro_pages)
{
	struct sf_fds n;

	for (int i = 0; i < 500; i++) {
		n = sf_count(pid);
		if (n.total == total && n.ro_pages == ro_pages)
			break;
		usleep(10 * 1000);
	}
	return n;
}

/* A raw prefix open of hx: every fd read-only, mapped; *seq its
 * sequence, ids its pages. */
static void open_prefix(struct cc *c, uint64_t tag, uint32_t *seq,
			uint32_t *ids)
{
	static char buf[KVMM_MSG_MAX];
	struct kvmm_prefix_open_reply *rep = (void *)buf;
	int fds[NB * CC_PPB + 1];
	unsigned int nfds;

	cc_prefix_send_flags(c, hx, NB, 0);
	t_ok(cc_recv(c, buf, sizeof(buf), fds, &nfds));
	t_assert_eq(rep->nr_blocks, NB);
	t_assert_eq(rep->from_gpu, NB);
	t_assert_eq(nfds, NB * CC_PPB);
	for (unsigned int k = 0; k < nfds; k++) {
		void *m;

		t_assert_eq(fcntl(fds[k], F_GETFL) & O_ACCMODE, O_RDONLY);
		errno = 0;
		m = mmap(NULL, CC_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED,
			 fds[k], 0);
		if (m != MAP_FAILED) {
			((unsigned char *)m)[0] ^= 0xff; /* a stray write */
			t_fail("page fd %u maps writable", k);
		}
		t_assert_eq(errno, EACCES);
	}
	cc_map(c, rep->page_ids, NB * CC_PPB, fds, nfds);
	for (uint32_t i = 0; i < NB * CC_PPB; i++)
		ids[i] = rep->page_ids[i] & ~KVMM_PAGE_HELD;
	cc_check(c, ids, NB, tag);
	*seq = rep->seq_id;
}

int main(void)
{
	const char *args[] = { NULL };
	struct kvmm_status_reply st;
	uint32_t ids[NB * CC_PPB], seq;
	struct sf_fds before, n = { 0 };
	struct td_daemon d;
	char out[4096];
	struct cc c;

	cc_start(&d, args);
	t_assert_eq(cc_publish_content(d.sock, hx, NB, TAG, NULL), 0);
	cc_connect(&c, d.sock);
	cc_region(&c);
	before = wait_fds(d.pid, sf_count(d.pid).total, 0);
	t_assert_eq(before.ro_pages, 0);
	t_assert(before.rw_pages >= NB * CC_PPB);
	check_counters(&d, 0, 0);

	/* 2: one read-only fd kept per page, whatever the opens */
	for (int i = 0; i < OPENS; i++) {
		open_prefix(&c, TAG, &seq, ids);
		if (i == 0 || i == OPENS - 1) {
			n = sf_count(d.pid);
			t_assert_eq(n.ro_pages, NB * CC_PPB);
			t_assert_eq(n.rw_pages, before.rw_pages);
			t_assert_eq(n.total, before.total + NB * CC_PPB);
		}
		cc_seq_close(&c, seq, ids, NB * CC_PPB);
	}
	printf("%d opens of %d pages: kvmmd holds %d read-only page fds, %d fds (%d before)\n",
	       OPENS, NB * CC_PPB, n.ro_pages, n.total, before.total);
	fflush(stdout);
	check_counters(&d, NB * CC_PPB, NB * CC_PPB);
	t_ok(td_status(&d, &st));
	check_kvmmctl(&d, NB * CC_PPB, NB * CC_PPB, st.pages_total);

	/* 3: the pages freed, their read-only fds closed */
	t_assert_eq(td_kvmmctl(d.sock, "cache-drop", out, sizeof(out)), 0);
	for (int i = 0; i < 500; i++) {
		t_ok(td_status(&d, &st));
		if (!st.pages_allocated)
			break;
		usleep(10 * 1000);
	}
	t_assert_eq(st.pages_allocated, 0);
	n = wait_fds(d.pid, before.total, 0);
	t_assert_eq(n.ro_pages, 0);
	t_assert_eq(n.total, before.total);
	t_assert_eq(n.rw_pages, before.rw_pages);
	check_counters(&d, 0, NB * CC_PPB);

	/* 4: the pages reused for new bytes: read-only again, kept again */
	t_assert_eq(cc_publish_content(d.sock, hx, NB, TAG_AGAIN, NULL), 0);
	for (int i = 0; i < 2; i++) {
		open_prefix(&c, TAG_AGAIN, &seq, ids);
		cc_seq_close(&c, seq, ids, NB * CC_PPB);
	}
	n = sf_count(d.pid);
	t_assert_eq(n.ro_pages, NB * CC_PPB);
	t_assert_eq(n.rw_pages, before.rw_pages);
	check_counters(&d, NB * CC_PPB, 2 * NB * CC_PPB);
	printf("after a drop: 0 read-only page fds; published again: %d\n",
	       n.ro_pages);
	cc_disconnect(&c);
	cc_stop(&d);
	return 0;
}
