// SPDX-License-Identifier: MIT
/*
 * Revocation handshake, both outcomes.
 *
 * A cooperative client: the admin revokes blocks 2.. of its sequence; its
 * poll fd becomes readable and kvmm_process_revocations() gives them back.
 * Then it keeps stepping and the admin revokes blocks 1..: it unmaps at the
 * next step boundary.  Each time it acknowledges; the daemon's pages go
 * REVOKING -> FREE, the sequence's length is clamped to the first revoked
 * block, block 0's data is intact, and growing again gets fresh pages.
 *
 * A silent client never steps: after --revoke-timeout it is cut off (and
 * the daemon says so in its log); its pages stay quarantined while its
 * process lives and come back when it is killed.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "kvmm/lib/client.h"
#include "tests/lib/admin_revoke.h"
#include "tests/lib/daemon.h"
#include "tests/lib/small_region.h"
#include "tests/lib/test.h"

struct ids {
	uint32_t session, region, seq;
};

static int setup(const char *name, struct kvmm_conn **c, struct kvmm_region **r,
		 uint32_t *s, int wr)
{
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.name = name,
					.map_ahead_set = 1 };
	struct kvmm_stats ks = { .size = sizeof(ks) };
	struct ids ids;

	if (kvmm_connect(&co, c) ||
	    kvmm_region_create(*c, &tr_small_region, r) ||
	    kvmm_seq_open(*r, s) || kvmm_seq_extend(*r, *s, 3 * TR_TPB) ||
	    kvmm_get_stats(*c, &ks))
		return -1;
	for (uint32_t l = 0; l < 2; l++)
		memset((void *)kvmm_seq_k_ptr(*r, *s, l), 0x40 + l,
		       3 * TR_TPB * 256);
	ids.session = ks.session_id;
	ids.region = (*r)->id;
	ids.seq = *s;
	return write(wr, &ids, sizeof(ids)) == sizeof(ids) ? 0 : -1;
}

static int cooperative(int wr, int rd)
{
	struct kvmm_conn *c;
	struct kvmm_region *r;
	struct kvmm_stats ks = { .size = sizeof(ks) };
	struct pollfd p;
	uint32_t s;
	char go;

	if (setup("coop", &c, &r, &s, wr))
		return 1;
	/* Phase 1: no steps; the poll fd says a revocation is waiting. */
	p = (struct pollfd){ .fd = kvmm_poll_fd(c), .events = POLLIN };
	if (poll(&p, 1, 5000) != 1 || !(p.revents & POLLIN))
		return 4;
	if (kvmm_process_revocations(c) != 4)
		return 9;
	if (kvmm_seq_len(r, s) != 2 * TR_TPB)
		return 10;
	/* Phase 2: keep stepping; the next one is applied at a boundary. */
	for (;;) {
		struct pollfd q = { .fd = rd, .events = POLLIN };

		if (poll(&q, 1, 2) > 0)
			break;
		if (kvmm_step_begin(c) || kvmm_step_end(c))
			return 2;
	}
	if (read(rd, &go, 1) != 1)
		return 3;
	if (kvmm_seq_len(r, s) != TR_TPB)
		return 5;
	if (kvmm_get_stats(c, &ks) || ks.pages_revoked != 8)
		return 6;
	for (uint32_t l = 0; l < 2; l++)
		for (int i = 0; i < TR_TPB * 256; i++)
			if (((uint8_t *)kvmm_seq_k_ptr(r, s, l))[i] != 0x40 + l)
				return 7;
	/* Grow again: fresh pages for blocks 1 and 2. */
	if (kvmm_seq_extend(r, s, 3 * TR_TPB))
		return 8;
	memset((void *)(kvmm_seq_v_ptr(r, s, 1) + TR_TPB * 256), 1,
	       2 * TR_TPB * 256);
	kvmm_disconnect(c);
	return 0;
}

