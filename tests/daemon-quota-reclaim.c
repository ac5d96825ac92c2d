// SPDX-License-Identifier: MIT
/*
 * timeout: 90
 * A uid is not locked out of its quota by its own idle cached blocks: a
 * check over the quota first moves down the cached GPU blocks charged to
 * the uid that nothing uses, as a memory cgroup at its limit reclaims its
 * own page cache.  Processes of uid W, quota 2M (8 blocks of 4 pages),
 * against kvmmd (shared scope, lru, 16 GPU blocks, a host tier of 32):
 *
 *  - W publishes chain P (its whole quota), closes and hangs up.  A new
 *    process of W extends 1 block: it got -EDQUOT with the pool 97 %
 *    free and nothing in use by W, for as long as the cache kept P (a
 *    review's reproducer); now 1 block of P goes to the host tier and the
 *    extend is served once that copy is done (parked meanwhile).  8
 *    blocks fit in all, a 9th is -EDQUOT: P is all on the host then, and
 *    nothing is charged to W once it closed.
 *  - W publishes chain Q and opens P: the 8 restores need its quota,
 *    which Q's blocks give back (the prefix open's path: it got no
 *    block); P comes back whole and byte-identical, Q is on the host.
 *  - ADMIN_TENANTS shows W's quota, its use and its cached pages, and so
 *    do `kvmmctl tenants` and the metrics.
 *  - Without a host tier the victims are dropped: the extends are served
 *    at once (none parks), and the drops are counted.
 *
 * The cross-tenant case (a reader's restores) is
 * tests/daemon-quota-reclaim-reader.c.  Needs root (processes of another
 * uid).
 */
#include "tests/quota-reclaim-common.h"

#define UID_W 63301
#define NB QR_NB

static const char *const args[] = { "--socket-mode",
				    "0666",
				    "--cache-scope",
				    "shared",
				    "--cache-policy",
				    "lru",
				    "--cache-gpu-blocks",
				    "16",
				    "--host-mem",
				    "8M",
				    "--quota",
				    "63301=2M",
				    NULL };
static const char *const no_host[] = { "--socket-mode",
				       "0666",
				       "--cache-policy",
				       "lru",
				       "--cache-gpu-blocks",
				       "16",
				       "--quota",
				       "63301=2M",
				       NULL };

static uint64_t P[NB], Q[NB];

static void status(const struct td_daemon *d, struct kvmm_status_reply *st)
{
	struct kvmm_conn *c;

	t_ok(kc_connect_admin(d->sock, &c));
	t_ok(kc_request(c, KVMM_CMD_ADMIN_STATUS, NULL, 0, st, sizeof(*st),
			NULL));
	kvmm_disconnect(c);
}

int main(void)
{
	struct kvmm_status_reply st;
	struct td_daemon d;

	if (geteuid() != 0)
		t_skip("needs root, to run processes of other uids");
	for (int i = 0; i < NB; i++) {
		P[i] = 0x7f510000 + i + 1;
		Q[i] = 0x7f520000 + i + 1;
	}
	cu_start(&d, args);

	/* W's quota is all its idle cached blocks' */
	cu_publish_as(d.sock, UID_W, UID_W, P, NB, 1, NB);
	qr_expect_tiers(&d, NB, 0, 0);
	qr_expect_quota(&d, UID_W, NB * CC_PPB, NB * CC_PPB);
	{
		static char out[65536];

		t_assert_eq(td_kvmmctl(d.sock, "tenants", out, sizeof(out)), 0);
		printf("%s", out); /* admin.md's figure */
	}
	cu_kvmmctl_has(d.sock, "tenants", "       32       32       32  -\n");
	cu_kvmmctl_has(
		d.sock, "metrics",
		"kvmm_tenant_quota_cached_pages{kind=\"uid\",id=\"%u\"} 32\n",
		UID_W);
	qr_extend_as(d.sock, UID_W, NB); /* the 1st block was -EDQUOT */
	qr_expect_tiers(&d, 0, NB, NB);
	qr_expect_quota(&d, UID_W, 0, 0);
	status(&d, &st);
	t_assert(st.cmds_parked >= 1); /* waited for a copy down */
	t_assert_eq(st.pages_allocated, 0);

	/* a prefix open's restores take the room of W's cached Q */
	cu_publish_as(d.sock, UID_W, UID_W, Q, NB, 2, NB);
	qr_open_as(d.sock, UID_W, P, NB, 0, 1);
	qr_expect_tiers(&d, NB, NB, 2 * NB);
	qr_expect_quota(&d, UID_W, NB * CC_PPB, NB * CC_PPB);

	/* no host tier: the victims are dropped, the extend served at once */
	cc_stop(&d);
	cu_start(&d, no_host);
	cu_publish_as(d.sock, UID_W, UID_W, P, NB, 1, NB);
	qr_expect_quota(&d, UID_W, NB * CC_PPB, NB * CC_PPB);
	qr_extend_as(d.sock, UID_W, NB);
	status(&d, &st);
	t_assert_eq(st.cmds_parked, 0);
	{
		struct kvmm_tier_stats_reply ts;

		cc_settled_stats(d.sock, &ts);
		t_assert_eq(ts.tiers[0].used_blocks, 0);
		t_assert_eq(ts.tiers[0].drops, NB);
		t_assert_eq(ts.quota_reclaims, NB);
	}
	qr_expect_quota(&d, UID_W, 0, 0);
	qr_open_as(d.sock, 0, P, 0, 0, 1); /* gone */
	cc_stop(&d);
	printf("ok\n");
	return 0;
}
