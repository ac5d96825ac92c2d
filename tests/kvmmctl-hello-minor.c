// SPDX-License-Identifier: MIT
/*
 * timeout: 120
 * kvmmctl's code for older daemons, run against this kvmmd: with
 * KVMM_TEST_HELLO_MINOR=N (a libkvmm test knob) kvmmctl's HELLO says
 * 1.N, kvmmd serves it as a client of 1.N (replies cut to what 1.N
 * knew) and libkvmm's c->hello.abi_minor is N, so kvmmctl takes the path
 * it takes with a daemon of 1.N.  kvmmd caches two block sizes
 * (--cache-block-pages 4,2, 2 GPU blocks a size, host memory); each
 * size's model publishes two contents of 2 blocks (2 on the GPU, 2 in
 * host memory a size).  At each boundary the minor below and the one
 * that brought the feature:
 *   - status --json: each size's object from 1.21 on (none at 1.20: the
 *     TIER_STATS of 1.20 names no sizes), its queued demotions from 1.22
 *     (ADMIN_STATUS of 1.21 ends before them), the restamp keys from 1.23
 *     and the cold keys from 1.24, in the sums' object and each size's,
 *     each size's weight from 1.25 (1 of 2), absent below (no zeros for
 *     what was not sent); the text's size lines likewise;
 *   - tenants: refused below 1.10 (no ADMIN_TENANTS), the sums' table at
 *     1.10 and 1.21, each size's table from 1.22; --block-pages refused
 *     at 1.21 without asking, served at 1.22;
 *   - quota: showing one refused below 1.13 (the rows had no quota),
 *     setting one at 1.12 says what was set; at 1.13 both show the row;
 *   - tenant-limit: refused below 1.11 without asking (nothing set),
 *     set at 1.11 (tenants --json shows it);
 *   - cache-drop: refused below 1.14 (nothing dropped), served at 1.14
 *     without the sizes and restamp keys, --block-pages refused at 1.21,
 *     each size's part at 1.22 and the restamp keys from 1.23;
 *   - metrics: no tenant families below 1.10, no per-size families at
 *     1.20, per-size tier families but no per-size tenant or queued ones
 *     at 1.21, no cold families at 1.23, no kvmm_size_weight at 1.24;
 *     kvmm_build_info's abi label names the minor served.
 * With an NVMe tier (where O_DIRECT io_uring runs; else those steps are
 * left out, said so): a restart's recovered blocks, whose recovered
 * lines (the sums' and each size's) status prints from 1.24 alone and
 * cold keys are absent at 1.23; a drop of the 2-page size keeping a
 * pinned NVMe block, whose restamp line the 1.22 cache-drop and status
 * leave out and the 1.23 status prints in the sums and in that size's
 * block.
 * Every figure asserted is the value the daemon holds (the blocks of
 * each size in each tier, what a drop took).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/cache-multi-size-common.h"
#include "tests/lib/nvme_probe.h"

static const uint32_t layers[2] = { 2, 1 }; /* 4 and 2 pages a block */

static char out[1 << 17];

/* kvmmctl ARGS, its HELLO saying 1.minor, stdout and stderr into out;
 * its exit status.  The knob is set for kvmmctl alone. */
static int ctl(const char *sock, unsigned int minor, const char *args)
{
	char m[16], a[512];
	int r;

	snprintf(m, sizeof(m), "%u", minor);
	snprintf(a, sizeof(a), "%s 2>&1", args);
	t_ok(setenv("KVMM_TEST_HELLO_MINOR", m, 1));
	r = td_kvmmctl(sock, a, out, sizeof(out));
	t_ok(unsetenv("KVMM_TEST_HELLO_MINOR"));
	printf("--- 1.%u kvmmctl %s: exit %d\n%s", minor, args, r, out);
	return r;
}

/* How many times what is in out. */
static unsigned int count(const char *what)
{
	unsigned int n = 0;

	for (const char *p = strstr(out, what); p; p = strstr(p + 1, what))
		n++;
	return n;
}

