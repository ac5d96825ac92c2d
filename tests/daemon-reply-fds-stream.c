// SPDX-License-Identifier: MIT
/*
 * A libkvmm client needs room for one message's fds (253), not for a whole
 * reply's: each SEQ_EXTEND or PREFIX_OPEN message's fds are imported and
 * closed before the next message is received.  A real kvmmd (4 KiB host
 * pages, 4 per block); a publisher process fills and publishes a prefix of
 * 80 blocks (320 pages) and exits (the cache keeps the blocks); a client
 * process lowers its soft RLIMIT_NOFILE to 280, below either reply:
 *   - ONE extend of a fresh sequence to 160 blocks: 640 new pages, 640
 *     fds in three messages (253 + 253 + 134);
 *   - ONE prefix open of the published prefix: 320 new pages (it holds
 *     none of them), 320 fds in two messages;
 * every page is written and read back (the prefix shows the publisher's
 * bytes), and after each call the process holds exactly the fds it held
 * once connected.  While a call runs it may hold those plus one
 * message's 253, which the limit of 280 allows and the kernel enforces.
 * When libkvmm received a whole reply before importing any page, both
 * calls failed here (-EPROTO: recvmsg() cut the second message's fds
 * short, MSG_CTRUNC).  Under a limit below its own fds + 253 no message
 * of 253 fds fits at all, however it is handled (the kernel delivers a
 * message's fds in one go): tests/daemon-reply-fds-error.c shows that
 * extend failing -EMFILE and leaving the client as it was.
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
#define LIMIT 280
#define BLOCKS 160 /* one extend: 640 pages */
#define PREFIX 80 /* one prefix open: 320 pages */
#define PPB 4 /* 2 layers x K,V */

static const char *const args[] = { "--page-size", "4K", "--gpu-mem", "8M",
				    NULL };

static struct kvmm_region_opts ro = {
	.size = sizeof(ro),
	.layers = 2,
	.kv_heads = 1,
	.head_dim = 64,
	.dtype_bytes = 2, /* 32 tokens per 4 KiB block */
	.max_seqs = 4,
	.max_tokens = BLOCKS * 32,
	.salt = 23,
};

static const struct kvmm_connect_opts co = { .size = sizeof(co),
					     .name = "fd-stream",
					     .map_ahead_set = 1,
					     .map_ahead_blocks = 0 };

static struct td_daemon d;

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
	return n - 1; /* the DIR's own */
}

static uint8_t *page_of(struct kvmm_region *r, uint32_t s, uint32_t i,
			uint32_t b)
{
	uint64_t base = (i & 1) ? kvmm_seq_v_ptr(r, s, i / 2) :
				  kvmm_seq_k_ptr(r, s, i / 2);

	return (uint8_t *)(uintptr_t)(base + (uint64_t)b * PAGE);
}

static uint8_t val(uint32_t who, uint32_t i, uint32_t b)
{
	return (uint8_t)(who * 101 + i * 37 + b * 7 + 1);
}

static void fill(struct kvmm_region *r, uint32_t s, uint32_t to, uint32_t who)
{
	for (uint32_t b = 0; b < to; b++)
		for (uint32_t i = 0; i < PPB; i++)
			memset(page_of(r, s, i, b), val(who, i, b), PAGE);
}

static void check(struct kvmm_region *r, uint32_t s, uint32_t to, uint32_t who)
{
	for (uint32_t b = 0; b < to; b++)
		for (uint32_t i = 0; i < PPB; i++) {
			const uint8_t *p = page_of(r, s, i, b);

			for (int o = 0; o < PAGE; o += 61)
				t_assert_eq(p[o], val(who, i, b));
			t_assert_eq(p[PAGE - 1], val(who, i, b));
		}
}

static void hashes_of(uint64_t *h)
{
	for (int i = 0; i < PREFIX; i++)
		h[i] = 0x7700 + i;
}

