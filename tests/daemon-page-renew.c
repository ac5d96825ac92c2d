// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * A client that lies about unmapping reads nothing of another cache
 * scope's.  A process of uid L extends two blocks, fills them, keeps a
 * second mapping of every page (mremap of its shared mappings: nothing the
 * daemon can see), then closes its sequence and says BYE as an honest
 * client would, and stays alive.  A process of uid V extends two blocks:
 * the pool hands it the same page ids; it checks they read zero and fills
 * them.  Then L reads its kept mappings.
 *
 *   --cache-scope shared (one trust domain, the default): V's pages were
 *   L's, scrubbed; L reads every byte V wrote.  This is the attack, shown
 *   to work, so the two cases below could fail.
 *   --cache-scope uid, and gid with L and V in different groups: the
 *   pages were renewed (ADMIN_STATUS pages_renewed 8, none scrubbed); L
 *   reads its own bytes and none of V's.
 *
 * kvmmctl status (text, --json) and metrics show the count.  Needs root
 * (processes of other uids).
 */
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tests/cache-uids.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

#define UID_L 63201
#define UID_V 63202
#define NB 2
#define NP (NB * CC_PPB)
#define BYTE_L 0x11
#define BYTE_V 0xEE

struct liar {
	pid_t pid;
	int go; /* parent -> liar */
	int said; /* liar -> parent */
};

static void put(int fd, const void *p, size_t n)
{
	t_assert_eq(write(fd, p, n), (ssize_t)n);
}

static void get(int fd, void *p, size_t n)
{
	t_assert_eq(read(fd, p, n), (ssize_t)n);
}

/* uid L's process: fills NB blocks, keeps copies of their mappings, closes
 * and says BYE; on "go", reports how many kept bytes hold L's byte and how
 * many V's. */
static void liar_start(struct liar *l, const char *sock, gid_t gid)
{
	int down[2], up[2];

	t_ok(pipe(down));
	t_ok(pipe(up));
	l->pid = fork();
	t_assert(l->pid >= 0);
	if (l->pid == 0) {
		unsigned char *kept[NP];
		uint32_t pages[NP];
		size_t mine = 0, theirs = 0;
		struct cc c;
		uint32_t seq;
		char x;

		close(down[1]);
		close(up[0]);
		cu_become(UID_L, gid);
		cc_connect(&c, sock);
		cc_region(&c);
		seq = cc_seq_open(&c);
		cc_extend(&c, seq, NB * CC_TPB, pages);
		for (int i = 0; i < NP; i++) {
			memset(c.map[pages[i]], BYTE_L, CC_PAGE);
			kept[i] = mremap(c.map[pages[i]], 0, CC_PAGE,
					 MREMAP_MAYMOVE);
			t_assert(kept[i] != MAP_FAILED);
		}
		cc_seq_close(&c, seq, pages, NP);
		cc_disconnect(&c);
		put(up[1], "r", 1);
		get(down[0], &x, 1);
		for (int i = 0; i < NP; i++)
			for (size_t o = 0; o < CC_PAGE; o++) {
				mine += kept[i][o] == BYTE_L;
				theirs += kept[i][o] == BYTE_V;
			}
		put(up[1], &mine, sizeof(mine));
		put(up[1], &theirs, sizeof(theirs));
		_exit(0);
	}
	close(down[0]);
	close(up[1]);
	l->go = down[1];
	l->said = up[0];
}

/* uid V's process: extends NB blocks, which must read zero, fills them,
 * says so and waits for "done" before it closes them. */