static int silent(int wr)
{
	struct kvmm_conn *c;
	struct kvmm_region *r;
	uint32_t s;

	if (setup("silent", &c, &r, &s, wr))
		return 1;
	for (;;)
		pause();
}

static void admin_revoke(struct td_daemon *d, struct ids *ids, uint32_t first,
			 int expect)
{
	t_assert_eq(ar_revoke(d->sock, ids->session, ids->region, ids->seq,
			      first),
		    expect);
}

static void read_ids(int fd, struct ids *ids)
{
	t_assert_eq(read(fd, ids, sizeof(*ids)), sizeof(*ids));
}

int main(void)
{
	const char *args[] = { "--revoke-timeout", "1000", NULL };
	struct td_daemon d;
	struct kvmm_status_reply st;
	struct ids ids;
	int up[2], down[2], status, err;
	pid_t p;
	char line[256];
	bool logged = false;
	FILE *f;

	err = td_start(&d, args);
	if (err)
		t_fail("daemon: %s", strerror(-err));

	/* Cooperative client. */
	t_ok(pipe(up));
	t_ok(pipe(down));
	p = fork();
	if (p == 0)
		_exit(cooperative(up[1], down[0]));
	read_ids(up[0], &ids);
	t_ok(td_status(&d, &st));
	t_assert_eq(st.pages_allocated, 12); /* 3 blocks of 4 pages */
	for (uint32_t round = 1; round <= 2; round++) {
		/* Blocks 2.. (answered via the poll fd), then 1.. (at a
		 * step boundary). */
		admin_revoke(&d, &ids, 3 - round, 0);
		for (int i = 0; i < 400; i++) {
			t_ok(td_status(&d, &st));
			if (st.revocations_acked == round)
				break;
			usleep(5000);
		}
		t_assert_eq(st.revocations_posted, round);
		t_assert_eq(st.revocations_acked, round);
		t_assert_eq(st.pages_allocated, 12 - 4 * round);
		t_assert_eq(st.pages_mapped, 12 - 4 * round);
		t_assert_eq(st.pages_revoking, 0);
	}
	/* A third revoke of the same blocks finds nothing to take. */
	admin_revoke(&d, &ids, 1, -ENODATA);
	t_assert_eq(write(down[1], "g", 1), 1);
	t_assert_eq(waitpid(p, &status, 0), p);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		t_fail("cooperative client failed: %d", WEXITSTATUS(status));
	t_ok(td_wait_idle(&d, 2000, &st));

	/* Silent client. */
	p = fork();
	if (p == 0)
		_exit(silent(up[1]));
	read_ids(up[0], &ids);
	admin_revoke(&d, &ids, 1, 0);
	t_ok(td_status(&d, &st));
	t_assert_eq(st.pages_revoking, 8);
	t_assert_eq(st.pages_allocated, 12);
	/* Not before the timeout... */
	usleep(100 * 1000);
	t_ok(td_status(&d, &st));
	t_assert_eq(st.sessions_cut_off, 0);
	/* ...but soon after it (a loaded machine may fire the timer late). */
	for (int i = 0; i < 500; i++) {
		t_ok(td_status(&d, &st));
		if (st.revocations_timed_out)
			break;
		usleep(10000);
	}
	t_assert_eq(st.revocations_timed_out, 1);
	t_assert_eq(st.sessions_cut_off, 1);
	t_assert_eq(st.sessions, 1);
	t_assert_eq(st.sequences, 0);
	/* Its process still maps the pages: quarantined, not reused. */
	t_assert_eq(st.pages_quarantined, 12);
	t_assert_eq(st.pages_mapped, 12);
	kill(p, SIGKILL);
	waitpid(p, &status, 0);
	err = td_wait_idle(&d, 2000, &st);
	if (err) {
		td_dump_log(&d);
		t_fail("not idle after the silent client died");
	}
	f = fopen(d.log, "r");
	t_assert(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "not acknowledged within 1000 ms"))
			logged = true;
	fclose(f);
	t_assert(logged);
	t_assert_eq(td_stop(&d), 0);
	return 0;
}
