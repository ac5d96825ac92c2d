// SPDX-License-Identifier: MIT
/*
 * timeout: 180
 * This build's libkvmm and kvmmctl against a real kvmmd playing every
 * older minor of the ABI (KVMMD_TEST_ABI_MINOR=N, N from 0 to
 * KVMM_ABI_MINOR - 1), one kvmmd a minor.  The expected values are this
 * test's own table of Documentation/abi.md's change log (the sizes it
 * states, the minor each command and flag came with), not kvmmd's, so a
 * boundary off by one on either side fails here.  At each minor N:
 *
 *   - libkvmm: kvmm_connect() works and kvmm_get_daemon_info() says 1.N;
 *     each call whose command or flag came after N is -EOPNOTSUPP with
 *     nothing sent (the session's socket commands, as kvmmd counts them,
 *     do not move): PIN_F_DEMOTE (1.3), a segmented (1.6) or early (1.8)
 *     prefix open, kvmm_seq_wait_ready() (1.8), kvmm_prefix_query() and
 *     kvmm_block_pin_many() (1.19), kvmm_seq_block_unshare() (1.20),
 *     kvmm_tier_stats_size() of one size (1.21); at or after it each
 *     works.  What every minor had works with its values: a content a
 *     writer process published is shared by a prefix open with its
 *     bytes, pinned one block a call up to --pin-quota (the -EDQUOT
 *     reply's counts from 1.13 on, none before), TIER_STATS is the size
 *     N had;
 *   - the wire, raw: HELLO says 1.N and names the ring's notify word from
 *     1.16 on; each command that came after N is -ENOTTY and no other;
 *     each request flag that came after N is -EINVAL and no other, and
 *     so is a request's word that named one block size (TIER_STATS'
 *     1.21, ADMIN_TENANTS' and ADMIN_CACHE_DROP's 1.22);
 *     SEQ_OPEN's seq_gen is 0 at 1.0 only; ADMIN_STATUS, TIER_STATS,
 *     ADMIN_CACHE_DROP's reply and ADMIN_TENANTS' entries are the sizes
 *     N had; ADMIN_SESSIONS has the pin quota from 1.2, `total` from
 *     1.12, the regions after the entries from 1.13;
 *   - kvmmctl, run as a process: status, --json status and metrics exit
 *     0 and show a field only from the minor that brought it (a table of
 *     text lines, JSON keys and metric families below), metrics says
 *     abi="1.N"; tenants exits 0 from 1.10 on, and says the daemon is
 *     older than ABI 1.10 before; kvmmd's own --metrics-listen exporter
 *     prints the same families as kvmmctl metrics.
 *
 * tests/lib-old-daemon-1-18.c, -1-20.c and -1-21.c look closer at three
 * minors; tests/kvmmctl-hello-minor.c runs the library as an older one.
 */
#include "tests/cache-common.h"
#include "tests/lib/daemon.h"
#include "tests/lib/metrics.h"

#define NB 4
#define PIN_QUOTA 3

static const struct cc_contents contents = { .base = 0x7e0000,
					     .tag0 = 30,
					     .nb = NB };

/* A reply's size from `since` on (abi.md's figures). */
struct since_size {
	uint16_t since;
	uint32_t size;
};

/* ADMIN_STATUS: 1.2 +16, 1.5 +32, 1.9 +56 (400), 1.13 512, 1.14 520,
 * 1.15 536, 1.18 576, 1.19 632, 1.20 720, 1.22 776 */
static const struct since_size status_sizes[] = {
	{ 0, 296 },  { 2, 312 },  { 5, 344 },  { 9, 400 },
	{ 13, 512 }, { 14, 520 }, { 15, 536 }, { 18, 576 },
	{ 19, 632 }, { 20, 720 }, { 22, 776 },
};

/* TIER_STATS: 1.7 +64 (504), 1.13 536, 1.14 560, 1.15 616, 1.17 648,
 * 1.20 656, 1.21 680, 1.23 696, 1.24 728, 1.25 744 */
