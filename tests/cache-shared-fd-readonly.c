// SPDX-License-Identifier: MIT
/*
 * kvmmd hands a cached block's pages to a prefix open read-only, not only
 * libkvmm's mappings of them (host backend): a real kvmmd and client
 * processes.
 *
 *   1. Writer A publishes two blocks and keeps its sequence.  Reader B's
 *      PREFIX_OPEN shares them from the GPU tier; B looks at the raw fds
 *      of the reply: each is O_RDONLY, mmap(PROT_WRITE, MAP_SHARED) of it
 *      fails with EACCES, a PROT_READ mapping holds A's bytes and cannot
 *      be mprotect'ed writable (EACCES), pwrite and a punched hole (which
 *      would zero the page) are EBADF, and (as root) a process of another
 *      uid cannot reopen it read-write through /proc/self/fd (mode 0400).
 *      The writer keeps write access: A's byte flip shows through B's
 *      mapping.  B's own block past the prefix comes read-write.
 *   2. Reader C, through libkvmm: every kvmm page mapping it has (the
 *      prefix's anchors and slots) refuses mprotect(PROT_WRITE) with
 *      EACCES, where before it was the client's choice.
 *   3. The blocks demoted to the host tier and restored for reader D come
 *      read-only too; D and a last reader E read A's bytes intact.
 *
 * On main before 6 December kvmmd passed the page's read-write memfd: B's
 * mmap(PROT_WRITE) worked, and its write reached every later reader.
 */
#include <fcntl.h>
#include <grp.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "tests/cache-common.h"

#define NB 2
#define TAG 5
#define TAG_OTHER 9

static const uint64_t hx[NB] = { 0x70f0001, 0x70f0002 };

/* Every byte of page k of a prefix reply (block k / CC_PPB, page k %
 * CC_PPB) as the writer wrote it, through a read-only mapping. */
static void check_bytes(const unsigned char *m, uint32_t k)
{
	for (uint32_t o = 0; o < CC_PAGE; o++)
		if (m[o] != cc_pat(TAG, k / CC_PPB, k % CC_PPB, o))
			t_fail("page %u byte %u differs", k, o);
}

/* As uid 65534: reopening fd read-write through /proc/self/fd fails. */
static void check_no_reopen(int fd)
{
	char path[64];
	pid_t p;

	if (geteuid() != 0) {
		printf("not root: the reopen as another uid is not tried\n");
		return;
	}
	p = fork();
	t_assert(p >= 0);
	if (p == 0) {
		int nfd;

		t_ok(setgroups(0, NULL));
		t_ok(setresgid(65534, 65534, 65534));
		t_ok(setresuid(65534, 65534, 65534));
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		errno = 0;
		nfd = open(path, O_RDWR | O_CLOEXEC);
		if (nfd >= 0)
			t_fail("uid 65534 reopened page fd %d read-write", fd);
		t_assert_eq(errno, EACCES);
		_exit(0);
	}
	t_assert_eq(cc_wait_child(p), 0);
}

/* The raw fds of a prefix reply that shares NB blocks: read-only. */
static void check_readonly_fds(const int *fds, unsigned int nfds)
{
	t_assert_eq(nfds, NB * CC_PPB);
	for (unsigned int k = 0; k < nfds; k++) {
		char byte = 0x11;
		struct stat st;
		void *m;

		t_assert_eq(fcntl(fds[k], F_GETFL) & O_ACCMODE, O_RDONLY);
		errno = 0;
		m = mmap(NULL, CC_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED,
			 fds[k], 0);
		if (m != MAP_FAILED) {
			/* what a corrupting client would do */
			((unsigned char *)m)[0] ^= 0xff;
			t_fail("page fd %u maps writable", k);
		}
		t_assert_eq(errno, EACCES);
		m = mmap(NULL, CC_PAGE, PROT_READ, MAP_SHARED, fds[k], 0);
		t_assert(m != MAP_FAILED);
		check_bytes(m, k);
		errno = 0;
		t_assert_eq(mprotect(m, CC_PAGE, PROT_READ | PROT_WRITE), -1);
		t_assert_eq(errno, EACCES);
		munmap(m, CC_PAGE);
		errno = 0;
		t_assert_eq(pwrite(fds[k], &byte, 1, 0), -1);
		t_assert_eq(errno, EBADF);
		errno = 0;
		t_assert_eq(fallocate(fds[k],
				      FALLOC_FL_PUNCH_HOLE |
					      FALLOC_FL_KEEP_SIZE,
				      0, CC_PAGE),
			    -1);
		t_assert_eq(errno, EBADF);
		t_ok(fstat(fds[k], &st));
		t_assert_eq(st.st_mode & 0777, 0400);
	}
	check_no_reopen(fds[0]);
}

/* A raw prefix open of hx: the reply's fds checked, then mapped (ids). */
static void open_readonly(struct cc *c, uint32_t flags,
			  struct kvmm_prefix_open_reply *out, uint32_t *ids)
{
	static char buf[KVMM_MSG_MAX];
	struct kvmm_prefix_open_reply *rep = (void *)buf;
	int fds[NB * CC_PPB + 1];
	unsigned int nfds;

