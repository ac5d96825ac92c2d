// SPDX-License-Identifier: MIT
/*
 * kvmmd --metrics-listen against a real daemon after known client work:
 * a libkvmm client creates a region, extends a sequence by 2 blocks and
 * publishes them (content A), closes it, does the same with content B
 * (the GPU cache keeps 2 blocks, so A goes down to the host tier), then
 * opens A's prefix again (restored from the host, B going down).  GET
 * /metrics over TCP is a valid exposition (tests/lib/metrics.h), has the
 * counts that work implies, and every series equals the field of
 * `kvmmctl status --json` it comes from (the status command's own
 * session and commands accounted for); `kvmmctl metrics` prints the same
 * series with the same values; with one block size cached there is no
 * kvmm_size_* family.  A text kept for reuse does not hide a
 * change from a fresh scrape.  Prints what a scrape costs against the
 * status command over a fresh admin connection, and what the builds cost
 * the loop.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "kvmm/kvmm.h"
#include "tests/lib/daemon.h"
#include "tests/lib/metrics.h"
#include "tests/lib/small_region.h"
#include "tests/lib/test.h"

static int cmp_ulong(const void *a, const void *b)
{
	unsigned long x = *(const unsigned long *)a,
		      y = *(const unsigned long *)b;

	return x < y ? -1 : x > y;
}

/* "1.8" from the ABI macros: the build_info label follows kvmm/uapi.h */
#define TM_STR(x) #x
#define TM_XSTR(x) TM_STR(x)

/* The number after "key": of the object path "a.b.key" in json. */
static unsigned long long json_u64(const char *json, const char *path)
{
	char part[64], key[80];
	const char *p = json, *dot;
	char *end;
	unsigned long long v;

	while ((dot = strchr(path, '.'))) {
		snprintf(part, sizeof(part), "%.*s", (int)(dot - path), path);
		snprintf(key, sizeof(key), "\"%s\":{", part);
		p = strstr(p, key);
		if (!p)
			t_fail("status --json has no object %s", part);
		p += strlen(key);
		path = dot + 1;
	}
	snprintf(key, sizeof(key), "\"%s\":", path);
	p = strstr(p, key);
	if (!p)
		t_fail("status --json has no %s", path);
	v = strtoull(p + strlen(key), &end, 10);
	if (end == p + strlen(key))
		t_fail("status --json: %s is not a number", path);
	return v;
}

enum unit { AS_IS, MS, NS };

struct map {
	const char *name, *labels, *json;
	enum unit unit;
	int delta; /* the status command's own session and commands */
};

