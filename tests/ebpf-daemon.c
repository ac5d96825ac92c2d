// SPDX-License-Identifier: MIT
/*
 * Telemetry through a real daemon and a real client process: kvmmd runs
 * with --telemetry bpf and attaches to this binary's probes (it links
 * libkvmm statically, as an engine may) and to its own; a forked client
 * extends a sequence three times and acknowledges one revocation; then
 * `kvmmctl --json trace --once` shows exactly three extends (kvmm:extend
 * in libkvmm) and one revocation (kvmm:revoke in kvmmd) with their
 * histograms, and stopping the daemon removes its pins.
 * Skips (77) without root or BPF.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ebpf/telemetry.h"
#include "kvmm/kvmm.h"
#include "kvmm/lib/client.h"
#include "tests/lib/bpf_test.h"
#include "tests/lib/daemon.h"
#include "tests/lib/revoke_client.h"
#include "tests/lib/small_region.h"
#include "tests/lib/test.h"

static int client(void *arg, int wr, int rd)
{
	struct kvmm_connect_opts co = { .size = sizeof(co), .name = "tel" };
	struct kvmm_conn *c;
	struct kvmm_region *r;
	uint32_t s;
	int e;

	if (kvmm_connect(&co, &c) ||
	    kvmm_region_create(c, &tr_small_region, &r) || kvmm_seq_open(r, &s))
		return 1;
	for (int i = 1; i <= 3; i++)
		if (kvmm_seq_extend(r, s, i * TR_TPB))
			return 2;
	e = rc_client_steps(c, r, s, wr, rd);
	return e ? 2 + e : 0;
}

int main(void)
{
	struct bpf_test b;
	char cmd[1024], kvmmctl[512];
	const char *args[] = { "--telemetry",
			       "bpf",
			       "--telemetry-pin-root",
			       b.pin,
			       "--telemetry-attach",
			       b.self,
			       NULL };
	struct td_daemon d;
	struct stat st;
	struct tel *t;
	char *out;

	bpf_test_init(&b, "daemon");
	t = bpf_test_open(&b); /* can this machine load BPF at all? */
	tel_close(t);

	t_ok(td_start(&d, args));
	rc_run_client(&d, client, NULL);

	td_build_path("kvmmctl", kvmmctl, sizeof(kvmmctl));
	snprintf(cmd, sizeof(cmd), "%s --json trace --once --pin-root %s",
		 kvmmctl, b.pin);
	out = bpf_test_run(cmd);
	printf("%s", out);
	t_assert(strstr(out, "\"source\":\"bpf\""));
	t_assert(strstr(out, "\"extend\":3,"));
	t_assert(strstr(out, "\"revoke\":1,"));
	t_assert(strstr(out, "{\"kind\":\"extend\",\"tier\":\"gpu\","
			     "\"dst_tier\":\"gpu\",\"segments\":0,"
			     "\"count\":3,"));
	/* sum_bytes of extend rows = blocks after each: 1 + 2 + 3 */
	t_assert(
		strstr(out, "\"count\":3,") &&
		strstr(strstr(out, "\"kind\":\"extend\""), "\"sum_bytes\":6,"));
	t_assert(strstr(out, "{\"kind\":\"revoke\",\"tier\":\"gpu\","
			     "\"dst_tier\":\"gpu\",\"segments\":0,"
			     "\"count\":1,"));

	t_assert_eq(td_stop(&d), 0);
	t_assert(stat(b.pin, &st) && errno == ENOENT); /* pins removed */
	printf("ok: daemon + client telemetry visible in kvmmctl trace\n");
	return 0;
}
