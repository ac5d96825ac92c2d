// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * libkvmm and kvmmctl against a kvmmd that plays a daemon of ABI 1.20
 * (KVMMD_TEST_ABI_MINOR=20, a kvmmd test knob), caching two block sizes
 * (--cache-block-pages 4,2): its TIER_STATS is the 656 bytes of 1.20
 * (every size summed, no sizes listed) and a request with a body is
 * -EINVAL, as a 1.20 daemon answered it.
 *
 *   - kvmm_tier_stats_size() of one size answers -EOPNOTSUPP without
 *     sending anything (the session's socket commands, as kvmmd counts
 *     them, do not move); of size 0 it is kvmm_tier_stats(): the sum,
 *     656 bytes, the published blocks counted;
 *   - the same request sent raw (struct kvmm_tier_stats_req) is -EINVAL;
 *   - kvmmctl status and --json status show the sums alone, with no
 *     block of each size, and kvmmctl metrics no kvmm_size_tier_*
 *     family: what it printed against 1.20.
 *
 * The same daemon without the knob shows both sizes: tests/cache-multi-size.c.
 */
#include "tests/cache-common.h"
#include "tests/lib/daemon.h"

#define NB 3

static const struct cc_contents contents = { .base = 0x7e0000,
					     .tag0 = 30,
					     .nb = NB };

/* The socket commands kvmmd counted for c's session (STATS itself is
 * one of them). */
static uint64_t sent(struct kvmm_conn *c)
{
	struct kvmm_stats ks = { .size = sizeof(ks) };

	t_ok(kvmm_get_stats(c, &ks));
	return ks.cmds_socket;
}

static void lib(struct kvmm_conn *c)
{
	struct kvmm_daemon_info di = { .size = sizeof(di) };
	struct kvmm_tier_stats_reply ts;
	uint64_t before;

	t_ok(kvmm_get_daemon_info(c, &di));
	t_assert_eq(di.abi_minor, 20);
	before = sent(c);
	t_assert_eq(kvmm_tier_stats_size(c, CC_PPB, &ts, sizeof(ts)),
		    -EOPNOTSUPP);
	t_assert_eq(kvmm_tier_stats_size(c, 2, &ts, sizeof(ts)), -EOPNOTSUPP);
	t_assert_eq(sent(c), before + 1); /* the STATS alone */
	memset(&ts, 0xa5, sizeof(ts));
	t_ok(kvmm_tier_stats_size(c, 0, &ts, sizeof(ts)));
	t_assert_eq(ts.size,
		    offsetof(struct kvmm_tier_stats_reply, block_pages));
	t_assert_eq(ts.size, 656);
	/* the fields 1.20 lacks read 0 */
	t_assert_eq(ts.block_pages, 0);
	t_assert_eq(ts.nr_sizes, 0);
	t_assert_eq(ts.publishes, NB);
	t_assert_eq(ts.tiers[1].capacity_blocks, 8 + 16); /* both sizes' */
}

static void raw_body(const char *sock)
{
	struct kvmm_tier_stats_req q = { .size = sizeof(q), .block_pages = 2 };
	struct kvmm_tier_stats_reply ts;
	struct cc c;

	cc_connect(&c, sock);
	t_assert_eq(cc_call(&c, KVMM_CMD_TIER_STATS, &q, sizeof(q), &ts,
			    sizeof(ts), NULL, NULL),
		    -EINVAL);
	cc_disconnect(&c);
}

static void tools(const struct td_daemon *d)
{
	static char out[1 << 17];

	t_assert_eq(td_kvmmctl(d->sock, "status", out, sizeof(out)), 0);
	if (!strstr(out, "\ntier host    0/24 blocks") ||
	    strstr(out, "\nsizes ") || strstr(out, "\nsize "))
		t_fail("kvmmctl status against 1.20:\n%s", out);
	t_assert_eq(td_kvmmctl(d->sock, "--json status", out, sizeof(out)), 0);
	if (!strstr(out, "\"blocks_unshared\"") ||
	    strstr(out, "\"block_pages\""))
		t_fail("kvmmctl --json status against 1.20:\n%s", out);
	t_assert_eq(td_kvmmctl(d->sock, "metrics", out, sizeof(out)), 0);
	if (strstr(out, "kvmm_size_tier_") ||
	    !strstr(out, "kvmm_tier_capacity_blocks{tier=\"host\"} 24") ||
	    !strstr(out, "abi=\"1.20\""))
		t_fail("kvmmctl metrics against 1.20:\n%s", out);
}

int main(void)
{
	const char *args[] = { "--cache-block-pages", "4,2", "--host-mem", "4M",
			       NULL };
	struct kvmm_conn *c;
	struct td_daemon d;

	_Static_assert(CC_PPB == 4, "the first named size is the tests'");
	cc_start_with_delay(&d, args, "KVMMD_TEST_ABI_MINOR", 20);
	cc_write_content(d.sock, &contents, 0);
	c = cc_connect_lib(d.sock, "old-daemon-1-20");
	lib(c);
	kvmm_disconnect(c);
	raw_body(d.sock);
	tools(&d);
	cc_stop(&d);
	return 0;
}
