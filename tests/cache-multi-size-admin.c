// SPDX-License-Identifier: MIT
/*
 * timeout: 120
 * The admin commands per block size (ABI 1.22), against a real kvmmd
 * caching two models' blocks (--cache-block-pages 4,2, 2 GPU blocks a
 * size, half of --host-mem each) and real client processes: each model
 * publishes two contents of 2 blocks (the first goes to host memory,
 * the second stays on the GPU).
 *   - ADMIN_TENANTS of one size: the test's uid holds 2 GPU and 2 host
 *     blocks of each size; the two sizes' cached, admitted and dropped
 *     blocks add up to the sums; a size not cached is -ENOENT, a flag
 *     -EINVAL; kvmmctl tenants prints the sums' table, then each size's,
 *     and --block-pages N that size's alone;
 *   - the per-size Prometheus families, of kvmmd's --metrics-listen and
 *     of kvmmctl metrics: each size's kvmm_size_tenant_* series equal
 *     ADMIN_TENANTS of that size and add up to the kvmm_tenant_* ones,
 *     and kvmm_size_demotions_queued to kvmm_demotions_queued;
 *   - kvmmctl's option errors: --block-pages 0, not a number, given
 *     twice, without a value (exit 2, a line naming the option); a size
 *     not cached (exit 1, a line naming it); nothing dropped by them;
 *   - ADMIN_CACHE_DROP of the 2-page size (kvmmctl cache-drop
 *     --block-pages 2 --json): its 4 blocks dropped (2 GPU, 2 host), one
 *     size in the reply; the 4-page model's contents are still read back
 *     byte-identical, from the GPU and from host memory, and the 2-page
 *     model's miss; then a drop of the host tier of the 4-page size alone
 *     (the request's word, raw) and a drop of every size, whose reply
 *     lists both sizes and adds up to its sums;
 *   - ADMIN_STATUS' queued demotions per size: with the demotion copies
 *     slowed (KVMMD_TEST_DEMOTE_DELAY_MS) and all but one host slot held
 *     (KVMMD_TEST_HOST_SLOTS_HELD), the 2-page model's second content
 *     pushes its first down: one copy runs, one waits in line, counted
 *     for size 2 alone (0 for size 4), and kvmmctl status shows it on
 *     the size's line, kvmmctl metrics in kvmm_size_demotions_queued.
 * The NVMe partition of a size dropped alone: cache-multi-size-nvme.c;
 * against a 1.21 daemon: lib-old-daemon-1-21.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/cache-multi-size-common.h"
#include "tests/lib/metrics.h"

static const uint32_t layers[2] = { 2, 1 }; /* 4 and 2 pages a block */

/* ADMIN_TENANTS, of one size (block_pages) or every size summed (0). */
static int tenants(const char *sock, uint32_t block_pages, uint32_t flags,
		   struct kvmm_tenants_reply *rep, size_t cap)
{
	struct kvmm_admin_tenants_req q = { .size = sizeof(q),
					    .flags = flags,
					    .block_pages = block_pages };
	struct kvmm_conn *c;
	int err;

	memset(rep, 0, cap);
	t_ok(kc_connect_admin(sock, &c));
	err = kc_request(c, KVMM_CMD_ADMIN_TENANTS, block_pages ? &q : NULL,
			 block_pages ? sizeof(q) : 0, rep, cap, NULL);
	kvmm_disconnect(c);
	if (!err)
		t_assert_eq(rep->entry_size, sizeof(rep->tenants[0]));
	return err;
}

/* The entry of uid in rep (the test fails without one). */
static const struct kvmm_tenant_info *
tenant_of(const struct kvmm_tenants_reply *rep, uint32_t uid)
{
	for (uint32_t i = 0; i < rep->nr; i++)
		if (rep->tenants[i].id == uid)
			return &rep->tenants[i];
	t_fail("no tenant %u in ADMIN_TENANTS (%u entries)", uid, rep->nr);
	return NULL;
}