static const struct map status_map[] = {
	{ "kvmm_page_size_bytes", "", "page_size" },
	{ "kvmm_pool_capacity_pages", "", "pages.total" },
	{ "kvmm_pool_created_pages", "", "pages.created" },
	{ "kvmm_pool_free_pages", "", "pages.free" },
	{ "kvmm_pool_allocated_pages", "", "pages.allocated" },
	{ "kvmm_pool_mapped_pages", "", "pages.mapped" },
	{ "kvmm_pool_revoking_pages", "", "pages.revoking" },
	{ "kvmm_pool_quarantined_pages", "", "pages.quarantined" },
	{ "kvmm_pool_scrubbed_pages_total", "", "pages.scrubbed" },
	{ "kvmm_pool_scrub_failures_total", "", "pages.scrub_failures" },
	{ "kvmm_pool_renewed_pages_total", "", "pages.renewed" },
	{ "kvmm_pool_renew_failures_total", "", "pages.renew_failures" },
	{ "kvmm_pool_ro_fds", "", "pages.ro_fds" },
	{ "kvmm_pool_ro_fd_cap", "", "pages.ro_fd_cap" },
	{ "kvmm_pool_ro_fd_opens_total", "", "pages.ro_fd_opens" },
	{ "kvmm_pool_ro_fd_drops_total", "", "pages.ro_fd_drops" },
	{ "kvmm_pool_ro_fd_unkept_opens_total", "",
	  "pages.ro_fd_unkept_opens" },
	/* kvmmctl's session is open when it asks */
	{ "kvmm_sessions", "", "sessions", AS_IS, 1 },
	{ "kvmm_regions", "", "regions" },
	{ "kvmm_sequences", "", "sequences" },
	{ "kvmm_sessions_opened_total", "", "sessions_total", AS_IS, 1 },
	{ "kvmm_sessions_cut_off_total", "", "sessions_cut_off" },
	{ "kvmm_sessions_refused_total", "reason=\"uid_limit\"",
	  "sessions_refused.uid_limit" },
	{ "kvmm_sessions_refused_total", "reason=\"admin_reserved\"",
	  "sessions_refused.admin_reserved" },
	{ "kvmm_sessions_refused_total", "reason=\"full\"",
	  "sessions_refused.full" },
	{ "kvmm_sessions_refused_total", "reason=\"no_memory\"",
	  "sessions_refused.no_memory" },
	{ "kvmm_sessions_refused_total", "reason=\"quarantine\"",
	  "sessions_refused.quarantine" },
	{ "kvmm_sessions_hello_timeouts_total", "", "sessions_hello_timeouts" },
	/* its HELLO and ADMIN_STATUS are counted before the snapshot */
	{ "kvmm_commands_total", "path=\"socket\"", "cmds_socket", AS_IS, 2 },
	{ "kvmm_commands_total", "path=\"ring\"", "cmds_ring" },
	{ "kvmm_commands_parked_total", "", "cmds_parked" },
	{ "kvmm_commands_parked", "", "cmds_parked_now" },
	{ "kvmm_revocations_posted_total", "", "revocations.posted" },
	{ "kvmm_revocations_acked_total", "", "revocations.acked" },
	{ "kvmm_revocations_timed_out_total", "", "revocations.timed_out" },
	{ "kvmm_revocations_cancelled_total", "", "revocations.cancelled" },
	{ "kvmm_revoke_timeout_seconds", "", "revoke_timeout_ms", MS },
	{ "kvmm_demotions_queued", "", "demotions_queued" },
	{ "kvmm_pins", "", "pins" },
	{ "kvmm_pinned_bytes", "", "pinned_bytes" },
	{ "kvmm_cache_drop_blocks_total", "", "cache_drop_blocks" },
	{ "kvmm_lend_requests_total", "", "lend.asked" },
	{ "kvmm_lend_blocks_total", "", "lend.blocks_given" },
	{ "kvmm_lend_extends_total", "", "lend.extends_served" },
	{ "kvmm_lend_failures_total", "", "lend.extends_failed" },
	{ "kvmm_lend_wait_seconds", "", "lend.wait_ms", MS },
	{ "kvmm_max_sessions", "", "max_sessions" },
	{ "kvmm_max_sessions_per_uid", "", "max_sessions_per_uid" },
	{ "kvmm_quarantine_per_uid", "", "quarantine_per_uid" },
	{ "kvmm_prefix_queries_total", "", "router.prefix_queries" },
	{ "kvmm_prefix_query_hashes_total", "", "router.prefix_query_hashes" },
	{ "kvmm_prefix_query_blocks_total", "tier=\"gpu\"",
	  "router.prefix_query_blocks.gpu" },
	{ "kvmm_prefix_query_blocks_total", "tier=\"host\"",
	  "router.prefix_query_blocks.host" },
	{ "kvmm_prefix_query_blocks_total", "tier=\"nvme\"",
	  "router.prefix_query_blocks.nvme" },
	{ "kvmm_prefix_query_blocks_total", "tier=\"moving\"",
	  "router.prefix_query_blocks.moving" },
	{ "kvmm_pin_many_total", "", "router.pin_many_calls" },
	{ "kvmm_pin_many_hashes_total", "", "router.pin_many_hashes" },
	{ "kvmm_pin_many_pinned_total", "", "router.pin_many_pinned" },
	/* kvmmctl status asks TIER_STATS after the status it prints */
	{ "kvmm_tier_stats_requests_total", "", "router.tier_stats_calls" },
	{ "kvmm_cache_publishes_total", "", "cache.publishes" },
	{ "kvmm_cache_duplicates_total", "", "cache.duplicates" },
	{ "kvmm_cache_not_cached_total", "", "cache.not_cached" },
	{ "kvmm_cache_prefix_opens_total", "", "cache.prefix_opens" },
	{ "kvmm_cache_prefix_blocks_asked_total", "",
	  "cache.prefix_blocks_asked" },
	{ "kvmm_cache_prefix_blocks_hit_total", "", "cache.prefix_blocks_hit" },
	{ "kvmm_cache_misses_total", "", "cache.misses" },
	{ "kvmm_cache_busy_misses_total", "", "cache.busy_misses" },
	{ "kvmm_cache_checksum_failures_total", "", "cache.checksum_failures" },
	{ "kvmm_cache_nvme_read_error_drops_total", "",
	  "cache.nvme_read_error_drops" },
	{ "kvmm_cache_recovered_blocks_total", "", "cache.recovered_blocks" },
	{ "kvmm_cache_tier_open_error", "tier=\"cache\"",
	  "cache.cache_open_error" },
	{ "kvmm_cache_tier_open_error", "tier=\"nvme\"",
	  "cache.nvme_open_error" },
	{ "kvmm_cache_open_attempts_total", "", "cache.cache_open_attempts" },
	{ "kvmm_cache_open_last_error", "", "cache.cache_open_last_error" },
	{ "kvmm_cache_open_retry_seconds", "", "cache.cache_open_retry_ms",
	  MS },
	{ "kvmm_cache_lower_free_refused_total", "",
	  "cache.lower_free_refused" },
	{ "kvmm_cache_nvme_invalidate_jobs_total", "",
	  "cache.nvme_invalidate_jobs" },
	{ "kvmm_cache_nvme_invalidated_blocks_total", "",
	  "cache.nvme_invalidated_blocks" },
	{ "kvmm_cache_nvme_invalidate_failures_total", "",
	  "cache.nvme_invalidate_failures" },
	{ "kvmm_cache_nvme_open_attempts_total", "",
	  "cache.nvme_open_attempts" },
	{ "kvmm_cache_nvme_open_last_error", "", "cache.nvme_open_last_error" },
	{ "kvmm_cache_nvme_open_retry_seconds", "", "cache.nvme_open_retry_ms",
	  MS },
	{ "kvmm_cache_nvme_write_returns_total", "",
	  "cache.nvme_write_returns" },
	{ "kvmm_cache_nvme_write_outs_total", "", "cache.nvme_write_outs" },
	{ "kvmm_cache_nvme_write_error", "", "cache.nvme_write_error" },
	{ "kvmm_cache_nvme_write_retry_seconds", "",
	  "cache.nvme_write_retry_ms", MS },
	{ "kvmm_cache_migrations_failed_total", "", "cache.migrations_failed" },
	{ "kvmm_cache_migrations_in_flight", "", "cache.migrations_in_flight" },
	{ "kvmm_cache_slot_waits_total", "", "cache.slot_waits" },
	{ "kvmm_cache_nvme_admission_rejects_total", "",
	  "cache.nvme_admission_rejects" },
	{ "kvmm_cache_pressure_reclaims_total", "", "cache.pressure_reclaims" },
	{ "kvmm_cache_quota_reclaims_total", "", "cache.quota_reclaims" },
	{ "kvmm_cache_restores_waited_total", "", "cache.restores_waited" },
	{ "kvmm_cache_prefix_opens_pending", "", "cache.prefix_opens_pending" },
	{ "kvmm_cache_restores_cancelled_total", "",
	  "cache.restores_cancelled" },
	{ "kvmm_cache_prefix_holes_total", "", "cache.prefix_holes" },
	{ "kvmm_cache_prefix_blocks_after_hole_total", "",
	  "cache.prefix_blocks_after_hole" },
	{ "kvmm_cache_plan_recomputes_total", "tier=\"host\"",
	  "cache.plan_recomputes.host" },
	{ "kvmm_cache_plan_recomputes_total", "tier=\"nvme\"",
	  "cache.plan_recomputes.nvme" },
	{ "kvmm_cache_held_copies_total", "", "cache.held_copies" },
	{ "kvmm_cache_early_opens_total", "", "cache.early_opens" },
	{ "kvmm_cache_early_reloads_total", "", "cache.early_reloads" },
	{ "kvmm_cache_early_reload_failures_total", "",
	  "cache.early_reload_failures" },
	{ "kvmm_cache_blocks_unshared_total", "", "cache.blocks_unshared" },
	{ "kvmm_cache_nvme_restamped_total", "", "cache.nvme_restamped" },
	{ "kvmm_cache_nvme_restamp_failures_total", "",
	  "cache.nvme_restamp_failures" },
	{ "kvmm_cache_cold_blocks", "", "cache.cold_blocks" },
	{ "kvmm_cache_cold_admitted_total", "", "cache.cold_admitted" },
	{ "kvmm_cache_cold_evicted_total", "", "cache.cold_evicted" },
	{ "kvmm_cache_cold_dropped_total", "", "cache.cold_dropped" },
};