static const struct since_size tier_sizes[] = {
	{ 0, 440 },  { 7, 504 },  { 13, 536 }, { 14, 560 },
	{ 15, 616 }, { 17, 648 }, { 20, 656 }, { 21, 680 },
	{ 23, 696 }, { 24, 728 }, { 25, 744 },
};

/* ADMIN_CACHE_DROP's reply (1.14: 104, 1.22: 336, 1.23: 360) */
static const struct since_size drop_sizes[] = {
	{ 14, 104 },
	{ 22, 336 },
	{ 23, 360 },
};

static uint32_t size_at(const struct since_size *t, size_t n, int minor)
{
	uint32_t size = 0;

	for (size_t i = 0; i < n && t[i].since <= minor; i++)
		size = t[i].size;
	return size;
}

#define SIZE_AT(t, minor) size_at(t, sizeof(t) / sizeof(t[0]), minor)

/* The commands that came after 1.0, and a few 1.0 had. */
static const struct {
	uint16_t cmd;
	int since;
} cmds[] = {
	{ KVMM_CMD_NOP, 0 },
	{ KVMM_CMD_STATS, 0 },
	{ KVMM_CMD_TIER_STATS, 0 },
	{ KVMM_CMD_ADMIN_SESSIONS, 0 },
	{ KVMM_CMD_SEQ_WAIT_READY, 8 },
	{ KVMM_CMD_ADMIN_TENANTS, 10 },
	{ KVMM_CMD_ADMIN_SET_TENANT_LIMIT, 11 },
	{ KVMM_CMD_ADMIN_CACHE_DROP, 14 },
	{ KVMM_CMD_PREFIX_COLLECT, 16 },
	{ KVMM_CMD_SEQ_COLLECT, 17 },
	{ KVMM_CMD_PREFIX_QUERY, 19 },
	{ KVMM_CMD_BLOCK_PIN_MANY, 19 },
	{ KVMM_CMD_SEQ_UNSHARE, 20 },
};

/* What kvmmctl shows from the minor that brought it: a `status` line,
 * a `--json status` key, a `metrics` family. */
static const struct {
	const char *status, *json, *metric;
	int since;
} shown[] = {
	{ "\npins ", "\"pins\":", "\nkvmm_pins ", 2 },
	{ NULL, "\"cache_policy\":", "\nkvmm_cache_policy_info{", 5 },
	{ "cache scope", "\"cache_scope\":", "\nkvmm_cache_scope_info{", 9 },
	{ "\nrecompute ",
	  "\"prefix_holes\":", "\nkvmm_cache_prefix_holes_total ", 7 },
	{ "\nearly opens ",
	  "\"early_opens\":", "\nkvmm_cache_early_opens_total ", 7 },
	{ NULL, "\"scrubbed\":", "\nkvmm_pool_scrubbed_pages_total ", 13 },
	{ NULL, "\"cancelled\":", "\nkvmm_revocations_cancelled_total ", 13 },
	{ NULL, "\"nvme_read_error_drops\":",
	  "\nkvmm_cache_nvme_read_error_drops_total ", 13 },
	{ NULL, "\"cache_drop_blocks\":", "\nkvmm_cache_drop_blocks_total ",
	  14 },
	{ NULL, "\"cache_open_attempts\":", "\nkvmm_cache_open_attempts_total ",
	  14 },
	{ NULL, "\"renewed\":", "\nkvmm_pool_renewed_pages_total ", 15 },
	{ NULL, "\"lower_free_refused\":",
	  "\nkvmm_cache_lower_free_refused_total ", 15 },
	{ NULL, "\"nvme_write_returns\":",
	  "\nkvmm_cache_nvme_write_returns_total ", 17 },
	{ "\nread-only ", "\"ro_fds\":", "\nkvmm_pool_ro_fds ", 18 },
	{ "\nblocks ahead ", "\"lend\":", "\nkvmm_lend_requests_total ", 19 },
	{ "\nqueries ", "\"router\":", "\nkvmm_prefix_queries_total ", 20 },
	{ NULL, "\"blocks_unshared\":", "\nkvmm_cache_blocks_unshared_total ",
	  20 },
	{ NULL, "\"nvme_restamped\":", "\nkvmm_cache_nvme_restamped_total ",
	  23 },
	{ NULL, "\"cold_blocks\":", "\nkvmm_cache_cold_blocks ", 24 },
	{ NULL, NULL, "\nkvmm_tenant_cached_blocks{", 10 },
};