/* what is in out exactly `times` times, else the test fails */
static void expect(const char *what, unsigned int times)
{
	if (count(what) != times)
		t_fail("\"%s\" %u times in kvmmctl's output, expected %u:\n%s",
		       what, count(what), times, out);
}

/* kvmmctl ARGS at 1.minor exits with status, out holding what (once) */
static void ctl_says(const char *sock, unsigned int minor, const char *args,
		     int status, const char *what)
{
	int r = ctl(sock, minor, args);

	if (r != status)
		t_fail("1.%u kvmmctl %s: exit %d, expected %d:\n%s", minor,
		       args, r, status, out);
	expect(what, 1);
}

/*
 * status: the sizes (1.21: TIER_STATS lists them), their queued
 * demotions (1.22: ADMIN_STATUS' per size), the restamp keys (1.23) and
 * the cold keys (1.24), each absent below its minor.  Each size holds 2
 * GPU and 2 host blocks.
 */
static void status(const char *sock)
{
	static const char *const size_lines[] = {
		"\nsize 4       262144 bytes a block; 4 published, 0 prefix blocks hit of 0 asked, 0 misses",
		"\nsize 2       131072 bytes a block; 4 published, 0 prefix blocks hit of 0 asked, 0 misses",
	};

	t_assert_eq(ctl(sock, 20, "--json status"), 0);
	expect("\"sizes\":[", 0);
	expect("\"nvme_restamped\":", 0);
	expect("\"cold_blocks\":", 0);
	expect("\"tiers\":{\"gpu\":{\"capacity_blocks\":4,\"used_blocks\":4,",
	       1);
	t_assert_eq(ctl(sock, 20, "status"), 0);
	expect("\nsizes ", 0);
	expect("\nsize ", 0);
	expect("\ntier gpu     4/4 blocks", 1);

	t_assert_eq(ctl(sock, 21, "--json status"), 0);
	expect("\"sizes\":[{\"block_pages\":4,", 1);
	expect("{\"block_pages\":2,", 1);
	/* the sums' alone: no size's */
	expect("\"demotions_queued\":", 1);
	expect("\"nvme_restamped\":", 0);
	expect("\"cold_blocks\":", 0);
	expect("\"gpu\":{\"capacity_blocks\":2,\"used_blocks\":2,", 2);
	t_assert_eq(ctl(sock, 21, "status"), 0);
	expect("\nsizes        2 block sizes cached", 1);
	for (int i = 0; i < 2; i++) {
		char line[256];

		snprintf(line, sizeof(line), "%s\n", size_lines[i]);
		expect(line, 1);
	}
	expect("demotions queued", 0);
	expect("\n  tier gpu     2/2 blocks", 2);

	t_assert_eq(ctl(sock, 22, "--json status"), 0);
	expect("\"demotions_queued\":", 3);
	expect("{\"block_pages\":4,\"demotions_queued\":0,", 1);
	expect("\"nvme_restamped\":", 0);
	expect("\"cold_blocks\":", 0);
	t_assert_eq(ctl(sock, 22, "status"), 0);
	for (int i = 0; i < 2; i++) {
		char line[256];

		snprintf(line, sizeof(line), "%s, 0 demotions queued\n",
			 size_lines[i]);
		expect(line, 1);
	}

	t_assert_eq(ctl(sock, 23, "--json status"), 0);
	/* the sums' and each size's */
	expect("\"nvme_restamped\":0,\"nvme_restamp_failures\":0,", 3);
	expect("\"cold_blocks\":", 0);

	t_assert_eq(ctl(sock, 24, "--json status"), 0);
	expect("\"nvme_restamped\":0,\"nvme_restamp_failures\":0,", 3);
	expect("\"cold_blocks\":0,\"cold_admitted\":0,\"cold_evicted\":0,\"cold_dropped\":0,",
	       3);
	expect("\"weight\":", 0);
	t_assert_eq(ctl(sock, 24, "status"), 0);
	expect(", weight ", 0);

	/* each size's weight (4,2: 1 of 2) */
	t_assert_eq(ctl(sock, 25, "--json status"), 0);
	expect("{\"block_pages\":4,\"weight\":1,\"weights_total\":2,", 1);
	expect("{\"block_pages\":2,\"weight\":1,\"weights_total\":2,", 1);
	t_assert_eq(ctl(sock, 25, "status"), 0);
	expect("\nsize 4       262144 bytes a block, weight 1 of 2; ", 1);
	expect("\nsize 2       131072 bytes a block, weight 1 of 2; ", 1);
}

