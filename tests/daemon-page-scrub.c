// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * kvmmd never hands a client of one uid pages holding another uid's
 * bytes.  A process of uid A fills two blocks, closes its sequence and
 * leaves; the pages go back to the pool.  A process of A again gets them
 * as they were (no scrub: ADMIN_STATUS pages_scrubbed stays 0); then a
 * process of uid B extends two blocks and reads them before writing:
 * every byte is 0, and pages_scrubbed counts the 8 pages (before the fix
 * B read all of A's bytes).  B's own pages come back to B unscrubbed,
 * and A gets them zeroed again.  Needs root (processes of other uids).
 */
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/cache-uids.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

#define UID_A 63101
#define UID_B 63102
#define NB 2
#define TAG_A 0xA11CE
#define TAG_B 0xB0B

/*
 * A process of uid extends NB blocks and counts the bytes that are not 0
 * and those that hold tag's pattern, before it writes; then it fills them
 * with its own tag and leaves.  Exit 0, or 3 when want_zero and a byte is
 * not 0.
 */
static void as_uid(const char *sock, uid_t uid, uint64_t tag, bool want_zero)
{
	pid_t p = fork();

	t_assert(p >= 0);
	if (p == 0) {
		uint32_t pages[NB * CC_PPB];
		size_t nonzero = 0;
		struct cc c;
		uint32_t seq;

		cu_become(uid, uid);
		cc_connect(&c, sock);
		cc_region(&c);
		seq = cc_seq_open(&c);
		cc_extend(&c, seq, NB * CC_TPB, pages);
		for (uint32_t i = 0; i < NB * CC_PPB; i++) {
			const unsigned char *m = c.map[pages[i]];

			for (size_t o = 0; o < CC_PAGE; o++)
				nonzero += m[o] != 0;
		}
		printf("uid %u: %zu of %d bytes not zero in its new pages\n",
		       (unsigned)uid, nonzero, NB * CC_PPB * CC_PAGE);
		fflush(stdout);
		if (want_zero && nonzero)
			_exit(3);
		cc_fill(&c, pages, NB, tag);
		cc_check(&c, pages, NB, tag);
		cc_seq_close(&c, seq, pages, NB * CC_PPB);
		cc_disconnect(&c);
		_exit(0);
	}
	t_assert_eq(cc_wait_child(p), 0);
}

static uint64_t scrubbed(const struct td_daemon *d)
{
	struct kvmm_status_reply st;

	t_ok(td_wait_idle(d, 5000, &st));
	t_assert_eq(st.size, sizeof(st));
	t_assert_eq(st.page_scrub_failures, 0);
	return st.pages_scrubbed;
}

int main(void)
{
	const char *args[] = { NULL };
	struct td_daemon d;

	if (geteuid() != 0)
		t_skip("needs root: processes of other uids");
	cc_start(&d, args);
	t_ok(chmod(d.dir, 0755));
	t_ok(chmod(d.sock, 0777));

	as_uid(d.sock, UID_A, TAG_A, true); /* fresh pages: zeros */
	t_assert_eq(scrubbed(&d), 0);
	as_uid(d.sock, UID_A, TAG_A, false); /* its own pages back */
	t_assert_eq(scrubbed(&d), 0);
	as_uid(d.sock, UID_B, TAG_B, true);
	t_assert_eq(scrubbed(&d), NB * CC_PPB);
	as_uid(d.sock, UID_B, TAG_B, false);
	t_assert_eq(scrubbed(&d), NB * CC_PPB);
	as_uid(d.sock, UID_A, TAG_A, true);
	t_assert_eq(scrubbed(&d), 2 * NB * CC_PPB);
	{
		char out[8192];

		t_assert_eq(td_kvmmctl(d.sock, "status", out, sizeof(out)), 0);
		t_assert(strstr(
			out,
			"16 zeroed for a new owner (uid), 0 scrubs failed"));
		t_assert_eq(td_kvmmctl(d.sock, "status --json", out,
				       sizeof(out)),
			    0);
		t_assert(strstr(out, "\"scrubbed\":16,\"scrub_failures\":0"));
	}
	cc_stop(&d);
	printf("pages change uid only zeroed: %d scrubbed\n", 2 * NB * CC_PPB);
	return 0;
}
