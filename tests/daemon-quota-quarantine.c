// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * Quarantined pages count against their uid's quota until the process
 * that maps them exits.  With --quota UID=1M (16 pages, 4 blocks of 4) and
 * a pool of 128 pages, a process maps 4 blocks and drops its connection
 * without BYE while it lives on: the 16 pages are quarantined and a new
 * session of the uid gets -EDQUOT for a single block (the quota used to
 * get them back at once, so a live process that reconnected took the
 * whole pool, 16 pages a round).  Once the process exits, nothing is
 * quarantined and exactly the quota is free again: 4 blocks fit, a 5th
 * is -EDQUOT.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/cache-common.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

#define QUOTA_BLOCKS 4

int main(void)
{
	static uint32_t ids[CC_MAX_PAGES];
	char quota[64];
	const char *args[] = { "--quota", quota, "--gpu-mem", "8M", NULL };
	int ready[2], go[2];
	struct td_daemon d;
	struct cc c;
	uint32_t seq;
	char b = 0;
	pid_t p;

	snprintf(quota, sizeof(quota), "%u=1M", (unsigned)getuid());
	cc_start(&d, args);
	t_ok(pipe(ready));
	t_ok(pipe(go));
	p = fork();
	t_assert(p >= 0);
	if (p == 0) {
		/* maps its quota's worth, hangs up without BYE, lives on */
		cc_connect(&c, d.sock);
		cc_region(&c);
		seq = cc_seq_open(&c);
		cc_extend(&c, seq, QUOTA_BLOCKS * CC_TPB, ids);
		t_assert_eq(cc_try_extend(&c, seq, (QUOTA_BLOCKS + 1) * CC_TPB,
					  ids),
			    -EDQUOT);
		close(c.sock);
		t_assert_eq(write(ready[1], &b, 1), 1);
		t_assert_eq(read(go[0], &b, 1), 1);
		_exit(0);
	}
	t_assert_eq(read(ready[0], &b, 1), 1);
	cc_wait_quarantined(&d, QUOTA_BLOCKS * CC_PPB);

	cc_connect(&c, d.sock);
	cc_region(&c);
	seq = cc_seq_open(&c);
	t_assert_eq(cc_try_extend(&c, seq, CC_TPB, ids), -EDQUOT);

	/* the process exits: its pages and their charge go */
	t_assert_eq(write(go[1], &b, 1), 1);
	t_assert_eq(cc_wait_child(p), 0);
	cc_wait_quarantined(&d, 0);
	cc_extend(&c, seq, QUOTA_BLOCKS * CC_TPB, ids);
	t_assert_eq(cc_try_extend(&c, seq, (QUOTA_BLOCKS + 1) * CC_TPB, ids),
		    -EDQUOT);
	cc_disconnect(&c);
	t_ok(td_wait_idle(&d, 5000, NULL));
	cc_stop(&d);
	return 0;
}
