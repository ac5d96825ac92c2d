// SPDX-License-Identifier: MIT
/*
 * Pin benchmark: what BLOCK_PIN costs as a session holds more pins, and
 * what the end of a session holding N pins costs the daemon, on a real
 * kvmmd (host backend, 4 KiB pages, 2-page blocks kept in the host tier).
 *
 * The cache is filled once with the largest N blocks; then for each N a
 * fresh connection pins blocks [0, N) (plain pins, one round trip each)
 * and disconnects.  The end of the session is timed from the disconnect
 * until ADMIN_STATUS on another connection no longer counts it (the
 * daemon's loop is single-threaded, so the answer waits for the
 * teardown).  The baseline is the smallest N: per-pin costs at larger N
 * are printed as ratios to it (1.0 = linear in N; the O(pins^2) teardown
 * this replaced gave a ratio of about N / N_smallest).
 *
 *   build/bench/pins [--pins N,N,...]     (default 1000,10000,50000)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "kvmm/lib/client.h"
#include "tests/lib/daemon.h"

#define MAX_ROUNDS 8
#define BATCH 256 /* blocks published per sequence */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static uint64_t hash_of(uint32_t i)
{
	return 0x5000000000ull + i;
}

static int status(struct kvmm_conn *c, struct kvmm_status_reply *st)
{
	size_t len = 0;
	int err;

	memset(st, 0, sizeof(*st));
	err = kc_request(c, KVMM_CMD_ADMIN_STATUS, NULL, 0, st, sizeof(*st),
			 &len);
	return err ? err : len < sizeof(*st) ? -EPROTO : 0;
}

static struct kvmm_conn *connect_named(const char *name)
{
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.name = name,
					.map_ahead_set = 1 };
	struct kvmm_conn *c;
	int err = kvmm_connect(&co, &c);

	if (err) {
		fprintf(stderr, "pins: connect: %s\n", kvmm_strerror(err));
		return NULL;
	}
	return c;
}

/* Publish blocks [0, n) from one publisher connection, BATCH at a time;
 * the cache demotes them to the host tier as they come. */
static int fill(uint32_t n)
{
	struct kvmm_region_opts ro = { .size = sizeof(ro),
				       .layers = 1,
				       .kv_heads = 1,
				       .head_dim = 64,
				       .dtype_bytes = 2,
				       .max_seqs = 4 };
	uint64_t *h = malloc(BATCH * sizeof(*h));
	struct kvmm_region *r = NULL;
	struct kvmm_conn *c = connect_named("pins-publisher");
	uint32_t tpb, seq;
	int err = -ENOMEM;

	if (!c || !h)
		goto out;
	ro.max_tokens = BATCH * 32; /* 4 KiB pages of 32 tokens */
	err = kvmm_region_create(c, &ro, &r);
	if (err)
		goto out;
	tpb = kvmm_region_tokens_per_block(r);
	for (uint32_t first = 0; first < n && !err; first += BATCH) {
		uint32_t nb = n - first < BATCH ? n - first : BATCH;
		int got;

		for (uint32_t b = 0; b < nb; b++)
			h[b] = hash_of(first + b);
		err = kvmm_seq_open(r, &seq);
		if (err)
			break;
		err = kvmm_seq_extend(r, seq, nb * tpb);
		if (!err) {
			got = kvmm_block_publish(r, seq, 0, nb, 0, h);
			if (got < 0)
				err = got;
			else if ((uint32_t)got != nb)
				err = -ENOSPC;
		}
		if (kvmm_seq_close(r, seq) && !err)
			err = -EIO;
	}
out:
	if (err)
		fprintf(stderr, "pins: publishing %u blocks: %s\n", n,
			kvmm_strerror(err));
	if (r)
		kvmm_region_destroy(r);
	if (c)
		kvmm_disconnect(c);
	free(h);
	return err;
}

struct round {
	uint32_t n;
	double pin_ns; /* per pin: one BLOCK_PIN round trip */
	double end_ms; /* the session's end, all of it */
};