static void tenants_per_size(const char *sock)
{
	static char sum_buf[KVMM_MSG_MAX], a_buf[KVMM_MSG_MAX],
		b_buf[KVMM_MSG_MAX];
	struct kvmm_tenants_reply *sum = (void *)sum_buf, *a = (void *)a_buf,
				  *b = (void *)b_buf;
	const struct kvmm_tenant_info *ts, *ta, *tb;
	static char out[1 << 15];
	uint32_t uid = (uint32_t)getuid();

	t_ok(tenants(sock, 0, 0, sum, sizeof(sum_buf)));
	t_ok(tenants(sock, 4, 0, a, sizeof(a_buf)));
	t_ok(tenants(sock, 2, 0, b, sizeof(b_buf)));
	ts = tenant_of(sum, uid);
	ta = tenant_of(a, uid);
	tb = tenant_of(b, uid);
	for (int t = 0; t < 2; t++) {
		t_assert_eq(ta->cached_blocks[t], NB);
		t_assert_eq(tb->cached_blocks[t], NB);
	}
	for (int t = 0; t < 3; t++)
		t_assert_eq(ta->cached_blocks[t] + tb->cached_blocks[t],
			    ts->cached_blocks[t]);
	t_assert_eq(ta->admitted_blocks, 2 * NB);
	t_assert_eq(ta->admitted_blocks + tb->admitted_blocks,
		    ts->admitted_blocks);
	t_assert_eq(ta->dropped_blocks + tb->dropped_blocks,
		    ts->dropped_blocks);
	/* the daemon's counts, the same in every table */
	t_assert_eq(ta->published_blocks, ts->published_blocks);
	t_assert_eq(tb->published_blocks, ts->published_blocks);
	t_assert_eq(ts->published_blocks, 4 * NB);
	printf("tenants per size: 4 pages %llu+%llu, 2 pages %llu+%llu, sums %llu+%llu\n",
	       (unsigned long long)ta->cached_blocks[0],
	       (unsigned long long)ta->cached_blocks[1],
	       (unsigned long long)tb->cached_blocks[0],
	       (unsigned long long)tb->cached_blocks[1],
	       (unsigned long long)ts->cached_blocks[0],
	       (unsigned long long)ts->cached_blocks[1]);

	t_assert_eq(tenants(sock, 6, 0, a, sizeof(a_buf)), -ENOENT);
	t_assert_eq(tenants(sock, 4, 1, a, sizeof(a_buf)), -EINVAL);

	/* kvmmctl tenants: the sums, then each size's table */
	t_assert_eq(td_kvmmctl(sock, "tenants", out, sizeof(out)), 0);
	if (!strstr(out, "\nblocks of 4 pages alone (of the sums above):\n") ||
	    !strstr(out, "\nblocks of 2 pages alone (of the sums above):\n") ||
	    strstr(out, "blocks of 4 pages") > strstr(out, "blocks of 2 pages"))
		t_fail("kvmmctl tenants with two sizes:\n%s", out);
	t_assert_eq(td_kvmmctl(sock, "tenants --block-pages 2", out,
			       sizeof(out)),
		    0);
	if (strncmp(out, "blocks of 2 pages alone:\nTENANT", 31) ||
	    strstr(out, "of the sums above"))
		t_fail("kvmmctl tenants --block-pages 2:\n%s", out);
	t_assert_eq(td_kvmmctl(sock, "--json tenants", out, sizeof(out)), 0);
	if (!strstr(out, ",\"sizes\":[{\"block_pages\":4,\"tenants\":[") ||
	    !strstr(out, "},{\"block_pages\":2,\"tenants\":["))
		t_fail("kvmmctl --json tenants:\n%s", out);
	t_assert_eq(td_kvmmctl(sock, "--json tenants --block-pages 4", out,
			       sizeof(out)),
		    0);
	if (!strstr(out, "\"block_pages\":4,\"tenants\":[") ||
	    strstr(out, "\"sizes\""))
		t_fail("kvmmctl --json tenants --block-pages 4:\n%s", out);
}

