// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * What kvmmd reports about pins (ADMIN_SESSIONS, ADMIN_STATUS, kvmmctl
 * sessions/status) is true at all times, with real processes and no
 * further pin call from the pinner: a pool of 8 blocks of 4 pages the
 * cache may keep on the GPU, no lower tier (a victim is dropped).
 *
 *   - a pinner process P holds a plain pin, a TTL pin and a priority-only
 *     record: 3 records of its quota of 3, 3 blocks' bytes;
 *   - another session Q pins one of the same blocks: 4 records, 3
 *     distinct blocks pinned;
 *   - P's TTL passes while P sleeps: its record is gone within the
 *     daemon's timer tick (pins 2, not 3 until P's next call), and P can
 *     pin a third block under its quota;
 *   - kvmmctl sessions --json / text and status --json show the same;
 *   - P is killed: its records go, Q's stays;
 *   - a priority-only record does not stop its block's eviction: when
 *     pool pressure drops the block, the record goes with it (Q's count
 *     falls without a call from Q, and BLOCK_UNPIN answers -ENOENT).
 */
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>

#include "kvmm/kvmm.h"
#include "tests/cache-common.h"
#include "tests/lib/daemon.h"

#define NB 4
#define BLOCK_BYTES ((uint64_t)CC_PPB * CC_PAGE)
#define TTL_NS 700000000ull /* 700 ms */

