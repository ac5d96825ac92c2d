// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * Quarantine does not need pidfds.  kvmmd runs with pidfd_open failing
 * (tests/shims/nopidfd.so: ENOSYS, as on a kernel before 5.3 or under a
 * seccomp profile).  A process maps 2 blocks and hangs up without BYE
 * while it lives on: its 2 * CC_PPB pages stay quarantined, and a new
 * session's 2 blocks are none of them (they used to go back to the pool
 * at once, so the new session read and wrote pages the live process
 * still mapped).  Once the process exits they come back within the
 * polling period (KD_ZOMBIE_POLL_MS, 200 ms; 2 s allowed).
 */
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/cache-common.h"
#include "tests/lib/daemon.h"
#include "tests/lib/nopidfd.h"
#include "tests/lib/test.h"

#define NPAGES (2 * CC_PPB)

int main(void)
{
	static uint32_t ids[CC_MAX_PAGES], ids2[CC_MAX_PAGES];
	struct td_daemon d;
	struct cc c;
	uint64_t t0, ms;
	uint32_t seq;
	int p[2];
	pid_t pid;

	td_start_nopidfd(&d, NULL);
	t_ok(pipe(p));
	pid = fork();
	t_assert(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		cc_connect(&c, d.sock);
		cc_region(&c);
		seq = cc_seq_open(&c);
		cc_extend(&c, seq, 2 * CC_TPB, ids);
		close(c.sock); /* no BYE: the pages stay mapped here */
		if (write(p[1], ids, sizeof(*ids) * NPAGES) < 0)
			_exit(1);
		pause();
		_exit(0);
	}
	close(p[1]);
	t_assert_eq(read(p[0], ids, sizeof(*ids) * NPAGES),
		    (ssize_t)(sizeof(*ids) * NPAGES));
	cc_wait_quarantined(&d, NPAGES);

	/* still quarantined after several polls: the process lives */
	usleep(600 * 1000);
	cc_wait_quarantined(&d, NPAGES);
	cc_connect(&c, d.sock);
	cc_region(&c);
	seq = cc_seq_open(&c);
	cc_extend(&c, seq, 2 * CC_TPB, ids2);
	for (int i = 0; i < NPAGES; i++)
		for (int j = 0; j < NPAGES; j++)
			if (ids2[i] == ids[j])
				t_fail("new session got page %u, which live pid %d maps",
				       ids2[i], (int)pid);
	cc_seq_close(&c, seq, ids2, NPAGES);
	cc_disconnect(&c);

	t_ok(kill(pid, SIGKILL));
	t_assert_eq(waitpid(pid, NULL, 0), pid);
	t0 = cc_now_ms();
	cc_wait_quarantined(&d, 0);
	ms = cc_now_ms() - t0;
	printf("pages back %llu ms after the process exited\n",
	       (unsigned long long)ms);
	t_assert(ms < 2000);
	cc_stop(&d);
	return 0;
}