/* kvmmctl CMD ARGS exits status, and its output says what. */
static void ctl_error(const char *sock, const char *args, int status,
		      const char *what)
{
	static char out[8192];
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "%s 2>&1", args);
	t_assert_eq(td_kvmmctl(sock, cmd, out, sizeof(out)), status);
	if (!strstr(out, what))
		t_fail("kvmmctl %s: no '%s' in:\n%s", args, what, out);
}

static void option_errors(const char *sock)
{
	struct kvmm_tier_stats_reply before, after;

	cc_settled_stats(sock, &before);
	ctl_error(sock, "cache-drop --block-pages 0", 2,
		  "kvmmctl: cache-drop: --block-pages '0': not a block size");
	ctl_error(sock, "cache-drop --block-pages two", 2,
		  "kvmmctl: cache-drop: --block-pages 'two': not a block size");
	ctl_error(sock, "cache-drop --block-pages -2", 2,
		  "--block-pages '-2': not a block size");
	ctl_error(sock, "cache-drop --block-pages 2 --block-pages 4", 2,
		  "kvmmctl: cache-drop: --block-pages given twice");
	ctl_error(sock, "cache-drop --tier host --block-pages", 2,
		  "kvmmctl: cache-drop: --block-pages needs a value");
	ctl_error(
		sock, "cache-drop --block-pages 6", 1,
		"kvmmctl: cache-drop: --block-pages 6: kvmmd caches no blocks of 6 pages");
	ctl_error(sock, "tenants --block-pages 0", 2,
		  "kvmmctl: tenants: --block-pages '0': not a block size");
	ctl_error(sock, "tenants --block-pages x", 2,
		  "kvmmctl: tenants: --block-pages 'x': not a block size");
	ctl_error(sock, "tenants --block-pages", 2,
		  "kvmmctl: tenants: --block-pages needs a value");
	ctl_error(
		sock, "tenants --block-pages 6", 1,
		"kvmmctl: tenants: --block-pages 6: kvmmd caches no blocks of 6 pages");
	cc_settled_stats(sock, &after);
	for (int t = 0; t < 2; t++)
		t_assert_eq(after.tiers[t].used_blocks,
			    before.tiers[t].used_blocks);
	printf("option errors refused, nothing dropped\n");
}

