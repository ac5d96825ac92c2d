// SPDX-License-Identifier: MIT
/*
 * Built with -fsanitize=thread by tests/lib-tsan-lend.sh, with libkvmm's
 * sources: tests/lib/lend_threads.h's threads (each extend that finds the
 * quota held by the blocks mapped ahead of the others takes them back
 * while the others' ring extends and the map-ahead thread run) against
 * the kvmmd of $KVMM_SOCKET, whose quota is 32 blocks of 4 pages of
 * 64 KiB.  Exit 0, or 1 with a reason (and ThreadSanitizer's own exit
 * status when it reported a race).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kvmm/kvmm.h"
#include "tests/lib/lend_threads.h"

int main(void)
{
	struct kvmm_conn *c;
	struct kvmm_region *r;
	struct kvmm_stats st;

	ld_connect(2, &c, &r);
	lt_run(c, r);
	st = ld_stats(c);
	printf("%llu extends, %llu lent to (%llu blocks)\n",
	       (unsigned long long)st.extends,
	       (unsigned long long)st.extends_lent,
	       (unsigned long long)st.blocks_lent);
	t_assert_eq(st.extends, lt_extends());
	t_assert(st.extends_lent >= 1);
	kvmm_disconnect(c);
	return 0;
}