/* The socket commands kvmmd counted for c's session (this STATS one of
 * them). */
static uint64_t sent(struct kvmm_conn *c)
{
	struct kvmm_stats ks = { .size = sizeof(ks) };

	t_ok(kvmm_get_stats(c, &ks));
	return ks.cmds_socket;
}

/* ret is -EOPNOTSUPP with nothing sent below since, else anything but
 * -EOPNOTSUPP (returned for the caller's check). */
static int gated(struct kvmm_conn *c, uint64_t before, int ret, int minor,
		 int since, const char *what)
{
	uint64_t now = sent(c);

	if (minor < since) {
		if (ret != -EOPNOTSUPP || now != before + 1)
			t_fail("1.%d: %s: %d with %llu commands sent, expected -EOPNOTSUPP and none (it came with 1.%d)",
			       minor, what, ret,
			       (unsigned long long)(now - before - 1), since);
	} else if (ret == -EOPNOTSUPP) {
		t_fail("1.%d: %s: -EOPNOTSUPP, but it came with 1.%d", minor,
		       what, since);
	}
	return ret;
}

/* libkvmm: the daemon's minor, the calls it gates, what every minor had */
static void library(const char *sock, int minor)
{
	struct kvmm_region_opts ro = cc_region_opts();
	struct kvmm_daemon_info di = { .size = sizeof(di) };
	struct kvmm_prefix_opts o = { .size = sizeof(o) };
	struct kvmm_pin_opts po = { .size = sizeof(po) };
	struct kvmm_tier_stats_reply ts;
	struct kvmm_region *r;
	struct kvmm_conn *c;
	uint8_t acts[NB], tiers[NB];
	uint32_t seq, n, pending;
	uint64_t h[NB], before;
	int32_t res[NB];
	int ret;

	cc_content_hashes(&contents, 0, h);
	c = cc_connect_lib(sock, "old-daemon-minor");
	t_ok(kvmm_get_daemon_info(c, &di));
	t_assert_eq(di.abi_major, KVMM_ABI_MAJOR);
	if (di.abi_minor != (uint32_t)minor)
		t_fail("KVMMD_TEST_ABI_MINOR=%d: the daemon says 1.%u", minor,
		       di.abi_minor);
	t_ok(kvmm_region_create(c, &ro, &r));

	/* a plain prefix open: shared from the GPU, with its bytes */
	o.actions = acts;
	t_ok(kvmm_seq_open_prefix_opts(r, h, NB, &seq, &n, &o));
	t_assert_eq(n, NB);
	t_assert_eq(o.shared, NB);
	t_assert(cc_seq_content_ok(r, seq, NB, contents.tag0, 4096));

	before = sent(c);
	ret = kvmm_seq_wait_ready(r, seq, NB, 0, NULL, 0, &pending);
	if (gated(c, before, ret, minor, 8, "kvmm_seq_wait_ready()") >= 0)
		t_assert_eq(ret, 0);
	before = sent(c);
	ret = kvmm_seq_block_unshare(r, seq, 0);
	if (gated(c, before, ret, minor, 20, "kvmm_seq_block_unshare()") >= 0)
		t_assert_eq(ret, 0);
	t_ok(kvmm_seq_close(r, seq));

	/* the flags of later minors */
	o.flags = KVMM_PREFIX_OPEN_SEGMENTS;
	before = sent(c);
	ret = kvmm_seq_open_prefix_opts(r, h, NB, &seq, &n, &o);
	if (gated(c, before, ret, minor, 6, "a segmented prefix open") >= 0) {
		t_assert_eq(ret, 0);
		t_assert_eq(n, NB);
		t_ok(kvmm_seq_close(r, seq));
	}
	o.flags = KVMM_PREFIX_OPEN_EARLY;
	before = sent(c);
	ret = kvmm_seq_open_prefix_opts(r, h, NB, &seq, &n, &o);
	if (gated(c, before, ret, minor, 8, "an early prefix open") >= 0) {
		t_assert_eq(ret, 0);
		t_assert_eq(n, NB);
		t_ok(kvmm_seq_close(r, seq));
	}
	po.flags = KVMM_PIN_F_TTL | KVMM_PIN_F_DEMOTE;
	po.ttl_ns = 60ull * 1000000000ull;
	before = sent(c);
	ret = kvmm_block_pin(c, h[0], &po);
	if (gated(c, before, ret, minor, 3, "a PIN_F_DEMOTE pin") >= 0) {
		t_assert_eq(ret, 0);
		t_ok(kvmm_block_unpin(c, h[0]));
	}

	/* single pins up to the quota; the -EDQUOT body came with 1.13 */
	po = (struct kvmm_pin_opts){ .size = sizeof(po) };
	for (int b = 0; b < PIN_QUOTA; b++) {
		t_ok(kvmm_block_pin(c, h[b], &po));
		t_assert_eq(po.tier, 0);
		if (minor >= 2) /* the reply's counts: 1.0's too */
			t_assert_eq(po.pins, (uint32_t)b + 1);
	}
	po = (struct kvmm_pin_opts){ .size = sizeof(po) };
	t_assert_eq(kvmm_block_pin(c, h[PIN_QUOTA], &po), -EDQUOT);
	t_assert_eq(po.pin_quota, minor >= 13 ? PIN_QUOTA : 0);
	t_assert_eq(po.pins, minor >= 13 ? PIN_QUOTA : 0);
	for (int b = 0; b < PIN_QUOTA; b++)
		t_ok(kvmm_block_unpin(c, h[b]));

	/* 1.19: queries and many pins */
	before = sent(c);
	ret = kvmm_prefix_query(r, h, NB, tiers, 0);
	if (gated(c, before, ret, minor, 19, "kvmm_prefix_query()") >= 0)
		t_assert_eq(ret, NB);
	before = sent(c);
	ret = kvmm_block_pin_many(c, h, NB, NULL, res);
	if (gated(c, before, ret, minor, 19, "kvmm_block_pin_many()") >= 0) {
		t_assert_eq(ret, PIN_QUOTA);
		t_assert_eq(res[PIN_QUOTA], -EDQUOT);
		for (int b = 0; b < PIN_QUOTA; b++)
			t_ok(kvmm_block_unpin(c, h[b]));
	}

	/* TIER_STATS: the size the minor had; one size's from 1.21 */
	t_ok(kvmm_tier_stats(c, &ts, sizeof(ts)));
	if (ts.size != SIZE_AT(tier_sizes, minor))
		t_fail("1.%d: TIER_STATS of %u bytes, expected %u", minor,
		       ts.size, SIZE_AT(tier_sizes, minor));
	t_assert_eq(ts.publishes, NB);
	before = sent(c);
	ret = kvmm_tier_stats_size(c, CC_PPB, &ts, sizeof(ts));
	if (gated(c, before, ret, minor, 21, "kvmm_tier_stats_size(N)") >= 0)
		t_assert_eq(ret, 0);
	kvmm_region_destroy(r);
	kvmm_disconnect(c);
}