static const struct map tier_map[] = {
	{ "kvmm_tier_capacity_blocks", NULL, "capacity_blocks" },
	{ "kvmm_tier_used_blocks", NULL, "used_blocks" },
	{ "kvmm_tier_block_bytes", NULL, "block_bytes" },
	{ "kvmm_tier_hits_total", NULL, "hits" },
	{ "kvmm_tier_demotions_in_total", NULL, "demotions_in" },
	{ "kvmm_tier_promotions_out_total", NULL, "promotions_out" },
	{ "kvmm_tier_promotions_by_publish_total", NULL,
	  "promotions_by_publish" },
	{ "kvmm_tier_drops_total", NULL, "drops" },
	{ "kvmm_tier_bytes_in_total", NULL, "bytes_in" },
	{ "kvmm_tier_bytes_out_total", NULL, "bytes_out" },
	{ "kvmm_tier_restore_seconds_total", NULL, "restore_ns", NS },
	{ "kvmm_tier_restore_max_seconds", NULL, "restore_max_ns", NS },
};

static const char *const tiers[3] = { "gpu", "host", "nvme" };

/* v as the formatter prints it in unit */
static void expect_text(unsigned long long v, enum unit u, char *buf,
			size_t len)
{
	if (u == MS)
		snprintf(buf, len, "%llu.%03llu", v / 1000, v % 1000);
	else if (u == NS)
		snprintf(buf, len, "%llu.%09llu", v / 1000000000,
			 v % 1000000000);
	else
		snprintf(buf, len, "%llu", v);
}

