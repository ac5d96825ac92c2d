// SPDX-License-Identifier: MIT
/*
 * A libkvmm client of the host backend holds no fd per page it maps.  A
 * client process lowers its own soft RLIMIT_NOFILE to 64, then maps 512
 * distinct pages of a real kvmmd (4 KiB pages, 4 per block) in three
 * sequences, extending 8 blocks (32 new pages, 32 fds in one reply) at a
 * time: A grows to 64 blocks and publishes its first 8, B opens that
 * prefix (the same 32 pages mapped a second time, nothing imported) and
 * grows to 64 blocks, C grows to 8.  Every page is filled and read back,
 * bytes written through B's prefix appear in A's, and between extends
 * the process holds exactly the fds it held once connected (the fds of
 * one reply are in flight only until imported).  The maps show what it
 * costs instead: one anchor per imported page plus one mapping per mapped
 * page.  When an imported page
 * kept its fd, A's second extend failed: with 9 + 32 fds held, the next
 * reply's 32 did not fit under 64 (recvmsg truncated them: -EMSGSIZE).
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

#define PAGE 4096
#define LIMIT 64
#define BLOCKS 64 /* per long sequence */
#define STEP 8 /* blocks per extend: 32 fds in flight */
#define PREFIX 8
#define PPB 4 /* 2 layers x K,V */
#define IMPORTED ((BLOCKS + (BLOCKS - PREFIX) + STEP) * PPB) /* 512 */
#define MAPPED ((2 * BLOCKS + STEP) * PPB) /* 544 */

static const char *const args[] = { "--page-size", "4K", "--gpu-mem", "4M",
				    NULL };

static struct kvmm_region_opts ro = {
	.size = sizeof(ro),
	.layers = 2,
	.kv_heads = 1,
	.head_dim = 64,
	.dtype_bytes = 2, /* 32 tokens per 4 KiB block */
	.max_seqs = 4,
	.max_tokens = BLOCKS * 32,
	.salt = 11,
};

static struct td_daemon d;
static int max_fds;

static int count_fds(void)
{
	DIR *dir = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	t_assert(dir != NULL);
	while ((e = readdir(dir)))
		if (e->d_name[0] != '.')
			n++;
	closedir(dir);
	n--; /* the DIR's own */
	if (n > max_fds)
		max_fds = n;
	return n;
}

/* Mappings in /proc/self/maps, and how many are kvmm pages. */
static int count_maps(int *pages)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	int n = 0;

	t_assert(f != NULL);
	*pages = 0;
	while (fgets(line, sizeof(line), f)) {
		n++;
		if (strstr(line, "memfd:kvmm-page"))
			(*pages)++;
	}
	fclose(f);
	return n;
}

static uint8_t *page_of(struct kvmm_region *r, uint32_t s, uint32_t i,
			uint32_t b)
{
	uint64_t base = (i & 1) ? kvmm_seq_v_ptr(r, s, i / 2) :
				  kvmm_seq_k_ptr(r, s, i / 2);

	return (uint8_t *)(uintptr_t)(base + (uint64_t)b * PAGE);
}

static uint8_t val(uint32_t s, uint32_t i, uint32_t b)
{
	return (uint8_t)(s * 101 + i * 37 + b * 7 + 1);
}

static void fill(struct kvmm_region *r, uint32_t s, uint32_t from, uint32_t to)
{
	for (uint32_t b = from; b < to; b++)
		for (uint32_t i = 0; i < PPB; i++)
			memset(page_of(r, s, i, b), val(s, i, b), PAGE);
}

static void check(struct kvmm_region *r, uint32_t s, uint32_t from, uint32_t to,
		  uint32_t as)
{
	for (uint32_t b = from; b < to; b++)
		for (uint32_t i = 0; i < PPB; i++) {
			const uint8_t *p = page_of(r, s, i, b);

			for (int o = 0; o < PAGE; o += 61)
				t_assert_eq(p[o], val(as, i, b));
			t_assert_eq(p[PAGE - 1], val(as, i, b));
		}
}

/* Extend s from block `from` to `to`, STEP blocks per request. */
static void grow(struct kvmm_region *r, uint32_t s, uint32_t from, uint32_t to)
{
	for (uint32_t b = from; b < to; b += STEP) {
		uint32_t n = b + STEP < to ? b + STEP : to;
		int err = kvmm_seq_extend(r, s, n * 32);

		if (err)
			t_fail("extend to block %u under %d fds (%d open): %s",
			       n, LIMIT, count_fds(), strerror(-err));
		count_fds();
	}
}