/* A request's status, its reply and fds dropped. */
static int status_of(struct cc *c, uint16_t cmd, const void *body, size_t len)
{
	static char rep[KVMM_MSG_MAX];
	static int fds[CC_MAX_PAGES];
	unsigned int nfds = 0;
	int ret = cc_call(c, cmd, body, len, rep, sizeof(rep), fds, &nfds);

	for (unsigned int i = 0; i < nfds; i++)
		close(fds[i]);
	return ret;
}

/* ret is -EINVAL below since (an unknown flag then), else not. */
static void flag_check(int ret, int minor, int since, const char *what)
{
	if ((minor < since) != (ret == -EINVAL))
		t_fail("1.%d: %s: %d (it came with 1.%d)", minor, what, ret,
		       since);
}

static void wire(const char *sock, int minor)
{
	static char buf[KVMM_MSG_MAX];
	struct kvmm_hello_reply hr;
	struct kvmm_status_reply st;
	struct kvmm_tier_stats_reply ts;
	struct kvmm_sessions_reply *ss = (void *)buf;
	struct kvmm_tenants_reply *tn = (void *)buf;
	struct kvmm_admin_cache_drop_reply *dr = (void *)buf;
	struct kvmm_admin_cache_drop drop = { .size = sizeof(drop),
					      .flags = KVMM_CACHE_DROP_F_TENANT,
					      .tenant = 54321 };
	struct kvmm_tier_stats_req tq = { .size = sizeof(tq),
					  .block_pages = CC_PPB };
	struct kvmm_admin_tenants_req tnq = { .size = sizeof(tnq),
					      .block_pages = CC_PPB };
	struct kvmm_region_ref ref = { .size = sizeof(ref) };
	struct kvmm_seq_open_reply so;
	struct kvmm_block_pin pin = { .size = sizeof(pin) };
	struct kvmm_seq_extend ex = { .size = sizeof(ex) };
	struct {
		struct kvmm_prefix_open po;
		uint64_t h[1];
	} po = { .po = { .size = sizeof(po.po), .nr_hashes = 1 },
		 .h = { 0x7e9999 } };
	uint64_t h[NB];
	struct cc c;
	int ret;

	cc_content_hashes(&contents, 0, h);
	cc_hello(&c, sock, KVMM_ABI_MINOR, &hr);
	t_assert_eq(hr.abi_minor, minor);
	if ((hr.ring.notify != 0) != (minor >= 16))
		t_fail("1.%d: the ring's notify word at %u", minor,
		       hr.ring.notify);
	cc_region(&c);
	ref.region_id = c.region;

	/* the commands of later minors are unknown, and only those */
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		ret = status_of(&c, cmds[i].cmd, NULL, 0);
		if ((ret == -ENOTTY) != (minor < cmds[i].since))
			t_fail("1.%d: command 0x%x: %d (it came with 1.%d)",
			       minor, cmds[i].cmd, ret, cmds[i].since);
	}

	/* the flags of later minors are unknown, and only those */
	pin.flags = KVMM_PIN_F_TTL | KVMM_PIN_F_DEMOTE;
	pin.ttl_ns = 60ull * 1000000000ull;
	pin.hash = h[0];
	ret = status_of(&c, KVMM_CMD_BLOCK_PIN, &pin, sizeof(pin));
	flag_check(ret, minor, 3, "BLOCK_PIN with PIN_F_DEMOTE");
	if (!ret)
		t_ok(status_of(&c, KVMM_CMD_BLOCK_UNPIN,
			       &(struct kvmm_block_unpin){
				       .size = sizeof(struct kvmm_block_unpin),
				       .hash = h[0] },
			       sizeof(struct kvmm_block_unpin)));
	po.po.region_id = c.region;
	po.po.flags = KVMM_PREFIX_OPEN_ACTIONS | KVMM_PREFIX_OPEN_SEGMENTS;
	ret = status_of(&c, KVMM_CMD_PREFIX_OPEN, &po, sizeof(po));
	flag_check(ret, minor, 6, "PREFIX_OPEN with SEGMENTS");
	po.po.flags = KVMM_PREFIX_OPEN_ACTIONS | KVMM_PREFIX_OPEN_EARLY;
	ret = status_of(&c, KVMM_CMD_PREFIX_OPEN, &po, sizeof(po));
	flag_check(ret, minor, 8, "PREFIX_OPEN with EARLY");
	po.po.flags = KVMM_PREFIX_OPEN_COLLECT;
	ret = status_of(&c, KVMM_CMD_PREFIX_OPEN, &po, sizeof(po));
	flag_check(ret, minor, 16, "PREFIX_OPEN with COLLECT");

	/* the words of later minors in a request: one block size's */
	ret = status_of(&c, KVMM_CMD_TIER_STATS, &tq, sizeof(tq));
	flag_check(ret, minor, 21, "TIER_STATS of one size");
	if (minor >= 10) {
		ret = status_of(&c, KVMM_CMD_ADMIN_TENANTS, &tnq, sizeof(tnq));
		flag_check(ret, minor, 22, "ADMIN_TENANTS of one size");
	}
	if (minor >= 14) {
		drop.block_pages = CC_PPB;
		ret = status_of(&c, KVMM_CMD_ADMIN_CACHE_DROP, &drop,
				sizeof(drop));
		flag_check(ret, minor, 22, "ADMIN_CACHE_DROP of one size");
		drop.block_pages = 0;
	}

	/* SEQ_OPEN names its opening from 1.1 on */
	t_ok(cc_call(&c, KVMM_CMD_SEQ_OPEN, &ref, sizeof(ref), &so, sizeof(so),
		     NULL, NULL));
	if ((so.seq_gen != 0) != (minor >= 1))
		t_fail("1.%d: SEQ_OPEN's seq_gen %u", minor, so.seq_gen);
	ex.region_id = c.region;
	ex.seq_id = so.seq_id;
	ex.new_len = CC_TPB;
	ex.flags = KVMM_SEQ_EXTEND_COLLECT;
	ret = status_of(&c, KVMM_CMD_SEQ_EXTEND, &ex, sizeof(ex));
	flag_check(ret, minor, 17, "SEQ_EXTEND with COLLECT");

	/* the replies that grew: the sizes the minor had */
	memset(&st, 0, sizeof(st));
	t_ok(cc_call(&c, KVMM_CMD_ADMIN_STATUS, NULL, 0, &st, sizeof(st), NULL,
		     NULL));
	if (st.size != SIZE_AT(status_sizes, minor))
		t_fail("1.%d: ADMIN_STATUS of %u bytes, expected %u", minor,
		       st.size, SIZE_AT(status_sizes, minor));
	cc_tier_stats(&c, &ts);
	t_assert_eq(ts.size, SIZE_AT(tier_sizes, minor));
	if (minor >= 14) {
		t_ok(cc_call(&c, KVMM_CMD_ADMIN_CACHE_DROP, &drop, sizeof(drop),
			     buf, sizeof(buf), NULL, NULL));
		if (dr->size != SIZE_AT(drop_sizes, minor))
			t_fail("1.%d: ADMIN_CACHE_DROP's reply of %u bytes, expected %u",
			       minor, dr->size, SIZE_AT(drop_sizes, minor));
	}
	if (minor >= 10) {
		t_ok(cc_call(&c, KVMM_CMD_ADMIN_TENANTS, NULL, 0, buf,
			     sizeof(buf), NULL, NULL));
		t_assert(tn->nr >= 1); /* the writer's uid */
		if (tn->entry_size != (minor >= 11 ? 152u : 120u) ||
		    tn->tenants[0].size != tn->entry_size ||
		    tn->size != sizeof(*tn) + tn->nr * tn->entry_size)
			t_fail("1.%d: ADMIN_TENANTS' entries of %u bytes (%u), reply %u",
			       minor, tn->entry_size, tn->tenants[0].size,
			       tn->size);
	}
	memset(buf, 0,
	       sizeof(struct kvmm_sessions_reply) +
		       sizeof(struct kvmm_session_info));
	t_ok(cc_call(&c, KVMM_CMD_ADMIN_SESSIONS, NULL, 0, buf, sizeof(buf),
		     NULL, NULL));
	t_assert(ss->nr >= 1);
	if ((ss->sessions[0].pin_quota != 0) != (minor >= 2) ||
	    (ss->total != 0) != (minor >= 12) ||
	    (ss->size > sizeof(*ss) + ss->nr * ss->entry_size) != (minor >= 13))
		t_fail("1.%d: ADMIN_SESSIONS: pin_quota %u, total %u, %u bytes for %u entries",
		       minor, ss->sessions[0].pin_quota, ss->total, ss->size,
		       ss->nr);
	cc_disconnect(&c);
}