/* Every mapped series of e equals json (less the deltas when asked);
 * returns how many series were compared. */
/*
 * The kvmm_tenant_* series of the one tenant, uid 0 (this test's
 * process), against `kvmmctl tenants --json`: how many they are.
 */
static size_t compare_tenants(const struct tm_expo *e, const char *json)
{
	static const struct {
		const char *name, *json;
		bool tiers;
	} fams[] = {
		{ "kvmm_tenant_sessions", "sessions", false },
		{ "kvmm_tenant_cached_blocks", "cached_blocks", true },
		{ "kvmm_tenant_admitted_blocks_total", "admitted_blocks",
		  false },
		{ "kvmm_tenant_prefix_opens_total", "prefix_opens", false },
		{ "kvmm_tenant_hit_blocks_total", "hit_blocks", true },
		{ "kvmm_tenant_published_blocks_total", "published_blocks",
		  false },
		{ "kvmm_tenant_dropped_blocks_total", "dropped_blocks", false },
		{ "kvmm_tenant_limit_blocks", "limit_blocks", true },
		{ "kvmm_tenant_limit_moves_total", "limit_moves", false },
		{ "kvmm_tenant_quota_pages", "quota_pages", false },
		{ "kvmm_tenant_quota_used_pages", "quota_used_pages", false },
		{ "kvmm_tenant_quota_cached_pages", "quota_cached_pages",
		  false },
	};
	char want[64], labels[64], path[96];
	size_t n = 0;

	t_assert(strstr(json, "{\"kind\":\"uid\",\"tenants\":[{\"id\":0,"));
	t_assert(!strstr(json, "},{")); /* one tenant */
	for (size_t i = 0; i < sizeof(fams) / sizeof(fams[0]); i++) {
		for (int t = 0; t < (fams[i].tiers ? 3 : 1); t++) {
			if (fams[i].tiers) {
				snprintf(path, sizeof(path), "%s.%s",
					 fams[i].json, tiers[t]);
				snprintf(labels, sizeof(labels),
					 "kind=\"uid\",id=\"0\",tier=\"%s\"",
					 tiers[t]);
			} else {
				snprintf(path, sizeof(path), "%s",
					 fams[i].json);
				snprintf(labels, sizeof(labels),
					 "kind=\"uid\",id=\"0\"");
			}
			expect_text(json_u64(json, path), AS_IS, want,
				    sizeof(want));
			if (strcmp(tm_get(e, fams[i].name, labels), want))
				t_fail("%s{%s} = %s, tenants --json %s says %s",
				       fams[i].name, labels,
				       tm_get(e, fams[i].name, labels), path,
				       want);
			n++;
		}
	}
	/* the client's blocks and its prefix open are its */
	t_assert(json_u64(json, "published_blocks") > 0);
	t_assert_eq(json_u64(json, "prefix_opens"), 1);
	return n;
}

