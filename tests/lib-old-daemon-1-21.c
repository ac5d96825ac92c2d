// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * kvmmctl and the wire of the admin commands per block size (ABI 1.22)
 * between a new and an old side, with two block sizes cached
 * (--cache-block-pages 4,2):
 *   - against a kvmmd that plays a daemon of ABI 1.21
 *     (KVMMD_TEST_ABI_MINOR=21, a kvmmd test knob): kvmmctl cache-drop
 *     --block-pages and tenants --block-pages say the daemon is older
 *     than 1.22 without asking (exit 1; nothing dropped, kvmmd counts no
 *     command from them but those of a connection that asks nothing); kvmmctl tenants prints the sums' table alone
 *     and status no queued demotions per size, metrics each size's
 *     tier families but no kvmm_size_tenant_* or
 *     kvmm_size_demotions_queued; the requests sent raw
 *     (the drop's word, a tenants body) are -EINVAL, as a 1.21 daemon
 *     answered them; ADMIN_STATUS is its 720 bytes and a drop's reply
 *     its 104;
 *   - against this kvmmd, a client whose HELLO says 1.21 gets the same:
 *     the 720 and 104 bytes of before, -EINVAL for the new words.
 *
 * The same daemon without the knob: tests/cache-multi-size-admin.c.
 */
#include "tests/cache-common.h"
#include "tests/cache-drop-common.h"
#include "tests/lib/daemon.h"

#define NB 3

static const struct cc_contents contents = { .base = 0x7f0000,
					     .tag0 = 40,
					     .nb = NB };

/* The socket commands kvmmd counted since the start (ADMIN_STATUS). */
static uint64_t cmds(const struct td_daemon *d)
{
	struct kvmm_status_reply st;

	t_ok(td_status(d, &st));
	return st.cmds_socket;
}

/* kvmmctl ARGS exits status, its output (stderr too) holding what. */
static void ctl(const char *sock, const char *args, int status,
		const char *what)
{
	static char out[1 << 16];
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "%s 2>&1", args);
	t_assert_eq(td_kvmmctl(sock, cmd, out, sizeof(out)), status);
	if (what && !strstr(out, what))
		t_fail("kvmmctl %s: no '%s' in:\n%s", args, what, out);
	if (!what &&
	    (strstr(out, "pages alone") || strstr(out, "demotions queued")))
		t_fail("kvmmctl %s against 1.21 shows sizes:\n%s", args, out);
}

static void tools(const struct td_daemon *d)
{
	struct kvmm_tier_stats_reply ts;
	uint64_t before, idle;
	struct kvmm_conn *c;

	/* what a connection that asks nothing costs (HELLO, BYE), and
	 * cmds() itself: kvmmctl's refusals cost the same, nothing sent */
	before = cmds(d);
	t_ok(kc_connect_admin(d->sock, &c));
	kvmm_disconnect(c);
	idle = cmds(d) - before;
	before += idle;
	ctl(d->sock, "cache-drop --block-pages 4", 1,
	    "kvmmctl: cache-drop: --block-pages: kvmmd is older than ABI 1.22");
	t_assert_eq(cmds(d) - before, idle);
	before += idle;
	ctl(d->sock, "tenants --block-pages 2", 1,
	    "kvmmctl: tenants: --block-pages: kvmmd is older than ABI 1.22");
	t_assert_eq(cmds(d) - before, idle);
	cc_settled_stats(d->sock, &ts);
	t_assert_eq(ts.tiers[0].used_blocks, NB);
	ctl(d->sock, "tenants", 0, NULL);
	ctl(d->sock, "status", 0, NULL);
	/* kvmmctl metrics: each size's tier families (1.21 has them), not
	 * the tenants' or queued demotions' of each size (1.22) */
	{
		static char out[1 << 17];

		t_assert_eq(td_kvmmctl(d->sock, "metrics", out, sizeof(out)),
			    0);
		if (!strstr(out, "\nkvmm_size_tier_used_blocks{size=\"4\","
				 "tier=\"gpu\"} 3\n") ||
		    strstr(out, "kvmm_size_tenant_") ||
		    strstr(out, "kvmm_size_demotions_queued"))
			t_fail("kvmmctl metrics against 1.21:\n%s", out);
	}
}

/* A client of 1.minor (the daemon's, or 1.21 against this one). */
static void wire(const char *sock, uint16_t minor)
{
	struct kvmm_admin_cache_drop a = { .size = sizeof(a),
					   .tiers = KVMM_CACHE_DROP_HOST,
					   .block_pages = 4 };
	struct kvmm_admin_tenants_req q = { .size = sizeof(q),
					    .block_pages = 4 };
	struct kvmm_admin_cache_drop_reply r;
	struct kvmm_status_reply st;
	static char buf[KVMM_MSG_MAX];
	struct cc c;

	cc_connect_minor(&c, sock, minor);
	t_assert_eq(cc_call(&c, KVMM_CMD_ADMIN_CACHE_DROP, &a, sizeof(a), &r,
			    sizeof(r), NULL, NULL),
		    -EINVAL);
	t_assert_eq(cc_call(&c, KVMM_CMD_ADMIN_TENANTS, &q, sizeof(q), buf,
			    sizeof(buf), NULL, NULL),
		    -EINVAL);
	memset(&st, 0xa5, sizeof(st));
	t_ok(cc_call(&c, KVMM_CMD_ADMIN_STATUS, NULL, 0, &st, sizeof(st), NULL,
		     NULL));
	t_assert_eq(st.size, offsetof(struct kvmm_status_reply, nr_sizes));
	t_assert_eq(st.size, 720);
	t_assert_eq(st.nr_sizes, 0xa5a5a5a5u); /* not sent */
	a.block_pages = 0;
	memset(&r, 0xa5, sizeof(r));
	t_ok(cc_call(&c, KVMM_CMD_ADMIN_CACHE_DROP, &a, sizeof(a), &r,
		     sizeof(r), NULL, NULL));
	t_assert_eq(r.size,
		    offsetof(struct kvmm_admin_cache_drop_reply, block_pages));
	t_assert_eq(r.size, 104);
	t_assert_eq(r.nr_sizes, 0xa5a5a5a5u);
	t_assert_eq(r.dropped[0], 0); /* the host tier alone: none there */
	cc_disconnect(&c);
}

int main(void)
{
	const char *args[] = { "--cache-block-pages", "4,2", "--host-mem", "4M",
			       NULL };
	struct td_daemon d;

	_Static_assert(CC_PPB == 4, "the first named size is the tests'");
	cc_start_with_delay(&d, args, "KVMMD_TEST_ABI_MINOR", 21);
	cc_write_content(d.sock, &contents, 0);
	tools(&d);
	wire(d.sock, KVMM_ABI_MINOR);
	cc_stop(&d);

	cc_start(&d, args);
	wire(d.sock, 21);
	cc_stop(&d);
	return 0;
}