/* Fills PREFIX blocks with its bytes and publishes them. */
static int publisher(void)
{
	uint64_t hashes[PREFIX];
	struct kvmm_conn *c;
	struct kvmm_region *r;
	uint32_t s;

	t_ok(kvmm_connect(&co, &c));
	t_ok(kvmm_region_create(c, &ro, &r));
	t_ok(kvmm_seq_open(r, &s));
	t_ok(kvmm_seq_extend(r, s, PREFIX * 32));
	fill(r, s, PREFIX, 1);
	hashes_of(hashes);
	t_assert_eq(kvmm_block_publish(r, s, 0, PREFIX, 0, hashes), PREFIX);
	t_ok(kvmm_seq_close(r, s));
	t_ok(kvmm_region_destroy(r));
	kvmm_disconnect(c);
	return 0;
}

static int client(void)
{
	struct kvmm_stats ks = { .size = sizeof(ks) };
	uint64_t hashes[PREFIX];
	struct kvmm_conn *c;
	struct kvmm_region *r;
	struct rlimit rl;
	uint32_t a, p, n;
	int before, connected, err;

	t_ok(getrlimit(RLIMIT_NOFILE, &rl) ? -errno : 0);
	rl.rlim_cur = LIMIT;
	t_ok(setrlimit(RLIMIT_NOFILE, &rl) ? -errno : 0);
	before = count_fds();
	t_ok(kvmm_connect(&co, &c));
	t_ok(kvmm_region_create(c, &ro, &r));
	connected = count_fds();
	/* room for its own fds and one message's, not for either reply */
	t_assert(connected + KVMM_MSG_MAX_FDS <= LIMIT);
	t_assert(BLOCKS * PPB > LIMIT && PREFIX * PPB > LIMIT);

	t_ok(kvmm_seq_open(r, &a));
	err = kvmm_seq_extend(r, a, BLOCKS * 32);
	if (err)
		t_fail("one extend of %d pages under RLIMIT_NOFILE %d: %s",
		       BLOCKS * PPB, LIMIT, strerror(-err));
	t_assert_eq(count_fds(), connected);
	t_assert_eq(kvmm_seq_len(r, a), BLOCKS * 32);
	fill(r, a, BLOCKS, 2);
	check(r, a, BLOCKS, 2);

	hashes_of(hashes);
	err = kvmm_seq_open_prefix(r, hashes, PREFIX, &p, &n);
	if (err)
		t_fail("one prefix open of %d pages under RLIMIT_NOFILE %d: %s",
		       PREFIX * PPB, LIMIT, strerror(-err));
	t_assert_eq(n, PREFIX);
	t_assert_eq(count_fds(), connected);
	check(r, p, PREFIX, 1); /* the publisher's bytes */
	check(r, a, BLOCKS, 2);
	memset(page_of(r, p, 3, PREFIX - 1), 0x5a, PAGE);
	t_assert_eq(page_of(r, p, 3, PREFIX - 1)[PAGE - 1], 0x5a);

	t_ok(kvmm_get_stats(c, &ks));
	t_assert_eq(ks.pages_imported, (BLOCKS + PREFIX) * PPB);
	t_assert_eq(ks.pages_mapped, (BLOCKS + PREFIX) * PPB);
	printf("client under RLIMIT_NOFILE %d: one extend of %d new pages, one prefix open of %d; fds %d before connect, %d connected, %d after each\n",
	       LIMIT, BLOCKS * PPB, PREFIX * PPB, before, connected,
	       count_fds());
	t_ok(kvmm_seq_close(r, p));
	t_ok(kvmm_seq_close(r, a));
	t_ok(kvmm_region_destroy(r));
	kvmm_disconnect(c);
	t_assert_eq(count_fds(), before);
	return 0;
}

static void run(int (*fn)(void), const char *what)
{
	int status;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	t_assert(pid >= 0);
	if (pid == 0)
		exit(fn());
	t_assert_eq(waitpid(pid, &status, 0), pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		td_dump_log(&d);
		t_fail("%s failed (status %#x)", what, status);
	}
}

int main(void)
{
	struct kvmm_status_reply st;
	int err;

	err = td_start(&d, args);
	if (err)
		t_fail("daemon: %s", strerror(-err));
	run(publisher, "publisher");
	run(client, "client");
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