static size_t compare(const struct tm_expo *e, const char *json, bool deltas)
{
	char want[64], labels[64], path[96];
	size_t n = 0;

	for (size_t i = 0; i < sizeof(status_map) / sizeof(status_map[0]);
	     i++) {
		const struct map *m = &status_map[i];
		unsigned long long v = json_u64(json, m->json);

		if (deltas) {
			if (v < (unsigned long long)m->delta)
				t_fail("%s = %llu in the status", m->json, v);
			v -= m->delta;
		}
		expect_text(v, m->unit, want, sizeof(want));
		if (strcmp(tm_get(e, m->name, m->labels), want))
			t_fail("%s{%s} = %s, status --json %s says %s", m->name,
			       m->labels, tm_get(e, m->name, m->labels),
			       m->json, want);
		n++;
	}
	for (size_t i = 0; i < sizeof(tier_map) / sizeof(tier_map[0]); i++) {
		for (int t = 0; t < 3; t++) {
			const struct map *m = &tier_map[i];

			snprintf(path, sizeof(path), "cache.tiers.%s.%s",
				 tiers[t], m->json);
			snprintf(labels, sizeof(labels), "tier=\"%s\"",
				 tiers[t]);
			expect_text(json_u64(json, path), m->unit, want,
				    sizeof(want));
			if (strcmp(tm_get(e, m->name, labels), want))
				t_fail("%s{%s} = %s, status --json %s says %s",
				       m->name, labels,
				       tm_get(e, m->name, labels), path, want);
			n++;
		}
	}
	return n;
}

/* Scrape until the daemon is quiet: only our client's session (the start
 * probe's ended), no copy between tiers in flight. */
static void settled_scrape(int port, struct tm_resp *r, struct tm_expo *e)
{
	for (int i = 0; i < 1000; i++) {
		tm_scrape(port, r);
		tm_parse(r->body, e);
		if (tm_u64(e, "kvmm_sessions", NULL) == 1 &&
		    !tm_u64(e, "kvmm_cache_migrations_in_flight", NULL) &&
		    !tm_u64(e, "kvmm_demotions_queued", NULL))
			return;
		tm_resp_free(r);
		usleep(10000);
	}
	t_fail("the daemon did not settle");
}

