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
 * Before 6 December kvmmd opened a read-only fd per page per reply and
 * closed it once sent (no fd kept: step 2's count was before + 0); with a
 * kept fd that were writable, step 2's mmap and kvmmd's fdinfo flags say
 * so; with one not closed at free, step 3's count.
 */
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>

#include "tests/cache-common.h"

#define NB 4
#define OPENS 64
#define TAG 3
#define TAG_AGAIN 7

static const uint64_t hx[NB] = { 0x7e0f001, 0x7e0f002, 0x7e0f003, 0x7e0f004 };

struct fd_count {
	int total;
	int ro_pages; /* kvmm page memfds opened O_RDONLY */
	int rw_pages; /* kvmm page memfds opened O_RDWR */
};

/* kvmmd's fds, and its kvmm page fds by access mode. */
static struct fd_count count_fds(pid_t pid)
{
	struct fd_count n = { 0 };
	char path[64], link[320], target[256], line[128];
	struct dirent *e;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	if (!d)
		t_fail("%s: %s", path, strerror(errno));
	while ((e = readdir(d))) {
		unsigned int flags = ~0u;
		ssize_t len;
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		n.total++;
		snprintf(link, sizeof(link), "%s/%s", path, e->d_name);
		len = readlink(link, target, sizeof(target) - 1);
		if (len < 0)
			continue;
		target[len] = '\0';
		if (strncmp(target, "/memfd:kvmm-page", 16))
			continue;
		snprintf(link, sizeof(link), "/proc/%d/fdinfo/%s", (int)pid,
			 e->d_name);
		f = fopen(link, "re");
		if (!f)
			continue; /* closed since the readdir */
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "flags: %o", &flags) == 1)
				break;
		fclose(f);
		if ((flags & O_ACCMODE) == O_RDONLY)
			n.ro_pages++;
		else if ((flags & O_ACCMODE) == O_RDWR)
			n.rw_pages++;
		else
			t_fail("kvmmd page fd %s: flags %o", e->d_name, flags);
	}
	closedir(d);
	return n;
}

/* kvmmd's fds once they are total, ro_pages read-only page fds among
 * them (a finished kvmmctl's connection may still be closing: 5 s). */
static struct fd_count wait_fds(pid_t pid, int total, int ro_pages)
{
	struct fd_count n;

	for (int i = 0; i < 500; i++) {
		n = count_fds(pid);
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
	struct fd_count before, n = { 0 };
	struct td_daemon d;
	char out[4096];
	struct cc c;

	cc_start(&d, args);
	t_assert_eq(cc_publish_content(d.sock, hx, NB, TAG, NULL), 0);
	cc_connect(&c, d.sock);
	cc_region(&c);
	before = wait_fds(d.pid, count_fds(d.pid).total, 0);
	t_assert_eq(before.ro_pages, 0);
	t_assert(before.rw_pages >= NB * CC_PPB);

	/* 2: one read-only fd kept per page, whatever the opens */
	for (int i = 0; i < OPENS; i++) {
		open_prefix(&c, TAG, &seq, ids);
		if (i == 0 || i == OPENS - 1) {
			n = count_fds(d.pid);
			t_assert_eq(n.ro_pages, NB * CC_PPB);
			t_assert_eq(n.rw_pages, before.rw_pages);
			t_assert_eq(n.total, before.total + NB * CC_PPB);
		}
		cc_seq_close(&c, seq, ids, NB * CC_PPB);
	}
	printf("%d opens of %d pages: kvmmd holds %d read-only page fds, %d fds (%d before)\n",
	       OPENS, NB * CC_PPB, n.ro_pages, n.total, before.total);
	fflush(stdout);

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

	/* 4: the pages reused for new bytes: read-only again, kept again */
	t_assert_eq(cc_publish_content(d.sock, hx, NB, TAG_AGAIN, NULL), 0);
	for (int i = 0; i < 2; i++) {
		open_prefix(&c, TAG_AGAIN, &seq, ids);
		cc_seq_close(&c, seq, ids, NB * CC_PPB);
	}
	n = count_fds(d.pid);
	t_assert_eq(n.ro_pages, NB * CC_PPB);
	t_assert_eq(n.rw_pages, before.rw_pages);
	printf("after a drop: 0 read-only page fds; published again: %d\n",
	       n.ro_pages);
	cc_disconnect(&c);
	cc_stop(&d);
	return 0;
}
