// SPDX-License-Identifier: MIT
/*
 * kvmmctl status [--json]: the daemon's backend, pool pages, sessions,
 * sequences and counters (ADMIN_STATUS).
 */
#include <stdio.h>

#include "tools/kvmmctl/kvmmctl.h"

static const char *backend_name(uint32_t b)
{
	return b == 0 ? "host" : b == 1 ? "cuda" : "unknown";
}

int cmd_status(int argc, char **argv, struct kvmmctl_ctx *ctx)
{
	struct kvmm_status_reply st = { 0 };
	struct kvmm_conn *c;
	int err;

	if (argc > 1) {
		fprintf(stderr, "usage: kvmmctl status [--json]\n");
		return 2;
	}
	if (kvmmctl_connect(ctx, &c))
		return 1;
	err = kc_request(c, KVMM_CMD_ADMIN_STATUS, NULL, 0, &st, sizeof(st),
			 NULL);
	kvmm_disconnect(c);
	if (err) {
		fprintf(stderr, "kvmmctl: status: %s\n", kvmm_strerror(err));
		return 1;
	}
	st.device[sizeof(st.device) - 1] = '\0';
	if (ctx->json) {
		printf("{\"backend\":\"%s\",\"device\":",
		       backend_name(st.backend));
		kvmmctl_json_str(st.device);
		printf(",\"page_size\":%llu,\"pages\":{\"total\":%llu,"
		       "\"created\":%llu,\"free\":%llu,\"allocated\":%llu,"
		       "\"mapped\":%llu,\"revoking\":%llu,\"quarantined\":%llu},"
		       "\"sessions\":%llu,\"regions\":%llu,\"sequences\":%llu,"
		       "\"sessions_total\":%llu,\"sessions_cut_off\":%llu,"
		       "\"cmds_socket\":%llu,\"cmds_ring\":%llu,"
		       "\"revocations\":{\"posted\":%llu,\"acked\":%llu,"
		       "\"timed_out\":%llu},\"revoke_timeout_ms\":%u,"
		       "\"pid\":%u,\"uptime_ms\":%llu}\n",
		       (unsigned long long)st.page_size,
		       (unsigned long long)st.pages_total,
		       (unsigned long long)st.pages_created,
		       (unsigned long long)st.pages_free,
		       (unsigned long long)st.pages_allocated,
		       (unsigned long long)st.pages_mapped,
		       (unsigned long long)st.pages_revoking,
		       (unsigned long long)st.pages_quarantined,
		       (unsigned long long)st.sessions,
		       (unsigned long long)st.regions,
		       (unsigned long long)st.sequences,
		       (unsigned long long)st.sessions_total,
		       (unsigned long long)st.sessions_cut_off,
		       (unsigned long long)st.cmds_socket,
		       (unsigned long long)st.cmds_ring,
		       (unsigned long long)st.revocations_posted,
		       (unsigned long long)st.revocations_acked,
		       (unsigned long long)st.revocations_timed_out,
		       st.revoke_timeout_ms, st.pid,
		       (unsigned long long)st.uptime_ms);
		return 0;
	}
	printf("backend      %s (%s)\n", backend_name(st.backend), st.device);
	printf("page size    %llu bytes\n", (unsigned long long)st.page_size);
	printf("pages        %llu total, %llu free, %llu allocated, %llu mapped, %llu revoking, %llu quarantined (%llu created)\n",
	       (unsigned long long)st.pages_total,
	       (unsigned long long)st.pages_free,
	       (unsigned long long)st.pages_allocated,
	       (unsigned long long)st.pages_mapped,
	       (unsigned long long)st.pages_revoking,
	       (unsigned long long)st.pages_quarantined,
	       (unsigned long long)st.pages_created);
	printf("sessions     %llu (%llu since start, %llu cut off)\n",
	       (unsigned long long)st.sessions,
	       (unsigned long long)st.sessions_total,
	       (unsigned long long)st.sessions_cut_off);
	printf("regions      %llu\nsequences    %llu\n",
	       (unsigned long long)st.regions,
	       (unsigned long long)st.sequences);
	printf("commands     %llu socket, %llu ring\n",
	       (unsigned long long)st.cmds_socket,
	       (unsigned long long)st.cmds_ring);
	printf("revocations  %llu posted, %llu acked, %llu timed out (timeout %u ms)\n",
	       (unsigned long long)st.revocations_posted,
	       (unsigned long long)st.revocations_acked,
	       (unsigned long long)st.revocations_timed_out,
	       st.revoke_timeout_ms);
	printf("pid          %u, up %llu ms\n", st.pid,
	       (unsigned long long)st.uptime_ms);
	return 0;
}