	cc_prefix_send_flags(c, hx, NB, flags);
	t_ok(cc_recv(c, buf, sizeof(buf), fds, &nfds));
	t_assert_eq(rep->nr_blocks, NB);
	t_assert_eq(rep->nr_fds, nfds);
	check_readonly_fds(fds, nfds);
	*out = *rep;
	cc_map(c, rep->page_ids, NB * CC_PPB, fds, nfds);
	for (uint32_t i = 0; i < NB * CC_PPB; i++)
		ids[i] = rep->page_ids[i] & ~KVMM_PAGE_HELD;
}

/* 1: A writes and keeps its sequence, B reads. */
static void writer_and_reader(const char *sock)
{
	int a2b[2], b2a[2];
	pid_t a, b;
	char ch;

	t_ok(pipe(a2b));
	t_ok(pipe(b2a));
	a = fork();
	t_assert(a >= 0);
	if (a == 0) {
		struct kvmm_block_publish_reply rep;
		uint32_t ids[NB * CC_PPB];
		struct cc c;
		uint32_t seq;

		/* B's end only: B's death ends A's wait */
		close(a2b[0]);
		close(b2a[1]);
		cc_connect(&c, sock);
		cc_region(&c);
		seq = cc_seq_open(&c);
		cc_extend(&c, seq, NB * CC_TPB, ids);
		cc_fill(&c, ids, NB, TAG);
		t_ok(cc_publish(&c, seq, 0, hx, NB, &rep));
		t_assert_eq(rep.published, NB);
		t_assert_eq(write(a2b[1], "p", 1), 1);
		/* B has looked: the writer's mapping is still writable */
		t_assert_eq(read(b2a[0], &ch, 1), 1);
		c.map[ids[CC_PPB + 1]][100] ^= 0xff;
		t_assert_eq(write(a2b[1], "w", 1), 1);
		t_assert_eq(read(b2a[0], &ch, 1), 1);
		c.map[ids[CC_PPB + 1]][100] ^= 0xff; /* as it was */
		cc_seq_close(&c, seq, ids, NB * CC_PPB);
		cc_disconnect(&c);
		_exit(0);
	}
	t_assert_eq(read(a2b[0], &ch, 1), 1);
	b = fork();
	t_assert(b >= 0);
	if (b == 0) {
		struct kvmm_prefix_open_reply rep;
		uint32_t ids[(NB + 1) * CC_PPB];
		unsigned char before;
		struct cc c;

		close(a2b[1]);
		close(b2a[0]);
		cc_connect(&c, sock);
		cc_region(&c);
		open_readonly(&c, 0, &rep, ids);
		t_assert_eq(rep.from_gpu, NB);
		before = c.map[ids[CC_PPB + 1]][100];
		t_assert_eq(write(b2a[1], "x", 1), 1);
		t_assert_eq(read(a2b[0], &ch, 1), 1);
		t_assert_eq(c.map[ids[CC_PPB + 1]][100],
			    (unsigned char)(before ^ 0xff));
		t_assert_eq(write(b2a[1], "x", 1), 1);
		/* B's own block: fresh pages, read-write (a write through a
		 * read-only mapping would kill B) */
		cc_extend(&c, rep.seq_id, (NB + 1) * CC_TPB, ids);
		for (uint32_t p = 0; p < CC_PPB; p++)
			c.map[ids[NB * CC_PPB + p]][0] = 0x42;
		cc_seq_close(&c, rep.seq_id, ids, (NB + 1) * CC_PPB);
		cc_disconnect(&c);
		_exit(0);
	}
	close(a2b[1]);
	close(b2a[1]);
	t_assert_eq(cc_wait_child(b), 0);
	t_assert_eq(cc_wait_child(a), 0);
	close(a2b[0]);
	close(b2a[0]);
	printf("gpu share: %d read-only fds, the writer's still writable\n",
	       NB * CC_PPB);
	fflush(stdout); /* not again from a forked child's copy */
}

/*
 * 1b: a client of ABI 1.14, whose libkvmm mapped shared blocks
 * read-write, still gets read-write fds (KD_ABI_RO_FDS): its mapping
 * would fail with EACCES on a read-only one.  A client of this build's
 * minor got read-only ones above.
 */