int main(void)
{
	static const char *const extra[] = { "--metrics-listen", "127.0.0.1:0",
					     "--host-mem", "16M",
					     "--cache-gpu-blocks", "2",
					     "--revoke-timeout", "1500",
					     /* the tier counts below are LRU's
					      * (asym is the default) */
					     "--cache-policy", "lru",
					     /* what each build cost */
					     "--log-level", "debug", NULL };
	static struct tm_expo e, e2;
	struct kvmm_connect_opts co = { .size = sizeof(co) };
	uint64_t hashes[4] = { 0x1111, 0x2222, 0x3333, 0x4444 };
	struct tm_resp r;
	struct td_daemon d;
	struct kvmm_conn *c;
	struct kvmm_region *reg;
	uint32_t seq, pseq, nb;
	char cmd[512], *json, *text;
	size_t n;
	int port, st, err;

	err = td_start(&d, extra);
	if (err)
		t_fail("daemon did not start: %s", strerror(-err));
	port = tm_port(&d);
	t_assert(port > 0 && port < 65536);

	co.name = "metrics-test";
	co.map_ahead_set = 1;
	co.map_ahead_blocks = 0; /* nothing happens behind our back */
	t_ok(kvmm_connect(&co, &c));
	t_ok(kvmm_region_create(c, &tr_small_region, &reg));
	/* content A, then B: with room for 2 cached GPU blocks, A goes
	 * down to the host tier when B is published */
	for (int k = 0; k < 2; k++) {
		t_ok(kvmm_seq_open(reg, &seq));
		t_ok(kvmm_seq_extend(reg, seq, 2 * TR_TPB));
		t_assert_eq(kvmm_block_publish(reg, seq, 0, 2, 0,
					       hashes + 2 * k),
			    2);
		t_ok(kvmm_seq_close(reg, seq));
		settled_scrape(port, &r, &e);
		tm_resp_free(&r);
	}
	/* A again: restored from the host */
	t_ok(kvmm_seq_open_prefix(reg, hashes, 2, &pseq, &nb));
	t_assert_eq(nb, 2);
	settled_scrape(port, &r, &e);

	/* what the work implies */
	t_assert_eq(tm_u64(&e, "kvmm_up", NULL), 1);
	t_assert(tm_value(&e, "kvmm_build_info",
			  "version=\"" KVMM_VERSION
			  "\",abi=\"" TM_XSTR(KVMM_ABI_MAJOR) "." TM_XSTR(
				  KVMM_ABI_MINOR) "\""));
	t_assert(tm_value(&e, "kvmm_backend_info",
			  "backend=\"host\",device=\"host\""));
	t_assert(tm_value(&e, "kvmm_cache_policy_info",
			  "policy=\"lru\",restore_mode=\"plan\""));
	t_assert(tm_value(&e, "kvmm_cache_scope_info", "scope=\"shared\""));
	t_assert_eq(tm_u64(&e, "kvmm_page_size_bytes", NULL), 65536);
	t_assert_eq(tm_u64(&e, "kvmm_pool_capacity_pages", NULL), 1024);
	t_assert_eq(tm_u64(&e, "kvmm_regions", NULL), 1);
	t_assert_eq(tm_u64(&e, "kvmm_sequences", NULL), 1);
	t_assert_eq(tm_u64(&e, "kvmm_cache_publishes_total", NULL), 4);
	/* set up at the first publish, at the first try */
	t_assert_eq(tm_u64(&e, "kvmm_cache_open_attempts_total", NULL), 1);
	t_assert_eq(tm_u64(&e, "kvmm_cache_open_last_error", NULL), 0);
	t_assert_eq(tm_u64(&e, "kvmm_cache_prefix_opens_total", NULL), 1);
	t_assert_eq(tm_u64(&e, "kvmm_cache_prefix_blocks_asked_total", NULL),
		    2);
	t_assert_eq(tm_u64(&e, "kvmm_cache_prefix_blocks_hit_total", NULL), 2);
	t_assert_eq(tm_u64(&e, "kvmm_tier_capacity_blocks", "tier=\"gpu\""), 2);
	t_assert_eq(tm_u64(&e, "kvmm_tier_capacity_blocks", "tier=\"nvme\""),
		    0);
	t_assert_eq(tm_u64(&e, "kvmm_tier_block_bytes", "tier=\"host\""),
		    4 * 65536);
	t_assert_eq(tm_u64(&e, "kvmm_tier_hits_total", "tier=\"gpu\""), 0);
	t_assert_eq(tm_u64(&e, "kvmm_tier_hits_total", "tier=\"host\""), 2);
	/* A went down for B, then B for A's restore */
	t_assert_eq(tm_u64(&e, "kvmm_tier_demotions_in_total", "tier=\"host\""),
		    4);
	t_assert_eq(tm_u64(&e, "kvmm_tier_bytes_in_total", "tier=\"host\""),
		    4 * 4 * 65536);
	t_assert_eq(tm_u64(&e, "kvmm_tier_promotions_out_total",
			   "tier=\"host\""),
		    2);
	t_assert_eq(tm_u64(&e, "kvmm_tier_bytes_out_total", "tier=\"host\""),
		    2 * 4 * 65536);
	t_assert_eq(tm_u64(&e, "kvmm_tier_used_blocks", "tier=\"gpu\""), 2);
	t_assert_eq(tm_u64(&e, "kvmm_tier_used_blocks", "tier=\"host\""), 2);
	t_assert(strcmp(tm_get(&e, "kvmm_tier_restore_seconds_total",
			       "tier=\"host\""),
			"0.000000000"));
	t_assert(!strcmp(tm_get(&e, "kvmm_revoke_timeout_seconds", NULL),
			 "1.500"));
	/* the prefix sequence: 2 blocks of 2 layers' K and V, 8 pages, all
	 * mapped by us */
	t_assert_eq(tm_u64(&e, "kvmm_pool_allocated_pages", NULL), 8);
	t_assert_eq(tm_u64(&e, "kvmm_pool_mapped_pages", NULL), 8);
	t_assert_eq(tm_u64(&e, "kvmm_pool_free_pages", NULL), 1024 - 8);
	/* one block size cached: no kvmm_size_* family (the sums are its;
	 * kvmm_size_tenant_* and kvmm_size_demotions_queued included) */
	for (size_t i = 0; i < e.nf; i++)
		if (!strncmp(e.f[i].name, "kvmm_size_", strlen("kvmm_size_")))
			t_fail("one block size cached, yet %s", e.f[i].name);

	/* every series equals what status --json says right after */
	snprintf(cmd, sizeof(cmd), "%s --socket %s status --json",
		 td_build_path("kvmmctl", (char[256]){ 0 }, 256), d.sock);
	json = tm_run(cmd, &st);
	t_assert_eq(st, 0);
	n = compare(&e, json, true);
	if (strtod(tm_get(&e, "kvmm_uptime_seconds", NULL), NULL) * 1000 >
	    json_u64(json, "uptime_ms") + 1)
		t_fail("uptime went back");
	/* the tenant series equal what tenants --json says */
	snprintf(cmd, sizeof(cmd), "%s --socket %s tenants --json",
		 td_build_path("kvmmctl", (char[256]){ 0 }, 256), d.sock);
	free(json);
	json = tm_run(cmd, &st);
	t_assert_eq(st, 0);
	n += compare_tenants(&e, json);
	/* all of them: the mapped ones, up, build, backend, policy, scope,
	 * uptime */
	t_assert_eq(e.n, n + 6);
	printf("GET /metrics: %zu series, %zu bytes, all equal to status --json and tenants --json\n",
	       e.n, r.body_len);
	free(json);

	/* kvmmctl metrics: the same series (the policy is HTTP's only),
	 * the same values once both are quiet */
	snprintf(cmd, sizeof(cmd), "%s --socket %s metrics",
		 td_build_path("kvmmctl", (char[256]){ 0 }, 256), d.sock);
	tm_resp_free(&r);
	settled_scrape(port, &r, &e);
	text = tm_run(cmd, &st);
	t_assert_eq(st, 0);
	tm_parse(text, &e2);
	t_assert_eq(e2.n, e.n);
	t_assert(tm_value(&e2, "kvmm_cache_policy_info",
			  "policy=\"lru\",restore_mode=\"plan\""));
	for (size_t i = 0; i < e.n; i++) {
		const struct tm_sample *s = &e.s[i];
		const char *v = tm_value(&e2, s->name, s->labels);
		unsigned long long a, b;

		if (!strcmp(s->name, "kvmm_cache_policy_info") ||
		    !strcmp(s->name, "kvmm_uptime_seconds"))
			continue;
		if (!v)
			t_fail("kvmmctl metrics lacks %s{%s}", s->name,
			       s->labels);
		a = strtoull(s->value, NULL, 10);
		b = strtoull(v, NULL, 10);
		/* kvmmctl's own session and its HELLO + ADMIN_STATUS */
		if (!strcmp(s->name, "kvmm_sessions") ||
		    !strcmp(s->name, "kvmm_sessions_opened_total"))
			a += 1;
		if (!strcmp(s->name, "kvmm_commands_total") &&
		    strstr(s->labels, "socket"))
			a += 2;
		if (strchr(s->value, '.') ? strcmp(s->value, v) : a != b)
			t_fail("%s{%s}: HTTP %s, kvmmctl metrics %s", s->name,
			       s->labels, s->value, v);
	}
	printf("kvmmctl metrics: the same %zu series\n", e2.n);
	free(text);
	tm_resp_free(&r);

	/* a text kept for reuse (a plain GET) never hides a change from a
	 * fresh scrape (Cache-Control: no-cache, as tm_scrape() asks), nor
	 * from a plain GET after it */
	tm_http(port, "GET /metrics HTTP/1.1\r\n\r\n", 25, &r);
	t_assert_eq(r.code, 200);
	tm_parse(r.body, &e);
	t_assert_eq(tm_u64(&e, "kvmm_sequences", NULL), 1);
	tm_resp_free(&r);
	t_ok(kvmm_seq_open(reg, &seq));
	tm_scrape(port, &r);
	tm_parse(r.body, &e);
	t_assert_eq(tm_u64(&e, "kvmm_sequences", NULL), 2);
	tm_resp_free(&r);
	tm_http(port, "GET /metrics HTTP/1.1\r\n\r\n", 25, &r);
	tm_parse(r.body, &e);
	t_assert_eq(tm_u64(&e, "kvmm_sequences", NULL), 2);
	tm_resp_free(&r);
	t_ok(kvmm_seq_close(reg, seq));

	/* what a scrape costs: a plain GET (served from the text kept for
	 * a second) against the status command it mirrors over a fresh
	 * admin connection (what kvmmctl does), same daemon, same run; and
	 * the loop time of the builds of this run (kvmmd's debug log);
	 * figures for Documentation/admin.md, not asserted */
	{
		static const char req[] = "GET /metrics HTTP/1.1\r\n\r\n";
		struct kvmm_status_reply sr;
		double t0 = tm_now(), http_us, sock_us;
		unsigned long us[1024], bytes = 0;
		size_t nb = 0;
		char line[1024];
		FILE *f;

		for (int i = 0; i < 200; i++) {
			tm_http(port, req, sizeof(req) - 1, &r);
			t_assert_eq(r.code, 200);
			bytes = r.body_len;
			tm_resp_free(&r);
		}
		http_us = (tm_now() - t0) / 200 * 1e6;
		t0 = tm_now();
		for (int i = 0; i < 200; i++)
			t_ok(td_status(&d, &sr));
		sock_us = (tm_now() - t0) / 200 * 1e6;
		/* "metrics: build N: B bytes built in U us" */
		f = fopen(d.log, "r");
		t_assert(f);
		while (nb < 1024 && fgets(line, sizeof(line), f)) {
			const char *p = strstr(line, "bytes built in ");

			if (strstr(line, "metrics: build ") && p)
				us[nb++] = strtoul(p + 15, NULL, 10);
		}
		fclose(f);
		t_assert(nb > 0);
		qsort(us, nb, sizeof(us[0]), cmp_ulong);
		printf("GET /metrics: %.1f us per scrape (%lu bytes); "
		       "ADMIN_STATUS on a fresh admin connection: %.1f us; "
		       "ratio %.2f; %zu builds, median %lu us, max %lu us of loop time\n",
		       http_us, bytes, sock_us, http_us / sock_us, nb,
		       us[nb / 2], us[nb - 1]);
	}

	kvmm_disconnect(c);
	t_assert_eq(td_stop(&d), 0);
	return 0;
}
