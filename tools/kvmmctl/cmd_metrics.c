// SPDX-License-Identifier: MIT
/*
 * kvmmctl metrics: the daemon's status (ADMIN_STATUS, TIER_STATS and,
 * with several block sizes cached, each size's TIER_STATS: what `kvmmctl
 * status` reads) and tenants (ADMIN_TENANTS, with several sizes each
 * size's too: what `kvmmctl tenants` reads) in the Prometheus text
 * format, by the formatter kvmmd's own --metrics-listen endpoint uses
 * (kvmm/kvmmd/metrics_text.c).
 * For node_exporter's textfile collector, write it to a temporary file
 * and rename it into place (Documentation/admin.md).  Nothing is printed
 * unless the whole exposition was built, and a failed write of stdout
 * (a full disk) is an error, so a caller's "&& mv" never installs half a
 * file.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvmm/kvmmd/metrics_text.h"
#include "tools/kvmmctl/kvmmctl.h"

int cmd_metrics(int argc, char **argv, struct kvmmctl_ctx *ctx)
{
	struct kvmm_tier_stats_reply ts = { 0 };
	struct kd_metrics_size sz[KVMM_TIER_STATS_SIZES] = { 0 };
	struct kvmm_tenants_reply *size_tn[KVMM_TIER_STATS_SIZES] = { 0 };
	struct kvmm_status_reply st = { 0 };
	struct kd_metrics_src src = { .st = &st };
	struct kvmm_tenants_reply *tn = NULL;
	struct kvmm_conn *c;
	char *text = NULL;
	size_t len = 0;
	int err, ts_err;
	FILE *f;

	if (kvmmctl_args("metrics", argc, argv, 0, 0, "metrics"))
		return 2;
	/* it printed the text format: a script that asked for JSON read
	 * it as a parse error, or not at all */
	if (ctx->json) {
		fprintf(stderr,
			"kvmmctl: metrics: --json is not supported: metrics prints the Prometheus text format (kvmmctl --json status and --json tenants have its numbers)\n");
		return 2;
	}
	/* its line said why (a second "is kvmmd running?" followed it,
	 * also after a timeout of a kvmmd that was) */
	if (kvmmctl_connect(ctx, &c))
		return 1;
	src.abi_major = c->hello.abi_major;
	src.abi_minor = c->hello.abi_minor;
	err = kvmmctl_fetch_status(c, &st, &ts, &ts_err);
	/* a daemon without the block cache answers TIER_STATS with an
	 * error: its families are left out, as in `status` */
	if (!ts_err)
		src.ts = &ts;
	/* with several block sizes cached (ABI 1.21): each size's, the
	 * kvmm_size_tier_* families kvmmd's --metrics-listen prints too */
	if (!err && !ts_err)
		err = kvmmctl_fetch_sizes(c, &ts, sz, &src.nr_sizes);
	if (src.nr_sizes)
		src.sizes = sz;
	/* before ABI 1.10 (-ENOTTY): no tenant families; no answer (or
	 * none that makes sense) fails the scrape, which must not lose
	 * families without saying so */
	if (!err) {
		int tn_err = kvmmctl_fetch_tenants(c, 0, &tn);

		if (!tn_err)
			src.tn = tn;
		else if (kvmmctl_conn_lost(tn_err))
			err = tn_err;
	}
	/* and, with several sizes, each size's (ABI 1.22; an older daemon
	 * is not asked, -EOPNOTSUPP): the kvmm_size_tenant_* families */
	for (uint32_t i = 0; !err && src.tn && i < src.nr_sizes; i++) {
		int tn_err = kvmmctl_fetch_tenants(c, sz[i].pages, &size_tn[i]);

		if (!tn_err)
			sz[i].tn = size_tn[i];
		else if (kvmmctl_conn_lost(tn_err))
			err = tn_err;
	}
	kvmm_disconnect(c);
	if (err) {
		fprintf(stderr, "kvmmctl: metrics: %s\n",
			kvmmctl_strerror(ctx, err));
		goto out;
	}
	f = open_memstream(&text, &len);
	if (!f) {
		perror("kvmmctl: metrics");
		err = -ENOMEM;
		goto out;
	}
	err = kd_metrics_write(f, &src);
	if (fclose(f))
		err = err ? err : -EIO;
	/* the write's own errno: a full disk is ENOSPC, not EIO */
	errno = 0;
	if (!err && (fwrite(text, 1, len, stdout) != len || fflush(stdout)))
		err = errno ? -errno : -EIO;
	free(text);
	if (err)
		fprintf(stderr, "kvmmctl: metrics: writing: %s\n",
			strerror(-err));
out:
	free(tn);
	for (uint32_t i = 0; i < KVMM_TIER_STATS_SIZES; i++)
		free(size_tn[i]);
	return err ? 1 : 0;
}
