// SPDX-License-Identifier: MIT
/*
 * Client death at random moments: many times in a row, a client process
 * connects, creates a region, opens sequences and grows them as fast as
 * it can, and is SIGKILLed after a random delay (sometimes before it even
 * connected, sometimes mid-command, always with pages mapped once it got
 * going).  Meanwhile another client holds pages and keeps its data.
 * Afterwards the daemon's accounting equals that survivor's pages exactly,
 * and once the survivor leaves, the idle baseline (nothing allocated,
 * mapped or quarantined).
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"
#include "tests/lib/wait.h"

#define ROUNDS 40

static struct kvmm_region_opts ro = {
	.size = sizeof(ro),
	.layers = 2,
	.kv_heads = 2,
	.head_dim = 64,
	.dtype_bytes = 2,
	.max_seqs = 8,
	.max_tokens = 4096,
};

static void victim(void)
{
	struct kvmm_connect_opts co = { .size = sizeof(co), .name = "victim" };
	struct kvmm_conn *c;
	struct kvmm_region *r;
	uint32_t s[4];

	if (kvmm_connect(&co, &c) || kvmm_region_create(c, &ro, &r))
		_exit(1);
	for (int i = 0; i < 4; i++)
		if (kvmm_seq_open(r, &s[i]))
			_exit(2);
	for (;;) {
		for (int i = 0; i < 4; i++) {
			int64_t len = kvmm_seq_len(r, s[i]);

			if (len >= 4000) {
				kvmm_seq_close(r, s[i]);
				kvmm_seq_open(r, &s[i]);
				continue;
			}
			kvmm_step_begin(c);
			kvmm_seq_extend(r, s[i], len + 77);
			memset((void *)kvmm_seq_k_ptr(r, s[i], 1), i, len + 77);
			kvmm_step_end(c);
		}
	}
}

static int survivor(int rd)
{
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.name = "survivor" };
	struct kvmm_conn *c;
	struct kvmm_region *r;
	uint32_t s;
	char go;

	if (kvmm_connect(&co, &c) || kvmm_region_create(c, &ro, &r) ||
	    kvmm_seq_open(r, &s) || kvmm_seq_extend(r, s, 1000))
		return 1;
	memset((void *)kvmm_seq_v_ptr(r, s, 0), 0x5a, 1000 * 256);
	if (read(rd, &go, 1) != 1)
		return 2;
	for (int i = 0; i < 1000 * 256; i++)
		if (((uint8_t *)kvmm_seq_v_ptr(r, s, 0))[i] != 0x5a)
			return 3;
	kvmm_disconnect(c);
	return 0;
}

int main(void)
{
	struct td_daemon d;
	struct kvmm_status_reply st, held;
	int pfd[2], status, err;
	pid_t sp;

	srand(time(NULL));
	err = td_start(&d, NULL);
	if (err)
		t_fail("daemon: %s", strerror(-err));
	t_ok(pipe(pfd));
	sp = fork();
	if (sp == 0)
		_exit(survivor(pfd[0]));
	/* The survivor's pages: 1000 tokens = 4 blocks (+1 ahead) of 4. */
	t_wait_until(
		20000, t_ok(td_status(&d, &held)),
		held.pages_allocated == 20 && held.pages_mapped == 20,
		"the survivor's 20 pages not allocated and mapped (%llu, %llu)",
		(unsigned long long)held.pages_allocated,
		(unsigned long long)held.pages_mapped);

	for (int round = 0; round < ROUNDS; round++) {
		pid_t v = fork();

		t_assert(v >= 0);
		if (v == 0)
			victim();
		usleep(rand() % 25000);
		kill(v, SIGKILL);
		t_assert_eq(waitpid(v, &status, 0), v);
		t_assert(WIFSIGNALED(status));
	}
	/* Everything the victims held comes back (a deadline of time: the
	 * log is dumped if it does not) */
	for (unsigned long long end = t_now_ms() + 20000;;) {
		t_ok(td_status(&d, &st));
		if (st.pages_allocated == 20 && st.pages_mapped == 20 &&
		    !st.pages_quarantined && st.sessions == 2)
			break;
		if (t_now_ms() > end)
			break;
		usleep(10000);
	}
	if (st.pages_allocated != 20 || st.pages_mapped != 20 ||
	    st.sessions != 2 || st.pages_quarantined) {
		td_dump_log(&d);
		t_fail("after kills, not back within 20 s: allocated %llu mapped %llu quarantined %llu sessions %llu",
		       (unsigned long long)st.pages_allocated,
		       (unsigned long long)st.pages_mapped,
		       (unsigned long long)st.pages_quarantined,
		       (unsigned long long)st.sessions);
	}
	t_assert(st.sessions_total >= ROUNDS / 2);
	t_assert_eq(write(pfd[1], "g", 1), 1);
	t_assert_eq(waitpid(sp, &status, 0), sp);
	t_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	err = td_wait_idle(&d, 3000, &st);
	if (err) {
		td_dump_log(&d);
		t_fail("not idle");
	}
	t_assert_eq(td_stop(&d), 0);
	return 0;
}
