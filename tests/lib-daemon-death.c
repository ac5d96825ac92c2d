// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * What an engine sees when kvmmd dies under it (kvmm.h, "kvmmd dies or
 * restarts"; Documentation/lifecycle.md).  An engine maps 2 blocks and
 * writes them; kvmmd is SIGKILLed.  Every call that talks to kvmmd, on
 * the ring or the socket, returns -ECONNRESET, over and over; the
 * mapped pages stay mapped with the bytes written; calls answered from
 * the library's own state (length, pointers, page ids) still answer;
 * kvmm_disconnect() returns; a new kvmmd serves a new connection.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "tests/cache-common.h"
#include "tests/lib/daemon.h"

int main(void)
{
	struct kvmm_region_opts ro = cc_region_opts();
	struct kvmm_stats st = { .size = sizeof(st) };
	struct kvmm_connect_opts co = { .size = sizeof(co) };
	uint32_t ids[CC_PPB], seq, s2;
	struct kvmm_region *r, *r2;
	struct kvmm_conn *c;
	struct td_daemon d;
	unsigned char *k;

	cc_start(&d, NULL);
	co.socket_path = d.sock;
	t_ok(kvmm_connect(&co, &c)); /* map-ahead on, as by default */
	t_ok(kvmm_region_create(c, &ro, &r));
	t_ok(kvmm_seq_open(r, &seq));
	t_ok(kvmm_seq_extend(r, seq, 2 * CC_TPB));
	k = (unsigned char *)(uintptr_t)kvmm_seq_k_ptr(r, seq, 0);
	memset(k, 0x3c, 2 * CC_PAGE);

	td_kill(&d);

	for (int i = 0; i < 2; i++) {
		t_assert_eq(kvmm_nop(c, 0), -ECONNRESET);
		t_assert_eq(kvmm_nop(c, 1), -ECONNRESET);
		t_assert_eq(kvmm_step_begin(c), -ECONNRESET);
		t_assert_eq(kvmm_seq_extend(r, seq, 2 * CC_TPB + 1),
			    -ECONNRESET); /* within the mapped: the ring */
		t_assert_eq(kvmm_seq_extend(r, seq, ro.max_tokens),
			    -ECONNRESET); /* past it: the socket */
		t_assert_eq(kvmm_get_stats(c, &st), -ECONNRESET);
		t_assert_eq(kvmm_seq_open(r, &s2), -ECONNRESET);
		t_assert_eq(kvmm_region_create(c, &ro, &r2), -ECONNRESET);
	}
	t_assert_eq(kvmm_seq_len(r, seq), 2 * CC_TPB);
	t_assert_eq(kvmm_seq_block_pages(r, seq, 1, ids, CC_PPB), CC_PPB);
	for (size_t i = 0; i < 2 * CC_PAGE; i++)
		if (k[i] != 0x3c)
			t_fail("byte %zu is %#x after kvmmd died", i, k[i]);
	kvmm_disconnect(c);

	/* a new kvmmd: connect again */
	td_stop(&d);
	cc_start(&d, NULL);
	co.socket_path = d.sock;
	t_ok(kvmm_connect(&co, &c));
	t_ok(kvmm_nop(c, 0));
	kvmm_disconnect(c);
	cc_stop(&d);
	printf("after kvmmd died: every call -ECONNRESET, 2 blocks still mapped and intact; a new kvmmd serves a new connection\n");
	return 0;
}
