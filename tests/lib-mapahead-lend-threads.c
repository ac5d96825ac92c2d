// SPDX-License-Identifier: MIT
/*
 * Lending while other threads extend (tests/lib/lend_threads.h): four
 * threads grow a sequence each to 8 blocks, 32 to 256 tokens at a time,
 * three times over, against a quota of exactly 32 blocks with 2 blocks mapped
 * ahead of each sequence.  Every extend succeeds (on main some failed
 * -EDQUOT for blocks mapped ahead of the other threads' sequences), every
 * token keeps its bytes, and kvmmd holds nothing at the end.
 * Run it under `make SANITIZE=1 check T=lib-mapahead-lend-threads` too;
 * tests/lib-tsan-lend.sh runs the same threads under ThreadSanitizer.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "tests/lib/daemon.h"
#include "tests/lib/lend_threads.h"
#include "tests/lib/test.h"

int main(void)
{
	char quota[64];
	const char *qargs[] = { "--quota", quota, NULL };
	struct kvmm_stats st;
	struct td_daemon d;
	struct kvmm_conn *c;
	struct kvmm_region *r;

	/* 4 threads of 8 blocks of 4 pages of 64 KiB */
	snprintf(quota, sizeof(quota), "%u=8M", (unsigned)getuid());
	td_start_ok(&d, qargs);
	ld_connect(2, &c, &r);
	lt_run(c, r);
	st = ld_stats(c);
	printf("%llu extends, %llu waited, %llu lent to (%llu blocks), "
	       "%llu map-ahead backoffs, %llu blocks mapped ahead\n",
	       (unsigned long long)st.extends,
	       (unsigned long long)st.extend_waits,
	       (unsigned long long)st.extends_lent,
	       (unsigned long long)st.blocks_lent,
	       (unsigned long long)st.map_ahead_backoffs,
	       (unsigned long long)st.map_ahead_blocks);
	t_assert_eq(st.extends, lt_extends());
	/* the slower threads' last blocks come from the grown ones' */
	t_assert(st.extends_lent >= LT_ROUNDS);
	kvmm_disconnect(c);
	t_ok(td_wait_idle(&d, 5000, NULL));
	td_stop_ok(&d);
	return 0;
}
