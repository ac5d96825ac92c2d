// SPDX-License-Identifier: MIT
/*
 * libkvmm fires the step access probe itself: a client process publishes
 * three blocks of sequence s, opens sequence s1 on the first two as a
 * prefix, and runs steps with no telemetry call of its own.  Each
 * kvmm_step_end() reports every known block of every open sequence once,
 * so after STEPS steps with s and s1 open and TAIL more after s1 closed:
 *	block 0, 1: 2 * STEPS + TAIL + 1 (the daemon traces the prefix open)
 *	block 2:    STEPS + TAIL
 * The daemon runs in this process (its loop on a thread; the client is
 * this binary re-executed, as a fork of a threaded process may deadlock
 * in ASan's allocator) and its
 * telemetry snapshot must hold exactly those counts, first through the
 * shared-memory fallback (no root needed), then through BPF (the pinned
 * map as kvmmctl's reader sees it; skipped without root or BPF).
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
#include "tests/lib/inproc_daemon.h"
#include "tests/lib/small_region.h"
#include "tests/lib/test.h"

#define STEPS 7
#define TAIL 3

static const uint64_t hashes[3] = { 0xa1, 0xa2, 0xa3 };

static int client(void)
{
	struct kvmm_connect_opts co = { .size = sizeof(co), .name = "step" };
	struct kvmm_conn *c;
	struct kvmm_region *r;
	uint32_t s, s1, nb;

	if (kvmm_connect(&co, &c) ||
	    kvmm_region_create(c, &tr_small_region, &r) ||
	    kvmm_seq_open(r, &s) || kvmm_seq_extend(r, s, 3 * TR_TPB + 10))
		return 1;
	if (kvmm_block_publish(r, s, 0, 3, 0, hashes) != 3)
		return 2;
	if (kvmm_seq_open_prefix(r, hashes, 2, &s1, &nb) || nb != 2)
		return 3;
	for (int step = 0; step < STEPS + TAIL; step++) {
		if (step == STEPS && kvmm_seq_close(r, s1))
			return 4;
		if (kvmm_step_begin(c) || kvmm_step_end(c))
			return 5;
	}
	kvmm_disconnect(c);
	return 0;
}

static const uint64_t want[3] = { 2 * STEPS + TAIL + 1, 2 * STEPS + TAIL + 1,
				  STEPS + TAIL };

/* 0 when run and checked, 77 when the daemon could not start (BPF). */
static int run(enum tel_mode mode)
{
	struct kd_daemon d;
	struct kd_config cfg;
	struct kvmm_block_stats ts, ms;
	char dir[64];

	inproc_mkdir(dir, sizeof(dir), "step");
	inproc_config(&d, &cfg, dir, "step", mode);
	if (kd_daemon_start(&d, &cfg)) {
		rmdir(dir);
		return 77;
	}
	inproc_run_client(&d, cfg.socket_path);
	t_ok(tel_poll(d.tel));
	t_assert_eq(tel_source(d.tel),
		    mode == TEL_MODE_BPF ? TEL_SOURCE_BPF : TEL_SOURCE_SHM);
	for (int b = 0; b < 3; b++) {
		t_ok(tel_block_lookup(d.tel, hashes[b], &ts));
		printf("%s: block %d count %llu (want %llu)\n",
		       tel_mode_string(mode), b, (unsigned long long)ts.count,
		       (unsigned long long)want[b]);
		t_assert_eq(ts.count, want[b]);
		t_assert_eq(ts.last_tier, KVMM_TEL_TIER_GPU);
	}
	if (mode == TEL_MODE_BPF) {
		struct tel_opts po = { .size = sizeof(po),
				       .mode = TEL_MODE_PINNED };
		struct tel *maps;

		po.pin_root = cfg.telemetry_pin_root;
		t_ok(tel_open(&po, &maps));
		t_ok(tel_poll(maps));
		for (int b = 0; b < 3; b++) {
			t_ok(tel_block_lookup(maps, hashes[b], &ms));
			t_assert_eq(ms.count, want[b]);
		}
		tel_close(maps);
	}
	kd_daemon_stop(&d);
	rmdir(dir);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "client"))
		return client();
	t_assert_eq(run(TEL_MODE_SHM), 0);
	if (!HAVE_BPF || !HAVE_SDT)
		t_skip("shm checked; built without BPF or USDT support");
	if (geteuid() != 0)
		t_skip("shm checked; BPF telemetry needs root");
	if (run(TEL_MODE_BPF))
		t_skip("shm checked; kvmmd with BPF telemetry did not start");
	printf("ok: libkvmm's step probe gives exact block counts (shm, bpf)\n");
	return 0;
}