/* The `# TYPE` lines of a text exposition, in order, one a line. */
static void families(const char *text, char *out, size_t cap)
{
	size_t len = 0;

	out[0] = '\0';
	for (const char *p = strstr(text, "# TYPE "); p;
	     p = strstr(p + 1, "\n# TYPE ")) {
		const char *nl;

		p += *p == '\n';
		nl = strchr(p, '\n');
		t_assert(nl && len + (size_t)(nl - p) + 2 < cap);
		memcpy(out + len, p, (size_t)(nl - p) + 1);
		len += (size_t)(nl - p) + 1;
		out[len] = '\0';
	}
}

static void shown_check(const char *out, const char *what, int minor, int which)
{
	for (size_t i = 0; i < sizeof(shown) / sizeof(shown[0]); i++) {
		const char *s = which == 0 ? shown[i].status :
				which == 1 ? shown[i].json :
					     shown[i].metric;

		if (s && (strstr(out, s) != NULL) != (minor >= shown[i].since))
			t_fail("1.%d: kvmmctl %s %s '%s' (it came with 1.%d):\n%s",
			       minor, what,
			       minor >= shown[i].since ? "lacks" : "shows", s,
			       shown[i].since, out);
	}
}

static void tools(const struct td_daemon *d, int minor, int port)
{
	static char out[1 << 17], fam_ctl[1 << 15], fam_d[1 << 15];
	char abi[32];
	struct tm_resp resp;
	int st;

	t_assert_eq(td_kvmmctl(d->sock, "status", out, sizeof(out)), 0);
	shown_check(out, "status", minor, 0);
	t_assert_eq(td_kvmmctl(d->sock, "--json status", out, sizeof(out)), 0);
	shown_check(out, "--json status", minor, 1);
	/* a leading newline for the families' patterns */
	out[0] = '\n';
	t_assert_eq(td_kvmmctl(d->sock, "metrics", out + 1, sizeof(out) - 1),
		    0);
	shown_check(out, "metrics", minor, 2);
	snprintf(abi, sizeof(abi), "abi=\"1.%d\"", minor);
	if (!strstr(out, abi))
		t_fail("1.%d: kvmmctl metrics without %s:\n%s", minor, abi,
		       out);
	families(out, fam_ctl, sizeof(fam_ctl));
	/* kvmmd's own exporter plays the same daemon */
	tm_scrape(port, &resp);
	if (!strstr(resp.body, abi))
		t_fail("1.%d: kvmmd's metrics without %s", minor, abi);
	families(resp.body, fam_d, sizeof(fam_d));
	tm_resp_free(&resp);
	if (strcmp(fam_ctl, fam_d))
		t_fail("1.%d: kvmmd's exporter and kvmmctl metrics differ:\n%s\n---\n%s",
		       minor, fam_d, fam_ctl);
	st = td_kvmmctl(d->sock, "tenants", out, sizeof(out));
	if (minor >= 10 ? st != 0 : st == 0)
		t_fail("1.%d: kvmmctl tenants exit %d:\n%s", minor, st, out);
}

int main(void)
{
	const char *args[] = { "--pin-quota", "4", "--metrics-listen",
			       "127.0.0.1:0", NULL };
	char minor_s[12], quota[8]; /* minor_s: any int's digits */
	uint64_t t0 = cc_now_ms();
	struct td_daemon d;

	snprintf(quota, sizeof(quota), "%d", PIN_QUOTA);
	args[1] = quota;
	for (int minor = 0; minor < KVMM_ABI_MINOR; minor++) {
		snprintf(minor_s, sizeof(minor_s), "%d", minor);
		setenv("KVMMD_TEST_ABI_MINOR", minor_s, 1);
		td_start_ok(&d, args);
		unsetenv("KVMMD_TEST_ABI_MINOR");
		cc_write_content(d.sock, &contents, 0);
		library(d.sock, minor);
		wire(d.sock, minor);
		tools(&d, minor, tm_port(&d));
		cc_stop(&d);
	}
	printf("libkvmm, the wire and kvmmctl as kvmmd 1.0 to 1.%d did, %llu ms\n",
	       KVMM_ABI_MINOR - 1, (unsigned long long)(cc_now_ms() - t0));
	return 0;
}
