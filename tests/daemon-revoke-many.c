// SPDX-License-Identifier: MIT
/*
 * More revocations than one kvmm_process_revocations() call applies (64
 * requests): the poll fd stays readable for the rest.  A real kvmmd; a
 * libkvmm client process opens 70 sequences of one block each; the admin
 * revokes each of them (70 requests, 4 pages each).  The client's poll fd
 * is readable; the first call gives back 64 x 4 pages, and the fd is
 * readable again at once for the last 6 (before, the call had cleared the
 * eventfd and a client asleep on it slept until the revocation timeout
 * cut it off).  Every request is acknowledged and nobody is cut off.
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "kvmm/lib/client.h"
#include "tests/lib/admin_revoke.h"
#include "tests/lib/daemon.h"
#include "tests/lib/small_region.h"
#include "tests/lib/test.h"

#define NSEQ 70

static bool readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

/* The client: tells the parent its ids, waits for "go", then reports the
 * pages of each kvmm_process_revocations() call. */
static int client(const char *sock, int wr, int rd)
{
	struct kvmm_connect_opts co = { .size = sizeof(co), .name = "many" };
	/* the small region, with NSEQ sequences of one block (4 pages) */
	struct kvmm_region_opts region = tr_small_region;
	struct kvmm_stats ks = { .size = sizeof(ks) };
	struct kvmm_conn *c;
	struct kvmm_region *r;
	uint32_t ids[2], s;
	int got[3];
	char go;

	co.socket_path = sock;
	region.max_seqs = NSEQ;
	region.max_tokens = TR_TPB;
	if (kvmm_connect(&co, &c) || kvmm_region_create(c, &region, &r) ||
	    kvmm_get_stats(c, &ks))
		return 1;
	for (int i = 0; i < NSEQ; i++)
		if (kvmm_seq_open(r, &s) || s != (uint32_t)i ||
		    kvmm_seq_extend(r, s, 256))
			return 2;
	ids[0] = ks.session_id;
	ids[1] = r->id;
	if (write(wr, ids, sizeof(ids)) != sizeof(ids) || read(rd, &go, 1) != 1)
		return 3;
	got[0] = readable(kvmm_poll_fd(c), 5000) ? kvmm_process_revocations(c) :
						   -1000;
	/* the rest at once, not after the revocation timeout */
	got[1] = readable(kvmm_poll_fd(c), 0) ? kvmm_process_revocations(c) :
						-1000;
	got[2] = readable(kvmm_poll_fd(c), 0);
	if (write(wr, got, sizeof(got)) != sizeof(got) || read(rd, &go, 1) != 1)
		return 4;
	kvmm_disconnect(c);
	return 0;
}

int main(void)
{
	const char *args[] = { "--revoke-timeout", "60000", NULL };
	struct td_daemon d;
	struct kvmm_status_reply st;
	struct kvmm_conn *admin;
	int up[2], down[2], got[3], status;
	uint32_t ids[2];
	pid_t pid;

	t_ok(td_start(&d, args));
	t_ok(pipe(up));
	t_ok(pipe(down));
	pid = fork();
	if (pid == 0)
		_exit(client(d.sock, up[1], down[0]));
	t_assert_eq(read(up[0], ids, sizeof(ids)), sizeof(ids));
	t_ok(kc_connect_admin(d.sock, &admin));
	for (uint32_t i = 0; i < NSEQ; i++)
		t_ok(ar_revoke_on(admin, ids[0], ids[1], i, 0));
	t_assert_eq(write(down[1], "g", 1), 1);
	t_assert_eq(read(up[0], got, sizeof(got)), sizeof(got));
	t_assert_eq(got[0], 64 * 4);
	t_assert_eq(got[1], (NSEQ - 64) * 4);
	t_assert_eq(got[2], 0); /* nothing left, nothing signalled */
	/* the acknowledgements went over the ring: a NOP of the admin after
	 * the client's calls returned finds them counted */
	for (int i = 0; i < 1000; i++) {
		t_ok(td_status(&d, &st));
		if (st.revocations_acked == NSEQ)
			break;
		usleep(1000);
	}
	t_assert_eq(st.revocations_posted, NSEQ);
	t_assert_eq(st.revocations_acked, NSEQ);
	t_assert_eq(st.sessions_cut_off, 0);
	t_assert_eq(st.pages_revoking, 0);
	t_assert_eq(write(down[1], "g", 1), 1);
	t_assert_eq(waitpid(pid, &status, 0), pid);
	t_assert_eq(WEXITSTATUS(status), 0);
	kvmm_disconnect(admin);
	t_ok(td_stop(&d));
	printf("ok\n");
	return 0;
}