static int client(void)
{
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.name = "nofile",
					.map_ahead_set = 1,
					.map_ahead_blocks = 0 };
	struct kvmm_stats ks = { .size = sizeof(ks) };
	struct kvmm_status_reply st;
	uint64_t hashes[PREFIX];
	struct rlimit rl;
	struct kvmm_conn *c;
	struct kvmm_region *r;
	uint32_t a, b, cs, n;
	int before, connected, after, maps0, maps, pages;

	t_ok(getrlimit(RLIMIT_NOFILE, &rl) ? -errno : 0);
	rl.rlim_cur = LIMIT;
	t_ok(setrlimit(RLIMIT_NOFILE, &rl) ? -errno : 0);
	before = count_fds();
	maps0 = count_maps(&pages);
	t_assert_eq(pages, 0);

	t_ok(kvmm_connect(&co, &c));
	t_ok(kvmm_region_create(c, &ro, &r));
	t_assert_eq(kvmm_region_tokens_per_block(r), 32);
	connected = count_fds();

	t_ok(kvmm_seq_open(r, &a));
	grow(r, a, 0, BLOCKS);
	fill(r, a, 0, BLOCKS);
	for (int i = 0; i < PREFIX; i++)
		hashes[i] = 0x5100 + i;
	t_assert_eq(kvmm_block_publish(r, a, 0, PREFIX, 0, hashes), PREFIX);

	/* B: A's prefix, mapped here a second time, then its own blocks. */
	t_ok(kvmm_seq_open_prefix(r, hashes, PREFIX, &b, &n));
	t_assert_eq(n, PREFIX);
	count_fds();
	check(r, b, 0, PREFIX, a);
	grow(r, b, PREFIX, BLOCKS);
	fill(r, b, PREFIX, BLOCKS);
	t_ok(kvmm_seq_open(r, &cs));
	grow(r, cs, 0, STEP);
	fill(r, cs, 0, STEP);

	check(r, a, 0, BLOCKS, a);
	check(r, b, 0, PREFIX, a);
	check(r, b, PREFIX, BLOCKS, b);
	check(r, cs, 0, STEP, cs);
	/* One physical page behind A's and B's prefix slots. */
	memcpy(page_of(r, b, 3, 5) + 100, "via B", 6);
	t_assert(!strcmp((const char *)page_of(r, a, 3, 5) + 100, "via B"));

	t_ok(kvmm_get_stats(c, &ks));
	t_assert_eq(ks.pages_imported, IMPORTED);
	t_assert_eq(ks.pages_mapped, MAPPED);
	t_ok(td_status(&d, &st));
	t_assert_eq(st.pages_allocated, IMPORTED);
	t_assert_eq(st.pages_mapped, IMPORTED);
	after = count_fds();
	maps = count_maps(&pages);
	/* No fd per page: what connect opened, nothing per page. */
	t_assert_eq(after, connected);
	t_assert_eq(max_fds, connected);
	/* A VMA per imported page (its anchor) and one per mapping. */
	t_assert_eq(pages, IMPORTED + MAPPED);
	printf("client under RLIMIT_NOFILE %d: %d pages imported, %d mapped; fds %d before connect, %d connected, %d after, at most %d; %d VMAs (%d before), %d of them kvmm pages\n",
	       LIMIT, IMPORTED, MAPPED, before, connected, after, max_fds, maps,
	       maps0, pages);

	t_ok(kvmm_seq_close(r, b));
	t_assert(!strcmp((const char *)page_of(r, a, 3, 5) + 100, "via B"));
	t_ok(kvmm_seq_close(r, a));
	t_ok(kvmm_seq_close(r, cs));
	count_maps(&pages);
	t_assert_eq(pages, 0);
	t_ok(kvmm_region_destroy(r));
	kvmm_disconnect(c);
	t_assert_eq(count_fds(), before);
	return 0;
}

int main(void)
{
	struct kvmm_status_reply st;
	pid_t pid;
	int status, err;

	err = td_start(&d, args);
	if (err)
		t_fail("daemon: %s", strerror(-err));
	fflush(stdout);
	pid = fork();
	t_assert(pid >= 0);
	if (pid == 0)
		exit(client());
	t_assert_eq(waitpid(pid, &status, 0), pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		td_dump_log(&d);
		t_fail("client failed (status %#x)", status);
	}
	/* Nothing mapped once the client is gone (the cache keeps owning
	 * the published prefix, so pages stay allocated). */
	for (int i = 0; i < 500; i++) {
		t_ok(td_status(&d, &st));
		if (!st.pages_mapped && !st.sequences && st.sessions == 1)
			break;
		usleep(10000);
	}
	t_assert_eq(st.pages_mapped, 0);
	t_assert_eq(st.sequences, 0);
	t_assert_eq(td_stop(&d), 0);
	printf("ok\n");
	return 0;
}