static int one_round(struct kvmm_conn *adm, struct round *rd)
{
	struct kvmm_status_reply st;
	struct kvmm_conn *c = connect_named("pinner");
	uint64_t base, t0, t1;
	int err;

	if (!c)
		return -EIO;
	err = status(adm, &st);
	if (err)
		goto fail;
	base = st.sessions - 1; /* without the pinner */
	t0 = now_ns();
	for (uint32_t i = 0; i < rd->n; i++) {
		err = kvmm_block_pin(c, hash_of(i), NULL);
		if (err) {
			fprintf(stderr, "pins: pin %u: %s\n", i,
				kvmm_strerror(err));
			goto fail;
		}
	}
	t1 = now_ns();
	rd->pin_ns = (double)(t1 - t0) / rd->n;
	t0 = now_ns();
	kvmm_disconnect(c);
	do {
		err = status(adm, &st);
	} while (!err && st.sessions > base);
	rd->end_ms = (now_ns() - t0) / 1e6;
	return err;
fail:
	kvmm_disconnect(c);
	return err;
}

int main(int argc, char **argv)
{
	struct round rd[MAX_ROUNDS];
	unsigned nr = 0;
	uint32_t max = 0;
	char host_mem[32], quota[32];
	const char *list = "1000,10000,50000";
	struct kvmm_conn *adm = NULL;
	struct td_daemon d;
	int err;

	if (argc == 3 && !strcmp(argv[1], "--pins")) {
		list = argv[2];
	} else if (argc != 1) {
		fprintf(stderr, "usage: pins [--pins N,N,...]\n");
		return 2;
	}
	for (const char *p = list; *p && nr < MAX_ROUNDS;) {
		char *end;
		unsigned long v = strtoul(p, &end, 10);

		if (end == p || v < 100 || v > 1000000 ||
		    (*end && *end != ',')) {
			fprintf(stderr,
				"pins: bad count list '%s' "
				"(100..1000000 each)\n",
				list);
			return 2;
		}
		rd[nr++].n = (uint32_t)v;
		if (v > max)
			max = (uint32_t)v;
		p = *end ? end + 1 : end;
	}
	if (!nr) { /* the baseline is the first round's */
		fprintf(stderr, "pins: no count in '%s' (100..1000000 each)\n",
			list);
		return 2;
	}
	/* 8 KiB blocks in the host tier, a slot to spare per batch */
	snprintf(host_mem, sizeof(host_mem), "%llu",
		 (unsigned long long)(max + 2 * BATCH) * 8192);
	snprintf(quota, sizeof(quota), "%u", max);
	const char *args[] = { "--page-size",
			       "4K",
			       "--gpu-mem",
			       "8M",
			       "--cache-gpu-blocks",
			       "256",
			       "--host-mem",
			       host_mem,
			       "--pin-quota",
			       quota,
			       "--log-level",
			       "warn",
			       NULL };
	err = td_start(&d, args);
	if (err) {
		fprintf(stderr, "pins: kvmmd did not start: %s\n",
			strerror(-err));
		return 1;
	}
	err = fill(max);
	if (!err) {
		adm = connect_named("pins-status");
		if (!adm)
			err = -EIO;
	}
	for (unsigned i = 0; !err && i < nr; i++)
		err = one_round(adm, &rd[i]);
	if (adm)
		kvmm_disconnect(adm);
	if (err) {
		td_dump_log(&d);
		td_stop(&d);
		return 1;
	}
	td_stop(&d);
	printf("%10s %14s %14s %16s %12s\n", "pins", "pin us/call",
	       "session end ms", "end us per pin", "vs baseline");
	for (unsigned i = 0; i < nr; i++) {
		double per = rd[i].end_ms * 1e3 / rd[i].n;
		double base = rd[0].end_ms * 1e3 / rd[0].n;

		printf("%10u %14.2f %14.2f %16.3f %12.2f\n", rd[i].n,
		       rd[i].pin_ns / 1e3, rd[i].end_ms, per, per / base);
	}
	printf("{\"bench\":\"pins\",\"baseline_pins\":%u,\"rounds\":[",
	       rd[0].n);
	for (unsigned i = 0; i < nr; i++)
		printf("%s{\"pins\":%u,\"pin_ns\":%.0f,\"end_ms\":%.3f,"
		       "\"end_per_pin_vs_baseline\":%.3f}",
		       i ? "," : "", rd[i].n, rd[i].pin_ns, rd[i].end_ms,
		       (rd[i].end_ms / rd[i].n) / (rd[0].end_ms / rd[0].n));
	printf("]}\n");
	return 0;
}