/* metrics: the families of what each minor's replies hold */
static void metrics(const char *sock)
{
	char want[160];
	unsigned int uid = (unsigned int)getuid();

	snprintf(
		want, sizeof(want),
		"\nkvmm_tenant_cached_blocks{kind=\"uid\",id=\"%u\",tier=\"gpu\"} 4\n",
		uid);
	t_assert_eq(ctl(sock, 9, "metrics"), 0);
	expect("\nkvmm_build_info{version=\"" KVMM_VERSION
	       "\",abi=\"1.9\"} 1\n",
	       1);
	expect("\nkvmm_tenant_", 0);
	expect("\nkvmm_cache_publishes_total 8\n", 1);
	t_assert_eq(ctl(sock, 10, "metrics"), 0);
	expect(want, 1);

	t_assert_eq(ctl(sock, 20, "metrics"), 0);
	expect("\nkvmm_size_", 0);
	t_assert_eq(ctl(sock, 21, "metrics"), 0);
	expect("\nkvmm_size_tier_used_blocks{size=\"4\",tier=\"gpu\"} 2\n", 1);
	expect("\nkvmm_size_tier_used_blocks{size=\"2\",tier=\"host\"} 2\n", 1);
	expect("\nkvmm_size_tenant_", 0);
	expect("\nkvmm_size_demotions_queued", 0);
	expect("\nkvmm_cache_nvme_restamped_total", 0);

	snprintf(
		want, sizeof(want),
		"\nkvmm_size_tenant_cached_blocks{size=\"2\",kind=\"uid\",id=\"%u\",tier=\"gpu\"} 2\n",
		uid);
	t_assert_eq(ctl(sock, 22, "metrics"), 0);
	expect(want, 1);
	expect("\nkvmm_size_demotions_queued{size=\"4\"} 0\n", 1);
	expect("\nkvmm_cache_nvme_restamped_total", 0);
	expect("\nkvmm_size_nvme_restamped_total", 0);

	t_assert_eq(ctl(sock, 23, "metrics"), 0);
	expect("\nkvmm_cache_nvme_restamped_total 0\n", 1);
	expect("\nkvmm_size_nvme_restamped_total{size=\"2\"} 0\n", 1);
	expect("\nkvmm_cache_cold_", 0);
	expect("\nkvmm_size_cold_", 0);

	t_assert_eq(ctl(sock, 24, "metrics"), 0);
	expect("\nkvmm_build_info{version=\"" KVMM_VERSION
	       "\",abi=\"1.24\"} 1\n",
	       1);
	expect("\nkvmm_cache_cold_blocks 0\n", 1);
	expect("\nkvmm_size_cold_blocks{size=\"4\"} 0\n", 1);
	expect("\nkvmm_size_weight", 0);

	t_assert_eq(ctl(sock, 25, "metrics"), 0);
	expect("\nkvmm_size_weight{size=\"4\"} 1\n", 1);
	expect("\nkvmm_size_weight{size=\"2\"} 1\n", 1);
}

/* the test uid's row of `--json tenants` at 1.24 holds what (a row
 * ends with its quota_cached_pages) */
static void tenant_row_has(const char *sock, const char *what)
{
	const char *row, *end, *at;
	char id[32];

	t_assert_eq(ctl(sock, 24, "--json tenants"), 0);
	snprintf(id, sizeof(id), "{\"id\":%u,", (unsigned int)getuid());
	row = strstr(out, id);
	end = row ? strstr(row, "\"quota_cached_pages\":") : NULL;
	at = row ? strstr(row, what) : NULL;
	if (!end || !at || at > end)
		t_fail("no %s in uid %u's row:\n%s", what,
		       (unsigned int)getuid(), out);
}

