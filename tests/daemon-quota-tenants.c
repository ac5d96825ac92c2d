// SPDX-License-Identifier: MIT
/*
 * timeout: 30
 * ADMIN_TENANTS (kvmmctl tenants) shows a uid's quota use while the uid
 * is only connected, and while only a quarantined process of it holds
 * pages.  uid 4331 has --quota 4331=1M (16 pages of 64 KiB); a process of
 * it extends a sequence over 2 blocks (8 pages) and waits:
 *   - its row says quota 16, used 8 (it said used 0: the rows of
 *     sessions not served yet were made after the quota was filled in);
 *   - it hangs up without BYE and lives on: its 8 pages are quarantined
 *     and still charged to the uid, and the row is still there with used
 *     8 (there was no row: nothing showed what held the uid's quota);
 *   - it exits: nothing quarantined, used 0.
 * Needs root (the client is another uid).
 */
#include "tests/cache-uids.h"

#define UID 4331

static void expect_used(const char *sock, uint64_t used)
{
	struct kvmm_tenants_reply *r = cu_tenants(sock);
	const struct kvmm_tenant_info *t = cu_tenant(r, UID);

	t_assert_eq(t->quota_pages, 16);
	t_assert_eq(t->quota_used_pages, used);
	free(r);
}

int main(void)
{
	const char *args[] = { "--quota", "4331=1M", NULL };
	int ready[2], go[2];
	struct td_daemon d;
	pid_t p;
	char b;

	if (geteuid())
		t_skip("needs root (a client of another uid)");
	cu_start(&d, args);
	t_ok(chmod(d.sock, 0777));
	t_ok(pipe(ready));
	t_ok(pipe(go));
	p = fork();
	t_assert(p >= 0);
	if (p == 0) {
		static uint32_t ids[CC_MAX_PAGES];
		struct cc c;
		uint32_t seq;

		close(ready[0]);
		close(go[1]);
		cu_become(UID, UID);
		cc_connect(&c, d.sock);
		cc_region(&c);
		seq = cc_seq_open(&c);
		cc_extend(&c, seq, 2 * CC_TPB, ids);
		t_assert_eq(write(ready[1], &b, 1), 1);
		t_assert_eq(read(go[0], &b, 1), 1);
		close(c.sock); /* no BYE; the pages stay mapped here */
		t_assert_eq(write(ready[1], &b, 1), 1);
		t_assert_eq(read(go[0], &b, 1), 0); /* until the parent says */
		_exit(0);
	}
	close(ready[1]);
	close(go[0]);
	t_assert_eq(read(ready[0], &b, 1), 1);
	expect_used(d.sock, 2 * CC_PPB);
	printf("connected: used %d of 16 pages\n", 2 * CC_PPB);

	t_assert_eq(write(go[1], &b, 1), 1);
	t_assert_eq(read(ready[0], &b, 1), 1);
	cc_wait_quarantined(&d, 2 * CC_PPB);
	expect_used(d.sock, 2 * CC_PPB);
	printf("quarantined: used %d of 16 pages\n", 2 * CC_PPB);

	close(go[1]);
	t_assert_eq(cc_wait_child(p), 0);
	cc_wait_quarantined(&d, 0);
	cc_stop(&d);
	printf("ok\n");
	return 0;
}
