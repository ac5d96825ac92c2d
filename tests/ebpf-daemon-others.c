// SPDX-License-Identifier: MIT
/*
 * One kvmmd's BPF telemetry counts its own probes, not another kvmmd's
 * started from the same binary (kvmmd@.service runs one per GPU): kvmmd
 * A (--telemetry bpf, a pin root of its own) and kvmmd B (telemetry off)
 * run side by side; B revokes a client's sequence, which fires kvmm:revoke
 * in B's process, in the executable A attached to.  A's maps must show no
 * revocation (they showed B's: its programs were attached to the file for
 * every process, and its cost model took B's transfers the same way).
 * Then the same on A counts exactly one.  The client's extends come from
 * this binary, which A attaches for every process (an engine's libkvmm),
 * so A counts them whichever daemon the client uses: telemetry.md says
 * why.  Skips (77) without root or BPF.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

	(void)arg;
	if (kvmm_connect(&co, &c) ||
	    kvmm_region_create(c, &tr_small_region, &r) || kvmm_seq_open(r, &s))
		return 1;
	if (kvmm_seq_extend(r, s, 2 * TR_TPB))
		return 2;
	e = rc_client_steps(c, r, s, wr, rd);
	return e ? 2 + e : 0;
}

int main(void)
{
	struct bpf_test b;
	char cmd[1024], kvmmctl[512];
	const char *args_a[] = { "--telemetry",
				 "bpf",
				 "--telemetry-pin-root",
				 b.pin,
				 "--telemetry-attach",
				 b.self,
				 NULL };
	struct td_daemon a, other;
	struct tel *t;
	char *out;

	bpf_test_init(&b, "others");
	t = bpf_test_open(&b); /* can this machine load BPF at all? */
	tel_close(t);

	t_ok(td_start(&a, args_a));
	t_ok(td_start(&other, NULL)); /* --telemetry off; KVMM_SOCKET */
	td_build_path("kvmmctl", kvmmctl, sizeof(kvmmctl));
	snprintf(cmd, sizeof(cmd), "%s --json trace --once --pin-root %s",
		 kvmmctl, b.pin);

	rc_run_client(&other, client, NULL);
	out = bpf_test_run(cmd);
	printf("after B's revocation: %s", out);
	t_assert(strstr(out, "\"source\":\"bpf\""));
	t_assert(strstr(out, "\"revoke\":0,"));
	t_assert(strstr(out, "\"extend\":1,")); /* this binary: any process */

	t_assert_eq(setenv("KVMM_SOCKET", a.sock, 1), 0);
	rc_run_client(&a, client, NULL);
	out = bpf_test_run(cmd);
	printf("after A's revocation: %s", out);
	t_assert(strstr(out, "\"revoke\":1,"));
	t_assert(strstr(out, "\"extend\":2,"));

	t_assert_eq(td_stop(&other), 0);
	t_assert_eq(td_stop(&a), 0);
	printf("ok: a kvmmd's maps count its own probes, not another kvmmd's\n");
	return 0;
}