/* tenants: none below 1.10, the sums' table alone before 1.22 */
static void tenants(const char *sock)
{
	ctl_says(
		sock, 9, "tenants", 1,
		"kvmmctl: tenants: kvmmd is older than ABI 1.10 (no ADMIN_TENANTS)\n");
	t_assert_eq(ctl(sock, 10, "--json tenants"), 0);
	expect("\"cached_blocks\":{\"gpu\":4,\"host\":4,\"nvme\":0}", 1);
	expect("\"sizes\"", 0);
	t_assert_eq(ctl(sock, 21, "tenants"), 0);
	expect("blocks of ", 0);
	ctl_says(
		sock, 21, "tenants --block-pages 4", 1,
		"kvmmctl: tenants: --block-pages: kvmmd is older than ABI 1.22 (no tenants of one block size)\n");
	t_assert_eq(ctl(sock, 22, "--json tenants"), 0);
	expect("\"sizes\":[{\"block_pages\":4,\"tenants\":[", 1);
	expect("{\"block_pages\":2,\"tenants\":[", 1);
	expect("\"cached_blocks\":{\"gpu\":2,\"host\":2,\"nvme\":0}", 2);
	t_assert_eq(ctl(sock, 22, "tenants"), 0);
	expect("\nblocks of 4 pages alone (of the sums above):\n", 1);
	t_assert_eq(ctl(sock, 22, "--json tenants --block-pages 4"), 0);
	expect("{\"kind\":\"uid\",\"block_pages\":4,", 1);
	expect("\"cached_blocks\":{\"gpu\":2,\"host\":2,\"nvme\":0}", 1);
}

/* quota: shown from 1.13 (the rows' quota), set at any minor */
static void quota(const char *sock)
{
	static const char old[] =
		"kvmmctl: quota: kvmmd is older than ABI 1.13 (ADMIN_TENANTS has no quotas)\n";

	ctl_says(sock, 9, "quota 4242", 1, old);
	ctl_says(sock, 12, "quota 4242", 1, old);
	ctl_says(sock, 12, "quota 4242 1M", 0,
		 "uid 4242: quota set to 1048576 bytes\n");
	ctl_says(sock, 13, "quota 4242", 0,
		 "uid 4242: quota 16 pages (1048576 bytes), 0 pages charged");
	ctl_says(sock, 13, "quota 4242 2M", 0,
		 "uid 4242: quota 32 pages (2097152 bytes), 0 pages charged");
	ctl_says(sock, 24, "quota 4242 0", 0, "uid 4242: no quota");
}

/* tenant-limit: refused below 1.11 without asking */
static void tenant_limit(const char *sock)
{
	char args[64];

	snprintf(args, sizeof(args), "tenant-limit %u gpu:100",
		 (unsigned int)getuid());
	ctl_says(
		sock, 10, args, 1,
		"kvmmctl: tenant-limit: kvmmd is older than ABI 1.11 (no tenant limits)\n");
	tenant_row_has(sock,
		       "\"limit_blocks\":{\"gpu\":0,\"host\":0,\"nvme\":0}");
	t_assert_eq(ctl(sock, 11, args), 0);
	tenant_row_has(sock,
		       "\"limit_blocks\":{\"gpu\":100,\"host\":0,\"nvme\":0}");
	snprintf(args, sizeof(args), "tenant-limit %u none",
		 (unsigned int)getuid());
	t_assert_eq(ctl(sock, 24, args), 0);
	tenant_row_has(sock,
		       "\"limit_blocks\":{\"gpu\":0,\"host\":0,\"nvme\":0}");
}