static pid_t victim_start(const char *sock, gid_t gid, int *go, int *said)
{
	int down[2], up[2];
	pid_t p;

	t_ok(pipe(down));
	t_ok(pipe(up));
	p = fork();
	t_assert(p >= 0);
	if (p == 0) {
		uint32_t pages[NP];
		size_t nonzero = 0;
		struct cc c;
		uint32_t seq;
		char x;

		close(down[1]);
		close(up[0]);
		cu_become(UID_V, gid);
		cc_connect(&c, sock);
		cc_region(&c);
		seq = cc_seq_open(&c);
		cc_extend(&c, seq, NB * CC_TPB, pages);
		for (int i = 0; i < NP; i++) {
			for (size_t o = 0; o < CC_PAGE; o++)
				nonzero += c.map[pages[i]][o] != 0;
			memset(c.map[pages[i]], BYTE_V, CC_PAGE);
		}
		put(up[1], &nonzero, sizeof(nonzero));
		get(down[0], &x, 1);
		cc_seq_close(&c, seq, pages, NP);
		cc_disconnect(&c);
		_exit(0);
	}
	close(down[0]);
	close(up[1]);
	*go = down[1];
	*said = up[0];
	return p;
}

/* One round under scope; returns the bytes of V's the liar read. */
static size_t round_under(const char *scope, gid_t gid_l, gid_t gid_v,
			  uint64_t *renewed, uint64_t *scrubbed)
{
	const char *args[] = { "--cache-scope", scope, NULL };
	size_t mine, theirs, nonzero;
	struct kvmm_status_reply st;
	int vgo, vsaid;
	struct td_daemon d;
	struct liar l;
	pid_t v;
	char x;

	cu_start(&d, args);
	t_ok(chmod(d.sock, 0777));
	liar_start(&l, d.sock, gid_l);
	get(l.said, &x, 1);
	v = victim_start(d.sock, gid_v, &vgo, &vsaid);
	get(vsaid, &nonzero, sizeof(nonzero));
	t_assert_eq(nonzero, 0);
	put(l.go, "g", 1);
	get(l.said, &mine, sizeof(mine));
	get(l.said, &theirs, sizeof(theirs));
	put(vgo, "d", 1);
	t_assert_eq(cc_wait_child(v), 0);
	t_assert_eq(cc_wait_child(l.pid), 0);
	close(l.go);
	close(l.said);
	close(vgo);
	close(vsaid);
	t_ok(td_wait_idle(&d, 5000, &st));
	t_assert_eq(st.size, sizeof(st));
	t_assert_eq(st.page_renew_failures, 0);
	*renewed = st.pages_renewed;
	*scrubbed = st.pages_scrubbed;
	if (!strcmp(scope, "uid")) {
		static char out[1 << 18]; /* metrics' whole text */

		t_assert_eq(td_kvmmctl(d.sock, "status", out, sizeof(out)), 0);
		t_assert(strstr(
			out,
			"8 renewed for another cache scope, 0 renewals failed"));
		t_assert_eq(td_kvmmctl(d.sock, "status --json", out,
				       sizeof(out)),
			    0);
		t_assert(strstr(out, "\"renewed\":8,\"renew_failures\":0,"));
		t_assert_eq(td_kvmmctl(d.sock, "metrics", out, sizeof(out)), 0);
		t_assert(strstr(out, "\nkvmm_pool_renewed_pages_total 8\n"));
	}
	cc_stop(&d);
	printf("--cache-scope %s: the liar kept %zu of its own bytes and read %zu of the next owner's; %llu pages renewed, %llu scrubbed\n",
	       scope, mine, theirs, (unsigned long long)*renewed,
	       (unsigned long long)*scrubbed);
	if (!theirs)
		t_assert_eq(mine, (size_t)NP * CC_PAGE);
	return theirs;
}

int main(void)
{
	uint64_t renewed, scrubbed;

	if (geteuid() != 0)
		t_skip("needs root: processes of other uids");

	/* one trust domain: the lie works (what the other rounds rule out) */
	t_assert_eq(round_under("shared", UID_L, UID_V, &renewed, &scrubbed),
		    (size_t)NP * CC_PAGE);
	t_assert_eq(renewed, 0);
	t_assert_eq(scrubbed, NP);

	t_assert_eq(round_under("uid", UID_L, UID_V, &renewed, &scrubbed), 0);
	t_assert_eq(renewed, NP);
	t_assert_eq(scrubbed, 0);

	t_assert_eq(round_under("gid", UID_L, UID_V, &renewed, &scrubbed), 0);
	t_assert_eq(renewed, NP);
	t_assert_eq(scrubbed, 0);
	return 0;
}