/* The 2-page size dropped alone; the 4-page model's blocks stay. */
static void drop_one_size(const char *sock)
{
	struct kvmm_admin_cache_drop a = { .size = sizeof(a) };
	struct kvmm_admin_cache_drop_reply r;
	struct kvmm_tier_stats_reply four, two;
	static char out[8192];

	t_assert_eq(td_kvmmctl(sock, "--json cache-drop --block-pages 2", out,
			       sizeof(out)),
		    0);
	if (!strstr(out, "\"dropped\":{\"gpu\":2,\"host\":2,\"nvme\":0},") ||
	    !strstr(out,
		    ",\"block_pages\":2,\"sizes\":[{\"block_pages\":2,\"dropped\":{\"gpu\":2,\"host\":2,\"nvme\":0},\"kept\":{\"gpu\":0,\"host\":0,\"nvme\":0}}],\"nvme_restamped\":0,\"nvme_restamp_failures\":0,\"nvme_restamp_gone\":0}"))
		t_fail("kvmmctl --json cache-drop --block-pages 2:\n%s", out);
	ms_size_stats(sock, 4, &four); /* the copies settled */
	ms_size_stats(sock, 2, &two);
	t_assert_eq(four.tiers[0].used_blocks, NB);
	t_assert_eq(four.tiers[1].used_blocks, NB);
	t_assert_eq(two.tiers[0].used_blocks, 0);
	t_assert_eq(two.tiers[1].used_blocks, 0);
	/* the other model's bytes, from where they were */
	ms_expect_read(sock, layers[0], 1, 0);
	ms_expect_read(sock, layers[0], 0, 1);
	for (int k = 0; k < 2; k++) {
		ms_read(sock, layers[1], layers[1], k);
		t_assert_eq(res->found, 0);
	}
	printf("drop of 2 pages: 4-page blocks read back byte-identical, 2-page blocks miss\n");

	/* the host tier of the 4-page size alone, through the raw word:
	 * content 1 went back down when content 0 came up; its copy down
	 * ended first, else the drop keeps its blocks in flight (seen
	 * under load: "kept in use ... host 2", r.dropped[1] 0) */
	ms_size_stats(sock, 4, &four);
	t_assert_eq(four.tiers[0].used_blocks, NB);
	t_assert_eq(four.tiers[1].used_blocks, NB);
	a.tiers = KVMM_CACHE_DROP_HOST;
	a.block_pages = 4;
	t_ok(cd_raw(sock, &a, sizeof(a), &r));
	t_assert_eq(r.block_pages, 4);
	t_assert_eq(r.nr_sizes, 1);
	t_assert_eq(r.sizes[0].block_pages, 4);
	t_assert_eq(r.dropped[0], 0);
	t_assert_eq(r.dropped[1], NB);
	t_assert_eq(r.sizes[0].dropped[1], NB);
	ms_expect_read(sock, layers[0], 0, 0); /* on the GPU still */

	/* the other model publishes again; a drop of every size lists
	 * both, adding up to its sums */
	for (int k = 0; k < 2; k++)
		ms_write(sock, layers[1], k);
	/* content 0's copy down, started by content 1's publish, ended: a
	 * block in flight is kept, not dropped */
	ms_size_stats(sock, 2, &two);
	t_assert_eq(two.tiers[0].used_blocks + two.tiers[1].used_blocks,
		    2 * NB);
	a.tiers = 0;
	a.block_pages = 0;
	t_ok(cd_raw(sock, &a, sizeof(a), &r));
	t_assert_eq(r.block_pages, 0);
	t_assert_eq(r.nr_sizes, 2);
	t_assert_eq(r.sizes[0].block_pages, 4);
	t_assert_eq(r.sizes[1].block_pages, 2);
	for (int t = 0; t < 3; t++) {
		t_assert_eq(r.sizes[0].dropped[t] + r.sizes[1].dropped[t],
			    r.dropped[t]);
		t_assert_eq(r.sizes[0].kept[t] + r.sizes[1].kept[t], r.kept[t]);
	}
	t_assert_eq(r.sizes[0].dropped[0], NB);
	t_assert_eq(r.sizes[1].dropped[0] + r.sizes[1].dropped[1], 2 * NB);
}

/* The series count of family name in x (0: no such family). */
static unsigned int family_samples(struct tm_expo *x, const char *name)
{
	struct tm_family *f = tm_family(x, name, strlen(name), false);

	return f ? f->samples : 0;
}

/*
 * One exposition's per-size families (kvmmd's own or kvmmctl metrics'):
 * each size's tenant series equal ADMIN_TENANTS of that size (rep[]) and
 * add up to the kvmm_tenant_* sums; a series for each tenant with
 * something in that size alone; the queued demotions per size add up to
 * kvmm_demotions_queued.
 */
static void check_size_families(struct tm_expo *x,
				struct kvmm_tenants_reply *const rep[2])
{
	static const struct {
		const char *size_name, *sum_name;
		size_t off;
		int tiers;
	} fams[] = {
		{ "kvmm_size_tenant_cached_blocks", "kvmm_tenant_cached_blocks",
		  offsetof(struct kvmm_tenant_info, cached_blocks), 3 },
		{ "kvmm_size_tenant_admitted_blocks_total",
		  "kvmm_tenant_admitted_blocks_total",
		  offsetof(struct kvmm_tenant_info, admitted_blocks), 1 },
		{ "kvmm_size_tenant_dropped_blocks_total",
		  "kvmm_tenant_dropped_blocks_total",
		  offsetof(struct kvmm_tenant_info, dropped_blocks), 1 },
		{ "kvmm_size_tenant_limit_moves_total",
		  "kvmm_tenant_limit_moves_total",
		  offsetof(struct kvmm_tenant_info, limit_moves), 1 },
	};
	static const char *const tier[3] = { "gpu", "host", "nvme" };
	uint32_t uid = (uint32_t)getuid();
	unsigned long long sum, v, want;
	char l[160], lt[32];