/* cache-drop: none below 1.14, a size's from 1.22, restamps from 1.23 */
static void cache_drop(const char *sock)
{
	static const char none[] =
		"{\"dropped\":{\"gpu\":0,\"host\":0,\"nvme\":0},\"kept\":{\"gpu\":0,\"host\":0,\"nvme\":0},";

	ctl_says(
		sock, 13, "cache-drop", 1,
		"kvmmctl: cache-drop: kvmmd is older than ABI 1.14 (no cache drop)\n");
	ctl_says(
		sock, 21, "cache-drop --block-pages 2", 1,
		"kvmmctl: cache-drop: --block-pages: kvmmd is older than ABI 1.22 (no drop of one block size)\n");
	/* neither asked: every block still there */
	tenant_row_has(sock,
		       "\"cached_blocks\":{\"gpu\":4,\"host\":4,\"nvme\":0}");

	/* the reply of 1.14: no sizes, no restamps */
	ctl_says(sock, 14, "--json cache-drop --tier host", 0,
		 "{\"dropped\":{\"gpu\":0,\"host\":4,\"nvme\":0},");
	expect("\"sizes\"", 0);
	expect("\"nvme_restamp", 0);
	expect("\"nvme_stale_invalidated\":0}\n", 1);
	ctl_says(sock, 21, "cache-drop --uid 999", 0,
		 "dropped      gpu 0, host 0, nvme 0 blocks\n");
	expect("\nsize ", 0);
	ctl_says(
		sock, 24, "cache-drop --uid 999", 0,
		"\nsize 4       dropped gpu 0, host 0, nvme 0 blocks; kept gpu 0, host 0, nvme 0\n");
	expect("\nsize 2       dropped gpu 0", 1);

	/* 1.22: one size's part, no restamps */
	ctl_says(
		sock, 22, "--json cache-drop --tier gpu --block-pages 4", 0,
		"\"block_pages\":4,\"sizes\":[{\"block_pages\":4,\"dropped\":{\"gpu\":2,\"host\":0,\"nvme\":0},");
	expect("{\"dropped\":{\"gpu\":2,\"host\":0,\"nvme\":0},", 1);
	expect("\"nvme_restamp", 0);
	expect("\"nvme_stale_invalidated\":0,\"block_pages\":4,", 1);

	/* 1.23: both sizes walked, the restamps at the end */
	ctl_says(sock, 23, "--json cache-drop", 0,
		 "{\"dropped\":{\"gpu\":2,\"host\":0,\"nvme\":0},");
	expect("\"sizes\":[{\"block_pages\":4,", 1);
	expect("\"nvme_restamped\":0,\"nvme_restamp_failures\":0,\"nvme_restamp_gone\":0}\n",
	       1);
	ctl_says(sock, 23, "--json cache-drop", 0, none);
	tenant_row_has(sock,
		       "\"cached_blocks\":{\"gpu\":0,\"host\":0,\"nvme\":0}");
}

static char nvme[256];
static const char *nvme_args[] = { "--cache-policy",
				   "lru",
				   "--cache-block-pages",
				   "4,2",
				   "--cache-gpu-blocks",
				   "2",
				   "--host-mem",
				   "4M",
				   "--nvme-path",
				   nvme,
				   "--nvme-size",
				   "4194304",
				   "--nvme-save-on-stop",
				   "5000",
				   NULL };

/*
 * The blocks a restart recovered from NVMe (each size's 2, saved at the
 * stop before): status' recovered lines, the sums' and each size's, from
 * 1.24 alone (TIER_STATS of 1.23 ends before the cold counts: no line,
 * where the text would have said 0 of everything), no size at 1.20.
 */