static void old_client_reader(const char *sock)
{
	pid_t p = fork();

	t_assert(p >= 0);
	if (p == 0) {
		static char buf[KVMM_MSG_MAX];
		struct kvmm_prefix_open_reply *rep = (void *)buf;
		int fds[NB * CC_PPB + 1];
		uint32_t ids[NB * CC_PPB];
		unsigned int nfds;
		struct cc c;

		cc_connect_minor(&c, sock, 14);
		cc_region(&c);
		cc_prefix_send_flags(&c, hx, NB, 0);
		t_ok(cc_recv(&c, buf, sizeof(buf), fds, &nfds));
		t_assert_eq(rep->nr_blocks, NB);
		t_assert_eq(rep->from_gpu, NB);
		t_assert_eq(nfds, NB * CC_PPB);
		for (unsigned int k = 0; k < nfds; k++) {
			void *m = mmap(NULL, CC_PAGE, PROT_READ | PROT_WRITE,
				       MAP_SHARED, fds[k], 0);

			t_assert_eq(fcntl(fds[k], F_GETFL) & O_ACCMODE, O_RDWR);
			t_assert(m != MAP_FAILED);
			munmap(m, CC_PAGE);
		}
		cc_map(&c, rep->page_ids, NB * CC_PPB, fds, nfds);
		for (uint32_t i = 0; i < NB * CC_PPB; i++)
			ids[i] = rep->page_ids[i] & ~KVMM_PAGE_HELD;
		check_bytes(c.map[ids[CC_PPB + 1]], CC_PPB + 1);
		cc_seq_close(&c, rep->seq_id, ids, NB * CC_PPB);
		cc_disconnect(&c);
		_exit(0);
	}
	t_assert_eq(cc_wait_child(p), 0);
	printf("an ABI 1.14 client: read-write fds, as before\n");
	fflush(stdout);
}

/* 2: through libkvmm, no kvmm page mapping can be made writable. */
static void libkvmm_reader(const char *sock)
{
	pid_t p = fork();

	t_assert(p >= 0);
	if (p == 0) {
		struct kvmm_connect_opts co = { .size = sizeof(co),
						.socket_path = sock,
						.name = "ro-reader",
						.map_ahead_set = 1,
						.map_ahead_blocks = 0 };
		struct kvmm_region_opts ro = cc_region_opts();
		struct kvmm_region *r;
		struct kvmm_conn *c;
		char line[512];
		uint32_t seq, nb;
		int vmas = 0;
		FILE *f;

		t_ok(kvmm_connect(&co, &c));
		t_ok(kvmm_region_create(c, &ro, &r));
		t_ok(kvmm_seq_open_prefix(r, hx, NB, &seq, &nb));
		t_assert_eq(nb, NB);
		t_assert(cc_seq_content_ok(r, seq, NB, TAG, 1));
		f = fopen("/proc/self/maps", "re");
		t_assert(f != NULL);
		while (fgets(line, sizeof(line), f)) {
			unsigned long lo, hi;

			if (!strstr(line, "memfd:kvmm-page"))
				continue;
			t_assert_eq(sscanf(line, "%lx-%lx", &lo, &hi), 2);
			errno = 0;
			if (!mprotect((void *)lo, hi - lo,
				      PROT_READ | PROT_WRITE))
				t_fail("kvmm page mapping %lx-%lx made writable",
				       lo, hi);
			t_assert_eq(errno, EACCES);
			vmas++;
		}
		fclose(f);
		/* an anchor and a mapping per page, or runs of them merged */
		t_assert(vmas >= NB * CC_PPB / 2);
		t_assert(cc_seq_content_ok(r, seq, NB, TAG, 1));
		t_ok(kvmm_seq_close(r, seq));
		kvmm_disconnect(c);
		printf("libkvmm: %d kvmm page mappings refuse PROT_WRITE\n",
		       vmas);
		fflush(stdout);
		_exit(0);
	}
	t_assert_eq(cc_wait_child(p), 0);
}

/* 3: demoted to the host tier by other blocks, then restored. */
static void restored_reader(const char *sock)
{
	uint64_t other[NB];
	struct kvmm_prefix_open_reply rep;
	struct kvmm_tier_stats_reply ts;
	uint32_t ids[NB * CC_PPB];
	struct cc c;

	for (uint32_t i = 0; i < NB; i++)
		other[i] = 0x70f1000 + i;
	t_assert_eq(cc_publish_content(sock, other, NB, TAG_OTHER, NULL), 0);
	cc_settled_stats(sock, &ts);
	t_assert_eq(ts.tiers[1].used_blocks, NB); /* hx, on the host */

	cc_connect(&c, sock);
	cc_region(&c);
	open_readonly(&c, KVMM_PREFIX_OPEN_ACTIONS, &rep, ids);
	t_assert_eq(rep.from_host, NB);
	cc_check(&c, ids, NB, TAG);
	cc_seq_close(&c, rep.seq_id, ids, NB * CC_PPB);

	/* and a last reader gets A's bytes */
	cc_prefix(&c, hx, NB, &rep, ids);
	t_assert_eq(rep.nr_blocks, NB);
	cc_check(&c, ids, NB, TAG);
	cc_seq_close(&c, rep.seq_id, ids, NB * CC_PPB);
	cc_disconnect(&c);
	printf("host restore: read-only fds, bytes intact\n");
}

int main(void)
{
	/* two blocks on the GPU: the next content pushes hx to the host */
	const char *args[] = { "--cache-gpu-blocks", "2", "--host-mem", "2M",
			       NULL };
	struct td_daemon d;

	cc_start(&d, args);
	writer_and_reader(d.sock);
	old_client_reader(d.sock);
	libkvmm_reader(d.sock);
	restored_reader(d.sock);
	cc_stop(&d);
	return 0;
}