static uint64_t hash_of(int b)
{
	return 0xa10000ull + b + 1;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* The session of process pid, from ADMIN_SESSIONS; fails if none. */
static void session_of(struct cc *adm, pid_t pid, struct kvmm_session_info *out)
{
	static char buf[KVMM_MSG_MAX];
	struct kvmm_sessions_reply *rep = (void *)buf;

	t_ok(cc_call(adm, KVMM_CMD_ADMIN_SESSIONS, NULL, 0, buf, sizeof(buf),
		     NULL, NULL));
	t_assert_eq(rep->entry_size, sizeof(rep->sessions[0]));
	for (uint32_t i = 0; i < rep->nr; i++) {
		if (rep->sessions[i].pid == (uint32_t)pid) {
			*out = rep->sessions[i];
			return;
		}
	}
	t_fail("no session of pid %d", (int)pid);
}

static void status(struct cc *adm, struct kvmm_status_reply *st)
{
	t_ok(cc_call(adm, KVMM_CMD_ADMIN_STATUS, NULL, 0, st, sizeof(*st), NULL,
		     NULL));
}

static void expect_status(struct cc *adm, uint64_t pins, uint64_t blocks)
{
	struct kvmm_status_reply st;

	status(adm, &st);
	t_assert_eq(st.pins, pins);
	t_assert_eq(st.pinned_bytes, blocks * BLOCK_BYTES);
}

/* kvmmctl sessions --json has the pin fields json in the object that
 * holds jkey, and the text the columns text on the line holding tkey
 * (a text ending in "\n": the line's last columns, no flag after them). */
static void kvmmctl_shows(const char *sock, const char *jkey, const char *json,
			  const char *tkey, const char *text)
{
	static char out[65536];
	const char *o, *end;

	t_assert_eq(td_kvmmctl(sock, "sessions --json", out, sizeof(out)), 0);
	o = strstr(out, jkey);
	t_assert(o != NULL);
	end = strchr(o, '}');
	t_assert(end != NULL);
	o = strstr(o, json);
	if (!o || o > end)
		t_fail("no '%s' by '%s' in: %s", json, jkey, out);
	t_assert_eq(td_kvmmctl(sock, "sessions", out, sizeof(out)), 0);
	o = strstr(out, tkey);
	t_assert(o != NULL);
	end = strchr(o, '\n');
	o = strstr(o, text);
	if (!o || o > end)
		t_fail("no '%s' by '%s' in: %s", text, tkey, out);
}

/* P: pins, reports, then obeys one-byte commands on cmd ('p': pin block
 * 3, answer its pin count) and otherwise sleeps; no other call. */
static void pinner(const char *sock, int cmd, int res)
{
	struct kvmm_conn *c = cc_connect_lib(sock, "pinner");
	struct kvmm_pin_opts o;
	uint64_t expires;
	char ch;

	t_ok(cc_pin(c, hash_of(0), 0, 0, 0, &o));
	t_ok(cc_pin(c, hash_of(1), KVMM_PIN_F_TTL, TTL_NS, 0, &o));
	expires = o.expires_ns;
	t_ok(cc_pin(c, hash_of(2),
		    KVMM_PIN_F_PRIORITY | KVMM_PIN_F_PRIORITY_ONLY, 0, 5, &o));
	t_assert_eq(o.pins, 3);
	t_assert_eq(o.pin_quota, 3);
	t_assert_eq(write(res, &expires, sizeof(expires)), sizeof(expires));
	while (read(cmd, &ch, 1) == 1) {
		uint32_t n = 0;

		if (ch == 'p' && cc_pin(c, hash_of(3), 0, 0, 0, &o) == 0)
			n = o.pins;
		t_assert_eq(write(res, &n, sizeof(n)), sizeof(n));
	}
	_exit(0);
}

int main(void)
{
	const char *args[] = { "--gpu-mem", "2M",	   "--cache-gpu-blocks",
			       "8",	    "--pin-quota", "3",
			       NULL };
	struct kvmm_session_info si;
	uint64_t h[NB], expires, t_gone = 0;
	uint32_t pub[NB * CC_PPB], ids[8 * CC_PPB], n;
	struct kvmm_pin_opts o;
	struct kvmm_conn *q;
	int cmd[2], res[2];
	static char out[65536];
	struct td_daemon d;
	struct cc adm, b;
	uint32_t seq;
	pid_t p;

	td_start_ok(&d, args);
	for (int i = 0; i < NB; i++)
		h[i] = hash_of(i);
	t_assert_eq(cc_publish_content(d.sock, h, NB, 77, pub), 0);
	cc_connect(&adm, d.sock);
	expect_status(&adm, 0, 0);

	t_ok(pipe(cmd));
	t_ok(pipe(res));
	p = fork();
	t_assert(p >= 0);
	if (p == 0) {
		close(cmd[1]);
		close(res[0]);
		pinner(d.sock, cmd[0], res[1]);
	}
	close(cmd[0]);
	close(res[1]);
	t_assert_eq(read(res[0], &expires, sizeof(expires)), sizeof(expires));

	q = cc_connect_lib(d.sock, "second");
	t_ok(cc_pin(q, hash_of(0), 0, 0, 0, &o));
	t_assert_eq(o.pins, 1);
	if (now_ns() + 100000000ull < expires) {
		session_of(&adm, p, &si);
		t_assert_eq(si.pins, 3);
		t_assert_eq(si.pin_quota, 3);
		t_assert_eq(si.pinned_bytes, 3 * BLOCK_BYTES);
		expect_status(&adm, 4, 3); /* block 0 twice */
	} else {
		printf("note: the TTL passed before the first check\n");
	}

	/* the TTL passes; P makes no call */
	while (now_ns() <= expires)
		usleep(5000);
	for (int i = 0; i < 200; i++) {
		session_of(&adm, p, &si);
		if (si.pins == 2) {
			t_gone = now_ns();
			break;
		}
		usleep(5000);
	}
	t_assert_eq(si.pins, 2);
	printf("TTL record gone %.1f ms after its expiry\n",
	       (t_gone - expires) / 1e6);
	t_assert_eq(si.pinned_bytes, 2 * BLOCK_BYTES);
	expect_status(&adm, 3, 2);
	/* its quota has room again */
	t_assert_eq(write(cmd[1], "p", 1), 1);
	t_assert_eq(read(res[0], &n, sizeof(n)), sizeof(n));
	t_assert_eq(n, 3);
	expect_status(&adm, 4, 3);
	snprintf(out, sizeof(out), "\"pid\":%d,", (int)p);
	kvmmctl_shows(d.sock, out,
		      "\"pins\":3,\"pin_quota\":3,\"pinned_bytes\":786432,",
		      " pinner ", " 3/3       786432\n");
	t_assert_eq(td_kvmmctl(d.sock, "status --json", out, sizeof(out)), 0);
	if (!strstr(out, "\"pins\":4,\"pinned_bytes\":786432"))
		t_fail("status --json: %s", out);
	t_assert_eq(td_kvmmctl(d.sock, "status", out, sizeof(out)), 0);
	if (!strstr(out, "pins         4 records, 786432 bytes"))
		t_fail("status: %s", out);

	/* P dies: its records go, Q's pin on block 0 stays */
	kill(p, SIGKILL);
	t_assert_eq(cc_wait_child(p), 128 + SIGKILL);
	for (int i = 0; i < 300; i++) {
		struct kvmm_status_reply st;

		status(&adm, &st);
		if (st.pins == 1)
			break;
		usleep(10000);
	}
	expect_status(&adm, 1, 1);

	/* a priority-only record goes with its block */
	t_ok(cc_pin(q, hash_of(2),
		    KVMM_PIN_F_PRIORITY | KVMM_PIN_F_PRIORITY_ONLY, 0, 100,
		    &o));
	t_assert_eq(o.pins, 2);
	expect_status(&adm, 2, 2);
	cc_connect(&b, d.sock);
	cc_region(&b);
	seq = cc_seq_open(&b);
	/* 16 pages free, 28 wanted: blocks 1, 2 and 3 are dropped, 0 is
	 * pinned */
	cc_extend(&b, seq, 7 * CC_TPB, ids);
	t_assert_eq(cc_overlap(ids, 7 * CC_PPB, pub, CC_PPB), 0);
	t_assert_eq(cc_overlap(ids, 7 * CC_PPB, pub + 2 * CC_PPB, CC_PPB),
		    CC_PPB);
	expect_status(&adm, 1, 1);
	kvmmctl_shows(d.sock, "\"name\":\"second\"",
		      "\"pins\":1,\"pin_quota\":3,\"pinned_bytes\":262144,",
		      " second ", " 1/3       262144\n");
	t_assert_eq(kvmm_block_unpin(q, hash_of(2)), -ENOENT);
	/* the pinned block is still there, byte for byte */
	{
		struct kvmm_prefix_open_reply rep;
		uint32_t got[NB * CC_PPB];

		cc_prefix(&b, h, NB, &rep, got);
		t_assert_eq(rep.nr_blocks, 1);
		t_assert_eq(rep.from_gpu, 1);
		cc_check(&b, got, 1, 77);
		cc_seq_close(&b, rep.seq_id, got, CC_PPB);
	}
	t_ok(kvmm_block_unpin(q, hash_of(0)));
	expect_status(&adm, 0, 0);
	cc_seq_close(&b, seq, ids, 7 * CC_PPB);
	cc_disconnect(&b);
	kvmm_disconnect(q);
	cc_disconnect(&adm);
	close(cmd[1]);
	close(res[0]);
	td_stop_ok(&d);
	return T_PASS;
}
