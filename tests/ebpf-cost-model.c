// SPDX-License-Identifier: MIT
/*
 * kvmmd --profile: the daemon loads the cost model and telemetry corrects
 * it online.  kvmmd (loop on a thread in this process, --telemetry shm so
 * no root is needed) loads the h200-llama3-8b-ref profile; a client
 * process records 20 host restores of 1 MiB in 1 ms each (1.05 GB/s,
 * far below the profile's host bandwidth) through libkvmm's recorder; one
 * poll feeds them to d->tel_feed.cost, whose host bandwidth must have
 * moved from the profile's value toward the measured one while NVMe's
 * stayed, and the status reply (kvmmctl status --json "cost_model")
 * carries the corrected and the profile rates.  An unknown --profile makes the daemon refuse to start.
 * Limit: restores are recorded by the client, not provoked in the cache.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ebpf/telemetry_shm.h"
#include "kvmm/kvmm.h"
#include "kvmm/kvmmd/kvmmd.h"
#include "kvmm/lib/client.h"
#include "kvmm/policy/cost_model.h"
#include "tests/lib/inproc_daemon.h"
#include "tests/lib/test.h"

static int client(void)
{
	struct kvmm_connect_opts co = { .size = sizeof(co), .name = "cost" };
	struct kvmm_conn *c;

	if (kvmm_connect(&co, &c) || !kvmm_tel_shm_enabled(c->tel))
		return 1;
	for (int i = 0; i < 20; i++)
		kvmm_tel_restore(c->tel, 0x100 + i, KVMM_TEL_TIER_HOST, 1 << 20,
				 1000000);
	kvmm_disconnect(c);
	return 0;
}

static void setup(struct kd_config *cfg, struct kd_daemon *d, const char *dir,
		  const char *profile)
{
	inproc_config(d, cfg, dir, "cost", TEL_MODE_SHM);
	snprintf(cfg->profile, sizeof(cfg->profile), "%s", profile);
}

int main(int argc, char **argv)
{
	struct kd_daemon d;
	struct kd_config cfg;
	struct kvmm_status_reply st;
	double host0, nvme0, host1, measured = (1 << 20) / 1e-3;
	char dir[64];

	if (argc > 1 && !strcmp(argv[1], "client"))
		return client();
	inproc_mkdir(dir, sizeof(dir), "cost");

	setup(&cfg, &d, dir, "no-such-profile");
	t_assert(kd_daemon_start(&d, &cfg) != 0);

	setup(&cfg, &d, dir, "h200-llama3-8b-ref");
	t_ok(kd_daemon_start(&d, &cfg));
	t_assert(d.cost && d.tel_feed.cost == d.cost);
	t_assert(strstr(d.cost->name, "h200-llama3-8b-ref"));
	host0 = d.cost->bandwidth[POL_TIER_HOST];
	nvme0 = d.cost->bandwidth[POL_TIER_NVME];
	t_assert(host0 > 4 * measured);
	inproc_run_client(&d, cfg.socket_path);
	t_ok(tel_poll(d.tel));
	host1 = d.cost->bandwidth[POL_TIER_HOST];
	printf("host bandwidth: profile %.3g B/s, measured %.3g B/s, "
	       "corrected %.3g B/s (%llu transfer observations)\n",
	       host0, measured, host1,
	       (unsigned long long)d.tel_feed.transfers);
	t_assert(d.tel_feed.transfers >= 1);
	t_assert(host1 < host0);
	t_assert(host1 >= measured * 0.99);
	t_assert(d.cost->bandwidth[POL_TIER_NVME] == nvme0);
	t_ok(kd_status(&d, &st)); /* what kvmmctl status --json prints */
	t_assert_eq(st.cost_host_bw, (uint64_t)host1);
	t_assert_eq(st.cost_host_bw_profile, (uint64_t)host0);
	t_assert_eq(st.cost_nvme_bw, (uint64_t)nvme0);
	t_assert_eq(st.cost_transfers, d.tel_feed.transfers);
	kd_daemon_stop(&d);
	rmdir(dir);
	printf("ok: kvmmd's cost model follows measured restores\n");
	return 0;
}