	for (size_t k = 0; k < sizeof(fams) / sizeof(fams[0]); k++) {
		for (int t = 0; t < fams[k].tiers; t++) {
			if (fams[k].tiers > 1)
				snprintf(lt, sizeof(lt), ",tier=\"%s\"",
					 tier[t]);
			else
				lt[0] = '\0';
			sum = 0;
			for (int s = 0; s < 2; s++) {
				const struct kvmm_tenant_info *ti =
					tenant_of(rep[s], uid);

				memcpy(&want,
				       (const char *)ti + fams[k].off +
					       t * sizeof(uint64_t),
				       sizeof(want));
				snprintf(l, sizeof(l),
					 "size=\"%u\",kind=\"uid\",id=\"%u\"%s",
					 2 * layers[s], uid, lt);
				v = tm_u64(x, fams[k].size_name, l);
				t_assert_eq(v, want);
				sum += v;
			}
			snprintf(l, sizeof(l), "kind=\"uid\",id=\"%u\"%s", uid,
				 lt);
			t_assert_eq(sum, tm_u64(x, fams[k].sum_name, l));
		}
		/* the test's uid is the one tenant, in both sizes */
		t_assert_eq(family_samples(x, fams[k].size_name),
			    2 * fams[k].tiers);
	}
	sum = 0;
	for (int s = 0; s < 2; s++) {
		snprintf(l, sizeof(l), "size=\"%u\"", 2 * layers[s]);
		sum += tm_u64(x, "kvmm_size_demotions_queued", l);
	}
	t_assert_eq(sum, tm_u64(x, "kvmm_demotions_queued", NULL));
	t_assert_eq(family_samples(x, "kvmm_size_demotions_queued"), 2);
}

/* kvmmd's metrics and kvmmctl metrics, per size (after ms_publish_both():
 * nothing moves). */
static void metrics_per_size(const struct td_daemon *d)
{
	static char a_buf[KVMM_MSG_MAX], b_buf[KVMM_MSG_MAX], mout[1 << 17];
	struct kvmm_tenants_reply *const rep[2] = { (void *)a_buf,
						    (void *)b_buf };
	static struct tm_expo e, k;
	uint32_t uid = (uint32_t)getuid();
	struct tm_resp mr;
	char l[96];

	t_ok(tenants(d->sock, 4, 0, rep[0], sizeof(a_buf)));
	t_ok(tenants(d->sock, 2, 0, rep[1], sizeof(b_buf)));
	tm_scrape(tm_port(d), &mr);
	tm_parse(mr.body, &e);
	check_size_families(&e, rep);
	/* what ms_publish_both() left: 2 GPU and 2 host blocks of each size */
	snprintf(l, sizeof(l),
		 "size=\"2\",kind=\"uid\",id=\"%u\",tier=\"host\"", uid);
	t_assert_eq(tm_u64(&e, "kvmm_size_tenant_cached_blocks", l), NB);
	snprintf(l, sizeof(l), "size=\"4\",kind=\"uid\",id=\"%u\"", uid);
	t_assert_eq(tm_u64(&e, "kvmm_size_tenant_admitted_blocks_total", l),
		    2 * NB);
	t_assert_eq(tm_u64(&e, "kvmm_size_demotions_queued", "size=\"2\""), 0);
	printf("metrics per size: %zu series, %zu bytes\n", e.n, mr.body_len);
	tm_resp_free(&mr);
	t_assert_eq(td_kvmmctl(d->sock, "metrics", mout, sizeof(mout)), 0);
	tm_parse(mout, &k);
	check_size_families(&k, rep);
}

