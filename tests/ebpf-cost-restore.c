// SPDX-License-Identifier: MIT
/*
 * kvmmd's cost model after real restores: a real kvmmd (--telemetry shm,
 * --profile h200-llama3-8b-ref, 3 cached GPU blocks, 16 MiB host tier);
 * this process publishes four contents of three blocks, so the first is
 * demoted to host memory, then opens a sequence on the first content,
 * which the daemon restores from host.  After a telemetry poll,
 * `kvmmctl --json status` reports at least one transfer observation and a
 * host bandwidth moved off the profile's value (toward the measured
 * memcpy rate), NVMe unchanged.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "tests/lib/daemon.h"
#include "tests/lib/small_region.h"
#include "tests/lib/test.h"

static unsigned long long field(const char *out, const char *name)
{
	const char *p = strstr(out, name);

	if (!p)
		t_fail("no %s in %s", name, out);
	return strtoull(p + strlen(name), NULL, 10);
}

int main(void)
{
	const char *args[] = { "--telemetry",
			       "shm",
			       "--profile",
			       "h200-llama3-8b-ref",
			       "--cache-gpu-blocks",
			       "3",
			       "--host-mem",
			       "16M",
			       NULL };
	struct kvmm_connect_opts co = { .size = sizeof(co), .name = "cost" };
	char kvmmctl[512], cmd[1024], out[4096];
	unsigned long long hb, hbp, nb, nbp, tr;
	struct kvmm_region *r;
	struct kvmm_conn *c;
	struct td_daemon d;
	uint64_t h[4][3];
	uint32_t s, n;
	size_t len;
	FILE *p;

	/* each telemetry tick that fed says so: the wait below */
	setenv("KVMMD_TEST_TEL_POLL_LOG", "1", 1);
	t_ok(td_start(&d, args));
	setenv("KVMM_SOCKET", d.sock, 1);
	t_ok(kvmm_connect(&co, &c));
	t_ok(kvmm_region_create(c, &tr_small_region, &r));
	for (int k = 0; k < 4; k++) {
		for (int b = 0; b < 3; b++)
			h[k][b] = 0x5000ull * (k + 1) + b + 1;
		t_ok(kvmm_seq_open(r, &s));
		t_ok(kvmm_seq_extend(r, s, 3 * TR_TPB));
		t_assert_eq(kvmm_block_publish(r, s, 0, 3, 0, h[k]), 3);
		t_ok(kvmm_seq_close(r, s));
	}
	t_ok(kvmm_seq_open_prefix(r, h[0], 3, &s, &n)); /* host -> GPU */
	if (n < 1)
		td_dump_log(&d);
	t_assert(n >= 1);
	kvmm_disconnect(c);
	/* the restores answered, so measured: a poll since feeds them */
	td_wait_tel_polled(&d, td_tel_ticks(&d), 20000);

	td_build_path("kvmmctl", kvmmctl, sizeof(kvmmctl));
	snprintf(cmd, sizeof(cmd), "%s --socket %s --json status", kvmmctl,
		 d.sock);
	p = popen(cmd, "r");
	t_assert(p);
	len = fread(out, 1, sizeof(out) - 1, p);
	out[len] = 0;
	t_assert_eq(pclose(p), 0);
	hb = field(out, "\"host_bw\":");
	hbp = field(out, "\"host_bw_profile\":");
	nb = field(out, "\"nvme_bw\":");
	nbp = field(out, "\"nvme_bw_profile\":");
	tr = field(out, "\"transfers\":");
	printf("host bandwidth %llu B/s (profile %llu), %llu transfers\n", hb,
	       hbp, tr);
	t_assert(tr >= 1);
	t_assert(hb != hbp);
	t_assert_eq(nb, nbp);
	t_assert_eq(td_stop(&d), 0);
	printf("ok: real restores corrected kvmmd's host bandwidth\n");
	return 0;
}