static void recovered(void)
{
	struct kvmm_tier_stats_reply ts;
	struct td_daemon d;

	unlink(nvme);
	cc_start(&d, nvme_args);
	for (int i = 0; i < 2; i++) {
		ms_write(d.sock, layers[i], 0);
		t_assert_eq(res->status, 0);
	}
	cc_stop(&d);
	cc_start(&d, nvme_args);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.recovered_blocks, 2 * NB);
	t_assert_eq(ts.cold_blocks, 2 * NB);

	t_assert_eq(ctl(d.sock, 24, "status"), 0);
	expect("\ncache        0 published, 0 prefix blocks hit of 0 asked, 0 checksum failures, 4 recovered\n",
	       1);
	expect("\n             recovered: 4 still cold, 0 taken in (an open or a pin), 0 evicted unused, 0 dropped unused\n",
	       1);
	expect("\n               recovered: 2 still cold, 0 taken in (an open or a pin), 0 evicted unused, 0 dropped unused\n",
	       2);
	t_assert_eq(ctl(d.sock, 23, "status"), 0);
	expect("\ncache        0 published, 0 prefix blocks hit of 0 asked, 0 checksum failures, 4 recovered\n",
	       1);
	expect("recovered:", 0);
	expect("\nsize 4 ", 1);
	t_assert_eq(ctl(d.sock, 23, "--json status"), 0);
	expect("\"recovered_blocks\":4,", 1);
	expect("\"cold_", 0);
	t_assert_eq(ctl(d.sock, 20, "status"), 0);
	expect("recovered:", 0);
	expect("\nsize ", 0);
	cc_stop(&d);
}

/*
 * A drop of the 2-page size keeping a pinned NVMe block restamps its
 * header (ABI 1.23): a 1.22 cache-drop prints no restamp line (its reply
 * ends before them), a 1.22 status neither; a 1.23 status has the line
 * in the sums and in the 2-page size's block.
 */
static void restamped(void)
{
	static const char line[] =
		" kept NVMe blocks restamped above a drop mark, 0 not (";
	struct kvmm_tier_stats_reply b;
	struct kvmm_pin_opts po;
	struct kvmm_conn *pin;
	struct td_daemon d;
	uint64_t h[NB];

	unlink(nvme);
	cc_start(&d, nvme_args);
	ms_write(d.sock, layers[0], 0);
	/* the 2-page size's content 0 pushed down to NVMe in this run (a
	 * pin does not find a block recovered at start) */
	for (int k = 0; k <= 8; k++)
		ms_write(d.sock, layers[1], k);
	ms_size_stats(d.sock, 2, &b);
	t_assert(b.tiers[2].used_blocks >= NB);
	pin = cc_connect_lib(d.sock, "pinner");
	ms_hashes(layers[1], 0, h);
	t_ok(cc_pin(pin, h[0], 0, 0, 0, &po));

	ctl_says(d.sock, 22, "cache-drop --block-pages 2", 0,
		 "; kept gpu 0, host 0, nvme 1\n");
	expect("restamped", 0);
	ms_size_stats(d.sock, 2, &b);
	t_assert_eq(b.nvme_restamped, 1); /* it was, all the same */
	t_assert_eq(ctl(d.sock, 22, "status"), 0);
	expect(line, 0);
	t_assert_eq(ctl(d.sock, 23, "status"), 0);
	expect("\n             1 kept NVMe blocks restamped above a drop mark, 0 not (",
	       1);
	expect("\n               1 kept NVMe blocks restamped above a drop mark, 0 not (",
	       1);
	/* the 2-page size's block, not the 4-page one's */
	if (strstr(out, "\nsize 2 ") > strstr(out, "\n               1 kept"))
		t_fail("the restamp line not in size 2's block:\n%s", out);
	kvmm_disconnect(pin);
	cc_stop(&d);
}

int main(void)
{
	const char *args[] = { "--cache-policy",
			       "lru",
			       "--cache-block-pages",
			       "4,2",
			       "--cache-gpu-blocks",
			       "2",
			       "--host-mem",
			       "4M",
			       NULL };
	struct td_daemon d;

	ms_res_init();
	cc_start(&d, args);
	ms_publish_both(d.sock);
	status(d.sock);
	metrics(d.sock);
	tenants(d.sock);
	quota(d.sock);
	tenant_limit(d.sock);
	cache_drop(d.sock); /* last: it drops the blocks */
	cc_stop(&d);
	/* with an NVMe tier, where it can run */
	cc_nvme_path(nvme, sizeof(nvme), "kvmmctl-hello-minor");
	if (!t_nvme_usable(nvme)) {
		printf("no O_DIRECT io_uring I/O in %s: the recovered and restamp lines not checked\n",
		       nvme);
		return 0;
	}
	recovered();
	restamped();
	unlink(nvme);
	return 0;
}