static void named_sizes(void)
{
	const char *args[] = { "--cache-policy",
			       "lru",
			       "--cache-block-pages",
			       "4,2",
			       "--cache-gpu-blocks",
			       "2",
			       "--host-mem",
			       "4M",
			       "--metrics-listen",
			       "127.0.0.1:0",
			       NULL };
	struct td_daemon d;

	cc_start(&d, args);
	ms_publish_both(d.sock);
	tenants_per_size(d.sock);
	metrics_per_size(&d);
	option_errors(d.sock);
	drop_one_size(d.sock);
	cc_stop(&d);
}

/* each copy down's wait: the queued demotion stays queued this long,
 * a margin for the status requests on a loaded machine */
#define DELAY_MS 5000

/* One demotion of the 2-page size waits for a host slot. */
static void queued_per_size(void)
{
	const char *args[] = { "--cache-policy",
			       "lru",
			       "--cache-block-pages",
			       "4,2",
			       "--cache-gpu-blocks",
			       "2",
			       "--host-mem",
			       "2M",
			       NULL };
	struct kvmm_status_reply st;
	static char out[1 << 15];
	struct td_daemon d;

	/* 4 slots of the 4-page size, 8 of the 2-page one: 7 held of each
	 * leaves the 2-page size one */
	setenv("KVMMD_TEST_HOST_SLOTS_HELD", "7", 1);
	cc_start_with_delay(&d, args, "KVMMD_TEST_DEMOTE_DELAY_MS", DELAY_MS);
	unsetenv("KVMMD_TEST_HOST_SLOTS_HELD");
	ms_write(d.sock, layers[1], 0);
	ms_write(d.sock, layers[1], 1); /* pushes content 0 down */
	t_ok(td_status(&d, &st));
	t_assert_eq(st.size, sizeof(st));
	t_assert_eq(st.demotions_queued, 1);
	t_assert_eq(st.nr_sizes, 2);
	t_assert_eq(st.sizes[0], 4);
	t_assert_eq(st.sizes[1], 2);
	t_assert_eq(st.demotions_queued_size[0], 0);
	t_assert_eq(st.demotions_queued_size[1], 1);
	t_assert_eq(td_kvmmctl(d.sock, "status", out, sizeof(out)), 0);
	t_ok(td_status(&d, &st));
	/* the size lines, while the copy still runs (within DELAY_MS of
	 * the publish; a loaded machine may take longer: then 0) */
	if (!strstr(out, "\nsize 4 ") ||
	    !strstr(strstr(out, "\nsize 4 "), " 0 demotions queued\n") ||
	    (st.demotions_queued_size[1] == 1 &&
	     !strstr(out, " 1 demotions queued\n")))
		t_fail("kvmmctl status, queued per size:\n%s", out);
	/* kvmmctl metrics: the same per size (from one ADMIN_STATUS, so
	 * they add up to the sum however the copy went) */
	{
		static char mout[1 << 17];
		static struct tm_expo k;
		unsigned long long q2;

		t_assert_eq(td_kvmmctl(d.sock, "metrics", mout, sizeof(mout)),
			    0);
		t_ok(td_status(&d, &st));
		tm_parse(mout, &k);
		t_assert_eq(tm_u64(&k, "kvmm_size_demotions_queued",
				   "size=\"4\""),
			    0);
		q2 = tm_u64(&k, "kvmm_size_demotions_queued", "size=\"2\"");
		t_assert_eq(q2, tm_u64(&k, "kvmm_demotions_queued", NULL));
		/* still queued after the metrics: queued while they ran */
		if (st.demotions_queued_size[1] == 1)
			t_assert_eq(q2, 1);
	}
	printf("queued per size: 4 pages 0, 2 pages 1\n");
	cc_stop(&d);
}

int main(void)
{
	ms_res_init();
	named_sizes();
	queued_per_size();
	return 0;
}
